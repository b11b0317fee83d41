/* runtime/cli/main.c — `sluice COMMAND [options]`. */
#include <stdio.h>
#include <string.h>

#include "include/sluice.h"
#include "runtime/cli/cli.h"

int cmd_chat(int argc, char **argv);   /* runtime/cli/chat.c */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sluice COMMAND [options]\n"
            "\n"
            "commands:\n"
            "  run       generate text from a prompt          (sluice run -p \"Once upon a time\")\n"
            "  chat      talk with a chat model (streamed answers, conversation kept in the KV cache)\n"
            "  inspect   show a model's hyperparameters, tensors and sizes\n"
            "  tokenize  print the token ids of a text\n"
            "  plan      show what stays resident and what streams under --ram-budget\n"
            "\n"
            "`sluice COMMAND --help` lists a command's options.  With no -m, the bundled\n"
            "stories260K model is used.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) { usage(stderr); return 2; }
    char err[256];
    if (sluice_debug_env(err, sizeof err)) { cli_err("%s", err); return 1; }
    const char *c = argv[1];
    if (!strcmp(c, "-h") || !strcmp(c, "--help") || !strcmp(c, "help")) { usage(stdout); return 0; }
    if (!strcmp(c, "--version")) { printf("sluice 0.1.0\n"); return 0; }
    if (!strcmp(c, "run")) return cmd_run(argc - 1, argv + 1);
    if (!strcmp(c, "chat")) return cmd_chat(argc - 1, argv + 1);
    if (!strcmp(c, "inspect")) return cmd_inspect(argc - 1, argv + 1);
    if (!strcmp(c, "tokenize")) return cmd_tokenize(argc - 1, argv + 1);
    if (!strcmp(c, "plan")) return cmd_plan(argc - 1, argv + 1);
    cli_err("unknown command '%s' (try: sluice --help)", c);
    return 2;
}
