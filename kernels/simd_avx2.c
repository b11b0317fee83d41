/* kernels/simd_avx2.c — the AVX2 (+FMA, F16C) kernel path.
 *
 * Every function carries a target attribute, so this file compiles in the default (x86-64
 * baseline) build and only runs after dispatch.c has seen the features in cpuid.  The integer
 * dots reproduce the portable reference of qdot.c bit for bit: the integer parts are exact, and
 * the float steps (kernels/simd.h, "Canonical float steps") are the same multiplies and adds in
 * the same order; k_common.h turns off contraction so that gcc does not fuse them into FMAs.
 *
 * Tools used throughout: a 4-bit or 6-bit weight and an 8-bit activation multiply with
 * vpmaddubsw (unsigned x signed bytes -> pairwise int16 sums; the bounds below keep it from
 * saturating) and vpmaddwd (int16 pairs x int16 -> int32, here also applying sub-block scales).
 */
#include "kernels/k_common.h"
#include "kernels/simd.h"

#include <float.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#include "kernels/simd_avx2_util.h"
#include "kernels/simd_avx2_fma32.h"

AVX2 static inline int32_t hsum_i32x8(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

AVX2 static inline int32_t hsum_i32x4(__m128i s)
{
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* Largest |x| of 32 floats (exact: max does not round); *bad set when one is NaN or infinite
 * (|x| > FLT_MAX compares true for both with the unordered predicate). */
AVX2 static inline float amax32(const float *v, int *bad)
{
    const __m256 nz = _mm256_set1_ps(-0.0f), big = _mm256_set1_ps(FLT_MAX);
    const __m256 a0 = _mm256_andnot_ps(nz, _mm256_loadu_ps(v)), a1 = _mm256_andnot_ps(nz, _mm256_loadu_ps(v + 8));
    const __m256 a2 = _mm256_andnot_ps(nz, _mm256_loadu_ps(v + 16)), a3 = _mm256_andnot_ps(nz, _mm256_loadu_ps(v + 24));
    const __m256 nf = _mm256_or_ps(_mm256_or_ps(_mm256_cmp_ps(a0, big, _CMP_NLE_UQ), _mm256_cmp_ps(a1, big, _CMP_NLE_UQ)),
                                   _mm256_or_ps(_mm256_cmp_ps(a2, big, _CMP_NLE_UQ), _mm256_cmp_ps(a3, big, _CMP_NLE_UQ)));
    *bad |= _mm256_movemask_ps(nf);
    const __m256 m = _mm256_max_ps(_mm256_max_ps(a0, a1), _mm256_max_ps(a2, a3));
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 32 floats * id, rounded to nearest even (vcvtps2dq under the default MXCSR, as sl_round_int),
 * packed to 32 int8 in element order.  |v*id| <= 127 by construction, so the packs never saturate. */
AVX2 static inline __m256i round_pack32(const float *v, __m256 id)
{
    const __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(v), id));
    const __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(v + 8), id));
    const __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(v + 16), id));
    const __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(v + 24), id));
    /* packs work per 128-bit lane: dword k of the result holds elements of (i0,i1,i2,i3)[k%4],
     * half k/4; the permutation puts them back in order */
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* Contract: as sl_quantize_act_q8_0 (same bytes). */
AVX2 void sl_avx2_quantize_q8_0(const float *restrict x, void *restrict vy, int64_t n)
{
    sl_block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / SL_QK; i++) {
        const float *v = x + i * SL_QK;
        int bad = 0;
        const float amax = amax32(v, &bad);
        if (bad) {
            sl_act_nonfinite_q8_0(&y[i]);
            continue;
        }
        const float id = amax != 0 ? 127.0f / amax : 0.0f;
        y[i].d = sl_f32_to_f16(amax / 127.0f);
        _mm256_storeu_si256((__m256i *)y[i].qs, round_pack32(v, _mm256_set1_ps(id)));
    }
}

/* Contract: as sl_quantize_act_q8_k (same bytes). */
AVX2 void sl_avx2_quantize_q8_k(const float *restrict x, void *restrict vy, int64_t n)
{
    sl_block_q8_k *y = vy;
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        const float *v = x + i * SL_QK_K;
        float amax = 0;
        int bad = 0;
        for (int j = 0; j < SL_QK_K; j += 32) {
            const float a = amax32(v + j, &bad);
            amax = a > amax ? a : amax;
        }
        if (bad) {
            sl_act_nonfinite_q8_k(&y[i]);
            continue;
        }
        if (amax == 0) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = 127.0f / amax;
        const __m256 vis = _mm256_set1_ps(iscale);
        for (int j = 0; j < SL_QK_K / 32; j++) {
            const __m256i q = round_pack32(v + 32 * j, vis);
            _mm256_storeu_si256((__m256i *)(y[i].qs + 32 * j), q);
            /* sums of 4 consecutive q, then of 4 such in each 128-bit half: bsums 2j and 2j+1 */
            const __m256i s4 = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q), ones16);
            __m128i h = _mm_hadd_epi32(_mm256_castsi256_si128(s4), _mm256_extracti128_si256(s4, 1));
            h = _mm_hadd_epi32(h, h);
            y[i].bsums[2 * j] = (int16_t)_mm_cvtsi128_si32(h);
            y[i].bsums[2 * j + 1] = (int16_t)_mm_extract_epi32(h, 1);
        }
        y[i].d = 1.0f / iscale;
    }
}

/* ---- blocks of 32 -------------------------------------------------------------------------- */

/* Lane k = exact sum of w[e]*a[e], e = 4k..4k+3, for signed bytes w, a (a never -128): |w| as
 * unsigned times a with w's sign (<= 2*128*127 per int16: no saturation), then pairs of int16. */
AVX2 static inline __m256 lane_dots(__m256i w, __m256i a)
{
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

/* 32 Q4_0 weights as int8 q - 8, in element order (low nibbles are elements 0..15). */
AVX2 static inline __m256i q4_0_bytes(const uint8_t *qs)
{
    const __m128i raw = _mm_loadu_si128((const __m128i *)qs), m4 = _mm_set1_epi8(0x0f);
    const __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), _mm_and_si128(raw, m4));
    return _mm256_sub_epi8(q, _mm256_set1_epi8(8));
}

AVX2 static inline float f16f(uint16_t h) { return _cvtsh_ss(h); }

/* Block i's term: (d_w * d_y) * (exact lane sums), for sum_blocks32 (simd_avx2_util.h). */
AVX2 static inline __m256 q4_0_term(const void *vw, const void *vy, int64_t i, const void *ctx)
{
    const sl_block_q4_0 *w = (const sl_block_q4_0 *)vw + i;
    const sl_block_q8_0 *y = (const sl_block_q8_0 *)vy + i;
    (void)ctx;
    const __m256 s = _mm256_set1_ps(f16f(w->d) * f16f(y->d));
    return _mm256_mul_ps(s, lane_dots(q4_0_bytes(w->qs), _mm256_loadu_si256((const __m256i *)y->qs)));
}

/* Contract: as sl_qdot_q4_0_q8_0 (same bits). */
AVX2 static float dot_q4_0_q8_0(const void *restrict vw, const void *restrict vy, int64_t n)
{
    return sum_blocks32(vw, sizeof(sl_block_q4_0), vy, n / SL_QK, q4_0_term, NULL);
}

/* ---- Q8_0: one fused multiply-add per block (kernels/simd.h; the forms in simd_avx2_fma32.h) ---- */

FMA32_INLINE __m256i q8_0_weights(const void *w, int64_t i, const void *ctx)
{
    (void)ctx;
    return _mm256_loadu_si256((const __m256i *)((const sl_block_q8_0 *)w)[i].qs);
}

FMA32_INLINE float q8_0_scale(const void *w, int64_t i) { return f16f(((const sl_block_q8_0 *)w)[i].d); }

/* Contract: as sl_qdot_q8_0_q8_0 (same bits). */
AVX2 float sl_avx2_dot_q8_0_q8_0(const void *restrict vw, const void *restrict vy, int64_t n)
{
    return fma32_dot(vw, sizeof(sl_block_q8_0), vy, n / SL_QK, q8_0_weights, q8_0_scale, NULL);
}

/* Contract: out[r] = dot_q8_0_q8_0(row r, vy, n) bit for bit, r < nrows. */
AVX2 void sl_avx2_dotr_q8_0_q8_0(const void *restrict vw, size_t row_bytes, const void *restrict vy, int64_t n,
                                 int64_t nrows, float *restrict out)
{
    fma32_dotr(vw, row_bytes, sizeof(sl_block_q8_0), vy, n / SL_QK, nrows, q8_0_weights, q8_0_scale, NULL, out);
}

/* ---- K-quants -------------------------------------------------------------------------------- */

/* int16 broadcast of scale j from 8 scales held (as int16) in both 128-bit halves of v. */
AVX2 static inline __m256i scale_bcast(__m256i v, int j)
{
    return _mm256_shuffle_epi8(v, _mm256_set1_epi16((short)(0x0100 + 0x0202 * j)));
}

/* int16 lanes m[0], m[0], m[1], m[1], ..., m[7], m[7]: madd with the 16 bsums gives the 8 lanes
 * of M = sum_j m[j] * (bsums[2j] + bsums[2j+1]). */
AVX2 static inline __m256i k_mins_dup(const uint8_t m[8])
{
    const __m128i b = _mm_loadl_epi64((const __m128i *)m);
    return _mm256_cvtepu8_epi16(_mm_shuffle_epi8(b, _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7)));
}

/* S = sum of the 8 lanes of s and M = sum of the 8 lanes of mv, reduced together. */
AVX2 static inline void hsum2_i32x8(__m256i s, __m256i mv, int32_t *S, int32_t *M)
{
    const __m256i t = _mm256_hadd_epi32(s, mv);          /* s01 s23 m01 m23 | s45 s67 m45 m67 */
    __m128i u = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
    u = _mm_hadd_epi32(u, u);                             /* S M S M */
    *S = _mm_cvtsi128_si32(u);
    *M = _mm_extract_epi32(u, 1);
}

/* Contract: as sl_qdot_q4_k_q8_k (same bits).  maddubs pairs <= 2*15*127, times scale <= 63. */
AVX2 static float dot_q4_k_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q4_k *w = vw;
    const sl_block_q8_k *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        uint8_t sc[8], m[8];
        sl_k_scales8(w[i].scales, sc, m);
        const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)sc)));
        __m256i s = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(w[i].qs + 32 * g));
            const __m256i a0 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * g));
            const __m256i a1 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * g + 32));
            const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(q, m4), a0), scale_bcast(sc16, 2 * g));
            const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), a1),
                                                 scale_bcast(sc16, 2 * g + 1));
            s = _mm256_add_epi32(s, _mm256_add_epi32(p0, p1));
        }
        int32_t S, M;
        hsum2_i32x8(s, _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[i].bsums), k_mins_dup(m)), &S, &M);
        const float d = f16f(w[i].d) * y[i].d, dmin = f16f(w[i].dmin) * y[i].d;
        acc = acc + (d * (float)S - dmin * (float)M);
    }
    return acc;
}

/* Contract: as sl_qdot_q5_k_q8_k (same bits).  maddubs pairs <= 2*31*127. */
AVX2 static float dot_q5_k_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q5_k *w = vw;
    const sl_block_q8_k *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m1 = _mm256_set1_epi8(1);
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        uint8_t sc[8], m[8];
        sl_k_scales8(w[i].scales, sc, m);
        const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)sc)));
        __m256i hb = _mm256_loadu_si256((const __m256i *)w[i].qh);
        __m256i s = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(w[i].qs + 32 * g));
            /* bit 2g of qh[l] is the fifth bit of element 64g+l, bit 2g+1 that of 64g+32+l; hb is
             * shifted right by 2 per group, so they are always bits 0 and 1 here */
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, m4), _mm256_slli_epi16(_mm256_and_si256(hb, m1), 4));
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 1), m1), 4));
            hb = _mm256_srli_epi16(hb, 2);
            const __m256i a0 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * g));
            const __m256i a1 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * g + 32));
            const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, a0), scale_bcast(sc16, 2 * g));
            const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, a1), scale_bcast(sc16, 2 * g + 1));
            s = _mm256_add_epi32(s, _mm256_add_epi32(p0, p1));
        }
        int32_t S, M;
        hsum2_i32x8(s, _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[i].bsums), k_mins_dup(m)), &S, &M);
        const float d = f16f(w[i].d) * y[i].d, dmin = f16f(w[i].dmin) * y[i].d;
        acc = acc + (d * (float)S - dmin * (float)M);
    }
    return acc;
}

/* The 128 six-bit weights of half h of a Q6_K block as unsigned bytes 0..63 (the -32 offset is
 * applied through bsums by the callers): q[k] holds weights 32k..32k+31 of that half. */
AVX2 static inline void q6_unpack(const sl_block_q6_k *b, int h, __m256i q[4])
{
    const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(0x03);
    const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
    const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
    q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4));
    q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4));
}

/* Contract: as sl_qdot_q6_k_q8_k (same bits).  q in 0..63: maddubs pairs <= 2*63*127, times
 * |scale| <= 128 per madd. */
AVX2 static float dot_q6_k_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q6_k *w = vw;
    const sl_block_q8_k *y = vy;
    /* within a dword (scales s, s+1 as int16): low half gets s everywhere, high half s+1 */
    const __m256i pair_ctl = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,
                                              2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w[i].scales));
        /* the -32 offset: 32 * sum_s sc_s * bsums_s */
        __m256i s = _mm256_slli_epi32(_mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)y[i].bsums)), 5);
        s = _mm256_sub_epi32(_mm256_setzero_si256(), s);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m256i q[4];
            q6_unpack(&w[i], h, q);
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const __m256i a = _mm256_loadu_si256((const __m256i *)(y[i].qs + 128 * h + 32 * k));
                const __m256i scv = _mm256_shuffle_epi8(
                    _mm256_permutevar8x32_epi32(sc16, _mm256_set1_epi32(4 * h + k)), pair_ctl);
                s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(q[k], a), scv));
            }
        }
        const float d = f16f(w[i].d) * y[i].d;
        acc = acc + d * (float)hsum_i32x8(s);
    }
    return acc;
}

/* ---- 4-vector forms ---------------------------------------------------------------------------
 * One weight row against 4 activation vectors: the weight bytes (nibble unpacking, scales) are
 * decoded once and reused, which is what batched prefill is bound by.  Per vector the integer sums
 * are the same exact values and the float steps the same operations as the single dots, so each
 * out[v] has the single dot's bits (tests/test_kernels_simd.c checks it). */

/* Keeps gcc from hoisting the next group's loads above this group's adds: fully unrolled, it
 * otherwise computes all 32 products first and spills them (Q4_K x4: 22 -> 30 G products/s). */
#define SCHED_FENCE() __asm__ __volatile__("" ::: "memory")

#define YV(T, v, i) ((const T *)((const unsigned char *)vy + (size_t)(v) * ys) + (i))

AVX2 static inline void dot4_blocks32(const __m256i w, const void *restrict vy, size_t ys, int64_t i, float dw,
                                      __m256 acc[4])
{
    const __m256i aw = _mm256_sign_epi8(w, w), ones = _mm256_set1_epi16(1);
#pragma GCC unroll 4
    for (int v = 0; v < 4; v++) {
        const sl_block_q8_0 *y = YV(sl_block_q8_0, v, i);
        const __m256i p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y->qs), w));
        const __m256 l = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones));
        acc[v] = _mm256_add_ps(acc[v], _mm256_mul_ps(_mm256_set1_ps(dw * f16f(y->d)), l));
    }
}

/* Contract: out[v] = dot_q4_0_q8_0(w, y + v*ys, n) bit for bit, v < 4. */
AVX2 void sl_avx2_dot4_q4_0_q8_0(const void *restrict vw, const void *restrict vy, size_t ys, int64_t n, float *restrict out)
{
    const sl_block_q4_0 *w = vw;
    const int64_t nb = n / SL_QK;
    __m256 acc0[4], acc1[4];   /* two named arrays, not acc[i & 1]: see sum_blocks32 (simd_avx2_util.h) */
    for (int v = 0; v < 4; v++) acc0[v] = acc1[v] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        dot4_blocks32(q4_0_bytes(w[i].qs), vy, ys, i, f16f(w[i].d), acc0);
        dot4_blocks32(q4_0_bytes(w[i + 1].qs), vy, ys, i + 1, f16f(w[i + 1].d), acc1);
    }
    if (i < nb) dot4_blocks32(q4_0_bytes(w[i].qs), vy, ys, i, f16f(w[i].d), acc0);
    for (int v = 0; v < 4; v++) out[v] = lanes_reduce(acc0[v], acc1[v]);
}

/* Contract: out[v] = dot_q8_0_q8_0(w, y + v*ys, n) bit for bit, v < 4. */
AVX2 void sl_avx2_dot4_q8_0_q8_0(const void *restrict vw, const void *restrict vy, size_t ys, int64_t n, float *restrict out)
{
    fma32_dot4(vw, vy, ys, n / SL_QK, q8_0_weights, q8_0_scale, NULL, out);
}

/* Shared tail of the Q4_K / Q5_K 4-vector dots: the 4 vectors' S and M reduced together, then the
 * canonical float step in 4 lanes (lane v does exactly the scalar operations of vector v). */
AVX2 static inline __m128 k_finish4(const __m256i s[4], const uint8_t m[8], float d16, float dmin16,
                                    const void *restrict vy, size_t ys, int64_t i, __m128 acc)
{
    const __m256i md = k_mins_dup(m);
    __m256i mv[4];
    float yd[4];
    for (int v = 0; v < 4; v++) {
        const sl_block_q8_k *y = YV(sl_block_q8_k, v, i);
        mv[v] = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), md);
        yd[v] = y->d;
    }
    const __m128 S = _mm_cvtepi32_ps(fma32_hsum4(s[0], s[1], s[2], s[3]));
    const __m128 M = _mm_cvtepi32_ps(fma32_hsum4(mv[0], mv[1], mv[2], mv[3]));
    const __m128 ydv = _mm_loadu_ps(yd);
    const __m128 d = _mm_mul_ps(_mm_set1_ps(d16), ydv), dmin = _mm_mul_ps(_mm_set1_ps(dmin16), ydv);
    return _mm_add_ps(acc, _mm_sub_ps(_mm_mul_ps(d, S), _mm_mul_ps(dmin, M)));
}

/* The integer part of one group (64 elements: lo = sub-block 2g, hi = 2g+1) for 4 vectors. */
AVX2 static inline void k_group4(__m256i lo, __m256i hi, __m256i sc_lo, __m256i sc_hi, const void *restrict vy,
                                 size_t ys, int64_t i, int g, __m256i s[4])
{
#pragma GCC unroll 4
    for (int v = 0; v < 4; v++) {
        const sl_block_q8_k *y = YV(sl_block_q8_k, v, i);
        const __m256i a0 = _mm256_loadu_si256((const __m256i *)(y->qs + 64 * g));
        const __m256i a1 = _mm256_loadu_si256((const __m256i *)(y->qs + 64 * g + 32));
        const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, a0), sc_lo);
        const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, a1), sc_hi);
        s[v] = _mm256_add_epi32(s[v], _mm256_add_epi32(p0, p1));
    }
}

/* Contract: out[v] = dot_q4_k_q8_k(w, y + v*ys, n) bit for bit, v < 4. */
AVX2 void sl_avx2_dot4_q4_k_q8_k(const void *restrict vw, const void *restrict vy, size_t ys, int64_t n, float *restrict out)
{
    const sl_block_q4_k *w = vw;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m128 acc = _mm_setzero_ps();
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        uint8_t sc[8], m[8];
        sl_k_scales8(w[i].scales, sc, m);
        const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)sc)));
        __m256i s[4] = { _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256() };
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(w[i].qs + 32 * g));
            k_group4(_mm256_and_si256(q, m4), _mm256_and_si256(_mm256_srli_epi16(q, 4), m4), scale_bcast(sc16, 2 * g),
                     scale_bcast(sc16, 2 * g + 1), vy, ys, i, g, s);
            SCHED_FENCE();
        }
        acc = k_finish4(s, m, f16f(w[i].d), f16f(w[i].dmin), vy, ys, i, acc);
    }
    _mm_storeu_ps(out, acc);
}

/* Contract: out[v] = dot_q5_k_q8_k(w, y + v*ys, n) bit for bit, v < 4. */
AVX2 void sl_avx2_dot4_q5_k_q8_k(const void *restrict vw, const void *restrict vy, size_t ys, int64_t n, float *restrict out)
{
    const sl_block_q5_k *w = vw;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m1 = _mm256_set1_epi8(1);
    __m128 acc = _mm_setzero_ps();
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        uint8_t sc[8], m[8];
        sl_k_scales8(w[i].scales, sc, m);
        const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)sc)));
        __m256i hb = _mm256_loadu_si256((const __m256i *)w[i].qh);
        __m256i s[4] = { _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256() };
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(w[i].qs + 32 * g));
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, m4), _mm256_slli_epi16(_mm256_and_si256(hb, m1), 4));
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 1), m1), 4));
            hb = _mm256_srli_epi16(hb, 2);
            k_group4(lo, hi, scale_bcast(sc16, 2 * g), scale_bcast(sc16, 2 * g + 1), vy, ys, i, g, s);
            SCHED_FENCE();
        }
        acc = k_finish4(s, m, f16f(w[i].d), f16f(w[i].dmin), vy, ys, i, acc);
    }
    _mm_storeu_ps(out, acc);
}

/* Contract: out[v] = dot_q6_k_q8_k(w, y + v*ys, n) bit for bit, v < 4. */
AVX2 void sl_avx2_dot4_q6_k_q8_k(const void *restrict vw, const void *restrict vy, size_t ys, int64_t n, float *restrict out)
{
    const sl_block_q6_k *w = vw;
    const __m256i pair_ctl = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,
                                              2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
    __m128 acc = _mm_setzero_ps();
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w[i].scales));
        __m256i s[4];
        for (int v = 0; v < 4; v++) {
            const sl_block_q8_k *y = YV(sl_block_q8_k, v, i);
            const __m256i c = _mm256_slli_epi32(_mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)y->bsums)), 5);
            s[v] = _mm256_sub_epi32(_mm256_setzero_si256(), c);
        }
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m256i q[4];
            q6_unpack(&w[i], h, q);
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const __m256i scv = _mm256_shuffle_epi8(
                    _mm256_permutevar8x32_epi32(sc16, _mm256_set1_epi32(4 * h + k)), pair_ctl);
#pragma GCC unroll 4
                for (int v = 0; v < 4; v++) {
                    const sl_block_q8_k *y = YV(sl_block_q8_k, v, i);
                    const __m256i a = _mm256_loadu_si256((const __m256i *)(y->qs + 128 * h + 32 * k));
                    s[v] = _mm256_add_epi32(s[v], _mm256_madd_epi16(_mm256_maddubs_epi16(q[k], a), scv));
                }
            }
        }
        const __m128 ydv = _mm_setr_ps(YV(sl_block_q8_k, 0, i)->d, YV(sl_block_q8_k, 1, i)->d,
                                       YV(sl_block_q8_k, 2, i)->d, YV(sl_block_q8_k, 3, i)->d);
        const __m128 d = _mm_mul_ps(_mm_set1_ps(f16f(w[i].d)), ydv);
        acc = _mm_add_ps(acc, _mm_mul_ps(d, _mm_cvtepi32_ps(fma32_hsum4(s[0], s[1], s[2], s[3]))));
    }
    _mm_storeu_ps(out, acc);
}

/* ---- float rows x f32 activations ----------------------------------------------------------------
 * Four 8-lane FMA accumulators, then the tail in scalar; any order is within the gamma_n bound. */

AVX2 static inline float hsum_ps4(__m256 a0, __m256 a1, __m256 a2, __m256 a3)
{
    const __m256 t = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AVX2 static inline __m256 ld_f16(const uint16_t *h) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)); }
AVX2 static inline __m256 ld_bf16(const uint16_t *h)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)h)), 16));
}

/* Contract: sum of w[i]*x[i] in the attention dot's fixed order (simd.h, sl_kernel_set.adot_*):
 * 4 registers of 8 FMA lanes over steps of 32, a last step of 8 into the first, the hsum_ps4 tree,
 * then the tail by FMA.  The portable sl_adot_* (kernels/qdot.c) spell out the same operations, so
 * attention gets the same bits on every path; F32/F16 weight rows use the same functions. */
#define FLOAT_DOT(LINKAGE, NAME, T, LOAD, SCALAR)                                                      \
    AVX2 LINKAGE float NAME(const void *restrict vw, const float *restrict x, int64_t n)               \
    {                                                                                                  \
        const T *w = vw;                                                                               \
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                                    \
        int64_t i = 0;                                                                                 \
        for (; i + 32 <= n; i += 32) {                                                                 \
            a0 = _mm256_fmadd_ps(LOAD(w + i), _mm256_loadu_ps(x + i), a0);                             \
            a1 = _mm256_fmadd_ps(LOAD(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);                     \
            a2 = _mm256_fmadd_ps(LOAD(w + i + 16), _mm256_loadu_ps(x + i + 16), a2);                   \
            a3 = _mm256_fmadd_ps(LOAD(w + i + 24), _mm256_loadu_ps(x + i + 24), a3);                   \
        }                                                                                              \
        for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(LOAD(w + i), _mm256_loadu_ps(x + i), a0);      \
        float s = hsum_ps4(a0, a1, a2, a3);                                                            \
        for (; i < n; i++) s = fmaf(SCALAR(w[i]), x[i], s);                                            \
        return s;                                                                                      \
    }

#define F32_ID(v) (v)
FLOAT_DOT(, sl_avx2_adot_f32, float, _mm256_loadu_ps, F32_ID)
FLOAT_DOT(, sl_avx2_adot_f16, uint16_t, ld_f16, f16f)
FLOAT_DOT(static, dot_bf16, uint16_t, ld_bf16, sl_bf16_to_f32)

/* Contract: o[i] += a * v[i] with one rounding per element (FMA). */
AVX2 void sl_avx2_axpy_f32(float *restrict o, float a, const float *restrict v, int64_t n)
{
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(o + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(v + i), _mm256_loadu_ps(o + i)));
    for (; i < n; i++) o[i] = fmaf(a, v[i], o[i]);
}

/* Contract: as sl_avx2_axpy_f32 with v given as halfs. */
AVX2 void sl_avx2_axpy_f16(float *restrict o, float a, const uint16_t *restrict v, int64_t n)
{
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(o + i, _mm256_fmadd_ps(va, ld_f16(v + i), _mm256_loadu_ps(o + i)));
    for (; i < n; i++) o[i] = fmaf(a, f16f(v[i]), o[i]);
}

const sl_kernel_set sl_kernels_avx2_set = {
    "avx2",
    sl_avx2_quantize_q8_0, sl_avx2_quantize_q8_k,
    dot_q4_0_q8_0, sl_avx2_dot_q8_0_q8_0,
    dot_q4_k_q8_k, dot_q5_k_q8_k, dot_q6_k_q8_k,
    sl_avx2_adot_f32, sl_avx2_adot_f16, dot_bf16,
    sl_avx2_axpy_f32, sl_avx2_axpy_f16,
    sl_avx2_adot_f32, sl_avx2_adot_f16,
    sl_avx2_dot4_q4_0_q8_0, sl_avx2_dot4_q8_0_q8_0,
    sl_avx2_dot4_q4_k_q8_k, sl_avx2_dot4_q5_k_q8_k, sl_avx2_dot4_q6_k_q8_k,
    /* codebook types (kernels/simd_avx2_iq.c, IQ1 included) */
    .dot_iq2_xs_q8_k = sl_avx2_dot_iq2_xs_q8_k, .dot_iq3_xxs_q8_k = sl_avx2_dot_iq3_xxs_q8_k,
    .dot_iq3_s_q8_k = sl_avx2_dot_iq3_s_q8_k, .dot_iq2_xxs_q8_k = sl_avx2_dot_iq2_xxs_q8_k,
    .dot_iq2_s_q8_k = sl_avx2_dot_iq2_s_q8_k, .dot_iq1_s_q8_k = sl_avx2_dot_iq1_s_q8_k,
    .dot_iq1_m_q8_k = sl_avx2_dot_iq1_m_q8_k,
    /* low-bit types (kernels/simd_avx2_quants.c); Q8_1 activations come from the portable
     * quantizer (once per matrix product, not worth a SIMD copy) */
    .quantize_q8_1 = sl_quantize_act_q8_1,
    .dot_q5_0_q8_0 = sl_avx2_dot_q5_0_q8_0, .dot_iq4_nl_q8_0 = sl_avx2_dot_iq4_nl_q8_0,
    .dot_q4_1_q8_1 = sl_avx2_dot_q4_1_q8_1, .dot_q5_1_q8_1 = sl_avx2_dot_q5_1_q8_1,
    .dot_q2_k_q8_k = sl_avx2_dot_q2_k_q8_k, .dot_q3_k_q8_k = sl_avx2_dot_q3_k_q8_k,
    .dot_iq4_xs_q8_k = sl_avx2_dot_iq4_xs_q8_k,
    .dot_mxfp4_q8_0 = sl_avx2_dot_mxfp4_q8_0, .dot4_mxfp4_q8_0 = sl_avx2_dot4_mxfp4_q8_0,
    .dotr_mxfp4_q8_0 = sl_avx2_dotr_mxfp4_q8_0,
    .dotr_q8_0_q8_0 = sl_avx2_dotr_q8_0_q8_0,
};

#else   /* not x86: dispatch.c never hands this set out */
const sl_kernel_set sl_kernels_avx2_set = { .name = "avx2" };
#endif
