/* runtime/engine/arch_gemma2.c — gemma2 (Gemma 2 2B/9B/27B), llama.cpp build_gemma2:
 *   x = embd * sqrt(dim);  neox RoPE;  q.k scaled by 1/sqrt(head_dim) for 26 and 42 blocks,
 *   1/sqrt(dim / heads) for 46 (llama.cpp picks it from the layer count; the converter writes no
 *   query_pre_attn_scalar) and refused otherwise (llama.cpp aborts);  scores soft-capped at
 *   attn_logit_softcapping (default 50);  even blocks attend through a sliding window of
 *   attention.sliding_window (default 4096);  post_attention_norm on the attention output and
 *   post_ffw_norm on the FFN output before each residual add;  GELU(tanh) gated FFN;  tied output,
 *   logits soft-capped at final_logit_softcapping (default 30).  Norm weights are stored as the
 *   converter writes them (HF weight + 1): plain multipliers. */
#include "runtime/engine/arch.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>

#include "runtime/engine/model.h"

static const sl_arch_tensor gemma2_mats[] = {
    { "blk.%d.attn_q.weight",      SL_MAT_Q,    SL_DIM_EMBD, SL_DIM_Q,    true, 0, 0 },
    { "blk.%d.attn_k.weight",      SL_MAT_K,    SL_DIM_EMBD, SL_DIM_KV,   true, 0, 0 },
    { "blk.%d.attn_v.weight",      SL_MAT_V,    SL_DIM_EMBD, SL_DIM_KV,   true, 0, 0 },
    { "blk.%d.attn_output.weight", SL_MAT_O,    SL_DIM_Q,    SL_DIM_EMBD, true, 0, 0 },
    { "blk.%d.ffn_gate.weight",    SL_MAT_GATE, SL_DIM_EMBD, SL_DIM_FFN,  true, 0, 0 },
    { "blk.%d.ffn_up.weight",      SL_MAT_UP,   SL_DIM_EMBD, SL_DIM_FFN,  true, 0, 0 },
    { "blk.%d.ffn_down.weight",    SL_MAT_DOWN, SL_DIM_FFN,  SL_DIM_EMBD, true, 0, 0 },
};

static const sl_arch_tensor gemma2_vecs[] = {
    { "blk.%d.attn_norm.weight",           SL_VEC_ATTN_NORM,      SL_DIM_EMBD, SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.post_attention_norm.weight", SL_VEC_POST_ATTN_NORM, SL_DIM_EMBD, SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.ffn_norm.weight",            SL_VEC_FFN_NORM,       SL_DIM_EMBD, SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.post_ffw_norm.weight",       SL_VEC_POST_FFN_NORM,  SL_DIM_EMBD, SL_DIM_ONE, true, 0, 0 },
};

/* A soft cap "<key>" (default dflt): finite and > 0. */
static int get_cap(const sl_gguf *g, const char *key, float dflt, float *out, char *err, size_t errlen)
{
    *out = dflt;
    int rc = sl_arch_get_f32(g, "gemma2", key, out, err, errlen);
    if (rc) return rc;
    if (!(*out > 0)) {
        snprintf(err, errlen, "model: gemma2.%s = %g must be > 0", key, *out);
        return -EINVAL;
    }
    return 0;
}

static int gemma2_hparams(const sl_gguf *g, sl_config *c, char *err, size_t errlen)
{
    int rc;
    if ((rc = get_cap(g, "attn_logit_softcapping", 50.0f, &c->attn_softcap, err, errlen)) ||
        (rc = get_cap(g, "final_logit_softcapping", 30.0f, &c->final_softcap, err, errlen)))
        return rc;
    uint32_t w = 4096;
    if ((rc = sl_arch_get_u32(g, "gemma2", "attention.sliding_window", &w, err, errlen))) return rc;
    c->n_swa = w > (1u << 24) ? 1 << 24 : (int)w;
    c->swa_layers = SL_SWA_EVEN;
    c->embd_scale = sqrtf((float)c->dim);
    switch (c->n_layers) {
    case 26: case 42: c->attn_scale = 1.0f / sqrtf((float)c->head_dim); break;
    case 46:          c->attn_scale = 1.0f / sqrtf((float)(c->dim / c->n_heads)); break;
    default:
        snprintf(err, errlen, "model: gemma2 with %d blocks: the query scale depends on the model size, which "
                 "llama.cpp derives from block_count (supported: 26, 42, 46)", c->n_layers);
        return -ENOTSUP;
    }
    return 0;
}

const sl_arch sl_arch_gemma2 = {
    .name = "gemma2",
    .mats = gemma2_mats, .n_mats = sizeof gemma2_mats / sizeof *gemma2_mats,
    .vecs = gemma2_vecs, .n_vecs = sizeof gemma2_vecs / sizeof *gemma2_vecs,
    .rope = SL_ROPE_NEOX,
    .act = SL_ACT_GELU_TANH,
    .output = SL_OUTPUT_TIED,
    .read_hparams = gemma2_hparams,
};
