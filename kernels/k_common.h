/* kernels/k_common.h — private helpers shared by the kernel files (not a public API).
 *
 * Holds the on-disk block layouts of the quantized types sluice computes with (exactly as ggml
 * stores them in GGUF; every size is static_assert-ed), the lane-parallel f32 dot accumulator the
 * portable kernels share, and the K-quant helpers: 6-bit scale/min packing, round-to-nearest and the
 * weighted (scale, min) search used by the Q4_K and Q5_K reference quantizers.
 *
 * Alignment: block structs contain uint16_t fields, so block pointers must be 2-byte aligned.  GGUF
 * tensor data is 32-byte aligned and every block size here is even, so rows read from a file qualify.
 */
#ifndef SL_KERNELS_K_COMMON_H
#define SL_KERNELS_K_COMMON_H

/* Every kernel result is specified as separately rounded f32 operations (ggml's reference order).
 * Forbid contracting a*b+c into a fused multiply-add, which gcc does by default whenever the
 * target has FMA (SL_NATIVE, aarch64): quantizer output then stays byte-identical to
 * llama-quantize's and dot results do not depend on build flags.  Include this header first. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <assert.h>
#include <stdbool.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/f16.h"

/* Software prefetch of the weights SL_PREFETCH_AHEAD bytes ahead of the block a SIMD dot is about
 * to read (every 64-byte line of the block's size, so wide blocks get all their lines).  In the
 * memory-bound matvec the hardware prefetchers alone left 10-25% of the read bandwidth unused on a
 * Sapphire Rapids VM (bench_kernels; docs/benchmarks.md); the distance covers the memory latency
 * at that rate.  Past a row's end it fetches the next row, which the same thread reads next. */
#define SL_PREFETCH_AHEAD 1024
static inline void sl_prefetch_ahead(const void *blk, unsigned bytes)
{
    const char *p = (const char *)blk + SL_PREFETCH_AHEAD;
    for (unsigned o = 0; o < bytes; o += 64) __builtin_prefetch(p + o, 0, 3);
}

#define SL_QK    32    /* elements per legacy block (Q4_0, Q8_0) */
#define SL_QK_K  256   /* elements per K-quant super-block */

/* Q4_0: x = d * (q - 8).  qs[j] low nibble = element j, high nibble = element j + 16. */
typedef struct { uint16_t d; uint8_t qs[SL_QK / 2]; } sl_block_q4_0;
static_assert(sizeof(sl_block_q4_0) == 18, "block_q4_0 is 18 bytes on disk");

/* Q8_0: x = d * q. */
typedef struct { uint16_t d; int8_t qs[SL_QK]; } sl_block_q8_0;
static_assert(sizeof(sl_block_q8_0) == 34, "block_q8_0 is 34 bytes on disk");

/* Q4_K: 8 sub-blocks of 32, x = (d*sc) * q - (dmin*m) with 6-bit sc, m packed in scales[12].
 * qs holds 4 groups of 64 elements; in group g, qs[32g + l] low nibble = element 64g + l and
 * high nibble = element 64g + 32 + l. */
typedef struct {
    uint16_t d, dmin;
    uint8_t  scales[12];
    uint8_t  qs[SL_QK_K / 2];
} sl_block_q4_k;
static_assert(sizeof(sl_block_q4_k) == 144, "block_q4_K is 144 bytes on disk");

/* Q5_K: Q4_K plus a fifth bit per element: bit 2g of qh[l] belongs to element 64g + l, bit 2g+1
 * to element 64g + 32 + l. */
typedef struct {
    uint16_t d, dmin;
    uint8_t  scales[12];
    uint8_t  qh[SL_QK_K / 8];
    uint8_t  qs[SL_QK_K / 2];
} sl_block_q5_k;
static_assert(sizeof(sl_block_q5_k) == 176, "block_q5_K is 176 bytes on disk");

/* Q6_K: 16 sub-blocks of 16, x = (d * scales[e/16]) * (q - 32), q 6 bits: low 4 in ql, high 2 in
 * qh.  Two halves of 128 (ql += 64, qh += 32 per half); in a half, element 32k + l (k < 4, l < 32)
 * takes ql[l + 32*(k&1)] nibble k>>1 and bits 2k..2k+1 of qh[l]. */
typedef struct {
    uint8_t  ql[SL_QK_K / 2];
    uint8_t  qh[SL_QK_K / 4];
    int8_t   scales[SL_QK_K / 16];
    uint16_t d;
} sl_block_q6_k;
static_assert(sizeof(sl_block_q6_k) == 210, "block_q6_K is 210 bytes on disk");

/* Q8_K (activations only, never in files): x = d * q, d f32, plus bsums[k] = sum of q[16k..16k+15],
 * which the K-quant dots use for the min / offset terms. */
typedef struct {
    float   d;
    int8_t  qs[SL_QK_K];
    int16_t bsums[SL_QK_K / 16];
} sl_block_q8_k;
static_assert(sizeof(sl_block_q8_k) == 292, "block_q8_K is 292 bytes");

/* The activation block made from input holding a NaN or infinity: d = NaN (every dot with it is
 * NaN), quants zero.  Shared by all kernel paths so that their bytes agree. */
static inline void sl_act_nonfinite_q8_0(sl_block_q8_0 *b)
{
    memset(b, 0, sizeof *b);
    b->d = 0x7e00;                       /* f16 quiet NaN */
}

static inline void sl_act_nonfinite_q8_k(sl_block_q8_k *b)
{
    memset(b, 0, sizeof *b);
    b->d = NAN;
}

/* Scales and mins of all 8 sub-blocks of a Q4_K/Q5_K super-block at once (same values as
 * sl_k_scale_min for j = 0..7), from the 12 packed bytes read as three little-endian words. */
static inline void sl_k_scales8(const uint8_t *s, uint8_t sc[8], uint8_t m[8])
{
    uint32_t u[3];
    memcpy(u, s, 12);
    const uint32_t lo6 = 0x3f3f3f3fu, lo4 = 0x0f0f0f0fu, lo2 = 0x03030303u;
    const uint32_t w[4] = {
        u[0] & lo6,                                   /* sc[0..3] */
        (u[2] & lo4) | (((u[0] >> 6) & lo2) << 4),    /* sc[4..7] */
        u[1] & lo6,                                   /* m[0..3]  */
        ((u[2] >> 4) & lo4) | (((u[1] >> 6) & lo2) << 4), /* m[4..7] */
    };
    memcpy(sc, &w[0], 8);
    memcpy(m, &w[2], 8);
}

/* ---- dot accumulation -------------------------------------------------------------------------
 * Float addition is not associative, so without -ffast-math gcc will not vectorize `s += w[i]*x[i]`.
 * Keeping SL_LANES independent partial sums makes the order explicit and lets gcc -O2 turn each
 * step into a few packed multiply/adds (and gives the latency hiding of several accumulators). */
#define SL_LANES 16

/* acc[k] += w[i+k] * x[i+k] for i = 0, SL_LANES, ...; n must be a multiple of SL_LANES. */
static inline void sl_lanes_acc(float *restrict acc, const float *restrict w,
                                const float *restrict x, int64_t n)
{
    float a[SL_LANES];
    memcpy(a, acc, sizeof a);            /* a local copy can live in registers across the loop */
    for (int64_t i = 0; i < n; i += SL_LANES) {
#pragma GCC unroll 16
        for (int k = 0; k < SL_LANES; k++)
            a[k] += w[i + k] * x[i + k];
    }
    memcpy(acc, a, sizeof a);
}

/* Sum of the lanes, pairwise (keeps the final combine's error at log2(SL_LANES) roundings). */
static inline float sl_lanes_sum(const float *acc)
{
    float t[SL_LANES];
    memcpy(t, acc, sizeof t);
    for (int w = SL_LANES / 2; w > 0; w /= 2)
        for (int k = 0; k < w; k++)
            t[k] += t[k + w];
    return t[0];
}

/* ---- K-quant helpers ---------------------------------------------------------------------------- */

/* Scale and min of sub-block j (0..7) from the 12-byte packed field of Q4_K/Q5_K.
 * Layout: bytes 0-3 hold sc[0..3] (low 6 bits) and the top 2 bits of sc[4..7]; bytes 4-7 hold
 * m[0..3] and the top 2 bits of m[4..7]; bytes 8-11 hold the low nibbles of sc[4..7] (low half)
 * and m[4..7] (high half). */
static inline void sl_k_scale_min(const uint8_t *s, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m  = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        *m  = (s[j + 4] >> 4)   | ((s[j] >> 6) << 4);
    }
}

/* Inverse of sl_k_scale_min: packs eight 6-bit scales and mins (each 0..63). */
static inline void sl_k_pack_scales(uint8_t *s, const uint8_t *sc, const uint8_t *m)
{
    for (int j = 0; j < 4; j++) {
        s[j]     = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
        s[j + 4] = (uint8_t)(m[j]  | ((m[j + 4] >> 4) << 6));
        s[j + 8] = (uint8_t)((sc[j + 4] & 0x0f) | ((m[j + 4] & 0x0f) << 4));
    }
}

/* Round to nearest, ties to even (the default rounding of the float add below), without a libm call
 * and without undefined behaviour: adding 1.5*2^23 leaves the integer in the low mantissa bits.
 * Inputs are clamped to +-(2^22 - 1) first (NaN goes to the low end); for the quantizers' sane
 * inputs the clamp never acts, so results equal lrintf(). */
static inline int sl_round_int(float v)
{
    if (!(v > -4194303.0f)) v = -4194303.0f;
    if (v > 4194303.0f) v = 4194303.0f;
    float t = v + 12582912.0f;
    uint32_t u;
    memcpy(&u, &t, sizeof u);
    return (int)(u & 0x007fffff) - 0x00400000;
}

static inline int sl_clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Weighted asymmetric fit of one sub-block (the search of ggml's reference K-quantizer; the float
 * operations are kept in the same order so that, like ggml, the result is deterministic and
 * reproduces llama-quantize's files).  Finds scale >= 0, mn >= 0 and L[i] in 0..nmax minimising
 *     sum_i w[i] * (scale*L[i] - mn - x[i])^2.
 * The value range is first widened to include 0 (so mn >= 0: the format subtracts a min).  The
 * start is the plain min/max grid; then nstep+1 alternative grid densities (nmax + rmin + k*rdelta
 * levels across the range) are tried, each rounding pattern getting its least-squares (scale, min)
 * from the 2x2 normal equations; the lowest weighted error (squared, or absolute with abs_err)
 * wins.  Laux is scratch of n bytes.
 * Returns scale, stores mn. */
static inline float sl_k_fit_scale_min_err(int n, int nmax, const float *restrict x,
                                           const float *restrict w, uint8_t *restrict L,
                                           uint8_t *restrict Laux, float *mn,
                                           float rmin, float rdelta, int nstep, bool abs_err)
{
    float lo = x[0], hi = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (lo > 0) lo = 0;
    if (hi == lo) {                       /* all zero (or constant <= 0): nothing to scale */
        memset(L, 0, (size_t)n);
        *mn = -lo;
        return 0.0f;
    }
    float iscale = nmax / (hi - lo);
    float scale = 1 / iscale;
    float best_err = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)sl_clampi(sl_round_int(iscale * (x[i] - lo)), 0, nmax);
        float diff = scale * L[i] + lo - x[i];
        best_err += w[i] * (abs_err ? fabsf(diff) : diff * diff);
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (hi - lo);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = sl_clampi(sl_round_int(iscale * (x[i] - lo)), 0, nmax);
            Laux[i] = (uint8_t)l;
            float wl = w[i] * l;
            sum_l  += wl;
            sum_l2 += wl * l;
            sum_xl += wl * x[i];
        }
        float det = sum_w * sum_l2 - sum_l * sum_l;
        if (!(det > 0)) continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
        float this_min   = (sum_l2 * sum_x - sum_l * sum_xl) / det;
        if (this_min > 0) {               /* the format cannot add an offset: refit scale alone */
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float err = 0;
        for (int i = 0; i < n; i++) {
            float diff = this_scale * Laux[i] + this_min - x[i];
            err += w[i] * (abs_err ? fabsf(diff) : diff * diff);
        }
        if (err < best_err) {
            memcpy(L, Laux, (size_t)n);
            best_err = err;
            scale = this_scale;
            lo = this_min;
        }
    }
    *mn = -lo;
    return scale;
}

/* The squared-error fit (Q4_K, Q5_K); Q2_K's reference fits with absolute errors (abs_err). */
static inline float sl_k_fit_scale_min(int n, int nmax, const float *restrict x,
                                       const float *restrict w, uint8_t *restrict L,
                                       uint8_t *restrict Laux, float *mn,
                                       float rmin, float rdelta, int nstep)
{
    return sl_k_fit_scale_min_err(n, nmax, x, w, L, Laux, mn, rmin, rdelta, nstep, false);
}

/* Shared tail of the Q4_K / Q5_K reference quantizers: quantize the eight sub-block scales and
 * mins to 6 bits against their maxima, store d/dmin (f16) and the packed scales, then requantize
 * every element against the scales actually stored (L[i] in 0..nmax).  Elements of a sub-block
 * whose stored scale is 0 keep the search's L (their value is -dmin*m whatever L is). */
static inline void sl_k_finish_scales(const float *restrict x, int nmax, const float *scales,
                                      const float *mins, uint16_t *d_out, uint16_t *dmin_out,
                                      uint8_t *packed, uint8_t *restrict L)
{
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    float inv_min   = max_min   > 0 ? 63.0f / max_min   : 0.0f;
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
        ls[j] = (uint8_t)sl_clampi(sl_round_int(inv_scale * scales[j]), 0, 63);
        lm[j] = (uint8_t)sl_clampi(sl_round_int(inv_min * mins[j]), 0, 63);
    }
    sl_k_pack_scales(packed, ls, lm);
    *d_out = sl_f32_to_f16(max_scale / 63.0f);
    *dmin_out = sl_f32_to_f16(max_min / 63.0f);

    const float d = sl_f16_to_f32(*d_out), dmin = sl_f16_to_f32(*dmin_out);
    for (int j = 0; j < 8; j++) {
        const float ds = d * ls[j];
        if (!ds) continue;
        const float dm = dmin * lm[j];
        for (int i = 0; i < 32; i++)
            L[32 * j + i] = (uint8_t)sl_clampi(sl_round_int((x[32 * j + i] + dm) / ds), 0, nmax);
    }
}

/* Per-element weights of the reference K-quantizers: rms of the sub-block plus |x|, so large
 * values (which dominate a dot product) are fitted more closely. */
static inline void sl_k_weights32(const float *x, float *w)
{
    float sum_x2 = 0;
    for (int i = 0; i < 32; i++) sum_x2 += x[i] * x[i];
    float av = sqrtf(sum_x2 / 32);
    for (int i = 0; i < 32; i++) w[i] = av + fabsf(x[i]);
}

#endif
