/* kernels/q2_k.c — Q2_K: 256-element super-blocks of 16 sub-blocks × 16, 2.625 bits per weight.
 *
 * x = (d * sc) * q - dmin * m, q 2 bits, sc and m 4 bits per sub-block (layout in k_quants.h).
 * d*sc, (d*sc)*q and dmin*m are exact in f32 (11 + 4 + 2 bits), so the only rounding is the
 * subtraction, as in ggml's dequantize_row_q2_K: values are bit-identical.
 */
#include "kernels/k_quants.h"
#include "kernels/types.h"

/* Decode one super-block into out[256]. */
static inline void q2_k_block(const sl_block_q2_k *restrict b, float *restrict out)
{
    const float d = sl_f16_to_f32(b->d), dmin = sl_f16_to_f32(b->dmin);
    for (int h = 0; h < 2; h++) {
        const uint8_t *q = b->qs + 32 * h;
        for (int j = 0; j < 4; j++)
            for (int half = 0; half < 2; half++) {       /* sub-block 8h + 2j + half */
                const uint8_t sc = b->scales[8 * h + 2 * j + half];
                const float dl = d * (sc & 0x0f), ml = dmin * (sc >> 4);
                float *y = out + 128 * h + 32 * j + 16 * half;
                for (int l = 0; l < 16; l++) y[l] = dl * ((q[16 * half + l] >> (2 * j)) & 3) - ml;
            }
    }
}

/* Contract: src holds n/256 blocks, n a multiple of 256; dst[0..n) receives the values. */
void sl_dequant_q2_k(const void *restrict src, float *restrict dst, int64_t n)
{
    const sl_block_q2_k *b = src;
    for (int64_t i = 0; i < n / SL_QK_K; i++)
        q2_k_block(&b[i], dst + i * SL_QK_K);
}

/* Contract: sum of dequantized w[i] * x[i] over n (multiple of 256) elements, f32 accumulation in
 * SL_LANES partial sums. */
float sl_dot_q2_k(const void *restrict w, const float *restrict x, int64_t n)
{
    const sl_block_q2_k *b = w;
    float acc[SL_LANES] = {0}, tmp[SL_QK_K];
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        q2_k_block(&b[i], tmp);
        sl_lanes_acc(acc, tmp, x + i * SL_QK_K, SL_QK_K);
    }
    return sl_lanes_sum(acc);
}
