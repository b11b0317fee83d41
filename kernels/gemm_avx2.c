/* kernels/gemm_avx2.c — Q4_K and Q6_K x Q8_K batched products on AVX2 (AMD Zen 2/3,
 * Intel parts without AVX-512), with exactly the bits of the single dots (kernels/gemm.h; canonical
 * steps in kernels/simd.h).  Every function carries a target attribute: the file builds in the baseline
 * x86-64 build and runs only after kernels/gemm.c saw AVX2, FMA and F16C.
 *
 * Each block of 16 weight rows is unpacked once per call (kernels/gemm_kpack.h: lane r = row r, 4
 * elements per dword; here two ymm per 4 elements: rows 0..7 and 8..15) and reused across all
 * vectors, VG at a time.  Per (vector, 4 elements) vpmaddubsw of the unsigned weights with the
 * vector's 4 signed bytes broadcast gives each row's two pair sums as int16; these are added as
 * int16 over a whole sub-block (Q4_K: 8 steps, |sum| <= 8 * 2 * 15 * 128 = 30720) or half of one
 * (Q6_K: 2 steps, <= 2 * 2 * 63 * 128 = 32256), all exact within int16 and unsaturated (a pair is at
 * most 2 * 63 * 128), then vpmaddwd by the (sc, sc) scale pair makes int32 S terms.  M (Q4_K) and the
 * -32 offset's C (Q6_K) are vpmaddwd of int16 pairs with the bsums.  Then the canonical float steps
 * per super-block, 8 rows lane-wise: Q4_K acc = acc + (d * (float)S - dmin * (float)M), Q6_K
 * acc = acc + d * (float)(S - 32 * C); separate roundings (no FMA: k_common.h).
 *
 * Q8_0 has no AVX2 GEMM: with its canonical step (one FMA per 32-block), 8 rows in the lanes of a
 * ymm need the sign trick, vpmaddubsw, vpmaddwd and an add per 4 elements — 4 operations per 32
 * products, no fewer than the 4-vector dots spend (kernels/simd_avx2.c), which it runs instead.  (The
 * GEMM this file had for the old steps gained 1.15-1.3x over the dots, and auto never ran it.)
 */
#include "kernels/k_common.h"
#include "kernels/gemm.h"
#include "kernels/scratch.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <stddef.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define KPACK_TARGET AVX2
#include "kernels/gemm_kpack.h"

#define VG 4   /* vectors per pass over a row block's packed weights (2, 6: slower) */

#define YB(y, ys, v, i) ((const sl_block_q8_k *)((y) + (size_t)(v) * (ys)) + (i))

/* nv (<= VG, constant after inlining) vectors from v0 against half h (rows 8h..8h+7) of the packed
 * 16-row block pk[nsb]; lanes with mask bits set stored. */
AVX2 static inline __attribute__((always_inline)) void group(bool q4k, const sl_kpack *pk, int64_t nsb, int h,
                                                             const uint8_t *y, size_t ys, int v0, int nv,
                                                             float *out, int64_t os, __m256i mask)
{
    __m256 acc[VG];
#pragma GCC unroll 8
    for (int v = 0; v < nv; v++) acc[v] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nsb; i++) {
        const sl_kpack *p = pk + i;
        const sl_block_q8_k *yb[VG];
        __m256i S[VG], M[VG];
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) {
            yb[v] = YB(y, ys, v0 + v, i);
            S[v] = M[v] = _mm256_setzero_si256();
        }
        /* int16 runs: Q4_K one per sub-block of 8 dwords, Q6_K two per sub-block of 4 */
        const int run = q4k ? 8 : 2, nruns = 64 / run;
        for (int u = 0; u < nruns; u++) {
            __m256i a[VG];
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++) a[v] = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int k = run * u; k < run * u + run; k++) {
                const __m256i wk = _mm256_loadu_si256((const __m256i *)&p->w[k][8 * h]);
#pragma GCC unroll 8
                for (int v = 0; v < nv; v++)
                    a[v] = _mm256_add_epi16(a[v], _mm256_maddubs_epi16(wk, _mm256_set1_epi32(kpack_act4(yb[v], k))));
            }
            const __m256i sc = _mm256_loadu_si256((const __m256i *)&p->sc[q4k ? u : u / 2][8 * h]);
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++) S[v] = _mm256_add_epi32(S[v], _mm256_madd_epi16(a[v], sc));
        }
        for (int t = 0; t < 8; t++) {
            const __m256i mp = _mm256_loadu_si256((const __m256i *)&p->mp[t][8 * h]);
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++)
                M[v] = _mm256_add_epi32(M[v], _mm256_madd_epi16(mp, _mm256_set1_epi32(kpack_bsum2(yb[v], t))));
        }
        const __m256 wd = _mm256_loadu_ps(p->d + 8 * h), wm = _mm256_loadu_ps(p->dmin + 8 * h);
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) {
            const __m256 yd = _mm256_set1_ps(yb[v]->d), d = _mm256_mul_ps(wd, yd);
            if (q4k) {
                const __m256 dmin = _mm256_mul_ps(wm, yd);
                acc[v] = _mm256_add_ps(acc[v], _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(S[v])),
                                                             _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(M[v]))));
            } else {
                const __m256i s = _mm256_sub_epi32(S[v], _mm256_slli_epi32(M[v], 5));   /* - 32 * C */
                acc[v] = _mm256_add_ps(acc[v], _mm256_mul_ps(d, _mm256_cvtepi32_ps(s)));
            }
        }
    }
#pragma GCC unroll 8
    for (int v = 0; v < nv; v++) _mm256_maskstore_ps(out + (size_t)(v0 + v) * os + 8 * h, mask, acc[v]);
}

/* The packed block against every vector, per half of 8 rows (VG vectors at a time, then 2, 1). */
AVX2 static void block_product(bool q4k, const sl_kpack *pk, int64_t nsb, const uint8_t *y, size_t ys, int nv,
                               int nr, float *out, int64_t os)
{
    for (int h = 0; h < 2 && 8 * h < nr; h++) {
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr - 8 * h), lane);
        int v0 = 0;
        if (q4k) {
            for (; v0 + VG <= nv; v0 += VG) group(true, pk, nsb, h, y, ys, v0, VG, out, os, mask);
            if (v0 + 2 <= nv) group(true, pk, nsb, h, y, ys, v0, 2, out, os, mask), v0 += 2;
            if (v0 < nv) group(true, pk, nsb, h, y, ys, v0, 1, out, os, mask);
        } else {
            for (; v0 + VG <= nv; v0 += VG) group(false, pk, nsb, h, y, ys, v0, VG, out, os, mask);
            if (v0 + 2 <= nv) group(false, pk, nsb, h, y, ys, v0, 2, out, os, mask), v0 += 2;
            if (v0 < nv) group(false, pk, nsb, h, y, ys, v0, 1, out, os, mask);
        }
    }
}

/* Contract: the scratch bytes the K-quant GEMM asks for at width n (one packed row block). */
static size_t k_scratch(int64_t n) { return (size_t)(n / SL_QK_K) * sizeof(sl_kpack); }

/* Contract: sl_qgemm_fn (kernels/gemm.h) for Q4_K (q4k) or Q6_K weights and Q8_K activations. */
AVX2 static bool gemm_k(bool q4k, const void *restrict w, size_t row_bytes, int64_t nrows, const void *restrict y,
                        size_t y_stride, int nv, int64_t n, float *restrict out, int64_t out_stride)
{
    return kpack_gemm(q4k, true, block_product, sl_scratch(SL_SCRATCH_GEMM, k_scratch(n)), w, row_bytes, nrows, y,
                      y_stride, nv, n, out, out_stride);
}

static bool gemm_q4_k(const void *restrict w, size_t row_bytes, int64_t nrows, const void *restrict y,
                      size_t y_stride, int nv, int64_t n, float *restrict out, int64_t out_stride)
{
    return gemm_k(true, w, row_bytes, nrows, y, y_stride, nv, n, out, out_stride);
}

static bool gemm_q6_k(const void *restrict w, size_t row_bytes, int64_t nrows, const void *restrict y,
                      size_t y_stride, int nv, int64_t n, float *restrict out, int64_t out_stride)
{
    return gemm_k(false, w, row_bytes, nrows, y, y_stride, nv, n, out, out_stride);
}

/* Contract: see gemm.h (the K-quant packing; the vectors are read in place). */
size_t sl_gemm_avx2_scratch(int64_t n, int nv)
{
    (void)nv;
    return k_scratch(n);
}

const sl_qgemm_fn sl_gemm_avx2_q4_k = gemm_q4_k, sl_gemm_avx2_q6_k = gemm_q6_k;

#else
const sl_qgemm_fn sl_gemm_avx2_q4_k = NULL, sl_gemm_avx2_q6_k = NULL;
size_t sl_gemm_avx2_scratch(int64_t n, int nv) { (void)n; (void)nv; return 0; }
#endif
