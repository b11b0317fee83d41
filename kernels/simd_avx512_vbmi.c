/* kernels/simd_avx512_vbmi.c — AVX-512 codebook dots (IQ3_XXS, IQ2_XS x Q8_K) that look the
 * grid points up with byte permutes (VBMI: vpermi2b, vpermb, vpmultishiftqb; BITALG: vpopcntb)
 * instead of gathering them.
 *
 * Why: vpgatherdd/vpgatherdq are microcoded and slow (more so with the gather-data-sampling
 * mitigation), and at ~2-3 GB/s they were the whole cost of these dots; a 128-byte table lookup of
 * 64 indices is one vpermi2b.  So each grid is split into byte planes (plane j = coordinate j of
 * every point, or for IQ2_XS the two bytes of each point's 16-bit code), 128 entries per pair of
 * registers; bit 7 (and bit 8) of the index pick among pairs with a blend.  IQ3_S stays on the
 * gathers: its 512-point grid needs twice the lookups, and a byte-permute version (two 6-bit code
 * planes) measured 52% of the memory bandwidth against the gathers' 62% (docs/benchmarks.md).
 *
 * Same contract as simd_avx512_iq.c: S of a super-block is the exact int32 sum, the float steps
 * are the portable ones, scalar, in the same order.  The AVX-512 set calls these when the CPU has
 * VBMI and BITALG (simd_avx512_iq.c checks), else the gather versions.  Signs: per group of 8 one
 * byte (IQ2_XS/IQ3_XXS: 7 stored bits + parity from vpopcntb), used as the opmask that negates
 * the activations (never -128).  Products: vpmaddubsw of the unsigned grid bytes (<= 62) with
 * the signed activations (pairs <= 2 * 62 * 127 < 2^15), then vpdpwssd with the int16 scales.
 */
#include "kernels/iq_common.h"
#include "kernels/simd.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <pthread.h>

#define VBMI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx512bitalg,avx2,fma,f16c,bmi2")))

/* Byte planes of the grids, 64-byte aligned for the table loads. */
typedef struct grid_planes {
    _Alignas(64) uint8_t iq3xxs[4][SL_IQ3XXS_N];
    _Alignas(64) uint8_t iq2xs[2][SL_IQ2XS_N];   /* low and high byte of the 16-bit code */
} grid_planes;

static grid_planes g_planes;
static pthread_once_t g_planes_once = PTHREAD_ONCE_INIT;

static void build_planes(void)
{
    const sl_iq_grids *g = sl_iq_grids_get();
    for (int i = 0; i < SL_IQ3XXS_N; i++)
        for (int j = 0; j < 4; j++) g_planes.iq3xxs[j][i] = (uint8_t)sl_iq_coord32(g->iq3xxs[i], j);
    int n;
    const uint16_t *codes = sl_iq_grid_codes(SL_IQG_IQ2XS, &n);
    for (int i = 0; i < n && i < SL_IQ2XS_N; i++) {
        g_planes.iq2xs[0][i] = (uint8_t)codes[i];
        g_planes.iq2xs[1][i] = (uint8_t)(codes[i] >> 8);
    }
}

static const grid_planes *planes(void)
{
    pthread_once(&g_planes_once, build_planes);
    return &g_planes;
}

VBMI static inline __m512i ld(const void *p) { return _mm512_loadu_si512(p); }

/* (float)S by vcvtdq2ps: the scalar vcvtsi2ss merges into its destination, and gcc picked the
 * accumulator's register, chaining every super-block's conversion to the previous sum. */
VBMI static inline float i2f(int32_t S) { return _mm_cvtss_f32(_mm_cvtepi32_ps(_mm_cvtsi32_si128(S))); }

/* Byte b = t[idx[b]] for a 256-entry table (bit 7 of idx: `hi7`). */
VBMI static inline __m512i look256(const uint8_t *t, __m512i idx, __mmask64 hi7)
{
    const __m512i lo = _mm512_permutex2var_epi8(ld(t), idx, ld(t + 64));
    const __m512i up = _mm512_permutex2var_epi8(ld(t + 128), idx, ld(t + 192));
    return _mm512_mask_blend_epi8(hi7, lo, up);
}

/* The same for 512 entries (index bit 8: `hi8`). */
VBMI static inline __m512i look512(const uint8_t *t, __m512i idx, __mmask64 hi7, __mmask64 hi8)
{
    return _mm512_mask_blend_epi8(hi8, look256(t, idx, hi7), look256(t + 256, idx, hi7));
}

/* Points 16r..16r+15 (r < 4) as 4 coordinate bytes each, element order, from the 4 planes looked
 * up with indices permuted by `transpose16` (the unpacks interleave within 128-bit lanes: lane L of
 * unpack result r holds points 16L + 4r..4r+3, so the indices go in with L and r swapped). */
VBMI static inline void interleave_planes(const __m512i p[4], __m512i out[4])
{
    const __m512i a = _mm512_unpacklo_epi8(p[0], p[1]), b = _mm512_unpacklo_epi8(p[2], p[3]);
    const __m512i c = _mm512_unpackhi_epi8(p[0], p[1]), d = _mm512_unpackhi_epi8(p[2], p[3]);
    out[0] = _mm512_unpacklo_epi16(a, b);
    out[1] = _mm512_unpackhi_epi16(a, b);
    out[2] = _mm512_unpacklo_epi16(c, d);
    out[3] = _mm512_unpackhi_epi16(c, d);
}

VBMI static inline __m512i transpose16(void)
{
    return _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
}

/* 7-bit sign fields (one per byte, bit 7 clear) completed with their parity bit. */
VBMI static inline __m256i sign8_bytes(__m256i f)
{
    const __m256i par = _mm256_and_si256(_mm256_popcnt_epi8(f), _mm256_set1_epi8(1));
    return _mm256_or_si256(f, _mm256_slli_epi16(par, 7));
}

/* The int16 scale of each element pair of output register r (elements 64r..64r+63) from 8 int32
 * sub-block scales L (low 256 bits: sub-block 2r, high: 2r + 1), as L | L << 16 lanes. */
VBMI static inline __m512i scale_of_pair(__m512i l2, int r)
{
    const __m512i idx = _mm512_inserti64x4(_mm512_set1_epi32(2 * r), _mm256_set1_epi32(2 * r + 1), 1);
    return _mm512_permutexvar_epi32(idx, l2);
}

/* acc + scaled pair sums of 64 elements: grid bytes x activations negated under `signs`. */
VBMI static inline __m512i dot64(__m512i acc, __m512i grid, uint64_t signs, const int8_t *q, __m512i scale)
{
    const __m512i a = ld(q);
    const __m512i sa = _mm512_mask_sub_epi8(a, (__mmask64)signs, _mm512_setzero_si512(), a);
    return _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(grid, sa), scale);
}

/* Contract: as sl_qdot_iq3_xxs_q8_k (same bits). */
VBMI float sl_avx512vbmi_dot_iq3_xxs_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const uint8_t (*T)[SL_IQ3XXS_N] = planes()->iq3xxs;
    const sl_block_iq3_xxs *w = vw;
    const sl_block_q8_k *y = vy;
    /* per qword (two sub-blocks' sign words): the four 7-bit fields of each at bits 0, 7, 14, 21 */
    const __m256i fields = _mm256_set1_epi64x(0x352e2720150e0700ll);
    const __m256i m7f = _mm256_set1_epi8(0x7f), one = _mm256_set1_epi32(1);
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        const __m512i idx = _mm512_permutexvar_epi32(transpose16(), ld(w[i].qs));
        const __mmask64 hi7 = _mm512_movepi8_mask(idx);
        __m512i p[4], g[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) p[j] = look256(T[j], idx, hi7);
        interleave_planes(p, g);
        const __m256i aux = _mm256_loadu_si256((const __m256i *)(w[i].qs + SL_QK_K / 4));
        uint64_t sb[4];
        _mm256_storeu_si256((__m256i *)sb, sign8_bytes(_mm256_and_si256(_mm256_multishift_epi64_epi8(fields, aux), m7f)));
        const __m256i L = _mm256_add_epi32(_mm256_slli_epi32(_mm256_srli_epi32(aux, 28), 1), one);
        const __m512i l2 = _mm512_castsi256_si512(_mm256_or_si256(L, _mm256_slli_epi32(L, 16)));
        __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) s = dot64(s, g[r], sb[r], y[i].qs + 64 * r, scale_of_pair(l2, r));
        const int32_t S = _mm512_reduce_add_epi32(s);
        acc = acc + (_cvtsh_ss(w[i].d) * y[i].d) * i2f(S);
    }
    return 0.25f * acc;
}

/* Contract: as sl_qdot_iq2_xs_q8_k (same bits).  A super-block has 32 points (9-bit index | 7 sign
 * bits << 9 in each u16): the two code bytes of each are looked up, vpermb puts point 8r + t's
 * code in qword t of register r, vpmultishiftqb spreads its 2-bit fields to bytes and vpermb maps
 * them to the grid values 8, 25, 43.  Scales: a nibble per 16 elements (one 128-bit lane). */
VBMI float sl_avx512vbmi_dot_iq2_xs_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const uint8_t (*T)[SL_IQ2XS_N] = planes()->iq2xs;
    const sl_block_iq2_xs *w = vw;
    const sl_block_q8_k *y = vy;
    const __m512i fields = _mm512_set1_epi64(0x0e0c0a0806040200ll);
    /* the value of a 2-bit code, indexed by the low 6 bits of a multishift byte: 8, 25, 43, (43) */
    const __m512i vals64 = _mm512_set1_epi32(0x2b2b1908);
    const __m512i pick0 = _mm512_setr_epi64(0x2000, 0x2101, 0x2202, 0x2303, 0x2404, 0x2505, 0x2606, 0x2707);
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        const __m512i q = ld(w[i].qs);
        const __m512i idx = _mm512_castsi256_si512(_mm512_cvtepi16_epi8(q));
        const __mmask64 hi7 = _mm512_movepi8_mask(idx);
        const __mmask64 hi8 = (__mmask64)_mm512_test_epi16_mask(q, _mm512_set1_epi16(0x100));
        const __m512i lo = look512(T[0], idx, hi7, hi8), hi = look512(T[1], idx, hi7, hi8);
        const __m512i codes = _mm512_inserti64x4(lo, _mm512_castsi512_si256(hi), 1);   /* point k: bytes k, 32 + k */
        const __m256i f = _mm512_cvtepi16_epi8(_mm512_srli_epi16(q, 9));
        uint64_t sb[4];
        _mm256_storeu_si256((__m256i *)sb, sign8_bytes(f));
        /* the 16 scales, nibble k of the 8 bytes = elements 16k..16k+15 */
        uint64_t sc;
        memcpy(&sc, w[i].scales, 8);
        const __m128i nib = _mm_set_epi64x((long long)_pdep_u64(sc >> 32, 0x0f0f0f0f0f0f0f0full),
                                           (long long)_pdep_u64(sc & 0xffffffffu, 0x0f0f0f0f0f0f0f0full));
        /* L = 2s + 1 in both int16 halves of dword k (vpermd then broadcasts it to a 128-bit lane) */
        const __m512i L1 = _mm512_add_epi32(_mm512_slli_epi32(_mm512_cvtepu8_epi32(nib), 1), _mm512_set1_epi32(1));
        const __m512i L = _mm512_or_si512(L1, _mm512_slli_epi32(L1, 16));
        __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            /* qword t: byte 0 = low code byte of point 8r + t, byte 1 = its high byte */
            const __m512i pick2 = _mm512_add_epi64(pick0, _mm512_set1_epi64(0x808ll * r));
            const __m512i code = _mm512_permutexvar_epi8(pick2, codes);
            const __m512i grid = _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(fields, code), vals64);
            const __m512i scale = _mm512_permutexvar_epi32(
                _mm512_add_epi32(_mm512_set1_epi32(4 * r), _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3)), L);
            s = dot64(s, grid, sb[r], y[i].qs + 64 * r, scale);
        }
        const int32_t S = _mm512_reduce_add_epi32(s);
        acc = acc + (_cvtsh_ss(w[i].d) * y[i].d) * i2f(S);
    }
    return 0.125f * acc;
}

#endif
