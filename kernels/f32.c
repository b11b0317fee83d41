/* kernels/f32.c — F32 rows (no conversion). */
#include "kernels/k_common.h"
#include "kernels/types.h"

/* Contract: dst[0..n) = src[0..n). */
void sl_dequant_f32(const void *restrict src, float *restrict dst, int64_t n)
{
    memcpy(dst, src, (size_t)n * sizeof(float));
}

/* Contract: sum of w[i]*x[i], i < n (any n >= 0), f32 accumulation in SL_LANES partial sums; the
 * tail past the last multiple of SL_LANES goes to the first lanes. */
float sl_dot_f32(const void *restrict w, const float *restrict x, int64_t n)
{
    const float *wf = w;
    float acc[SL_LANES] = {0};
    const int64_t main = n - n % SL_LANES;
    sl_lanes_acc(acc, wf, x, main);
    for (int64_t i = main; i < n; i++)
        acc[i - main] += wf[i] * x[i];
    return sl_lanes_sum(acc);
}

/* Contract: dst[0..n) = src[0..n). */
void sl_quantize_f32(const float *restrict src, void *restrict dst, int64_t n)
{
    memcpy(dst, src, (size_t)n * sizeof(float));
}
