/* kernels/gemm_kpack.h — the weight layout the AVX-512 VNNI and AVX2 K-quant GEMMs share
 * (kernels/gemm_vnni.c, kernels/gemm_avx2.c): one super-block of 16 weight rows, unpacked once per
 * call and reused across every activation vector.
 *
 * Lanes are rows: dword r of w[k] holds row r's (unsigned) quants 4k..4k+3, so one vpdpbusd (or
 * vpmaddubsw + vpmaddwd) with the vector's 4 bytes 4k..4k+3 broadcast to every dword gives, in lane
 * r, the exact sum of those 4 products of row r.  A 16-row w[k] is one zmm, or two ymm (rows 0..7,
 * 8..15).  Scales and the min / offset terms are per row, in the same lane order.
 *
 * The includer has <immintrin.h>, kernels/k_common.h, and defines KPACK_TARGET (a target attribute
 * at least as wide as AVX2).  x86-64 only.
 */
#ifndef SL_KERNELS_GEMM_KPACK_H
#define SL_KERNELS_GEMM_KPACK_H

typedef struct {
    uint32_t w[64][16];   /* dword r of w[k]: row r's quants 4k..4k+3 (Q4_K 0..15, Q6_K 0..63) */
    int32_t sc[16][16];   /* sub-block scale (Q4_K j < 8 of 32 elements, Q6_K s < 16 of 16): int32,
                             or the int16 pair (sc, sc) when packed for vpmaddwd (`pair`) */
    int32_t mp[8][16];    /* int16 pairs for vpmaddwd/vpdpwssd with the bsums dword t (bsums 2t, 2t+1):
                             Q4_K (m_t, m_t) -> M; Q6_K (sc_2t, sc_2t+1) -> the -32 offset's C */
    float d[16], dmin[16];
} sl_kpack;

#define KPACK_SLOTS 16

/* Row-lane gather of the dword at byte `off` of super-block i of rows 8h..8h+7 (masked: rows >= nr
 * read nothing and give 0). */
KPACK_TARGET static inline __m256i kpack_gather(const uint8_t *b0, size_t off, __m256i idx, __m256i mask)
{
    return _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), (const int *)(b0 + off), idx, mask, 1);
}

KPACK_TARGET static inline void kpack_lanes(size_t row_bytes, int nr, int h, __m256i *idx, __m256i *mask)
{
    const __m256i lane = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(8 * h));
    *idx = _mm256_mullo_epi32(lane, _mm256_set1_epi32((int)row_bytes));
    *mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr), lane);
}

static inline int32_t kpack_scale(int s, bool pair) { return pair ? (int32_t)((uint32_t)(uint16_t)s * 0x10001u) : s; }
static inline int32_t kpack_pair(int lo, int hi) { return (int32_t)((uint32_t)(uint16_t)lo | (uint32_t)(uint16_t)hi << 16); }

/* Contract: super-block i of rows r < nr (<= 16; the rest zero weights and scales) of the Q4_K
 * matrix w (row stride row_bytes) into *p; sub-block scales as int32, or (sc, sc) pairs (`pair`). */
KPACK_TARGET static void kpack_q4_k(const uint8_t *w, size_t row_bytes, int nr, int64_t i, bool pair, sl_kpack *p)
{
    const uint8_t *b0 = w + (size_t)i * sizeof(sl_block_q4_k);
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int h = 0; h < 2; h++) {
        __m256i idx, mask;
        kpack_lanes(row_bytes, nr, h, &idx, &mask);
        for (int g = 0; g < 4; g++)
            for (int k = 0; k < 8; k++) {   /* qs[32g + 4k..]: elements 64g + 4k.. (low), 64g + 32 + 4k.. (high) */
                const __m256i v = kpack_gather(b0, offsetof(sl_block_q4_k, qs) + 32 * g + 4 * k, idx, mask);
                _mm256_storeu_si256((__m256i *)&p->w[16 * g + k][8 * h], _mm256_and_si256(v, m4));
                _mm256_storeu_si256((__m256i *)&p->w[16 * g + 8 + k][8 * h], _mm256_and_si256(_mm256_srli_epi32(v, 4), m4));
            }
    }
    for (int r = 0; r < 16; r++) {
        uint8_t sc[8] = { 0 }, m[8] = { 0 };
        p->d[r] = p->dmin[r] = 0.0f;
        if (r < nr) {
            const sl_block_q4_k *b = (const sl_block_q4_k *)(b0 + (size_t)r * row_bytes);
            sl_k_scales8(b->scales, sc, m);
            p->d[r] = sl_f16_to_f32(b->d);
            p->dmin[r] = sl_f16_to_f32(b->dmin);
        }
        for (int j = 0; j < 8; j++) {
            p->sc[j][r] = kpack_scale(sc[j], pair);
            p->mp[j][r] = kpack_pair(m[j], m[j]);
        }
    }
}

/* Contract: as kpack_q4_k for Q6_K: q unsigned (0..63, the -32 goes through the bsums), 16 scales,
 * mp = the scale pairs, d. */
KPACK_TARGET static void kpack_q6_k(const uint8_t *w, size_t row_bytes, int nr, int64_t i, bool pair, sl_kpack *p)
{
    const uint8_t *b0 = w + (size_t)i * sizeof(sl_block_q6_k);
    const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(0x03);
    for (int h = 0; h < 2; h++) {
        __m256i idx, mask;
        kpack_lanes(row_bytes, nr, h, &idx, &mask);
        for (int half = 0; half < 2; half++)
            for (int l4 = 0; l4 < 8; l4++) {   /* elements 128 half + 32k + 4 l4 .. +3, k < 4 */
                const size_t l = (size_t)(4 * l4);
                const __m256i qa = kpack_gather(b0, offsetof(sl_block_q6_k, ql) + 64 * half + l, idx, mask);
                const __m256i qb = kpack_gather(b0, offsetof(sl_block_q6_k, ql) + 64 * half + 32 + l, idx, mask);
                const __m256i qh = kpack_gather(b0, offsetof(sl_block_q6_k, qh) + 32 * half + l, idx, mask);
                const __m256i q[4] = {
                    _mm256_or_si256(_mm256_and_si256(qa, m4), _mm256_slli_epi32(_mm256_and_si256(qh, m3), 4)),
                    _mm256_or_si256(_mm256_and_si256(qb, m4), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(qh, 2), m3), 4)),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(qa, 4), m4),
                                    _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(qh, 4), m3), 4)),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(qb, 4), m4),
                                    _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(qh, 6), m3), 4)),
                };
                for (int k = 0; k < 4; k++)
                    _mm256_storeu_si256((__m256i *)&p->w[32 * half + 8 * k + l4][8 * h], q[k]);
            }
    }
    for (int r = 0; r < 16; r++) {
        int8_t sc[16] = { 0 };
        p->d[r] = p->dmin[r] = 0.0f;
        if (r < nr) {
            const sl_block_q6_k *b = (const sl_block_q6_k *)(b0 + (size_t)r * row_bytes);
            memcpy(sc, b->scales, sizeof sc);
            p->d[r] = sl_f16_to_f32(b->d);
        }
        for (int s = 0; s < 16; s++) p->sc[s][r] = kpack_scale(sc[s], pair);
        for (int t = 0; t < 8; t++) p->mp[t][r] = kpack_pair(sc[2 * t], sc[2 * t + 1]);
    }
}

/* Q8_K vector block fields the kernels read: 4 quants from byte 4k, the bsums pair t, d. */
static inline int32_t kpack_act4(const sl_block_q8_k *y, int k)
{
    int32_t v;
    memcpy(&v, y->qs + 4 * k, sizeof v);
    return v;
}

static inline int32_t kpack_bsum2(const sl_block_q8_k *y, int t)
{
    int32_t v;
    memcpy(&v, y->bsums + 2 * t, sizeof v);
    return v;
}

#endif
