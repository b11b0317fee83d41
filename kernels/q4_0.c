/* kernels/q4_0.c — Q4_0: blocks of 32, x = d * (q - 8), q 4 bits, d f16 (4.5 bits per weight).
 *
 * In a block, qs[j] low nibble is element j and high nibble element j + 16.  (q-8)*d is exact in
 * f32 (4 + 11 bits), so values equal ggml's dequantize_row_q4_0.
 */
#include "kernels/k_common.h"
#include "kernels/types.h"

/* Decode one block into out[32]. */
static inline void q4_0_block(const sl_block_q4_0 *restrict b, float *restrict out)
{
    const float d = sl_f16_to_f32(b->d);
    for (int j = 0; j < SL_QK / 2; j++) {
        out[j]             = ((b->qs[j] & 0x0f) - 8) * d;
        out[j + SL_QK / 2] = ((b->qs[j] >> 4) - 8) * d;
    }
}

/* Contract: src holds n/32 blocks, n a multiple of 32; dst[0..n) receives the values. */
void sl_dequant_q4_0(const void *restrict src, float *restrict dst, int64_t n)
{
    const sl_block_q4_0 *b = src;
    for (int64_t i = 0; i < n / SL_QK; i++)
        q4_0_block(&b[i], dst + i * SL_QK);
}

/* Contract: sum of dequantized w[i] * x[i] over n (multiple of 32) elements, f32 accumulation in
 * SL_LANES partial sums. */
float sl_dot_q4_0(const void *restrict w, const float *restrict x, int64_t n)
{
    const sl_block_q4_0 *b = w;
    float acc[SL_LANES] = {0}, tmp[SL_QK];
    for (int64_t i = 0; i < n / SL_QK; i++) {
        q4_0_block(&b[i], tmp);
        sl_lanes_acc(acc, tmp, x + i * SL_QK, SL_QK);
    }
    return sl_lanes_sum(acc);
}

/* Contract: ggml's reference Q4_0 quantizer (quantize_row_q4_0_ref), same float operations, so the
 * bytes equal llama-quantize's: the signed value of largest magnitude maps to q = 0 (d = max/-8),
 * the rest round to nearest (half away from zero, as (int)(v + 8.5) does for v >= -8), q <= 15.
 * src finite; n a multiple of 32. */
void sl_quantize_q4_0(const float *restrict src, void *restrict dst, int64_t n)
{
    sl_block_q4_0 *out = dst;
    for (int64_t i = 0; i < n / SL_QK; i++) {
        const float *x = src + i * SL_QK;
        float amax = 0, vmax = 0;
        for (int j = 0; j < SL_QK; j++)
            if (amax < fabsf(x[j])) { amax = fabsf(x[j]); vmax = x[j]; }
        const float d = vmax / -8;
        const float id = d ? 1.0f / d : 0.0f;
        out[i].d = sl_f32_to_f16(d);
        for (int j = 0; j < SL_QK / 2; j++) {
            /* x*id is in [-8, 8] by construction, so v is in [0.5, 16.5]; the clamps only guard the
             * int conversion against non-finite input. */
            float v0 = x[j] * id + 8.5f, v1 = x[j + SL_QK / 2] * id + 8.5f;
            v0 = v0 >= 0 ? (v0 < 15 ? v0 : 15) : 0;
            v1 = v1 >= 0 ? (v1 < 15 ? v1 : 15) : 0;
            out[i].qs[j] = (uint8_t)((int)v0 | ((int)v1 << 4));
        }
    }
}
