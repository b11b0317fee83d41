/* kernels/gemm_amx.c — Q4_K and Q6_K x Q8_K, Q8_0 x Q8_0 batched products on AMX-INT8 tiles, with
 * exactly the bits of the single dots (kernels/gemm.h; canonical steps in kernels/simd.h).
 *
 * Built with -mamx-tile -mamx-int8 and AVX-512 for this file only (CMakeLists.txt, x86-64); it runs
 * only where kernels/gemm.c found AMX, AVX-512 BW/VNNI and the OS's tile-data permission.
 *
 * Exact int32 sums from tiles.  A super-block's S = sum over elements of P_e * a_e, where P_e is the
 * element's integer weight with its sub-block scale folded in: Q4_K P = sc * q in [0, 945], Q6_K
 * P = sc * (q - 32) in [-4064, 4096] (the -32 * bsums term of the canonical steps is the same sum,
 * as the bsums are sums of the same a_e).  P does not fit a byte, so it is split exactly as
 * P = 128 * hi + lo with lo in [0, 127] and hi in [-32, 32]: two signed-byte planes, two tile sums,
 * S = (C_hi << 7) + C_lo — the same int32 as the dots', in any order.  Q4_K's M = sum m_j * bsums
 * is a third plane holding m_j per element (M = sum m * a_e, again the same integer).  The float
 * steps then run per super-block in the canonical order: Q4_K acc = acc + (d*(float)S - dmin*(float)M)
 * with d = f16(w.d) * y.d, Q6_K acc = acc + d * (float)S; separate roundings, no FMA.
 *
 * Tiles (one configuration, every tile 16 rows x 64 bytes): tmm0 = A, 16 activation vectors x 64
 * of their int8 values, loaded straight from the Q8_K blocks (row stride = the vector stride);
 * tmm1..3 = B, one plane of 16 weight rows in VNNI order (tile row k holds elements 4k..4k+3 of
 * each of the 16 rows); tmm4..6 = C, C[v][r] int32.  TDPBSSD: C[v][r] += sum_k A[v][k] * B'[k][r].
 * The weights of a 16-row block are unpacked to planes once per call and reused across every
 * group of 16 vectors; C rows are vectors, so each result row is 16 consecutive outputs of one
 * vector (out is vector-major) and is stored without a transpose.
 */
#include "kernels/k_common.h"
#include "kernels/k_quants.h"
#include "kernels/gemm.h"
#include "kernels/scratch.h"

#if defined(__x86_64__) && defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__AVX512BW__) && \
    defined(__AVX512VNNI__)
#include <immintrin.h>

#define PACK32_TARGET
#include "kernels/gemm_pack32.h"

#define PLANE_BYTES 4096     /* 4 steps of 64 elements x 16 rows: one plane of one super-block */
#define Q8K_QS 4             /* offsetof(sl_block_q8_k, qs) */

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

/* Each thread's tile state is its own: configured at the start of every call (ldtilecfg is cheap
 * next to a call's work), released at the end so an idle thread carries no tile state.  K-quants:
 * every tile 16 rows x 64 bytes.  Q8_0 (one 32-block per tile product): tmm0, tmm1 = A, 16 x 32
 * bytes; tmm2, tmm3 = B, 8 x 64 bytes; tmm4, tmm5 = C, 16 x 64 bytes. */
static void tiles_configure(bool q8_0)
{
    tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 7; t++) {
        c.colsb[t] = 64;
        c.rows[t] = 16;
    }
    if (q8_0) {
        c.colsb[0] = c.colsb[1] = 32;
        c.rows[2] = c.rows[3] = 8;
        c.rows[6] = 0, c.colsb[6] = 0;
    }
    /* GCC 12 does not treat ldtilecfg as reading the structure: without this barrier it dropped the
     * stores above (the tile instructions then fault on an invalid configuration) */
    __asm__ __volatile__("" : : "r"(&c) : "memory");
    _tile_loadconfig(&c);
}

/* ---- weight unpacking ------------------------------------------------------------------------ */

/* out[k][r] = in[r][k] for a 16 x 16 matrix of dwords (rows of 64 bytes): row-major planes to the
 * VNNI order of a B tile.  4x4 transposes inside 128-bit lanes, then of the lanes. */
static void transpose16(const void *in, void *out)
{
    __m512i r[16], u[4][4];
    for (int i = 0; i < 16; i++) r[i] = _mm512_load_si512((const char *)in + 64 * i);
    for (int g = 0; g < 4; g++) {
        const __m512i t0 = _mm512_unpacklo_epi32(r[4 * g], r[4 * g + 1]);
        const __m512i t1 = _mm512_unpackhi_epi32(r[4 * g], r[4 * g + 1]);
        const __m512i t2 = _mm512_unpacklo_epi32(r[4 * g + 2], r[4 * g + 3]);
        const __m512i t3 = _mm512_unpackhi_epi32(r[4 * g + 2], r[4 * g + 3]);
        u[g][0] = _mm512_unpacklo_epi64(t0, t2);   /* lane L: column 4L of rows 4g..4g+3 */
        u[g][1] = _mm512_unpackhi_epi64(t0, t2);
        u[g][2] = _mm512_unpacklo_epi64(t1, t3);
        u[g][3] = _mm512_unpackhi_epi64(t1, t3);
    }
    for (int e = 0; e < 4; e++) {   /* column 4L + e: lane g of the result is lane L of u[g][e] */
        const __m512i x0 = _mm512_shuffle_i32x4(u[0][e], u[1][e], 0x44);
        const __m512i x1 = _mm512_shuffle_i32x4(u[0][e], u[1][e], 0xee);
        const __m512i x2 = _mm512_shuffle_i32x4(u[2][e], u[3][e], 0x44);
        const __m512i x3 = _mm512_shuffle_i32x4(u[2][e], u[3][e], 0xee);
        _mm512_store_si512((char *)out + 64 * (0 + e), _mm512_shuffle_i32x4(x0, x2, 0x88));
        _mm512_store_si512((char *)out + 64 * (4 + e), _mm512_shuffle_i32x4(x0, x2, 0xdd));
        _mm512_store_si512((char *)out + 64 * (8 + e), _mm512_shuffle_i32x4(x1, x3, 0x88));
        _mm512_store_si512((char *)out + 64 * (12 + e), _mm512_shuffle_i32x4(x1, x3, 0xdd));
    }
}

/* 32 words P (in [-16384, 16383]) -> the lo and hi byte planes (P = 128 * hi + lo, lo in 0..127). */
static void split_store(__m512i p, uint8_t *lo, uint8_t *hi)
{
    _mm256_store_si256((__m256i *)lo, _mm512_cvtepi16_epi8(_mm512_and_si512(p, _mm512_set1_epi16(127))));
    _mm256_store_si256((__m256i *)hi, _mm512_cvtepi16_epi8(_mm512_srai_epi16(p, 7)));
}

/* Row-major planes of one super-block: pl[plane][step][row][64 bytes]. */
typedef struct { _Alignas(64) uint8_t b[3][4][16][64]; } rowmajor_planes;

/* Contract: super-block i of rows r < nr (< 16: the rest as zero weights) of a Q4_K matrix into
 * planes lo, hi, m (PLANE_BYTES each, VNNI order) and the rows' f16 d and dmin as f32. */
static void unpack_q4_k(const uint8_t *w, size_t row_bytes, int nr, int64_t i, uint8_t *planes, float *wd,
                        float *wm, rowmajor_planes *t)
{
    for (int r = 0; r < 16; r++) {
        if (r >= nr) {
            for (int p = 0; p < 3; p++)
                for (int g = 0; g < 4; g++) memset(t->b[p][g][r], 0, 64);
            wd[r] = wm[r] = 0;
            continue;
        }
        const sl_block_q4_k *b = (const sl_block_q4_k *)(w + (size_t)r * row_bytes) + i;
        uint8_t sc[8], m[8];
        sl_k_scales8(b->scales, sc, m);
        wd[r] = sl_f16_to_f32(b->d);
        wm[r] = sl_f16_to_f32(b->dmin);
        for (int g = 0; g < 4; g++) {   /* step g: sub-blocks 2g (low nibbles) and 2g+1 (high) */
            const __m256i raw = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * g));
            const __m256i lo = _mm256_and_si256(raw, _mm256_set1_epi8(0x0f));
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), _mm256_set1_epi8(0x0f));
            const __m512i p0 = _mm512_mullo_epi16(_mm512_cvtepu8_epi16(lo), _mm512_set1_epi16(sc[2 * g]));
            const __m512i p1 = _mm512_mullo_epi16(_mm512_cvtepu8_epi16(hi), _mm512_set1_epi16(sc[2 * g + 1]));
            split_store(p0, t->b[0][g][r], t->b[1][g][r]);
            split_store(p1, t->b[0][g][r] + 32, t->b[1][g][r] + 32);
            memset(t->b[2][g][r], m[2 * g], 32);
            memset(t->b[2][g][r] + 32, m[2 * g + 1], 32);
        }
    }
    for (int p = 0; p < 3; p++)
        for (int g = 0; g < 4; g++) transpose16(t->b[p][g], planes + p * PLANE_BYTES + g * 1024);
}

/* Contract: as unpack_q4_k for Q6_K: planes lo, hi of P = sc * (q - 32), and d. */
static void unpack_q6_k(const uint8_t *w, size_t row_bytes, int nr, int64_t i, uint8_t *planes, float *wd,
                        rowmajor_planes *t)
{
    for (int r = 0; r < 16; r++) {
        if (r >= nr) {
            for (int p = 0; p < 2; p++)
                for (int g = 0; g < 4; g++) memset(t->b[p][g][r], 0, 64);
            wd[r] = 0;
            continue;
        }
        const sl_block_q6_k *b = (const sl_block_q6_k *)(w + (size_t)r * row_bytes) + i;
        wd[r] = sl_f16_to_f32(b->d);
        for (int h = 0; h < 2; h++)
            for (int k = 0; k < 4; k++) {   /* elements 128h + 32k .. +31: sub-blocks 8h+2k, 8h+2k+1 */
                const __m256i l = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32 * (k & 1)));
                const __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
                const __m256i q4 = _mm256_and_si256(_mm256_srli_epi16(l, 4 * (k >> 1)), _mm256_set1_epi8(0x0f));
                const __m256i q2 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), _mm256_set1_epi8(3));
                const __m256i q = _mm256_or_si256(q4, _mm256_slli_epi16(q2, 4));
                const __m512i qw = _mm512_sub_epi16(_mm512_cvtepu8_epi16(q), _mm512_set1_epi16(32));
                const __m512i scw = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(b->scales[8 * h + 2 * k])),
                                                       _mm256_set1_epi16(b->scales[8 * h + 2 * k + 1]), 1);
                const int g = 2 * h + (k >> 1), off = 32 * (k & 1);
                split_store(_mm512_mullo_epi16(qw, scw), t->b[0][g][r] + off, t->b[1][g][r] + off);
            }
    }
    for (int p = 0; p < 2; p++)
        for (int g = 0; g < 4; g++) transpose16(t->b[p][g], planes + p * PLANE_BYTES + g * 1024);
}

/* ---- the product ----------------------------------------------------------------------------- */

typedef struct {
    uint8_t *planes;        /* per super-block: nplanes x PLANE_BYTES */
    float *wd, *wm;         /* per super-block: 16 rows' d (and dmin) */
    int32_t *cbuf;          /* the C tiles of one super-block, stored: nplanes x 16 x 16 */
    uint8_t *pad;           /* a partial group of vectors, padded to 16 with zero vectors */
    rowmajor_planes *rm;
} work;

/* Vectors [v0, v0 + nc) of one 16-row block: the A operand's base and stride (the caller's vectors,
 * or the zero-padded copy when fewer than 16 remain). */
static const uint8_t *group_base(const work *wk, const uint8_t *y, size_t ys, int v0, int nc, int64_t nsb,
                                 size_t *stride)
{
    if (nc == 16) {
        *stride = ys;
        return y + (size_t)v0 * ys;
    }
    const size_t vb = (size_t)nsb * sizeof(sl_block_q8_k);
    for (int c = 0; c < 16; c++) {
        if (c < nc) memcpy(wk->pad + c * vb, y + (size_t)(v0 + c) * ys, vb);
        else memset(wk->pad + c * vb, 0, vb);
    }
    *stride = vb;
    return wk->pad;
}

/* One 16-row block (rows valid: nr) against every vector, Q4_K (dmin) or Q6_K. */
static void block_product(bool q4k, const work *wk, const uint8_t *y, size_t ys, int nv, int64_t nsb, int nr,
                          float *out, int64_t os)
{
    const int np = q4k ? 3 : 2;
    const __mmask16 rows_mask = (__mmask16)((1u << nr) - 1);
    for (int v0 = 0; v0 < nv; v0 += 16) {
        const int nc = nv - v0 < 16 ? nv - v0 : 16;
        size_t as;
        const uint8_t *a = group_base(wk, y, ys, v0, nc, nsb, &as);
        __m512 acc[16];
        for (int c = 0; c < 16; c++) acc[c] = _mm512_setzero_ps();
        for (int64_t i = 0; i < nsb; i++) {
            const uint8_t *pl = wk->planes + (size_t)i * np * PLANE_BYTES;
            const uint8_t *ai = a + (size_t)i * sizeof(sl_block_q8_k) + Q8K_QS;
            _tile_zero(4);
            _tile_zero(5);
            if (q4k) _tile_zero(6);
            for (int g = 0; g < 4; g++) {
                _tile_loadd(0, ai + 64 * g, as);
                _tile_loadd(1, pl + g * 1024, 64);
                _tile_loadd(2, pl + PLANE_BYTES + g * 1024, 64);
                _tile_dpbssd(4, 0, 1);
                _tile_dpbssd(5, 0, 2);
                if (q4k) {
                    _tile_loadd(3, pl + 2 * PLANE_BYTES + g * 1024, 64);
                    _tile_dpbssd(6, 0, 3);
                }
            }
            _tile_stored(4, wk->cbuf, 64);
            _tile_stored(5, wk->cbuf + 256, 64);
            if (q4k) _tile_stored(6, wk->cbuf + 512, 64);
            const __m512 wd = _mm512_load_ps(wk->wd + 16 * i), wm = q4k ? _mm512_load_ps(wk->wm + 16 * i) : wd;
            for (int c = 0; c < nc; c++) {
                float ydf;
                memcpy(&ydf, a + (size_t)c * as + (size_t)i * sizeof(sl_block_q8_k), sizeof ydf);
                const __m512 yd = _mm512_set1_ps(ydf);
                const __m512i s = _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(wk->cbuf + 256 + 16 * c), 7),
                                                   _mm512_load_si512(wk->cbuf + 16 * c));
                const __m512 d = _mm512_mul_ps(wd, yd);
                __m512 t = _mm512_mul_ps(d, _mm512_cvtepi32_ps(s));
                if (q4k) {
                    const __m512 dmin = _mm512_mul_ps(wm, yd);
                    const __m512i m = _mm512_load_si512(wk->cbuf + 512 + 16 * c);
                    t = _mm512_sub_ps(t, _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(m)));
                }
                acc[c] = _mm512_add_ps(acc[c], t);
            }
        }
        for (int c = 0; c < nc; c++) _mm512_mask_storeu_ps(out + (size_t)(v0 + c) * os, rows_mask, acc[c]);
    }
}

/* Contract: the scratch bytes gemm_k asks for at width n (Q4_K's three planes: more than Q6_K's two). */
static size_t scratch_bytes(bool q4k, int64_t n)
{
    const int64_t nsb = n / SL_QK_K;
    const size_t planes = (size_t)nsb * (q4k ? 3 : 2) * PLANE_BYTES, dvec = (size_t)nsb * 16 * sizeof(float);
    const size_t padb = ((size_t)16 * nsb * sizeof(sl_block_q8_k) + 63) & ~(size_t)63;
    return planes + 2 * dvec + 3 * 1024 + padb + sizeof(rowmajor_planes);
}

static size_t q8_scratch(int64_t n, int nv);

size_t sl_gemm_amx_scratch(int64_t n, int nv)
{
    const size_t k = scratch_bytes(true, n), q = q8_scratch(n, nv);
    return k > q ? k : q;
}

/* Contract: sl_qgemm_fn (kernels/gemm.h) for Q4_K (q4k) or Q6_K. */
static bool gemm_k(bool q4k, const void *restrict w, size_t row_bytes, int64_t nrows, const void *restrict y,
                   size_t y_stride, int nv, int64_t n, float *restrict out, int64_t out_stride)
{
    const int64_t nsb = n / SL_QK_K;
    const int np = q4k ? 3 : 2;
    const size_t planes = (size_t)nsb * np * PLANE_BYTES, dvec = (size_t)nsb * 16 * sizeof(float);
    const size_t padb = ((size_t)16 * nsb * sizeof(sl_block_q8_k) + 63) & ~(size_t)63;
    uint8_t *s = sl_scratch(SL_SCRATCH_GEMM, scratch_bytes(q4k, n));
    if (!s) return false;
    work wk = { s, (float *)(s + planes), (float *)(s + planes + dvec), (int32_t *)(s + planes + 2 * dvec),
                s + planes + 2 * dvec + 3 * 1024, (rowmajor_planes *)(s + planes + 2 * dvec + 3 * 1024 + padb) };
    tiles_configure(false);
    for (int64_t r0 = 0; r0 < nrows; r0 += 16) {
        const int nr = nrows - r0 < 16 ? (int)(nrows - r0) : 16;
        const uint8_t *wr = (const uint8_t *)w + (size_t)r0 * row_bytes;
        for (int64_t i = 0; i < nsb; i++) {
            uint8_t *pl = wk.planes + (size_t)i * np * PLANE_BYTES;
            if (q4k) unpack_q4_k(wr, row_bytes, nr, i, pl, wk.wd + 16 * i, wk.wm + 16 * i, wk.rm);
            else unpack_q6_k(wr, row_bytes, nr, i, pl, wk.wd + 16 * i, wk.rm);
        }
        block_product(q4k, &wk, y, y_stride, nv, nsb, nr, out + r0, out_stride);
    }
    _tile_release();
    return true;
}

static bool gemm_q4_k(const void *restrict w, size_t row_bytes, int64_t nrows, const void *restrict y,
                      size_t y_stride, int nv, int64_t n, float *restrict out, int64_t out_stride)
{
    return gemm_k(true, w, row_bytes, nrows, y, y_stride, nv, n, out, out_stride);
}

static bool gemm_q6_k(const void *restrict w, size_t row_bytes, int64_t nrows, const void *restrict y,
                      size_t y_stride, int nv, int64_t n, float *restrict out, int64_t out_stride)
{
    return gemm_k(false, w, row_bytes, nrows, y, y_stride, nv, n, out, out_stride);
}

/* ---- Q8_0 and MXFP4 ---------------------------------------------------------------------------
 * Canonical step of both (kernels/simd.h): acc = fma(d_w * d_y, (float)t, acc) per 32-block, t the
 * block's exact integer dot (MXFP4: its weights decoded to kvalues, d_w = e8m0_half(e)).  One TDPBSSD with K = 32 gives t for 16 vectors x 16 rows (C[v][r]); A is read
 * straight from the vectors' Q8_0 blocks (rows of 32 bytes at the vector stride), B is the block of
 * 16 rows in VNNI order (tile row k = the rows' quants 4k..4k+3), unpacked once per group of vectors.
 * Then per vector: convert C's row (16 rows' t), multiply d_w by the vector's d (exact), one FMA into
 * the vector's accumulator — 3 vector instructions per 512 products.  Two blocks per step, so the
 * tile unit works on one while the vector unit finishes the other. */

#define Q8_PACKED PACK32_BYTES   /* one block of 16 rows: the B tile and 16 f32 d (kernels/gemm_pack32.h) */
#define Q8_VGROUP 256         /* vectors per pass over the unpacked row block (bounds the scratch) */

typedef struct {
    uint8_t *packed;        /* nblk x Q8_PACKED */
    float *yd;              /* the group's vectors' block d as f32: [vector][block] */
    int32_t *cbuf;          /* two C tiles: 2 x 16 x 16 */
    uint8_t *pad;           /* a partial group of 16 vectors, zero-padded */
} q8_work;

/* C tile `c` (block i) into the 16 accumulators: acc[v] = fma(d_w * d_y[v][i], C[v][.], acc[v]). */
static inline __attribute__((always_inline)) void q8_finish(__m512 acc[16], const int32_t *cb, const uint8_t *pk,
                                                            const float *yd, int64_t nblk, int64_t i)
{
    const __m512 dw = _mm512_load_ps(pk + (size_t)i * Q8_PACKED + 512);
#pragma GCC unroll 16
    for (int v = 0; v < 16; v++) {
        const __m512 s = _mm512_mul_ps(dw, _mm512_set1_ps(yd[(size_t)v * nblk + i]));
        acc[v] = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(_mm512_load_si512(cb + 16 * v)), acc[v]);
    }
}

/* Vectors [0, 16) at a (stride as; block i's quants at a + 34 i + 2) against the unpacked rows. */
static void q8_group(const q8_work *wk, const uint8_t *a, size_t as, const float *yd, int64_t nblk, int nc,
                     __mmask16 rows_mask, float *out, int64_t os)
{
    __m512 acc[16];
    for (int v = 0; v < 16; v++) acc[v] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nblk; i += 2) {
        _tile_loadd(0, a + (size_t)i * sizeof(sl_block_q8_0) + 2, as);
        _tile_loadd(1, a + (size_t)(i + 1) * sizeof(sl_block_q8_0) + 2, as);
        _tile_loadd(2, wk->packed + (size_t)i * Q8_PACKED, 64);
        _tile_loadd(3, wk->packed + (size_t)(i + 1) * Q8_PACKED, 64);
        _tile_zero(4);
        _tile_zero(5);
        _tile_dpbssd(4, 0, 2);
        _tile_dpbssd(5, 1, 3);
        _tile_stored(4, wk->cbuf, 64);
        _tile_stored(5, wk->cbuf + 256, 64);
        q8_finish(acc, wk->cbuf, wk->packed, yd, nblk, i);
        q8_finish(acc, wk->cbuf + 256, wk->packed, yd, nblk, i + 1);
    }
    if (i < nblk) {
        _tile_loadd(0, a + (size_t)i * sizeof(sl_block_q8_0) + 2, as);
        _tile_loadd(2, wk->packed + (size_t)i * Q8_PACKED, 64);
        _tile_zero(4);
        _tile_dpbssd(4, 0, 2);
        _tile_stored(4, wk->cbuf, 64);
        q8_finish(acc, wk->cbuf, wk->packed, yd, nblk, i);
    }
    for (int v = 0; v < nc; v++) _mm512_mask_storeu_ps(out + (size_t)v * os, rows_mask, acc[v]);
}

/* Contract: the scratch bytes gemm_q8_0 asks for at width n and nv vectors. */
static size_t q8_scratch(int64_t n, int nv)
{
    const size_t nblk = (size_t)(n / SL_QK), g = (size_t)(nv < Q8_VGROUP ? nv : Q8_VGROUP);
    const size_t padb = (16 * nblk * sizeof(sl_block_q8_0) + 63) & ~(size_t)63;
    return nblk * Q8_PACKED + ((g + 15) & ~(size_t)15) * nblk * sizeof(float) + 2 * 1024 + padb;
}

/* Contract: sl_qgemm_fn (kernels/gemm.h) for 32-block weights with Q8_0 activations whose canonical
 * step is one FMA per block (Q8_0, MXFP4 when mxfp4). */
static bool gemm_fma32(bool mxfp4, const void *restrict w, size_t row_bytes, int64_t nrows, const void *restrict y,
                       size_t y_stride, int nv, int64_t n, float *restrict out, int64_t out_stride)
{
    const int64_t nblk = n / SL_QK;
    uint8_t *s = sl_scratch(SL_SCRATCH_GEMM, q8_scratch(n, nv));
    if (!s) return false;
    const size_t g = (size_t)(nv < Q8_VGROUP ? nv : Q8_VGROUP);
    q8_work wk = { s, (float *)(s + (size_t)nblk * Q8_PACKED), NULL, NULL };
    wk.cbuf = (int32_t *)((uint8_t *)wk.yd + ((g + 15) & ~(size_t)15) * (size_t)nblk * sizeof(float));
    wk.pad = (uint8_t *)wk.cbuf + 2 * 1024;
    const size_t vb = (size_t)nblk * sizeof(sl_block_q8_0);
    tiles_configure(true);
    for (int v0 = 0; v0 < nv; v0 += Q8_VGROUP) {
        const int gv = nv - v0 < Q8_VGROUP ? nv - v0 : Q8_VGROUP;
        const uint8_t *yg = (const uint8_t *)y + (size_t)v0 * y_stride;
        for (int v = 0; v < ((gv + 15) & ~15); v++)
            for (int64_t i = 0; i < nblk; i++)
                wk.yd[(size_t)v * nblk + i] =
                    v < gv ? sl_f16_to_f32(((const sl_block_q8_0 *)(yg + (size_t)v * y_stride))[i].d) : 0.0f;
        for (int64_t r0 = 0; r0 < nrows; r0 += 16) {
            const int nr = nrows - r0 < 16 ? (int)(nrows - r0) : 16;
            pack32_rows(mxfp4, 0, (const uint8_t *)w + (size_t)r0 * row_bytes, row_bytes, nr, nblk, wk.packed);
            for (int c0 = 0; c0 < gv; c0 += 16) {
                const int nc = gv - c0 < 16 ? gv - c0 : 16;
                const uint8_t *a = yg + (size_t)c0 * y_stride;
                size_t as = y_stride;
                if (nc < 16) {   /* the tile reads 16 vectors: copy the last few beside zeros */
                    for (int c = 0; c < 16; c++) {
                        if (c < nc) memcpy(wk.pad + c * vb, a + (size_t)c * y_stride, vb);
                        else memset(wk.pad + c * vb, 0, vb);
                    }
                    a = wk.pad, as = vb;
                }
                q8_group(&wk, a, as, wk.yd + (size_t)c0 * nblk, nblk, nc, (__mmask16)((1u << nr) - 1),
                         out + (size_t)(v0 + c0) * out_stride + r0, out_stride);
            }
        }
    }
    _tile_release();
    return true;
}

static bool gemm_q8_0(const void *restrict w, size_t row_bytes, int64_t nrows, const void *restrict y,
                      size_t y_stride, int nv, int64_t n, float *restrict out, int64_t out_stride)
{
    return gemm_fma32(false, w, row_bytes, nrows, y, y_stride, nv, n, out, out_stride);
}

static bool gemm_mxfp4(const void *restrict w, size_t row_bytes, int64_t nrows, const void *restrict y,
                       size_t y_stride, int nv, int64_t n, float *restrict out, int64_t out_stride)
{
    return gemm_fma32(true, w, row_bytes, nrows, y, y_stride, nv, n, out, out_stride);
}

const sl_qgemm_fn sl_gemm_amx_q4_k = gemm_q4_k, sl_gemm_amx_q6_k = gemm_q6_k, sl_gemm_amx_q8_0 = gemm_q8_0,
                  sl_gemm_amx_mxfp4 = gemm_mxfp4;

#else
const sl_qgemm_fn sl_gemm_amx_q4_k = NULL, sl_gemm_amx_q6_k = NULL, sl_gemm_amx_q8_0 = NULL, sl_gemm_amx_mxfp4 = NULL;
size_t sl_gemm_amx_scratch(int64_t n, int nv) { (void)n; (void)nv; return 0; }
#endif
