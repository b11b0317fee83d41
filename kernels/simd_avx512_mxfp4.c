/* kernels/simd_avx512_mxfp4.c — the AVX-512 VNNI rows form of MXFP4 x Q8_0 (sl_qdotr_fn,
 * kernels/simd.h): the matvec of a decode step (gpt-oss's experts and the rest of its MXFP4
 * matrices), out[r] = the single dot of row r, same bits.
 *
 * The canonical step (kernels/simd.h) is one fused multiply-add per 32-block into one accumulator,
 * in block order: acc = fma(e8m0_half(e_i) * d_y(i), (float)t_i, acc).  The blocks are small
 * (17 bytes), so the matvec is compute-bound, and per block the AVX2 forms spend ~15 instructions
 * finding t_i alone.  Here, per 16 blocks of a row:
 *   - two blocks per register: their 16 nibble bytes each broadcast to two 128-bit lanes, the high
 *     lane shifted by 4, masked, and one vpshufb maps nibbles to kvalues + 128 (unsigned);
 *   - 8 vpdpbusd against the activations (prepared once per call without their headers), 7
 *     two-source permutes and adds put the 16 block sums in 16 lanes, and the prepared correction
 *     -128 * (sum of the block's activations) makes each lane exactly t_i;
 *   - the 16 scales: the exponent bytes by one gather, 2^(e-128) built as float bits (as
 *     sl_e8m0_half: subnormal below e = 2), times the activations' f32 d (exact unless out of
 *     range, then the same rounding as the portable product);
 *   - four rows at once, their t and s transposed so that lane k of a 4-lane register is row k:
 *     the 16 FMAs of the chain run in block order for the four rows together.
 * n above SL_MXFP4_ROWS_MAX_N or under 16 blocks, and rows past a multiple of four: the AVX2 rows
 * form; blocks past a multiple of 16: the same step by 256-bit operations (block4).  Tested against the
 * portable single dots in tests/test_quant_types.c and tests/test_kernels_simd.c. */
#include "kernels/k_common.h"
#include "kernels/k_quants.h"
#include "kernels/simd.h"

#include <stddef.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define AVX512_INLINE AVX512 static inline __attribute__((always_inline))

/* Elements per call in the prepared form (40 bytes of stack per block: 20 KiB at the limit); the
 * widest MXFP4 matrix input of gpt-oss is 2880. */
#define SL_MXFP4_ROWS_MAX_N 16384
#define MAX_BLOCKS (SL_MXFP4_ROWS_MAX_N / 32)

typedef struct {
    _Alignas(64) uint8_t a[MAX_BLOCKS][32];   /* the activations' quants, headers dropped */
    _Alignas(64) int32_t corr[MAX_BLOCKS];    /* -128 * (sum of block i's quants) */
    _Alignas(64) float yd[MAX_BLOCKS];        /* f16(y.d_i) as f32 */
} prepared;

/* Sums of adjacent lane pairs of a (lanes 0-7 of the result) and of b (lanes 8-15). */
AVX512_INLINE __m512i pair_sums(__m512i a, __m512i b)
{
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    return _mm512_add_epi32(_mm512_permutex2var_epi32(a, even, b), _mm512_permutex2var_epi32(a, odd, b));
}

/* Blocks i0..i0+15 of row w: t (exact, lane j = block i0 + j, as f32) and s.  kvu: kvalues + 128
 * in every 128-bit lane. */
AVX512_INLINE void row16(const sl_block_mxfp4 *w, const prepared *p, int64_t i0, __m512i kvu, __m512 *t, __m512 *s)
{
    const __m512i shift = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
    __m512i z[8];
    for (int j = 0; j < 8; j++) {
        const sl_block_mxfp4 *b = w + i0 + 2 * j;
        const __m256i q0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)b[0].qs));
        const __m256i q1 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)b[1].qs));
        const __m512i nib = _mm512_and_si512(_mm512_srlv_epi64(_mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1), shift),
                                             _mm512_set1_epi8(0x0f));
        z[j] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_shuffle_epi8(kvu, nib), _mm512_load_si512(p->a[i0 + 2 * j]));
    }
    /* 8 lanes per block -> 4 -> 2 -> 1, blocks staying in order */
    const __m512i y0 = pair_sums(z[0], z[1]), y1 = pair_sums(z[2], z[3]), y2 = pair_sums(z[4], z[5]), y3 = pair_sums(z[6], z[7]);
    const __m512i sum = pair_sums(pair_sums(y0, y1), pair_sums(y2, y3));
    *t = _mm512_cvtepi32_ps(_mm512_add_epi32(sum, _mm512_load_si512(p->corr + i0)));
    const __m512i off = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)sizeof(sl_block_mxfp4)));
    const __m512i e = _mm512_and_si512(_mm512_i32gather_epi32(off, (const void *)(w + i0), 1), _mm512_set1_epi32(0xff));
    /* sl_e8m0_half: e < 2 ? 0x00200000 << e : (e - 1) << 23, as float bits */
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    const __m512i bits = _mm512_mask_blend_epi32(_mm512_cmplt_epi32_mask(e, _mm512_set1_epi32(2)), normal, sub);
    *s = _mm512_mul_ps(_mm512_castsi512_ps(bits), _mm512_load_ps(p->yd + i0));
}

/* v[b] (b < 16) = [x0[b], x1[b], x2[b], x3[b]]: four rows' 16 lanes to 16 row-lane registers. */
AVX512_INLINE void transpose4x16(__m512 x0, __m512 x1, __m512 x2, __m512 x3, __m128 v[16])
{
    const __m512 u0 = _mm512_unpacklo_ps(x0, x1), u1 = _mm512_unpackhi_ps(x0, x1);
    const __m512 u2 = _mm512_unpacklo_ps(x2, x3), u3 = _mm512_unpackhi_ps(x2, x3);
    const __m512 q[4] = { _mm512_shuffle_ps(u0, u2, 0x44), _mm512_shuffle_ps(u0, u2, 0xee),
                          _mm512_shuffle_ps(u1, u3, 0x44), _mm512_shuffle_ps(u1, u3, 0xee) };
    for (int e = 0; e < 4; e++) {   /* 128-bit lane l of q[e] holds block 4l + e */
        v[e] = _mm512_castps512_ps128(q[e]);
        v[4 + e] = _mm512_extractf32x4_ps(q[e], 1);
        v[8 + e] = _mm512_extractf32x4_ps(q[e], 2);
        v[12 + e] = _mm512_extractf32x4_ps(q[e], 3);
    }
}

/* Block i of four rows: the 4-lane FMA step with t_i by 256-bit operations (the tail past 16n). */
AVX512_INLINE __m128 block4(const sl_block_mxfp4 *const w[4], const sl_block_q8_0 *y, int64_t i, __m128 acc)
{
    const __m256i kv = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)sl_kvalues_mxfp4));
    const __m256i a = _mm256_loadu_si256((const __m256i *)y[i].qs), ones = _mm256_set1_epi16(1);
    __m256i m[4];
    float d[4];
    for (int k = 0; k < 4; k++) {
        const __m256i raw = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)w[k][i].qs));
        const __m256i nib = _mm256_and_si256(_mm256_blend_epi32(raw, _mm256_srli_epi16(raw, 4), 0xf0), _mm256_set1_epi8(0x0f));
        const __m256i q = _mm256_shuffle_epi8(kv, nib);
        m[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(q), _mm256_sign_epi8(a, q)), ones);
        d[k] = sl_e8m0_half(w[k][i].e);
    }
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(m[0], m[1]), _mm256_hadd_epi32(m[2], m[3]));
    const __m128 t = _mm_cvtepi32_ps(_mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
    return _mm_fmadd_ps(_mm_mul_ps(_mm_loadu_ps(d), _mm_set1_ps(_cvtsh_ss(y[i].d))), t, acc);
}

/* Contract: out[r] = sl_qdot_mxfp4_q8_0(row r, y, n) bit for bit, r < nrows. */
AVX512 void sl_avx512_dotr_mxfp4_q8_0(SL_DOTR_ARGS)
{
    const int64_t nb = n / SL_QK, nb16 = nb / 16 * 16;
    if (n > SL_MXFP4_ROWS_MAX_N || nb16 == 0) {
        sl_avx2_dotr_mxfp4_q8_0(w, row_bytes, y, n, nrows, out);
        return;
    }
    const sl_block_q8_0 *yb = y;
    prepared p;
    for (int64_t i = 0; i < nb; i++) {
        const __m256i a = _mm256_loadu_si256((const __m256i *)yb[i].qs);
        _mm256_store_si256((__m256i *)p.a[i], a);
        /* sum of (q + 128) by vpsadbw, less 32 * 128 */
        const __m256i sad = _mm256_sad_epu8(_mm256_xor_si256(a, _mm256_set1_epi8((char)0x80)), _mm256_setzero_si256());
        const __m128i h = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
        p.corr[i] = -128 * ((int32_t)(_mm_cvtsi128_si32(h) + _mm_extract_epi32(h, 2)) - 32 * 128);
        p.yd[i] = _cvtsh_ss(yb[i].d);
    }
    const __m512i kvu = _mm512_add_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)sl_kvalues_mxfp4)),
                                        _mm512_set1_epi8((char)0x80));
    int64_t r = 0;
    for (; r + 4 <= nrows; r += 4) {
        const sl_block_mxfp4 *rw[4];
        for (int k = 0; k < 4; k++) rw[k] = (const sl_block_mxfp4 *)((const uint8_t *)w + (size_t)(r + k) * row_bytes);
        __m128 acc = _mm_setzero_ps();
        for (int64_t i0 = 0; i0 < nb16; i0 += 16) {
            __m512 t[4], s[4];
            for (int k = 0; k < 4; k++) {
                /* SL_PREFETCH_AHEAD bytes on in the row, or past its end in the row four on */
                const char *pf = (const char *)(rw[k] + i0) + SL_PREFETCH_AHEAD;
                if (pf >= (const char *)(rw[k] + nb)) pf += 3 * row_bytes;
                for (unsigned o = 0; o < 16 * sizeof(sl_block_mxfp4); o += 64) __builtin_prefetch(pf + o, 0, 3);
                row16(rw[k], &p, i0, kvu, &t[k], &s[k]);
            }
            __m128 tv[16], sv[16];
            transpose4x16(t[0], t[1], t[2], t[3], tv);
            transpose4x16(s[0], s[1], s[2], s[3], sv);
            for (int b = 0; b < 16; b++) acc = _mm_fmadd_ps(sv[b], tv[b], acc);
        }
        for (int64_t i = nb16; i < nb; i++) acc = block4(rw, yb, i, acc);
        _mm_storeu_ps(out + r, acc);
    }
    if (r < nrows) sl_avx2_dotr_mxfp4_q8_0((const uint8_t *)w + (size_t)r * row_bytes, row_bytes, y, n, nrows - r, out + r);
}

#else   /* not x86: dispatch.c never hands the AVX-512 set out */
void sl_avx512_dotr_mxfp4_q8_0(SL_DOTR_ARGS)
{
    for (int64_t r = 0; r < nrows; r++) out[r] = sl_qdot_mxfp4_q8_0((const unsigned char *)w + (size_t)r * row_bytes, y, n);
}
#endif
