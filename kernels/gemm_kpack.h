/* kernels/gemm_kpack.h — the weight layout the AVX-512 VNNI and AVX2 K-quant GEMMs share
 * (kernels/gemm_vnni.c, kernels/gemm_avx2.c): one super-block of 16 weight rows, unpacked once per
 * call and reused across every activation vector.
 *
 * Lanes are rows: dword r of w[k] holds row r's (unsigned) quants 4k..4k+3, so one vpdpbusd (or
 * vpmaddubsw + vpmaddwd) with the vector's 4 bytes 4k..4k+3 broadcast to every dword gives, in lane
 * r, the exact sum of those 4 products of row r.  A 16-row w[k] is one zmm, or two ymm (rows 0..7,
 * 8..15).  Scales and the min / offset terms are per row, in the same lane order.
 *
 * Packing cost decides the small batches (16 vectors: SL_GEMM_MIN_VECTORS): the quants are row
 * loads transposed 8 x 8 dwords in registers, the scales and d / dmin gathered per row and unpacked
 * lane-wise (sl_k_scales8's bit operations; halfs by F16C, exact).  Row gathers of the quants and
 * scalar scales cost ~19 vectors' worth of VNNI compute per block; this ~7.
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

/* Row-lane gather of the dword at byte `off` of the blocks of rows 8h..8h+7 (b0: row 0's block;
 * masked: rows >= nr read nothing and give 0). */
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

/* t[c] = dword c of the 32 bytes at byte `off` of the blocks of rows 8h..8h+7 (rows >= nr: 0), rows
 * in the lanes: 8 row loads and an 8 x 8 dword transpose. */
KPACK_TARGET static inline void kpack_rows8(const uint8_t *b0, size_t row_bytes, int nr, int h, size_t off, __m256i t[8])
{
    __m256i r[8];
    for (int i = 0; i < 8; i++)
        r[i] = 8 * h + i < nr ? _mm256_loadu_si256((const __m256i *)(b0 + (size_t)(8 * h + i) * row_bytes + off))
                              : _mm256_setzero_si256();
    __m256i u[8];
    for (int i = 0; i < 8; i += 4) {
        const __m256i t0 = _mm256_unpacklo_epi32(r[i], r[i + 1]), t1 = _mm256_unpackhi_epi32(r[i], r[i + 1]);
        const __m256i t2 = _mm256_unpacklo_epi32(r[i + 2], r[i + 3]), t3 = _mm256_unpackhi_epi32(r[i + 2], r[i + 3]);
        u[i] = _mm256_unpacklo_epi64(t0, t2);       /* dwords 0 | 4 of rows i..i+3 */
        u[i + 1] = _mm256_unpackhi_epi64(t0, t2);   /* 1 | 5 */
        u[i + 2] = _mm256_unpacklo_epi64(t1, t3);   /* 2 | 6 */
        u[i + 3] = _mm256_unpackhi_epi64(t1, t3);   /* 3 | 7 */
    }
    for (int c = 0; c < 4; c++) {
        t[c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x20);
        t[c + 4] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x31);
    }
}

/* Lanes x (0..65535 or sign-extended int16 values) as int32, or as the int16 pair (x, x). */
KPACK_TARGET static inline __m256i kpack_scale8(__m256i x, bool pair)
{
    return pair ? _mm256_or_si256(_mm256_and_si256(x, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(x, 16)) : x;
}

/* 8 halfs (the low 16 bits of each lane, or the high with `hi`) to f32. */
KPACK_TARGET static inline __m256 kpack_half8(__m256i x, bool hi)
{
    if (hi) x = _mm256_srli_epi32(x, 16);
    x = _mm256_and_si256(x, _mm256_set1_epi32(0xffff));
    return _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1)));
}

/* Contract: super-block i of rows r < nr (<= 16; the rest zero weights and scales) of the Q4_K
 * matrix w (row stride row_bytes) into *p; sub-block scales as int32, or (sc, sc) pairs (`pair`).
 * The scale unpacking is sl_k_scales8's, lane-wise. */
KPACK_TARGET static void kpack_q4_k(const uint8_t *w, size_t row_bytes, int nr, int64_t i, bool pair, sl_kpack *p)
{
    const uint8_t *b0 = w + (size_t)i * sizeof(sl_block_q4_k);
    const __m256i m4 = _mm256_set1_epi8(0x0f), lo6 = _mm256_set1_epi32(63), lo4 = _mm256_set1_epi32(15);
    const __m256i lo2 = _mm256_set1_epi32(3);
    for (int h = 0; h < 2; h++) {
        for (int g = 0; g < 4; g++) {   /* qs[32g + 4k..]: elements 64g + 4k.. (low), 64g + 32 + 4k.. (high) */
            __m256i t[8];
            kpack_rows8(b0, row_bytes, nr, h, offsetof(sl_block_q4_k, qs) + 32 * (size_t)g, t);
            for (int k = 0; k < 8; k++) {
                _mm256_storeu_si256((__m256i *)&p->w[16 * g + k][8 * h], _mm256_and_si256(t[k], m4));
                _mm256_storeu_si256((__m256i *)&p->w[16 * g + 8 + k][8 * h], _mm256_and_si256(_mm256_srli_epi32(t[k], 4), m4));
            }
        }
        __m256i idx, mask;
        kpack_lanes(row_bytes, nr, h, &idx, &mask);
        const __m256i dd = kpack_gather(b0, 0, idx, mask);   /* d | dmin << 16 */
        const __m256i u0 = kpack_gather(b0, offsetof(sl_block_q4_k, scales), idx, mask);
        const __m256i u1 = kpack_gather(b0, offsetof(sl_block_q4_k, scales) + 4, idx, mask);
        const __m256i u2 = kpack_gather(b0, offsetof(sl_block_q4_k, scales) + 8, idx, mask);
        for (int j = 0; j < 4; j++) {
            const __m256i b0j = _mm256_srli_epi32(u0, 8 * j), b1j = _mm256_srli_epi32(u1, 8 * j);
            const __m256i b2j = _mm256_srli_epi32(u2, 8 * j);
            const __m256i sc_lo = _mm256_and_si256(b0j, lo6), m_lo = _mm256_and_si256(b1j, lo6);
            const __m256i sc_hi = _mm256_or_si256(_mm256_and_si256(b2j, lo4),
                                                  _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(b0j, 6), lo2), 4));
            const __m256i m_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(b2j, 4), lo4),
                                                 _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(b1j, 6), lo2), 4));
            _mm256_storeu_si256((__m256i *)&p->sc[j][8 * h], kpack_scale8(sc_lo, pair));
            _mm256_storeu_si256((__m256i *)&p->sc[j + 4][8 * h], kpack_scale8(sc_hi, pair));
            _mm256_storeu_si256((__m256i *)&p->mp[j][8 * h], kpack_scale8(m_lo, true));
            _mm256_storeu_si256((__m256i *)&p->mp[j + 4][8 * h], kpack_scale8(m_hi, true));
        }
        _mm256_storeu_ps(p->d + 8 * h, kpack_half8(dd, false));
        _mm256_storeu_ps(p->dmin + 8 * h, kpack_half8(dd, true));
    }
}

/* Contract: as kpack_q4_k for Q6_K: q unsigned (0..63, the -32 goes through the bsums), 16 scales,
 * mp = the scale pairs, d. */
KPACK_TARGET static void kpack_q6_k(const uint8_t *w, size_t row_bytes, int nr, int64_t i, bool pair, sl_kpack *p)
{
    const uint8_t *b0 = w + (size_t)i * sizeof(sl_block_q6_k);
    const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(0x03);
    for (int h = 0; h < 2; h++) {
        for (int half = 0; half < 2; half++) {   /* elements 128 half + 32k + 4 l4 .. +3, k < 4 */
            __m256i qa[8], qb[8], qh[8];
            kpack_rows8(b0, row_bytes, nr, h, offsetof(sl_block_q6_k, ql) + 64 * (size_t)half, qa);
            kpack_rows8(b0, row_bytes, nr, h, offsetof(sl_block_q6_k, ql) + 64 * (size_t)half + 32, qb);
            kpack_rows8(b0, row_bytes, nr, h, offsetof(sl_block_q6_k, qh) + 32 * (size_t)half, qh);
            for (int l4 = 0; l4 < 8; l4++) {
                const __m256i q[4] = {
                    _mm256_or_si256(_mm256_and_si256(qa[l4], m4), _mm256_slli_epi32(_mm256_and_si256(qh[l4], m3), 4)),
                    _mm256_or_si256(_mm256_and_si256(qb[l4], m4),
                                    _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(qh[l4], 2), m3), 4)),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(qa[l4], 4), m4),
                                    _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(qh[l4], 4), m3), 4)),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(qb[l4], 4), m4),
                                    _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(qh[l4], 6), m3), 4)),
                };
                for (int k = 0; k < 4; k++)
                    _mm256_storeu_si256((__m256i *)&p->w[32 * half + 8 * k + l4][8 * h], q[k]);
            }
        }
        __m256i idx, mask;
        kpack_lanes(row_bytes, nr, h, &idx, &mask);
        for (int u = 0; u < 4; u++) {   /* scales 4u..4u+3 */
            const __m256i sw = kpack_gather(b0, offsetof(sl_block_q6_k, scales) + 4 * (size_t)u, idx, mask);
            __m256i sx[4];
            for (int e = 0; e < 4; e++)   /* sign-extended byte e */
                sx[e] = _mm256_srai_epi32(_mm256_slli_epi32(sw, 24 - 8 * e), 24);
            for (int e = 0; e < 4; e++)
                _mm256_storeu_si256((__m256i *)&p->sc[4 * u + e][8 * h], kpack_scale8(sx[e], pair));
            for (int e = 0; e < 2; e++)   /* (sc_2t, sc_2t+1) as int16 pairs, t = 2u + e */
                _mm256_storeu_si256((__m256i *)&p->mp[2 * u + e][8 * h],
                                    _mm256_or_si256(_mm256_and_si256(sx[2 * e], _mm256_set1_epi32(0xffff)),
                                                    _mm256_slli_epi32(sx[2 * e + 1], 16)));
        }
        /* d: the high half of the dword at 206 (the block's last 4 bytes: no read past it) */
        _mm256_storeu_ps(p->d + 8 * h, kpack_half8(kpack_gather(b0, offsetof(sl_block_q6_k, d) - 2, idx, mask), true));
        _mm256_storeu_ps(p->dmin + 8 * h, _mm256_setzero_ps());
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

/* The product of a packed 16-row block against every vector (the includer's kernel). */
typedef void (*kpack_block_fn)(bool q4k, const sl_kpack *pk, int64_t nsb, const uint8_t *y, size_t ys, int nv, int nr,
                               float *out, int64_t os);

/* Contract: sl_qgemm_fn (kernels/gemm.h) for Q4_K (q4k) or Q6_K weights and Q8_K activations, as
 * every K-quant GEMM that packs runs it: each block of 16 rows packed once into pk (nsb super-blocks,
 * the includer's scratch; `pair` as kpack_q4_k's), then `block` against all nv vectors. */
KPACK_TARGET static inline bool kpack_gemm(bool q4k, bool pair, kpack_block_fn block, sl_kpack *pk,
                                           const void *restrict w, size_t row_bytes, int64_t nrows,
                                           const void *restrict y, size_t y_stride, int nv, int64_t n,
                                           float *restrict out, int64_t out_stride)
{
    const int64_t nsb = n / SL_QK_K;
    if (!pk) return false;
    for (int64_t r0 = 0; r0 < nrows; r0 += 16) {
        const int nr = nrows - r0 < 16 ? (int)(nrows - r0) : 16;
        const uint8_t *wr = (const uint8_t *)w + (size_t)r0 * row_bytes;
        for (int64_t i = 0; i < nsb; i++) {
            if (q4k) kpack_q4_k(wr, row_bytes, nr, i, pair, pk + i);
            else kpack_q6_k(wr, row_bytes, nr, i, pair, pk + i);
        }
        block(q4k, pk, nsb, (const uint8_t *)y, y_stride, nv, nr, out + r0, out_stride);
    }
    return true;
}

#endif
