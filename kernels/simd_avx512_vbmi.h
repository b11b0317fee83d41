/* kernels/simd_avx512_vbmi.h — internals of the byte-permute codebook dots, shared by
 * kernels/simd_avx512_vbmi.c (the grid planes, IQ3_S, IQ3_XXS; its opening comment gives the
 * design) and kernels/simd_avx512_vbmi_iq2.c (IQ2_XS, IQ2_XXS, IQ2_S): the planes' layout, the
 * 64-element products, the staged loop over super-blocks and the exported forms.  Not a public
 * header: everything here is static inline, compiled for the VBMI target. */
#ifndef SL_KERNELS_SIMD_AVX512_VBMI_H
#define SL_KERNELS_SIMD_AVX512_VBMI_H

#include "kernels/iq_common.h"
#include "kernels/simd.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <string.h>

#define VBMI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx512bitalg,gfni,avx2,fma,f16c,bmi2")))
/* Every helper inlined: the exported functions inline two forms of the staged loop, and gcc's
 * size limits then left some helpers as calls inside the loop (IQ2_XS ~50% slower). */
#define VBMI_INLINE VBMI static inline __attribute__((always_inline))

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
    _Alignas(64) uint8_t iq2xs_to_elem_t[64];   /* the same to the SHUFFLES form's transposed sign layout */
    /* IQ2_XXS: the bit planes of its 256-point grid, the vpermt2b controls of the index bytes
     * in lookup order and of the sign fields in element order */
    _Alignas(64) uint8_t iq2xxs[2][SL_IQ2XXS_N];
    _Alignas(64) uint8_t iq2xxs_lookup_ctrl[64], iq2xxs_elem_ctrl[64];
    /* IQ2_S: the bit planes of its 1024-point grid; the vpermt2b control of the index bytes in
     * lookup order, and the vpshufbitqmb ones that pick bits 8 and 9 of each index from qh */
    _Alignas(64) uint8_t iq2s[2][SL_IQ2S_N];
    _Alignas(64) uint8_t iq2s_lookup_ctrl[64], iq2s_bit8_ctrl[64], iq2s_bit9_ctrl[64];
    /* The plane-order rows forms (kernels/simd_avx512_vbmi_planes.c): the vpermb control that
     * puts 16 points' activations coordinate-major (byte 16c + m <- 4m + c), and byte p <- p / 2 */
    _Alignas(64) uint8_t plane_ctrl[64], half_ctrl[64];
} grid_planes;


/* The planes, built once, and the IQ2 form that runs (SL_IQ_FORM_LOADS / _SHUFFLES, never AUTO;
 * simd_avx512_vbmi.c). */
const grid_planes *sl_vbmi_planes(void);
int sl_vbmi_form(void);
static inline const grid_planes *planes(void) { return sl_vbmi_planes(); }

/* The plane-order rows forms of IQ3_XXS and IQ3_S (kernels/simd_avx512_vbmi_planes.c): out[r] =
 * scale * the single dot of row r, same bits; the SHUFFLES form's rows dot. */
void sl_vbmi_planes_dotr_iq3_xxs(const void *restrict w, size_t row_bytes, const void *restrict y, int64_t n,
                                 int64_t nrows, float scale, float *restrict out);
void sl_vbmi_planes_dotr_iq3_s(const void *restrict w, size_t row_bytes, const void *restrict y, int64_t n,
                               int64_t nrows, float scale, float *restrict out);

VBMI_INLINE __m512i ld(const void *p) { return _mm512_loadu_si512(p); }

/* (float)S by vcvtdq2ps: the scalar vcvtsi2ss merges into its destination, and gcc picked the
 * accumulator's register, chaining every super-block's conversion to the previous sum. */
VBMI_INLINE float i2f(int32_t S) { return _mm_cvtss_f32(_mm_cvtepi32_ps(_mm_cvtsi32_si128(S))); }

/* Which 64-entry segment each index byte falls in: bit 6 (`b6`), bit 7 (`b7`) and, for 512
 * entries, bit 8 (`b8`, from elsewhere). */
typedef struct { __mmask64 b6, b7, b8; } seg_masks;

VBMI_INLINE seg_masks segments(__m512i idx, __mmask64 b8)
{
    return (seg_masks){ _mm512_movepi8_mask(_mm512_add_epi8(idx, idx)), _mm512_movepi8_mask(idx), b8 };
}

/* Byte b = t[idx[b]] for a 128-entry table: vpermb of the first 64 entries, then the second
 * merged in under b6 (two one-uop permutes; vpermi2b costs the same on port 5 plus a copy of
 * the register it overwrites). */
VBMI_INLINE __m512i look128(const uint8_t *t, __m512i idx, __mmask64 b6)
{
    return _mm512_mask_permutexvar_epi8(_mm512_permutexvar_epi8(idx, ld(t)), b6, idx, ld(t + 64));
}

/* look128 in form F (kernels/simd.h, SL_IQ_FORM_*): SHUFFLES is one vpermt2b (bit 6 of each index
 * picks the table half), which on Zen 5 runs at vpermb's rate (~1.9 per cycle each, measured), so
 * it halves the lookups; on Sapphire Rapids it costs two port-5 uops, hence LOADS keeps look128. */
VBMI_INLINE __m512i look128f(const uint8_t *t, __m512i idx, __mmask64 b6, int form)
{
    return form == SL_IQ_FORM_SHUFFLES ? _mm512_permutex2var_epi8(ld(t), idx, ld(t + 64)) : look128(t, idx, b6);
}

/* The same for 256 and 512 entries. */
VBMI_INLINE __m512i look256(const uint8_t *t, __m512i idx, seg_masks m, int form)
{
    return _mm512_mask_blend_epi8(m.b7, look128f(t, idx, m.b6, form), look128f(t + 128, idx, m.b6, form));
}

VBMI_INLINE __m512i look512(const uint8_t *t, __m512i idx, seg_masks m, int form)
{
    return _mm512_mask_blend_epi8(m.b8, look256(t, idx, m, form), look256(t + 256, idx, m, form));
}

/* look256 and look512 with fewer blends (IQ2_XS): 256 entries as one chain of merged permutes,
 * later merges overriding earlier ones (segment 1 under b6, 2 under b7, 3 under b6 & b7 last), and
 * 512 as two chains and one blend under b8: per 64 points and byte plane 8 vpermb and 1 blend
 * instead of 8 and 3, for one kandq shared by both planes; the chain's latency (4 permutes)
 * hides behind the staged loop. */
VBMI_INLINE __m512i look256_chain(const uint8_t *t, __m512i idx, __mmask64 b6, __mmask64 b7, __mmask64 b67)
{
    __m512i r = _mm512_permutexvar_epi8(idx, ld(t));
    r = _mm512_mask_permutexvar_epi8(r, b6, idx, ld(t + 64));
    r = _mm512_mask_permutexvar_epi8(r, b7, idx, ld(t + 128));
    return _mm512_mask_permutexvar_epi8(r, b67, idx, ld(t + 192));
}
VBMI_INLINE __m512i look512_chains(const uint8_t *t, __m512i idx, __mmask64 b6, __mmask64 b7, __mmask64 b67, __mmask64 b8)
{
    return _mm512_mask_blend_epi8(b8, look256_chain(t, idx, b6, b7, b67), look256_chain(t + 256, idx, b6, b7, b67));
}

/* The dword order the point indices go in with: the byte unpacks below interleave within 128-bit
 * lanes (lane L of unpack result m holds points 16L + 4m..4m+3), so the index dwords go in with L
 * and m swapped and result m comes out as points 16m..16m+15 in order. */
VBMI_INLINE __m512i transpose16(void)
{
    return _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
}

/* 64 points as 4 coordinate nibbles each, element order, from the two nibble planes looked up
 * with transposed indices (a: coordinates 0 | 1 << 4, b: 2 | 3 << 4): the first unpack pairs a
 * point's two plane bytes, the nibbles are split in place, the second unpack puts them in order. */
VBMI_INLINE void spread_nibble_planes(__m512i a, __m512i b, __m512i out[4])
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
VBMI_INLINE void spread_mapped_planes(__m512i a, __m512i b, __m512i vals, __m512i out[4])
{
    const __m512i u0 = _mm512_unpacklo_epi8(a, b), u1 = _mm512_unpackhi_epi8(a, b);
    const __m512i l0 = _mm512_shuffle_epi8(vals, u0), h0 = _mm512_shuffle_epi8(vals, _mm512_srli_epi16(u0, 4));
    const __m512i l1 = _mm512_shuffle_epi8(vals, u1), h1 = _mm512_shuffle_epi8(vals, _mm512_srli_epi16(u1, 4));
    out[0] = _mm512_unpacklo_epi8(l0, h0);
    out[1] = _mm512_unpackhi_epi8(l0, h0);
    out[2] = _mm512_unpacklo_epi8(l1, h1);
    out[3] = _mm512_unpackhi_epi8(l1, h1);
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
VBMI_INLINE __mmask64 sign_mask(const __mmask64 *sb, int r)
{
    return _load_mask64((__mmask64 *)opaque(sb + r));   /* the words are __mmask64 objects (vector-stored or memcpy'd) */
}

/* sign_mask in form F: SHUFFLES loads the word with one kmovq from memory (inline asm: through
 * opaque, gcc kept the pointer on the stack and spent three instructions per mask on Zen 5). */
VBMI_INLINE __mmask64 sign_mask_f(const __mmask64 *sb, int r, int form)
{
    if (form != SL_IQ_FORM_SHUFFLES) return sign_mask(sb, r);
    __mmask64 k;
    __asm__("kmovq %1, %0" : "=k"(k) : "m"(sb[r]));
    return k;
}

/* The scaled pair sums of 64 elements (the first of a chain: vpmaddwd, no zeroed accumulator). */
VBMI_INLINE __m512i dot64_first(__m512i grid, __mmask64 signs, const int8_t *q, __m512i scale)
{
    const __m512i a = ld(q);
    const __m512i sa = _mm512_mask_sub_epi8(a, signs, _mm512_setzero_si512(), a);
    return _mm512_madd_epi16(_mm512_maddubs_epi16(grid, sa), scale);
}

/* acc + scaled pair sums of 64 elements: grid bytes x activations negated under `signs`. */
VBMI_INLINE __m512i dot64(__m512i acc, __m512i grid, __mmask64 signs, const int8_t *q, __m512i scale)
{
    const __m512i a = ld(q);
    const __m512i sa = _mm512_mask_sub_epi8(a, signs, _mm512_setzero_si512(), a);
    return _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(grid, sa), scale);
}

/* The lane sums of four super-blocks, (float)S each, into S[0..3]. */
VBMI_INLINE void reduce4(const __m512i s[4], float S[4])
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
VBMI_INLINE float f16_at(const uint8_t *p)
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
VBMI_INLINE float staged_iter(const uint8_t *w, size_t bytes, const sl_block_q8_k *y, int64_t i, float acc,
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
VBMI_INLINE float dot_staged(const uint8_t *w, size_t bytes, const sl_block_q8_k *y, int64_t nsb,
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
VBMI_INLINE void dot_staged_rows(const uint8_t *w, size_t row_bytes, size_t bytes, const sl_block_q8_k *y,
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
VBMI_INLINE void dot4_staged(const uint8_t *w, size_t bytes, const uint8_t *y, size_t ys, int64_t nsb,
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

/* The exported dots of type t, `scale` its constant factor (IQ3_S has none: 1): the single dot
 * (contract: as sl_qdot_<t>_q8_k, same bits), the 4-vector form (the same for 4 vectors, bits of
 * each) and the rows form (out[r]: the single dot of row r). */
#define VBMI_EXPORTS(t, scale)                                                                                    \
    VBMI float sl_avx512vbmi_dot_##t##_q8_k(const void *restrict w, const void *restrict y, int64_t n)            \
    {                                                                                                             \
        return scale * dot_staged(w, sizeof(sl_block_##t), y, n / SL_QK_K, block_##t, stage1_##t, stage2_##t);    \
    }                                                                                                             \
    VBMI void sl_avx512vbmi_dot4_##t##_q8_k(const void *restrict w, const void *restrict y, size_t ys, int64_t n, \
                                            float *restrict out)                                                  \
    {                                                                                                             \
        dot4_staged(w, sizeof(sl_block_##t), y, ys, n / SL_QK_K, block_##t, stage1_##t, stage2_##t, out);         \
        for (int v = 0; v < 4; v++) out[v] = scale * out[v];                                                      \
    }                                                                                                             \
    VBMI void sl_avx512vbmi_dotr_##t##_q8_k(const void *restrict w, size_t row_bytes, const void *restrict y,     \
                                            int64_t n, int64_t nrows, float *restrict out)                        \
    {                                                                                                             \
        dot_staged_rows(w, row_bytes, sizeof(sl_block_##t), y, n / SL_QK_K, nrows, scale, out, block_##t,         \
                        stage1_##t, stage2_##t);                                                                  \
    }

/* The exports of a type with both forms: one function per form (each compiled as the one-form
 * exports are: with both staged loops in one function gcc scheduled them ~15% slower), and the
 * export calls the one sl_vbmi_form() says (a relaxed load per call).  VBMI_FORM_DOTS: the single
 * and 4-vector dots, VBMI_FORM_ROWS: the staged rows form. */
#define VBMI_FORM_DOTS(t, sfx)                                                                                               \
    VBMI __attribute__((noinline)) static float dot_##t##sfx(const void *w, const void *y, int64_t n)                        \
    {                                                                                                                        \
        return dot_staged(w, sizeof(sl_block_##t), y, n / SL_QK_K, block_##t##sfx, stage1_##t##sfx, stage2_##t##sfx);        \
    }                                                                                                                        \
    VBMI __attribute__((noinline)) static void dot4_##t##sfx(const void *w, const void *y, size_t ys, int64_t n, float *out) \
    {                                                                                                                        \
        dot4_staged(w, sizeof(sl_block_##t), y, ys, n / SL_QK_K, block_##t##sfx, stage1_##t##sfx, stage2_##t##sfx, out);     \
    }
#define VBMI_FORM_ROWS(t, sfx)                                                                                               \
    VBMI __attribute__((noinline)) static void dotr_##t##sfx(const void *w, size_t row_bytes, const void *y, int64_t n,      \
                                                             int64_t nrows, float scale, float *out)                         \
    {                                                                                                                        \
        dot_staged_rows(w, row_bytes, sizeof(sl_block_##t), y, n / SL_QK_K, nrows, scale, out, block_##t##sfx,               \
                        stage1_##t##sfx, stage2_##t##sfx);                                                                   \
    }
/* The single and 4-vector exports of both forms. */
#define VBMI_EXPORT_DOTS(t, scale)                                                                                       \
    VBMI_FORM_DOTS(t, _loads)                                                                                            \
    VBMI_FORM_DOTS(t, _shuffles)                                                                                         \
    VBMI float sl_avx512vbmi_dot_##t##_q8_k(const void *restrict w, const void *restrict y, int64_t n)                   \
    {                                                                                                                    \
        return scale * (sl_vbmi_form() == SL_IQ_FORM_SHUFFLES ? dot_##t##_shuffles(w, y, n) : dot_##t##_loads(w, y, n)); \
    }                                                                                                                    \
    VBMI void sl_avx512vbmi_dot4_##t##_q8_k(const void *restrict w, const void *restrict y, size_t ys, int64_t n,        \
                                            float *restrict out)                                                         \
    {                                                                                                                    \
        if (sl_vbmi_form() == SL_IQ_FORM_SHUFFLES) dot4_##t##_shuffles(w, y, ys, n, out);                                \
        else dot4_##t##_loads(w, y, ys, n, out);                                                                         \
        for (int v = 0; v < 4; v++) out[v] = scale * out[v];                                                             \
    }
#define VBMI_EXPORTS_FORMS(t, scale)                                                                                     \
    VBMI_EXPORT_DOTS(t, scale)                                                                                           \
    VBMI_FORM_ROWS(t, _loads)                                                                                            \
    VBMI_FORM_ROWS(t, _shuffles)                                                                                         \
    VBMI void sl_avx512vbmi_dotr_##t##_q8_k(const void *restrict w, size_t row_bytes, const void *restrict y,            \
                                            int64_t n, int64_t nrows, float *restrict out)                               \
    {                                                                                                                    \
        if (sl_vbmi_form() == SL_IQ_FORM_SHUFFLES) dotr_##t##_shuffles(w, row_bytes, y, n, nrows, scale, out);           \
        else dotr_##t##_loads(w, row_bytes, y, n, nrows, scale, out);                                                    \
    }
/* The same where the SHUFFLES form's rows dot is the plane-order one (sl_vbmi_planes_dotr_T). */
#define VBMI_EXPORTS_FORMS_PLANES(t, scale)                                                                              \
    VBMI_EXPORT_DOTS(t, scale)                                                                                           \
    VBMI_FORM_ROWS(t, _loads)                                                                                            \
    VBMI void sl_avx512vbmi_dotr_##t##_q8_k(const void *restrict w, size_t row_bytes, const void *restrict y,            \
                                            int64_t n, int64_t nrows, float *restrict out)                               \
    {                                                                                                                    \
        if (sl_vbmi_form() == SL_IQ_FORM_SHUFFLES) sl_vbmi_planes_dotr_##t(w, row_bytes, y, n, nrows, scale, out);       \
        else dotr_##t##_loads(w, row_bytes, y, n, nrows, scale, out);                                                    \
    }

#endif
#endif
