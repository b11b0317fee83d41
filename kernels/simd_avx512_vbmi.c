/* kernels/simd_avx512_vbmi.c — AVX-512 codebook dots (IQ3_S, IQ3_XXS, IQ2_XS, IQ2_XXS, IQ2_S x Q8_K;
 * single, 4-vector and rows forms) that look the grid points up with byte permutes (VBMI: vpermi2b,
 * vpermb, vpmultishiftqb; BITALG: vpopcntb, vpshufbitqmb; GFNI: vgf2p8affineqb) instead of
 * gathering them.  This file builds the grid planes and holds the IQ3 types; the IQ2 types are in
 * simd_avx512_vbmi_iq2.c, the shared products and staged loop in simd_avx512_vbmi.h.
 *
 * Two forms, same bits (kernels/simd.h, SL_IQ_FORM_*): what follows is the LOADS form, tuned on
 * Intel Sapphire Rapids; the SHUFFLES form (AMD Zen 5) trades loads and scalar arithmetic for
 * fewer instructions, one vpermt2b per 128-entry lookup among them (docs/benchmarks.md, "Zen 5").
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
#include "kernels/simd_avx512_vbmi.h"

#if defined(__x86_64__) || defined(__i386__)
#include <pthread.h>
#include <stdatomic.h>

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
    for (int b = 0; b < 64; b++) {
        g_planes.plane_ctrl[b] = (uint8_t)(4 * (b % 16) + b / 16);
        g_planes.half_ctrl[b] = (uint8_t)(b / 2);
    }
    for (int q = 0; q < 64; q++) g_planes.iq2xs_to_elem_t[8 * (q % 8) + q / 8] = g_planes.iq2xs_to_elem[q];   /* byte 8m + i -> 8i + m */
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

const grid_planes *sl_vbmi_planes(void)
{
    pthread_once(&g_planes_once, build_planes);
    return &g_planes;
}

/* The form (kernels/simd.h): SHUFFLES on AMD, measured faster on Zen 5 (family 0x1a) for every
 * type and shape (docs/benchmarks.md, "Zen 5") and on Zen 4 (0x19) for all five types in cache
 * and streaming ("Zen 4"); the AMD CPUs with these instructions are those two families.  LOADS
 * on Intel: Sapphire Rapids, where it was tuned.  A test or benchmark may force one. */
static atomic_int g_form_forced = SL_IQ_FORM_AUTO;
static int g_form_cpu;
static pthread_once_t g_form_once = PTHREAD_ONCE_INIT;

static void pick_form(void)
{
    __builtin_cpu_init();
    g_form_cpu = __builtin_cpu_is("amd") ? SL_IQ_FORM_SHUFFLES : SL_IQ_FORM_LOADS;
}

int sl_vbmi_form(void)
{
    const int f = atomic_load_explicit(&g_form_forced, memory_order_relaxed);
    if (f != SL_IQ_FORM_AUTO) return f;
    pthread_once(&g_form_once, pick_form);
    return g_form_cpu;
}

void sl_avx512_iq_force_form(int form)
{
    atomic_store_explicit(&g_form_forced, form == SL_IQ_FORM_LOADS || form == SL_IQ_FORM_SHUFFLES ? form : SL_IQ_FORM_AUTO,
                          memory_order_relaxed);
}

int sl_avx512_iq_form(void) { return sl_vbmi_form(); }

/* IQ3_XXS: 64 byte indices (256 points), transposed; then 8 sign words of 4 x 7 bits + scale.
 * Lookup: the block's four registers of grid bytes g and its sign words sb. */
VBMI_INLINE void lookup_iq3_xxs(const uint8_t *blk, const grid_planes *P, __m512i g[4], __mmask64 sb[4], int form)
{
    const sl_block_iq3_xxs *b = (const sl_block_iq3_xxs *)blk;
    /* per qword (two sub-blocks' sign words): the four 7-bit fields of each at bits 0, 7, 14, 21 */
    const __m256i fields = _mm256_set1_epi64x(0x352e2720150e0700ll);
    const __m512i idx = _mm512_permutexvar_epi32(transpose16(), ld(b->qs));
    const seg_masks m = segments(idx, 0);
    const __m512i vals = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)P->iq3xxs_vals));
    spread_mapped_planes(look256(P->iq3xxs[0], idx, m, form), look256(P->iq3xxs[1], idx, m, form), vals, g);
    const __m256i aux = _mm256_loadu_si256((const __m256i *)(b->qs + SL_QK_K / 4));
    /* the 7-bit fields completed with their parity by one affine map over GF(2) (rows for output
     * bit i at byte 7 - i: bits 0-6 <- input bits 0-6, bit 7 <- parity of bits 0-6), as IQ2_XXS's:
     * one instruction where masking, popcount and merging the parity bit took five */
    const __m256i to_signs = _mm256_set1_epi64x(0x010204081020407fll);
    _mm256_storeu_si256((__m256i *)sb, _mm256_gf2p8affine_epi64_epi8(_mm256_multishift_epi64_epi8(fields, aux), to_signs, 0));
}

/* Products: the int32 lanes of the block from its looked-up g, sb. */
VBMI_INLINE __m512i products_iq3_xxs(const uint8_t *blk, const int8_t *q, const grid_planes *P,
                                     const __m512i g[4], const __mmask64 sb[4], int form)
{
    const sl_block_iq3_xxs *b = (const sl_block_iq3_xxs *)blk;
    const bool shuf = form == SL_IQ_FORM_SHUFFLES;
    uint64_t a2[4];   /* the sign-and-scale words of sub-blocks 2r, 2r + 1: scales at bits 28-31, 60-63 */
    memcpy(a2, opaque(b->qs + SL_QK_K / 4), sizeof a2);
    /* SHUFFLES: L = 2s + 1 in dword j of sub-block j's word (a shift), one vpermw per register
     * (words 0-15: sub-block 2r's, 16-31: 2r + 1's); LOADS: per32 rows by pext of the two nibbles */
    const __m512i L = shuf ? _mm512_or_si512(_mm512_srli_epi32(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(b->qs + SL_QK_K / 4))), 27),
                                             _mm512_set1_epi32(1))
                           : _mm512_setzero_si512();
    __m512i s[2] = { _mm512_setzero_si512(), _mm512_setzero_si512() };
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        const size_t sc = (size_t)_pext_u64(a2[r], 0xf0000000f0000000ull);   /* < 256; size_t: no zero-extension */
        const __m512i scale = shuf ? _mm512_permutexvar_epi16(_mm512_mask_set1_epi16(_mm512_set1_epi16((short)(4 * r)), 0xffff0000u,
                                                                                    (short)(4 * r + 2)), L)
                                   : ld(P->per32[sc]);
        s[r & 1] = dot64(s[r & 1], g[r], sign_mask_f(sb, r, form), q + 64 * r, scale);
    }
    return _mm512_add_epi32(s[0], s[1]);
}

/* IQ3_S: 64 points of 9-bit index: the low bytes go in transposed, bit 8 of each (qh, in point
 * order) is picked for its permuted position by vpshufbitqmb.  Signs: the 8 bytes of sub-blocks
 * 2r, 2r + 1 are the opmask of register r as stored.  Lookup: the block's grid bytes g. */
VBMI_INLINE void lookup_iq3_s(const uint8_t *blk, const grid_planes *P, __m512i g[4], __mmask64 sb[4], int form)
{
    (void)sb;   /* the signs are loaded by the products */
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
    spread_nibble_planes(look512(P->iq3s[0], idx, m, form), look512(P->iq3s[1], idx, m, form), g);
}

/* Products: the int32 lanes of the block from its looked-up g.  Signs: the stored bytes are the
 * opmasks; the LOADS form copies them to the stack and loads them from there (opaque, see
 * sign_mask), SHUFFLES loads each straight from the block (kmovq from memory: fewer instructions,
 * no store; kernels/simd.h). */
VBMI_INLINE __m512i products_iq3_s(const uint8_t *blk, const int8_t *q, const grid_planes *P, const __m512i g[4],
                                   const __mmask64 sb_unused[4], int form)
{
    (void)sb_unused;
    const sl_block_iq3_s *b = (const sl_block_iq3_s *)blk;
    __mmask64 sb[4];
    memcpy(sb, b->signs, sizeof sb);
    /* two accumulators: four chained vpdpwssd would be the longest latency of the block */
    __m512i s[2] = { _mm512_setzero_si512(), _mm512_setzero_si512() };
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        uint64_t word;
        memcpy(&word, b->signs + 8 * r, sizeof word);
        const __mmask64 signs = form == SL_IQ_FORM_SHUFFLES ? _cvtu64_mask64(word) : sign_mask(sb, r);
        s[r & 1] = dot64(s[r & 1], g[r], signs, q + 64 * r, ld(P->per32[b->scales[r]]));
    }
    return _mm512_add_epi32(s[0], s[1]);
}

/* The single block and the two stages of an IQ3 type in form F, named T##sfx, from its
 * lookup_T(blk, P, g, sb, F) and products_T(blk, q, P, g, sb, F), one super-block each. */
#define IQ3_FORM(t, sfx, F)                                                                                   \
    VBMI_INLINE __m512i block_##t##sfx(const uint8_t *blk, const int8_t *q, const grid_planes *P)             \
    {                                                                                                         \
        __m512i g[4];                                                                                         \
        __mmask64 sb[4];                                                                                      \
        lookup_##t(blk, P, g, sb, F);                                                                         \
        return products_##t(blk, q, P, g, sb, F);                                                             \
    }                                                                                                         \
    VBMI_INLINE void stage1_##t##sfx(const uint8_t *blk, const grid_planes *P, staged_pair *st)               \
    {                                                                                                         \
        lookup_##t(blk, P, st->v, st->sb, F);                                                                 \
        lookup_##t(blk + sizeof(sl_block_##t), P, st->v + 4, st->sb + 4, F);                                  \
    }                                                                                                         \
    VBMI_INLINE void stage2_##t##sfx(const uint8_t *blk, const sl_block_q8_k *y, const grid_planes *P,        \
                                     const staged_pair *st, __m512i out[2])                                   \
    {                                                                                                         \
        out[0] = products_##t(blk, y[0].qs, P, st->v, st->sb, F);                                             \
        out[1] = products_##t(blk + sizeof(sl_block_##t), y[1].qs, P, st->v + 4, st->sb + 4, F);              \
    }
IQ3_FORM(iq3_xxs, _loads, SL_IQ_FORM_LOADS)
IQ3_FORM(iq3_xxs, _shuffles, SL_IQ_FORM_SHUFFLES)
IQ3_FORM(iq3_s, _loads, SL_IQ_FORM_LOADS)
IQ3_FORM(iq3_s, _shuffles, SL_IQ_FORM_SHUFFLES)

VBMI_EXPORTS_FORMS_PLANES(iq3_xxs, 0.25f)
VBMI_EXPORTS_FORMS_PLANES(iq3_s, 1.0f)

#else   /* not x86: no byte-permute dots, one form */
void sl_avx512_iq_force_form(int form) { (void)form; }
int sl_avx512_iq_form(void) { return SL_IQ_FORM_LOADS; }
#endif
