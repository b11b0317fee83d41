/* kernels/qdot.c — portable activation quantizers and integer dot products (the reference every
 * SIMD path must reproduce bit for bit; see kernels/simd.h for the canonical float steps).
 *
 * Integer sums are exact (bounds noted per kernel); the float steps are few and written out in
 * the order the SIMD paths use, with contraction to FMA off (k_common.h).
 */
#include "kernels/k_common.h"
#include "kernels/simd.h"

#include <float.h>
#include <math.h>

/* ---- activation quantizers ----------------------------------------------------------------- */

/* Contract: x[0..n) (n a multiple of 32) -> n/32 Q8_0 blocks: amax = max|x|, d = amax/127
 * stored as f16, q = x * (127/amax) rounded to nearest even (|q| <= 127: the product is at most
 * 127 * (1 + 2^-23), which rounds to 127); an all-zero block gets d = 0, q = 0; a block holding a
 * NaN or an infinity gets d = NaN, q = 0, so every dot with it is NaN (non-finite activations stay
 * visible in the logits, as in exact mode).  ggml's AVX2 quantize_row_q8_0 uses the same formulas. */
void sl_quantize_act_q8_0(const float *restrict x, void *restrict vy, int64_t n)
{
    sl_block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / SL_QK; i++) {
        const float *v = x + i * SL_QK;
        float amax = 0;
        int bad = 0;
        for (int j = 0; j < SL_QK; j++) {
            const float a = fabsf(v[j]);
            amax = a > amax ? a : amax;
            bad |= !(a <= FLT_MAX);
        }
        if (bad) {
            sl_act_nonfinite_q8_0(&y[i]);
            continue;
        }
        const float id = amax != 0 ? 127.0f / amax : 0.0f;
        y[i].d = sl_f32_to_f16(amax / 127.0f);
        for (int j = 0; j < SL_QK; j++)
            y[i].qs[j] = (int8_t)sl_round_int(v[j] * id);
    }
}

/* Contract: x[0..n) (n a multiple of 256) -> n/256 Q8_K blocks: iscale = 127/amax,
 * q = iscale*x rounded to nearest even, d = 1/iscale (f32), bsums[k] = sum q[16k..16k+15]; an
 * all-zero block is all zero; a block with a NaN or infinity gets d = NaN and zeros.  (ggml's reference anchors on the signed extreme, -127/max, which
 * flips the signs of d and q together: every dot product comes out the same.) */
void sl_quantize_act_q8_k(const float *restrict x, void *restrict vy, int64_t n)
{
    sl_block_q8_k *y = vy;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        const float *v = x + i * SL_QK_K;
        float amax = 0;
        int bad = 0;
        for (int j = 0; j < SL_QK_K; j++) {
            const float a = fabsf(v[j]);
            amax = a > amax ? a : amax;
            bad |= !(a <= FLT_MAX);
        }
        if (bad) {
            sl_act_nonfinite_q8_k(&y[i]);
            continue;
        }
        if (amax == 0) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = 127.0f / amax;
        for (int j = 0; j < SL_QK_K; j++)
            y[i].qs[j] = (int8_t)sl_round_int(iscale * v[j]);
        for (int k = 0; k < SL_QK_K / 16; k++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += y[i].qs[16 * k + j];
            y[i].bsums[k] = (int16_t)s;
        }
        y[i].d = 1.0f / iscale;
    }
}

/* ---- blocks of 32 ----------------------------------------------------------------------------
 * Lane sums: |lane| <= 4 * 128 * 127 (a hostile weight -128 included), exact in int and in f32. */

static float lanes_reduce(float acc[2][8])
{
    float t[8];
    for (int k = 0; k < 8; k++) t[k] = acc[0][k] + acc[1][k];
    for (int k = 0; k < 4; k++) t[k] = t[k] + t[k + 4];
    for (int k = 0; k < 2; k++) t[k] = t[k] + t[k + 2];
    return t[0] + t[1];
}

/* Contract: canonical q4_0 x q8_0 dot of n (multiple of 32) elements. */
float sl_qdot_q4_0_q8_0(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q4_0 *w = vw;
    const sl_block_q8_0 *y = vy;
    float acc[2][8] = {{0}};
    for (int64_t i = 0; i < n / SL_QK; i++) {
        int8_t q[SL_QK];
        for (int j = 0; j < SL_QK / 2; j++) {
            q[j]             = (int8_t)((w[i].qs[j] & 0x0f) - 8);
            q[j + SL_QK / 2] = (int8_t)((w[i].qs[j] >> 4) - 8);
        }
        const float s = sl_f16_to_f32(w[i].d) * sl_f16_to_f32(y[i].d);   /* exact: 11 x 11 bits */
        for (int k = 0; k < 8; k++) {
            int t = 0;
            for (int e = 4 * k; e < 4 * k + 4; e++) t += q[e] * y[i].qs[e];
            acc[i & 1][k] = acc[i & 1][k] + s * (float)t;
        }
    }
    return lanes_reduce(acc);
}

/* Contract: canonical q8_0 x q8_0 dot of n (multiple of 32) elements: per block the exact int32
 * sum of its 32 products, then one fused multiply-add per block into a single accumulator, blocks
 * in order (kernels/simd.h).  |t| <= 32 * 128 * 127 < 2^24, so (float)t is exact. */
float sl_qdot_q8_0_q8_0(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q8_0 *w = vw;
    const sl_block_q8_0 *y = vy;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / SL_QK; i++) {
        const float s = sl_f16_to_f32(w[i].d) * sl_f16_to_f32(y[i].d);
        int32_t t = 0;
        for (int e = 0; e < SL_QK; e++) t += w[i].qs[e] * y[i].qs[e];
        acc = fmaf(s, (float)t, acc);
    }
    return acc;
}

/* ---- K-quants ----------------------------------------------------------------------------------
 * Bounds (int32): q4_K |S| <= 8*63*32*15*127 = 30.7e6, q5_K 63.5e6, |M| <= 8*63*32*127 = 2.0e6;
 * q6_K |S| <= 16*128*(16*63*127 + 32*16*127) = 395e6. */

/* Contract: canonical q4_K x q8_K dot of n (multiple of 256) elements. */
float sl_qdot_q4_k_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q4_k *w = vw;
    const sl_block_q8_k *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        uint8_t sc[8], m[8];
        sl_k_scales8(w[i].scales, sc, m);
        int32_t S = 0, M = 0;
        for (int g = 0; g < 4; g++) {
            const uint8_t *q = w[i].qs + 32 * g;
            const int8_t *a = y[i].qs + 64 * g;
            int32_t lo = 0, hi = 0;
            for (int l = 0; l < 32; l++) {
                lo += (q[l] & 0x0f) * a[l];
                hi += (q[l] >> 4) * a[l + 32];
            }
            S += sc[2 * g] * lo + sc[2 * g + 1] * hi;
        }
        for (int j = 0; j < 8; j++) M += m[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        const float d = sl_f16_to_f32(w[i].d) * y[i].d, dmin = sl_f16_to_f32(w[i].dmin) * y[i].d;
        acc = acc + (d * (float)S - dmin * (float)M);
    }
    return acc;
}

/* Contract: canonical q5_K x q8_K dot of n (multiple of 256) elements. */
float sl_qdot_q5_k_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q5_k *w = vw;
    const sl_block_q8_k *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        uint8_t sc[8], m[8];
        sl_k_scales8(w[i].scales, sc, m);
        const uint8_t *qh = w[i].qh;
        int32_t S = 0, M = 0;
        for (int g = 0; g < 4; g++) {
            const uint8_t *q = w[i].qs + 32 * g;
            const int8_t *a = y[i].qs + 64 * g;
            int32_t lo = 0, hi = 0;
            for (int l = 0; l < 32; l++) {
                lo += ((q[l] & 0x0f) | (((qh[l] >> (2 * g)) & 1) << 4)) * a[l];
                hi += ((q[l] >> 4) | (((qh[l] >> (2 * g + 1)) & 1) << 4)) * a[l + 32];
            }
            S += sc[2 * g] * lo + sc[2 * g + 1] * hi;
        }
        for (int j = 0; j < 8; j++) M += m[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        const float d = sl_f16_to_f32(w[i].d) * y[i].d, dmin = sl_f16_to_f32(w[i].dmin) * y[i].d;
        acc = acc + (d * (float)S - dmin * (float)M);
    }
    return acc;
}

/* Contract: canonical q6_K x q8_K dot of n (multiple of 256) elements. */
float sl_qdot_q6_k_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q6_k *w = vw;
    const sl_block_q8_k *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        int32_t S = 0;
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w[i].ql + 64 * h, *qh = w[i].qh + 32 * h;
            const int8_t *a = y[i].qs + 128 * h;
            for (int k = 0; k < 4; k++) {          /* elements 32k..32k+31 of the half */
                const uint8_t *lq = ql + 32 * (k & 1);
                const int8_t *ak = a + 32 * k;
                const int sh = 4 * (k >> 1), hs = 2 * k;
                int32_t p0 = 0, p1 = 0;          /* sub-blocks 8h+2k and 8h+2k+1 */
                for (int l = 0; l < 16; l++)
                    p0 += (((lq[l] >> sh) & 0x0f) | (((qh[l] >> hs) & 3) << 4)) * ak[l];
                for (int l = 16; l < 32; l++)
                    p1 += (((lq[l] >> sh) & 0x0f) | (((qh[l] >> hs) & 3) << 4)) * ak[l];
                const int s0 = 8 * h + 2 * k;
                S += w[i].scales[s0] * p0 + w[i].scales[s0 + 1] * p1;
            }
        }
        int32_t C = 0;
        for (int s = 0; s < 16; s++) C += w[i].scales[s] * y[i].bsums[s];
        S -= 32 * C;
        const float d = sl_f16_to_f32(w[i].d) * y[i].d;
        acc = acc + d * (float)S;
    }
    return acc;
}

/* ---- attention helpers -------------------------------------------------------------------------- */

/* Contract: o[i] = fma(a, v[i], o[i]) (one rounding), i < n: the bits of the SIMD paths' FMA axpy,
 * so attention outputs do not depend on the kernel path. */
void sl_axpy_f32(float *restrict o, float a, const float *restrict v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) o[i] = fmaf(a, v[i], o[i]);
}

/* Contract: as sl_axpy_f32 with v given as halfs (converted exactly). */
void sl_axpy_f16(float *restrict o, float a, const uint16_t *restrict v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) o[i] = fmaf(a, sl_f16_to_f32(v[i]), o[i]);
}

/* The attention dot's fixed order (kernels/simd.h, adot_*), written out in scalar code with fmaf:
 * 32 lanes as the AVX2 path's four 8-wide registers a0..a3, then its reduction tree
 * ((a0 + a1) + (a2 + a3)) -> high half + low half -> pairs -> one, then the tail. */
static float adot_lanes(float acc[32], const float *restrict w, const float *restrict x, int64_t n)
{
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 32; k++) acc[k] = fmaf(w[i + k], x[i + k], acc[k]);
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) acc[k] = fmaf(w[i + k], x[i + k], acc[k]);
    float t[8], u[4];
    for (int k = 0; k < 8; k++) t[k] = (acc[k] + acc[8 + k]) + (acc[16 + k] + acc[24 + k]);
    for (int k = 0; k < 4; k++) u[k] = t[k] + t[4 + k];
    float s = (u[0] + u[2]) + (u[1] + u[3]);
    for (; i < n; i++) s = fmaf(w[i], x[i], s);
    return s;
}

/* Contract: see simd.h (sl_kernel_set.adot_f32). */
float sl_adot_f32(const void *restrict w, const float *restrict x, int64_t n)
{
    float acc[32] = { 0 };
    return adot_lanes(acc, w, x, n);
}

/* Contract: as sl_adot_f32 with w given as halfs (converted exactly).  Head rows are short (<= 256
 * in every llama shape); longer ones are converted in pieces of 256 that keep the lane order. */
float sl_adot_f16(const void *restrict w, const float *restrict x, int64_t n)
{
    const uint16_t *h = w;
    float acc[32] = { 0 }, f[256];
    int64_t i = 0;
    for (; n - i > 256; i += 256) {   /* whole steps of 32 only, so lanes line up */
        for (int k = 0; k < 256; k++) f[k] = sl_f16_to_f32(h[i + k]);
        for (int64_t j = 0; j < 256; j += 32)
            for (int k = 0; k < 32; k++) acc[k] = fmaf(f[j + k], x[i + j + k], acc[k]);
    }
    for (int64_t k = 0; k < n - i; k++) f[k] = sl_f16_to_f32(h[i + k]);
    return adot_lanes(acc, f, x + i, n - i);
}
