/* kernels/gemm_vnni.c — Q4_K and Q6_K x Q8_K batched products on AVX-512 VNNI (no AMX: AMD Zen 4,
 * Intel parts before Sapphire Rapids; on AMX machines, auto's small batches), with exactly the bits
 * of the single dots (kernels/gemm.h; canonical steps in kernels/simd.h).
 *
 * Per call, each block of 16 weight rows is unpacked once (kernels/gemm_kpack.h: one zmm per 4
 * elements, lane r = row r) and reused across all vectors, VG vectors at a time.  Per (vector,
 * sub-block), vpdpbusd with the vector's 4 bytes broadcast (the unsigned weights 0..15 / 0..63 in
 * the u8 operand, the signed Q8_K activations in the s8 one) sums the sub-block's products exactly
 * in each row's lane; vpmulld by the row's scale and an add give S.  Q4_K's M = sum m_j * (bsums
 * 2j + 2j+1) and Q6_K's C = sum sc_s * bsums_s are 8 vpdpwssd of int16 pairs each; Q6_K's
 * S = sum sc_s * dot_s(q) - 32 * C, the same integer as the dot's (q - 32 through the bsums).  Then
 * the float steps per super-block in the canonical order, 16 rows lane-wise: Q4_K acc = acc +
 * (d * (float)S - dmin * (float)M) with d = f16(w.d) * y.d, dmin = f16(w.dmin) * y.d; Q6_K
 * acc = acc + d * (float)S; separate roundings (k_common.h turns contraction off).
 * Bounds (int32, no wrap): a sub-block sum |.| <= 32 * 15 * 127 (Q4_K), 16 * 63 * 127 (Q6_K); S and
 * M as in kernels/qdot.c; the int16 pair operands are m (0..63) or sc (-128..127) and bsums.
 */
#include "kernels/k_common.h"
#include "kernels/gemm.h"
#include "kernels/scratch.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <stddef.h>

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define KPACK_TARGET VNNI
#include "kernels/gemm_kpack.h"

#define VG 8   /* vectors per pass over a row block's packed weights (4: ~10% slower) */

#define YB(y, ys, v, i) ((const sl_block_q8_k *)((y) + (size_t)(v) * (ys)) + (i))

/* nv (<= VG, a constant after inlining) vectors from v0 against the packed 16-row block pk[nsb];
 * rows r < 16 with bit r of m stored. */
VNNI static inline __attribute__((always_inline)) void group(bool q4k, const sl_kpack *pk, int64_t nsb,
                                                             const uint8_t *y, size_t ys, int v0, int nv,
                                                             float *out, int64_t os, __mmask16 m)
{
    __m512 acc[VG];
#pragma GCC unroll 8
    for (int v = 0; v < nv; v++) acc[v] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nsb; i++) {
        const sl_kpack *p = pk + i;
        const sl_block_q8_k *yb[VG];
        __m512i S[VG], M[VG];
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) {
            yb[v] = YB(y, ys, v0 + v, i);
            S[v] = M[v] = _mm512_setzero_si512();
        }
        const int nsub = q4k ? 8 : 16, per = 64 / nsub;   /* sub-blocks, dwords per sub-block */
        for (int s = 0; s < nsub; s++) {
            __m512i a[VG];
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++) a[v] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int k = per * s; k < per * s + per; k++) {
                const __m512i wk = _mm512_loadu_si512(p->w[k]);
#pragma GCC unroll 8
                for (int v = 0; v < nv; v++) a[v] = _mm512_dpbusd_epi32(a[v], wk, _mm512_set1_epi32(kpack_act4(yb[v], k)));
            }
            const __m512i sc = _mm512_loadu_si512(p->sc[s]);
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++) S[v] = _mm512_add_epi32(S[v], _mm512_mullo_epi32(a[v], sc));
        }
        for (int t = 0; t < 8; t++) {
            const __m512i mp = _mm512_loadu_si512(p->mp[t]);
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++) M[v] = _mm512_dpwssd_epi32(M[v], mp, _mm512_set1_epi32(kpack_bsum2(yb[v], t)));
        }
        const __m512 wd = _mm512_loadu_ps(p->d), wm = _mm512_loadu_ps(p->dmin);
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) {
            const __m512 yd = _mm512_set1_ps(yb[v]->d), d = _mm512_mul_ps(wd, yd);
            if (q4k) {
                const __m512 dmin = _mm512_mul_ps(wm, yd);
                acc[v] = _mm512_add_ps(acc[v], _mm512_sub_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(S[v])),
                                                             _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(M[v]))));
            } else {
                const __m512i s = _mm512_sub_epi32(S[v], _mm512_slli_epi32(M[v], 5));   /* - 32 * C */
                acc[v] = _mm512_add_ps(acc[v], _mm512_mul_ps(d, _mm512_cvtepi32_ps(s)));
            }
        }
    }
#pragma GCC unroll 8
    for (int v = 0; v < nv; v++) _mm512_mask_storeu_ps(out + (size_t)(v0 + v) * os, m, acc[v]);
}

/* The packed block against every vector. */
VNNI static void block_product(bool q4k, const sl_kpack *pk, int64_t nsb, const uint8_t *y, size_t ys, int nv,
                               int nr, float *out, int64_t os)
{
    const __mmask16 m = (__mmask16)((1u << nr) - 1);
    int v0 = 0;
    /* VG at a time, then the rest by 4, 2, 1 (a lone vector's sub-block sums are one dependency
     * chain: the wider groups keep the multipliers busy) */
    if (q4k) {
        for (; v0 + VG <= nv; v0 += VG) group(true, pk, nsb, y, ys, v0, VG, out, os, m);
        if (v0 + 4 <= nv) group(true, pk, nsb, y, ys, v0, 4, out, os, m), v0 += 4;
        if (v0 + 2 <= nv) group(true, pk, nsb, y, ys, v0, 2, out, os, m), v0 += 2;
        if (v0 < nv) group(true, pk, nsb, y, ys, v0, 1, out, os, m);
    } else {
        for (; v0 + VG <= nv; v0 += VG) group(false, pk, nsb, y, ys, v0, VG, out, os, m);
        if (v0 + 4 <= nv) group(false, pk, nsb, y, ys, v0, 4, out, os, m), v0 += 4;
        if (v0 + 2 <= nv) group(false, pk, nsb, y, ys, v0, 2, out, os, m), v0 += 2;
        if (v0 < nv) group(false, pk, nsb, y, ys, v0, 1, out, os, m);
    }
}

size_t sl_gemm_vnni_scratch(int64_t n, int nv)
{
    (void)nv;
    return (size_t)(n / SL_QK_K) * sizeof(sl_kpack);
}

/* Contract: sl_qgemm_fn (kernels/gemm.h) for Q4_K (q4k) or Q6_K weights and Q8_K activations. */
VNNI static bool gemm_k(bool q4k, const void *restrict w, size_t row_bytes, int64_t nrows, const void *restrict y,
                        size_t y_stride, int nv, int64_t n, float *restrict out, int64_t out_stride)
{
    return kpack_gemm(q4k, false, block_product, sl_scratch(SL_SCRATCH_GEMM, sl_gemm_vnni_scratch(n, nv)), w, row_bytes, nrows, y,
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

const sl_qgemm_fn sl_gemm_vnni_q4_k = gemm_q4_k, sl_gemm_vnni_q6_k = gemm_q6_k;

#else
const sl_qgemm_fn sl_gemm_vnni_q4_k = NULL, sl_gemm_vnni_q6_k = NULL;
size_t sl_gemm_vnni_scratch(int64_t n, int nv) { (void)n; (void)nv; return 0; }
#endif
