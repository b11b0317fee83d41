/* kernels/gemm_pack32.h — the weight layout the Q8_0 and MXFP4 GEMMs share (kernels/gemm_amx.c,
 * kernels/gemm_avx512.c): one 32-block of 16 weight rows, unpacked once per group of vectors.
 *
 * PACK32_BYTES per block: 8 x 64 bytes of weights, dword r of register k = row r's int8 weights
 * 4k..4k+3 (an AMX B tile in VNNI order, or 16 row lanes for vpdpbusd), each xor'd with `bias`
 * (0 for AMX's signed x signed products; 0x80808080 for vpdpbusd's unsigned operand: w + 128);
 * then the 16 rows' weight scales as f32 (Q8_0: f16(d), MXFP4: e8m0_half(e)).  Rows r >= nr are
 * zero weights (biased) and scale 0.
 *
 * The includer has <immintrin.h>, kernels/k_common.h, kernels/k_quants.h, and defines PACK32_TARGET
 * (a target attribute with AVX-512 F/BW; empty where the file is built for it).  x86-64 only.
 */
#ifndef SL_KERNELS_GEMM_PACK32_H
#define SL_KERNELS_GEMM_PACK32_H

#define PACK32_BYTES 576

/* One block of rows r < nr, row r's 32 int8 weights at src + r * stride, into o's weights. */
PACK32_TARGET static inline __attribute__((always_inline)) void pack32_weights(const uint8_t *src, size_t stride, int nr, uint32_t bias, uint8_t *o)
{
    const __mmask16 m = (__mmask16)((1u << nr) - 1);
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)stride));
    for (int k = 0; k < 8; k++) {
        const __m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, src + 4 * k, 1);
        _mm512_store_si512(o + 64 * k, _mm512_xor_si512(v, _mm512_set1_epi32((int)bias)));
    }
}

/* Contract: blocks i < nblk of rows r < nr (<= 16) of a Q8_0 (mxfp4 false) or MXFP4 matrix into dst
 * (PACK32_BYTES per block, the layout above). */
PACK32_TARGET static void pack32_rows(bool mxfp4, uint32_t bias, const uint8_t *w, size_t row_bytes, int nr, int64_t nblk,
                                      uint8_t *dst)
{
    const __m128i kv = _mm_loadu_si128((const __m128i *)sl_kvalues_mxfp4), m4 = _mm_set1_epi8(0x0f);
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)row_bytes));
    _Alignas(64) uint8_t q[16][32];
    for (int64_t i = 0; i < nblk; i++) {
        uint8_t *o = dst + (size_t)i * PACK32_BYTES;
        float d[16] = { 0 };
        if (!mxfp4) {   /* Q8_0: the quants gathered in place */
            const uint8_t *b = w + (size_t)i * sizeof(sl_block_q8_0);
            pack32_weights(b + 2, row_bytes, nr, bias, o);
            const __m512i dh = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), (__mmask16)((1u << nr) - 1), idx, b, 1);
            _mm512_storeu_ps(d, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_and_si512(dh, _mm512_set1_epi32(0xffff)))));
        } else {        /* MXFP4: each row's nibbles decoded to kvalues first */
            for (int r = 0; r < nr; r++) {
                const sl_block_mxfp4 *b = (const sl_block_mxfp4 *)(w + (size_t)r * row_bytes) + i;
                const __m128i raw = _mm_loadu_si128((const __m128i *)b->qs);
                _mm_store_si128((__m128i *)q[r], _mm_shuffle_epi8(kv, _mm_and_si128(raw, m4)));
                _mm_store_si128((__m128i *)(q[r] + 16), _mm_shuffle_epi8(kv, _mm_and_si128(_mm_srli_epi16(raw, 4), m4)));
                d[r] = sl_e8m0_half(b->e);
            }
            pack32_weights(q[0], 32, nr, bias, o);
        }
        memcpy(o + 512, d, sizeof d);
    }
}

#endif
