/* runtime/api/api_ctx.c — include/sluice.h, part 2: contexts, evaluation, sampling, generation,
 * sessions, figures. */
#include "loader/pagecache.h"
#include "runtime/api/api_internal.h"

#include <errno.h>
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
    sluice_ctx *C = calloc(1, sizeof *C);
    if (!C) { snprintf(err, errlen, "out of memory"); return -ENOMEM; }
    C->M = M;
    sl_ctx_params cp = { .n_ctx = M->n_ctx, .n_batch = M->n_batch, .kv_type = M->kv_type, .kv_spill_dir = M->spill_dir };
    int rc = sl_ctx_create(M->m, &cp, M->pool, &C->c, err, errlen);
    if (rc) { free(C); return rc; }
    if (M->stream) C->c->src = sl_stream_source(M->stream);
    C->c->cancel = &C->cancel;
    C->cap = M->n_ctx;
    C->toks = malloc((size_t)C->cap * sizeof *C->toks);
    if (!C->toks) {
        sluice_ctx_free(C);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    *out = C;
    return 0;
}

void sluice_ctx_free(sluice_ctx *C)
{
    if (!C) return;
    sl_ctx_free(C->c);
    free(C->toks);
    free(C);
}

const float *sluice_logits(const sluice_ctx *C) { return C->logits_valid ? C->c->logits : NULL; }
const int32_t *sluice_tokens(const sluice_ctx *C, int *n) { if (n) *n = C->n_toks; return C->toks; }
int sluice_n_past(const sluice_ctx *C) { return C->n_toks; }
int sluice_n_ctx(const sluice_ctx *C) { return C->c->n_ctx; }
const char *sluice_ctx_error(const sluice_ctx *C) { return C->err; }
void sluice_cancel(sluice_ctx *C) { C->cancel = 1; }
void sluice_uncancel(sluice_ctx *C) { C->cancel = 0; }
int sluice_stop_reason(const sluice_ctx *C) { return C->stop; }

int sluice_rewind(sluice_ctx *C, int n)
{
    if (n < 0 || n > C->n_toks) return -EINVAL;
    if (n != C->n_toks) C->logits_valid = false;
    C->n_toks = n;
    C->c->n_past = n;   /* rows past n stay in the cache but are never read (attention stops at n_past) */
    return 0;
}

void sluice_reset(sluice_ctx *C) { sluice_rewind(C, 0); }

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
    ps->done_bytes += w->nbytes;
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

int sluice_eval(sluice_ctx *C, const int32_t *t, int n)
{
    sl_ctx *c = C->c;
    C->err[0] = 0;
    if (n < 0 || (n > 0 && !t)) { snprintf(C->err, sizeof C->err, "eval: bad arguments"); return -EINVAL; }
    if (n == 0) return 0;
    if (C->n_toks + n > c->n_ctx) {
        snprintf(C->err, sizeof C->err, "context full: %d positions used + %d new > -c %d", C->n_toks, n, c->n_ctx);
        return -ENOSPC;
    }
    const sluice_params *p = &C->M->p;
    bool show = p->progress && n > 1;
    prog_src ps = { .inner = c->src, .p = p, .total = n };
    if (show && c->src) {
        ps.base = (sl_wsource){ &ps, prog_matmul, prog_row, prog_errmsg, prog_reset };
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
    C->err[0] = 0;
    if (n < 1 || !t) { snprintf(C->err, sizeof C->err, "prefill: nothing to evaluate"); return -EINVAL; }
    if (n > C->c->n_ctx) {
        snprintf(C->err, sizeof C->err, "%d tokens are more than the context of %d (raise -c)", n, C->c->n_ctx);
        return -ENOSPC;
    }
    int lcp = 0;
    while (lcp < n && lcp < C->n_toks && C->toks[lcp] == t[lcp]) lcp++;
    if (lcp == n && C->n_toks == n && C->logits_valid) return 0;
    if (lcp == n) lcp = n - 1;   /* everything is cached but the logits are not current: redo the last token */
    sluice_rewind(C, lcp);
    int rc = sluice_eval(C, t + lcp, n - lcp);
    return rc ? rc : n - lcp;
}

/* ---- sampling and generation ------------------------------------------------------------------- */

void sluice_sampler_params_default(sluice_sampler_params *p)
{
    sl_sampler_params d = sl_sampler_defaults();
    *p = (sluice_sampler_params){ d.temp, d.top_k, d.top_p, d.min_p, d.repeat_penalty, d.repeat_last_n, d.seed };
}

sluice_sampler *sluice_sampler_new(const sluice_model *M, const sluice_sampler_params *pp)
{
    sluice_sampler_params p;
    if (pp) p = *pp;
    else sluice_sampler_params_default(&p);
    sl_sampler_params sp = { p.temp, p.top_k, p.top_p, p.min_p, p.repeat_penalty, p.repeat_last_n, p.seed };
    sluice_sampler *S = calloc(1, sizeof *S);
    if (!S) return NULL;
    S->n_vocab = M->m->cfg.vocab;
    S->s = sl_sampler_create(&sp, S->n_vocab);
    S->logits = malloc((size_t)S->n_vocab * sizeof *S->logits);
    if (!S->s || !S->logits) { sluice_sampler_free(S); return NULL; }
    return S;
}

void sluice_sampler_free(sluice_sampler *S)
{
    if (!S) return;
    sl_sampler_free(S->s);
    free(S->logits);
    free(S);
}

int32_t sluice_sample(sluice_sampler *S, sluice_ctx *C)
{
    if (!C->logits_valid || S->n_vocab != C->M->m->cfg.vocab) return -EINVAL;
    memcpy(S->logits, C->c->logits, (size_t)S->n_vocab * sizeof *S->logits);
    C->n_sampled++;
    return sl_sample(S->s, S->logits, C->toks, C->n_toks);
}

const float *sluice_sampler_logits(const sluice_sampler *S) { return S->logits; }

int sluice_generate(sluice_ctx *C, sluice_sampler *S, int n_max, sluice_token_fn cb, void *user)
{
    sl_utf8_stream us = { 0 };
    char piece[512], text[512 + 8];
    int n = 0, rc = 0;
    C->stop = SLUICE_STOP_LIMIT;
    while (n < n_max) {
        if (C->cancel) { rc = -ECANCELED; snprintf(C->err, sizeof C->err, "interrupted"); break; }
        int32_t id = sluice_sample(S, C);
        if (id < 0) { rc = id; snprintf(C->err, sizeof C->err, "generate: no logits to sample from (evaluate a prompt first)"); break; }
        n++;
        bool eog = sl_vocab_is_eog(C->M->voc, id);
        size_t len = 0;
        if (!eog) {
            int pl = sl_token_piece(C->M->voc, id, piece, sizeof piece);
            if (pl > (int)sizeof piece) pl = sizeof piece;
            if (pl > 0) len = sl_utf8_stream_feed(&us, piece, (size_t)pl, text);
        }
        text[len] = 0;
        if (cb && cb(user, id, text, len)) { C->stop = SLUICE_STOP_CALLBACK; break; }
        if (eog) { C->stop = SLUICE_STOP_EOG; break; }
        if (n == n_max) break;
        if (C->n_toks >= C->c->n_ctx) { C->stop = SLUICE_STOP_CTX_FULL; break; }
        if ((rc = sluice_eval(C, &id, 1))) break;
    }
    if (rc) C->stop = rc == -ECANCELED ? SLUICE_STOP_CANCELED : SLUICE_STOP_ERROR;
    size_t len = sl_utf8_stream_flush(&us, text);
    text[len] = 0;
    if (len && cb) cb(user, -1, text, len);
    return rc ? rc : n;
}

/* ---- sessions ----------------------------------------------------------------------------------- */

int sluice_session_save(sluice_ctx *C, const char *path, const void *extra, size_t extra_len, sluice_session_stats *st,
                        char *err, size_t errlen)
{
    uint64_t fp;
    int rc = sluice__fingerprint(C->M, &fp, err, errlen);
    if (rc) return rc;
    sl_session_info info;
    rc = sl_session_save(path, C->c, fp, C->toks, C->n_toks, C->logits_valid ? C->c->logits : NULL, extra, extra_len,
                         NULL, &info, err, errlen);
    if (!rc && st) *st = (sluice_session_stats){ info.n_tokens, info.raw_bytes, info.file_bytes, info.ns / 1e9 };
    return rc;
}

int sluice_session_load(sluice_ctx *C, const char *path, void **extra, size_t *extra_len, sluice_session_stats *st,
                        char *err, size_t errlen)
{
    uint64_t fp;
    int rc = sluice__fingerprint(C->M, &fp, err, errlen);
    if (rc) return rc;
    int32_t *toks = NULL;
    int n = 0;
    bool has_logits = false;
    sl_session_info info;
    if (extra) *extra = NULL;
    if (extra_len) *extra_len = 0;
    rc = sl_session_load(path, C->c, fp, &toks, &n, C->c->logits, &has_logits, extra, extra_len, &info, err, errlen);
    if (rc) {
        if (C->c->n_past != C->n_toks) { C->n_toks = C->c->n_past; C->logits_valid = false; }
        return rc;
    }
    memcpy(C->toks, toks, (size_t)n * sizeof *toks);   /* n <= n_ctx == cap: checked by the loader */
    free(toks);
    C->n_toks = n;
    C->logits_valid = has_logits && n > 0;
    if (st) *st = (sluice_session_stats){ n, info.raw_bytes, info.file_bytes, info.ns / 1e9 };
    return 0;
}

/* ---- figures ----------------------------------------------------------------------------------- */

static uint64_t vm_hwm(void) { return sl_peak_rss(); }

void sluice_get_stats(const sluice_model *M, const sluice_ctx *C, sluice_stats *o)
{
    memset(o, 0, sizeof *o);
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
    }
    if (C) {
        o->kv_bytes = sl_kv_mem_bytes(C->c->kv);
        o->n_past = C->n_toks;
        o->n_ctx = C->c->n_ctx;
        o->n_eval = C->n_eval;
        o->n_sampled = C->n_sampled;
        o->eval_s = C->eval_ns / 1e9;
    }
}
