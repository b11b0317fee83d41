/* kernels/simd_reduce.h — the canonical 2 x 8-lane float reduction of the 32-block dots, shared by
 * the AVX2 and AVX-512 kernel files: its order is part of the result's bits (the portable dots in
 * qdot.c and qdot_quants.c reduce their two 8-lane accumulators the same way), so it is written
 * once.  The includer has <immintrin.h> (or SIMDe's native aliases) and defines SL_REDUCE_TARGET
 * as its target attribute (one with AVX). */
#ifndef SL_KERNELS_SIMD_REDUCE_H
#define SL_KERNELS_SIMD_REDUCE_H

/* t = a0 + a1; t[k] += t[k+4]; t[k] += t[k+2]; t[0] + t[1]. */
SL_REDUCE_TARGET static inline float lanes_reduce(__m256 a0, __m256 a1)
{
    const __m256 t = _mm256_add_ps(a0, a1);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#endif
