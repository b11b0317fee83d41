/* runtime/engine/model.c — hyperparameters and weight table of a GGUF file, bound through its
 * architecture description (runtime/engine/arch.h). */
#include "runtime/engine/model.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/types.h"
#include "loader/errmsg.h"
#include "loader/fileio.h"
#include "runtime/engine/model_rope.h"

/* Integer hyperparameter "<arch>.<key>", 1 <= value <= max (dflt when absent and not required). */
static int get_hp(const sl_gguf *g, const char *arch, const char *key, int *out, int max, bool required, int dflt,
                  char *err, size_t errlen)
{
    char full[96];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    uint32_t v;
    if (!sl_gguf_get_u32(g, full, &v)) {
        if (sl_gguf_find_key(g, full) >= 0) {
            snprintf(err, errlen, "model: %s has the wrong type or an out-of-range value", full);
            return -EINVAL;
        }
        if (required) {
            snprintf(err, errlen, "model: required key %s is missing", full);
            return -EINVAL;
        }
        v = (uint32_t)dflt;
    }
    if (v < 1 || v > (uint32_t)max) {
        snprintf(err, errlen, "model: %s = %u is out of range [1, %d]", full, v, max);
        return -EINVAL;
    }
    *out = (int)v;
    return 0;
}

/* Find tensor `name`, check its shape is (cols, rows, depth) and its type computable; fill w (rows:
 * one slice's rows; nbytes: the whole tensor) and mark the tensor used (used[i] for the file's
 * tensor i; NULL: not tracked).  1 when optional and absent. */
static int bind3(const sl_gguf *g, sl_weight *w, const char *name, int64_t cols, int64_t rows, int64_t depth,
                 bool required, bool *used, char *err, size_t errlen)
{
    const sl_gguf_tensor *t = sl_gguf_find_tensor(g, name);
    memset(w, 0, sizeof *w);
    if (!t) {
        if (required) snprintf(err, errlen, "model: tensor %s is missing", name);
        return required ? -EINVAL : 1;
    }
    if (used) used[t - sl_gguf_tensor_at(g, 0)] = true;
    if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != depth || t->ne[3] != 1) {
        char want[64];
        if (depth == 1) snprintf(want, sizeof want, "[%" PRId64 ", %" PRId64 "]", cols, rows);
        else snprintf(want, sizeof want, "[%" PRId64 ", %" PRId64 ", %" PRId64 "] (expert_count experts)", cols, rows, depth);
        snprintf(err, errlen, "model: tensor %s has shape [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
                 "], expected %s", name, t->ne[0], t->ne[1], t->ne[2], t->ne[3], want);
        return -EINVAL;
    }
    if (!sl_type_supported(t->type)) {
        snprintf(err, errlen, "model: tensor %s has type %s, which sluice does not support yet (supported: %s)", name,
                 sl_type_name(t->type), sl_type_supported_names());
        return -ENOTSUP;
    }
    w->name = strndup(t->name.ptr, t->name.len);
    if (!w->name) return -ENOMEM;
    w->type = t->type;
    w->cols = cols;
    w->rows = rows;
    w->row_bytes = sl_row_bytes(t->type, cols);
    w->offset = t->offset;
    w->nbytes = t->nbytes;
    return 0;
}

static int bind(const sl_gguf *g, sl_weight *w, const char *name, int64_t cols, int64_t rows, bool required,
                bool *used, char *err, size_t errlen)
{
    return bind3(g, w, name, cols, rows, 1, required, used, err, errlen);
}

/* Read a vector weight into a fresh f32 array (norms are always held as f32). */
static int load_vec(int fd, const sl_weight *w, float **out, char *err, size_t errlen)
{
    const int64_t n = w->cols * w->rows;   /* a vector, or a small matrix held as f32 (a router) */
    void *raw = malloc(w->nbytes);
    float *f = malloc((size_t)n * sizeof *f);
    int rc = raw && f ? sl_pread_full(fd, raw, w->nbytes, w->offset) : -ENOMEM;
    if (rc) {
        snprintf(err, errlen, "model: reading %s at byte offset %" PRIu64 ": %s", w->name, w->offset, strerror(-rc));
        free(raw);
        free(f);
        return rc;
    }
    sl_type_get(w->type)->dequant(raw, f, n);
    free(raw);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(f[i])) {
            snprintf(err, errlen, "model: non-finite value (%g) in %s at element %lld", f[i], w->name, (long long)i);
            free(f);
            return -EINVAL;
        }
    *out = f;
    return 0;
}

int sl_layer_weights(sl_layer *L, sl_weight **o)
{
    int n = 0;
    for (int i = 0; i < SL_BLOCK_MATS; i++)
        if (sl_weight_present(&L->mat[i])) o[n++] = &L->mat[i];
    return n;
}

uint64_t sl_layer_bytes(const sl_model *m, int l)
{
    sl_weight *w[SL_BLOCK_MATS];
    uint64_t s = 0;
    for (int i = 0, n = sl_layer_weights(&m->layers[l], w); i < n; i++) s += w[i]->nbytes;
    return s;
}

uint64_t sl_layer_expert_bytes(const sl_model *m, int l)
{
    const sl_layer *L = &m->layers[l];
    uint64_t s = 0;
    if (L->moe)
        for (int k = 0; k < SL_EXPERT_MATS; k++) s += sl_expert_weight(L, 0, k)->nbytes;
    return s;
}

void sl_model_for_each_weight(sl_model *m, void (*f)(sl_weight *w, void *arg), void *arg)
{
    f(&m->tok_embd, arg);
    for (int l = 0; l < m->cfg.n_layers; l++) {
        sl_layer *L = &m->layers[l];
        sl_weight *w[SL_BLOCK_MATS];
        for (int i = 0, n = sl_layer_weights(L, w); i < n; i++) f(w[i], arg);
        if (L->moe)
            for (int i = 0; i < m->cfg.n_expert * SL_EXPERT_MATS; i++) f(&L->experts[i], arg);
    }
    if (!m->tied) f(&m->output, arg);
}

static void free_weight(sl_weight *w) { free((void *)w->name); }

static void free_layer(sl_layer *L, int n_expert)
{
    for (int i = 0; i < SL_BLOCK_MATS; i++) free_weight(&L->mat[i]);
    for (int i = 0; i < SL_BLOCK_VECS; i++) free(L->vec[i]);
    free_weight(&L->router);
    free((void *)L->router.data);
    for (int k = 0; k < SL_EXPERT_MATS; k++) free(L->expert_bias[k]);
    if (L->experts)
        for (int i = 0; i < n_expert * SL_EXPERT_MATS; i++) free_weight(&L->experts[i]);
    free(L->experts);
}

void sl_model_free(sl_model *m)
{
    if (!m) return;
    if (m->layers) {
        for (int l = 0; l < m->cfg.n_layers; l++) free_layer(&m->layers[l], m->cfg.n_expert);
        free(m->layers);
    }
    free_weight(&m->tok_embd);
    if (!m->tied) free_weight(&m->output);
    free(m->output_norm);
    free(m->rope_freqs);
    free(m->rope_long);
    free(m->rope_short);
    free(m->resident);
    free(m->path);
    sl_gguf_close(m->gguf);
    free(m);
}

/* general.architecture -> its description, or a clear refusal naming what is supported. */
static int find_arch(const sl_gguf *g, const sl_arch **out, char *err, size_t errlen)
{
    sl_str arch;
    if (!sl_gguf_get_str(g, "general.architecture", &arch)) {
        snprintf(err, errlen, "model: general.architecture is missing");
        return -EINVAL;
    }
    *out = sl_arch_find(arch);
    if (!*out) {
        sl_errf(err, errlen, 0, "model: architecture '%.*s' is not supported (supported: %s)",
                (int)(arch.len > 40 ? 40 : arch.len), arch.ptr, sl_arch_supported());
        return -ENOTSUP;
    }
    return 0;
}

/* The integer shape hyperparameters every architecture has, checked against each other. */
static int read_shape(const sl_gguf *g, const char *a, sl_config *c, char *err, size_t errlen)
{
    int rc;
    if ((rc = get_hp(g, a, "embedding_length", &c->dim, 1 << 16, true, 0, err, errlen)) ||
        (rc = get_hp(g, a, "block_count", &c->n_layers, SL_MAX_LAYERS, true, 0, err, errlen)) ||
        (rc = get_hp(g, a, "feed_forward_length", &c->ffn_dim, 1 << 18, true, 0, err, errlen)) ||
        (rc = get_hp(g, a, "attention.head_count", &c->n_heads, 1024, true, 0, err, errlen)) ||
        (rc = get_hp(g, a, "attention.head_count_kv", &c->n_kv_heads, 1024, false, c->n_heads, err, errlen)) ||
        (rc = get_hp(g, a, "context_length", &c->ctx_train, 1 << 24, false, 2048, err, errlen)))
        return rc;
    if (c->dim % c->n_heads) {
        snprintf(err, errlen, "model: embedding_length %d is not a multiple of head_count %d", c->dim, c->n_heads);
        return -EINVAL;
    }
    if ((rc = get_hp(g, a, "attention.key_length", &c->head_dim, 1 << 12, false, c->dim / c->n_heads, err, errlen)))
        return rc;
    int vlen;
    if ((rc = get_hp(g, a, "attention.value_length", &vlen, 1 << 12, false, c->head_dim, err, errlen))) return rc;
    if (vlen != c->head_dim) {
        snprintf(err, errlen, "model: attention.value_length %d differs from key_length %d (not supported)", vlen, c->head_dim);
        return -ENOTSUP;
    }
    if (c->n_heads % c->n_kv_heads) {
        snprintf(err, errlen, "model: head_count %d is not a multiple of head_count_kv %d", c->n_heads, c->n_kv_heads);
        return -EINVAL;
    }
    if ((rc = get_hp(g, a, "rope.dimension_count", &c->rope_dim, c->head_dim, false, c->head_dim, err, errlen))) return rc;
    if (c->rope_dim % 2) {
        snprintf(err, errlen, "model: %s.rope.dimension_count %d is odd", a, c->rope_dim);
        return -EINVAL;
    }
    return 0;
}

/* Contract (arch.h): optional float "<arch>.<key>"; present means a finite f32/f64. */
int sl_arch_get_f32(const sl_gguf *g, const char *a, const char *key, float *out, char *err, size_t errlen)
{
    char full[96];
    snprintf(full, sizeof full, "%s.%s", a, key);
    if (sl_gguf_find_key(g, full) < 0) return 0;
    float v;
    if (!sl_gguf_get_f32(g, full, &v)) {
        snprintf(err, errlen, "model: %s must be a float", full);
        return -EINVAL;
    }
    if (!isfinite(v)) {
        snprintf(err, errlen, "model: %s = %g is out of range (not a finite number)", full, v);
        return -EINVAL;
    }
    *out = v;
    return 0;
}

/* Contract (arch.h): optional unsigned integer "<arch>.<key>" that fits 32 bits. */
int sl_arch_get_u32(const sl_gguf *g, const char *a, const char *key, uint32_t *out, char *err, size_t errlen)
{
    char full[96];
    snprintf(full, sizeof full, "%s.%s", a, key);
    if (sl_gguf_find_key(g, full) >= 0 && !sl_gguf_get_u32(g, full, out)) {
        snprintf(err, errlen, "model: %s has the wrong type or an out-of-range value", full);
        return -EINVAL;
    }
    return 0;
}

/* RoPE base and scaling, RMSNorm epsilon, attention scale; refusals for what no description runs. */
static int read_rope_norm(const sl_gguf *g, const sl_arch *arch, sl_config *c, char *err, size_t errlen)
{
    const char *a = arch->name;
    int rc;
    c->rope_base = 10000.0f;
    c->rms_eps = 1e-5f;
    if ((rc = sl_arch_get_f32(g, a, "rope.freq_base", &c->rope_base, err, errlen)) ||
        (rc = sl_arch_get_f32(g, a, "attention.layer_norm_rms_epsilon", &c->rms_eps, err, errlen)))
        return rc;
    if (!(c->rope_base > 0) || !(c->rms_eps > 0) || c->rms_eps > 1) {
        snprintf(err, errlen, "model: rope.freq_base %g or rms epsilon %g out of range", c->rope_base, c->rms_eps);
        return -EINVAL;
    }
    if ((rc = sl_model_read_rope_scaling(g, arch, c, err, errlen))) return rc;
    if (arch->rope_full && c->rope_dim != c->head_dim) {
        snprintf(err, errlen, "model: %s.rope.dimension_count %d differs from the head size %d (%s rotates whole heads)",
                 a, c->rope_dim, c->head_dim, a);
        return -EINVAL;
    }
    c->attn_scale = 1.0f / sqrtf((float)c->head_dim);
    return 0;
}

/* Mixture-of-experts hyperparameters as llama.cpp reads them (llama_model::load_hparams and the
 * architectures' tensor creation): expert_count, expert_used_count (1..expert_count); the expert
 * width expert_feed_forward_length, which Mixtral files lack (llama: feed_forward_length is the
 * expert width; qwen*moe: feed_forward_length / expert_used_count when the key is absent); the
 * shared expert's width expert_shared_feed_forward_length (default feed_forward_length). */
static int read_moe(const sl_gguf *g, const sl_arch *arch, sl_config *c, char *err, size_t errlen)
{
    const char *a = arch->name;
    uint32_t n = 0;
    int rc = sl_arch_get_u32(g, a, "expert_count", &n, err, errlen);
    if (rc) return rc;
    if (n == 0) {
        if (!arch->moe) return 0;
        snprintf(err, errlen, "model: %s.expert_count is missing or 0 (a %s block routes to experts)", a, a);
        return -EINVAL;
    }
    if (!arch->moe && !arch->moe_optional) {
        snprintf(err, errlen, "model: %s.expert_count = %u: sluice runs no mixture-of-experts variant of %s "
                 "(mixture-of-experts architectures: llama (Mixtral), qwen3moe, qwen2moe)", a, n, a);
        return -ENOTSUP;
    }
    if (n > 4096) {
        snprintf(err, errlen, "model: %s.expert_count = %u is out of range [1, 4096]", a, n);
        return -EINVAL;
    }
    c->n_expert = (int)n;
    if ((rc = get_hp(g, a, "expert_used_count", &c->n_expert_used, 4096, true, 0, err, errlen))) return rc;
    if (c->n_expert_used > c->n_expert) {
        snprintf(err, errlen, "model: %s.expert_used_count = %d must be in [1, expert_count = %d]", a,
                 c->n_expert_used, c->n_expert);
        return -EINVAL;
    }
    int dflt = arch->moe_optional ? c->ffn_dim : c->ffn_dim / c->n_expert_used;
    if ((rc = get_hp(g, a, "expert_feed_forward_length", &c->expert_ffn, 1 << 18, false, dflt > 0 ? dflt : 1, err, errlen)) ||
        (rc = get_hp(g, a, "expert_shared_feed_forward_length", &c->shexp_ffn, 1 << 18, false, c->ffn_dim, err, errlen)))
        return rc;
    return 0;
}

static int read_config(const sl_gguf *g, const sl_arch *arch, sl_config *c, char *err, size_t errlen)
{
    int rc;
    if ((rc = read_shape(g, arch->name, c, err, errlen)) || (rc = read_rope_norm(g, arch, c, err, errlen)) ||
        (rc = read_moe(g, arch, c, err, errlen)))
        return rc;
    return arch->read_hparams ? arch->read_hparams(g, c, err, errlen) : 0;
}

/* An extent of the description resolved against the hyperparameters. */
static int64_t dim_of(const sl_config *c, int d)
{
    const int64_t qd = (int64_t)c->n_heads * c->head_dim, kvd = (int64_t)c->n_kv_heads * c->head_dim;
    switch (d) {
    case SL_DIM_EMBD: return c->dim;
    case SL_DIM_Q:    return qd;
    case SL_DIM_KV:   return kvd;
    case SL_DIM_QKV:  return qd + 2 * kvd;
    case SL_DIM_FFN:  return c->ffn_dim;
    case SL_DIM_FFN2: return 2 * (int64_t)c->ffn_dim;
    case SL_DIM_HEAD: return c->head_dim;
    case SL_DIM_EXP_FFN:   return c->expert_ffn;
    case SL_DIM_SHEXP_FFN: return c->shexp_ffn;
    case SL_DIM_N_EXPERT:  return c->n_expert;
    case SL_DIM_HEADS:     return c->n_heads;
    default:          return 1;
    }
}

/* The parts of a fused tensor, in row order (arch.h enum sl_fused). */
static const struct fused_part { int slot, rows; const char *tag; } k_fused[][3] = {
    [SL_FUSED_QKV] = { { SL_MAT_Q, SL_DIM_Q, "q" }, { SL_MAT_K, SL_DIM_KV, "k" }, { SL_MAT_V, SL_DIM_KV, "v" } },
    [SL_FUSED_GATE_UP] = { { SL_MAT_GATE, SL_DIM_FFN, "gate" }, { SL_MAT_UP, SL_DIM_FFN, "up" }, { 0, 0, NULL } },
};

/* Bind a fused tensor as row-range views into its parts' slots (see arch.h). */
static int bind_fused(sl_model *m, sl_layer *L, const sl_arch_tensor *t, const char *name, bool *used,
                      char *err, size_t errlen)
{
    const sl_config *c = &m->cfg;
    sl_weight whole;
    int rc = bind(m->gguf, &whole, name, dim_of(c, t->cols), dim_of(c, t->rows), t->required, used, err, errlen);
    if (rc) return rc;
    int64_t r0 = 0;
    for (int k = 0; k < 3 && k_fused[t->fused][k].tag && !rc; k++) {
        const struct fused_part *fp = &k_fused[t->fused][k];
        sl_weight *w = &L->mat[fp->slot];
        *w = whole;
        size_t n = strlen(whole.name) + 8;
        char *vn = malloc(n);
        if (!vn) { w->name = NULL; rc = -ENOMEM; break; }
        snprintf(vn, n, "%s[%s]", whole.name, fp->tag);
        w->name = vn;
        w->rows = dim_of(c, fp->rows);
        w->offset = whole.offset + (uint64_t)r0 * whole.row_bytes;
        w->nbytes = (uint64_t)w->rows * whole.row_bytes;
        r0 += w->rows;
    }
    free_weight(&whole);
    return rc;
}

/* Whether a description row applies to this file (arch.h enum sl_when). */
static bool row_applies(const sl_config *c, const sl_arch_tensor *t)
{
    return t->when == SL_WHEN_ALWAYS || (t->when == SL_WHEN_MOE) == (c->n_expert > 0);
}

/* A MoE block's router (held as f32, always resident) and its routed experts: each 3-D stack bound
 * as one view per expert (arch.h enum sl_expert_mat). */
static int bind_experts(sl_model *m, sl_layer *L, int l, int fd, bool *used, char *err, size_t errlen)
{
    const sl_config *c = &m->cfg;
    const sl_arch *a = m->arch;
    char name[96];
    snprintf(name, sizeof name, a->router, l);
    int rc = bind(m->gguf, &L->router, name, c->dim, c->n_expert, true, used, err, errlen);
    if (rc) return rc;
    float *f;
    if ((rc = load_vec(fd, &L->router, &f, err, errlen))) return rc;
    L->router.data = f;
    L->router.type = SL_TYPE_F32;
    L->router.row_bytes = (size_t)c->dim * sizeof(float);
    L->router.nbytes = (uint64_t)c->dim * (uint64_t)c->n_expert * sizeof(float);
    m->norm_bytes += (size_t)L->router.nbytes;
    L->experts = calloc((size_t)c->n_expert * SL_EXPERT_MATS, sizeof *L->experts);
    if (!L->experts) return -ENOMEM;
    for (int i = 0; i < a->n_experts; i++) {
        const sl_arch_tensor *t = &a->experts[i];
        sl_weight whole;
        snprintf(name, sizeof name, t->name, l);
        if ((rc = bind3(m->gguf, &whole, name, dim_of(c, t->cols), dim_of(c, t->rows), c->n_expert, true, used, err,
                        errlen)))
            return rc;
        const uint64_t slice = (uint64_t)whole.rows * whole.row_bytes;
        for (int e = 0; e < c->n_expert && !rc; e++) {
            sl_weight *w = sl_expert_weight(L, e, t->slot);
            *w = whole;
            size_t n = strlen(whole.name) + 16;
            char *vn = malloc(n);
            if (!vn) { w->name = NULL; rc = -ENOMEM; break; }
            snprintf(vn, n, "%s[expert %d]", whole.name, e);
            w->name = vn;
            w->offset = whole.offset + (uint64_t)e * slice;
            w->nbytes = slice;
            w->routed = true;
            w->unit = l * c->n_expert + e;
        }
        free_weight(&whole);
        if (rc) return rc;
    }
    for (int i = 0; i < a->n_expert_biases; i++) {   /* (width, n_expert) f32: expert e's bias is row e */
        const sl_arch_tensor *t = &a->expert_biases[i];
        sl_weight tmp;
        snprintf(name, sizeof name, t->name, l);
        if ((rc = bind(m->gguf, &tmp, name, dim_of(c, t->cols), c->n_expert, true, used, err, errlen))) return rc;
        rc = load_vec(fd, &tmp, &L->expert_bias[t->slot], err, errlen);
        m->norm_bytes += (size_t)tmp.cols * (size_t)c->n_expert * 4;
        free_weight(&tmp);
        if (rc) return rc;
    }
    for (int e = 0; e < c->n_expert; e++)   /* each matrix's place in its unit: the slots in order */
        for (int k = 1; k < SL_EXPERT_MATS; k++)
            sl_expert_weight(L, e, k)->unit_off = sl_expert_weight(L, e, k - 1)->unit_off + sl_expert_weight(L, e, k - 1)->nbytes;
    return 0;
}

/* Bind every block tensor the description lists; load the vectors; fill the per-block settings.
 * fd is the open model file. */
static int bind_blocks(sl_model *m, int fd, bool *used, char *err, size_t errlen)
{
    const sl_arch *a = m->arch;
    const sl_config *c = &m->cfg;
    char name[96];
    int rc;
    for (int l = 0; l < c->n_layers; l++) {
        sl_layer *L = &m->layers[l];
        L->window = sl_config_window(c, l);
        L->rope_base = c->rope_base;
        L->rope_scale = c->rope_scale;
        L->moe = c->n_expert > 0;
        for (int i = 0; i < a->n_mats; i++) {
            const sl_arch_tensor *t = &a->mats[i];
            if (!row_applies(c, t)) continue;
            snprintf(name, sizeof name, t->name, l);
            rc = t->fused ? bind_fused(m, L, t, name, used, err, errlen)
                          : bind(m->gguf, &L->mat[t->slot], name, dim_of(c, t->cols), dim_of(c, t->rows), t->required,
                                 used, err, errlen);
            if (rc < 0) return rc;
        }
        for (int i = 0; i < a->n_vecs; i++) {
            const sl_arch_tensor *t = &a->vecs[i];
            if (!row_applies(c, t)) continue;
            sl_weight tmp;
            snprintf(name, sizeof name, t->name, l);
            rc = bind(m->gguf, &tmp, name, dim_of(c, t->cols), 1, t->required, used, err, errlen);
            if (rc < 0) return rc;
            if (rc == 1) continue;   /* optional and absent */
            rc = load_vec(fd, &tmp, &L->vec[t->slot], err, errlen);
            m->norm_bytes += (size_t)tmp.cols * 4;
            free_weight(&tmp);
            if (rc) return rc;
        }
        if (L->moe && (rc = bind_experts(m, L, l, fd, used, err, errlen))) return rc;
    }
    return 0;
}

/* One optional vector of rope_dim/2 angle divisors, each finite and > 0; *out stays NULL when absent. */
static int bind_rope_divisors(sl_model *m, int fd, const char *name, float **out, bool *used, char *err, size_t errlen)
{
    sl_weight tmp;
    int rc = bind(m->gguf, &tmp, name, m->cfg.rope_dim / 2, 1, false, used, err, errlen);
    if (rc) return rc == 1 ? 0 : rc;
    rc = load_vec(fd, &tmp, out, err, errlen);
    free_weight(&tmp);
    if (rc) return rc;
    m->norm_bytes += (size_t)(m->cfg.rope_dim / 2) * 4;
    for (int i = 0; i < m->cfg.rope_dim / 2; i++)
        if (!((*out)[i] > 0) || !((*out)[i] < 1e30f)) {
            snprintf(err, errlen, "model: %s[%d] = %g: rope factors must be finite and > 0", name, i, (*out)[i]);
            return -EINVAL;
        }
    return 0;
}

/* rope_freqs.weight (Llama 3.1/3.2), or the pair rope_factors_long/short.weight (longrope: Phi-3-128k,
 * Phi-3.5); an architecture without them leaves them to check_all_used, which refuses them. */
static int bind_rope_freqs(sl_model *m, int fd, bool *used, char *err, size_t errlen)
{
    int rc = 0;
    if (m->arch->rope_freqs) rc = bind_rope_divisors(m, fd, "rope_freqs.weight", &m->rope_freqs, used, err, errlen);
    if (rc || !m->arch->rope_long_short) return rc;
    if ((rc = bind_rope_divisors(m, fd, "rope_factors_long.weight", &m->rope_long, used, err, errlen)) ||
        (rc = bind_rope_divisors(m, fd, "rope_factors_short.weight", &m->rope_short, used, err, errlen)))
        return rc;
    if (!m->rope_long != !m->rope_short) {
        snprintf(err, errlen, "model: rope_factors_%s.weight is missing (longrope needs both the long and the short "
                 "factors)", m->rope_long ? "short" : "long");
        return -EINVAL;
    }
    return 0;
}

/* Every tensor of the file must be one the description bound: llama.cpp refuses a file with tensors
 * it does not create ("wrong number of tensors"), and running without one (an extra block, a bias,
 * a norm sluice does not know) would answer wrong without a word. */
static int check_all_used(const sl_model *m, const bool *used, char *err, size_t errlen)
{
    const sl_gguf *g = m->gguf;
    for (int64_t i = 0; i < sl_gguf_n_tensors(g); i++) {
        if (used[i]) continue;
        const sl_gguf_tensor *t = sl_gguf_tensor_at(g, i);
        int n = (int)(t->name.len > 64 ? 64 : t->name.len);
        long blk = -1;
        if (t->name.len > 4 && !memcmp(t->name.ptr, "blk.", 4)) {
            blk = 0;
            for (size_t k = 4; k < t->name.len && k < 12 && t->name.ptr[k] >= '0' && t->name.ptr[k] <= '9'; k++)
                blk = blk * 10 + (t->name.ptr[k] - '0');
        }
        if (blk >= m->cfg.n_layers)
            sl_errf(err, errlen, 0, "model: tensor %.*s belongs to block %ld but %s.block_count is %d "
                    "(llama.cpp refuses this file too)", n, t->name.ptr, blk, m->arch->name, m->cfg.n_layers);
        else
            sl_errf(err, errlen, 0, "model: tensor %.*s is not part of a %s model (sluice would ignore it and answer "
                    "wrong; llama.cpp refuses this file too)", n, t->name.ptr, m->arch->name);
        return -ENOTSUP;
    }
    return 0;
}

int sl_model_open(const char *path, sl_model **out, char *err, size_t errlen)
{
    sl_model *m = calloc(1, sizeof *m);
    if (!m) return -ENOMEM;
    int rc = sl_gguf_open(path, &m->gguf, err, errlen);
    if (rc) { free(m); return rc; }
    m->path = strdup(path);
    const sl_gguf *g = m->gguf;
    sl_config *c = &m->cfg;
    int fd = -1;
    bool *used = calloc((size_t)sl_gguf_n_tensors(g) + 1, sizeof *used);
    if (!m->path || !used) { rc = -ENOMEM; goto fail; }
    if (sl_gguf_n_tensors(g) == 0) {   /* llama.cpp's ggml-vocab-*.gguf: metadata and tokenizer only */
        snprintf(err, errlen, "model: %s", sl_gguf_find_key(g, "tokenizer.ggml.tokens") >= 0
                 ? "a vocabulary-only file (no weights): it can tokenize, not run" : "the file holds no tensors");
        rc = -EINVAL;
        goto fail;
    }
    if ((rc = find_arch(g, &m->arch, err, errlen)) || (rc = read_config(g, m->arch, c, err, errlen))) goto fail;

    const sl_gguf_tensor *te = sl_gguf_find_tensor(g, "token_embd.weight");
    if (!te) { snprintf(err, errlen, "model: tensor token_embd.weight is missing"); rc = -EINVAL; goto fail; }
    if (te->ne[1] < 1 || te->ne[1] > (1 << 24)) { snprintf(err, errlen, "model: token_embd.weight has %" PRId64 " rows", te->ne[1]); rc = -EINVAL; goto fail; }
    c->vocab = (int)te->ne[1];
    if ((rc = bind(g, &m->tok_embd, "token_embd.weight", c->dim, c->vocab, true, used, err, errlen))) goto fail;
    rc = m->arch->output == SL_OUTPUT_TIED ? 1
       : bind(g, &m->output, "output.weight", c->dim, c->vocab, m->arch->output == SL_OUTPUT_REQUIRED, used, err, errlen);
    if (rc < 0) goto fail;
    if (rc == 1) { m->output = m->tok_embd; m->tied = true; }

    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    if (!m->layers) { rc = -ENOMEM; goto fail; }
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);   /* never blocks, even if swapped for a FIFO */
    if (fd < 0) { rc = -errno; snprintf(err, errlen, "model: cannot open %s: %s", path, strerror(errno)); goto fail; }
    if ((rc = bind_blocks(m, fd, used, err, errlen)) || (rc = bind_rope_freqs(m, fd, used, err, errlen))) goto fail;
    if (c->yarn_factor > 0 && !(m->rope_freqs = sl_model_yarn_divisors(c))) { rc = -ENOMEM; goto fail; }
    if (m->arch->layer_settings && (rc = m->arch->layer_settings(m, err, errlen))) goto fail;

    sl_weight tmp;
    if ((rc = bind(g, &tmp, "output_norm.weight", c->dim, 1, true, used, err, errlen))) goto fail;
    rc = load_vec(fd, &tmp, &m->output_norm, err, errlen);
    m->norm_bytes += (size_t)c->dim * 4;
    free_weight(&tmp);
    if (rc || (rc = check_all_used(m, used, err, errlen))) goto fail;
    for (int64_t i = 0; i < sl_gguf_n_tensors(g); i++) m->weight_bytes += sl_gguf_tensor_at(g, i)->nbytes;
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    free(used);
    *out = m;
    return 0;
fail:
    if (fd >= 0) close(fd);
    free(used);
    if (rc > 0) rc = -EINVAL;
    sl_model_free(m);
    return rc;
}

static void mark_stream(sl_weight *w, void *arg) { (void)arg; w->stream = true; }

void sl_model_set_streaming(sl_model *m, bool all, bool lm_head)
{
    if (all) sl_model_for_each_weight(m, mark_stream, NULL);
    if (all || lm_head) {
        m->output.stream = true;
        if (m->tied) m->tok_embd.stream = true;
    }
}

typedef struct weight_list { sl_weight **w; size_t n; } weight_list;
static void list_weight(sl_weight *w, void *arg) { weight_list *l = arg; l->w[l->n++] = w; }

int sl_model_load_resident(sl_model *m, char *err, size_t errlen)
{
    /* every matrix of the model (dense, routed experts, embedding, LM head): heap, not stack */
    size_t cap = 2;
    for (int l = 0; l < m->cfg.n_layers; l++) cap += SL_BLOCK_MATS + (size_t)m->cfg.n_expert * SL_EXPERT_MATS;
    weight_list wl = { malloc(cap * sizeof *wl.w), 0 };
    sl_weight **all = wl.w;
    if (!all) return -ENOMEM;
    if (m->tied) m->tok_embd.stream = m->tok_embd.stream || m->output.stream;
    sl_model_for_each_weight(m, list_weight, &wl);
    int n = (int)wl.n;
    int k = 0;
    for (int i = 0; i < n; i++) if (!all[i]->stream) all[k++] = all[i];
    n = k;
    size_t total = 0;
    for (int i = 0; i < n; i++) total += (all[i]->nbytes + 63) & ~(size_t)63;
    unsigned char *blob = NULL;
    if (posix_memalign((void **)&blob, 64, total ? total : 64)) {
        snprintf(err, errlen, "model: cannot allocate %zu MiB for resident weights", total >> 20);
        free(all);
        return -ENOMEM;
    }
    int fd = open(m->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "model: cannot open %s: %s", m->path, strerror(e));
        free(blob);
        free(all);
        return -e;
    }
    /* no asynchronous readahead: it would keep filling the cache after the last drop below (and the
     * 8 MiB reads are large enough on their own) */
    posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        /* Read in 8 MiB steps and drop each step from the page cache at once: resident weights live in
         * our heap, and a budget (or a cgroup) also counts page cache, so a 400 MiB LM head must not
         * sit in the cache twice while it loads.  Buffered reads keep the kernel's readahead. */
        const uint64_t step = 8u << 20;
        int rc = 0;
        for (uint64_t done = 0; done < all[i]->nbytes && !rc; done += step) {
            uint64_t len = all[i]->nbytes - done < step ? all[i]->nbytes - done : step;
            rc = sl_pread_full(fd, blob + at + done, (size_t)len, all[i]->offset + done);
            posix_fadvise(fd, (off_t)(all[i]->offset + done), (off_t)len, POSIX_FADV_DONTNEED);
        }
        if (rc) {
            snprintf(err, errlen, "model: reading %s (%" PRIu64 " bytes at offset %" PRIu64 "): %s",
                     all[i]->name, all[i]->nbytes, all[i]->offset, rc == -EIO ? "unexpected end of file or I/O error" : strerror(-rc));
            close(fd);
            free(blob);
            free(all);
            return rc;
        }
        all[i]->data = blob + at;
        at += (all[i]->nbytes + 63) & ~(size_t)63;
    }
    if (m->tied) { m->output.data = m->tok_embd.data; m->output.stream = m->tok_embd.stream; }
    /* Buffered reads pull in readahead beyond each tensor: drop the whole file's cache at the end. */
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    free(all);
    m->resident = blob;
    m->resident_bytes = total;
    return 0;
}
