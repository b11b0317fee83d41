/* kernels/iq2_s.c — IQ2_S: 256-element super-blocks, 2.56 bits per weight (layout: iq_common.h).
 *
 * Each group of 8 is one point of the 1024-point grid (10-bit index: a byte plus 2 bits of qh)
 * with 8 stored signs; groups 0-1 and 2-3 of a sub-block have their own 4-bit scales:
 * x = (d * (0.5 + s) * 0.25) * grid * ±1, ggml's dequantize_row_iq2_s order.
 * Fast path: as IQ2_XS (S over half sub-blocks, 0.125f * acc; kernels/simd.h).
 */
#include "kernels/iq_common.h"
#include "kernels/simd.h"
#include "kernels/types.h"

static inline int iq2_s_index(const sl_block_iq2_s *b, int ib, int l)
{
    return b->qs[4 * ib + l] | ((b->qh[ib] << (8 - 2 * l)) & 0x300);
}

static inline void iq2_s_block(const sl_iq_grids *g, const sl_block_iq2_s *restrict b, float *restrict out)
{
    const float d = sl_f16_to_f32(b->d);
    const uint8_t *signs = b->qs + SL_QK_K / 8;
    for (int ib = 0; ib < 8; ib++) {
        const float db[2] = { d * (0.5f + (float)(b->scales[ib] & 0xf)) * 0.25f,
                              d * (0.5f + (float)(b->scales[ib] >> 4)) * 0.25f };
        for (int l = 0; l < 4; l++) {
            const uint64_t p = g->iq2s[iq2_s_index(b, ib, l)];
            const uint8_t s = signs[4 * ib + l];
            for (int j = 0; j < 8; j++)
                out[32 * ib + 8 * l + j] = db[l / 2] * (float)sl_iq_coord64(p, j) * ((s >> j) & 1 ? -1.0f : 1.0f);
        }
    }
}

/* Contract: src holds n/256 blocks, n a multiple of 256; dst[0..n) receives the values. */
void sl_dequant_iq2_s(const void *restrict src, float *restrict dst, int64_t n)
{
    const sl_iq_grids *g = sl_iq_grids_get();
    const sl_block_iq2_s *b = src;
    for (int64_t i = 0; i < n / SL_QK_K; i++) iq2_s_block(g, &b[i], dst + i * SL_QK_K);
}

/* Contract: sum of dequantized w[i] * x[i] (types.h), f32 accumulation in SL_LANES partial sums. */
float sl_dot_iq2_s(const void *restrict w, const float *restrict x, int64_t n)
{
    const sl_iq_grids *g = sl_iq_grids_get();
    const sl_block_iq2_s *b = w;
    float acc[SL_LANES] = { 0 }, tmp[SL_QK_K];
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        iq2_s_block(g, &b[i], tmp);
        sl_lanes_acc(acc, tmp, x + i * SL_QK_K, SL_QK_K);
    }
    return sl_lanes_sum(acc);
}

/* Contract: canonical iq2_s x q8_K dot (kernels/simd.h).  |S| <= 43.3e6 as IQ2_XS. */
float sl_qdot_iq2_s_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_iq_grids *g = sl_iq_grids_get();
    const sl_block_iq2_s *w = vw;
    const sl_block_q8_k *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        const int8_t *q = y[i].qs;
        const uint8_t *signs = w[i].qs + SL_QK_K / 8;
        int32_t S = 0;
        for (int ib = 0; ib < 8; ib++) {
            int32_t sum[2] = { 0, 0 };
            for (int l = 0; l < 4; l++, q += 8) {
                const uint64_t p = g->iq2s[iq2_s_index(&w[i], ib, l)];
                const uint8_t s = signs[4 * ib + l];
                for (int j = 0; j < 8; j++) {
                    const int t = sl_iq_coord64(p, j) * q[j];
                    sum[l / 2] += (s >> j) & 1 ? -t : t;
                }
            }
            S += (2 * (w[i].scales[ib] & 0xf) + 1) * sum[0] + (2 * (w[i].scales[ib] >> 4) + 1) * sum[1];
        }
        acc = acc + (sl_f16_to_f32(w[i].d) * y[i].d) * (float)S;
    }
    return 0.125f * acc;
}
