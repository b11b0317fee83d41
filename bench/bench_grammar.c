/* bench/bench_grammar.c — the cost of constrained decoding per generated token: one vocabulary
 * mask (runtime/text/grammar_vocab.c) per step, on a 128K vocabulary.
 *
 * Usage: bench_grammar [vocab.gguf] [schema.json] [answers]
 * Default: Llama 3's vocabulary (../shared/vocab), a tool-call-like schema (strings, integers,
 * numbers, enums, an array, anyOf), 20 answers.  Each answer is a walk from the grammar's start:
 * at every step the mask is computed (timed, thread CPU time) and one allowed token is drawn
 * uniformly (seeded), until the grammar is complete or 400 tokens; uniform draws make long
 * strings, so in-string steps (the dearest state: nearly every token allowed) are well represented.
 * Prints the trie build (once per model), then per-step mask times: median, p10/p90, max, and the
 * median by where the step was (in a string or not). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loader/gguf.h"
#include "runtime/text/grammar_internal.h"
#include "runtime/text/tokenizer.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rs = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void)
{
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return rs;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p) { return n ? v[(int)(p * (n - 1))] : 0; }

static const char *default_schema =
    "{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"search\"},\"arguments\":{\"type\":\"object\","
    "\"properties\":{\"query\":{\"type\":\"string\",\"maxLength\":60},\"limit\":{\"type\":\"integer\",\"minimum\":1,"
    "\"maximum\":50},\"lang\":{\"enum\":[\"en\",\"de\",\"fr\"]}},\"required\":[\"query\"]}},\"required\":[\"name\","
    "\"arguments\"]},{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"plot\"},\"arguments\":{\"type\":\"object\","
    "\"properties\":{\"xs\":{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"maxItems\":8},\"title\":{\"type\":"
    "\"string\",\"maxLength\":40}},\"required\":[\"xs\"]}},\"required\":[\"name\",\"arguments\"]}]}";

int main(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: bench_grammar [VOCAB.gguf] [SCHEMA.json] [ANSWERS]\n  the grammar mask's cost per token "
               "(default: Llama 3's vocabulary, a tool-call schema, 20 answers)\n");
        return 0;
    }
    /* ../shared next to the source tree: bench targets get no compile definitions, but __FILE__ is
     * the absolute path CMake compiled */
    char def[4096];
    const char *cut = strstr(__FILE__, "bench/bench_grammar.c");
    snprintf(def, sizeof def, "%.*s../shared/vocab/ggml-vocab-llama-bpe.rebuilt.gguf", cut ? (int)(cut - __FILE__) : 0, __FILE__);
    const char *vpath = argc > 1 ? argv[1] : def;
    char *schema = (char *)default_schema;
    if (argc > 2) {
        FILE *f = fopen(argv[2], "rb");
        if (!f) { perror(argv[2]); return 1; }
        schema = calloc(1, 1 << 20);
        if (!schema || fread(schema, 1, (1 << 20) - 1, f) == 0) { fprintf(stderr, "cannot read %s\n", argv[2]); return 1; }
        fclose(f);
    }
    int answers = argc > 3 ? atoi(argv[3]) : 20;
    char err[256];
    sl_gguf *g;
    sl_vocab *v;
    if (sl_gguf_open(vpath, &g, err, sizeof err) || sl_vocab_load(g, &v, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", vpath, err);
        return 1;
    }
    double t0 = now();
    sl_gvocab *gv;
    if (sl_gvocab_build(v, &gv)) { fprintf(stderr, "out of memory\n"); return 1; }
    double t_build = now() - t0;
    sl_grammar *gr;
    if (sl_grammar_compile(schema, strlen(schema), NULL, NULL, &gr, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
    const int nv = sl_vocab_n_tokens(v), cap = answers * 400;
    uint8_t *allowed = malloc((size_t)nv);
    double *all = malloc((size_t)cap * sizeof *all), *in_str = malloc((size_t)cap * sizeof *all),
           *other = malloc((size_t)cap * sizeof *all);
    int n_all = 0, n_str = 0, n_other = 0, complete = 0;
    sl_gstate *s = sl_gstate_new(gr);
    for (int a = 0; a < answers; a++) {
        sl_gstate_reset(s);
        for (int step = 0; step < 400; step++) {
            int64_t room;
            bool str = g_state_string_room(s, &room);
            double t = now();
            int n = sl_grammar_mask(gv, s, allowed);
            t = now() - t;
            all[n_all++] = t;
            if (str) in_str[n_str++] = t; else other[n_other++] = t;
            if (sl_gstate_complete(s)) { complete++; break; }
            if (n <= 0) { fprintf(stderr, "no token allowed at step %d\n", step); return 1; }
            int pick = (int)(rnd() % (uint64_t)n);
            for (int32_t id = 0; id < nv; id++)
                if (allowed[id] && pick-- == 0) { sl_gstate_accept_token(s, gv, id); break; }
        }
    }
    qsort(all, (size_t)n_all, sizeof *all, cmp_d);
    qsort(in_str, (size_t)n_str, sizeof *all, cmp_d);
    qsort(other, (size_t)n_other, sizeof *all, cmp_d);
    printf("vocabulary: %s (%d tokens); trie build %.0f ms, %.1f MiB (once per model)\n", vpath, nv, t_build * 1e3,
           sl_gvocab_mem_bytes(gv) / 1048576.0);
    printf("%d answers (%d complete), %d mask steps: median %.3f ms, p10 %.3f, p90 %.3f, max %.3f ms per token\n",
           answers, complete, n_all, pct(all, n_all, .5) * 1e3, pct(all, n_all, .1) * 1e3, pct(all, n_all, .9) * 1e3,
           n_all ? all[n_all - 1] * 1e3 : 0);
    printf("  in a string: %d steps, median %.3f ms, p90 %.3f; elsewhere: %d steps, median %.3f ms, p90 %.3f\n", n_str,
           pct(in_str, n_str, .5) * 1e3, pct(in_str, n_str, .9) * 1e3, n_other, pct(other, n_other, .5) * 1e3,
           pct(other, n_other, .9) * 1e3);
    sl_gstate_free(s);
    sl_grammar_free(gr);
    sl_gvocab_free(gv);
    sl_vocab_free(v);
    sl_gguf_close(g);
    free(allowed);
    free(all);
    free(in_str);
    free(other);
    if (schema != default_schema) free(schema);
    return 0;
}
