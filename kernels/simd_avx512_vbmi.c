/* kernels/simd_avx512_vbmi.c — AVX-512 codebook dots (IQ3_S, IQ3_XXS, IQ2_XS, IQ2_XXS, IQ2_S x Q8_K;
 * single and 4-vector forms) that look the grid points up with byte permutes (VBMI: vpermi2b,
 * vpermb, vpmultishiftqb; BITALG: vpopcntb, vpshufbitqmb; GFNI: vgf2p8affineqb) instead of
 * gathering them.
 *
 * Why: vpgatherdd/vpgatherdq are slow here (a 16-lane gather ~6-10 cycles), and a 128-byte table
 * lookup of 64 indices is one vpermi2b (2 cycles of port 5).  Port 5 (every shuffle) is then the
 * bottleneck, so the layout is chosen to need few of them:
 *   - IQ3_S and IQ3_XXS coordinates take 8 values, so a point's 4 coordinates pack into two bytes
 *     of nibbles (IQ3_S: the values 1..15 themselves; IQ3_XXS: the value's index, mapped to
 *     4..62 by one vpshufb at the end): two lookups per point instead of four byte planes;
 *   - IQ2_XS, IQ2_XXS and IQ2_S points are 8 coordinates of 2 bits (c0, c1), stored as two bit
 *     planes (a byte of every coordinate's c0, one of its c1): the planes of two super-blocks are
 *     looked up together, and affine maps over GF(2) (vgf2p8affineqb, port 0) do the rest — one
 *     with the unpacked planes as its matrix moves each coordinate's two bits into its own byte
 *     (a bit transpose, 4 points per register), one per register turns them into 8, 25, 43
 *     (and one makes the 8 signs from the stored 7 bits);
 *   - the loop overlaps the lookups of the next two super-blocks with the products of these two
 *     (dot_staged), and the 4-vector forms reuse one lookup for four activation rows; its body is
 *     one basic block (stage 1 of the next pair unconditional, the last iteration peeled, the
 *     prefetches and float steps unrolled), so gcc schedules the two stages' instructions together;
 *   - a super-block's int32 lanes are reduced four super-blocks at a time (5 shuffles, 2 blends
 *     and a shift for four instead of 6 shuffles each), and the per-sub-block scales are broadcast
 *     from memory (loads, no shuffle);
 *   - every vector uop counts, whichever port it needs (timing-only removals: ~0.6 cycle per
 *     super-block each; scalar vmulss/vaddss and xmm conversions take ports 0 and 5 too while
 *     512-bit uops run): docs/benchmarks.md, "IQ2_XS: fewer uops, one basic block".
 *
 * Same contract as simd_avx512_iq.c: S of a super-block is the exact int32 sum (lane sums in any
 * order: integer addition, |partial sums| below the type's bound < 2^31), (float)S by the same
 * round-to-nearest conversion, then the portable float steps, scalar, in the same order.  The
 * AVX-512 set calls these when the CPU has VBMI, BITALG, BMI2 and GFNI (simd_avx512_iq.c checks),
 * else the gather versions.  Signs: per group of 8 one byte (IQ2_XS, IQ2_XXS, IQ3_XXS: 7 stored
 * bits + parity, by vpopcntb or the affine map), used as the opmask that negates the activations
 * (never -128).  Products: vpmaddubsw of the unsigned grid bytes (<= 62) with the signed
 * activations (pairs <= 2 * 62 * 127 < 2^15), then vpdpwssd with the int16 scales.
 */
#include "kernels/iq_common.h"
#include "kernels/simd.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <pthread.h>

#define VBMI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx512bitalg,gfni,avx2,fma,f16c,bmi2")))

/* The grids as byte planes, 64-byte aligned for the table loads. */
typedef struct grid_planes {
    /* IQ3_XXS, IQ3_S: plane 0 = coordinate 0 | coordinate 1 << 4, plane 1 = 2 | 3 << 4, as the
     * index of the value (IQ3_XXS, k_iq3xxs_vals) or the value itself (IQ3_S, 1..15) */
    _Alignas(64) uint8_t iq3xxs[2][SL_IQ3XXS_N];
    _Alignas(64) uint8_t iq3s[2][SL_IQ3S_N];
    _Alignas(64) uint8_t iq2xs[2][SL_IQ2XS_N];   /* bit planes c0, c1 of the points (bit_plane) */
    uint8_t iq3xxs_vals[16];                      /* value of each IQ3_XXS coordinate index */
    /* The vpdpwssd scale operand of one 64-element register from a byte of two 4-bit scales
     * s0 | s1 << 4, L = 2s + 1 per int16: per32[b] = 16 x L(s0), 16 x L(s1) (IQ3_S, IQ3_XXS: a
     * scale per 32 elements); per16[b] = 8 x L(s0), 8 x L(s1) (IQ2_XS: per 16, half a register).
     * A load (or a memory operand) instead of unpacking and shuffling the scales. */
    _Alignas(64) int16_t per32[256][32];
    _Alignas(32) int16_t per16[256][16];
    /* IQ2_XS pair lookups (see pair_iq2_xs): vpermt2b controls of the low / high index bytes of
     * two super-blocks in lookup order, and the vpermb control from lookup to element order */
    _Alignas(64) uint8_t iq2xs_lo_ctrl[64], iq2xs_hi_ctrl[64], iq2xs_to_elem[64];
    /* IQ2_XXS: the bit planes of its 256-point grid, the vpermt2b controls of the index bytes
     * in lookup order and of the sign fields in element order */
    _Alignas(64) uint8_t iq2xxs[2][SL_IQ2XXS_N];
    _Alignas(64) uint8_t iq2xxs_lookup_ctrl[64], iq2xxs_elem_ctrl[64];
    /* IQ2_S: the bit planes of its 1024-point grid; the vpermt2b control of the index bytes in
     * lookup order, and the vpshufbitqmb ones that pick bits 8 and 9 of each index from qh */
    _Alignas(64) uint8_t iq2s[2][SL_IQ2S_N];
    _Alignas(64) uint8_t iq2s_lookup_ctrl[64], iq2s_bit8_ctrl[64], iq2s_bit9_ctrl[64];
} grid_planes;

static grid_planes g_planes;
static pthread_once_t g_planes_once = PTHREAD_ONCE_INIT;

/* Bit b of every 2-bit field of a 16-bit grid code (sl_iq_grid_codes: coordinate j in bits 2j,
 * 2j + 1): bit j = bit 2j + b. */
static uint8_t bit_plane(uint16_t code, int b)
{
    uint8_t r = 0;
    for (int j = 0; j < 8; j++) r |= (uint8_t)(((code >> (2 * j + b)) & 1) << j);
    return r;
}

static void build_planes(void)
{
    int n;
    const uint16_t *codes = sl_iq_grid_codes(SL_IQG_IQ3XXS, &n);   /* 3-bit value indices */
    for (int i = 0; i < n && i < SL_IQ3XXS_N; i++)
        for (int h = 0; h < 2; h++) g_planes.iq3xxs[h][i] = (uint8_t)(((codes[i] >> 6 * h) & 7) | ((codes[i] >> (6 * h + 3)) & 7) << 4);
    /* the value set from the expanded grid: index k's value is the coordinate of any point with code k */
    const sl_iq_grids *g = sl_iq_grids_get();
    for (int i = 0; i < n && i < SL_IQ3XXS_N; i++)
        for (int j = 0; j < 4; j++) g_planes.iq3xxs_vals[(codes[i] >> 3 * j) & 7] = (uint8_t)sl_iq_coord32(g->iq3xxs[i], j);
    for (int i = 0; i < SL_IQ3S_N; i++)
        for (int h = 0; h < 2; h++)
            g_planes.iq3s[h][i] = (uint8_t)(sl_iq_coord32(g->iq3s[i], 2 * h) | sl_iq_coord32(g->iq3s[i], 2 * h + 1) << 4);
    for (int b = 0; b < 256; b++)
        for (int k = 0; k < 32; k++) {
            g_planes.per32[b][k] = (int16_t)(2 * ((b >> (k < 16 ? 0 : 4)) & 15) + 1);
            if (k < 16) g_planes.per16[b][k] = (int16_t)(2 * ((b >> (k < 8 ? 0 : 4)) & 15) + 1);
        }
    /* byte position 16L + i of the lookup order holds point w(8L + i mod 8) of block i / 8, where
     * point(w) = w / 4 + 8 (w mod 4): the byte unpacks then give the planes' words with qword t =
     * points t, t + 8, t + 16, t + 24 */
    for (int pos = 0; pos < 64; pos++) {
        const int L = pos / 16, i = pos % 16, blk = i / 8, w = 8 * L + i % 8, point = w / 4 + 8 * (w % 4);
        g_planes.iq2xs_lo_ctrl[pos] = (uint8_t)(64 * blk + 2 * point);
        g_planes.iq2xs_hi_ctrl[pos] = (uint8_t)(64 * blk + 2 * point + 1);
        g_planes.iq2xs_to_elem[32 * blk + point] = (uint8_t)pos;
        /* IQ2_XXS: point p's index is byte 8 (p / 4) + p mod 4 of its block's qs */
        g_planes.iq2xxs_lookup_ctrl[pos] = (uint8_t)(64 * blk + 8 * (point / 4) + point % 4);
        const int eb = pos / 32, ep = pos % 32;   /* element order: block, point */
        g_planes.iq2xxs_elem_ctrl[pos] = (uint8_t)(64 * eb + 8 * (ep / 4) + ep % 4);
        /* IQ2_S: the index's low byte is qs[point]; bits 8-9 are bits 2 (point mod 4) + 0, 1 of
         * qh[point / 4], in qword lane pos / 8 (which holds block (pos / 8) mod 2's qh) */
        g_planes.iq2s_lookup_ctrl[pos] = (uint8_t)(64 * blk + point);
        g_planes.iq2s_bit8_ctrl[pos] = (uint8_t)(8 * (point / 4) + 2 * (point % 4));
        g_planes.iq2s_bit9_ctrl[pos] = (uint8_t)(8 * (point / 4) + 2 * (point % 4) + 1);
    }
    codes = sl_iq_grid_codes(SL_IQG_IQ2S, &n);
    for (int i = 0; i < n && i < SL_IQ2S_N; i++) {
        g_planes.iq2s[0][i] = bit_plane(codes[i], 0);
        g_planes.iq2s[1][i] = bit_plane(codes[i], 1);
    }
    codes = sl_iq_grid_codes(SL_IQG_IQ2XXS, &n);
    for (int i = 0; i < n && i < SL_IQ2XXS_N; i++) {
        g_planes.iq2xxs[0][i] = bit_plane(codes[i], 0);
        g_planes.iq2xxs[1][i] = bit_plane(codes[i], 1);
    }
    codes = sl_iq_grid_codes(SL_IQG_IQ2XS, &n);
    for (int i = 0; i < n && i < SL_IQ2XS_N; i++) {
        g_planes.iq2xs[0][i] = bit_plane(codes[i], 0);
        g_planes.iq2xs[1][i] = bit_plane(codes[i], 1);
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

/* Which 64-entry segment each index byte falls in: bit 6 (`b6`), bit 7 (`b7`) and, for 512
 * entries, bit 8 (`b8`, from elsewhere). */
typedef struct { __mmask64 b6, b7, b8; } seg_masks;

VBMI static inline seg_masks segments(__m512i idx, __mmask64 b8)
{
    return (seg_masks){ _mm512_movepi8_mask(_mm512_add_epi8(idx, idx)), _mm512_movepi8_mask(idx), b8 };
}

/* Byte b = t[idx[b]] for a 128-entry table: vpermb of the first 64 entries, then the second
 * merged in under b6 (two one-uop permutes; vpermi2b costs the same on port 5 plus a copy of
 * the register it overwrites). */
VBMI static inline __m512i look128(const uint8_t *t, __m512i idx, __mmask64 b6)
{
    return _mm512_mask_permutexvar_epi8(_mm512_permutexvar_epi8(idx, ld(t)), b6, idx, ld(t + 64));
}

/* The same for 256 and 512 entries. */
VBMI static inline __m512i look256(const uint8_t *t, __m512i idx, seg_masks m)
{
    return _mm512_mask_blend_epi8(m.b7, look128(t, idx, m.b6), look128(t + 128, idx, m.b6));
}

VBMI static inline __m512i look512(const uint8_t *t, __m512i idx, seg_masks m)
{
    return _mm512_mask_blend_epi8(m.b8, look256(t, idx, m), look256(t + 256, idx, m));
}

/* look256 and look512 with fewer blends (IQ2_XS): 256 entries as one chain of merged permutes,
 * later merges overriding earlier ones (segment 1 under b6, 2 under b7, 3 under b6 & b7 last), and
 * 512 as two chains and one blend under b8: per 64 points and byte plane 8 vpermb and 1 blend
 * instead of 8 and 3, for one kandq shared by both planes; the chain's latency (4 permutes)
 * hides behind the staged loop. */
VBMI static inline __m512i look256_chain(const uint8_t *t, __m512i idx, __mmask64 b6, __mmask64 b7, __mmask64 b67)
{
    __m512i r = _mm512_permutexvar_epi8(idx, ld(t));
    r = _mm512_mask_permutexvar_epi8(r, b6, idx, ld(t + 64));
    r = _mm512_mask_permutexvar_epi8(r, b7, idx, ld(t + 128));
    return _mm512_mask_permutexvar_epi8(r, b67, idx, ld(t + 192));
}
VBMI static inline __m512i look512_chains(const uint8_t *t, __m512i idx, __mmask64 b6, __mmask64 b7, __mmask64 b67, __mmask64 b8)
{
    return _mm512_mask_blend_epi8(b8, look256_chain(t, idx, b6, b7, b67), look256_chain(t + 256, idx, b6, b7, b67));
}

/* The dword order the point indices go in with: the byte unpacks below interleave within 128-bit
 * lanes (lane L of unpack result m holds points 16L + 4m..4m+3), so the index dwords go in with L
 * and m swapped and result m comes out as points 16m..16m+15 in order. */
VBMI static inline __m512i transpose16(void)
{
    return _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
}

/* 64 points as 4 coordinate nibbles each, element order, from the two nibble planes looked up
 * with transposed indices (a: coordinates 0 | 1 << 4, b: 2 | 3 << 4): the first unpack pairs a
 * point's two plane bytes, the nibbles are split in place, the second unpack puts them in order. */
VBMI static inline void spread_nibble_planes(__m512i a, __m512i b, __m512i out[4])
{
    const __m512i m = _mm512_set1_epi8(0x0f);
    const __m512i u0 = _mm512_unpacklo_epi8(a, b), u1 = _mm512_unpackhi_epi8(a, b);
    const __m512i l0 = _mm512_and_si512(u0, m), h0 = _mm512_and_si512(_mm512_srli_epi16(u0, 4), m);
    const __m512i l1 = _mm512_and_si512(u1, m), h1 = _mm512_and_si512(_mm512_srli_epi16(u1, 4), m);
    out[0] = _mm512_unpacklo_epi8(l0, h0);
    out[1] = _mm512_unpackhi_epi8(l0, h0);
    out[2] = _mm512_unpacklo_epi8(l1, h1);
    out[3] = _mm512_unpackhi_epi8(l1, h1);
}

/* The same for value indices (IQ3_XXS: codes 0..7, bit 3 and bit 7 of every plane byte clear),
 * mapped to the values by vpshufb on the way: vpshufb reads only bits 0-3 (and 7) of an index, so
 * the low nibbles need no mask, and the shifted words' bytes have bit 7 clear (a neighbour's bit 3). */
VBMI static inline void spread_mapped_planes(__m512i a, __m512i b, __m512i vals, __m512i out[4])
{
    const __m512i u0 = _mm512_unpacklo_epi8(a, b), u1 = _mm512_unpackhi_epi8(a, b);
    const __m512i l0 = _mm512_shuffle_epi8(vals, u0), h0 = _mm512_shuffle_epi8(vals, _mm512_srli_epi16(u0, 4));
    const __m512i l1 = _mm512_shuffle_epi8(vals, u1), h1 = _mm512_shuffle_epi8(vals, _mm512_srli_epi16(u1, 4));
    out[0] = _mm512_unpacklo_epi8(l0, h0);
    out[1] = _mm512_unpackhi_epi8(l0, h0);
    out[2] = _mm512_unpacklo_epi8(l1, h1);
    out[3] = _mm512_unpackhi_epi8(l1, h1);
}

/* 7-bit sign fields (one per byte, bit 7 clear) completed with their parity bit. */
VBMI static inline __m256i sign8_bytes(__m256i f)
{
    const __m256i par = _mm256_and_si256(_mm256_popcnt_epi8(f), _mm256_set1_epi8(1));
    return _mm256_or_si256(f, _mm256_slli_epi16(par, 7));
}

/* p, hidden from the optimizer: it forwards a vector store to the loads of its parts as lane
 * extracts, and moves mask words through general registers (both port-5 shuffles), where a
 * load straight into an opmask or a broadcast is a plain load. */
static inline const void *opaque(const void *p)
{
    __asm__("" : "+r"(p));
    return p;
}

/* Opmask r of the stored sign words.  (An inline-asm kmovq from memory measured the same for the
 * single dots and slower for IQ2_S's 4-vector form: 34 against 41 G products/s, noisy.) */
VBMI static inline __mmask64 sign_mask(const __mmask64 *sb, int r)
{
    return _load_mask64((__mmask64 *)opaque(sb + r));   /* the words are __mmask64 objects (vector-stored or memcpy'd) */
}

/* The scaled pair sums of 64 elements (the first of a chain: vpmaddwd, no zeroed accumulator). */
VBMI static inline __m512i dot64_first(__m512i grid, __mmask64 signs, const int8_t *q, __m512i scale)
{
    const __m512i a = ld(q);
    const __m512i sa = _mm512_mask_sub_epi8(a, signs, _mm512_setzero_si512(), a);
    return _mm512_madd_epi16(_mm512_maddubs_epi16(grid, sa), scale);
}

/* acc + scaled pair sums of 64 elements: grid bytes x activations negated under `signs`. */
VBMI static inline __m512i dot64(__m512i acc, __m512i grid, __mmask64 signs, const int8_t *q, __m512i scale)
{
    const __m512i a = ld(q);
    const __m512i sa = _mm512_mask_sub_epi8(a, signs, _mm512_setzero_si512(), a);
    return _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(grid, sa), scale);
}

/* The lane sums of four super-blocks, (float)S each, into S[0..3]. */
VBMI static inline void reduce4(const __m512i s[4], float S[4])
{
    /* [a.lo + a.hi | b.hi + b.lo]: a blend and one shuffle instead of two shuffles */
    const __m512i ab = _mm512_add_epi32(_mm512_mask_blend_epi64(0xf0, s[0], s[1]), _mm512_shuffle_i64x2(s[0], s[1], 0x4e));
    const __m512i cd = _mm512_add_epi32(_mm512_mask_blend_epi64(0xf0, s[2], s[3]), _mm512_shuffle_i64x2(s[2], s[3], 0x4e));
    __m512i x = _mm512_add_epi32(_mm512_shuffle_i64x2(ab, cd, 0x88), _mm512_shuffle_i64x2(ab, cd, 0xdd));   /* 128-bit lane j: block j */
    x = _mm512_add_epi32(x, _mm512_shuffle_epi32(x, (_MM_PERM_ENUM)0x4e));
    x = _mm512_add_epi32(x, _mm512_srli_epi64(x, 32));   /* a shift (port 0), not a shuffle */
    float f[16];
    _mm512_storeu_ps(f, _mm512_cvtepi32_ps(x));
    for (int k = 0; k < 4; k++) S[k] = f[4 * k];
}

/* Software prefetch of the weights VBMI_PREFETCH_AHEAD bytes ahead of a group of blocks (each
 * line once; the blocks are not line-aligned) — as sl_prefetch_ahead, kernels/k_common.h, but
 * twice as far: these dots take ~30 cycles per super-block, and at 2 threads 2 KiB gave more
 * GB/s than 1 KiB in four of five interleaved 512 MiB runs for IQ2_XS (by 10-18%) and in three
 * of four for IQ3_S; 3 and 4 KiB were no better (docs/benchmarks.md, "Codebook kernels: third
 * pass"). */
#ifndef VBMI_PREFETCH_AHEAD
#define VBMI_PREFETCH_AHEAD (2 * SL_PREFETCH_AHEAD)
#endif
static inline void prefetch_span(const uint8_t *p, size_t len)
{
    const uintptr_t a = ((uintptr_t)p + VBMI_PREFETCH_AHEAD) & ~(uintptr_t)63, end = (uintptr_t)p + VBMI_PREFETCH_AHEAD + len;
    for (uintptr_t l = a; l < end; l += 64) __builtin_prefetch((const void *)l, 0, 3);
}

/* One super-block's int32 lanes (their sum is S), per type (the tail of a row). */
typedef __m512i (*block_fn)(const uint8_t *blk, const int8_t *q, const grid_planes *P);

/* Two consecutive super-blocks in two stages: stage 1 looks the grid points up (v, and the sign
 * words where they are computed), stage 2 forms the products with the activations (out: the
 * int32 lanes of each block).  The loop issues stage 1 of the next pair before stage 2 of this
 * one: a pair's lookups and products are one long dependency chain of ~200 instructions, which
 * filled the scheduler before the next pair's loads could start: IQ2_XS, in L1/L2 on one thread,
 * took ~37 cycles per super-block in one piece and ~29 staged (docs/benchmarks.md).  The IQ3
 * types measured the same either way; they share the loop. */
typedef struct staged_pair { __m512i v[8]; __mmask64 sb[8]; } staged_pair;
typedef void (*stage1_fn)(const uint8_t *blk, const grid_planes *P, staged_pair *st);
typedef void (*stage2_fn)(const uint8_t *blk, const sl_block_q8_k *y, const grid_planes *P, const staged_pair *st, __m512i out[2]);

/* f16(d) of the block at p (its first two bytes) by vcvtph2ps from memory: the 8-byte load stays
 * inside the block, and the register forms (vpinsrw + vcvtph2ps xmm) are two port-5 uops. */
VBMI static inline float f16_at(const uint8_t *p)
{
    __m128 f;
    __asm__("vcvtph2ps %1, %0" : "=v"(f) : "m"(*(const uint8_t(*)[8])p));   /* gcc splits the intrinsic's load off */
    return _mm_cvtss_f32(f);
}

/* prefetch_span of 4 blocks (`bytes` a constant: the loop unrolls, and each line of the span gets
 * a prefetch, a few twice), without a loop left in the iteration. */
static inline void prefetch4(const uint8_t *p, size_t bytes)
{
    p += VBMI_PREFETCH_AHEAD;
#pragma GCC unroll 8
    for (size_t o = 0; o < 4 * bytes; o += 64) __builtin_prefetch(p + o, 0, 3);
    __builtin_prefetch(p + 4 * bytes - 1, 0, 3);
}

/* One iteration of dot_staged: blocks i..i+3, and stage 1 of i+4 when `more` (a constant: the
 * loop runs it with 1, the peeled last iteration with 0).  Without a branch or inner loop in the
 * body (the conditional stage 1, the prefetch loop and gcc's rolled float loop each ended a basic
 * block), IQ2_XS in L1/L2 on one thread took ~3% fewer cycles per super-block (interleaved
 * in-process A/B, 64 super-blocks: 27.6 against 28.5, the other IQ2_XS changes of
 * docs/benchmarks.md "IQ2_XS: fewer uops, one basic block" in both). */
VBMI static inline __attribute__((always_inline)) float staged_iter(const uint8_t *w, size_t bytes, const sl_block_q8_k *y, int64_t i, float acc,
                                                                    stage1_fn s1, stage2_fn s2, const grid_planes *P, staged_pair st[2], int more)
{
    __m512i s[4];
    float S[4];
    prefetch4(w + (size_t)i * bytes, bytes);
    s1(w + (size_t)(i + 2) * bytes, P, &st[1]);
    s2(w + (size_t)i * bytes, y + i, P, &st[0], s);
    if (more) s1(w + (size_t)(i + 4) * bytes, P, &st[0]);
    s2(w + (size_t)(i + 2) * bytes, y + i + 2, P, &st[1], s + 2);
    reduce4(s, S);
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) acc = acc + (f16_at(w + (size_t)(i + k) * bytes) * y[i + k].d) * S[k];
    return acc;
}

/* acc = acc + (f16(d) * y.d) * (float)S over the super-blocks in order, S of four at a time
 * (inlined with constant `f`, `s1`, `s2`: one loop per type). */
VBMI static inline __attribute__((always_inline)) float dot_staged(const uint8_t *w, size_t bytes, const sl_block_q8_k *y, int64_t nsb,
                                                                  block_fn f, stage1_fn s1, stage2_fn s2)
{
    const grid_planes *P = planes();
    const int64_t n4 = nsb / 4 * 4;
    float acc = 0;
    staged_pair st[2];
    if (n4 > 0) s1(w, P, &st[0]);
    int64_t i = 0;
    for (; i + 4 < n4; i += 4) acc = staged_iter(w, bytes, y, i, acc, s1, s2, P, st, 1);
    if (i < n4) acc = staged_iter(w, bytes, y, i, acc, s1, s2, P, st, 0);
    for (i = n4; i < nsb; i++) {
        const int32_t S = _mm512_reduce_add_epi32(f(w + (size_t)i * bytes, y[i].qs, P));
        acc = acc + (f16_at(w + (size_t)i * bytes) * y[i].d) * i2f(S);
    }
    return acc;
}

/* out[r] = scale * dot_staged of rows r < nrows (row r at w + r * row_bytes) with the same y: packed
 * rows of a multiple of 4 super-blocks run as one staged sequence, the next row's first lookups
 * issued in this row's last iteration (its blocks follow in memory), so the pipeline neither drains
 * nor refills at a row's end and the call and its setup are paid once.  8 rows of 4096 columns in
 * L1/L2, one thread: IQ2_XS ~5% fewer ns per super-block than row by row, IQ2_XXS 2-5%, IQ3_XXS
 * 2-3%, IQ2_S and IQ3_S the same (docs/benchmarks.md, "IQ2_XS at the 80% line").  Other shapes:
 * row by row.  Same bits as dot_staged. */
VBMI static inline __attribute__((always_inline)) void dot_staged_rows(const uint8_t *w, size_t row_bytes, size_t bytes, const sl_block_q8_k *y,
                                                                       int64_t nsb, int64_t nrows, float scale, float *out,
                                                                       block_fn f, stage1_fn s1, stage2_fn s2)
{
    if (nsb % 4 || nsb == 0 || row_bytes != (size_t)nsb * bytes) {
        for (int64_t r = 0; r < nrows; r++) out[r] = scale * dot_staged(w + (size_t)r * row_bytes, bytes, y, nsb, f, s1, s2);
        return;
    }
    const grid_planes *P = planes();
    staged_pair st[2];
    if (nrows > 0) s1(w, P, &st[0]);
    for (int64_t r = 0; r < nrows; r++) {
        const uint8_t *wr = w + (size_t)r * row_bytes;
        float acc = 0;
        int64_t i = 0;
        for (; i + 4 < nsb; i += 4) acc = staged_iter(wr, bytes, y, i, acc, s1, s2, P, st, 1);
        if (r + 1 < nrows) acc = staged_iter(wr, bytes, y, i, acc, s1, s2, P, st, 1);
        else acc = staged_iter(wr, bytes, y, i, acc, s1, s2, P, st, 0);
        out[r] = scale * acc;
    }
}

/* The same row against 4 activation vectors (y + v * ys): the lookups once, the products and
 * the float steps per vector, each in the single dot's order (out[v] has its bits). */
VBMI static inline __attribute__((always_inline)) void dot4_staged(const uint8_t *w, size_t bytes, const uint8_t *y, size_t ys, int64_t nsb,
                                                                   block_fn f, stage1_fn s1, stage2_fn s2, float out[4])
{
    const grid_planes *P = planes();
    const int64_t n4 = nsb / 4 * 4;
    float acc[4] = { 0, 0, 0, 0 };
    staged_pair st[2];
    if (n4 > 0) s1(w, P, &st[0]);
    for (int64_t i = 0; i < n4; i += 4) {
        __m512i s[4][4];
        prefetch_span(w + (size_t)i * bytes, 4 * bytes);
        s1(w + (size_t)(i + 2) * bytes, P, &st[1]);
        for (int v = 0; v < 4; v++) s2(w + (size_t)i * bytes, (const sl_block_q8_k *)(y + v * ys) + i, P, &st[0], s[v]);
        if (i + 4 < n4) s1(w + (size_t)(i + 4) * bytes, P, &st[0]);
        for (int v = 0; v < 4; v++) s2(w + (size_t)(i + 2) * bytes, (const sl_block_q8_k *)(y + v * ys) + i + 2, P, &st[1], s[v] + 2);
        for (int v = 0; v < 4; v++) {
            const sl_block_q8_k *q = (const sl_block_q8_k *)(y + v * ys);
            float S[4];
            reduce4(s[v], S);
            for (int k = 0; k < 4; k++) {
                uint16_t d;
                memcpy(&d, w + (size_t)(i + k) * bytes, 2);
                acc[v] = acc[v] + (_cvtsh_ss(d) * q[i + k].d) * S[k];
            }
        }
    }
    for (int64_t i = n4; i < nsb; i++)
        for (int v = 0; v < 4; v++) {
            const sl_block_q8_k *q = (const sl_block_q8_k *)(y + v * ys);
            const int32_t S = _mm512_reduce_add_epi32(f(w + (size_t)i * bytes, q[i].qs, P));
            uint16_t d;
            memcpy(&d, w + (size_t)i * bytes, 2);
            acc[v] = acc[v] + (_cvtsh_ss(d) * q[i].d) * i2f(S);
        }
    for (int v = 0; v < 4; v++) out[v] = acc[v];
}

/* IQ3_XXS: 64 byte indices (256 points), transposed; then 8 sign words of 4 x 7 bits + scale.
 * Lookup: the block's four registers of grid bytes g and its sign words sb. */
VBMI static inline __attribute__((always_inline)) void lookup_iq3_xxs(const uint8_t *blk, const grid_planes *P, __m512i g[4], __mmask64 sb[4])
{
    const sl_block_iq3_xxs *b = (const sl_block_iq3_xxs *)blk;
    /* per qword (two sub-blocks' sign words): the four 7-bit fields of each at bits 0, 7, 14, 21 */
    const __m256i fields = _mm256_set1_epi64x(0x352e2720150e0700ll);
    const __m512i idx = _mm512_permutexvar_epi32(transpose16(), ld(b->qs));
    const seg_masks m = segments(idx, 0);
    const __m512i vals = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)P->iq3xxs_vals));
    spread_mapped_planes(look256(P->iq3xxs[0], idx, m), look256(P->iq3xxs[1], idx, m), vals, g);
    const __m256i aux = _mm256_loadu_si256((const __m256i *)(b->qs + SL_QK_K / 4));
    _mm256_storeu_si256((__m256i *)sb, sign8_bytes(_mm256_and_si256(_mm256_multishift_epi64_epi8(fields, aux), _mm256_set1_epi8(0x7f))));
}

/* Products: the int32 lanes of the block from its looked-up g, sb. */
VBMI static inline __attribute__((always_inline)) __m512i products_iq3_xxs(const uint8_t *blk, const int8_t *q, const grid_planes *P,
                                                                         const __m512i g[4], const __mmask64 sb[4])
{
    const sl_block_iq3_xxs *b = (const sl_block_iq3_xxs *)blk;
    uint64_t a2[4];   /* the sign-and-scale words of sub-blocks 2r, 2r + 1: scales at bits 28-31, 60-63 */
    memcpy(a2, opaque(b->qs + SL_QK_K / 4), sizeof a2);
    __m512i s[2] = { _mm512_setzero_si512(), _mm512_setzero_si512() };
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        const unsigned sc = (unsigned)_pext_u64(a2[r], 0xf0000000f0000000ull);
        s[r & 1] = dot64(s[r & 1], g[r], sign_mask(sb, r), q + 64 * r, ld(P->per32[sc]));
    }
    return _mm512_add_epi32(s[0], s[1]);
}

VBMI static inline __attribute__((always_inline)) __m512i block_iq3_xxs(const uint8_t *blk, const int8_t *q, const grid_planes *P)
{
    __m512i g[4];
    __mmask64 sb[4];
    lookup_iq3_xxs(blk, P, g, sb);
    return products_iq3_xxs(blk, q, P, g, sb);
}

VBMI static inline __attribute__((always_inline)) void stage1_iq3_xxs(const uint8_t *blk, const grid_planes *P, staged_pair *st)
{
    lookup_iq3_xxs(blk, P, st->v, st->sb);
    lookup_iq3_xxs(blk + sizeof(sl_block_iq3_xxs), P, st->v + 4, st->sb + 4);
}

VBMI static inline __attribute__((always_inline)) void stage2_iq3_xxs(const uint8_t *blk, const sl_block_q8_k *y, const grid_planes *P,
                                                                      const staged_pair *st, __m512i out[2])
{
    out[0] = products_iq3_xxs(blk, y[0].qs, P, st->v, st->sb);
    out[1] = products_iq3_xxs(blk + sizeof(sl_block_iq3_xxs), y[1].qs, P, st->v + 4, st->sb + 4);
}

/* IQ3_S: 64 points of 9-bit index: the low bytes go in transposed, bit 8 of each (qh, in point
 * order) is picked for its permuted position by vpshufbitqmb.  Signs: the 8 bytes of sub-blocks
 * 2r, 2r + 1 are the opmask of register r as stored.  Lookup: the block's grid bytes g. */
VBMI static inline __attribute__((always_inline)) void lookup_iq3_s(const uint8_t *blk, const grid_planes *P, __m512i g[4])
{
    const sl_block_iq3_s *b = (const sl_block_iq3_s *)blk;
    const __m512i tr = transpose16();
    /* the point each byte position holds after the transpose */
    const __m512i point_of = _mm512_permutexvar_epi32(tr, _mm512_setr_epi32(0x03020100, 0x07060504, 0x0b0a0908, 0x0f0e0d0c,
        0x13121110, 0x17161514, 0x1b1a1918, 0x1f1e1d1c, 0x23222120, 0x27262524, 0x2b2a2928, 0x2f2e2d2c,
        0x33323130, 0x37363534, 0x3b3a3938, 0x3f3e3d3c));
    const __m512i idx = _mm512_permutexvar_epi32(tr, ld(b->qs));
    uint64_t qh;
    memcpy(&qh, b->qh, 8);
    const seg_masks m = segments(idx, _mm512_bitshuffle_epi64_mask(_mm512_set1_epi64((long long)qh), point_of));
    spread_nibble_planes(look512(P->iq3s[0], idx, m), look512(P->iq3s[1], idx, m), g);
}

/* Products: the int32 lanes of the block from its looked-up g. */
VBMI static inline __attribute__((always_inline)) __m512i products_iq3_s(const uint8_t *blk, const int8_t *q, const grid_planes *P, const __m512i g[4])
{
    const sl_block_iq3_s *b = (const sl_block_iq3_s *)blk;
    __mmask64 sb[4];
    memcpy(sb, b->signs, sizeof sb);
    /* two accumulators: four chained vpdpwssd would be the longest latency of the block */
    __m512i s[2] = { _mm512_setzero_si512(), _mm512_setzero_si512() };
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) s[r & 1] = dot64(s[r & 1], g[r], sign_mask(sb, r), q + 64 * r, ld(P->per32[b->scales[r]]));
    return _mm512_add_epi32(s[0], s[1]);
}

VBMI static inline __attribute__((always_inline)) __m512i block_iq3_s(const uint8_t *blk, const int8_t *q, const grid_planes *P)
{
    __m512i g[4];
    lookup_iq3_s(blk, P, g);
    return products_iq3_s(blk, q, P, g);
}

VBMI static inline __attribute__((always_inline)) void stage1_iq3_s(const uint8_t *blk, const grid_planes *P, staged_pair *st)
{
    lookup_iq3_s(blk, P, st->v);
    lookup_iq3_s(blk + sizeof(sl_block_iq3_s), P, st->v + 4);
}

VBMI static inline __attribute__((always_inline)) void stage2_iq3_s(const uint8_t *blk, const sl_block_q8_k *y, const grid_planes *P,
                                                                    const staged_pair *st, __m512i out[2])
{
    out[0] = products_iq3_s(blk, y[0].qs, P, st->v);
    out[1] = products_iq3_s(blk + sizeof(sl_block_iq3_s), y[1].qs, P, st->v + 4);
}

/* IQ2_XS and IQ2_XXS, two super-blocks a, b at once, in two stages (dot_staged).  IQ2_XS points
 * are 9-bit indices | 7 sign bits << 9 in each u16; IQ2_XXS points are byte indices, 4 per
 * sub-block, beside a u32 of 4 x 7 sign bits and the sub-block's scale.  Both grids hold two
 * bit planes per point (c0 and c1 of its 8 coordinates).
 * Lookup: the index bytes of both blocks are picked by vpermt2b in lookup order (lookup_ctrl:
 * byte 16L + i holds point w / 4 + 8 (w mod 4), w = 8L + i mod 8, of block i / 8), one pair of
 * lookups of the two planes serves both blocks, and the byte unpacks of the two give each
 * block's planes with points t, t + 8, t + 16, t + 24 in qword t.  Signs: an affine map over GF(2)
 * completes each 7-bit field with its parity, in element order (sign_ctrl).
 * Products: iq2_spread moves coordinate j of the four points of qword t into byte j (one affine
 * map for the block), and iq2_grid picks point t + 8k's two bits of every byte and maps them to
 * 8, 25, 43 (register k: elements 64k..64k+63 in order, no permute).  A row's last one to three
 * super-blocks look up (a, a) and use block a's half. */

/* The entry points of an IQ2 type from its lookup_T(a, b, P, st) and products_T(b, q, P, st, h):
 * the single block (a row's tail: (a, a), block a's half) and the two stages of dot_staged. */
#define IQ2_STAGES(t)                                                                                             \
    VBMI static inline __attribute__((always_inline)) __m512i block_##t(const uint8_t *blk, const int8_t *q,       \
                                                                         const grid_planes *P)                     \
    {                                                                                                             \
        const sl_block_##t *b = (const sl_block_##t *)blk;                                                        \
        staged_pair st;                                                                                           \
        lookup_##t(b, b, P, &st);                                                                                 \
        return products_##t(b, q, P, &st, 0);                                                                     \
    }                                                                                                             \
    VBMI static inline __attribute__((always_inline)) void stage1_##t(const uint8_t *blk, const grid_planes *P,   \
                                                                       staged_pair *st)                            \
    {                                                                                                             \
        const sl_block_##t *b = (const sl_block_##t *)blk;                                                        \
        lookup_##t(b, b + 1, P, st);                                                                              \
    }                                                                                                             \
    VBMI static inline __attribute__((always_inline)) void stage2_##t(const uint8_t *blk, const sl_block_q8_k *y, \
                                                                       const grid_planes *P, const staged_pair *st, \
                                                                       __m512i out[2])                             \
    {                                                                                                             \
        const sl_block_##t *b = (const sl_block_##t *)blk;                                                        \
        out[0] = products_##t(b, y[0].qs, P, st, 0);                                                              \
        out[1] = products_##t(b + 1, y[1].qs, P, st, 1);                                                          \
    }

/* A block's 32 points as bit planes (word k of qword t: plane c0 | plane c1 << 8 of point
 * t + 8k), transposed by one affine map with the planes as its matrix (output bit i of byte j =
 * bit j of matrix byte 7 - i, the constant picking bit j): byte j of qword t gets coordinate j of
 * all four points, c0 of point t + 8k in bit 7 - 2k and c1 in bit 6 - 2k.  Before, a vpmultishiftqb
 * per register (port 5) did this: in L1/L2 on one thread, p10 of 300 alternating samples, 3-7%
 * fewer ns per super-block for IQ2_XS, IQ2_XXS, IQ2_S (docs/benchmarks.md, "Bit planes for the
 * IQ2 grids"). */
VBMI static inline __m512i iq2_spread(__m512i planes)
{
    return _mm512_gf2p8affine_epi64_epi8(_mm512_set1_epi64(0x8040201008040201ll), planes, 0);
}

/* Grid bytes of elements 64k..64k+63 from the spread: c0 = bit 7 - 2k, c1 = bit 6 - 2k -> 8, 25, 43
 * for (0, 0), (1, 0), (0, 1) (output bit i from matrix byte 7 - i: 0 <- c0 ^ c1, 1 <- c1, 4 <- c0,
 * 5 <- c1; xor 8: 8 + 17 c0 + 35 c1, the codes never having both bits). */
VBMI static inline __m512i iq2_grid(__m512i spread, int k)
{
    const uint64_t c0 = 1ull << (7 - 2 * k), c1 = 1ull << (6 - 2 * k);
    const __m512i to_value = _mm512_set1_epi64((long long)(((c0 | c1) << 56) | (c1 << 48) | (c0 << 24) | (c1 << 16)));
    return _mm512_gf2p8affine_epi64_epi8(spread, to_value, 8);
}

VBMI static inline __attribute__((always_inline)) void lookup_iq2_xs(const sl_block_iq2_xs *a, const sl_block_iq2_xs *b, const grid_planes *P,
                                                                     staged_pair *st)
{
    const __m512i qa = ld(a->qs), qb = ld(b->qs);
    const __m512i idx = _mm512_permutex2var_epi8(qa, ld(P->iq2xs_lo_ctrl), qb);
    const __m512i hib = _mm512_permutex2var_epi8(qa, ld(P->iq2xs_hi_ctrl), qb);   /* bit 8 | signs << 1 */
    /* bits 6 and 8 by vptestmb: one uop each where vpaddb/vpsllw + vpmovb2m are two */
    const __mmask64 b6 = _mm512_test_epi8_mask(idx, _mm512_set1_epi8(0x40)), b7 = _mm512_movepi8_mask(idx);
    const __mmask64 b67 = _kand_mask64(b6, b7), b8 = _mm512_test_epi8_mask(hib, _mm512_set1_epi8(1));
    const __m512i lo = look512_chains(P->iq2xs[0], idx, b6, b7, b67, b8), hi = look512_chains(P->iq2xs[1], idx, b6, b7, b67, b8);
    /* rows for output bit i at byte 7 - i: bits 0-6 <- input bits 1-7, bit 7 <- parity of bits 1-7 */
    const __m512i to_signs = _mm512_set1_epi64(0x02040810204080fell);
    _mm512_storeu_si512(st->sb, _mm512_permutexvar_epi8(ld(P->iq2xs_to_elem), _mm512_gf2p8affine_epi64_epi8(hib, to_signs, 0)));
    st->v[0] = _mm512_unpacklo_epi8(lo, hi);   /* block a's planes, block b's */
    st->v[1] = _mm512_unpackhi_epi8(lo, hi);
}

/* Scales: a nibble per 16 elements: per16 rows, the high half merged by a masked broadcast (a
 * load and a blend, no shuffle).  One accumulator chain started by vpmaddwd (no zeroed register,
 * no final add of two chains: one uop less per block; the chain's latency hides behind the
 * staged loop).  Writing the 64-byte scale operands to a stack buffer ahead instead (stores are
 * off ports 0 and 5) was 25-40% slower: the 64-byte loads wait for the two 32-byte stores. */
VBMI static inline __attribute__((always_inline)) __m512i products_iq2_xs(const sl_block_iq2_xs *b, const int8_t *q, const grid_planes *P,
                                                                        const staged_pair *st, int h)
{
    __m512i s = _mm512_setzero_si512();
    const __m512i sp = iq2_spread(st->v[h]);
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        const __m512i scale = _mm512_mask_broadcast_i64x4(_mm512_castsi256_si512(_mm256_load_si256((const __m256i *)P->per16[b->scales[2 * r]])),
                                                          0xf0, _mm256_load_si256((const __m256i *)P->per16[b->scales[2 * r + 1]]));
        if (r == 0) s = dot64_first(iq2_grid(sp, r), sign_mask(st->sb, 4 * h + r), q, scale);
        else s = dot64(s, iq2_grid(sp, r), sign_mask(st->sb, 4 * h + r), q + 64 * r, scale);
    }
    return s;
}

IQ2_STAGES(iq2_xs)

/* IQ2_XXS: the sign fields of sub-block ib are bits 32 + 7l of its qword, put by vpmultishiftqb in
 * byte l of the qword — where index byte l sits — so one more vpermt2b in element order
 * (iq2xxs_elem_ctrl) picks them; the affine map masks bit 7 and sets it to the parity. */
VBMI static inline __attribute__((always_inline)) void lookup_iq2_xxs(const sl_block_iq2_xxs *a, const sl_block_iq2_xxs *b, const grid_planes *P,
                                                                      staged_pair *st)
{
    const __m512i qa = ld(a->qs), qb = ld(b->qs);
    const __m512i idx = _mm512_permutex2var_epi8(qa, ld(P->iq2xxs_lookup_ctrl), qb);
    const seg_masks m = segments(idx, 0);
    const __m512i lo = look256(P->iq2xxs[0], idx, m), hi = look256(P->iq2xxs[1], idx, m);
    const __m512i fields = _mm512_set1_epi64(0x3f3f3f3f352e2720ll);
    const __m512i f7 = _mm512_permutex2var_epi8(_mm512_multishift_epi64_epi8(fields, qa), ld(P->iq2xxs_elem_ctrl),
                                                _mm512_multishift_epi64_epi8(fields, qb));
    /* rows for output bit i at byte 7 - i: bits 0-6 <- input bits 0-6, bit 7 <- parity of bits 0-6 */
    const __m512i to_signs = _mm512_set1_epi64(0x010204081020407fll);
    _mm512_storeu_si512(st->sb, _mm512_gf2p8affine_epi64_epi8(f7, to_signs, 0));
    st->v[0] = _mm512_unpacklo_epi8(lo, hi);
    st->v[1] = _mm512_unpackhi_epi8(lo, hi);
}

/* Scales: 4 bits per sub-block (bits 60-63 of its qword), per32 rows by the byte of two. */
VBMI static inline __attribute__((always_inline)) __m512i products_iq2_xxs(const sl_block_iq2_xxs *b, const int8_t *q, const grid_planes *P,
                                                                         const staged_pair *st, int h)
{
    uint64_t sub[8];
    memcpy(sub, opaque(b->qs), sizeof sub);
    __m512i s[2] = { _mm512_setzero_si512(), _mm512_setzero_si512() };
    const __m512i sp = iq2_spread(st->v[h]);
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        const unsigned sc = (unsigned)(sub[2 * r] >> 60) | (unsigned)(sub[2 * r + 1] >> 60) << 4;
        s[r & 1] = dot64(s[r & 1], iq2_grid(sp, r), sign_mask(st->sb, 4 * h + r), q + 64 * r, ld(P->per32[sc]));
    }
    return _mm512_add_epi32(s[0], s[1]);
}

IQ2_STAGES(iq2_xxs)

/* IQ2_S: 10-bit indices (low byte in qs, bits 8-9 in qh), full sign bytes after the indices (the
 * opmasks as stored), scales as IQ2_XS; lookups over 1024 points: two 512-point halves merged
 * under bit 9. */
VBMI static inline __attribute__((always_inline)) void lookup_iq2_s(const sl_block_iq2_s *a, const sl_block_iq2_s *b, const grid_planes *P,
                                                                    staged_pair *st)
{
    const __m512i idx = _mm512_permutex2var_epi8(ld(a->qs), ld(P->iq2s_lookup_ctrl), ld(b->qs));
    uint64_t qa, qb;
    memcpy(&qa, a->qh, 8);
    memcpy(&qb, b->qh, 8);
    const __m512i qh = _mm512_mask_set1_epi64(_mm512_set1_epi64((long long)qa), 0xaa, (long long)qb);   /* lane q: block q mod 2 */
    const seg_masks m = segments(idx, _mm512_bitshuffle_epi64_mask(qh, ld(P->iq2s_bit8_ctrl)));
    const __mmask64 b9 = _mm512_bitshuffle_epi64_mask(qh, ld(P->iq2s_bit9_ctrl));
    const __m512i lo = _mm512_mask_blend_epi8(b9, look512(P->iq2s[0], idx, m), look512(P->iq2s[0] + 512, idx, m));
    const __m512i hi = _mm512_mask_blend_epi8(b9, look512(P->iq2s[1], idx, m), look512(P->iq2s[1] + 512, idx, m));
    st->v[0] = _mm512_unpacklo_epi8(lo, hi);
    st->v[1] = _mm512_unpackhi_epi8(lo, hi);
}

VBMI static inline __attribute__((always_inline)) __m512i products_iq2_s(const sl_block_iq2_s *b, const int8_t *q, const grid_planes *P,
                                                                       const staged_pair *st, int h)
{
    __mmask64 sb[4];
    memcpy(sb, b->qs + SL_QK_K / 8, sizeof sb);
    __m512i s[2] = { _mm512_setzero_si512(), _mm512_setzero_si512() };
    const __m512i sp = iq2_spread(st->v[h]);
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        const __m512i scale = _mm512_mask_broadcast_i64x4(_mm512_castsi256_si512(_mm256_load_si256((const __m256i *)P->per16[b->scales[2 * r]])),
                                                          0xf0, _mm256_load_si256((const __m256i *)P->per16[b->scales[2 * r + 1]]));
        s[r & 1] = dot64(s[r & 1], iq2_grid(sp, r), sign_mask(sb, r), q + 64 * r, scale);
    }
    return _mm512_add_epi32(s[0], s[1]);
}

IQ2_STAGES(iq2_s)

/* The exported dots of type t, `scale` its constant factor (IQ3_S has none: 1): the single dot
 * (contract: as sl_qdot_<t>_q8_k, same bits), the 4-vector form (the same for 4 vectors, bits of
 * each) and the rows form (out[r]: the single dot of row r). */
#define VBMI_EXPORTS(t, scale)                                                                                     \
    VBMI float sl_avx512vbmi_dot_##t##_q8_k(const void *restrict w, const void *restrict y, int64_t n)            \
    {                                                                                                              \
        return scale * dot_staged(w, sizeof(sl_block_##t), y, n / SL_QK_K, block_##t, stage1_##t, stage2_##t);    \
    }                                                                                                              \
    VBMI void sl_avx512vbmi_dot4_##t##_q8_k(const void *restrict w, const void *restrict y, size_t ys, int64_t n, \
                                            float *restrict out)                                                   \
    {                                                                                                              \
        dot4_staged(w, sizeof(sl_block_##t), y, ys, n / SL_QK_K, block_##t, stage1_##t, stage2_##t, out);         \
        for (int v = 0; v < 4; v++) out[v] = scale * out[v];                                                       \
    }                                                                                                              \
    VBMI void sl_avx512vbmi_dotr_##t##_q8_k(const void *restrict w, size_t row_bytes, const void *restrict y,     \
                                            int64_t n, int64_t nrows, float *restrict out)                        \
    {                                                                                                              \
        dot_staged_rows(w, row_bytes, sizeof(sl_block_##t), y, n / SL_QK_K, nrows, scale, out, block_##t,         \
                        stage1_##t, stage2_##t);                                                                   \
    }

VBMI_EXPORTS(iq2_s, 0.125f)
VBMI_EXPORTS(iq3_xxs, 0.25f)
VBMI_EXPORTS(iq3_s, 1.0f)
VBMI_EXPORTS(iq2_xxs, 0.125f)
VBMI_EXPORTS(iq2_xs, 0.125f)
#undef VBMI_EXPORTS

#endif
