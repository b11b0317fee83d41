/* kernels/iq1_m.c — IQ1_M: 256-element super-blocks, 1.75 bits per weight (layout: iq_common.h).
 *
 * Each group of 8 is one point of IQ1_S's 2048-point grid with its own shift sign; each half
 * sub-block of 16 has a 3-bit scale s; the f16 super-block scale d is spread over the top nibbles
 * of the scale words: x = (d * (2s + 1)) * (grid ± 1/8), ggml's dequantize_row_iq1_m order.
 * Fast path: G = sum over halves of (2s + 1) * sum_e grid_e * q_e and D = sum over groups of
 * (2s + 1) * (±1) * sum_e q_e in int32; acc = acc + (f16(d) * y.d) * ((float)G + 0.125f * (float)D)
 * (kernels/simd.h).
 */
#include "kernels/iq_common.h"
#include "kernels/simd.h"
#include "kernels/types.h"

/* Grid index and shift sign (true: -1/8) of group l of sub-block ib. */
static inline int iq1_m_index(const sl_block_iq1_m *b, int ib, int l)
{
    return b->qs[4 * ib + l] | (((b->qh[2 * ib + l / 2] >> (4 * (l & 1))) & 7) << 8);
}

static inline bool iq1_m_neg(const sl_block_iq1_m *b, int ib, int l)
{
    return (b->qh[2 * ib + l / 2] >> (4 * (l & 1) + 3)) & 1;
}

/* 3-bit scale of half h of sub-block ib, as 2s + 1. */
static inline int iq1_m_scale(const sl_block_iq1_m *b, int ib, int h)
{
    uint16_t w;
    memcpy(&w, b->scales + 2 * (ib / 2), sizeof w);
    return 2 * ((w >> (6 * (ib & 1) + 3 * h)) & 7) + 1;
}

static inline void iq1_m_block(const sl_iq_grids *g, const sl_block_iq1_m *restrict b, float *restrict out)
{
    const float d = sl_f16_to_f32(sl_iq1m_scale_bits(b->scales));
    for (int ib = 0; ib < 8; ib++) {
        const float dl[2] = { d * (float)iq1_m_scale(b, ib, 0), d * (float)iq1_m_scale(b, ib, 1) };
        for (int l = 0; l < 4; l++) {
            const uint64_t p = g->iq1s[iq1_m_index(b, ib, l)];
            const float delta = iq1_m_neg(b, ib, l) ? -SL_IQ1_DELTA : SL_IQ1_DELTA;
            for (int j = 0; j < 8; j++)
                out[32 * ib + 8 * l + j] = dl[l / 2] * ((float)(int8_t)sl_iq_coord64(p, j) + delta);
        }
    }
}

/* Contract: src holds n/256 blocks, n a multiple of 256; dst[0..n) receives the values. */
void sl_dequant_iq1_m(const void *restrict src, float *restrict dst, int64_t n)
{
    const sl_iq_grids *g = sl_iq_grids_get();
    const sl_block_iq1_m *b = src;
    for (int64_t i = 0; i < n / SL_QK_K; i++) iq1_m_block(g, &b[i], dst + i * SL_QK_K);
}

/* Contract: sum of dequantized w[i] * x[i] (types.h), f32 accumulation in SL_LANES partial sums. */
float sl_dot_iq1_m(const void *restrict w, const float *restrict x, int64_t n)
{
    const sl_iq_grids *g = sl_iq_grids_get();
    const sl_block_iq1_m *b = w;
    float acc[SL_LANES] = { 0 }, tmp[SL_QK_K];
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        iq1_m_block(g, &b[i], tmp);
        sl_lanes_acc(acc, tmp, x + i * SL_QK_K, SL_QK_K);
    }
    return sl_lanes_sum(acc);
}

/* Contract: canonical iq1_m x q8_K dot (kernels/simd.h).  |G|, |D| <= 16 * 15 * 16 * 127 = 0.49e6. */
float sl_qdot_iq1_m_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_iq_grids *g = sl_iq_grids_get();
    const sl_block_iq1_m *w = vw;
    const sl_block_q8_k *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        const int8_t *q = y[i].qs;
        int32_t G = 0, D = 0;
        for (int ib = 0; ib < 8; ib++)
            for (int l = 0; l < 4; l++, q += 8) {
                const uint64_t p = g->iq1s[iq1_m_index(&w[i], ib, l)];
                int32_t sum = 0, qsum = 0;
                for (int j = 0; j < 8; j++) {
                    sum += (int8_t)sl_iq_coord64(p, j) * q[j];
                    qsum += q[j];
                }
                const int ls = iq1_m_scale(&w[i], ib, l / 2);
                G += ls * sum;
                D += (iq1_m_neg(&w[i], ib, l) ? -ls : ls) * qsum;
            }
        acc = acc + (sl_f16_to_f32(sl_iq1m_scale_bits(w[i].scales)) * y[i].d) * ((float)G + 0.125f * (float)D);
    }
    return acc;
}
