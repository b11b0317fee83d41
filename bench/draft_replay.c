/* bench/draft_replay.c — n-gram drafting and the adaptive draft length, replayed without a model.
 *
 * Usage: draft_replay TRUTH PROMPT_LEN LOOKUP T1 T_TOK [K_MAX]
 *   TRUTH   token ids (whitespace-separated): the prompt, then the model's greedy continuation
 *   LOOKUP  token ids of the lookup text ("-": none)
 *   T1      seconds of a pass with no drafts; T_TOK: seconds each drafted token adds
 *
 * Greedy speculative decoding is exact, so a drafted token is kept exactly when it equals the next
 * token of the greedy continuation: given that continuation, which drafts a pass keeps needs no
 * model.  The replay runs the production drafter (sl_draft_ngram) and length choice
 * (sl_draft_choose_k, fed the cost model's pass times) over the continuation, and each fixed
 * length beside it, and prints passes, tokens per pass and tokens per second under the cost model
 * t(k) = T1 + k * T_TOK.  It measures the policy, not the machine: a real run adds the disk's and
 * the load's noise (bench/spec_bench.sh runs the model), and a 32-token run's ratios hang on one or
 * two passes, which is why longer continuations replay here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/engine/draft.h"

#define MAX_TOKENS 65536

static int read_ids(const char *path, int32_t *ids, int cap)
{
    if (!strcmp(path, "-")) return 0;
    FILE *f = fopen(path, "r");
    if (!f) { perror(path); exit(2); }
    int n = 0;
    long v;
    while (n < cap && fscanf(f, " %ld", &v) == 1) {
        ids[n++] = (int32_t)v;
        int c = fgetc(f);   /* separators: whitespace, commas, brackets */
        while (c == ',' || c == '[' || c == ']') c = fgetc(f);
        if (c != EOF) ungetc(c, f);
    }
    fclose(f);
    return n;
}

typedef struct result { int passes; double secs; } result;

/* The continuation truth[n_prompt..n) decoded with drafts: k_fixed >= 0 drafts that many, -1 the
 * adaptive length up to k_max.  The prompt's pass yields the first token. */
static result replay(const int32_t *truth, int n, int n_prompt, const int32_t *look, int n_look, double t1,
                     double t_tok, int k_fixed, int k_max)
{
    sl_draft_stats st;
    sl_draft_stats_init(&st);
    result r = { 1, t1 };
    int32_t drafts[64];
    for (int pos = n_prompt + 1; pos < n;) {   /* truth[0..pos) is known */
        int k = k_fixed >= 0 ? k_fixed : sl_draft_choose_k(&st, &st, k_max, true, (uint64_t)r.passes);
        if (k > n - pos - 1) k = n - pos - 1;
        if (k > 64) k = 64;
        int nd = k > 0 ? sl_draft_ngram(truth, pos, look, n_look, k, drafts) : 0, kept = 0;
        while (kept < nd && drafts[kept] == truth[pos + kept]) kept++;
        double secs = t1 + nd * t_tok;
        sl_draft_stats_update(&st, nd + 1, secs, nd, kept);
        r.passes++;
        r.secs += secs;
        pos += kept + 1;   /* the kept drafts and the pass's own token */
    }
    return r;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: draft_replay TRUTH PROMPT_LEN LOOKUP T1 T_TOK [K_MAX]\n");
        return 2;
    }
    static int32_t truth[MAX_TOKENS], look[MAX_TOKENS];
    int n = read_ids(argv[1], truth, MAX_TOKENS), n_prompt = atoi(argv[2]);
    int n_look = read_ids(argv[3], look, MAX_TOKENS);
    double t1 = atof(argv[4]), t_tok = atof(argv[5]);
    int k_max = argc > 6 ? atoi(argv[6]) : 8;
    if (n_prompt < 1 || n_prompt >= n || !(t1 > 0) || !(t_tok >= 0) || k_max < 1 || k_max > 64) {
        fprintf(stderr, "draft_replay: needs 1 <= PROMPT_LEN < the %d truth tokens, T1 > 0, T_TOK >= 0, 1 <= K_MAX <= 64\n", n);
        return 2;
    }
    const int gen = n - n_prompt;
    printf("%d tokens after a %d-token prompt, lookup %d tokens, t(k) = %.3f + k * %.3f s\n", gen, n_prompt, n_look,
           t1, t_tok);
    printf("draft length     passes  tokens/pass  tok/s\n");
    double best = 0;
    int best_k = 0;
    for (int k = -1; k <= k_max; k++) {
        result r = replay(truth, n, n_prompt, look, n_look, t1, t_tok, k, k_max);
        double rate = gen / r.secs;
        if (k >= 0 && rate > best) { best = rate; best_k = k; }
        if (k < 0) printf("adaptive (max %d) %6d  %11.2f  %.3f\n", k_max, r.passes, (double)gen / r.passes, rate);
        else printf("fixed %-10d %6d  %11.2f  %.3f\n", k, r.passes, (double)gen / r.passes, rate);
    }
    result a = replay(truth, n, n_prompt, look, n_look, t1, t_tok, -1, k_max);
    printf("adaptive / best fixed (k %d): %.3f\n", best_k, gen / a.secs / best);
    return 0;
}
