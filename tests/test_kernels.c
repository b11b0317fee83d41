/* tests/test_kernels.c — type table, half/bfloat16 conversions, dequantization (bit-exact against an
 * independent bit-level decoder) and dot products of every supported type.
 *
 * Quantization round trips are in test_quant.c; checks against real GGUF files in
 * test_kernels_gguf.c.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/f16.h"
#include "kernels/types.h"
#include "test_kernels_util.h"

/* ---- type table ------------------------------------------------------------------------------ */

/* Expected geometry, written from ggml-common.h's block structs (bytes) and ggml.c's type_traits
 * (block sizes) at llama.cpp c392e50.  `ok`: sluice computes with it. */
static const struct { int id; const char *name; int blck, bytes; bool ok; } k_types[] = {
    {0, "F32", 1, 4, true},        {1, "F16", 1, 2, true},         {2, "Q4_0", 32, 18, true},
    {3, "Q4_1", 32, 20, true},    {6, "Q5_0", 32, 22, true},     {7, "Q5_1", 32, 24, true},
    {8, "Q8_0", 32, 34, true},     {9, "Q8_1", 32, 36, false},     {10, "Q2_K", 256, 84, true},
    {11, "Q3_K", 256, 110, true}, {12, "Q4_K", 256, 144, true},   {13, "Q5_K", 256, 176, true},
    {14, "Q6_K", 256, 210, true},  {15, "Q8_K", 256, 292, false},  {16, "IQ2_XXS", 256, 66, true},
    {17, "IQ2_XS", 256, 74, true}, {18, "IQ3_XXS", 256, 98, true}, {19, "IQ1_S", 256, 50, true},
    {20, "IQ4_NL", 32, 18, true}, {21, "IQ3_S", 256, 110, true}, {22, "IQ2_S", 256, 82, true},
    {23, "IQ4_XS", 256, 136, true}, {24, "I8", 1, 1, false},      {25, "I16", 1, 2, false},
    {26, "I32", 1, 4, false},      {27, "I64", 1, 8, false},       {28, "F64", 1, 8, false},
    {29, "IQ1_M", 256, 56, true}, {30, "BF16", 1, 2, true},       {34, "TQ1_0", 256, 54, false},
    {35, "TQ2_0", 256, 66, false}, {39, "MXFP4", 32, 17, true},
};
#define N_TYPES ((int)(sizeof k_types / sizeof k_types[0]))

/* Supported types without a reference quantizer (the table allows NULL there). */
static bool has_quantizer(int id)
{
    /* Q4_1 Q5_0 Q5_1, and the codebook types (they need an importance matrix) */
    static const int none[] = {3, 6, 7, 16, 17, 18, 19, 21, 22, 29};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
        if (none[i] == id) return false;
    return true;
}

static int expected_index(int id)
{
    for (int i = 0; i < N_TYPES; i++)
        if (k_types[i].id == id) return i;
    return -1;
}

Test(types, table_matches_ggml_for_every_id)
{
    int ids[SL_TYPE_COUNT + 20], n = 0;
    for (int id = -5; id < SL_TYPE_COUNT + 6; id++) ids[n++] = id;
    ids[n++] = INT_MIN;
    ids[n++] = INT_MAX;
    ids[n++] = 1000;
    for (int k = 0; k < n; k++) {
        const int id = ids[k], e = expected_index(id);
        const sl_type_info *t = sl_type_get(id);
        if (e < 0) {
            cr_assert_null(t, "id %d must be unknown", id);
            cr_assert_str_eq(sl_type_name(id), "unknown");
            cr_assert_not(sl_type_supported(id));
            cr_assert_eq(sl_row_bytes(id, 256), 0);
            continue;
        }
        cr_assert_not_null(t, "id %d (%s) must be known", id, k_types[e].name);
        cr_assert_str_eq(t->name, k_types[e].name);
        cr_assert_str_eq(sl_type_name(id), k_types[e].name);
        cr_assert_eq(t->blck, k_types[e].blck, "%s blck", t->name);
        cr_assert_eq(t->bytes, k_types[e].bytes, "%s bytes", t->name);
        cr_assert_eq(sl_type_supported(id), k_types[e].ok, "%s supported", t->name);
        cr_assert_eq(t->dequant != NULL, k_types[e].ok, "%s dequant", t->name);
        cr_assert_eq(t->dot != NULL, k_types[e].ok, "%s dot", t->name);
        cr_assert_eq(t->quantize != NULL, k_types[e].ok && has_quantizer(id), "%s quantize", t->name);

        const int64_t b = t->blck;
        cr_assert_eq(sl_row_bytes(id, 0), 0);
        cr_assert_eq(sl_row_bytes(id, b), (size_t)t->bytes);
        cr_assert_eq(sl_row_bytes(id, 4096 * b), (size_t)4096 * (size_t)t->bytes, "%s", t->name);
        cr_assert_eq(sl_row_bytes(id, -b), 0, "%s negative n", t->name);
        if (b > 1) {
            cr_assert_eq(sl_row_bytes(id, b + 1), 0, "%s partial block", t->name);
            cr_assert_eq(sl_row_bytes(id, b - 1), 0, "%s partial block", t->name);
        }
        /* no overflow: INT64_MAX elements of any type with bytes/blck > 2 do not fit in size_t */
        size_t big = sl_row_bytes(id, INT64_MAX - INT64_MAX % b);
        if ((double)t->bytes / (double)b > 2.0) cr_assert_eq(big, 0, "%s overflow", t->name);
    }
}

/* ---- half and bfloat16 ------------------------------------------------------------------------ */

/* Reference float -> half (as bits): |x| / 2^(E-10) is exact in double (a float divided by a power
 * of two); nearbyint() rounds it to nearest even in the default rounding mode; the encoding
 * ((E+15) << 10) + n - 1024 covers normals, the subnormal range (E clamped to -14) and the carry
 * into the next binade.  Overflow threshold: 65520 = 65504 + half an ulp rounds (to even) to inf. */
static uint16_t ref_f32_to_f16(float x)
{
    const uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs((double)x);
    if (isnan(x)) return sign | 0x7e00;
    if (a >= 65520.0) return sign | 0x7c00;
    if (a == 0) return sign;
    int e;
    frexp(a, &e);
    int E = e - 1 < -14 ? -14 : e - 1;
    double n = nearbyint(a / ldexp(1.0, E - 10));
    return sign | (uint16_t)(((E + 15) << 10) + (int)n - 1024);
}

/* Same for bfloat16: 8 significant bits, float's exponent range (subnormal quantum 2^-133);
 * rounding past the largest finite value produces 0x7f80 (inf) through the same formula. */
static uint16_t ref_f32_to_bf16(float x)
{
    const uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs((double)x);
    if (isnan(x)) return 0;                       /* checked separately */
    if (isinf(x)) return sign | 0x7f80;
    if (a == 0) return sign;
    int e;
    frexp(a, &e);
    int E = e - 1 < -126 ? -126 : e - 1;
    double n = nearbyint(a / ldexp(1.0, E - 7));
    return sign | (uint16_t)(((E + 127) << 7) + (int)n - 128);
}

Test(f16, half_to_float_exhaustive)
{
    /* every half: scalar conversion, and the row kernel on all 65536 at once */
    static uint16_t h[65536];
    static float row[65536];
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    sl_dequant_f16(h, row, 65536);
    int bad = 0;
    for (int i = 0; i < 65536; i++) {
        const int e = (i >> 10) & 0x1f, m = i & 0x3ff;
        uint32_t want;
        if (e == 0x1f) want = ((uint32_t)(i & 0x8000) << 16) | 0x7f800000u | ((uint32_t)m << 13);
        else want = tk_fbits((float)tk_half_value((uint16_t)i));   /* exact: 11 bits */
        const uint32_t got = tk_fbits(sl_f16_to_f32((uint16_t)i)), got_row = tk_fbits(row[i]);
        if (got != want || got_row != want) {
            if (bad++ < 5)
                cr_log_error("half 0x%04x: want 0x%08x scalar 0x%08x row 0x%08x", i, want, got, got_row);
        }
    }
    cr_assert_eq(bad, 0, "%d halfs convert wrongly", bad);
}

Test(f16, float_to_half_roundtrip_and_ties)
{
    int bad = 0;
    /* every non-NaN half survives half -> float -> half */
    for (int i = 0; i < 65536; i++) {
        if (((i >> 10) & 0x1f) == 0x1f && (i & 0x3ff)) continue;
        if (sl_f32_to_f16(sl_f16_to_f32((uint16_t)i)) != i) bad++;
    }
    cr_assert_eq(bad, 0, "%d halfs do not round-trip", bad);
    /* midpoints between neighbours (exact in float: 12 bits) go to the even one; one float ulp
     * either side goes to the nearer one.  Includes 65504..65520..inf and the subnormal range. */
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < 0x7c00; i++) {
            /* past 65504 the next "value" is 65536 (what 0x7c00 would be with a finite exponent) */
            const float lo = (float)tk_half_value((uint16_t)i);
            const float hi = i == 0x7bff ? 65536.0f : (float)tk_half_value((uint16_t)(i + 1));
            const float mid = (lo + hi) / 2, sg = s ? -1.0f : 1.0f;
            const uint16_t sb = s ? 0x8000 : 0;
            const uint16_t even = (i & 1) ? (uint16_t)(i + 1) : (uint16_t)i;
            if (sl_f32_to_f16(sg * mid) != (sb | even)) bad++;
            if (sl_f32_to_f16(sg * nextafterf(mid, 0)) != (sb | i)) bad++;
            if (sl_f32_to_f16(sg * nextafterf(mid, INFINITY)) != (sb | (i + 1))) bad++;
        }
    cr_assert_eq(bad, 0, "%d midpoint cases round wrongly", bad);
    cr_assert_eq(sl_f32_to_f16(NAN) & 0x7c00, 0x7c00);
    cr_assert_neq(sl_f32_to_f16(NAN) & 0x3ff, 0, "NaN must stay NaN");
}

Test(f16, float_to_half_random_vs_double_reference)
{
    tk_rng r = {11};
    int bad = 0;
    static float src[1 << 16];
    static uint16_t row[1 << 16];
    for (int k = 0; k < 16; k++) {
        for (int i = 0; i < (1 << 16); i++) {
            float f;
            if (i & 1) f = tk_bitsf((uint32_t)tk_next(&r));                   /* any float */
            else f = (float)ldexp(tk_uniform(&r, -1, 1), (int)(tk_next(&r) % 48) - 30); /* half range */
            if (isnan(f)) f = 1.5f;
            src[i] = f;
        }
        sl_quantize_f16(src, row, 1 << 16);
        for (int i = 0; i < (1 << 16); i++) {
            const uint16_t want = ref_f32_to_f16(src[i]);
            if (sl_f32_to_f16(src[i]) != want || row[i] != want) {
                if (bad++ < 5) cr_log_error("f32 %a: want 0x%04x got 0x%04x", src[i], want, row[i]);
            }
        }
    }
    cr_assert_eq(bad, 0, "%d floats convert wrongly", bad);
}

Test(bf16, conversions_exhaustive_and_random)
{
    static uint16_t h[65536];
    static float row[65536];
    int bad = 0;
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    sl_dequant_bf16(h, row, 65536);
    for (int i = 0; i < 65536; i++) {
        const uint32_t want = (uint32_t)i << 16;             /* bf16 is the top half of an f32 */
        if (tk_fbits(row[i]) != want || tk_fbits(sl_bf16_to_f32((uint16_t)i)) != want) bad++;
        const bool nan = ((i >> 7) & 0xff) == 0xff && (i & 0x7f);
        if (!nan && sl_f32_to_bf16(tk_bitsf(want)) != i) bad++;              /* round trip */
    }
    cr_assert_eq(bad, 0, "%d bf16 values convert wrongly", bad);

    tk_rng r = {12};
    static float src[1 << 16];
    static uint16_t out[1 << 16];
    for (int k = 0; k < 16; k++) {
        for (int i = 0; i < (1 << 16); i++) {
            uint32_t u = (uint32_t)tk_next(&r);
            if (i % 3 == 0) u = (u & 0xffff0000u) | 0x8000u;                 /* exact ties */
            src[i] = tk_bitsf(u);
        }
        sl_quantize_bf16(src, out, 1 << 16);
        for (int i = 0; i < (1 << 16); i++) {
            if (isnan(src[i])) {
                if ((out[i] & 0x7f80) != 0x7f80 || !(out[i] & 0x7f)) bad++;
                continue;
            }
            const uint16_t want = ref_f32_to_bf16(src[i]);
            if (out[i] != want || sl_f32_to_bf16(src[i]) != want) {
                if (bad++ < 5) cr_log_error("f32 %a: want 0x%04x got 0x%04x", src[i], want, out[i]);
            }
        }
    }
    cr_assert_eq(bad, 0, "%d floats convert wrongly to bf16", bad);
}

/* ---- quantized blocks: independent bit-level decoders ------------------------------------------
 * Each decoder works on raw bytes at byte offsets (not on the kernels' structs) and returns the
 * exact value of element e in double.  Every value the formats define is exact in double (products
 * of an 11-bit half and small integers, and for Q4_K/Q5_K a difference of two multiples of 2^-24
 * below 2^28), and ggml's f32 sequence has exact products and one rounding (K-quants: the final
 * subtraction; the others none).  So (float)exact is ggml's value, and kernels must match it
 * bit for bit. */

static double le_half(const uint8_t *p) { return tk_half_value((uint16_t)(p[0] | (p[1] << 8))); }

static double dec_q4_0(const uint8_t *b, int e)            /* d@0, qs@2[16] */
{
    int q = e < 16 ? (b[2 + e] & 15) : (b[2 + e - 16] >> 4);
    return le_half(b) * (q - 8);
}

static double dec_q8_0(const uint8_t *b, int e)            /* d@0, qs@2[32] int8 */
{
    return le_half(b) * (int8_t)b[2 + e];
}

/* 6-bit scale (what = 0) or min (what = 1) of sub-block j from the 12 bytes at s. */
static int k_scale6(const uint8_t *s, int j, int what)
{
    if (j < 4) return s[j + 4 * what] & 63;
    const int low4 = what ? s[j + 4] >> 4 : s[j + 4] & 15;
    const int high2 = s[j - 4 + 4 * what] >> 6;
    return low4 | (high2 << 4);
}

static double dec_q4_k(const uint8_t *b, int e)            /* d@0 dmin@2 scales@4[12] qs@16[128] */
{
    const int g = e / 64, r = e % 64, j = e / 32;
    const uint8_t byte = b[16 + 32 * g + r % 32];
    const int q = r < 32 ? byte & 15 : byte >> 4;
    return le_half(b) * k_scale6(b + 4, j, 0) * q - le_half(b + 2) * k_scale6(b + 4, j, 1);
}

static double dec_q5_k(const uint8_t *b, int e)     /* d@0 dmin@2 scales@4[12] qh@16[32] qs@48[128] */
{
    const int g = e / 64, r = e % 64, j = e / 32;
    const uint8_t byte = b[48 + 32 * g + r % 32];
    const int bit = (b[16 + r % 32] >> (2 * g + (r >= 32))) & 1;
    const int q = (r < 32 ? byte & 15 : byte >> 4) + 16 * bit;
    return le_half(b) * k_scale6(b + 4, j, 0) * q - le_half(b + 2) * k_scale6(b + 4, j, 1);
}

static double dec_q6_k(const uint8_t *b, int e)     /* ql@0[128] qh@128[64] scales@192[16] d@208 */
{
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const uint8_t lo = b[64 * h + 32 * (k & 1) + l];
    const int q = ((k < 2 ? lo & 15 : lo >> 4) | (((b[128 + 32 * h + l] >> (2 * k)) & 3) << 4)) - 32;
    return le_half(b + 208) * (int8_t)b[192 + e / 16] * q;
}

typedef struct {
    int type, blck, bytes;
    double (*dec)(const uint8_t *, int);
    int half_at[2];              /* byte offsets of f16 fields (-1: none) */
} qtype;

static const qtype k_q[] = {
    {SL_TYPE_Q4_0, 32, 18, dec_q4_0, {0, -1}},
    {SL_TYPE_Q8_0, 32, 34, dec_q8_0, {0, -1}},
    {SL_TYPE_Q4_K, 256, 144, dec_q4_k, {0, 2}},
    {SL_TYPE_Q5_K, 256, 176, dec_q5_k, {0, 2}},
    {SL_TYPE_Q6_K, 256, 210, dec_q6_k, {208, -1}},
};
#define N_Q ((int)(sizeof k_q / sizeof k_q[0]))

/* Random blocks: random quant/scale bytes; f16 fields either any finite half (wide = true: subnormals
 * to 65504, both signs) or exponents in [-3, 3] (for dot products). */
static void fill_blocks(tk_rng *r, const qtype *t, uint8_t *dst, int nblocks, bool wide)
{
    tk_bytes(r, dst, (size_t)nblocks * t->bytes);
    for (int i = 0; i < nblocks; i++)
        for (int k = 0; k < 2; k++) {
            if (t->half_at[k] < 0) continue;
            uint16_t h = wide ? tk_finite_half(r) : tk_half_in(r, -3, 3);
            dst[(size_t)i * t->bytes + t->half_at[k]] = (uint8_t)h;
            dst[(size_t)i * t->bytes + t->half_at[k] + 1] = (uint8_t)(h >> 8);
        }
}

Test(dequant, bit_exact_against_bit_level_decoder)
{
    tk_rng r = {21};
    enum { NB = 64 };
    for (int ti = 0; ti < N_Q; ti++) {
        const qtype *t = &k_q[ti];
        const sl_type_info *info = sl_type_get(t->type);
        cr_assert_not_null(info);
        uint8_t *blk = malloc((size_t)NB * t->bytes);
        float *out = malloc(sizeof(float) * NB * t->blck);
        int bad = 0;
        for (int rep = 0; rep < 8; rep++) {
            fill_blocks(&r, t, blk, NB, true);
            info->dequant(blk, out, (int64_t)NB * t->blck);
            for (int i = 0; i < NB; i++)
                for (int e = 0; e < t->blck; e++) {
                    const float want = (float)t->dec(blk + (size_t)i * t->bytes, e);
                    const float got = out[i * t->blck + e];
                    if (tk_fbits(want) != tk_fbits(got) && bad++ < 5)
                        cr_log_error("%s block %d elem %d: want %a got %a", info->name, i, e, want, got);
                }
        }
        free(blk);
        free(out);
        cr_assert_eq(bad, 0, "%s: %d values differ from the bit-level decoder", info->name, bad);
    }
}

/* ---- dot products ------------------------------------------------------------------------------
 * Reference: the double sum of w[i]*x[i] with w = the kernel's own dequantized values (so this
 * tests the dot's arithmetic and element order, not the decoding, tested above).  Bound: any f32
 * evaluation order of n products and n-1 additions satisfies |err| <= gamma_n * sum|w*x|,
 * gamma_n = n*u/(1-n*u), u = 2^-24 (Higham, Accuracy and Stability, 3.1); the double reference
 * adds a negligible n*2^-53.  A wrong element pairing gives an error of order sum|w*x|/sqrt(n),
 * far above the bound for the sizes used here. */
static void check_dot(const sl_type_info *t, const void *w, const float *x, int64_t n)
{
    float *wf = malloc(sizeof(float) * (size_t)n);
    t->dequant(w, wf, n);
    double ref = 0, mag = 0;
    for (int64_t i = 0; i < n; i++) {
        ref += (double)wf[i] * x[i];
        mag += fabs((double)wf[i] * x[i]);
    }
    const double g = (double)n * 0x1p-24 / (1 - (double)n * 0x1p-24);
    const double got = t->dot(w, x, n);
    cr_assert(fabs(got - ref) <= g * mag + 1e-300,
              "%s n=%lld: dot %.9g ref %.9g |err| %.3g > bound %.3g", t->name, (long long)n, got, ref,
              fabs(got - ref), g * mag);
    /* unit vectors pick single elements exactly (all other products are exact zeros) */
    float *e = calloc((size_t)n, sizeof(float));
    for (int k = 0; k < 7; k++) {
        int64_t j = (k * 977 + 13) % n;
        e[j] = 1.0f;
        const float pick = t->dot(w, e, n);
        cr_assert(tk_fbits(pick) == tk_fbits(wf[j]) || (pick == 0 && wf[j] == 0),
                  "%s: dot with e_%lld = %a, element is %a", t->name, (long long)j, pick, wf[j]);
        e[j] = 0.0f;
    }
    free(e);
    free(wf);
}

Test(dot, quantized_types_against_double_sum)
{
    tk_rng r = {31};
    for (int ti = 0; ti < N_Q; ti++) {
        const qtype *t = &k_q[ti];
        const sl_type_info *info = sl_type_get(t->type);
        const int nbs[] = {1, 2, 3, 16, 37};
        for (int k = 0; k < 5; k++) {
            const int nb = nbs[k];
            const int64_t n = (int64_t)nb * t->blck;
            uint8_t *w = malloc((size_t)nb * t->bytes);
            float *x = malloc(sizeof(float) * (size_t)n);
            fill_blocks(&r, t, w, nb, false);
            for (int64_t i = 0; i < n; i++) x[i] = (float)tk_uniform(&r, -2, 2);
            check_dot(info, w, x, n);
            free(w);
            free(x);
        }
    }
}

Test(dot, float_types_any_length)
{
    tk_rng r = {32};
    const int types[] = {SL_TYPE_F32, SL_TYPE_F16, SL_TYPE_BF16};
    const int64_t lens[] = {1, 7, 15, 16, 17, 255, 256, 257, 1000, 4099};
    for (int ti = 0; ti < 3; ti++) {
        const sl_type_info *info = sl_type_get(types[ti]);
        for (int k = 0; k < 10; k++) {
            const int64_t n = lens[k];
            float *src = malloc(sizeof(float) * (size_t)n), *x = malloc(sizeof(float) * (size_t)n);
            void *w = malloc(4 * (size_t)n);
            for (int64_t i = 0; i < n; i++) {
                src[i] = (float)tk_gauss(&r);
                x[i] = (float)tk_uniform(&r, -2, 2);
            }
            info->quantize(src, w, n);
            check_dot(info, w, x, n);
            free(src);
            free(x);
            free(w);
        }
    }
}
