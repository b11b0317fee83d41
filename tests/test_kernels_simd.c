/* tests/test_kernels_simd.c — the fast kernels (kernels/simd.h) and the threaded matmul.
 *
 * References:
 *   - the portable integer dots against an independent float64 sum of dequantized weights
 *     (types.h's dequantizers, which test_kernels.c checks bit-exactly) times dequantized
 *     activations, within a bound derived from the few f32 roundings of the canonical steps;
 *   - the activation quantizers against their definition (element error, bsums, scales);
 *   - every SIMD path this CPU has against the portable reference: same bytes (quantizers), same
 *     float bits (integer dots), within 2*gamma_n*sum|w*x| (float dots);
 *   - sl_matmul: the same bits whatever the batch size, thread count and row split, under every
 *     path; exact mode equals the reference dot.
 * Data: fixed-seed random blocks (random quant bytes, f16 scales with exponents in [-3, 3] or
 * wider), Gaussian activations with per-block magnitudes spanning 2^-10..2^6.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/f16.h"
#include "kernels/ops.h"
#include "kernels/simd.h"
#include "kernels/types.h"
#include "test_kernels_util.h"

typedef struct qcase {
    int type, blck, bytes;
    int half_at[2];           /* f16 fields of the weight block (-1: none) */
    bool k;                   /* activations are Q8_K (else Q8_0) */
} qcase;

static const qcase k_cases[] = {
    { SL_TYPE_Q4_0, 32, 18, { 0, -1 }, false },    { SL_TYPE_Q8_0, 32, 34, { 0, -1 }, false },
    { SL_TYPE_Q4_K, 256, 144, { 0, 2 }, true },    { SL_TYPE_Q5_K, 256, 176, { 0, 2 }, true },
    { SL_TYPE_Q6_K, 256, 210, { 208, -1 }, true },
};
#define N_CASES ((int)(sizeof k_cases / sizeof k_cases[0]))


static void fill_weights(tk_rng *r, const qcase *c, uint8_t *w, int nblocks, int emin, int emax)
{
    tk_bytes(r, w, (size_t)nblocks * c->bytes);
    for (int i = 0; i < nblocks; i++)
        for (int k = 0; k < 2; k++) {
            if (c->half_at[k] < 0) continue;
            const uint16_t h = tk_half_in(r, emin, emax);
            w[(size_t)i * c->bytes + c->half_at[k]] = (uint8_t)h;
            w[(size_t)i * c->bytes + c->half_at[k] + 1] = (uint8_t)(h >> 8);
        }
}

/* Gaussian values, each block of 32 scaled by 2^e, e in [-10, 6]; a few exact zeros and one
 * all-zero block when n allows (the quantizers' d = 0 case). */
static void fill_acts(tk_rng *r, float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i += 32) {
        const double sc = ldexp(1.0, (int)(tk_next(r) % 17) - 10);
        for (int j = 0; j < 32; j++) x[i + j] = (float)(tk_gauss(r) * sc);
        x[i + (int64_t)(tk_next(r) % 32)] = 0;
    }
    if (n >= 512) memset(x + 256, 0, 256 * sizeof *x);
}

static const sl_kernel_set *portable(void) { return sl_kernels_for(SL_KPATH_PORTABLE); }

/* max |x[i]|, i < n, as a plain compare: gcc 12 for aarch64 crashes (internal compiler error in
 * vect_transform_reduction) vectorizing an fmax() reduction over doubles. */
static double max_abs(const float *x, int n)
{
    double m = 0;
    for (int i = 0; i < n; i++) m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

/* "native: avx2 avx512" plus the SIMD paths this CPU lacks (checked elsewhere: AVX-512 under SIMDe
 * by test_kernels_avx512_emu on x86, NEON under qemu by scripts/test-arm64.sh), for the summary
 * lines: a pass must say what it covered. */
static const char *paths_ran(void)
{
    static char buf[128];
    char lack[64] = "";
    snprintf(buf, sizeof buf, "native:");
    for (int p = 1; p < SL_KPATH_COUNT; p++) {
        char *dst = sl_kernels_available(p) ? buf : lack;
        const size_t cap = sl_kernels_available(p) ? sizeof buf : sizeof lack;
        snprintf(dst + strlen(dst), cap - strlen(dst), " %s", sl_kpath_name(p));
    }
    if (*lack) snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "; not on this CPU:%s", lack);
    return buf;
}

/* ---- activation quantizers ------------------------------------------------------------------ */

Test(actq, q8_0_and_q8_k_follow_their_definition)
{
    tk_rng r = { 101 };
    const int64_t n = 2048;
    float *x = malloc(n * sizeof *x);
    fill_acts(&r, x, n);
    uint8_t *q0 = malloc((size_t)(n / 32) * SL_Q8_0_BYTES), *qk = malloc((size_t)(n / 256) * SL_Q8_K_BYTES);
    sl_quantize_act_q8_0(x, q0, n);
    sl_quantize_act_q8_k(x, qk, n);
    for (int64_t b = 0; b < n / 32; b++) {
        const uint8_t *blk = q0 + b * SL_Q8_0_BYTES;
        const double amax = max_abs(x + b * 32, 32);
        const double d = tk_half_value((uint16_t)(blk[0] | blk[1] << 8));
        /* d is amax/127 rounded to f16 (relative error <= 2^-11); q = x*127/amax rounded, so the
         * element error in units of amax/127 is <= 0.5 plus the f32 roundings */
        cr_assert_leq(fabs(d - amax / 127), amax / 127 * 0x1p-11 + 1e-30, "block %lld d %g amax %g", (long long)b, d, amax);
        for (int j = 0; j < 32; j++) {
            const int q = (int8_t)blk[2 + j];
            cr_assert(q >= -127 && q <= 127);
            if (amax > 0) cr_assert_leq(fabs(q - x[b * 32 + j] * 127 / amax), 0.5 + 1e-4);
            else cr_assert_eq(q, 0);
        }
    }
    for (int64_t b = 0; b < n / 256; b++) {
        const uint8_t *blk = qk + b * SL_Q8_K_BYTES;
        float d;
        memcpy(&d, blk, 4);
        const double amax = max_abs(x + b * 256, 256);
        cr_assert_leq(fabs(d - amax / 127), amax / 127 * 0x1p-22, "Q8_K block %lld", (long long)b);
        for (int k = 0; k < 16; k++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) {
                const int q = (int8_t)blk[4 + 16 * k + j];
                cr_assert(q >= -127 && q <= 127);
                if (amax > 0) cr_assert_leq(fabs(q - x[b * 256 + 16 * k + j] * 127 / amax), 0.5 + 1e-4);
                sum += q;
            }
            int16_t bs;
            memcpy(&bs, blk + 4 + 256 + 2 * k, 2);
            cr_assert_eq(bs, sum, "bsums[%d] of block %lld", k, (long long)b);
        }
    }
    free(x);
    free(q0);
    free(qk);
}

Test(actq, every_path_gives_the_portable_bytes)
{
    tk_rng r = { 102 };
    const int64_t n = 4096;
    float *x = malloc(n * sizeof *x);
    const size_t b0 = (size_t)(n / 32) * SL_Q8_0_BYTES, bk = (size_t)(n / 256) * SL_Q8_K_BYTES;
    uint8_t *ref0 = malloc(b0), *refk = malloc(bk), *got0 = malloc(b0), *gotk = malloc(bk);
    int checked = 0;
    for (int rep = 0; rep < 20; rep++) {
        fill_acts(&r, x, n);
        if (rep == 1) /* rounding ties: values that land exactly on k + 0.5 after scaling */
            for (int64_t i = 0; i < n; i++) x[i] = (float)((int)(tk_next(&r) % 255) - 127) * 0.5f + (i % 32 == 0 ? 127 : 0);
        if (rep == 2) { /* non-finite inputs: the block becomes d = NaN, q = 0 on every path */
            x[5] = NAN;
            x[300] = INFINITY;
            x[1000] = -INFINITY;
            x[4095] = -NAN;
        }
        portable()->quantize_q8_0(x, ref0, n);
        portable()->quantize_q8_k(x, refk, n);
        for (int p = 1; p < SL_KPATH_COUNT; p++) {
            const sl_kernel_set *ks = sl_kernels_for(p);
            if (!ks) continue;
            ks->quantize_q8_0(x, got0, n);
            ks->quantize_q8_k(x, gotk, n);
            cr_assert_eq(memcmp(ref0, got0, b0), 0, "%s Q8_0 activations differ (rep %d)", ks->name, rep);
            cr_assert_eq(memcmp(refk, gotk, bk), 0, "%s Q8_K activations differ (rep %d)", ks->name, rep);
            checked++;
        }
    }
    fprintf(stderr, "actq: %d SIMD quantizer runs byte-identical to portable (%s)\n", checked, paths_ran());
    free(x); free(ref0); free(refk); free(got0); free(gotk);
}

/* ---- integer dots ---------------------------------------------------------------------------- */

/* Dequantized activation element e. */
static double act_value(const qcase *c, const uint8_t *y, int64_t e)
{
    if (c->k) {
        const uint8_t *b = y + (e / 256) * SL_Q8_K_BYTES;
        float d;
        memcpy(&d, b, 4);
        return (double)d * (int8_t)b[4 + e % 256];
    }
    const uint8_t *b = y + (e / 32) * SL_Q8_0_BYTES;
    return tk_half_value((uint16_t)(b[0] | b[1] << 8)) * (int8_t)b[2 + e % 32];
}

/* Reference dot in double and the magnitude B its error bound scales with.  K-quant weights are
 * split into their scale part (the block with dmin = 0) and min part (d = 0), each exact in f32,
 * because the kernels round d*S and dmin*M separately. */
static void ref_dot(const qcase *c, const uint8_t *w, const uint8_t *y, int64_t n, double *dot, double *mag)
{
    const sl_type_info *ti = sl_type_get(c->type);
    const int64_t nb = n / c->blck;
    uint8_t *tmp = malloc((size_t)nb * c->bytes);
    float *a = malloc(n * sizeof *a), *m = calloc((size_t)n, sizeof *m);
    memcpy(tmp, w, (size_t)nb * c->bytes);
    if (c->half_at[1] >= 0)
        for (int64_t i = 0; i < nb; i++) memset(tmp + i * c->bytes + c->half_at[1], 0, 2);
    ti->dequant(tmp, a, n);
    if (c->half_at[1] >= 0) {
        memcpy(tmp, w, (size_t)nb * c->bytes);
        for (int64_t i = 0; i < nb; i++) memset(tmp + i * c->bytes + c->half_at[0], 0, 2);
        ti->dequant(tmp, m, n);
    }
    double s = 0, b = 0;
    for (int64_t e = 0; e < n; e++) {
        const double v = act_value(c, y, e);
        s += ((double)a[e] + m[e]) * v;
        b += (fabs(a[e]) + fabs(m[e])) * fabs(v);
    }
    *dot = s;
    *mag = b;
    free(tmp); free(a); free(m);
}

Test(qdot, portable_reference_against_float64)
{
    tk_rng r = { 103 };
    for (int ci = 0; ci < N_CASES; ci++) {
        const qcase *c = &k_cases[ci];
        const int nbs[] = { 1, 2, 3, 8, 17 };
        for (int k = 0; k < 5; k++) {
            const int64_t n = (int64_t)nbs[k] * c->blck;
            uint8_t *w = malloc((size_t)nbs[k] * c->bytes);
            float *x = malloc(n * sizeof *x);
            uint8_t *y = malloc((size_t)(n / 32) * SL_Q8_0_BYTES + (size_t)(n / 256 + 1) * SL_Q8_K_BYTES);
            fill_weights(&r, c, w, nbs[k], -3, 3);
            fill_acts(&r, x, n);
            (c->k ? sl_quantize_act_q8_k : sl_quantize_act_q8_0)(x, y, n);
            double want, mag;
            ref_dot(c, w, y, n, &want, &mag);
            const float got = sl_kernels_qdot(portable(), c->type)(w, y, n);
            /* Roundings in the canonical steps: per block the scale product, the int->float
             * conversion (K-quants), the product and the subtraction, plus one add per block into
             * the accumulators and 4 in the final reduction: at most (blocks + 8) relative 2^-24
             * errors of terms bounded by B. */
            const double tol = (double)(nbs[k] + 8) * 0x1p-23 * mag;
            cr_assert_leq(fabs(got - want), tol, "%s x %d blocks: got %.9g want %.9g (tol %g)",
                          sl_type_name(c->type), nbs[k], got, want, tol);
            free(w); free(x); free(y);
        }
    }
}

Test(qdot, every_path_bit_identical_to_portable)
{
    tk_rng r = { 104 };
    int checked = 0;
    for (int ci = 0; ci < N_CASES; ci++) {
        const qcase *c = &k_cases[ci];
        const int nbs[] = { 1, 2, 3, 7, 8, 16, 37, 64 };
        for (int k = 0; k < 8; k++) {
            for (int rep = 0; rep < 8; rep++) {
                const int64_t n = (int64_t)nbs[k] * c->blck;
                uint8_t *w = malloc((size_t)nbs[k] * c->bytes);
                float *x = malloc(n * sizeof *x);
                uint8_t *y = malloc((size_t)(n / 32) * SL_Q8_0_BYTES + (size_t)(n / 256 + 1) * SL_Q8_K_BYTES);
                /* rep 0: wide scales (exponents -14..15) stress the float steps */
                fill_weights(&r, c, w, nbs[k], rep == 0 ? -14 : -3, rep == 0 ? 15 : 3);
                fill_acts(&r, x, n);
                (c->k ? sl_quantize_act_q8_k : sl_quantize_act_q8_0)(x, y, n);
                const float want = sl_kernels_qdot(portable(), c->type)(w, y, n);
                for (int p = 1; p < SL_KPATH_COUNT; p++) {
                    const sl_kernel_set *ks = sl_kernels_for(p);
                    if (!ks) continue;
                    const float got = sl_kernels_qdot(ks, c->type)(w, y, n);
                    cr_assert_eq(tk_fbits(got), tk_fbits(want), "%s %s x %d blocks (rep %d): %a != portable %a", ks->name,
                                 sl_type_name(c->type), nbs[k], rep, got, want);
                    checked++;
                }
                free(w); free(x); free(y);
            }
        }
    }
    fprintf(stderr, "qdot: %d SIMD integer dots bit-identical to portable (%s)\n", checked, paths_ran());
}

/* The 4-vector forms return each single dot's bits; the activation rows are further apart than
 * their size with junk between them (a kernel must step by the stride it is given), the last one
 * ending at the end of its allocation. */
Test(qdot, four_vector_forms_equal_single_dots)
{
    tk_rng r = { 108 };
    int checked = 0;
    for (int ci = 0; ci < N_CASES; ci++) {
        const qcase *c = &k_cases[ci];
        const int nbs[] = { 1, 3, 8, 17 };
        for (int k = 0; k < 4; k++) {
            const int64_t n = (int64_t)nbs[k] * c->blck;
            const size_t row = c->k ? (size_t)(n / 256) * SL_Q8_K_BYTES : (size_t)(n / 32) * SL_Q8_0_BYTES;
            const size_t ys = row + 4 * (size_t)(k + 1);   /* keeps Q8_K's float d 4-byte aligned */
            uint8_t *w = malloc((size_t)nbs[k] * c->bytes), *y = malloc(3 * ys + row);
            float *x = malloc(n * sizeof *x);
            memset(y, 0xa5, 3 * ys + row);
            fill_weights(&r, c, w, nbs[k], k == 0 ? -14 : -3, k == 0 ? 15 : 3);
            for (int v = 0; v < 4; v++) {
                fill_acts(&r, x, n);
                (c->k ? sl_quantize_act_q8_k : sl_quantize_act_q8_0)(x, y + v * ys, n);
            }
            for (int p = 0; p < SL_KPATH_COUNT; p++) {
                const sl_kernel_set *ks = sl_kernels_for(p);
                if (!ks || !sl_kernels_qdot4(ks, c->type)) continue;
                float got[4];
                sl_kernels_qdot4(ks, c->type)(w, y, ys, n, got);
                for (int v = 0; v < 4; v++) {
                    const float want = sl_kernels_qdot(portable(), c->type)(w, y + v * ys, n);
                    cr_assert_eq(tk_fbits(got[v]), tk_fbits(want), "%s dot4 %s x %d blocks, vector %d: %a != %a", ks->name,
                                 sl_type_name(c->type), nbs[k], v, got[v], want);
                }
                checked++;
            }
            free(w); free(y); free(x);
        }
    }
    fprintf(stderr, "qdot: %d 4-vector dots bit-identical to single dots (%s)\n", checked, paths_ran());
}

/* The rows forms return each row's single dot bits, whatever the row count (the forms take rows in
 * groups and finish the rest one by one) and block count (groups of 16 blocks and a tail); rows sit
 * further apart than their size, with junk between them. */
Test(qdot, rows_forms_equal_single_dots)
{
    tk_rng r = { 109 };
    int checked = 0;
    for (int ci = 0; ci < N_CASES; ci++) {
        const qcase *c = &k_cases[ci];
        const int nbs[] = { 1, 3, 16, 17, 37, 128, 448, 513 }, rowss[] = { 1, 3, 4, 5, 8, 9 };
        for (int k = 0; k < 8; k++) {
            const int nrows = rowss[k % 6];
            const int64_t n = (int64_t)nbs[k] * c->blck;
            const size_t rb = (size_t)nbs[k] * c->bytes + 2 * (size_t)(k + 1);   /* rows 2-byte aligned, as in a file */
            const size_t ybytes = c->k ? (size_t)(n / 256) * SL_Q8_K_BYTES : (size_t)(n / 32) * SL_Q8_0_BYTES;
            uint8_t *w = malloc(rb * nrows), *y = malloc(ybytes);
            float *x = malloc(n * sizeof *x), got[9];
            memset(w, 0x5a, rb * nrows);
            for (int row = 0; row < nrows; row++) fill_weights(&r, c, w + row * rb, nbs[k], k & 1 ? -14 : -3, k & 1 ? 15 : 3);
            fill_acts(&r, x, n);
            (c->k ? sl_quantize_act_q8_k : sl_quantize_act_q8_0)(x, y, n);
            for (int p = 0; p < SL_KPATH_COUNT; p++) {
                const sl_kernel_set *ks = sl_kernels_for(p);
                if (!ks || !sl_kernels_qdotr(ks, c->type)) continue;
                sl_kernels_qdotr(ks, c->type)(w, rb, y, n, nrows, got);
                for (int row = 0; row < nrows; row++) {
                    const float want = sl_kernels_qdot(portable(), c->type)(w + row * rb, y, n);
                    cr_assert_eq(tk_fbits(got[row]), tk_fbits(want), "%s dotr %s x %d blocks, row %d of %d: %a != %a",
                                 ks->name, sl_type_name(c->type), nbs[k], row, nrows, got[row], want);
                }
                checked++;
            }
            free(w); free(y); free(x);
        }
    }
    fprintf(stderr, "qdot: %d rows forms bit-identical to single dots (%s)\n", checked, paths_ran());
}

/* ---- float dots ------------------------------------------------------------------------------ */

Test(fdot, every_path_within_bound_of_exact_sum)
{
    tk_rng r = { 105 };
    const int types[] = { SL_TYPE_F32, SL_TYPE_F16, SL_TYPE_BF16 };
    const int64_t lens[] = { 1, 7, 8, 15, 16, 31, 33, 64, 100, 255, 256, 1000, 4099 };
    int checked = 0;
    for (int ti = 0; ti < 3; ti++) {
        const sl_type_info *info = sl_type_get(types[ti]);
        for (int k = 0; k < 13; k++) {
            const int64_t n = lens[k];
            float *src = malloc(n * sizeof *src), *x = malloc(n * sizeof *x), *wf = malloc(n * sizeof *wf);
            void *w = malloc(4 * (size_t)n);
            for (int64_t i = 0; i < n; i++) {
                src[i] = (float)tk_gauss(&r);
                x[i] = (float)tk_uniform(&r, -2, 2);
            }
            info->quantize(src, w, n);
            info->dequant(w, wf, n);
            double exact = 0, mag = 0;
            for (int64_t i = 0; i < n; i++) {
                exact += (double)wf[i] * x[i];
                mag += fabs((double)wf[i] * x[i]);
            }
            /* any summation order, with or without FMA: |error| <= gamma_n * sum|w*x| */
            const double u = 0x1p-24 * (double)n, gamma = u / (1 - u);
            for (int p = 0; p < SL_KPATH_COUNT; p++) {
                const sl_kernel_set *ks = sl_kernels_for(p);
                if (!ks) continue;
                const sl_dot_fn f = ti == 0 ? ks->dot_f32 : ti == 1 ? ks->dot_f16 : ks->dot_bf16;
                const float got = f(w, x, n);
                cr_assert_leq(fabs(got - exact), gamma * mag + 1e-30, "%s %s n=%lld: %.9g vs %.9g", ks->name,
                              info->name, (long long)n, got, exact);
                checked++;
            }
            free(src); free(x); free(wf); free(w);
        }
    }
    fprintf(stderr, "fdot: %d float dots within gamma_n of the exact sum\n", checked);
}

/* ---- dispatch -------------------------------------------------------------------------------- */

static const int mm_types[] = { SL_TYPE_Q4_0, SL_TYPE_Q8_0, SL_TYPE_Q4_K, SL_TYPE_Q5_K, SL_TYPE_Q6_K,
                                SL_TYPE_F32, SL_TYPE_F16, SL_TYPE_BF16, SL_TYPE_MXFP4 };

Test(dispatch, force_and_availability)
{
    cr_assert(sl_kernels_available(SL_KPATH_PORTABLE));
    cr_assert_eq(sl_kernels_force(-2), -EINVAL);
    cr_assert_eq(sl_kernels_force(SL_KPATH_COUNT), -EINVAL);
    int widest = SL_KPATH_PORTABLE;
    for (int p = 0; p < SL_KPATH_COUNT; p++) {
        const int rc = sl_kernels_force(p);
        if (sl_kernels_available(p)) {
            cr_assert_eq(rc, 0);
            cr_assert_eq(sl_kernels_path(), p);
            cr_assert_str_eq(sl_kernels()->name, sl_kpath_name(p));
            for (int t = 0; t < SL_TYPE_COUNT; t++) {   /* forcing puts every type on the path */
                cr_assert_eq(sl_kernels_path_for_type(t), p, "%s forced, type %d", sl_kpath_name(p), t);
                cr_assert_eq(sl_kernels_for_type(t), sl_kernels_for(p));
            }
            widest = p;
        } else {
            cr_assert_eq(rc, -ENOTSUP, "forcing unavailable %s", sl_kpath_name(p));
            cr_assert_null(sl_kernels_for(p));
        }
        fprintf(stderr, "dispatch: %-8s %s\n", sl_kpath_name(p), sl_kernels_available(p) ? "available (tests run it natively)" : "not on this CPU");
    }
    /* the per-type table: base = widest path, each type on an available path no wider */
    cr_assert_eq(sl_kernels_force(SL_KPATH_AUTO), 0);
    cr_assert_eq(sl_kernels_path(), widest);
    char line[512] = "";
    for (size_t ti = 0; ti < sizeof mm_types / sizeof *mm_types; ti++) {
        const int t = mm_types[ti], p = sl_kernels_path_for_type(t);
        cr_assert(sl_kernels_available(p) && p <= widest, "%s on %s", sl_type_name(t), sl_kpath_name(p));
        cr_assert_eq(sl_kernels_for_type(t), sl_kernels_for(p));
        snprintf(line + strlen(line), sizeof line - strlen(line), " %s:%s", sl_type_name(t), sl_kpath_name(p));
    }
    cr_assert_eq(sl_kernels_for_type(-1), sl_kernels());   /* unknown ids: the base set */
    cr_assert_eq(sl_kernels_for_type(SL_TYPE_COUNT), sl_kernels());
    fprintf(stderr, "dispatch: auto per type:%s\n", line);
    sl_kernels_set_exact(true);
    cr_assert(sl_kernels_exact());
    sl_kernels_set_exact(false);
    cr_assert(!sl_kernels_exact());
}

/* kernels/dispatch.c's per-type table: every supported block type has a row (its activation
 * format and a portable integer dot, whose activation block size divides the weight block's
 * multiple), the float types and unknown ids none. */
Test(dispatch, every_block_type_has_a_traits_row)
{
    int rows = 0;
    for (int t = -2; t < SL_TYPE_COUNT + 2; t++) {
        const sl_type_info *ti = sl_type_get(t);
        const int act = sl_kernels_act(t);
        if (!sl_type_supported(t) || ti->blck == 1) {
            cr_assert_eq(act, SL_ACT_NONE, "type %d", t);
            cr_assert_null(sl_kernels_qdot(portable(), t), "type %d", t);
            continue;
        }
        cr_assert(act == SL_ACT_Q8_0 || act == SL_ACT_Q8_1 || act == SL_ACT_Q8_K, "%s: activation format %d", ti->name, act);
        cr_assert_not_null(sl_kernels_qdot(portable(), t), "%s: no portable integer dot", ti->name);
        cr_assert_eq(ti->blck % (act == SL_ACT_Q8_K ? 256 : 32), 0, "%s: blocks of %d", ti->name, ti->blck);
        rows++;
    }
    cr_assert_eq(rows, 20, "20 block types with integer dots");
}

/* ---- sl_matmul ------------------------------------------------------------------------------- */


/* A rows x cols matrix of `type` quantized from Gaussian values with the reference quantizer. */
static void *make_matrix(tk_rng *r, int type, int64_t rows, int64_t cols, size_t *row_bytes)
{
    const sl_type_info *ti = sl_type_get(type);
    *row_bytes = sl_row_bytes(type, cols);
    unsigned char *w = malloc(*row_bytes * (size_t)rows);
    float *src = malloc((size_t)cols * sizeof *src);
    for (int64_t i = 0; i < rows; i++) {
        for (int64_t j = 0; j < cols; j++) src[j] = (float)(tk_gauss(r) / sqrt((double)cols));
        ti->quantize(src, w + (size_t)i * *row_bytes, cols);
    }
    free(src);
    return w;
}

Test(matmul, batch_threads_and_row_split_do_not_change_bits, .timeout = 120)
{
    tk_rng r = { 106 };
    const int64_t rows = 300, cols = 512;
    const int nb = 7;
    sl_pool *pool2 = sl_pool_create(2), *pool3 = sl_pool_create(3);
    float *x = malloc((size_t)nb * cols * sizeof *x);
    fill_acts(&r, x, (int64_t)nb * cols);
    float *ref = malloc((size_t)nb * rows * sizeof *ref), *got = malloc((size_t)nb * rows * sizeof *got);
    for (int p = SL_KPATH_AUTO; p < SL_KPATH_COUNT; p++) {   /* auto: the per-type table's mix */
        if (sl_kernels_force(p) != 0) continue;
        for (size_t ti = 0; ti < sizeof mm_types / sizeof *mm_types; ti++) {
            const int type = mm_types[ti];
            size_t rb;
            unsigned char *w = make_matrix(&r, type, rows, cols, &rb);
            sl_matmul(pool2, type, w, rows, cols, rb, x, nb, ref, rows);
            /* one vector at a time, single thread (NULL pool) */
            for (int b = 0; b < nb; b++) sl_matmul(NULL, type, w, rows, cols, rb, x + (size_t)b * cols, 1, got + (size_t)b * rows, rows);
            cr_assert_eq(memcmp(ref, got, (size_t)nb * rows * 4), 0, "%s %s: nb=1 differs from nb=%d", sl_kpath_name(p), sl_type_name(type), nb);
            /* row pieces of 1, 64 and 235 rows on a 3-thread pool, through the prepared API */
            memset(got, 0, (size_t)nb * rows * 4);
            sl_mm_input in;
            sl_mm_prepare(pool3, type, x, nb, cols, &in);
            const int64_t cuts[] = { 0, 1, 65, 300 };
            for (int k = 0; k < 3; k++)
                sl_matmul_prepared(pool3, &in, w + (size_t)cuts[k] * rb, cuts[k + 1] - cuts[k], rb, got + cuts[k], rows);
            cr_assert_eq(memcmp(ref, got, (size_t)nb * rows * 4), 0, "%s %s: row pieces differ", sl_kpath_name(p), sl_type_name(type));
            /* each result is the path's kernel applied to (row, vector) */
            const sl_kernel_set *ks = sl_kernels_for_type(type);
            for (int64_t row = 0; row < rows; row += 37) {
                float want;
                if (type == SL_TYPE_F32 || type == SL_TYPE_F16 || type == SL_TYPE_BF16) {
                    const sl_dot_fn f = type == SL_TYPE_F32 ? ks->dot_f32 : type == SL_TYPE_F16 ? ks->dot_f16 : ks->dot_bf16;
                    want = f(w + row * rb, x + cols * 3, cols);
                } else {
                    const bool k = type != SL_TYPE_Q4_0 && type != SL_TYPE_Q8_0 && type != SL_TYPE_MXFP4;
                    uint8_t y[16 * SL_Q8_0_BYTES + 2 * SL_Q8_K_BYTES];
                    (k ? ks->quantize_q8_k : ks->quantize_q8_0)(x + cols * 3, y, cols);
                    want = sl_kernels_qdot(ks, type)(w + row * rb, y, cols);
                }
                cr_assert_eq(tk_fbits(ref[3 * rows + row]), tk_fbits(want), "%s %s row %lld", sl_kpath_name(p), sl_type_name(type), (long long)row);
            }
            free(w);
        }
    }
    sl_kernels_force(SL_KPATH_PORTABLE);
    cr_assert_eq(sl_kernels_path(), SL_KPATH_PORTABLE);
    free(x); free(ref); free(got);
    sl_pool_free(pool2);
    sl_pool_free(pool3);
}

Test(matmul, exact_mode_uses_reference_dot_and_fast_mode_is_close)
{
    tk_rng r = { 107 };
    const int64_t rows = 64, cols = 1024;
    sl_pool *pool = sl_pool_create(2);
    float *x = malloc((size_t)cols * sizeof *x), *fast = malloc(rows * sizeof *fast), *ex = malloc(rows * sizeof *ex);
    for (int64_t j = 0; j < cols; j++) x[j] = (float)tk_gauss(&r);
    for (size_t ti = 0; ti < sizeof mm_types / sizeof *mm_types; ti++) {
        const int type = mm_types[ti];
        size_t rb;
        unsigned char *w = make_matrix(&r, type, rows, cols, &rb);
        sl_kernels_set_exact(true);
        sl_matmul(pool, type, w, rows, cols, rb, x, 1, ex, rows);
        sl_kernels_set_exact(false);
        sl_matmul(pool, type, w, rows, cols, rb, x, 1, fast, rows);
        double worst = 0;
        for (int64_t row = 0; row < rows; row++) {
            const float want = sl_type_get(type)->dot(w + row * rb, x, cols);
            cr_assert_eq(tk_fbits(ex[row]), tk_fbits(want), "exact %s row %lld", sl_type_name(type), (long long)row);
            worst = fmax(worst, fabs(fast[row] - ex[row]));
        }
        /* Activation quantization (8 bits, per-block scale): relative error per element <= 1/254 of
         * the block max; with unit Gaussian x and rows of norm ~1 the dot error is ~0.004 rms.
         * 0.05 is > 10 sigma; float types must agree to f32 summation error. */
        const bool q = type != SL_TYPE_F32 && type != SL_TYPE_F16 && type != SL_TYPE_BF16;
        cr_assert_leq(worst, q ? 0.05 : 1e-4, "%s fast vs exact %g", sl_type_name(type), worst);
        fprintf(stderr, "matmul %-5s fast vs exact: max |diff| %.2e\n", sl_type_name(type), worst);
        free(w);
    }
    free(x); free(fast); free(ex);
    sl_pool_free(pool);
}

/* ---- attention helper ------------------------------------------------------------------------ */

/* sl_attn_heads against a float64 attention over the same (exactly decoded) K/V rows, for every
 * KV type and kernel path, and bit-identical to the portable path's output; and axpy on its own.
 * f32 dots of 64 terms and a softmax over <= 300 positions carry relative errors ~1e-6 on outputs of size ~1: 1e-4 leaves 100x margin, while a
 * wrong row, stride or scale moves outputs by > 0.01. */
Test(attn, head_matches_float64_every_type_and_path)
{
    tk_rng r = { 109 };
    const int hd = 64;
    const int types[] = { SL_TYPE_F32, SL_TYPE_F16, SL_TYPE_Q8_0 };
    const int ns[] = { 1, 37, 300 };
    int checked = 0;
    for (int ti = 0; ti < 3; ti++)
        for (int ni = 0; ni < 3; ni++) {
            const int type = types[ti], n = ns[ni];
            const size_t rowb = sl_row_bytes(type, hd), stride = rowb + 64;   /* rows with a gap, as in a cache */
            unsigned char *K = malloc(stride * n), *V = malloc(stride * n);
            float *src = malloc(hd * sizeof *src), *kf = malloc((size_t)n * hd * sizeof *kf), *vf = malloc((size_t)n * hd * sizeof *vf);
            float q[64], out[64], out_portable[64], att[300], tmp[64];
            for (int t = 0; t < n; t++) {
                for (int i = 0; i < hd; i++) src[i] = (float)tk_gauss(&r);
                sl_type_get(type)->quantize(src, K + t * stride, hd);
                sl_type_get(type)->dequant(K + t * stride, kf + (size_t)t * hd, hd);
                for (int i = 0; i < hd; i++) src[i] = (float)tk_gauss(&r);
                sl_type_get(type)->quantize(src, V + t * stride, hd);
                sl_type_get(type)->dequant(V + t * stride, vf + (size_t)t * hd, hd);
            }
            for (int i = 0; i < hd; i++) q[i] = (float)tk_gauss(&r);
            double sc[300], mx = -1e300, sum = 0, ref[64] = { 0 };
            for (int t = 0; t < n; t++) {
                double s = 0;
                for (int i = 0; i < hd; i++) s += (double)q[i] * kf[(size_t)t * hd + i];
                sc[t] = s * 0.125;
                mx = fmax(mx, sc[t]);
            }
            for (int t = 0; t < n; t++) sum += (sc[t] = exp(sc[t] - mx));
            for (int t = 0; t < n; t++)
                for (int i = 0; i < hd; i++) ref[i] += sc[t] / sum * vf[(size_t)t * hd + i];
            for (int p = 0; p < SL_KPATH_COUNT; p++) {
                if (sl_kernels_force(p) != 0) continue;
                /* as head 1 of a group of 3 (heads 0 and 2 get other queries): same result as alone */
                float q3[3 * 64], out3[3 * 64], att3[3 * 300];
                for (int i = 0; i < hd; i++) q3[i] = -q[i], q3[hd + i] = q[i], q3[2 * hd + i] = 0.5f * q[i];
                sl_attn_heads(q, 1, K, V, type, stride, n, hd, 0.125f, att, tmp, out);
                sl_attn_heads(q3, 3, K, V, type, stride, n, hd, 0.125f, att3, tmp, out3);
                cr_assert_eq(memcmp(out, out3 + hd, sizeof out), 0, "%s %s n=%d: grouped head differs", sl_kpath_name(p),
                             sl_type_name(type), n);
                for (int i = 0; i < hd; i++)
                    cr_assert_leq(fabs(out[i] - ref[i]), 1e-4, "%s %s n=%d out[%d] %g vs %g", sl_kpath_name(p),
                                  sl_type_name(type), n, i, out[i], ref[i]);
                /* and the portable path's bits (p = 0 runs first): attention must not make logits
                 * depend on the CPU (scores through the weight-row dots did, see ops.c) */
                if (p == 0) memcpy(out_portable, out, sizeof out);
                else cr_assert_eq(memcmp(out, out_portable, sizeof out), 0, "%s %s n=%d: head output differs from portable",
                                  sl_kpath_name(p), sl_type_name(type), n);
                checked++;
            }
            free(K); free(V); free(src); free(kf); free(vf);
        }
    sl_kernels_force(SL_KPATH_PORTABLE);
    fprintf(stderr, "attn: %d head attentions within 1e-4 of float64, SIMD ones bit-identical to portable\n", checked);
}

/* The attention dots and axpy give the same bits on every path (that is their contract: attention
 * must not make logits depend on the CPU), for lengths that exercise every stage of the fixed order
 * (steps of 32, a step of 8, a tail, f16 rows longer than one conversion piece of 256), and stay
 * within 1e-5 relative of a float64 dot (n <= 1000 terms of size ~1: f32 error ~n*6e-8). */
Test(attn, dots_and_axpy_bit_identical_across_paths)
{
    tk_rng r = { 111 };
    const int ns[] = { 1, 7, 8, 31, 32, 40, 64, 128, 257, 300, 1000 };
    float w[1000], x[1000], o[1000], o0[1000];
    uint16_t h[1000];
    int checked = 0;
    for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++) {
        const int n = ns[ni];
        for (int i = 0; i < n; i++) {
            w[i] = (float)tk_gauss(&r);
            x[i] = (float)tk_gauss(&r);
            h[i] = sl_f32_to_f16(w[i]);
        }
        double ref32 = 0, ref16 = 0, mag = 0;
        for (int i = 0; i < n; i++) {
            ref32 += (double)w[i] * x[i];
            ref16 += (double)sl_f16_to_f32(h[i]) * x[i];
            mag += fabs((double)w[i] * x[i]);
        }
        const sl_kernel_set *p0 = sl_kernels_for(SL_KPATH_PORTABLE);
        const float a32 = p0->adot_f32(w, x, n), a16 = p0->adot_f16(h, x, n);
        cr_assert_leq(fabs(a32 - ref32), 1e-5 * mag + 1e-30, "n=%d adot_f32 %g vs %g", n, a32, ref32);
        cr_assert_leq(fabs(a16 - ref16), 1e-5 * mag + 1e-30, "n=%d adot_f16 %g vs %g", n, a16, ref16);
        for (int i = 0; i < n; i++) o0[i] = x[i];
        p0->axpy_f16(o0, 0.37f, h, n);
        p0->axpy_f32(o0, -1.3f, w, n);
        for (int p = 1; p < SL_KPATH_COUNT; p++) {
            const sl_kernel_set *ks = sl_kernels_for(p);
            if (!ks || !sl_kernels_available(p)) continue;
            float b32 = ks->adot_f32(w, x, n), b16 = ks->adot_f16(h, x, n);
            cr_assert_eq(memcmp(&a32, &b32, 4), 0, "%s n=%d adot_f32 %a vs portable %a", ks->name, n, b32, a32);
            cr_assert_eq(memcmp(&a16, &b16, 4), 0, "%s n=%d adot_f16 %a vs portable %a", ks->name, n, b16, a16);
            for (int i = 0; i < n; i++) o[i] = x[i];
            ks->axpy_f16(o, 0.37f, h, n);
            ks->axpy_f32(o, -1.3f, w, n);
            cr_assert_eq(memcmp(o, o0, (size_t)n * 4), 0, "%s n=%d axpy differs from portable", ks->name, n);
            checked++;
        }
    }
    fprintf(stderr, "attn: adot/axpy bit-identical to portable on %d (path, length) pairs (%s)\n", checked, paths_ran());
}

/* A NaN or infinity in an activation vector makes the outputs NaN in fast mode too (exact mode
 * propagates it through the f32 dots): the quantizers must not turn it into finite garbage, or
 * non-finite model data would go unnoticed. */
Test(matmul, non_finite_activations_give_nan)
{
    tk_rng r = { 110 };
    const int64_t rows = 8, cols = 512;
    float *x = malloc((size_t)cols * sizeof *x), out[8];
    for (int p = 0; p < SL_KPATH_COUNT; p++) {
        if (sl_kernels_force(p) != 0) continue;
        for (size_t ti = 0; ti < sizeof mm_types / sizeof *mm_types; ti++) {
            size_t rb;
            unsigned char *w = make_matrix(&r, mm_types[ti], rows, cols, &rb);
            for (int k = 0; k < 2; k++) {
                for (int64_t j = 0; j < cols; j++) x[j] = (float)tk_gauss(&r);
                x[300] = k ? INFINITY : NAN;
                sl_matmul(NULL, mm_types[ti], w, rows, cols, rb, x, 1, out, rows);
                for (int64_t row = 0; row < rows; row++)
                    cr_assert(isnan(out[row]) || (k && isinf(out[row])), "%s %s: %s input gave %g", sl_kpath_name(p),
                              sl_type_name(mm_types[ti]), k ? "inf" : "NaN", out[row]);
            }
            free(w);
        }
    }
    sl_kernels_force(SL_KPATH_PORTABLE);
    free(x);
}
