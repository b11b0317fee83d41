/* kernels/simd_avx512_vbmi_iq2.c — the byte-permute dots of IQ2_XS, IQ2_XXS and IQ2_S x Q8_K
 * (single, 4-vector and rows forms): two super-blocks' grid points per lookup, as bit planes
 * expanded by affine maps over GF(2).  The design, the contract (the portable bits) and the staged
 * loop: kernels/simd_avx512_vbmi.c and kernels/simd_avx512_vbmi.h. */
#include "kernels/simd_avx512_vbmi.h"

#if defined(__x86_64__) || defined(__i386__)

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

/* The entry points of an IQ2 type in form F (SL_IQ_FORM_*, a constant) from its
 * lookup_T(a, b, P, st, F) and products_T(b, q, P, st, h, F), named T##sfx: the single block (a
 * row's tail: (a, a), block a's half) and the two stages of dot_staged. */
#define IQ2_STAGES(t, sfx, F)                                                                                 \
    VBMI_INLINE __m512i block_##t##sfx(const uint8_t *blk, const int8_t *q, const grid_planes *P)             \
    {                                                                                                         \
        const sl_block_##t *b = (const sl_block_##t *)blk;                                                    \
        staged_pair st;                                                                                       \
        lookup_##t(b, b, P, &st, F);                                                                          \
        return products_##t(b, q, P, &st, 0, F);                                                              \
    }                                                                                                         \
    VBMI_INLINE void stage1_##t##sfx(const uint8_t *blk, const grid_planes *P, staged_pair *st)               \
    {                                                                                                         \
        const sl_block_##t *b = (const sl_block_##t *)blk;                                                    \
        lookup_##t(b, b + 1, P, st, F);                                                                       \
    }                                                                                                         \
    VBMI_INLINE void stage2_##t##sfx(const uint8_t *blk, const sl_block_q8_k *y, const grid_planes *P,        \
                                     const staged_pair *st, __m512i out[2])                                   \
    {                                                                                                         \
        const sl_block_##t *b = (const sl_block_##t *)blk;                                                    \
        out[0] = products_##t(b, y[0].qs, P, st, 0, F);                                                       \
        out[1] = products_##t(b + 1, y[1].qs, P, st, 1, F);                                                   \
    }

/* The two forms' helpers (kernels/simd.h, SL_IQ_FORM_*).  SHUFFLES makes in registers what LOADS
 * reads from tables or from memory: on AMD Zen 5, where the IQ2 loops are bound by how many
 * instructions they issue (~85 per super-block at ~3.5 per cycle) rather than by a port, fewer
 * instructions win even when more of them are shuffles; on Sapphire Rapids port 5 was the bound
 * (docs/benchmarks.md, "Zen 5").
 * The int16 scale operands of one super-block's 16 four-bit scales (IQ2_XS, IQ2_S: a nibble per
 * 16 elements, L = 2s + 1): `scale_bytes` puts L of group g in byte g of every 128-bit lane (one
 * broadcast load, one vpmultishiftqb, one ternary-logic op), `scale_reg` picks register r's
 * four (128-bit lane k: group 4r + k as int16) with one vpshufb. */
VBMI_INLINE __m512i scale_bytes(const uint8_t scales[8])
{
    const __m512i v = _mm512_broadcastq_epi64(_mm_loadl_epi64((const __m128i *)scales));
    /* vpmultishiftqb: output byte g of the lane's 16 takes the 8 bits from bit 4g - 1 (mod 64,
     * rotating) of the scale qword, so nibble g lands in bits 1-4; then (x & 0x1e) | 1 = 2s + 1 */
    const __m512i at = _mm512_set_epi64(0x3b37332f2b27231fll, 0x1b17130f0b07033fll, 0x3b37332f2b27231fll, 0x1b17130f0b07033fll,
                                        0x3b37332f2b27231fll, 0x1b17130f0b07033fll, 0x3b37332f2b27231fll, 0x1b17130f0b07033fll);
    return _mm512_ternarylogic_epi32(_mm512_multishift_epi64_epi8(at, v), _mm512_set1_epi8(0x1e), _mm512_set1_epi8(1), 0xea);
}
VBMI_INLINE __m512i scale_reg(__m512i bytes, int r)
{
    const long long k = 0x0001000100010001ll, hi_zero = (long long)0x8000800080008000ull;   /* pshufb: 0x80 gives 0 */
    return _mm512_shuffle_epi8(bytes, _mm512_set_epi64(hi_zero + (4 * r + 3) * k, hi_zero + (4 * r + 3) * k, hi_zero + (4 * r + 2) * k,
                                                       hi_zero + (4 * r + 2) * k, hi_zero + (4 * r + 1) * k, hi_zero + (4 * r + 1) * k,
                                                       hi_zero + 4 * r * k, hi_zero + 4 * r * k));
}
/* LOADS: the same operand from the per16 rows, the high half merged by a masked broadcast. */
VBMI_INLINE __m512i scale_rows(const grid_planes *P, const uint8_t scales[8], int r)
{
    return _mm512_mask_broadcast_i64x4(_mm512_castsi256_si512(_mm256_load_si256((const __m256i *)P->per16[scales[2 * r]])), 0xf0,
                                       _mm256_load_si256((const __m256i *)P->per16[scales[2 * r + 1]]));
}
/* SHUFFLES: opmask m of a register whose qword lane i holds, in byte m, the signs of group i of
 * mask m (the transposed layout): one vpshufbitqmb, where LOADS stores the masks and loads them. */
VBMI_INLINE __mmask64 sign_mask_reg(__m512i signs_t, int m)
{
    return _mm512_bitshuffle_epi64_mask(signs_t, _mm512_set1_epi64(0x0706050403020100ll + 8ll * m * 0x0101010101010101ll));
}

/* A block's 32 points as bit planes (word k of qword t: plane c0 | plane c1 << 8 of point
 * t + 8k), transposed by one affine map with the planes as its matrix (output bit i of byte j =
 * bit j of matrix byte 7 - i, the constant picking bit j): byte j of qword t gets coordinate j of
 * all four points, c0 of point t + 8k in bit 7 - 2k and c1 in bit 6 - 2k.  Before, a vpmultishiftqb
 * per register (port 5) did this: in L1/L2 on one thread, p10 of 300 alternating samples, 3-7%
 * fewer ns per super-block for IQ2_XS, IQ2_XXS, IQ2_S (docs/benchmarks.md, "Bit planes for the
 * IQ2 grids"). */
VBMI_INLINE __m512i iq2_spread(__m512i planes)
{
    return _mm512_gf2p8affine_epi64_epi8(_mm512_set1_epi64(0x8040201008040201ll), planes, 0);
}

/* Grid bytes of elements 64k..64k+63 from the spread: c0 = bit 7 - 2k, c1 = bit 6 - 2k -> 8, 25, 43
 * for (0, 0), (1, 0), (0, 1) (output bit i from matrix byte 7 - i: 0 <- c0 ^ c1, 1 <- c1, 4 <- c0,
 * 5 <- c1; xor 8: 8 + 17 c0 + 35 c1, the codes never having both bits). */
VBMI_INLINE __m512i iq2_grid(__m512i spread, int k)
{
    const uint64_t c0 = 1ull << (7 - 2 * k), c1 = 1ull << (6 - 2 * k);
    const __m512i to_value = _mm512_set1_epi64((long long)(((c0 | c1) << 56) | (c1 << 48) | (c0 << 24) | (c1 << 16)));
    return _mm512_gf2p8affine_epi64_epi8(spread, to_value, 8);
}

VBMI_INLINE void lookup_iq2_xs(const sl_block_iq2_xs *a, const sl_block_iq2_xs *b, const grid_planes *P,
                               staged_pair *st, int form)
{
    const __m512i qa = ld(a->qs), qb = ld(b->qs);
    const __m512i idx = _mm512_permutex2var_epi8(qa, ld(P->iq2xs_lo_ctrl), qb);
    const __m512i hib = _mm512_permutex2var_epi8(qa, ld(P->iq2xs_hi_ctrl), qb);   /* bit 8 | signs << 1 */
    /* bits 6 and 8 by vptestmb: one uop each where vpaddb/vpsllw + vpmovb2m are two */
    const __mmask64 b6 = _mm512_test_epi8_mask(idx, _mm512_set1_epi8(0x40)), b7 = _mm512_movepi8_mask(idx);
    const __mmask64 b67 = _kand_mask64(b6, b7), b8 = _mm512_test_epi8_mask(hib, _mm512_set1_epi8(1));
    const seg_masks m = { b6, b7, b8 };
    const __m512i lo = form == SL_IQ_FORM_SHUFFLES ? look512(P->iq2xs[0], idx, m, form) : look512_chains(P->iq2xs[0], idx, b6, b7, b67, b8);
    const __m512i hi = form == SL_IQ_FORM_SHUFFLES ? look512(P->iq2xs[1], idx, m, form) : look512_chains(P->iq2xs[1], idx, b6, b7, b67, b8);
    /* rows for output bit i at byte 7 - i: bits 0-6 <- input bits 1-7, bit 7 <- parity of bits 1-7 */
    const __m512i to_signs = _mm512_set1_epi64(0x02040810204080fell);
    const __m512i signs = _mm512_gf2p8affine_epi64_epi8(hib, to_signs, 0);
    if (form == SL_IQ_FORM_SHUFFLES) st->v[2] = _mm512_permutexvar_epi8(ld(P->iq2xs_to_elem_t), signs);
    else _mm512_storeu_si512(st->sb, _mm512_permutexvar_epi8(ld(P->iq2xs_to_elem), signs));
    st->v[0] = _mm512_unpacklo_epi8(lo, hi);   /* block a's planes, block b's */
    st->v[1] = _mm512_unpackhi_epi8(lo, hi);
}

/* Scales: a nibble per 16 elements: LOADS takes per16 rows, the high half merged by a masked
 * broadcast (a load and a blend, no shuffle); SHUFFLES scale_bytes / scale_reg.  One accumulator chain started by vpmaddwd (no zeroed register,
 * no final add of two chains: one uop less per block; the chain's latency hides behind the
 * staged loop).  Writing the 64-byte scale operands to a stack buffer ahead instead (stores are
 * off ports 0 and 5) was 25-40% slower: the 64-byte loads wait for the two 32-byte stores. */
VBMI_INLINE __m512i products_iq2_xs(const sl_block_iq2_xs *b, const int8_t *q, const grid_planes *P,
                                    const staged_pair *st, int h, int form)
{
    const bool shuf = form == SL_IQ_FORM_SHUFFLES;
    __m512i s = _mm512_setzero_si512();
    const __m512i sp = iq2_spread(st->v[h]), sc = shuf ? scale_bytes(b->scales) : _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        const __m512i scale = shuf ? scale_reg(sc, r) : scale_rows(P, b->scales, r);
        const __mmask64 signs = shuf ? sign_mask_reg(st->v[2], 4 * h + r) : sign_mask(st->sb, 4 * h + r);
        if (r == 0) s = dot64_first(iq2_grid(sp, r), signs, q, scale);
        else s = dot64(s, iq2_grid(sp, r), signs, q + 64 * r, scale);
    }
    return s;
}

IQ2_STAGES(iq2_xs, _loads, SL_IQ_FORM_LOADS)
IQ2_STAGES(iq2_xs, _shuffles, SL_IQ_FORM_SHUFFLES)

/* IQ2_XXS: the sign fields of sub-block ib are bits 32 + 7l of its qword, put by vpmultishiftqb in
 * byte l of the qword — where index byte l sits — so one more vpermt2b in element order
 * (iq2xxs_elem_ctrl) picks them; the affine map masks bit 7 and sets it to the parity. */
VBMI_INLINE void lookup_iq2_xxs(const sl_block_iq2_xxs *a, const sl_block_iq2_xxs *b, const grid_planes *P,
                                staged_pair *st, int form)
{
    /* (register signs, as IQ2_XS's, measured no faster on Zen 5: both forms store them) */
    const __m512i qa = ld(a->qs), qb = ld(b->qs);
    const __m512i idx = _mm512_permutex2var_epi8(qa, ld(P->iq2xxs_lookup_ctrl), qb);
    const seg_masks m = segments(idx, 0);
    const __m512i lo = look256(P->iq2xxs[0], idx, m, form), hi = look256(P->iq2xxs[1], idx, m, form);
    const __m512i fields = _mm512_set1_epi64(0x3f3f3f3f352e2720ll);
    const __m512i f7 = _mm512_permutex2var_epi8(_mm512_multishift_epi64_epi8(fields, qa), ld(P->iq2xxs_elem_ctrl),
                                                _mm512_multishift_epi64_epi8(fields, qb));
    /* rows for output bit i at byte 7 - i: bits 0-6 <- input bits 0-6, bit 7 <- parity of bits 0-6 */
    const __m512i to_signs = _mm512_set1_epi64(0x010204081020407fll);
    _mm512_storeu_si512(st->sb, _mm512_gf2p8affine_epi64_epi8(f7, to_signs, 0));
    st->v[0] = _mm512_unpacklo_epi8(lo, hi);
    st->v[1] = _mm512_unpackhi_epi8(lo, hi);
}

/* Scales: 4 bits per sub-block (bits 60-63 of its qword).  LOADS: per32 rows by the byte of two
 * (scalar shifts); SHUFFLES: L = 2s + 1 in every qword by a shift, then one vpermw per register
 * (words 0-15: sub-block 2r's, 16-31: 2r + 1's). */
VBMI_INLINE __m512i products_iq2_xxs(const sl_block_iq2_xxs *b, const int8_t *q, const grid_planes *P,
                                     const staged_pair *st, int h, int form)
{
    const bool shuf = form == SL_IQ_FORM_SHUFFLES;
    uint64_t sub[8];
    memcpy(sub, opaque(b->qs), sizeof sub);
    __m512i s[2] = { _mm512_setzero_si512(), _mm512_setzero_si512() };
    const __m512i sp = iq2_spread(st->v[h]);
    const __m512i L = shuf ? _mm512_or_si512(_mm512_srli_epi64(ld(b->qs), 59), _mm512_set1_epi64(1)) : _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        const unsigned sc = (unsigned)(sub[2 * r] >> 60) | (unsigned)(sub[2 * r + 1] >> 60) << 4;
        const __m512i scale = shuf ? _mm512_permutexvar_epi16(_mm512_mask_set1_epi16(_mm512_set1_epi16((short)(8 * r)), 0xffff0000u,
                                                                                    (short)(8 * r + 4)), L)
                                   : ld(P->per32[sc]);
        s[r & 1] = dot64(s[r & 1], iq2_grid(sp, r), sign_mask_f(st->sb, 4 * h + r, form), q + 64 * r, scale);
    }
    return _mm512_add_epi32(s[0], s[1]);
}

IQ2_STAGES(iq2_xxs, _loads, SL_IQ_FORM_LOADS)
IQ2_STAGES(iq2_xxs, _shuffles, SL_IQ_FORM_SHUFFLES)

/* IQ2_S: 10-bit indices (low byte in qs, bits 8-9 in qh), full sign bytes after the indices (the
 * opmasks as stored), scales as IQ2_XS; lookups over 1024 points: two 512-point halves merged
 * under bit 9. */
VBMI_INLINE void lookup_iq2_s(const sl_block_iq2_s *a, const sl_block_iq2_s *b, const grid_planes *P,
                              staged_pair *st, int form)
{
    const __m512i idx = _mm512_permutex2var_epi8(ld(a->qs), ld(P->iq2s_lookup_ctrl), ld(b->qs));
    uint64_t qa, qb;
    memcpy(&qa, a->qh, 8);
    memcpy(&qb, b->qh, 8);
    const __m512i qh = _mm512_mask_set1_epi64(_mm512_set1_epi64((long long)qa), 0xaa, (long long)qb);   /* lane q: block q mod 2 */
    const seg_masks m = segments(idx, _mm512_bitshuffle_epi64_mask(qh, ld(P->iq2s_bit8_ctrl)));
    const __mmask64 b9 = _mm512_bitshuffle_epi64_mask(qh, ld(P->iq2s_bit9_ctrl));
    const __m512i lo = _mm512_mask_blend_epi8(b9, look512(P->iq2s[0], idx, m, form), look512(P->iq2s[0] + 512, idx, m, form));
    const __m512i hi = _mm512_mask_blend_epi8(b9, look512(P->iq2s[1], idx, m, form), look512(P->iq2s[1] + 512, idx, m, form));
    st->v[0] = _mm512_unpacklo_epi8(lo, hi);
    st->v[1] = _mm512_unpackhi_epi8(lo, hi);
}

/* Signs: the stored sign bytes are the opmasks; LOADS copies them to the stack and loads them
 * from there (opaque, see sign_mask), SHUFFLES loads each straight from the block (kmovq from
 * memory) — fewer instructions, no store. */
VBMI_INLINE __m512i products_iq2_s(const sl_block_iq2_s *b, const int8_t *q, const grid_planes *P,
                                   const staged_pair *st, int h, int form)
{
    const bool shuf = form == SL_IQ_FORM_SHUFFLES;
    __mmask64 sb[4];
    memcpy(sb, b->qs + SL_QK_K / 8, sizeof sb);
    __m512i s[2] = { _mm512_setzero_si512(), _mm512_setzero_si512() };
    const __m512i sp = iq2_spread(st->v[h]), sc = shuf ? scale_bytes(b->scales) : _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        const __m512i scale = shuf ? scale_reg(sc, r) : scale_rows(P, b->scales, r);
        uint64_t word;
        memcpy(&word, b->qs + SL_QK_K / 8 + 8 * r, sizeof word);
        const __mmask64 signs = shuf ? _cvtu64_mask64(word) : sign_mask(sb, r);
        s[r & 1] = dot64(s[r & 1], iq2_grid(sp, r), signs, q + 64 * r, scale);
    }
    return _mm512_add_epi32(s[0], s[1]);
}

IQ2_STAGES(iq2_s, _loads, SL_IQ_FORM_LOADS)
IQ2_STAGES(iq2_s, _shuffles, SL_IQ_FORM_SHUFFLES)

VBMI_EXPORTS_FORMS(iq2_s, 0.125f)
VBMI_EXPORTS_FORMS(iq2_xxs, 0.125f)
VBMI_EXPORTS_FORMS(iq2_xs, 0.125f)

#endif
