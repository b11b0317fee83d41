/* kernels/simd_avx512.c — the AVX-512 (F, BW, VL, VNNI) kernel path.
 *
 * Same contract as simd_avx2.c: integer dots return the portable reference's bits (exact integer
 * parts, the canonical float steps of kernels/simd.h in the same order), float dots are within the
 * gamma_n bound.  512-bit registers hold two 32-blocks (Q4_0/Q8_0: block i in lanes 0-7, block i+1
 * in lanes 8-15, which is exactly the canonical acc[i % 2] split) or two K-quant sub-blocks.
 * Q4_0/Q8_0 use VNNI's vpdpbusd (4 unsigned x signed byte products summed into an int32, no
 * intermediate saturation); the K-quants keep vpmaddubsw + vpmaddwd, which apply the sub-block
 * scales on the way.  The activation quantizers are the AVX2 ones (bytes are identical anyway).
 *
 * SL_SIMD_EMULATE (never set by the build) compiles this file against SIMDe's portable AVX-512
 * implementation, so the code can be checked bit-exactly on a machine without AVX-512.
 */
#include "kernels/k_common.h"
#include "kernels/simd.h"

#if defined(SL_SIMD_EMULATE)
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include <simde/x86/f16c.h>
/* gaps and a wrong alias in SIMDe 0.7.4 */
#undef _mm512_madd_epi16
#define _mm512_madd_epi16(a, b) simde_mm512_madd_epi16(a, b)
typedef simde__mmask64 __mmask64;
static inline simde__m512 _mm512_cvtepi32_ps(simde__m512i v)
{
    int32_t i[16]; float f[16];
    simde_mm512_storeu_si512(i, v);
    for (int k = 0; k < 16; k++) f[k] = (float)i[k];
    return simde_mm512_loadu_ps(f);
}
static inline int32_t _mm512_reduce_add_epi32(simde__m512i v)
{
    int32_t i[16], s = 0;
    simde_mm512_storeu_si512(i, v);
    for (int k = 0; k < 16; k++) s += i[k];
    return s;
}
static inline float _mm512_reduce_add_ps(simde__m512 v)
{
    float f[16], s = 0;
    simde_mm512_storeu_ps(f, v);
    for (int k = 0; k < 16; k++) s += f[k];
    return s;
}
static inline simde__m512 _mm512_cvtph_ps(simde__m256i v)
{
    uint16_t h[16]; float f[16];
    simde_mm256_storeu_si256(h, v);
    for (int k = 0; k < 16; k++) f[k] = sl_f16_to_f32(h[k]);
    return simde_mm512_loadu_ps(f);
}
static inline simde__m512i _mm512_cvtepu16_epi32(simde__m256i v)
{
    uint16_t h[16]; int32_t i[16];
    simde_mm256_storeu_si256(h, v);
    for (int k = 0; k < 16; k++) i[k] = h[k];
    return simde_mm512_loadu_si512(i);
}
#define AVX512
#define SL_HAVE_X86 1
#define f16f(h) sl_f16_to_f32(h)   /* SIMDe has no _cvtsh_ss */
#elif defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define SL_HAVE_X86 1
#define f16f(h) _cvtsh_ss(h)       /* one vcvtph2ps (exact, as sl_f16_to_f32) */
#endif

#ifdef SL_HAVE_X86

AVX512 static inline __m512i join256(__m256i lo, __m256i hi)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

AVX512 static inline __m512 join_ps(__m256 lo, __m256 hi)
{
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi), 1));
}

AVX512 static inline __m256 hi_ps(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

#define SL_REDUCE_TARGET AVX512
#include "kernels/simd_reduce.h"   /* lanes_reduce */
#define SL_KDOT_TARGET AVX512
#include "kernels/simd_avx512_kdot.h"   /* SL_KDOT_SINGLE, hsum4_i32x16 */

/* Lanes k of two blocks: exact sums of w[e]*a[e], e = 4k..4k+3 (a never -128). */
AVX512 static inline __m512 lane_dots2(__m512i w, __m512i a)
{
    const __mmask64 neg = _mm512_movepi8_mask(w);
    const __m512i as = _mm512_mask_sub_epi8(a, neg, _mm512_setzero_si512(), a);
    return _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(w), as));
}

/* The same for one block (the odd one out at the end of a row). */
AVX512 static inline __m256 lane_dots1(__m256i w, __m256i a)
{
    const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(a, w));
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

AVX512 static inline __m256i q4_0_bytes(const uint8_t *qs)
{
    const __m128i raw = _mm_loadu_si128((const __m128i *)qs), m4 = _mm_set1_epi8(0x0f);
    const __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), _mm_and_si128(raw, m4));
    return _mm256_sub_epi8(q, _mm256_set1_epi8(8));
}

AVX512 static inline __m256i ld256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* Contract: as sl_qdot_q4_0_q8_0 (same bits). */
AVX512 static float dot_q4_0_q8_0(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q4_0 *w = vw;
    const sl_block_q8_0 *y = vy;
    const int64_t nb = n / SL_QK;
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        sl_prefetch_ahead(&w[i], 2 * sizeof w[i]);
        const float s0 = f16f(w[i].d) * f16f(y[i].d);
        const float s1 = f16f(w[i + 1].d) * f16f(y[i + 1].d);
        const __m512 l = lane_dots2(join256(q4_0_bytes(w[i].qs), q4_0_bytes(w[i + 1].qs)),
                                    join256(ld256(y[i].qs), ld256(y[i + 1].qs)));
        acc = _mm512_add_ps(acc, _mm512_mul_ps(join_ps(_mm256_set1_ps(s0), _mm256_set1_ps(s1)), l));
    }
    __m256 a0 = _mm512_castps512_ps256(acc);
    if (i < nb) {
        const float s = f16f(w[i].d) * f16f(y[i].d);
        a0 = _mm256_add_ps(a0, _mm256_mul_ps(_mm256_set1_ps(s), lane_dots1(q4_0_bytes(w[i].qs), ld256(y[i].qs))));
    }
    return lanes_reduce(a0, hi_ps(acc));
}

/* ---- K-quants ----------------------------------------------------------------------------------
 * Each super-block's integer work leaves a vector of int32 partial sums (S, and for Q4_K/Q5_K the
 * eight lanes of M); four super-blocks' vectors are reduced together by one transposing reduction
 * (a full horizontal sum per super-block cost about as much as its multiplies), and then the
 * canonical float steps run per super-block in order, so the result keeps the portable bits.
 * Sub-block scales are applied by vpdpwssd from int16 lanes that one vpermw picks out of the
 * unpacked scales; nibbles come from one broadcast load shifted per 256-bit half (vpsrlvw), and
 * the high bits of Q5_K/Q6_K are brought to their place by one dword rotate per half (vprolvd:
 * a rotate moves every bit of a byte by the same amount, so after the mask only the wanted bits of
 * the same byte remain). */

/* int16 lanes 0-15 = lane a, lanes 16-31 = lane b (a vpermw index). */
AVX512 static inline __m512i idx_pair(int a, int b)
{
    return join256(_mm256_set1_epi16((short)a), _mm256_set1_epi16((short)b));
}

/* dword lanes of the low 256 bits = a, of the high 256 bits = b. */
AVX512 static inline __m512i dword_pair(int a, int b)
{
    return join256(_mm256_set1_epi32(a), _mm256_set1_epi32(b));
}

/* Integer part of one Q4_K/Q5_K super-block: *s gets lanes summing to S, *mv lanes summing to M.
 * qh: the Q5_K fifth bits, NULL for Q4_K (the branches fold away once inlined).  Bounds: maddubs pairs <=
 * 2*31*127, times scale <= 63. */
AVX512 static inline void k45_block(const uint8_t *scales, const uint8_t *qs, const uint8_t *qh,
                                    const sl_block_q8_k *y, __m512i *s, __m256i *mv)
{
    uint8_t sc[8], m[8];
    sl_k_scales8(scales, sc, m);
    const __m512i sc512 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)sc)));
    const __m128i mb = _mm_loadl_epi64((const __m128i *)m);
    const __m256i mdup = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mb, mb));   /* m0 m0 m1 m1 ... */
    *mv = _mm256_madd_epi16(mdup, ld256(y->bsums));
    const __m512i m4 = _mm512_set1_epi8(0x0f), bit4 = _mm512_set1_epi8(0x10);
    const __m512i nib = join256(_mm256_setzero_si256(), _mm256_set1_epi16(4));
    const __m512i hb = qh ? _mm512_broadcast_i64x4(ld256(qh)) : _mm512_setzero_si512();
    __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        /* low half: element 64g + l = low nibble of qs[32g + l]; high half: element 64g + 32 + l */
        __m512i q = _mm512_and_si512(_mm512_srlv_epi16(_mm512_broadcast_i64x4(ld256(qs + 32 * g)), nib), m4);
        if (qh)   /* fifth bits 2g (low half), 2g + 1 (high half) of qh[l] rotated to bit 4 */
            q = _mm512_or_si512(q, _mm512_and_si512(_mm512_rolv_epi32(hb, dword_pair((4 - 2 * g) & 31, (3 - 2 * g) & 31)), bit4));
        const __m512i p = _mm512_maddubs_epi16(q, _mm512_loadu_si512((const void *)(y->qs + 64 * g)));
        acc = _mm512_dpwssd_epi32(acc, p, _mm512_permutexvar_epi16(idx_pair(2 * g, 2 * g + 1), sc512));
    }
    *s = acc;
}

/* One Q4_K / Q5_K super-block for SL_KDOT_SINGLE. */
AVX512 static inline void q4_k_kblock(const sl_block_q4_k *b, const sl_block_q8_k *y, __m512i *s, __m256i *m)
{
    k45_block(b->scales, b->qs, NULL, y, s, m);
}

AVX512 static inline void q5_k_kblock(const sl_block_q5_k *b, const sl_block_q8_k *y, __m512i *s, __m256i *m)
{
    k45_block(b->scales, b->qs, b->qh, y, s, m);
}

/* Contract: as sl_qdot_q4_k_q8_k (same bits). */
AVX512 static float dot_q4_k_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    SL_KDOT_SINGLE(sl_block_q4_k, q4_k_kblock, (int)offsetof(sl_block_q4_k, dmin))
}

/* Contract: as sl_qdot_q5_k_q8_k (same bits). */
AVX512 static float dot_q5_k_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    SL_KDOT_SINGLE(sl_block_q5_k, q5_k_kblock, (int)offsetof(sl_block_q5_k, dmin))
}

/* Integer part of one Q6_K super-block: lanes summing to S (the -32 offset included, as
 * - 32 * sum_s sc_s * bsums_s).  q in 0..63: maddubs pairs <= 2*63*127, times |scale| <= 128. */
AVX512 static inline __m512i q6_k_block(const sl_block_q6_k *b, const sl_block_q8_k *y)
{
    const __m512i m4 = _mm512_set1_epi8(0x0f), bits45 = _mm512_set1_epi8(0x30);
    /* int16 lane j of a 64-element group belongs to sub-block j/8 of the group's four */
    const __m512i idx_lo = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2,
                                            1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
    const __m512i sc512 = _mm512_castsi256_si512(sc16);
    const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(sc16, ld256(y->bsums)), 5);
    __m512i s = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_sub_epi32(_mm256_setzero_si256(), corr), 0);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        /* weights 32k + l of the half, k < 4: nibble k>>1 of ql[l + 32*(k&1)], bits 2k..2k+1 of
         * qh[l]; q01 holds k = 0 | 1, q23 k = 2 | 3, the qh bits rotated to bits 4..5 */
        const __m512i ql = _mm512_loadu_si512((const void *)(b->ql + 64 * h));
        const __m512i qh = _mm512_broadcast_i64x4(ld256(b->qh + 32 * h));
        const __m512i q01 = _mm512_or_si512(_mm512_and_si512(ql, m4),
                                            _mm512_and_si512(_mm512_rolv_epi32(qh, dword_pair(4, 2)), bits45));
        const __m512i q23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                            _mm512_and_si512(_mm512_rolv_epi32(qh, dword_pair(0, 30)), bits45));
        const __m512i a01 = _mm512_loadu_si512((const void *)(y->qs + 128 * h));
        const __m512i a23 = _mm512_loadu_si512((const void *)(y->qs + 128 * h + 64));
        const __m512i sc01 = _mm512_permutexvar_epi16(_mm512_add_epi16(idx_lo, _mm512_set1_epi16((short)(8 * h))), sc512);
        const __m512i sc23 = _mm512_permutexvar_epi16(_mm512_add_epi16(idx_lo, _mm512_set1_epi16((short)(8 * h + 4))), sc512);
        s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(q01, a01), sc01);
        s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(q23, a23), sc23);
    }
    return s;
}

AVX512 static inline void q6_k_kblock(const sl_block_q6_k *b, const sl_block_q8_k *y, __m512i *s, __m256i *m)
{
    (void)m;
    *s = q6_k_block(b, y);
}

/* Contract: as sl_qdot_q6_k_q8_k (same bits). */
AVX512 static float dot_q6_k_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    SL_KDOT_SINGLE(sl_block_q6_k, q6_k_kblock, -1)
}

/* ---- float rows x f32 activations ---------------------------------------------------------------- */

AVX512 static inline __m512 ld16_f16(const uint16_t *h) { return _mm512_cvtph_ps(ld256(h)); }
AVX512 static inline __m512 ld16_bf16(const uint16_t *h)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(ld256(h)), 16));
}
AVX512 static inline __m512 ld16_f32(const float *p) { return _mm512_loadu_ps(p); }
static inline float f32_id(float v) { return v; }

#define FLOAT_DOT(NAME, T, LOAD, SCALAR)                                                               \
    AVX512 static float NAME(const void *restrict vw, const float *restrict x, int64_t n)               \
    {                                                                                                  \
        const T *w = vw;                                                                               \
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                                    \
        int64_t i = 0;                                                                                 \
        for (; i + 64 <= n; i += 64) {                                                                 \
            a0 = _mm512_fmadd_ps(LOAD(w + i), _mm512_loadu_ps(x + i), a0);                             \
            a1 = _mm512_fmadd_ps(LOAD(w + i + 16), _mm512_loadu_ps(x + i + 16), a1);                   \
            a2 = _mm512_fmadd_ps(LOAD(w + i + 32), _mm512_loadu_ps(x + i + 32), a2);                   \
            a3 = _mm512_fmadd_ps(LOAD(w + i + 48), _mm512_loadu_ps(x + i + 48), a3);                   \
        }                                                                                              \
        for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(LOAD(w + i), _mm512_loadu_ps(x + i), a0);    \
        float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));   \
        for (; i < n; i++) s += SCALAR(w[i]) * x[i];                                                   \
        return s;                                                                                      \
    }

FLOAT_DOT(dot_f32, float, ld16_f32, f32_id)
FLOAT_DOT(dot_f16, uint16_t, ld16_f16, sl_f16_to_f32)
FLOAT_DOT(dot_bf16, uint16_t, ld16_bf16, sl_bf16_to_f32)

const sl_kernel_set sl_kernels_avx512_set = {
    "avx512",
    sl_avx2_quantize_q8_0, sl_avx2_quantize_q8_k,
    dot_q4_0_q8_0, sl_avx2_dot_q8_0_q8_0,   /* Q8_0: no 512-bit form (its chain of FMAs is the bound) */
    dot_q4_k_q8_k, dot_q5_k_q8_k, dot_q6_k_q8_k,
    dot_f32, dot_f16, dot_bf16,
    sl_avx2_axpy_f32, sl_avx2_axpy_f16,   /* head_dim rows are short: 256-bit is enough */
    sl_avx2_adot_f32, sl_avx2_adot_f16,   /* and the one summation order of attention scores */
    /* 4-vector dots: the AVX2 ones (no 512-bit version yet; same bits either way) */
    sl_avx2_dot4_q4_0_q8_0, sl_avx2_dot4_q8_0_q8_0,
    sl_avx2_dot4_q4_k_q8_k, sl_avx2_dot4_q5_k_q8_k, sl_avx2_dot4_q6_k_q8_k,
    /* codebook types (kernels/simd_avx512_iq.c, simd_avx512_vbmi.c; IQ1: kernels/simd_avx512_iq1.c) */
    .dot_iq2_xs_q8_k = sl_avx512_dot_iq2_xs_q8_k, .dot_iq3_xxs_q8_k = sl_avx512_dot_iq3_xxs_q8_k,
    .dot_iq3_s_q8_k = sl_avx512_dot_iq3_s_q8_k, .dot_iq2_xxs_q8_k = sl_avx512_dot_iq2_xxs_q8_k,
    .dot_iq2_s_q8_k = sl_avx512_dot_iq2_s_q8_k, .dot_iq1_s_q8_k = sl_avx512_dot_iq1_s_q8_k,
    .dot_iq1_m_q8_k = sl_avx512_dot_iq1_m_q8_k,
    .dot4_iq2_xs_q8_k = sl_avx512_dot4_iq2_xs_q8_k, .dot4_iq3_xxs_q8_k = sl_avx512_dot4_iq3_xxs_q8_k,
    .dot4_iq3_s_q8_k = sl_avx512_dot4_iq3_s_q8_k, .dot4_iq2_xxs_q8_k = sl_avx512_dot4_iq2_xxs_q8_k,
    .dot4_iq2_s_q8_k = sl_avx512_dot4_iq2_s_q8_k,
    .dotr_iq2_xs_q8_k = sl_avx512_dotr_iq2_xs_q8_k, .dotr_iq3_xxs_q8_k = sl_avx512_dotr_iq3_xxs_q8_k,
    .dotr_iq3_s_q8_k = sl_avx512_dotr_iq3_s_q8_k, .dotr_iq2_xxs_q8_k = sl_avx512_dotr_iq2_xxs_q8_k,
    .dotr_iq2_s_q8_k = sl_avx512_dotr_iq2_s_q8_k,
    /* low-bit types (kernels/simd_avx512_quants.c; Q4_1/Q5_1 on the AVX2 kernels) */
    .quantize_q8_1 = sl_quantize_act_q8_1,
    .dot_q5_0_q8_0 = sl_avx512_dot_q5_0_q8_0, .dot_iq4_nl_q8_0 = sl_avx512_dot_iq4_nl_q8_0,
    .dot_q4_1_q8_1 = sl_avx2_dot_q4_1_q8_1, .dot_q5_1_q8_1 = sl_avx2_dot_q5_1_q8_1,
    .dot_q2_k_q8_k = sl_avx512_dot_q2_k_q8_k, .dot_q3_k_q8_k = sl_avx512_dot_q3_k_q8_k,
    .dot_iq4_xs_q8_k = sl_avx512_dot_iq4_xs_q8_k,
    .dot4_q5_0_q8_0 = sl_avx512_dot4_q5_0_q8_0, .dot4_iq4_nl_q8_0 = sl_avx512_dot4_iq4_nl_q8_0,
    .dot4_q2_k_q8_k = sl_avx512_dot4_q2_k_q8_k, .dot4_q3_k_q8_k = sl_avx512_dot4_q3_k_q8_k,
    .dot4_iq4_xs_q8_k = sl_avx512_dot4_iq4_xs_q8_k,
    .dotr_q5_0_q8_0 = sl_avx512_dotr_q5_0_q8_0, .dotr_iq4_nl_q8_0 = sl_avx512_dotr_iq4_nl_q8_0,
    .dot_mxfp4_q8_0 = sl_avx2_dot_mxfp4_q8_0, .dot4_mxfp4_q8_0 = sl_avx2_dot4_mxfp4_q8_0,
    .dotr_mxfp4_q8_0 = sl_avx512_dotr_mxfp4_q8_0,
    .dotr_q8_0_q8_0 = sl_avx2_dotr_q8_0_q8_0,   /* a 512-bit form (vpdpbusd, 16 blocks per register) ran no faster */
};

#else   /* not x86: dispatch.c never hands this set out */
const sl_kernel_set sl_kernels_avx512_set = { .name = "avx512" };
#endif
