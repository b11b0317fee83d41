/* runtime/engine/arch_llama.c — llama (Llama 1/2/3, Mistral, TinyLlama, ...): pre-norm blocks with
 * RMSNorm, adjacent-pair RoPE, grouped-query attention, a SwiGLU FFN; output.weight optional (tied
 * to the embedding table when absent). */
#include "runtime/engine/arch.h"

static const sl_arch_tensor llama_mats[] = {
    { "blk.%d.attn_q.weight",      SL_MAT_Q,    SL_DIM_EMBD, SL_DIM_Q,    true },
    { "blk.%d.attn_k.weight",      SL_MAT_K,    SL_DIM_EMBD, SL_DIM_KV,   true },
    { "blk.%d.attn_v.weight",      SL_MAT_V,    SL_DIM_EMBD, SL_DIM_KV,   true },
    { "blk.%d.attn_output.weight", SL_MAT_O,    SL_DIM_Q,    SL_DIM_EMBD, true },
    { "blk.%d.ffn_gate.weight",    SL_MAT_GATE, SL_DIM_EMBD, SL_DIM_FFN,  true },
    { "blk.%d.ffn_up.weight",      SL_MAT_UP,   SL_DIM_EMBD, SL_DIM_FFN,  true },
    { "blk.%d.ffn_down.weight",    SL_MAT_DOWN, SL_DIM_FFN,  SL_DIM_EMBD, true },
};

static const sl_arch_tensor llama_vecs[] = {
    { "blk.%d.attn_norm.weight", SL_VEC_ATTN_NORM, SL_DIM_EMBD, SL_DIM_ONE, true },
    { "blk.%d.ffn_norm.weight",  SL_VEC_FFN_NORM,  SL_DIM_EMBD, SL_DIM_ONE, true },
};

const sl_arch sl_arch_llama = {
    .name = "llama",
    .mats = llama_mats, .n_mats = sizeof llama_mats / sizeof *llama_mats,
    .vecs = llama_vecs, .n_vecs = sizeof llama_vecs / sizeof *llama_vecs,
    .rope = SL_ROPE_NORM,
    .act = SL_ACT_SILU,
    .read_hparams = NULL,
};
