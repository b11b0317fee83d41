/* kernels/simd_avx512_vbmi_planes.c — the rows forms of the IQ3_XXS and IQ3_S dots x Q8_K in
 * coordinate-plane order: the SHUFFLES form's rows dot (AMD; kernels/simd.h SL_IQ_FORM_*).  The
 * single and 4-vector dots stay in kernels/simd_avx512_vbmi.c.
 *
 * Why: on Zen 4 every 512-bit shuffle and multiply costs a cycle of the one pipe pair that does
 * them, and vpermt2b (three register sources) also competes with vpdpwssd / vpdpbusd (measured:
 * vpermt2b + vpdpbusd ~1.07 per cycle together, vpermb + vpdpbusd ~1.5).  The element-order
 * design spends ~10 shuffles per super-block putting the looked-up coordinates back in element
 * order (byte unpacks) and 8 multiplies on the products (vpmaddubsw + vpdpwssd per 64 elements).
 * Here the activations go in the grid's order instead, once per call for all its rows: register j
 * of a super-block holds coordinate j of its 64 points (element 4p + j at byte p), so a lookup's
 * result is used as it comes, and vpdpbusd (4 bytes into an int32) over the four registers leaves
 * dword d holding points 4d..4d+3 — all of sub-block d / 2 — so one vpmulld applies the
 * super-block's scales.  In L1/L2, one thread, 16 rows x 4096: IQ3_XXS ~9.8 -> ~7.1 ns per
 * super-block, IQ3_S ~10.4 -> ~8.8 (docs/benchmarks.md, "Zen 4, session 15").
 *
 * Contract: as every rows form (kernels/simd.h sl_qdotr_fn): out[r] has the bits of the portable
 * single dot of row r.  S of a super-block is the exact int32 sum (integer addition in any order:
 * |S| < 2^26 for IQ3_XXS, 62 * 127 * 31 * 256; far less for IQ3_S), (float)S by vcvtdq2ps, then
 * acc = acc + (f16(d) * y.d) * (float)S in super-block order, acc kept in out[r] between chunks
 * of activations (a float store and load: exact), out[r] = scale * acc at the end.
 */
#include "kernels/simd_avx512_vbmi.h"

#if defined(__x86_64__) || defined(__i386__)

/* Super-blocks of activations put in plane order per pass: 16 KiB on the stack.  A row longer
 * than this (more than 16384 columns) is done in passes, each row's acc carried in out[r]. */
#define PLANES_CHUNK 64

/* out[256 i + 64 j + p] = y[i].qs[4 p + j] for i < nsb: per input register (points 16k..16k+15)
 * one vpermb to coordinate-major order, then the 4 x 4 transpose of their 128-bit lanes. */
VBMI_INLINE void to_planes(const sl_block_q8_k *y, int64_t nsb, int8_t *out, const grid_planes *P)
{
    const __m512i ctrl = ld(P->plane_ctrl);
    for (int64_t i = 0; i < nsb; i++) {
        __m512i q[4];
        for (int k = 0; k < 4; k++) q[k] = _mm512_permutexvar_epi8(ctrl, ld(y[i].qs + 64 * k));
        const __m512i t0 = _mm512_shuffle_i64x2(q[0], q[1], 0x44), t1 = _mm512_shuffle_i64x2(q[0], q[1], 0xee);
        const __m512i t2 = _mm512_shuffle_i64x2(q[2], q[3], 0x44), t3 = _mm512_shuffle_i64x2(q[2], q[3], 0xee);
        int8_t *o = out + (size_t)i * SL_QK_K;
        _mm512_store_si512(o, _mm512_shuffle_i64x2(t0, t2, 0x88));
        _mm512_store_si512(o + 64, _mm512_shuffle_i64x2(t0, t2, 0xdd));
        _mm512_store_si512(o + 128, _mm512_shuffle_i64x2(t1, t3, 0x88));
        _mm512_store_si512(o + 192, _mm512_shuffle_i64x2(t1, t3, 0xdd));
    }
}

/* acc + the products of plane j: grid bytes g (unsigned) x the activations q, negated where the
 * point's sign bit for coordinate j is set (byte p of `signs` holds point p's four sign bits in
 * bits 0-3 for even p, 4-7 for odd p: the 8 signs of its group of two points). */
VBMI_INLINE __m512i plane_dot(__m512i acc, __m512i g, __m512i signs, const int8_t *q, int j)
{
    const __mmask64 neg = _mm512_test_epi8_mask(signs, _mm512_set1_epi16((short)((1 << j) | (1 << (j + 4)) << 8)));
    const __m512i a = _mm512_load_si512(q);
    return _mm512_dpbusd_epi32(acc, g, _mm512_mask_sub_epi8(a, neg, _mm512_setzero_si512(), a));
}

/* IQ3_XXS: the two nibble planes of coordinate-index pairs (256 entries: two vpermt2b and a blend
 * each), mapped to the values by vpshufb (which reads bits 0-3 and 7 of an index: the shifted
 * words' low bytes have bit 7 clear, a neighbour's bit 3, as in spread_mapped_planes).  Signs:
 * qword L (sub-block L's word) gives byte i the 7-bit field of group i / 2 (vpmultishiftqb),
 * completed with its parity (the affine map of lookup_iq3_xxs).  Scales: the word's bits 28-31
 * in both dwords of its qword, L = 2s + 1. */
VBMI_INLINE __m512i planes_iq3_xxs(const uint8_t *blk, const int8_t *q, const grid_planes *P)
{
    const sl_block_iq3_xxs *b = (const sl_block_iq3_xxs *)blk;
    const __m512i idx = ld(b->qs);
    const __mmask64 upper = _mm512_movepi8_mask(idx);   /* entries 128-255 */
    const __m512i aux = _mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *)(b->qs + SL_QK_K / 4)));
    const __m512i fields = _mm512_multishift_epi64_epi8(_mm512_set1_epi64(0x15150e0e07070000ll), aux);
    const __m512i signs = _mm512_gf2p8affine_epi64_epi8(fields, _mm512_set1_epi64(0x010204081020407fll), 0);
    const __m512i vals = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)P->iq3xxs_vals));
    __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const uint8_t *t = P->iq3xxs[h];
        const __m512i x = _mm512_mask_blend_epi8(upper, _mm512_permutex2var_epi8(ld(t), idx, ld(t + 64)),
                                                 _mm512_permutex2var_epi8(ld(t + 128), idx, ld(t + 192)));
        acc = plane_dot(acc, _mm512_shuffle_epi8(vals, x), signs, q + 128 * h, 2 * h);
        acc = plane_dot(acc, _mm512_shuffle_epi8(vals, _mm512_srli_epi16(x, 4)), signs, q + 128 * h + 64, 2 * h + 1);
    }
    const __m512i s = _mm512_srli_epi32(_mm512_shuffle_epi32(aux, (_MM_PERM_ENUM)0xa0), 27);   /* 2s | a bit */
    return _mm512_mullo_epi32(acc, _mm512_ternarylogic_epi32(s, _mm512_set1_epi32(0x1e), _mm512_set1_epi32(1), 0xea));
}

/* IQ3_S: the nibble planes of coordinate values (512 entries: the 9th index bit of point p is bit
 * p of qh, in this order as stored).  Signs: byte p = sign byte p / 2 (element order as stored).
 * Scales: nibble d / 2 of the scale word for dword d, L = 2s + 1. */
VBMI_INLINE __m512i planes_iq3_s(const uint8_t *blk, const int8_t *q, const grid_planes *P)
{
    const sl_block_iq3_s *b = (const sl_block_iq3_s *)blk;
    const __m512i idx = ld(b->qs), low4 = _mm512_set1_epi8(0x0f);
    uint64_t qh;
    uint32_t sc;
    memcpy(&qh, b->qh, sizeof qh);
    memcpy(&sc, b->scales, sizeof sc);
    const seg_masks m = { 0, _mm512_movepi8_mask(idx), _cvtu64_mask64(qh) };
    const __m512i signs = _mm512_permutexvar_epi8(ld(P->half_ctrl), _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)b->signs)));
    __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        /* look128f: one vpermt2b, bit 6 inside.  The tables through opaque(): hoisted, their 16
         * registers (vpermt2b overwrites one table) made gcc copy them and spill to the stack
         * (10 stores, 12 loads per 4 super-blocks); as memory operands, streaming IQ3_S ran
         * ~71 -> ~81% of the read loop (docs/benchmarks.md, "Zen 4, session 16"). */
        const __m512i x = look512(opaque(P->iq3s[h]), idx, m, SL_IQ_FORM_SHUFFLES);
        acc = plane_dot(acc, _mm512_and_si512(x, low4), signs, q + 128 * h, 2 * h);
        acc = plane_dot(acc, _mm512_and_si512(_mm512_srli_epi16(x, 4), low4), signs, q + 128 * h + 64, 2 * h + 1);
    }
    const __m512i s = _mm512_srlv_epi32(_mm512_set1_epi32((int)sc), _mm512_setr_epi32(0, 0, 4, 4, 8, 8, 12, 12, 16, 16, 20, 20, 24, 24, 28, 28));
    return _mm512_mullo_epi32(acc, _mm512_ternarylogic_epi32(_mm512_add_epi32(s, s), _mm512_set1_epi32(0x1e), _mm512_set1_epi32(1), 0xea));
}

typedef __m512i (*planes_fn)(const uint8_t *blk, const int8_t *q, const grid_planes *P);

/* The rows loop (contract above): per pass of up to PLANES_CHUNK super-blocks the activations in
 * plane order, then every row over them, four super-blocks per reduction. */
VBMI_INLINE void planes_rows(const uint8_t *w, size_t row_bytes, size_t bytes, const sl_block_q8_k *y, int64_t nsb,
                             int64_t nrows, float scale, float *out, planes_fn sb)
{
    const grid_planes *P = planes();
    _Alignas(64) int8_t q[PLANES_CHUNK * SL_QK_K];
    for (int64_t c0 = 0; c0 < nsb; c0 += PLANES_CHUNK) {
        const int64_t nc = nsb - c0 < PLANES_CHUNK ? nsb - c0 : PLANES_CHUNK, n4 = nc / 4 * 4;
        const sl_block_q8_k *yc = y + c0;
        to_planes(yc, nc, q, P);
        for (int64_t r = 0; r < nrows; r++) {
            const uint8_t *wr = w + (size_t)r * row_bytes + (size_t)c0 * bytes;
            float acc = c0 ? out[r] : 0.0f;
            int64_t i = 0;
            for (; i < n4; i += 4) {
                __m512i s[4];
                float S[4];
                prefetch4(wr + (size_t)i * bytes, bytes);
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) s[k] = sb(wr + (size_t)(i + k) * bytes, q + (size_t)(i + k) * SL_QK_K, P);
                reduce4(s, S);
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) acc = acc + (f16_at(wr + (size_t)(i + k) * bytes) * yc[i + k].d) * S[k];
            }
            for (; i < nc; i++) {
                const int32_t S = _mm512_reduce_add_epi32(sb(wr + (size_t)i * bytes, q + (size_t)i * SL_QK_K, P));
                acc = acc + (f16_at(wr + (size_t)i * bytes) * yc[i].d) * i2f(S);
            }
            out[r] = acc;
        }
    }
    for (int64_t r = 0; r < nrows; r++) out[r] = nsb > 0 ? scale * out[r] : scale * 0.0f;
}

VBMI void sl_vbmi_planes_dotr_iq3_xxs(const void *restrict w, size_t row_bytes, const void *restrict y, int64_t n,
                                      int64_t nrows, float scale, float *restrict out)
{
    planes_rows(w, row_bytes, sizeof(sl_block_iq3_xxs), y, n / SL_QK_K, nrows, scale, out, planes_iq3_xxs);
}

VBMI void sl_vbmi_planes_dotr_iq3_s(const void *restrict w, size_t row_bytes, const void *restrict y, int64_t n,
                                    int64_t nrows, float scale, float *restrict out)
{
    planes_rows(w, row_bytes, sizeof(sl_block_iq3_s), y, n / SL_QK_K, nrows, scale, out, planes_iq3_s);
}

#endif
