/* kernels/q8_0.c — Q8_0: blocks of 32, x = d * q, q int8, d f16 (8.5 bits per weight).
 *
 * q*d is exact in f32 (8 + 11 bits), so values equal ggml's dequantize_row_q8_0.
 */
#include "kernels/k_common.h"
#include "kernels/types.h"

/* Contract: src holds n/32 blocks, n a multiple of 32; dst[0..n) receives the values. */
void sl_dequant_q8_0(const void *restrict src, float *restrict dst, int64_t n)
{
    const sl_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / SL_QK; i++) {
        const float d = sl_f16_to_f32(b[i].d);
        for (int j = 0; j < SL_QK; j++)
            dst[i * SL_QK + j] = b[i].qs[j] * d;
    }
}

/* Contract: sum of dequantized w[i] * x[i] over n (multiple of 32) elements, f32 accumulation in
 * SL_LANES partial sums. */
float sl_dot_q8_0(const void *restrict w, const float *restrict x, int64_t n)
{
    const sl_block_q8_0 *b = w;
    float acc[SL_LANES] = {0}, tmp[SL_QK];
    for (int64_t i = 0; i < n / SL_QK; i++) {
        const float d = sl_f16_to_f32(b[i].d);
        for (int j = 0; j < SL_QK; j++)
            tmp[j] = b[i].qs[j] * d;
        sl_lanes_acc(acc, tmp, x + i * SL_QK, SL_QK);
    }
    return sl_lanes_sum(acc);
}

/* Contract: ggml's reference Q8_0 quantizer (quantize_row_q8_0_ref), same float operations, so the
 * bytes equal llama-quantize's: d = amax/127, q = round(x/d) (half away from zero, roundf).
 * src finite; n a multiple of 32. */
void sl_quantize_q8_0(const float *restrict src, void *restrict dst, int64_t n)
{
    sl_block_q8_0 *out = dst;
    for (int64_t i = 0; i < n / SL_QK; i++) {
        const float *x = src + i * SL_QK;
        float amax = 0;
        for (int j = 0; j < SL_QK; j++)
            amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
        const float d = amax / 127;
        const float id = d ? 1.0f / d : 0.0f;
        out[i].d = sl_f32_to_f16(d);
        for (int j = 0; j < SL_QK; j++) {
            /* |x*id| <= 127 by construction; the clamp only guards non-finite input. */
            float v = roundf(x[j] * id);
            v = v >= -127 ? (v <= 127 ? v : 127) : -127;
            out[i].qs[j] = (int8_t)v;
        }
    }
}
