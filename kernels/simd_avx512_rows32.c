/* kernels/simd_avx512_rows32.c — AVX-512 rows forms (sl_qdotr_fn, kernels/simd.h) of the two
 * 32-block types with Q8_0 activations that the issue-16 files carry, IQ4_NL and Q5_0: the matvec
 * of a decode step, out[r] = the single dot of row r with the same bits.
 *
 * The bits are those of the canonical q4_0 steps (kernels/qdot.c, kernels/qdot_quants.c): for
 * block i, lane k of acc[i % 2] += s_i * (float)t_ik, where s_i = f16(wd_i) * f16(yd_i) (exact)
 * and t_ik is the exact integer sum over the block's elements 4k..4k+3 of q * a; then
 * lanes_reduce.  Only the order of the work differs, never an operation on a float.
 *
 * Why: the single dots (kernels/simd_avx512_quants.c) issue ~20 vector instructions per pair of
 * blocks, and at 2 threads on Zen 4 they ran at ~75% of the read loop: compute-bound, since the
 * blocks are small (18 and 22 bytes).  Here the work that depends only on the activation vector
 * is done once per call, for all of its rows:
 *   - the activations of a pair of blocks are stored in the order one word permute unpacks the
 *     weights to: dword lane 2m + b holds block b's elements 4m..4m+3 (m < 8);
 *   - the weights are biased to unsigned bytes u = q + bias (IQ4_NL: kvalue + 128, by table;
 *     Q5_0: the 5-bit value itself, bias 16), and vpdpbusd starts from the stored per-lane
 *     correction -bias * (sum of the lane's 4 activations): the lane sum is exactly t, with no
 *     sign masks (|u a| sums < 2^17, nothing saturates);
 *   - a row's scales s_i are made in a pass over its headers before its dot, 8 (Q5_0: 6) block
 *     headers per word permute and one f16 conversion; in the interleaved layout the lanes
 *     alternate s_i, s_i+1, so a pair's scale operand is one 8-byte broadcast load.
 * Rows go two at a time and share the activation loads; while two rows' dots run, the next two
 * rows are prefetched, so that their scales pass reads the cache (without it, that pass waited on
 * memory and the form streamed at ~50%; with the scales made in the loop and read back at once,
 * the same; docs/benchmarks.md, "Zen 4, session 17").  n above SL_ROWS32_MAX_N elements, or an
 * odd number of blocks: the single dot row by row (same bits).  Tested against the portable
 * single dots in tests/test_quant_types.c (dotr_bit_identical_to_single_dots). */
#include "kernels/k_quants.h"
#include "kernels/simd.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,bmi2")))
#define AVX512_INLINE AVX512 static inline __attribute__((always_inline))

AVX512 static inline __m256 hi_ps(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }
#define SL_REDUCE_TARGET AVX512
#include "kernels/simd_reduce.h"   /* lanes_reduce */

/* Elements per call held in the prepared form (~2.4 KiB of stack per 1024 elements: the pairs'
 * activations and corrections, the activation scales, two rows' scales; 38 KiB at the limit); the
 * largest matrix inputs of the 7-14B models are 14336 (Llama 3 8B, Mistral Nemo ffn_down). */
#define SL_ROWS32_MAX_N 16384
#define MAX_PAIRS (SL_ROWS32_MAX_N / 64)

/* The prepared activations of blocks 2p, 2p + 1: bytes in the interleaved order, and the lane
 * corrections -bias * sum. */
typedef struct { __m512i a, c; } pair_act;

/* One type's geometry: block bytes, the word of its nibbles (qs), the bias. */
typedef struct { int bytes, qs_word, bias; } blk32;
static const blk32 k_iq4_nl = { sizeof(sl_block_iq4_nl), offsetof(sl_block_iq4_nl, qs) / 2, 128 };
static const blk32 k_q5_0 = { sizeof(sl_block_q5_0), offsetof(sl_block_q5_0, qs) / 2, 16 };

AVX512_INLINE float f16f(uint16_t h) { return _cvtsh_ss(h); }

/* The vpermw control from a pair's raw bytes (block i at byte 0, i + 1 at `bytes`) to the
 * interleaved layout: result dword 2m + b = the 4 nibble bytes of elements 4m..4m+3 of block b
 * (qs bytes 4(m % 4)..+3: low nibbles for m < 4, high ones, shifted down by 4, for m >= 4). */
AVX512_INLINE __m512i nibble_ctrl(blk32 t)
{
    uint16_t w[32];
    for (int d = 0; d < 16; d++)
        for (int e = 0; e < 2; e++) w[2 * d + e] = (uint16_t)(t.qs_word + (d % 2) * t.bytes / 2 + 2 * (d / 2 % 4) + e);
    return _mm512_loadu_si512(w);
}

/* The unsigned weights u of blocks i, i + 1 (raw: their bytes), in the interleaved layout. */
AVX512_INLINE __m512i unpack_u(blk32 t, const void *raw_blocks, __m512i ctrl, __m512i kvu)
{
    const __m512i shift = _mm512_setr_epi64(0, 0, 0, 0, 0x0004000400040004ll, 0x0004000400040004ll,
                                            0x0004000400040004ll, 0x0004000400040004ll);
    const __m512i raw = _mm512_maskz_loadu_epi8(((__mmask64)1 << (2 * t.bytes)) - 1, raw_blocks);
    const __m512i nib = _mm512_and_si512(_mm512_srlv_epi16(_mm512_permutexvar_epi16(ctrl, raw), shift), _mm512_set1_epi8(0x0f));
    if (t.bias == 128) return _mm512_shuffle_epi8(kvu, nib);   /* IQ4_NL: kvalue + 128 */
    /* Q5_0: bit 4 of element 4m + e of block b is qh bit 4m + e; its byte is 4(2m + b) + e */
    const sl_block_q5_0 *b = raw_blocks;
    const __mmask64 hm = _pdep_u64(sl_q5_qh(b[0].qh), 0x0f0f0f0f0f0f0f0full) | _pdep_u64(sl_q5_qh(b[1].qh), 0xf0f0f0f0f0f0f0f0ull);
    return _mm512_mask_add_epi8(nib, hm, nib, _mm512_set1_epi8(16));
}

/* Blocks per scale group: the most whose d words fall in 64 words of the 128 bytes from the first
 * (8 for 18-byte blocks, 6 for 22-byte ones); G * bytes >= 128, so both loads stay in the blocks. */
AVX512_INLINE int group_blocks(blk32 t) { return 63 / (t.bytes / 2) + 1; }

/* S[k] = f16(wd) * yd[k] for the G blocks at w (S and yd hold 8 floats): their headers by one
 * vpermw from 128 bytes and one f16 conversion; ctrl = word k * bytes / 2 for k < G. */
AVX512_INLINE void group_scales(const unsigned char *w, const float *yd, __m512i ctrl, float *S)
{
    const __m512i d = _mm512_permutex2var_epi16(_mm512_loadu_si512(w), ctrl, _mm512_loadu_si512(w + 64));
    _mm256_storeu_ps(S, _mm256_mul_ps(_mm256_cvtph_ps(_mm512_castsi512_si128(d)), _mm256_loadu_ps(yd)));
}

/* S[j] = f16(wd_j) * yd[j] for a row's blocks j < nb (S and yd hold nb + 8 floats). */
AVX512_INLINE void row_scales(blk32 t, const unsigned char *w, const float *yd, int64_t nb, __m512i dctrl, float *S)
{
    const int G = group_blocks(t);
    int64_t j = 0;
    for (; j + G <= nb; j += G) group_scales(w + (size_t)j * (size_t)t.bytes, yd + j, dctrl, S + j);
    for (; j < nb; j++) {
        uint16_t h;
        memcpy(&h, w + (size_t)j * (size_t)t.bytes, sizeof h);
        S[j] = f16f(h) * yd[j];
    }
}

/* lane 2m + b of a pair's products: acc[b][m]; back to acc[0] in lanes 0-7, acc[1] in 8-15 */
AVX512_INLINE float finish(__m512 acc)
{
    acc = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15), acc);
    return lanes_reduce(_mm512_castps512_ps256(acc), hi_ps(acc));
}

/* acc + s * (float)t for the pair p of a row (blocks at wb, scales at s2) */
AVX512_INLINE __m512 pair_step(blk32 t, __m512 acc, const unsigned char *wb, const pair_act *pa, const float *s2,
                               __m512i ctrl, __m512i kvu)
{
    double s;
    memcpy(&s, s2, sizeof s);   /* s_i, s_i+1: lanes alternate in the interleaved layout */
    const __m512 l = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(pa->c, unpack_u(t, wb, ctrl, kvu), pa->a));
    return _mm512_add_ps(acc, _mm512_mul_ps(_mm512_castpd_ps(_mm512_set1_pd(s)), l));
}

/* out[0] (and out[1] when `two`) = the dots of the row at w0 (and the next, row_bytes on).  The
 * scales are made first, from the headers of the whole rows; so that this pass finds them in the
 * cache, the dot prefetches the `nnext` rows after these (a pass ahead, not SL_PREFETCH_AHEAD
 * bytes: the scales pass reads the rows before the dot does). */
AVX512_INLINE void rows_dot(blk32 t, bool two, const unsigned char *w0, size_t row_bytes, int nnext, const pair_act *pa,
                            const float *yd, int64_t nb, __m512i ctrl, __m512i dctrl, __m512i kvu, float *S0, float *S1,
                            float *out)
{
    const size_t pair_bytes = 2 * (size_t)t.bytes;
    const unsigned char *w1 = w0 + row_bytes, *next = w0 + (two ? 2 : 1) * row_bytes;
    row_scales(t, w0, yd, nb, dctrl, S0);
    if (two) row_scales(t, w1, yd, nb, dctrl, S1);
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    for (int64_t p = 0; 2 * p < nb; p++) {
        for (int k = 0; k < nnext; k++) __builtin_prefetch(next + k * row_bytes + p * pair_bytes, 0, 3);
        acc0 = pair_step(t, acc0, w0 + p * pair_bytes, &pa[p], S0 + 2 * p, ctrl, kvu);
        if (two) acc1 = pair_step(t, acc1, w1 + p * pair_bytes, &pa[p], S1 + 2 * p, ctrl, kvu);
    }
    out[0] = finish(acc0);
    if (two) out[1] = finish(acc1);
}

AVX512_INLINE void dotr32(blk32 t, sl_qdot_fn single, const void *restrict vw, size_t row_bytes, const void *restrict vy,
                          int64_t n, int64_t nrows, float *restrict out)
{
    const int64_t nb = n / SL_QK, np = nb / 2;
    if (n > SL_ROWS32_MAX_N || (nb & 1)) {
        for (int64_t r = 0; r < nrows; r++) out[r] = single((const unsigned char *)vw + (size_t)r * row_bytes, vy, n);
        return;
    }
    const sl_block_q8_0 *y = vy;
    pair_act pa[MAX_PAIRS];
    float yd[2 * MAX_PAIRS + 8];
    /* dword d of the pair's 64 bytes <- dword 8(d % 2) + d / 2 (block b = d % 2, m = d / 2) */
    const __m512i act_ctrl = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
    for (int64_t p = 0; p < np; p++) {
        const __m512i a = _mm512_permutexvar_epi32(act_ctrl,
            _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)y[2 * p].qs)),
                               _mm256_loadu_si256((const __m256i *)y[2 * p + 1].qs), 1));
        pa[p].a = a;
        pa[p].c = _mm512_mullo_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), a),
                                     _mm512_set1_epi32(-t.bias));
        yd[2 * p] = f16f(y[2 * p].d);
        yd[2 * p + 1] = f16f(y[2 * p + 1].d);
    }
    for (int k = 0; k < 8; k++) yd[nb + k] = 0.0f;
    const __m512i ctrl = nibble_ctrl(t);
    const __m512i kvu = _mm512_add_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)sl_kvalues_iq4nl)),
                                        _mm512_set1_epi8((char)0x80));
    const int G = group_blocks(t);
    uint16_t dw[32] = { 0 };
    for (int k = 0; k < G; k++) dw[k] = (uint16_t)(k * t.bytes / 2);
    const __m512i dctrl = _mm512_loadu_si512(dw);
    const unsigned char *w = vw;
    float S0[2 * MAX_PAIRS + 8], S1[2 * MAX_PAIRS + 8];
    int64_t r = 0;
    for (; r + 2 <= nrows; r += 2) {
        const int nnext = nrows - r - 2 < 2 ? (int)(nrows - r - 2) : 2;
        rows_dot(t, true, w + (size_t)r * row_bytes, row_bytes, nnext, pa, yd, nb, ctrl, dctrl, kvu, S0, S1, out + r);
    }
    if (r < nrows) rows_dot(t, false, w + (size_t)r * row_bytes, row_bytes, 0, pa, yd, nb, ctrl, dctrl, kvu, S0, S1, out + r);
}

/* Contract: out[r] = sl_qdot_iq4_nl_q8_0(row r, y, n) bit for bit, r < nrows. */
AVX512 void sl_avx512_dotr_iq4_nl_q8_0(SL_DOTR_ARGS)
{
    dotr32(k_iq4_nl, sl_avx512_dot_iq4_nl_q8_0, w, row_bytes, y, n, nrows, out);
}

/* Contract: out[r] = sl_qdot_q5_0_q8_0(row r, y, n) bit for bit, r < nrows. */
AVX512 void sl_avx512_dotr_q5_0_q8_0(SL_DOTR_ARGS)
{
    dotr32(k_q5_0, sl_avx512_dot_q5_0_q8_0, w, row_bytes, y, n, nrows, out);
}

#else   /* not x86: dispatch.c never hands the AVX-512 set out */
void sl_avx512_dotr_iq4_nl_q8_0(SL_DOTR_ARGS)
{
    for (int64_t r = 0; r < nrows; r++) out[r] = sl_qdot_iq4_nl_q8_0((const unsigned char *)w + (size_t)r * row_bytes, y, n);
}
void sl_avx512_dotr_q5_0_q8_0(SL_DOTR_ARGS)
{
    for (int64_t r = 0; r < nrows; r++) out[r] = sl_qdot_q5_0_q8_0((const unsigned char *)w + (size_t)r * row_bytes, y, n);
}
#endif
