/* kernels/simd_avx512_iq.c — AVX-512 (F, BW) dots of the codebook types IQ3_S, IQ3_XXS and
 * IQ2_XS with Q8_K activations (the other codebook types use the portable dots on this path).
 *
 * Same contract as simd_avx512.c: the portable reference's bits.  A 512-bit register holds two
 * sub-blocks (64 elements): the grid points loaded by index, the 64 sign bits used directly as
 * an opmask (activations negated under the mask: no sign expansion, activations are never -128),
 * vpmaddubsw (unsigned grid bytes x signed activations, pair sums <= 15748: no saturation), then
 * vpmaddwd with the per-sub-block (IQ2_XS: per-16) scales.  S is exact in int32; the float steps
 * are the portable ones, scalar, in the same order.
 *
 * SL_SIMD_EMULATE (never set by the build) compiles this file against SIMDe (see simd_avx512.c and
 * tests/test_quant_iq_avx512_emu.c).
 */
#include "kernels/iq_common.h"
#include "kernels/simd.h"

#if defined(SL_SIMD_EMULATE)
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#undef _mm512_madd_epi16
#define _mm512_madd_epi16(a, b) simde_mm512_madd_epi16(a, b)
typedef simde__mmask64 __mmask64;
static inline int32_t iq_reduce_add_epi32(simde__m512i v)
{
    int32_t i[16], s = 0;
    simde_mm512_storeu_si512(i, v);
    for (int k = 0; k < 16; k++) s += i[k];
    return s;
}
#define AVX512
#define HAVE_AVX512_IQ 1
#elif defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))
#define iq_reduce_add_epi32 _mm512_reduce_add_epi32
#define HAVE_AVX512_IQ 1
#endif

#ifdef HAVE_AVX512_IQ

/* Scaled int32 partial sums of two sub-blocks: grid bytes x activations negated where the sign bit
 * is set, int16 pair sums times the int16 scales in `scale`. */
AVX512 static inline __m512i pair_dot(__m512i grid, uint64_t sign_bits, const int8_t *q, __m512i scale)
{
    const __m512i a = _mm512_loadu_si512((const void *)q);
    const __m512i sa = _mm512_mask_sub_epi8(a, (__mmask64)sign_bits, _mm512_setzero_si512(), a);
    return _mm512_madd_epi16(_mm512_maddubs_epi16(grid, sa), scale);
}

/* Scales: int16 lanes of the low 256 bits = lo, of the high 256 bits = hi. */
AVX512 static inline __m512i scale_halves(int lo, int hi)
{
    return _mm512_inserti64x4(_mm512_set1_epi16((short)lo), _mm256_set1_epi16((short)hi), 1);
}

/* Contract: as sl_qdot_iq3_s_q8_k (same bits). */
AVX512 float sl_avx512_dot_iq3_s_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const uint32_t *G = sl_iq_grids_get()->iq3s;
    const sl_block_iq3_s *w = vw;
    const sl_block_q8_k *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        __m512i s = _mm512_setzero_si512();
        for (int ib = 0; ib < 8; ib += 2) {
            const uint8_t *qs = w[i].qs + 8 * ib;
            const unsigned h = w[i].qh[ib] | (unsigned)w[i].qh[ib + 1] << 8;   /* bit k: element group k of 16 */
            int idx[16];
            for (int k = 0; k < 16; k++) idx[k] = qs[k] | (((h >> k) & 1) << 8);
            const __m512i grid = _mm512_setr_epi32(
                (int)G[idx[0]], (int)G[idx[1]], (int)G[idx[2]], (int)G[idx[3]], (int)G[idx[4]], (int)G[idx[5]],
                (int)G[idx[6]], (int)G[idx[7]], (int)G[idx[8]], (int)G[idx[9]], (int)G[idx[10]], (int)G[idx[11]],
                (int)G[idx[12]], (int)G[idx[13]], (int)G[idx[14]], (int)G[idx[15]]);
            uint64_t sb;
            memcpy(&sb, w[i].signs + 4 * ib, 8);
            const int sc = w[i].scales[ib / 2];
            s = _mm512_add_epi32(s, pair_dot(grid, sb, y[i].qs + 32 * ib, scale_halves(1 + 2 * (sc & 0xf), 1 + 2 * (sc >> 4))));
        }
        const int32_t S = iq_reduce_add_epi32(s);
        acc = acc + (sl_f16_to_f32(w[i].d) * y[i].d) * (float)S;
    }
    return acc;
}

/* Contract: as sl_qdot_iq3_xxs_q8_k (same bits). */
AVX512 float sl_avx512_dot_iq3_xxs_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const uint32_t *G = sl_iq_grids_get()->iq3xxs;
    const sl_block_iq3_xxs *w = vw;
    const sl_block_q8_k *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        const uint8_t *ss = w[i].qs + SL_QK_K / 4;
        __m512i s = _mm512_setzero_si512();
        for (int ib = 0; ib < 8; ib += 2) {
            const uint8_t *qs = w[i].qs + 8 * ib;
            const __m512i grid = _mm512_setr_epi32(
                (int)G[qs[0]], (int)G[qs[1]], (int)G[qs[2]], (int)G[qs[3]], (int)G[qs[4]], (int)G[qs[5]],
                (int)G[qs[6]], (int)G[qs[7]], (int)G[qs[8]], (int)G[qs[9]], (int)G[qs[10]], (int)G[qs[11]],
                (int)G[qs[12]], (int)G[qs[13]], (int)G[qs[14]], (int)G[qs[15]]);
            uint32_t aux[2];
            memcpy(aux, ss + 4 * ib, 8);
            uint64_t sb = 0;
            for (int k = 0; k < 8; k++) sb |= (uint64_t)sl_iq_sign8(aux[k / 4] >> (7 * (k % 4))) << (8 * k);
            s = _mm512_add_epi32(s, pair_dot(grid, sb, y[i].qs + 32 * ib,
                                             scale_halves(2 * (int)(aux[0] >> 28) + 1, 2 * (int)(aux[1] >> 28) + 1)));
        }
        const int32_t S = iq_reduce_add_epi32(s);
        acc = acc + (sl_f16_to_f32(w[i].d) * y[i].d) * (float)S;
    }
    return 0.25f * acc;
}

/* Contract: as sl_qdot_iq2_xs_q8_k (same bits).  128-bit lane k of the pair (elements 16k..16k+15)
 * takes nibble k of the two scale bytes. */
AVX512 float sl_avx512_dot_iq2_xs_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const uint64_t *G = sl_iq_grids_get()->iq2xs;
    const sl_block_iq2_xs *w = vw;
    const sl_block_q8_k *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        __m512i s = _mm512_setzero_si512();
        for (int ib = 0; ib < 8; ib += 2) {
            const uint16_t *qs = w[i].qs + 4 * ib;
            const __m512i grid = _mm512_setr_epi64((long long)G[qs[0] & 511], (long long)G[qs[1] & 511],
                                                   (long long)G[qs[2] & 511], (long long)G[qs[3] & 511],
                                                   (long long)G[qs[4] & 511], (long long)G[qs[5] & 511],
                                                   (long long)G[qs[6] & 511], (long long)G[qs[7] & 511]);
            uint64_t sb = 0;
            for (int k = 0; k < 8; k++) sb |= (uint64_t)sl_iq_sign8(qs[k] >> 9) << (8 * k);
            const int s0 = w[i].scales[ib], s1 = w[i].scales[ib + 1];
            const __m512i scale = _mm512_inserti64x4(
                _mm512_castsi256_si512(_mm256_setr_m128i(_mm_set1_epi16((short)(2 * (s0 & 0xf) + 1)),
                                                         _mm_set1_epi16((short)(2 * (s0 >> 4) + 1)))),
                _mm256_setr_m128i(_mm_set1_epi16((short)(2 * (s1 & 0xf) + 1)), _mm_set1_epi16((short)(2 * (s1 >> 4) + 1))), 1);
            s = _mm512_add_epi32(s, pair_dot(grid, sb, y[i].qs + 32 * ib, scale));
        }
        const int32_t S = iq_reduce_add_epi32(s);
        acc = acc + (sl_f16_to_f32(w[i].d) * y[i].d) * (float)S;
    }
    return 0.125f * acc;
}

#else   /* not x86: the sets that use these are never handed out */
float sl_avx512_dot_iq3_s_q8_k(const void *restrict w, const void *restrict y, int64_t n) { return sl_qdot_iq3_s_q8_k(w, y, n); }
float sl_avx512_dot_iq3_xxs_q8_k(const void *restrict w, const void *restrict y, int64_t n) { return sl_qdot_iq3_xxs_q8_k(w, y, n); }
float sl_avx512_dot_iq2_xs_q8_k(const void *restrict w, const void *restrict y, int64_t n) { return sl_qdot_iq2_xs_q8_k(w, y, n); }
#endif
