/* kernels/iq4_nl.c — IQ4_NL: blocks of 32, x = d * kvalues[q], q 4 bits indexing a fixed
 * non-uniform 16-level grid (k_quants.h), d f16 (4.5 bits per weight).
 *
 * d * kvalue is exact in f32 (11 + 7 bits), so values equal ggml's dequantize_row_iq4_nl.
 * llama.cpp falls back to this type for IQ4_XS rows that are not a multiple of 256.
 */
#include "kernels/k_quants.h"
#include "kernels/types.h"

/* Decode one block into out[32]. */
static inline void iq4_nl_block(const sl_block_iq4_nl *restrict b, float *restrict out)
{
    const float d = sl_f16_to_f32(b->d);
    for (int j = 0; j < SL_QK / 2; j++) {
        out[j]             = d * sl_kvalues_iq4nl[b->qs[j] & 0x0f];
        out[j + SL_QK / 2] = d * sl_kvalues_iq4nl[b->qs[j] >> 4];
    }
}

/* Contract: src holds n/32 blocks, n a multiple of 32; dst[0..n) receives the values. */
void sl_dequant_iq4_nl(const void *restrict src, float *restrict dst, int64_t n)
{
    const sl_block_iq4_nl *b = src;
    for (int64_t i = 0; i < n / SL_QK; i++)
        iq4_nl_block(&b[i], dst + i * SL_QK);
}

/* Contract: sum of dequantized w[i] * x[i] over n (multiple of 32) elements, f32 accumulation in
 * SL_LANES partial sums. */
float sl_dot_iq4_nl(const void *restrict w, const float *restrict x, int64_t n)
{
    const sl_block_iq4_nl *b = w;
    float acc[SL_LANES] = {0}, tmp[SL_QK];
    for (int64_t i = 0; i < n / SL_QK; i++) {
        iq4_nl_block(&b[i], tmp);
        sl_lanes_acc(acc, tmp, x + i * SL_QK, SL_QK);
    }
    return sl_lanes_sum(acc);
}

/* Contract: reference quantizer (ggml's quantize_iq4_nl without an importance matrix, as
 * llama-quantize runs it): the IQ4 scale search per block (k_quants.h), d stored as f16, levels
 * re-picked against the f32 scale.  Bytes equal llama-quantize's.  src finite; n a multiple of 32. */
void sl_quantize_iq4_nl(const float *restrict src, void *restrict dst, int64_t n)
{
    sl_block_iq4_nl *out = dst;
    for (int64_t i = 0; i < n / SL_QK; i++) {
        const float *x = src + i * SL_QK;
        uint8_t L[SL_QK];
        memset(L, 0, sizeof L);
        const float d = sl_iq4_fit32(x, L), id = d ? 1 / d : 0.0f;
        out[i].d = sl_f32_to_f16(d);
        for (int j = 0; j < SL_QK; j++) L[j] = (uint8_t)sl_iq4_nearest(id * x[j]);
        for (int j = 0; j < SL_QK / 2; j++) out[i].qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
    }
}
