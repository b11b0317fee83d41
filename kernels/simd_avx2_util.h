/* kernels/simd_avx2_util.h — small AVX2 helpers shared by the AVX2 kernel files (simd_avx2.c,
 * simd_avx2_quants.c, simd_avx2_iq.c).  The includer has <immintrin.h> and kernels/k_common.h
 * and defines AVX2 (its target attribute). */
#ifndef SL_KERNELS_SIMD_AVX2_UTIL_H
#define SL_KERNELS_SIMD_AVX2_UTIL_H

#define SL_REDUCE_TARGET AVX2
#include "kernels/simd_reduce.h"   /* lanes_reduce */

/* Block i's float term of a 32-block dot (weights w, activations y; ctx: what else it needs). */
typedef __m256 (*avx2_block_term)(const void *w, const void *y, int64_t i, const void *ctx);

/* The sum of a 32-block dot in the canonical order: block i into accumulator i & 1, then
 * lanes_reduce.  Two blocks per iteration keep both accumulators in registers: indexed
 * acc[i & 1], GCC kept them on the stack, a store and a forwarded reload in every block's
 * dependency chain (~8% of the time in cache for Q5_0).  Always inlined with a constant `term`,
 * so the term is inlined too (no indirect call). */
AVX2 static inline __attribute__((always_inline)) float sum_blocks32(const void *w, size_t wbytes, const void *y, int64_t nb,
                                                                     avx2_block_term term, const void *ctx)
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        sl_prefetch_ahead((const unsigned char *)w + (size_t)i * wbytes, (unsigned)(2 * wbytes));
        acc0 = _mm256_add_ps(acc0, term(w, y, i, ctx));
        acc1 = _mm256_add_ps(acc1, term(w, y, i + 1, ctx));
    }
    if (i < nb) acc0 = _mm256_add_ps(acc0, term(w, y, i, ctx));
    return lanes_reduce(acc0, acc1);
}

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
