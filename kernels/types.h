/* kernels/types.h — ggml tensor types as they appear in GGUF files, and the kernel table.
 *
 * Type ids are the on-disk ggml ids (they are part of the file format).  Every id that llama.cpp
 * has ever written is known here with its block geometry, so the reader can validate sizes and
 * say "unsupported type Q2_K" instead of "unknown type 10".  Only types with `dequant` and `dot`
 * set can be computed with.
 */
#ifndef SL_KERNELS_TYPES_H
#define SL_KERNELS_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum sl_type {
    SL_TYPE_F32 = 0,  SL_TYPE_F16 = 1,   SL_TYPE_Q4_0 = 2,  SL_TYPE_Q4_1 = 3,
    SL_TYPE_Q5_0 = 6, SL_TYPE_Q5_1 = 7,  SL_TYPE_Q8_0 = 8,  SL_TYPE_Q8_1 = 9,
    SL_TYPE_Q2_K = 10, SL_TYPE_Q3_K = 11, SL_TYPE_Q4_K = 12, SL_TYPE_Q5_K = 13,
    SL_TYPE_Q6_K = 14, SL_TYPE_Q8_K = 15, SL_TYPE_IQ2_XXS = 16, SL_TYPE_IQ2_XS = 17,
    SL_TYPE_IQ3_XXS = 18, SL_TYPE_IQ1_S = 19, SL_TYPE_IQ4_NL = 20, SL_TYPE_IQ3_S = 21,
    SL_TYPE_IQ2_S = 22, SL_TYPE_IQ4_XS = 23, SL_TYPE_I8 = 24, SL_TYPE_I16 = 25,
    SL_TYPE_I32 = 26, SL_TYPE_I64 = 27, SL_TYPE_F64 = 28, SL_TYPE_IQ1_M = 29,
    SL_TYPE_BF16 = 30, SL_TYPE_TQ1_0 = 34, SL_TYPE_TQ2_0 = 35, SL_TYPE_MXFP4 = 39,
    SL_TYPE_COUNT = 40
};

/* Row kernels.  `n` is the number of elements, always a multiple of the type's block size.
 *   dequant:  dst[0..n) = value of each element, in f32 — bit-identical to ggml's dequantize_row_*.
 *   dot:      sum_i w[i] * x[i] with w in the type's encoding and x in f32 (f32 accumulation; the
 *             w[i] are exactly dequant's values; |error| <= gamma_n * sum|w[i]*x[i]|,
 *             gamma_n = n*2^-24 / (1 - n*2^-24), whatever the summation order).
 *   quantize: reference quantizer (used by the model generator and by tests), f32 -> type; follows
 *             ggml's reference quantizers (no importance matrix), so its bytes equal llama-quantize's.
 *             K-quants cost ~0.1-0.2 µs per element.  Input must be finite.
 * Encoded rows must be 2-byte aligned (GGUF data is 32-byte aligned and every block size but MXFP4's
 * 17 is even; MXFP4 blocks are bytes only, so its rows may start anywhere). */
typedef void  (*sl_dequant_fn)(const void *restrict src, float *restrict dst, int64_t n);
typedef float (*sl_dot_fn)(const void *restrict w, const float *restrict x, int64_t n);
typedef void  (*sl_quantize_fn)(const float *restrict src, void *restrict dst, int64_t n);

typedef struct sl_type_info {
    const char    *name;      /* "Q4_K", as ggml names it */
    int            blck;      /* elements per block */
    int            bytes;     /* bytes per block */
    sl_dequant_fn  dequant;   /* NULL: type not supported for compute */
    sl_dot_fn      dot;
    sl_quantize_fn quantize;  /* NULL: no quantizer */
} sl_type_info;

/* Table lookup.  Returns NULL for an id that is not a known ggml type (never indexes out of range). */
const sl_type_info *sl_type_get(int type);
/* Name for messages ("Q4_K"); "unknown" for ids sl_type_get rejects (a per-id buffer would not be
 * thread-safe, so callers print the number themselves). */
const char *sl_type_name(int type);
/* "F32 F16 Q4_0 ..." — every type with kernels, in id order (a static string, built once). */
const char *sl_type_supported_names(void);
/* True when dequant and dot exist for this type. */
bool sl_type_supported(int type);
/* Bytes of a row of n elements; 0 when n is not a multiple of the block size or the type is unknown. */
size_t sl_row_bytes(int type, int64_t n);

/* Per-format kernels (portable C reference implementations), one file each under kernels/. */
void  sl_dequant_f32(const void *restrict src, float *restrict dst, int64_t n);
float sl_dot_f32(const void *restrict w, const float *restrict x, int64_t n);
void  sl_quantize_f32(const float *restrict src, void *restrict dst, int64_t n);
void  sl_dequant_f16(const void *restrict src, float *restrict dst, int64_t n);
float sl_dot_f16(const void *restrict w, const float *restrict x, int64_t n);
void  sl_quantize_f16(const float *restrict src, void *restrict dst, int64_t n);
void  sl_dequant_bf16(const void *restrict src, float *restrict dst, int64_t n);
float sl_dot_bf16(const void *restrict w, const float *restrict x, int64_t n);
void  sl_quantize_bf16(const float *restrict src, void *restrict dst, int64_t n);
void  sl_dequant_q4_0(const void *restrict src, float *restrict dst, int64_t n);
float sl_dot_q4_0(const void *restrict w, const float *restrict x, int64_t n);
void  sl_quantize_q4_0(const float *restrict src, void *restrict dst, int64_t n);
void  sl_dequant_q8_0(const void *restrict src, float *restrict dst, int64_t n);
float sl_dot_q8_0(const void *restrict w, const float *restrict x, int64_t n);
void  sl_quantize_q8_0(const float *restrict src, void *restrict dst, int64_t n);
void  sl_dequant_q4_k(const void *restrict src, float *restrict dst, int64_t n);
float sl_dot_q4_k(const void *restrict w, const float *restrict x, int64_t n);
void  sl_quantize_q4_k(const float *restrict src, void *restrict dst, int64_t n);
void  sl_dequant_q5_k(const void *restrict src, float *restrict dst, int64_t n);
float sl_dot_q5_k(const void *restrict w, const float *restrict x, int64_t n);
void  sl_quantize_q5_k(const float *restrict src, void *restrict dst, int64_t n);
void  sl_dequant_q6_k(const void *restrict src, float *restrict dst, int64_t n);
float sl_dot_q6_k(const void *restrict w, const float *restrict x, int64_t n);
void  sl_quantize_q6_k(const float *restrict src, void *restrict dst, int64_t n);
/* Codebook types (no quantizer: IQ quantization needs an importance matrix). */
void  sl_dequant_iq2_xxs(const void *restrict src, float *restrict dst, int64_t n);
float sl_dot_iq2_xxs(const void *restrict w, const float *restrict x, int64_t n);
void  sl_dequant_iq2_xs(const void *restrict src, float *restrict dst, int64_t n);
float sl_dot_iq2_xs(const void *restrict w, const float *restrict x, int64_t n);
void  sl_dequant_iq2_s(const void *restrict src, float *restrict dst, int64_t n);
float sl_dot_iq2_s(const void *restrict w, const float *restrict x, int64_t n);
void  sl_dequant_iq3_xxs(const void *restrict src, float *restrict dst, int64_t n);
float sl_dot_iq3_xxs(const void *restrict w, const float *restrict x, int64_t n);
void  sl_dequant_iq3_s(const void *restrict src, float *restrict dst, int64_t n);
float sl_dot_iq3_s(const void *restrict w, const float *restrict x, int64_t n);
void  sl_dequant_iq1_s(const void *restrict src, float *restrict dst, int64_t n);
float sl_dot_iq1_s(const void *restrict w, const float *restrict x, int64_t n);
void  sl_dequant_iq1_m(const void *restrict src, float *restrict dst, int64_t n);
float sl_dot_iq1_m(const void *restrict w, const float *restrict x, int64_t n);

/* Low-bit types (kernels/q4_1.c ... iq4_xs.c; block layouts in kernels/k_quants.h). */
void  sl_dequant_q4_1(const void *restrict src, float *restrict dst, int64_t n);
float sl_dot_q4_1(const void *restrict w, const float *restrict x, int64_t n);
void  sl_dequant_q5_0(const void *restrict src, float *restrict dst, int64_t n);
float sl_dot_q5_0(const void *restrict w, const float *restrict x, int64_t n);
void  sl_dequant_q5_1(const void *restrict src, float *restrict dst, int64_t n);
float sl_dot_q5_1(const void *restrict w, const float *restrict x, int64_t n);
void  sl_dequant_q2_k(const void *restrict src, float *restrict dst, int64_t n);
float sl_dot_q2_k(const void *restrict w, const float *restrict x, int64_t n);
void  sl_quantize_q2_k(const float *restrict src, void *restrict dst, int64_t n);
void  sl_dequant_q3_k(const void *restrict src, float *restrict dst, int64_t n);
float sl_dot_q3_k(const void *restrict w, const float *restrict x, int64_t n);
void  sl_quantize_q3_k(const float *restrict src, void *restrict dst, int64_t n);
void  sl_dequant_iq4_nl(const void *restrict src, float *restrict dst, int64_t n);
float sl_dot_iq4_nl(const void *restrict w, const float *restrict x, int64_t n);
void  sl_quantize_iq4_nl(const float *restrict src, void *restrict dst, int64_t n);
void  sl_dequant_iq4_xs(const void *restrict src, float *restrict dst, int64_t n);
float sl_dot_iq4_xs(const void *restrict w, const float *restrict x, int64_t n);
void  sl_quantize_iq4_xs(const float *restrict src, void *restrict dst, int64_t n);
/* MXFP4 (kernels/mxfp4.c): gpt-oss's expert weights. */
void  sl_dequant_mxfp4(const void *restrict src, float *restrict dst, int64_t n);
float sl_dot_mxfp4(const void *restrict w, const float *restrict x, int64_t n);
void  sl_quantize_mxfp4(const float *restrict src, void *restrict dst, int64_t n);

#endif
