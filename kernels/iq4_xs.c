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
