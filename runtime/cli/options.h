/* runtime/cli/options.h — the option tables of the sluice commands.
 *
 * Every command describes its options in tables of cli_opt rows; the same rows drive the parser
 * (names and aliases), --help, "did you mean" for a mistyped option, the bash and zsh completion
 * scripts and the man page (`sluice help --man`, `sluice help --completion bash|zsh`), so the four
 * cannot drift apart. */
#ifndef SL_CLI_OPTIONS_H
#define SL_CLI_OPTIONS_H

#include <stdbool.h>
#include <stdio.h>

typedef struct cli_opt {
    int id;               /* the command's own option number; 0 with names NULL: a section title */
    const char *names;    /* "-c|--ctx|--ctx-size": the first two are shown, the rest are aliases */
    const char *arg;      /* the value's name ("N", "FILE"), NULL for a flag */
    const char *help;     /* one or more lines separated by '\n' (section rows: the title) */
} cli_opt;

/* A command: name, one-line summary, usage line, and its tables (NULL-terminated list, each table
 * ends with a row whose names and help are both NULL). */
typedef struct cli_cmd {
    const char *name, *summary, *usage;
    const cli_opt *const *tables;
    const char *epilog;   /* text after the options (may be NULL) */
} cli_cmd;

/* -h/--help and --version, in every command's table list. */
enum { CLI_OPT_HELP = 998, CLI_OPT_VERSION = 999 };
extern const cli_opt cli_meta_table[];
/* Row op is --help or --version: print what it asks for and return true. */
bool cli_meta(const cli_cmd *cmd, const cli_opt *op);
void cli_print_version(FILE *f);   /* runtime/cli/main.c */

/* The row naming `arg` exactly (any of its names), or NULL. */
const cli_opt *cli_find(const cli_opt *const *tables, const char *arg);
/* Print "unknown option" with a hint: a llama.cpp flag sluice answers differently, or the closest
 * name ("did you mean --ctx-size?"). */
void cli_unknown(const cli_cmd *cmd, const char *arg);
/* --help text of a command. */
void cli_usage(const cli_cmd *cmd, FILE *f);

/* All commands, for help, completion and the man page (runtime/cli/main.c). */
extern const cli_cmd *const cli_commands[];
/* Closest of names[0..n) to s (edit distance <= 2 or a prefix), or NULL. */
const char *cli_closest(const char *s, const char *const *names, int n);
/* sluice help --man / --completion bash|zsh. */
void cli_print_man(FILE *f);
bool cli_print_completion(FILE *f, const char *shell);

#endif
