/* kernels/simd_avx2_util.h — small AVX2 helpers shared by the AVX2 kernel files (simd_avx2_quants.c,
 * simd_avx2_iq.c).  The includer has <immintrin.h> and defines AVX2 (its target attribute). */
#ifndef SL_KERNELS_SIMD_AVX2_UTIL_H
#define SL_KERNELS_SIMD_AVX2_UTIL_H

/* Byte e = 0xff where bit e of the 32-bit word is set, else 0. */
AVX2 static inline __m256i bits_to_bytes(uint32_t bits)
{
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits),
                                               _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                                                2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, sel), sel);
}

#endif
