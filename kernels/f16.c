/* kernels/f16.c — F16 (IEEE half) rows.
 *
 * Rows are converted with a branch-free form of the exact half -> float conversion so that gcc can
 * vectorize it (f16.h's sl_f16_to_f32 branches per value); both are tested against an independent
 * reference over all 65536 halfs.
 */
#include "kernels/k_common.h"
#include "kernels/types.h"

#define CHUNK 256   /* elements converted into a stack buffer per step of the dot */

/* Exact half -> float without branches:
 *  - normal and inf/NaN: move exponent+mantissa up by 13 bits and rebias the exponent with an
 *    integer add (+112 for finite, +224 so that exponent 31 becomes 255 for inf/NaN);
 *  - subnormal (exponent 0): the float 2^-14 * (1 + m/1024) minus 2^-14 is m * 2^-24, exact, with
 *    no subnormal float arithmetic (which costs a microcode assist on x86);
 * then select by exponent (with masks, so the loop has no control flow) and put the sign back. */
static inline float f16_to_f32_nb(uint16_t h)
{
    const uint32_t em = h & 0x7fffu, sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t shifted = em << 13;
    const uint32_t inf_mask = 0u - (uint32_t)(em >= 0x7c00u);      /* all ones for inf/NaN */
    const uint32_t sub_mask = 0u - (uint32_t)(em < 0x0400u);       /* all ones for subnormal/0 */
    const uint32_t normal = shifted + (112u << 23) + (inf_mask & (112u << 23));
    const uint32_t sub = sl_f32_to_bits(sl_bits_to_f32((113u << 23) | shifted) - 0x1p-14f);
    return sl_bits_to_f32(sign | (sub & sub_mask) | (normal & ~sub_mask));
}

static inline void f16_row(const uint16_t *restrict h, float *restrict out, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = f16_to_f32_nb(h[i]);
}

/* Contract: dst[0..n) = exact f32 value of each half in src (inf, NaN payloads and subnormals kept). */
void sl_dequant_f16(const void *restrict src, float *restrict dst, int64_t n)
{
    f16_row(src, dst, n);
}

/* Contract: sum of w[i]*x[i], i < n (any n >= 0), f32 accumulation in SL_LANES partial sums. */
float sl_dot_f16(const void *restrict w, const float *restrict x, int64_t n)
{
    const uint16_t *h = w;
    float acc[SL_LANES] = {0}, tmp[CHUNK];
    int64_t i = 0;
    for (; i + CHUNK <= n; i += CHUNK) {
        f16_row(h + i, tmp, CHUNK);
        sl_lanes_acc(acc, tmp, x + i, CHUNK);
    }
    const int64_t rest = n - i, main = rest - rest % SL_LANES;
    f16_row(h + i, tmp, rest);
    sl_lanes_acc(acc, tmp, x + i, main);
    for (int64_t k = main; k < rest; k++)
        acc[k - main] += tmp[k] * x[i + k];
    return sl_lanes_sum(acc);
}

/* Contract: dst[i] = src[i] rounded to half (nearest even; overflow to inf; NaN stays NaN). */
void sl_quantize_f16(const float *restrict src, void *restrict dst, int64_t n)
{
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i++)
        h[i] = sl_f32_to_f16(src[i]);
}
