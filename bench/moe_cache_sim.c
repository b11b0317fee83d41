/* bench/moe_cache_sim.c — expert-cache policies replayed on routing traces, without a model.
 *
 * Usage:
 *   moe_cache_sim [--experts E] TRACE...       replay `sluice run --moe-trace` files
 *   moe_cache_sim --synthetic L E K T [P1 P8]  a generated trace: L blocks, E experts, K per token, T
 *                                              tokens, routed with locality (below)
 *
 * A trace line is "pass block position e1 .. ek" (runtime/engine/moe.c).  The lines of one pass and
 * block are a batch: as in runtime/engine/expert_cache.c, the batch asks for each expert it took
 * once, a hit costs nothing, a miss reads the expert and takes an entry that no expert of the same
 * batch holds (or is read through when there is none).  The hit rate is hits / experts asked for;
 * with one token per pass (decoding) that is per token and block.
 *
 * Policies: LRU, LFU with decay (a count per expert of every ask for it, cached or not, halved every
 * E*blocks asks; an entry goes to a new expert only if that one is asked for at least as often), LRU with
 * a quota per block (entries split evenly over the blocks), and Belady's optimum (evict the expert
 * asked for furthest in the future: an upper bound no online policy reaches), and what the engine
 * runs: LFU-decay while the cache holds fewer than one token's experts (blocks x k), else LRU.  Sizes
 * are shares of all experts (blocks x E).
 *
 * Synthetic traces: random-weight models route almost independently from token to token, unlike
 * trained ones; published measurements of Qwen3-30B-A3B say 45% of a token's experts were also taken
 * by the previous token and 80% by one of the previous 8.  The generator draws each of a token's k
 * experts from the previous token's set with probability P1, from the sets of tokens 2..8 back with
 * probability P8, else from a skewed popularity (Zipf s = 0.8 over a random order per block), and
 * prints the reuse it actually produced next to the targets.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

typedef struct ask { int pass, block, n; int *experts; } ask;   /* one batch's distinct experts */

typedef struct trace {
    ask *a;
    int n, cap, blocks, experts;
    int k;          /* experts per token (a trace line's count) */
} trace;

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q) { fprintf(stderr, "moe_cache_sim: out of memory\n"); exit(1); }
    return q;
}

/* Append expert e to the batch (pass, block), opening a new batch when either changes. */
static void add(trace *t, int pass, int block, int e)
{
    ask *last = t->n ? &t->a[t->n - 1] : NULL;
    if (!last || last->pass != pass || last->block != block) {
        if (t->n == t->cap) { t->cap = t->cap ? 2 * t->cap : 1024; t->a = xrealloc(t->a, (size_t)t->cap * sizeof *t->a); }
        last = &t->a[t->n++];
        *last = (ask){ pass, block, 0, NULL };
    }
    for (int i = 0; i < last->n; i++) if (last->experts[i] == e) return;
    last->experts = xrealloc(last->experts, (size_t)(last->n + 1) * sizeof(int));
    last->experts[last->n++] = e;
    if (block + 1 > t->blocks) t->blocks = block + 1;
    if (e + 1 > t->experts) t->experts = e + 1;
}

static void read_trace(trace *t, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) { perror(path); exit(2); }
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        char *p = line, *end;
        long v[3];
        for (int i = 0; i < 3; i++) { v[i] = strtol(p, &end, 10); if (end == p) goto bad; p = end; }
        int k = 0;
        for (long e; (e = strtol(p, &end, 10)), end != p; p = end, k++) add(t, (int)v[0], (int)v[1], (int)e);
        if (k > t->k) t->k = k;
        continue;
    bad:
        fprintf(stderr, "%s: not a trace line: %s", path, line);
        exit(2);
    }
    fclose(f);
}

/* ---- synthetic traces ---------------------------------------------------------------------------- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static void synthesize(trace *t, int L, int E, int K, int T, double p1, double p8)
{
    int *hist = calloc((size_t)L * 9 * K, sizeof *hist);   /* the last 9 tokens' choices per block */
    int *order = malloc((size_t)L * E * sizeof *order);
    double *cdf = malloc((size_t)E * sizeof *cdf), z = 0;
    for (int i = 0; i < E; i++) cdf[i] = z += 1.0 / pow(i + 1, 0.8);
    for (int i = 0; i < E; i++) cdf[i] /= z;
    for (int l = 0; l < L; l++) {
        for (int i = 0; i < E; i++) order[l * E + i] = i;
        for (int i = E - 1; i > 0; i--) { int j = (int)(urand() * (i + 1)); int x = order[l * E + i]; order[l * E + i] = order[l * E + j]; order[l * E + j] = x; }
    }
    for (int tok = 0; tok < T; tok++)
        for (int l = 0; l < L; l++) {
            int *cur = hist + ((size_t)l * 9 + (size_t)(tok % 9)) * K;
            for (int j = 0; j < K; j++) {
                int e = -1;
                for (int tries = 0; e < 0 && tries < 64; tries++) {
                    double u = urand();
                    int back = u < p1 ? 1 : u < p1 + p8 ? 2 + (int)(urand() * 7) : 0;
                    if (back && tok >= back) e = hist[((size_t)l * 9 + (size_t)((tok - back) % 9)) * K + (int)(urand() * K)];
                    else if (!back) {
                        double r = urand();
                        int i = 0;
                        while (i < E - 1 && cdf[i] < r) i++;
                        e = order[l * E + i];
                    }
                    for (int i = 0; i < j && e >= 0; i++) if (cur[i] == e) e = -1;
                }
                for (int i = 0; e < 0; i++) {   /* give up on locality: the first expert not yet taken */
                    bool taken = false;
                    for (int m = 0; m < j; m++) taken |= cur[m] == i;
                    if (!taken) e = i;
                }
                cur[j] = e;
                add(t, tok, l, e);
            }
        }
    free(hist); free(order); free(cdf);
}

/* Reuse in a trace of single-token passes: the share of a token's experts (per block) that the
 * previous token took, and that one of the previous 8 took. */
static void reuse(const trace *t, double *r1, double *r8)
{
    long n = 0, h1 = 0, h8 = 0;
    for (int i = 0; i < t->n; i++) {
        const ask *a = &t->a[i];
        for (int x = 0; x < a->n; x++) {
            bool in1 = false, in8 = false;
            int back = 0;
            for (int j = i - 1; j >= 0 && back < 8; j--) {
                if (t->a[j].block != a->block) continue;
                back++;
                for (int y = 0; y < t->a[j].n; y++)
                    if (t->a[j].experts[y] == a->experts[x]) { in8 = true; in1 |= back == 1; }
            }
            n++; h1 += in1; h8 += in8;
        }
    }
    *r1 = n ? (double)h1 / n : 0;
    *r8 = n ? (double)h8 / n : 0;
}

/* ---- policies ------------------------------------------------------------------------------------- */

enum { LRU, LFU, QUOTA, OPT, ENGINE, N_POLICIES };
static const char *const names[N_POLICIES] = { "LRU", "LFU-decay", "LRU per block", "Belady (bound)",
                                               "**sluice** (LFU-decay below one token's experts, else LRU)" };

/* Next position (batch index) at which unit u is asked for after batch i: for Belady. */
static int *next_use;

static void build_next_use(const trace *t)
{
    int units = t->blocks * t->experts, total = 0;
    for (int i = 0; i < t->n; i++) total += t->a[i].n;
    next_use = malloc((size_t)total * sizeof *next_use);
    int *last = malloc((size_t)units * sizeof *last);
    for (int u = 0; u < units; u++) last[u] = INT32_MAX;
    int at = total;
    for (int i = t->n - 1; i >= 0; i--)
        for (int x = t->a[i].n - 1; x >= 0; x--) {
            int u = t->a[i].block * t->experts + t->a[i].experts[x];
            next_use[--at] = last[u];
            last[u] = i;
        }
    free(last);
}

/* Hit rate of policy p with `cap` entries. */
static double simulate(const trace *t, int p, int cap)
{
    if (p == ENGINE) p = cap < t->blocks * t->k ? LFU : LRU;   /* runtime/engine/expert_cache.c */
    const int units = t->blocks * t->experts;
    int *slot = malloc((size_t)units * sizeof *slot);      /* entry of a unit, -1 */
    unsigned *freq = calloc((size_t)units, sizeof *freq);  /* LFU: asks per unit, halved every `units` asks */
    int *unit = malloc((size_t)cap * sizeof *unit);        /* unit of an entry, -1 */
    double *key = malloc((size_t)cap * sizeof *key);       /* last use (LRU, LFU's ties); OPT: next use */
    int *batch = malloc((size_t)cap * sizeof *batch);
    for (int u = 0; u < units; u++) slot[u] = -1;
    for (int e = 0; e < cap; e++) { unit[e] = -1; key[e] = -1; batch[e] = -1; }
    long hits = 0, asked = 0, clock = 0, at = 0;
    for (int i = 0; i < t->n; i++) {
        const ask *a = &t->a[i];
        for (int x = 0; x < a->n; x++, at++) {
            int u = a->block * t->experts + a->experts[x];
            asked++;
            clock++;
            if (p == LFU) {   /* as the engine: the unit's frequency counts every ask, cached or not */
                if (clock % units == 0)
                    for (int v = 0; v < units; v++) freq[v] /= 2;
                freq[u]++;
            }
            int e = slot[u];
            if (e >= 0) {
                hits++;
                key[e] = p == OPT ? next_use[at] : clock;
                batch[e] = i;
                continue;
            }
            /* the victim: a free entry, else the policy's choice among entries this batch does not hold
             * (QUOTA: only among this block's share of the entries) */
            int lo = 0, hi = cap;
            if (p == QUOTA) { int per = cap / t->blocks; if (per < 1) per = 1; lo = a->block * per % cap; hi = lo + per > cap ? cap : lo + per; }
            int v = -1;
            for (int k = lo; k < hi; k++) {
                if (unit[k] < 0) { v = k; break; }
                if (batch[k] == i) continue;
                if (v < 0) { v = k; continue; }
                bool worse = p == OPT ? key[k] > key[v]
                           : p == LFU ? freq[unit[k]] < freq[unit[v]] || (freq[unit[k]] == freq[unit[v]] && key[k] < key[v])
                                      : key[k] < key[v];
                if (worse) v = k;
            }
            if (v < 0) continue;   /* read through */
            if (p == LFU && unit[v] >= 0 && freq[unit[v]] > freq[u]) continue;   /* keep the more frequent one */
            if (unit[v] >= 0) slot[unit[v]] = -1;
            unit[v] = u;
            slot[u] = v;
            key[v] = p == OPT ? next_use[at] : clock;
            batch[v] = i;
        }
    }
    free(slot); free(freq); free(unit); free(key); free(batch);
    return asked ? (double)hits / asked : 0;
}

int main(int argc, char **argv)
{
    trace t = { 0 };
    const char *what = "";
    if (argc >= 6 && !strcmp(argv[1], "--synthetic")) {
        int L = atoi(argv[2]), E = atoi(argv[3]), K = atoi(argv[4]), T = atoi(argv[5]);
        double p1 = argc > 6 ? atof(argv[6]) : 0.33, p8 = argc > 7 ? atof(argv[7]) : 0.36;
        if (L < 1 || E < 2 || K < 1 || K >= E || T < 1) { fprintf(stderr, "moe_cache_sim: bad --synthetic sizes\n"); return 2; }
        synthesize(&t, L, E, K, T, p1, p8);
        t.k = K;
        what = "synthetic";
        double r1, r8;
        reuse(&t, &r1, &r8);
        printf("synthetic trace: %d blocks x %d experts, %d per token, %d tokens, P1 %.2f P8 %.2f: reuse at distance 1 "
               "%.1f%%, within 8 %.1f%% (published Qwen3-30B-A3B: 45%%, 80%%)\n", L, E, K, T, p1, p8, 100 * r1, 100 * r8);
    } else if (argc >= 2 && argv[1][0] != '-') {
        for (int i = 1; i < argc; i++) read_trace(&t, argv[i]);
        what = argv[1];
        double r1, r8;
        reuse(&t, &r1, &r8);
        printf("trace %s: %d batches over %d blocks x %d experts; reuse at distance 1 %.1f%%, within 8 %.1f%% (batches "
               "as tokens)\n", what, t.n, t.blocks, t.experts, 100 * r1, 100 * r8);
    } else {
        fprintf(stderr, "usage: moe_cache_sim TRACE... | moe_cache_sim --synthetic BLOCKS EXPERTS K TOKENS [P1 P8]\n");
        return 2;
    }
    build_next_use(&t);
    static const int pct[] = { 5, 10, 20, 30, 40, 50, 60, 80 };
    const int units = t.blocks * t.experts, n_pct = sizeof pct / sizeof *pct;
    printf("\n| policy |");
    for (int s = 0; s < n_pct; s++) printf(" %d%% |", pct[s]);
    printf("\n|---|");
    for (int s = 0; s < n_pct; s++) printf("---:|");
    printf("\n");
    for (int p = 0; p < N_POLICIES; p++) {
        printf("| %s |", names[p]);
        for (int s = 0; s < n_pct; s++) {
            int cap = units * pct[s] / 100;
            printf(" %.1f |", cap > 0 ? 100 * simulate(&t, p, cap) : 0.0);
        }
        printf("\n");
    }
    printf("\n(hit rate %% of the experts asked for, by cache size as a share of the %d experts)\n", units);
    for (int i = 0; i < t.n; i++) free(t.a[i].experts);
    free(t.a);
    free(next_use);
    return 0;
}
