/* kernels/iq2_xs.c — IQ2_XS: 256-element super-blocks, 2.31 bits per weight (layout: iq_common.h).
 *
 * Each group of 8 is one point of the 512-point grid with 8 signs (7 stored, the eighth their
 * parity); groups 0-1 and 2-3 of a sub-block have their own 4-bit scales:
 * x = (d * (0.5 + s) * 0.25) * grid * ±1, ggml's dequantize_row_iq2_xs order.
 * Fast path: S = sum over half sub-blocks of (2s + 1) * sum_e grid_e * sign_e * q_e in int32,
 * acc = acc + (f16(d) * y.d) * (float)S, result 0.125f * acc (kernels/simd.h).
 */
#include "kernels/iq_common.h"
#include "kernels/simd.h"
#include "kernels/types.h"

static inline void iq2_xs_block(const sl_iq_grids *g, const sl_block_iq2_xs *restrict b, float *restrict out)
{
    const float d = sl_f16_to_f32(b->d);
    for (int ib = 0; ib < 8; ib++) {
        const float db[2] = { d * (0.5f + (float)(b->scales[ib] & 0xf)) * 0.25f,
                              d * (0.5f + (float)(b->scales[ib] >> 4)) * 0.25f };
        for (int l = 0; l < 4; l++) {
            const uint16_t v = b->qs[4 * ib + l];
            const uint64_t p = g->iq2xs[v & 511];
            const uint8_t signs = sl_iq_sign8(v >> 9);
            for (int j = 0; j < 8; j++)
                out[32 * ib + 8 * l + j] = db[l / 2] * (float)sl_iq_coord64(p, j) * ((signs >> j) & 1 ? -1.0f : 1.0f);
        }
    }
}

/* Contract: src holds n/256 blocks, n a multiple of 256; dst[0..n) receives the values. */
void sl_dequant_iq2_xs(const void *restrict src, float *restrict dst, int64_t n)
{
    const sl_iq_grids *g = sl_iq_grids_get();
    const sl_block_iq2_xs *b = src;
    for (int64_t i = 0; i < n / SL_QK_K; i++) iq2_xs_block(g, &b[i], dst + i * SL_QK_K);
}

/* Contract: sum of dequantized w[i] * x[i] (types.h), f32 accumulation in SL_LANES partial sums. */
float sl_dot_iq2_xs(const void *restrict w, const float *restrict x, int64_t n)
{
    const sl_iq_grids *g = sl_iq_grids_get();
    const sl_block_iq2_xs *b = w;
    float acc[SL_LANES] = { 0 }, tmp[SL_QK_K];
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        iq2_xs_block(g, &b[i], tmp);
        sl_lanes_acc(acc, tmp, x + i * SL_QK_K, SL_QK_K);
    }
    return sl_lanes_sum(acc);
}

/* Contract: canonical iq2_xs x q8_K dot (kernels/simd.h).  |S| <= 16 * 31 * 16 * 43 * 127 = 43.3e6. */
float sl_qdot_iq2_xs_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_iq_grids *g = sl_iq_grids_get();
    const sl_block_iq2_xs *w = vw;
    const sl_block_q8_k *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        const int8_t *q = y[i].qs;
        int32_t S = 0;
        for (int ib = 0; ib < 8; ib++) {
            int32_t sum[2] = { 0, 0 };
            for (int l = 0; l < 4; l++, q += 8) {
                const uint16_t v = w[i].qs[4 * ib + l];
                const uint64_t p = g->iq2xs[v & 511];
                const uint8_t signs = sl_iq_sign8(v >> 9);
                for (int j = 0; j < 8; j++) {
                    const int t = sl_iq_coord64(p, j) * q[j];
                    sum[l / 2] += (signs >> j) & 1 ? -t : t;
                }
            }
            S += (2 * (w[i].scales[ib] & 0xf) + 1) * sum[0] + (2 * (w[i].scales[ib] >> 4) + 1) * sum[1];
        }
        acc = acc + (sl_f16_to_f32(w[i].d) * y[i].d) * (float)S;
    }
    return 0.125f * acc;
}
