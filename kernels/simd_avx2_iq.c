/* kernels/simd_avx2_iq.c — AVX2 dots of the codebook types (IQ3_S, IQ3_XXS, IQ2_XS, IQ2_XXS, IQ2_S,
 * IQ1_S, IQ1_M) with Q8_K activations (the AVX-512 set has its own: simd_avx512_iq.c, _vbmi.c, _iq1.c).
 *
 * Same contract as simd_avx2.c: the portable reference's bits (kernels/iq*.c, the canonical float
 * steps of kernels/simd.h).  Per sub-block of 32: the grid points are brought into one register
 * (the IQ2 and IQ3 types: broadcast loads and blends, see below; IQ1_S, IQ1_M: vpgatherdq of
 * 4 x 8 bytes), the 32 sign bits are expanded to bytes of ±1 and applied
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
#include "kernels/simd_avx2_util.h"

AVX2 static inline int32_t hsum_i32x8(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* ---- IQ3_S, IQ3_XXS, IQ2_XS, IQ2_XXS, IQ2_S without hardware gathers ---------------------------
 * vpgather is slow on AMD Zen and on recent Intel (microcoded since the GDS mitigation).  These
 * five assemble a sub-block's grid points from broadcast loads (vpbroadcastd/q from memory is a
 * load-port uop only) and vpblendd; the index of each point is a scalar load.  Storing the points
 * into a stack buffer and reading it back as __m256i was slower here: the 32-byte load cannot
 * forward from the smaller stores and waits for them to reach the cache.  The 8-bit signs of the
 * 32 groups sit in one register (IQ2_XS, IQ2_XXS, IQ3_XXS: the 7 stored ones and their parity,
 * computed in registers), each 128-bit lane broadcast to both; a sub-block spreads its 4 sign bytes with one
 * vpshufb.  The int16 scales are prepared once per super-block. */

/* Lane h (0 or 1) of v in both 128-bit lanes. */
AVX2 static inline __m256i lane_both(__m256i v, int h)
{
    return h ? _mm256_permute2x128_si256(v, v, 0x11) : _mm256_permute2x128_si256(v, v, 0x00);
}

/* Sign bytes 4k..4k+3 of each lane of sb (byte l: signs of elements 8l..8l+7 of the sub-block,
 * bit j for element 8l + j) -> 32 bytes of +1 / -1. */
AVX2 static inline __m256i signs_pm1_of(__m256i sb, int k)
{
    const char b = (char)(4 * k);
    const __m256i spread = _mm256_setr_epi8(b, b, b, b, b, b, b, b, b + 1, b + 1, b + 1, b + 1, b + 1, b + 1, b + 1, b + 1,
                                            b + 2, b + 2, b + 2, b + 2, b + 2, b + 2, b + 2, b + 2, b + 3, b + 3, b + 3, b + 3, b + 3, b + 3, b + 3, b + 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i t = _mm256_and_si256(_mm256_shuffle_epi8(sb, spread), bit);
    return _mm256_or_si256(_mm256_cmpeq_epi8(t, bit), _mm256_set1_epi8(1));
}

/* Byte lanes holding 7-bit sign fields (bit 7 clear) -> the full 8 signs (bit 7 = parity), as
 * sl_iq_sign8x4 per byte: after the folds bit 0 of each byte is the parity of that byte alone. */
AVX2 static inline __m256i sign8_bytes(__m256i f7)
{
    __m256i p = _mm256_xor_si256(f7, _mm256_srli_epi32(f7, 4));
    p = _mm256_xor_si256(p, _mm256_srli_epi32(p, 2));
    p = _mm256_xor_si256(p, _mm256_srli_epi32(p, 1));
    return _mm256_or_si256(f7, _mm256_slli_epi32(_mm256_and_si256(p, _mm256_set1_epi8(1)), 7));
}

/* int16 value v in both halves of each int32 lane (v < 2^15): vpmaddwd's scale operand. */
AVX2 static inline __m256i dup16(__m256i v) { return _mm256_or_si256(v, _mm256_slli_epi32(v, 16)); }

/* The int32 lanes a (for elements 0-15 of a sub-block) and b (16-31) of sc. */
AVX2 static inline __m256i pick_scale(__m256i sc, int a, int b)
{
    return _mm256_permutevar8x32_epi32(sc, _mm256_setr_epi32(a, a, a, a, b, b, b, b));
}

/* The scale words of a super-block (int32 lane ib: sub-block ib's scale in both int16 halves) go
 * through a stack buffer, so a sub-block takes its own with a broadcast load (a load-port uop)
 * instead of vpermd on the shuffle port: 5% faster here.  The pointer is laundered through an
 * empty asm so that GCC does not forward the store into register shuffles (which it would do,
 * costing two shuffles per sub-block). */
static inline const int32_t *scale_words_of(const int32_t buf[8])
{
    const int32_t *p = buf;
    __asm__("" : "+r"(p));
    return p;
}

AVX2 static inline const int32_t *scale_words(int32_t buf[8], __m256i sc)
{
    _mm256_store_si256((__m256i *)buf, sc);
    return scale_words_of(buf);
}

/* IQ3_XXS, IQ2_XXS: from the 8 words (one per sub-block: 4 x 7 sign bits at bits 0, 7, 14, 21 and
 * the scale s in bits 28-31) the 32 full sign bytes (returned, sub-block ib in bytes 4ib..4ib+3)
 * and the scale words 2s + 1 (stored to buf). */
AVX2 static inline __m256i xxs_signs_scales(__m256i aux, int32_t buf[8])
{
    const __m256i m7 = _mm256_set1_epi32(0x7f);
    const __m256i f7 = _mm256_or_si256(
        _mm256_or_si256(_mm256_and_si256(aux, m7), _mm256_and_si256(_mm256_slli_epi32(aux, 1), _mm256_slli_epi32(m7, 8))),
        _mm256_or_si256(_mm256_and_si256(_mm256_slli_epi32(aux, 2), _mm256_slli_epi32(m7, 16)),
                        _mm256_and_si256(_mm256_slli_epi32(aux, 3), _mm256_slli_epi32(m7, 24))));
    _mm256_store_si256((__m256i *)buf, dup16(_mm256_or_si256(_mm256_slli_epi32(_mm256_srli_epi32(aux, 28), 1), _mm256_set1_epi32(1))));
    return sign8_bytes(f7);
}

/* vpbroadcastd from memory: a load-port uop, as vbroadcastss (read as int32: the words were stored as int32) */
AVX2 static inline __m256i scale_word(const int32_t *p, int ib) { return _mm256_set1_epi32(p[ib]); }

/* An index the compiler must treat as opaque: keeps the table lookups scalar loads (GCC would
 * otherwise vectorize them into an emulated gather of vpextrq/vpinsrq on the shuffle port). */
static inline size_t opaque(size_t v)
{
    __asm__("" : "+r"(v));   /* size_t: a 32-bit value would cost a zero-extending mov per index */
    return v;
}

/* Grid points of 4 bytes G[ix[0..7]] in order (IQ3_*), and of 8 bytes G[ix[0..3] & 511] (IQ2_XS). */
AVX2 static inline __m256i blend8(const uint32_t p[8])
{
    const __m256i p01 = _mm256_blend_epi32(_mm256_set1_epi32((int)p[0]), _mm256_set1_epi32((int)p[1]), 0x02);
    const __m256i p23 = _mm256_blend_epi32(_mm256_set1_epi32((int)p[2]), _mm256_set1_epi32((int)p[3]), 0x08);
    const __m256i p45 = _mm256_blend_epi32(_mm256_set1_epi32((int)p[4]), _mm256_set1_epi32((int)p[5]), 0x20);
    const __m256i p67 = _mm256_blend_epi32(_mm256_set1_epi32((int)p[6]), _mm256_set1_epi32((int)p[7]), 0x80);
    return _mm256_blend_epi32(_mm256_blend_epi32(p01, p23, 0x0c), _mm256_blend_epi32(p45, p67, 0xc0), 0xf0);
}

AVX2 static inline __m256i points8_u8(const uint32_t *G, const uint8_t *ix)
{
    const uint32_t p[8] = { G[opaque(ix[0])], G[opaque(ix[1])], G[opaque(ix[2])], G[opaque(ix[3])],
                            G[opaque(ix[4])], G[opaque(ix[5])], G[opaque(ix[6])], G[opaque(ix[7])] };
    return blend8(p);
}

AVX2 static inline __m256i points8_u16(const uint32_t *G, const uint16_t *ix)
{
    const uint32_t p[8] = { G[opaque(ix[0])], G[opaque(ix[1])], G[opaque(ix[2])], G[opaque(ix[3])],
                            G[opaque(ix[4])], G[opaque(ix[5])], G[opaque(ix[6])], G[opaque(ix[7])] };
    return blend8(p);
}

AVX2 static inline __m256i points4_iq2xs(const uint64_t *G, const uint16_t *qs)
{
    const __m256i p01 = _mm256_blend_epi32(_mm256_set1_epi64x((long long)G[opaque(qs[0]) & 511]),
                                           _mm256_set1_epi64x((long long)G[opaque(qs[1]) & 511]), 0x0c);
    const __m256i p23 = _mm256_blend_epi32(_mm256_set1_epi64x((long long)G[opaque(qs[2]) & 511]),
                                           _mm256_set1_epi64x((long long)G[opaque(qs[3]) & 511]), 0xc0);
    return _mm256_blend_epi32(p01, p23, 0xf0);
}

/* One sub-block: grid bytes (unsigned) x activations with the signs applied, int16 pair sums
 * (<= 2 * 62 * 127) times the int16 scales, 8 int32 partial sums. */
AVX2 static inline __m256i sub_dot_pm1(__m256i grid, __m256i pm1, const int8_t *q, __m256i scale)
{
    const __m256i a = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)q), pm1);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(grid, a), scale);
}

/* The 64 grid indices of an IQ3_S super-block in order: index k of sub-block ib = qs[8ib + k] |
 * bit k of qh[ib] << 8, bytes interleaved into u16 (vpermq first so that the in-lane unpacks give
 * them in order). */
AVX2 static inline void iq3_s_indices(const sl_block_iq3_s *b, uint16_t idx[64])
{
    uint32_t qh[2];
    memcpy(qh, b->qh, 8);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m256i lo = _mm256_permute4x64_epi64(_mm256_loadu_si256((const __m256i *)(b->qs + 32 * h)), 0xd8);
        const __m256i hi = _mm256_permute4x64_epi64(_mm256_and_si256(bits_to_bytes(qh[h]), _mm256_set1_epi8(1)), 0xd8);
        _mm256_store_si256((__m256i *)(idx + 32 * h), _mm256_unpacklo_epi8(lo, hi));
        _mm256_store_si256((__m256i *)(idx + 32 * h + 16), _mm256_unpackhi_epi8(lo, hi));
    }
}

/* Contract: as sl_qdot_iq3_s_q8_k (same bits).  The indices of super-block i + 1 are computed
 * during super-block i: scalar loads right after the vector stores would wait for them (forwarding
 * from a vector store to a scalar load is slow; measured 1.5x the time per block here). */
AVX2 float sl_avx2_dot_iq3_s_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const uint32_t *G = sl_iq_grids_get()->iq3s;
    const sl_block_iq3_s *w = vw;
    const sl_block_q8_k *y = vy;
    const int64_t nb = n / SL_QK_K;
    _Alignas(32) uint16_t idx[2][64];
    _Alignas(32) int32_t scbuf[8];
    float acc = 0;
    if (nb > 0) iq3_s_indices(&w[0], idx[0]);
    for (int64_t i = 0; i < nb; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        if (i + 1 < nb) iq3_s_indices(&w[i + 1], idx[(i + 1) & 1]);
        const uint16_t *ix = idx[i & 1];
        /* int32 lane ib: 2 * (nibble ib&1 of scales[ib/2]) + 1 */
        uint32_t sc4;
        memcpy(&sc4, w[i].scales, 4);
        const __m128i pairs = _mm_shuffle_epi8(_mm_cvtsi32_si128((int)sc4), _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, -1, -1, -1, -1, -1, -1, -1, -1));
        const __m256i nib = _mm256_and_si256(_mm256_srlv_epi32(_mm256_cvtepu8_epi32(pairs), _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4)),
                                             _mm256_set1_epi32(15));
        const int32_t *sc = scale_words(scbuf, dup16(_mm256_or_si256(_mm256_slli_epi32(nib, 1), _mm256_set1_epi32(1))));
        const __m256i sb = _mm256_loadu_si256((const __m256i *)w[i].signs), sbl[2] = { lane_both(sb, 0), lane_both(sb, 1) };
        __m256i s = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ib++)
            s = _mm256_add_epi32(s, sub_dot_pm1(points8_u16(G, ix + 8 * ib), signs_pm1_of(sbl[ib / 4], ib & 3), y[i].qs + 32 * ib,
                                                scale_word(sc, ib)));
        const int32_t S = hsum_i32x8(s);
        acc = acc + (_cvtsh_ss(w[i].d) * y[i].d) * (float)S;
    }
    return acc;
}

/* Contract: as sl_qdot_iq3_xxs_q8_k (same bits). */
AVX2 float sl_avx2_dot_iq3_xxs_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const uint32_t *G = sl_iq_grids_get()->iq3xxs;
    const sl_block_iq3_xxs *w = vw;
    const sl_block_q8_k *y = vy;
    _Alignas(32) int32_t scbuf[8];
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        const __m256i sb = xxs_signs_scales(_mm256_loadu_si256((const __m256i *)(w[i].qs + SL_QK_K / 4)), scbuf);
        const int32_t *sc = scale_words_of(scbuf);
        const __m256i sbl[2] = { lane_both(sb, 0), lane_both(sb, 1) };
        __m256i s = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ib++)
            s = _mm256_add_epi32(s, sub_dot_pm1(points8_u8(G, w[i].qs + 8 * ib), signs_pm1_of(sbl[ib / 4], ib & 3), y[i].qs + 32 * ib,
                                                scale_word(sc, ib)));
        const int32_t S = hsum_i32x8(s);
        acc = acc + (_cvtsh_ss(w[i].d) * y[i].d) * (float)S;
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
        /* qs[g] = 9-bit index | 7 sign bits << 9; vpackuswb interleaves the lanes, vpermq restores */
        const __m256i q0 = _mm256_loadu_si256((const __m256i *)w[i].qs), q1 = _mm256_loadu_si256((const __m256i *)(w[i].qs + 16));
        const __m256i f7 = _mm256_permute4x64_epi64(_mm256_packus_epi16(_mm256_srli_epi16(q0, 9), _mm256_srli_epi16(q1, 9)), 0xd8);
        const __m256i sb = sign8_bytes(f7), sbl[2] = { lane_both(sb, 0), lane_both(sb, 1) };
        /* int32 lane 2j + h of sc[j / 4]: scale of half h of sub-block j (nibble h of scales[j]) */
        const __m128i raw = _mm_loadl_epi64((const __m128i *)w[i].scales), m4 = _mm_set1_epi8(0x0f);
        const __m128i nib = _mm_unpacklo_epi8(_mm_and_si128(raw, m4), _mm_and_si128(_mm_srli_epi16(raw, 4), m4));
        const __m128i L8 = _mm_or_si128(_mm_add_epi8(nib, nib), _mm_set1_epi8(1));
        const __m256i sc[2] = { dup16(_mm256_cvtepu8_epi32(L8)), dup16(_mm256_cvtepu8_epi32(_mm_srli_si128(L8, 8))) };
        __m256i s = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ib++) {
            const int j = 2 * (ib & 3);
            s = _mm256_add_epi32(s, sub_dot_pm1(points4_iq2xs(G, w[i].qs + 4 * ib), signs_pm1_of(sbl[ib / 4], ib & 3),
                                                y[i].qs + 32 * ib, pick_scale(sc[ib / 4], j, j + 1)));
        }
        const int32_t S = hsum_i32x8(s);
        acc = acc + (_cvtsh_ss(w[i].d) * y[i].d) * (float)S;
    }
    return 0.125f * acc;
}

/* Contract: as sl_qdot_iq2_xxs_q8_k (same bits).  Without gathers as IQ3_XXS: sub-block ib is
 * two words, 4 index bytes and the sign/scale word (collected into one register by vpermd). */
AVX2 float sl_avx2_dot_iq2_xxs_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const uint64_t *G = sl_iq_grids_get()->iq2xxs;
    const sl_block_iq2_xxs *w = vw;
    const sl_block_q8_k *y = vy;
    const __m256i odd_lo = _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7);
    _Alignas(32) int32_t scbuf[8];
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        const uint8_t *qb = (const uint8_t *)w[i].qs;
        const __m256i a0 = _mm256_loadu_si256((const __m256i *)qb), a1 = _mm256_loadu_si256((const __m256i *)(qb + 32));
        const __m256i aux = _mm256_blend_epi32(_mm256_permutevar8x32_epi32(a0, odd_lo), _mm256_permutevar8x32_epi32(a1, odd_lo), 0xf0);
        const __m256i sb = xxs_signs_scales(aux, scbuf);
        const int32_t *sc = scale_words_of(scbuf);
        const __m256i sbl[2] = { lane_both(sb, 0), lane_both(sb, 1) };
        __m256i s = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *ix = qb + 8 * ib;
            const __m256i p01 = _mm256_blend_epi32(_mm256_set1_epi64x((long long)G[opaque(ix[0])]), _mm256_set1_epi64x((long long)G[opaque(ix[1])]), 0x0c);
            const __m256i p23 = _mm256_blend_epi32(_mm256_set1_epi64x((long long)G[opaque(ix[2])]), _mm256_set1_epi64x((long long)G[opaque(ix[3])]), 0xc0);
            s = _mm256_add_epi32(s, sub_dot_pm1(_mm256_blend_epi32(p01, p23, 0xf0), signs_pm1_of(sbl[ib / 4], ib & 3), y[i].qs + 32 * ib,
                                                scale_word(sc, ib)));
        }
        const int32_t S = hsum_i32x8(s);
        acc = acc + (_cvtsh_ss(w[i].d) * y[i].d) * (float)S;
    }
    return 0.125f * acc;
}

/* The 32 grid indices of an IQ2_S super-block in order: index l of sub-block ib = qs[4ib + l] |
 * bits 2l..2l+1 of qh[ib] << 8.  vpshufb copies qh[ib] to the bytes of its 4 indices, the mask keeps
 * each one's 2 bits and vpmullw by 2^(8 - 2l) moves them to bits 8-9 of its u16. */
AVX2 static inline void iq2_s_indices(const sl_block_iq2_s *b, uint16_t idx[32])
{
    const __m256i qh = _mm256_broadcastsi128_si256(_mm_loadl_epi64((const __m128i *)b->qh));
    const __m256i own = _mm256_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3,
                                         4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7);
    const __m256i hb = _mm256_and_si256(_mm256_shuffle_epi8(qh, own), _mm256_set1_epi32(0xc0300c03));
    const __m256i to_bit8 = _mm256_setr_epi16(256, 64, 16, 4, 256, 64, 16, 4, 256, 64, 16, 4, 256, 64, 16, 4);
    const __m128i lo = _mm_loadu_si128((const __m128i *)b->qs), lo2 = _mm_loadu_si128((const __m128i *)(b->qs + 16));
    const __m256i i0 = _mm256_or_si256(_mm256_cvtepu8_epi16(lo), _mm256_mullo_epi16(_mm256_cvtepu8_epi16(_mm256_castsi256_si128(hb)), to_bit8));
    const __m256i i1 = _mm256_or_si256(_mm256_cvtepu8_epi16(lo2), _mm256_mullo_epi16(_mm256_cvtepu8_epi16(_mm256_extracti128_si256(hb, 1)), to_bit8));
    _mm256_store_si256((__m256i *)idx, i0);
    _mm256_store_si256((__m256i *)(idx + 16), i1);
}

/* Contract: as sl_qdot_iq2_s_q8_k (same bits).  Without gathers: indices one super-block ahead
 * as IQ3_S, 8-bit signs from the block as IQ3_S, scales as IQ2_XS. */
AVX2 float sl_avx2_dot_iq2_s_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const uint64_t *G = sl_iq_grids_get()->iq2s;
    const sl_block_iq2_s *w = vw;
    const sl_block_q8_k *y = vy;
    const int64_t nb = n / SL_QK_K;
    _Alignas(32) uint16_t idx[2][32];
    float acc = 0;
    if (nb > 0) iq2_s_indices(&w[0], idx[0]);
    for (int64_t i = 0; i < nb; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        if (i + 1 < nb) iq2_s_indices(&w[i + 1], idx[(i + 1) & 1]);
        const uint16_t *ix = idx[i & 1];
        const __m128i raw = _mm_loadl_epi64((const __m128i *)w[i].scales), m4 = _mm_set1_epi8(0x0f);
        const __m128i nib = _mm_unpacklo_epi8(_mm_and_si128(raw, m4), _mm_and_si128(_mm_srli_epi16(raw, 4), m4));
        const __m128i L8 = _mm_or_si128(_mm_add_epi8(nib, nib), _mm_set1_epi8(1));
        const __m256i sc[2] = { dup16(_mm256_cvtepu8_epi32(L8)), dup16(_mm256_cvtepu8_epi32(_mm_srli_si128(L8, 8))) };
        const __m256i sb = _mm256_loadu_si256((const __m256i *)(w[i].qs + SL_QK_K / 8)), sbl[2] = { lane_both(sb, 0), lane_both(sb, 1) };
        __m256i s = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ib++) {
            const int j = 2 * (ib & 3);
            const uint16_t *q4 = ix + 4 * ib;
            const __m256i p01 = _mm256_blend_epi32(_mm256_set1_epi64x((long long)G[opaque(q4[0])]), _mm256_set1_epi64x((long long)G[opaque(q4[1])]), 0x0c);
            const __m256i p23 = _mm256_blend_epi32(_mm256_set1_epi64x((long long)G[opaque(q4[2])]), _mm256_set1_epi64x((long long)G[opaque(q4[3])]), 0xc0);
            s = _mm256_add_epi32(s, sub_dot_pm1(_mm256_blend_epi32(p01, p23, 0xf0), signs_pm1_of(sbl[ib / 4], ib & 3), y[i].qs + 32 * ib,
                                                pick_scale(sc[ib / 4], j, j + 1)));
        }
        const int32_t S = hsum_i32x8(s);
        acc = acc + (_cvtsh_ss(w[i].d) * y[i].d) * (float)S;
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
