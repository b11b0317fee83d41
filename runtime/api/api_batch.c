/* runtime/api/api_batch.c — include/sluice.h, part 3: batches (one forward pass for several contexts).
 *
 * The batch owns a workspace context (runtime/engine/forward.h: scratch for n_tokens positions and
 * a row of logits per span, no KV cache); each context added brings its own KV cache and tokens.
 * sluice_batch_eval is one sl_eval_seqs pass; afterwards each context looks exactly as if its span
 * had been given to sluice_eval: its tokens appended, its logits those after its last token.
 *
 * Speculative decoding in a batch (sluice_batch_add_draft / sluice_batch_verify): a decoding
 * context's span is its next token plus drafts, every position keeping its logits; the verification
 * is sluice_generate's (api_verify), and the draft length is chosen from the context's acceptance
 * and this batch's pass times, a fit of secs = t1 + (tokens - 1) * t_tok over its passes. */
#include "runtime/api/api_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/clock.h"

struct sluice_batch {
    sluice_model *M;
    sl_ctx *w;                  /* the workspace */
    int n_tokens, n_seq;        /* capacities */
    int n_spans, used, rows;    /* spans added since the last pass; their tokens; logits rows asked */
    int n_done;                 /* spans of the last pass (their logits are in w->logits) */
    sluice_ctx **ctx;           /* (n_seq) the context of each span */
    sl_seq_span *spans;         /* (n_seq) */
    int32_t *toks;              /* (n_tokens) the spans' tokens, back to back */
    bool *drafting;             /* (n_seq) the span was added by sluice_batch_add_draft */
    sl_draft_stats timing;      /* the passes' times (its acceptance fields are unused) */
    uint64_t t_pass_ns;         /* when the last pass started */
    volatile sig_atomic_t cancel;
    char err[SL_ERRLEN];
};

int sluice_batch_new(sluice_model *M, int n_tokens, int n_seq, int n_logits, sluice_batch **out, char *err,
                     size_t errlen)
{
    if (n_tokens < 0 || n_seq < 0 || n_logits < 0) {
        snprintf(err, errlen, "batch: bad sizes (%d tokens, %d sequences, %d logits rows)", n_tokens, n_seq, n_logits);
        return -EINVAL;
    }
    sluice_batch *B = calloc(1, sizeof *B);
    if (!B) { snprintf(err, errlen, "out of memory"); return -ENOMEM; }
    B->M = M;
    B->n_tokens = n_tokens ? n_tokens : M->n_batch;
    B->n_seq = n_seq ? n_seq : M->n_parallel;
    if (B->n_seq > B->n_tokens) B->n_seq = B->n_tokens;   /* a span holds at least one token */
    /* by default a row per position a verifying span may evaluate, for every context (the planner
     * counts the same: runtime/plan/planner.c act_bytes) */
    int rows = (int)((int64_t)B->n_seq * M->logit_rows < B->n_tokens ? B->n_seq * M->logit_rows : B->n_tokens);
    sl_ctx_params cp = { .n_ctx = M->n_ctx, .n_batch = B->n_tokens, .kv_type = M->kv_type,
                         .n_logits = n_logits ? n_logits : rows, .no_kv = true };
    int rc = sl_ctx_create(M->m, &cp, M->pool, &B->w, err, errlen);
    if (rc) { free(B); return rc; }
    B->n_tokens = B->w->n_batch;   /* clamped to n_ctx */
    if (M->stream) B->w->src = sl_stream_source(M->stream);
    B->w->cancel = &B->cancel;
    B->ctx = calloc((size_t)B->n_seq, sizeof *B->ctx);
    B->spans = calloc((size_t)B->n_seq, sizeof *B->spans);
    B->toks = malloc((size_t)B->n_tokens * sizeof *B->toks);
    B->drafting = calloc((size_t)B->n_seq, sizeof *B->drafting);
    sl_draft_stats_init(&B->timing);
    if (!B->ctx || !B->spans || !B->toks || !B->drafting) {
        sluice_batch_free(B);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    *out = B;
    return 0;
}

void sluice_batch_free(sluice_batch *B)
{
    if (!B) return;
    sl_ctx_free(B->w);
    free(B->ctx);
    free(B->spans);
    free(B->toks);
    free(B->drafting);
    free(B);
}

size_t sluice__batch_mem_bytes(const sluice_batch *B) { return B->w->mem_bytes; }

void sluice_batch_clear(sluice_batch *B) { B->n_spans = B->used = B->rows = B->n_done = 0; }
int sluice_batch_n_tokens(const sluice_batch *B) { return B->used; }
const char *sluice_batch_error(const sluice_batch *B) { return B->err; }
void sluice_batch_cancel(sluice_batch *B) { B->cancel = 1; }
void sluice_batch_uncancel(sluice_batch *B) { B->cancel = 0; }

int sluice_batch_add(sluice_batch *B, sluice_ctx *C, const int32_t *t, int n, bool logits_all)
{
    B->err[0] = 0;
    B->n_done = 0;   /* the last pass's logits are no longer addressable by span */
    if (!C || C->M != B->M || n < 1 || !t) {
        snprintf(B->err, sizeof B->err, "batch: %s", !C || C->M != B->M ? "a context of another model" : "no tokens");
        return -EINVAL;
    }
    for (int i = 0; i < B->n_spans; i++)
        if (B->ctx[i] == C) { snprintf(B->err, sizeof B->err, "batch: the context is already in this batch"); return -EINVAL; }
    if (C->n_toks + n > C->c->n_ctx) {
        snprintf(C->err, sizeof C->err, "context full: %d positions used + %d new > -c %d", C->n_toks, n, C->c->n_ctx);
        snprintf(B->err, sizeof B->err, "%s", C->err);
        return -ENOSPC;
    }
    int rows = logits_all ? n : 1;
    if (B->n_spans == B->n_seq || B->used + n > B->n_tokens || B->rows + rows > B->w->logits_cap) {
        snprintf(B->err, sizeof B->err, "batch full: %d of %d contexts, %d + %d of %d tokens, %d + %d of %d logits rows",
                 B->n_spans, B->n_seq, B->used, n, B->n_tokens, B->rows, rows, B->w->logits_cap);
        return -ENOSPC;
    }
    memcpy(B->toks + B->used, t, (size_t)n * sizeof *t);
    B->ctx[B->n_spans] = C;
    B->drafting[B->n_spans] = false;
    B->spans[B->n_spans] = (sl_seq_span){ .seq = C->c, .tokens = B->toks + B->used, .n = n, .logits_all = logits_all };
    B->used += n;
    B->rows += rows;
    return B->n_spans++;
}

int sluice_batch_eval(sluice_batch *B)
{
    B->err[0] = 0;
    B->n_done = 0;
    if (!B->n_spans) return 0;
    uint64_t t0 = sl_now_ns();
    for (int i = 0; i < B->n_spans; i++) B->ctx[i]->logits_valid = false;
    /* the model's weights (and its stream) serve one pass at a time, as for sluice_eval */
    int rc = api_model_lock(B->M, B->err, sizeof B->err);
    if (rc) return rc;
    rc = sl_eval_seqs(B->w, B->spans, B->n_spans);
    api_model_unlock(B->M);
    uint64_t dt = sl_now_ns() - t0;
    B->t_pass_ns = t0;
    if (!rc) sl_draft_stats_update(&B->timing, B->used, dt / 1e9, 0, 0);
    const size_t V = (size_t)B->M->m->cfg.vocab;
    for (int i = 0; i < B->n_spans && !rc; i++) {
        sluice_ctx *C = B->ctx[i];
        const sl_seq_span *s = &B->spans[i];
        memcpy(C->toks + C->n_toks, s->tokens, (size_t)s->n * sizeof *s->tokens);
        C->n_toks += s->n;
        int last = s->logits_row + (s->logits_all ? s->n - 1 : 0);
        memcpy(C->c->logits, B->w->logits + (size_t)last * V, V * sizeof(float));
        C->c->n_logits = 1;
        C->logits_valid = true;
        C->n_eval += (uint64_t)s->n;
        C->eval_ns += dt;
    }
    if (rc) snprintf(B->err, sizeof B->err, "%s", B->w->err);
    else B->n_done = B->n_spans;
    B->n_spans = B->used = B->rows = 0;
    return rc;
}

const float *sluice_batch_logits(const sluice_batch *B, int span, int i)
{
    if (span < 0 || span >= B->n_done) return NULL;
    const sl_seq_span *s = &B->spans[span];
    if (i < 0 || i >= s->n || (!s->logits_all && i != s->n - 1)) return NULL;
    int row = s->logits_row + (s->logits_all ? i : 0);
    return B->w->logits + (size_t)row * (size_t)B->M->m->cfg.vocab;
}

int sluice_batch_add_draft(sluice_batch *B, sluice_ctx *C, int32_t next, int k_max, int *n_drafted)
{
    int32_t toks[65];
    if (n_drafted) *n_drafted = 0;
    if (!C || C->M != B->M || !n_drafted || k_max < 0) {
        snprintf(B->err, sizeof B->err, "batch: %s", !C || C->M != B->M ? "a context of another model"
                 : !n_drafted ? "NULL n_drafted" : "negative k_max");
        return -EINVAL;
    }
    if (next < 0 || next >= B->M->m->cfg.vocab) {
        snprintf(B->err, sizeof B->err, "batch: token %d is outside the vocabulary [0, %d)", next, B->M->m->cfg.vocab);
        return -EINVAL;
    }
    /* the span's rows: at most the model's per-context rows and what the batch has left */
    int rows = B->M->logit_rows, rows_left = B->w->logits_cap - B->rows, toks_left = B->n_tokens - B->used;
    if (rows > rows_left) rows = rows_left;
    if (rows > toks_left) rows = toks_left;
    if (rows > (int)(sizeof toks / sizeof *toks)) rows = sizeof toks / sizeof *toks;
    int k = rows >= 2 && k_max > 0 && B->M->draft_k > 0 ? api_draft_len(C, &B->timing, rows, k_max + 1) : 0;
    int nd = api_draft(C, next, k, toks + 1);
    if (nd < 0) {
        snprintf(B->err, sizeof B->err, "%s", nd == -ENOSPC ? "context full" : C->err);
        return nd;
    }
    toks[0] = next;
    int span = sluice_batch_add(B, C, toks, nd + 1, nd > 0);
    if (span < 0) return span;
    B->drafting[span] = true;
    *n_drafted = nd;
    return span;
}

int sluice_batch_verify(sluice_batch *B, int span, sluice_sampler *S, int32_t *out)
{
    if (span < 0 || span >= B->n_done || !S || !out) {
        snprintf(B->err, sizeof B->err, "batch verify: %s", !S ? "NULL sampler" : !out ? "NULL out"
                 : "no such span in the last pass");
        return -EINVAL;
    }
    api_check(S, API_SAMPLER, "sluice_batch_verify");
    sluice_ctx *C = B->ctx[span];
    const sl_seq_span *s = &B->spans[span];
    if (S->n_vocab != B->M->m->cfg.vocab) {
        snprintf(B->err, sizeof B->err, "batch verify: a sampler of another vocabulary");
        return -EINVAL;
    }
    if (!B->drafting[span]) {   /* a prompt chunk or a plain token: sample as sluice_sample does */
        int32_t id = sluice_sample(S, C);
        if (id < 0) {
            snprintf(B->err, sizeof B->err, "batch verify: %s", id == -EDOM ? "the sampler's grammar allows no token here"
                     : id == -ENOMEM ? "out of memory" : "the span's context has no logits");
            return id;
        }
        out[0] = id;
        C->n_gen++;
        return 1;
    }
    const int nd = s->logits_all ? s->n - 1 : 0;
    int32_t next = -1;
    int acc = api_verify(C, S, C->n_toks - s->n, nd, sluice_batch_logits(B, span, 0), B->t_pass_ns, NULL, NULL, &next);
    if (acc < 0) {   /* no report callback: only an error (the grammar allows nothing, out of memory) */
        snprintf(B->err, sizeof B->err, "batch verify: %s", acc == -EDOM ? "the sampler's grammar allows no token here"
                 : "out of memory");
        return acc;
    }
    memcpy(out, s->tokens + 1, (size_t)acc * sizeof *out);
    out[acc] = next;
    C->n_gen += (uint64_t)acc + 1;
    return acc + 1;
}
