/* tests/test_moe.c — mixture-of-experts models (runtime/engine/moe.c, arch_qwen_moe.c, Mixtral in
 * arch_llama.c) on ../shared set 5: micro-qwen3moe, micro-mixtral, micro-qwen2moe in F16, Q8_0 and
 * Q4_K_M, prompts p1_once and p5_long, teacher-forced on llama.cpp's greedy tokens.
 *
 * Tolerances (../shared/README.md "Set 5", "llama.cpp vs float64"; logit std ~2):
 *  exact mode (f32 activations, the file's own dequantized weights, f32 KV cache) vs f64ref:
 *    2e-4.  The README's float32-style runs agree with float64 to 0.003-0.010 only through F16
 *    activations and an F16 cache; with f32 throughout the difference is summation order and f32
 *    accumulation, ~1e-5 (measured here: see the fprintf lines), and routing reproduces float64's
 *    choices unless a top-k gap is below ~1e-5 (none in these runs, README).  set 3's dense bound
 *    is 1e-4; MoE adds the router softmax and a weighted sum of k experts: 2e-4.
 *  exact mode, f16 KV cache, vs f64ref: 0.01 (README: "≈ 0.01 F16").
 *  fast mode (activations quantized like llama.cpp) vs llama.cpp at step 0: 0.15 (README: "compare
 *    a fast path that quantizes activations like llama.cpp with the llama.cpp goldens at step 0
 *    (≈ 0.15)"); later steps may jump by up to ~1 where a near-tied expert choice flips, so all
 *    steps are held to 1.5 and the argmax to llama.cpp's only where its margin exceeds 3.
 *  greedy (exact mode): where float64's top1-top2 margin exceeds twice the tolerance, the argmax
 *    is float64's token.
 *  Streaming (every backend, row-chunks), batches of 1, 7 and 64 positions, several sequences in
 *  one pass, and budgets below the model's size: bit-identical to resident single-sequence runs.
 * Under qemu-user (the arm64 suite, 10-50x slower) each test runs a subset: the exact path on one file
 * and prompt (it is portable C, the same on every CPU), the fast path on every file with one prompt,
 * streaming on the Q8_0 files, the cache at its smallest and largest size.
 * No Criterion timeouts (they leak inside Criterion under LSan): ctest has its own.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/sluice.h"
#include "kernels/ops.h"
#include "kernels/simd.h"
#include <unistd.h>
#include "loader/io.h"
#include "runtime/engine/forward.h"
#include "runtime/engine/model.h"
#include "runtime/engine/sampler.h"
#include "runtime/engine/expert_cache.h"
#include "runtime/engine/stream.h"
#include "qemu_testutil.h"
#include "util/budget_identity.h"
#include "util/golden.h"
#include "util/gguf_variant.h"

static const char *const models[] = { "micro-qwen3moe", "micro-mixtral", "micro-qwen2moe", "micro-gpt-oss" };
#define N_MODELS 4
/* each model's three files (gpt-oss: its experts in MXFP4, the rest Q8_0) */
static const char *const model_types[N_MODELS][3] = {
    { "F16", "Q8_0", "Q4_K_M" }, { "F16", "Q8_0", "Q4_K_M" }, { "F16", "Q8_0", "Q4_K_M" }, { "F16", "Q8_0", "MXFP4_MOE" },
};
static int model_index(const char *model)
{
    for (int i = 0; i < N_MODELS; i++) if (!strcmp(models[i], model)) return i;
    return 0;
}
static const char *const prompts[] = { "p1_once", "p5_long" };

typedef struct stats { double max, step0; } stats;

static double margin(const float *x, int n)
{
    float a = -INFINITY, b = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (x[i] > a) { b = a; a = x[i]; }
        else if (x[i] > b) b = x[i];
    }
    return (double)a - b;
}

typedef struct run_opts {
    int kv_type, n_batch;
    bool stream;
    sl_io_backend backend;
    uint64_t chunk;
    int prefetch;
    uint64_t cache;      /* expert cache bytes */
    bool xprefetch;      /* expert prefetch (hints) */
} run_opts;

typedef struct runner {
    sl_model *m;
    sl_pool *pool;
    sl_stream *s;
    sl_ctx *c;
} runner;

static void runner_open(runner *r, const char *path, const run_opts *o)
{
    char err[256];
    cr_assert_eq(sl_model_open(path, &r->m, err, sizeof err), 0, "open %s: %s", path, err);
    if (o->stream) sl_model_set_streaming(r->m, true, false);
    cr_assert_eq(sl_model_load_resident(r->m, err, sizeof err), 0, "%s", err);
    r->pool = sl_pool_create(2);
    r->s = NULL;
    if (o->stream) {
        sl_stream_opts so = { o->backend, o->chunk, o->prefetch, 7, false, o->cache, o->xprefetch };
        cr_assert_eq(sl_stream_create(r->m, r->pool, &so, &r->s, err, sizeof err), 0, "%s", err);
    }
    sl_ctx_params p = { .n_ctx = 256, .n_batch = o->n_batch, .kv_type = o->kv_type };
    cr_assert_eq(sl_ctx_create(r->m, &p, r->pool, &r->c, err, sizeof err), 0, "%s", err);
    if (r->s) r->c->src = sl_stream_source(r->s);
}

static void runner_close(runner *r)
{
    sl_ctx_free(r->c);
    sl_stream_free(r->s);
    sl_pool_free(r->pool);
    sl_model_free(r->m);
}

/* Through an open runner: prompt + the golden tokens of steps 0..steps-2, teacher-forced; the logits
 * of every step (malloc'd, steps x vocab). */
static float *runner_steps(runner *r, const golden_run *g, int steps)
{
    const int V = r->m->cfg.vocab;
    float *all = malloc((size_t)steps * V * sizeof *all);
    cr_assert_eq(sl_eval(r->c, g->prompt, g->n_prompt), 0, "%s: %s", r->m->path, r->c->err);
    for (int st = 0; st < steps; st++) {
        memcpy(all + (size_t)st * V, r->c->logits, (size_t)V * sizeof *all);
        if (st + 1 < steps) cr_assert_eq(sl_eval(r->c, &g->steps[st].token, 1), 0, "%s", r->c->err);
    }
    return all;
}

/* The same with a runner of its own. */
static float *run_model(const char *path, const golden_run *g, int steps, const run_opts *o, int *vocab)
{
    runner r;
    runner_open(&r, path, o);
    float *all = runner_steps(&r, g, steps);
    *vocab = r.m->cfg.vocab;
    runner_close(&r);
    return all;
}

/* The model's expert-cache entry size; *token: the experts one token takes, *all: every expert. */
static uint64_t cache_entry_bytes(const char *path, int *token, int *all)
{
    sl_model *m;
    char err[256];
    cr_assert_eq(sl_model_open(path, &m, err, sizeof err), 0, "%s", err);
    const uint64_t entry = (sl_xcache_unit_bytes(m) + 63) & ~(uint64_t)63;
    *token = m->cfg.n_layers * m->cfg.n_expert_used;
    *all = m->cfg.n_layers * m->cfg.n_expert;
    sl_model_free(m);
    return entry;
}

typedef struct golden_set { golden_run g; float *f64, *ll; long n; } golden_set;

static void golden_load(const char *model, const char *type, const char *prompt, golden_set *gs)
{
    cr_assert_eq(golden_read_txt(shared_path("golden/%s/%s.%s.txt", model, type, prompt), &gs->g), 0);
    gs->n = golden_read_f32(shared_path("golden/%s/f64ref/%s.%s.all_logits.f32", model, type, prompt), &gs->f64);
    cr_assert_gt(gs->n, 0, "missing f64ref for %s.%s.%s", model, type, prompt);
    long nll = golden_read_f32(shared_path("golden/%s/%s.%s.all_logits.f32", model, type, prompt), &gs->ll);
    cr_assert_eq(nll, gs->n, "golden logits of %s.%s.%s", model, type, prompt);
}

/* max |got - ref| over all steps and at step 0; argmax checked where ref's margin exceeds arg_margin. */
static stats compare(const char *what, const float *got, const float *ref, int steps, int V, double arg_margin)
{
    stats st = { 0, 0 };
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < V; i++) {
            const double d = fabs((double)got[(size_t)s * V + i] - ref[(size_t)s * V + i]);
            if (d > st.max) st.max = d;
            if (s == 0 && d > st.step0) st.step0 = d;
        }
        const double mg = margin(ref + (size_t)s * V, V);
        if (mg > arg_margin)
            cr_assert_eq(sl_argmax(got + (size_t)s * V, V), sl_argmax(ref + (size_t)s * V, V),
                         "%s step %d: argmax differs from the reference's (margin %.4f)", what, s, mg);
    }
    return st;
}

/* ---- exact mode: against float64 -------------------------------------------------------------- */

static void exact_case(const char *model)
{
    sl_kernels_set_exact(true);
    const char *const *types = model_types[model_index(model)];
    for (int ti = tq_under_qemu_user() ? 1 : 0; ti < (tq_under_qemu_user() ? 2 : 3); ti++)
        for (int pi = 0; pi < (tq_under_qemu_user() ? 1 : 2); pi++) {
            golden_set gs;
            golden_load(model, types[ti], prompts[pi], &gs);
            const char *path = shared_path("models/%s.%s.gguf", model, types[ti]);
            char what[128];
            snprintf(what, sizeof what, "%s.%s.%s", model, types[ti], prompts[pi]);
            int V;
            const int steps = gs.g.n_steps;
            run_opts o32 = { .kv_type = SL_KV_F32, .n_batch = 512 }, o16 = { .kv_type = SL_KV_F16, .n_batch = 512 };
            float *l32 = run_model(path, &gs.g, steps, &o32, &V);
            cr_assert_eq((long)steps * V, gs.n);
            stats s32 = compare(what, l32, gs.f64, steps, V, 4e-4);
            float *l16 = tq_under_qemu_user() ? NULL : run_model(path, &gs.g, steps, &o16, &V);
            stats s16 = l16 ? compare(what, l16, gs.f64, steps, V, 0.02) : (stats){ 0, 0 };
            fprintf(stderr, "exact %-28s f32 KV vs f64 max %.2e | f16 KV vs f64 max %.5f\n", what, s32.max, s16.max);
            cr_assert_leq(s32.max, 2e-4, "%s: f32 KV max |sluice - f64ref| = %g", what, s32.max);
            cr_assert_leq(s16.max, 0.01, "%s: f16 KV max |sluice - f64ref| = %g", what, s16.max);
            free(l32); free(l16); free(gs.f64); free(gs.ll);
        }
}

Test(moe_exact, qwen3moe) { exact_case(models[0]); }
Test(moe_exact, mixtral) { exact_case(models[1]); }
Test(moe_exact, qwen2moe) { exact_case(models[2]); }
Test(moe_exact, gpt_oss) { exact_case(models[3]); }

/* ---- fast mode: against llama.cpp; bit-identical across batch sizes ---------------------------- */

static void fast_case(const char *model)
{
    sl_kernels_set_exact(false);
    const char *const *types = model_types[model_index(model)];
    for (int ti = 0; ti < 3; ti++)
        for (int pi = 0; pi < (tq_under_qemu_user() ? 1 : 2); pi++) {
            golden_set gs;
            golden_load(model, types[ti], prompts[pi], &gs);
            const char *path = shared_path("models/%s.%s.gguf", model, types[ti]);
            char what[128];
            snprintf(what, sizeof what, "%s.%s.%s", model, types[ti], prompts[pi]);
            int V;
            const int steps = gs.g.n_steps;
            run_opts o = { .kv_type = SL_KV_F16, .n_batch = 512 };
            float *got = run_model(path, &gs.g, steps, &o, &V);
            stats sll = compare(what, got, gs.ll, steps, V, 1e9);
            /* After step 0 a near-tied expert choice may go another way here than in llama.cpp (or in
             * float64): that position's FFN changes by w (y_e - y_e'), up to the size of the README's
             * top1 ablation (~3.7 for Mixtral's top-2).  A step is ours to explain only when we left
             * both references; such flips are rare (the README's gaps < 0.01: 0-6 positions per run
             * and layer), every other step must be within 0.3 of one of them (llama.cpp's own spread
             * from float64 after its flips). */
            int flips = 0, agree = 0;
            for (int s = 0; s < steps; s++) {
                double dl = 0, df = 0, lf = 0;
                for (int i = 0; i < V; i++) {
                    const size_t k = (size_t)s * V + i;
                    dl = fmax(dl, fabs((double)got[k] - gs.ll[k]));
                    df = fmax(df, fabs((double)got[k] - gs.f64[k]));
                    lf = fmax(lf, fabs((double)gs.ll[k] - gs.f64[k]));
                }
                agree += sl_argmax(got + (size_t)s * V, V) == gs.g.steps[s].token;
                if (dl > 0.15)
                    fprintf(stderr, "      %s step %d: |sluice - llama.cpp| %.3f, |sluice - f64| %.3f, |llama.cpp - f64| %.3f\n",
                            what, s, dl, df, lf);
                if (fmin(dl, df) > 0.3) flips++;
                cr_assert_leq(fmin(dl, df), 4.0, "%s step %d: %.3f from llama.cpp and %.3f from float64", what, s, dl, df);
            }
            fprintf(stderr, "fast  %-28s vs llama.cpp step 0 max %.4f, all steps max %.4f, argmax %d/%d, %d own routing "
                    "flips (%s)\n", what, sll.step0, sll.max, agree, steps, flips, sl_kernels()->name);
            cr_assert_leq(sll.step0, 0.15, "%s: step 0 max |sluice - llama.cpp| = %g", what, sll.step0);
            cr_assert_leq(flips, 2, "%s: %d steps left both llama.cpp and float64 by > 0.3", what, flips);
            /* the prompt in batches of 1, 7 and 64 gives the same bits as one batch of 512 */
            const int few = 3, nbs[] = { 1, 7, 64 };
            for (int k = tq_under_qemu_user() ? 1 : 0; k < 3; k++) {
                run_opts ob = o;
                ob.n_batch = nbs[k];
                float *b = run_model(path, &gs.g, few, &ob, &V);
                cr_assert_eq(memcmp(b, got, (size_t)few * V * sizeof *got), 0, "%s: batch %d differs from batch 512", what,
                             nbs[k]);
                free(b);
            }
            free(got); free(gs.f64); free(gs.ll);
        }
}

Test(moe_fast, qwen3moe) { fast_case(models[0]); }
Test(moe_fast, mixtral) { fast_case(models[1]); }
Test(moe_fast, qwen2moe) { fast_case(models[2]); }
Test(moe_fast, gpt_oss) { fast_case(models[3]); }

/* ---- streaming --------------------------------------------------------------------------------- */

/* Every matrix streamed (experts on demand) on each backend, whole or in row-chunks that cut the
 * experts' matrices, in batches of 512 and 16: the resident bits. */
Test(moe_stream, bit_identical_all_backends)
{
    sl_kernels_set_exact(false);
    const sl_io_backend backends[] = { SL_IO_PREAD, SL_IO_MMAP, SL_IO_URING };
    const uint64_t chunks[] = { 0, 16 << 10, 100 << 10 };
    for (int mi = 0; mi < N_MODELS; mi++)
        for (int ti = tq_under_qemu_user() ? 1 : 0; ti < (tq_under_qemu_user() ? 2 : 3); ti++) {
            const char *const *types = model_types[mi];
            golden_run g;
            cr_assert_eq(golden_read_txt(shared_path("golden/%s/%s.p5_long.txt", models[mi], types[ti]), &g), 0);
            char path[512];
            snprintf(path, sizeof path, "%s", shared_path("models/%s.%s.gguf", models[mi], types[ti]));
            const int steps = 3;
            int V;
            run_opts res = { .kv_type = SL_KV_F16, .n_batch = 512 };
            float *ref = run_model(path, &g, steps, &res, &V);
            for (int b = 0; b < 3; b++) {
                if (tq_under_qemu_user() && b == 1) continue;
                run_opts o = { .kv_type = SL_KV_F16, .n_batch = b == 2 ? 16 : 512, .stream = true, .backend = backends[b],
                               .chunk = chunks[(b + ti) % 3], .prefetch = 1 + 2 * b };
                float *got = run_model(path, &g, steps, &o, &V);
                cr_assert_eq(memcmp(ref, got, (size_t)steps * V * sizeof *ref), 0, "%s: streamed (%s, chunk %llu) differs",
                             path, sl_io_backend_name(backends[b]), (unsigned long long)o.chunk);
                free(got);
            }
            free(ref);
        }
}

/* A streamed decode token reads the dense schedule once and exactly the experts its router picked:
 * expert_used_count experts per block, each expert's three matrices, nothing else. */
Test(moe_stream, token_reads_only_its_experts)
{
    sl_kernels_set_exact(false);
    golden_run g;
    cr_assert_eq(golden_read_txt(shared_path("golden/micro-qwen3moe/Q8_0.p5_long.txt"), &g), 0);
    runner r;
    run_opts o = { .kv_type = SL_KV_F16, .n_batch = 512, .stream = true, .backend = SL_IO_URING, .prefetch = 3 };
    runner_open(&r, shared_path("models/micro-qwen3moe.Q8_0.gguf"), &o);
    const sl_config *cf = &r.m->cfg;
    uint64_t per_expert = sl_layer_expert_bytes(r.m, 0);
    cr_assert_eq(per_expert, sl_layer_expert_bytes(r.m, 1));
    sl_stream_stats a, b;
    /* the prompt: 110 positions in one pass read each expert they take once: at most all of them,
     * more than one token's worth (different tokens take different experts) */
    cr_assert_eq(sl_eval(r.c, g.prompt, g.n_prompt), 0, "%s", r.c->err);
    sl_stream_get_stats(r.s, &a);
    cr_assert_eq(a.expert_bytes % per_expert, 0);
    const uint64_t prompt_experts = a.expert_bytes / per_expert;
    cr_assert_leq(prompt_experts, (uint64_t)cf->n_layers * cf->n_expert);
    cr_assert_gt(prompt_experts, (uint64_t)cf->n_layers * cf->n_expert_used, "a 110-token prompt took only %llu experts",
                 (unsigned long long)prompt_experts);
    cr_assert_eq(a.bytes - a.expert_bytes, sl_stream_pass_bytes(r.s), "the prompt pass reads the dense schedule once");
    for (int s = 0; s < 4; s++) {
        sl_stream_get_stats(r.s, &a);
        cr_assert_eq(sl_eval(r.c, &g.steps[s].token, 1), 0, "%s", r.c->err);
        sl_stream_get_stats(r.s, &b);
        cr_assert_eq(b.expert_bytes - a.expert_bytes, (uint64_t)cf->n_layers * cf->n_expert_used * per_expert,
                     "token %d read %llu expert bytes", s, (unsigned long long)(b.expert_bytes - a.expert_bytes));
        cr_assert_eq(b.bytes - b.expert_bytes - (a.bytes - a.expert_bytes), sl_stream_pass_bytes(r.s));
        /* and the reader was asked for nothing more: requests match what was consumed */
        cr_assert_eq(b.io.bytes_requested - a.io.bytes_requested, b.bytes - a.bytes);
    }
    fprintf(stderr, "moe stream: prompt read %llu of %d experts; a token reads %.1f KiB of experts + %.1f KiB dense\n",
            (unsigned long long)prompt_experts, cf->n_layers * cf->n_expert,
            cf->n_layers * cf->n_expert_used * per_expert / 1024.0, sl_stream_pass_bytes(r.s) / 1024.0);
    runner_close(&r);
}

/* Several sequences in one pass (the server's continuous batching, a verifying span beside a
 * prompt chunk): each sequence's logits are the bits of evaluating it alone. */
Test(moe_batch, sequences_share_a_pass_bit_identical)
{
    sl_kernels_set_exact(false);
    for (int mi = 0; mi < N_MODELS; mi++) {
        const char *t = model_types[mi][2];
        golden_run g;
        cr_assert_eq(golden_read_txt(shared_path("golden/%s/%s.p5_long.txt", models[mi], t), &g), 0);
        char path[512];
        snprintf(path, sizeof path, "%s", shared_path("models/%s.%s.gguf", models[mi], t));
        runner r;
        run_opts o = { .kv_type = SL_KV_F16, .n_batch = 64, .stream = true, .backend = SL_IO_PREAD, .prefetch = 2 };
        runner_open(&r, path, &o);
        const int V = r.m->cfg.vocab, NS = 4;
        /* sequence i: the prompt's ids from offset 10 i, 6 + i of them */
        float alone[4][512];
        char err[256];
        for (int i = 0; i < NS; i++) {
            sl_ctx_reset(r.c);
            cr_assert_eq(sl_eval(r.c, g.prompt + 10 * i, 6 + i), 0, "%s", r.c->err);
            memcpy(alone[i], r.c->logits, (size_t)V * sizeof(float));
        }
        sl_ctx *seq[4];
        sl_seq_span sp[4];
        for (int i = 0; i < NS; i++) {
            sl_ctx_params p = { .n_ctx = 256, .n_batch = 1, .kv_type = SL_KV_F16 };
            cr_assert_eq(sl_ctx_create(r.m, &p, r.pool, &seq[i], err, sizeof err), 0, "%s", err);
            sp[i] = (sl_seq_span){ .seq = seq[i], .tokens = g.prompt + 10 * i, .n = 6 + i };
        }
        sl_ctx *work;
        sl_ctx_params wp = { .n_ctx = 256, .n_batch = 64, .n_logits = NS, .kv_type = SL_KV_F16, .no_kv = true };
        cr_assert_eq(sl_ctx_create(r.m, &wp, r.pool, &work, err, sizeof err), 0, "%s", err);
        work->src = sl_stream_source(r.s);
        cr_assert_eq(sl_eval_seqs(work, sp, NS), 0, "%s", work->err);
        for (int i = 0; i < NS; i++)
            cr_assert_eq(memcmp(work->logits + (size_t)sp[i].logits_row * V, alone[i], (size_t)V * sizeof(float)), 0,
                         "%s: sequence %d in a shared pass differs from alone", path, i);
        for (int i = 0; i < NS; i++) sl_ctx_free(seq[i]);
        sl_ctx_free(work);
        runner_close(&r);
    }
}

/* Through the C API under budgets between the least that works and all-resident: the logits of the
 * resident run, bit for bit, and the plan within its budget (tests/util/budget_identity.c) — at the least
 * budget (everything streams, experts on demand), halfway, and nine tenths of the way (dense weights
 * pinned, an expert cache). */
Test(moe_budget, budgets_bit_identical)
{
    static const int tenths[] = { 0, 5, 9 };
    for (int mi = 0; mi < N_MODELS; mi++) {
        golden_run g;
        cr_assert_eq(golden_read_txt(shared_path("golden/%s/Q8_0.p5_long.txt", models[mi]), &g), 0);
        char path[512];
        snprintf(path, sizeof path, "%s", shared_path("models/%s.Q8_0.gguf", models[mi]));
        budget_identity_check(path, &g, tenths, 3, 10, "moe budget");
    }
}

/* ---- hostile MoE files: a clear error, never a guess ------------------------------------------ */

static void expect_refused(const char *src, const gv_key *set, int n, const char *needle)
{
    char dst[512], err[512];
    snprintf(dst, sizeof dst, "%s/sluice-moe-hostile-%d.gguf", P_tmpdir, (int)getpid());
    cr_assert_eq(gv_write(src, dst, set, n, NULL, 0, err, sizeof err), 0, "%s", err);
    sl_model *m = NULL;
    int rc = sl_model_open(dst, &m, err, sizeof err);
    unlink(dst);
    cr_assert_lt(rc, 0, "%s with %s accepted", src, set[0].key);
    cr_assert(strstr(err, needle), "%s: error '%s' does not say '%s'", set[0].key, err, needle);
}

Test(moe_hostile, bad_expert_hyperparameters)
{
    char src[512];
    snprintf(src, sizeof src, "%s", shared_path("models/micro-qwen3moe.Q8_0.gguf"));
    gv_key k0 = { "qwen3moe.expert_used_count", SL_GGUF_U32, .u32 = 0 };
    expect_refused(src, &k0, 1, "expert_used_count");
    gv_key k17 = { "qwen3moe.expert_used_count", SL_GGUF_U32, .u32 = 17 };
    expect_refused(src, &k17, 1, "expert_used_count = 17 must be in [1, expert_count = 16]");
    /* expert_count disagreeing with the router's rows and the stacks' third extent */
    gv_key k8 = { "qwen3moe.expert_count", SL_GGUF_U32, .u32 = 8 };
    expect_refused(src, &k8, 1, "ffn_gate_inp.weight has shape [256, 16");
    gv_key k32 = { "qwen3moe.expert_count", SL_GGUF_U32, .u32 = 32 };
    expect_refused(src, &k32, 1, "expected [256, 32]");
    /* a dense-only architecture with experts, and a MoE architecture without them */
    snprintf(src, sizeof src, "%s", shared_path("models/micro-qwen3.Q8_0.gguf"));
    gv_key q = { "qwen3.expert_count", SL_GGUF_U32, .u32 = 4 };
    expect_refused(src, &q, 1, "sluice runs no mixture-of-experts variant of qwen3");
    snprintf(src, sizeof src, "%s", shared_path("models/micro-qwen2moe.Q8_0.gguf"));
    gv_key z = { "qwen2moe.expert_count", SL_GGUF_U32, .u32 = 0 };
    expect_refused(src, &z, 1, "expert_count is missing or 0");
    /* a wrong expert width: the stacks' second extent no longer matches */
    gv_key w = { "qwen2moe.expert_feed_forward_length", SL_GGUF_U32, .u32 = 64 };
    expect_refused(src, &w, 1, "(expert_count experts)");
    /* a Mixtral file claiming to be dense: its expert stacks are tensors a dense llama lacks */
    snprintf(src, sizeof src, "%s", shared_path("models/micro-mixtral.Q8_0.gguf"));
    gv_key d = { "llama.expert_count", SL_GGUF_U32, .u32 = 0 };
    expect_refused(src, &d, 1, "ffn_gate.weight is missing");
}

/* ---- the expert cache ------------------------------------------------------------------------- */

/* Streamed with an expert cache of 1, 5, 16 and all 32 experts: the resident bits at every size,
 * and what the counters say a cache does: a cache holding every expert reads each once, then none;
 * hits + misses = the experts the batches asked for. */
static void cache_sizes(const char *type)
{
    sl_kernels_set_exact(false);
    golden_run g;
    cr_assert_eq(golden_read_txt(shared_path("golden/micro-qwen3moe/%s.p5_long.txt", type), &g), 0);
    char path[512];
    snprintf(path, sizeof path, "%s", shared_path("models/micro-qwen3moe.%s.gguf", type));
    const int steps = 8;
    int V;
    run_opts res = { .kv_type = SL_KV_F16, .n_batch = 16 };
    float *ref = run_model(path, &g, steps, &res, &V);
    int token, all;
    const uint64_t entry = cache_entry_bytes(path, &token, &all);
    const int sizes[] = { 1, 5, 16, 32 };
    for (int k = 0; k < 4; k += tq_under_qemu_user() ? 3 : 1) {
        run_opts o = { .kv_type = SL_KV_F16, .n_batch = 16, .stream = true, .backend = SL_IO_URING, .prefetch = 2,
                       .chunk = k == 2 ? 20 << 10 : 0, .cache = (uint64_t)sizes[k] * entry };
        runner r;
        runner_open(&r, path, &o);
        float *got = runner_steps(&r, &g, steps);
        cr_assert_eq(memcmp(ref, got, (size_t)steps * V * sizeof *ref), 0, "cache of %d experts: logits differ", sizes[k]);
        sl_stream_stats st;
        sl_stream_get_stats(r.s, &st);
        const uint64_t asked = st.cache.hits + st.cache.misses;
        cr_assert_eq(st.cache.entries, sizes[k]);
        if (sl_layer_expert_bytes(r.m, 0) == sl_layer_expert_bytes(r.m, 1))   /* Q4_K_M: down Q5_0 / Q8_0 */
            cr_assert_eq(st.expert_bytes, st.cache.misses * sl_layer_expert_bytes(r.m, 0), "read = misses x expert bytes");
        if (sizes[k] == all) {
            cr_assert_eq(st.cache.misses, (uint64_t)all, "a cache of every expert reads each once (%llu misses)",
                         (unsigned long long)st.cache.misses);
            cr_assert_eq(st.cache.evictions, 0);
        }
        if (sizes[k] == 1) cr_assert_gt(st.cache.bypass, 0, "a 110-token batch needs more than one entry");
        fprintf(stderr, "moe cache: %s %2d of %d experts: %llu hits / %llu asked (%.0f%%), %llu evictions, %llu read "
                "through: bit-identical to resident\n", type, sizes[k], all, (unsigned long long)st.cache.hits,
                (unsigned long long)asked, asked ? 100.0 * st.cache.hits / asked : 0, (unsigned long long)st.cache.evictions,
                (unsigned long long)st.cache.bypass);
        free(got);
        runner_close(&r);
    }
    free(ref);
}

Test(moe_cache, bit_identical_at_every_size_q8_0) { cache_sizes("Q8_0"); }
Test(moe_cache, bit_identical_at_every_size_q4_k_m) { cache_sizes("Q4_K_M"); }

/* An I/O error inside an expert's bytes: the pass fails naming the expert, and the entry that was
 * filling never serves — the next pass fails again instead of computing from a partly read expert. */
Test(moe_cache, read_error_never_serves_a_partial_expert)
{
    sl_kernels_set_exact(false);
    golden_run g;
    cr_assert_eq(golden_read_txt(shared_path("golden/micro-qwen3moe/Q8_0.p5_long.txt"), &g), 0);
    const char *path = shared_path("models/micro-qwen3moe.Q8_0.gguf");
    sl_model *m;
    char err[256], fault[96];
    cr_assert_eq(sl_model_open(path, &m, err, sizeof err), 0, "%s", err);
    const sl_weight *w = sl_expert_weight(&m->layers[1], 3, SL_EXP_DOWN);
    snprintf(fault, sizeof fault, "eio_at=%llu", (unsigned long long)(w->offset + w->nbytes / 2));
    const uint64_t entry = (sl_xcache_unit_bytes(m) + 63) & ~(uint64_t)63;
    sl_model_free(m);
    cr_assert_eq(sl_io_set_default_fault(fault, err, sizeof err), 0, "%s", err);
    const sl_io_backend backends[] = { SL_IO_PREAD, SL_IO_URING };
    for (int b = 0; b < 2; b++) {
        run_opts o = { .kv_type = SL_KV_F16, .n_batch = 512, .stream = true, .backend = backends[b], .prefetch = 2,
                       .chunk = 4096, .cache = 32 * entry };
        runner r;
        runner_open(&r, path, &o);
        for (int attempt = 0; attempt < 2; attempt++) {
            sl_ctx_reset(r.c);
            int rc = sl_eval(r.c, g.prompt, g.n_prompt);   /* the prompt takes every expert (moe_stream test) */
            cr_assert_lt(rc, 0, "%s attempt %d: a pass over a failing expert succeeded", sl_io_backend_name(backends[b]), attempt);
            cr_assert(strstr(r.c->err, "ffn_down_exps.weight[expert 3]"), "error does not name the expert: %s", r.c->err);
        }
        runner_close(&r);
    }
    sl_io_set_default_fault(NULL, err, sizeof err);
}

/* ---- expert prefetch --------------------------------------------------------------------------- */

/* With prefetch on (each MoE block hints the next block's likely experts, read into the cache while
 * the forward pass goes on): the resident bits, on every backend, at cache sizes of one token's
 * experts and more; and the counters add up: guesses read, some taken, none failed. */
Test(moe_prefetch, bit_identical_and_counted)
{
    sl_kernels_set_exact(false);
    const sl_io_backend backends[] = { SL_IO_PREAD, SL_IO_MMAP, SL_IO_URING };
    for (int mi = 0; mi < N_MODELS; mi += tq_under_qemu_user() ? 3 : 1) {
        const char *type = model_types[mi][1];
        golden_run g;
        cr_assert_eq(golden_read_txt(shared_path("golden/%s/%s.p5_long.txt", models[mi], type), &g), 0);
        char path[512];
        snprintf(path, sizeof path, "%s", shared_path("models/%s.%s.gguf", models[mi], type));
        const int steps = 8;
        int V;
        run_opts res = { .kv_type = SL_KV_F16, .n_batch = 16 };
        float *ref = run_model(path, &g, steps, &res, &V);
        int token, all;
        const uint64_t entry = cache_entry_bytes(path, &token, &all);
        for (int b = 0; b < 3; b++) {
            const int entries = b == 2 ? all : token + b * (all - token) / 2;
            run_opts o = { .kv_type = SL_KV_F16, .n_batch = 16, .stream = true, .backend = backends[b], .prefetch = 2,
                           .chunk = b == 1 ? 20 << 10 : 0, .cache = (uint64_t)entries * entry, .xprefetch = true };
            runner r;
            runner_open(&r, path, &o);
            float *got = runner_steps(&r, &g, steps);
            cr_assert_eq(memcmp(ref, got, (size_t)steps * V * sizeof *ref), 0, "%s %s, cache of %d: prefetch changed logits",
                         path, sl_io_backend_name(backends[b]), entries);
            sl_stream_stats st;
            sl_stream_get_stats(r.s, &st);
            if (entries < all) cr_assert_gt(st.prefetch_units, 0, "%s cache of %d: no guess was read", path, entries);
            cr_assert_leq(st.prefetch_used, st.prefetch_units);
            cr_assert_leq(st.prefetch_wasted, st.prefetch_bytes);
            cr_assert_eq(st.prefetch_failed, 0);
            fprintf(stderr, "moe prefetch: %s %s cache %2d of %d: %llu guesses read, %llu taken, %.0f of %.0f KiB wasted, "
                    "%llu hits / %llu asked: bit-identical\n", models[mi], sl_io_backend_name(backends[b]), entries, all,
                    (unsigned long long)st.prefetch_units, (unsigned long long)st.prefetch_used,
                    st.prefetch_wasted / 1024.0, st.prefetch_bytes / 1024.0, (unsigned long long)st.cache.hits,
                    (unsigned long long)(st.cache.hits + st.cache.misses));
            free(got);
            runner_close(&r);
        }
        free(ref);
    }
}

/* One guessed expert whose read fails: with a transient error (eio_times=1) the announcement reads
 * it again and the products are the resident bits; with a lasting one the product fails naming the
 * expert — and neither time is a partly read expert served from the cache. */
Test(moe_prefetch, failed_guess_is_read_again_never_served)
{
    sl_kernels_set_exact(false);
    const char *path = shared_path("models/micro-qwen3moe.Q8_0.gguf");
    sl_model *m;
    char err[256], fault[128];
    cr_assert_eq(sl_model_open(path, &m, err, sizeof err), 0, "%s", err);
    const uint64_t entry = (sl_xcache_unit_bytes(m) + 63) & ~(uint64_t)63;
    /* the resident products of block 1's expert 3 on a random vector */
    const sl_weight *w0 = sl_expert_weight(&m->layers[1], 3, SL_EXP_DOWN);
    const uint64_t eio_at = w0->offset + w0->nbytes / 2;
    float x[4096], ref[SL_EXPERT_MATS][4096], out[4096];
    srand(7);
    for (int i = 0; i < 4096; i++) x[i] = (float)rand() / RAND_MAX * 2 - 1;
    sl_pool *pool = sl_pool_create(2);
    FILE *f = fopen(path, "rb");
    cr_assert(f);
    for (int k = 0; k < SL_EXPERT_MATS; k++) {
        const sl_weight *w = sl_expert_weight(&m->layers[1], 3, k);
        cr_assert_leq(w->rows, 4096);
        void *bytes = malloc(w->nbytes);
        cr_assert(fseek(f, (long)w->offset, SEEK_SET) == 0 && fread(bytes, 1, w->nbytes, f) == w->nbytes);
        sl_matmul(pool, w->type, bytes, w->rows, w->cols, w->row_bytes, x, 1, ref[k], w->rows);
        free(bytes);
    }
    fclose(f);
    sl_pool_free(pool);
    sl_model_free(m);
    const sl_io_backend backends[] = { SL_IO_PREAD, SL_IO_MMAP, SL_IO_URING };
    for (int b = 0; b < 3; b++)
        for (int lasting = 0; lasting < 2; lasting++) {
            snprintf(fault, sizeof fault, "eio_at=%llu%s", (unsigned long long)eio_at, lasting ? "" : ",eio_times=1");
            cr_assert_eq(sl_io_set_default_fault(fault, err, sizeof err), 0, "%s", err);
            run_opts o = { .kv_type = SL_KV_F16, .n_batch = 16, .stream = true, .backend = backends[b], .prefetch = 2,
                           .cache = 32 * entry, .xprefetch = true };
            runner r;
            runner_open(&r, path, &o);
            sl_wsource *src = sl_stream_source(r.s);
            cr_assert(src->hint, "prefetch on, a cache: the source takes hints");
            sl_weight *ws[SL_EXPERT_MATS];
            for (int k = 0; k < SL_EXPERT_MATS; k++) ws[k] = sl_expert_weight(&r.m->layers[1], 3, k);
            for (int round = 0; round < 2; round++) {
                cr_assert_eq(src->hint(src->self, ws, SL_EXPERT_MATS), 0, "a hint never fails the pass");
                int rc = src->want(src->self, ws, SL_EXPERT_MATS);
                for (int k = 0; k < SL_EXPERT_MATS && !rc; k++) {
                    rc = src->matmul(src->self, ws[k], x, 1, out, ws[k]->rows);
                    if (!rc) cr_assert_eq(memcmp(out, ref[k], (size_t)ws[k]->rows * sizeof *out), 0,
                                          "%s round %d matrix %d: not the resident bits", sl_io_backend_name(backends[b]), round, k);
                }
                sl_stream_stats st;
                sl_stream_get_stats(r.s, &st);
                if (lasting) {
                    cr_assert_lt(rc, 0, "%s round %d: a lasting read error was not reported", sl_io_backend_name(backends[b]), round);
                    cr_assert(strstr(src->errmsg(src->self), "ffn_down_exps.weight[expert 3]"), "%s", src->errmsg(src->self));
                    cr_assert_eq(st.cache.hits, 0, "a partly read expert was served");
                    src->reset(src->self);
                } else {
                    cr_assert_eq(rc, 0, "%s round %d: %s", sl_io_backend_name(backends[b]), round, src->errmsg(src->self));
                    cr_assert_eq(st.prefetch_failed, 1, "the failed guess is counted once");
                    /* round 0 read it again (a miss); round 1 finds it whole (a hit, no guess read) */
                    cr_assert_eq(st.cache.hits, (uint64_t)round);
                    cr_assert_eq(st.cache.misses, 1);
                }
            }
            runner_close(&r);
        }
    char e2[64];
    sl_io_set_default_fault(NULL, e2, sizeof e2);
}
