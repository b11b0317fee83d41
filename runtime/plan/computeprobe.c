/* runtime/plan/computeprobe.c — measure the decode kernels' rate once per path, mode, threads and type.
 *
 * What is timed is exactly what decode runs: sl_matmul with one vector over a Q4_K/Q6_K/... matrix
 * of 4096 columns (the activation is quantized per call, as in the forward pass), split over a
 * pool of n threads.  Before every timed pass the matrix is flushed from all cache levels, because
 * in a real token the weights come from DRAM: a model worth streaming is far bigger than the
 * last-level cache, and a streamed piece arrives by DMA.  The matrix is 64 MiB, not smaller: a
 * flushed 16 MiB matrix ran faster than the resident model decodes, a 64 MiB one at that rate
 * (page-table walks over the larger span are the likely difference, and a real token pays them;
 * the measurement is in docs/planner.md).  The figure kept is the median pass, so a pass that
 * another process preempted does not count more than its share.
 *
 * Results are cached per key (kernel path, exact mode, sanitizer/unoptimized build, threads, type)
 * next to the disk probe's, so a sanitizer test run cannot leave its slow figure for release runs.
 */
#include "runtime/plan/computeprobe.h"
#include "runtime/plan/probecache.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "kernels/ops.h"
#include "kernels/simd.h"
#include "kernels/threadpool.h"
#include "kernels/clock.h"
#include "kernels_id.h"   /* generated (cmake/kernels_id.cmake): SL_KERNELS_ID */

#define PROBE_COLS     4096       /* a llama-7/8B row; K-quant and Q8_0 blocks divide it */
#define PROBE_NS       80000000   /* ~0.08 s of timed passes per type (+ ~0.05 s to fill the matrix) */
#define PROBE_MIN_PASS 5
#define PROBE_MAX_PASS 512
#define POOL_ELEMS     32768      /* distinct random blocks the matrix is tiled from */

#if defined(__SANITIZE_ADDRESS__)
#define BUILD_FLAVOUR "-asan"
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BUILD_FLAVOUR "-asan"
#endif
#endif
#if !defined(BUILD_FLAVOUR) && !defined(__OPTIMIZE__)
#define BUILD_FLAVOUR "-O0"
#endif
#ifndef BUILD_FLAVOUR
#define BUILD_FLAVOUR ""
#endif

enum src { SRC_FALLBACK, SRC_CACHED, SRC_MEASURED, SRC_MEASURED_UNCACHED };

/* Contract: the cache file of (active path and mode, this build's flavour, n_threads, type). */
static void cache_path(int type, int n_threads, char *buf, size_t len)
{
    char dir[3800];
    sl_probe_cache_dir(dir, sizeof dir);
    snprintf(buf, len, "%s/compute-%s%s%s-t%d-%s.bw", dir, sl_kernels_for_type(type)->name, sl_kernels_exact() ? "-exact" : "",
             BUILD_FLAVOUR, n_threads, sl_type_name(type));
}

/* Contract: the next value of a xorshift64 generator (state must be non-zero). */
static uint64_t rnd(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* Contract: a float in [-1, 1) from the generator. */
static float rnd_unit(uint64_t *s) { return (float)((rnd(s) >> 40) * 0x1p-23) - 1.0f; }

/* Where each block type keeps its f16 scales (byte offsets in ggml's block structs,
 * kernels/k_common.h, k_quants.h, iq_common.h; the block size is checked against kernels/types.c).
 * Every other byte of a block is quants, grid indices, signs or packed sub-block scales, for which
 * any value is valid; IQ1_M has no f16 field but spreads its scale over the top nibbles of its four
 * scale words (bytes 48..55); MXFP4 has none either, its scale is the E8M0 exponent byte 0 (any
 * value valid, but e >= 253 gives infinities, so it gets the same magnitudes as the f16 scales). */
static const struct { int type, bytes, n_f16, off[2]; } BLOCK_F16[] = {
    { SL_TYPE_Q4_0, 18, 1, { 0 } },     { SL_TYPE_Q4_1, 20, 2, { 0, 2 } },   { SL_TYPE_Q5_0, 22, 1, { 0 } },
    { SL_TYPE_Q5_1, 24, 2, { 0, 2 } },  { SL_TYPE_Q8_0, 34, 1, { 0 } },      { SL_TYPE_Q2_K, 84, 2, { 80, 82 } },
    { SL_TYPE_Q3_K, 110, 1, { 108 } },  { SL_TYPE_Q4_K, 144, 2, { 0, 2 } },  { SL_TYPE_Q5_K, 176, 2, { 0, 2 } },
    { SL_TYPE_Q6_K, 210, 1, { 208 } },  { SL_TYPE_IQ2_XXS, 66, 1, { 0 } },   { SL_TYPE_IQ2_XS, 74, 1, { 0 } },
    { SL_TYPE_IQ2_S, 82, 1, { 0 } },    { SL_TYPE_IQ3_XXS, 98, 1, { 0 } },   { SL_TYPE_IQ3_S, 110, 1, { 0 } },
    { SL_TYPE_IQ1_S, 50, 1, { 0 } },    { SL_TYPE_IQ1_M, 56, 0, { 0 } },     { SL_TYPE_IQ4_NL, 18, 1, { 0 } },
    { SL_TYPE_IQ4_XS, 136, 1, { 0 } },  { SL_TYPE_MXFP4, 17, 0, { 0 } },
};

/* Contract: a random finite normal f16 of magnitude in [2^-10, 2^-2), either sign. */
static uint16_t rnd_f16(uint64_t *s)
{
    const uint64_t r = rnd(s);
    return (uint16_t)((r & 0x8000) | (5 + (r >> 16) % 8) << 10 | ((r >> 32) & 0x3ff));
}

/* Contract: blk[0..bytes) is one valid random block of the BLOCK_F16 entry e. */
static void random_block(int e, unsigned char *blk, uint64_t *rng)
{
    for (int i = 0; i < BLOCK_F16[e].bytes; i += 8) {
        const uint64_t r = rnd(rng);
        memcpy(blk + i, &r, (size_t)(BLOCK_F16[e].bytes - i < 8 ? BLOCK_F16[e].bytes - i : 8));
    }
    for (int k = 0; k < BLOCK_F16[e].n_f16; k++) {
        const uint16_t h = rnd_f16(rng);
        memcpy(blk + BLOCK_F16[e].off[k], &h, 2);
    }
    if (BLOCK_F16[e].type == SL_TYPE_MXFP4) blk[0] = (uint8_t)(118 + rnd(rng) % 8);   /* 2^-10 .. 2^-3 */
    if (BLOCK_F16[e].type == SL_TYPE_IQ1_M) {   /* nibble k of the f16 goes to the top nibble of word k */
        const uint16_t h = rnd_f16(rng);
        for (int k = 0; k < 4; k++) {
            uint16_t w;
            memcpy(&w, blk + 48 + 2 * k, 2);
            w = (uint16_t)((w & 0x0fff) | ((h >> (4 * k)) & 15) << 12);
            memcpy(blk + 48 + 2 * k, &w, 2);
        }
    }
}

/* Contract: see computeprobe.h.  Float types are quantized from random floats (their "blocks" are
 * the values); block types are random blocks (random_block), so no quantizer is needed: a decode
 * kernel's speed does not depend on the values, only on them being valid.  The matrix is tiled
 * from randomly chosen runs of a pool of POOL_ELEMS elements: generating or quantizing all of it
 * would cost far more than the timed passes. */
int sl_compute_probe_fill(int type, void *dst, size_t bytes, uint64_t seed)
{
    const sl_type_info *ti = sl_type_get(type);
    if (!ti || !sl_type_supported(type) || bytes % (size_t)ti->bytes) return -EINVAL;
    int e = -1;
    for (int i = 0; i < (int)(sizeof BLOCK_F16 / sizeof BLOCK_F16[0]); i++)
        if (BLOCK_F16[i].type == type) e = i;
    if (e < 0 ? ti->blck != 1 || !ti->quantize : BLOCK_F16[e].bytes != ti->bytes) return -EINVAL;
    uint64_t rng = seed | 1;
    size_t pool_bytes = sl_row_bytes(type, POOL_ELEMS);
    unsigned char *pool = malloc(pool_bytes), *w = dst;
    float *src = e < 0 ? malloc(POOL_ELEMS * sizeof *src) : NULL;
    if (!pool || (e < 0 && !src)) { free(src); free(pool); return -ENOMEM; }
    if (e < 0) {
        for (int i = 0; i < POOL_ELEMS; i += 32) {
            float mag = ldexpf(1.0f, (int)(rnd(&rng) % 7) - 3);
            for (int j = 0; j < 32; j++) src[i + j] = rnd_unit(&rng) * mag;
        }
        ti->quantize(src, pool, POOL_ELEMS);
    } else {
        for (size_t o = 0; o < pool_bytes; o += (size_t)ti->bytes) random_block(e, pool + o, &rng);
    }
    /* runs of >= 256 bytes, so even 2-byte F16 "blocks" cost few copies */
    size_t unit = (size_t)((256 + ti->bytes - 1) / ti->bytes) * (size_t)ti->bytes, units = pool_bytes / unit;
    for (size_t o = 0; o < bytes; o += unit) {
        size_t n = bytes - o < unit ? bytes - o : unit;
        memcpy(w + o, pool + (size_t)(rnd(&rng) % units) * unit, n);
    }
    free(src);
    free(pool);
    return 0;
}

typedef struct flush_job {
    const unsigned char *p;
    size_t n;
} flush_job;

/* Contract: thread ith of nth has evicted its share of the matrix's cache lines from every level
 * (no-op where clflush is unavailable; the probe then relies on the matrix's size). */
static void flush_worker(void *arg, int ith, int nth)
{
#if (defined(__x86_64__) || defined(__i386__)) && defined(__SSE2__)
    const flush_job *j = arg;
    size_t a = j->n * (size_t)ith / (size_t)nth / 64 * 64, b = j->n * (size_t)(ith + 1) / (size_t)nth;
    for (size_t i = a; i < b; i += 64) __builtin_ia32_clflush(j->p + i);
    __builtin_ia32_mfence();
#else
    (void)arg;
    (void)ith;
    (void)nth;
#endif
}

/* Contract: qsort comparator for doubles, ascending. */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* What the measurements of one call share: the pool and the matrix buffer (faulting 64 MiB of
 * pages in costs ~30 ms: once per call, not once per type). */
typedef struct probe {
    int n_threads;
    sl_pool *pool;
    unsigned char *buf;
    size_t cap;
} probe;

/* Contract: frees what the probe allocated. */
static void probe_free(probe *pr)
{
    sl_pool_free(pr->pool);
    free(pr->buf);
}

/* Contract: the median bytes/s of timed sl_matmul passes (one vector, cache-cold `type` matrix of
 * PROBE_COLS columns and at most probe_bytes) on the probe's pool; 0 when out of memory. */
static double measure(probe *pr, int type, size_t probe_bytes)
{
    const size_t rb = sl_row_bytes(type, PROBE_COLS);
    const int64_t rows = (int64_t)(probe_bytes / rb);
    const size_t bytes = (size_t)rows * rb;
    if (!pr->pool && !(pr->pool = sl_pool_create(pr->n_threads))) return 0;
    if (pr->cap < bytes) {
        free(pr->buf);
        pr->cap = 0;
        if (!(pr->buf = aligned_alloc(64, (bytes + 63) / 64 * 64))) return 0;
        pr->cap = bytes;
    }
    unsigned char *w = pr->buf;
    sl_pool *pool = pr->pool;
    float *x = malloc(PROBE_COLS * sizeof *x), *out = malloc((size_t)rows * sizeof *out);
    double *rate = malloc(PROBE_MAX_PASS * sizeof *rate);
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    double r = 0;
    if (!x || !out || !rate || sl_compute_probe_fill(type, w, bytes, rnd(&rng))) goto done;
    for (int i = 0; i < PROBE_COLS; i++) x[i] = rnd_unit(&rng);
    /* warm-up: pool threads running, per-thread activation scratch allocated */
    sl_matmul(pool, type, w, rows, PROBE_COLS, rb, x, 1, out, rows);
    flush_job fj = { w, bytes };
    int n = 0;
    uint64_t t_start = sl_now_ns();
    while (n < PROBE_MAX_PASS && (n < PROBE_MIN_PASS || sl_now_ns() - t_start < PROBE_NS)) {
        /* flushing on the pool leaves its workers spinning, so the timed call starts as a decode
         * matmul does: right after the previous parallel loop */
        sl_pool_run(pool, flush_worker, &fj);
        uint64_t t0 = sl_now_ns();
        sl_matmul(pool, type, w, rows, PROBE_COLS, rb, x, 1, out, rows);
        uint64_t dt = sl_now_ns() - t0;
        rate[n++] = (double)bytes / ((dt ? dt : 1) / 1e9);
    }
    qsort(rate, (size_t)n, sizeof *rate, cmp_double);
    r = n % 2 ? rate[n / 2] : (rate[n / 2 - 1] + rate[n / 2]) / 2;
done:
    free(x);
    free(out);
    free(rate);
    return r;
}

/* Contract: the rate of `type` on pr->n_threads threads (cached, or measured with pr), its source
 * in *src, one line in how. */
static double rate_for(probe *pr, int type, size_t probe_bytes, double fallback, enum src *src, char *how,
                       size_t howlen)
{
    const sl_type_info *ti = sl_type_get(type);
    const int n_threads = pr->n_threads;
    *src = SRC_FALLBACK;
    if (!ti || !sl_type_supported(type) || sl_row_bytes(type, PROBE_COLS) == 0) {
        snprintf(how, howlen, "assumed %.2f GB/s (no kernel for %s)", fallback / 1e9, sl_type_name(type));
        return fallback;
    }
    char cp[4096];
    cache_path(type, n_threads, cp, sizeof cp);
    double bw = 0;
    char stale[160];
    if (sl_probe_cache_read(cp, SL_KERNELS_ID, &bw, stale, sizeof stale)) {
        *src = SRC_CACHED;
        snprintf(how, howlen, "%.2f GB/s measured earlier (%s)", bw / 1e9, cp);
        return bw;
    }
    if (probe_bytes > SL_COMPUTE_PROBE_BYTES) probe_bytes = SL_COMPUTE_PROBE_BYTES;
    if (probe_bytes < SL_COMPUTE_PROBE_MIN) {
        snprintf(how, howlen, "assumed %.2f GB/s (no room in the budget to measure)", fallback / 1e9);
        return fallback;
    }
    bw = measure(pr, type, probe_bytes);
    if (!sl_probe_rate_sane(bw)) {
        snprintf(how, howlen, "assumed %.2f GB/s (out of memory for the probe)", fallback / 1e9);
        return fallback;
    }
    if (probe_bytes < SL_COMPUTE_PROBE_BYTES) {
        /* a smaller matrix runs faster than a model's do: good enough for this run, not for the cache */
        *src = SRC_MEASURED_UNCACHED;
        snprintf(how, howlen, "%.2f GB/s measured now (%s, %d thread%s, %.0f MiB probe to fit the budget; not cached)",
                 bw / 1e9, sl_kernels_for_type(type)->name, n_threads, n_threads == 1 ? "" : "s", probe_bytes / 1048576.0);
        return bw;
    }
    *src = SRC_MEASURED;
    sl_probe_cache_write(cp, SL_KERNELS_ID, bw);
    snprintf(how, howlen, "%.2f GB/s measured now (%s, %d thread%s%s%s; cached in %s)", bw / 1e9, sl_kernels_for_type(type)->name,
             n_threads, n_threads == 1 ? "" : "s", *stale ? "; " : "", stale, cp);
    return bw;
}

/* Contract: see computeprobe.h (one type; the pool and matrix live for this call only). */
double sl_compute_rate(int type, int n_threads, size_t probe_bytes, double fallback, char *how, size_t howlen)
{
    probe pr = { .n_threads = n_threads < 1 ? 1 : n_threads };
    enum src src;
    double r = rate_for(&pr, type, probe_bytes, fallback, &src, how, howlen);
    probe_free(&pr);
    return r;
}

/* Contract: see computeprobe.h. */
void sl_compute_bytes_by_type(const sl_model *m, uint64_t bytes[SL_TYPE_COUNT])
{
    memset(bytes, 0, SL_TYPE_COUNT * sizeof *bytes);
    for (int l = 0; l < m->cfg.n_layers; l++) {
        sl_weight *w[SL_BLOCK_MATS];
        for (int i = 0, n = sl_layer_weights(&m->layers[l], w); i < n; i++)
            if (w[i]->type >= 0 && w[i]->type < SL_TYPE_COUNT) bytes[w[i]->type] += w[i]->nbytes;
        for (int k = 0; m->layers[l].moe && k < SL_EXPERT_MATS; k++) {   /* what a token multiplies with */
            const sl_weight *e = sl_expert_weight(&m->layers[l], 0, k);
            if (e->type >= 0 && e->type < SL_TYPE_COUNT) bytes[e->type] += (uint64_t)m->cfg.n_expert_used * e->nbytes;
        }
    }
    if (m->output.type >= 0 && m->output.type < SL_TYPE_COUNT) bytes[m->output.type] += m->output.nbytes;
}

/* Contract: see computeprobe.h (time adds up per type, so rates combine harmonically). */
double sl_compute_combine(const uint64_t bytes[SL_TYPE_COUNT], const double rate[SL_TYPE_COUNT])
{
    double total = 0, secs = 0;
    for (int t = 0; t < SL_TYPE_COUNT; t++) {
        if (!bytes[t]) continue;
        if (!(rate[t] > 0)) return 0;
        total += (double)bytes[t];
        secs += (double)bytes[t] / rate[t];
    }
    return secs > 0 ? total / secs : 0;
}

/* Contract: see computeprobe.h (the types share one pool and one matrix buffer). */
double sl_compute_rate_mix(const uint64_t bytes[SL_TYPE_COUNT], int n_threads, size_t probe_bytes, double fallback,
                           double rate[SL_TYPE_COUNT], char *how, size_t howlen)
{
    memset(rate, 0, SL_TYPE_COUNT * sizeof *rate);
    probe pr = { .n_threads = n_threads < 1 ? 1 : n_threads };
    int n_src[4] = { 0 };
    char types[256] = "", one[480], why[512] = "";
    size_t tl = 0;
    for (int t = 0; t < SL_TYPE_COUNT; t++) {
        if (!bytes[t]) continue;
        enum src src;
        rate[t] = rate_for(&pr, t, probe_bytes, fallback, &src, one, sizeof one);
        n_src[src]++;
        if (src == SRC_FALLBACK && !*why) snprintf(why, sizeof why, "%s: %s", sl_type_name(t), one);
        if (tl < sizeof types)
            tl += (size_t)snprintf(types + tl, sizeof types - tl, "%s%s %.2f", tl ? ", " : "", sl_type_name(t), rate[t] / 1e9);
    }
    probe_free(&pr);
    double r = sl_compute_combine(bytes, rate);
    char dir[3800], state[4096];
    sl_probe_cache_dir(dir, sizeof dir);
    if (n_src[SRC_FALLBACK]) snprintf(state, sizeof state, "partly assumed: %s", why);
    else if (n_src[SRC_MEASURED_UNCACHED]) snprintf(state, sizeof state, "measured now with a smaller probe to fit the budget, not cached");
    else if (n_src[SRC_MEASURED]) snprintf(state, sizeof state, "measured now, cached in %s", dir);
    else snprintf(state, sizeof state, "measured earlier, %s", dir);
    snprintf(how, howlen, "%.2f GB/s for this model's types (%s, %d thread%s: %s GB/s; %s)", r / 1e9, sl_kernels()->name,
             pr.n_threads, pr.n_threads == 1 ? "" : "s", types, state);
    return r;
}

/* Contract: see computeprobe.h. */
double sl_compute_rate_model(const sl_model *m, int n_threads, size_t probe_bytes, double fallback,
                             double rate[SL_TYPE_COUNT], char *how, size_t howlen)
{
    uint64_t bytes[SL_TYPE_COUNT];
    sl_compute_bytes_by_type(m, bytes);
    return sl_compute_rate_mix(bytes, n_threads, probe_bytes, fallback, rate, how, howlen);
}
