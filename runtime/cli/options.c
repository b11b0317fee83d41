/* runtime/cli/options.c — option lookup, --help, "did you mean", man page and shell completion,
 * all from the tables of runtime/cli/options.h. */
#include "runtime/cli/options.h"

#include <string.h>

#include "include/sluice.h"
#include "runtime/cli/cli.h"

const cli_opt cli_meta_table[] = {
    { CLI_OPT_HELP, "-h|--help", NULL, "this help" },
    { CLI_OPT_VERSION, "--version", NULL, "the version, commit, kernel path and library versions" },
    { 0, NULL, NULL, NULL },
};

bool cli_meta(const cli_cmd *cmd, const cli_opt *op)
{
    if (op->id == CLI_OPT_HELP) { cli_usage(cmd, stdout); return true; }
    if (op->id == CLI_OPT_VERSION) { cli_print_version(stdout); return true; }
    return false;
}

/* Calls fn(name, len, user) for every name of row o; stops early when fn returns true. */
static bool each_name(const cli_opt *o, bool (*fn)(const char *, size_t, void *), void *user)
{
    for (const char *p = o->names; p && *p;) {
        size_t n = strcspn(p, "|");
        if (fn(p, n, user)) return true;
        p += n;
        if (*p == '|') p++;
    }
    return false;
}

static bool name_is(const char *name, size_t n, void *user)
{
    const char *arg = user;
    return strlen(arg) == n && !strncmp(arg, name, n);
}

const cli_opt *cli_find(const cli_opt *const *tables, const char *arg)
{
    for (; *tables; tables++)
        for (const cli_opt *o = *tables; o->names || o->help; o++)
            if (o->names && each_name(o, name_is, (void *)arg)) return o;
    return NULL;
}

/* Levenshtein distance of a and b[0..bn), capped at 9. */
static int distance(const char *a, const char *b, size_t bn)
{
    size_t an = strlen(a);
    if (an > 40 || bn > 40) return 9;
    int row[42];
    for (size_t j = 0; j <= bn; j++) row[j] = (int)j;
    for (size_t i = 1; i <= an; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= bn; j++) {
            int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[bn] > 9 ? 9 : row[bn];
}

typedef struct closest { const char *arg; int best; char name[48]; } closest;

static bool consider(const char *name, size_t n, void *user)
{
    closest *c = user;
    size_t al = strlen(c->arg);
    int d = distance(c->arg, name, n);
    /* a prefix of a long name ("--temperature" for "--temp") counts as close */
    if (al >= 4 && ((al < n && !strncmp(name, c->arg, al)) || (n < al && !strncmp(c->arg, name, n) && n >= 4)))
        d = d < 2 ? d : 2;
    if (d < c->best && n < sizeof c->name) {
        c->best = d;
        memcpy(c->name, name, n);
        c->name[n] = 0;
    }
    return false;
}

const char *cli_closest(const char *s, const char *const *names, int n)
{
    closest c = { s, 3, "" };
    static char out[48];
    for (int i = 0; i < n; i++) consider(names[i], strlen(names[i]), &c);
    if (!*c.name) return NULL;
    memcpy(out, c.name, sizeof out);
    return out;
}

/* llama.cpp flags whose job sluice does another way. */
static const struct { const char *flag, *hint; } known_elsewhere[] = {
    { "-ngl", "sluice runs on the CPU and has no GPU layers; --ram-budget SIZE decides what stays in memory "
              "(see sluice plan --budgets)" },
    { "--gpu-layers", "sluice runs on the CPU; --ram-budget SIZE decides what stays in memory" },
    { "--n-gpu-layers", "sluice runs on the CPU; --ram-budget SIZE decides what stays in memory" },
    { "--mlock", "what the plan keeps resident stays in memory; --ram-budget SIZE sets how much that is" },
    { "--no-mmap", "choose how weights are read with --io pread|mmap|uring (default uring)" },
    { "--mmap", "choose how weights are read with --io pread|mmap|uring (default uring)" },
    { "-fa", "attention needs no flag in sluice" },
    { "--flash-attn", "attention needs no flag in sluice" },
};

void cli_unknown(const cli_cmd *cmd, const char *arg)
{
    if (arg[0] != '-') {
        cli_err("%s: unexpected argument '%s'%s (see sluice %s --help)", cmd->name, arg,
                !strcmp(cmd->name, "run") ? "; the prompt goes after -p" : "", cmd->name);
        return;
    }
    for (size_t i = 0; i < sizeof known_elsewhere / sizeof *known_elsewhere; i++)
        if (!strcmp(arg, known_elsewhere[i].flag)) {
            cli_err("%s: %s is not a sluice option: %s", cmd->name, arg, known_elsewhere[i].hint);
            return;
        }
    closest c = { arg, 3, "" };
    for (const cli_opt *const *t = cmd->tables; *t; t++)
        for (const cli_opt *o = *t; o->names || o->help; o++)
            if (o->names) each_name(o, consider, &c);
    if (*c.name) cli_err("%s: unknown option '%s'; did you mean %s? (see sluice %s --help)", cmd->name, arg, c.name,
                         cmd->name);
    else cli_err("%s: unknown option '%s' (see sluice %s --help)", cmd->name, arg, cmd->name);
}

/* "-c, --ctx N" for row o: the first short and the first long name, then the value. */
static void spell(const cli_opt *o, char *buf, size_t len)
{
    char shrt[16] = "", lng[40] = "";
    for (const char *p = o->names; *p;) {
        size_t n = strcspn(p, "|");
        bool is_long = n > 2 && p[1] == '-';
        char *dst = is_long ? lng : shrt;
        size_t cap = is_long ? sizeof lng : sizeof shrt;
        if (!*dst && n < cap) { memcpy(dst, p, n); dst[n] = 0; }
        p += n;
        if (*p == '|') p++;
    }
    snprintf(buf, len, "%s%s%s%s%s", *shrt ? shrt : "   ", *shrt && *lng ? ", " : *shrt ? "" : " ", lng,
             o->arg ? " " : "", o->arg ? o->arg : "");
}

/* The aliases of row o past its first short and long names, ", "-separated ("" when none). */
static void aliases(const cli_opt *o, char *buf, size_t len)
{
    bool seen_short = false, seen_long = false;
    size_t at = 0;
    buf[0] = 0;
    for (const char *p = o->names; *p;) {
        size_t n = strcspn(p, "|");
        bool is_long = n > 2 && p[1] == '-';
        bool *seen = is_long ? &seen_long : &seen_short;
        if (*seen && at + n + 3 < len) {
            at += (size_t)snprintf(buf + at, len - at, "%s%.*s", at ? ", " : "", (int)n, p);
        }
        *seen = true;
        p += n;
        if (*p == '|') p++;
    }
}

void cli_usage(const cli_cmd *cmd, FILE *f)
{
    fprintf(f, "usage: %s\n", cmd->usage);
    for (const cli_opt *const *t = cmd->tables; *t; t++)
        for (const cli_opt *o = *t; o->names || o->help; o++) {
            if (!o->names) { fprintf(f, "%s:\n", o->help); continue; }
            char sp[80], al[80];
            spell(o, sp, sizeof sp);
            aliases(o, al, sizeof al);
            const char *h = o->help;
            size_t n = strcspn(h, "\n");
            if (strlen(sp) > 23) fprintf(f, "  %s\n  %-24s", sp, "");
            else fprintf(f, "  %-24s", sp);
            for (;;) {   /* the aliases follow the last line of the help */
                bool last = !h[n];
                fprintf(f, "%.*s%s%s%s\n", (int)n, h, last && *al ? " (also " : "", last ? al : "", last && *al ? ")" : "");
                if (last) break;
                h += n + 1;
                n = strcspn(h, "\n");
                fprintf(f, "  %-24s", "");
            }
        }
    if (cmd->epilog) fputs(cmd->epilog, f);
}

/* ---- man page ---------------------------------------------------------------------------------- */

/* Text with troff's special characters escaped (backslash, leading dot or quote, hyphens). */
static void roff(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n && s[i]; i++) {
        if (s[i] == '\\') fputs("\\e", f);
        else if (s[i] == '-') fputs("\\-", f);
        else if ((s[i] == '.' || s[i] == '\'') && (i == 0 || s[i - 1] == '\n')) fputs("\\&.", f);
        else fputc(s[i], f);
    }
}

static void man_options(FILE *f, const cli_cmd *c)
{
    for (const cli_opt *const *t = c->tables; *t; t++)
        for (const cli_opt *o = *t; o->names || o->help; o++) {
            if (!o->names) {
                fputs(".PP\n\\fI", f);
                roff(f, o->help, strlen(o->help));
                fputs("\\fR\n", f);
                continue;
            }
            fputs(".TP\n\\fB", f);
            for (const char *p = o->names; *p;) {
                size_t n = strcspn(p, "|");
                roff(f, p, n);
                p += n;
                if (*p == '|') { fputs("\\fR, \\fB", f); p++; }
            }
            fputs("\\fR", f);
            if (o->arg) { fputs(" \\fI", f); roff(f, o->arg, strlen(o->arg)); fputs("\\fR", f); }
            fputc('\n', f);
            for (const char *h = o->help; *h;) {
                size_t n = strcspn(h, "\n");
                while (n && *h == ' ') { h++; n--; }
                roff(f, h, n);
                fputc('\n', f);
                h += n;
                if (*h == '\n') h++;
            }
        }
}

void cli_print_man(FILE *f)
{
    fputs(".TH SLUICE 1 \"\" \"sluice " SLUICE_VERSION "\" \"User Commands\"\n"
          ".SH NAME\nsluice \\- run GGUF language models larger than RAM under a memory budget\n"
          ".SH SYNOPSIS\n\\fBsluice\\fR \\fICOMMAND\\fR [\\fIoptions\\fR]\n.br\n"
          "\\fBsluice\\fR \\fB\\-m\\fR \\fIMODEL\\fR \\fB\\-p\\fR \\fIPROMPT\\fR [\\fIoptions\\fR] (the same as \\fBsluice run\\fR)\n"
          ".SH DESCRIPTION\nsluice streams the weights that do not fit in \\fB\\-\\-ram\\-budget\\fR from disk as "
          "the forward pass reaches them.  This page is generated from the option tables of the program "
          "(the same ones that print \\fB\\-\\-help\\fR).\n", f);
    for (const cli_cmd *const *c = cli_commands; *c; c++) {
        fputs(".SH \"", f);
        roff(f, (*c)->name, strlen((*c)->name));
        fputs("\"\n", f);
        roff(f, (*c)->summary, strlen((*c)->summary));
        fputs(".\n.PP\n\\fB", f);
        roff(f, (*c)->usage, strlen((*c)->usage));
        fputs("\\fR\n", f);
        man_options(f, *c);
    }
    fputs(".SH FILES\n\\fI~/.cache/sluice\\fR: measured disk and compute rates.  "
          "\\fI$XDG_STATE_HOME/sluice/chat_history\\fR (default \\fI~/.local/state\\fR): the chat's line history.\n"
          ".SH \"SEE ALSO\"\nThe project's README and docs/ (planner.md, streaming.md, sessions.md, benchmarks.md).\n", f);
}

/* ---- completion -------------------------------------------------------------------------------- */

static bool print_word(const char *name, size_t n, void *user)
{
    fprintf(user, " %.*s", (int)n, name);
    return false;
}

static void all_names(FILE *f, const cli_cmd *c)
{
    for (const cli_opt *const *t = c->tables; *t; t++)
        for (const cli_opt *o = *t; o->names || o->help; o++)
            if (o->names) each_name(o, print_word, f);
}

bool cli_print_completion(FILE *f, const char *shell)
{
    bool zsh = shell && !strcmp(shell, "zsh");
    if (!shell || (!zsh && strcmp(shell, "bash"))) return false;
    if (zsh) fputs("#compdef sluice\n# zsh completion for sluice (generated by `sluice help --completion zsh`)\n"
                   "autoload -U bashcompinit && bashcompinit\n", f);
    else fputs("# bash completion for sluice (generated by `sluice help --completion bash`)\n", f);
    fputs("_sluice() {\n  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\" cmd=\"\" w\n"
          "  for w in \"${COMP_WORDS[@]:1:COMP_CWORD-1}\"; do case \"$w\" in -*) ;; *) cmd=\"$w\"; break;; esac; done\n"
          "  case \"$prev\" in\n    -m|--model|-f|--file|--session|--stats-json|--moe-trace|--kv-spill-dir|--vocab)\n"
          "      COMPREPLY=( $(compgen -f -- \"$cur\") ); return;;\n"
          "    --io) COMPREPLY=( $(compgen -W \"pread mmap uring\" -- \"$cur\") ); return;;\n"
          "    --kv) COMPREPLY=( $(compgen -W \"f16 f32 q8_0\" -- \"$cur\") ); return;;\n"
          "    -o|--output) COMPREPLY=( $(compgen -W \"md csv json\" -- \"$cur\") ); return;;\n  esac\n"
          "  local opts\n  case \"$cmd\" in\n", f);
    for (const cli_cmd *const *c = cli_commands; *c; c++) {
        fprintf(f, "    %s) opts=\"", (*c)->name);
        all_names(f, *c);
        fputs("\";;\n", f);
    }
    fputs("    *) opts=\"", f);
    for (const cli_cmd *const *c = cli_commands; *c; c++) fprintf(f, " %s", (*c)->name);
    fputs(" --help --version\"; COMPREPLY=( $(compgen -W \"$opts\" -- \"$cur\") ); return;;\n  esac\n"
          "  if [[ \"$cur\" == -* ]]; then COMPREPLY=( $(compgen -W \"$opts\" -- \"$cur\") );\n"
          "  else COMPREPLY=( $(compgen -f -- \"$cur\") ); fi\n}\ncomplete -F _sluice sluice\n", f);
    return true;
}
