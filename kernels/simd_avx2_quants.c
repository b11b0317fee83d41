/* kernels/simd_avx2_quants.c — AVX2 integer dots of the low-bit types (Q5_0, IQ4_NL, MXFP4, Q4_1,
 * Q5_1 with 32-blocks; Q2_K, Q3_K, IQ4_XS with Q8_K).
 *
 * Same contract as simd_avx2.c: every function returns the portable reference's bits
 * (kernels/qdot_quants.c): the integer sums are exact and the float steps of kernels/simd.h are the
 * same multiplies and adds in the same order (k_common.h turns off FMA contraction; the object code
 * has no vfmadd in these functions).  Target attributes per function, so the file builds for any
 * x86-64 and only runs after dispatch.c has checked cpuid.
 *
 * Bounds of the byte products: vpmaddubsw (unsigned x signed bytes, pairs summed to int16) sees
 * weights <= 31 (Q5_1), <= 7 (Q3_K, as value + 4) or |w| <= 127 with the sign moved onto the
 * activation (Q5_0, IQ4_NL, MXFP4, IQ4_XS; activations are never -128): pairs <= 2 * 127 * 127 < 2^15.
 */
#include "kernels/k_quants.h"
#include "kernels/simd.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#include "kernels/simd_avx2_util.h"
#include "kernels/simd_avx2_fma32.h"

AVX2 static inline float f16f(uint16_t h) { return _cvtsh_ss(h); }

/* The f16 at p as f32, read with a 4-byte load (vmovd from memory is a plain load; _cvtsh_ss's
 * vpinsrw also takes the shuffle port).  Needs 2 readable bytes after it: every block here has
 * its f16 scale d first and at least 16 bytes after it. */
AVX2 static inline float f16_at(const uint16_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(v)));
}

AVX2 static inline __m256i ld(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

AVX2 static inline int32_t hsum_i32x8(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* int32 lane k = exact sum of the 4 products of elements 4k..4k+3: signed w (|w| <= 127) x a. */
AVX2 static inline __m256i lane_dots_signed(__m256i w, __m256i a)
{
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* The same for unsigned w (<= 31). */
AVX2 static inline __m256i lane_dots_unsigned(__m256i w, __m256i a)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1));
}

/* 32 nibbles of qs[16] in element order: low nibbles = elements 0..15, high = 16..31.  The 16
 * bytes are loaded into both halves (vbroadcasti128 is a plain load) and the halves picked with a
 * blend: no vinserti128 on the shuffle port, which the 32-block dots saturate. */
AVX2 static inline __m256i nibbles32(const uint8_t *qs)
{
    const __m256i raw = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    return _mm256_and_si256(_mm256_blend_epi32(raw, _mm256_srli_epi16(raw, 4), 0xf0), _mm256_set1_epi8(0x0f));
}

/* 32 five-bit values of a Q5_0/Q5_1 block: nibble | bit << 4. */
AVX2 static inline __m256i q5_bytes(const uint8_t *qs, const uint8_t *qh)
{
    const __m256i hi = _mm256_and_si256(bits_to_bytes(sl_q5_qh(qh)), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(nibbles32(qs), hi);
}

/* kvalues in both 128-bit halves, for vpshufb lookups by nibble. */
AVX2 static inline __m256i kvalues_table(void)
{
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)sl_kvalues_iq4nl));
}

/* The term s * (float)lanes of block i, for sum_blocks32 (simd_avx2_util.h). */
AVX2 static inline __m256 q5_0_term(const void *vw, const void *vy, int64_t i, const void *ctx)
{
    const sl_block_q5_0 *w = (const sl_block_q5_0 *)vw + i;
    const sl_block_q8_0 *y = (const sl_block_q8_0 *)vy + i;
    (void)ctx;
    const __m256i q = _mm256_sub_epi8(q5_bytes(w->qs, w->qh), _mm256_set1_epi8(16));
    return _mm256_mul_ps(_mm256_set1_ps(f16_at(&w->d) * f16_at(&y->d)), _mm256_cvtepi32_ps(lane_dots_signed(q, ld(y->qs))));
}

/* ctx: the value table (kvalues_table) */
AVX2 static inline __m256 iq4_nl_term(const void *vw, const void *vy, int64_t i, const void *ctx)
{
    const sl_block_iq4_nl *w = (const sl_block_iq4_nl *)vw + i;
    const sl_block_q8_0 *y = (const sl_block_q8_0 *)vy + i;
    const __m256i q = _mm256_shuffle_epi8(*(const __m256i *)ctx, nibbles32(w->qs));
    return _mm256_mul_ps(_mm256_set1_ps(f16_at(&w->d) * f16_at(&y->d)), _mm256_cvtepi32_ps(lane_dots_signed(q, ld(y->qs))));
}

/* Contract: as sl_qdot_q5_0_q8_0 (same bits). */
AVX2 float sl_avx2_dot_q5_0_q8_0(const void *restrict vw, const void *restrict vy, int64_t n)
{
    return sum_blocks32(vw, sizeof(sl_block_q5_0), vy, n / SL_QK, q5_0_term, NULL);
}

/* Contract: as sl_qdot_iq4_nl_q8_0 (same bits). */
AVX2 float sl_avx2_dot_iq4_nl_q8_0(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const __m256i kv = kvalues_table();
    return sum_blocks32(vw, sizeof(sl_block_iq4_nl), vy, n / SL_QK, iq4_nl_term, &kv);
}

/* ---- MXFP4: one fused multiply-add per block (kernels/simd.h; the forms in simd_avx2_fma32.h) --- */

/* ctx: kvalues_mxfp4 in both 128-bit halves (the E2M1 values doubled, |q| <= 12). */
FMA32_INLINE __m256i mxfp4_weights(const void *w, int64_t i, const void *ctx)
{
    return _mm256_shuffle_epi8(*(const __m256i *)ctx, nibbles32(((const sl_block_mxfp4 *)w)[i].qs));
}

FMA32_INLINE float mxfp4_scale(const void *w, int64_t i) { return sl_e8m0_half(((const sl_block_mxfp4 *)w)[i].e); }

AVX2 static inline __m256i mxfp4_table(void)
{
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)sl_kvalues_mxfp4));
}

/* Contract: as sl_qdot_mxfp4_q8_0 (same bits). */
AVX2 float sl_avx2_dot_mxfp4_q8_0(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const __m256i kv = mxfp4_table();
    return fma32_dot(vw, sizeof(sl_block_mxfp4), vy, n / SL_QK, mxfp4_weights, mxfp4_scale, &kv);
}

/* Contract: out[v] = sl_qdot_mxfp4_q8_0(w, y + v*ys, n) bit for bit, v < 4. */
AVX2 void sl_avx2_dot4_mxfp4_q8_0(const void *restrict vw, const void *restrict vy, size_t ys, int64_t n, float *restrict out)
{
    const __m256i kv = mxfp4_table();
    fma32_dot4(vw, vy, ys, n / SL_QK, mxfp4_weights, mxfp4_scale, &kv, out);
}

/* Contract: out[r] = sl_qdot_mxfp4_q8_0(row r, vy, n) bit for bit, r < nrows. */
AVX2 void sl_avx2_dotr_mxfp4_q8_0(const void *restrict vw, size_t row_bytes, const void *restrict vy, int64_t n,
                                  int64_t nrows, float *restrict out)
{
    const __m256i kv = mxfp4_table();
    fma32_dotr(vw, row_bytes, sizeof(sl_block_mxfp4), vy, n / SL_QK, nrows, mxfp4_weights, mxfp4_scale, &kv, out);
}

/* The term s * (float)lanes of a Q4_1 / Q5_1 block; the min terms stay scalar (one chain). */
AVX2 static inline __m256 q4_1_term(const sl_block_q4_1 *w, const sl_block_q8_1 *y)
{
    const __m256i l = lane_dots_unsigned(nibbles32(w->qs), ld(y->qs));
    return _mm256_mul_ps(_mm256_set1_ps(f16_at(&w->d) * f16_at(&y->d)), _mm256_cvtepi32_ps(l));
}

AVX2 static inline __m256 q5_1_term(const sl_block_q5_1 *w, const sl_block_q8_1 *y)
{
    const __m256i l = lane_dots_unsigned(q5_bytes(w->qs, w->qh), ld(y->qs));
    return _mm256_mul_ps(_mm256_set1_ps(f16_at(&w->d) * f16_at(&y->d)), _mm256_cvtepi32_ps(l));
}

/* Contract: as sl_qdot_q4_1_q8_1 (same bits).  Two blocks per iteration as sum_blocks32
 * (simd_avx2_util.h), with the min terms in a scalar chain beside it. */
AVX2 float sl_avx2_dot_q4_1_q8_1(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q4_1 *w = vw;
    const sl_block_q8_1 *y = vy;
    const int64_t nb = n / SL_QK;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float mn = 0;
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        sl_prefetch_ahead(&w[i], 2 * sizeof w[i]);
        acc0 = _mm256_add_ps(acc0, q4_1_term(&w[i], &y[i]));
        acc1 = _mm256_add_ps(acc1, q4_1_term(&w[i + 1], &y[i + 1]));
        mn = mn + f16f(w[i].m) * f16f(y[i].s);
        mn = mn + f16f(w[i + 1].m) * f16f(y[i + 1].s);
    }
    if (i < nb) {
        acc0 = _mm256_add_ps(acc0, q4_1_term(&w[i], &y[i]));
        mn = mn + f16f(w[i].m) * f16f(y[i].s);
    }
    return lanes_reduce(acc0, acc1) + mn;
}

/* Contract: as sl_qdot_q5_1_q8_1 (same bits).  As Q4_1. */
AVX2 float sl_avx2_dot_q5_1_q8_1(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q5_1 *w = vw;
    const sl_block_q8_1 *y = vy;
    const int64_t nb = n / SL_QK;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float mn = 0;
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        sl_prefetch_ahead(&w[i], 2 * sizeof w[i]);
        acc0 = _mm256_add_ps(acc0, q5_1_term(&w[i], &y[i]));
        acc1 = _mm256_add_ps(acc1, q5_1_term(&w[i + 1], &y[i + 1]));
        mn = mn + f16f(w[i].m) * f16f(y[i].s);
        mn = mn + f16f(w[i + 1].m) * f16f(y[i + 1].s);
    }
    if (i < nb) {
        acc0 = _mm256_add_ps(acc0, q5_1_term(&w[i], &y[i]));
        mn = mn + f16f(w[i].m) * f16f(y[i].s);
    }
    return lanes_reduce(acc0, acc1) + mn;
}

/* ---- K-quants with sub-blocks of 16 ------------------------------------------------------------
 * A 32-byte register holds two sub-blocks (bytes 0-15 and 16-31): the int16 pair sums of vpmaddubsw
 * in the low 128 bits belong to the first, the high 128 bits to the second, so vpmaddwd with a
 * vector of (scale of the first) x 8 | (scale of the second) x 8 applies both scales at once. */

/* From 16 int16 scales (as loaded by cvtepu8/cvtepi8_epi16), scale 2m in the low half and 2m + 1 in
 * the high half. */
AVX2 static inline __m256i scale_pair(__m256i sc16, int m)
{
    const __m256i pair_ctl = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,
                                              2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
    return _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(sc16, _mm256_set1_epi32(m)), pair_ctl);
}

/* Contract: as sl_qdot_q2_k_q8_k (same bits).  q <= 3: pairs <= 2*3*127; times sc <= 15. */
AVX2 float sl_avx2_dot_q2_k_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q2_k *w = vw;
    const sl_block_q8_k *y = vy;
    const __m256i m3 = _mm256_set1_epi8(3);
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        const __m128i raw = _mm_loadu_si128((const __m128i *)w[i].scales);
        const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(raw, _mm_set1_epi8(0x0f)));
        const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0f)));
        __m256i s = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i q = ld(w[i].qs + 32 * h);
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                const __m256i u = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3);
                const __m256i p = _mm256_maddubs_epi16(u, ld(y[i].qs + 128 * h + 32 * j));
                s = _mm256_add_epi32(s, _mm256_madd_epi16(p, scale_pair(sc16, 4 * h + j)));
            }
        }
        const int32_t S = hsum_i32x8(s), M = hsum_i32x8(_mm256_madd_epi16(mn16, ld(y[i].bsums)));
        const float d = f16f(w[i].d) * y[i].d, dmin = f16f(w[i].dmin) * y[i].d;
        acc = acc + (d * (float)S - dmin * (float)M);
    }
    return acc;
}

/* The 16 Q3_K scales minus 32 as int16 (the same values as sl_q3_k_scales - 32), unpacked in
 * registers: low nibbles from bytes 0-7 (scales 0-7 low, 8-15 high nibbles), top 2 bits from
 * bytes 8-11 (scale j: bits 2*(j/4) of byte 8 + j%4).  Loads only the block's 12 bytes. */
AVX2 static inline __m256i q3_k_scales16(const uint8_t *b)
{
    uint32_t top;
    memcpy(&top, b + 8, 4);
    const __m128i lo8 = _mm_loadl_epi64((const __m128i *)b), m4 = _mm_set1_epi8(0x0f);
    const __m128i low4 = _mm_unpacklo_epi64(_mm_and_si128(lo8, m4), _mm_and_si128(_mm_srli_epi16(lo8, 4), m4));
    const __m128i hi2 = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)top), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
    const __m128i sc = _mm_or_si128(low4, _mm_slli_epi16(hi2, 4));
    return _mm256_sub_epi16(_mm256_cvtepu8_epi16(sc), _mm256_set1_epi16(32));
}

/* Contract: as sl_qdot_q3_k_q8_k (same bits).  u = value + 4 <= 7: pairs <= 2*7*127; times
 * |sc - 32| <= 32. */
AVX2 float sl_avx2_dot_q3_k_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q3_k *w = vw;
    const sl_block_q8_k *y = vy;
    const __m256i m3 = _mm256_set1_epi8(3), m1 = _mm256_set1_epi8(1);
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        const __m256i sc16 = q3_k_scales16(w[i].scales);
        /* the -4 of every value: 4 * sum_j sc_j * bsums_j */
        __m256i s = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(sc16, ld(y[i].bsums)), 2));
        const __m256i hm = ld(w[i].hmask);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i q = ld(w[i].qs + 32 * h);
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3);
                const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + j), m1);
                const __m256i u = _mm256_or_si256(lo, _mm256_slli_epi16(hb, 2));
                const __m256i p = _mm256_maddubs_epi16(u, ld(y[i].qs + 128 * h + 32 * j));
                s = _mm256_add_epi32(s, _mm256_madd_epi16(p, scale_pair(sc16, 4 * h + j)));
            }
        }
        const float d = f16f(w[i].d) * y[i].d;
        acc = acc + d * (float)hsum_i32x8(s);
    }
    return acc;
}

/* Contract: as sl_qdot_iq4_xs_q8_k (same bits).  Two sub-blocks of 32 per step; |kvalue| <= 127
 * with the sign moved onto the activation: pairs <= 2*127*127; times |ls - 32| <= 32. */
AVX2 float sl_avx2_dot_iq4_xs_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_iq4_xs *w = vw;
    const sl_block_q8_k *y = vy;
    const __m256i kv = kvalues_table();
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        __m256i s = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ib++) {
            const __m256i q = _mm256_shuffle_epi8(kv, nibbles32(w[i].qs + 16 * ib));
            const __m256i a = ld(y[i].qs + 32 * ib);
            const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(a, q));
            const __m256i ls = _mm256_set1_epi16((short)(sl_iq4_xs_scale(&w[i], ib) - 32));
            s = _mm256_add_epi32(s, _mm256_madd_epi16(p, ls));
        }
        const float d = f16f(w[i].d) * y[i].d;
        acc = acc + d * (float)hsum_i32x8(s);
    }
    return acc;
}

#endif
