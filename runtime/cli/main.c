/* runtime/cli/main.c — `sluice COMMAND [options]`: the command table, --version, help, man page and
 * shell completion. */
#include <stdio.h>
#include <string.h>
#include <zstd.h>

#include "include/sluice.h"
#include "kernels/gemm.h"
#include "kernels/simd.h"
#include "runtime/cli/cli.h"
#include "runtime/cli/options.h"

#ifndef SL_GIT_COMMIT
#define SL_GIT_COMMIT "unknown"
#endif
#ifndef SL_URING_VERSION
#define SL_URING_VERSION "unknown"
#endif

extern const cli_cmd cli_cmd_run, cli_cmd_chat, cli_cmd_inspect, cli_cmd_tokenize, cli_cmd_plan, cli_cmd_bench,
    cli_cmd_serve;

const cli_cmd *const cli_commands[] = { &cli_cmd_run, &cli_cmd_chat, &cli_cmd_serve, &cli_cmd_bench, &cli_cmd_plan,
                                        &cli_cmd_inspect, &cli_cmd_tokenize, NULL };

typedef int (*cmd_fn)(int argc, char **argv);
static const cmd_fn cmd_fns[] = { cmd_run, cmd_chat, cmd_serve, cmd_bench, cmd_plan, cmd_inspect, cmd_tokenize };

static void usage(FILE *f)
{
    fprintf(f, "usage: sluice COMMAND [options]\n       sluice -m MODEL -p PROMPT [options]   (the same as sluice run)\n\n"
               "commands:\n");
    for (int i = 0; cli_commands[i]; i++) fprintf(f, "  %-9s %s\n", cli_commands[i]->name, cli_commands[i]->summary);
    fprintf(f, "  help      this text; help --man: the man page; help --completion bash|zsh: a completion script\n\n"
               "`sluice COMMAND --help` lists a command's options.  With no -m, the bundled stories260K model is\n"
               "used.  --version prints the version, commit, kernel path and library versions.\n");
}

void cli_print_version(FILE *f)
{
    fprintf(f, "sluice %s (commit %s)\nkernels: %s (chosen for this CPU)\nprefill GEMM: %s\nliburing %s, zstd %s\n",
            sluice_version(), SL_GIT_COMMIT, sl_kpath_name(sl_kernels_path()), sl_gemm_name(), SL_URING_VERSION,
            ZSTD_versionString());
}

static int cmd_help(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "--man")) { cli_print_man(stdout); return 0; }
    if (argc >= 2 && !strcmp(argv[1], "--completion")) {
        if (cli_print_completion(stdout, argc >= 3 ? argv[2] : NULL)) return 0;
        cli_err("help --completion: give bash or zsh");
        return 2;
    }
    for (int i = 0; argc >= 2 && cli_commands[i]; i++)
        if (!strcmp(argv[1], cli_commands[i]->name)) { cli_usage(cli_commands[i], stdout); return 0; }
    usage(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    cli_std_fds();
    if (argc < 2) { usage(stderr); return 2; }
    char err[256];
    if (sluice_debug_env(err, sizeof err)) { cli_err("%s", err); return 1; }
    const char *c = argv[1];
    if (!strcmp(c, "-h") || !strcmp(c, "--help") || !strcmp(c, "help")) return cmd_help(argc - 1, argv + 1);
    if (!strcmp(c, "--version") || !strcmp(c, "-v")) { cli_print_version(stdout); return 0; }
    for (int i = 0; cli_commands[i]; i++)
        if (!strcmp(c, cli_commands[i]->name)) return cmd_fns[i](argc - 1, argv + 1);
    /* llama.cpp habit: `sluice -m M -p hi` (options, no command) means run */
    if (c[0] == '-' && cli_find(cli_cmd_run.tables, c)) return cmd_run(argc, argv);
    const char *names[8];
    int n = 0;
    for (int i = 0; cli_commands[i]; i++) names[n++] = cli_commands[i]->name;
    const char *near = cli_closest(c, names, n);
    if (near) cli_err("unknown command '%s'; did you mean %s? (sluice --help lists the commands)", c, near);
    else cli_err("unknown command '%s' (sluice --help lists the commands)", c);
    return 2;
}
