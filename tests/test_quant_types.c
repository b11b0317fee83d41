/* tests/test_quant_types.c — the low-bit types Q2_K, Q3_K, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, MXFP4:
 * dequantizers, exact-path dots, the fast path's activation quantizer and integer dots, and every
 * SIMD path against the portable reference.
 *
 * References:
 *   - bit-level decoders written here from the format definitions (byte offsets, not the kernels'
 *     structs), returning each element's exact value in double.  Every value these formats define
 *     is exact in double, and ggml's f32 sequence has exact products and at most one rounding (the
 *     final add/subtract of Q4_1, Q5_1, Q2_K), so (float)exact is ggml's value: the kernels must match
 *     bit for bit, on random blocks (random bytes, finite random f16 fields) and on every tensor of
 *     the micro-llama files llama-quantize wrote in these types (which also hold Q4_K/Q5_K/Q6_K/F32
 *     tensors: decoded here too);
 *   - the IQ4 grid (kvalues) against the F16 weights the IQ4_NL/IQ4_XS files were quantized from;
 *   - the reference quantizers (Q2_K, Q3_K, IQ4_NL, IQ4_XS) against llama-quantize's bytes, re-quantizing
 *     the F16 source tensors;
 *   - integer dots against a float64 sum over dequantized weights and activations;
 *   - SIMD paths against the portable reference: same float bits.
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

#include "kernels/ops.h"
#include "kernels/simd.h"
#include "kernels/types.h"
#include "loader/gguf.h"
#include "test_kernels_util.h"

/* The IQ4_NL / IQ4_XS levels, from the format definition (ggml-common.h kvalues_iq4nl). */
static const int k_iq4[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };

/* ---- bit-level decoders ------------------------------------------------------------------------ */

static double le_half(const uint8_t *p) { return tk_half_value((uint16_t)(p[0] | (p[1] << 8))); }
static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* Legacy 32-blocks: nibble of element e (low nibbles are elements 0..15). */
static int nib32(const uint8_t *qs, int e) { return e < 16 ? qs[e] & 15 : qs[e - 16] >> 4; }

static double dec_q4_1(const uint8_t *b, int e)            /* d@0 m@2 qs@4[16] */
{
    return le_half(b) * nib32(b + 4, e) + le_half(b + 2);
}

static double dec_q5_0(const uint8_t *b, int e)            /* d@0 qh@2[4] qs@6[16] */
{
    const int q = nib32(b + 6, e) | (int)((le32(b + 2) >> e) & 1) << 4;
    return le_half(b) * (q - 16);
}

static double dec_q5_1(const uint8_t *b, int e)            /* d@0 m@2 qh@4[4] qs@8[16] */
{
    const int q = nib32(b + 8, e) | (int)((le32(b + 4) >> e) & 1) << 4;
    return le_half(b) * q + le_half(b + 2);
}

static double dec_iq4_nl(const uint8_t *b, int e)          /* d@0 qs@2[16] */
{
    return le_half(b) * k_iq4[nib32(b + 2, e)];
}

/* MXFP4 (ggml-common.h block_mxfp4, kvalues_mxfp4; ggml-impl.h ggml_e8m0_to_fp32_half): the E2M1
 * values doubled, times 2^(e-128) for the exponent byte e.  Values past the f32 range (e >= 253
 * with large kvalues) are returned as ±inf, which is what the f32 product rounds to. */
static const int k_mx[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };
static double dec_mxfp4(const uint8_t *b, int e)           /* e@0 qs@1[16] */
{
    const double v = ldexp(k_mx[nib32(b + 1, e)], b[0] - 128);
    return fabs(v) > 0x1.fffffep127 ? copysign(INFINITY, v) : v;
}

static double dec_iq4_xs(const uint8_t *b, int e)          /* d@0 scales_h@2 scales_l@4[4] qs@8[128] */
{
    const int ib = e / 32, r = e % 32;
    const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 15) | (((b[2] | b[3] << 8) >> (2 * ib)) & 3) << 4;
    return le_half(b) * (ls - 32) * k_iq4[nib32(b + 8 + 16 * ib, r)];
}

/* K-quants with 2-bit fields: element e = 128h + 32j + l takes bits 2j..2j+1 of qs[32h + l]. */
static int two_bits(const uint8_t *qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3; }

static double dec_q2_k(const uint8_t *b, int e)            /* scales@0[16] qs@16[64] d@80 dmin@82 */
{
    const int sc = b[e / 16];
    return le_half(b + 80) * (sc & 15) * two_bits(b + 16, e) - le_half(b + 82) * (sc >> 4);
}

static double dec_q3_k(const uint8_t *b, int e)            /* hmask@0[32] qs@32[64] scales@96[12] d@108 */
{
    const int j = e / 16;
    const int sc = ((b[96 + j % 8] >> (4 * (j / 8))) & 15) | ((b[96 + 8 + j % 4] >> (2 * (j / 4))) & 3) << 4;
    const int hbit = (b[e % 32] >> (e / 32)) & 1;         /* bit 4h + j' of hmask[l], e / 32 = 4h + j' */
    return le_half(b + 108) * (sc - 32) * (two_bits(b + 32, e) - (hbit ? 0 : 4));
}

static int k_scale6(const uint8_t *s, int j, int what)     /* Q4_K/Q5_K 6-bit scale (0) or min (1) */
{
    if (j < 4) return s[j + 4 * what] & 63;
    const int low4 = what ? s[j + 4] >> 4 : s[j + 4] & 15;
    return low4 | (s[j - 4 + 4 * what] >> 6) << 4;
}

static double dec_q4_k(const uint8_t *b, int e)            /* d@0 dmin@2 scales@4[12] qs@16[128] */
{
    const int g = e / 64, r = e % 64, j = e / 32;
    const uint8_t byte = b[16 + 32 * g + r % 32];
    return le_half(b) * k_scale6(b + 4, j, 0) * (r < 32 ? byte & 15 : byte >> 4) - le_half(b + 2) * k_scale6(b + 4, j, 1);
}

static double dec_q5_k(const uint8_t *b, int e)            /* d@0 dmin@2 scales@4[12] qh@16[32] qs@48[128] */
{
    const int g = e / 64, r = e % 64, j = e / 32;
    const uint8_t byte = b[48 + 32 * g + r % 32];
    const int q = (r < 32 ? byte & 15 : byte >> 4) + 16 * ((b[16 + r % 32] >> (2 * g + (r >= 32))) & 1);
    return le_half(b) * k_scale6(b + 4, j, 0) * q - le_half(b + 2) * k_scale6(b + 4, j, 1);
}

static double dec_q6_k(const uint8_t *b, int e)            /* ql@0[128] qh@128[64] scales@192[16] d@208 */
{
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const uint8_t lo = b[64 * h + 32 * (k & 1) + l];
    const int q = ((k < 2 ? lo & 15 : lo >> 4) | ((b[128 + 32 * h + l] >> (2 * k)) & 3) << 4) - 32;
    return le_half(b + 208) * (int8_t)b[192 + e / 16] * q;
}

static double dec_f32(const uint8_t *b, int e) { (void)e; float f; memcpy(&f, b, 4); return f; }

typedef struct qtype {
    int type, blck, bytes;
    double (*dec)(const uint8_t *, int);
    int half_at[2];          /* byte offsets of the f16 fields (-1: none); [1] is a min/offset for Q4_1/Q5_1/Q2_K */
    int act;                 /* activation blocks: 0 = Q8_0, 1 = Q8_1, 2 = Q8_K */
} qtype;

static const qtype k_new[] = {
    { SL_TYPE_Q4_1, 32, 20, dec_q4_1, { 0, 2 }, 1 },      { SL_TYPE_Q5_0, 32, 22, dec_q5_0, { 0, -1 }, 0 },
    { SL_TYPE_Q5_1, 32, 24, dec_q5_1, { 0, 2 }, 1 },      { SL_TYPE_IQ4_NL, 32, 18, dec_iq4_nl, { 0, -1 }, 0 },
    { SL_TYPE_Q2_K, 256, 84, dec_q2_k, { 80, 82 }, 2 },   { SL_TYPE_Q3_K, 256, 110, dec_q3_k, { 108, -1 }, 2 },
    { SL_TYPE_IQ4_XS, 256, 136, dec_iq4_xs, { 0, -1 }, 2 }, { SL_TYPE_MXFP4, 32, 17, dec_mxfp4, { -1, -1 }, 0 },
};
#define N_NEW ((int)(sizeof k_new / sizeof k_new[0]))

static const qtype k_other[] = {     /* the other types these files hold */
    { SL_TYPE_Q4_K, 256, 144, dec_q4_k, { 0, 2 }, 2 },    { SL_TYPE_Q5_K, 256, 176, dec_q5_k, { 0, 2 }, 2 },
    { SL_TYPE_Q6_K, 256, 210, dec_q6_k, { 208, -1 }, 2 }, { SL_TYPE_F32, 1, 4, dec_f32, { -1, -1 }, 0 },
};

static const qtype *qtype_of(int type)
{
    for (int i = 0; i < N_NEW; i++) if (k_new[i].type == type) return &k_new[i];
    for (int i = 0; i < 4; i++) if (k_other[i].type == type) return &k_other[i];
    return NULL;
}

/* Random blocks whose f16 scales have exponents in [emin, emax] (emin < -20: any finite half);
 * MXFP4's exponent byte likewise: 2^(e-128) with e - 128 in [emin, emax], or any byte 0..255. */
static void fill_blocks(tk_rng *r, const qtype *t, uint8_t *dst, int nblocks, int emin, int emax)
{
    tk_bytes(r, dst, (size_t)nblocks * t->bytes);
    if (t->type == SL_TYPE_MXFP4 && emin >= -20)
        for (int i = 0; i < nblocks; i++) dst[(size_t)i * t->bytes] = (uint8_t)(128 + emin + (int)(tk_next(r) % (uint64_t)(emax - emin + 1)));
    for (int i = 0; i < nblocks; i++)
        for (int k = 0; k < 2; k++) {
            if (t->half_at[k] < 0) continue;
            const uint16_t h = emin < -20 ? tk_finite_half(r) : tk_half_in(r, emin, emax);
            dst[(size_t)i * t->bytes + t->half_at[k]] = (uint8_t)h;
            dst[(size_t)i * t->bytes + t->half_at[k] + 1] = (uint8_t)(h >> 8);
        }
}

/* Number of elements of nb blocks whose kernel value differs from (float)decoder value. */
static long count_mismatches(const qtype *t, const uint8_t *blk, int64_t nb, const float *got, const char *what)
{
    long bad = 0;
    for (int64_t i = 0; i < nb; i++)
        for (int e = 0; e < t->blck; e++) {
            const float want = (float)t->dec(blk + (size_t)i * t->bytes, e), g = got[i * t->blck + e];
            if (tk_fbits(want) != tk_fbits(g) && bad++ < 5)
                cr_log_error("%s %s block %lld elem %d: want %a got %a", what, sl_type_name(t->type), (long long)i, e, want, g);
        }
    return bad;
}

Test(quant_types, dequant_bit_exact_on_random_blocks)
{
    tk_rng r = { 1601 };
    enum { NB = 64 };
    for (int ti = 0; ti < N_NEW; ti++) {
        const qtype *t = &k_new[ti];
        const sl_type_info *info = sl_type_get(t->type);
        cr_assert(info && info->dequant && info->dot, "%s has no kernels", sl_type_name(t->type));
        cr_assert_eq(info->blck, t->blck);
        cr_assert_eq(info->bytes, t->bytes);
        uint8_t *blk = malloc((size_t)NB * t->bytes);
        float *out = malloc(sizeof(float) * NB * t->blck);
        long bad = 0;
        for (int rep = 0; rep < 16; rep++) {
            fill_blocks(&r, t, blk, NB, rep % 2 ? -3 : -99, 3);   /* any finite half, or moderate ones */
            info->dequant(blk, out, (int64_t)NB * t->blck);
            bad += count_mismatches(t, blk, NB, out, "random");
        }
        cr_assert_eq(bad, 0, "%s: %ld values differ from the bit-level decoder", info->name, bad);
        free(blk);
        free(out);
    }
}

/* ---- the micro-llama files ------------------------------------------------------------------- */

typedef struct { sl_gguf *g; int fd; } model;

static model open_model(const char *file)
{
    char path[512], err[SL_ERRLEN];
    snprintf(path, sizeof path, SL_SHARED_DIR "/models/%s", file);
    model m = { NULL, -1 };
    cr_assert_eq(sl_gguf_open(path, &m.g, err, sizeof err), 0, "open %s: %s", path, err);
    m.fd = open(path, O_RDONLY | O_CLOEXEC);
    cr_assert_geq(m.fd, 0, "open %s: %s", path, strerror(errno));
    return m;
}

static int64_t n_elems(const sl_gguf_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->n_dims; d++) n *= t->ne[d];
    return n;
}

static uint8_t *read_tensor(const model *m, const sl_gguf_tensor *t)
{
    cr_assert_eq(sl_row_bytes(t->type, n_elems(t)), t->nbytes, "%.*s: size", (int)t->name.len, t->name.ptr);
    uint8_t *buf = malloc(t->nbytes);
    cr_assert_eq(pread(m->fd, buf, t->nbytes, (off_t)t->offset), (ssize_t)t->nbytes);
    return buf;
}

static const char *k_files[] = { "Q2_K", "Q3_K_S", "Q3_K_M", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "IQ4_XS" };

/* Every tensor of every file: dequantized bit-identically to the decoder; the exact path's dot of
 * the first and last row with random x within gamma_n * sum|w*x| of the double sum. */
Test(quant_types, dequant_bit_exact_on_every_tensor_of_the_files)
{
    int per_type[SL_TYPE_COUNT] = { 0 };
    for (size_t f = 0; f < sizeof k_files / sizeof *k_files; f++) {
        char file[64];
        snprintf(file, sizeof file, "micro-llama.%s.gguf", k_files[f]);
        model m = open_model(file);
        for (int64_t i = 0; i < sl_gguf_n_tensors(m.g); i++) {
            const sl_gguf_tensor *t = sl_gguf_tensor_at(m.g, i);
            const qtype *q = qtype_of(t->type);
            cr_assert_not_null(q, "%s: %.*s has type %s, not covered here", file, (int)t->name.len, t->name.ptr,
                               sl_type_name(t->type));
            const int64_t n = n_elems(t);
            uint8_t *raw = read_tensor(&m, t);
            float *v = malloc(sizeof(float) * (size_t)n);
            sl_type_get(t->type)->dequant(raw, v, n);
            char what[320];
            snprintf(what, sizeof what, "%s %.*s", file, (int)t->name.len, t->name.ptr);
            cr_assert_eq(count_mismatches(q, raw, n / q->blck, v, what), 0, "%s: values differ from the decoder", what);
            if (t->n_dims == 2) {
                const int64_t cols = t->ne[0], rows = t->ne[1];
                const size_t rb = sl_row_bytes(t->type, cols);
                tk_rng r = { (uint64_t)i + 77 };
                float *x = malloc(sizeof(float) * (size_t)cols);
                for (int64_t k = 0; k < cols; k++) x[k] = (float)tk_uniform(&r, -1, 1);
                for (int64_t row = 0; row < rows; row += rows - 1) {
                    double ref = 0, mag = 0;
                    for (int64_t k = 0; k < cols; k++) {
                        ref += (double)v[row * cols + k] * x[k];
                        mag += fabs((double)v[row * cols + k] * x[k]);
                    }
                    const double g = (double)cols * 0x1p-24 / (1 - (double)cols * 0x1p-24);
                    const float d = sl_type_get(t->type)->dot(raw + row * rb, x, cols);
                    cr_assert_leq(fabs(d - ref), g * mag, "%s row %lld: dot %.9g ref %.9g", what, (long long)row, d, ref);
                }
                free(x);
            }
            per_type[t->type]++;
            free(raw);
            free(v);
        }
        sl_gguf_close(m.g);
        close(m.fd);
    }
    for (int ti = 0; ti < N_NEW; ti++) {
        if (k_new[ti].type == SL_TYPE_MXFP4) continue;   /* not in micro-llama files: tests/test_mxfp4.c reads gpt-oss's */
        cr_assert_gt(per_type[k_new[ti].type], 0, "no %s tensor in the files", sl_type_name(k_new[ti].type));
        fprintf(stderr, "quant_types: %2d %-6s tensors bit-identical to the decoder\n", per_type[k_new[ti].type],
                sl_type_name(k_new[ti].type));
    }
}

/* The IQ4 grid against the weights it was fitted to: IQ4_NL/IQ4_XS tensors were quantized from
 * micro-llama.F16.gguf, so for the elements stored with level k, the F16 value divided by the
 * block (sub-block) scale clusters around kvalues[k].  llama-quantize picks the nearest level for
 * each element (after its scale search), so the mean of x/scale over level k lies inside k's
 * rounding cell, i.e. within half the gap to each neighbour; a wrong table entry (even by 2) moves
 * the cluster's mean off by about that much: measured |mean - kvalues[k]| <= 0.8 (largest at the two
 * outer levels, whose cells are open), so the bound is 1.5. */
static void check_grid(const char *file)
{
    model q = open_model(file), f = open_model("micro-llama.F16.gguf");
    double sum[16] = { 0 }, cnt[16] = { 0 };
    for (int64_t i = 0; i < sl_gguf_n_tensors(q.g); i++) {
        const sl_gguf_tensor *tq = sl_gguf_tensor_at(q.g, i);
        if (tq->type != SL_TYPE_IQ4_NL && tq->type != SL_TYPE_IQ4_XS) continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)tq->name.len, tq->name.ptr);
        const sl_gguf_tensor *tf = sl_gguf_find_tensor(f.g, name);
        cr_assert(tf && tf->type == SL_TYPE_F16);
        const int64_t n = n_elems(tq);
        uint8_t *raw = read_tensor(&q, tq), *src = read_tensor(&f, tf);
        float *x = malloc(sizeof(float) * (size_t)n);
        sl_dequant_f16(src, x, n);
        const qtype *t = qtype_of(tq->type);
        for (int64_t b = 0; b < n / t->blck; b++) {
            const uint8_t *blk = raw + b * t->bytes;
            for (int e = 0; e < t->blck; e++) {
                /* the element's level and scale, from the decoder: value = scale * kvalues[level] */
                const int sub = t->type == SL_TYPE_IQ4_XS ? e / 32 : 0, r = t->type == SL_TYPE_IQ4_XS ? e % 32 : e;
                const int level = nib32(blk + (t->type == SL_TYPE_IQ4_XS ? 8 + 16 * sub : 2), r);
                const double scale = t->dec(blk, e) / k_iq4[level];
                if (fabs(scale) < 1e-12) continue;
                sum[level] += x[b * t->blck + e] / scale;
                cnt[level]++;
            }
        }
        free(raw);
        free(src);
        free(x);
    }
    for (int k = 0; k < 16; k++) {
        cr_assert_gt(cnt[k], 1000, "%s: level %d used %g times", file, k, cnt[k]);
        const double mean = sum[k] / cnt[k];
        const double lo = k > 0 ? (k_iq4[k - 1] + k_iq4[k]) / 2.0 : -1e9, hi = k < 15 ? (k_iq4[k] + k_iq4[k + 1]) / 2.0 : 1e9;
        cr_assert(mean > lo && mean < hi, "%s: level %d (%d): mean x/scale %.3f outside its cell (%.1f, %.1f)", file, k,
                  k_iq4[k], mean, lo, hi);
        cr_assert_leq(fabs(mean - k_iq4[k]), 1.5, "%s: level %d (%d): mean x/scale %.3f", file, k, k_iq4[k], mean);
        if (k % 5 == 0) fprintf(stderr, "%s grid level %2d: %4d, mean x/scale %8.3f over %.0f elements\n", file, k, k_iq4[k], mean, cnt[k]);
    }
    sl_gguf_close(q.g); close(q.fd);
    sl_gguf_close(f.g); close(f.fd);
}

Test(quant_types, iq4_grid_matches_the_source_weights)
{
    check_grid("micro-llama.IQ4_NL.gguf");
    check_grid("micro-llama.IQ4_XS.gguf");
}

/* The reference quantizers against llama-quantize: every tensor of `type` in `file` was quantized
 * by llama-quantize (no importance matrix) from micro-llama.F16.gguf; re-quantizing the F16 values
 * must give the same bytes (the quantizers follow ggml's reference algorithms with the same f32
 * operations; kernels/ forbids FMA contraction). */
static void check_requantize(const char *file, int type)
{
    model q = open_model(file), f = open_model("micro-llama.F16.gguf");
    const sl_type_info *ti = sl_type_get(type);
    cr_assert_not_null(ti->quantize, "%s has no quantizer", ti->name);
    int tensors = 0;
    for (int64_t i = 0; i < sl_gguf_n_tensors(q.g); i++) {
        const sl_gguf_tensor *tq = sl_gguf_tensor_at(q.g, i);
        if (tq->type != type) continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)tq->name.len, tq->name.ptr);
        const sl_gguf_tensor *tf = sl_gguf_find_tensor(f.g, name);
        cr_assert(tf && tf->type == SL_TYPE_F16);
        const int64_t n = n_elems(tq);
        uint8_t *theirs = read_tensor(&q, tq), *src16 = read_tensor(&f, tf), *mine = malloc(tq->nbytes);
        float *x = malloc(sizeof(float) * (size_t)n);
        sl_dequant_f16(src16, x, n);
        ti->quantize(x, mine, n);
        int64_t differ = 0;
        for (int64_t b = 0; b < n / ti->blck; b++)
            differ += memcmp(mine + b * ti->bytes, theirs + b * ti->bytes, (size_t)ti->bytes) != 0;
        cr_assert_eq(differ, 0, "%s %s: %lld of %lld blocks differ from llama-quantize's", file, name, (long long)differ,
                     (long long)(n / ti->blck));
        free(theirs); free(src16); free(mine); free(x);
        tensors++;
    }
    cr_assert_gt(tensors, 0, "no %s tensor in %s", ti->name, file);
    fprintf(stderr, "quant_types: %s quantizer reproduces llama-quantize's bytes on %d tensors of %s\n", ti->name, tensors, file);
    sl_gguf_close(q.g); close(q.fd);
    sl_gguf_close(f.g); close(f.fd);
}

Test(quant_types, reference_quantizers_reproduce_llama_quantize)
{
    check_requantize("micro-llama.Q2_K.gguf", SL_TYPE_Q2_K);
    check_requantize("micro-llama.Q3_K_S.gguf", SL_TYPE_Q3_K);
    check_requantize("micro-llama.Q3_K_M.gguf", SL_TYPE_Q3_K);
    check_requantize("micro-llama.Q2_K.gguf", SL_TYPE_Q3_K);
    check_requantize("micro-llama.IQ4_XS.gguf", SL_TYPE_IQ4_XS);
    check_requantize("micro-llama.IQ4_NL.gguf", SL_TYPE_IQ4_NL);
}

/* ---- fast path: activation quantizer and integer dots ------------------------------------------ */

static const sl_kernel_set *portable(void) { return sl_kernels_for(SL_KPATH_PORTABLE); }


static sl_actq_fn actq_of(const sl_kernel_set *ks, const qtype *t)
{
    return t->act == 0 ? ks->quantize_q8_0 : t->act == 1 ? ks->quantize_q8_1 : ks->quantize_q8_k;
}

static size_t act_bytes(const qtype *t, int64_t n)
{
    return t->act == 2 ? (size_t)(n / 256) * SL_Q8_K_BYTES : (size_t)(n / 32) * (t->act ? SL_Q8_1_BYTES : SL_Q8_0_BYTES);
}

/* Gaussian values, each block of 32 scaled by 2^e, e in [-10, 6], a few exact zeros, and one
 * all-zero 256-block when n allows (the quantizers' d = 0 case). */
static void fill_acts(tk_rng *r, float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i += 32) {
        const double sc = ldexp(1.0, (int)(tk_next(r) % 17) - 10);
        for (int j = 0; j < 32; j++) x[i + j] = (float)(tk_gauss(r) * sc);
        x[i + (int64_t)(tk_next(r) % 32)] = 0;
    }
    if (n >= 512) memset(x + 256, 0, 256 * sizeof *x);
}

Test(quant_types, q8_1_activations_follow_their_definition)
{
    tk_rng r = { 1602 };
    const int64_t n = 2048;
    float *x = malloc(n * sizeof *x);
    uint8_t *y = malloc((size_t)(n / 32) * SL_Q8_1_BYTES), *y0 = malloc((size_t)(n / 32) * SL_Q8_0_BYTES);
    for (int rep = 0; rep < 4; rep++) {
        fill_acts(&r, x, n);
        if (rep == 3) x[100] = NAN;
        sl_quantize_act_q8_1(x, y, n);
        sl_quantize_act_q8_0(x, y0, n);
        for (int64_t b = 0; b < n / 32; b++) {
            const uint8_t *blk = y + b * SL_Q8_1_BYTES, *b0 = y0 + b * SL_Q8_0_BYTES;
            /* d and q are Q8_0's */
            cr_assert_eq(memcmp(blk, b0, 2), 0, "block %lld d", (long long)b);
            cr_assert_eq(memcmp(blk + 4, b0 + 2, 32), 0, "block %lld q", (long long)b);
            double amax = 0;
            int sum = 0;
            for (int j = 0; j < 32; j++) {
                /* a plain compare: gcc 12 for aarch64 crashes (internal compiler error in
                 * vect_transform_reduction) vectorizing an fmax() reduction over doubles */
                const double ax = fabs(x[b * 32 + j]);
                amax = ax > amax ? ax : amax;
                sum += (int8_t)blk[4 + j];
            }
            const double s = le_half(blk + 2);
            if (rep == 3 && b == 100 / 32) {
                cr_assert(isnan(s) && isnan(le_half(blk)), "non-finite block: d, s NaN");
                continue;
            }
            /* s = f16((amax/127) * sum): f32 d (rel. 2^-24), f32 product, f16 rounding (2^-11) */
            const double want = amax / 127 * sum;
            cr_assert_leq(fabs(s - want), fabs(want) * (0x1p-11 + 0x1p-22) + 0x1p-25, "block %lld s %g want %g", (long long)b, s, want);
        }
    }
    free(x); free(y); free(y0);
}

/* Dequantized activation element e. */
static double act_value(const qtype *t, const uint8_t *y, int64_t e)
{
    if (t->act == 2) {
        const uint8_t *b = y + (e / 256) * SL_Q8_K_BYTES;
        float d;
        memcpy(&d, b, 4);
        return (double)d * (int8_t)b[4 + e % 256];
    }
    const uint8_t *b = y + (e / 32) * (t->act ? SL_Q8_1_BYTES : SL_Q8_0_BYTES);
    return le_half(b) * (int8_t)b[(t->act ? 4 : 2) + e % 32];
}

/* Reference dot in double and its error scale.  Types with a min/offset field are split into the
 * scale part (offset zeroed) and the offset part (d zeroed), each exact in f32, because the kernels
 * round the two separately.  Q4_1/Q5_1's offset term uses the activation block's s = f16(d*sum)
 * in place of sum(d16 * q): that costs up to 2^-10 |m * s| per block, added to *extra. */
static void ref_dot(const qtype *t, const uint8_t *w, const uint8_t *y, int64_t n, double *dot, double *mag, double *extra)
{
    const sl_type_info *ti = sl_type_get(t->type);
    const int64_t nb = n / t->blck;
    uint8_t *tmp = malloc((size_t)nb * t->bytes);
    float *a = malloc(n * sizeof *a), *m = calloc((size_t)n, sizeof *m);
    memcpy(tmp, w, (size_t)nb * t->bytes);
    if (t->half_at[1] >= 0)
        for (int64_t i = 0; i < nb; i++) memset(tmp + i * t->bytes + t->half_at[1], 0, 2);
    ti->dequant(tmp, a, n);
    if (t->half_at[1] >= 0) {
        memcpy(tmp, w, (size_t)nb * t->bytes);
        for (int64_t i = 0; i < nb; i++) memset(tmp + i * t->bytes + t->half_at[0], 0, 2);
        ti->dequant(tmp, m, n);
    }
    double s = 0, b = 0, x = 0;
    for (int64_t e = 0; e < n; e++) {
        const double v = act_value(t, y, e);
        s += ((double)a[e] + m[e]) * v;
        b += (fabs(a[e]) + fabs(m[e])) * fabs(v);
    }
    if (t->act == 1)
        for (int64_t i = 0; i < nb; i++) {
            const double mi = le_half(w + i * t->bytes + 2), si = le_half(y + i * SL_Q8_1_BYTES + 2);
            x += 0x1p-10 * fabs(mi * si) * (1 + 0x1p-10);
            /* and the activation's own offset sum, as the kernel sees it */
            double exact = 0;
            for (int e = 0; e < 32; e++) exact += mi * act_value(t, y, i * 32 + e);
            s += mi * si - exact;
        }
    *dot = s;
    *mag = b;
    *extra = x;
    free(tmp); free(a); free(m);
}

Test(quant_types, portable_integer_dots_against_float64)
{
    tk_rng r = { 1603 };
    for (int ti = 0; ti < N_NEW; ti++) {
        const qtype *t = &k_new[ti];
        const int nbs[] = { 1, 2, 3, 8, 17, 40 };
        for (int k = 0; k < 6; k++) {
            const int64_t n = (int64_t)nbs[k] * t->blck;
            uint8_t *w = malloc((size_t)nbs[k] * t->bytes), *y = malloc(act_bytes(t, n));
            float *x = malloc(n * sizeof *x);
            fill_blocks(&r, t, w, nbs[k], -3, 3);
            fill_acts(&r, x, n);
            actq_of(portable(), t)(x, y, n);
            double want, mag, extra;
            ref_dot(t, w, y, n, &want, &mag, &extra);
            const float got = sl_kernels_qdot(portable(), t->type)(w, y, n);
            /* canonical steps: per block a scale product, int->float conversions, a product and a
             * subtraction, one add into the accumulators, 4 more in the final reduction and the
             * offset add: at most (blocks + 9) relative 2^-24 errors of terms bounded by mag */
            const double tol = (double)(nbs[k] + 9) * 0x1p-23 * mag + extra;
            cr_assert_leq(fabs(got - want), tol, "%s x %d blocks: got %.9g want %.9g (tol %g)", sl_type_name(t->type),
                          nbs[k], got, want, tol);
            free(w); free(x); free(y);
        }
    }
}

/* Every SIMD path this CPU has returns the portable bits, on random blocks with wide scales
 * (exponents -14..15) and moderate ones, over block counts covering odd tails. */
/* The AVX-512 low-bit single dots are built twice (kernels/simd_avx512_quants.c): with GFNI, which
 * runs where the CPU has it, and without.  The test of them runs once per build the CPU can run,
 * the second time with the plain build forced. */
static int avx512_builds(void) { return sl_avx512_quants_has_gfni() ? 2 : 1; }

static void every_path_once(int build);
Test(quant_types, every_path_bit_identical_to_portable)
{
    for (int b = 0; b < avx512_builds(); b++) every_path_once(b);
    sl_avx512_quants_force_plain(false);
}

static void every_path_once(int build)
{
    sl_avx512_quants_force_plain(build == 1);
    tk_rng r = { 1604 };
    int checked = 0;
    for (int ti = 0; ti < N_NEW; ti++) {
        const qtype *t = &k_new[ti];
        const int nbs[] = { 1, 2, 3, 7, 8, 16, 37, 64 };
        for (int k = 0; k < 8; k++)
            for (int rep = 0; rep < 8; rep++) {
                const int64_t n = (int64_t)nbs[k] * t->blck;
                uint8_t *w = malloc((size_t)nbs[k] * t->bytes), *y = malloc(act_bytes(t, n)), *y2 = malloc(act_bytes(t, n));
                float *x = malloc(n * sizeof *x);
                fill_blocks(&r, t, w, nbs[k], rep == 0 ? -14 : -3, rep == 0 ? 15 : 3);
                fill_acts(&r, x, n);
                actq_of(portable(), t)(x, y, n);
                const float want = sl_kernels_qdot(portable(), t->type)(w, y, n);
                for (int p = 1; p < SL_KPATH_COUNT; p++) {
                    const sl_kernel_set *ks = sl_kernels_for(p);
                    if (!ks) continue;
                    actq_of(ks, t)(x, y2, n);
                    cr_assert_eq(memcmp(y, y2, act_bytes(t, n)), 0, "%s: activation bytes differ", ks->name);
                    if (!sl_kernels_qdot(ks, t->type) && (p == SL_KPATH_NEON || p == SL_KPATH_NEON_DOTPROD)) {
                        /* not every type has a NEON dot yet: sl_matmul runs the portable one */
                        if (k == 0 && rep == 0)
                            fprintf(stderr, "quant_types: %s has no %s dot (sl_matmul runs the portable one)\n", ks->name,
                                    sl_type_name(t->type));
                        continue;
                    }
                    cr_assert_not_null(sl_kernels_qdot(ks, t->type), "%s has no %s dot", ks->name, sl_type_name(t->type));
                    const float got = sl_kernels_qdot(ks, t->type)(w, y, n);
                    cr_assert_eq(tk_fbits(got), tk_fbits(want), "%s %s x %d blocks (rep %d): %a != portable %a", ks->name,
                                 sl_type_name(t->type), nbs[k], rep, got, want);
                    checked++;
                }
                free(w); free(x); free(y); free(y2);
            }
    }
    fprintf(stderr, "quant_types: %d SIMD integer dots bit-identical to portable (%s AVX-512 build)\n", checked,
            build ? "plain" : "default");
}

static sl_qdot4_fn qdot4_of(const sl_kernel_set *ks, int type)
{
    switch (type) {
    case SL_TYPE_Q5_0: return ks->dot4_q5_0_q8_0;
    case SL_TYPE_IQ4_NL: return ks->dot4_iq4_nl_q8_0;
    case SL_TYPE_Q2_K: return ks->dot4_q2_k_q8_k;
    case SL_TYPE_Q3_K: return ks->dot4_q3_k_q8_k;
    case SL_TYPE_IQ4_XS: return ks->dot4_iq4_xs_q8_k;
    case SL_TYPE_MXFP4: return ks->dot4_mxfp4_q8_0;
    default: return NULL;
    }
}

/* Every path's 4-vector dot gives each vector exactly the portable single dot's bits (random
 * blocks, wide and moderate scales, block counts with odd tails, vectors at a padded stride). */
Test(quant_types, dot4_bit_identical_to_single_dots)
{
    tk_rng r = { 1606 };
    int checked = 0, types_with_dot4 = 0;
    for (int ti = 0; ti < N_NEW; ti++) {
        const qtype *t = &k_new[ti];
        bool any = false;
        const int nbs[] = { 1, 2, 3, 7, 16, 37 };
        for (int k = 0; k < 6; k++)
            for (int rep = 0; rep < 4; rep++) {
                const int64_t n = (int64_t)nbs[k] * t->blck;
                const size_t ys = act_bytes(t, n) + 4 * (size_t)(rep + 1);   /* not the row size; keeps Q8_K's float d aligned */
                uint8_t *w = malloc((size_t)nbs[k] * t->bytes), *y = malloc(4 * ys);
                float *x = malloc(n * sizeof *x);
                fill_blocks(&r, t, w, nbs[k], rep == 0 ? -14 : -3, rep == 0 ? 15 : 3);
                for (int v = 0; v < 4; v++) {
                    fill_acts(&r, x, n);
                    actq_of(portable(), t)(x, y + v * ys, n);
                }
                for (int p = 0; p < SL_KPATH_COUNT; p++) {
                    const sl_kernel_set *ks = sl_kernels_for(p);
                    if (!ks || !qdot4_of(ks, t->type)) continue;
                    any = true;
                    float got[4];
                    qdot4_of(ks, t->type)(w, y, ys, n, got);
                    for (int v = 0; v < 4; v++) {
                        const float want = sl_kernels_qdot(portable(), t->type)(w, y + v * ys, n);
                        cr_assert_eq(tk_fbits(got[v]), tk_fbits(want), "%s dot4 %s x %d blocks (rep %d), vector %d: %a != %a",
                                     ks->name, sl_type_name(t->type), nbs[k], rep, v, got[v], want);
                    }
                    checked++;
                }
                free(w); free(x); free(y);
            }
        types_with_dot4 += any;
    }
    fprintf(stderr, "quant_types: %d 4-vector dots (%d types) bit-identical to portable single dots\n", checked, types_with_dot4);
}

/* Every path's rows form (the matvec of a decode step) gives each row exactly the portable single
 * dot's bits: block counts even and odd (odd: the single dot row by row), up to and past the
 * prepared form's 16384 elements, row counts odd and even, rows at a padded stride, wide and
 * moderate scales, and an infinite and a NaN block scale. */
Test(quant_types, dotr_bit_identical_to_single_dots)
{
    tk_rng r = { 1607 };
    int checked = 0;
    const int nbs[] = { 1, 2, 3, 8, 16, 37, 64, 448, 512, 513, 514 }, rowss[] = { 1, 2, 3, 5 };
    for (int ti = 0; ti < N_NEW; ti++) {
        const qtype *t = &k_new[ti];
        for (int k = 0; k < 11; k++)
            for (int rep = 0; rep < 3; rep++) {
                const int nrows = rowss[(k + rep) % 4];
                const int64_t n = (int64_t)nbs[k] * t->blck;
                const size_t rb = (size_t)nbs[k] * t->bytes + 2 * (size_t)rep;
                uint8_t *w = malloc(rb * nrows), *y = malloc(act_bytes(t, n));
                float *x = malloc(n * sizeof *x), got[5];
                for (int row = 0; row < nrows; row++)
                    fill_blocks(&r, t, w + row * rb, nbs[k], rep == 0 ? -14 : -3, rep == 0 ? 15 : 3);
                if (rep == 2 && t->half_at[0] >= 0) {   /* an infinite scale in row 0, a NaN one in the last row */
                    memcpy(w + (size_t)(nbs[k] / 2) * t->bytes + t->half_at[0], &(uint16_t){ 0x7c00 }, 2);
                    memcpy(w + (nrows - 1) * rb + t->half_at[0], &(uint16_t){ 0x7e01 }, 2);
                }
                fill_acts(&r, x, n);
                actq_of(portable(), t)(x, y, n);
                for (int p = 0; p < SL_KPATH_COUNT; p++) {
                    const sl_kernel_set *ks = sl_kernels_for(p);
                    if (!ks || !sl_kernels_qdotr(ks, t->type)) continue;
                    sl_kernels_qdotr(ks, t->type)(w, rb, y, n, nrows, got);
                    for (int row = 0; row < nrows; row++) {
                        const float want = sl_kernels_qdot(portable(), t->type)(w + row * rb, y, n);
                        cr_assert_eq(tk_fbits(got[row]), tk_fbits(want), "%s dotr %s x %d blocks (rep %d), row %d of %d: %a != %a",
                                     ks->name, sl_type_name(t->type), nbs[k], rep, row, nrows, got[row], want);
                    }
                    checked++;
                }
                free(w); free(x); free(y);
            }
    }
    fprintf(stderr, "quant_types: %d rows-form calls bit-identical to portable single dots\n", checked);
}

/* sl_matmul in fast mode returns the active path's integer dot of each (row, vector), whatever
 * the batch size and thread count; exact mode returns the reference f32 dot. */
Test(quant_types, matmul_fast_and_exact_modes)
{
    tk_rng r = { 1605 };
    const int64_t rows = 70, cols = 512;
    const int nb = 5;
    sl_pool *pool = sl_pool_create(2);
    float *x = malloc((size_t)nb * cols * sizeof *x), *out = malloc((size_t)nb * rows * sizeof *out);
    float *one = malloc((size_t)rows * sizeof *one);
    fill_acts(&r, x, (int64_t)nb * cols);
    for (int p = 0; p < SL_KPATH_COUNT; p++) {
        if (sl_kernels_force(p) != 0) continue;
        for (int ti = 0; ti < N_NEW; ti++) {
            const qtype *t = &k_new[ti];
            const size_t rb = sl_row_bytes(t->type, cols);
            uint8_t *w = malloc(rb * rows), *y = malloc(act_bytes(t, cols));
            fill_blocks(&r, t, w, (int)(rows * cols / t->blck), -3, 3);
            sl_kernels_set_exact(false);
            sl_matmul(pool, t->type, w, rows, cols, rb, x, nb, out, rows);
            /* a set without this type's dot: sl_matmul uses the portable quantizer and dot */
            const sl_kernel_set *ks = sl_kernels_qdot(sl_kernels(), t->type) ? sl_kernels() : portable();
            for (int b = 0; b < nb; b++) {
                actq_of(ks, t)(x + (size_t)b * cols, y, cols);
                sl_matmul(NULL, t->type, w, rows, cols, rb, x + (size_t)b * cols, 1, one, rows);
                for (int64_t row = 0; row < rows; row++) {
                    const float want = sl_kernels_qdot(ks, t->type)(w + row * rb, y, cols);
                    cr_assert_eq(tk_fbits(out[b * rows + row]), tk_fbits(want), "%s %s fast row %lld", sl_kpath_name(p),
                                 sl_type_name(t->type), (long long)row);
                    cr_assert_eq(tk_fbits(one[row]), tk_fbits(want), "%s %s batch 1 row %lld", sl_kpath_name(p),
                                 sl_type_name(t->type), (long long)row);
                }
            }
            sl_kernels_set_exact(true);
            sl_matmul(pool, t->type, w, rows, cols, rb, x, nb, out, rows);
            for (int b = 0; b < nb; b++)
                for (int64_t row = 0; row < rows; row++) {
                    const float want = sl_type_get(t->type)->dot(w + row * rb, x + (size_t)b * cols, cols);
                    cr_assert_eq(tk_fbits(out[b * rows + row]), tk_fbits(want), "%s exact row %lld", sl_type_name(t->type),
                                 (long long)row);
                }
            sl_kernels_set_exact(false);
            free(w); free(y);
        }
    }
    sl_kernels_force(SL_KPATH_PORTABLE);
    free(x); free(out); free(one);
    sl_pool_free(pool);
}
