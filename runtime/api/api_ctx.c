/* runtime/api/api_ctx.c — include/sluice.h, part 2: contexts, evaluation, sampling, generation,
 * sessions, figures. */
#include "loader/pagecache.h"
#include "runtime/api/api_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/engine/kvcache.h"
#include "runtime/api/session.h"
#include "kernels/clock.h"


/* ---- contexts ---------------------------------------------------------------------------------- */

int sluice_ctx_new(sluice_model *M, sluice_ctx **out, char *err, size_t errlen)
{
    return sluice__ctx_new(M, M ? M->n_batch : 0, out, err, errlen);
}

int sluice_ctx_new_seq(sluice_model *M, sluice_ctx **out, char *err, size_t errlen)
{
    return sluice__ctx_new(M, 1, out, err, errlen);
}

int sluice__ctx_new(sluice_model *M, int n_batch, sluice_ctx **out, char *err, size_t errlen)
{
    if (!M || !out) return api_einval(err, errlen, "sluice_ctx_new: NULL %s", !M ? "model" : "out pointer");
    api_check(M, API_MODEL, "sluice_ctx_new");
    sluice_ctx *C = calloc(1, sizeof *C);
    if (!C) { snprintf(err, errlen, "out of memory"); return -ENOMEM; }
    C->M = M;
    /* a context that may draft keeps the logits of the k + 1 positions a verifying pass evaluates
     * (whether or not this run drafts: the plan counted them, and they are the same bytes either way) */
    const int rows = M->logit_rows < n_batch ? M->logit_rows : n_batch;
    sl_ctx_params cp = { .n_ctx = M->n_ctx, .n_batch = n_batch, .kv_type = M->kv_type, .kv_spill_dir = M->spill_dir,
                         .n_logits = rows > 1 ? rows : 1, .ring_slack = api_ring_slack(M) };
    int rc = sl_ctx_create(M->m, &cp, M->pool, &C->c, err, errlen);
    if (rc) { free(C); return rc; }
    if (M->stream) C->c->src = sl_stream_source(M->stream);
    C->c->cancel = &C->cancel;
    sl_draft_stats_init(&C->dstats);
    /* a context that can verify drafts drafts from its own context of the draft model, which stops
     * when this one is cancelled (it shares the flag) */
    if (M->draft && M->draft_k > 0 && n_batch > 1) {
        if ((rc = sluice_ctx_new(M->draft, &C->dctx, err, errlen))) {
            sl_ctx_free(C->c);
            free(C);
            return rc;
        }
        C->dctx->c->cancel = &C->cancel;
    }
    C->cap = M->n_ctx;
    C->toks = malloc((size_t)C->cap * sizeof *C->toks);
    if (!C->toks) {
        sluice_ctx_free(C->dctx);
        sl_ctx_free(C->c);
        free(C);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    atomic_fetch_add(&M->n_ctx_live, 1);
    api_track(C, API_CTX);
    *out = C;
    return 0;
}

void sluice_ctx_free(sluice_ctx *C)
{
    if (!C) return;
    api_untrack(C, API_CTX, "sluice_ctx_free");
    atomic_fetch_sub(&C->M->n_ctx_live, 1);
    sluice_ctx_free(C->dctx);
    sl_ctx_free(C->c);
    free(C->toks);
    free(C->lookup);
    free(C);
}

/* A context handle given to an accessor: NULL is refused by the caller, a freed one (debug builds)
 * stops the process. */
#define CTX_OK(C, fn) ((C) ? (api_check((C), API_CTX, fn), true) : false)

const float *sluice_logits(const sluice_ctx *C) { return CTX_OK(C, "sluice_logits") && C->logits_valid ? sl_ctx_last_logits(C->c) : NULL; }
const int32_t *sluice_tokens(const sluice_ctx *C, int *n)
{
    if (!CTX_OK(C, "sluice_tokens")) { if (n) *n = 0; return NULL; }
    if (n) *n = C->n_toks;
    return C->toks;
}
int sluice_n_past(const sluice_ctx *C) { return CTX_OK(C, "sluice_n_past") ? C->n_toks : -EINVAL; }
int sluice_n_ctx(const sluice_ctx *C) { return CTX_OK(C, "sluice_n_ctx") ? C->c->n_ctx : -EINVAL; }
const char *sluice_ctx_error(const sluice_ctx *C) { return CTX_OK(C, "sluice_ctx_error") ? C->err : "NULL context"; }
/* no registry check: async-signal-safe (a mutex is not) */
void sluice_cancel(sluice_ctx *C) { if (C) C->cancel = 1; }
void sluice_uncancel(sluice_ctx *C) { if (C) C->cancel = 0; }
int sluice_stop_reason(const sluice_ctx *C) { return CTX_OK(C, "sluice_stop_reason") ? C->stop : -EINVAL; }

int sluice_rewind(sluice_ctx *C, int n)
{
    if (!CTX_OK(C, "sluice_rewind")) return -EINVAL;
    if (n < 0 || n > C->n_toks) {
        snprintf(C->err, sizeof C->err, "rewind: %d is not in [0, %d]", n, C->n_toks);
        return -EINVAL;
    }
    if (n == C->n_toks) return 0;
    int rc = sl_ctx_rewind(C->c, n);   /* a sliding-window ring may no longer hold the window before n */
    if (rc) {
        snprintf(C->err, sizeof C->err, "%s", C->c->err);
        return rc;
    }
    C->logits_valid = false;
    C->n_toks = n;
    return 0;
}

void sluice_reset(sluice_ctx *C) { if (C) sluice_rewind(C, 0); }

static int eval_locked(sluice_ctx *C, const int32_t *t, int n, bool progress);

/* ---- evaluation --------------------------------------------------------------------------------
 * Prompt progress: batches are reported as they finish; when weights stream, the weight source is
 * wrapped for the call so that progress also moves inside a batch, by the bytes of streamed weights
 * the pass has consumed (a streamed batch is one pass over the file, seconds for a large model). */

typedef struct prog_src {
    sl_wsource base, *inner;
    const sluice_params *p;
    uint64_t pass_bytes, done_bytes;
    int before, nb, total;
} prog_src;

static void prog_report(prog_src *ps)
{
    double f = ps->pass_bytes ? (double)ps->done_bytes / (double)ps->pass_bytes : 0;
    if (f > 1) f = 1;
    ps->p->progress(ps->p->user, "prompt", (uint64_t)(ps->before + f * ps->nb), (uint64_t)ps->total);
}

static int prog_matmul(void *self, const sl_weight *w, const float *x, int nb, float *out, int64_t stride)
{
    prog_src *ps = self;
    int rc = ps->inner->matmul(ps->inner->self, w, x, nb, out, stride);
    if (!w->routed) ps->done_bytes += w->nbytes;   /* pass_bytes counts the schedule, not the experts */
    prog_report(ps);
    return rc;
}

static int prog_row(void *self, const sl_weight *w, int64_t row, float *out)
{
    prog_src *ps = self;
    return ps->inner->row(ps->inner->self, w, row, out);
}

static const char *prog_errmsg(void *self)
{
    prog_src *ps = self;
    return ps->inner->errmsg(ps->inner->self);
}

static void prog_reset(void *self)
{
    prog_src *ps = self;
    if (ps->inner->reset) ps->inner->reset(ps->inner->self);
}

static int prog_want(void *self, sl_weight *const *ws, int n)
{
    prog_src *ps = self;
    return ps->inner->want ? ps->inner->want(ps->inner->self, ws, n) : 0;
}

static int prog_hint(void *self, sl_weight *const *ws, int n)
{
    prog_src *ps = self;
    return ps->inner->hint(ps->inner->self, ws, n);
}

static int eval_checked(sluice_ctx *C, const int32_t *t, int n, bool progress);

int sluice_eval(sluice_ctx *C, const int32_t *t, int n)
{
    if (!CTX_OK(C, "sluice_eval")) return -EINVAL;
    return eval_checked(C, t, n, true);
}

/* sluice_eval's checks and pass; `progress`: report a multi-token pass as a prompt pass (a
 * speculative verifying pass is generation, and its progress line would erase the output's). */
static int eval_checked(sluice_ctx *C, const int32_t *t, int n, bool progress)
{
    C->err[0] = 0;
    if (n < 0 || (n > 0 && !t)) {
        snprintf(C->err, sizeof C->err, "eval: %s", n < 0 ? "negative token count" : "NULL tokens");
        return -EINVAL;
    }
    if (n == 0) return 0;
    if (n > C->c->n_ctx - C->n_toks) {
        snprintf(C->err, sizeof C->err, "context full: %d positions used + %d new > the context's %d", C->n_toks, n,
                 C->c->n_ctx);
        return -ENOSPC;
    }
    const int32_t n_vocab = C->M->m->cfg.vocab;
    for (int i = 0; i < n; i++)
        if (t[i] < 0 || t[i] >= n_vocab) {
            snprintf(C->err, sizeof C->err, "eval: token %d is id %d, outside the vocabulary [0, %d)", i, t[i], n_vocab);
            return -EINVAL;
        }
    int lrc = api_model_lock(C->M, C->err, sizeof C->err);
    if (lrc) return lrc;
    int rc = eval_locked(C, t, n, progress);
    api_model_unlock(C->M);
    return rc;
}

/* sluice_eval with the model's lock held and the arguments checked. */
static int eval_locked(sluice_ctx *C, const int32_t *t, int n, bool progress)
{
    sl_ctx *c = C->c;
    const sluice_params *p = &C->M->p;
    bool show = progress && p->progress && n > 1;
    prog_src ps = { .inner = c->src, .p = p, .total = n };
    if (show && c->src) {
        ps.base = (sl_wsource){ &ps, prog_matmul, prog_row, prog_errmsg, prog_reset, prog_want,
                                c->src->hint ? prog_hint : NULL };
        ps.pass_bytes = sl_stream_pass_bytes(C->M->stream);
        c->src = &ps.base;
    }
    uint64_t t0 = sl_now_ns();
    int rc = 0;
    C->logits_valid = false;
    for (int done = 0; done < n && !rc;) {
        int nb = n - done < c->n_batch ? n - done : c->n_batch;
        ps.before = done;
        ps.nb = nb;
        ps.done_bytes = 0;
        rc = sl_eval(c, t + done, nb);
        if (rc) break;
        memcpy(C->toks + C->n_toks, t + done, (size_t)nb * sizeof *t);
        C->n_toks += nb;
        done += nb;
        if (show) p->progress(p->user, "prompt", (uint64_t)done, (uint64_t)n);
    }
    if (show && ps.inner) c->src = ps.inner;
    C->eval_ns += sl_now_ns() - t0;
    if (rc) {
        snprintf(C->err, sizeof C->err, "%s", c->err);
        /* a failed or interrupted pass leaves the stream's schedule mid-way: restart it */
        if (C->M->stream) sl_stream_reset(C->M->stream);
        return rc;
    }
    C->n_eval += (uint64_t)n;
    C->logits_valid = true;
    return 0;
}

int sluice_prefill(sluice_ctx *C, const int32_t *t, int n)
{
    if (!CTX_OK(C, "sluice_prefill")) return -EINVAL;
    C->err[0] = 0;
    if (n < 1 || !t) { snprintf(C->err, sizeof C->err, "prefill: nothing to evaluate"); return -EINVAL; }
    if (n > C->c->n_ctx) {
        snprintf(C->err, sizeof C->err, "%d tokens are more than the context of %d", n, C->c->n_ctx);
        return -ENOSPC;
    }
    int lcp = 0;
    while (lcp < n && lcp < C->n_toks && C->toks[lcp] == t[lcp]) lcp++;
    if (lcp == n && C->n_toks == n && C->logits_valid) return 0;
    if (lcp == n) lcp = n - 1;   /* everything is cached but the logits are not current: redo the last token */
    if (sluice_rewind(C, lcp)) {   /* a sliding-window ring lost the window before lcp: start again */
        lcp = 0;
        sluice_rewind(C, 0);
    }
    int rc = sluice_eval(C, t + lcp, n - lcp);
    return rc ? rc : n - lcp;
}

/* ---- sampling and generation ------------------------------------------------------------------- */

void sluice_sampler_params_default(sluice_sampler_params *p)
{
    if (!p) return;
    sl_sampler_params d = sl_sampler_defaults();
    *p = (sluice_sampler_params){ d.temp, d.top_k, d.top_p, d.min_p, d.repeat_penalty, d.repeat_last_n, d.seed, false };
}

/* The documented ranges; NaN fails every comparison, so each test is written to fail on it. */
static int check_sampler_params(const sluice_sampler_params *p, char *err, size_t errlen)
{
    if (!(isfinite(p->temp)))
        return api_einval(err, errlen, "sampler: temp %g is not finite (<= 0 means greedy)", (double)p->temp);
    if (p->top_k < 0) return api_einval(err, errlen, "sampler: top_k %d is negative (0 = off)", p->top_k);
    if (!(p->top_p >= 0 && p->top_p <= 1))
        return api_einval(err, errlen, "sampler: top_p %g is outside [0, 1] (1 = off)", (double)p->top_p);
    if (!(p->min_p >= 0 && p->min_p <= 1))
        return api_einval(err, errlen, "sampler: min_p %g is outside [0, 1] (0 = off)", (double)p->min_p);
    if (!(p->repeat_penalty > 0 && isfinite(p->repeat_penalty)))
        return api_einval(err, errlen, "sampler: repeat_penalty %g must be finite and > 0 (1 = off)",
                          (double)p->repeat_penalty);
    if (p->repeat_last_n < 0)
        return api_einval(err, errlen, "sampler: repeat_last_n %d is negative", p->repeat_last_n);
    return 0;
}

int sluice_sampler_create(const sluice_model *M, const sluice_sampler_params *pp, sluice_sampler **out, char *err,
                          size_t errlen)
{
    if (!M || !out) return api_einval(err, errlen, "sluice_sampler_create: NULL %s", !M ? "model" : "out pointer");
    api_check(M, API_MODEL, "sluice_sampler_create");
    sluice_sampler_params p;
    if (pp) p = *pp;
    else sluice_sampler_params_default(&p);
    int rc = check_sampler_params(&p, err, errlen);
    if (rc) return rc;
    sl_sampler_params sp = { p.temp, p.top_k, p.top_p, p.min_p, p.repeat_penalty, p.repeat_last_n, p.seed };
    sluice_sampler *S = calloc(1, sizeof *S);
    if (!S) { snprintf(err, errlen, "out of memory"); return -ENOMEM; }
    S->n_vocab = M->m->cfg.vocab;
    S->M = M;
    S->s = sl_sampler_create(&sp, S->n_vocab);
    S->logits = malloc((size_t)S->n_vocab * sizeof *S->logits);
    bool ok = S->s && S->logits;
    for (int32_t id = 0; ok && p.ignore_eog && id < S->n_vocab; id++) {
        if (!sl_vocab_is_eog(M->voc, id)) continue;
        int32_t *ne = realloc(S->eog_ids, (size_t)(S->n_eog + 1) * sizeof *ne);
        if (!ne) { ok = false; break; }
        S->eog_ids = ne;
        S->eog_ids[S->n_eog++] = id;
    }
    if (!ok) {
        sl_sampler_free(S->s);
        free(S->logits);
        free(S->eog_ids);
        free(S);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    api_track(S, API_SAMPLER);
    *out = S;
    return 0;
}

sluice_sampler *sluice_sampler_new(const sluice_model *M, const sluice_sampler_params *pp)
{
    sluice_sampler *S = NULL;
    char err[SL_ERRLEN];
    int rc = sluice_sampler_create(M, pp, &S, err, sizeof err);
    if (rc) errno = -rc;
    return S;
}

void sluice_sampler_free(sluice_sampler *S)
{
    if (!S) return;
    api_untrack(S, API_SAMPLER, "sluice_sampler_free");
    api_grammar_sampler_free(S);
    sl_sampler_free(S->s);
    free(S->logits);
    free(S->eog_ids);
    free(S);
}

/* The sampler's working copy of one row of logits, end-of-generation tokens masked when the sampler
 * ignores them, tokens its grammar does not allow masked.  0, or -EDOM (no token allowed), -ENOMEM. */
static int sampler_load(sluice_sampler *S, const float *row)
{
    memcpy(S->logits, row, (size_t)S->n_vocab * sizeof *S->logits);
    for (int i = 0; i < S->n_eog; i++) S->logits[S->eog_ids[i]] = -INFINITY;
    return api_grammar_mask(S);
}

int32_t sluice_sample(sluice_sampler *S, sluice_ctx *C)
{
    if (!S || !CTX_OK(C, "sluice_sample")) return -EINVAL;
    api_check(S, API_SAMPLER, "sluice_sample");
    if (!C->logits_valid || S->n_vocab != C->M->m->cfg.vocab) return -EINVAL;
    int rc = sampler_load(S, sl_ctx_last_logits(C->c));
    if (rc) return rc;
    C->n_sampled++;
    int32_t id = sl_sample(S->s, S->logits, C->toks, C->n_toks);
    api_grammar_accept(S, id);
    return id;
}

const float *sluice_sampler_logits(const sluice_sampler *S)
{
    if (!S) return NULL;
    api_check(S, API_SAMPLER, "sluice_sampler_logits");
    return S->logits;
}

/* What sluice_generate reports: whole UTF-8 characters of each token's piece, and the stop rules. */
typedef struct emitter {
    sl_utf8_stream us;
    sluice_token_fn cb;
    void *user;
    int n, n_max;
} emitter;

/* Report token id; true when generation must stop here (C->stop says why). */
static bool emit(sluice_ctx *C, emitter *e, int32_t id)
{
    char piece[512], text[512 + 8];
    e->n++;
    C->n_gen++;
    bool eog = sl_vocab_is_eog(C->M->voc, id);
    size_t len = 0;
    if (!eog) {
        int pl = sl_token_piece(C->M->voc, id, piece, sizeof piece);
        if (pl > (int)sizeof piece) pl = sizeof piece;
        if (pl > 0) len = sl_utf8_stream_feed(&e->us, piece, (size_t)pl, text);
    }
    text[len] = 0;
    if (e->cb && e->cb(e->user, id, text, len)) { C->stop = SLUICE_STOP_CALLBACK; return true; }
    if (eog) { C->stop = SLUICE_STOP_EOG; return true; }
    if (e->n == e->n_max) return true;
    if (C->n_toks >= C->c->n_ctx) { C->stop = SLUICE_STOP_CTX_FULL; return true; }
    return false;
}

/* Keep the first n tokens of the context and make `row` (the logits after token n-1, from the
 * last pass: the context's own rows or a batch's) the current ones: the state one-token decoding
 * would be in. */
static void keep_prefix(sluice_ctx *C, int n, const float *row)
{
    const size_t V = (size_t)C->M->m->cfg.vocab;
    if (row != C->c->logits) memmove(C->c->logits, row, V * sizeof(float));
    C->c->n_logits = 1;
    C->n_toks = n;
    C->logits_valid = true;
    /* later rows stay in the cache, never read (attention stops at n_past); the rollback is at most
     * the pass's drafts, which a sliding-window ring's slack keeps (runtime/engine/kvcache.h).  Were
     * it refused, the context starts empty rather than read lost rows: sampling then fails. */
    if (sl_ctx_rewind(C->c, n)) {
        snprintf(C->err, sizeof C->err, "%s", C->c->err);
        sl_ctx_reset(C->c);
        C->n_toks = 0;
        C->logits_valid = false;
    }
}

/* Contract: api_internal.h. */
int api_draft_len(const sluice_ctx *C, const sl_draft_stats *timing, int rows, int n_left)
{
    int k = C->M->draft_fixed ? C->M->draft_k
                              : sl_draft_choose_k(&C->dstats, timing, C->M->draft_k, C->M->stream, C->n_passes);
    int room = C->c->n_ctx - C->n_toks - 1;   /* positions after the token being evaluated */
    if (k > room) k = room;
    if (k > rows - 1) k = rows - 1;     /* the verifying pass keeps a logits row per position */
    if (k > n_left - 1) k = n_left - 1; /* drafts beyond the tokens still wanted are never reported */
    return k > 0 ? k : 0;
}

/* Contract: api_internal.h. */
int api_draft(sluice_ctx *C, int32_t id, int k, int32_t *out)
{
    if (C->n_toks + 1 > C->cap) return -ENOSPC;
    C->toks[C->n_toks] = id;   /* the history the drafter looks in includes id */
    if (!k) return 0;
    if (C->dctx) return api_draft_propose(C, C->toks, C->n_toks + 1, k, out);
    return sl_draft_ngram(C->toks, C->n_toks + 1, C->lookup, C->n_lookup, k, out);
}

/* Contract: api_internal.h.  The rows are read before keep_prefix moves one of them: for a
 * context's own pass they are its logits, which keep_prefix overwrites from row 0. */
int api_verify(sluice_ctx *C, sluice_sampler *S, int base, int nd, const float *rows, uint64_t t0_ns,
               api_verify_emit_fn report, void *user, int32_t *next)
{
    const size_t V = (size_t)C->M->m->cfg.vocab;
    const int32_t *drafts = C->toks + base + 1;
    bool stopped = false;
    int i = 0, err = 0;
    C->n_passes++;
    C->n_drafted += (uint64_t)nd;
    for (; i < nd; i++) {   /* row i: the logits after the pass's token i */
        bool ok;
        if ((err = sampler_load(S, rows + (size_t)i * V))) break;
        C->n_sampled++;
        int32_t t = sl_sample_verify(S->s, S->logits, C->toks, base + i + 1, drafts[i], &ok);
        api_grammar_accept(S, t);
        if (!ok) { *next = t; break; }
        C->n_accepted++;
        if (!report) continue;
        /* emit's full-context rule counts the tokens one-token decoding would have evaluated before
         * drafts[i] (base + i + 1), not the whole pass (keep_prefix sets the count either way) */
        C->n_toks = base + i + 1;
        if (report(user, drafts[i])) { stopped = true; break; }   /* drafts[i] reported, not kept (as one-token decoding) */
    }
    if (i == nd && !err) {   /* every draft accepted: the last row gives the next token */
        if (!(err = sampler_load(S, rows + (size_t)nd * V))) {
            C->n_sampled++;
            *next = sl_sample(S->s, S->logits, C->toks, base + nd + 1);
            api_grammar_accept(S, *next);
        }
    }
    int accepted = stopped ? i + 1 : i;
    keep_prefix(C, base + i + 1, rows + (size_t)i * V);
    sl_draft_stats_update(&C->dstats, nd + 1, (sl_now_ns() - t0_ns) / 1e9, nd, accepted);
    if (err) return err;
    return stopped ? -1 : accepted;
}

/* What a negative sluice_sample means, for C->err. */
static const char *sample_error(int rc)
{
    return rc == -EDOM ? "the sampler's grammar allows no token here" : rc == -ENOMEM ? "out of memory"
                                                                           : "no logits to sample from (evaluate a prompt first)";
}

typedef struct emit_ctx { sluice_ctx *C; emitter *e; } emit_ctx;
static bool emit_verified(void *user, int32_t id)
{
    emit_ctx *ec = user;
    return emit(ec->C, ec->e, id);
}

/* One speculative step: evaluate id plus drafts in one pass, report what the target accepts, and
 * set *next to the token after them (sampled, not yet reported).  Returns 1 when generation stops,
 * 0 to go on, -errno on error. */
static int spec_step(sluice_ctx *C, sluice_sampler *S, emitter *e, int32_t id, int32_t *next)
{
    int32_t batch[65];
    const int base = C->n_toks;
    /* the verifying pass must be one batch whose every row keeps its logits (a context made for
     * sluice_batch has n_batch 1 and one logits row: it cannot verify drafts on its own) */
    int rows = C->c->n_batch < C->c->logits_cap ? C->c->n_batch : C->c->logits_cap;
    int nd = api_draft(C, id, api_draft_len(C, &C->dstats, rows, e->n_max - e->n), batch + 1);
    if (nd < 0) return nd;
    batch[0] = id;
    uint64_t t0 = sl_now_ns();
    int rc = eval_checked(C, batch, nd + 1, false);
    if (rc) return rc;
    const float *rows0 = C->c->logits + (size_t)(C->c->n_logits - nd - 1) * C->M->m->cfg.vocab;
    emit_ctx ec = { C, e };
    int acc = api_verify(C, S, base, nd, rows0, t0, emit_verified, &ec, next);
    if (acc < -1) {
        snprintf(C->err, sizeof C->err, "generate: %s", acc == -EDOM ? "the grammar allows no token here" : "out of memory");
        return acc;
    }
    return acc < 0 ? 1 : 0;
}

int sluice_generate(sluice_ctx *C, sluice_sampler *S, int n_max, sluice_token_fn cb, void *user)
{
    if (!CTX_OK(C, "sluice_generate")) return -EINVAL;
    if (!S || n_max < 0) {
        snprintf(C->err, sizeof C->err, "generate: %s", !S ? "NULL sampler" : "negative n_max");
        C->stop = SLUICE_STOP_ERROR;
        return -EINVAL;
    }
    api_check(S, API_SAMPLER, "sluice_generate");
    emitter e = { .cb = cb, .user = user, .n_max = n_max };
    char text[16];
    int rc = 0;
    C->stop = SLUICE_STOP_LIMIT;
    int32_t id = n_max > 0 ? sluice_sample(S, C) : 0;
    if (id < 0) { rc = id; snprintf(C->err, sizeof C->err, "generate: %s", sample_error(id)); }
    while (!rc && e.n < n_max) {
        if (C->cancel) { rc = -ECANCELED; snprintf(C->err, sizeof C->err, "interrupted"); break; }
        if (emit(C, &e, id)) break;
        if (C->M->draft_k > 0) {
            int r = spec_step(C, S, &e, id, &id);
            if (r) { rc = r < 0 ? r : 0; break; }
            continue;
        }
        if ((rc = sluice_eval(C, &id, 1))) break;
        C->n_passes++;
        id = sluice_sample(S, C);
        if (id < 0) { rc = id; snprintf(C->err, sizeof C->err, "generate: %s", sample_error(id)); }
    }
    if (rc) C->stop = rc == -ECANCELED ? SLUICE_STOP_CANCELED : SLUICE_STOP_ERROR;
    size_t len = sl_utf8_stream_flush(&e.us, text);
    text[len] = 0;
    if (len && cb) cb(user, -1, text, len);
    return rc ? rc : e.n;
}

int sluice_ctx_set_lookup(sluice_ctx *C, const int32_t *ids, int n)
{
    if (!CTX_OK(C, "sluice_ctx_set_lookup") || n < 0 || (n > 0 && !ids)) return -EINVAL;
    for (int i = 0; i < n; i++)   /* a draft outside the vocabulary would make the verifying pass fail */
        if (ids[i] < 0 || ids[i] >= C->M->m->cfg.vocab) {
            snprintf(C->err, sizeof C->err, "lookup: token %d is id %d, outside the vocabulary [0, %d)", i, ids[i],
                     C->M->m->cfg.vocab);
            return -EINVAL;
        }
    int32_t *copy = NULL;
    if (n > 0) {
        copy = malloc((size_t)n * sizeof *copy);
        if (!copy) return -ENOMEM;
        memcpy(copy, ids, (size_t)n * sizeof *copy);
    }
    free(C->lookup);
    C->lookup = copy;
    C->n_lookup = n;
    return 0;
}

/* ---- sessions ----------------------------------------------------------------------------------- */

int sluice_session_save_flags(sluice_ctx *C, const char *path, const void *extra, size_t extra_len, unsigned flags,
                              sluice_session_stats *st, char *err, size_t errlen)
{
    if (!C || !path || (extra_len && !extra) || (flags & ~(unsigned)SLUICE_SESSION_OVERWRITE))
        return api_einval(err, errlen, "session save: %s", !C ? "NULL context" : !path ? "NULL path"
                          : extra_len ? "NULL extra with a non-zero length" : "unknown flags");
    api_check(C, API_CTX, "sluice_session_save");
    int rc = api_model_lock(C->M, err, errlen);
    if (rc) return rc;
    uint64_t fp;
    sl_session_info info;
    sl_session_opts o = sl_session_default_opts();
    o.overwrite = flags & SLUICE_SESSION_OVERWRITE;
    if (!(rc = sluice__fingerprint(C->M, &fp, err, errlen)))
        rc = sl_session_save(path, C->c, fp, C->toks, C->n_toks, C->logits_valid ? sl_ctx_last_logits(C->c) : NULL, extra,
                             extra_len, &o, &info, err, errlen);
    api_model_unlock(C->M);
    if (!rc && st) *st = (sluice_session_stats){ info.n_tokens, info.raw_bytes, info.file_bytes, info.ns / 1e9 };
    return rc;
}

int sluice_session_save(sluice_ctx *C, const char *path, const void *extra, size_t extra_len, sluice_session_stats *st,
                        char *err, size_t errlen)
{
    return sluice_session_save_flags(C, path, extra, extra_len, 0, st, err, errlen);
}

int sluice_session_load(sluice_ctx *C, const char *path, void **extra, size_t *extra_len, sluice_session_stats *st,
                        char *err, size_t errlen)
{
    if (!C || !path) return api_einval(err, errlen, "session load: NULL %s", !C ? "context" : "path");
    api_check(C, API_CTX, "sluice_session_load");
    if (extra) *extra = NULL;
    if (extra_len) *extra_len = 0;
    int rc = api_model_lock(C->M, err, errlen);
    if (rc) return rc;
    uint64_t fp;
    int32_t *toks = NULL;
    int n = 0;
    bool has_logits = false;
    sl_session_info info;
    if (!(rc = sluice__fingerprint(C->M, &fp, err, errlen)))
        rc = sl_session_load(path, C->c, fp, &toks, &n, C->c->logits, &has_logits, extra, extra_len, &info, err,
                             errlen);
    api_model_unlock(C->M);
    if (rc) {
        if (C->c->n_past != C->n_toks) { C->n_toks = C->c->n_past; C->logits_valid = false; }
        return rc;
    }
    memcpy(C->toks, toks, (size_t)n * sizeof *toks);   /* n <= n_ctx == cap: checked by the loader */
    free(toks);
    C->n_toks = n;
    C->c->n_logits = 1;   /* the loaded logits are row 0 */
    C->logits_valid = has_logits && n > 0;
    if (st) *st = (sluice_session_stats){ n, info.raw_bytes, info.file_bytes, info.ns / 1e9 };
    return 0;
}

/* ---- figures ----------------------------------------------------------------------------------- */

static uint64_t vm_hwm(void) { return sl_peak_rss(); }

void sluice_ctx_moe_trace(sluice_ctx *C, void *f)
{
    if (!CTX_OK(C, "sluice_ctx_moe_trace")) return;
    C->c->moe_trace = f;
}

void sluice_get_stats(const sluice_model *M, const sluice_ctx *C, sluice_stats *o)
{
    if (!o) return;
    memset(o, 0, sizeof *o);
    if (!M) return;
    api_check(M, API_MODEL, "sluice_get_stats");
    if (C) api_check(C, API_CTX, "sluice_get_stats");
    o->peak_rss = vm_hwm();
    o->resident_weight_bytes = M->m->resident_bytes;
    o->backend = "resident";
    if (M->stream) {
        sl_stream_stats st;
        sl_stream_get_stats(M->stream, &st);
        o->stream_bytes_read = st.io.bytes_read;
        o->stream_reads = st.io.reads_issued;
        o->stream_wait_s = st.wait_ns / 1e9;
        o->stream_compute_s = st.compute_ns / 1e9;
        o->backend = sl_stream_backend(M->stream);
        o->stream_embd_rows = st.embd_rows;
        o->stream_expert_bytes = st.expert_bytes;
        o->stream_expert_pieces = st.expert_pieces;
        o->stream_expert_wants = st.expert_wants;
        o->expert_hits = st.cache.hits;
        o->expert_misses = st.cache.misses;
        o->expert_cache_entries = st.cache.entries;
        o->expert_cache_bytes = (uint64_t)st.cache.entries * st.cache.entry_bytes;
        o->expert_prefetch_units = st.prefetch_units;
        o->expert_prefetch_used = st.prefetch_used;
        o->expert_prefetch_bytes = st.prefetch_bytes;
        o->expert_prefetch_wasted = st.prefetch_wasted;
        o->expert_prefetch_failed = st.prefetch_failed;
        o->stream_pieces_per_pass = sl_stream_n_pieces(M->stream);
        o->stream_max_piece = sl_stream_max_piece(M->stream);
        o->stream_pass_bytes = sl_stream_pass_bytes(M->stream);
        o->stream_buffer_bytes = sl_stream_mem_bytes(M->stream);
    }
    if (C) {
        o->kv_bytes = sl_kv_mem_bytes(C->c->kv);
        o->n_past = C->n_toks;
        o->n_ctx = C->c->n_ctx;
        o->n_eval = C->n_eval;
        o->n_sampled = C->n_sampled;
        o->eval_s = C->eval_ns / 1e9;
        o->n_passes = C->n_passes;
        o->n_drafted = C->n_drafted;
        o->n_accepted = C->n_accepted;
        o->n_gen_tokens = C->n_gen;
        o->draft_max = M->draft_k;
        o->drafter = !M->draft_k ? "" : C->dctx ? "model" : "ngram";
        o->draft_s = C->draft_ns / 1e9;
        o->n_draft_evals = C->n_draft_evals;
    }
}

int sluice_page_cache(const sluice_model *M, uint64_t *resident, uint64_t *file_bytes)
{
    if (!M || !resident || !file_bytes) return -EINVAL;
    return sl_page_cache_bytes(M->m->path, resident, file_bytes);
}
