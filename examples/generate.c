/* examples/generate.c — the smallest useful program on the sluice library: load a model under a RAM
 * budget, print the plan, and stream a greedy continuation of a prompt to stdout.
 *
 *   generate [-m MODEL] [-b BUDGET_MIB] [-n TOKENS] [PROMPT]
 *
 * Build against an installed sluice with the Makefile next to this file (pkg-config), e.g.
 *   PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig make -C examples && examples/generate "Once upon a time"
 * Without -m it uses the model installed with the library ($datadir/stories260K.gguf).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice.h>

#ifndef SLUICE_DATADIR
#define SLUICE_DATADIR "/usr/local/share/sluice"
#endif

/* Called for each generated token with the text it completes (whole UTF-8 characters). */
static int print_token(void *user, int32_t token, const char *text, size_t len)
{
    (void)user;
    (void)token;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0;   /* non-zero would stop generation */
}

int main(int argc, char **argv)
{
    const char *model = SLUICE_DATADIR "/stories260K.gguf", *prompt = "Once upon a time";
    long budget_mib = 0, n_predict = 48;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "-b") && i + 1 < argc) budget_mib = atol(argv[++i]);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) n_predict = atol(argv[++i]);
        else prompt = argv[i];
    }

    char err[256];
    sluice_params p;
    sluice_params_default(&p);
    p.ram_budget = (uint64_t)budget_mib << 20;   /* 0: what the machine has available */
    p.n_threads = 1;

    sluice_model *m = NULL;
    if (sluice_open(model, &p, &m, err, sizeof err)) {
        fprintf(stderr, "generate: %s\n", err);
        return 1;
    }
    sluice_plan_info plan;
    sluice_model_get_plan(m, &plan);
    fprintf(stderr, "generate: sluice %s, %s: %d of %d blocks resident, %.1f MiB streamed per token\n",
            sluice_version(), plan.all_resident ? "resident" : "streaming", plan.n_layers_resident, plan.n_layers,
            plan.stream_bytes_per_token / 1048576.0);

    sluice_ctx *c = NULL;
    sluice_sampler *s = NULL;
    int32_t *ids = NULL;
    int status = 1;
    if (sluice_ctx_new(m, &c, err, sizeof err)) { fprintf(stderr, "generate: %s\n", err); goto out; }

    /* tokenize (first call counts), then evaluate the prompt */
    int n = sluice_tokenize(m, prompt, -1, SLUICE_TOK_ADD_SPECIAL, NULL, 0);
    if (n <= 0 || !(ids = malloc((size_t)n * sizeof *ids))) { fprintf(stderr, "generate: cannot tokenize\n"); goto out; }
    sluice_tokenize(m, prompt, -1, SLUICE_TOK_ADD_SPECIAL, ids, n);
    if (sluice_eval(c, ids, n)) { fprintf(stderr, "generate: %s\n", sluice_ctx_error(c)); goto out; }

    sluice_sampler_params sp;
    sluice_sampler_params_default(&sp);
    sp.temp = 0;   /* greedy: the same text every time */
    s = sluice_sampler_new(m, &sp);
    if (!s) { fprintf(stderr, "generate: out of memory\n"); goto out; }

    fputs(prompt, stdout);
    int got = sluice_generate(c, s, (int)n_predict, print_token, NULL);
    fputc('\n', stdout);
    if (got < 0) { fprintf(stderr, "generate: %s\n", sluice_ctx_error(c)); goto out; }

    sluice_stats st;
    sluice_get_stats(m, c, &st);
    fprintf(stderr, "generate: %d tokens, %d positions in the context, peak RSS %.1f MiB\n", got, st.n_past,
            st.peak_rss / 1048576.0);
    status = 0;
out:
    free(ids);
    sluice_sampler_free(s);
    sluice_ctx_free(c);
    sluice_close(m);
    return status;
}
