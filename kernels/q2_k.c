/* kernels/q2_k.c — Q2_K: 256-element super-blocks of 16 sub-blocks × 16, 2.625 bits per weight.
 *
 * x = (d * sc) * q - dmin * m, q 2 bits, sc and m 4 bits per sub-block (layout in k_quants.h).
 * d*sc, (d*sc)*q and dmin*m are exact in f32 (11 + 4 + 2 bits), so the only rounding is the
 * subtraction, as in ggml's dequantize_row_q2_K: values are bit-identical.
 */
#include "kernels/k_quants.h"
#include "kernels/types.h"

/* Decode one super-block into out[256]. */
static inline void q2_k_block(const sl_block_q2_k *restrict b, float *restrict out)
{
    const float d = sl_f16_to_f32(b->d), dmin = sl_f16_to_f32(b->dmin);
    for (int h = 0; h < 2; h++) {
        const uint8_t *q = b->qs + 32 * h;
        for (int j = 0; j < 4; j++)
            for (int half = 0; half < 2; half++) {       /* sub-block 8h + 2j + half */
                const uint8_t sc = b->scales[8 * h + 2 * j + half];
                const float dl = d * (sc & 0x0f), ml = dmin * (sc >> 4);
                float *y = out + 128 * h + 32 * j + 16 * half;
                for (int l = 0; l < 16; l++) y[l] = dl * ((q[16 * half + l] >> (2 * j)) & 3) - ml;
            }
    }
}

/* Contract: src holds n/256 blocks, n a multiple of 256; dst[0..n) receives the values. */
void sl_dequant_q2_k(const void *restrict src, float *restrict dst, int64_t n)
{
    const sl_block_q2_k *b = src;
    for (int64_t i = 0; i < n / SL_QK_K; i++)
        q2_k_block(&b[i], dst + i * SL_QK_K);
}

/* Contract: sum of dequantized w[i] * x[i] over n (multiple of 256) elements, f32 accumulation in
 * SL_LANES partial sums. */
float sl_dot_q2_k(const void *restrict w, const float *restrict x, int64_t n)
{
    const sl_block_q2_k *b = w;
    float acc[SL_LANES] = {0}, tmp[SL_QK_K];
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        q2_k_block(&b[i], tmp);
        sl_lanes_acc(acc, tmp, x + i * SL_QK_K, SL_QK_K);
    }
    return sl_lanes_sum(acc);
}

/* Contract: reference quantizer (ggml's quantize_row_q2_K_ref algorithm, no importance matrix):
 * per sub-block of 16 an asymmetric (scale, min) fit over 2-bit levels weighted by |x| with
 * absolute errors (16 grid densities from 2.5 to 4 levels), then 4-bit scales and mins against
 * their maxima, then requantization against the stored values.  Same f32 operations, so the bytes
 * equal llama-quantize's.  src finite; n a multiple of 256. */
void sl_quantize_q2_k(const float *restrict src, void *restrict dst, int64_t n)
{
    sl_block_q2_k *out = dst;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        const float *x = src + i * SL_QK_K;
        sl_block_q2_k *b = &out[i];
        uint8_t L[SL_QK_K], Laux[16];
        float scales[16], mins[16], w[16], max_scale = 0, max_min = 0;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++) w[l] = fabsf(x[16 * j + l]);
            scales[j] = sl_k_fit_scale_min_err(16, 3, x + 16 * j, w, L + 16 * j, Laux, &mins[j], -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        memset(b->scales, 0, sizeof b->scales);
        b->d = b->dmin = 0;
        if (max_scale > 0) {
            const float iscale = 15.0f / max_scale;
            for (int j = 0; j < 16; j++) b->scales[j] = (uint8_t)sl_round_int(iscale * scales[j]);
            b->d = sl_f32_to_f16(max_scale / 15.0f);
        }
        if (max_min > 0) {
            const float iscale = 15.0f / max_min;
            for (int j = 0; j < 16; j++) b->scales[j] |= (uint8_t)(sl_round_int(iscale * mins[j]) << 4);
            b->dmin = sl_f32_to_f16(max_min / 15.0f);
        }
        const float d = sl_f16_to_f32(b->d), dmin = sl_f16_to_f32(b->dmin);
        for (int j = 0; j < 16; j++) {
            const float dl = d * (b->scales[j] & 0x0f);
            if (!dl) continue;                    /* the search's levels stay (value is -dm anyway) */
            const float dm = dmin * (b->scales[j] >> 4);
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (uint8_t)sl_clampi(sl_round_int((x[16 * j + l] + dm) / dl), 0, 3);
        }
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l++) {
                const uint8_t *Lh = L + 128 * h + l;
                b->qs[32 * h + l] = (uint8_t)(Lh[0] | (Lh[32] << 2) | (Lh[64] << 4) | (Lh[96] << 6));
            }
    }
}
