/* tests/test_forward.c — the resident forward pass against llama.cpp's goldens and the float64
 * reference in ../shared/golden (see ../shared/README.md, "How close should an implementation be?").
 *
 * sluice dequantizes weights to f32 and accumulates in f32 (no activation quantization), so it is
 * expected to sit close to the float64 reference (f64ref), and as far from llama.cpp's quantized-file
 * logits as llama.cpp itself is from f64ref.  Tolerances below are stated per comparison.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/simd.h"
#include "runtime/engine/forward.h"
#include "runtime/engine/model.h"
#include "runtime/engine/sampler.h"
#include "util/golden.h"

/* These tests compare with the float64 reference at tight tolerances: run the exact kernels
 * (f32 activations).  The default fast path (activations quantized like llama.cpp) is tested
 * against the goldens in tests/test_golden_fast.c. */
__attribute__((constructor)) static void exact_mode(void) { sl_kernels_set_exact(true); }

typedef struct stats { double max, sum2; long n; } stats;

static void acc(stats *s, const float *a, const float *b, int n)
{
    for (int i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > s->max) s->max = d;
        s->sum2 += d * d;
    }
    s->n += n;
}

static double rms(const stats *s) { return s->n ? sqrt(s->sum2 / s->n) : 0; }

typedef struct engine { sl_model *m; sl_pool *pool; sl_ctx *c; } engine;

static void engine_open(engine *e, const char *path, int kv_type, int n_batch)
{
    char err[256];
    int rc = sl_model_open(path, &e->m, err, sizeof err);
    cr_assert_eq(rc, 0, "open %s: %s", path, err);
    rc = sl_model_load_resident(e->m, err, sizeof err);
    cr_assert_eq(rc, 0, "load %s: %s", path, err);
    e->pool = sl_pool_create(2);
    sl_ctx_params p = { .n_ctx = 256, .n_batch = n_batch, .kv_type = kv_type, .kv_spill_dir = NULL };
    rc = sl_ctx_create(e->m, &p, e->pool, &e->c, err, sizeof err);
    cr_assert_eq(rc, 0, "ctx: %s", err);
}

static void engine_close(engine *e)
{
    sl_ctx_free(e->c);
    sl_pool_free(e->pool);
    sl_model_free(e->m);
}

/* ---- stories260K: a trained model, greedy decoding must match token for token ------------------ */

/* Top-5 logits vs llama.cpp: llama.cpp is within 0.024 of float64 on this model (its f16 KV cache and
 * f16 rounding), we are within ~0.01 of float64 with the same f16 KV cache (checked against f64ref
 * at step 0 below), so the two can differ by up to ~0.035; 0.05 leaves margin for summation order.
 * The smallest greedy margin over all 4 prompts is 0.067, so the greedy tokens must be identical. */
#define STORIES_TOP5_TOL 0.05

static void stories_prompt(const char *name)
{
    golden_run g;
    cr_assert_eq(golden_read_txt(shared_path("golden/stories260K/%s.txt", name), &g), 0);
    engine e;
    engine_open(&e, shared_path("models/stories260K.gguf"), SL_KV_F16, 512);
    int rc = sl_eval(e.c, g.prompt, g.n_prompt);
    cr_assert_eq(rc, 0, "eval: %s", e.c->err);
    double worst = 0;
    for (int s = 0; s < g.n_steps; s++) {
        int32_t tok = sl_argmax(e.c->logits, e.m->cfg.vocab);
        cr_assert_eq(tok, g.steps[s].token, "%s step %d: sluice picks %d, llama.cpp %d", name, s, tok, g.steps[s].token);
        for (int k = 0; k < 5; k++) {
            double d = fabs(e.c->logits[g.steps[s].top_id[k]] - g.steps[s].top_logit[k]);
            if (d > worst) worst = d;
            cr_assert_leq(d, STORIES_TOP5_TOL, "%s step %d top%d id %d: %f vs %f", name, s, k, g.steps[s].top_id[k],
                          e.c->logits[g.steps[s].top_id[k]], g.steps[s].top_logit[k]);
        }
        if (s + 1 < g.n_steps) cr_assert_eq(sl_eval(e.c, &tok, 1), 0, "eval: %s", e.c->err);
    }
    fprintf(stderr, "stories260K %s: 64 greedy tokens identical, top-5 max |diff| vs llama.cpp %.4f\n", name, worst);
    engine_close(&e);
}

Test(stories260K, p1_once_greedy_64) { stories_prompt("p1_once"); }
Test(stories260K, p2_dog_greedy_64) { stories_prompt("p2_dog"); }
Test(stories260K, p3_lily_tom_greedy_64) { stories_prompt("p3_lily_tom"); }
Test(stories260K, p4_bos_greedy_64) { stories_prompt("p4_bos"); }

/* With an f32 KV cache the computation is plain FP32, like Karpathy's llama2.c run.c: compare every
 * step's full logits with its reference (llama2c_ref, teacher-forced on its own ids, which equal
 * the greedy ids here).  Only summation order differs: 1e-3 on logits of std ~7 is ~1e-4 relative. */
Test(stories260K, f32_kv_matches_llama2c_all_steps)
{
    const char *names[] = { "p1_once", "p2_dog", "p3_lily_tom", "p4_bos" };
    for (int pi = 0; pi < 4; pi++) {
        golden_run g;
        cr_assert_eq(golden_read_txt(shared_path("golden/stories260K/%s.txt", names[pi]), &g), 0);
        float *ref;
        long n = golden_read_f32(shared_path("golden/stories260K/llama2c_ref/%s.all_logits.f32", names[pi]), &ref);
        cr_assert_gt(n, 0, "missing llama2c_ref for %s", names[pi]);
        engine e;
        engine_open(&e, shared_path("models/stories260K.gguf"), SL_KV_F32, 512);
        int V = e.m->cfg.vocab, steps = (int)(n / V);
        cr_assert_eq(sl_eval(e.c, g.prompt, g.n_prompt), 0);
        stats st = { 0 };
        for (int s = 0; s < steps && s < g.n_steps; s++) {
            acc(&st, e.c->logits, ref + (size_t)s * V, V);
            if (s + 1 < steps) cr_assert_eq(sl_eval(e.c, &g.steps[s].token, 1), 0);
        }
        fprintf(stderr, "stories260K %s f32 KV vs llama2.c: max %.2e rms %.2e over %d steps\n", names[pi], st.max, rms(&st), steps);
        cr_assert_leq(st.max, 1e-3, "%s: max |diff| %g", names[pi], st.max);
        free(ref);
        engine_close(&e);
    }
}

/* ---- synthetic models: teacher-forced logits at every step --------------------------------------- */

typedef struct synth_case {
    const char *model, *type, *prompt;
    double tol_f64;      /* max |sluice - f64ref| */
    double tol_llama;    /* max |sluice - llama.cpp| */
} synth_case;

/* Tolerances.  vs f64ref: we use the file's own dequantized weights in f32 and an f16 KV cache, so the
 * error should be llama.cpp's F16-file figure (0.003-0.005 on logits of std 2: f16 KV + f32 sums);
 * measured 0.0014-0.0026.  0.01 leaves ~4x margin; micro-tied's logits are 8.5x larger (std 17,
 * measured 0.012): 0.05.
 * vs llama.cpp: its own distance to f64ref (README: F16 0.005, BF16 0.04, Q* up to 0.21; micro-tied
 * Q8_0 0.77, from its activation quantization) plus ours: F16 0.03, BF16 0.06, quantized 0.25,
 * micro-tied F16 0.1 / Q8_0 0.9. */
static const synth_case cases[] = {
    { "micro-llama", "F16", "p1_once", 0.01, 0.03 },  { "micro-llama", "F16", "p2_dog_ran", 0.01, 0.03 },
    { "micro-llama", "BF16", "p1_once", 0.01, 0.06 }, { "micro-llama", "BF16", "p2_dog_ran", 0.01, 0.06 },
    { "micro-llama", "Q8_0", "p1_once", 0.01, 0.25 }, { "micro-llama", "Q8_0", "p2_dog_ran", 0.01, 0.25 },
    { "micro-llama", "Q4_0", "p1_once", 0.01, 0.25 }, { "micro-llama", "Q4_0", "p2_dog_ran", 0.01, 0.25 },
    { "micro-llama", "Q4_K_M", "p1_once", 0.01, 0.25 }, { "micro-llama", "Q4_K_M", "p2_dog_ran", 0.01, 0.25 },
    { "micro-llama", "Q5_K_M", "p1_once", 0.01, 0.25 }, { "micro-llama", "Q5_K_M", "p2_dog_ran", 0.01, 0.25 },
    { "micro-llama", "Q6_K", "p1_once", 0.01, 0.25 }, { "micro-llama", "Q6_K", "p2_dog_ran", 0.01, 0.25 },
    { "mini-llama3", "Q4_K_M", "p1_once", 0.01, 0.25 }, { "mini-llama3", "Q4_K_M", "p2_dog_ran", 0.01, 0.25 },
    { "mini-llama3", "Q8_0", "p1_once", 0.01, 0.25 }, { "mini-llama3", "Q8_0", "p2_dog_ran", 0.01, 0.25 },
    { "micro-tied", "F16", "p1_once", 0.05, 0.1 }, { "micro-tied", "F16", "p2_dog_ran", 0.05, 0.1 },
    { "micro-tied", "Q8_0", "p1_once", 0.05, 0.9 }, { "micro-tied", "Q8_0", "p2_dog_ran", 0.05, 0.9 },
};

static void synth(const synth_case *k)
{
    golden_run g;
    char rel[256];
    snprintf(rel, sizeof rel, "golden/%s/%s.%s.txt", k->model, k->type, k->prompt);
    cr_assert_eq(golden_read_txt(shared_path("%s", rel), &g), 0);
    float *ref64, *refll;
    long n64 = golden_read_f32(shared_path("golden/%s/f64ref/%s.%s.all_logits.f32", k->model, k->type, k->prompt), &ref64);
    long nll = golden_read_f32(shared_path("golden/%s/%s.%s.all_logits.f32", k->model, k->type, k->prompt), &refll);
    cr_assert(n64 > 0 && nll > 0, "missing golden logits for %s", rel);
    engine e;
    engine_open(&e, shared_path("models/%s.%s.gguf", k->model, k->type), SL_KV_F16, 512);
    int V = e.m->cfg.vocab, steps = (int)(n64 / V);
    cr_assert_eq(steps, g.n_steps);
    cr_assert_eq(sl_eval(e.c, g.prompt, g.n_prompt), 0, "%s", e.c->err);
    stats s64 = { 0 }, sll = { 0 };
    int top1_agree = 0;
    for (int s = 0; s < steps; s++) {
        acc(&s64, e.c->logits, ref64 + (size_t)s * V, V);
        acc(&sll, e.c->logits, refll + (size_t)s * V, V);
        top1_agree += sl_argmax(e.c->logits, V) == sl_argmax(ref64 + (size_t)s * V, V);
        if (s + 1 < steps) cr_assert_eq(sl_eval(e.c, &g.steps[s].token, 1), 0, "%s", e.c->err);
    }
    fprintf(stderr, "%-12s %-7s %-11s vs f64ref max %.4f rms %.5f | vs llama.cpp max %.4f rms %.4f | argmax = f64 argmax %d/%d\n",
            k->model, k->type, k->prompt, s64.max, rms(&s64), sll.max, rms(&sll), top1_agree, steps);
    cr_assert_leq(s64.max, k->tol_f64, "%s: max |sluice - f64ref| = %g", rel, s64.max);
    cr_assert_leq(sll.max, k->tol_llama, "%s: max |sluice - llama.cpp| = %g", rel, sll.max);
    /* rms is ~4-5x below max for these error distributions; a systematic error would show here first */
    cr_assert_leq(rms(&s64), k->tol_f64 / 4, "%s: rms |sluice - f64ref| = %g", rel, rms(&s64));
    free(ref64);
    free(refll);
    engine_close(&e);
}

Test(synthetic, teacher_forced_all_types, .timeout = 600)
{
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) synth(&cases[i]);
}

/* spm32k-llama: 32000-token head; only step-0 logits are shipped. */
Test(synthetic, spm32k_step0)
{
    const char *prompts[] = { "p1_once", "p2_dog_ran", "p3_capital" };
    for (int pi = 0; pi < 3; pi++) {
        golden_run g;
        cr_assert_eq(golden_read_txt(shared_path("golden/spm32k-llama/Q4_K_M.%s.txt", prompts[pi]), &g), 0);
        float *ref;
        long n = golden_read_f32(shared_path("golden/spm32k-llama/f64ref/Q4_K_M.%s.step0_logits.f32", prompts[pi]), &ref);
        cr_assert_eq(n, 32000);
        engine e;
        engine_open(&e, shared_path("models/spm32k-llama.Q4_K_M.gguf"), SL_KV_F16, 512);
        cr_assert_eq(sl_eval(e.c, g.prompt, g.n_prompt), 0);
        stats st = { 0 };
        acc(&st, e.c->logits, ref, 32000);
        fprintf(stderr, "spm32k %s step0 vs f64ref: max %.4f rms %.5f\n", prompts[pi], st.max, rms(&st));
        cr_assert_leq(st.max, 0.01);   /* measured 0.0012-0.0019, same budget as the micro-llama cases */
        free(ref);
        engine_close(&e);
    }
}

/* Batched prefill and one-token-at-a-time evaluation must give bit-identical logits: the matmul uses
 * the same dot kernel per (row, vector) whatever the batch size. */
Test(forward, batch_size_does_not_change_logits)
{
    golden_run g;
    cr_assert_eq(golden_read_txt(shared_path("golden/micro-llama/Q4_K_M.p1_once.txt"), &g), 0);
    engine a, b;
    engine_open(&a, shared_path("models/micro-llama.Q4_K_M.gguf"), SL_KV_F16, 512);
    engine_open(&b, shared_path("models/micro-llama.Q4_K_M.gguf"), SL_KV_F16, 1);
    int32_t toks[64];
    int n = 0;
    for (int i = 0; i < g.n_prompt; i++) toks[n++] = g.prompt[i];
    for (int s = 0; s < 10; s++) toks[n++] = g.steps[s].token;
    cr_assert_eq(sl_eval(a.c, toks, n), 0);
    cr_assert_eq(sl_eval(b.c, toks, n), 0);
    cr_assert_eq(memcmp(a.c->logits, b.c->logits, (size_t)a.m->cfg.vocab * 4), 0, "batched and unbatched logits differ");
    engine_close(&a);
    engine_close(&b);
}
