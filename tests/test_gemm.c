/* tests/test_gemm.c — the batched GEMM (kernels/gemm.h) gives exactly the bits of the single dots.
 *
 * Reference: the portable integer dot (kernels/qdot.c, itself checked against float64 sums in
 * test_kernels_simd.c) of every (row, vector).  Data: fixed-seed random quant bytes (every scale
 * and quant byte value, incl. Q6_K's -128 scales), random finite f16 d/dmin, Gaussian activations
 * with per-vector magnitudes spanning 2^-8..2^8, quantized by the portable Q8_K quantizer; odd row
 * counts (partial 16-row blocks), every vector count 1..70 plus 130 and 300 (partial groups of
 * 16), several widths.  Compared bit for bit (NaN: both NaN).
 *
 * Every path this CPU can run is checked, by forcing each (sl_gemm_force: auto, then AMX, AVX-512
 * VNNI, AVX2; a kernel for a type is tested once, under the first setting that selects it; auto on
 * an AMX machine selects a per-call mix of AMX and VNNI, tested as a kernel of its own).  On
 * a machine without any GEMM the direct tests are skipped (and say so); the sl_matmul test then
 * checks that the fallback (the 4-vector dots) gives the same bits as n = 1 products.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/sluice.h"
#include "kernels/f16.h"
#include "kernels/gemm.h"
#include "kernels/ops.h"
#include "kernels/scratch.h"
#include "kernels/simd.h"
#include "kernels/threadpool.h"
#include "kernels/types.h"
#include "test_kernels_util.h"

typedef struct {
    int type, blck, bytes, d_off[2];
    sl_qdot_fn ref;
    sl_actq_fn quant;
    int act_bytes;
    int64_t odd_width;   /* a width with an odd block count (Q8_0: the dot's unpaired last block) */
    int e8m0_off;        /* MXFP4: the exponent byte, random in 2^-10..2^9 unless `wide` (-1: none) */
} gcase;

static const gcase k_cases[] = {
    { SL_TYPE_Q4_K, 256, 144, { 0, 2 }, sl_qdot_q4_k_q8_k, sl_quantize_act_q8_k, SL_Q8_K_BYTES, 2304, -1 },
    { SL_TYPE_Q6_K, 256, 210, { 208, -1 }, sl_qdot_q6_k_q8_k, sl_quantize_act_q8_k, SL_Q8_K_BYTES, 768, -1 },
    { SL_TYPE_Q8_0, 32, 34, { 0, -1 }, sl_qdot_q8_0_q8_0, sl_quantize_act_q8_0, SL_Q8_0_BYTES, 96, -1 },
    { SL_TYPE_MXFP4, 32, 17, { -1, -1 }, sl_qdot_mxfp4_q8_0, sl_quantize_act_q8_0, SL_Q8_0_BYTES, 96, 0 },
};

/* rows x n random weights of case c; `wide`: d/dmin any finite half, else exponents in [-14, -6]. */
static uint8_t *make_weights(tk_rng *r, const gcase *c, int64_t rows, int64_t n, bool wide)
{
    const size_t nblk = (size_t)rows * (size_t)(n / c->blck);
    uint8_t *w = malloc(nblk * (size_t)c->bytes);
    cr_assert(w);
    tk_bytes(r, w, nblk * (size_t)c->bytes);
    for (size_t b = 0; b < nblk; b++)
        for (int k = 0; k < 2; k++)
            if (c->d_off[k] >= 0) {
                const uint16_t h = wide ? tk_finite_half(r) : tk_half_in(r, -14, -6);
                memcpy(w + b * (size_t)c->bytes + c->d_off[k], &h, 2);
            }
    if (c->e8m0_off >= 0 && !wide)   /* wide: any byte, 2^-128..2^127 (infinities and NaNs follow) */
        for (size_t b = 0; b < nblk; b++) w[b * (size_t)c->bytes + c->e8m0_off] = (uint8_t)(118 + tk_next(r) % 20);
    return w;
}

/* nv quantized activation vectors of n elements (Gaussian, a random scale per vector). */
static uint8_t *make_acts(const gcase *c, tk_rng *r, int nv, int64_t n, size_t *stride)
{
    *stride = (size_t)(n / c->blck) * (size_t)c->act_bytes;
    uint8_t *y = malloc(*stride * (size_t)nv);
    float *x = malloc((size_t)n * sizeof *x);
    cr_assert(y && x);
    for (int v = 0; v < nv; v++) {
        const double s = ldexp(1.0, (int)(tk_next(r) % 17) - 8);
        for (int64_t i = 0; i < n; i++) x[i] = (float)(s * tk_gauss(r));
        c->quant(x, y + (size_t)v * *stride, n);
    }
    free(x);
    return y;
}

static bool same_bits(float a, float b) { return (isnan(a) && isnan(b)) || tk_fbits(a) == tk_fbits(b); }

/* The GEMM of case c over rows x nv against the portable dot, every output; false on a mismatch
 * (printed). */
static bool check_gemm(const gcase *c, sl_qgemm_fn g, tk_rng *r, int64_t rows, int64_t n, int nv, bool wide)
{
    uint8_t *w = make_weights(r, c, rows, n, wide);
    size_t ys;
    uint8_t *y = make_acts(c, r, nv, n, &ys);
    const size_t rb = sl_row_bytes(c->type, n);
    const int64_t os = rows + 3;   /* an out stride wider than the rows: the gaps stay untouched */
    float *out = malloc((size_t)os * (size_t)nv * sizeof *out);
    cr_assert(out);
    for (size_t i = 0; i < (size_t)os * (size_t)nv; i++) out[i] = -7.0f;
    cr_assert(g(w, rb, rows, y, ys, nv, n, out, os), "the GEMM could not get its scratch memory");
    bool ok = true;
    for (int v = 0; v < nv && ok; v++) {
        for (int64_t k = rows; k < os; k++) ok = ok && out[(size_t)v * os + k] == -7.0f;
        for (int64_t i = 0; i < rows && ok; i++) {
            const float want = c->ref(w + (size_t)i * rb, y + (size_t)v * ys, n), got = out[(size_t)v * os + i];
            if (!same_bits(want, got)) {
                printf("%s rows %lld n %lld nv %d: row %lld vector %d: %a (gemm) != %a (dot)\n", sl_type_name(c->type),
                       (long long)rows, (long long)n, nv, (long long)i, v, got, want);
                ok = false;
            }
        }
    }
    free(w);
    free(y);
    free(out);
    return ok;
}

static const int k_paths[] = { SL_GEMM_AMX, SL_GEMM_VNNI, SL_GEMM_AVX2 };
#define NPATHS (sizeof k_paths / sizeof *k_paths)
#define NKERNELS (NPATHS + 1)   /* + auto's */

/* The kernels of type `type` this machine can run, one per distinct kernel: auto (on an AMX
 * machine a per-call mix of AMX and VNNI, a kernel of its own), then each path forced in turn (a
 * forced path may fall back to a slower one's kernel, which is then listed once); the number of
 * them, with the setting each came from (-1: auto).  Leaves the setting on auto. */
static int gemm_kernels_v(int type, sl_qgemm_fn g[NKERNELS], int path[NKERNELS], bool verbose)
{
    int ng = 0;
    for (size_t q = 0; q <= NPATHS; q++) {
        const int mode = q ? k_paths[q - 1] : SL_GEMM_AUTO;
        if (sl_gemm_force(mode) != 0) {
            if (verbose) printf("gemm mode %d: not available here\n", mode);
            continue;
        }
        const sl_qgemm_fn f = sl_gemm_for(type);
        bool seen = !f;
        for (int i = 0; i < ng; i++) seen = seen || g[i] == f;
        if (verbose)
            printf("gemm %s, mode %d: %s%s\n", sl_type_name(type), mode, sl_gemm_name(),
                   seen ? " (tested already or none)" : "");
        if (!seen) {
            path[ng] = mode;
            g[ng++] = f;
        }
    }
    sl_gemm_force(SL_GEMM_AUTO);
    return ng;
}

static int gemm_kernels(int type, sl_qgemm_fn g[NKERNELS], int path[NKERNELS])
{
    return gemm_kernels_v(type, g, path, true);
}

/* Skips the test when no type has any GEMM here. */
static void skip_without_gemm(void)
{
    int total = 0;
    sl_qgemm_fn g[NKERNELS];
    int path[NKERNELS];
    for (size_t ci = 0; ci < sizeof k_cases / sizeof *k_cases; ci++) total += gemm_kernels_v(k_cases[ci].type, g, path, false);
    if (!total) cr_skip_test("skipped: no batched GEMM on this machine (%s)", sl_gemm_name());
}

Test(gemm, every_vector_count_matches_the_dot)
{
    skip_without_gemm();
    for (size_t ci = 0; ci < sizeof k_cases / sizeof *k_cases; ci++) {
        sl_qgemm_fn g[NKERNELS];
        int path[NKERNELS];
        const int ng = gemm_kernels(k_cases[ci].type, g, path);
        for (int gi = 0; gi < ng; gi++) {
            tk_rng r = { 0x6e33 + ci };
            for (int nv = 1; nv <= 70; nv++)
                cr_assert(check_gemm(&k_cases[ci], g[gi], &r, 37, 512, nv, false), "path %d", path[gi]);
            cr_assert(check_gemm(&k_cases[ci], g[gi], &r, 21, 256, 130, false), "path %d", path[gi]);
            cr_assert(check_gemm(&k_cases[ci], g[gi], &r, 16, 768, 300, false), "path %d", path[gi]);
        }
    }
}

Test(gemm, odd_shapes_and_wide_scales_match_the_dot)
{
    skip_without_gemm();
    const int64_t rows[] = { 1, 5, 8, 9, 15, 16, 17, 31, 32, 33, 48, 63 };
    const int64_t widths[] = { 256, 1280, 4096 };
    for (size_t ci = 0; ci < sizeof k_cases / sizeof *k_cases; ci++) {
        sl_qgemm_fn g[NKERNELS];
        int path[NKERNELS];
        const int ng = gemm_kernels(k_cases[ci].type, g, path);
        for (int gi = 0; gi < ng; gi++) {
            tk_rng r = { 0x9a17 + ci };
            for (size_t a = 0; a < sizeof rows / sizeof *rows; a++)
                for (size_t b = 0; b <= sizeof widths / sizeof *widths; b++) {
                    const int64_t width = b < sizeof widths / sizeof *widths ? widths[b] : k_cases[ci].odd_width;
                    const int nv = 1 + (int)(tk_next(&r) % 40);
                    cr_assert(check_gemm(&k_cases[ci], g[gi], &r, rows[a], width, nv, false), "path %d", path[gi]);
                    cr_assert(check_gemm(&k_cases[ci], g[gi], &r, rows[a], width, nv, true), "path %d", path[gi]);
                }
        }
    }
}

/* The largest integer sums the layouts allow: every Q4_K nibble 15, every Q6_K q 63, every Q8_0
 * quant -128, every MXFP4 value +12 (scales and d random), against activations all +127, all -127 and alternating: the
 * AVX2 path's int16 partial sums reach their bound (Q4_K 8 * 2 * 15 * 127, Q6_K 2 * 2 * 63 * 127,
 * Q8_0 pairs 2 * 128 * 127) and must stay exact. */
Test(gemm, extreme_quants_stay_exact)
{
    skip_without_gemm();
    static const int qoff[] = { 16, 0, 2, 1 }, qlen[] = { 128, 192, 32, 16 }, qval[] = { 0xff, 0xff, 0x80, 0x77 };
    for (size_t ci = 0; ci < sizeof k_cases / sizeof *k_cases; ci++) {
        const gcase *c = &k_cases[ci];
        sl_qgemm_fn g[NKERNELS];
        int path[NKERNELS];
        const int ng = gemm_kernels(c->type, g, path);
        tk_rng r = { 0x7f7f + ci };
        const int64_t n = 1024, rows = 19;
        const int nv = 24;
        const size_t rb = sl_row_bytes(c->type, n), ys = (size_t)(n / c->blck) * (size_t)c->act_bytes;
        uint8_t *w = make_weights(&r, c, rows, n, false), *y = malloc(ys * nv);
        float *x = malloc((size_t)n * sizeof *x), *out = malloc((size_t)rows * nv * sizeof *out);
        cr_assert(y && x && out);
        for (int64_t b = 0; b < rows * (n / c->blck); b++)   /* Q4_K qs; Q6_K ql, qh; Q8_0 qs; MXFP4 qs (all +12) */
            memset(w + (size_t)b * (size_t)c->bytes + qoff[ci], qval[ci], (size_t)qlen[ci]);
        for (int v = 0; v < nv; v++) {
            for (int64_t i = 0; i < n; i++) x[i] = v % 3 == 0 ? 1.0f : v % 3 == 1 ? -1.0f : (i & 1 ? -2.0f : 2.0f);
            c->quant(x, y + (size_t)v * ys, n);
        }
        for (int gi = 0; gi < ng; gi++) {
            cr_assert(g[gi](w, rb, rows, y, ys, nv, n, out, rows));
            for (int v = 0; v < nv; v++)
                for (int64_t i = 0; i < rows; i++)
                    cr_assert(same_bits(c->ref(w + (size_t)i * rb, y + (size_t)v * ys, n), out[(size_t)v * rows + i]),
                              "%s path %d vector %d row %lld", sl_type_name(c->type), path[gi], v, (long long)i);
        }
        free(w);
        free(y);
        free(x);
        free(out);
    }
}

/* A non-finite activation block (the quantizer's d = NaN, zero quants) gives NaN as the dot does. */
Test(gemm, nonfinite_activations_stay_visible)
{
  skip_without_gemm();
  for (size_t ci = 0; ci < sizeof k_cases / sizeof *k_cases; ci++) {
    const gcase *c = &k_cases[ci];
    sl_qgemm_fn gs[NKERNELS];
    int path[NKERNELS];
    const int ng = gemm_kernels(c->type, gs, path);
    for (int gi = 0; gi < ng; gi++) {
      const sl_qgemm_fn g = gs[gi];
      tk_rng r = { 0x4a4a + ci };
      const int64_t n = 512, rows = 18;
      const int nv = 20;
      uint8_t *w = make_weights(&r, c, rows, n, false);
      float *x = malloc((size_t)n * nv * sizeof *x), *out = malloc((size_t)rows * nv * sizeof *out);
      const size_t ys = (size_t)(n / c->blck) * (size_t)c->act_bytes;
      uint8_t *y = malloc(ys * nv);
      cr_assert(x && out && y);
      for (int64_t i = 0; i < n * nv; i++) x[i] = (float)tk_gauss(&r);
      x[5 * n + 300] = NAN;
      x[11 * n + 7] = INFINITY;
      for (int v = 0; v < nv; v++) c->quant(x + (size_t)v * n, y + (size_t)v * ys, n);
      cr_assert(g(w, sl_row_bytes(c->type, n), rows, y, ys, nv, n, out, rows));
      for (int v = 0; v < nv; v++)
        for (int64_t i = 0; i < rows; i++) {
          const float want = c->ref(w + (size_t)i * sl_row_bytes(c->type, n), y + (size_t)v * ys, n);
          cr_assert(same_bits(want, out[(size_t)v * rows + i]), "path %d vector %d row %lld", path[gi], v, (long long)i);
          cr_assert(isnan(out[(size_t)v * rows + i]) == (v == 5 || v == 11));
        }
      free(w);
      free(x);
      free(out);
      free(y);
    }
  }
}

/* sl_matmul with 2 threads over a batch (the GEMM where there is one, under each path this CPU
 * runs) equals n = 1 products of each vector (decode's products) bit for bit, and the GEMM
 * switched off gives the same bits. */
Test(gemm, matmul_batch_equals_single_vector_products)
{
    sl_pool *pool = sl_pool_create(2);
    cr_assert(pool);
    const int nbs[] = { 16, 17, 45, 100 };
    for (size_t p = 0; p <= NPATHS; p++) {
        const int mode = p < NPATHS ? k_paths[p] : SL_GEMM_AUTO;
        if (sl_gemm_force(mode) != 0 && mode != SL_GEMM_AUTO) continue;
        printf("gemm (mode %d): %s\n", mode, sl_gemm_name());
        for (size_t ci = 0; ci < sizeof k_cases / sizeof *k_cases; ci++) {
            const gcase *c = &k_cases[ci];
            tk_rng r = { 0x51ce + ci };
            const int64_t rows = 300, n = 2048;
            uint8_t *w = make_weights(&r, c, rows, n, false);
            const size_t rb = sl_row_bytes(c->type, n);
            for (size_t k = 0; k < sizeof nbs / sizeof *nbs; k++) {
                const int nb = nbs[k];
                float *x = malloc((size_t)n * nb * sizeof *x), *batch = malloc((size_t)rows * nb * sizeof *batch);
                float *off = malloc((size_t)rows * nb * sizeof *off), *one = malloc((size_t)rows * sizeof *one);
                cr_assert(x && batch && off && one);
                for (int64_t i = 0; i < n * nb; i++) x[i] = (float)(ldexp(1.0, (int)(i / n % 9) - 4) * tk_gauss(&r));
                sl_matmul(pool, c->type, w, rows, n, rb, x, nb, batch, rows);
                sl_gemm_force(SL_GEMM_OFF);
                sl_matmul(pool, c->type, w, rows, n, rb, x, nb, off, rows);
                sl_gemm_force(mode);
                for (int v = 0; v < nb; v++) {
                    sl_matmul(pool, c->type, w, rows, n, rb, x + (size_t)v * n, 1, one, rows);
                    for (int64_t i = 0; i < rows; i++) {
                        cr_assert(same_bits(one[i], batch[(size_t)v * rows + i]), "mode %d %s nb %d vector %d row %lld",
                                  mode, sl_type_name(c->type), nb, v, (long long)i);
                        cr_assert(same_bits(one[i], off[(size_t)v * rows + i]));
                    }
                }
                free(x);
                free(batch);
                free(off);
                free(one);
            }
            free(w);
        }
    }
    sl_gemm_force(SL_GEMM_AUTO);
    sl_pool_free(pool);
}

/* The setting: forcing a path this CPU lacks changes nothing; off, each path and auto say what
 * runs per type; a forced path is a ceiling (each type takes the fastest allowed kernel it has). */
Test(gemm, force_reports_and_keeps_the_setting)
{
    cr_assert_eq(sl_gemm_force(SL_GEMM_OFF), 0);
    cr_assert_null(sl_gemm_for(SL_TYPE_Q4_K));
    cr_assert(strstr(sl_gemm_name(), "Q4_K dots"), "%s", sl_gemm_name());
    cr_assert_eq(sl_gemm_force(42), -EINVAL);
    for (size_t p = 0; p < NPATHS; p++) {
        const int rc = sl_gemm_force(k_paths[p]);
        printf("force %d: %d, %s\n", k_paths[p], rc, sl_gemm_name());
        if (rc == 0) {
            cr_assert_not_null(sl_gemm_for(SL_TYPE_Q4_K));
            cr_assert_not_null(sl_gemm_for(SL_TYPE_Q6_K));
            cr_assert_null(sl_gemm_for(SL_TYPE_Q5_K));
            if (k_paths[p] == SL_GEMM_AVX2) {   /* no AVX2 Q8_0 or MXFP4 GEMM */
                cr_assert_null(sl_gemm_for(SL_TYPE_Q8_0));
                cr_assert_null(sl_gemm_for(SL_TYPE_MXFP4));
            } else {
                cr_assert_not_null(sl_gemm_for(SL_TYPE_Q8_0));
                cr_assert_not_null(sl_gemm_for(SL_TYPE_MXFP4));
            }
        } else {
            cr_assert_eq(rc, -ENOTSUP);
        }
    }
    cr_assert_eq(sl_gemm_force(SL_GEMM_OFF), 0);
    for (size_t p = 0; p < NPATHS; p++)
        if (sl_gemm_force(k_paths[p]) == -ENOTSUP)
            cr_assert_null(sl_gemm_for(SL_TYPE_Q4_K), "a refused path changed the setting");
    sl_gemm_force(SL_GEMM_AUTO);
}

/* SLUICE_GEMM through sluice_debug_env (what the sluice command applies): unknown values and paths
 * this machine lacks are refused naming the variable; a valid one takes effect. */
Test(gemm, debug_env_applies_and_checks_sluice_gemm)
{
    char err[256];
    setenv("SLUICE_GEMM", "fast", 1);
    cr_assert_eq(sluice_debug_env(err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "SLUICE_GEMM"), "%s", err);
    setenv("SLUICE_GEMM", "off", 1);
    cr_assert_eq(sluice_debug_env(err, sizeof err), 0, "%s", err);
    cr_assert_null(sl_gemm_for(SL_TYPE_Q4_K));
    for (size_t p = 0; p < NPATHS; p++) {
        static const char *const names[] = { "amx", "vnni", "avx2" };
        setenv("SLUICE_GEMM", names[p], 1);
        const int rc = sluice_debug_env(err, sizeof err);
        const bool can = sl_gemm_force(k_paths[p]) == 0;
        cr_assert_eq(rc, can ? 0 : -EINVAL, "%s: %s", names[p], err);
    }
    unsetenv("SLUICE_GEMM");
    sl_gemm_force(SL_GEMM_AUTO);
}

/* The planner counts, per thread, sl_gemm_scratch_bytes of the widest product and, for the thread
 * that prepares, sl_mm_scratch_bytes (runtime/plan/planner.c): the buffers the kernels really grow
 * must stay inside those bounds (a 2048-token prompt at 1 GiB was OOM-killed by 6 MiB of uncounted
 * scratch).  Widths and vector counts grow, so the buffer's size is always the latest request's. */
Test(gemm, scratch_stays_within_the_planned_bound)
{
    static const int64_t widths[] = { 512, 1536, 4096 };
    static const int counts[] = { 16, 64, 300 };
    for (size_t ci = 0; ci < sizeof k_cases / sizeof *k_cases; ci++) {
        sl_qgemm_fn g[NKERNELS];
        int path[NKERNELS];
        const int ng = gemm_kernels_v(k_cases[ci].type, g, path, false);
        for (int gi = 0; gi < ng; gi++)
            for (size_t i = 0; i < 3; i++) {
                tk_rng r = { 0x5c7a + ci };
                cr_assert(check_gemm(&k_cases[ci], g[gi], &r, 16, widths[i], counts[i], false));
                const size_t got = sl_scratch_size(SL_SCRATCH_GEMM);
                const size_t bound = sl_scratch_cap(sl_gemm_scratch_bytes(widths[2], counts[2]));
                cr_assert_leq(got, bound, "%s path %d n %lld nv %d: %zu bytes > the planned %zu", sl_type_name(k_cases[ci].type),
                              path[gi], (long long)widths[i], counts[i], got, bound);
            }
    }
    /* the activations: every quantized type's format at a width of 2304 (Q8_K and Q8_0 blocks) */
    static const int types[] = { SL_TYPE_Q4_K, SL_TYPE_Q8_0, SL_TYPE_Q4_1, SL_TYPE_IQ2_XS };
    const int64_t cols = 2304;
    const int nb = 40;
    float *x = malloc((size_t)nb * cols * sizeof *x);
    cr_assert_not_null(x);
    for (int64_t i = 0; i < nb * cols; i++) x[i] = (float)((i * 7919) % 201 - 100) / 37.0f;
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        sl_mm_input in;
        sl_mm_prepare(NULL, types[t], x, nb, cols, &in);
        cr_assert_leq(sl_scratch_size(SL_SCRATCH_ACT), sl_scratch_cap(sl_mm_scratch_bytes(cols, nb)), "%s",
                      sl_type_name(types[t]));
    }
    free(x);
}
