/* runtime/engine/arch_llama.c — llama (Llama 1/2/3/3.1/3.2, Mistral, Mistral-NeMo, TinyLlama, ...):
 * pre-norm blocks with RMSNorm, adjacent-pair RoPE over the whole head (llama.cpp asserts
 * rope.dimension_count == key_length), grouped-query attention, a SwiGLU FFN; output.weight
 * optional (tied to the embedding table when absent: Llama 3.2 1B/3B).  Llama 3.1/3.2 carry
 * rope_freqs.weight, one divisor per rotated pair (llama.cpp build_rope_factors); Mistral-NeMo has
 * attention.key_length 128 != embedding_length / head_count, which the shapes resolve. */
#include "runtime/engine/arch.h"

static const sl_arch_tensor llama_mats[] = {
    { "blk.%d.attn_q.weight",      SL_MAT_Q,    SL_DIM_EMBD, SL_DIM_Q,    true, 0 },
    { "blk.%d.attn_k.weight",      SL_MAT_K,    SL_DIM_EMBD, SL_DIM_KV,   true, 0 },
    { "blk.%d.attn_v.weight",      SL_MAT_V,    SL_DIM_EMBD, SL_DIM_KV,   true, 0 },
    { "blk.%d.attn_output.weight", SL_MAT_O,    SL_DIM_Q,    SL_DIM_EMBD, true, 0 },
    { "blk.%d.ffn_gate.weight",    SL_MAT_GATE, SL_DIM_EMBD, SL_DIM_FFN,  true, 0 },
    { "blk.%d.ffn_up.weight",      SL_MAT_UP,   SL_DIM_EMBD, SL_DIM_FFN,  true, 0 },
    { "blk.%d.ffn_down.weight",    SL_MAT_DOWN, SL_DIM_FFN,  SL_DIM_EMBD, true, 0 },
};

static const sl_arch_tensor llama_vecs[] = {
    { "blk.%d.attn_norm.weight", SL_VEC_ATTN_NORM, SL_DIM_EMBD, SL_DIM_ONE, true, 0 },
    { "blk.%d.ffn_norm.weight",  SL_VEC_FFN_NORM,  SL_DIM_EMBD, SL_DIM_ONE, true, 0 },
};

const sl_arch sl_arch_llama = {
    .name = "llama",
    .mats = llama_mats, .n_mats = sizeof llama_mats / sizeof *llama_mats,
    .vecs = llama_vecs, .n_vecs = sizeof llama_vecs / sizeof *llama_vecs,
    .rope = SL_ROPE_NORM,
    .act = SL_ACT_SILU,
    .rope_freqs = true,
    .rope_full = true,
    .output = SL_OUTPUT_OPTIONAL,
    .read_hparams = NULL,
};
