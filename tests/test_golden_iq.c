/* tests/test_golden_iq.c — the micro-llama codebook-type files end to end against llama.cpp's
 * goldens and the float64 reference (../shared/golden/micro-llama, set 4 of shared/README.md).
 *
 * Per file (IQ3_S, IQ3_M, IQ3_XXS, IQ2_XXS, IQ2_XS, IQ2_S, IQ2_M, IQ1_S, IQ1_M) and prompt
 * (p1_once, p2_dog_ran):
 *   - exact path (f32 activations): step-0 logits within 0.01 of f64ref (README: an F32 runtime on
 *     the same dequantized weights lands within 0.0015-0.0030 of it; 0.01 as for the other types);
 *   - fast path (Q8_K activations, the best kernel path of this CPU): step-0 max |fast - f64ref| <=
 *     llama.cpp's own max |llama.cpp - f64ref| on that file and prompt, computed here from the
 *     goldens, + 0.05: both quantize activations to Q8_K, and our activations differ from
 *     llama.cpp's in the last bits (rmsnorm, rope, softmax orders), so some round to the other
 *     8-bit level and our quantization noise is a second sample of the same size, not the same
 *     sample (set 1's K-quants measured up to +0.06 over llama.cpp's max with the same kernels);
 *     and rms |fast - f64ref| <= llama.cpp's rms x 1.5 + 0.005 (test_golden_fast.c's rule);
 *   - greedy tokens, teacher-forced along llama.cpp's 32 steps, both paths: at every step where
 *     llama.cpp's top1 - top2 margin exceeds 2 * (B + 0.1), B = the path's step-0 bound to f64ref
 *     plus llama.cpp's distance to it, our argmax must be llama.cpp's token (a logit off by less
 *     than half the margin cannot swap the two; 0.1 covers the growth over 32 steps). Smaller
 *     margins are near ties and accept either; the count of checked steps is printed;
 *   - the same logits bit for bit on every kernel path, and streaming (pread, mmap, io_uring) bit-
 *     identical to resident.
 * Files holding types sluice cannot compute yet (Q2_K: IQ2_XXS, IQ2_XS, IQ1_S, IQ1_M mixes) are
 * skipped with the reason.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/simd.h"
#include "loader/gguf.h"
#include "loader/io.h"
#include "runtime/engine/forward.h"
#include "runtime/engine/model.h"
#include "runtime/engine/sampler.h"
#include "runtime/engine/stream.h"
#include "util/golden.h"

static double max_abs(const float *a, const float *b, int n)
{
    double m = 0;
    for (int i = 0; i < n; i++) {   /* not fmax(): gcc 12 for aarch64 crashes vectorizing that reduction */
        const double d = fabs((double)a[i] - b[i]);
        m = d > m ? d : m;
    }
    return m;
}

static double rms_diff(const float *a, const float *b, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return sqrt(s / n);
}

/* The first type in the file that sluice cannot compute with, or -1. */
static int unsupported_type(const char *path)
{
    sl_gguf *g;
    char err[SL_ERRLEN];
    cr_assert_eq(sl_gguf_open(path, &g, err, sizeof err), 0, "%s: %s", path, err);
    int bad = -1;
    for (int64_t i = 0; i < sl_gguf_n_tensors(g) && bad < 0; i++)
        if (!sl_type_supported(sl_gguf_tensor_at(g, i)->type)) bad = sl_gguf_tensor_at(g, i)->type;
    sl_gguf_close(g);
    return bad;
}

typedef struct run_cfg { bool stream; sl_io_backend backend; } run_cfg;

/* Prompt, then the golden tokens teacher-forced: logits of every step (steps x vocab, malloc'd). */
static float *run(const char *path, const golden_run *g, int steps, const run_cfg *rc, int *vocab)
{
    char err[256];
    sl_model *m;
    cr_assert_eq(sl_model_open(path, &m, err, sizeof err), 0, "%s: %s", path, err);
    sl_model_set_streaming(m, rc->stream, false);
    cr_assert_eq(sl_model_load_resident(m, err, sizeof err), 0, "%s", err);
    sl_pool *pool = sl_pool_create(2);
    sl_stream *s = NULL;
    if (rc->stream) {
        sl_stream_opts so = { rc->backend, 16 << 10, 3, 1024, false, 0, false };
        cr_assert_eq(sl_stream_create(m, pool, &so, &s, err, sizeof err), 0, "%s", err);
    }
    sl_ctx *c;
    sl_ctx_params p = { .n_ctx = 256, .n_batch = 512, .kv_type = SL_KV_F16 };
    cr_assert_eq(sl_ctx_create(m, &p, pool, &c, err, sizeof err), 0, "%s", err);
    if (s) c->src = sl_stream_source(s);
    const int V = m->cfg.vocab;
    float *all = malloc((size_t)steps * V * sizeof *all);
    cr_assert_eq(sl_eval(c, g->prompt, g->n_prompt), 0, "%s", c->err);
    for (int st = 0; st < steps; st++) {
        memcpy(all + (size_t)st * V, c->logits, (size_t)V * sizeof *all);
        if (st + 1 < steps) cr_assert_eq(sl_eval(c, &g->steps[st].token, 1), 0, "%s", c->err);
    }
    *vocab = V;
    sl_ctx_free(c);
    sl_stream_free(s);
    sl_pool_free(pool);
    sl_model_free(m);
    return all;
}

/* Greedy check along llama.cpp's tokens; returns the number of steps checked, *same = the number
 * of steps (checked or not) whose argmax is llama.cpp's token. */
static int greedy(const char *what, const golden_run *g, const float *all, int V, int steps, double tol, int *same)
{
    int checked = 0;
    *same = 0;
    for (int s = 0; s < steps; s++) {
        *same += sl_argmax(all + (size_t)s * V, V) == g->steps[s].token;
        const double margin = g->steps[s].top_logit[0] - g->steps[s].top_logit[1];
        if (margin <= 2 * tol) continue;
        cr_assert_eq(sl_argmax(all + (size_t)s * V, V), g->steps[s].token, "%s step %d (llama.cpp margin %.3f)", what, s, margin);
        checked++;
    }
    return checked;
}

static void check_prompt(const char *type, const char *path, const char *prompt)
{
    golden_run g;
    cr_assert_eq(golden_read_txt(shared_path("golden/micro-llama/%s.%s.txt", type, prompt), &g), 0);
    float *r64, *rll;
    const long n64 = golden_read_f32(shared_path("golden/micro-llama/f64ref/%s.%s.step0_logits.f32", type, prompt), &r64);
    const long nll = golden_read_f32(shared_path("golden/micro-llama/%s.%s.step0_logits.f32", type, prompt), &rll);
    cr_assert(n64 > 0 && n64 == nll, "golden logits of %s.%s", type, prompt);
    const int steps = g.n_steps;
    const double ll64 = max_abs(rll, r64, (int)n64);
    char what[128];
    int V;

    sl_kernels_set_exact(true);
    float *ex = run(path, &g, steps, &(run_cfg){ 0 }, &V);
    cr_assert_eq(V, n64);
    const double ex64 = max_abs(ex, r64, V);
    snprintf(what, sizeof what, "%s.%s exact", type, prompt);
    int sex, sfa;
    const int gex = greedy(what, &g, ex, V, steps, 0.01 + ll64 + 0.1, &sex);

    sl_kernels_set_exact(false);
    float *fa = run(path, &g, steps, &(run_cfg){ 0 }, &V);
    const double fa64 = max_abs(fa, r64, V), bound = ll64 + 0.05;
    const double fa_rms = rms_diff(fa, r64, V), ll_rms = rms_diff(rll, r64, V);
    snprintf(what, sizeof what, "%s.%s fast (%s)", type, prompt, sl_kernels()->name);
    const int gfa = greedy(what, &g, fa, V, steps, bound + ll64 + 0.1, &sfa);
    fprintf(stderr, "%-7s %-10s step0 vs f64ref: exact %.4f (tol 0.01) | fast %.4f (tol %.4f = llama.cpp's %.4f + 0.05) | "
            "greedy: checked exact %d, fast %d of %d steps; same token exact %d, fast %d\n", type, prompt, ex64, fa64, bound, ll64,
            gex, gfa, steps, sex, sfa);
    cr_assert_leq(ex64, 0.01, "%s.%s: exact max |x - f64ref| %.4f", type, prompt, ex64);
    cr_assert_leq(fa64, bound, "%s.%s: fast max |x - f64ref| %.4f > %.4f", type, prompt, fa64, bound);
    fprintf(stderr, "%-7s %-10s step0 rms vs f64ref: fast %.4f, llama.cpp %.4f (tol %.4f)\n", type, prompt, fa_rms, ll_rms,
            ll_rms * 1.5 + 0.005);
    cr_assert_leq(fa_rms, ll_rms * 1.5 + 0.005, "%s.%s: fast rms |x - f64ref| %.4f", type, prompt, fa_rms);

    /* every kernel path gives the fast path's bits; streaming gives resident's bits */
    const int n_short = 3;
    const int active = sl_kernels_path();
    for (int p = 0; p < SL_KPATH_COUNT; p++) {
        if (p == active || sl_kernels_force(p) != 0) continue;
        float *o = run(path, &g, n_short, &(run_cfg){ 0 }, &V);
        cr_assert_eq(memcmp(o, fa, (size_t)n_short * V * sizeof *o), 0, "%s.%s: %s path logits differ", type, prompt, sl_kpath_name(p));
        free(o);
    }
    cr_assert_eq(sl_kernels_force(active), 0);
    const sl_io_backend backends[] = { SL_IO_PREAD, SL_IO_MMAP, SL_IO_URING };
    for (int mode = 0; mode < 2; mode++) {
        sl_kernels_set_exact(mode == 1);
        const float *ref = mode ? ex : fa;
        for (int b = 0; b < 3; b++) {
            float *o = run(path, &g, n_short, &(run_cfg){ true, backends[b] }, &V);
            cr_assert_eq(memcmp(o, ref, (size_t)n_short * V * sizeof *o), 0, "%s.%s: streaming (%s, %s) differs from resident",
                         type, prompt, sl_io_backend_name(backends[b]), mode ? "exact" : "fast");
            free(o);
        }
    }
    sl_kernels_set_exact(false);
    free(ex);
    free(fa);
    free(r64);
    free(rll);
}

static void check_file(const char *type)
{
    char path[1024];
    snprintf(path, sizeof path, "%s", shared_path("models/micro-llama.%s.gguf", type));
    const int bad = unsupported_type(path);
    if (bad >= 0) cr_skip_test("micro-llama.%s.gguf holds %s tensors, which sluice does not compute yet", type, sl_type_name(bad));
    check_prompt(type, path, "p1_once");
    check_prompt(type, path, "p2_dog_ran");
}

Test(golden_iq, iq3_s, .timeout = 600) { check_file("IQ3_S"); }
Test(golden_iq, iq3_m, .timeout = 600) { check_file("IQ3_M"); }
Test(golden_iq, iq3_xxs, .timeout = 600) { check_file("IQ3_XXS"); }
Test(golden_iq, iq2_xxs, .timeout = 600) { check_file("IQ2_XXS"); }
Test(golden_iq, iq2_xs, .timeout = 600) { check_file("IQ2_XS"); }
Test(golden_iq, iq2_s, .timeout = 600) { check_file("IQ2_S"); }
Test(golden_iq, iq2_m, .timeout = 600) { check_file("IQ2_M"); }
Test(golden_iq, iq1_s, .timeout = 600) { check_file("IQ1_S"); }
Test(golden_iq, iq1_m, .timeout = 600) { check_file("IQ1_M"); }
