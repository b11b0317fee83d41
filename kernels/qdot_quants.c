/* kernels/qdot_quants.c — portable Q8_1 activation quantizer and the integer dots of the low-bit
 * types (Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4 with 32-blocks; Q2_K, Q3_K, IQ4_XS with Q8_K): the references
 * every SIMD path reproduces bit for bit (float steps in kernels/simd.h, "Canonical float steps").
 *
 * Integer sums are exact (bounds per kernel); contraction to FMA is off (k_common.h).
 */
#include "kernels/k_quants.h"
#include "kernels/simd.h"

#include <math.h>

#include <float.h>

/* Contract: x[0..n) (n a multiple of 32) -> n/32 Q8_1 blocks: as sl_quantize_act_q8_0 (d =
 * f16(amax/127), q = x * (127/amax) rounded to nearest even), plus s = f16((amax/127) * sum q)
 * (the f32 d, as ggml's quantize_row_q8_1); all-zero block: zeros; non-finite input: d = s = NaN. */
void sl_quantize_act_q8_1(const float *restrict x, void *restrict vy, int64_t n)
{
    sl_block_q8_1 *y = vy;
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
            sl_act_nonfinite_q8_1(&y[i]);
            continue;
        }
        const float d = amax / 127.0f, id = amax != 0 ? 127.0f / amax : 0.0f;
        int sum = 0;
        for (int j = 0; j < SL_QK; j++) {
            y[i].qs[j] = (int8_t)sl_round_int(v[j] * id);
            sum += y[i].qs[j];
        }
        y[i].d = sl_f32_to_f16(d);
        y[i].s = sl_f32_to_f16(d * (float)sum);
    }
}

/* ---- blocks of 32 ----------------------------------------------------------------------------
 * The canonical 2 x 8 lanes of q4_0 (qdot.c): lane k of block i = exact sum of the products of
 * elements 4k..4k+3 (|lane| <= 4 * 127 * 127 for IQ4_NL, exact in f32). */

static float lanes_reduce(float acc[2][8])
{
    float t[8];
    for (int k = 0; k < 8; k++) t[k] = acc[0][k] + acc[1][k];
    for (int k = 0; k < 4; k++) t[k] = t[k] + t[k + 4];
    for (int k = 0; k < 2; k++) t[k] = t[k] + t[k + 2];
    return t[0] + t[1];
}

static inline void lanes_add(float acc[8], float s, const int8_t *q, const int8_t *a)
{
    for (int k = 0; k < 8; k++) {
        int t = 0;
        for (int e = 4 * k; e < 4 * k + 4; e++) t += q[e] * a[e];
        acc[k] = acc[k] + s * (float)t;
    }
}

/* q[0..32) of a Q5_0/Q5_1 block: 5-bit values minus `off`. */
static inline void q5_values(const uint8_t *qs, const uint8_t *qh4, int off, int8_t q[32])
{
    const uint32_t qh = sl_q5_qh(qh4);
    for (int j = 0; j < 16; j++) {
        q[j]      = (int8_t)(((qs[j] & 0x0f) | (((qh >> j) & 1) << 4)) - off);
        q[j + 16] = (int8_t)(((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - off);
    }
}

/* Contract: canonical q5_0 x q8_0 dot (the q4_0 steps with q - 16) of n (multiple of 32) elements. */
float sl_qdot_q5_0_q8_0(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q5_0 *w = vw;
    const sl_block_q8_0 *y = vy;
    float acc[2][8] = {{0}};
    for (int64_t i = 0; i < n / SL_QK; i++) {
        int8_t q[SL_QK];
        q5_values(w[i].qs, w[i].qh, 16, q);
        lanes_add(acc[i & 1], sl_f16_to_f32(w[i].d) * sl_f16_to_f32(y[i].d), q, y[i].qs);
    }
    return lanes_reduce(acc);
}

/* Contract: canonical iq4_nl x q8_0 dot (the q4_0 steps with q = kvalues) of n (multiple of 32). */
float sl_qdot_iq4_nl_q8_0(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_iq4_nl *w = vw;
    const sl_block_q8_0 *y = vy;
    float acc[2][8] = {{0}};
    for (int64_t i = 0; i < n / SL_QK; i++) {
        int8_t q[SL_QK];
        for (int j = 0; j < 16; j++) {
            q[j]      = sl_kvalues_iq4nl[w[i].qs[j] & 0x0f];
            q[j + 16] = sl_kvalues_iq4nl[w[i].qs[j] >> 4];
        }
        lanes_add(acc[i & 1], sl_f16_to_f32(w[i].d) * sl_f16_to_f32(y[i].d), q, y[i].qs);
    }
    return lanes_reduce(acc);
}

/* Contract: canonical mxfp4 x q8_0 dot (the q8_0 steps, one fused multiply-add per block, with
 * q = kvalues_mxfp4, |q| <= 12, and s = e8m0_half(e) * f16(y.d): a power of two times a half,
 * exact in f32 unless it leaves the f32 range) of n (multiple of 32) elements. */
float sl_qdot_mxfp4_q8_0(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_mxfp4 *w = vw;
    const sl_block_q8_0 *y = vy;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / SL_QK; i++) {
        int32_t t = 0;   /* |t| <= 32 * 12 * 127 */
        for (int j = 0; j < 16; j++)
            t += sl_kvalues_mxfp4[w[i].qs[j] & 0x0f] * y[i].qs[j] + sl_kvalues_mxfp4[w[i].qs[j] >> 4] * y[i].qs[j + 16];
        acc = fmaf(sl_e8m0_half(w[i].e) * sl_f16_to_f32(y[i].d), (float)t, acc);
    }
    return acc;
}

/* Contract: canonical q4_1 x q8_1 dot of n (multiple of 32) elements: the q4_0 lanes with q in
 * 0..15, plus mn = mn + f16(w.m) * f16(y.s) per block (exact product), result lanes + mn. */
float sl_qdot_q4_1_q8_1(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q4_1 *w = vw;
    const sl_block_q8_1 *y = vy;
    float acc[2][8] = {{0}}, mn = 0;
    for (int64_t i = 0; i < n / SL_QK; i++) {
        int8_t q[SL_QK];
        for (int j = 0; j < 16; j++) {
            q[j]      = (int8_t)(w[i].qs[j] & 0x0f);
            q[j + 16] = (int8_t)(w[i].qs[j] >> 4);
        }
        lanes_add(acc[i & 1], sl_f16_to_f32(w[i].d) * sl_f16_to_f32(y[i].d), q, y[i].qs);
        mn = mn + sl_f16_to_f32(w[i].m) * sl_f16_to_f32(y[i].s);
    }
    return lanes_reduce(acc) + mn;
}

/* Contract: canonical q5_1 x q8_1 dot (as q4_1 with 5-bit q) of n (multiple of 32) elements. */
float sl_qdot_q5_1_q8_1(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q5_1 *w = vw;
    const sl_block_q8_1 *y = vy;
    float acc[2][8] = {{0}}, mn = 0;
    for (int64_t i = 0; i < n / SL_QK; i++) {
        int8_t q[SL_QK];
        q5_values(w[i].qs, w[i].qh, 0, q);
        lanes_add(acc[i & 1], sl_f16_to_f32(w[i].d) * sl_f16_to_f32(y[i].d), q, y[i].qs);
        mn = mn + sl_f16_to_f32(w[i].m) * sl_f16_to_f32(y[i].s);
    }
    return lanes_reduce(acc) + mn;
}

/* ---- super-blocks of 256 with Q8_K --------------------------------------------------------------
 * Bounds (int32): q2_K |S| <= 16*15*16*3*127 = 1.5e6, |M| <= 16*15*16*127 = 0.5e6; q3_K
 * |S| <= 16*32*16*4*127 = 4.2e6; iq4_xs |S| <= 8*32*32*127*127 = 132e6. */

/* Contract: canonical q2_K x q8_K dot: S = sum_j (sc_j & 15) * dot_j (sub-blocks of 16),
 * M = sum_j (sc_j >> 4) * bsums_j; acc = acc + (d*(float)S - dmin*(float)M). */
float sl_qdot_q2_k_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q2_k *w = vw;
    const sl_block_q8_k *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        int32_t S = 0, M = 0;
        for (int h = 0; h < 2; h++)
            for (int j = 0; j < 4; j++)
                for (int half = 0; half < 2; half++) {
                    const int sb = 8 * h + 2 * j + half;
                    const uint8_t *q = w[i].qs + 32 * h + 16 * half;
                    const int8_t *a = y[i].qs + 16 * sb;
                    int32_t t = 0;
                    for (int l = 0; l < 16; l++) t += ((q[l] >> (2 * j)) & 3) * a[l];
                    S += (w[i].scales[sb] & 0x0f) * t;
                }
        for (int sb = 0; sb < 16; sb++) M += (w[i].scales[sb] >> 4) * y[i].bsums[sb];
        const float d = sl_f16_to_f32(w[i].d) * y[i].d, dmin = sl_f16_to_f32(w[i].dmin) * y[i].d;
        acc = acc + (d * (float)S - dmin * (float)M);
    }
    return acc;
}

/* Contract: canonical q3_K x q8_K dot: u = q + 4*hbit in 0..7 (the value plus 4),
 * S = sum_j (sc_j - 32) * (dot_j(u) - 4 * bsums_j); acc = acc + d * (float)S. */
float sl_qdot_q3_k_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q3_k *w = vw;
    const sl_block_q8_k *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        uint8_t sc[16];
        sl_q3_k_scales(w[i].scales, sc);
        int32_t S = 0;
        for (int h = 0; h < 2; h++)
            for (int j = 0; j < 4; j++)
                for (int half = 0; half < 2; half++) {
                    const int sb = 8 * h + 2 * j + half;
                    const uint8_t *q = w[i].qs + 32 * h, *hm = w[i].hmask;
                    const int8_t *a = y[i].qs + 16 * sb;
                    int32_t t = 0;
                    for (int l = 0; l < 16; l++) {
                        const int e = 16 * half + l;
                        t += (((q[e] >> (2 * j)) & 3) | (((hm[e] >> (4 * h + j)) & 1) << 2)) * a[l];
                    }
                    S += (sc[sb] - 32) * (t - 4 * y[i].bsums[sb]);
                }
        const float d = sl_f16_to_f32(w[i].d) * y[i].d;
        acc = acc + d * (float)S;
    }
    return acc;
}

/* Contract: canonical iq4_xs x q8_K dot: S = sum_b (ls_b - 32) * sum_{e in b} kvalues[q_e] * a_e;
 * acc = acc + d * (float)S. */
float sl_qdot_iq4_xs_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_iq4_xs *w = vw;
    const sl_block_q8_k *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        int32_t S = 0;
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *qs = w[i].qs + 16 * ib;
            const int8_t *a = y[i].qs + 32 * ib;
            int32_t t = 0;
            for (int j = 0; j < 16; j++)
                t += sl_kvalues_iq4nl[qs[j] & 0x0f] * a[j] + sl_kvalues_iq4nl[qs[j] >> 4] * a[j + 16];
            S += (sl_iq4_xs_scale(&w[i], ib) - 32) * t;
        }
        const float d = sl_f16_to_f32(w[i].d) * y[i].d;
        acc = acc + d * (float)S;
    }
    return acc;
}
