/* kernels/iq1_s.c — IQ1_S: 256-element super-blocks, 1.56 bits per weight (layout: iq_common.h).
 *
 * Each group of 8 is one point of the 2048-point grid over {-1, 0, 1}^8 (11-bit index); each
 * sub-block of 32 has a 3-bit scale s and one shift sign: x = (d * (2s + 1)) * (grid ± 1/8),
 * ggml's dequantize_row_iq1_s order.
 * Fast path: G = sum_ib (2s + 1) * sum_e grid_e * q_e and D = sum_ib (2s + 1) * (±1) * sum_e q_e
 * (the sub-block's two bsums) in int32; acc = acc + (f16(d) * y.d) * ((float)G + 0.125f * (float)D)
 * (kernels/simd.h).
 */
#include "kernels/iq_common.h"
#include "kernels/simd.h"
#include "kernels/types.h"

static inline int iq1_s_index(const sl_block_iq1_s *b, int ib, int l)
{
    return b->qs[4 * ib + l] | (((b->qh[ib] >> (3 * l)) & 7) << 8);
}

static inline void iq1_s_block(const sl_iq_grids *g, const sl_block_iq1_s *restrict b, float *restrict out)
{
    const float d = sl_f16_to_f32(b->d);
    for (int ib = 0; ib < 8; ib++) {
        const float dl = d * (float)(2 * ((b->qh[ib] >> 12) & 7) + 1);
        const float delta = b->qh[ib] & 0x8000 ? -SL_IQ1_DELTA : SL_IQ1_DELTA;
        for (int l = 0; l < 4; l++) {
            const uint64_t p = g->iq1s[iq1_s_index(b, ib, l)];
            for (int j = 0; j < 8; j++)
                out[32 * ib + 8 * l + j] = dl * ((float)(int8_t)sl_iq_coord64(p, j) + delta);
        }
    }
}

/* Contract: src holds n/256 blocks, n a multiple of 256; dst[0..n) receives the values. */
void sl_dequant_iq1_s(const void *restrict src, float *restrict dst, int64_t n)
{
    const sl_iq_grids *g = sl_iq_grids_get();
    const sl_block_iq1_s *b = src;
    for (int64_t i = 0; i < n / SL_QK_K; i++) iq1_s_block(g, &b[i], dst + i * SL_QK_K);
}

/* Contract: sum of dequantized w[i] * x[i] (types.h), f32 accumulation in SL_LANES partial sums. */
float sl_dot_iq1_s(const void *restrict w, const float *restrict x, int64_t n)
{
    const sl_iq_grids *g = sl_iq_grids_get();
    const sl_block_iq1_s *b = w;
    float acc[SL_LANES] = { 0 }, tmp[SL_QK_K];
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        iq1_s_block(g, &b[i], tmp);
        sl_lanes_acc(acc, tmp, x + i * SL_QK_K, SL_QK_K);
    }
    return sl_lanes_sum(acc);
}

/* Contract: canonical iq1_s x q8_K dot (kernels/simd.h).  |G|, |D| <= 8 * 15 * 32 * 127 = 0.49e6. */
float sl_qdot_iq1_s_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_iq_grids *g = sl_iq_grids_get();
    const sl_block_iq1_s *w = vw;
    const sl_block_q8_k *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        const int8_t *q = y[i].qs;
        int32_t G = 0, D = 0;
        for (int ib = 0; ib < 8; ib++) {
            const int ls = 2 * ((w[i].qh[ib] >> 12) & 7) + 1;
            int32_t sum = 0;
            for (int l = 0; l < 4; l++, q += 8) {
                const uint64_t p = g->iq1s[iq1_s_index(&w[i], ib, l)];
                for (int j = 0; j < 8; j++) sum += (int8_t)sl_iq_coord64(p, j) * q[j];
            }
            const int32_t qsum = y[i].bsums[2 * ib] + y[i].bsums[2 * ib + 1];
            G += ls * sum;
            D += (w[i].qh[ib] & 0x8000 ? -ls : ls) * qsum;
        }
        acc = acc + (sl_f16_to_f32(w[i].d) * y[i].d) * ((float)G + 0.125f * (float)D);
    }
    return acc;
}
