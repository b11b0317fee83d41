/* kernels/iq3_s.c — IQ3_S: 256-element super-blocks, 3.44 bits per weight (layout: iq_common.h).
 *
 * Each group of 8 is two points of the 512-point grid of 4-vectors (9-bit index: a byte plus a
 * bit of qh) with 8 stored signs; each pair of sub-blocks shares a byte of two 4-bit scales:
 * x = (d * (1 + 2s)) * grid * ±1, ggml's dequantize_row_iq3_s order.
 * Fast path: S = sum_ib (2s + 1) * sum_e grid_e * sign_e * q_e in int32,
 * acc = acc + (f16(d) * y.d) * (float)S (kernels/simd.h).
 */
#include "kernels/iq_common.h"
#include "kernels/simd.h"
#include "kernels/types.h"

static inline int iq3_s_index(const sl_block_iq3_s *b, int ib, int k)
{
    return b->qs[8 * ib + k] | (((b->qh[ib] >> k) & 1) << 8);
}

static inline int iq3_s_scale(const sl_block_iq3_s *b, int ib)
{
    return 1 + 2 * ((b->scales[ib / 2] >> (4 * (ib & 1))) & 0xf);
}

static inline void iq3_s_block(const sl_iq_grids *g, const sl_block_iq3_s *restrict b, float *restrict out)
{
    const float d = sl_f16_to_f32(b->d);
    for (int ib = 0; ib < 8; ib++) {
        const float db = d * (float)iq3_s_scale(b, ib);
        for (int l = 0; l < 4; l++) {
            const uint32_t p1 = g->iq3s[iq3_s_index(b, ib, 2 * l)], p2 = g->iq3s[iq3_s_index(b, ib, 2 * l + 1)];
            const uint8_t s = b->signs[4 * ib + l];
            float *o = out + 32 * ib + 8 * l;
            for (int j = 0; j < 4; j++) {
                o[j]     = db * (float)sl_iq_coord32(p1, j) * ((s >> j) & 1 ? -1.0f : 1.0f);
                o[j + 4] = db * (float)sl_iq_coord32(p2, j) * ((s >> (j + 4)) & 1 ? -1.0f : 1.0f);
            }
        }
    }
}

/* Contract: src holds n/256 blocks, n a multiple of 256; dst[0..n) receives the values. */
void sl_dequant_iq3_s(const void *restrict src, float *restrict dst, int64_t n)
{
    const sl_iq_grids *g = sl_iq_grids_get();
    const sl_block_iq3_s *b = src;
    for (int64_t i = 0; i < n / SL_QK_K; i++) iq3_s_block(g, &b[i], dst + i * SL_QK_K);
}

/* Contract: sum of dequantized w[i] * x[i] (types.h), f32 accumulation in SL_LANES partial sums. */
float sl_dot_iq3_s(const void *restrict w, const float *restrict x, int64_t n)
{
    const sl_iq_grids *g = sl_iq_grids_get();
    const sl_block_iq3_s *b = w;
    float acc[SL_LANES] = { 0 }, tmp[SL_QK_K];
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        iq3_s_block(g, &b[i], tmp);
        sl_lanes_acc(acc, tmp, x + i * SL_QK_K, SL_QK_K);
    }
    return sl_lanes_sum(acc);
}

/* Contract: canonical iq3_s x q8_K dot (kernels/simd.h).  |S| <= 8 * 31 * 32 * 15 * 127 = 15.1e6. */
float sl_qdot_iq3_s_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_iq_grids *g = sl_iq_grids_get();
    const sl_block_iq3_s *w = vw;
    const sl_block_q8_k *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        const int8_t *q = y[i].qs;
        int32_t S = 0;
        for (int ib = 0; ib < 8; ib++) {
            int32_t sum = 0;
            for (int l = 0; l < 4; l++, q += 8) {
                const uint32_t p[2] = { g->iq3s[iq3_s_index(&w[i], ib, 2 * l)], g->iq3s[iq3_s_index(&w[i], ib, 2 * l + 1)] };
                const uint8_t s = w[i].signs[4 * ib + l];
                for (int j = 0; j < 8; j++) {
                    const int t = sl_iq_coord32(p[j >> 2], j & 3) * q[j];
                    sum += (s >> j) & 1 ? -t : t;
                }
            }
            S += iq3_s_scale(&w[i], ib) * sum;
        }
        acc = acc + (sl_f16_to_f32(w[i].d) * y[i].d) * (float)S;
    }
    return acc;
}
