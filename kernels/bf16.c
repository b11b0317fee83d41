/* kernels/bf16.c — BF16 rows: the top 16 bits of an f32 (conversion to f32 is exact). */
#include "kernels/k_common.h"
#include "kernels/types.h"

#define CHUNK 256   /* elements converted into a stack buffer per step of the dot */

/* Shift into the high half; a plain integer loop gcc vectorizes (the memcpy in sl_bits_to_f32 is
 * the aliasing-safe bit cast and compiles to nothing). */
static inline void bf16_row(const uint16_t *restrict h, float *restrict out, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = sl_bits_to_f32((uint32_t)h[i] << 16);
}

/* Contract: dst[0..n) = exact f32 value of each bf16 in src (NaN payloads kept). */
void sl_dequant_bf16(const void *restrict src, float *restrict dst, int64_t n)
{
    bf16_row(src, dst, n);
}

/* Contract: sum of w[i]*x[i], i < n (any n >= 0), f32 accumulation in SL_LANES partial sums. */
float sl_dot_bf16(const void *restrict w, const float *restrict x, int64_t n)
{
    const uint16_t *h = w;
    float acc[SL_LANES] = {0}, tmp[CHUNK];
    int64_t i = 0;
    for (; i + CHUNK <= n; i += CHUNK) {
        bf16_row(h + i, tmp, CHUNK);
        sl_lanes_acc(acc, tmp, x + i, CHUNK);
    }
    const int64_t rest = n - i, main = rest - rest % SL_LANES;
    bf16_row(h + i, tmp, rest);
    sl_lanes_acc(acc, tmp, x + i, main);
    for (int64_t k = main; k < rest; k++)
        acc[k - main] += tmp[k] * x[i + k];
    return sl_lanes_sum(acc);
}

/* Contract: dst[i] = src[i] rounded to bf16 (nearest even; NaN stays a quiet NaN). */
void sl_quantize_bf16(const float *restrict src, void *restrict dst, int64_t n)
{
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i++)
        h[i] = sl_f32_to_bf16(src[i]);
}
