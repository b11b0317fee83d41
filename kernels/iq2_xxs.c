/* kernels/iq2_xxs.c — IQ2_XXS: 256-element super-blocks, 2.06 bits per weight (layout: iq_common.h).
 *
 * Each group of 8 is one point of the 256-point grid with 8 signs (7 stored, the eighth their
 * parity); each sub-block of 32 has a 4-bit scale s: x = (d * (0.5 + s) * 0.25) * grid * ±1, ggml's
 * dequantize_row_iq2_xxs order (every value is exact in f32, see iq_common.h).
 * Fast path: x . y over Q8_K activations as S = sum_ib (2s + 1) * sum_e grid_e * sign_e * q_e in
 * int32, acc = acc + (f16(d) * y.d) * (float)S, result 0.125f * acc (kernels/simd.h).
 */
#include "kernels/iq_common.h"
#include "kernels/simd.h"
#include "kernels/types.h"

static inline void iq2_xxs_block(const sl_iq_grids *g, const sl_block_iq2_xxs *restrict b, float *restrict out)
{
    const float d = sl_f16_to_f32(b->d);
    for (int ib = 0; ib < 8; ib++) {
        uint32_t aux[2];
        memcpy(aux, b->qs + 4 * ib, sizeof aux);
        const float db = d * (0.5f + (float)(aux[1] >> 28)) * 0.25f;
        for (int l = 0; l < 4; l++) {
            const uint64_t p = g->iq2xxs[(aux[0] >> (8 * l)) & 0xff];
            const uint8_t signs = sl_iq_sign8(aux[1] >> (7 * l));
            for (int j = 0; j < 8; j++)
                out[32 * ib + 8 * l + j] = db * (float)sl_iq_coord64(p, j) * ((signs >> j) & 1 ? -1.0f : 1.0f);
        }
    }
}

/* Contract: src holds n/256 blocks, n a multiple of 256; dst[0..n) receives the values. */
void sl_dequant_iq2_xxs(const void *restrict src, float *restrict dst, int64_t n)
{
    const sl_iq_grids *g = sl_iq_grids_get();
    const sl_block_iq2_xxs *b = src;
    for (int64_t i = 0; i < n / SL_QK_K; i++) iq2_xxs_block(g, &b[i], dst + i * SL_QK_K);
}

/* Contract: sum of dequantized w[i] * x[i] (types.h), f32 accumulation in SL_LANES partial sums. */
float sl_dot_iq2_xxs(const void *restrict w, const float *restrict x, int64_t n)
{
    const sl_iq_grids *g = sl_iq_grids_get();
    const sl_block_iq2_xxs *b = w;
    float acc[SL_LANES] = { 0 }, tmp[SL_QK_K];
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        iq2_xxs_block(g, &b[i], tmp);
        sl_lanes_acc(acc, tmp, x + i * SL_QK_K, SL_QK_K);
    }
    return sl_lanes_sum(acc);
}

/* Contract: canonical iq2_xxs x q8_K dot (kernels/simd.h).  |S| <= 8 * 31 * 32 * 43 * 127 = 43.3e6. */
float sl_qdot_iq2_xxs_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_iq_grids *g = sl_iq_grids_get();
    const sl_block_iq2_xxs *w = vw;
    const sl_block_q8_k *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        const int8_t *q = y[i].qs;
        int32_t S = 0;
        for (int ib = 0; ib < 8; ib++) {
            uint32_t aux[2];
            memcpy(aux, w[i].qs + 4 * ib, sizeof aux);
            int32_t sum = 0;
            for (int l = 0; l < 4; l++, q += 8) {
                const uint64_t p = g->iq2xxs[(aux[0] >> (8 * l)) & 0xff];
                const uint8_t signs = sl_iq_sign8(aux[1] >> (7 * l));
                for (int j = 0; j < 8; j++) {
                    const int v = sl_iq_coord64(p, j) * q[j];
                    sum += (signs >> j) & 1 ? -v : v;
                }
            }
            S += (int32_t)(2 * (aux[1] >> 28) + 1) * sum;
        }
        acc = acc + (sl_f16_to_f32(w[i].d) * y[i].d) * (float)S;
    }
    return 0.125f * acc;
}
