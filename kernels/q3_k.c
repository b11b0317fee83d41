/* kernels/q3_k.c — Q3_K: 256-element super-blocks of 16 sub-blocks × 16, 3.4375 bits per weight.
 *
 * x = (d * (sc - 32)) * (q - 4*!hbit): 2 low bits in qs, the third (inverted: set means no -4) in
 * hmask, 6-bit scales packed in 12 bytes (layout in k_quants.h).  Both products are exact in f32
 * (11 + 6 + 3 bits), so values equal ggml's dequantize_row_q3_K.
 */
#include "kernels/k_quants.h"
#include "kernels/types.h"

/* Decode one super-block into out[256]. */
static inline void q3_k_block(const sl_block_q3_k *restrict b, float *restrict out)
{
    const float d = sl_f16_to_f32(b->d);
    uint8_t sc[16];
    sl_q3_k_scales(b->scales, sc);
    for (int h = 0; h < 2; h++) {
        const uint8_t *q = b->qs + 32 * h;
        for (int j = 0; j < 4; j++) {
            const int hbit = 4 * h + j;
            for (int half = 0; half < 2; half++) {        /* sub-block 8h + 2j + half */
                const float dl = d * (sc[8 * h + 2 * j + half] - 32);
                float *y = out + 128 * h + 32 * j + 16 * half;
                for (int l = 16 * half; l < 16 * half + 16; l++) {
                    const int v = ((q[l] >> (2 * j)) & 3) - (((b->hmask[l] >> hbit) & 1) ? 0 : 4);
                    y[l - 16 * half] = dl * v;
                }
            }
        }
    }
}

/* Contract: src holds n/256 blocks, n a multiple of 256; dst[0..n) receives the values. */
void sl_dequant_q3_k(const void *restrict src, float *restrict dst, int64_t n)
{
    const sl_block_q3_k *b = src;
    for (int64_t i = 0; i < n / SL_QK_K; i++)
        q3_k_block(&b[i], dst + i * SL_QK_K);
}

/* Contract: sum of dequantized w[i] * x[i] over n (multiple of 256) elements, f32 accumulation in
 * SL_LANES partial sums. */
float sl_dot_q3_k(const void *restrict w, const float *restrict x, int64_t n)
{
    const sl_block_q3_k *b = w;
    float acc[SL_LANES] = {0}, tmp[SL_QK_K];
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        q3_k_block(&b[i], tmp);
        sl_lanes_acc(acc, tmp, x + i * SL_QK_K, SL_QK_K);
    }
    return sl_lanes_sum(acc);
}

/* Symmetric fit of 16 values to levels -4..3 (ggml's make_q3_quants with its rmse refinement,
 * same f32 operations): the largest-magnitude value maps to -4, then up to 5 passes move single
 * elements to the level that raises (sum w x l)^2 / (sum w l^2) (weights x^2), i.e. lowers the
 * weighted error at the optimal scale.  L gets levels + 4; returns the scale (sign may be negative). */
static float q3_fit16(const float *restrict x, int8_t *restrict L)
{
    const int nmax = 4;
    float amax = 0, vmax = 0;
    for (int i = 0; i < 16; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) { amax = ax; vmax = x[i]; }
    }
    if (amax < 1e-15f) {
        memset(L, 0, 16);
        return 0.0f;
    }
    const float iscale = -nmax / vmax;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < 16; i++) {
        const int l = sl_clampi(sl_round_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < 16; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (!(slx > 0)) continue;
            float sl2 = suml2 - w * L[i] * L[i];
            const int nl = sl_clampi(sl_round_int(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (nl == L[i]) continue;
            slx += w * x[i] * nl;
            sl2 += w * nl * nl;
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (int8_t)nl;
                sumlx = slx;
                suml2 = sl2;
                changed++;
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < 16; i++) L[i] = (int8_t)(L[i] + nmax);
    return sumlx / suml2;
}

/* Contract: reference quantizer (ggml's quantize_row_q3_K_ref algorithm, no importance matrix):
 * per 16 elements q3_fit16, 6-bit signed scales against the largest (which maps to -32), then
 * requantization against the stored scales.  Bytes equal llama-quantize's.  src finite; n a
 * multiple of 256. */
void sl_quantize_q3_k(const float *restrict src, void *restrict dst, int64_t n)
{
    sl_block_q3_k *out = dst;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        const float *x = src + i * SL_QK_K;
        sl_block_q3_k *b = &out[i];
        int8_t L[SL_QK_K];
        float scales[16], max_scale = 0, amax = 0;
        for (int j = 0; j < 16; j++) {
            scales[j] = q3_fit16(x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > amax) { amax = fabsf(scales[j]); max_scale = scales[j]; }
        }
        memset(b->scales, 0, sizeof b->scales);
        b->d = 0;
        if (max_scale != 0) {
            const float iscale = -32.0f / max_scale;
            for (int j = 0; j < 16; j++) {
                const int l = sl_clampi(sl_round_int(iscale * scales[j]), -32, 31) + 32;
                b->scales[j % 8] |= (uint8_t)((l & 0x0f) << (4 * (j / 8)));
                b->scales[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
            }
            b->d = sl_f32_to_f16(1 / iscale);
        }
        uint8_t sc[16];
        sl_q3_k_scales(b->scales, sc);
        const float d = sl_f16_to_f32(b->d);
        for (int j = 0; j < 16; j++) {
            const float dl = d * (sc[j] - 32);
            if (!dl) continue;
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (int8_t)(sl_clampi(sl_round_int(x[16 * j + l] / dl), -4, 3) + 4);
        }
        memset(b->hmask, 0, sizeof b->hmask);
        for (int e = 0; e < SL_QK_K; e++)
            if (L[e] > 3) {
                b->hmask[e % 32] |= (uint8_t)(1 << (e / 32));
                L[e] = (int8_t)(L[e] - 4);
            }
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l++) {
                const int8_t *Lh = L + 128 * h + l;
                b->qs[32 * h + l] = (uint8_t)(Lh[0] | (Lh[32] << 2) | (Lh[64] << 4) | (Lh[96] << 6));
            }
    }
}
