/* kernels/simd_avx512_kdot.h — the super-block loop of the AVX-512 single dots of the K types with
 * Q8_K activations (Q2_K, Q3_K, IQ4_XS in simd_avx512_quants.c; Q4_K, Q5_K, Q6_K in
 * simd_avx512.c), written once.
 *
 * Four super-blocks per step: their integer sums S (and M, the min term, for the types with dmin)
 * are reduced together (one 4-way horizontal reduction instead of four), then the float steps of
 * kernels/simd.h run for the four in 4 lanes: d_k = f16(w_k.d) * y_k.d, t_k = d_k * (float)S_k
 * [- (f16(w_k.dmin) * y_k.d) * (float)M_k], each lane the scalar code's operations on the same
 * operands (no FMA), so the same bits; acc = acc + t_k stays scalar and in order.  The f16 and f32
 * scale operands are packed in general registers (integer ports) rather than inserted lane by lane
 * (vector shuffles): on AMD Zen 4 the vector ports are the bound, and the scalar steps took ~2 of
 * the ~7 ns of a Q2_K super-block (docs/benchmarks.md, "Zen 4").
 *
 * The includer has <immintrin.h> (or SIMDe's native aliases), kernels/k_common.h, and defines
 * SL_KDOT_TARGET as its target attribute (one with AVX-512 F/BW/VL, AVX2 and F16C).
 */
#ifndef SL_KERNELS_SIMD_AVX512_KDOT_H
#define SL_KERNELS_SIMD_AVX512_KDOT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* [sum of the lanes of a, of b, of c, of d] (exact: integer addition). */
SL_KDOT_TARGET static inline __m128i hsum4_i32x8(__m256i a, __m256i b, __m256i c, __m256i d)
{
    const __m256i abcd = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
    return _mm_add_epi32(_mm256_castsi256_si128(abcd), _mm256_extracti128_si256(abcd, 1));
}

SL_KDOT_TARGET static inline __m256i fold512(__m512i v)
{
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

SL_KDOT_TARGET static inline __m128i hsum4_i32x16(const __m512i s[4])
{
    return hsum4_i32x8(fold512(s[0]), fold512(s[1]), fold512(s[2]), fold512(s[3]));
}

SL_KDOT_TARGET static inline int32_t hsum_i32x8(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* The 16-bit values at p + k * stride, k < 4, packed: value k in bits 16k..16k+15. */
static inline uint64_t kd_pack16x4(const void *p, size_t stride)
{
    const unsigned char *b = p;
    uint64_t r = 0;
    for (int k = 0; k < 4; k++) {
        uint16_t h;
        memcpy(&h, b + (size_t)k * stride, sizeof h);
        r |= (uint64_t)h << (16 * k);
    }
    return r;
}

/* The f32 values at p + k * stride, k < 4, in lanes 0-3. */
SL_KDOT_TARGET static inline __m128 kd_load_f32x4(const void *p, size_t stride)
{
    const unsigned char *b = p;
    uint32_t u[4];
    for (int k = 0; k < 4; k++) memcpy(&u[k], b + (size_t)k * stride, sizeof u[k]);
    return _mm_castsi128_ps(_mm_set_epi64x((long long)((uint64_t)u[3] << 32 | u[2]), (long long)((uint64_t)u[1] << 32 | u[0])));
}

/* acc + t[0] + t[1] + t[2] + t[3], in that order. */
SL_KDOT_TARGET static inline float kd_add4(float acc, __m128 t)
{
    float f[4];
    _mm_storeu_ps(f, t);
    return ((acc + f[0]) + f[1] + f[2]) + f[3];
}

/* Lane k: (f16(d_k) * yd_k) * (float)S_k, with d_k the 16-bit value k of wd. */
SL_KDOT_TARGET static inline __m128 kd_steps_d(uint64_t wd, __m128 yd, __m128i S)
{
    const __m128 d = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi64_si128((long long)wd)), yd);
    return _mm_mul_ps(d, _mm_cvtepi32_ps(S));
}

/* Lane k: (f16(d_k) * yd_k) * (float)S_k - (f16(dmin_k) * yd_k) * (float)M_k. */
SL_KDOT_TARGET static inline __m128 kd_steps_dmin(uint64_t wd, uint64_t wdmin, __m128 yd, __m128i S, __m128i M)
{
    const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_set_epi64x((long long)wdmin, (long long)wd)), _mm256_set_m128(yd, yd));
    const __m256 p = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_set_m128i(M, S)));
    return _mm_sub_ps(_mm256_castps256_ps128(p), _mm256_extractf128_ps(p, 1));
}

/* The f16 at byte `off` of block b. */
static inline float kd_f16_at(const void *b, size_t off)
{
    uint16_t h;
    memcpy(&h, (const unsigned char *)b + off, sizeof h);
    return sl_f16_to_f32(h);
}

/* The body of a single dot over n / 256 super-blocks of type T (its scale `d`, and at byte DMIN_OFF
 * its `dmin`, or DMIN_OFF < 0 for the one-scale types) with activations vy: KBLOCK(b, y, &s, &m)
 * puts super-block b's S lanes (__m512i) in s and, for the dmin types, its M lanes (__m256i) in m.
 * Needs vw, vy, n in scope; returns the dot. */
#define SL_KDOT_SINGLE(T, KBLOCK, DMIN_OFF)                                                            \
    const T *w = vw;                                                                                 \
    const sl_block_q8_k *y = vy;                                                                     \
    const int64_t nsb = n / SL_QK_K;                                                                 \
    float acc = 0;                                                                                   \
    int64_t i = 0;                                                                                   \
    for (; i + 4 <= nsb; i += 4) {                                                                   \
        __m512i s[4];                                                                                \
        __m256i m[4];                                                                                \
        _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)                                          \
        {                                                                                            \
            sl_prefetch_ahead(&w[i + k], sizeof w[i + k]);                                           \
            m[k] = _mm256_setzero_si256();                                                           \
            KBLOCK(&w[i + k], &y[i + k], &s[k], &m[k]);                                              \
        }                                                                                            \
        const __m128 yd = kd_load_f32x4(&y[i].d, sizeof *y);                                         \
        const uint64_t wd = kd_pack16x4(&w[i].d, sizeof *w);                                         \
        const __m128i S = hsum4_i32x16(s);                                                           \
        acc = kd_add4(acc, (DMIN_OFF) < 0 ? kd_steps_d(wd, yd, S)                                    \
                                          : kd_steps_dmin(wd, kd_pack16x4((const unsigned char *)&w[i] + ((DMIN_OFF) < 0 ? 0 : (DMIN_OFF)), sizeof *w), \
                                                          yd, S, hsum4_i32x8(m[0], m[1], m[2], m[3]))); \
    }                                                                                                \
    for (; i < nsb; i++) {                                                                           \
        __m512i s;                                                                                   \
        __m256i m = _mm256_setzero_si256();                                                          \
        KBLOCK(&w[i], &y[i], &s, &m);                                                                \
        const float d = sl_f16_to_f32(w[i].d) * y[i].d;                                              \
        const float t = d * (float)hsum_i32x8(fold512(s));                                           \
        acc = acc + ((DMIN_OFF) < 0 ? t : t - (kd_f16_at(&w[i], (DMIN_OFF) < 0 ? 0 : (DMIN_OFF)) * y[i].d) * (float)hsum_i32x8(m)); \
    }                                                                                                \
    return acc;

#endif
