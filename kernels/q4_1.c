/* kernels/q4_1.c — Q4_1: blocks of 32, x = d * q + m, q 4 bits, d and m f16 (5 bits per weight).
 *
 * Layout in k_quants.h.  q*d is exact in f32 (4 + 11 bits), so the only rounding is the add, as in
 * ggml's dequantize_row_q4_1 (x0*d + m): values are bit-identical.
 */
#include "kernels/k_quants.h"
#include "kernels/types.h"

/* Decode one block into out[32]. */
static inline void q4_1_block(const sl_block_q4_1 *restrict b, float *restrict out)
{
    const float d = sl_f16_to_f32(b->d), m = sl_f16_to_f32(b->m);
    for (int j = 0; j < SL_QK / 2; j++) {
        out[j]             = (b->qs[j] & 0x0f) * d + m;
        out[j + SL_QK / 2] = (b->qs[j] >> 4) * d + m;
    }
}

/* Contract: src holds n/32 blocks, n a multiple of 32; dst[0..n) receives the values. */
void sl_dequant_q4_1(const void *restrict src, float *restrict dst, int64_t n)
{
    const sl_block_q4_1 *b = src;
    for (int64_t i = 0; i < n / SL_QK; i++)
        q4_1_block(&b[i], dst + i * SL_QK);
}

/* Contract: sum of dequantized w[i] * x[i] over n (multiple of 32) elements, f32 accumulation in
 * SL_LANES partial sums. */
float sl_dot_q4_1(const void *restrict w, const float *restrict x, int64_t n)
{
    const sl_block_q4_1 *b = w;
    float acc[SL_LANES] = {0}, tmp[SL_QK];
    for (int64_t i = 0; i < n / SL_QK; i++) {
        q4_1_block(&b[i], tmp);
        sl_lanes_acc(acc, tmp, x + i * SL_QK, SL_QK);
    }
    return sl_lanes_sum(acc);
}
