/* kernels/simd_avx512_iq.c — the AVX-512 set's entry points for the codebook types IQ3_S, IQ3_XXS,
 * IQ2_XS, IQ2_XXS and IQ2_S with Q8_K activations (IQ1_S and IQ1_M: kernels/simd_avx512_iq1.c):
 * the byte-permute dots of kernels/simd_avx512_vbmi.c where the CPU has VBMI, BITALG, GFNI and BMI2
 * (faster), else the gather dots of this file, which need only AVX-512 F/BW (e.g. Skylake-SP and
 * Cascade Lake servers).
 *
 * The gather dots.  Same contract as simd_avx512.c: the portable reference's bits.  A 512-bit
 * register holds two sub-blocks (64 elements): the grid points gathered by index (vpgatherdd /
 * vpgatherdq: 3.6x the speed of 16 scalar loads and inserts on the machine they were written on;
 * the byte permutes beat both), the 64 sign bits used directly as
 * an opmask (activations negated under the mask: no sign expansion, activations are never -128),
 * vpmaddubsw (unsigned grid bytes x signed activations, pair sums <= 15748: no saturation), then
 * vpmaddwd with the per-sub-block (IQ2_XS: per-16) scales.  S is exact in int32; the float steps
 * are the portable ones, scalar, in the same order.
 *
 * SL_SIMD_EMULATE (never set by the build) compiles this file against SIMDe (see simd_avx512.c and
 * tests/test_quant_iq_avx512_emu.c).
 */
#include "kernels/iq_common.h"
#include "kernels/simd.h"

#if defined(SL_SIMD_EMULATE)
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#undef _mm512_madd_epi16
#define _mm512_madd_epi16(a, b) simde_mm512_madd_epi16(a, b)
typedef simde__mmask64 __mmask64;
static inline int32_t iq_reduce_add_epi32(simde__m512i v)
{
    int32_t i[16], s = 0;
    simde_mm512_storeu_si512(i, v);
    for (int k = 0; k < 16; k++) s += i[k];
    return s;
}
/* gaps in SIMDe 0.7.4: byte widening and the gathers, element by element */
static inline simde__m512i iq_cvtepu8_epi32(simde__m128i v)
{
    uint8_t b[16];
    int32_t d[16];
    simde_mm_storeu_si128((simde__m128i *)b, v);
    for (int k = 0; k < 16; k++) d[k] = b[k];
    return simde_mm512_loadu_si512(d);
}
static inline simde__m512i iq_gather_epi32(simde__m512i idx, const void *base)
{
    int32_t i[16], d[16];
    simde_mm512_storeu_si512(i, idx);
    for (int k = 0; k < 16; k++) memcpy(&d[k], (const uint8_t *)base + 4 * (size_t)i[k], 4);
    return simde_mm512_loadu_si512(d);
}
static inline simde__m512i iq_gather_epi64(simde__m256i idx, const void *base)
{
    int32_t i[8];
    int64_t d[8];
    simde_mm256_storeu_si256((simde__m256i *)i, idx);
    for (int k = 0; k < 8; k++) memcpy(&d[k], (const uint8_t *)base + 8 * (size_t)i[k], 8);
    return simde_mm512_loadu_si512(d);
}
#define AVX512
#define HAVE_AVX512_IQ 1
#elif defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <stdatomic.h>
#define AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))
#define iq_reduce_add_epi32 _mm512_reduce_add_epi32
#define iq_cvtepu8_epi32 _mm512_cvtepu8_epi32
#define iq_gather_epi32(idx, base) _mm512_i32gather_epi32(idx, base, 4)
#define iq_gather_epi64(idx, base) _mm512_i32gather_epi64(idx, base, 8)
#define HAVE_AVX512_IQ 1
#endif

#ifdef HAVE_AVX512_IQ

/* Scaled int32 partial sums of two sub-blocks: grid bytes x activations negated where the sign bit
 * is set, int16 pair sums times the int16 scales in `scale`. */
AVX512 static inline __m512i pair_dot(__m512i grid, uint64_t sign_bits, const int8_t *q, __m512i scale)
{
    const __m512i a = _mm512_loadu_si512((const void *)q);
    const __m512i sa = _mm512_mask_sub_epi8(a, (__mmask64)sign_bits, _mm512_setzero_si512(), a);
    return _mm512_madd_epi16(_mm512_maddubs_epi16(grid, sa), scale);
}

/* Scales: int16 lanes of the low 256 bits = lo, of the high 256 bits = hi. */
AVX512 static inline __m512i scale_halves(int lo, int hi)
{
    return _mm512_inserti64x4(_mm512_set1_epi16((short)lo), _mm256_set1_epi16((short)hi), 1);
}

/* Contract: as sl_qdot_iq3_s_q8_k (same bits). */
AVX512 static float gather_dot_iq3_s_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const uint32_t *G = sl_iq_grids_get()->iq3s;
    const sl_block_iq3_s *w = vw;
    const sl_block_q8_k *y = vy;
    const __m512i to_bit8 = _mm512_setr_epi32(8, 7, 6, 5, 4, 3, 2, 1, 8, 7, 6, 5, 4, 3, 2, 1), bit8 = _mm512_set1_epi32(256);
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        __m512i s = _mm512_setzero_si512();
        for (int ib = 0; ib < 8; ib += 2) {
            /* index k = qs[8ib + k] | bit k % 8 of qh[ib + k / 8] << 8 */
            const __m512i lo = iq_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(w[i].qs + 8 * ib)));
            const __m512i h = _mm512_inserti64x4(_mm512_set1_epi32(w[i].qh[ib]), _mm256_set1_epi32(w[i].qh[ib + 1]), 1);
            const __m512i idx = _mm512_or_si512(lo, _mm512_and_si512(_mm512_sllv_epi32(h, to_bit8), bit8));
            const __m512i grid = iq_gather_epi32(idx, G);
            uint64_t sb;
            memcpy(&sb, w[i].signs + 4 * ib, 8);
            const int sc = w[i].scales[ib / 2];
            s = _mm512_add_epi32(s, pair_dot(grid, sb, y[i].qs + 32 * ib, scale_halves(1 + 2 * (sc & 0xf), 1 + 2 * (sc >> 4))));
        }
        const int32_t S = iq_reduce_add_epi32(s);
        acc = acc + (sl_f16_to_f32(w[i].d) * y[i].d) * (float)S;
    }
    return acc;
}

/* Contract: as sl_qdot_iq3_xxs_q8_k (same bits). */
AVX512 static float gather_dot_iq3_xxs_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const uint32_t *G = sl_iq_grids_get()->iq3xxs;
    const sl_block_iq3_xxs *w = vw;
    const sl_block_q8_k *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        const uint8_t *ss = w[i].qs + SL_QK_K / 4;
        __m512i s = _mm512_setzero_si512();
        for (int ib = 0; ib < 8; ib += 2) {
            const __m512i idx = iq_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(w[i].qs + 8 * ib)));
            const __m512i grid = iq_gather_epi32(idx, G);
            uint32_t aux[2];
            memcpy(aux, ss + 4 * ib, 8);
            const uint64_t sb = sl_iq_sign8x4(sl_iq_fields7x4(aux[0])) | (uint64_t)sl_iq_sign8x4(sl_iq_fields7x4(aux[1])) << 32;
            s = _mm512_add_epi32(s, pair_dot(grid, sb, y[i].qs + 32 * ib,
                                             scale_halves(2 * (int)(aux[0] >> 28) + 1, 2 * (int)(aux[1] >> 28) + 1)));
        }
        const int32_t S = iq_reduce_add_epi32(s);
        acc = acc + (sl_f16_to_f32(w[i].d) * y[i].d) * (float)S;
    }
    return 0.25f * acc;
}

/* Contract: as sl_qdot_iq2_xs_q8_k (same bits).  128-bit lane k of the pair (elements 16k..16k+15)
 * takes nibble k of the two scale bytes. */
AVX512 static float gather_dot_iq2_xs_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const uint64_t *G = sl_iq_grids_get()->iq2xs;
    const sl_block_iq2_xs *w = vw;
    const sl_block_q8_k *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        __m512i s = _mm512_setzero_si512();
        for (int ib = 0; ib < 8; ib += 2) {
            const uint16_t *qs = w[i].qs + 4 * ib;
            const __m256i idx = _mm256_and_si256(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)qs)), _mm256_set1_epi32(511));
            const __m512i grid = iq_gather_epi64(idx, G);
            uint64_t q4[2];
            memcpy(q4, qs, 16);
            /* bits 9-15 of each u16 to the low 7 bits of its own byte pair's low byte, then pack */
            const uint64_t f0 = (q4[0] >> 9) & 0x007f007f007f007full, f1 = (q4[1] >> 9) & 0x007f007f007f007full;
            const uint32_t b0 = (uint32_t)((f0 & 0xffff) | ((f0 >> 8) & 0xff00) | ((f0 >> 16) & 0xff0000) | ((f0 >> 24) & 0xff000000));
            const uint32_t b1 = (uint32_t)((f1 & 0xffff) | ((f1 >> 8) & 0xff00) | ((f1 >> 16) & 0xff0000) | ((f1 >> 24) & 0xff000000));
            const uint64_t sb = sl_iq_sign8x4(b0) | (uint64_t)sl_iq_sign8x4(b1) << 32;
            const int s0 = w[i].scales[ib], s1 = w[i].scales[ib + 1];
            const __m512i scale = _mm512_inserti64x4(
                _mm512_castsi256_si512(_mm256_setr_m128i(_mm_set1_epi16((short)(2 * (s0 & 0xf) + 1)),
                                                         _mm_set1_epi16((short)(2 * (s0 >> 4) + 1)))),
                _mm256_setr_m128i(_mm_set1_epi16((short)(2 * (s1 & 0xf) + 1)), _mm_set1_epi16((short)(2 * (s1 >> 4) + 1))), 1);
            s = _mm512_add_epi32(s, pair_dot(grid, sb, y[i].qs + 32 * ib, scale));
        }
        const int32_t S = iq_reduce_add_epi32(s);
        acc = acc + (sl_f16_to_f32(w[i].d) * y[i].d) * (float)S;
    }
    return 0.125f * acc;
}

/* Contract: as sl_qdot_iq2_xxs_q8_k (same bits). */
AVX512 static float gather_dot_iq2_xxs_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const uint64_t *G = sl_iq_grids_get()->iq2xxs;
    const sl_block_iq2_xxs *w = vw;
    const sl_block_q8_k *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        __m512i s = _mm512_setzero_si512();
        for (int ib = 0; ib < 8; ib += 2) {
            uint32_t a[4];   /* indices ib, signs ib, indices ib+1, signs ib+1 */
            memcpy(a, w[i].qs + 4 * ib, 16);
            const __m256i idx = _mm256_cvtepu8_epi32(_mm_setr_epi32((int)a[0], (int)a[2], 0, 0));
            const __m512i grid = iq_gather_epi64(idx, G);
            const uint64_t sb = sl_iq_sign8x4(sl_iq_fields7x4(a[1])) | (uint64_t)sl_iq_sign8x4(sl_iq_fields7x4(a[3])) << 32;
            s = _mm512_add_epi32(s, pair_dot(grid, sb, y[i].qs + 32 * ib,
                                             scale_halves(2 * (int)(a[1] >> 28) + 1, 2 * (int)(a[3] >> 28) + 1)));
        }
        const int32_t S = iq_reduce_add_epi32(s);
        acc = acc + (sl_f16_to_f32(w[i].d) * y[i].d) * (float)S;
    }
    return 0.125f * acc;
}

/* Contract: as sl_qdot_iq2_s_q8_k (same bits).  Scales as IQ2_XS. */
AVX512 static float gather_dot_iq2_s_q8_k(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const uint64_t *G = sl_iq_grids_get()->iq2s;
    const sl_block_iq2_s *w = vw;
    const sl_block_q8_k *y = vy;
    const __m256i to_bit8 = _mm256_setr_epi32(8, 6, 4, 2, 8, 6, 4, 2), bits89 = _mm256_set1_epi32(0x300);
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        sl_prefetch_ahead(&w[i], sizeof w[i]);
        __m512i s = _mm512_setzero_si512();
        for (int ib = 0; ib < 8; ib += 2) {
            uint64_t lo8, sb;
            memcpy(&lo8, w[i].qs + 4 * ib, 8);
            memcpy(&sb, w[i].qs + SL_QK_K / 8 + 4 * ib, 8);
            const __m256i h = _mm256_setr_m128i(_mm_set1_epi32(w[i].qh[ib]), _mm_set1_epi32(w[i].qh[ib + 1]));
            const __m256i idx = _mm256_or_si256(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)lo8)),
                                                _mm256_and_si256(_mm256_sllv_epi32(h, to_bit8), bits89));
            const __m512i grid = iq_gather_epi64(idx, G);
            const int s0 = w[i].scales[ib], s1 = w[i].scales[ib + 1];
            const __m512i scale = _mm512_inserti64x4(
                _mm512_castsi256_si512(_mm256_setr_m128i(_mm_set1_epi16((short)(2 * (s0 & 0xf) + 1)),
                                                         _mm_set1_epi16((short)(2 * (s0 >> 4) + 1)))),
                _mm256_setr_m128i(_mm_set1_epi16((short)(2 * (s1 & 0xf) + 1)), _mm_set1_epi16((short)(2 * (s1 >> 4) + 1))), 1);
            s = _mm512_add_epi32(s, pair_dot(grid, sb, y[i].qs + 32 * ib, scale));
        }
        const int32_t S = iq_reduce_add_epi32(s);
        acc = acc + (sl_f16_to_f32(w[i].d) * y[i].d) * (float)S;
    }
    return 0.125f * acc;
}

/* The exported IQ3_S/IQ3_XXS/IQ2_XS/IQ2_XXS/IQ2_S dots: the byte-permute versions (kernels/simd_avx512_vbmi.c) where the
 * CPU has VBMI, BITALG, BMI2 and GFNI, else the gathers above (same bits either way). */
#if defined(SL_SIMD_EMULATE)
#define VBMI_DOT(t) return gather_dot_##t##_q8_k(w, y, n)
#define VBMI_DOT4(t) for (int v = 0; v < 4; v++) out[v] = gather_dot_##t##_q8_k(w, (const uint8_t *)y + v * ys, n)
#define VBMI_DOTR(t) for (int64_t r = 0; r < nrows; r++) out[r] = gather_dot_##t##_q8_k((const uint8_t *)w + r * row_bytes, y, n)
#else
static bool have_vbmi(void)
{
    return __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512bitalg") && __builtin_cpu_supports("bmi2") &&
           __builtin_cpu_supports("gfni");
}

/* Tests only (simd.h): the gather dots even where the byte-permute ones could run, so that the
 * fallback is tested natively on a CPU that has both (not only through SIMDe). */
static atomic_bool g_force_gathers;
void sl_avx512_iq_force_gathers(bool on) { atomic_store_explicit(&g_force_gathers, on, memory_order_relaxed); }
bool sl_avx512_iq_has_byte_permutes(void) { return have_vbmi(); }

static bool use_vbmi(void) { return !atomic_load_explicit(&g_force_gathers, memory_order_relaxed) && have_vbmi(); }
#define VBMI_DOT(t) return use_vbmi() ? sl_avx512vbmi_dot_##t##_q8_k(w, y, n) : gather_dot_##t##_q8_k(w, y, n)
#define VBMI_DOT4(t)                                                                                     \
    if (use_vbmi()) sl_avx512vbmi_dot4_##t##_q8_k(w, y, ys, n, out);                                    \
    else for (int v = 0; v < 4; v++) out[v] = gather_dot_##t##_q8_k(w, (const uint8_t *)y + v * ys, n)
#define VBMI_DOTR(t)                                                                                     \
    if (use_vbmi()) sl_avx512vbmi_dotr_##t##_q8_k(w, row_bytes, y, n, nrows, out);                     \
    else for (int64_t r = 0; r < nrows; r++) out[r] = gather_dot_##t##_q8_k((const uint8_t *)w + r * row_bytes, y, n)
#endif
float sl_avx512_dot_iq3_xxs_q8_k(const void *restrict w, const void *restrict y, int64_t n) { VBMI_DOT(iq3_xxs); }
float sl_avx512_dot_iq2_xs_q8_k(const void *restrict w, const void *restrict y, int64_t n) { VBMI_DOT(iq2_xs); }
float sl_avx512_dot_iq3_s_q8_k(const void *restrict w, const void *restrict y, int64_t n) { VBMI_DOT(iq3_s); }
float sl_avx512_dot_iq2_xxs_q8_k(const void *restrict w, const void *restrict y, int64_t n) { VBMI_DOT(iq2_xxs); }
float sl_avx512_dot_iq2_s_q8_k(const void *restrict w, const void *restrict y, int64_t n) { VBMI_DOT(iq2_s); }
void sl_avx512_dot4_iq3_xxs_q8_k(const void *restrict w, const void *restrict y, size_t ys, int64_t n, float *restrict out) { VBMI_DOT4(iq3_xxs); }
void sl_avx512_dot4_iq2_xs_q8_k(const void *restrict w, const void *restrict y, size_t ys, int64_t n, float *restrict out) { VBMI_DOT4(iq2_xs); }
void sl_avx512_dot4_iq3_s_q8_k(const void *restrict w, const void *restrict y, size_t ys, int64_t n, float *restrict out) { VBMI_DOT4(iq3_s); }
void sl_avx512_dot4_iq2_xxs_q8_k(const void *restrict w, const void *restrict y, size_t ys, int64_t n, float *restrict out) { VBMI_DOT4(iq2_xxs); }
void sl_avx512_dot4_iq2_s_q8_k(const void *restrict w, const void *restrict y, size_t ys, int64_t n, float *restrict out) { VBMI_DOT4(iq2_s); }
void sl_avx512_dotr_iq3_xxs_q8_k(SL_DOTR_ARGS) { VBMI_DOTR(iq3_xxs); }
void sl_avx512_dotr_iq2_xs_q8_k(SL_DOTR_ARGS) { VBMI_DOTR(iq2_xs); }
void sl_avx512_dotr_iq3_s_q8_k(SL_DOTR_ARGS) { VBMI_DOTR(iq3_s); }
void sl_avx512_dotr_iq2_xxs_q8_k(SL_DOTR_ARGS) { VBMI_DOTR(iq2_xxs); }
void sl_avx512_dotr_iq2_s_q8_k(SL_DOTR_ARGS) { VBMI_DOTR(iq2_s); }
#undef VBMI_DOT
#undef VBMI_DOT4
#undef VBMI_DOTR

#else   /* not x86: the sets that use these are never handed out */
void sl_avx512_iq_force_gathers(bool on) { (void)on; }
bool sl_avx512_iq_has_byte_permutes(void) { return false; }
float sl_avx512_dot_iq3_s_q8_k(const void *restrict w, const void *restrict y, int64_t n) { return sl_qdot_iq3_s_q8_k(w, y, n); }
float sl_avx512_dot_iq3_xxs_q8_k(const void *restrict w, const void *restrict y, int64_t n) { return sl_qdot_iq3_xxs_q8_k(w, y, n); }
float sl_avx512_dot_iq2_xs_q8_k(const void *restrict w, const void *restrict y, int64_t n) { return sl_qdot_iq2_xs_q8_k(w, y, n); }
float sl_avx512_dot_iq2_xxs_q8_k(const void *restrict w, const void *restrict y, int64_t n) { return sl_qdot_iq2_xxs_q8_k(w, y, n); }
float sl_avx512_dot_iq2_s_q8_k(const void *restrict w, const void *restrict y, int64_t n) { return sl_qdot_iq2_s_q8_k(w, y, n); }
#endif
