/* kernels/iq3_xxs.c — IQ3_XXS: 256-element super-blocks, 3.06 bits per weight (layout: iq_common.h).
 *
 * Each group of 8 is two points of the 256-point grid of 4-vectors with 8 signs (7 stored, the
 * eighth their parity); each sub-block of 32 has a 4-bit scale s:
 * x = (d * (0.5 + s) * 0.5) * grid * ±1, ggml's dequantize_row_iq3_xxs order.
 * Fast path: S = sum_ib (2s + 1) * sum_e grid_e * sign_e * q_e in int32,
 * acc = acc + (f16(d) * y.d) * (float)S, result 0.25f * acc (kernels/simd.h).
 */
#include "kernels/iq_common.h"
#include "kernels/simd.h"
#include "kernels/types.h"

static inline void iq3_xxs_block(const sl_iq_grids *g, const sl_block_iq3_xxs *restrict b, float *restrict out)
{
    const float d = sl_f16_to_f32(b->d);
    const uint8_t *qs = b->qs, *ss = b->qs + SL_QK_K / 4;
    for (int ib = 0; ib < 8; ib++) {
        uint32_t aux;
        memcpy(&aux, ss + 4 * ib, sizeof aux);
        const float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
        for (int l = 0; l < 4; l++) {
            const uint8_t signs = sl_iq_sign8(aux >> (7 * l));
            const uint32_t p1 = g->iq3xxs[qs[8 * ib + 2 * l]], p2 = g->iq3xxs[qs[8 * ib + 2 * l + 1]];
            float *o = out + 32 * ib + 8 * l;
            for (int j = 0; j < 4; j++) {
                o[j]     = db * (float)sl_iq_coord32(p1, j) * ((signs >> j) & 1 ? -1.0f : 1.0f);
                o[j + 4] = db * (float)sl_iq_coord32(p2, j) * ((signs >> (j + 4)) & 1 ? -1.0f : 1.0f);
            }
        }
    }
}

/* Contract: src holds n/256 blocks, n a multiple of 256; dst[0..n) receives the values. */
void sl_dequant_iq3_xxs(const void *restrict src, float *restrict dst, int64_t n)
{
    const sl_iq_grids *g = sl_iq_grids_get();
    const sl_block_iq3_xxs *b = src;
    for (int64_t i = 0; i < n / SL_QK_K; i++) iq3_xxs_block(g, &b[i], dst + i * SL_QK_K);
}

/* Contract: sum of dequantized w[i] * x[i] (types.h), f32 accumulation in SL_LANES partial sums. */
float sl_dot_iq3_xxs(const void *restrict w, const float *restrict x, int64_t n)
{
    const sl_iq_grids *g = sl_iq_grids_get();
    const sl_block_iq3_xxs *b = w;
    float acc[SL_LANES] = { 0 }, tmp[SL_QK_K];
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        iq3_xxs_block(g, &b[i], tmp);
        sl_lanes_acc(acc, tmp, x + i * SL_QK_K, SL_QK_K);
    }
    return sl_lanes_sum(acc);
}

/* Contract: canonical iq3_xxs x q8_K dot (kernels/simd.h).  |S| <= 8 * 31 * 32 * 62 * 127 = 62.5e6. */
float sl_qdot_iq3_xxs_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_iq_grids *g = sl_iq_grids_get();
    const sl_block_iq3_xxs *w = vw;
    const sl_block_q8_k *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        const uint8_t *qs = w[i].qs, *ss = w[i].qs + SL_QK_K / 4;
        const int8_t *q = y[i].qs;
        int32_t S = 0;
        for (int ib = 0; ib < 8; ib++) {
            uint32_t aux;
            memcpy(&aux, ss + 4 * ib, sizeof aux);
            int32_t sum = 0;
            for (int l = 0; l < 4; l++, q += 8) {
                const uint8_t signs = sl_iq_sign8(aux >> (7 * l));
                const uint32_t p[2] = { g->iq3xxs[qs[8 * ib + 2 * l]], g->iq3xxs[qs[8 * ib + 2 * l + 1]] };
                for (int j = 0; j < 8; j++) {
                    const int t = sl_iq_coord32(p[j >> 2], j & 3) * q[j];
                    sum += (signs >> j) & 1 ? -t : t;
                }
            }
            S += (int32_t)(2 * (aux >> 28) + 1) * sum;
        }
        acc = acc + (sl_f16_to_f32(w[i].d) * y[i].d) * (float)S;
    }
    return 0.25f * acc;
}
