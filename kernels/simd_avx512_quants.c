/* kernels/simd_avx512_quants.c — AVX-512 (F, BW, VL, VNNI) integer dots of Q2_K, Q3_K, IQ4_XS
 * (with Q8_K) and IQ4_NL, Q5_0 (with Q8_0).
 *
 * Same contract as simd_avx512.c: the portable reference's bits (kernels/qdot_quants.c), integer
 * sums exact, the float steps of kernels/simd.h in the same order (no FMA: k_common.h).  A 512-bit
 * register holds 64 weights:
 *   - Q2_K/Q3_K: sub-blocks 4m..4m+3 (elements 64m..64m+63 of the super-block), built from one
 *     32-byte load of 2-bit fields shifted by a different amount in each 256-bit half (vpsrlvw);
 *     vpmaddubsw + vpmaddwd apply four sub-block scales at once (vpermw picks them);
 *   - IQ4_XS: two sub-blocks of 32, IQ4_NL/Q5_0: two blocks of 32 (block i in lanes 0-7, block i+1
 *     in lanes 8-15: the canonical acc[i % 2] split, as simd_avx512.c's Q4_0).
 * Signed weights times signed activations go through vpdpbusd as |w| x (a with w's sign); the
 * activations are never -128, so nothing saturates or wraps.
 * Q4_1/Q5_1 stay on the AVX2 kernels (legacy fallback types, rare in files; the AVX2 dot is
 * already faster than memory there).  Tested natively (tests/test_quant_types.c), not under the
 * SIMDe emulation of test_kernels_avx512_emu.c.
 */
#include "kernels/k_quants.h"
#include "kernels/simd.h"

#include <stddef.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

AVX512 static inline float f16f(uint16_t h) { return _cvtsh_ss(h); }
AVX512 static inline __m256i ld256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
AVX512 static inline __m512i ld512(const void *p) { return _mm512_loadu_si512(p); }

AVX512 static inline __m512i join256(__m256i lo, __m256i hi)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

AVX512 static inline __m512 join_ps(__m256 lo, __m256 hi)
{
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi), 1));
}

AVX512 static inline __m256 hi_ps(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

/* The canonical reduction: t = a0 + a1; t[k] += t[k+4]; t[k] += t[k+2]; t[0] + t[1]. */
AVX512 static inline float lanes_reduce(__m256 a0, __m256 a1)
{
    const __m256 t = _mm256_add_ps(a0, a1);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AVX512 static inline int32_t hsum_i32x8(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* int32 lane k = exact sum of w[e]*a[e], e = 4k..4k+3, signed w (|w| <= 127) and a. */
AVX512 static inline __m512i lane_dots2(__m512i w, __m512i a)
{
    const __mmask64 neg = _mm512_movepi8_mask(w);
    const __m512i as = _mm512_mask_sub_epi8(a, neg, _mm512_setzero_si512(), a);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(w), as);
}

AVX512 static inline __m256i lane_dots1(__m256i w, __m256i a)
{
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* The nibbles of two 32-blocks (16 bytes each at qa, qb) in element order: block a's elements
 * 0..31 in bytes 0-31, block b's in bytes 32-63. */
AVX512 static inline __m512i nibbles64(const uint8_t *qa, const uint8_t *qb)
{
    const __m256i raw = _mm256_loadu2_m128i((const __m128i *)qb, (const __m128i *)qa), m4 = _mm256_set1_epi8(0x0f);
    const __m512i v = join256(_mm256_and_si256(raw, m4), _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4));
    return _mm512_shuffle_i64x2(v, v, _MM_SHUFFLE(3, 1, 2, 0));   /* [lo a, lo b, hi a, hi b] -> [lo a, hi a, lo b, hi b] */
}

AVX512 static inline __m256i nibbles32(const uint8_t *qs)
{
    const __m128i raw = _mm_loadu_si128((const __m128i *)qs), m4 = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), _mm_and_si128(raw, m4));
}

AVX512 static inline __m512i kvalues_table512(void)
{
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)sl_kvalues_iq4nl));
}

/* ---- blocks of 32 with Q8_0 ------------------------------------------------------------------ */

/* Q5_0 values (q - 16) of one block in element order. */
AVX512 static inline __m256i q5_0_bytes32(const sl_block_q5_0 *b)
{
    const __m256i hb = _mm256_maskz_mov_epi8((__mmask32)sl_q5_qh(b->qh), _mm256_set1_epi8(0x10));
    return _mm256_sub_epi8(_mm256_or_si256(nibbles32(b->qs), hb), _mm256_set1_epi8(16));
}

/* The 16 nibble bytes of two adjacent 32-blocks (qs at byte offsets `off` and `off` + `stride` of a
 * masked load of both blocks; all even, so vpermw places them): bytes 0-15 / 32-47 = the low nibbles
 * of block i / i + 1 (elements 0-15), bytes 16-31 / 48-63 = the high nibbles (elements 16-31). */
AVX512 static inline __m512i nibbles_pair(const void *blocks, unsigned bytes, int off, int stride)
{
    const __m512i raw = _mm512_maskz_loadu_epi8(((__mmask64)1 << bytes) - 1, blocks);
    const __m512i wi = _mm512_add_epi16(_mm512_set1_epi16((short)(off / 2)),
                                        _mm512_setr_epi32(0x00010000, 0x00030002, 0x00050004, 0x00070006,
                                                          0x00010000, 0x00030002, 0x00050004, 0x00070006,
                                                          0x00010000, 0x00030002, 0x00050004, 0x00070006,
                                                          0x00010000, 0x00030002, 0x00050004, 0x00070006));
    const __m512i idx = _mm512_mask_add_epi16(wi, (__mmask32)0xffff0000u, wi, _mm512_set1_epi16((short)(stride / 2)));
    const __m512i shift = _mm512_setr_epi64(0, 0, 0x0004000400040004ll, 0x0004000400040004ll, 0, 0,
                                            0x0004000400040004ll, 0x0004000400040004ll);
    return _mm512_and_si512(_mm512_srlv_epi16(_mm512_permutexvar_epi16(idx, raw), shift), _mm512_set1_epi8(0x0f));
}

/* Lanes 0-7 = s0 = f16(wd0) * f16(yd0), lanes 8-15 = s1 (the same products as scalar code). */
AVX512 static inline __m512 scale_pair(uint16_t wd0, uint16_t wd1, uint16_t yd0, uint16_t yd1)
{
    const __m128 s = _mm_mul_ps(_mm_cvtph_ps(_mm_insert_epi16(_mm_cvtsi32_si128(wd0), wd1, 1)),
                                _mm_cvtph_ps(_mm_insert_epi16(_mm_cvtsi32_si128(yd0), yd1, 1)));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1), _mm512_castps128_ps512(s));
}

/* Contract: as sl_qdot_q5_0_q8_0 (same bits). */
AVX512 float sl_avx512_dot_q5_0_q8_0(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q5_0 *w = vw;
    const sl_block_q8_0 *y = vy;
    const int64_t nb = n / SL_QK;
    const __m512i x16 = _mm512_set1_epi8(16);
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        sl_prefetch_ahead(&w[i], 2 * sizeof w[i]);
        const __mmask64 hm = (__mmask64)sl_q5_qh(w[i].qh) | (__mmask64)sl_q5_qh(w[i + 1].qh) << 32;
        const __m512i nib = nibbles_pair(&w[i], 2 * sizeof w[i], offsetof(sl_block_q5_0, qs), sizeof w[i]);
        /* q = value - 16 is negative exactly where the high bit is clear: |q| and the sign mask
         * without a compare */
        const __m512i absq = _mm512_mask_sub_epi8(_mm512_sub_epi8(x16, nib), hm, nib, _mm512_setzero_si512());
        const __m512i a = join256(ld256(y[i].qs), ld256(y[i + 1].qs));
        const __m512i sa = _mm512_mask_sub_epi8(a, ~hm, _mm512_setzero_si512(), a);
        const __m512i l = _mm512_dpbusd_epi32(_mm512_setzero_si512(), absq, sa);
        acc = _mm512_add_ps(acc, _mm512_mul_ps(scale_pair(w[i].d, w[i + 1].d, y[i].d, y[i + 1].d), _mm512_cvtepi32_ps(l)));
    }
    __m256 a0 = _mm512_castps512_ps256(acc);
    if (i < nb) {
        const __m256 s = _mm256_set1_ps(f16f(w[i].d) * f16f(y[i].d));
        a0 = _mm256_add_ps(a0, _mm256_mul_ps(s, _mm256_cvtepi32_ps(lane_dots1(q5_0_bytes32(&w[i]), ld256(y[i].qs)))));
    }
    return lanes_reduce(a0, hi_ps(acc));
}

/* Contract: as sl_qdot_iq4_nl_q8_0 (same bits). */
AVX512 float sl_avx512_dot_iq4_nl_q8_0(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_iq4_nl *w = vw;
    const sl_block_q8_0 *y = vy;
    const int64_t nb = n / SL_QK;
    const __m512i kv = kvalues_table512(), kabs = _mm512_abs_epi8(kv), x8 = _mm512_set1_epi8(8);
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        sl_prefetch_ahead(&w[i], 2 * sizeof w[i]);
        const __m512i nib = nibbles_pair(&w[i], 2 * sizeof w[i], offsetof(sl_block_iq4_nl, qs), sizeof w[i]);
        /* |kvalue| by table; kvalues[k] < 0 exactly for k < 8 */
        const __m512i absq = _mm512_shuffle_epi8(kabs, nib);
        const __m512i a = join256(ld256(y[i].qs), ld256(y[i + 1].qs));
        const __m512i sa = _mm512_mask_sub_epi8(a, _mm512_testn_epi8_mask(nib, x8), _mm512_setzero_si512(), a);
        const __m512i l = _mm512_dpbusd_epi32(_mm512_setzero_si512(), absq, sa);
        acc = _mm512_add_ps(acc, _mm512_mul_ps(scale_pair(w[i].d, w[i + 1].d, y[i].d, y[i + 1].d), _mm512_cvtepi32_ps(l)));
    }
    __m256 a0 = _mm512_castps512_ps256(acc);
    if (i < nb) {
        const __m256i q = _mm256_shuffle_epi8(_mm512_castsi512_si256(kv), nibbles32(w[i].qs));
        const __m256 s = _mm256_set1_ps(f16f(w[i].d) * f16f(y[i].d));
        a0 = _mm256_add_ps(a0, _mm256_mul_ps(s, _mm256_cvtepi32_ps(lane_dots1(q, ld256(y[i].qs)))));
    }
    return lanes_reduce(a0, hi_ps(acc));
}

/* ---- super-blocks with Q8_K ------------------------------------------------------------------ */

/* int16 lane k of a 64-element group belongs to sub-block k / 8 of the group's four: vpermw
 * indices into 16 int16 scales, offset by the group's first sub-block. */
AVX512 static inline __m512i scale_idx(int first)
{
    return _mm512_add_epi16(_mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2,
                                             1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
                            _mm512_set1_epi16((short)first));
}

/* Shift counts for vpsrlvw: `lo` in the low 256 bits, `hi` in the high ones. */
AVX512 static inline __m512i shifts(int lo, int hi)
{
    return join256(_mm256_set1_epi16((short)lo), _mm256_set1_epi16((short)hi));
}

/* Contract: as sl_qdot_q2_k_q8_k (same bits).  q <= 3: pairs <= 2*3*127; times sc <= 15. */
AVX512 float sl_avx512_dot_q2_k_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q2_k *w = vw;
    const sl_block_q8_k *y = vy;
    const __m512i m3 = _mm512_set1_epi8(3), sh01 = shifts(0, 2), sh23 = shifts(4, 6);
    const __m512i idx[4] = { scale_idx(0), scale_idx(4), scale_idx(8), scale_idx(12) };
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        const __m128i raw = _mm_loadu_si128((const __m128i *)w[i].scales);
        const __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(raw, _mm_set1_epi8(0x0f))));
        const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0f)));
        __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m512i q = _mm512_broadcast_i64x4(ld256(w[i].qs + 32 * h));
            const __m512i u01 = _mm512_and_si512(_mm512_srlv_epi16(q, sh01), m3);
            const __m512i u23 = _mm512_and_si512(_mm512_srlv_epi16(q, sh23), m3);
            const __m512i p01 = _mm512_maddubs_epi16(u01, ld512(y[i].qs + 128 * h));
            const __m512i p23 = _mm512_maddubs_epi16(u23, ld512(y[i].qs + 128 * h + 64));
            s = _mm512_dpwssd_epi32(s, p01, _mm512_permutexvar_epi16(idx[2 * h], sc16));
            s = _mm512_dpwssd_epi32(s, p23, _mm512_permutexvar_epi16(idx[2 * h + 1], sc16));
        }
        const int32_t S = _mm512_reduce_add_epi32(s), M = hsum_i32x8(_mm256_madd_epi16(mn16, ld256(y[i].bsums)));
        const float d = f16f(w[i].d) * y[i].d, dmin = f16f(w[i].dmin) * y[i].d;
        acc = acc + (d * (float)S - dmin * (float)M);
    }
    return acc;
}

/* The 16 Q3_K scales minus 32 as int16 (the same values as sl_q3_k_scales - 32), unpacked in
 * registers: low nibbles from bytes 0-7 (scales 0-7 low, 8-15 high nibbles), top 2 bits from
 * bytes 8-11 (scale j: bits 2*(j/4) of byte 8 + j%4).  Loads only the block's 12 bytes. */
AVX512 static inline __m256i q3_k_scales16(const uint8_t *b)
{
    uint32_t top;
    memcpy(&top, b + 8, 4);
    const __m128i lo8 = _mm_loadl_epi64((const __m128i *)b), m4 = _mm_set1_epi8(0x0f);
    const __m128i low4 = _mm_unpacklo_epi64(_mm_and_si128(lo8, m4), _mm_and_si128(_mm_srli_epi16(lo8, 4), m4));
    const __m128i hi2 = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)top), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
    const __m128i sc = _mm_or_si128(low4, _mm_slli_epi16(hi2, 4));
    return _mm256_sub_epi16(_mm256_cvtepu8_epi16(sc), _mm256_set1_epi16(32));
}

/* Contract: as sl_qdot_q3_k_q8_k (same bits).  u = value + 4 <= 7; times |sc - 32| <= 32. */
AVX512 float sl_avx512_dot_q3_k_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q3_k *w = vw;
    const sl_block_q8_k *y = vy;
    const __m512i m3 = _mm512_set1_epi8(3), m4 = _mm512_set1_epi8(4), sh01 = shifts(0, 2), sh23 = shifts(4, 6);
    const __m512i idx[4] = { scale_idx(0), scale_idx(4), scale_idx(8), scale_idx(12) };
    /* hmask bit k = 4h + j of byte l moved to bit 2 (value 4): (hm >> (k - 2)) & 4, or for k < 2
     * from hm << 2 (16-bit shifts: the bits taken never cross a byte) */
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        const __m256i sc16 = q3_k_scales16(w[i].scales);
        const __m512i sc512 = _mm512_castsi256_si512(sc16);
        const __m512i hm = _mm512_broadcast_i64x4(ld256(w[i].hmask));
        const __m512i hm_l = _mm512_slli_epi16(hm, 2);          /* bits 0, 1 -> 2, 3 */
        __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m512i q = _mm512_broadcast_i64x4(ld256(w[i].qs + 32 * h));
            const __m512i q01 = _mm512_and_si512(_mm512_srlv_epi16(q, sh01), m3);
            const __m512i q23 = _mm512_and_si512(_mm512_srlv_epi16(q, sh23), m3);
            /* the high bits of sub-block pairs (j, j+1) = bits 4h+j of hmask, at value 4 */
            const __m512i h01 = h == 0 ? _mm512_and_si512(_mm512_srlv_epi16(hm_l, shifts(0, 1)), m4)
                                       : _mm512_and_si512(_mm512_srlv_epi16(hm, shifts(2, 3)), m4);
            const __m512i h23 = h == 0 ? _mm512_and_si512(_mm512_srlv_epi16(hm, shifts(0, 1)), m4)
                                       : _mm512_and_si512(_mm512_srlv_epi16(hm, shifts(4, 5)), m4);
            const __m512i p01 = _mm512_maddubs_epi16(_mm512_or_si512(q01, h01), ld512(y[i].qs + 128 * h));
            const __m512i p23 = _mm512_maddubs_epi16(_mm512_or_si512(q23, h23), ld512(y[i].qs + 128 * h + 64));
            s = _mm512_add_epi32(s, _mm512_madd_epi16(p01, _mm512_permutexvar_epi16(idx[2 * h], sc512)));
            s = _mm512_add_epi32(s, _mm512_madd_epi16(p23, _mm512_permutexvar_epi16(idx[2 * h + 1], sc512)));
        }
        const int32_t C = hsum_i32x8(_mm256_madd_epi16(sc16, ld256(y[i].bsums)));
        const int32_t S = _mm512_reduce_add_epi32(s) - 4 * C;
        const float d = f16f(w[i].d) * y[i].d;
        acc = acc + d * (float)S;
    }
    return acc;
}

/* Contract: as sl_qdot_iq4_xs_q8_k (same bits): two sub-blocks of 32 per step.  |kvalue| by table
 * with the sign (nibble < 8) moved onto the activation; vpmaddubsw pairs <= 2*127*127 < 2^15;
 * vpdpwssd applies each sub-block's ls - 32 (the 8 scales unpacked once per super-block);
 * |S| <= 132e6. */
AVX512 float sl_avx512_dot_iq4_xs_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_iq4_xs *w = vw;
    const sl_block_q8_k *y = vy;
    const __m512i kabs = _mm512_abs_epi8(kvalues_table512()), x8 = _mm512_set1_epi8(8), m4 = _mm512_set1_epi8(0x0f);
    /* bytes 0-15 / 32-47: sub-block b / b+1's 16 bytes (low nibbles), 16-31 / 48-63: the same
     * bytes shifted down by 4 (high nibbles) */
    const __m512i dup = _mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3);
    const __m512i shift = _mm512_setr_epi64(0, 0, 0x0004000400040004ll, 0x0004000400040004ll, 0, 0,
                                            0x0004000400040004ll, 0x0004000400040004ll);
    const __m256i lo_shift = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28), hi_shift = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        uint32_t sl;
        memcpy(&sl, w[i].scales_l, 4);
        const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)sl), lo_shift), _mm256_set1_epi32(15));
        const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(w[i].scales_h), hi_shift), _mm256_set1_epi32(3));
        const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
        /* ls - 32 in both int16 halves of each dword (negative values: the low half sign-extends) */
        const __m512i l2 = _mm512_castsi256_si512(_mm256_or_si256(_mm256_and_si256(ls, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(ls, 16)));
        __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int ib = 0; ib < 8; ib += 2) {
            const __m512i raw = _mm512_permutexvar_epi64(dup, _mm512_castsi256_si512(ld256(w[i].qs + 16 * ib)));
            const __m512i nib = _mm512_and_si512(_mm512_srlv_epi16(raw, shift), m4);
            const __m512i a = ld512(y[i].qs + 32 * ib);
            const __m512i sa = _mm512_mask_sub_epi8(a, _mm512_testn_epi8_mask(nib, x8), _mm512_setzero_si512(), a);
            const __m512i p = _mm512_maddubs_epi16(_mm512_shuffle_epi8(kabs, nib), sa);
            const __m512i sc = _mm512_permutexvar_epi32(_mm512_inserti64x4(_mm512_set1_epi32(ib), _mm256_set1_epi32(ib + 1), 1), l2);
            s = _mm512_dpwssd_epi32(s, p, sc);
        }
        const float d = f16f(w[i].d) * y[i].d;
        acc = acc + d * (float)_mm512_reduce_add_epi32(s);
    }
    return acc;
}

#endif
