/* tests/test_kernels_gguf.c — kernels against real GGUF files written by llama.cpp.
 *
 * The micro-llama files in shared/models were all made from micro-llama.F16.gguf with
 * llama-quantize (no importance matrix).  So, tensor by tensor:
 *  1. dequantizing a quantized tensor must land within the type's round-trip error of the F16
 *     tensor (a wrong element order inside a block — invisible to self-consistent tests — gives a
 *     relative rms error near sqrt(2));
 *  2. re-quantizing the F16 tensor with sluice's reference quantizers must reproduce llama-quantize's
 *     bytes: they follow ggml's reference algorithms with the same f32 operations (the kernel files
 *     forbid FMA contraction, so this holds for SL_NATIVE builds too).
 * Files without an F16 source (mini-llama3, micro-tied, spm32k-llama) are checked for plausible
 * weight statistics: the generator draws N(0, 1/sqrt(ne0)) matmul weights, N(0, 1) embeddings and
 * N(0, out_scale/sqrt(dim)) output weights (shared/README.md).
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

#include "kernels/types.h"
#include "loader/gguf.h"
#include "test_kernels_util.h"

#define MODELS SL_SHARED_DIR "/models/"

/* Read exactly len bytes at off (retrying EINTR and short reads); false on error or EOF. */
static bool read_at(int fd, void *buf, size_t len, uint64_t off)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t r = pread(fd, p, len, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r;
        len -= (size_t)r;
        off += (uint64_t)r;
    }
    return true;
}

typedef struct { sl_gguf *g; int fd; } model;

static model open_model(const char *file)
{
    char path[512], err[SL_ERRLEN];
    snprintf(path, sizeof path, MODELS "%s", file);
    model m = {NULL, -1};
    int rc = sl_gguf_open(path, &m.g, err, sizeof err);
    cr_assert_eq(rc, 0, "open %s: %s", path, err);
    m.fd = open(path, O_RDONLY | O_CLOEXEC);
    cr_assert_geq(m.fd, 0, "open %s: %s", path, strerror(errno));
    return m;
}

static void close_model(model *m)
{
    sl_gguf_close(m->g);
    close(m->fd);
}

static int64_t n_elems(const sl_gguf_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->n_dims; d++) n *= t->ne[d];
    return n;
}

/* Raw bytes of a tensor (malloc'd), checked against the type table's size. */
static void *read_tensor(const model *m, const sl_gguf_tensor *t)
{
    const size_t bytes = sl_row_bytes(t->type, n_elems(t));
    cr_assert_eq(bytes, t->nbytes, "%.*s: table says %zu bytes, file %llu", (int)t->name.len, t->name.ptr,
                 bytes, (unsigned long long)t->nbytes);
    void *buf = malloc(bytes);
    cr_assert(read_at(m->fd, buf, bytes, t->offset), "read %.*s", (int)t->name.len, t->name.ptr);
    return buf;
}

static float *dequant_tensor(const model *m, const sl_gguf_tensor *t)
{
    const sl_type_info *ti = sl_type_get(t->type);
    cr_assert(ti && ti->dequant, "%.*s: type %d not supported", (int)t->name.len, t->name.ptr, t->type);
    void *raw = read_tensor(m, t);
    float *out = malloc(sizeof(float) * (size_t)n_elems(t));
    ti->dequant(raw, out, n_elems(t));
    free(raw);
    return out;
}

static double rel_rms(const float *a, const float *ref, int64_t n)
{
    double se = 0, sr = 0;
    for (int64_t i = 0; i < n; i++) {
        se += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]);
        sr += (double)ref[i] * ref[i];
    }
    return sqrt(se / sr);
}

/* Same per-type bounds as test_quant.c (the weights are Gaussian by construction). */
static double bound_for(int type)
{
    switch (type) {
    case SL_TYPE_F32:  return 0.0;
    case SL_TYPE_BF16: return 0.0020;
    case SL_TYPE_Q8_0: return 0.0060;
    case SL_TYPE_Q4_0: return 0.095;
    case SL_TYPE_Q4_K: return 0.080;
    case SL_TYPE_Q5_K: return 0.040;
    case SL_TYPE_Q6_K: return 0.020;
    default: return -1;
    }
}

static void check_against_f16(const char *file)
{
    model q = open_model(file), f = open_model("micro-llama.F16.gguf");
    int checked = 0;
    for (int64_t i = 0; i < sl_gguf_n_tensors(q.g); i++) {
        const sl_gguf_tensor *tq = sl_gguf_tensor_at(q.g, i);
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)tq->name.len, tq->name.ptr);
        const sl_gguf_tensor *tf = sl_gguf_find_tensor(f.g, name);
        cr_assert_not_null(tf, "%s: %s missing in the F16 file", file, name);
        const int64_t n = n_elems(tq);
        cr_assert_eq(n, n_elems(tf), "%s: %s shape differs", file, name);
        cr_assert(tf->type == SL_TYPE_F16 || tf->type == SL_TYPE_F32);

        float *src = dequant_tensor(&f, tf), *got = dequant_tensor(&q, tq);
        const double err = rel_rms(got, src, n), bound = bound_for(tq->type);
        cr_assert_geq(bound, 0, "%s: %s has untested type %s", file, name, sl_type_name(tq->type));
        cr_assert_leq(err, bound, "%s: %s (%s) rel rms vs F16 %.5f > %.5f", file, name,
                      sl_type_name(tq->type), err, bound);

        /* re-quantize the F16 values with our quantizer: compare bytes and error */
        const sl_type_info *ti = sl_type_get(tq->type);
        void *mine = malloc(tq->nbytes), *theirs = read_tensor(&q, tq);
        float *back = malloc(sizeof(float) * (size_t)n);
        ti->quantize(src, mine, n);
        ti->dequant(mine, back, n);
        const double my_err = rel_rms(back, src, n);
        const int64_t nblk = n / ti->blck;
        int64_t same = 0;
        for (int64_t b = 0; b < nblk; b++)
            same += !memcmp((uint8_t *)mine + b * ti->bytes, (uint8_t *)theirs + b * ti->bytes, (size_t)ti->bytes);
        if (!strcmp(name, "blk.0.attn_q.weight") || !strcmp(name, "blk.3.ffn_down.weight") ||
            !strcmp(name, "output.weight"))
            cr_log_info("%s %-26s %-4s rel rms: file %.5f, ours %.5f; identical blocks %lld/%lld", file, name,
                        ti->name, err, my_err, (long long)same, (long long)nblk);
        cr_assert_leq(my_err, err * 1.02 + 1e-12, "%s: %s our quantizer %.5f vs llama-quantize %.5f", file,
                      name, my_err, err);
        cr_assert_eq(same, nblk, "%s: %s: %lld of %lld blocks differ from llama-quantize's", file, name,
                     (long long)(nblk - same), (long long)nblk);
        /* dot of the first and last row of the file's tensor with random x, against the double sum
         * of the dequantized row (bound gamma_n * sum|w*x| as in test_kernels.c) */
        if (tq->n_dims == 2) {
            const int64_t cols = tq->ne[0], rows = tq->ne[1];
            const size_t rb = sl_row_bytes(tq->type, cols);
            tk_rng r = {(uint64_t)i + 1};
            float *x = malloc(sizeof(float) * (size_t)cols);
            for (int64_t k = 0; k < cols; k++) x[k] = (float)tk_uniform(&r, -1, 1);
            for (int64_t row = 0; row < rows; row += rows - 1) {
                double ref = 0, mag = 0;
                for (int64_t k = 0; k < cols; k++) {
                    ref += (double)got[row * cols + k] * x[k];
                    mag += fabs((double)got[row * cols + k] * x[k]);
                }
                const double g = (double)cols * 0x1p-24 / (1 - (double)cols * 0x1p-24);
                const float d = ti->dot((uint8_t *)theirs + row * rb, x, cols);
                cr_assert_leq(fabs(d - ref), g * mag, "%s: %s row %lld dot %.9g ref %.9g", file, name,
                              (long long)row, d, ref);
            }
            free(x);
        }
        free(mine);
        free(theirs);
        free(back);
        free(src);
        free(got);
        checked++;
    }
    cr_assert_gt(checked, 30, "%s: only %d tensors", file, checked);
    close_model(&q);
    close_model(&f);
}

Test(gguf_kernels, bf16_matches_f16) { check_against_f16("micro-llama.BF16.gguf"); }
Test(gguf_kernels, q8_0_matches_f16) { check_against_f16("micro-llama.Q8_0.gguf"); }
Test(gguf_kernels, q4_0_matches_f16) { check_against_f16("micro-llama.Q4_0.gguf"); }
Test(gguf_kernels, q4_k_m_matches_f16) { check_against_f16("micro-llama.Q4_K_M.gguf"); }
Test(gguf_kernels, q5_k_m_matches_f16) { check_against_f16("micro-llama.Q5_K_M.gguf"); }
Test(gguf_kernels, q6_k_matches_f16) { check_against_f16("micro-llama.Q6_K.gguf"); }

/* Weight statistics of every 2-D tensor in every synthetic model file: the rms of the dequantized
 * tensor must be within 5% of the generator's std (sampling error < 1% for >= 32K elements;
 * quantization noise adds < 8% in quadrature, i.e. < 0.4%), and every value finite. */
static void check_stats(const char *file, double out_scale, int64_t dim)
{
    model m = open_model(file);
    int checked = 0;
    for (int64_t i = 0; i < sl_gguf_n_tensors(m.g); i++) {
        const sl_gguf_tensor *t = sl_gguf_tensor_at(m.g, i);
        if (t->n_dims != 2) continue;
        double want;
        if (sl_str_eq(t->name, "token_embd.weight")) want = 1.0;
        else if (sl_str_eq(t->name, "output.weight")) want = out_scale / sqrt((double)dim);
        else want = 1.0 / sqrt((double)t->ne[0]);
        const int64_t n = n_elems(t);
        float *v = dequant_tensor(&m, t);
        double s2 = 0;
        int finite = 1;
        for (int64_t k = 0; k < n; k++) {
            s2 += (double)v[k] * v[k];
            finite &= isfinite(v[k]) != 0;
        }
        const double rms = sqrt(s2 / (double)n);
        cr_assert(finite, "%s: %.*s has non-finite values", file, (int)t->name.len, t->name.ptr);
        cr_assert(fabs(rms / want - 1) < 0.05, "%s: %.*s (%s) rms %.5f, generator std %.5f", file,
                  (int)t->name.len, t->name.ptr, sl_type_name(t->type), rms, want);
        free(v);
        checked++;
    }
    cr_assert_gt(checked, 10, "%s: only %d matrices", file, checked);
    close_model(&m);
}

Test(gguf_kernels, weight_statistics_of_all_synthetic_files)
{
    const char *micro[] = {"micro-llama.F16.gguf", "micro-llama.BF16.gguf", "micro-llama.Q8_0.gguf",
                           "micro-llama.Q4_0.gguf", "micro-llama.Q4_K_M.gguf", "micro-llama.Q5_K_M.gguf",
                           "micro-llama.Q6_K.gguf"};
    for (int i = 0; i < 7; i++) check_stats(micro[i], 2.0, 256);
    check_stats("mini-llama3.Q4_K_M.gguf", 2.0, 512);
    check_stats("mini-llama3.Q8_0.gguf", 2.0, 512);
    check_stats("micro-tied.F16.gguf", 1.0, 256);
    check_stats("micro-tied.Q8_0.gguf", 1.0, 256);
    check_stats("spm32k-llama.Q4_K_M.gguf", 2.0, 256);
}
