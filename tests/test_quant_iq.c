/* tests/test_quant_iq.c — the codebook ("i-quant") types IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S,
 * IQ1_S, IQ1_M: tables, dequantizers, f32 dots, integer dots on every kernel path, real files.
 *
 * References:
 *   - the codebooks: structure (counts 256/512/1024/2048, every coordinate from the type's value
 *     set, entries distinct and in ascending code order), the derived sign table (eighth sign =
 *     parity), and a checksum of the expanded tables equal to that of ggml's tables (FNV-1a 64 of
 *     iq2xxs_grid ... iq1s_grid as little-endian bytes, computed from ggml-common.h at llama.cpp
 *     c392e50 — a known answer, so a single wrong coordinate fails);
 *   - dequantization: a float64 decoder written here from the block layouts (byte offsets,
 *     bit fields, value sets — it reads only the compact grid codes from the library), bit-exact
 *     (every IQ value is exact in f32, see kernels/iq_common.h), on random blocks and on every
 *     tensor of the golden IQ files; those tensors also stay within their quantization error of
 *     the F16 source (a wrong element order gives a relative rms error near sqrt(2));
 *   - dots: float64 sums of dequantized weights (and activations), bounds from the f32 roundings.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/iq_common.h"
#include "kernels/ops.h"
#include "kernels/threadpool.h"
#include "kernels/simd.h"
#include "kernels/types.h"
#include "loader/gguf.h"
#include "test_kernels_util.h"

static const int k_iq_types[] = { SL_TYPE_IQ2_XXS, SL_TYPE_IQ2_XS, SL_TYPE_IQ2_S, SL_TYPE_IQ3_XXS,
                                  SL_TYPE_IQ3_S, SL_TYPE_IQ1_S, SL_TYPE_IQ1_M };
#define N_IQ 7

static bool is_iq(int type)
{
    for (int i = 0; i < N_IQ; i++)
        if (k_iq_types[i] == type) return true;
    return false;
}


/* ---- the codebooks ---------------------------------------------------------------------------- */

/* Coordinate j of entry idx of a grid, decoded here from the compact code and the value sets of
 * the format (kernels/iq_grids.c's header): IQ2 {8, 25, 43}, IQ3_XXS {4, 12, ..., 52, 62},
 * IQ3_S {1, 3, ..., 15}, IQ1 {-1, 0, 1}. */
static int coord(int grid, int idx, int j)
{
    int n;
    const uint16_t *codes = sl_iq_grid_codes(grid, &n);
    cr_assert(idx >= 0 && idx < n);
    if (grid == SL_IQG_IQ3XXS || grid == SL_IQG_IQ3S) {
        const int k = (codes[idx] >> (3 * j)) & 7;
        return grid == SL_IQG_IQ3S ? 2 * k + 1 : k < 7 ? 8 * k + 4 : 62;
    }
    const int k = (codes[idx] >> (2 * j)) & 3;
    cr_assert_lt(k, 3, "grid %d entry %d coordinate %d: code 3 is not a value", grid, idx, j);
    if (grid == SL_IQG_IQ1S) return k - 1;
    return k == 0 ? 8 : k == 1 ? 25 : 43;
}

static uint64_t fnv1a(const void *p, size_t n, uint64_t h)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

Test(iq_tables, structure_values_and_checksums)
{
    const sl_iq_grids *g = sl_iq_grids_get();
    const struct { int id, n, dim; const void *expanded; size_t bytes; uint64_t fnv; } k[SL_IQG_COUNT] = {
        { SL_IQG_IQ2XXS, 256, 8, g->iq2xxs, sizeof g->iq2xxs, 0xbb4ee025b5ac6e8eull },
        { SL_IQG_IQ2XS, 512, 8, g->iq2xs, sizeof g->iq2xs, 0xc9b1ee61e79909bdull },
        { SL_IQG_IQ2S, 1024, 8, g->iq2s, sizeof g->iq2s, 0x123edd38a3b62b90ull },
        { SL_IQG_IQ3XXS, 256, 4, g->iq3xxs, sizeof g->iq3xxs, 0xdfa5dc83d6a155d5ull },
        { SL_IQG_IQ3S, 512, 4, g->iq3s, sizeof g->iq3s, 0xfa37020c25b44829ull },
        { SL_IQG_IQ1S, 2048, 8, g->iq1s, sizeof g->iq1s, 0x6703ed863501ae2eull },
    };
    for (int t = 0; t < SL_IQG_COUNT; t++) {
        int n;
        const uint16_t *codes = sl_iq_grid_codes(k[t].id, &n);
        cr_assert_eq(n, k[t].n, "grid %d has %d entries", t, n);
        cr_assert_eq(k[t].bytes, (size_t)n * (size_t)k[t].dim);
        const uint8_t *e = k[t].expanded;
        for (int i = 0; i < n; i++) {
            if (i > 0) cr_assert_gt(codes[i], codes[i - 1], "grid %d: entries %d, %d not ascending/distinct", t, i - 1, i);
            if (k[t].dim == 4) cr_assert_lt(codes[i], 1u << 12);
            for (int j = 0; j < k[t].dim; j++) {   /* expansion = definition, coordinate by coordinate */
                const uint8_t c = e[(size_t)i * k[t].dim + j];
                cr_assert_eq(t == SL_IQG_IQ1S ? (int8_t)c : c, coord(k[t].id, i, j), "grid %d entry %d coordinate %d", t, i, j);
            }
        }
        cr_assert_eq(fnv1a(k[t].expanded, k[t].bytes, 0xcbf29ce484222325ull), k[t].fnv,
                     "grid %d differs from ggml's table", t);
    }
    cr_assert_eq(sl_iq_grid_codes(SL_IQG_COUNT, &(int){ 1 }), NULL);
    for (int b = 0; b < 256; b++) {
        for (int j = 0; j < 8; j++)
            cr_assert_eq((int8_t)(g->sign_pm1[b] >> (8 * j)), (b >> j) & 1 ? -1 : 1);
        if (b < 128) {
            const uint8_t s = sl_iq_sign8((unsigned)b);
            cr_assert_eq(s & 127, b);
            cr_assert_eq(__builtin_popcount(s) % 2, 0, "7-bit sign field %d: an even number of minus signs", b);
        }
    }
}

/* ---- float64 decoder from the block layouts ----------------------------------------------------- */

static unsigned u16le(const uint8_t *p) { return p[0] | (unsigned)p[1] << 8; }
static uint32_t u32le(const uint8_t *p) { return u16le(p) | (uint32_t)u16le(p + 2) << 16; }
static double half_at(const uint8_t *p) { return tk_half_value((uint16_t)u16le(p)); }
static int sgn(unsigned bits, int j) { return (bits >> j) & 1 ? -1 : 1; }
static unsigned full_signs(unsigned s7) { s7 &= 127; return s7 | (unsigned)(__builtin_popcount(s7) & 1) << 7; }

/* out[0..256) = the values of one block of `type` at b. */
static void ref_block(int type, const uint8_t *b, double *out)
{
    switch (type) {
    case SL_TYPE_IQ2_XXS: {   /* d; 8 x (u32 4 indices, u32 4 x 7 signs | scale << 28) */
        const double d = half_at(b);
        for (int ib = 0; ib < 8; ib++) {
            const uint32_t a0 = u32le(b + 2 + 8 * ib), a1 = u32le(b + 6 + 8 * ib);
            const double db = d * (0.5 + (a1 >> 28)) / 4;
            for (int l = 0; l < 4; l++)
                for (int j = 0; j < 8; j++)
                    out[32 * ib + 8 * l + j] = db * coord(SL_IQG_IQ2XXS, (a0 >> (8 * l)) & 255, j) * sgn(full_signs(a1 >> (7 * l)), j);
        }
        break;
    }
    case SL_TYPE_IQ2_XS: {    /* d; 32 x u16 (9-bit index | 7 signs << 9); 8 scale bytes */
        const double d = half_at(b);
        for (int ib = 0; ib < 8; ib++)
            for (int l = 0; l < 4; l++) {
                const unsigned v = u16le(b + 2 + 2 * (4 * ib + l)), sc = (b[66 + ib] >> (4 * (l / 2))) & 15;
                for (int j = 0; j < 8; j++)
                    out[32 * ib + 8 * l + j] = d * (0.5 + sc) / 4 * coord(SL_IQG_IQ2XS, v & 511, j) * sgn(full_signs(v >> 9), j);
            }
        break;
    }
    case SL_TYPE_IQ2_S: {     /* d; 32 index bytes; 32 sign bytes; 8 qh; 8 scales */
        const double d = half_at(b);
        for (int ib = 0; ib < 8; ib++)
            for (int l = 0; l < 4; l++) {
                const int idx = b[2 + 4 * ib + l] | ((b[66 + ib] >> (2 * l)) & 3) << 8;
                const unsigned sc = (b[74 + ib] >> (4 * (l / 2))) & 15, s = b[34 + 4 * ib + l];
                for (int j = 0; j < 8; j++)
                    out[32 * ib + 8 * l + j] = d * (0.5 + sc) / 4 * coord(SL_IQG_IQ2S, idx, j) * sgn(s, j);
            }
        break;
    }
    case SL_TYPE_IQ3_XXS: {   /* d; 64 index bytes; 8 x u32 (4 x 7 signs | scale << 28) */
        const double d = half_at(b);
        for (int ib = 0; ib < 8; ib++) {
            const uint32_t a = u32le(b + 66 + 4 * ib);
            const double db = d * (0.5 + (a >> 28)) / 2;
            for (int l = 0; l < 4; l++)
                for (int j = 0; j < 8; j++)
                    out[32 * ib + 8 * l + j] = db * coord(SL_IQG_IQ3XXS, b[2 + 8 * ib + 2 * l + j / 4], j % 4) *
                                               sgn(full_signs(a >> (7 * l)), j);
        }
        break;
    }
    case SL_TYPE_IQ3_S: {     /* d; 64 index bytes; 8 qh; 32 sign bytes; 4 scale bytes */
        const double d = half_at(b);
        for (int ib = 0; ib < 8; ib++) {
            const double db = d * (1 + 2 * ((b[106 + ib / 2] >> (4 * (ib % 2))) & 15));
            for (int e = 0; e < 32; e++) {
                const int k = e / 4, idx = b[2 + 8 * ib + k] | ((b[66 + ib] >> k) & 1) << 8;
                out[32 * ib + e] = db * coord(SL_IQG_IQ3S, idx, e % 4) * sgn(b[74 + 4 * ib + e / 8], e % 8);
            }
        }
        break;
    }
    case SL_TYPE_IQ1_S: {     /* d; 32 index bytes; 8 x u16 (3 x 3 index bits, scale << 12, shift sign << 15) */
        const double d = half_at(b);
        for (int ib = 0; ib < 8; ib++) {
            const unsigned h = u16le(b + 34 + 2 * ib);
            const double dl = d * (2 * ((h >> 12) & 7) + 1), delta = h & 0x8000 ? -0.125 : 0.125;
            for (int l = 0; l < 4; l++)
                for (int j = 0; j < 8; j++)
                    out[32 * ib + 8 * l + j] = dl * (coord(SL_IQG_IQ1S, b[2 + 4 * ib + l] | ((h >> (3 * l)) & 7) << 8, j) + delta);
        }
        break;
    }
    case SL_TYPE_IQ1_M: {     /* 32 index bytes; 16 qh nibbles (3 index bits + shift sign); 4 x u16 scales */
        const unsigned w[4] = { u16le(b + 48), u16le(b + 50), u16le(b + 52), u16le(b + 54) };
        const double d = tk_half_value((uint16_t)((w[0] >> 12) | (w[1] >> 12) << 4 | (w[2] >> 12) << 8 | (w[3] >> 12) << 12));
        for (int ib = 0; ib < 8; ib++)
            for (int l = 0; l < 4; l++) {
                const unsigned nib = (b[32 + 2 * ib + l / 2] >> (4 * (l % 2))) & 15;
                const unsigned s = (w[ib / 2] >> (6 * (ib % 2) + 3 * (l / 2))) & 7;
                const double dl = d * (2 * s + 1), delta = nib & 8 ? -0.125 : 0.125;
                for (int j = 0; j < 8; j++)
                    out[32 * ib + 8 * l + j] = dl * (coord(SL_IQG_IQ1S, b[4 * ib + l] | (nib & 7) << 8, j) + delta);
            }
        break;
    }
    default: cr_assert_fail("not a codebook type: %d", type);
    }
}

/* Random blocks: random bytes, a finite super-block scale with exponent in [emin, emax]. */
static void random_blocks(tk_rng *r, int type, uint8_t *w, int nb, int emin, int emax)
{
    const sl_type_info *ti = sl_type_get(type);
    tk_bytes(r, w, (size_t)nb * ti->bytes);
    for (int i = 0; i < nb; i++) {
        uint8_t *b = w + (size_t)i * ti->bytes;
        const uint16_t h = tk_half_in(r, emin, emax);
        if (type == SL_TYPE_IQ1_M) {
            for (int k = 0; k < 4; k++) b[49 + 2 * k] = (uint8_t)((b[49 + 2 * k] & 0x0f) | ((h >> (4 * k)) & 15) << 4);
        } else {
            b[0] = (uint8_t)h;
            b[1] = (uint8_t)(h >> 8);
        }
    }
}

/* ---- dequantizers and f32 dots on random blocks -------------------------------------------------- */

Test(iq_dequant, bit_exact_against_float64_decoder)
{
    tk_rng r = { 1601 };
    double ref[SL_QK_K];
    for (int t = 0; t < N_IQ; t++) {
        const int type = k_iq_types[t];
        const sl_type_info *ti = sl_type_get(type);
        cr_assert(ti && sl_type_supported(type) && ti->blck == 256);
        const int nb = 64;
        uint8_t *w = malloc((size_t)nb * ti->bytes);
        float *got = malloc(sizeof(float) * nb * 256);
        random_blocks(&r, type, w, nb, -14, 15);   /* every normal half exponent */
        ti->dequant(w, got, (int64_t)nb * 256);
        for (int i = 0; i < nb; i++) {
            ref_block(type, w + (size_t)i * ti->bytes, ref);
            for (int e = 0; e < 256; e++)
                cr_assert_eq(tk_fbits(got[256 * i + e]), tk_fbits((float)ref[e]), "%s block %d element %d: %a vs %a",
                             ti->name, i, e, got[256 * i + e], ref[e]);
            for (int e = 0; e < 256; e++) cr_assert_eq((double)(float)ref[e], ref[e], "value not exact in f32");
        }
        free(w);
        free(got);
    }
}

Test(iq_dot, f32_dot_within_gamma_n)
{
    tk_rng r = { 1602 };
    for (int t = 0; t < N_IQ; t++) {
        const sl_type_info *ti = sl_type_get(k_iq_types[t]);
        for (int nb = 1; nb <= 16; nb *= 2) {
            const int64_t n = nb * 256;
            uint8_t *w = malloc((size_t)nb * ti->bytes);
            float *x = malloc(sizeof(float) * n);
            double *ref = malloc(sizeof(double) * n);
            random_blocks(&r, k_iq_types[t], w, nb, -6, 2);
            for (int i = 0; i < nb; i++) ref_block(k_iq_types[t], w + (size_t)i * ti->bytes, ref + 256 * i);
            for (int64_t i = 0; i < n; i++) x[i] = (float)tk_uniform(&r, -2, 2);
            double exact = 0, mag = 0;
            for (int64_t i = 0; i < n; i++) exact += ref[i] * x[i], mag += fabs(ref[i] * x[i]);
            const double u = 0x1p-24 * (double)n;
            const float got = ti->dot(w, x, n);
            cr_assert_leq(fabs(got - exact), u / (1 - u) * mag, "%s n=%lld: %.9g vs %.9g", ti->name, (long long)n, got, exact);
            free(w);
            free(x);
            free(ref);
        }
    }
}

/* ---- integer dots ------------------------------------------------------------------------------- */

/* Gaussian activations, each 32 scaled by 2^e, e in [-6, 4]. */
static void random_acts(tk_rng *r, float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i += 32) {
        const double s = ldexp(1.0, -6 + (int)(tk_next(r) % 11));
        for (int k = 0; k < 32; k++) x[i + k] = (float)(tk_gauss(r) * s);
    }
}

/* Portable integer dot against float64: sum over blocks of (dequantized weights) x (y.d * q),
 * within (nb + 5) * 2^-24 * sum_blocks |block sum|: each block term takes at most 4 roundings
 * (d product, (float)S, the product, IQ1's shift sum) before the nb sequential additions; the final
 * 1/8, 1/4 is exact. */
Test(iq_dot, portable_integer_dot_against_float64)
{
    tk_rng r = { 1603 };
    const sl_kernel_set *P = sl_kernels_for(SL_KPATH_PORTABLE);
    for (int t = 0; t < N_IQ; t++) {
        const int type = k_iq_types[t];
        const sl_type_info *ti = sl_type_get(type);
        for (int nb = 1; nb <= 12; nb++) {
            const int64_t n = nb * 256;
            uint8_t *w = malloc((size_t)nb * ti->bytes);
            sl_block_q8_k *y = malloc(sizeof *y * (size_t)nb);
            float *x = malloc(sizeof(float) * n);
            double ref[256];
            random_blocks(&r, type, w, nb, -8, 0);
            random_acts(&r, x, n);
            P->quantize_q8_k(x, y, n);
            double exact = 0, mag = 0;
            for (int i = 0; i < nb; i++) {
                ref_block(type, w + (size_t)i * ti->bytes, ref);
                double bs = 0;
                for (int e = 0; e < 256; e++) bs += ref[e] * ((double)y[i].d * y[i].qs[e]);
                exact += bs;
                mag += fabs(bs);
            }
            const float got = sl_kernels_qdot(P, type)(w, y, n);
            cr_assert_leq(fabs(got - exact), (nb + 5) * 0x1p-24 * mag + 1e-30, "%s nb=%d: %.9g vs %.9g", ti->name, nb, got, exact);
            free(w);
            free(y);
            free(x);
        }
    }
}

/* The SIMD sets this CPU has, as the tests below run them: the AVX-512 set three times where the
 * CPU can run every version of its IQ3/IQ2 dots (byte permutes in the loads and the shuffles form,
 * kernels/simd.h SL_IQ_FORM_*, and the gathers every AVX-512 CPU without VBMI/BITALG/GFNI runs),
 * so that all are tested natively; its name says which one ran. */
#define N_VARIANTS (SL_KPATH_COUNT + 2)
typedef struct { const sl_kernel_set *K; int path; bool gathers; int form; char name[48]; } simd_variant;

static int simd_variants(simd_variant v[N_VARIANTS])
{
    static const char *const names[3] = { " (byte permutes, loads form)", " (byte permutes, shuffles form)", " (gathers)" };
    int n = 0;
    for (int p = 1; p < SL_KPATH_COUNT; p++) {
        const sl_kernel_set *K = sl_kernels_for(p);
        if (!K) continue;
        const bool avx512 = p == SL_KPATH_AVX512, permutes = avx512 && sl_avx512_iq_has_byte_permutes();
        const int first = avx512 && !permutes ? 2 : 0, end = avx512 ? 3 : 1;   /* names[] index */
        for (int g = first; g < end; g++) {
            v[n] = (simd_variant){ K, p, avx512 && g == 2, g == 1 ? SL_IQ_FORM_SHUFFLES : SL_IQ_FORM_LOADS, "" };
            snprintf(v[n].name, sizeof v[n].name, "%s%s", K->name, avx512 ? names[g] : "");
            n++;
        }
    }
    return n;
}

static const sl_kernel_set *use_variant(const simd_variant *v)
{
    sl_avx512_iq_force_gathers(v->gathers);
    sl_avx512_iq_force_form(v->form);
    return v->K;
}

static void variants_reset(void)
{
    sl_avx512_iq_force_gathers(false);
    sl_avx512_iq_force_form(SL_IQ_FORM_AUTO);
}

/* Every SIMD path this CPU has: the portable bits, on random blocks (any scale exponent). */
Test(iq_dot, simd_paths_bit_identical_to_portable)
{
    tk_rng r = { 1604 };
    const sl_kernel_set *P = sl_kernels_for(SL_KPATH_PORTABLE);
    int checked = 0;
    simd_variant V[N_VARIANTS];
    const int nv = simd_variants(V);
    for (int vi = 0; vi < nv; vi++) {
        const sl_kernel_set *K = use_variant(&V[vi]);
        const int p = V[vi].path;
        fprintf(stderr, "codebook dots: running %s\n", V[vi].name);
        for (int t = 0; t < N_IQ; t++) {
            const int type = k_iq_types[t];
            const sl_type_info *ti = sl_type_get(type);
            if (!sl_kernels_qdot(K, type)) {
                /* only the NEON sets may lack one (matmul then runs the portable dot); x86 sets have all */
                cr_assert(p == SL_KPATH_NEON || p == SL_KPATH_NEON_DOTPROD, "%s has no %s dot", K->name, ti->name);
                fprintf(stderr, "codebook dots: %s has no %s dot (sl_matmul runs the portable one)\n", K->name, ti->name);
                continue;
            }
            for (int nb = 1; nb <= 9; nb++)
                for (int rep = 0; rep < 8; rep++) {
                    const int64_t n = nb * 256;
                    uint8_t *w = malloc((size_t)nb * ti->bytes);
                    sl_block_q8_k *y = malloc(sizeof *y * (size_t)nb);
                    float *x = malloc(sizeof(float) * n);
                    random_blocks(&r, type, w, nb, rep == 0 ? -14 : -8, rep == 0 ? 15 : 0);
                    random_acts(&r, x, n);
                    if (rep == 1) memset(x, 0, sizeof(float) * 256);   /* an all-zero activation block */
                    P->quantize_q8_k(x, y, n);
                    const float a = sl_kernels_qdot(P, type)(w, y, n), b = sl_kernels_qdot(K, type)(w, y, n);
                    cr_assert_eq(tk_fbits(a), tk_fbits(b), "%s x %d blocks: portable %a, %s %a", ti->name, nb, a, V[vi].name, b);
                    checked++;
                    free(w);
                    free(y);
                    free(x);
                }
        }
    }
    variants_reset();
    fprintf(stderr, "codebook dots: %d checked on %d SIMD kernel set(s) against portable\n", checked, nv);
}

/* The same at the integer extremes: every activation quantized to +-127 (|x| = amax in each
 * block) against weight blocks of all-ones bits (largest index, every sign set, scale 15), random
 * bits, and random bits with every scale nibble 15 — the widest int16 pair sums and int32 block
 * sums the SIMD dots form (vpmaddubsw saturates silently; these stay below it by construction,
 * kernels/simd_avx512_vbmi.c, and this checks it). */
Test(iq_dot, simd_paths_bit_identical_at_extremes)
{
    tk_rng r = { 1605 };
    const sl_kernel_set *P = sl_kernels_for(SL_KPATH_PORTABLE);
    int checked = 0;
    simd_variant V[N_VARIANTS];
    const int nv = simd_variants(V);
    for (int vi = 0; vi < nv; vi++) {
        const sl_kernel_set *K = use_variant(&V[vi]);
        for (int t = 0; t < N_IQ; t++) {
            const int type = k_iq_types[t];
            const sl_type_info *ti = sl_type_get(type);
            if (!sl_kernels_qdot(K, type)) continue;
            for (int nb = 1; nb <= 9; nb += 2)
                for (int kind = 0; kind < 3; kind++) {
                    const int64_t n = nb * 256;
                    uint8_t *w = malloc((size_t)nb * ti->bytes);
                    sl_block_q8_k *y = malloc(sizeof *y * (size_t)nb);
                    float *x = malloc(sizeof(float) * n);
                    if (kind == 0) memset(w, 0xff, (size_t)nb * ti->bytes);
                    else tk_bytes(&r, w, (size_t)nb * ti->bytes);
                    for (int i = 0; i < nb; i++) {
                        uint8_t *b = w + (size_t)i * ti->bytes;
                        if (kind == 2) /* the scale bytes are the last ones of IQ2_XS, IQ2_S, IQ3_S; IQ3_XXS/IQ2_XXS keep theirs in the sign words */
                            for (int k = 0; k < (type == SL_TYPE_IQ3_S ? 4 : 8); k++)
                                if (type == SL_TYPE_IQ2_XS || type == SL_TYPE_IQ2_S || type == SL_TYPE_IQ3_S) b[ti->bytes - 1 - k] = 0xff;
                        if (type != SL_TYPE_IQ1_M) { b[0] = 0x00; b[1] = 0x3c; }   /* d = 1 (f16) */
                        else {   /* d = 1 too: IQ1_M spreads its f16 over the top nibbles of its four scale
                                  * words (bytes 48..55); all-ones bits there are a NaN, whose sign bit
                                  * the paths need not agree on (only the integer extremes are the point) */
                            static const uint8_t top[4] = { 0x0, 0x0, 0xc, 0x3 };   /* 0x3c00, nibble by nibble */
                            for (int q = 0; q < 4; q++) b[48 + 2 * q + 1] = (uint8_t)((b[48 + 2 * q + 1] & 0x0f) | top[q] << 4);
                        }
                    }
                    for (int64_t e = 0; e < n; e++) x[e] = (tk_next(&r) & 1) ? 1.0f : -1.0f;
                    P->quantize_q8_k(x, y, n);
                    const float a = sl_kernels_qdot(P, type)(w, y, n), b = sl_kernels_qdot(K, type)(w, y, n);
                    cr_assert(isfinite(a), "%s x %d blocks, kind %d: portable %a (d = 1 gives finite sums)", ti->name, nb, kind, a);
                    cr_assert_eq(tk_fbits(a), tk_fbits(b), "%s x %d blocks, kind %d: portable %a, %s %a", ti->name, nb, kind, a, V[vi].name, b);
                    checked++;
                    free(w);
                    free(y);
                    free(x);
                }
        }
    }
    variants_reset();
    fprintf(stderr, "codebook dots at the extremes: %d checked on %d SIMD kernel set(s) against portable\n", checked, nv);
}

/* One type's cases of a multi-row or multi-vector form on kernel set K (variant `vname`): how many
 * ran.  over_simd_forms runs it on every SIMD variant and type that has the form. */
typedef int (*form_cases_fn)(tk_rng *r, const sl_kernel_set *K, const char *vname, int type);

static int over_simd_forms(tk_rng *r, bool (*has)(const sl_kernel_set *K, int type), form_cases_fn cases, int *nv)
{
    simd_variant V[N_VARIANTS];
    int checked = 0;
    *nv = simd_variants(V);
    for (int vi = 0; vi < *nv; vi++) {
        const sl_kernel_set *K = use_variant(&V[vi]);
        for (int t = 0; t < N_IQ; t++)
            if (has(K, k_iq_types[t])) checked += cases(r, K, V[vi].name, k_iq_types[t]);
    }
    variants_reset();
    return checked;
}

static bool has_dot4(const sl_kernel_set *K, int type) { return sl_kernels_qdot4(K, type) != NULL; }
static bool has_dotr(const sl_kernel_set *K, int type) { return sl_kernels_qdotr(K, type) != NULL; }

/* The 4-vector dots return each vector's single-dot bits: random blocks on 1-9 super-blocks (the
 * staged pairs of four, and the tails), four different random activation vectors (one of them
 * all-zero in one case), rows further apart than their size with junk between them (a kernel
 * must step by the stride it is given), the last one ending at the end of its allocation. */
static int dot4_cases(tk_rng *r, const sl_kernel_set *K, const char *vname, int type)
{
    const sl_kernel_set *P = sl_kernels_for(SL_KPATH_PORTABLE);
    const sl_type_info *ti = sl_type_get(type);
    int checked = 0;
    for (int nb = 1; nb <= 9; nb++)
        for (int rep = 0; rep < 3; rep++) {
            const int64_t n = nb * 256;
            const size_t row = sizeof(sl_block_q8_k) * (size_t)nb, ys = row + 4 + 8 * (size_t)rep;
            uint8_t *w = malloc((size_t)nb * ti->bytes), *y = malloc(3 * ys + row);
            float *x = malloc(sizeof(float) * n);
            memset(y, 0xa5, 3 * ys + row);
            random_blocks(r, type, w, nb, rep == 0 ? -14 : -8, rep == 0 ? 15 : 0);
            for (int v = 0; v < 4; v++) {
                random_acts(r, x, n);
                if (rep == 1 && v == 2) memset(x, 0, sizeof(float) * n);
                P->quantize_q8_k(x, y + v * ys, n);
            }
            float got[4];
            sl_kernels_qdot4(K, type)(w, y, ys, n, got);
            for (int v = 0; v < 4; v++) {
                const float want = sl_kernels_qdot(P, type)(w, y + v * ys, n);
                cr_assert_eq(tk_fbits(got[v]), tk_fbits(want), "%s dot4 %s x %d blocks, vector %d: %a != portable %a", vname,
                             ti->name, nb, v, got[v], want);
            }
            checked++;
            free(w);
            free(y);
            free(x);
        }
    return checked;
}

Test(iq_dot, four_vector_forms_equal_single_dots)
{
    tk_rng r = { 1606 };
    int nv;
    const int checked = over_simd_forms(&r, has_dot4, dot4_cases, &nv);
    if (checked == 0) cr_skip_test("no SIMD set with 4-vector codebook dots on this CPU (only the AVX-512 one has them)");
    fprintf(stderr, "codebook 4-vector dots: %d checked on %d SIMD kernel set(s) against portable single dots\n", checked, nv);
}

/* The rows forms return each row's single-dot bits: 1-20 and 70 super-blocks per row (multiples of
 * 4 run the staged rows as one pipeline, the others row by row; 70 takes the plane-order forms two
 * passes of activations, kernels/simd_avx512_vbmi_planes.c), 1-7 rows, packed and with a gap between rows
 * (row by row), the weights ending at the end of their allocation. */
static int dotr_cases(tk_rng *r, const sl_kernel_set *K, const char *vname, int type)
{
    const sl_kernel_set *P = sl_kernels_for(SL_KPATH_PORTABLE);
    const sl_type_info *ti = sl_type_get(type);
    static const int nbs[] = { 1, 3, 4, 5, 8, 12, 16, 20, 70 }, nrs[] = { 1, 2, 3, 7 };
    int checked = 0;
    for (size_t a = 0; a < sizeof nbs / sizeof *nbs; a++)
        for (size_t b = 0; b < sizeof nrs / sizeof *nrs; b++)
            for (int gap = 0; gap < 2; gap++) {
                const int nb = nbs[a], nrows = nrs[b];
                const int64_t n = nb * 256;
                const size_t row_bytes = (size_t)(nb + gap) * ti->bytes, total = (size_t)(nrows - 1) * row_bytes + (size_t)nb * ti->bytes;
                uint8_t *w = malloc(total), *y = malloc(sizeof(sl_block_q8_k) * (size_t)nb);
                float *x = malloc(sizeof(float) * n), got[7];
                memset(w, 0x5a, total);
                for (int k = 0; k < nrows; k++) random_blocks(r, type, w + (size_t)k * row_bytes, nb, -8, 0);
                random_acts(r, x, n);
                P->quantize_q8_k(x, y, n);
                sl_kernels_qdotr(K, type)(w, row_bytes, y, n, nrows, got);
                for (int k = 0; k < nrows; k++) {
                    const float want = sl_kernels_qdot(P, type)(w + (size_t)k * row_bytes, y, n);
                    cr_assert_eq(tk_fbits(got[k]), tk_fbits(want), "%s rows %s x %d blocks, row %d of %d (gap %d): %a != portable %a",
                                 vname, ti->name, nb, k, nrows, gap, got[k], want);
                }
                checked++;
                free(w);
                free(y);
                free(x);
            }
    return checked;
}

Test(iq_dot, rows_forms_equal_single_dots)
{
    tk_rng r = { 2412 };
    int nv;
    const int checked = over_simd_forms(&r, has_dotr, dotr_cases, &nv);
    if (checked == 0) cr_skip_test("no SIMD set with codebook rows forms on this CPU (only the AVX-512 one has them)");
    fprintf(stderr, "codebook rows forms: %d checked on %d SIMD kernel set(s) against portable single dots\n", checked, nv);
}

/* sl_matmul on every path gives each (row, vector) the portable single dot's bits, also where the
 * rows forms pipeline a tile's rows (1024 columns: four super-blocks per row) and where a batch
 * leaves one vector past its 4-vector groups (5 vectors), on a 2-thread pool. */
Test(iq_dot, matmul_rows_forms_equal_single_dots)
{
    tk_rng r = { 2413 };
    const sl_kernel_set *P = sl_kernels_for(SL_KPATH_PORTABLE);
    const int64_t rows = 45, cols = 1024;
    const int nsb = (int)(cols / 256), nbs[] = { 1, 5 };
    sl_pool *pool = sl_pool_create(2);
    float *x = malloc(sizeof(float) * 5 * (size_t)cols), *out = malloc(sizeof(float) * 5 * (size_t)rows);
    uint8_t *y = malloc(sizeof(sl_block_q8_k) * (size_t)nsb);
    for (int p = 0; p < SL_KPATH_COUNT; p++) {
        if (sl_kernels_force(p) != 0) continue;
        for (int t = 0; t < N_IQ; t++) {
            const int type = k_iq_types[t];
            const size_t rb = sl_row_bytes(type, cols);
            uint8_t *w = malloc(rb * (size_t)rows);
            for (int64_t k = 0; k < rows; k++) random_blocks(&r, type, w + (size_t)k * rb, nsb, -8, 0);
            for (int b = 0; b < 5; b++) random_acts(&r, x + (size_t)b * cols, cols);
            for (int c = 0; c < 2; c++) {
                sl_matmul(pool, type, w, rows, cols, rb, x, nbs[c], out, rows);
                for (int b = 0; b < nbs[c]; b++) {
                    P->quantize_q8_k(x + (size_t)b * cols, y, cols);
                    for (int64_t k = 0; k < rows; k++) {
                        const float want = sl_kernels_qdot(P, type)(w + (size_t)k * rb, y, cols);
                        cr_assert_eq(tk_fbits(out[(size_t)b * rows + k]), tk_fbits(want), "path %d %s batch %d vector %d row %lld: %a != %a",
                                     p, sl_type_get(type)->name, nbs[c], b, (long long)k, out[(size_t)b * rows + k], want);
                    }
                }
            }
            free(w);
        }
    }
    sl_kernels_force(SL_KPATH_AUTO);
    sl_pool_free(pool);
    free(x);
    free(out);
    free(y);
}

/* ---- every tensor of the golden IQ files ------------------------------------------------------ */

static bool read_at(int fd, void *buf, size_t len, uint64_t off)
{
    uint8_t *p = buf;
    while (len > 0) {
        const ssize_t k = pread(fd, p, len, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k;
        len -= (size_t)k;
        off += (uint64_t)k;
    }
    return true;
}

typedef struct { sl_gguf *g; int fd; } model;

static model open_model(const char *file)
{
    char path[512], err[SL_ERRLEN];
    snprintf(path, sizeof path, SL_SHARED_DIR "/models/%s", file);
    model m = { NULL, -1 };
    cr_assert_eq(sl_gguf_open(path, &m.g, err, sizeof err), 0, "open %s: %s", path, err);
    m.fd = open(path, O_RDONLY | O_CLOEXEC);
    cr_assert_geq(m.fd, 0);
    return m;
}

static int64_t n_elems(const sl_gguf_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->n_dims; d++) n *= t->ne[d];
    return n;
}

static void *read_tensor(const model *m, const sl_gguf_tensor *t)
{
    void *buf = malloc(t->nbytes);
    cr_assert_eq(sl_row_bytes(t->type, n_elems(t)), t->nbytes);
    cr_assert(read_at(m->fd, buf, t->nbytes, t->offset));
    return buf;
}

/* Relative rms error bound vs the F16 source, per type: the worst tensor measured on these files
 * (printed by the test: IQ3_S 0.168, IQ3_XXS 0.191, IQ2_S 0.257, IQ2_XS 0.311, IQ2_XXS 0.354,
 * IQ1_M 0.475, IQ1_S 0.504) x 1.25, rounded up.  A decoder with the elements of a group or sub-block
 * in the wrong order gives ~1.4 (two independent Gaussians), a wrong grid point for one index
 * shows in the bit-exact comparison instead. */
static double rms_bound(int type)
{
    switch (type) {
    case SL_TYPE_IQ3_S:   return 0.21;
    case SL_TYPE_IQ3_XXS: return 0.24;
    case SL_TYPE_IQ2_S:   return 0.33;
    case SL_TYPE_IQ2_XS:  return 0.39;
    case SL_TYPE_IQ2_XXS: return 0.45;
    case SL_TYPE_IQ1_M:   return 0.60;
    case SL_TYPE_IQ1_S:   return 0.63;
    default: return -1;
    }
}

static void check_file(const char *type_name)
{
    char file[128];
    snprintf(file, sizeof file, "micro-llama.%s.gguf", type_name);
    model q = open_model(file), f = open_model("micro-llama.F16.gguf");
    int checked = 0;
    double worst[SL_TYPE_COUNT] = { 0 };
    for (int64_t i = 0; i < sl_gguf_n_tensors(q.g); i++) {
        const sl_gguf_tensor *tq = sl_gguf_tensor_at(q.g, i);
        if (!is_iq(tq->type)) continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)tq->name.len, tq->name.ptr);
        const sl_gguf_tensor *tf = sl_gguf_find_tensor(f.g, name);
        cr_assert(tf && tf->type == SL_TYPE_F16 && n_elems(tf) == n_elems(tq), "%s: %s in F16", file, name);
        const sl_type_info *ti = sl_type_get(tq->type), *fi = sl_type_get(SL_TYPE_F16);
        const int64_t n = n_elems(tq), nb = n / 256;
        uint8_t *raw = read_tensor(&q, tq);
        void *fraw = read_tensor(&f, tf);
        float *got = malloc(sizeof(float) * n), *src = malloc(sizeof(float) * n);
        ti->dequant(raw, got, n);
        fi->dequant(fraw, src, n);
        double ref[256], se = 0, sr = 0;
        for (int64_t b = 0; b < nb; b++) {
            ref_block(tq->type, raw + b * ti->bytes, ref);
            for (int e = 0; e < 256; e++)
                cr_assert_eq(tk_fbits(got[256 * b + e]), tk_fbits((float)ref[e]), "%s: %s block %lld element %d", file, name,
                             (long long)b, e);
        }
        for (int64_t k = 0; k < n; k++) se += ((double)got[k] - src[k]) * ((double)got[k] - src[k]), sr += (double)src[k] * src[k];
        const double rel = sqrt(se / sr);
        if (rel > worst[tq->type]) worst[tq->type] = rel;
        cr_assert_leq(rel, rms_bound(tq->type), "%s: %s (%s) rel rms vs F16 %.4f > %.2f", file, name, ti->name, rel,
                      rms_bound(tq->type));
        /* first and last rows: f32 dot within gamma_n; integer dots of every path = portable */
        const int64_t cols = tq->ne[0], rows = n / cols;
        const size_t rb = sl_row_bytes(tq->type, cols);
        tk_rng r = { (uint64_t)i + 77 };
        float *x = malloc(sizeof(float) * cols);
        sl_block_q8_k *y = malloc(sizeof *y * (size_t)(cols / 256));
        random_acts(&r, x, cols);
        sl_quantize_act_q8_k(x, y, cols);
        for (int64_t row = 0; row < rows; row += rows - 1) {
            double ex = 0, mag = 0;
            for (int64_t k = 0; k < cols; k++) ex += (double)got[row * cols + k] * x[k], mag += fabs((double)got[row * cols + k] * x[k]);
            const double u = 0x1p-24 * (double)cols;
            cr_assert_leq(fabs(ti->dot(raw + row * rb, x, cols) - ex), u / (1 - u) * mag, "%s: %s row %lld", file, name, (long long)row);
            const float a = sl_kernels_qdot(sl_kernels_for(SL_KPATH_PORTABLE), tq->type)(raw + row * rb, y, cols);
            for (int p = 1; p < SL_KPATH_COUNT; p++)
                if (sl_kernels_for(p) && sl_kernels_qdot(sl_kernels_for(p), tq->type))   /* NULL: simd_paths_... says so */
                    cr_assert_eq(tk_fbits(a), tk_fbits(sl_kernels_qdot(sl_kernels_for(p), tq->type)(raw + row * rb, y, cols)),
                                 "%s: %s row %lld on %s", file, name, (long long)row, sl_kpath_name(p));
            if (rows == 1) break;
        }
        free(x);
        free(y);
        free(raw);
        free(fraw);
        free(got);
        free(src);
        checked++;
    }
    for (int t = 0; t < SL_TYPE_COUNT; t++)
        if (worst[t] > 0) fprintf(stderr, "%-24s %-8s worst rel rms vs F16 %.4f (bound %.2f)\n", file, sl_type_name(t), worst[t], rms_bound(t));
    cr_assert_geq(checked, 16, "%s: only %d codebook tensors", file, checked);
    sl_gguf_close(q.g);
    sl_gguf_close(f.g);
    close(q.fd);
    close(f.fd);
}

Test(iq_files, iq3_s) { check_file("IQ3_S"); }
Test(iq_files, iq3_m) { check_file("IQ3_M"); }
Test(iq_files, iq3_xxs) { check_file("IQ3_XXS"); }
Test(iq_files, iq2_xxs) { check_file("IQ2_XXS"); }
Test(iq_files, iq2_xs) { check_file("IQ2_XS"); }
Test(iq_files, iq2_s) { check_file("IQ2_S"); }
Test(iq_files, iq2_m) { check_file("IQ2_M"); }
Test(iq_files, iq1_s) { check_file("IQ1_S"); }
Test(iq_files, iq1_m) { check_file("IQ1_M"); }
