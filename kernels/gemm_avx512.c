/* kernels/gemm_avx512.c — Q8_0 x Q8_0 batched product on AVX-512 VNNI, with exactly the bits of
 * the single dot (kernels/gemm.h; canonical steps in kernels/simd.h).
 *
 * Q8_0's canonical steps round in f32 per 4 products: lane k of block i is the exact sum t_k of
 * elements 4k..4k+3, and acc[i % 2][k] = acc[i % 2][k] + s_i * (float)t_k.  One vpdpbusd lane is
 * exactly such a sum, so the GEMM puts 16 weight rows in the 16 lanes of a register (row r's bytes
 * 4k..4k+3 in dword r: the block of rows is unpacked once per call and reused across the vectors)
 * and broadcasts the vector's 4 bytes: per (vector, block, k) one vpdpbusd gives t_k of 16 rows, and
 * the float steps run as the dot's, lane-wise, in the same order; the final pairwise reduction too.
 * vpdpbusd multiplies unsigned by signed bytes: the weights are stored as w + 128 (0..255) and the
 * accumulator starts at -128 * (sum of the 4 activation bytes), so the int32 lane is exactly t_k.
 * (AMX cannot do this type exactly: a tile sum covers 64 products per f32 rounding, not 4.)
 */
#include "kernels/k_common.h"
#include "kernels/gemm.h"
#include "kernels/scratch.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define PACKED_BLOCK 576     /* one block of 16 rows: 8 x 64 bytes of weights, 16 f32 scales */

/* Contract: blocks i < nblk of rows r < nr (<= 16; the rest zero weights) of a Q8_0 matrix into
 * dst (PACKED_BLOCK per block): dword r of register k = row r's quants 4k..4k+3, each + 128. */
AVX512 static void unpack_q8_0(const uint8_t *w, size_t row_bytes, int nr, int64_t nblk, uint8_t *dst)
{
    const __mmask16 m = (__mmask16)((1u << nr) - 1);
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)row_bytes));
    const __m512i bias = _mm512_set1_epi32((int)0x80808080u);
    for (int64_t i = 0; i < nblk; i++) {
        const uint8_t *b = w + (size_t)i * sizeof(sl_block_q8_0);
        uint8_t *o = dst + (size_t)i * PACKED_BLOCK;
        for (int k = 0; k < 8; k++) {
            const __m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, b + 2 + 4 * k, 1);
            _mm512_store_si512(o + 64 * k, _mm512_xor_si512(v, bias));
        }
        const __m512i dh = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, b, 1);
        _mm512_store_ps(o + 512, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_and_si512(dh, _mm512_set1_epi32(0xffff)))));
    }
}

/* One block's float steps for the 16 rows against vector block yb into lanes acc[0..7]. */
AVX512 static inline __attribute__((always_inline)) void block_steps(__m512 acc[8], const uint8_t *pk,
                                                                     const sl_block_q8_0 *yb)
{
    const __m512 s = _mm512_mul_ps(_mm512_load_ps(pk + 512), _mm512_set1_ps(_cvtsh_ss(yb->d)));
    const __m256i a = _mm256_loadu_si256((const __m256i *)yb->qs);
    const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), a);
    int32_t corr[8], av[8];
    _mm256_storeu_si256((__m256i *)corr, _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(sums, 7)));
    memcpy(av, yb->qs, sizeof av);
    for (int k = 0; k < 8; k++) {
        const __m512i t = _mm512_dpbusd_epi32(_mm512_set1_epi32(corr[k]), _mm512_load_si512(pk + 64 * k),
                                              _mm512_set1_epi32(av[k]));
        acc[k] = _mm512_add_ps(acc[k], _mm512_mul_ps(s, _mm512_cvtepi32_ps(t)));
    }
}

/* The packed 16-row block against every vector; rows r < nr stored. */
AVX512 static void block_product(const uint8_t *pk, int64_t nblk, const uint8_t *y, size_t ys, int nv, int nr,
                                 float *out, int64_t os)
{
    const __mmask16 m = (__mmask16)((1u << nr) - 1);
    for (int v = 0; v < nv; v++) {
        const sl_block_q8_0 *yv = (const sl_block_q8_0 *)(y + (size_t)v * ys);
        __m512 a0[8], a1[8];
        for (int k = 0; k < 8; k++) a0[k] = a1[k] = _mm512_setzero_ps();
        int64_t i = 0;
        for (; i + 2 <= nblk; i += 2) {
            block_steps(a0, pk + (size_t)i * PACKED_BLOCK, yv + i);
            block_steps(a1, pk + (size_t)(i + 1) * PACKED_BLOCK, yv + i + 1);
        }
        if (i < nblk) block_steps(a0, pk + (size_t)i * PACKED_BLOCK, yv + i);
        __m512 t[8];
        for (int k = 0; k < 8; k++) t[k] = _mm512_add_ps(a0[k], a1[k]);
        for (int k = 0; k < 4; k++) t[k] = _mm512_add_ps(t[k], t[k + 4]);
        for (int k = 0; k < 2; k++) t[k] = _mm512_add_ps(t[k], t[k + 2]);
        _mm512_mask_storeu_ps(out + (size_t)v * os, m, _mm512_add_ps(t[0], t[1]));
    }
}

/* Contract: sl_qgemm_fn (kernels/gemm.h) for Q8_0 weights and Q8_0 activations. */
size_t sl_gemm_avx512_scratch(int64_t n, int nv)
{
    (void)nv;
    return (size_t)(n / SL_QK) * PACKED_BLOCK;
}

static bool gemm_q8_0(const void *restrict w, size_t row_bytes, int64_t nrows, const void *restrict y,
                      size_t y_stride, int nv, int64_t n, float *restrict out, int64_t out_stride)
{
    const int64_t nblk = n / SL_QK;
    uint8_t *pk = sl_scratch(SL_SCRATCH_GEMM, sl_gemm_avx512_scratch(n, nv));
    if (!pk) return false;
    for (int64_t r0 = 0; r0 < nrows; r0 += 16) {
        const int nr = nrows - r0 < 16 ? (int)(nrows - r0) : 16;
        unpack_q8_0((const uint8_t *)w + (size_t)r0 * row_bytes, row_bytes, nr, nblk, pk);
        block_product(pk, nblk, y, y_stride, nv, nr, out + r0, out_stride);
    }
    return true;
}

const sl_qgemm_fn sl_gemm_avx512_q8_0 = gemm_q8_0;

#else
const sl_qgemm_fn sl_gemm_avx512_q8_0 = NULL;
size_t sl_gemm_avx512_scratch(int64_t n, int nv) { (void)n; (void)nv; return 0; }
#endif
