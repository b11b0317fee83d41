/* kernels/simd_avx2_fma32.h — the AVX2 forms of the 32-block dots whose canonical step is one
 * fused multiply-add per block (kernels/simd.h: Q8_0 and MXFP4 with Q8_0 activations):
 * acc = fma(s_i, (float)t_i, acc), blocks in order, t_i the block's exact integer dot and
 * s_i = d_w(i) * f16(y.d_i).  Written once for both types: a type gives its block's 32 signed
 * weights (|q| <= 128) and its f32 weight scale; the single dot, the 4-vector form and the rows
 * form below are always inlined with them.  The includer has <immintrin.h>, kernels/k_common.h and
 * kernels/simd_avx2_util.h, and defines AVX2 (its target attribute). */
#ifndef SL_KERNELS_SIMD_AVX2_FMA32_H
#define SL_KERNELS_SIMD_AVX2_FMA32_H

typedef __m256i (*fma32_weights)(const void *w, int64_t i, const void *ctx);   /* block i's 32 int8 */
typedef float (*fma32_scale)(const void *w, int64_t i);                        /* block i's d_w as f32 */

#define FMA32_INLINE AVX2 static inline __attribute__((always_inline))

/* The 8 int32 lanes whose sum is the exact dot of weights w and activations a (a never -128):
 * |w| as unsigned times a with w's sign (pairs <= 2 * 128 * 127: no saturation), then pairs. */
FMA32_INLINE __m256i fma32_lanes(__m256i w, __m256i a)
{
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* [sum of lanes of a, of b, of c, of d]. */
FMA32_INLINE __m128i fma32_hsum4(__m256i a, __m256i b, __m256i c, __m256i d)
{
    const __m256i abcd = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
    return _mm_add_epi32(_mm256_castsi256_si128(abcd), _mm256_extracti128_si256(abcd, 1));
}

/* Lane j = the sum of the 8 lanes of m[j]: 8 blocks' exact dots from their partial sums. */
FMA32_INLINE __m256i fma32_hsum8(const __m256i m[8])
{
    const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(m[0], m[1]), _mm256_hadd_epi32(m[2], m[3]));
    const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(m[4], m[5]), _mm256_hadd_epi32(m[6], m[7]));
    /* a = [0lo 1lo 2lo 3lo | 0hi 1hi 2hi 3hi] (lo/hi: lanes 0-3 / 4-7), b the same for 4..7 */
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

FMA32_INLINE __m256i fma32_act(const sl_block_q8_0 *y) { return _mm256_loadu_si256((const __m256i *)y->qs); }

/* The single dot: eight blocks' integer sums and scales side by side; only the fused multiply-adds
 * into the one accumulator run in block order. */
FMA32_INLINE float fma32_dot(const void *w, size_t wbytes, const void *vy, int64_t nb, fma32_weights wq, fma32_scale wd,
                             const void *ctx)
{
    const sl_block_q8_0 *y = vy;
    __m128 acc = _mm_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= nb; i += 8) {
        sl_prefetch_ahead((const uint8_t *)w + (size_t)i * wbytes, (unsigned)(8 * wbytes));
        __m256i m[8];
        float t[8], s[8];
        for (int j = 0; j < 8; j++) {
            m[j] = fma32_lanes(wq(w, i + j, ctx), fma32_act(&y[i + j]));
            s[j] = wd(w, i + j) * _cvtsh_ss(y[i + j].d);
        }
        _mm256_storeu_ps(t, _mm256_cvtepi32_ps(fma32_hsum8(m)));
        for (int j = 0; j < 8; j++) acc = _mm_fmadd_ss(_mm_set_ss(s[j]), _mm_set_ss(t[j]), acc);
    }
    for (; i < nb; i++) {
        const __m128i h = fma32_hsum4(fma32_lanes(wq(w, i, ctx), fma32_act(&y[i])), _mm256_setzero_si256(),
                                      _mm256_setzero_si256(), _mm256_setzero_si256());
        acc = _mm_fmadd_ss(_mm_set_ss(wd(w, i) * _cvtsh_ss(y[i].d)), _mm_cvtepi32_ps(h), acc);
    }
    return _mm_cvtss_f32(acc);
}

/* The 4-vector form: lane v of the accumulator is vector v's chain. */
FMA32_INLINE void fma32_dot4(const void *w, const void *vy, size_t ys, int64_t nb, fma32_weights wq, fma32_scale wd,
                             const void *ctx, float *out)
{
    __m128 acc = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m256i q = wq(w, i, ctx), aq = _mm256_sign_epi8(q, q);
        __m256i m[4];
        float yd[4];
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) {
            const sl_block_q8_0 *y = (const sl_block_q8_0 *)((const uint8_t *)vy + (size_t)v * ys) + i;
            m[v] = _mm256_madd_epi16(_mm256_maddubs_epi16(aq, _mm256_sign_epi8(fma32_act(y), q)), _mm256_set1_epi16(1));
            yd[v] = _cvtsh_ss(y->d);
        }
        const __m128 t = _mm_cvtepi32_ps(fma32_hsum4(m[0], m[1], m[2], m[3]));
        acc = _mm_fmadd_ps(_mm_mul_ps(_mm_set1_ps(wd(w, i)), _mm_loadu_ps(yd)), t, acc);
    }
    _mm_storeu_ps(out, acc);
}

/* The rows form: four rows at a time, lane r of the accumulator holding row r's chain (one row
 * alone is bound by its chain's latency), prefetching SL_PREFETCH_AHEAD bytes on in each row, or
 * past its end into the row four on (the next group's). */
FMA32_INLINE void fma32_dotr(const void *vw, size_t row_bytes, size_t wbytes, const void *vy, int64_t nb, int64_t nrows,
                             fma32_weights wq, fma32_scale wd, const void *ctx, float *out)
{
    const sl_block_q8_0 *y = vy;
    int64_t r = 0;
    for (; r + 4 <= nrows; r += 4) {
        const uint8_t *w[4];
        for (int k = 0; k < 4; k++) w[k] = (const uint8_t *)vw + (size_t)(r + k) * row_bytes;
        __m128 acc = _mm_setzero_ps();
        for (int64_t i = 0; i < nb; i++) {
            const __m256i a = fma32_act(&y[i]);
            __m256i m[4];
            float d[4];
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                if (!(i & 1)) {
                    const char *pf = (const char *)w[k] + (size_t)i * wbytes + SL_PREFETCH_AHEAD;
                    if (pf >= (const char *)w[k] + (size_t)nb * wbytes) pf += 3 * row_bytes;
                    __builtin_prefetch(pf, 0, 3);
                    __builtin_prefetch(pf + 64, 0, 3);
                }
                m[k] = fma32_lanes(wq(w[k], i, ctx), a);
                d[k] = wd(w[k], i);
            }
            const __m128 t = _mm_cvtepi32_ps(fma32_hsum4(m[0], m[1], m[2], m[3]));
            acc = _mm_fmadd_ps(_mm_mul_ps(_mm_loadu_ps(d), _mm_set1_ps(_cvtsh_ss(y[i].d))), t, acc);
        }
        _mm_storeu_ps(out + r, acc);
    }
    for (; r < nrows; r++) out[r] = fma32_dot((const uint8_t *)vw + (size_t)r * row_bytes, wbytes, vy, nb, wq, wd, ctx);
}

#endif
