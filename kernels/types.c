/* kernels/types.c — the table of ggml tensor types: names, block geometry, kernels.
 *
 * Geometry is ggml's (ggml.c type_traits at llama.cpp c392e50, sizes from the block structs of
 * ggml-common.h); ids that ggml removed (4, 5: Q4_2/Q4_3; 31-33: Q4_0_4_4/4_8/8_8; 36-38:
 * IQ4_NL_4_4/4_8/8_8) were never valid in GGUF files and are unknown here.
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>

#include "kernels/types.h"

#define KERNELS(sfx) sl_dequant_##sfx, sl_dot_##sfx, sl_quantize_##sfx
#define KERNELS_NOQ(sfx) sl_dequant_##sfx, sl_dot_##sfx, NULL   /* no reference quantizer */

static const sl_type_info g_types[SL_TYPE_COUNT] = {
    [SL_TYPE_F32]     = { "F32",     1,   4,   KERNELS(f32) },
    [SL_TYPE_F16]     = { "F16",     1,   2,   KERNELS(f16) },
    [SL_TYPE_Q4_0]    = { "Q4_0",    32,  18,  KERNELS(q4_0) },
    [SL_TYPE_Q4_1]    = { "Q4_1",    32,  20,  KERNELS_NOQ(q4_1) },
    [SL_TYPE_Q5_0]    = { "Q5_0",    32,  22,  KERNELS_NOQ(q5_0) },
    [SL_TYPE_Q5_1]    = { "Q5_1",    32,  24,  KERNELS_NOQ(q5_1) },
    [SL_TYPE_Q8_0]    = { "Q8_0",    32,  34,  KERNELS(q8_0) },
    [SL_TYPE_Q8_1]    = { "Q8_1",    32,  36,  NULL, NULL, NULL },   /* f16 d, s; 32 */
    [SL_TYPE_Q2_K]    = { "Q2_K",    256, 84,  KERNELS(q2_k) },
    [SL_TYPE_Q3_K]    = { "Q3_K",    256, 110, KERNELS(q3_k) },
    [SL_TYPE_Q4_K]    = { "Q4_K",    256, 144, KERNELS(q4_k) },
    [SL_TYPE_Q5_K]    = { "Q5_K",    256, 176, KERNELS(q5_k) },
    [SL_TYPE_Q6_K]    = { "Q6_K",    256, 210, KERNELS(q6_k) },
    [SL_TYPE_Q8_K]    = { "Q8_K",    256, 292, NULL, NULL, NULL },   /* f32 d; 256; 16 × i16 */
    [SL_TYPE_IQ2_XXS] = { "IQ2_XXS", 256, 66,  KERNELS_NOQ(iq2_xxs) },   /* f16 + 32 × u16 */
    [SL_TYPE_IQ2_XS]  = { "IQ2_XS",  256, 74,  KERNELS_NOQ(iq2_xs) },   /* f16 + 32 × u16 + 8 */
    [SL_TYPE_IQ3_XXS] = { "IQ3_XXS", 256, 98,  KERNELS_NOQ(iq3_xxs) },   /* f16 + 96 */
    [SL_TYPE_IQ1_S]   = { "IQ1_S",   256, 50,  KERNELS_NOQ(iq1_s) },   /* f16 + 32 + 8 × u16 */
    [SL_TYPE_IQ4_NL]  = { "IQ4_NL",  32,  18,  KERNELS(iq4_nl) },
    [SL_TYPE_IQ3_S]   = { "IQ3_S",   256, 110, KERNELS_NOQ(iq3_s) },   /* f16 + 64 + 8 + 32 + 4 */
    [SL_TYPE_IQ2_S]   = { "IQ2_S",   256, 82,  KERNELS_NOQ(iq2_s) },   /* f16 + 64 + 16 */
    [SL_TYPE_IQ4_XS]  = { "IQ4_XS",  256, 136, KERNELS(iq4_xs) },
    [SL_TYPE_I8]      = { "I8",      1,   1,   NULL, NULL, NULL },
    [SL_TYPE_I16]     = { "I16",     1,   2,   NULL, NULL, NULL },
    [SL_TYPE_I32]     = { "I32",     1,   4,   NULL, NULL, NULL },
    [SL_TYPE_I64]     = { "I64",     1,   8,   NULL, NULL, NULL },
    [SL_TYPE_F64]     = { "F64",     1,   8,   NULL, NULL, NULL },
    [SL_TYPE_IQ1_M]   = { "IQ1_M",   256, 56,  KERNELS_NOQ(iq1_m) },   /* 32 + 16 + 8, no f16 d */
    [SL_TYPE_BF16]    = { "BF16",    1,   2,   KERNELS(bf16) },
    [SL_TYPE_TQ1_0]   = { "TQ1_0",   256, 54,  NULL, NULL, NULL },   /* 48 + 4 + f16 */
    [SL_TYPE_TQ2_0]   = { "TQ2_0",   256, 66,  NULL, NULL, NULL },   /* 64 + f16 */
    [SL_TYPE_MXFP4]   = { "MXFP4",   32,  17,  KERNELS(mxfp4) },   /* E8M0 e + 16 (ggml 0.18 block_mxfp4) */
};

/* Contract: the entry for a known ggml id, NULL for anything else (negative, past the table, or a
 * hole left by a removed type).  Never reads outside g_types. */
const sl_type_info *sl_type_get(int type)
{
    if (type < 0 || type >= SL_TYPE_COUNT) return NULL;
    const sl_type_info *t = &g_types[type];
    return t->name ? t : NULL;
}

/* Contract: ggml-style name ("Q4_K"), or "unknown" for ids sl_type_get rejects. */
const char *sl_type_name(int type)
{
    const sl_type_info *t = sl_type_get(type);
    return t ? t->name : "unknown";
}

/* Contract: true when rows of this type can be dequantized and dotted. */
bool sl_type_supported(int type)
{
    const sl_type_info *t = sl_type_get(type);
    return t && t->dequant && t->dot;
}

/* Contract: bytes of n elements; 0 for an unknown type, n < 0, n not a multiple of the block size,
 * or a size that does not fit in size_t. */
size_t sl_row_bytes(int type, int64_t n)
{
    const sl_type_info *t = sl_type_get(type);
    if (!t || n < 0 || n % t->blck != 0) return 0;
    const uint64_t blocks = (uint64_t)(n / t->blck);
    if (blocks > SIZE_MAX / (size_t)t->bytes) return 0;
    return (size_t)blocks * (size_t)t->bytes;
}

static char g_supported[512];

static void build_supported_names(void)
{
    size_t at = 0;
    for (int t = 0; t < SL_TYPE_COUNT; t++) {
        if (!sl_type_supported(t)) continue;
        int n = snprintf(g_supported + at, sizeof g_supported - at, "%s%s", at ? " " : "", g_types[t].name);
        if (n < 0 || (size_t)n >= sizeof g_supported - at) break;
        at += (size_t)n;
    }
}

/* Contract: see types.h.  Built from the table, so it cannot drift from what is supported. */
const char *sl_type_supported_names(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, build_supported_names);
    return g_supported;
}
