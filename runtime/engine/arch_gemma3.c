/* runtime/engine/arch_gemma3.c — gemma3 (Gemma 3 270M/1B/4B/12B/27B text), llama.cpp
 * src/models/gemma3.cpp and ../shared/README.md "Set 6":
 *   x = embd * sqrt(dim);  per-head RMSNorm of q and k (attn_q_norm / attn_k_norm) before neox RoPE
 *   over the whole head;  q.k scaled by 1/sqrt(key_length), 1/sqrt(dim / heads) for the 62-block 27B;
 *   no soft-caps;  post_attention_norm and post_ffw_norm around the residual adds;  GELU(tanh) gated
 *   FFN;  tied output.
 *   Blocks are local or global: with attention.sliding_window, block l is local iff l % P < P - 1
 *   (P = attention.sliding_window_pattern, default 6: blocks 5, 11, 17, ... global).  Local blocks
 *   attend through the window with RoPE base rope.freq_base_swa (default 10000) and no position
 *   scaling; global blocks attend causally with rope.freq_base and the file's linear scaling.  No
 *   sliding_window key: every block global. */
#include "runtime/engine/arch.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>

#include "runtime/engine/model.h"

static const sl_arch_tensor gemma3_mats[] = {
    { "blk.%d.attn_q.weight",      SL_MAT_Q,    SL_DIM_EMBD, SL_DIM_Q,    true, 0, 0 },
    { "blk.%d.attn_k.weight",      SL_MAT_K,    SL_DIM_EMBD, SL_DIM_KV,   true, 0, 0 },
    { "blk.%d.attn_v.weight",      SL_MAT_V,    SL_DIM_EMBD, SL_DIM_KV,   true, 0, 0 },
    { "blk.%d.attn_output.weight", SL_MAT_O,    SL_DIM_Q,    SL_DIM_EMBD, true, 0, 0 },
    { "blk.%d.ffn_gate.weight",    SL_MAT_GATE, SL_DIM_EMBD, SL_DIM_FFN,  true, 0, 0 },
    { "blk.%d.ffn_up.weight",      SL_MAT_UP,   SL_DIM_EMBD, SL_DIM_FFN,  true, 0, 0 },
    { "blk.%d.ffn_down.weight",    SL_MAT_DOWN, SL_DIM_FFN,  SL_DIM_EMBD, true, 0, 0 },
};

static const sl_arch_tensor gemma3_vecs[] = {
    { "blk.%d.attn_norm.weight",           SL_VEC_ATTN_NORM,      SL_DIM_EMBD, SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.attn_q_norm.weight",         SL_VEC_Q_NORM,         SL_DIM_HEAD, SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.attn_k_norm.weight",         SL_VEC_K_NORM,         SL_DIM_HEAD, SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.post_attention_norm.weight", SL_VEC_POST_ATTN_NORM, SL_DIM_EMBD, SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.ffn_norm.weight",            SL_VEC_FFN_NORM,       SL_DIM_EMBD, SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.post_ffw_norm.weight",       SL_VEC_POST_FFN_NORM,  SL_DIM_EMBD, SL_DIM_ONE, true, 0, 0 },
};

static int gemma3_hparams(const sl_gguf *g, sl_config *c, char *err, size_t errlen)
{
    uint32_t w = 0;
    int rc = sl_arch_get_u32(g, "gemma3", "attention.sliding_window", &w, err, errlen);
    if (rc) return rc;
    c->n_swa = w > (1u << 24) ? 1 << 24 : (int)w;
    c->swa_layers = w ? SL_SWA_LAYERS : SL_SWA_NONE;
    c->embd_scale = sqrtf((float)c->dim);
    c->attn_scale = c->n_layers == 62 ? 1.0f / sqrtf((float)(c->dim / c->n_heads)) : 1.0f / sqrtf((float)c->head_dim);
    return 0;
}

/* Local blocks: the window, rope.freq_base_swa and no position scaling; global ones keep the
 * file-wide base and scaling (model.c's defaults). */
static int gemma3_layers(sl_model *m, char *err, size_t errlen)
{
    sl_config *c = &m->cfg;
    if (!c->n_swa) return 0;
    uint32_t period = 6;
    float base_swa = 10000.0f;
    int rc;
    if ((rc = sl_arch_get_u32(m->gguf, "gemma3", "attention.sliding_window_pattern", &period, err, errlen)) ||
        (rc = sl_arch_get_f32(m->gguf, "gemma3", "rope.freq_base_swa", &base_swa, err, errlen)))
        return rc;
    if (period < 1 || period > 1024 || !(base_swa > 0)) {
        snprintf(err, errlen, "model: gemma3.attention.sliding_window_pattern %u or rope.freq_base_swa %g out of range",
                 period, base_swa);
        return -EINVAL;
    }
    for (int l = 0; l < c->n_layers; l++) {
        sl_layer *L = &m->layers[l];
        if ((uint32_t)l % period >= period - 1) continue;   /* global */
        L->window = c->n_swa;
        L->rope_base = base_swa;
        L->rope_scale = 1.0f;
    }
    return 0;
}

const sl_arch sl_arch_gemma3 = {
    .name = "gemma3",
    .mats = gemma3_mats, .n_mats = sizeof gemma3_mats / sizeof *gemma3_mats,
    .vecs = gemma3_vecs, .n_vecs = sizeof gemma3_vecs / sizeof *gemma3_vecs,
    .rope = SL_ROPE_NEOX,
    .act = SL_ACT_GELU_TANH,
    .rope_full = true,
    .output = SL_OUTPUT_TIED,
    .read_hparams = gemma3_hparams,
    .layer_settings = gemma3_layers,
};
