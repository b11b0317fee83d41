/* kernels/iq4_xs.c — IQ4_XS: 256-element super-blocks of 8 sub-blocks × 32, x = (d * (ls - 32)) *
 * kvalues[q] with IQ4_NL's grid and a 6-bit scale per sub-block (4.25 bits per weight).
 *
 * Layout in k_quants.h.  d*(ls-32) has at most 16 significant bits and times a kvalue (<= 7 bits)
 * stays exact in f32, so values equal ggml's dequantize_row_iq4_xs.
 */
#include "kernels/k_quants.h"
#include "kernels/types.h"

/* Decode one super-block into out[256]. */
static inline void iq4_xs_block(const sl_block_iq4_xs *restrict b, float *restrict out)
{
    const float d = sl_f16_to_f32(b->d);
    for (int ib = 0; ib < SL_QK_K / 32; ib++) {
        const float dl = d * (sl_iq4_xs_scale(b, ib) - 32);
        const uint8_t *qs = b->qs + 16 * ib;
        for (int j = 0; j < 16; j++) {
            out[32 * ib + j]      = dl * sl_kvalues_iq4nl[qs[j] & 0x0f];
            out[32 * ib + 16 + j] = dl * sl_kvalues_iq4nl[qs[j] >> 4];
        }
    }
}

/* Contract: src holds n/256 blocks, n a multiple of 256; dst[0..n) receives the values. */
void sl_dequant_iq4_xs(const void *restrict src, float *restrict dst, int64_t n)
{
    const sl_block_iq4_xs *b = src;
    for (int64_t i = 0; i < n / SL_QK_K; i++)
        iq4_xs_block(&b[i], dst + i * SL_QK_K);
}

/* Contract: sum of dequantized w[i] * x[i] over n (multiple of 256) elements, f32 accumulation in
 * SL_LANES partial sums. */
float sl_dot_iq4_xs(const void *restrict w, const float *restrict x, int64_t n)
{
    const sl_block_iq4_xs *b = w;
    float acc[SL_LANES] = {0}, tmp[SL_QK_K];
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        iq4_xs_block(&b[i], tmp);
        sl_lanes_acc(acc, tmp, x + i * SL_QK_K, SL_QK_K);
    }
    return sl_lanes_sum(acc);
}

/* Contract: reference quantizer (ggml's quantize_iq4_xs without an importance matrix, as
 * llama-quantize runs it): per sub-block of 32 the IQ4 scale search (k_quants.h), then 6-bit signed
 * sub-block scales against d = -(largest scale)/32 and levels re-picked against each stored
 * scale.  Bytes equal llama-quantize's.  src finite; n a multiple of 256. */
void sl_quantize_iq4_xs(const float *restrict src, void *restrict dst, int64_t n)
{
    sl_block_iq4_xs *out = dst;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        const float *x = src + i * SL_QK_K;
        sl_block_iq4_xs *b = &out[i];
        uint8_t L[SL_QK_K];
        float scales[8], max_scale = 0, amax = 0;
        memset(L, 0, sizeof L);
        for (int ib = 0; ib < 8; ib++) {
            scales[ib] = sl_iq4_fit32(x + 32 * ib, L + 32 * ib);
            if (fabsf(scales[ib]) > amax) { amax = fabsf(scales[ib]); max_scale = scales[ib]; }
        }
        const float d = -max_scale / 32, id = d ? 1 / d : 0.0f;
        b->d = sl_f32_to_f16(d);
        b->scales_h = 0;
        memset(b->scales_l, 0, sizeof b->scales_l);
        for (int ib = 0; ib < 8; ib++) {
            const int l = sl_clampi(sl_round_int(id * scales[ib]), -32, 31);
            const float dl = d * l, idl = dl ? 1 / dl : 0.0f;
            for (int j = 0; j < 32; j++) L[32 * ib + j] = (uint8_t)sl_iq4_nearest(idl * x[32 * ib + j]);
            b->scales_l[ib / 2] |= (uint8_t)(((l + 32) & 0x0f) << (4 * (ib % 2)));
            b->scales_h |= (uint16_t)(((l + 32) >> 4) << (2 * ib));
        }
        for (int ib = 0; ib < 8; ib++)
            for (int j = 0; j < 16; j++)
                b->qs[16 * ib + j] = (uint8_t)(L[32 * ib + j] | (L[32 * ib + 16 + j] << 4));
    }
}
