/* runtime/engine/moe.c — the mixture-of-experts FFN of a block, over a batch of positions.
 *
 *   h = rmsnorm(x) * ffn_norm                                   (nb, dim)
 *   l = router . h                                              (nb, n_expert), f32 weights
 *   [+ router bias (gpt-oss)]
 *   per position: the k = n_expert_used experts and their weights (route(): softmax over all
 *     experts, top-k, renormalised or not; or top-k of the logits, softmax over those: enum sl_gating)
 *   per expert e that any position took, in ascending e: its positions' rows of h gathered,
 *     y = down_e (act(gate_e h [+ b]) * (up_e h [+ b])) [+ b], and each position's row acc += w_e * y
 *     (act: silu, or gpt-oss's clamped swiglu_oai; [+ b]: gpt-oss's per-expert biases)
 *   [shared expert: acc += sigmoid(shexp_gate . h) * down_s (silu(gate_s h) * up_s h)]
 *   x += acc [rmsnorm * post_ffn_norm]
 *
 * The batch reads each expert it uses once: a prompt chunk, the sequences of a server pass and a
 * speculative verification are all batches.  A position's result does not depend on the batch: the
 * matrix products keep rows independent (kernels/ops.h), and its experts are added to its row in
 * ascending expert order whatever else the batch holds — so every logit is bit-identical to
 * evaluating the position alone.
 */
#include "runtime/engine/forward_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/ops.h"
#include "kernels/types.h"

/* The k experts of one position from its router logits (overwritten with probabilities), in
 * descending probability (ties: the lower expert id), and their weights.  llama.cpp build_moe_ffn:
 * softmax over all experts, argsort top-k, then with norm_w the weights divided by their sum
 * (clamped below at 6.103515625e-5, its guard for a zero sum). */
/* The k largest of the E values (descending; ties: the lower expert id) into ids, their values into w. */
static void top_k(const float *v, int E, int k, int *ids, float *w)
{
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            bool taken = false;
            for (int i = 0; i < j && !taken; i++) taken = ids[i] == e;
            if (!taken && (best < 0 || v[e] > v[best])) best = e;
        }
        ids[j] = best;
        w[j] = v[best];
    }
}

static void route(float *logits, int E, int k, int gating, int *ids, float *w)
{
    if (gating == SL_GATE_TOPK_SOFTMAX) {   /* gpt-oss: the k best logits, then a softmax over them */
        top_k(logits, E, k, ids, w);
        sl_softmax(w, k);
        return;
    }
    float mx = logits[0];
    for (int e = 1; e < E; e++) mx = logits[e] > mx ? logits[e] : mx;
    double sum = 0;
    for (int e = 0; e < E; e++) sum += logits[e] = expf(logits[e] - mx);
    for (int e = 0; e < E; e++) logits[e] = (float)(logits[e] / sum);
    top_k(logits, E, k, ids, w);
    if (gating == SL_GATE_SOFTMAX_NORM) {
        float s = 0;
        for (int j = 0; j < k; j++) s += w[j];
        if (s < 6.103515625e-5f) s = 6.103515625e-5f;
        for (int j = 0; j < k; j++) w[j] /= s;
    }
}

/* Group the batch's (position, choice) pairs by expert: list[start[e] .. start[e+1]) holds the
 * indices b * k + j of the pairs that chose e, in ascending b.  start = list + nb * k. */
static void group_by_expert(const int *ids, int nb, int k, int E, int *list)
{
    int *start = list + (size_t)nb * k;
    memset(start, 0, (size_t)(E + 1) * sizeof *start);
    for (int i = 0; i < nb * k; i++) start[ids[i] + 1]++;
    for (int e = 0; e < E; e++) start[e + 1] += start[e];
    int fill[4096];   /* expert_count <= 4096 (model.c read_moe) */
    memcpy(fill, start, (size_t)E * sizeof *fill);
    for (int i = 0; i < nb * k; i++) list[fill[ids[i]]++] = i;
}

/* rows[i] += bias for the n rows of w floats (no-op without a bias). */
static void add_rows(float *rows, const float *bias, int n, int w)
{
    if (!bias) return;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < w; j++) rows[(size_t)i * w + j] += bias[j];
}

/* y = down (act(gate x [+ b_gate]) * (up x [+ b_up])) [+ b_down] for the n rows of x, through hb/hb2
 * (width f); b: the three biases (each NULL or one row), or NULL for none. */
static int gated_ffn(sl_ctx *c, const sl_weight *gate, const sl_weight *up, const sl_weight *down, const float *const *b,
                     const float *x, int n, int f, float *y)
{
    const int dim = c->m->cfg.dim;
    int rc;
    if ((rc = sl_fwd_matmul(c, gate, x, n, c->hb, f)) || (rc = sl_fwd_matmul(c, up, x, n, c->hb2, f))) return rc;
    if (b) { add_rows(c->hb, b[SL_EXP_GATE], n, f); add_rows(c->hb2, b[SL_EXP_UP], n, f); }
    const size_t len = (size_t)n * (size_t)f;
    switch (c->m->arch->act) {
    case SL_ACT_GELU_TANH:  sl_geglu(c->hb, c->hb2, len); break;
    case SL_ACT_SWIGLU_OAI: sl_swiglu_oai(c->hb, c->hb2, len); break;
    default:                sl_swiglu(c->hb, c->hb2, len); break;
    }
    if ((rc = sl_fwd_matmul(c, down, c->hb, n, y, dim))) return rc;
    if (b) add_rows(y, b[SL_EXP_DOWN], n, dim);
    return 0;
}

/* --moe-trace: one line per position and MoE block, "pass block position e1 .. ek" (the experts in
 * descending router weight), the input of bench/moe_cache_sim.c.  A pass's lines are its batch. */
static void trace(const sl_ctx *c, int l, int nb, int k)
{
    FILE *f = c->moe_trace;
    for (int b = 0; b < nb; b++) {
        fprintf(f, "%" PRIu64 " %d %d", c->n_passes, l, c->bpos[b].pos);
        for (int j = 0; j < k; j++) fprintf(f, " %d", c->moe_ids[(size_t)b * k + j]);
        fputc('\n', f);
    }
}

/* Tell the source which experts this pass reads, in the order they will be computed. */
static int want_experts(sl_ctx *c, const sl_layer *L, const int *start, int E)
{
    if (!c->src || !c->src->want) return 0;
    int n = 0;
    for (int e = 0; e < E; e++)
        if (start[e + 1] > start[e])
            for (int k = 0; k < SL_EXPERT_MATS; k++) c->moe_want[n++] = sl_expert_weight(L, e, k);
    int rc = c->src->want(c->src->self, c->moe_want, n);
    if (rc) snprintf(c->err, sizeof c->err, "%s", c->src->errmsg(c->src->self));
    return rc;
}

/* acc[b] += sigmoid(gate . h[b]) * shared_expert(h[b]) (qwen2moe). */
static int shared_expert(sl_ctx *c, const sl_layer *L, int nb)
{
    const sl_config *cf = &c->m->cfg;
    const int dim = cf->dim;
    int rc = gated_ffn(c, &L->mat[SL_MAT_SH_GATE], &L->mat[SL_MAT_SH_UP], &L->mat[SL_MAT_SH_DOWN], NULL, c->xb, nb,
                       cf->shexp_ffn, c->moe_y);
    if (rc) return rc;
    const float *g = L->vec[SL_VEC_SHEXP_GATE];
    for (int b = 0; b < nb; b++) {
        const float *h = c->xb + (size_t)b * dim;
        float z = 0;
        for (int i = 0; i < dim; i++) z += g[i] * h[i];
        const float s = 1.0f / (1.0f + expf(-z));
        float *acc = c->moe_acc + (size_t)b * dim;
        const float *y = c->moe_y + (size_t)b * dim;
        for (int i = 0; i < dim; i++) acc[i] += s * y[i];
    }
    return 0;
}

/* Batches up to this many positions hint the next block's experts: a prompt chunk takes most
 * experts anyway, and the hint is at most one token's worth (the expert reader's depth). */
#define HINT_MAX_BATCH 16

/* The experts block l + 1 will probably take, handed to the source as a hint (sl_wsource.hint):
 * block l + 1's router on this block's output, normed with block l + 1's FFN norm — its input but
 * for the attention in between.  Per position the top k, then the k experts most positions chose
 * (ties: the lower id).  Scratch: xb, moe_logits, moe_list and moe_want, all rewritten before their
 * next use, so nothing computed depends on the hint. */
static int hint_next_block(sl_ctx *c, int l, int nb)
{
    const sl_model *m = c->m;
    if (!c->src || !c->src->hint || nb > HINT_MAX_BATCH || l + 1 >= m->cfg.n_layers || !m->layers[l + 1].moe) return 0;
    const sl_layer *N = &m->layers[l + 1];
    const int E = m->cfg.n_expert, k = m->cfg.n_expert_used;
    if (k > 64) return 0;   /* no such model; the ids below are on the stack */
    sl_fwd_norm(c, N->vec[SL_VEC_FFN_NORM], nb);
    int rc = sl_fwd_matmul(c, &N->router, c->xb, nb, c->moe_logits, E);
    if (rc) return rc;
    add_rows(c->moe_logits, N->vec[SL_VEC_ROUTER_BIAS], nb, E);
    int *votes = c->moe_list, ids[64];
    float w[64];
    memset(votes, 0, (size_t)E * sizeof *votes);
    for (int b = 0; b < nb; b++) {   /* the top k logits are the top k probabilities of every gating */
        top_k(c->moe_logits + (size_t)b * E, E, k, ids, w);
        for (int j = 0; j < k; j++) votes[ids[j]]++;
    }
    int n = 0;
    for (int j = 0; j < k; j++) {   /* the k most chosen, then listed in ascending id */
        int best = -1;
        for (int e = 0; e < E; e++)
            if (votes[e] > 0 && (best < 0 || votes[e] > votes[best])) best = e;
        if (best < 0) break;
        votes[best] = -1;
    }
    for (int e = 0; e < E; e++)
        if (votes[e] < 0)
            for (int x = 0; x < SL_EXPERT_MATS; x++) c->moe_want[n++] = sl_expert_weight(N, e, x);
    if ((rc = c->src->hint(c->src->self, c->moe_want, n))) snprintf(c->err, sizeof c->err, "%s", c->src->errmsg(c->src->self));
    return rc;
}

int sl_moe_ffn(sl_ctx *c, int l, int nb)
{
    const sl_config *cf = &c->m->cfg;
    const sl_layer *L = &c->m->layers[l];
    const int dim = cf->dim, E = cf->n_expert, k = cf->n_expert_used;
    int rc;
    sl_fwd_norm(c, L->vec[SL_VEC_FFN_NORM], nb);
    if ((rc = sl_fwd_matmul(c, &L->router, c->xb, nb, c->moe_logits, E))) return rc;
    add_rows(c->moe_logits, L->vec[SL_VEC_ROUTER_BIAS], nb, E);
    for (int b = 0; b < nb; b++)
        route(c->moe_logits + (size_t)b * E, E, k, c->m->arch->gating, c->moe_ids + (size_t)b * k, c->moe_w + (size_t)b * k);
    if (c->moe_trace) trace(c, l, nb, k);
    group_by_expert(c->moe_ids, nb, k, E, c->moe_list);
    const int *start = c->moe_list + (size_t)nb * k;
    if ((rc = want_experts(c, L, start, E))) return rc;
    memset(c->moe_acc, 0, (size_t)nb * dim * sizeof(float));
    for (int e = 0; e < E; e++) {
        const int n = start[e + 1] - start[e];
        if (!n) continue;
        const int *pairs = c->moe_list + start[e];
        for (int i = 0; i < n; i++)
            memcpy(c->moe_x + (size_t)i * dim, c->xb + (size_t)(pairs[i] / k) * dim, (size_t)dim * sizeof(float));
        const float *bias[SL_EXPERT_MATS];
        for (int m = 0; m < SL_EXPERT_MATS; m++)
            bias[m] = L->expert_bias[m] ? L->expert_bias[m] + (size_t)e * (size_t)sl_expert_weight(L, e, m)->rows : NULL;
        rc = gated_ffn(c, sl_expert_weight(L, e, SL_EXP_GATE), sl_expert_weight(L, e, SL_EXP_UP),
                       sl_expert_weight(L, e, SL_EXP_DOWN), bias, c->moe_x, n, cf->expert_ffn, c->moe_y);
        if (rc) return rc;
        for (int i = 0; i < n; i++) {
            const float w = c->moe_w[pairs[i]];
            float *acc = c->moe_acc + (size_t)(pairs[i] / k) * dim;
            const float *y = c->moe_y + (size_t)i * dim;
            for (int j = 0; j < dim; j++) acc[j] += w * y[j];
        }
    }
    if (sl_weight_present(&L->mat[SL_MAT_SH_GATE]) && (rc = shared_expert(c, L, nb))) return rc;
    if (L->vec[SL_VEC_POST_FFN_NORM])
        for (int b = 0; b < nb; b++)
            sl_rmsnorm(c->moe_acc + (size_t)b * dim, c->moe_acc + (size_t)b * dim, L->vec[SL_VEC_POST_FFN_NORM], dim, cf->rms_eps);
    for (size_t i = 0; i < (size_t)nb * dim; i++) c->x[i] += c->moe_acc[i];
    return hint_next_block(c, l, nb);
}
