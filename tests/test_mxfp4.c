/* tests/test_mxfp4.c — MXFP4 (ggml type 39) beyond the per-type loops of tests/test_quant_types.c
 * (which cover random blocks: dequant bit-exact against a bit-level decoder, portable dot against
 * float64, every SIMD path's single and 4-vector dots bit-identical to the portable one, sl_matmul
 * fast and exact):
 *   - edge exponents (e = 0 and 1: subnormal scales; 253..255: values that overflow f32 to ±inf, as
 *     ggml's f32 arithmetic gives them; e = 255 is a plain exponent in ggml, not NaN);
 *   - the reference quantizer against ggml's rule (e from amax, each element the nearest level) and
 *     its round trip;
 *   - the real file: micro-gpt-oss.MXFP4_MOE.gguf was made by llama-quantize from
 *     micro-gpt-oss.F16.gguf.  Quantizing the F16 source with sl_quantize_mxfp4 must give the file's
 *     bytes (the quantizer is ggml's); independently of the quantizer, dequantizing the file's
 *     blocks must give values within the format's rounding cell of the F16 weights they came from
 *     (a wrong exponent bias, nibble order or sign fails this by a factor of two or more); and
 *     dequantize + re-quantize reproduces the file's blocks (ggml's quantizer is a fixed point on
 *     its own output, since the largest level of each block is 8 or 12);
 *   - sl_matmul on one expert of the file on every kernel path: the portable bits; and on rows of an
 *     odd number of blocks (17-byte blocks: odd row sizes, rows at odd addresses).
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

#define BLK 17

/* The format definition (ggml-common.h kvalues_mxfp4, ggml-impl.h ggml_e8m0_to_fp32_half) in
 * double; ±inf past the f32 range (the f32 product's rounding). */
static const int k_mx[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };
static int nib(const uint8_t *b, int e) { return e < 16 ? b[1 + e] & 15 : b[1 + e - 16] >> 4; }
static double value(const uint8_t *b, int e)
{
    const double v = ldexp(k_mx[nib(b, e)], b[0] - 128);
    return fabs(v) > 0x1.fffffep127 ? copysign(INFINITY, v) : v;
}

static const sl_kernel_set *portable(void) { return sl_kernels_for(SL_KPATH_PORTABLE); }

static bool same_bits_or_nan(float a, float b) { return tk_fbits(a) == tk_fbits(b) || (isnan(a) && isnan(b)); }

Test(mxfp4, edge_exponents_dequant_and_dots)
{
    static const int es[] = { 0, 1, 2, 3, 100, 127, 128, 129, 200, 252, 253, 254, 255 };
    enum { NE = sizeof es / sizeof es[0], NB = 2 * NE };
    uint8_t w[NB * BLK];
    tk_rng r = { 3901 };
    for (int i = 0; i < NB; i++) {   /* each exponent twice: every nibble once, then random nibbles */
        w[i * BLK] = (uint8_t)es[i % NE];
        for (int j = 0; j < 16; j++) w[i * BLK + 1 + j] = i < NE ? (uint8_t)(j | (15 - j) << 4) : (uint8_t)(tk_next(&r) >> 56);
    }
    float out[NB * 32];
    sl_dequant_mxfp4(w, out, NB * 32);
    for (int i = 0; i < NB; i++)
        for (int e = 0; e < 32; e++) {
            const float want = (float)value(w + i * BLK, e);
            cr_assert_eq(tk_fbits(out[i * 32 + e]), tk_fbits(want), "e=%d elem %d: %a want %a", w[i * BLK], e, out[i * 32 + e], want);
        }
    cr_assert_eq(tk_fbits(out[1]), tk_fbits(0x1p-128f), "e = 0, kvalue 1: 2^-128 (subnormal)");
    cr_assert(isinf(out[(NE - 1) * 32 + 7]) && out[(NE - 1) * 32 + 7] > 0, "e = 255, kvalue 12: +inf as in ggml's f32");
    cr_assert_eq(out[(NE - 1) * 32 + 1], 0x1p127f, "e = 255, kvalue 1: 2^127 (a plain exponent, not NaN)");
    /* dots: each block alone and all of them in a row, against activations at several scales; every
     * path gives the portable bits (NaN where inf * 0 meets: any NaN) */
    int checked = 0;
    for (int rep = 0; rep < 6; rep++) {
        float x[NB * 32];
        const double sc = ldexp(1.0, 4 * rep - 12);
        for (int k = 0; k < NB * 32; k++) x[k] = (float)(tk_gauss(&r) * sc);
        uint8_t y[NB * SL_Q8_0_BYTES];
        portable()->quantize_q8_0(x, y, NB * 32);
        for (int i = 0; i <= NB; i++) {
            const uint8_t *wi = i < NB ? w + i * BLK : w, *yi = i < NB ? y + i * SL_Q8_0_BYTES : y;
            const int64_t n = i < NB ? 32 : NB * 32;
            const float want = sl_qdot_mxfp4_q8_0(wi, yi, n);
            for (int p = 1; p < SL_KPATH_COUNT; p++) {
                const sl_kernel_set *ks = sl_kernels_for(p);
                if (!ks || !ks->dot_mxfp4_q8_0) continue;
                const float got = ks->dot_mxfp4_q8_0(wi, yi, n);
                cr_assert(same_bits_or_nan(got, want), "%s block %d rep %d: %a != portable %a", ks->name, i, rep, got, want);
                checked++;
            }
        }
    }
    fprintf(stderr, "mxfp4: edge exponents 0..255 dequantized bit-exactly; %d SIMD dots on them = portable bits\n", checked);
}

/* ---- the reference quantizer ------------------------------------------------------------------- */

/* e for a block's amax by ggml's rule, floor(log2(amax)) - 2 + 127, computed exactly (frexp);
 * log2f may round an amax within 2^-23 below a power of two up to it, which *up reports. */
static int exact_e(double amax, bool *up)
{
    int k;
    const double m = frexp(amax, &k);   /* amax = m 2^k, m in [0.5, 1): floor(log2) = k - 1 */
    *up = m > 1 - 0x1p-22;
    return k - 1 + 125;
}

Test(mxfp4, quantizer_follows_ggml_rule_and_round_trips)
{
    tk_rng r = { 3902 };
    enum { NB = 512 };
    float *x = malloc(NB * 32 * sizeof *x), *d = malloc(NB * 32 * sizeof *d);
    uint8_t *q = malloc(NB * BLK), *q2 = malloc(NB * BLK);
    for (int b = 0; b < NB; b++) {
        const double sc = ldexp(1.0, (int)(tk_next(&r) % 61) - 30);
        for (int j = 0; j < 32; j++) x[b * 32 + j] = (float)(tk_gauss(&r) * sc);
        if (b % 7 == 3) x[b * 32 + 5] = (float)ldexp(b % 2 ? -1.0 : 1.0, (int)(tk_next(&r) % 20) - 10);   /* amax a power of two */
    }
    memset(x + 32 * 11, 0, 32 * sizeof *x);   /* an all-zero block: e = 0, all nibbles 0 */
    sl_quantize_mxfp4(x, q, NB * 32);
    for (int b = 0; b < NB; b++) {
        const uint8_t *blk = q + b * BLK;
        double amax = 0;
        for (int j = 0; j < 32; j++) amax = fabs(x[b * 32 + j]) > amax ? fabs(x[b * 32 + j]) : amax;
        if (amax == 0) {
            for (int k = 0; k < BLK; k++) cr_assert_eq(blk[k], 0, "zero block byte %d", k);
            continue;
        }
        bool up;
        const int e = exact_e(amax, &up);
        cr_assert(blk[0] == e || (up && blk[0] == e + 1), "block %d: e %d, amax %a wants %d", b, blk[0], amax, e);
        const double s = ldexp(1.0, blk[0] - 128);
        for (int j = 0; j < 32; j++) {
            const int n = nib(blk, j);
            cr_assert_neq(n, 8, "the quantizer never writes -0");
            for (int k = 0; k < 16; k++)
                cr_assert_leq(fabs(x[b * 32 + j] - k_mx[n] * s), fabs(x[b * 32 + j] - k_mx[k] * s), "block %d elem %d: level %d, %d is nearer", b, j, n, k);
        }
    }
    sl_dequant_mxfp4(q, d, NB * 32);
    sl_quantize_mxfp4(d, q2, NB * 32);
    cr_assert_eq(memcmp(q, q2, NB * BLK), 0, "quantize(dequantize(q)) != q");
    free(x); free(d); free(q); free(q2);
}

/* ---- the micro-gpt-oss file -------------------------------------------------------------------- */

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

/* One MXFP4 tensor against its F16 source; returns the number of blocks checked. */
static int64_t check_tensor(const model *q, const model *f, const sl_gguf_tensor *tq, double *worst_cell)
{
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)tq->name.len, tq->name.ptr);
    const sl_gguf_tensor *tf = sl_gguf_find_tensor(f->g, name);
    cr_assert(tf && tf->type == SL_TYPE_F16 && n_elems(tf) == n_elems(tq), "%s: no F16 source", name);
    const int64_t n = n_elems(tq), nb = n / 32;
    uint8_t *file = read_tensor(q, tq), *src16 = read_tensor(f, tf), *mine = malloc(tq->nbytes);
    float *x = malloc(n * sizeof *x), *v = malloc(n * sizeof *v);
    sl_dequant_f16(src16, x, n);
    sl_dequant_mxfp4(file, v, n);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = file + b * BLK;
        cr_assert_neq(blk[0], 255, "%s block %lld: e = 255 (ggml's row validation rejects it)", name, (long long)b);
        const double s = ldexp(1.0, blk[0] - 128);
        for (int e = 0; e < 32; e++) {
            const int64_t i = b * 32 + e;
            cr_assert_eq(tk_fbits(v[i]), tk_fbits((float)value(blk, e)), "%s elem %lld", name, (long long)i);
            /* the source weight lies in its level's rounding cell: within half the gap to the next
             * level (<= 2s), or clipped from below 16s to 12s (<= 4s) */
            const double cell = fabs(x[i] - v[i]) / s;
            cr_assert_leq(cell, fabs(v[i]) == 12 * s ? 4.0 : 2.0, "%s elem %lld: source %a, decoded %a (s = %a)", name,
                          (long long)i, x[i], v[i], s);
            *worst_cell = cell > *worst_cell ? cell : *worst_cell;
        }
    }
    sl_quantize_mxfp4(x, mine, n);
    int64_t differ = 0;
    for (int64_t b = 0; b < nb; b++) differ += memcmp(mine + b * BLK, file + b * BLK, BLK) != 0;
    cr_assert_eq(differ, 0, "%s: %lld of %lld blocks differ from llama-quantize's", name, (long long)differ, (long long)nb);
    sl_quantize_mxfp4(v, mine, n);
    cr_assert_eq(memcmp(mine, file, tq->nbytes), 0, "%s: dequantize + quantize does not give the file's blocks", name);
    free(file); free(src16); free(mine); free(x); free(v);
    return nb;
}

Test(mxfp4, micro_gpt_oss_file_against_its_f16_source)
{
    model q = open_model("micro-gpt-oss.MXFP4_MOE.gguf"), f = open_model("micro-gpt-oss.F16.gguf");
    int tensors = 0;
    int64_t blocks = 0;
    double worst = 0;
    bool gate0 = false;
    for (int64_t i = 0; i < sl_gguf_n_tensors(q.g); i++) {
        const sl_gguf_tensor *t = sl_gguf_tensor_at(q.g, i);
        if (t->type != SL_TYPE_MXFP4) continue;
        gate0 |= t->name.len == strlen("blk.0.ffn_gate_exps.weight") && !memcmp(t->name.ptr, "blk.0.ffn_gate_exps.weight", t->name.len);
        blocks += check_tensor(&q, &f, t, &worst);
        tensors++;
    }
    cr_assert(gate0, "blk.0.ffn_gate_exps.weight is MXFP4");
    cr_assert_eq(tensors, 6, "3 expert stacks x 2 layers");
    fprintf(stderr, "mxfp4: %d tensors (%lld blocks) of micro-gpt-oss: quantizer = llama-quantize's bytes, decode within "
            "%.3f scale units of the F16 source, dequantize + quantize = the file\n", tensors, (long long)blocks, worst);
    sl_gguf_close(q.g); close(q.fd);
    sl_gguf_close(f.g); close(f.fd);
}

/* One expert of blk.0.ffn_gate_exps (256 rows of 256) times a batch of 5: every path's fast mode
 * gives the portable bits; fast mode is within activation-quantization noise of float64. */
Test(mxfp4, matmul_on_a_file_expert_every_path)
{
    model q = open_model("micro-gpt-oss.MXFP4_MOE.gguf");
    const sl_gguf_tensor *t = sl_gguf_find_tensor(q.g, "blk.0.ffn_gate_exps.weight");
    cr_assert(t && t->type == SL_TYPE_MXFP4 && t->n_dims == 3);
    const int64_t cols = t->ne[0], rows = t->ne[1], nb = 5;
    const size_t rb = sl_row_bytes(SL_TYPE_MXFP4, cols);
    uint8_t *all = read_tensor(&q, t), *w = all + 3 * rows * rb;   /* expert 3 */
    tk_rng r = { 3903 };
    float *x = malloc(nb * cols * sizeof *x), *ref = malloc(nb * rows * sizeof *ref), *got = malloc(nb * rows * sizeof *got);
    float *v = malloc(rows * cols * sizeof *v);
    for (int64_t k = 0; k < nb * cols; k++) x[k] = (float)tk_gauss(&r);
    sl_dequant_mxfp4(w, v, rows * cols);
    sl_pool *pool = sl_pool_create(2);
    cr_assert_eq(sl_kernels_force(SL_KPATH_PORTABLE), 0);
    sl_matmul(pool, SL_TYPE_MXFP4, w, rows, cols, rb, x, (int)nb, ref, rows);
    double worst = 0;
    for (int64_t b = 0; b < nb; b++)
        for (int64_t row = 0; row < rows; row++) {
            double s = 0, mag = 0;
            for (int64_t k = 0; k < cols; k++) {
                s += (double)v[row * cols + k] * x[b * cols + k];
                mag += fabs((double)v[row * cols + k] * x[b * cols + k]);
            }
            /* Q8_0 activations: each |error| <= |x| / 254 of its block max, so <= mag-scale / 127 */
            worst = fmax(worst, fabs(ref[b * rows + row] - s) / (mag + 1e-30));
        }
    cr_assert_leq(worst, 1.0 / 64, "fast mode vs float64: relative %g", worst);
    int paths = 0;
    for (int p = 1; p < SL_KPATH_COUNT; p++) {
        if (sl_kernels_force(p) != 0) continue;
        sl_matmul(pool, SL_TYPE_MXFP4, w, rows, cols, rb, x, (int)nb, got, rows);
        cr_assert_eq(memcmp(ref, got, nb * rows * sizeof *got), 0, "%s differs from portable", sl_kpath_name(p));
        paths++;
    }
    sl_kernels_force(SL_KPATH_AUTO);
    fprintf(stderr, "mxfp4: file expert matmul (256 x 256, batch 5): %d SIMD paths = portable bits, fast vs float64 %.2e of sum|w x|\n",
            paths, worst);
    sl_pool_free(pool);
    free(all); free(x); free(ref); free(got); free(v);
    sl_gguf_close(q.g); close(q.fd);
}

/* Rows of 3 blocks (51 bytes: every other row starts at an odd address), 7 rows, batch 3 and 1:
 * each result is the path's single dot of that row, whatever the alignment. */
Test(mxfp4, matmul_odd_row_bytes)
{
    tk_rng r = { 3904 };
    const int64_t rows = 7, cols = 96;
    const size_t rb = sl_row_bytes(SL_TYPE_MXFP4, cols);
    cr_assert_eq(rb, 51);
    uint8_t *w = malloc(rb * rows + 1), *y = malloc(3 * SL_Q8_0_BYTES);
    float x[3 * 96], out[3 * 7], one[7];
    for (size_t k = 0; k < rb * rows + 1; k++) w[k] = (uint8_t)(tk_next(&r) >> 56);
    for (int64_t k = 0; k < rows; k++) w[1 + k * rb] = (uint8_t)(120 + k);   /* finite scales */
    for (int k = 0; k < 3 * 96; k++) x[k] = (float)tk_gauss(&r);
    for (int p = 0; p < SL_KPATH_COUNT; p++) {
        if (sl_kernels_force(p) != 0) continue;
        sl_matmul(NULL, SL_TYPE_MXFP4, w + 1, rows, cols, rb, x, 3, out, rows);
        for (int b = 0; b < 3; b++) {
            sl_matmul(NULL, SL_TYPE_MXFP4, w + 1, rows, cols, rb, x + b * cols, 1, one, rows);
            sl_kernels()->quantize_q8_0(x + b * cols, y, cols);
            for (int64_t row = 0; row < rows; row++) {
                const float want = sl_qdot_mxfp4_q8_0(w + 1 + row * rb, y, cols);
                cr_assert_eq(tk_fbits(out[b * rows + row]), tk_fbits(want), "%s batch 3, vector %d row %lld", sl_kpath_name(p), b, (long long)row);
                cr_assert_eq(tk_fbits(one[row]), tk_fbits(want), "%s batch 1, vector %d row %lld", sl_kpath_name(p), b, (long long)row);
            }
        }
    }
    sl_kernels_force(SL_KPATH_AUTO);
    free(w); free(y);
}
