/* kernels/q5_k.c — Q5_K: 256-element super-blocks of 8 sub-blocks × 32, 5.5 bits per weight.
 *
 * Q4_K plus a fifth quant bit per element in qh (see k_common.h): x = (d*sc) * q - (dmin*m),
 * q in 0..31.  f32 operations in ggml's order (d*sc and (d*sc)*q are exact in f32: 11+6+5 bits),
 * so values are bit-identical to ggml's dequantize_row_q5_K.
 */
#include "kernels/k_common.h"
#include "kernels/types.h"

/* Decode one super-block into out[256]. */
static inline void q5_k_block(const sl_block_q5_k *restrict b, float *restrict out)
{
    const float d = sl_f16_to_f32(b->d), dmin = sl_f16_to_f32(b->dmin);
    const uint8_t *ql = b->qs, *qh = b->qh;
    for (int g = 0; g < 4; g++) {
        int sc, m;
        sl_k_scale_min(b->scales, 2 * g, &sc, &m);
        const float d1 = d * sc, m1 = dmin * m;
        sl_k_scale_min(b->scales, 2 * g + 1, &sc, &m);
        const float d2 = d * sc, m2 = dmin * m;
        const int lo_bit = 2 * g, hi_bit = 2 * g + 1;
        for (int l = 0; l < 32; l++)
            out[64 * g + l] = d1 * ((ql[l] & 0x0f) | (((qh[l] >> lo_bit) & 1) << 4)) - m1;
        for (int l = 0; l < 32; l++)
            out[64 * g + 32 + l] = d2 * ((ql[l] >> 4) | (((qh[l] >> hi_bit) & 1) << 4)) - m2;
        ql += 32;
    }
}

/* Contract: src holds n/256 blocks, n a multiple of 256; dst[0..n) receives the values. */
void sl_dequant_q5_k(const void *restrict src, float *restrict dst, int64_t n)
{
    const sl_block_q5_k *b = src;
    for (int64_t i = 0; i < n / SL_QK_K; i++)
        q5_k_block(&b[i], dst + i * SL_QK_K);
}

/* Contract: sum of dequantized w[i] * x[i] over n (multiple of 256) elements, f32 accumulation in
 * SL_LANES partial sums. */
float sl_dot_q5_k(const void *restrict w, const float *restrict x, int64_t n)
{
    const sl_block_q5_k *b = w;
    float acc[SL_LANES] = {0}, tmp[SL_QK_K];
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        q5_k_block(&b[i], tmp);
        sl_lanes_acc(acc, tmp, x + i * SL_QK_K, SL_QK_K);
    }
    return sl_lanes_sum(acc);
}

/* Contract: reference quantizer (ggml's quantize_row_q5_K_ref algorithm, no importance matrix).
 * src finite; n a multiple of 256. */
void sl_quantize_q5_k(const float *restrict src, void *restrict dst, int64_t n)
{
    sl_block_q5_k *out = dst;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        const float *x = src + i * SL_QK_K;
        uint8_t L[SL_QK_K], Laux[32];
        float scales[8], mins[8], w[32];
        for (int j = 0; j < 8; j++) {
            sl_k_weights32(x + 32 * j, w);
            /* 16 grid densities from nmax-0.5 to nmax+1 levels (ggml's parameters for Q5_K) */
            scales[j] = sl_k_fit_scale_min(32, 31, x + 32 * j, w, L + 32 * j, Laux, &mins[j],
                                           -0.5f, 0.1f, 15);
        }
        sl_block_q5_k *b = &out[i];
        sl_k_finish_scales(x, 31, scales, mins, &b->d, &b->dmin, b->scales, L);
        memset(b->qh, 0, sizeof b->qh);
        for (int g = 0; g < 4; g++)
            for (int l = 0; l < 32; l++) {
                const int lo = L[64 * g + l], hi = L[64 * g + 32 + l];
                b->qs[32 * g + l] = (uint8_t)((lo & 0x0f) | ((hi & 0x0f) << 4));
                b->qh[l] |= (uint8_t)(((lo >> 4) << (2 * g)) | ((hi >> 4) << (2 * g + 1)));
            }
    }
}
