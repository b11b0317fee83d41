/* tests/test_quant.c — reference quantizers: quantize -> dequantize round trips on random data.
 *
 * Relative RMS error = sqrt(sum (x - x')^2 / sum x^2).  Per-type bounds come from the step size
 * each format gives Gaussian data (uniform rounding error has rms step/sqrt(12)), checked against
 * measurements (1M samples, seed 1, these quantizers, which follow ggml's reference algorithms):
 *
 *   type  model                                                   measured   bound
 *   F16   rel. rounding 2^-11, rms ~0.4 * 2^-11                   0.00021    0.00025
 *   BF16  rel. rounding 2^-8,  rms ~0.4 * 2^-8                    0.00166    0.0020
 *   Q8_0  step amax/127, amax(32 normals) ~2.07σ: 0.0047σ          0.0053     0.0060
 *   Q4_0  step amax/8: 0.075σ, plus the clamp of +8 to +7          0.0858     0.095
 *   Q4_K  15 steps over max-min (~4.1σ) of 32: 0.079σ, less after
 *         the (scale, min) search                                  0.0713     0.080
 *   Q5_K  31 steps: 0.038σ                                         0.0361     0.040
 *   Q6_K  step amax(16)/32 ~0.055σ: 0.016σ, plus 8-bit scales      0.0177     0.020
 *
 * The bounds carry ~10% margin over the measurements; with 2^16 samples the statistical spread of
 * an rms estimate is well under 1%.  A quantizer that mis-rounds, mis-packs or picks a bad scale
 * lands far outside them (a one-level systematic error alone doubles the Q4 figures).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/f16.h"
#include "kernels/types.h"
#include "test_kernels_util.h"

static const struct { int type; double bound; } k_bounds[] = {
    {SL_TYPE_F32, 0.0},     {SL_TYPE_F16, 0.00025}, {SL_TYPE_BF16, 0.0020},
    {SL_TYPE_Q8_0, 0.0060}, {SL_TYPE_Q4_0, 0.095},  {SL_TYPE_Q4_K, 0.080},
    {SL_TYPE_Q5_K, 0.040},  {SL_TYPE_Q6_K, 0.020},
};
#define N_BOUNDS ((int)(sizeof k_bounds / sizeof k_bounds[0]))
#define N (1 << 16)

/* Quantize x[0..n) with type t, dequantize into y, return the relative rms error. */
static double roundtrip(const sl_type_info *t, const float *x, float *y, int64_t n)
{
    void *q = malloc(4 * (size_t)n);          /* no type needs more than 4 bytes per element */
    t->quantize(x, q, n);
    t->dequant(q, y, n);
    free(q);
    double se = 0, sx = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = (double)x[i] - y[i];
        se += d * d;
        sx += (double)x[i] * x[i];
    }
    return sqrt(se / sx);
}

/* Gaussian data at three scales (the formats are scale-free up to f16 range limits; 300 and
 * 0.02 probe both ends used by real weights) and a shifted uniform distribution (exercises the
 * K-quants' min and Q4_0/Q8_0 on one-sided blocks). */
static void make_data(int dist, float *x, int64_t n)
{
    tk_rng r = {100 + (uint64_t)dist};
    for (int64_t i = 0; i < n; i++) {
        switch (dist) {
        case 0: x[i] = (float)tk_gauss(&r); break;
        case 1: x[i] = (float)(0.02 * tk_gauss(&r)); break;
        case 2: x[i] = (float)(300 * tk_gauss(&r)); break;
        default: x[i] = (float)tk_uniform(&r, -1, 3); break;
        }
    }
}

Test(quant, roundtrip_rms_within_bounds)
{
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    for (int dist = 0; dist < 4; dist++) {
        make_data(dist, x, N);
        for (int k = 0; k < N_BOUNDS; k++) {
            const sl_type_info *t = sl_type_get(k_bounds[k].type);
            const double e = roundtrip(t, x, y, N);
            cr_log_info("dist %d %-5s rel rms %.5f (bound %.5f)", dist, t->name, e, k_bounds[k].bound);
            cr_expect(e <= k_bounds[k].bound, "dist %d %s: rel rms %.5f > %.5f", dist, t->name, e,
                      k_bounds[k].bound);
        }
    }
    free(x);
    free(y);
}

/* Q8_0 and Q4_0 have per-element guarantees: with the stored scale d (f16), |x - x'| <= d/2 for a
 * rounded value, plus |q| * |d - d_exact| <= 127 * 2^-11 * d (Q8_0) or 8 * 2^-11 * d (Q4_0) from
 * rounding d to f16; Q4_0 also clamps q = 16 to 15 (the value opposite the block's extreme, at
 * most d away).  Bounds used: 0.5 + 127/2048 < 0.57 (Q8_0) and 1 + 8/2048 < 1.01 (Q4_0). */
Test(quant, legacy_elementwise_error)
{
    tk_rng r = {7};
    enum { NB = 2048 };
    float *x = malloc(sizeof(float) * 32 * NB), *y = malloc(sizeof(float) * 32 * NB);
    uint8_t *q = malloc(34 * NB);
    for (int i = 0; i < 32 * NB; i++) x[i] = (float)(tk_gauss(&r) * (1 + (i / 32) % 7));
    const struct { int type, bytes; double k; } cases[] = {{SL_TYPE_Q8_0, 34, 0.57}, {SL_TYPE_Q4_0, 18, 1.01}};
    for (int c = 0; c < 2; c++) {
        const sl_type_info *t = sl_type_get(cases[c].type);
        t->quantize(x, q, 32 * NB);
        t->dequant(q, y, 32 * NB);
        int bad = 0;
        for (int b = 0; b < NB; b++) {
            const uint8_t *blk = q + (size_t)b * cases[c].bytes;
            const double d = fabs(tk_half_value((uint16_t)(blk[0] | (blk[1] << 8))));
            for (int i = 0; i < 32; i++)
                if (fabs((double)x[32 * b + i] - y[32 * b + i]) > cases[c].k * d) bad++;
        }
        cr_expect_eq(bad, 0, "%s: %d elements off by more than %.2f d", t->name, bad, cases[c].k);
    }
    free(x);
    free(y);
    free(q);
}

/* Edge blocks: all zeros must come back as exact zeros (no NaN from 0/0 scales); a constant block
 * and a block with one spike must stay accurate (the spike sets the scale, so it must survive to
 * within one step; the rest may round to zero). */
Test(quant, degenerate_blocks)
{
    float x[512], y[512];
    for (int k = 0; k < N_BOUNDS; k++) {
        const sl_type_info *t = sl_type_get(k_bounds[k].type);
        uint8_t q[4 * 512];

        memset(x, 0, sizeof x);
        t->quantize(x, q, 512);
        t->dequant(q, y, 512);
        for (int i = 0; i < 512; i++) cr_assert_eq(y[i], 0.0f, "%s: zero block elem %d = %g", t->name, i, y[i]);

        for (int i = 0; i < 512; i++) x[i] = -0.75f;
        t->quantize(x, q, 512);
        t->dequant(q, y, 512);
        for (int i = 0; i < 512; i++)
            cr_assert(fabsf(y[i] + 0.75f) <= 0.75f * 0.01f, "%s: constant block elem %d = %g", t->name, i, y[i]);

        for (int i = 0; i < 512; i++) x[i] = 0.001f * (float)((i * 37) % 11 - 5);
        x[77] = 40.0f;
        x[300] = -40.0f;
        t->quantize(x, q, 512);
        t->dequant(q, y, 512);
        cr_assert(fabsf(y[77] - 40.0f) <= 40.0f / 7, "%s: spike +40 -> %g", t->name, y[77]);
        cr_assert(fabsf(y[300] + 40.0f) <= 40.0f / 7, "%s: spike -40 -> %g", t->name, y[300]);
        for (int i = 0; i < 512; i++) cr_assert(isfinite(y[i]), "%s: elem %d not finite", t->name, i);
    }
}
