/* kernels/q6_k.c — Q6_K: 256-element super-blocks of 16 sub-blocks × 16, 6.5625 bits per weight.
 *
 * x = (d * scales[e/16]) * (q - 32), q 6 bits split over ql (low 4) and qh (high 2), int8 scales.
 * Both products are exact in f32 (11 + 8 + 6 bits), so the values equal ggml's dequantize_row_q6_K.
 */
#include "kernels/k_common.h"
#include "kernels/types.h"

/* Decode one super-block into out[256]. */
static inline void q6_k_block(const sl_block_q6_k *restrict b, float *restrict out)
{
    const float d = sl_f16_to_f32(b->d);
    for (int h = 0; h < 2; h++) {                 /* two halves of 128 elements */
        const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
        const int8_t *sc = b->scales + 8 * h;
        float *y = out + 128 * h;
        for (int s = 0; s < 2; s++)                /* 16 elements share a scale: fixed per loop */
            for (int l = 16 * s; l < 16 * s + 16; l++) {
                const int q0 = ((ql[l] & 0x0f)      | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q1 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q2 = ((ql[l] >> 4)        | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q3 = ((ql[l + 32] >> 4)   | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l]      = d * sc[s]     * q0;
                y[l + 32] = d * sc[s + 2] * q1;
                y[l + 64] = d * sc[s + 4] * q2;
                y[l + 96] = d * sc[s + 6] * q3;
            }
    }
}

/* Contract: src holds n/256 blocks, n a multiple of 256; dst[0..n) receives the values. */
void sl_dequant_q6_k(const void *restrict src, float *restrict dst, int64_t n)
{
    const sl_block_q6_k *b = src;
    for (int64_t i = 0; i < n / SL_QK_K; i++)
        q6_k_block(&b[i], dst + i * SL_QK_K);
}

/* Contract: sum of dequantized w[i] * x[i] over n (multiple of 256) elements, f32 accumulation in
 * SL_LANES partial sums. */
float sl_dot_q6_k(const void *restrict w, const float *restrict x, int64_t n)
{
    const sl_block_q6_k *b = w;
    float acc[SL_LANES] = {0}, tmp[SL_QK_K];
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        q6_k_block(&b[i], tmp);
        sl_lanes_acc(acc, tmp, x + i * SL_QK_K, SL_QK_K);
    }
    return sl_lanes_sum(acc);
}

/* Symmetric fit of 16 values to L in -32..31 (stored L+32): scale s with x ≈ s*l, weights x^2.
 * The grid is anchored on the largest-magnitude value, which maps to -32 (the side with one more
 * level); 19 grid densities around 32 levels are tried and the one maximising (Σwxl)^2/Σwl^2 — i.e.
 * minimising the weighted squared error at its optimal scale — is kept (ggml's make_qx_quants with
 * rmse_type 1, float operations in the same order).  Returns s (sign may be negative). */
static float q6_fit16(const float *restrict x, int8_t *restrict L)
{
    const int nmax = 32;
    float amax = 0, vmax = 0;
    for (int i = 0; i < 16; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) { amax = ax; vmax = x[i]; }
    }
    if (amax < 1e-15f) {                         /* all (nearly) zero */
        memset(L, 0, 16);
        return 0.0f;
    }
    float iscale = -nmax / vmax;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < 16; i++) {
        const int l = sl_clampi(sl_round_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / vmax;
        sumlx = suml2 = 0;
        for (int i = 0; i < 16; i++) {
            const int l = sl_clampi(sl_round_int(iscale * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < 16; i++)
                L[i] = (int8_t)(nmax + sl_clampi(sl_round_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Contract: reference quantizer (ggml's quantize_row_q6_K_ref algorithm): per 16 elements a
 * symmetric scale search, 8-bit scales against the largest, then requantization against the
 * stored scales.  src finite; n a multiple of 256. */
void sl_quantize_q6_k(const float *restrict src, void *restrict dst, int64_t n)
{
    sl_block_q6_k *out = dst;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        const float *x = src + i * SL_QK_K;
        sl_block_q6_k *b = &out[i];
        int8_t L[SL_QK_K];
        float scales[16], max_scale = 0, max_abs = 0;
        for (int j = 0; j < 16; j++) {
            scales[j] = q6_fit16(x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > max_abs) { max_abs = fabsf(scales[j]); max_scale = scales[j]; }
        }
        if (max_abs < 1e-15f) {                  /* all zero: d = 0, every element decodes to 0 */
            memset(b, 0, sizeof *b);
            continue;
        }
        /* The largest scale maps to -128 (int8's extra negative level), so d has the sign that
         * makes d*scale positive for it. */
        const float iscale = -128.0f / max_scale;
        b->d = sl_f32_to_f16(1 / iscale);
        for (int j = 0; j < 16; j++) {
            const int s = sl_round_int(iscale * scales[j]);
            b->scales[j] = (int8_t)(s > 127 ? 127 : s < -128 ? -128 : s);
        }
        const float d = sl_f16_to_f32(b->d);
        for (int j = 0; j < 16; j++) {
            const float ds = d * b->scales[j];
            if (!ds) continue;
            for (int k = 0; k < 16; k++)
                L[16 * j + k] = (int8_t)(sl_clampi(sl_round_int(x[16 * j + k] / ds), -32, 31) + 32);
        }
        for (int h = 0; h < 2; h++) {
            const int8_t *Lh = L + 128 * h;
            uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
            for (int l = 0; l < 32; l++) {
                const int q0 = Lh[l], q1 = Lh[l + 32], q2 = Lh[l + 64], q3 = Lh[l + 96];
                ql[l]      = (uint8_t)((q0 & 0x0f) | ((q2 & 0x0f) << 4));
                ql[l + 32] = (uint8_t)((q1 & 0x0f) | ((q3 & 0x0f) << 4));
                qh[l]      = (uint8_t)((q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) | ((q3 >> 4) << 6));
            }
        }
    }
}
