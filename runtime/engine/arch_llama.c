/* runtime/engine/arch_llama.c — llama (Llama 1/2/3/3.1/3.2, Mistral, Mistral-NeMo, TinyLlama, ...):
 * pre-norm blocks with RMSNorm, adjacent-pair RoPE over the whole head (llama.cpp asserts
 * rope.dimension_count == key_length), grouped-query attention, a SwiGLU FFN; output.weight
 * optional (tied to the embedding table when absent: Llama 3.2 1B/3B).  Llama 3.1/3.2 carry
 * rope_freqs.weight, one divisor per rotated pair (llama.cpp build_rope_factors); Mistral-NeMo has
 * attention.key_length 128 != embedding_length / head_count, which the shapes resolve.
 * Mixtral 8x7B / 8x22B are llama files with llama.expert_count > 0: routed experts instead of the
 * FFN, the router's softmax over all experts, the top-k, their weights renormalised (llama.cpp
 * build_moe_ffn with norm_w; ../shared/README.md "Set 5"). */
#include "runtime/engine/arch.h"

static const sl_arch_tensor llama_mats[] = {
    { "blk.%d.attn_q.weight",      SL_MAT_Q,    SL_DIM_EMBD, SL_DIM_Q,    true, 0, 0 },
    { "blk.%d.attn_k.weight",      SL_MAT_K,    SL_DIM_EMBD, SL_DIM_KV,   true, 0, 0 },
    { "blk.%d.attn_v.weight",      SL_MAT_V,    SL_DIM_EMBD, SL_DIM_KV,   true, 0, 0 },
    { "blk.%d.attn_output.weight", SL_MAT_O,    SL_DIM_Q,    SL_DIM_EMBD, true, 0, 0 },
    { "blk.%d.ffn_gate.weight",    SL_MAT_GATE, SL_DIM_EMBD, SL_DIM_FFN,  true, 0, SL_WHEN_DENSE },
    { "blk.%d.ffn_up.weight",      SL_MAT_UP,   SL_DIM_EMBD, SL_DIM_FFN,  true, 0, SL_WHEN_DENSE },
    { "blk.%d.ffn_down.weight",    SL_MAT_DOWN, SL_DIM_FFN,  SL_DIM_EMBD, true, 0, SL_WHEN_DENSE },
};

/* Mixtral: llama.expert_count > 0 replaces the FFN with routed SwiGLU experts of
 * llama.feed_forward_length (no shared expert, no dense FFN). */
static const sl_arch_tensor llama_experts[] = {
    { "blk.%d.ffn_gate_exps.weight", SL_EXP_GATE, SL_DIM_EMBD,    SL_DIM_EXP_FFN, true, 0, SL_WHEN_MOE },
    { "blk.%d.ffn_up_exps.weight",   SL_EXP_UP,   SL_DIM_EMBD,    SL_DIM_EXP_FFN, true, 0, SL_WHEN_MOE },
    { "blk.%d.ffn_down_exps.weight", SL_EXP_DOWN, SL_DIM_EXP_FFN, SL_DIM_EMBD,    true, 0, SL_WHEN_MOE },
};

static const sl_arch_tensor llama_vecs[] = {
    { "blk.%d.attn_norm.weight", SL_VEC_ATTN_NORM, SL_DIM_EMBD, SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.ffn_norm.weight",  SL_VEC_FFN_NORM,  SL_DIM_EMBD, SL_DIM_ONE, true, 0, 0 },
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
    .experts = llama_experts, .n_experts = sizeof llama_experts / sizeof *llama_experts,
    .router = "blk.%d.ffn_gate_inp.weight",
    .gating = SL_GATE_SOFTMAX_NORM,
    .moe_optional = true,
};
