/* runtime/engine/arch_qwen.c — qwen2 (Qwen2, Qwen2.5, DeepSeek-R1-Distill-Qwen) and qwen3.
 *
 * Both are llama blocks with neox RoPE over the whole head (llama.cpp asserts n_rot == head_dim for
 * both) and an optional output.weight (tied when absent: the small Qwen2.5/Qwen3 files).
 *   qwen2: q = Wq h + bq, k = Wk h + bk, v = Wv h + bv (F32 biases, required), added before RoPE
 *          (llama.cpp build_qwen2).
 *   qwen3: no biases; each head of q and of k is RMS-normalised over head_dim and multiplied by
 *          attn_q_norm / attn_k_norm (head_dim values, the rms epsilon of the block norms) before
 *          RoPE; attention.key_length (128) is independent of dim / heads (../shared/README.md
 *          "qwen3 (float64 reference only)").
 */
#include "runtime/engine/arch.h"

#define LLAMA_MATS                                                                          \
    { "blk.%d.attn_q.weight",      SL_MAT_Q,    SL_DIM_EMBD, SL_DIM_Q,    true, 0, 0 },        \
    { "blk.%d.attn_k.weight",      SL_MAT_K,    SL_DIM_EMBD, SL_DIM_KV,   true, 0, 0 },        \
    { "blk.%d.attn_v.weight",      SL_MAT_V,    SL_DIM_EMBD, SL_DIM_KV,   true, 0, 0 },        \
    { "blk.%d.attn_output.weight", SL_MAT_O,    SL_DIM_Q,    SL_DIM_EMBD, true, 0, 0 },        \
    { "blk.%d.ffn_gate.weight",    SL_MAT_GATE, SL_DIM_EMBD, SL_DIM_FFN,  true, 0, 0 },        \
    { "blk.%d.ffn_up.weight",      SL_MAT_UP,   SL_DIM_EMBD, SL_DIM_FFN,  true, 0, 0 },        \
    { "blk.%d.ffn_down.weight",    SL_MAT_DOWN, SL_DIM_FFN,  SL_DIM_EMBD, true, 0, 0 }

static const sl_arch_tensor qwen_mats[] = { LLAMA_MATS };

static const sl_arch_tensor qwen2_vecs[] = {
    { "blk.%d.attn_norm.weight", SL_VEC_ATTN_NORM, SL_DIM_EMBD, SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.attn_q.bias",      SL_VEC_Q_BIAS,    SL_DIM_Q,    SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.attn_k.bias",      SL_VEC_K_BIAS,    SL_DIM_KV,   SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.attn_v.bias",      SL_VEC_V_BIAS,    SL_DIM_KV,   SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.ffn_norm.weight",  SL_VEC_FFN_NORM,  SL_DIM_EMBD, SL_DIM_ONE, true, 0, 0 },
};

static const sl_arch_tensor qwen3_vecs[] = {
    { "blk.%d.attn_norm.weight",   SL_VEC_ATTN_NORM, SL_DIM_EMBD, SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.attn_q_norm.weight", SL_VEC_Q_NORM,    SL_DIM_HEAD, SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.attn_k_norm.weight", SL_VEC_K_NORM,    SL_DIM_HEAD, SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.ffn_norm.weight",    SL_VEC_FFN_NORM,  SL_DIM_EMBD, SL_DIM_ONE, true, 0, 0 },
};

const sl_arch sl_arch_qwen2 = {
    .name = "qwen2",
    .mats = qwen_mats, .n_mats = sizeof qwen_mats / sizeof *qwen_mats,
    .vecs = qwen2_vecs, .n_vecs = sizeof qwen2_vecs / sizeof *qwen2_vecs,
    .rope = SL_ROPE_NEOX,
    .act = SL_ACT_SILU,
    .rope_full = true,
    .output = SL_OUTPUT_OPTIONAL,
};

const sl_arch sl_arch_qwen3 = {
    .name = "qwen3",
    .mats = qwen_mats, .n_mats = sizeof qwen_mats / sizeof *qwen_mats,
    .vecs = qwen3_vecs, .n_vecs = sizeof qwen3_vecs / sizeof *qwen3_vecs,
    .rope = SL_ROPE_NEOX,
    .act = SL_ACT_SILU,
    .rope_full = true,
    .output = SL_OUTPUT_OPTIONAL,
};
