/* kernels/q4_k.c — Q4_K: 256-element super-blocks of 8 sub-blocks × 32, 4.5 bits per weight.
 *
 * x = (d*sc) * q - (dmin*m), q in 0..15, sc and m 6-bit per sub-block (packed, see k_common.h).
 * The f32 operations are ggml's dequantize_row_q4_K's, in its order, so values are bit-identical
 * (in fact d*sc and (d*sc)*q are exact in f32 — 11+6+4 bits — so the only rounding is the subtraction).
 */
#include "kernels/k_common.h"
#include "kernels/types.h"

/* Decode one super-block into out[256]. */
static inline void q4_k_block(const sl_block_q4_k *restrict b, float *restrict out)
{
    const float d = sl_f16_to_f32(b->d), dmin = sl_f16_to_f32(b->dmin);
    const uint8_t *q = b->qs;
    for (int g = 0; g < 4; g++) {            /* group g = sub-blocks 2g (low nibbles), 2g+1 (high) */
        int sc, m;
        sl_k_scale_min(b->scales, 2 * g, &sc, &m);
        const float d1 = d * sc, m1 = dmin * m;
        sl_k_scale_min(b->scales, 2 * g + 1, &sc, &m);
        const float d2 = d * sc, m2 = dmin * m;
        for (int l = 0; l < 32; l++) out[64 * g + l]      = d1 * (q[l] & 0x0f) - m1;
        for (int l = 0; l < 32; l++) out[64 * g + 32 + l] = d2 * (q[l] >> 4) - m2;
        q += 32;
    }
}

/* Contract: src holds n/256 blocks, n a multiple of 256; dst[0..n) receives the values. */
void sl_dequant_q4_k(const void *restrict src, float *restrict dst, int64_t n)
{
    const sl_block_q4_k *b = src;
    for (int64_t i = 0; i < n / SL_QK_K; i++)
        q4_k_block(&b[i], dst + i * SL_QK_K);
}

/* Contract: sum of dequantized w[i] * x[i] over n (multiple of 256) elements, f32 accumulation in
 * SL_LANES partial sums. */
float sl_dot_q4_k(const void *restrict w, const float *restrict x, int64_t n)
{
    const sl_block_q4_k *b = w;
    float acc[SL_LANES] = {0}, tmp[SL_QK_K];
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        q4_k_block(&b[i], tmp);
        sl_lanes_acc(acc, tmp, x + i * SL_QK_K, SL_QK_K);
    }
    return sl_lanes_sum(acc);
}

/* Contract: reference quantizer (ggml's quantize_row_q4_K_ref algorithm, no importance matrix):
 * per sub-block a weighted (scale, min) search, then 6-bit scales, then requantization.
 * src finite; n a multiple of 256. */
void sl_quantize_q4_k(const float *restrict src, void *restrict dst, int64_t n)
{
    sl_block_q4_k *out = dst;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        const float *x = src + i * SL_QK_K;
        uint8_t L[SL_QK_K], Laux[32];
        float scales[8], mins[8], w[32];
        for (int j = 0; j < 8; j++) {
            sl_k_weights32(x + 32 * j, w);
            /* 21 grid densities from nmax-1 to nmax+1 levels (ggml's parameters for Q4_K) */
            scales[j] = sl_k_fit_scale_min(32, 15, x + 32 * j, w, L + 32 * j, Laux, &mins[j],
                                           -1.0f, 0.1f, 20);
        }
        sl_block_q4_k *b = &out[i];
        sl_k_finish_scales(x, 15, scales, mins, &b->d, &b->dmin, b->scales, L);
        for (int g = 0; g < 4; g++)
            for (int l = 0; l < 32; l++)
                b->qs[32 * g + l] = (uint8_t)(L[64 * g + l] | (L[64 * g + 32 + l] << 4));
    }
}
