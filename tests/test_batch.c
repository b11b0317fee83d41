/* tests/test_batch.c — batched decoding across sequences (sluice_batch, sl_eval_seqs).
 *
 * The contract: a sequence's logits are bit-identical whatever it was batched with and however its
 * prompt was cut into passes.  Reference: each prompt alone in its own context (sluice_eval of the
 * whole prompt, then one greedy token per call).  Batched: the same prompts scheduled the way a
 * server does (continuous batching): sequences join at different passes, their prompts in chunks
 * beside the others' decode tokens, a prompt twice in one batch; every logits vector after the
 * prompt and after each decoded token is compared with memcmp, and a logits_all span (how drafted
 * tokens are verified) gives, row by row, the logits of one-token decoding.  Run on F32, Q4_K_M, Q8_0 and F16
 * models, fast and exact kernels, resident and streamed weights, f16, q8_0 and spilled KV caches.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/sluice.h"
#include "runtime/api/api_internal.h"
#include "runtime/engine/kvcache.h"
#include "kernels/gemm.h"
#include "kernels/ops.h"
#include "kernels/scratch.h"
#include "kernels/simd.h"
#include "util/golden.h"

#define STORIES SL_SOURCE_DIR "/models/stories260K.gguf"
#define STEPS 6
#define MAXSEQ 4

static const char *prompts[MAXSEQ] = { "Once upon a time, there was a little dog", "The cat sat", "Tom and Lily went to the park and",
                                       "Once upon a time, there was a little dog" };

typedef struct cfg { const char *path; bool stream; int kv; bool spill; bool exact; } cfg;

static sluice_model *open_cfg(const cfg *c)
{
    sluice_params p;
    sluice_params_default(&p);
    p.planner = SLUICE_PLANNER_OFF;
    p.n_threads = 2;
    p.n_ctx = 128;
    p.n_batch = 64;
    p.n_parallel = MAXSEQ;
    p.kv_type = c->kv;
    p.kv_spill_dir = c->spill ? "/tmp" : NULL;
    p.stream_all = c->stream;
    p.io = SLUICE_IO_PREAD;
    sl_kernels_set_exact(c->exact);
    char err[256];
    sluice_model *m;
    cr_assert_eq(sluice_open(c->path, &p, &m, err, sizeof err), 0, "%s: %s", c->path, err);
    return m;
}

static int32_t argmax(const float *l, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++) if (l[i] > l[best]) best = i;
    return best;
}

typedef struct seq {
    int32_t toks[128];
    int n_prompt, fed;        /* prompt tokens, prompt tokens evaluated */
    int steps;                /* logits checked so far (0: after the prompt) */
    int32_t next;             /* greedy token to feed next */
    float *ref;               /* (STEPS + 1, V) logits of the sequence alone */
    float *ref_prompt;        /* (n_prompt, V) logits after each prompt token, fed one at a time */
} seq;

static void reference(sluice_model *m, seq *s, int V)
{
    char err[256];
    sluice_ctx *c;
    cr_assert_eq(sluice_ctx_new(m, &c, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sluice_eval(c, s->toks, s->n_prompt), 0, "%s", sluice_ctx_error(c));
    for (int st = 0; st <= STEPS; st++) {
        memcpy(s->ref + (size_t)st * V, sluice_logits(c), (size_t)V * sizeof(float));
        int32_t t = argmax(sluice_logits(c), V);
        if (st < STEPS) cr_assert_eq(sluice_eval(c, &t, 1), 0, "%s", sluice_ctx_error(c));
    }
    sluice_ctx_free(c);
    cr_assert_eq(sluice_ctx_new(m, &c, err, sizeof err), 0, "%s", err);
    for (int i = 0; i < s->n_prompt; i++) {
        cr_assert_eq(sluice_eval(c, s->toks + i, 1), 0, "%s", sluice_ctx_error(c));
        memcpy(s->ref_prompt + (size_t)i * V, sluice_logits(c), (size_t)V * sizeof(float));
    }
    sluice_ctx_free(c);
}

/* One schedule: sequence i joins at pass join[i] and feeds its prompt chunk[i] tokens per pass
 * (logits_all for sequence `all_seq`: its last-token logits must not change either). */
static void run_schedule(sluice_model *m, seq *sq, int n_seq, const int *join, const int *chunk, int all_seq, int V,
                         const char *what)
{
    char err[256];
    sluice_batch *b;
    sluice_ctx *c[MAXSEQ];
    cr_assert_eq(sluice_batch_new(m, 0, n_seq, 64, &b, err, sizeof err), 0, "%s", err);
    for (int i = 0; i < n_seq; i++) {
        cr_assert_eq(sluice_ctx_new_seq(m, &c[i], err, sizeof err), 0, "%s", err);
        sq[i].fed = sq[i].steps = 0;
    }
    for (int pass = 0, done = 0; done < n_seq; pass++) {
        cr_assert_lt(pass, 200, "%s: the schedule does not finish", what);
        int span[MAXSEQ], n_in[MAXSEQ];
        for (int i = 0; i < n_seq; i++) {
            span[i] = -1;
            n_in[i] = 0;
            seq *s = &sq[i];
            if (pass < join[i] || s->steps > STEPS) continue;
            if (s->fed < s->n_prompt) {
                int n = s->n_prompt - s->fed < chunk[i] ? s->n_prompt - s->fed : chunk[i];
                span[i] = sluice_batch_add(b, c[i], s->toks + s->fed, n, i == all_seq);
                s->fed += n;
                n_in[i] = n;
            } else {
                span[i] = sluice_batch_add(b, c[i], &s->next, 1, i == all_seq);
                n_in[i] = 1;
            }
            cr_assert_geq(span[i], 0, "%s: add: %s", what, sluice_batch_error(b));
        }
        if (sluice_batch_n_tokens(b) == 0) continue;
        cr_assert_eq(sluice_batch_eval(b), 0, "%s: %s", what, sluice_batch_error(b));
        for (int i = 0; i < n_seq; i++) {
            seq *s = &sq[i];
            if (span[i] >= 0 && i == all_seq && s->steps == 0)   /* a logits_all span over the prompt: every row */
                for (int k = 0; k < n_in[i]; k++)
                    cr_assert(!memcmp(sluice_batch_logits(b, span[i], k), s->ref_prompt + (size_t)(s->fed - n_in[i] + k) * V,
                                      (size_t)V * sizeof(float)),
                              "%s: logits_all row %d of sequence %d differs from one-token decoding", what, k, i);
            if (span[i] < 0 || s->fed < s->n_prompt) continue;
            const float *l = sluice_logits(c[i]);
            cr_assert(l != NULL);
            cr_assert_eq(memcmp(l, s->ref + (size_t)s->steps * V, (size_t)V * sizeof(float)), 0,
                         "%s: sequence %d step %d: batched logits differ from the sequence alone", what, i, s->steps);
            const float *row = sluice_batch_logits(b, span[i], n_in[i] - 1);
            cr_assert(row && !memcmp(row, l, (size_t)V * sizeof(float)), "%s: batch row and context logits differ", what);
            cr_assert_eq(sluice_batch_logits(b, span[i], n_in[i]) == NULL, true);
            if (i != all_seq && n_in[i] > 1) cr_assert_eq(sluice_batch_logits(b, span[i], 0) == NULL, true);
            s->next = argmax(l, V);
            if (++s->steps > STEPS) done++;
        }
    }
    for (int i = 0; i < n_seq; i++) sluice_ctx_free(c[i]);
    sluice_batch_free(b);
}

static void check_cfg(const cfg *cf)
{
    sluice_model *m = open_cfg(cf);
    sluice_model_info info;
    sluice_model_get_info(m, &info);
    const int V = info.n_vocab;
    seq sq[MAXSEQ];
    for (int i = 0; i < MAXSEQ; i++) {
        sq[i].n_prompt = sluice_tokenize(m, prompts[i], -1, SLUICE_TOK_ADD_SPECIAL, sq[i].toks, 128);
        cr_assert_gt(sq[i].n_prompt, 2);
        cr_assert_leq(sq[i].n_prompt, 64);
        sq[i].ref = malloc((size_t)(STEPS + 1) * V * sizeof(float));
        sq[i].ref_prompt = malloc((size_t)sq[i].n_prompt * V * sizeof(float));
        reference(m, &sq[i], V);
    }
    char what[512];
    /* all at once, whole prompts in the first pass */
    static const int join_a[MAXSEQ] = { 0, 0, 0, 0 }, chunk_a[MAXSEQ] = { 64, 64, 64, 64 };
    /* staggered joins, prompts in small chunks beside the others' decoding; a logits_all span */
    static const int join_b[MAXSEQ] = { 0, 1, 3, 4 }, chunk_b[MAXSEQ] = { 64, 2, 5, 1 };
    /* two sequences, one prompt token per pass for the first */
    static const int join_c[MAXSEQ] = { 2, 0, 0, 0 }, chunk_c[MAXSEQ] = { 1, 3, 1, 1 };
    const char *base = strrchr(cf->path, '/') + 1;
    snprintf(what, sizeof what, "%s stream=%d kv=%d spill=%d exact=%d", base, cf->stream, cf->kv, cf->spill, cf->exact);
    char w2[600];
    snprintf(w2, sizeof w2, "%s, all at once", what);
    run_schedule(m, sq, MAXSEQ, join_a, chunk_a, -1, V, w2);
    snprintf(w2, sizeof w2, "%s, staggered chunks", what);
    run_schedule(m, sq, MAXSEQ, join_b, chunk_b, 1, V, w2);
    snprintf(w2, sizeof w2, "%s, two sequences", what);
    run_schedule(m, sq, 2, join_c, chunk_c, -1, V, w2);
    fprintf(stderr, "%s: 3 schedules, every sequence's logits bit-identical to the sequence alone\n", what);
    for (int i = 0; i < MAXSEQ; i++) { free(sq[i].ref); free(sq[i].ref_prompt); }
    sluice_close(m);
    sl_kernels_set_exact(false);
}

Test(batch, bit_identical_to_alone_stories_f32)
{
    check_cfg(&(cfg){ STORIES, false, SLUICE_KV_F16, false, false });
    check_cfg(&(cfg){ STORIES, false, SLUICE_KV_F32, false, true });
    check_cfg(&(cfg){ STORIES, true, SLUICE_KV_F16, false, false });
}

Test(batch, bit_identical_to_alone_quantized)
{
    const char *q4 = SL_SHARED_DIR "/models/micro-llama.Q4_K_M.gguf";
    check_cfg(&(cfg){ q4, false, SLUICE_KV_Q8_0, false, false });
    check_cfg(&(cfg){ q4, false, SLUICE_KV_F16, false, true });
    check_cfg(&(cfg){ q4, true, SLUICE_KV_F16, true, false });
    check_cfg(&(cfg){ SL_SHARED_DIR "/models/mini-llama3.Q8_0.gguf", false, SLUICE_KV_F16, false, false });
    check_cfg(&(cfg){ SL_SHARED_DIR "/models/mini-llama3.Q8_0.gguf", true, SLUICE_KV_Q8_0, true, true });
    check_cfg(&(cfg){ SL_SHARED_DIR "/models/micro-tied.F16.gguf", false, SLUICE_KV_F16, false, false });
}

/* What a batch refuses, with the message saying why; a refused add leaves the batch usable. */
Test(batch, refuses_what_does_not_fit)
{
    sluice_model *m = open_cfg(&(cfg){ STORIES, false, SLUICE_KV_F16, false, false });
    char err[256];
    sluice_batch *b;
    sluice_ctx *c1, *c2, *c3;
    cr_assert_eq(sluice_batch_new(m, 8, 2, 0, &b, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sluice_ctx_new_seq(m, &c1, err, sizeof err), 0);
    cr_assert_eq(sluice_ctx_new_seq(m, &c2, err, sizeof err), 0);
    cr_assert_eq(sluice_ctx_new_seq(m, &c3, err, sizeof err), 0);
    int32_t t[130] = { 1, 400, 300, 200, 100, 50, 60, 70, 80 };
    cr_assert_eq(sluice_batch_add(b, c1, t, 5, false), 0);
    cr_assert_eq(sluice_batch_add(b, c1, t, 1, false), -EINVAL, "the same context twice");
    cr_assert(strstr(sluice_batch_error(b), "already"));
    cr_assert_eq(sluice_batch_add(b, c2, t, 4, false), -ENOSPC, "more tokens than the batch holds");
    cr_assert(strstr(sluice_batch_error(b), "batch full"));
    cr_assert_eq(sluice_batch_add(b, c2, t, 3, false), 1);
    cr_assert_eq(sluice_batch_add(b, c3, t, 0, false), -EINVAL);
    cr_assert_eq(sluice_batch_eval(b), 0, "%s", sluice_batch_error(b));
    cr_assert_eq(sluice_n_past(c1), 5);
    cr_assert_eq(sluice_n_past(c2), 3);
    /* a context that would overflow its n_ctx (128) */
    cr_assert_eq(sluice_rewind(c3, 0), 0);
    for (int i = 0; i < 130; i++) t[i] = 1 + i;
    sluice_batch_clear(b);
    sluice_batch *big;
    cr_assert_eq(sluice_batch_new(m, 128, 2, 0, &big, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sluice_batch_add(big, c1, t, 124, false), -ENOSPC);
    cr_assert(strstr(sluice_ctx_error(c1), "context full"), "%s", sluice_ctx_error(c1));
    cr_assert_eq(sluice_batch_add(big, c1, t, 123, false), 0);
    cr_assert_eq(sluice_batch_eval(big), 0, "%s", sluice_batch_error(big));
    cr_assert_eq(sluice_n_past(c1), 128);
    sluice_batch_free(big);
    sluice_batch_free(b);
    sluice_ctx_free(c1);
    sluice_ctx_free(c2);
    sluice_ctx_free(c3);
    sluice_close(m);
}

/* The plan for --parallel N counts what a server allocates: the batch workspace and N sequence
 * contexts (scratch, logits) to the byte, and N KV caches; a budget too small for N gets the
 * planner's "needs at least" with the sequences named. */
Test(batch, plan_counts_what_parallel_sequences_allocate)
{
    for (int np = 1; np <= 4; np += 3)
        for (int spill = 0; spill < 2; spill++) {
            sluice_params p;
            sluice_params_default(&p);
            p.planner = SLUICE_PLANNER_ON;
            p.ram_budget = 1ull << 30;
            p.n_ctx = 128;
            p.n_batch = 32;
            p.n_threads = 2;
            p.n_parallel = np;
            p.disk_bw = 1;
            p.compute_bw = 1;
            p.stream_all = spill;   /* forced streaming keeps the plan's figures for the budget */
            p.kv_spill_dir = spill ? "/tmp" : NULL;
            char err[256];
            sluice_model *m;
            cr_assert_eq(sluice_open(STORIES, &p, &m, err, sizeof err), 0, "%s", err);
            const sl_plan *pl = m->plan;
            cr_assert_eq(pl->n_parallel, np);
            sluice_batch *b;
            cr_assert_eq(sluice_batch_new(m, 0, 0, 0, &b, err, sizeof err), 0, "%s", err);
            size_t scratch = np > 1 ? sluice__batch_mem_bytes(b) : 0, kv = 0;
            for (int i = 0; i < np; i++) {
                sluice_ctx *c;
                cr_assert_eq((np > 1 ? sluice_ctx_new_seq : sluice_ctx_new)(m, &c, err, sizeof err), 0, "%s", err);
                kv += sl_kv_mem_bytes(c->c->kv);
                scratch += c->c->mem_bytes - sl_kv_mem_bytes(c->c->kv);
                sluice_ctx_free(c);
            }
            const sl_config *cf = &m->m->cfg;
            uint64_t fixed = (uint64_t)np * cf->vocab * 8 + m->m->tok_embd.row_bytes + (uint64_t)cf->dim * 4;
            /* + the products' per-thread scratch at the widest input (kernels/scratch.h; tests/test_gemm.c
             * checks the kernels keep to it) */
            int64_t wmax = cf->dim > cf->ffn_dim ? cf->dim : cf->ffn_dim;
            if ((int64_t)cf->n_heads * cf->head_dim > wmax) wmax = (int64_t)cf->n_heads * cf->head_dim;
            fixed += sl_scratch_cap(sl_mm_scratch_bytes(wmax, pl->n_batch)) +
                     2 * sl_scratch_cap(sl_gemm_scratch_bytes(wmax, pl->n_batch));
            cr_assert_eq(pl->act_bytes - fixed, scratch, "np %d: planned activations %zu, allocated %zu", np,
                         (size_t)(pl->act_bytes - fixed), scratch);
            if (!spill) cr_assert_eq(pl->kv_bytes, kv, "np %d: planned KV %zu, allocated %zu", np, (size_t)pl->kv_bytes, kv);
            sluice_batch_free(b);
            sluice_close(m);
        }
    sluice_plan_info info;
    sluice_params p;
    sluice_params_default(&p);
    p.ram_budget = 7u << 20;
    p.n_ctx = 128;
    p.n_parallel = 64;
    p.disk_bw = 1;
    p.compute_bw = 1;
    char err[512];
    cr_assert_eq(sluice_plan(STORIES, &p, &info, err, sizeof err), -ENOSPC);
    cr_assert(strstr(err, "needs at least") && strstr(err, "--parallel 64"), "%s", err);
}
