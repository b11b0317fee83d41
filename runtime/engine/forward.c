/* runtime/engine/forward.c — the llama forward pass, block-major over a batch of positions.
 *
 * Per block l, for the nb positions p = n_past .. n_past+nb-1 of the batch:
 *   xb = rmsnorm(x) * attn_norm
 *   q, k, v = Wq xb, Wk xb, Wv xb;  rope(q, k) at p;  append k, v to the cache at p
 *   att_out = softmax(q k^T / sqrt(head_dim), causal) v   (GQA: heads share kv heads)
 *   x += Wo att_out
 *   xb = rmsnorm(x) * ffn_norm
 *   x += W_down (silu(W_gate xb) * W_up xb)
 * then logits = W_out rmsnorm(x_last) * output_norm.
 */
#include "runtime/engine/forward.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/f16.h"
#include "kernels/ops.h"
#include "kernels/types.h"

/* Per-thread attention scratch: scores of one GQA group over the context, plus one head row
 * decoded from q8_0.  sl_ctx_bytes and the planner's act_bytes count the same. */
static size_t att_scratch_floats(const sl_config *cf, int n_ctx)
{
    return (size_t)(cf->n_heads / cf->n_kv_heads) * (size_t)n_ctx + (size_t)cf->head_dim;
}

/* Rows of logits a context keeps: the last logits_max positions of a batch (at least 1, at most a
 * batch). */
static size_t logit_rows(const sl_ctx_params *p)
{
    int n = p->logits_max > 1 ? p->logits_max : 1;
    return (size_t)(n < p->n_batch ? n : p->n_batch > 0 ? p->n_batch : 1);
}

size_t sl_ctx_bytes(const sl_config *c, const sl_ctx_params *p, int n_threads)
{
    size_t B = (size_t)p->n_batch, qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    size_t f = B * (2 * (size_t)c->dim + 2 * qd + 2 * kvd + 2 * (size_t)c->ffn_dim) +
               (size_t)n_threads * att_scratch_floats(c, p->n_ctx) + logit_rows(p) * (size_t)c->vocab;
    return sl_kv_bytes_for(c, p->n_ctx, p->kv_type, p->kv_spill_dir != NULL) + f * sizeof(float);
}

void sl_ctx_free(sl_ctx *c)
{
    if (!c) return;
    sl_kv_free(c->kv);
    free(c->x); free(c->xb); free(c->q); free(c->k); free(c->v); free(c->att_out);
    free(c->hb); free(c->hb2); free(c->att); free(c->logits);
    free(c);
}

void sl_ctx_reset(sl_ctx *c) { c->n_past = 0; }

int sl_ctx_create(sl_model *m, const sl_ctx_params *p, sl_pool *pool, sl_ctx **out, char *err, size_t errlen)
{
    const sl_config *cf = &m->cfg;
    if (p->n_ctx < 1 || p->n_batch < 1) {
        snprintf(err, errlen, "context: bad parameters (n_ctx %d, n_batch %d)", p->n_ctx, p->n_batch);
        return -EINVAL;
    }
    sl_ctx *c = calloc(1, sizeof *c);
    if (!c) return -ENOMEM;
    c->m = m;
    c->pool = pool;
    c->n_ctx = p->n_ctx;
    c->n_batch = p->n_batch < p->n_ctx ? p->n_batch : p->n_ctx;
    c->kv_type = p->kv_type;
    c->logits_max = (int)logit_rows(p);
    int rc = sl_kv_create(cf, c->n_ctx, p->kv_type, p->kv_spill_dir, &c->kv, err, errlen);
    if (rc) { free(c); return rc; }
    size_t B = (size_t)c->n_batch, qd = (size_t)cf->n_heads * cf->head_dim, kvd = (size_t)cf->n_kv_heads * cf->head_dim;
    int nt = sl_pool_size(pool);
    c->x = malloc(B * cf->dim * sizeof(float));
    c->xb = malloc(B * cf->dim * sizeof(float));
    c->q = malloc(B * qd * sizeof(float));
    c->att_out = malloc(B * qd * sizeof(float));
    c->k = malloc(B * kvd * sizeof(float));
    c->v = malloc(B * kvd * sizeof(float));
    c->hb = malloc(B * cf->ffn_dim * sizeof(float));
    c->hb2 = malloc(B * cf->ffn_dim * sizeof(float));
    c->att = malloc((size_t)nt * att_scratch_floats(cf, c->n_ctx) * sizeof(float));
    c->logits = calloc((size_t)c->logits_max * (size_t)cf->vocab, sizeof(float));
    if (!c->x || !c->xb || !c->q || !c->att_out || !c->k || !c->v || !c->hb || !c->hb2 || !c->att || !c->logits) {
        snprintf(err, errlen, "context: out of memory allocating %zu MiB of scratch for -b %d",
                 sl_ctx_bytes(cf, p, nt) >> 20, c->n_batch);
        sl_ctx_free(c);
        return -ENOMEM;
    }
    sl_ctx_params q = *p;
    q.n_batch = c->n_batch;
    c->mem_bytes = sl_ctx_bytes(cf, &q, nt);
    *out = c;
    return 0;
}

/* ---- weights ---------------------------------------------------------------------------------- */

static int wmat(sl_ctx *c, const sl_weight *w, const float *x, int nb, float *out, int64_t stride)
{
    if (w->data) {
        sl_matmul(c->pool, w->type, w->data, w->rows, w->cols, w->row_bytes, x, nb, out, stride);
        return 0;
    }
    if (!c->src) {
        snprintf(c->err, sizeof c->err, "forward: weight %s is not resident and no stream is attached", w->name);
        return -EINVAL;
    }
    int rc = c->src->matmul(c->src->self, w, x, nb, out, stride);
    if (rc) snprintf(c->err, sizeof c->err, "%s", c->src->errmsg(c->src->self));
    return rc;
}

static int embed(sl_ctx *c, int32_t tok, float *out)
{
    const sl_weight *w = &c->m->tok_embd;
    if (tok < 0 || tok >= c->m->cfg.vocab) {
        snprintf(c->err, sizeof c->err, "forward: token id %d out of range [0, %d)", tok, c->m->cfg.vocab);
        return -EINVAL;
    }
    if (w->data) {
        sl_type_get(w->type)->dequant((const unsigned char *)w->data + (size_t)tok * w->row_bytes, out, w->cols);
        return 0;
    }
    if (!c->src) {
        snprintf(c->err, sizeof c->err, "forward: embedding table is not resident and no stream is attached");
        return -EINVAL;
    }
    int rc = c->src->row(c->src->self, w, tok, out);
    if (rc) snprintf(c->err, sizeof c->err, "%s", c->src->errmsg(c->src->self));
    return rc;
}

/* ---- attention -------------------------------------------------------------------------------- */

typedef struct att_job {
    sl_ctx *c;
    int layer, nb, p0;
} att_job;

/* One (position, kv head) unit per iteration: the grp query heads that share a kv head attend
 * together, so each cached K/V row is read from memory once for all of them (sl_attn_heads).
 * Units are split evenly across threads; a head's result does not depend on the split. */
static void attention_worker(void *arg, int ith, int nth)
{
    const att_job *j = arg;
    sl_ctx *c = j->c;
    const sl_config *cf = &c->m->cfg;
    const int hd = cf->head_dim, grp = cf->n_heads / cf->n_kv_heads;
    const float scale = 1.0f / sqrtf((float)hd);
    float *att = c->att + (size_t)ith * att_scratch_floats(cf, c->n_ctx);
    float *tmp = att + (size_t)grp * c->n_ctx;
    const int units = j->nb * cf->n_kv_heads;
    for (int u = ith; u < units; u += nth) {
        int b = u / cf->n_kv_heads, kh = u % cf->n_kv_heads;
        int type;
        size_t stride;
        const void *k = sl_kv_k_head(c->kv, j->layer, kh, &type, &stride);
        const void *v = sl_kv_v_head(c->kv, j->layer, kh, &type, &stride);
        size_t off = (size_t)b * cf->n_heads * hd + (size_t)kh * grp * hd;
        sl_attn_heads(c->q + off, grp, k, v, type, stride, j->p0 + b + 1, hd, scale, att, tmp, c->att_out + off);
    }
}

/* ---- one batch --------------------------------------------------------------------------------
 * eval_batch runs positions p0 .. p0+nb-1 through every block; each step below is one line of the
 * pass described at the top of this file, over the whole batch. */

/* xb[b] = rmsnorm(x[b]) * w for every position of the batch. */
static void norm_batch(sl_ctx *c, const float *w, int nb)
{
    const sl_config *cf = &c->m->cfg;
    for (int b = 0; b < nb; b++)
        sl_rmsnorm(c->xb + (size_t)b * cf->dim, c->x + (size_t)b * cf->dim, w, cf->dim, cf->rms_eps);
}

/* x += W xb (through xb's twin: the product lands in xb, which is free by then). */
static int residual_matmul(sl_ctx *c, const sl_weight *w, const float *in, int nb)
{
    const int dim = c->m->cfg.dim;
    int rc = wmat(c, w, in, nb, c->xb, dim);
    if (rc) return rc;
    for (size_t i = 0; i < (size_t)nb * dim; i++) c->x[i] += c->xb[i];
    return 0;
}

/* Attention sub-block of block l: x += Wo attention(rope(Wq xb), rope(Wk xb), Wv xb). */
static int attention_block(sl_ctx *c, int l, int nb, int p0)
{
    const sl_config *cf = &c->m->cfg;
    sl_layer *L = &c->m->layers[l];
    const int qd = cf->n_heads * cf->head_dim, kvd = cf->n_kv_heads * cf->head_dim;
    int rc;
    if ((rc = sl_kv_layer_begin(c->kv, l, p0))) {
        snprintf(c->err, sizeof c->err, "%s", sl_kv_errmsg(c->kv));
        return rc;
    }
    norm_batch(c, L->vec[SL_VEC_ATTN_NORM], nb);
    if ((rc = wmat(c, &L->mat[SL_MAT_Q], c->xb, nb, c->q, qd)) || (rc = wmat(c, &L->mat[SL_MAT_K], c->xb, nb, c->k, kvd)) ||
        (rc = wmat(c, &L->mat[SL_MAT_V], c->xb, nb, c->v, kvd)))
        return rc;
    for (int b = 0; b < nb; b++) {
        int pos = p0 + b;
        float *q = c->q + (size_t)b * qd, *k = c->k + (size_t)b * kvd, *v = c->v + (size_t)b * kvd;
        sl_rope(q, cf->n_heads, cf->head_dim, cf->rope_dim, pos, cf->rope_base, cf->rope_scale);
        sl_rope(k, cf->n_kv_heads, cf->head_dim, cf->rope_dim, pos, cf->rope_base, cf->rope_scale);
        sl_kv_store(c->kv, l, pos, k, v);
    }
    att_job aj = { c, l, nb, p0 };
    sl_pool_run(c->pool, attention_worker, &aj);
    if ((rc = sl_kv_layer_end(c->kv, l, p0, nb))) {
        snprintf(c->err, sizeof c->err, "%s", sl_kv_errmsg(c->kv));
        return rc;
    }
    return residual_matmul(c, &L->mat[SL_MAT_O], c->att_out, nb);
}

/* FFN sub-block of block l: x += W_down (act(W_gate xb) * W_up xb). */
static int ffn_block(sl_ctx *c, int l, int nb)
{
    const sl_config *cf = &c->m->cfg;
    sl_layer *L = &c->m->layers[l];
    int rc;
    norm_batch(c, L->vec[SL_VEC_FFN_NORM], nb);
    if ((rc = wmat(c, &L->mat[SL_MAT_GATE], c->xb, nb, c->hb, cf->ffn_dim)) ||
        (rc = wmat(c, &L->mat[SL_MAT_UP], c->xb, nb, c->hb2, cf->ffn_dim)))
        return rc;
    sl_swiglu(c->hb, c->hb2, nb * cf->ffn_dim);
    return residual_matmul(c, &L->mat[SL_MAT_DOWN], c->hb, nb);
}

/* logits = W_out rmsnorm(x) * output_norm: for the last position only (all generation needs), or for
 * the last logits_max positions of the batch (verifying drafted tokens). */
static int lm_head(sl_ctx *c, int nb, int p0)
{
    sl_model *m = c->m;
    const sl_config *cf = &m->cfg;
    const int n_out = nb < c->logits_max ? nb : c->logits_max, first = nb - n_out;
    for (int b = 0; b < n_out; b++)
        sl_rmsnorm(c->xb + (size_t)b * cf->dim, c->x + (size_t)(first + b) * cf->dim, m->output_norm, cf->dim, cf->rms_eps);
    int rc = wmat(c, &m->output, c->xb, n_out, c->logits, cf->vocab);
    if (rc) return rc;
    c->n_logits = n_out;
    /* NaN/Inf in weights (or an overflow) would otherwise sample garbage silently: stop instead.
     * One pass over the logits per batch costs nothing next to the LM head itself. */
    for (size_t i = 0; i < (size_t)n_out * cf->vocab; i++)
        if (!isfinite(c->logits[i])) {
            snprintf(c->err, sizeof c->err, "forward: non-finite logits at position %d (token id %d): the model's "
                     "weights contain NaN/Inf or the activations overflowed", p0 + first + (int)(i / cf->vocab),
                     (int)(i % cf->vocab));
            return -EDOM;
        }
    return 0;
}

static int eval_batch(sl_ctx *c, const int32_t *tokens, int nb)
{
    const sl_config *cf = &c->m->cfg;
    const int p0 = c->n_past;
    int rc;
    for (int b = 0; b < nb; b++)
        if ((rc = embed(c, tokens[b], c->x + (size_t)b * cf->dim))) return rc;
    for (int l = 0; l < cf->n_layers; l++) {
        if (c->cancel && *c->cancel) return -ECANCELED;
        if ((rc = attention_block(c, l, nb, p0)) || (rc = ffn_block(c, l, nb))) return rc;
    }
    if (c->cancel && *c->cancel) return -ECANCELED;
    return lm_head(c, nb, p0);
}

int sl_eval(sl_ctx *c, const int32_t *tokens, int n)
{
    c->err[0] = 0;
    if (n < 0 || c->n_past + n > c->n_ctx) {
        snprintf(c->err, sizeof c->err, "context full: %d positions used + %d new > -c %d", c->n_past, n, c->n_ctx);
        return -ENOSPC;
    }
    for (int done = 0; done < n;) {
        int nb = n - done < c->n_batch ? n - done : c->n_batch;
        int rc = eval_batch(c, tokens + done, nb);
        if (rc) {
            /* an interrupted pass leaves the stream mid-schedule: restart it at block 0 so the
             * next evaluation (e.g. the next chat turn after Ctrl-C) lines up again */
            if (c->src && c->src->reset) c->src->reset(c->src->self);
            if (!c->err[0]) {
                if (rc == -ECANCELED) snprintf(c->err, sizeof c->err, "interrupted");
                else snprintf(c->err, sizeof c->err, "forward: %s", strerror(-rc));
            }
            return rc;
        }
        c->n_past += nb;
        done += nb;
    }
    return 0;
}
