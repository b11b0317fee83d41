/* bench/bench_kernels.c — weight throughput of the matrix-vector kernels, per format and path,
 * next to the machine's memory read bandwidth measured in the same run.
 *
 * Decode is a matrix-vector product per weight matrix, so tokens/s is bounded by (weight bytes per
 * token) / (memory bandwidth); a kernel that processes weights faster than memory delivers them is
 * good enough for decode.  For each format this runs sl_matmul (nb = 1) over a ~512 MiB random
 * matrix (larger than the last-level cache, which a VM may report as 300 MiB: the decode case
 * streams weights from memory) with 1 and 2 threads and reports GB/s of weights, for the
 * exact f32 path and each kernel path this CPU has; plus a batched product (nb = 64, the prefill
 * shape) in G weight-element x vector products per second.
 *
 * usage: bench_kernels [MiB (default 512)] [seconds per measurement (default 0.3)] [TYPE,TYPE,...]
 *                      [PATH,PATH,...]
 * (the third argument keeps only the named formats, e.g. IQ3_S,Q4_K; the fourth only the named
 * paths among exact, portable, avx2, avx512: the slow ones take minutes on the codebook types;
 * env SL_BENCH_SIMD_ONLY=1: only the SIMD paths)
 *        bench_kernels --ab [MiB (default 512)] [rounds (default 15)] [TYPE,TYPE,...]
 *
 * The memory bandwidth is measured again before each format (%bw is against that figure), so a
 * change of machine load between formats shows in both numbers.
 *
 *        bench_kernels --gemm [seconds (default 0.5)] [peak GOP/s per core] [TYPE,...] [columns (4096)]
 *
 * --gemm times the batched (prefill) products of Q4_K, Q6_K and Q8_0 at batch 1, 8, 16, 64, 512 in
 * GFLOP/s: the 4-vector dots (and the AVX2 ones, dots-avx2, where the CPU's default is another
 * path), then from batch 16 on each GEMM path this CPU runs (amx, vnni, avx2, forced in turn:
 * sl_gemm_force), with what runs by default (sl_gemm_name) in the header.
 *
 *        bench_kernels --bw [MiB (default 512)] [rounds (default 15)] [TYPE,TYPE,...]
 *
 * --bw measures %bw interleaved: each round times the plain read loop and every SIMD path (2
 * threads, best of 3 passes each, in an order that rotates from round to round), and %bw of a
 * round is the path's GB/s over the read loop's GB/s of that same round, a few hundred
 * milliseconds apart.  On a VM whose speed drifts by tens of percent over seconds, the per-round
 * ratio is steadier than one bandwidth figure per format; it prints the median and spread.
 * IQ2_XS, IQ2_XXS, IQ2_S and IQ3_S run their AVX-512 byte-permute dots in both forms
 * (avx512:loads and avx512:shuffles, kernels/simd.h SL_IQ_FORM_*) where the CPU has them.
 *
 * --ab compares the SIMD paths per format, interleaved: each round runs every path (and the
 * per-type choice of the dispatch table, "auto") over the same matrix in an order that rotates
 * from round to round, so load from other processes hits all of them alike; it prints medians and
 * the spread over rounds, and the median of the per-round avx512/avx2 ratios.  This is the
 * measurement behind the per-type table in kernels/dispatch.c (docs/benchmarks.md).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/f16.h"
#include "kernels/gemm.h"
#include "kernels/ops.h"
#include "kernels/simd.h"
#include "kernels/types.h"
#include "kernels/threadpool.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU seconds of the whole process (all threads): with other processes sharing the cores, wall
 * time measures the scheduler; CPU time / threads is the time the work would take with the cores
 * to itself (it counts the pool's spin-waiting too, so imbalance still shows). */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct { double wall, cpu; } timing;   /* best of each over the repetitions */

static void keep_best(timing *b, double w0, double c0, int nth)
{
    const double w = now() - w0, c = (cpu_now() - c0) / nth;
    if (w < b->wall) b->wall = w;
    if (c < b->cpu) b->cpu = c;
}

static uint64_t rng_state = 0x5eed;
static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ---- memory read bandwidth ------------------------------------------------------------------- */

typedef struct { const uint64_t *p; size_t n; bool prefetch; uint64_t sink[2][8]; } read_job;

static void read_worker(void *arg, int ith, int nth)
{
    read_job *j = arg;
    const size_t a = j->n * (size_t)ith / (size_t)nth, b = j->n * (size_t)(ith + 1) / (size_t)nth;
    uint64_t s[8] = { 0 };
    for (size_t i = a; i + 8 <= b; i += 8) {
        /* the kernels' software prefetch distance (kernels/k_common.h, SL_PREFETCH_AHEAD) */
        if (j->prefetch) __builtin_prefetch((const char *)(j->p + i) + 1024, 0, 3);
        for (int k = 0; k < 8; k++) s[k] += j->p[i + k];
    }
    memcpy(j->sink[ith & 1], s, sizeof s);
}

/* Best of several passes over a buffer of max(256 MiB, the matrices' size) — a host whose L3 is
 * reported as 300 MiB would serve a 256 MiB pass partly from cache — in GB/s (wall, CPU time). */
static timing mem_bw_read(sl_pool *pool, double secs, double mib, bool prefetch)
{
    const size_t bytes = mib > 256 ? (size_t)(mib * 1048576.0) & ~(size_t)63 : (size_t)256 << 20;
    uint64_t *buf = malloc(bytes);
    timing best = { 1e30, 1e30 };
    if (!buf) return best;
    for (size_t i = 0; i < bytes / 8; i++) buf[i] = i;
    read_job j = { buf, bytes / 8, prefetch, { { 0 } } };
    const double t_end = now() + secs * 3;
    for (int rep = 0; rep < 3 || now() < t_end; rep++) {
        const double w0 = now(), c0 = cpu_now();
        sl_pool_run(pool, read_worker, &j);
        keep_best(&best, w0, c0, sl_pool_size(pool));
        if (rep > 50) break;
    }
    free(buf);
    return (timing){ (double)bytes / best.wall / 1e9, (double)bytes / best.cpu / 1e9 };
}

/* The plain read loop: the %bw reference (the hardware prefetchers' rate). */
static timing mem_bw(sl_pool *pool, double secs, double mib) { return mem_bw_read(pool, secs, mib, false); }

/* The read loop's buffer for --bw, allocated and filled once (mem_bw_read's size). */
typedef struct { uint64_t *buf; size_t bytes; } read_buffer;

static bool read_buffer_init(read_buffer *r, double mib)
{
    r->bytes = mib > 256 ? (size_t)(mib * 1048576.0) & ~(size_t)63 : (size_t)256 << 20;
    r->buf = malloc(r->bytes);
    if (!r->buf) return false;
    for (size_t i = 0; i < r->bytes / 8; i++) r->buf[i] = i;
    return true;
}

/* Wall GB/s of the best of 3 plain read passes over r. */
static double read_sample(sl_pool *pool, const read_buffer *r)
{
    read_job j = { r->buf, r->bytes / 8, false, { { 0 } } };
    timing best = { 1e30, 1e30 };
    for (int rep = 0; rep < 3; rep++) {
        const double w0 = now(), c0 = cpu_now();
        sl_pool_run(pool, read_worker, &j);
        keep_best(&best, w0, c0, sl_pool_size(pool));
    }
    return (double)r->bytes / best.wall / 1e9;
}

/* ---- matrices -------------------------------------------------------------------------------- */

/* Random weights of `type`: random quant bytes with f16 scale fields set to sane values (the
 * values do not change the kernels' speed; NaN/inf scales would only make the output noise). */
static void *make_matrix(int type, int64_t rows, int64_t cols, size_t *row_bytes)
{
    const sl_type_info *ti = sl_type_get(type);
    *row_bytes = sl_row_bytes(type, cols);
    const size_t total = *row_bytes * (size_t)rows;
    unsigned char *w = malloc(total);
    if (!w) return NULL;
    for (size_t i = 0; i + 8 <= total; i += 8) {
        const uint64_t v = rnd();
        memcpy(w + i, &v, 8);
    }
    const int nblk = (int)(total / (size_t)ti->bytes);
    int hoff[2] = { -1, -1 };
    switch (type) {
    case SL_TYPE_Q4_0: case SL_TYPE_Q8_0: hoff[0] = 0; break;
    case SL_TYPE_Q4_K: case SL_TYPE_Q5_K: hoff[0] = 0; hoff[1] = 2; break;
    case SL_TYPE_Q6_K: hoff[0] = 208; break;
    case SL_TYPE_IQ2_XXS: case SL_TYPE_IQ2_XS: case SL_TYPE_IQ2_S: case SL_TYPE_IQ3_XXS:
    case SL_TYPE_IQ3_S: case SL_TYPE_IQ1_S: hoff[0] = 0; break;   /* IQ1_M: d spread over nibbles */
    case SL_TYPE_Q5_0: case SL_TYPE_IQ4_NL: case SL_TYPE_IQ4_XS: hoff[0] = 0; break;
    case SL_TYPE_Q4_1: case SL_TYPE_Q5_1: hoff[0] = 0; hoff[1] = 2; break;
    case SL_TYPE_Q2_K: hoff[0] = 80; hoff[1] = 82; break;
    case SL_TYPE_Q3_K: hoff[0] = 108; break;
    default: break;
    }
    for (int b = 0; b < nblk; b++)
        for (int k = 0; k < 2; k++)
            if (hoff[k] >= 0) {
                const uint16_t h = sl_f32_to_f16((float)(rnd() % 1000 + 1) * 1e-5f);
                memcpy(w + (size_t)b * ti->bytes + hoff[k], &h, 2);
            }
    if (type == SL_TYPE_MXFP4)   /* the E8M0 exponent byte: scales 2^-10..2^-3 (e >= 253 gives infinities) */
        for (int b = 0; b < nblk; b++) w[(size_t)b * ti->bytes] = (unsigned char)(118 + rnd() % 8);
    if (type == SL_TYPE_F32)
        for (size_t i = 0; i < total / 4; i++) ((float *)w)[i] = (float)((int)(rnd() % 2001) - 1000) * 1e-4f;
    if (type == SL_TYPE_F16 || type == SL_TYPE_BF16)
        for (size_t i = 0; i < total / 2; i++) {
            const float f = (float)((int)(rnd() % 2001) - 1000) * 1e-4f;
            ((uint16_t *)w)[i] = type == SL_TYPE_F16 ? sl_f32_to_f16(f) : sl_f32_to_bf16(f);
        }
    return w;
}

/* One format's measurement matrix: ~mib MiB of random weights of `type` (rows of `cols`), and
 * room for nb outputs per row.  False (nothing held) when memory runs out. */
typedef struct { void *w; float *out; int64_t rows; size_t rb; } bench_case;

static bool bench_case_make(bench_case *c, int type, double mib, int64_t cols, int nb)
{
    c->rows = (int64_t)(mib * 1048576.0 / (double)sl_row_bytes(type, cols));
    c->w = make_matrix(type, c->rows, cols, &c->rb);
    c->out = malloc((size_t)c->rows * (size_t)nb * sizeof *c->out);
    if (c->w && c->out) return true;
    free(c->w);
    free(c->out);
    fprintf(stderr, "out of memory\n");
    return false;
}

static void bench_case_free(bench_case *c)
{
    free(c->w);
    free(c->out);
}

/* The formats with SIMD paths (--ab, --bw). */
static const int k_simd_types[] = { SL_TYPE_F32, SL_TYPE_F16, SL_TYPE_BF16, SL_TYPE_Q8_0, SL_TYPE_Q4_0,
                                    SL_TYPE_Q4_K, SL_TYPE_Q5_K, SL_TYPE_Q6_K, SL_TYPE_Q2_K, SL_TYPE_Q3_K,
                                    SL_TYPE_IQ4_XS, SL_TYPE_IQ4_NL, SL_TYPE_Q5_0, SL_TYPE_IQ3_S, SL_TYPE_IQ3_XXS,
                                    SL_TYPE_IQ2_XS, SL_TYPE_IQ2_XXS, SL_TYPE_IQ2_S, SL_TYPE_MXFP4 };

/* Best times of sl_matmul over the matrix with nb vectors, repeated for at least `secs`. */
static timing time_matmul(sl_pool *pool, int type, const void *w, int64_t rows, int64_t cols, size_t rb,
                          const float *x, int nb, float *out, double secs)
{
    timing best = { 1e30, 1e30 };
    const double t_end = now() + secs;
    for (int rep = 0; rep < 2 || now() < t_end; rep++) {
        const double w0 = now(), c0 = cpu_now();
        sl_matmul(pool, type, w, rows, cols, rb, x, nb, out, rows);
        keep_best(&best, w0, c0, sl_pool_size(pool));
        if (rep > 200) break;
    }
    return best;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One sample: the best of 3 matvec passes (nb = 1), as GB/s of weights by CPU time / threads and
 * by wall time. */
static void ab_sample(sl_pool *pool, int type, const void *w, int64_t rows, int64_t cols, size_t rb, const float *x,
                      float *out, double *cpu_gbs, double *wall_gbs)
{
    timing best = { 1e30, 1e30 };
    for (int rep = 0; rep < 3; rep++) {
        const double w0 = now(), c0 = cpu_now();
        sl_matmul(pool, type, w, rows, cols, rb, x, 1, out, rows);
        keep_best(&best, w0, c0, sl_pool_size(pool));
    }
    const double gb = (double)rb * (double)rows / 1e9;
    *cpu_gbs = gb / best.cpu;
    *wall_gbs = gb / best.wall;
}

#define AB_MAX_ROUNDS 64
enum { AB_AUTO = SL_KPATH_COUNT };   /* the dispatch table's per-type choice */

static int ab_select(int p)
{
    if (p == AB_AUTO) return sl_kernels_force(SL_KPATH_AUTO);
    return sl_kernels_force(p);
}

/* Interleaved comparison of the SIMD paths and the auto choice per format (see the header). */
static bool name_listed(const char *list, const char *name);

static int run_ab(double mib, int rounds, const char *only)
{
    const int64_t cols = 4096;
    if (rounds < 3) rounds = 3;
    if (rounds > AB_MAX_ROUNDS) rounds = AB_MAX_ROUNDS;
    int paths[SL_KPATH_COUNT + 1], np = 0;
    for (int p = SL_KPATH_AVX2; p < SL_KPATH_COUNT; p++)
        if (sl_kernels_available(p)) paths[np++] = p;
    paths[np++] = AB_AUTO;
    sl_kernels_set_exact(false);
    float *x = malloc((size_t)cols * sizeof *x);
    for (int64_t i = 0; i < cols; i++) x[i] = (float)((int)(rnd() % 2001) - 1000) * 1e-3f;
    printf("interleaved A/B: matvec (nb=1) over ~%.0f MiB, %lld columns, %d rounds x best of 3 passes;\n"
           "GB/s of weights by CPU time / threads: median [min-max] over rounds; wall-time median in ()\n",
           mib, (long long)cols, rounds);
    for (size_t ti = 0; ti < sizeof k_simd_types / sizeof *k_simd_types; ti++) {
        const int type = k_simd_types[ti];
        if (only && !name_listed(only, sl_type_name(type))) continue;
        bench_case bc;
        if (!bench_case_make(&bc, type, mib, cols, 1)) return 1;
        void *w = bc.w;
        float *out = bc.out;
        const int64_t rows = bc.rows;
        const size_t rb = bc.rb;
        for (int nth = 1; nth <= 2; nth++) {
            sl_pool *pool = sl_pool_create(nth);
            double cpu[SL_KPATH_COUNT + 1][AB_MAX_ROUNDS], wall[SL_KPATH_COUNT + 1][AB_MAX_ROUNDS], ratio[AB_MAX_ROUNDS];
            for (int k = 0; k < np; k++) {   /* warm-up pass per path (page faults, frequency) */
                double c, wl;
                ab_select(paths[k]);
                ab_sample(pool, type, w, rows, cols, rb, x, out, &c, &wl);
            }
            for (int r = 0; r < rounds; r++)
                for (int k = 0; k < np; k++) {
                    const int slot = (k + r) % np;
                    ab_select(paths[slot]);
                    ab_sample(pool, type, w, rows, cols, rb, x, out, &cpu[slot][r], &wall[slot][r]);
                }
            const bool both = np == 3;   /* avx2 and avx512 present */
            if (both)
                for (int r = 0; r < rounds; r++) ratio[r] = cpu[1][r] / cpu[0][r];
            sl_kernels_force(SL_KPATH_AUTO);
            printf("%-5s %dT", sl_type_name(type), nth);
            for (int k = 0; k < np; k++) {
                double wm = median(wall[k], rounds), cm = median(cpu[k], rounds);
                printf("  %s %6.2f [%6.2f-%6.2f] (%5.2f)", paths[k] == AB_AUTO ? "auto" : sl_kpath_name(paths[k]), cm,
                       cpu[k][0], cpu[k][rounds - 1], wm);
            }
            if (both) {
                const double rm = median(ratio, rounds);
                printf("  avx512/avx2 %.3f [%.3f-%.3f]", rm, ratio[0], ratio[rounds - 1]);
            }
            printf("  auto=%s\n", sl_kpath_name(sl_kernels_path_for_type(type)));
            fflush(stdout);
            sl_pool_free(pool);
        }
        bench_case_free(&bc);
    }
    free(x);
    return 0;
}

/* Interleaved %bw per format and SIMD path, 2 threads (see the header). */
static int run_bw(double mib, int rounds, const char *only)
{
    const int64_t cols = 4096;
    if (rounds < 3) rounds = 3;
    if (rounds > AB_MAX_ROUNDS) rounds = AB_MAX_ROUNDS;
    int avail[SL_KPATH_COUNT], na = 0;
    for (int p = SL_KPATH_AVX2; p < SL_KPATH_COUNT; p++)
        if (sl_kernels_available(p)) avail[na++] = p;
    read_buffer rd;
    float *x = malloc((size_t)cols * sizeof *x);
    if (!x || !read_buffer_init(&rd, mib)) { fprintf(stderr, "out of memory\n"); return 1; }
    for (int64_t i = 0; i < cols; i++) x[i] = (float)((int)(rnd() % 2001) - 1000) * 1e-3f;
    sl_kernels_set_exact(false);
    sl_pool *pool = sl_pool_create(2);
    printf("interleaved %%bw: per round the plain read loop (%.0f MiB) and each SIMD path's matvec (nb=1, ~%.0f MiB,\n"
           "%lld columns), 2 threads, best of 3 passes each; %%bw = path wall GB/s / read wall GB/s of the same round;\n"
           "median [min-max] over %d rounds\n", (double)rd.bytes / 1048576.0, mib, (long long)cols, rounds);
    for (size_t ti = 0; ti < sizeof k_simd_types / sizeof *k_simd_types; ti++) {
        const int type = k_simd_types[ti];
        if (only && !name_listed(only, sl_type_name(type))) continue;
        /* the variants: each path, and the two forms of the AVX-512 byte-permute dots that have them */
        int paths[SL_KPATH_COUNT + 1], forms[SL_KPATH_COUNT + 1], np = 0;
        const bool two_forms = sl_avx512_iq_has_byte_permutes() && (type == SL_TYPE_IQ2_XS || type == SL_TYPE_IQ2_XXS || type == SL_TYPE_IQ3_XXS ||
                                                                    type == SL_TYPE_IQ2_S || type == SL_TYPE_IQ3_S);
        for (int a = 0; a < na; a++) {
            const bool split = two_forms && avail[a] == SL_KPATH_AVX512;
            for (int f = 0; f < (split ? 2 : 1); f++, np++) {
                paths[np] = avail[a];
                forms[np] = split ? (f ? SL_IQ_FORM_SHUFFLES : SL_IQ_FORM_LOADS) : SL_IQ_FORM_AUTO;
            }
        }
        bench_case bc;
        if (!bench_case_make(&bc, type, mib, cols, 1)) return 1;
        double gbs[SL_KPATH_COUNT + 1][AB_MAX_ROUNDS], pct[SL_KPATH_COUNT + 1][AB_MAX_ROUNDS], rbw[AB_MAX_ROUNDS], c;
        for (int k = 0; k < np; k++) {   /* warm-up pass per variant (page faults, frequency) */
            sl_kernels_force(paths[k]);
            sl_avx512_iq_force_form(forms[k]);
            ab_sample(pool, type, bc.w, bc.rows, cols, bc.rb, x, bc.out, &c, &gbs[k][0]);
        }
        for (int r = 0; r < rounds; r++)
            for (int k = 0; k <= np; k++) {   /* slot np: the read loop */
                const int slot = (k + r) % (np + 1);
                if (slot == np) {
                    rbw[r] = read_sample(pool, &rd);
                    continue;
                }
                sl_kernels_force(paths[slot]);
                sl_avx512_iq_force_form(forms[slot]);
                ab_sample(pool, type, bc.w, bc.rows, cols, bc.rb, x, bc.out, &c, &gbs[slot][r]);
            }
        for (int k = 0; k < np; k++)
            for (int r = 0; r < rounds; r++) pct[k][r] = 100 * gbs[k][r] / rbw[r];
        sl_kernels_force(SL_KPATH_AUTO);
        sl_avx512_iq_force_form(SL_IQ_FORM_AUTO);
        const double rm = median(rbw, rounds);
        printf("%-7s read %5.2f GB/s", sl_type_name(type), rm);
        for (int k = 0; k < np; k++) {
            const double pm = median(pct[k], rounds), gm = median(gbs[k], rounds);   /* median() sorts */
            const char *form = forms[k] == SL_IQ_FORM_LOADS ? ":loads" : forms[k] == SL_IQ_FORM_SHUFFLES ? ":shuffles" : "";
            printf("  %s%s %5.1f%% [%5.1f-%5.1f] (%5.2f GB/s)", sl_kpath_name(paths[k]), form, pm, pct[k][0], pct[k][rounds - 1], gm);
        }
        printf("\n");
        fflush(stdout);
        bench_case_free(&bc);
    }
    sl_pool_free(pool);
    free(rd.buf);
    free(x);
    return 0;
}

/* True when `name` is one of the comma-separated names in `list`. */
static bool name_listed(const char *list, const char *name)
{
    const size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

/* --gemm: the batched products (prefill) of the llama3-8b mix's types, as GFLOP/s (2 * rows * cols
 * * batch / CPU time per thread) for batches 1, 8, 16, 64 and 512 over a 4096 x 4096 matrix (rows 1024
 * for the large batches, which are compute-bound: a weight tile stays in cache while the vectors
 * pass), best of the repetitions, with 1 and 2 threads; "%peak" is the 1-thread figure against
 * the AVX-512 VNNI peak given in GOP/s (argument; 0: not printed). */
static int run_gemm(double secs, double peak, const char *only, int64_t cols)
{
    const int types[] = { SL_TYPE_Q4_K, SL_TYPE_Q6_K, SL_TYPE_Q8_0 };
    const int batches[] = { 1, 8, 16, 64, 512 };
    sl_pool *pool1 = sl_pool_create(1), *pool2 = sl_pool_create(2);
    float *x = malloc((size_t)cols * 512 * sizeof *x);
    if (!x || !pool1 || !pool2) return 1;
    for (int64_t i = 0; i < cols * 512; i++) x[i] = (float)((int)(rnd() % 2001) - 1000) * 1e-3f;
    printf("batched products, %lld columns, GFLOP/s by CPU time per thread (best of repetitions); gemm here: %s\n",
           (long long)cols, sl_gemm_name());
    printf("%-6s %-11s %6s %6s %10s %10s %7s\n", "format", "kernel", "batch", "rows", "1T GFLOP/s", "2T GFLOP/s", "%peak");
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        if (only && !name_listed(only, sl_type_name(types[ti]))) continue;
        for (size_t bi = 0; bi < sizeof batches / sizeof *batches; bi++) {
            const int nb = batches[bi];
            const int64_t rows = nb >= 64 ? 1024 : 4096;
            size_t rb;
            void *w = make_matrix(types[ti], rows, cols, &rb);
            float *out = malloc((size_t)rows * (size_t)nb * sizeof *out);
            if (!w || !out) return 1;
            /* the 4-vector dots (GEMM off), then each GEMM path this CPU has for the type (forced in
             * turn, fastest first; a forced path runs the fastest kernel at or below it, so a kernel
             * is timed under the slowest forced path that still selects it: its own) */
            /* "dots-PATH": the 4-vector dots of the type's default kernel path; "dots-avx2" also
             * (forced) where that is another: the baseline of an AVX2-only CPU */
            static const int paths[] = { SL_GEMM_OFF, SL_GEMM_OFF, SL_GEMM_AMX, SL_GEMM_VNNI, SL_GEMM_AVX2 };
            static const char *const names[] = { "dots-", "dots-avx2", "amx", "vnni", "avx2" };
            sl_qgemm_fn k[5];   /* the type's kernel under each forced path (NULL: refused, or none) */
            for (int h = 2; h < 5; h++) k[h] = sl_gemm_force(paths[h]) == 0 ? sl_gemm_for(types[ti]) : NULL;
            const int kpath = sl_kernels_path_for_type(types[ti]);
            for (int g = 0; g < 5; g++) {
                if (g == 1 && (kpath == SL_KPATH_AVX2 || sl_kernels_force(SL_KPATH_AVX2) != 0)) continue;
                if (g == 2) sl_kernels_force(SL_KPATH_AUTO);
                if (g > 1 && (nb < SL_GEMM_MIN_VECTORS || !k[g])) continue;
                bool slower_has_it = false;
                for (int h = g + 1; h < 5 && g > 1; h++) slower_has_it = slower_has_it || k[h] == k[g];
                if (slower_has_it || sl_gemm_force(paths[g]) != 0) continue;
                const timing t1 = time_matmul(pool1, types[ti], w, rows, cols, rb, x, nb, out, secs);
                const timing t2 = time_matmul(pool2, types[ti], w, rows, cols, rb, x, nb, out, secs);
                const double flop = 2.0 * (double)rows * (double)cols * nb;
                char label[24];
                snprintf(label, sizeof label, "%s%s", names[g], g == 0 ? sl_kpath_name(kpath) : "");
                printf("%-6s %-11s %6d %6lld %10.1f %10.1f", sl_type_name(types[ti]), label, nb,
                       (long long)rows, flop / t1.cpu / 1e9, flop / t2.cpu / 1e9);
                if (peak > 0) printf(" %6.1f%%", 100 * flop / t1.cpu / 1e9 / peak);
                printf("\n");
                fflush(stdout);
            }
            sl_kernels_force(SL_KPATH_AUTO);
            sl_gemm_force(SL_GEMM_AUTO);
            free(w);
            free(out);
        }
    }
    free(x);
    sl_pool_free(pool1);
    sl_pool_free(pool2);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: bench_kernels [MIB [SECONDS [TYPE,... [PATH,...]]]]\n  memory bandwidth, then matvec GB/s per weight type and kernel path over\n"
               "  ~MIB of weights (default 512), each timed for SECONDS (default 0.3)\n"
               "       bench_kernels --ab [MIB [ROUNDS [TYPE,...]]]\n  interleaved avx2/avx512/auto comparison per type (default 512 MiB, 15 rounds)\n"
               "       bench_kernels --gemm [SECONDS [PEAK_GOPS [TYPE,... [COLUMNS]]]]\n  batched products (batch 1, 8, 16, 64, 512) in GFLOP/s, 1 and 2 threads: the dots and each GEMM path here (amx, vnni, avx2)\n"
               "       bench_kernels --bw [MIB [ROUNDS [TYPE,...]]]\n  %%bw per type and SIMD path, the read loop interleaved with the kernels (2 threads)\n");
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "--bw"))
        return run_bw(argc > 2 ? atof(argv[2]) : 512, argc > 3 ? atoi(argv[3]) : 15, argc > 4 ? argv[4] : NULL);
    if (argc > 1 && !strcmp(argv[1], "--gemm"))
        return run_gemm(argc > 2 ? atof(argv[2]) : 0.5, argc > 3 ? atof(argv[3]) : 0, argc > 4 ? argv[4] : NULL,
                        argc > 5 ? atoll(argv[5]) : 4096);
    if (argc > 1 && !strcmp(argv[1], "--ab"))
        return run_ab(argc > 2 ? atof(argv[2]) : 512, argc > 3 ? atoi(argv[3]) : 15, argc > 4 ? argv[4] : NULL);
    const double mib = argc > 1 ? atof(argv[1]) : 512;
    const double secs = argc > 2 ? atof(argv[2]) : 0.3;
    const int64_t cols = 4096;
    /* SL_BENCH_SIMD_ONLY=1: skip the exact and portable rows (minutes on a loaded machine) */
    const char *so = getenv("SL_BENCH_SIMD_ONLY");
    const bool simd_only = so && *so && strcmp(so, "0") != 0;
    const int nb_batch = 64;
    sl_pool *pool1 = sl_pool_create(1), *pool2 = sl_pool_create(2);
    float *x = malloc((size_t)cols * nb_batch * sizeof *x);
    for (int64_t i = 0; i < cols * nb_batch; i++) x[i] = (float)((int)(rnd() % 2001) - 1000) * 1e-3f;

    const timing bw1 = mem_bw(pool1, secs, mib), bw2 = mem_bw(pool2, secs, mib);
    printf("memory read bandwidth (%.0f MiB, best pass): 1 thread %.1f GB/s, 2 threads %.1f GB/s "
           "[CPU-time based: %.1f, %.1f]\n", mib > 256 ? mib : 256.0, bw1.wall, bw2.wall, bw1.cpu, bw2.cpu);
    /* the same loop with the kernels' software prefetch: on some VMs it reads faster than the plain
     * loop, so a kernel can pass 100% of %bw; this is the higher ceiling (informational only) */
    const timing bwp = mem_bw_read(pool2, secs, mib, true);
    printf("memory read bandwidth with software prefetch: 2 threads %.1f GB/s [CPU-time based: %.1f]\n", bwp.wall,
           bwp.cpu);
    printf("matvec over ~%.0f MiB of weights, %lld columns: GB/s of weights, by wall time and [by CPU time / threads];\n"
           "%%bw = 2-thread wall GB/s / 2-thread wall memory bandwidth; nb=%d: G weight x vector products/s (2 threads, CPU)\n",
           mib, (long long)cols, nb_batch);
    printf("%-7s %-9s %8s %8s %6s %8s %8s %11s\n", "format", "path", "1T", "2T", "%bw", "[1T]", "[2T]", "nb=64 Gop/s");
    const int types[] = { SL_TYPE_F32, SL_TYPE_F16, SL_TYPE_BF16, SL_TYPE_Q8_0, SL_TYPE_Q4_0,
                          SL_TYPE_Q4_K, SL_TYPE_Q5_K, SL_TYPE_Q6_K, SL_TYPE_Q2_K, SL_TYPE_Q3_K,
                          SL_TYPE_IQ4_XS, SL_TYPE_IQ4_NL, SL_TYPE_Q5_0, SL_TYPE_Q4_1, SL_TYPE_Q5_1,
                          SL_TYPE_IQ3_S, SL_TYPE_IQ3_XXS, SL_TYPE_IQ2_XS, SL_TYPE_IQ2_XXS, SL_TYPE_IQ2_S,
                          SL_TYPE_IQ1_S, SL_TYPE_IQ1_M, SL_TYPE_MXFP4 };
    const char *only = argc > 3 ? argv[3] : NULL, *paths = argc > 4 ? argv[4] : NULL;
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        const int type = types[ti];
        if (only && !name_listed(only, sl_type_name(type))) continue;
        /* the bandwidth again right before this format (other processes come and go): %bw uses the
         * figure measured next to the kernel's own, not one from minutes earlier */
        const timing bwt = ti == 0 ? bw2 : mem_bw(pool2, secs, mib);
        printf("%-7s memory bandwidth now: 2 threads %.1f GB/s wall, %.1f GB/s CPU-time based\n", sl_type_name(type),
               bwt.wall, bwt.cpu);
        bench_case bc;
        if (!bench_case_make(&bc, type, mib, cols, nb_batch)) return 1;
        void *w = bc.w;
        float *out = bc.out;
        const int64_t rows = bc.rows;
        const size_t rb = bc.rb;
        const double gb = (double)rb * (double)rows / 1e9;
        /* path -1: exact mode (dequantize + f32 dot, the portable reference) */
        for (int p = simd_only ? SL_KPATH_PORTABLE + 1 : -1; p < SL_KPATH_COUNT; p++) {
            if (paths && !name_listed(paths, p < 0 ? "exact" : sl_kpath_name(p))) continue;
            if (p >= 0 && sl_kernels_force(p) != 0) continue;
            sl_kernels_set_exact(p < 0);
            const timing t1 = time_matmul(pool1, type, w, rows, cols, rb, x, 1, out, secs);
            const timing t2 = time_matmul(pool2, type, w, rows, cols, rb, x, 1, out, secs);
            /* the batched product is compute-bound (a weight tile stays in cache while 64 vectors
             * pass): its first 32 MiB of rows are enough and keep big runs short */
            const int64_t rows_b = rows < (int64_t)((32u << 20) / rb) ? rows : (int64_t)((32u << 20) / rb);
            const timing tb = time_matmul(pool2, type, w, rows_b, cols, rb, x, nb_batch, out, secs);
            printf("%-7s %-9s %8.2f %8.2f %5.0f%% %8.2f %8.2f %11.2f\n", sl_type_name(type),
                   p < 0 ? "exact" : sl_kpath_name(p), gb / t1.wall, gb / t2.wall, 100 * gb / t2.wall / bwt.wall,
                   gb / t1.cpu, gb / t2.cpu, (double)rows_b * cols * nb_batch / tb.cpu / 1e9);
            fflush(stdout);
        }
        sl_kernels_set_exact(false);
        bench_case_free(&bc);
    }
    free(x);
    sl_pool_free(pool1);
    sl_pool_free(pool2);
    return 0;
}
