/* kernels/k_quants.h — on-disk block layouts and decoding helpers of the low-bit types added beside
 * k_common.h's: Q4_1, Q5_0, Q5_1 (legacy blocks of 32), Q2_K, Q3_K (K-quant super-blocks of 256),
 * IQ4_NL (32), IQ4_XS (256) and MXFP4 (32), plus Q8_1, the activation blocks the Q4_1/Q5_1 dots use.
 * Private to kernels/ (not a public API).  Include after kernels/k_common.h.
 *
 * Layouts are ggml's block structs (ggml-common.h at llama.cpp c392e50); every size is
 * static_assert-ed against the geometry table of kernels/types.c.  Decoding rules (one per struct
 * comment) are the format definitions the portable dequantizers, the integer dots and the tests'
 * float64 decoders all follow.
 */
#ifndef SL_KERNELS_K_QUANTS_H
#define SL_KERNELS_K_QUANTS_H

#include "kernels/k_common.h"

/* Q4_1: x = d * q + m, q 4 bits; qs[j] low nibble = element j, high nibble = element j + 16. */
typedef struct { uint16_t d, m; uint8_t qs[SL_QK / 2]; } sl_block_q4_1;
static_assert(sizeof(sl_block_q4_1) == 20, "block_q4_1 is 20 bytes on disk");

/* Q5_0: x = d * (q - 16), q 5 bits: low 4 as Q4_0's nibbles, bit 4 of element e is bit e of the
 * little-endian 32-bit word qh. */
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[SL_QK / 2]; } sl_block_q5_0;
static_assert(sizeof(sl_block_q5_0) == 22, "block_q5_0 is 22 bytes on disk");

/* Q5_1: x = d * q + m, q 5 bits stored as in Q5_0. */
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[SL_QK / 2]; } sl_block_q5_1;
static_assert(sizeof(sl_block_q5_1) == 24, "block_q5_1 is 24 bytes on disk");

/* Q8_1 (activations only): x = d * q, plus s = d * sum(q) (both f16), which the Q4_1/Q5_1 dots
 * multiply with the weight block's m. */
typedef struct { uint16_t d, s; int8_t qs[SL_QK]; } sl_block_q8_1;
static_assert(sizeof(sl_block_q8_1) == 36, "block_q8_1 is 36 bytes");

/* Q2_K: 16 sub-blocks of 16; x = (d * (scales[e/16] & 15)) * q - dmin * (scales[e/16] >> 4),
 * q 2 bits.  Element e = 128h + 32j + l (h < 2, j < 4, l < 32) is bits 2j..2j+1 of qs[32h + l]. */
typedef struct {
    uint8_t  scales[SL_QK_K / 16];
    uint8_t  qs[SL_QK_K / 4];
    uint16_t d, dmin;
} sl_block_q2_k;
static_assert(sizeof(sl_block_q2_k) == 84, "block_q2_K is 84 bytes on disk");

/* Q3_K: 16 sub-blocks of 16; x = (d * (sc[e/16] - 32)) * (q - 4 * !hbit), with the 2 low bits q
 * placed as in Q2_K, hbit = bit 4h + j of hmask[l] (same e = 128h + 32j + l), and 6-bit scales sc
 * packed in 12 bytes (sl_q3_k_scales). */
typedef struct {
    uint8_t  hmask[SL_QK_K / 8];
    uint8_t  qs[SL_QK_K / 4];
    uint8_t  scales[12];
    uint16_t d;
} sl_block_q3_k;
static_assert(sizeof(sl_block_q3_k) == 110, "block_q3_K is 110 bytes on disk");

/* IQ4_NL: x = d * kvalues[q], q 4 bits placed as Q4_0's nibbles. */
typedef struct { uint16_t d; uint8_t qs[SL_QK / 2]; } sl_block_iq4_nl;
static_assert(sizeof(sl_block_iq4_nl) == 18, "block_iq4_nl is 18 bytes on disk");

/* IQ4_XS: 8 sub-blocks of 32; x = (d * (ls - 32)) * kvalues[q], 6-bit ls of sub-block b = nibble
 * b % 2 of scales_l[b / 2] | bits 2b..2b+1 of scales_h << 4; sub-block b's nibbles are
 * qs[16b .. 16b+15], placed as in IQ4_NL. */
typedef struct {
    uint16_t d;
    uint16_t scales_h;
    uint8_t  scales_l[SL_QK_K / 64];
    uint8_t  qs[SL_QK_K / 2];
} sl_block_iq4_xs;
static_assert(sizeof(sl_block_iq4_xs) == 136, "block_iq4_xs is 136 bytes on disk");

/* The 16 levels of IQ4_NL / IQ4_XS (a fixed non-uniform grid, denser near zero where Gaussian
 * weights are; part of the format, not a tunable). */
static const int8_t sl_kvalues_iq4nl[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
};

/* MXFP4 (OCP microscaling FP4, ggml type 39): x = kvalues_mxfp4[q] * 2^(e - 128), e the E8M0
 * shared exponent byte, q 4 bits placed as Q4_0's nibbles (qs[j] low nibble = element j, high =
 * element j + 16).  No 2-byte field: the block is 17 bytes and may sit at any address. */
typedef struct { uint8_t e; uint8_t qs[SL_QK / 2]; } sl_block_mxfp4;
static_assert(sizeof(sl_block_mxfp4) == 17, "block_mxfp4 is 17 bytes on disk");

/* The E2M1 values doubled (0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives, x 2), so that they are
 * integers the Q8_0 dots can multiply exactly; the scale carries the halving (2^(e-128), not the
 * E8M0 value 2^(e-127)).  Index 8 is -0, which as an integer is 0. */
static const int8_t sl_kvalues_mxfp4[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };

/* 2^(e - 128) as f32 for every byte e, as ggml's ggml_e8m0_to_fp32_half: subnormal for e < 2
 * (e = 0: 2^-128, e = 1: 2^-127), normal up to e = 255 (2^127; the format's NaN code 0xff is a
 * plain exponent there, ggml only flags it when asked to validate rows).  Exact, no rounding. */
static inline float sl_e8m0_half(uint8_t e)
{
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* The 16 six-bit scales of a Q3_K block as unsigned 0..63 (the format subtracts 32): scale j has
 * low nibble (b[j % 8] >> 4*(j/8)) & 15 and high 2 bits (b[8 + j % 4] >> 2*(j/4)) & 3. */
static inline void sl_q3_k_scales(const uint8_t b[12], uint8_t sc[16])
{
    uint32_t a[3], o[4];
    memcpy(a, b, 12);
    const uint32_t lo4 = 0x0f0f0f0fu, lo2 = 0x03030303u;
    o[0] = (a[0] & lo4) | (((a[2] >> 0) & lo2) << 4);
    o[1] = (a[1] & lo4) | (((a[2] >> 2) & lo2) << 4);
    o[2] = ((a[0] >> 4) & lo4) | (((a[2] >> 4) & lo2) << 4);
    o[3] = ((a[1] >> 4) & lo4) | (((a[2] >> 6) & lo2) << 4);
    memcpy(sc, o, 16);
}

/* The 6-bit scale of IQ4_XS sub-block ib (0..63; the format subtracts 32). */
static inline int sl_iq4_xs_scale(const sl_block_iq4_xs *b, int ib)
{
    return ((b->scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0f) | (((b->scales_h >> (2 * ib)) & 3) << 4);
}

/* Q5_0/Q5_1's 32 high bits. */
static inline uint32_t sl_q5_qh(const uint8_t qh[4])
{
    return (uint32_t)qh[0] | ((uint32_t)qh[1] << 8) | ((uint32_t)qh[2] << 16) | ((uint32_t)qh[3] << 24);
}

/* Q8_1 block of non-finite input: d = s = NaN, quants zero (as sl_act_nonfinite_q8_0). */
static inline void sl_act_nonfinite_q8_1(sl_block_q8_1 *b)
{
    memset(b, 0, sizeof *b);
    b->d = b->s = 0x7e00;
}

/* Index of the IQ4 level nearest to v (ties to the upper level), by bisection as ggml's
 * best_index_int8, so quantizers pick the same levels. */
static inline int sl_iq4_nearest(float v)
{
    const int8_t *k = sl_kvalues_iq4nl;
    if (v <= k[0]) return 0;
    if (v >= k[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (v < k[mid]) hi = mid;
        else lo = mid;
    }
    return v - k[hi - 1] < k[hi] - v ? hi - 1 : hi;
}

/* Scale search of one IQ4 block of 32 (ggml's quantize_row_iq4_nl_impl per block, no importance
 * matrix: weights x^2, 15 trial grids): the scale that maps the largest-magnitude value to -127,
 * then trial inverse scales (t - 127)/max, t = -7..7, each with its least-squares scale; the best
 * (largest (sum w q x)^2 / sum w q^2) wins.  L gets the first grid's levels (callers requantize
 * against the stored scale).  Returns 0 for an all-(near-)zero block. */
static inline float sl_iq4_fit32(const float *restrict x, uint8_t *restrict L)
{
    float amax = 0, vmax = 0;
    for (int j = 0; j < 32; j++) {
        const float ax = fabsf(x[j]);
        if (ax > amax) { amax = ax; vmax = x[j]; }
    }
    if (amax < 1e-15f) return 0.0f;
    float d = -vmax / sl_kvalues_iq4nl[0];
    float id = 1 / d, sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; j++) {
        const int l = sl_iq4_nearest(id * x[j]);
        L[j] = (uint8_t)l;
        const float q = sl_kvalues_iq4nl[l], w = x[j] * x[j];
        sumqx += w * q * x[j];
        sumq2 += w * q * q;
    }
    d = sumqx / sumq2;
    float best = d * sumqx;
    for (int t = -7; t <= 7; t++) {
        id = (t + sl_kvalues_iq4nl[0]) / vmax;
        sumqx = sumq2 = 0;
        for (int j = 0; j < 32; j++) {
            const float q = sl_kvalues_iq4nl[sl_iq4_nearest(id * x[j])], w = x[j] * x[j];
            sumqx += w * q * x[j];
            sumq2 += w * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

#endif
