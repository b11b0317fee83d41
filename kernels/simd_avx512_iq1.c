/* kernels/simd_avx512_iq1.c — AVX-512 (F, BW, VL, VNNI; BMI2 for pdep) dots of IQ1_S and IQ1_M with Q8_K
 * activations.
 *
 * Why gathers here: the IQ1 grid has 2048 points, so byte-permute lookups (simd_avx512_vbmi.c)
 * would take 32 permutes per 64 indices and code byte; an 8-lane vpgatherdq of the 8-byte grid
 * rows takes ~3 cycles on the Sapphire Rapids we measure on, mostly on the load ports.  The AVX2
 * kernels they replace (simd_avx2_iq.c) gathered 4 rows at a time and rebuilt the scale and
 * shift-sign vectors per sub-block: 0.5 (IQ1_M) and 1.7 (IQ1_S) GB/s on one thread.
 *
 * Products: the rows hold grid + 1 (0, 1, 2: unsigned, vpmaddubsw's first operand), so a
 * super-block's sum is G' = sum L * sum (g + 1) q, and G = G' - sum L * (sum of q): the sums of q
 * per 16 elements are Q8_K's bsums, one vpmaddwd with the scales.  The shift term D = sum of
 * (+-L) * (sum of q over the shift's elements): per 32 (IQ1_S, bsums again), per 8 (IQ1_M, pair
 * sums of q by vpmaddubsw with ones, then vpdpwssd with the signed scales).  G and D are exact in
 * int32 (|G'| <= 256 * 2 * 127 * 15, the others smaller); the float steps are the portable ones,
 * (d * y.d) * ((float)G + 0.125f * (float)D), in order.  The loop gathers the next super-block's
 * rows before this one's products (the gathers' latency, as dot_staged in simd_avx512_vbmi.c).
 * In L1/L2 on one thread: IQ1_S ~72 cycles per super-block (AVX2: ~140), IQ1_M ~70 (AVX2: ~188);
 * the dependency chains, not the ports, bound them (llvm-mca's port model says ~46).
 */
#include "kernels/iq_common.h"
#include "kernels/simd.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <pthread.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,bmi2")))

typedef struct iq1_tables {
    _Alignas(64) uint64_t rows[SL_IQ1S_N];   /* the grid rows + 1 per byte: 0, 1, 2 */
    /* vpdpwssd scale operands from 6 bits s0 | s1 << 3, L = 2s + 1: per32[b] = 16 x L(s0),
     * 16 x L(s1) (IQ1_S: a scale per 32 elements); per16[b] = 8 x L(s0), 8 x L(s1) (IQ1_M) */
    _Alignas(64) int16_t per32[64][32];
    _Alignas(32) int16_t per16[64][16];
} iq1_tables;

static iq1_tables g_tab;
static pthread_once_t g_tab_once = PTHREAD_ONCE_INIT;

static void build_tables(void)
{
    const sl_iq_grids *g = sl_iq_grids_get();
    for (int i = 0; i < SL_IQ1S_N; i++)
        for (int j = 0; j < 8; j++) {
            const uint64_t v = (uint64_t)(uint8_t)((int8_t)(g->iq1s[i] >> 8 * j) + 1);
            g_tab.rows[i] |= v << 8 * j;
        }
    for (int b = 0; b < 64; b++)
        for (int k = 0; k < 32; k++) {
            g_tab.per32[b][k] = (int16_t)(2 * ((b >> (k < 16 ? 0 : 3)) & 7) + 1);
            if (k < 16) g_tab.per16[b][k] = (int16_t)(2 * ((b >> (k < 8 ? 0 : 3)) & 7) + 1);
        }
}

static const iq1_tables *tables(void)
{
    pthread_once(&g_tab_once, build_tables);
    return &g_tab;
}

/* The 32 grid rows of a super-block by four 8-lane gathers; idx0, idx1 = the 11-bit indices of
 * points 0-15, 16-31 (int32 lanes). */
AVX512 static inline void gather_rows(const iq1_tables *T, __m512i idx0, __m512i idx1, __m512i rows[4])
{
    rows[0] = _mm512_i32gather_epi64(_mm512_castsi512_si256(idx0), (const long long *)T->rows, 8);
    rows[1] = _mm512_i32gather_epi64(_mm512_extracti64x4_epi64(idx0, 1), (const long long *)T->rows, 8);
    rows[2] = _mm512_i32gather_epi64(_mm512_castsi512_si256(idx1), (const long long *)T->rows, 8);
    rows[3] = _mm512_i32gather_epi64(_mm512_extracti64x4_epi64(idx1, 1), (const long long *)T->rows, 8);
}

/* Index bits 8-10 of points 16h..16h+15 from 16 dword lanes of `hi` (lane k: the qh field of
 * point k's group, from `sel`), shifted by `sh`. */
AVX512 static inline __m512i index_of(const uint8_t *lo16, __m512i hi, __m512i sel, __m512i sh)
{
    const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)lo16));
    const __m512i h = _mm512_and_si512(_mm512_srlv_epi32(_mm512_permutexvar_epi32(sel, hi), sh), _mm512_set1_epi32(7));
    return _mm512_or_si512(lo, _mm512_slli_epi32(h, 8));
}

AVX512 static inline int32_t hsum256(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* IQ1_S: point p's index bits 8-10 are bits 3 (p mod 4) + 0..2 of qh[p / 4]. */
AVX512 static inline void rows_iq1_s(const iq1_tables *T, const sl_block_iq1_s *b, __m512i rows[4])
{
    const __m512i qh = _mm512_cvtepu16_epi32(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)b->qh)));
    const __m512i sel = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m512i sh = _mm512_setr_epi32(0, 3, 6, 9, 0, 3, 6, 9, 0, 3, 6, 9, 0, 3, 6, 9);
    gather_rows(T, index_of(b->qs, qh, sel, sh), index_of(b->qs + 16, qh, _mm512_add_epi32(sel, _mm512_set1_epi32(4)), sh), rows);
}

/* G and D of one IQ1_S super-block from its gathered rows. */
AVX512 static inline void sums_iq1_s(const iq1_tables *T, const sl_block_iq1_s *b, const sl_block_q8_k *y, const __m512i rows[4],
                                     int32_t *G, int32_t *D)
{
    uint16_t qh[8];
    memcpy(qh, b->qh, sizeof qh);
    __m512i s[2] = { _mm512_setzero_si512(), _mm512_setzero_si512() };
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        const unsigned sc = ((qh[2 * r] >> 12) & 7) | ((qh[2 * r + 1] >> 12) & 7) << 3;
        const __m512i q = _mm512_loadu_si512((const void *)(y->qs + 64 * r));
        s[r & 1] = _mm512_dpwssd_epi32(s[r & 1], _mm512_maddubs_epi16(rows[r], q), _mm512_load_si512((const void *)T->per32[sc]));
    }
    /* per sub-block: L (both of its bsums), and -L where its shift is negative */
    const __m128i h = _mm_loadu_si128((const __m128i *)b->qh);
    const __m128i L8 = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(h, 12), _mm_set1_epi16(7)), 1), _mm_set1_epi16(1));
    const __m256i Lw = _mm256_cvtepu16_epi32(L8), L = _mm256_or_si256(Lw, _mm256_slli_epi32(Lw, 16));
    const __m256i neg = _mm256_cvtepi16_epi32(_mm_srai_epi16(h, 15));
    const __m256i Ls = _mm256_sub_epi16(_mm256_xor_si256(L, neg), neg);
    const __m256i bs = _mm256_loadu_si256((const __m256i *)y->bsums);
    *G = _mm512_reduce_add_epi32(_mm512_add_epi32(s[0], s[1])) - hsum256(_mm256_madd_epi16(bs, L));
    *D = hsum256(_mm256_madd_epi16(bs, Ls));
}

/* IQ1_M: point p's index bits 8-10 are bits 4 (p mod 2) + 0..2 of qh[p / 2], its shift sign bit
 * 4 (p mod 2) + 3; half h of sub-block ib has scale bits 6 (ib mod 2) + 3h of scale word ib / 2. */
AVX512 static inline void rows_iq1_m(const iq1_tables *T, const sl_block_iq1_m *b, __m512i rows[4])
{
    const __m512i qh = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)b->qh));
    const __m512i sel = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    const __m512i sh = _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4);
    gather_rows(T, index_of(b->qs, qh, sel, sh), index_of(b->qs + 16, qh, _mm512_add_epi32(sel, _mm512_set1_epi32(8)), sh), rows);
}

AVX512 static inline void sums_iq1_m(const iq1_tables *T, const sl_block_iq1_m *b, const sl_block_q8_k *y, const __m512i rows[4],
                                     int32_t *G, int32_t *D)
{
    uint16_t sc[4];
    memcpy(sc, b->scales, sizeof sc);
    const __m128i h = _mm_loadu_si128((const __m128i *)b->qh);
    /* shift signs, bit p = point p: bit 3 of each byte for the even points, bit 7 for the odd */
    const uint32_t even = (uint32_t)_mm_movemask_epi8(_mm_slli_epi16(h, 4)), odd = (uint32_t)_mm_movemask_epi8(h);
    const uint32_t neg = _pdep_u32(even, 0x55555555u) | _pdep_u32(odd, 0xaaaaaaaau);
    const __m512i ones = _mm512_set1_epi8(1);
    __m512i g = _mm512_setzero_si512(), d = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        /* sub-blocks 2r, 2r + 1: their halves' scales, 8 int16 lanes each */
        const __m512i L = _mm512_mask_broadcast_i64x4(_mm512_castsi256_si512(_mm256_load_si256((const __m256i *)T->per16[sc[r] & 63])), 0xf0,
                                                      _mm256_load_si256((const __m256i *)T->per16[(sc[r] >> 6) & 63]));
        /* int16 lane k holds elements 2k, 2k + 1: point k / 4 of these 8 */
        const __mmask32 m = (__mmask32)(_pdep_u32((neg >> 8 * r) & 0xff, 0x11111111u) * 15u);
        const __m512i q = _mm512_loadu_si512((const void *)(y->qs + 64 * r));
        g = _mm512_dpwssd_epi32(g, _mm512_maddubs_epi16(rows[r], q), L);
        d = _mm512_dpwssd_epi32(d, _mm512_maddubs_epi16(ones, q), _mm512_mask_sub_epi16(L, m, _mm512_setzero_si512(), L));
    }
    /* L per 16 elements against the bsums: half h of sub-block ib is bsum 2 ib + h */
    const __m256i w = _mm256_permutexvar_epi16(_mm256_setr_epi16(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                                               _mm256_castsi128_si256(_mm_loadl_epi64((const __m128i *)sc)));
    const __m256i s3 = _mm256_and_si256(_mm256_srlv_epi16(w, _mm256_setr_epi16(0, 3, 6, 9, 0, 3, 6, 9, 0, 3, 6, 9, 0, 3, 6, 9)), _mm256_set1_epi16(7));
    const __m256i L16 = _mm256_or_si256(_mm256_slli_epi16(s3, 1), _mm256_set1_epi16(1));
    *G = _mm512_reduce_add_epi32(g) - hsum256(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), L16));
    *D = _mm512_reduce_add_epi32(d);
}

/* acc + (d * y.d) * ((float)G + 0.125f * (float)D) over the super-blocks in order, the next one's
 * rows gathered before this one's sums; `dbits` is the block's f16 scale bits. */
#define IQ1_DOT(t, dbits)                                                                                \
    const iq1_tables *T = tables();                                                                    \
    const sl_block_##t *w = vw;                                                                        \
    const sl_block_q8_k *y = vy;                                                                       \
    const int64_t nsb = n / SL_QK_K;                                                                   \
    float acc = 0;                                                                                     \
    __m512i cur[4], next[4];                                                                           \
    if (nsb > 0) rows_##t(T, &w[0], cur);                                                              \
    for (int64_t i = 0; i < nsb; i++) {                                                                \
        sl_prefetch_ahead(&w[i], sizeof w[i]);                                                         \
        const bool more = i + 1 < nsb;                                                                 \
        if (more) rows_##t(T, &w[i + 1], next);                                                        \
        int32_t G, D;                                                                                  \
        sums_##t(T, &w[i], &y[i], cur, &G, &D);                                                        \
        acc = acc + (sl_f16_to_f32(dbits) * y[i].d) * ((float)G + 0.125f * (float)D);                  \
        if (more)                                                                                      \
            for (int r = 0; r < 4; r++) cur[r] = next[r];                                              \
    }                                                                                                  \
    return acc

/* Contract: as sl_qdot_iq1_s_q8_k (same bits). */
AVX512 float sl_avx512_dot_iq1_s_q8_k(const void *restrict vw, const void *restrict vy, int64_t n) { IQ1_DOT(iq1_s, w[i].d); }

/* Contract: as sl_qdot_iq1_m_q8_k (same bits). */
AVX512 float sl_avx512_dot_iq1_m_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    IQ1_DOT(iq1_m, sl_iq1m_scale_bits(w[i].scales));
}

#else   /* not x86: the sets that use these are never handed out */
float sl_avx512_dot_iq1_s_q8_k(const void *restrict w, const void *restrict y, int64_t n) { return sl_qdot_iq1_s_q8_k(w, y, n); }
float sl_avx512_dot_iq1_m_q8_k(const void *restrict w, const void *restrict y, int64_t n) { return sl_qdot_iq1_m_q8_k(w, y, n); }
#endif
