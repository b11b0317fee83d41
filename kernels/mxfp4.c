/* kernels/mxfp4.c — MXFP4 (ggml type 39, OCP microscaling FP4; gpt-oss's expert weights): blocks of
 * 32, x = kvalues_mxfp4[q] * 2^(e - 128) with q 4 bits (an E2M1 value, doubled) and e the block's
 * E8M0 exponent byte (4.25 bits per weight).  Layout and decoding in kernels/k_quants.h.
 *
 * kvalue * 2^(e-128) is a small integer times a power of two, so the f32 product is exact (or
 * overflows to ±inf for e >= 253 with large kvalues, as in ggml): values equal ggml's
 * dequantize_row_mxfp4 bit for bit, whatever the order of operations.
 */
#include "kernels/k_quants.h"
#include "kernels/types.h"

/* Decode one block into out[32]. */
static inline void mxfp4_block(const sl_block_mxfp4 *restrict b, float *restrict out)
{
    const float d = sl_e8m0_half(b->e);
    for (int j = 0; j < SL_QK / 2; j++) {
        out[j]             = (float)sl_kvalues_mxfp4[b->qs[j] & 0x0f] * d;
        out[j + SL_QK / 2] = (float)sl_kvalues_mxfp4[b->qs[j] >> 4] * d;
    }
}

/* Contract: src holds n/32 blocks, n a multiple of 32; dst[0..n) receives the values. */
void sl_dequant_mxfp4(const void *restrict src, float *restrict dst, int64_t n)
{
    const sl_block_mxfp4 *b = src;
    for (int64_t i = 0; i < n / SL_QK; i++)
        mxfp4_block(&b[i], dst + i * SL_QK);
}

/* Contract: sum of dequantized w[i] * x[i] over n (multiple of 32) elements, f32 accumulation in
 * SL_LANES partial sums (the exact-mode dot). */
float sl_dot_mxfp4(const void *restrict w, const float *restrict x, int64_t n)
{
    const sl_block_mxfp4 *b = w;
    float acc[SL_LANES] = {0}, tmp[SL_QK];
    for (int64_t i = 0; i < n / SL_QK; i++) {
        mxfp4_block(&b[i], tmp);
        sl_lanes_acc(acc, tmp, x + i * SL_QK, SL_QK);
    }
    return sl_lanes_sum(acc);
}

/* ggml's best_index_mxfp4: the first index with the smallest |kvalue * d - x| (f32 operations in
 * this order; index 0 (+0) wins over index 8 (-0), so a quantizer never writes 8). */
static int best_index(float x, float d)
{
    int best = 0;
    float best_err = fabsf((float)sl_kvalues_mxfp4[0] * d - x);
    for (int i = 1; i < 16; i++) {
        const float err = fabsf((float)sl_kvalues_mxfp4[i] * d - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

/* Contract: reference quantizer, ggml's quantize_row_mxfp4_ref (which llama-quantize runs for
 * MXFP4; it takes no importance matrix): per block amax = max|x|, e = floor(log2f(amax)) - 2 + 127
 * (0 for an all-zero block), so amax / 2^(e-128) lies in [8, 16) and the largest element maps to
 * the kvalue 8 or 12; then each element's nearest kvalue * 2^(e-128).  log2f as ggml calls it, so
 * that an amax just below a power of two rounds the same way.  One deliberate difference: for
 * amax < 2^-125 ggml converts a negative float to uint8_t (undefined behaviour in C); here e = 0
 * (the smallest scale).  Bytes equal llama-quantize's (tests/test_quant_types.c checks it on the
 * micro-gpt-oss file).  src finite; n a multiple of 32. */
void sl_quantize_mxfp4(const float *restrict src, void *restrict dst, int64_t n)
{
    sl_block_mxfp4 *out = dst;
    for (int64_t i = 0; i < n / SL_QK; i++) {
        const float *x = src + i * SL_QK;
        float amax = 0.0f;
        for (int j = 0; j < SL_QK; j++)
            if (amax < fabsf(x[j])) amax = fabsf(x[j]);
        const float t = amax > 0.0f ? floorf(log2f(amax)) - 2 + 127 : 0.0f;   /* <= 252 for finite amax */
        const uint8_t e = t > 0.0f ? (uint8_t)t : 0;
        const float d = sl_e8m0_half(e);
        out[i].e = e;
        for (int j = 0; j < SL_QK / 2; j++)
            out[i].qs[j] = (uint8_t)(best_index(x[j], d) | best_index(x[j + SL_QK / 2], d) << 4);
    }
}
