/* kernels/simd_avx2_iq.c — AVX2 dots of the codebook types (IQ3_S, IQ3_XXS, IQ2_XS, IQ2_XXS, IQ2_S,
 * IQ1_S, IQ1_M) with Q8_K activations; the AVX-512 set uses the IQ1 ones too.
 *
 * Same contract as simd_avx2.c: the portable reference's bits (kernels/iq*.c, the canonical float
 * steps of kernels/simd.h).  Per sub-block of 32: the grid points are gathered by index into one
 * register (vpgatherdd / vpgatherdq, 8 x 4 or 4 x 8 bytes; 1.6x the speed of 8 scalar loads and
 * inserts here), the 32 sign bits are expanded to bytes of ±1 and applied
 * to the activations (vpsignb; activations are never -128), vpmaddubsw multiplies the unsigned
 * grid bytes with them (pair sums <= 2 * 62 * 127 = 15748: no saturation) and vpmaddwd applies the
 * sub-block scale while widening to int32.  The integer sum S of a super-block is exact; the float
 * steps are then the portable ones, scalar, in the same order (no FMA: k_common.h).
 */
#include "kernels/iq_common.h"
#include "kernels/simd.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))

AVX2 static inline int32_t hsum_i32x8(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* 32 sign bits (bit e = sign of element e) -> 32 bytes of +1 / -1. */
AVX2 static inline __m256i signs_pm1(uint32_t bits)
{
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread);
    const __m256i neg = _mm256_cmpeq_epi8(_mm256_and_si256(b, bit), bit);
    return _mm256_or_si256(neg, _mm256_set1_epi8(1));
}

/* Scaled int32 partial sums of one sub-block: grid bytes (unsigned) x signed activations, int16
 * pair sums times the int16 scales in `scale`. */
AVX2 static inline __m256i sub_dot(__m256i grid, uint32_t sign_bits, const int8_t *q, __m256i scale)
{
    const __m256i a = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)q), signs_pm1(sign_bits));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(grid, a), scale);
}

/* Contract: as sl_qdot_iq3_s_q8_k (same bits). */
AVX2 float sl_avx2_dot_iq3_s_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const uint32_t *G = sl_iq_grids_get()->iq3s;
    const sl_block_iq3_s *w = vw;
    const sl_block_q8_k *y = vy;
    float acc = 0;
    const __m256i to_bit8 = _mm256_setr_epi32(8, 7, 6, 5, 4, 3, 2, 1), bit8 = _mm256_set1_epi32(256);
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        __m256i s = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            /* index k = qs[8ib + k] | bit k of qh[ib] << 8 */
            const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(w[i].qs + 8 * ib)));
            const __m256i hi = _mm256_and_si256(_mm256_sllv_epi32(_mm256_set1_epi32(w[i].qh[ib]), to_bit8), bit8);
            const __m256i grid = _mm256_i32gather_epi32((const int *)G, _mm256_or_si256(lo, hi), 4);
            uint32_t sb;
            memcpy(&sb, w[i].signs + 4 * ib, 4);
            const int L = 1 + 2 * ((w[i].scales[ib / 2] >> (4 * (ib & 1))) & 0xf);
            s = _mm256_add_epi32(s, sub_dot(grid, sb, y[i].qs + 32 * ib, _mm256_set1_epi16((short)L)));
        }
        const int32_t S = hsum_i32x8(s);
        acc = acc + (sl_f16_to_f32(w[i].d) * y[i].d) * (float)S;
    }
    return acc;
}

/* Contract: as sl_qdot_iq3_xxs_q8_k (same bits). */
AVX2 float sl_avx2_dot_iq3_xxs_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const uint32_t *G = sl_iq_grids_get()->iq3xxs;
    const sl_block_iq3_xxs *w = vw;
    const sl_block_q8_k *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        const uint8_t *ss = w[i].qs + SL_QK_K / 4;
        __m256i s = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            const __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(w[i].qs + 8 * ib)));
            const __m256i grid = _mm256_i32gather_epi32((const int *)G, idx, 4);
            uint32_t aux;
            memcpy(&aux, ss + 4 * ib, 4);
            const uint32_t sb = sl_iq_sign8x4(sl_iq_fields7x4(aux));
            const int L = 2 * (int)(aux >> 28) + 1;
            s = _mm256_add_epi32(s, sub_dot(grid, sb, y[i].qs + 32 * ib, _mm256_set1_epi16((short)L)));
        }
        const int32_t S = hsum_i32x8(s);
        acc = acc + (sl_f16_to_f32(w[i].d) * y[i].d) * (float)S;
    }
    return 0.25f * acc;
}

/* Contract: as sl_qdot_iq2_xs_q8_k (same bits).  Elements 0-15 of a sub-block (the low 128-bit
 * lane after vpmaddubsw) take the low-nibble scale, 16-31 the high one. */
AVX2 float sl_avx2_dot_iq2_xs_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const uint64_t *G = sl_iq_grids_get()->iq2xs;
    const sl_block_iq2_xs *w = vw;
    const sl_block_q8_k *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        __m256i s = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            const uint16_t *qs = w[i].qs + 4 * ib;
            const __m128i idx = _mm_and_si128(_mm_cvtepu16_epi32(_mm_loadl_epi64((const __m128i *)qs)), _mm_set1_epi32(511));
            const __m256i grid = _mm256_i32gather_epi64((const long long *)G, idx, 8);
            const uint32_t sb = sl_iq_sign8x4((uint32_t)(qs[0] >> 9) | (uint32_t)(qs[1] >> 9) << 8 |
                                              (uint32_t)(qs[2] >> 9) << 16 | (uint32_t)(qs[3] >> 9) << 24);
            const int sc = w[i].scales[ib];
            const __m256i scale = _mm256_setr_m128i(_mm_set1_epi16((short)(2 * (sc & 0xf) + 1)),
                                                    _mm_set1_epi16((short)(2 * (sc >> 4) + 1)));
            s = _mm256_add_epi32(s, sub_dot(grid, sb, y[i].qs + 32 * ib, scale));
        }
        const int32_t S = hsum_i32x8(s);
        acc = acc + (sl_f16_to_f32(w[i].d) * y[i].d) * (float)S;
    }
    return 0.125f * acc;
}

/* Contract: as sl_qdot_iq2_xxs_q8_k (same bits). */
AVX2 float sl_avx2_dot_iq2_xxs_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const uint64_t *G = sl_iq_grids_get()->iq2xxs;
    const sl_block_iq2_xxs *w = vw;
    const sl_block_q8_k *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        __m256i s = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            uint32_t aux[2];
            memcpy(aux, w[i].qs + 4 * ib, 8);
            const __m128i idx = _mm_cvtepu8_epi32(_mm_cvtsi32_si128((int)aux[0]));
            const __m256i grid = _mm256_i32gather_epi64((const long long *)G, idx, 8);
            const uint32_t sb = sl_iq_sign8x4(sl_iq_fields7x4(aux[1]));
            const int L = 2 * (int)(aux[1] >> 28) + 1;
            s = _mm256_add_epi32(s, sub_dot(grid, sb, y[i].qs + 32 * ib, _mm256_set1_epi16((short)L)));
        }
        const int32_t S = hsum_i32x8(s);
        acc = acc + (sl_f16_to_f32(w[i].d) * y[i].d) * (float)S;
    }
    return 0.125f * acc;
}

/* Contract: as sl_qdot_iq2_s_q8_k (same bits).  Scales as IQ2_XS. */
AVX2 float sl_avx2_dot_iq2_s_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const uint64_t *G = sl_iq_grids_get()->iq2s;
    const sl_block_iq2_s *w = vw;
    const sl_block_q8_k *y = vy;
    const __m128i to_bit8 = _mm_setr_epi32(8, 6, 4, 2), bits89 = _mm_set1_epi32(0x300);
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        __m256i s = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            /* index l = qs[4ib + l] | bits 2l..2l+1 of qh[ib] << 8 */
            uint32_t lo4, sb;
            memcpy(&lo4, w[i].qs + 4 * ib, 4);
            memcpy(&sb, w[i].qs + SL_QK_K / 8 + 4 * ib, 4);
            const __m128i hi = _mm_and_si128(_mm_sllv_epi32(_mm_set1_epi32(w[i].qh[ib]), to_bit8), bits89);
            const __m128i idx = _mm_or_si128(_mm_cvtepu8_epi32(_mm_cvtsi32_si128((int)lo4)), hi);
            const __m256i grid = _mm256_i32gather_epi64((const long long *)G, idx, 8);
            const int sc = w[i].scales[ib];
            const __m256i scale = _mm256_setr_m128i(_mm_set1_epi16((short)(2 * (sc & 0xf) + 1)),
                                                    _mm_set1_epi16((short)(2 * (sc >> 4) + 1)));
            s = _mm256_add_epi32(s, sub_dot(grid, sb, y[i].qs + 32 * ib, scale));
        }
        const int32_t S = hsum_i32x8(s);
        acc = acc + (sl_f16_to_f32(w[i].d) * y[i].d) * (float)S;
    }
    return 0.125f * acc;
}

/* Contract: as sl_qdot_iq1_s_q8_k (same bits).  Grid coordinates are -1, 0, +1, so vpsignb(q, grid)
 * is q * grid exactly; vpmaddubsw with ones sums pairs (<= 2 * 127), vpmaddwd applies the scale. */
AVX2 float sl_avx2_dot_iq1_s_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const uint64_t *G = sl_iq_grids_get()->iq1s;
    const sl_block_iq1_s *w = vw;
    const sl_block_q8_k *y = vy;
    const __m128i to_bit8 = _mm_setr_epi32(8, 5, 2, -1), bits810 = _mm_set1_epi32(0x700);
    const __m256i ones = _mm256_set1_epi8(1);
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        __m256i s = _mm256_setzero_si256();
        int32_t D = 0;
        for (int ib = 0; ib < 8; ib++) {
            /* index l = qs[4ib + l] | bits 3l..3l+2 of qh[ib] << 8 (l = 3: shift right by 1) */
            const unsigned h = w[i].qh[ib];
            uint32_t lo4;
            memcpy(&lo4, w[i].qs + 4 * ib, 4);
            const __m128i hv = _mm_set1_epi32((int)h);
            const __m128i hi = _mm_and_si128(_mm_blend_epi32(_mm_sllv_epi32(hv, to_bit8), _mm_srli_epi32(hv, 1), 8), bits810);
            const __m128i idx = _mm_or_si128(_mm_cvtepu8_epi32(_mm_cvtsi32_si128((int)lo4)), hi);
            const __m256i grid = _mm256_i32gather_epi64((const long long *)G, idx, 8);
            const __m256i q = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
            const int L = 2 * ((h >> 12) & 7) + 1;
            s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(ones, _mm256_sign_epi8(q, grid)), _mm256_set1_epi16((short)L)));
            D += (h & 0x8000 ? -L : L) * (y[i].bsums[2 * ib] + y[i].bsums[2 * ib + 1]);
        }
        const int32_t Gs = hsum_i32x8(s);
        acc = acc + (sl_f16_to_f32(w[i].d) * y[i].d) * ((float)Gs + 0.125f * (float)D);
    }
    return acc;
}

/* Contract: as sl_qdot_iq1_m_q8_k (same bits).  Per sub-block: G from vpsignb as IQ1_S with the
 * scale per 16 elements; D from the pair sums of q (vpmaddubsw with ones) times, per pair, the
 * scale of its half and the shift sign of its group of 8. */
AVX2 float sl_avx2_dot_iq1_m_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const uint64_t *G = sl_iq_grids_get()->iq1s;
    const sl_block_iq1_m *w = vw;
    const sl_block_q8_k *y = vy;
    const __m256i ones = _mm256_set1_epi8(1);
    /* index bits of group l: bits 4l..4l+2 of the sub-block's 16 qh bits, moved to bits 8..10 */
    const __m128i to_bit8 = _mm_setr_epi32(8, 4, 0, 0), bits810 = _mm_set1_epi32(0x700);
    /* shift sign of group l: bit 4l+3; int16 lane k of a pair-sum vector belongs to group k/4 */
    const __m256i sign_bit = _mm256_setr_epi16(0x8, 0x8, 0x8, 0x8, 0x80, 0x80, 0x80, 0x80, 0x800, 0x800, 0x800, 0x800,
                                               (short)0x8000, (short)0x8000, (short)0x8000, (short)0x8000);
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        uint16_t sc[4];
        memcpy(sc, w[i].scales, 8);
        __m256i sg = _mm256_setzero_si256(), sd = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            uint32_t lo4;
            uint16_t h;
            memcpy(&lo4, w[i].qs + 4 * ib, 4);
            memcpy(&h, w[i].qh + 2 * ib, 2);
            const __m128i hv = _mm_set1_epi32(h);
            const __m128i hi = _mm_and_si128(_mm_blend_epi32(_mm_sllv_epi32(hv, to_bit8), _mm_srli_epi32(hv, 4), 8), bits810);
            const __m128i idx = _mm_or_si128(_mm_cvtepu8_epi32(_mm_cvtsi32_si128((int)lo4)), hi);
            const __m256i grid = _mm256_i32gather_epi64((const long long *)G, idx, 8);
            const __m256i q = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
            const int sh = 6 * (ib & 1), L0 = 2 * ((sc[ib / 2] >> sh) & 7) + 1, L1 = 2 * ((sc[ib / 2] >> (sh + 3)) & 7) + 1;
            const __m256i scale = _mm256_setr_m128i(_mm_set1_epi16((short)L0), _mm_set1_epi16((short)L1));
            const __m256i neg = _mm256_cmpeq_epi16(_mm256_and_si256(_mm256_set1_epi16((short)h), sign_bit), sign_bit);
            const __m256i dsc = _mm256_sub_epi16(_mm256_xor_si256(scale, neg), neg);   /* -scale where the sign is set */
            sg = _mm256_add_epi32(sg, _mm256_madd_epi16(_mm256_maddubs_epi16(ones, _mm256_sign_epi8(q, grid)), scale));
            sd = _mm256_add_epi32(sd, _mm256_madd_epi16(_mm256_maddubs_epi16(ones, q), dsc));
        }
        const int32_t Gs = hsum_i32x8(sg), D = hsum_i32x8(sd);
        acc = acc + (sl_f16_to_f32(sl_iq1m_scale_bits(w[i].scales)) * y[i].d) * ((float)Gs + 0.125f * (float)D);
    }
    return acc;
}

#else   /* not x86: the sets that use these are never handed out */
float sl_avx2_dot_iq3_s_q8_k(const void *restrict w, const void *restrict y, int64_t n) { return sl_qdot_iq3_s_q8_k(w, y, n); }
float sl_avx2_dot_iq3_xxs_q8_k(const void *restrict w, const void *restrict y, int64_t n) { return sl_qdot_iq3_xxs_q8_k(w, y, n); }
float sl_avx2_dot_iq2_xs_q8_k(const void *restrict w, const void *restrict y, int64_t n) { return sl_qdot_iq2_xs_q8_k(w, y, n); }
float sl_avx2_dot_iq2_xxs_q8_k(const void *restrict w, const void *restrict y, int64_t n) { return sl_qdot_iq2_xxs_q8_k(w, y, n); }
float sl_avx2_dot_iq2_s_q8_k(const void *restrict w, const void *restrict y, int64_t n) { return sl_qdot_iq2_s_q8_k(w, y, n); }
float sl_avx2_dot_iq1_s_q8_k(const void *restrict w, const void *restrict y, int64_t n) { return sl_qdot_iq1_s_q8_k(w, y, n); }
float sl_avx2_dot_iq1_m_q8_k(const void *restrict w, const void *restrict y, int64_t n) { return sl_qdot_iq1_m_q8_k(w, y, n); }
#endif
