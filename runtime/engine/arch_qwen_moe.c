/* runtime/engine/arch_qwen_moe.c — qwen3moe (Qwen3-30B-A3B, Qwen3-235B-A22B, Qwen3-Coder-30B-A3B)
 * and qwen2moe (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): the qwen3 / qwen2 attention blocks with a
 * mixture-of-experts FFN (../shared/README.md "Set 5", llama.cpp src/models/qwen3moe.cpp,
 * qwen2moe.cpp, llama-graph.cpp build_moe_ffn).
 *   qwen3moe: per-head q/k RMSNorm before neox RoPE (head_dim = key_length, 128 != dim / heads);
 *             router softmax over all experts, top-k, weights renormalised to sum 1; SwiGLU experts
 *             of expert_feed_forward_length; no shared expert.
 *   qwen2moe: q/k/v biases; router softmax, top-k, weights NOT renormalised; plus a shared SwiGLU
 *             expert on every token of expert_shared_feed_forward_length, scaled by
 *             sigmoid(ffn_gate_inp_shexp . h).
 * Both: ffn_gate_inp is (dim x expert_count) F32, the expert stacks are 3-D (ne2 = expert_count).
 */
#include "runtime/engine/arch.h"

#define QWEN_ATTN_MATS                                                                      \
    { "blk.%d.attn_q.weight",      SL_MAT_Q,    SL_DIM_EMBD, SL_DIM_Q,    true, 0, 0 },     \
    { "blk.%d.attn_k.weight",      SL_MAT_K,    SL_DIM_EMBD, SL_DIM_KV,   true, 0, 0 },     \
    { "blk.%d.attn_v.weight",      SL_MAT_V,    SL_DIM_EMBD, SL_DIM_KV,   true, 0, 0 },     \
    { "blk.%d.attn_output.weight", SL_MAT_O,    SL_DIM_Q,    SL_DIM_EMBD, true, 0, 0 }

static const sl_arch_tensor qwen3moe_mats[] = { QWEN_ATTN_MATS };

static const sl_arch_tensor qwen2moe_mats[] = {
    QWEN_ATTN_MATS,
    { "blk.%d.ffn_gate_shexp.weight", SL_MAT_SH_GATE, SL_DIM_EMBD,      SL_DIM_SHEXP_FFN, true, 0, 0 },
    { "blk.%d.ffn_up_shexp.weight",   SL_MAT_SH_UP,   SL_DIM_EMBD,      SL_DIM_SHEXP_FFN, true, 0, 0 },
    { "blk.%d.ffn_down_shexp.weight", SL_MAT_SH_DOWN, SL_DIM_SHEXP_FFN, SL_DIM_EMBD,      true, 0, 0 },
};

static const sl_arch_tensor qwen_experts[] = {
    { "blk.%d.ffn_gate_exps.weight", SL_EXP_GATE, SL_DIM_EMBD,    SL_DIM_EXP_FFN, true, 0, 0 },
    { "blk.%d.ffn_up_exps.weight",   SL_EXP_UP,   SL_DIM_EMBD,    SL_DIM_EXP_FFN, true, 0, 0 },
    { "blk.%d.ffn_down_exps.weight", SL_EXP_DOWN, SL_DIM_EXP_FFN, SL_DIM_EMBD,    true, 0, 0 },
};

static const sl_arch_tensor qwen3moe_vecs[] = {
    { "blk.%d.attn_norm.weight",   SL_VEC_ATTN_NORM, SL_DIM_EMBD, SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.attn_q_norm.weight", SL_VEC_Q_NORM,    SL_DIM_HEAD, SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.attn_k_norm.weight", SL_VEC_K_NORM,    SL_DIM_HEAD, SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.ffn_norm.weight",    SL_VEC_FFN_NORM,  SL_DIM_EMBD, SL_DIM_ONE, true, 0, 0 },
};

static const sl_arch_tensor qwen2moe_vecs[] = {
    { "blk.%d.attn_norm.weight",          SL_VEC_ATTN_NORM,  SL_DIM_EMBD, SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.attn_q.bias",               SL_VEC_Q_BIAS,     SL_DIM_Q,    SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.attn_k.bias",               SL_VEC_K_BIAS,     SL_DIM_KV,   SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.attn_v.bias",               SL_VEC_V_BIAS,     SL_DIM_KV,   SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.ffn_norm.weight",           SL_VEC_FFN_NORM,   SL_DIM_EMBD, SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.ffn_gate_inp_shexp.weight", SL_VEC_SHEXP_GATE, SL_DIM_EMBD, SL_DIM_ONE, true, 0, 0 },
};

const sl_arch sl_arch_qwen3moe = {
    .name = "qwen3moe",
    .mats = qwen3moe_mats, .n_mats = sizeof qwen3moe_mats / sizeof *qwen3moe_mats,
    .vecs = qwen3moe_vecs, .n_vecs = sizeof qwen3moe_vecs / sizeof *qwen3moe_vecs,
    .rope = SL_ROPE_NEOX,
    .act = SL_ACT_SILU,
    .rope_full = true,
    .output = SL_OUTPUT_OPTIONAL,
    .experts = qwen_experts, .n_experts = sizeof qwen_experts / sizeof *qwen_experts,
    .router = "blk.%d.ffn_gate_inp.weight",
    .gating = SL_GATE_SOFTMAX_NORM,
    .moe = true,
};

const sl_arch sl_arch_qwen2moe = {
    .name = "qwen2moe",
    .mats = qwen2moe_mats, .n_mats = sizeof qwen2moe_mats / sizeof *qwen2moe_mats,
    .vecs = qwen2moe_vecs, .n_vecs = sizeof qwen2moe_vecs / sizeof *qwen2moe_vecs,
    .rope = SL_ROPE_NEOX,
    .act = SL_ACT_SILU,
    .rope_full = true,
    .output = SL_OUTPUT_OPTIONAL,
    .experts = qwen_experts, .n_experts = sizeof qwen_experts / sizeof *qwen_experts,
    .router = "blk.%d.ffn_gate_inp.weight",
    .gating = SL_GATE_SOFTMAX,
    .moe = true,
};
