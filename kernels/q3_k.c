/* kernels/q3_k.c — Q3_K: 256-element super-blocks of 16 sub-blocks × 16, 3.4375 bits per weight.
 *
 * x = (d * (sc - 32)) * (q - 4*!hbit): 2 low bits in qs, the third (inverted: set means no -4) in
 * hmask, 6-bit scales packed in 12 bytes (layout in k_quants.h).  Both products are exact in f32
 * (11 + 6 + 3 bits), so values equal ggml's dequantize_row_q3_K.
 */
#include "kernels/k_quants.h"
#include "kernels/types.h"

/* Decode one super-block into out[256]. */
static inline void q3_k_block(const sl_block_q3_k *restrict b, float *restrict out)
{
    const float d = sl_f16_to_f32(b->d);
    uint8_t sc[16];
    sl_q3_k_scales(b->scales, sc);
    for (int h = 0; h < 2; h++) {
        const uint8_t *q = b->qs + 32 * h;
        for (int j = 0; j < 4; j++) {
            const int hbit = 4 * h + j;
            for (int half = 0; half < 2; half++) {        /* sub-block 8h + 2j + half */
                const float dl = d * (sc[8 * h + 2 * j + half] - 32);
                float *y = out + 128 * h + 32 * j + 16 * half;
                for (int l = 16 * half; l < 16 * half + 16; l++) {
                    const int v = ((q[l] >> (2 * j)) & 3) - (((b->hmask[l] >> hbit) & 1) ? 0 : 4);
                    y[l - 16 * half] = dl * v;
                }
            }
        }
    }
}

/* Contract: src holds n/256 blocks, n a multiple of 256; dst[0..n) receives the values. */
void sl_dequant_q3_k(const void *restrict src, float *restrict dst, int64_t n)
{
    const sl_block_q3_k *b = src;
    for (int64_t i = 0; i < n / SL_QK_K; i++)
        q3_k_block(&b[i], dst + i * SL_QK_K);
}

/* Contract: sum of dequantized w[i] * x[i] over n (multiple of 256) elements, f32 accumulation in
 * SL_LANES partial sums. */
float sl_dot_q3_k(const void *restrict w, const float *restrict x, int64_t n)
{
    const sl_block_q3_k *b = w;
    float acc[SL_LANES] = {0}, tmp[SL_QK_K];
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        q3_k_block(&b[i], tmp);
        sl_lanes_acc(acc, tmp, x + i * SL_QK_K, SL_QK_K);
    }
    return sl_lanes_sum(acc);
}
