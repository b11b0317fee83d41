/* kernels/gemm_avx2.c — Q4_K and Q6_K x Q8_K, Q8_0 x Q8_0 batched products on AVX2 (AMD Zen 2/3,
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
 * Q8_0 x Q8_0 (below): its canonical steps round in f32 once per 4 products, so it gains less: the
 * same 6 vector operations per 32 products as the 4-vector dots (sign trick, vpmaddubsw, vpmaddwd,
 * convert, multiply, add), minus the dots' per-(block, vector) scale conversion and their weight
 * reloads: 1.15-1.3x the AVX2 dots on a Sapphire Rapids core (bench_kernels --gemm), at the
 * vpmaddubsw/vpmaddwd/convert/multiply ports' limit.
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
    for (int v = 0; v < nv; v++) acc[v] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nsb; i++) {
        const sl_kpack *p = pk + i;
        const sl_block_q8_k *yb[VG];
        __m256i S[VG], M[VG];
        for (int v = 0; v < nv; v++) {
            yb[v] = YB(y, ys, v0 + v, i);
            S[v] = M[v] = _mm256_setzero_si256();
        }
        /* int16 runs: Q4_K one per sub-block of 8 dwords, Q6_K two per sub-block of 4 */
        const int run = q4k ? 8 : 2, nruns = 64 / run;
        for (int u = 0; u < nruns; u++) {
            __m256i a[VG];
            for (int v = 0; v < nv; v++) a[v] = _mm256_setzero_si256();
            for (int k = run * u; k < run * u + run; k++) {
                const __m256i wk = _mm256_loadu_si256((const __m256i *)&p->w[k][8 * h]);
                for (int v = 0; v < nv; v++)
                    a[v] = _mm256_add_epi16(a[v], _mm256_maddubs_epi16(wk, _mm256_set1_epi32(kpack_act4(yb[v], k))));
            }
            const __m256i sc = _mm256_loadu_si256((const __m256i *)&p->sc[q4k ? u : u / 2][8 * h]);
            for (int v = 0; v < nv; v++) S[v] = _mm256_add_epi32(S[v], _mm256_madd_epi16(a[v], sc));
        }
        for (int t = 0; t < 8; t++) {
            const __m256i mp = _mm256_loadu_si256((const __m256i *)&p->mp[t][8 * h]);
            for (int v = 0; v < nv; v++)
                M[v] = _mm256_add_epi32(M[v], _mm256_madd_epi16(mp, _mm256_set1_epi32(kpack_bsum2(yb[v], t))));
        }
        const __m256 wd = _mm256_loadu_ps(p->d + 8 * h), wm = _mm256_loadu_ps(p->dmin + 8 * h);
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

/* ---- Q8_0 ------------------------------------------------------------------------------------
 * The canonical steps keep 16 f32 accumulators per (row, vector) (8 lanes x 2 block parities), too
 * many for 16 ymm registers with 8 rows in the lanes.  So a ymm holds 4 rows x 2 lanes here: in
 * register j of a quarter (rows 4q..4q+3), dword 2r + e is row 4q+r's quants 8j+4e..8j+4e+3, and
 * the vector's 8 bytes 8j..8j+7 broadcast as a qword line up with them: 8 accumulators per vector.
 * Lane sums by the sign trick (vpmaddubsw of |w| and sign(a, w), |pair| <= 2 * 128 * 127, then
 * vpmaddwd by 1): the exact 4-product sums; the float steps and the final pairwise reduction are the
 * dot's, lane by lane (its last step t[0] + t[1] adds the two lanes of a row). */

#define Q8_QUARTER 288                  /* |w| and w (4 x 32 bytes each), 8 f32 d (each row twice) */
#define Q8_PACK (4 * Q8_QUARTER)        /* one block of 16 rows */

/* Contract: the scratch bytes the Q8_0 GEMM asks for (its packing + the vectors' block scales), and the
 * larger of the two GEMMs' at width n and nv vectors (kernels/gemm.h). */
static size_t q8_scratch(int64_t n, int nv)
{
    const int64_t nblk = n / SL_QK;
    return (size_t)nblk * Q8_PACK + (size_t)nv * (size_t)nblk * sizeof(float);
}

size_t sl_gemm_avx2_scratch(int64_t n, int nv)
{
    const size_t k = k_scratch(n), q = q8_scratch(n, nv);
    return k > q ? k : q;
}


/* Contract: blocks i < nblk of rows r < nr (<= 16; the rest zero) into dst (Q8_PACK per block).
 * Per quarter, the 4 rows' 32 quants are a 4 x 4 matrix of qwords, transposed in registers. */
AVX2 static void pack_q8_0(const uint8_t *w, size_t row_bytes, int nr, int64_t nblk, uint8_t *dst)
{
    for (int64_t i = 0; i < nblk; i++) {
        uint8_t *o = dst + (size_t)i * Q8_PACK;
        for (int q = 0; q < 4; q++) {
            uint8_t *oq = o + q * Q8_QUARTER;
            float d[8] = { 0 };
            __m256i R[4];
            for (int r = 0; r < 4; r++) {
                R[r] = _mm256_setzero_si256();
                if (4 * q + r < nr) {
                    const sl_block_q8_0 *b = (const sl_block_q8_0 *)(w + (size_t)(4 * q + r) * row_bytes) + i;
                    R[r] = _mm256_loadu_si256((const __m256i *)b->qs);
                    d[2 * r] = d[2 * r + 1] = _cvtsh_ss(b->d);
                }
            }
            const __m256i t0 = _mm256_unpacklo_epi64(R[0], R[1]), t1 = _mm256_unpackhi_epi64(R[0], R[1]);
            const __m256i t2 = _mm256_unpacklo_epi64(R[2], R[3]), t3 = _mm256_unpackhi_epi64(R[2], R[3]);
            const __m256i v[4] = { _mm256_permute2x128_si256(t0, t2, 0x20), _mm256_permute2x128_si256(t1, t3, 0x20),
                                   _mm256_permute2x128_si256(t0, t2, 0x31), _mm256_permute2x128_si256(t1, t3, 0x31) };
            for (int j = 0; j < 4; j++) {   /* v[j]: qword j of rows 0..3 */
                _mm256_storeu_si256((__m256i *)(oq + 32 * j), _mm256_sign_epi8(v[j], v[j]));
                _mm256_storeu_si256((__m256i *)(oq + 128 + 32 * j), v[j]);
            }
            memcpy(oq + 256, d, sizeof d);
        }
    }
}

/* Block i's float steps for one quarter against vector block yb (yd = its f16 d as f32). */
AVX2 static inline __attribute__((always_inline)) void q8_block_steps(__m256 acc[4], const uint8_t *p,
                                                                      const sl_block_q8_0 *yb, float yd)
{
    const __m256 s = _mm256_mul_ps(_mm256_loadu_ps((const float *)(p + 256)), _mm256_set1_ps(yd));
    for (int j = 0; j < 4; j++) {
        long long a8;
        memcpy(&a8, yb->qs + 8 * j, sizeof a8);
        const __m256i wq = _mm256_loadu_si256((const __m256i *)(p + 128 + 32 * j));
        const __m256i t = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)(p + 32 * j)),
                                                                 _mm256_sign_epi8(_mm256_set1_epi64x(a8), wq)),
                                            _mm256_set1_epi16(1));
        acc[j] = _mm256_add_ps(acc[j], _mm256_mul_ps(s, _mm256_cvtepi32_ps(t)));
    }
}

/* Quarter q of the packed block against every vector, one at a time; rows with mask bits stored. */
AVX2 static void q8_block_product(const uint8_t *pk, int64_t nblk, int q, const uint8_t *y, size_t ys,
                                  const float *yd, int nv, float *out, int64_t os, __m128i mask)
{
    const uint8_t *pq = pk + q * Q8_QUARTER;
    for (int v = 0; v < nv; v++) {
        const sl_block_q8_0 *yv = (const sl_block_q8_0 *)(y + (size_t)v * ys);
        const float *ydv = yd + (size_t)v * (size_t)nblk;
        __m256 a0[4], a1[4];   /* named, not a[i & 1]: see sum_blocks32 (simd_avx2_util.h) */
        for (int j = 0; j < 4; j++) a0[j] = a1[j] = _mm256_setzero_ps();
        int64_t i = 0;
        for (; i + 2 <= nblk; i += 2) {
            q8_block_steps(a0, pq + (size_t)i * Q8_PACK, yv + i, ydv[i]);
            q8_block_steps(a1, pq + (size_t)(i + 1) * Q8_PACK, yv + i + 1, ydv[i + 1]);
        }
        if (i < nblk) q8_block_steps(a0, pq + (size_t)i * Q8_PACK, yv + i, ydv[i]);
        /* lanes 2r + e of register j: k = 2j + e; t[k] = a0 + a1; t[k] += t[k + 4]; t[k] += t[k + 2] */
        const __m256 t0 = _mm256_add_ps(a0[0], a1[0]), t1 = _mm256_add_ps(a0[1], a1[1]);
        const __m256 t2 = _mm256_add_ps(a0[2], a1[2]), t3 = _mm256_add_ps(a0[3], a1[3]);
        const __m256 u = _mm256_add_ps(_mm256_add_ps(t0, t2), _mm256_add_ps(t1, t3));
        /* t[0] + t[1]: the two lanes of each row */
        const __m256 h = _mm256_hadd_ps(u, u);   /* rows 0, 1 in the low half, 2, 3 in the high */
        const __m128 r = _mm_unpacklo_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));   /* 0 2 1 3 */
        _mm_maskstore_ps(out + (size_t)v * os + 4 * q, mask, _mm_shuffle_ps(r, r, _MM_SHUFFLE(3, 1, 2, 0)));
    }
}

/* Contract: sl_qgemm_fn (kernels/gemm.h) for Q8_0 weights and Q8_0 activations. */
AVX2 static bool gemm_q8_0(const void *restrict w, size_t row_bytes, int64_t nrows, const void *restrict y,
                           size_t y_stride, int nv, int64_t n, float *restrict out, int64_t out_stride)
{
    const int64_t nblk = n / SL_QK;
    const size_t packed = (size_t)nblk * Q8_PACK;
    uint8_t *pk = sl_scratch(SL_SCRATCH_GEMM, q8_scratch(n, nv));
    if (!pk) return false;
    float *yd = (float *)(pk + packed);   /* the vectors' block scales as f32, converted once */
    for (int v = 0; v < nv; v++) {
        const sl_block_q8_0 *yv = (const sl_block_q8_0 *)((const uint8_t *)y + (size_t)v * y_stride);
        for (int64_t i = 0; i < nblk; i++) yd[(size_t)v * (size_t)nblk + (size_t)i] = _cvtsh_ss(yv[i].d);
    }
    const __m128i lane = _mm_setr_epi32(0, 1, 2, 3);
    for (int64_t r0 = 0; r0 < nrows; r0 += 16) {
        const int nr = nrows - r0 < 16 ? (int)(nrows - r0) : 16;
        pack_q8_0((const uint8_t *)w + (size_t)r0 * row_bytes, row_bytes, nr, nblk, pk);
        for (int q = 0; q < 4 && 4 * q < nr; q++)
            q8_block_product(pk, nblk, q, y, y_stride, yd, nv, out + r0, out_stride,
                             _mm_cmpgt_epi32(_mm_set1_epi32(nr - 4 * q), lane));
    }
    return true;
}

const sl_qgemm_fn sl_gemm_avx2_q4_k = gemm_q4_k, sl_gemm_avx2_q6_k = gemm_q6_k, sl_gemm_avx2_q8_0 = gemm_q8_0;

#else
const sl_qgemm_fn sl_gemm_avx2_q4_k = NULL, sl_gemm_avx2_q6_k = NULL, sl_gemm_avx2_q8_0 = NULL;
size_t sl_gemm_avx2_scratch(int64_t n, int nv) { (void)n; (void)nv; return 0; }
#endif
