/* kernels/gemm_avx512.c — Q8_0 and MXFP4 x Q8_0 batched products on AVX-512 VNNI, with exactly the
 * bits of the single dots (kernels/gemm.h; canonical steps in kernels/simd.h).
 *
 * Q8_0's canonical step is one fused multiply-add per 32-block: acc = fma(s_i, (float)t_i, acc),
 * t_i the block's exact integer dot.  The GEMM puts 16 weight rows in the 16 lanes of a register
 * (row r's quants 4k..4k+3 in dword r of register k, k < 8: the block of rows is unpacked once per
 * group of vectors and reused across them) and broadcasts 4 bytes of the vector: 8 vpdpbusd give
 * t_i of 16 rows, then one multiply (s_i = d_w * d_y, exact) and one FMA per block and row lane —
 * 11 instructions per 512 multiply-adds, where the old steps (one rounding per 4 products) took 4
 * per 64.  vpdpbusd multiplies unsigned by signed bytes: the weights are stored as w + 128 (0..255)
 * and the sum starts at -128 * (the sum of the vector block's quants), so the lane is exactly t_i.
 */
#include "kernels/k_common.h"
#include "kernels/k_quants.h"
#include "kernels/gemm.h"
#include "kernels/scratch.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define PACK32_TARGET AVX512
#include "kernels/gemm_pack32.h"

#define PACKED_BLOCK PACK32_BYTES   /* one block of 16 rows: biased weights, 16 f32 scales (gemm_pack32.h) */
#define VGROUP       64      /* vectors per pass over an unpacked row block (bounds the per-vector scratch) */
#define NCOL         4       /* vectors per register block: 4 accumulators + 4 sums + 8 weights */

/* A vector block's f32 scale and its bias correction -128 * (sum of its 32 quants). */
typedef struct { float d; int32_t corr; } yblock;

/* Contract: yb[v * nblk + i] = { d, corr } of block i of vector v, v < nv. */
AVX512 static void prepare_vectors(const uint8_t *y, size_t ys, int nv, int64_t nblk, yblock *yb)
{
    for (int v = 0; v < nv; v++) {
        const sl_block_q8_0 *b = (const sl_block_q8_0 *)(y + (size_t)v * ys);
        for (int64_t i = 0; i < nblk; i++) {
            /* sum of (q + 128) over the 32 bytes by vpsadbw, then less 32 * 128 */
            const __m256i u = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)b[i].qs), _mm256_set1_epi8((char)0x80));
            const __m256i sad = _mm256_sad_epu8(u, _mm256_setzero_si256());
            const __m128i h = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
            const int32_t sum = (int32_t)(_mm_cvtsi128_si32(h) + _mm_extract_epi32(h, 2)) - 32 * 128;
            yb[(size_t)v * nblk + i] = (yblock){ _cvtsh_ss(b[i].d), -128 * sum };
        }
    }
}

/* The packed 16-row block against vectors c < nc (<= NCOL) of a group: out[c * os + r], r < nr. */
AVX512 static inline __attribute__((always_inline)) void cols_product(const uint8_t *pk, int64_t nblk, const uint8_t *y,
                                                                      size_t ys, const yblock *yb, int nc, float *out,
                                                                      int64_t os, __mmask16 m)
{
    __m512 acc[NCOL];
#pragma GCC unroll 8
    for (int c = 0; c < NCOL; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nblk; i++) {
        const uint8_t *p = pk + (size_t)i * PACKED_BLOCK;
        __m512i wk[8];
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) wk[k] = _mm512_load_si512(p + 64 * k);
        const __m512 dw = _mm512_load_ps(p + 512);
#pragma GCC unroll 8
        for (int c = 0; c < nc; c++) {
            const uint8_t *q = y + (size_t)c * ys + (size_t)i * sizeof(sl_block_q8_0) + 2;
            const yblock b = yb[(size_t)c * nblk + i];
            __m512i t = _mm512_set1_epi32(b.corr);
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) {
                int32_t a;
                memcpy(&a, q + 4 * k, 4);
                t = _mm512_dpbusd_epi32(t, wk[k], _mm512_set1_epi32(a));
            }
            acc[c] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(b.d)), _mm512_cvtepi32_ps(t), acc[c]);
        }
    }
#pragma GCC unroll 8
    for (int c = 0; c < nc; c++) _mm512_mask_storeu_ps(out + (size_t)c * os, m, acc[c]);
}

/* The packed 16-row block against vectors v < nv; rows r < nr stored. */
AVX512 static void block_product(const uint8_t *pk, int64_t nblk, const uint8_t *y, size_t ys, const yblock *yb,
                                 int nv, int nr, float *out, int64_t os)
{
    const __mmask16 m = (__mmask16)((1u << nr) - 1);
    int v = 0;
    for (; v + NCOL <= nv; v += NCOL)
        cols_product(pk, nblk, y + (size_t)v * ys, ys, yb + (size_t)v * nblk, NCOL, out + (size_t)v * os, os, m);
    for (; v < nv; v++)
        cols_product(pk, nblk, y + (size_t)v * ys, ys, yb + (size_t)v * nblk, 1, out + (size_t)v * os, os, m);
}

/* Contract: see gemm.h: the unpacked row block and the per-vector block data of one group. */
size_t sl_gemm_avx512_scratch(int64_t n, int nv)
{
    const size_t g = (size_t)(nv < VGROUP ? nv : VGROUP);
    return (size_t)(n / SL_QK) * (PACKED_BLOCK + g * sizeof(yblock));
}

/* Contract: sl_qgemm_fn (kernels/gemm.h) for 32-block weights with Q8_0 activations whose canonical
 * step is one FMA per block (Q8_0, MXFP4 when mxfp4). */
static bool gemm_fma32(bool mxfp4, const void *restrict w, size_t row_bytes, int64_t nrows, const void *restrict y,
                       size_t y_stride, int nv, int64_t n, float *restrict out, int64_t out_stride)
{
    const int64_t nblk = n / SL_QK;
    uint8_t *pk = sl_scratch(SL_SCRATCH_GEMM, sl_gemm_avx512_scratch(n, nv));
    if (!pk) return false;
    yblock *yb = (yblock *)(pk + (size_t)nblk * PACKED_BLOCK);
    for (int v0 = 0; v0 < nv; v0 += VGROUP) {
        const int gv = nv - v0 < VGROUP ? nv - v0 : VGROUP;
        const uint8_t *yg = (const uint8_t *)y + (size_t)v0 * y_stride;
        prepare_vectors(yg, y_stride, gv, nblk, yb);
        for (int64_t r0 = 0; r0 < nrows; r0 += 16) {
            const int nr = nrows - r0 < 16 ? (int)(nrows - r0) : 16;
            pack32_rows(mxfp4, 0x80808080u, (const uint8_t *)w + (size_t)r0 * row_bytes, row_bytes, nr, nblk, pk);
            block_product(pk, nblk, yg, y_stride, yb, gv, nr, out + (size_t)v0 * out_stride + r0, out_stride);
        }
    }
    return true;
}

static bool gemm_q8_0(const void *restrict w, size_t row_bytes, int64_t nrows, const void *restrict y,
                      size_t y_stride, int nv, int64_t n, float *restrict out, int64_t out_stride)
{
    return gemm_fma32(false, w, row_bytes, nrows, y, y_stride, nv, n, out, out_stride);
}

static bool gemm_mxfp4(const void *restrict w, size_t row_bytes, int64_t nrows, const void *restrict y,
                       size_t y_stride, int nv, int64_t n, float *restrict out, int64_t out_stride)
{
    return gemm_fma32(true, w, row_bytes, nrows, y, y_stride, nv, n, out, out_stride);
}

const sl_qgemm_fn sl_gemm_avx512_q8_0 = gemm_q8_0, sl_gemm_avx512_mxfp4 = gemm_mxfp4;

#else
const sl_qgemm_fn sl_gemm_avx512_q8_0 = NULL, sl_gemm_avx512_mxfp4 = NULL;
size_t sl_gemm_avx512_scratch(int64_t n, int nv) { (void)n; (void)nv; return 0; }
#endif
