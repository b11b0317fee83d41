/* runtime/engine/forward.c — the forward pass, block-major over a batch of positions.
 *
 * Per block l, for the nb positions p = n_past .. n_past+nb-1 of the batch (brackets: steps only
 * some architectures have, runtime/engine/arch.h; each is on when its tensor or hyperparameter is):
 *   x = embd[token] [* embd_scale]
 *   xb = rmsnorm(x) * attn_norm
 *   q, k, v = Wq xb [+ bq], Wk xb [+ bk], Wv xb [+ bv];  [q, k = per-head rmsnorm * q_norm, k_norm]
 *   rope(q, k) at p (adjacent pairs or neox halves, [/ rope_freqs]);  append k, v to the cache at p
 *   att_out = softmax([softcap](attn_scale q k^T), causal [, sliding window]) v   (GQA)
 *   x += Wo att_out [rmsnorm * post_attn_norm]
 *   xb = rmsnorm(x) * ffn_norm
 *   x += W_down (act(W_gate xb) * W_up xb) [rmsnorm * post_ffn_norm],  act = silu or gelu(tanh)
 * then logits = W_out rmsnorm(x_last) * output_norm [softcap].
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
#include "runtime/engine/forward_internal.h"

/* Per-thread attention scratch: scores of one GQA group over the context, plus one head row
 * decoded from q8_0.  sl_ctx_bytes and the planner's act_bytes count the same. */
static size_t att_scratch_floats(const sl_config *cf, int n_ctx)
{
    return (size_t)(cf->n_heads / cf->n_kv_heads) * (size_t)n_ctx + (size_t)cf->head_dim;
}

static size_t logits_rows(const sl_ctx_params *p, int n_batch)
{
    return p->n_logits > 0 ? (size_t)p->n_logits : p->logits_all ? (size_t)n_batch : 1;
}

/* The widest FFN hidden layer: the dense FFN's, a routed expert's or the shared expert's. */
static size_t ffn_width(const sl_config *c)
{
    int w = c->ffn_dim > c->expert_ffn ? c->ffn_dim : c->expert_ffn;
    return (size_t)(w > c->shexp_ffn ? w : c->shexp_ffn);
}

/* Bytes of the MoE scratch for B positions (moe_* of sl_ctx; 0 for a dense model). */
static size_t moe_bytes(const sl_config *c, size_t B)
{
    if (!c->n_expert) return 0;
    const size_t E = (size_t)c->n_expert, k = (size_t)c->n_expert_used;
    return B * E * sizeof(float) + B * k * (sizeof(int) + sizeof(float)) + (B * k + E + 1) * sizeof(int) +
           3 * B * (size_t)c->dim * sizeof(float) + E * SL_EXPERT_MATS * sizeof(sl_weight *);
}

size_t sl_ctx_bytes(const sl_config *c, const sl_ctx_params *p, int n_threads)
{
    size_t B = (size_t)(p->n_batch < p->n_ctx ? p->n_batch : p->n_ctx);
    size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    size_t f = B * (2 * (size_t)c->dim + 2 * qd + 2 * kvd + 2 * ffn_width(c)) +
               (size_t)n_threads * att_scratch_floats(c, p->n_ctx) + logits_rows(p, (int)B) * (size_t)c->vocab;
    sl_kv_layout lay = { p->windows, sl_ctx_ring_slack(p) };
    size_t kv = p->no_kv ? 0 : sl_kv_bytes_for(c, &lay, p->n_ctx, p->kv_type, p->kv_spill_dir != NULL);
    return kv + f * sizeof(float) + B * sizeof(sl_batch_pos) + moe_bytes(c, B);
}

void sl_ctx_free(sl_ctx *c)
{
    if (!c) return;
    sl_kv_free(c->kv);
    free(c->x); free(c->xb); free(c->q); free(c->k); free(c->v); free(c->att_out);
    free(c->hb); free(c->hb2); free(c->att); free(c->logits); free(c->bpos);
    free(c->moe_logits); free(c->moe_ids); free(c->moe_w); free(c->moe_list); free(c->moe_x); free(c->moe_y);
    free(c->moe_acc); free(c->moe_want);
    free(c);
}

void sl_ctx_reset(sl_ctx *c)
{
    c->n_past = 0;
    if (c->kv) sl_kv_reset(c->kv);
}

int sl_ctx_rewind(sl_ctx *c, int n)
{
    if (n < 0 || n > c->n_past) {
        snprintf(c->err, sizeof c->err, "rewind: %d is not in [0, %d]", n, c->n_past);
        return -EINVAL;
    }
    if (n == 0) { sl_ctx_reset(c); return 0; }
    if (c->kv && sl_kv_check(c->kv, n, 0)) {
        snprintf(c->err, sizeof c->err, "rewind to %d: %s", n, sl_kv_errmsg(c->kv));
        return -EINVAL;
    }
    c->n_past = n;   /* rows past n stay in the cache but are never read (attention stops at n_past) */
    return 0;
}

/* The model's per-block windows into win (SL_MAX_LAYERS entries). */
static void model_windows(const sl_model *m, int *win)
{
    for (int l = 0; l < m->cfg.n_layers && l < SL_MAX_LAYERS; l++) win[l] = m->layers[l].window;
}


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
    c->logits_all = p->logits_all;
    /* longrope (Phi-3-128k, Phi-3.5): llama.cpp picks the long factors when the context is longer
     * than the one trained without them (llama_model::get_rope_factors) */
    c->rope_div = m->rope_freqs ? m->rope_freqs
                : m->rope_long && c->n_ctx > cf->rope_ctx_orig ? m->rope_long : m->rope_short;
    int win[SL_MAX_LAYERS];
    model_windows(m, win);
    sl_kv_layout lay = { win, sl_ctx_ring_slack(p) };
    int rc = p->no_kv ? 0 : sl_kv_create(cf, &lay, c->n_ctx, p->kv_type, p->kv_spill_dir, &c->kv, err, errlen);
    if (rc) { free(c); return rc; }
    size_t B = (size_t)c->n_batch, qd = (size_t)cf->n_heads * cf->head_dim, kvd = (size_t)cf->n_kv_heads * cf->head_dim;
    int nt = sl_pool_size(pool);
    c->x = malloc(B * cf->dim * sizeof(float));
    c->xb = malloc(B * cf->dim * sizeof(float));
    c->q = malloc(B * qd * sizeof(float));
    c->att_out = malloc(B * qd * sizeof(float));
    c->k = malloc(B * kvd * sizeof(float));
    c->v = malloc(B * kvd * sizeof(float));
    c->hb = malloc(B * ffn_width(cf) * sizeof(float));
    c->hb2 = malloc(B * ffn_width(cf) * sizeof(float));
    c->att = malloc((size_t)nt * att_scratch_floats(cf, c->n_ctx) * sizeof(float));
    c->logits_cap = (int)logits_rows(p, c->n_batch);
    c->logits = calloc((size_t)c->logits_cap * (size_t)cf->vocab, sizeof(float));
    c->bpos = malloc(B * sizeof *c->bpos);
    bool moe_ok = true;
    if (cf->n_expert) {
        const size_t E = (size_t)cf->n_expert, k = (size_t)cf->n_expert_used;
        c->moe_logits = malloc(B * E * sizeof(float));
        c->moe_ids = malloc(B * k * sizeof(int));
        c->moe_w = malloc(B * k * sizeof(float));
        c->moe_list = malloc((B * k + E + 1) * sizeof(int));
        c->moe_x = malloc(B * cf->dim * sizeof(float));
        c->moe_y = malloc(B * cf->dim * sizeof(float));
        c->moe_acc = malloc(B * cf->dim * sizeof(float));
        c->moe_want = malloc(E * SL_EXPERT_MATS * sizeof(sl_weight *));
        moe_ok = c->moe_logits && c->moe_ids && c->moe_w && c->moe_list && c->moe_x && c->moe_y && c->moe_acc && c->moe_want;
    }
    if (!c->x || !c->xb || !c->q || !c->att_out || !c->k || !c->v || !c->hb || !c->hb2 || !c->att || !c->logits ||
        !c->bpos || !moe_ok) {
        snprintf(err, errlen, "context: out of memory allocating %zu MiB of scratch for -b %d",
                 sl_ctx_bytes(cf, p, nt) >> 20, c->n_batch);
        sl_ctx_free(c);
        return -ENOMEM;
    }
    sl_ctx_params q = *p;
    q.n_batch = c->n_batch;
    q.windows = win;
    q.ring_slack = lay.slack;
    c->mem_bytes = sl_ctx_bytes(cf, &q, nt);
    *out = c;
    return 0;
}

/* ---- weights ---------------------------------------------------------------------------------- */

int sl_fwd_matmul(sl_ctx *c, const sl_weight *w, const float *x, int nb, float *out, int64_t stride)
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
    int layer, nb;
} att_job;

/* One (position, kv head) unit per iteration: the grp query heads that share a kv head attend
 * together, so each cached K/V row is read from memory once for all of them (sl_attn_heads).
 * Units are split evenly across threads; a head's result does not depend on the split. */
static void attention_worker(void *arg, int ith, int nth)
{
    const att_job *j = arg;
    sl_ctx *c = j->c;
    const sl_config *cf = &c->m->cfg;
    const int hd = cf->head_dim, grp = cf->n_heads / cf->n_kv_heads, window = c->m->layers[j->layer].window;
    const float scale = cf->attn_scale;
    float *att = c->att + (size_t)ith * att_scratch_floats(cf, c->n_ctx);
    float *tmp = att + (size_t)grp * c->n_ctx;
    const int units = j->nb * cf->n_kv_heads;
    for (int u = ith; u < units; u += nth) {
        int b = u / cf->n_kv_heads, kh = u % cf->n_kv_heads;
        const sl_batch_pos *bp = &c->bpos[b];   /* the position's own sequence: its cache, its causal span */
        int type;
        size_t stride;
        const void *k = sl_kv_k_head(bp->kv, j->layer, kh, &type, &stride);
        const void *v = sl_kv_v_head(bp->kv, j->layer, kh, &type, &stride);
        size_t off = (size_t)b * cf->n_heads * hd + (size_t)kh * grp * hd;
        /* causal: positions [0, p]; a sliding window keeps the last `window` of them, in order, from
         * the rows of a ring (position t in row t mod rows) */
        int n = bp->pos + 1, first = window && n > window ? n - window : 0;
        const int rows = sl_kv_rows(bp->kv, j->layer);
        const float *sinks = c->m->layers[j->layer].vec[SL_VEC_ATTN_SINKS];
        sl_attn_heads_ring(c->q + off, grp, k, v, type, stride, rows, first % rows, n - first, hd, scale, cf->attn_softcap,
                           sinks ? sinks + (size_t)kh * grp : NULL, att, tmp, c->att_out + off);
    }
}

/* ---- one batch --------------------------------------------------------------------------------
 * eval_batch runs the nb positions of c->bpos through every block; each step below is one line of
 * the pass described at the top of this file, over the whole batch.  Positions may belong to
 * several sequences (sl_eval_seqs): matrix products take the whole batch, while the KV cache and
 * the causal attention span of each position are its own sequence's (c->bpos[b]); a sequence's
 * positions are contiguous and in order in the batch. */

/* Calls f(kv, first position, count) once per run of consecutive batch positions sharing a cache. */
static int for_each_seq(sl_ctx *c, int nb, int l, int (*f)(sl_kv *, int, int, int))
{
    for (int b = 0; b < nb;) {
        int e = b + 1;
        while (e < nb && c->bpos[e].kv == c->bpos[b].kv) e++;
        int rc = f(c->bpos[b].kv, l, c->bpos[b].pos, e - b);
        if (rc) {
            snprintf(c->err, sizeof c->err, "%s", sl_kv_errmsg(c->bpos[b].kv));
            return rc;
        }
        b = e;
    }
    return 0;
}

static int kv_begin(sl_kv *kv, int l, int p0, int n) { (void)n; return sl_kv_layer_begin(kv, l, p0); }

/* Contract (forward_internal.h): xb[b] = rmsnorm(x[b]) * w for every position of the batch. */
void sl_fwd_norm(sl_ctx *c, const float *w, int nb)
{
    const sl_config *cf = &c->m->cfg;
    for (int b = 0; b < nb; b++)
        sl_rmsnorm(c->xb + (size_t)b * cf->dim, c->x + (size_t)b * cf->dim, w, cf->dim, cf->rms_eps);
}

/* x += W xb [+ bias] [rmsnorm * post_norm] (through xb's twin: the product lands in xb, which is free
 * by then). */
static int residual_matmul(sl_ctx *c, const sl_weight *w, const float *in, int nb, const float *bias, const float *post_norm)
{
    const sl_config *cf = &c->m->cfg;
    const int dim = cf->dim;
    int rc = sl_fwd_matmul(c, w, in, nb, c->xb, dim);
    if (rc) return rc;
    if (bias)
        for (int b = 0; b < nb; b++)
            for (int i = 0; i < dim; i++) c->xb[(size_t)b * dim + i] += bias[i];
    if (post_norm)
        for (int b = 0; b < nb; b++) sl_rmsnorm(c->xb + (size_t)b * dim, c->xb + (size_t)b * dim, post_norm, dim, cf->rms_eps);
    for (size_t i = 0; i < (size_t)nb * dim; i++) c->x[i] += c->xb[i];
    return 0;
}

/* rows[b] += bias for the nb rows of n floats (no-op without a bias). */
static void add_bias(float *rows, const float *bias, int nb, int n)
{
    if (!bias) return;
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < n; i++) rows[(size_t)b * n + i] += bias[i];
}

/* Each head_dim-long head of the nb rows of n_heads heads: rmsnorm * w (qwen3's q/k norms). */
static void head_norm(const sl_config *cf, float *rows, const float *w, int nb, int n_heads)
{
    if (!w) return;
    for (size_t h = 0; h < (size_t)nb * n_heads; h++)
        sl_rmsnorm(rows + h * cf->head_dim, rows + h * cf->head_dim, w, cf->head_dim, cf->rms_eps);
}

/* Attention sub-block of block l: x += Wo attention(rope(Wq xb), rope(Wk xb), Wv xb). */
static int attention_block(sl_ctx *c, int l, int nb)
{
    const sl_config *cf = &c->m->cfg;
    sl_layer *L = &c->m->layers[l];
    const int qd = cf->n_heads * cf->head_dim, kvd = cf->n_kv_heads * cf->head_dim;
    int rc;
    if ((rc = for_each_seq(c, nb, l, kv_begin))) return rc;
    sl_fwd_norm(c, L->vec[SL_VEC_ATTN_NORM], nb);
    if ((rc = sl_fwd_matmul(c, &L->mat[SL_MAT_Q], c->xb, nb, c->q, qd)) || (rc = sl_fwd_matmul(c, &L->mat[SL_MAT_K], c->xb, nb, c->k, kvd)) ||
        (rc = sl_fwd_matmul(c, &L->mat[SL_MAT_V], c->xb, nb, c->v, kvd)))
        return rc;
    add_bias(c->q, L->vec[SL_VEC_Q_BIAS], nb, qd);
    add_bias(c->k, L->vec[SL_VEC_K_BIAS], nb, kvd);
    add_bias(c->v, L->vec[SL_VEC_V_BIAS], nb, kvd);
    head_norm(cf, c->q, L->vec[SL_VEC_Q_NORM], nb, cf->n_heads);
    head_norm(cf, c->k, L->vec[SL_VEC_K_NORM], nb, cf->n_kv_heads);
    const bool neox = c->m->arch->rope == SL_ROPE_NEOX;
    for (int b = 0; b < nb; b++) {
        int pos = c->bpos[b].pos;
        float *q = c->q + (size_t)b * qd, *k = c->k + (size_t)b * kvd, *v = c->v + (size_t)b * kvd;
        sl_rope_ext(q, cf->n_heads, cf->head_dim, cf->rope_dim, pos, L->rope_base, L->rope_scale, c->rope_div, cf->rope_mscale, neox);
        sl_rope_ext(k, cf->n_kv_heads, cf->head_dim, cf->rope_dim, pos, L->rope_base, L->rope_scale, c->rope_div, cf->rope_mscale,
                    neox);
        sl_kv_store(c->bpos[b].kv, l, pos, k, v);
    }
    att_job aj = { c, l, nb };
    sl_pool_run(c->pool, attention_worker, &aj);
    if ((rc = for_each_seq(c, nb, l, sl_kv_layer_end))) return rc;
    return residual_matmul(c, &L->mat[SL_MAT_O], c->att_out, nb, L->vec[SL_VEC_O_BIAS], L->vec[SL_VEC_POST_ATTN_NORM]);
}

/* FFN sub-block of block l: x += W_down (act(W_gate xb) * W_up xb), or the routed experts of a MoE
 * block (runtime/engine/moe.c). */
static int ffn_block(sl_ctx *c, int l, int nb)
{
    const sl_config *cf = &c->m->cfg;
    sl_layer *L = &c->m->layers[l];
    int rc;
    if (L->moe) return sl_moe_ffn(c, l, nb);
    sl_fwd_norm(c, L->vec[SL_VEC_FFN_NORM], nb);
    if ((rc = sl_fwd_matmul(c, &L->mat[SL_MAT_GATE], c->xb, nb, c->hb, cf->ffn_dim)) ||
        (rc = sl_fwd_matmul(c, &L->mat[SL_MAT_UP], c->xb, nb, c->hb2, cf->ffn_dim)))
        return rc;
    if (c->m->arch->act == SL_ACT_GELU_TANH) sl_geglu(c->hb, c->hb2, (size_t)nb * (size_t)cf->ffn_dim);
    else sl_swiglu(c->hb, c->hb2, (size_t)nb * (size_t)cf->ffn_dim);
    return residual_matmul(c, &L->mat[SL_MAT_DOWN], c->hb, nb, NULL, L->vec[SL_VEC_POST_FFN_NORM]);
}

/* logits = W_out rmsnorm(x) * output_norm for the positions marked in c->bpos: the last one only (all
 * generation needs), every one of the batch when the context keeps all logits (verifying drafted
 * tokens), or per sequence of a multi-sequence batch.  Row r of c->logits is the r-th marked. */
static int lm_head(sl_ctx *c, int nb)
{
    sl_model *m = c->m;
    const sl_config *cf = &m->cfg;
    int n_out = 0;
    for (int b = 0; b < nb; b++)
        if (c->bpos[b].logits)
            sl_rmsnorm(c->xb + (size_t)n_out++ * cf->dim, c->x + (size_t)b * cf->dim, m->output_norm, cf->dim, cf->rms_eps);
    int rc = sl_fwd_matmul(c, &m->output, c->xb, n_out, c->logits, cf->vocab);
    if (rc) return rc;
    c->n_logits = n_out;
    /* NaN/Inf in weights (or an overflow) would otherwise sample garbage silently: stop instead.
     * One pass over the logits per batch costs nothing next to the LM head itself. */
    for (size_t i = 0; i < (size_t)n_out * cf->vocab; i++)
        if (!isfinite(c->logits[i])) {
            snprintf(c->err, sizeof c->err, "forward: non-finite logits in row %d (token id %d): the model's "
                     "weights contain NaN/Inf or the activations overflowed", (int)(i / cf->vocab), (int)(i % cf->vocab));
            return -EDOM;
        }
    /* after the check: tanh would turn an overflow (inf) into a plausible cap value */
    if (cf->final_softcap > 0) sl_softcap(c->logits, (size_t)n_out * (size_t)cf->vocab, cf->final_softcap);
    return 0;
}

/* tokens[b] is the token at c->bpos[b]. */
static int eval_batch(sl_ctx *c, const int32_t *tokens, int nb)
{
    const sl_config *cf = &c->m->cfg;
    int rc;
    c->n_passes++;
    for (int b = 0; b < nb; b++)
        if ((rc = embed(c, tokens[b], c->x + (size_t)b * cf->dim))) return rc;
    if (cf->embd_scale)
        for (size_t i = 0; i < (size_t)nb * cf->dim; i++) c->x[i] *= cf->embd_scale;
    for (int l = 0; l < cf->n_layers; l++) {
        if (c->cancel && *c->cancel) return -ECANCELED;
        if ((rc = attention_block(c, l, nb)) || (rc = ffn_block(c, l, nb))) return rc;
    }
    if (c->cancel && *c->cancel) return -ECANCELED;
    return lm_head(c, nb);
}

/* After a failed pass: the stream restarts at block 0, and err says what happened. */
static int pass_failed(sl_ctx *c, int rc)
{
    /* an interrupted pass leaves the stream mid-schedule: restart it at block 0 so the next
     * evaluation (e.g. the next chat turn after Ctrl-C) lines up again */
    if (c->src && c->src->reset) c->src->reset(c->src->self);
    if (!c->err[0]) {
        if (rc == -ECANCELED) snprintf(c->err, sizeof c->err, "interrupted");
        else snprintf(c->err, sizeof c->err, "forward: %s", strerror(-rc));
    }
    return rc;
}

int sl_eval(sl_ctx *c, const int32_t *tokens, int n)
{
    c->err[0] = 0;
    if (n < 0 || c->n_past + n > c->n_ctx) {
        snprintf(c->err, sizeof c->err, "context full: %d positions used + %d new > -c %d", c->n_past, n, c->n_ctx);
        return -ENOSPC;
    }
    if (n > 0 && !c->kv) {
        snprintf(c->err, sizeof c->err, "eval: this context is a workspace without a KV cache (use sl_eval_seqs)");
        return -EINVAL;
    }
    for (int done = 0; done < n;) {
        int nb = n - done < c->n_batch ? n - done : c->n_batch;
        if (sl_kv_check(c->kv, c->n_past, nb)) {   /* a pass longer than a ring's slack allows */
            snprintf(c->err, sizeof c->err, "eval: %s", sl_kv_errmsg(c->kv));
            return -EINVAL;
        }
        /* logits for the last logits_cap positions of the batch (all of them with logits_all and a
         * large enough cap; the last only by default) */
        for (int b = 0; b < nb; b++)
            c->bpos[b] = (sl_batch_pos){ c->kv, c->n_past + b, b >= nb - c->logits_cap };
        int rc = eval_batch(c, tokens + done, nb);
        if (rc) return pass_failed(c, rc);
        c->n_past += nb;
        done += nb;
    }
    return 0;
}

/* The checks of sl_eval_seqs: every span fits its sequence, the batch and the logits. */
static int seqs_ok(sl_ctx *w, const sl_seq_span *sp, int n_spans, int *total)
{
    int nt = 0, rows = 0;
    for (int i = 0; i < n_spans; i++) {
        const sl_ctx *s = sp[i].seq;
        const char *why = !s || !s->kv ? "has no sequence with a KV cache"
                          : s->m != w->m ? "belongs to another model"
                          : sp[i].n < 1 || !sp[i].tokens ? "has no tokens"
                          : s->n_ctx > w->n_ctx ? "has a longer context than the workspace" : NULL;
        for (int j = 0; j < i && !why; j++)
            if (sp[j].seq == s) why = "repeats a sequence";
        if (why) {
            snprintf(w->err, sizeof w->err, "eval: span %d %s", i, why);
            return -EINVAL;
        }
        if (s->n_past + sp[i].n > s->n_ctx) {
            snprintf(w->err, sizeof w->err, "context full: %d positions used + %d new > -c %d", s->n_past, sp[i].n, s->n_ctx);
            return -ENOSPC;
        }
        if (sl_kv_check(s->kv, s->n_past, sp[i].n)) {   /* a span longer than its rings allow */
            snprintf(w->err, sizeof w->err, "eval: span %d: %s", i, sl_kv_errmsg(s->kv));
            return -EINVAL;
        }
        nt += sp[i].n;
        rows += sp[i].logits_all ? sp[i].n : 1;
    }
    if (nt > w->n_batch || rows > w->logits_cap) {
        snprintf(w->err, sizeof w->err, "eval: %d tokens and %d logits rows do not fit a batch of %d tokens and %d rows",
                 nt, rows, w->n_batch, w->logits_cap);
        return -ENOSPC;
    }
    *total = nt;
    return 0;
}

int sl_eval_seqs(sl_ctx *w, sl_seq_span *sp, int n_spans)
{
    w->err[0] = 0;
    int nt = 0, rc;
    if (n_spans < 0 || (rc = seqs_ok(w, sp, n_spans, &nt))) return n_spans < 0 ? -EINVAL : rc;
    if (!nt) return 0;
    int32_t *toks = malloc((size_t)nt * sizeof *toks);
    if (!toks) return -ENOMEM;
    for (int i = 0, b = 0, row = 0; i < n_spans; i++) {
        sp[i].logits_row = row;
        for (int t = 0; t < sp[i].n; t++, b++) {
            bool lg = sp[i].logits_all || t == sp[i].n - 1;
            w->bpos[b] = (sl_batch_pos){ sp[i].seq->kv, sp[i].seq->n_past + t, lg };
            toks[b] = sp[i].tokens[t];
            row += lg;
        }
    }
    rc = eval_batch(w, toks, nt);
    free(toks);
    if (rc) return pass_failed(w, rc);
    for (int i = 0; i < n_spans; i++) sp[i].seq->n_past += sp[i].n;
    return 0;
}
