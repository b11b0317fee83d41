/* kernels/simd_avx512_quants.c — AVX-512 (F, BW, VL, VNNI) integer dots of Q2_K, Q3_K, IQ4_XS
 * (with Q8_K) and IQ4_NL, Q5_0 (with Q8_0; MXFP4's one-FMA-per-block step runs the AVX2 forms).
 *
 * Same contract as simd_avx512.c: the portable reference's bits (kernels/qdot_quants.c), integer
 * sums exact, the float steps of kernels/simd.h in the same order (no FMA: k_common.h).  A 512-bit
 * register holds 64 weights:
 *   - Q2_K/Q3_K: sub-blocks 4m..4m+3 (elements 64m..64m+63 of the super-block), built from one
 *     32-byte load of 2-bit fields shifted by a different amount in each 256-bit half (vpsrlvw);
 *     vpmaddubsw + vpmaddwd apply four sub-block scales at once (vpermw picks them);
 *   - IQ4_XS: two sub-blocks of 32, IQ4_NL/Q5_0: two blocks of 32 (block i in lanes 0-7, block i+1
 *     in lanes 8-15: the canonical acc[i % 2] split, as simd_avx512.c's Q4_0).
 * Signed weights times signed activations go through vpdpbusd as |w| x (a with w's sign); the
 * activations are never -128, so nothing saturates or wraps.
 * Q4_1/Q5_1 stay on the AVX2 kernels (legacy fallback types, rare in files; the AVX2 dot is
 * already faster than memory there).  Tested natively (tests/test_quant_types.c), not under the
 * SIMDe emulation of test_kernels_avx512_emu.c.
 */
#include "kernels/k_quants.h"
#include "kernels/simd.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* Built twice: here without GFNI (single dots named sl_avx512plain_*), and by
 * simd_avx512_quants_gfni.c with it (sl_avx512gfni_*), where the 2-bit and 4-bit fields come out
 * of one vgf2p8affineqb each instead of a vpsrlvw and a vpand.  The sl_avx512_* entry points at
 * the end pick one per call. */
#ifndef SL_AVX512Q_GFNI
#define SL_AVX512Q_GFNI 0
#endif
#if SL_AVX512Q_GFNI
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,gfni")))
#define QEXPORT(name) sl_avx512gfni_##name
#else
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define QEXPORT(name) sl_avx512plain_##name
#endif
#define QDOT_DECL(name) float QEXPORT(name)(const void *restrict vw, const void *restrict vy, int64_t n)
/* The 4-vector forms (batched prefill) are built only without GFNI: there the unpacking is shared
 * by four vectors' products, and on Zen 4 vgf2p8affineqb shares a pipe with vpmaddubsw and
 * vpdpwssd (Q3_K at nb = 64 ran 69-77 Gop/s with it against 82-88 without; docs/benchmarks.md,
 * "Zen 4, session 17"), so they keep their names (kernels/simd.h) and need no entry point. */
#define QDOT4_DECL(name) \
    void sl_avx512_##name(const void *restrict vw, const void *restrict vy, size_t ys, int64_t n, float *restrict out)
QDOT_DECL(dot_q5_0_q8_0); QDOT_DECL(dot_iq4_nl_q8_0); QDOT_DECL(dot_q2_k_q8_k); QDOT_DECL(dot_q3_k_q8_k);
QDOT_DECL(dot_iq4_xs_q8_k);

AVX512 static inline float f16f(uint16_t h) { return _cvtsh_ss(h); }
AVX512 static inline __m256i ld256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
AVX512 static inline __m512i ld512(const void *p) { return _mm512_loadu_si512(p); }

AVX512 static inline __m512i join256(__m256i lo, __m256i hi)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

AVX512 static inline __m256 hi_ps(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

#if SL_AVX512Q_GFNI
/* The vgf2p8affineqb matrix that moves bits [s, s + w) of a byte to bits [to, to + w), the others
 * zero (output bit i is the parity of the input masked by matrix byte 7 - i). */
static inline long long field_matrix(int s, int w, int to)
{
    unsigned long long m = 0;
    for (int i = 0; i < w; i++) m |= (unsigned long long)(1u << (s + i)) << (8 * (7 - (to + i)));
    return (long long)m;
}
#endif

#define SL_REDUCE_TARGET AVX512
#include "kernels/simd_reduce.h"   /* lanes_reduce */
#define SL_KDOT_TARGET AVX512
#include "kernels/simd_avx512_kdot.h"   /* SL_KDOT_SINGLE, hsum4_i32x16 */

AVX512 static inline __m512i kvalues_table512(void)
{
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)sl_kvalues_iq4nl));
}

/* The low nibble of each byte in qwords 0, 1, 4, 5, the high one in 2, 3, 6, 7. */
AVX512 static inline __m512i nibbles_lo_hi(__m512i x)
{
#if SL_AVX512Q_GFNI
    const long long lo = field_matrix(0, 4, 0), hi = field_matrix(4, 4, 0);
    return _mm512_gf2p8affine_epi64_epi8(x, _mm512_setr_epi64(lo, lo, hi, hi, lo, lo, hi, hi), 0);
#else
    const __m512i shift = _mm512_setr_epi64(0, 0, 0x0004000400040004ll, 0x0004000400040004ll, 0, 0,
                                            0x0004000400040004ll, 0x0004000400040004ll);
    return _mm512_and_si512(_mm512_srlv_epi16(x, shift), _mm512_set1_epi8(0x0f));
#endif
}

/* The 16 nibble bytes of two adjacent 32-blocks (qs at byte offsets `off` and `off` + `stride` of a
 * masked load of both blocks; all even, so vpermw places them): bytes 0-15 / 32-47 = the low nibbles
 * of block i / i + 1 (elements 0-15), bytes 16-31 / 48-63 = the high nibbles (elements 16-31). */
AVX512 static inline __m512i nibbles_pair(const void *blocks, unsigned bytes, int off, int stride)
{
    const __m512i raw = _mm512_maskz_loadu_epi8(((__mmask64)1 << bytes) - 1, blocks);
    const __m512i wi = _mm512_add_epi16(_mm512_set1_epi16((short)(off / 2)),
                                        _mm512_setr_epi32(0x00010000, 0x00030002, 0x00050004, 0x00070006,
                                                          0x00010000, 0x00030002, 0x00050004, 0x00070006,
                                                          0x00010000, 0x00030002, 0x00050004, 0x00070006,
                                                          0x00010000, 0x00030002, 0x00050004, 0x00070006));
    const __m512i idx = _mm512_mask_add_epi16(wi, (__mmask32)0xffff0000u, wi, _mm512_set1_epi16((short)(stride / 2)));
    return nibbles_lo_hi(_mm512_permutexvar_epi16(idx, raw));
}

/* Lanes 0-7 = s0 = f16(wd0) * f16(yd0), lanes 8-15 = s1 (the same products as scalar code). */
AVX512 static inline __m512 scale_pair(uint16_t wd0, uint16_t wd1, uint16_t yd0, uint16_t yd1)
{
    const __m128 s = _mm_mul_ps(_mm_cvtph_ps(_mm_insert_epi16(_mm_cvtsi32_si128(wd0), wd1, 1)),
                                _mm_cvtph_ps(_mm_insert_epi16(_mm_cvtsi32_si128(yd0), yd1, 1)));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1), _mm512_castps128_ps512(s));
}

/* The y block of vector v (4-vector dots: vectors at vy + v * ys bytes). */
#define YV(T, v, i) ((const T *)((const unsigned char *)vy + (size_t)(v) * ys) + (i))

/* ---- blocks of 32 with Q8_0: weights of two blocks as |q| and the mask of negative q --------- */

typedef struct { __m512i absq; __mmask64 neg; } pair32;

/* Q5_0 blocks i, i + 1 (nblk = 1: block i only, the rest zero): q = value - 16 is negative exactly
 * where the high bit is clear, so |q| and the sign mask need no compare. */
AVX512 static inline pair32 q5_0_pair(const sl_block_q5_0 *b, unsigned nblk)
{
    __mmask64 hm = (__mmask64)sl_q5_qh(b[0].qh);
    if (nblk > 1) hm |= (__mmask64)sl_q5_qh(b[1].qh) << 32;
    const __m512i nib = nibbles_pair(b, nblk * sizeof *b, offsetof(sl_block_q5_0, qs), sizeof *b);
    const __m512i absq = _mm512_mask_sub_epi8(_mm512_sub_epi8(_mm512_set1_epi8(16), nib), hm, nib, _mm512_setzero_si512());
    return (pair32){ absq, ~hm };
}

/* IQ4_NL: |kvalue| by table; kvalues[k] < 0 exactly for k < 8. */
AVX512 static inline pair32 iq4_nl_pair(const sl_block_iq4_nl *b, unsigned nblk)
{
    const __m512i nib = nibbles_pair(b, nblk * sizeof *b, offsetof(sl_block_iq4_nl, qs), sizeof *b);
    return (pair32){ _mm512_shuffle_epi8(_mm512_abs_epi8(kvalues_table512()), nib), _mm512_testn_epi8_mask(nib, _mm512_set1_epi8(8)) };
}

/* The block scales of the pair (lanes 0-7 block i, 8-15 block i + 1) and of a last single block:
 * f16(w.d) * f16(y.d) for Q5_0/IQ4_NL (kernels/simd.h; MXFP4 runs the AVX2 forms). */
#define F16_SCALE2(w, y) scale_pair((w)[0].d, (w)[1].d, (y)[0].d, (y)[1].d)
#define F16_SCALE1(w, y) (f16f((w)->d) * f16f((y)->d))

/* Lane k of each block = exact sum of its elements 4k..4k+3 times the activations a. */
AVX512 static inline __m512 pair_lanes(pair32 w, __m512i a)
{
    const __m512i sa = _mm512_mask_sub_epi8(a, w.neg, _mm512_setzero_si512(), a);
    return _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), w.absq, sa));
}

/* The canonical q4_0 steps over n/32 blocks (kernels/simd.h) for the weight type T with the pair
 * unpacker UNPACK: one vector (NV = 1) or four (out[v] = the single dot of vector v). */
#define BLOCKS32_DOT(T, UNPACK, NV, SCALE2, SCALE1)                                                         \
    const T *w = vw;                                                                                       \
    const int64_t nb = n / SL_QK;                                                                          \
    __m512 acc[NV];                                                                                        \
    for (int v = 0; v < NV; v++) acc[v] = _mm512_setzero_ps();                                             \
    int64_t i = 0;                                                                                         \
    for (; i + 2 <= nb; i += 2) {                                                                          \
        sl_prefetch_ahead(&w[i], 2 * sizeof w[i]);                                                          \
        const pair32 q = UNPACK(&w[i], 2);                                                                 \
        for (int v = 0; v < NV; v++) {                                                                     \
            const sl_block_q8_0 *y = YV(sl_block_q8_0, v, i);                                              \
            const __m512 l = pair_lanes(q, join256(ld256(y[0].qs), ld256(y[1].qs)));                       \
            acc[v] = _mm512_add_ps(acc[v], _mm512_mul_ps(SCALE2(&w[i], y), l));                            \
        }                                                                                                  \
    }                                                                                                      \
    const pair32 q = i < nb ? UNPACK(&w[i], 1) : (pair32){ _mm512_setzero_si512(), 0 };                    \
    for (int v = 0; v < NV; v++) {                                                                         \
        __m256 a0 = _mm512_castps512_ps256(acc[v]);                                                        \
        if (i < nb) {                                                                                      \
            const sl_block_q8_0 *y = YV(sl_block_q8_0, v, i);                                              \
            const __m256 l = _mm512_castps512_ps256(pair_lanes(q, _mm512_castsi256_si512(ld256(y->qs))));   \
            a0 = _mm256_add_ps(a0, _mm256_mul_ps(_mm256_set1_ps(SCALE1(&w[i], y)), l));                    \
        }                                                                                                  \
        out[v] = lanes_reduce(a0, hi_ps(acc[v]));                                                          \
    }

/* Contract: as sl_qdot_q5_0_q8_0 (same bits). */
AVX512 QDOT_DECL(dot_q5_0_q8_0)
{
    const size_t ys = 0;
    float out[1];
    BLOCKS32_DOT(sl_block_q5_0, q5_0_pair, 1, F16_SCALE2, F16_SCALE1)
    return out[0];
}

#if !SL_AVX512Q_GFNI
/* Contract: out[v] = sl_qdot_q5_0_q8_0(w, y + v*ys, n) bit for bit, v < 4. */
AVX512 QDOT4_DECL(dot4_q5_0_q8_0)
{
    BLOCKS32_DOT(sl_block_q5_0, q5_0_pair, 4, F16_SCALE2, F16_SCALE1)
}
#endif

/* Contract: as sl_qdot_iq4_nl_q8_0 (same bits). */
AVX512 QDOT_DECL(dot_iq4_nl_q8_0)
{
    const size_t ys = 0;
    float out[1];
    BLOCKS32_DOT(sl_block_iq4_nl, iq4_nl_pair, 1, F16_SCALE2, F16_SCALE1)
    return out[0];
}

#if !SL_AVX512Q_GFNI
/* Contract: out[v] = sl_qdot_iq4_nl_q8_0(w, y + v*ys, n) bit for bit, v < 4. */
AVX512 QDOT4_DECL(dot4_iq4_nl_q8_0)
{
    BLOCKS32_DOT(sl_block_iq4_nl, iq4_nl_pair, 4, F16_SCALE2, F16_SCALE1)
}
#endif
#undef BLOCKS32_DOT
#undef F16_SCALE2
#undef F16_SCALE1

/* ---- super-blocks with Q8_K: each super-block's weights unpacked once into 4 groups of 64
 * elements (sub-blocks 4g..4g+3 for the 16-element ones, 2g and 2g+1 for IQ4_XS) with their int16
 * scales per element pair; S = the vpdpwssd sum over groups of (vpmaddubsw w x a) x scales. ----- */

typedef struct { __m512i u[4], sc[4]; __m256i sc16; __mmask64 neg[4]; } kgroups;

/* int16 lane k of a 64-element group belongs to sub-block k / 8 of the group's four: vpermw
 * indices into 16 int16 scales, offset by the group's first sub-block. */
AVX512 static inline __m512i scale_idx(int first)
{
    return _mm512_add_epi16(_mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2,
                                             1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
                            _mm512_set1_epi16((short)first));
}

/* Shift counts for vpsrlvw: `lo` in the low 256 bits, `hi` in the high ones. */
AVX512 static inline __m512i shifts(int lo, int hi)
{
    return join256(_mm256_set1_epi16((short)lo), _mm256_set1_epi16((short)hi));
}

/* Bits [lo, lo + 2) of each byte in the low 256 bits, [hi, hi + 2) in the high ones, as 0..3. */
AVX512 static inline __m512i field2(__m512i q, int lo, int hi)
{
#if SL_AVX512Q_GFNI
    const long long l = field_matrix(lo, 2, 0), h = field_matrix(hi, 2, 0);
    return _mm512_gf2p8affine_epi64_epi8(q, _mm512_setr_epi64(l, l, l, l, h, h, h, h), 0);
#else
    return _mm512_and_si512(_mm512_srlv_epi16(q, shifts(lo, hi)), _mm512_set1_epi8(3));
#endif
}

/* The int32 partial sums of S for the activations q (unsigned weights, no sign masks). */
AVX512 static inline __m512i kgroups_isum(const kgroups *g, const int8_t *q)
{
    __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(g->u[k], ld512(q + 64 * k)), g->sc[k]);
    return s;
}

/* Q2_K: q <= 3 (pairs <= 2*3*127, times sc <= 15); sc16 holds the mins. */
AVX512 static inline void q2_k_unpack(const sl_block_q2_k *b, kgroups *g)
{
    const __m128i raw = _mm_loadu_si128((const __m128i *)b->scales);
    const __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(raw, _mm_set1_epi8(0x0f))));
    g->sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0f)));
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m512i q = _mm512_broadcast_i64x4(ld256(b->qs + 32 * h));
        g->u[2 * h] = field2(q, 0, 2);
        g->u[2 * h + 1] = field2(q, 4, 6);
        g->sc[2 * h] = _mm512_permutexvar_epi16(scale_idx(8 * h), sc16);
        g->sc[2 * h + 1] = _mm512_permutexvar_epi16(scale_idx(8 * h + 4), sc16);
    }
}

/* One Q2_K super-block for SL_KDOT_SINGLE: S lanes and M lanes (the mins times bsums). */
AVX512 static inline void q2_k_kblock(const sl_block_q2_k *b, const sl_block_q8_k *y, __m512i *s, __m256i *m)
{
    kgroups g;
    q2_k_unpack(b, &g);
    *s = kgroups_isum(&g, y->qs);
    *m = _mm256_madd_epi16(g.sc16, ld256(y->bsums));
}

/* Contract: as sl_qdot_q2_k_q8_k (same bits). */
AVX512 QDOT_DECL(dot_q2_k_q8_k)
{
    SL_KDOT_SINGLE(sl_block_q2_k, q2_k_kblock, (int)offsetof(sl_block_q2_k, dmin))
}

#if !SL_AVX512Q_GFNI
/* Contract: out[v] = sl_qdot_q2_k_q8_k(w, y + v*ys, n) bit for bit, v < 4 (lane v of the float
 * steps does exactly the scalar operations of vector v). */
AVX512 QDOT4_DECL(dot4_q2_k_q8_k)
{
    const sl_block_q2_k *w = vw;
    __m128 acc = _mm_setzero_ps();
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        kgroups g;
        q2_k_unpack(&w[i], &g);
        __m512i s[4];
        __m256i m[4];
        float yd[4];
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) {
            const sl_block_q8_k *y = YV(sl_block_q8_k, v, i);
            s[v] = kgroups_isum(&g, y->qs);
            m[v] = _mm256_madd_epi16(g.sc16, ld256(y->bsums));
            yd[v] = y->d;
        }
        const __m128 S = _mm_cvtepi32_ps(hsum4_i32x16(s)), M = _mm_cvtepi32_ps(hsum4_i32x8(m[0], m[1], m[2], m[3]));
        const __m128 ydv = _mm_loadu_ps(yd);
        const __m128 d = _mm_mul_ps(_mm_set1_ps(f16f(w[i].d)), ydv), dmin = _mm_mul_ps(_mm_set1_ps(f16f(w[i].dmin)), ydv);
        acc = _mm_add_ps(acc, _mm_sub_ps(_mm_mul_ps(d, S), _mm_mul_ps(dmin, M)));
    }
    _mm_storeu_ps(out, acc);
}
#endif

/* The 16 Q3_K scales minus 32 as int16 (the same values as sl_q3_k_scales - 32), unpacked in
 * registers: low nibbles from bytes 0-7 (scales 0-7 low, 8-15 high nibbles), top 2 bits from
 * bytes 8-11 (scale j: bits 2*(j/4) of byte 8 + j%4).  Loads only the block's 12 bytes. */
AVX512 static inline __m256i q3_k_scales16(const uint8_t *b)
{
    uint32_t top;
    memcpy(&top, b + 8, 4);
    const __m128i lo8 = _mm_loadl_epi64((const __m128i *)b), m4 = _mm_set1_epi8(0x0f);
    const __m128i low4 = _mm_unpacklo_epi64(_mm_and_si128(lo8, m4), _mm_and_si128(_mm_srli_epi16(lo8, 4), m4));
    const __m128i hi2 = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)top), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
    const __m128i sc = _mm_or_si128(low4, _mm_slli_epi16(hi2, 4));
    return _mm256_sub_epi16(_mm256_cvtepu8_epi16(sc), _mm256_set1_epi16(32));
}

#if SL_AVX512Q_GFNI
/* Bit `lo` of each byte in the low 256 bits, `hi` in the high ones, moved to bit 2 (value 4). */
AVX512 static inline __m512i bit_to4(__m512i x, int lo, int hi)
{
    const long long l = field_matrix(lo, 1, 2), h = field_matrix(hi, 1, 2);
    return _mm512_gf2p8affine_epi64_epi8(x, _mm512_setr_epi64(l, l, l, l, h, h, h, h), 0);
}
#endif

/* Q3_K: u = value + 4 <= 7 (pairs <= 2*7*127, times |sc - 32| <= 32); sc16 holds sc - 32 for the
 * -4 correction.  hmask bit k = 4h + j of byte l goes to bit 2 (value 4): (hm >> (k - 2)) & 4, or
 * for k < 2 from hm << 2 (16-bit shifts: the bits taken never cross a byte). */
AVX512 static inline void q3_k_unpack(const sl_block_q3_k *b, kgroups *g)
{
    g->sc16 = q3_k_scales16(b->scales);
    const __m512i sc512 = _mm512_castsi256_si512(g->sc16);
    const __m512i hm = _mm512_broadcast_i64x4(ld256(b->hmask));
#if !SL_AVX512Q_GFNI
    const __m512i m4 = _mm512_set1_epi8(4), hm_l = _mm512_slli_epi16(hm, 2);
#endif
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m512i q = _mm512_broadcast_i64x4(ld256(b->qs + 32 * h));
        const __m512i q01 = field2(q, 0, 2), q23 = field2(q, 4, 6);
#if SL_AVX512Q_GFNI
        const __m512i h01 = bit_to4(hm, 4 * h, 4 * h + 1), h23 = bit_to4(hm, 4 * h + 2, 4 * h + 3);
#else
        const __m512i h01 = h == 0 ? _mm512_and_si512(_mm512_srlv_epi16(hm_l, shifts(0, 1)), m4)
                                   : _mm512_and_si512(_mm512_srlv_epi16(hm, shifts(2, 3)), m4);
        const __m512i h23 = h == 0 ? _mm512_and_si512(_mm512_srlv_epi16(hm, shifts(0, 1)), m4)
                                   : _mm512_and_si512(_mm512_srlv_epi16(hm, shifts(4, 5)), m4);
#endif
        g->u[2 * h] = _mm512_or_si512(q01, h01);
        g->u[2 * h + 1] = _mm512_or_si512(q23, h23);
        g->sc[2 * h] = _mm512_permutexvar_epi16(scale_idx(8 * h), sc512);
        g->sc[2 * h + 1] = _mm512_permutexvar_epi16(scale_idx(8 * h + 4), sc512);
    }
}

/* S's partial sums with the -4 of every value folded in: - 4 * sum_j sc_j * bsums_j. */
AVX512 static inline __m512i q3_k_isum(const kgroups *g, const sl_block_q8_k *y)
{
    const __m256i c = _mm256_slli_epi32(_mm256_madd_epi16(g->sc16, ld256(y->bsums)), 2);
    return _mm512_sub_epi32(kgroups_isum(g, y->qs), _mm512_zextsi256_si512(c));
}

/* One super-block of a one-scale K type for SL_KDOT_SINGLE (m unused): UNPACK, then ISUM. */
#define K_KBLOCK(NAME, T, UNPACK, ISUM)                                                                \
    AVX512 static inline void NAME(const T *b, const sl_block_q8_k *y, __m512i *s, __m256i *m)      \
    {                                                                                                \
        (void)m;                                                                                     \
        kgroups g;                                                                                   \
        UNPACK(b, &g);                                                                               \
        *s = ISUM(&g, y);                                                                            \
    }

K_KBLOCK(q3_k_kblock, sl_block_q3_k, q3_k_unpack, q3_k_isum)

/* Contract: as sl_qdot_q3_k_q8_k (same bits). */
AVX512 QDOT_DECL(dot_q3_k_q8_k)
{
    SL_KDOT_SINGLE(sl_block_q3_k, q3_k_kblock, -1)
}

/* IQ4_XS: |kvalue| by table with the sign (nibble < 8) moved onto the activation (pairs <=
 * 2*127*127 < 2^15); the 8 scales ls - 32 unpacked once per super-block; |S| <= 132e6.
 * Group g = sub-blocks 2g, 2g + 1: bytes 0-15 / 32-47 their low nibbles, 16-31 / 48-63 the high. */
AVX512 static inline void iq4_xs_unpack(const sl_block_iq4_xs *b, kgroups *g)
{
    const __m512i kabs = _mm512_abs_epi8(kvalues_table512()), x8 = _mm512_set1_epi8(8);
    const __m512i dup = _mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3);
    uint32_t sl;
    memcpy(&sl, b->scales_l, 4);
    const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)sl), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                                        _mm256_set1_epi32(15));
    const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(b->scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                                        _mm256_set1_epi32(3));
    const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
    /* ls - 32 in both int16 halves of each dword (the low half of a negative value sign-extends) */
    const __m512i l2 = _mm512_castsi256_si512(_mm256_or_si256(_mm256_and_si256(ls, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(ls, 16)));
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        const __m512i raw = _mm512_permutexvar_epi64(dup, _mm512_castsi256_si512(ld256(b->qs + 32 * k)));
        const __m512i nib = nibbles_lo_hi(raw);
        g->u[k] = _mm512_shuffle_epi8(kabs, nib);
        g->neg[k] = _mm512_testn_epi8_mask(nib, x8);
        g->sc[k] = _mm512_permutexvar_epi32(_mm512_inserti64x4(_mm512_set1_epi32(2 * k), _mm256_set1_epi32(2 * k + 1), 1), l2);
    }
}

AVX512 static inline __m512i iq4_xs_isum(const kgroups *g, const int8_t *q)
{
    __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        const __m512i a = ld512(q + 64 * k);
        const __m512i sa = _mm512_mask_sub_epi8(a, g->neg[k], _mm512_setzero_si512(), a);
        s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(g->u[k], sa), g->sc[k]);
    }
    return s;
}

#define IQ4_XS_ISUM(g, y) iq4_xs_isum(g, (y)->qs)
K_KBLOCK(iq4_xs_kblock, sl_block_iq4_xs, iq4_xs_unpack, IQ4_XS_ISUM)
/* Contract: as sl_qdot_iq4_xs_q8_k (same bits). */
AVX512 QDOT_DECL(dot_iq4_xs_q8_k)
{
    SL_KDOT_SINGLE(sl_block_iq4_xs, iq4_xs_kblock, -1)
}
#undef IQ4_XS_ISUM
#undef K_KBLOCK

/* The 4-vector form of the one-scale K dots (Q3_K, IQ4_XS): acc = acc + (f16(w.d) * y.d) * S per
 * lane.  UNPACK / ISUM: the type's helpers above; ISUM takes the Q8_K block. */
#define K_DOT4(T, UNPACK, ISUM)                                                                        \
    const T *w = vw;                                                                                 \
    __m128 acc = _mm_setzero_ps();                                                                   \
    for (int64_t i = 0; i < n / SL_QK_K; i++) {                                                      \
        sl_prefetch_ahead(&w[i], sizeof w[i]);                                                        \
        kgroups g;                                                                                   \
        UNPACK(&w[i], &g);                                                                           \
        __m512i s[4];                                                                                \
        float yd[4];                                                                                 \
        for (int v = 0; v < 4; v++) {                                                                \
            const sl_block_q8_k *y = YV(sl_block_q8_k, v, i);                                        \
            s[v] = ISUM(&g, y);                                                                      \
            yd[v] = y->d;                                                                            \
        }                                                                                            \
        const __m128 d = _mm_mul_ps(_mm_set1_ps(f16f(w[i].d)), _mm_loadu_ps(yd));                     \
        acc = _mm_add_ps(acc, _mm_mul_ps(d, _mm_cvtepi32_ps(hsum4_i32x16(s))));                        \
    }                                                                                                \
    _mm_storeu_ps(out, acc);

#if !SL_AVX512Q_GFNI
/* Contract: out[v] = sl_qdot_q3_k_q8_k(w, y + v*ys, n) bit for bit, v < 4. */
AVX512 QDOT4_DECL(dot4_q3_k_q8_k)
{
    K_DOT4(sl_block_q3_k, q3_k_unpack, q3_k_isum)
}
#endif

#define IQ4_XS_ISUM(g, y) iq4_xs_isum(g, (y)->qs)
#if !SL_AVX512Q_GFNI
/* Contract: out[v] = sl_qdot_iq4_xs_q8_k(w, y + v*ys, n) bit for bit, v < 4. */
AVX512 QDOT4_DECL(dot4_iq4_xs_q8_k)
{
    K_DOT4(sl_block_iq4_xs, iq4_xs_unpack, IQ4_XS_ISUM)
}
#endif
#undef IQ4_XS_ISUM
#undef K_DOT4
#undef YV

#if !SL_AVX512Q_GFNI
/* The single dots' entry points (kernels/simd.h): the GFNI build where the CPU has GFNI (Sapphire Rapids,
 * Zen 4, Zen 5; not Skylake-SP or Cascade Lake), else this one; the same bits either way. */
#undef QEXPORT
#define QEXPORT(name) sl_avx512gfni_##name
QDOT_DECL(dot_q5_0_q8_0); QDOT_DECL(dot_iq4_nl_q8_0); QDOT_DECL(dot_q2_k_q8_k); QDOT_DECL(dot_q3_k_q8_k);
QDOT_DECL(dot_iq4_xs_q8_k);

static atomic_bool g_force_plain;
void sl_avx512_quants_force_plain(bool on) { atomic_store_explicit(&g_force_plain, on, memory_order_relaxed); }
bool sl_avx512_quants_has_gfni(void) { return __builtin_cpu_supports("gfni"); }
static bool use_gfni(void) { return !atomic_load_explicit(&g_force_plain, memory_order_relaxed) && sl_avx512_quants_has_gfni(); }

#define QDOT_ENTRY(name)                                                                              \
    float sl_avx512_##name(const void *restrict w, const void *restrict y, int64_t n)                 \
    {                                                                                                 \
        return use_gfni() ? sl_avx512gfni_##name(w, y, n) : sl_avx512plain_##name(w, y, n);          \
    }
QDOT_ENTRY(dot_q5_0_q8_0) QDOT_ENTRY(dot_iq4_nl_q8_0) QDOT_ENTRY(dot_q2_k_q8_k) QDOT_ENTRY(dot_q3_k_q8_k)
QDOT_ENTRY(dot_iq4_xs_q8_k)
#undef QDOT_ENTRY
#endif

#elif !SL_AVX512Q_GFNI   /* not x86: the AVX-512 set is never handed out */
void sl_avx512_quants_force_plain(bool on) { (void)on; }
bool sl_avx512_quants_has_gfni(void) { return false; }
#endif
