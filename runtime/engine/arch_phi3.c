/* runtime/engine/arch_phi3.c — phi3 (Phi-3, Phi-3.5, Phi-4): llama blocks with a fused attn_qkv
 * (q|k|v rows) and a fused ffn_up (gate|up rows, 2 * ffn; no ffn_gate), neox RoPE, output.weight
 * required, and a sliding window on every block when phi3.attention.sliding_window > 0 (Phi-4
 * writes 0: plain causal).  llama.cpp build_phi3 scales q by 1/sqrt(head_dim) after RoPE, which is
 * our score scale.  Long-context files (Phi-3-*-128k, Phi-3.5: rope.scaling.type "longrope") carry
 * rope_factors_long/short.weight, angle divisors chosen by the context length (runtime/engine/
 * forward.c), and rope.scaling.attn_factor, which scales cos and sin (runtime/engine/model.c). */
#include "runtime/engine/arch.h"

#include <errno.h>
#include <stdio.h>

#include "runtime/engine/model.h"

static const sl_arch_tensor phi3_mats[] = {
    { "blk.%d.attn_qkv.weight",    0,           SL_DIM_EMBD, SL_DIM_QKV,  true, SL_FUSED_QKV, 0 },
    { "blk.%d.attn_output.weight", SL_MAT_O,    SL_DIM_Q,    SL_DIM_EMBD, true, 0, 0 },
    { "blk.%d.ffn_up.weight",      0,           SL_DIM_EMBD, SL_DIM_FFN2, true, SL_FUSED_GATE_UP, 0 },
    { "blk.%d.ffn_down.weight",    SL_MAT_DOWN, SL_DIM_FFN,  SL_DIM_EMBD, true, 0, 0 },
};

static const sl_arch_tensor phi3_vecs[] = {
    { "blk.%d.attn_norm.weight", SL_VEC_ATTN_NORM, SL_DIM_EMBD, SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.ffn_norm.weight",  SL_VEC_FFN_NORM,  SL_DIM_EMBD, SL_DIM_ONE, true, 0, 0 },
};

static int phi3_hparams(const sl_gguf *g, sl_config *c, char *err, size_t errlen)
{
    if (sl_gguf_find_key(g, "phi3.attention.sliding_window") < 0) {
        snprintf(err, errlen, "model: required key phi3.attention.sliding_window is missing (0 means no window)");
        return -EINVAL;
    }
    uint32_t w = 0;
    int rc = sl_arch_get_u32(g, "phi3", "attention.sliding_window", &w, err, errlen);
    if (rc) return rc;
    c->n_swa = w > (1u << 24) ? 1 << 24 : (int)w;   /* a window past any context is no window */
    c->swa_layers = SL_SWA_ALL;
    return 0;
}

const sl_arch sl_arch_phi3 = {
    .name = "phi3",
    .mats = phi3_mats, .n_mats = sizeof phi3_mats / sizeof *phi3_mats,
    .vecs = phi3_vecs, .n_vecs = sizeof phi3_vecs / sizeof *phi3_vecs,
    .rope = SL_ROPE_NEOX,
    .rope_long_short = true,
    .act = SL_ACT_SILU,
    .output = SL_OUTPUT_REQUIRED,
    .read_hparams = phi3_hparams,
};
