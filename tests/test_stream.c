/* tests/test_stream.c — streaming mode gives bit-identical logits to resident mode, for every
 * backend, stream unit and prefetch depth, on every golden model; the goldens pass while streaming. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/io.h"
#include "runtime/engine/forward.h"
#include "runtime/engine/model.h"
#include "runtime/engine/sampler.h"
#include "runtime/engine/stream.h"
#include "util/golden.h"

typedef struct run_cfg {
    bool stream_all, stream_head;
    sl_io_backend backend;
    uint64_t chunk;
    int prefetch, head_rows, n_batch;
    bool no_direct;
} run_cfg;

/* Evaluate prompt + the first n_steps golden tokens; return all logits (n_steps x vocab). */
static float *run(const char *model, const golden_run *g, int n_steps, const run_cfg *rc_, int *vocab)
{
    char err[256];
    sl_model *m;
    cr_assert_eq(sl_model_open(model, &m, err, sizeof err), 0, "%s", err);
    sl_model_set_streaming(m, rc_->stream_all, rc_->stream_head);
    cr_assert_eq(sl_model_load_resident(m, err, sizeof err), 0, "%s", err);
    sl_pool *pool = sl_pool_create(2);
    sl_stream *s = NULL;
    if (rc_->stream_all || rc_->stream_head) {
        sl_stream_opts so = { rc_->backend, rc_->chunk, rc_->prefetch, rc_->head_rows, rc_->no_direct, 0, false };
        cr_assert_eq(sl_stream_create(m, pool, &so, &s, err, sizeof err), 0, "%s", err);
    }
    sl_ctx *c;
    sl_ctx_params p = { .n_ctx = 256, .n_batch = rc_->n_batch, .kv_type = SL_KV_F16, .kv_spill_dir = NULL };
    cr_assert_eq(sl_ctx_create(m, &p, pool, &c, err, sizeof err), 0, "%s", err);
    if (s) c->src = sl_stream_source(s);
    int V = m->cfg.vocab;
    float *all = malloc((size_t)n_steps * V * sizeof *all);
    cr_assert_eq(sl_eval(c, g->prompt, g->n_prompt), 0, "%s", c->err);
    for (int st = 0; st < n_steps; st++) {
        memcpy(all + (size_t)st * V, c->logits, (size_t)V * sizeof *all);
        if (st + 1 < n_steps) cr_assert_eq(sl_eval(c, &g->steps[st].token, 1), 0, "%s", c->err);
    }
    *vocab = V;
    sl_ctx_free(c);
    sl_stream_free(s);
    sl_pool_free(pool);
    sl_model_free(m);
    return all;
}

static const char *models[][2] = {
    { "stories260K", NULL },          { "micro-llama", "Q4_K_M" }, { "micro-llama", "Q8_0" },
    { "micro-llama", "F16" },         { "micro-llama", "BF16" },   { "micro-llama", "Q4_0" },
    { "micro-llama", "Q5_K_M" },      { "micro-llama", "Q6_K" },   { "mini-llama3", "Q4_K_M" },
    { "micro-tied", "Q8_0" },         { "micro-tied", "F16" },     { "spm32k-llama", "Q4_K_M" },
};

static void golden_for(int i, char *model, size_t ml, golden_run *g)
{
    if (!models[i][1]) {
        snprintf(model, ml, "%s", shared_path("models/stories260K.gguf"));
        cr_assert_eq(golden_read_txt(shared_path("golden/stories260K/p1_once.txt"), g), 0);
    } else {
        snprintf(model, ml, "%s", shared_path("models/%s.%s.gguf", models[i][0], models[i][1]));
        cr_assert_eq(golden_read_txt(shared_path("golden/%s/%s.p1_once.txt", models[i][0], models[i][1]), g), 0);
    }
}

Test(stream, bit_identical_all_backends_units_depths, .timeout = 900)
{
    const int steps = 4;   /* > 1 pass through the schedule: exercises the wrap from LM head to block 0 */
    const sl_io_backend backends[] = { SL_IO_PREAD, SL_IO_MMAP, SL_IO_URING };
    const uint64_t chunks[] = { 0, 16 << 10, 256 << 10 };   /* whole tensor, small row-chunks, 256 KiB */
    const int prefetch[] = { 1, 3, 8 };
    for (size_t mi = 0; mi < sizeof models / sizeof *models; mi++) {
        char model[1024];
        golden_run g;
        golden_for((int)mi, model, sizeof model, &g);
        int V;
        run_cfg res = { .n_batch = 512 };
        float *ref = run(model, &g, steps, &res, &V);
        int n_cfg = 0;
        /* the full grid on the first two models; the diagonal (each chunk size once per backend, each
         * depth once) on the others, to keep the suite fast under the sanitizers */
        bool full = mi < 2;
        for (size_t b = 0; b < 3; b++)
            for (size_t ci = 0; ci < 3; ci++)
                for (size_t pi = 0; pi < 3; pi++) {
                    if (!full && pi != ci) continue;
                    /* spm32k's 13 MB file in 16 KiB pieces is ~800 buffered reads per pass, each
                     * dropping a 2 MiB page-cache window: slow and already covered on the small models */
                    if (!strcmp(models[mi][0], "spm32k-llama") && ci == 1) continue;
                    if (backends[b] == SL_IO_URING && !sl_io_uring_available() && ci + pi == 0)
                        fprintf(stderr, "io_uring unavailable: uring runs fall back to pread\n");
                    run_cfg rc_ = { .stream_all = true, .backend = backends[b], .chunk = chunks[ci], .prefetch = prefetch[pi],
                                    .head_rows = ci == 1 ? 7 : 1024, .n_batch = pi == 2 ? 2 : 512, .no_direct = (ci + pi) % 2 };
                    float *got = run(model, &g, steps, &rc_, &V);
                    cr_assert_eq(memcmp(ref, got, (size_t)steps * V * sizeof *ref), 0,
                                 "%s: streaming (%s, chunk %llu, prefetch %d) logits differ from resident", model,
                                 sl_io_backend_name(backends[b]), (unsigned long long)chunks[ci], prefetch[pi]);
                    free(got);
                    n_cfg++;
                }
        /* --stream-lm-head: only the head streams */
        run_cfg head = { .stream_head = true, .backend = SL_IO_URING, .prefetch = 2, .head_rows = 100, .n_batch = 512 };
        float *got = run(model, &g, steps, &head, &V);
        cr_assert_eq(memcmp(ref, got, (size_t)steps * V * sizeof *ref), 0, "%s: --stream-lm-head logits differ", model);
        free(got);
        free(ref);
        fprintf(stderr, "stream: %-48s bit-identical to resident in %d streaming configurations + lm-head-only\n", model, n_cfg);
    }
}

/* The stories260K greedy golden, 64 steps, while streaming every weight through io_uring in 4 KiB
 * chunks with the embedding rows read on demand. */
Test(stream, stories_golden_streaming)
{
    golden_run g;
    cr_assert_eq(golden_read_txt(shared_path("golden/stories260K/p2_dog.txt"), &g), 0);
    char err[256];
    sl_model *m;
    cr_assert_eq(sl_model_open(shared_path("models/stories260K.gguf"), &m, err, sizeof err), 0);
    sl_model_set_streaming(m, true, true);
    cr_assert_eq(sl_model_load_resident(m, err, sizeof err), 0);
    cr_assert_eq(m->resident_bytes, 0, "nothing but norms should be resident");
    sl_pool *pool = sl_pool_create(2);
    sl_stream *s;
    sl_stream_opts so = { SL_IO_URING, 4096, 2, 1024, false, 0, false };
    cr_assert_eq(sl_stream_create(m, pool, &so, &s, err, sizeof err), 0, "%s", err);
    sl_ctx *c;
    sl_ctx_params p = { .n_ctx = 256, .n_batch = 512, .kv_type = SL_KV_F16, .kv_spill_dir = NULL };
    cr_assert_eq(sl_ctx_create(m, &p, pool, &c, err, sizeof err), 0);
    c->src = sl_stream_source(s);
    cr_assert_eq(sl_eval(c, g.prompt, g.n_prompt), 0, "%s", c->err);
    for (int st = 0; st < g.n_steps; st++) {
        int32_t t = sl_argmax(c->logits, m->cfg.vocab);
        cr_assert_eq(t, g.steps[st].token, "step %d", st);
        if (st + 1 < g.n_steps) cr_assert_eq(sl_eval(c, &t, 1), 0, "%s", c->err);
    }
    sl_stream_stats ss;
    sl_stream_get_stats(s, &ss);
    cr_assert_gt(ss.pieces, 0);
    cr_assert_eq(ss.embd_rows, (uint64_t)(g.n_prompt + g.n_steps - 1));
    sl_ctx_free(c);
    sl_stream_free(s);
    sl_pool_free(pool);
    sl_model_free(m);
}

/* An injected EIO in the middle of the weights: a clear error naming the tensor, never garbage. */
Test(stream, eio_is_reported_with_tensor_name)
{
    char err[256];
    sl_model *m;
    cr_assert_eq(sl_model_open(shared_path("models/micro-llama.Q4_K_M.gguf"), &m, err, sizeof err), 0);
    sl_model_set_streaming(m, true, false);
    cr_assert_eq(sl_model_load_resident(m, err, sizeof err), 0);
    char fault[64];
    snprintf(fault, sizeof fault, "eio_at=%llu", (unsigned long long)(m->layers[2].mat[SL_MAT_UP].offset + m->layers[2].mat[SL_MAT_UP].nbytes / 2));
    cr_assert_eq(sl_io_set_default_fault(fault, err, sizeof err), 0, "%s", err);
    sl_pool *pool = sl_pool_create(2);
    sl_stream *s;
    sl_stream_opts so = { SL_IO_PREAD, 0, 2, 1024, false, 0, false };
    cr_assert_eq(sl_stream_create(m, pool, &so, &s, err, sizeof err), 0, "%s", err);
    sl_io_set_default_fault(NULL, err, sizeof err);
    sl_ctx *c;
    sl_ctx_params p = { .n_ctx = 64, .n_batch = 64, .kv_type = SL_KV_F16, .kv_spill_dir = NULL };
    cr_assert_eq(sl_ctx_create(m, &p, pool, &c, err, sizeof err), 0);
    c->src = sl_stream_source(s);
    int32_t toks[] = { 1, 2, 3 };
    int rc = sl_eval(c, toks, 3);
    cr_assert_eq(rc, -EIO, "rc %d", rc);
    cr_assert(strstr(c->err, "blk.2.ffn_up.weight") != NULL, "message should name the tensor: %s", c->err);
    fprintf(stderr, "EIO message: %s\n", c->err);
    sl_ctx_free(c);
    sl_stream_free(s);
    sl_pool_free(pool);
    sl_model_free(m);
}

/* An evaluation interrupted mid-pass (cancel flag) leaves pieces in flight; the next evaluation must
 * line up with the schedule again and give the same logits as an uninterrupted run. */
static volatile sig_atomic_t cancel_flag;

/* A source that forwards to the stream and raises the cancel flag after `left` matmuls, so the
 * interruption lands in the middle of a pass with pieces in flight. */
static sl_wsource *inner;
static int left;
static int w_matmul(void *self, const sl_weight *w, const float *x, int nb, float *out, int64_t st)
{
    (void)self;
    if (--left == 0) cancel_flag = 1;
    return inner->matmul(inner->self, w, x, nb, out, st);
}
static int w_row(void *self, const sl_weight *w, int64_t row, float *out) { (void)self; return inner->row(inner->self, w, row, out); }
static const char *w_err(void *self) { (void)self; return inner->errmsg(inner->self); }
static void w_reset(void *self) { (void)self; inner->reset(inner->self); }

Test(stream, interrupted_pass_recovers)
{
    char err[256];
    golden_run g;
    cr_assert_eq(golden_read_txt(shared_path("golden/micro-llama/Q4_K_M.p1_once.txt"), &g), 0);
    int V;
    run_cfg res = { .n_batch = 512 };
    float *ref = run(shared_path("models/micro-llama.Q4_K_M.gguf"), &g, 2, &res, &V);
    sl_model *m;
    cr_assert_eq(sl_model_open(shared_path("models/micro-llama.Q4_K_M.gguf"), &m, err, sizeof err), 0);
    sl_model_set_streaming(m, true, false);
    cr_assert_eq(sl_model_load_resident(m, err, sizeof err), 0);
    sl_pool *pool = sl_pool_create(2);
    sl_stream *s;
    sl_stream_opts so = { SL_IO_URING, 16 << 10, 3, 1024, false, 0, false };
    cr_assert_eq(sl_stream_create(m, pool, &so, &s, err, sizeof err), 0, "%s", err);
    sl_ctx *c;
    sl_ctx_params p = { .n_ctx = 64, .n_batch = 64, .kv_type = SL_KV_F16, .kv_spill_dir = NULL };
    cr_assert_eq(sl_ctx_create(m, &p, pool, &c, err, sizeof err), 0);
    inner = sl_stream_source(s);
    sl_wsource wrap = { NULL, w_matmul, w_row, w_err, w_reset, NULL, NULL };   /* dense: nothing to announce */
    c->src = &wrap;
    c->cancel = &cancel_flag;
    left = 10;   /* inside block 1 (7 matmuls per block): pieces of block 1 and 2 are in flight */
    cancel_flag = 0;
    cr_assert_eq(sl_eval(c, g.prompt, g.n_prompt), -ECANCELED);
    cancel_flag = 0;
    left = -1;
    cr_assert_eq(c->n_past, 0);
    cr_assert_eq(sl_eval(c, g.prompt, g.n_prompt), 0, "%s", c->err);
    cr_assert_eq(memcmp(ref, c->logits, (size_t)V * 4), 0, "logits after an interrupted pass differ");
    cr_assert_eq(sl_eval(c, &g.steps[0].token, 1), 0, "%s", c->err);
    cr_assert_eq(memcmp(ref + V, c->logits, (size_t)V * 4), 0);
    free(ref);
    sl_ctx_free(c);
    sl_stream_free(s);
    sl_pool_free(pool);
    sl_model_free(m);
}
