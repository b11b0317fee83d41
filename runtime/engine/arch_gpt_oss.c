/* runtime/engine/arch_gpt_oss.c — gpt-oss (OpenAI gpt-oss-20b, gpt-oss-120b; llama.cpp
 * LLM_ARCH_OPENAI_MOE, src/models/openai-moe.cpp; ../shared/README.md "Set 5"):
 *   attention: q/k/v with biases, neox RoPE with YaRN scaling (per-pair divisors, cos/sin x
 *     (1 + 0.1 ln factor)), one learned sink logit per head in the softmax denominator, a sliding
 *     window (attention.sliding_window) on blocks 0, 2, 4, ... and full attention on the others,
 *     x += attn_output o + attn_output.bias;
 *   FFN: h = rmsnorm(x) * post_attention_norm (the FFN's input norm: there is no ffn_norm);
 *     router logits + ffn_gate_inp.bias, top-k of those, softmax over the k;
 *     experts with biases, g = gate h + b_g, u = up h + b_u, a = swiglu_oai(g, u), y = down a + b_d.
 */
#include "runtime/engine/arch.h"

#include <errno.h>
#include <stdio.h>

#include "runtime/engine/model.h"

static const sl_arch_tensor gpt_oss_mats[] = {
    { "blk.%d.attn_q.weight",      SL_MAT_Q, SL_DIM_EMBD, SL_DIM_Q,    true, 0, 0 },
    { "blk.%d.attn_k.weight",      SL_MAT_K, SL_DIM_EMBD, SL_DIM_KV,   true, 0, 0 },
    { "blk.%d.attn_v.weight",      SL_MAT_V, SL_DIM_EMBD, SL_DIM_KV,   true, 0, 0 },
    { "blk.%d.attn_output.weight", SL_MAT_O, SL_DIM_Q,    SL_DIM_EMBD, true, 0, 0 },
};

static const sl_arch_tensor gpt_oss_vecs[] = {
    { "blk.%d.attn_norm.weight",           SL_VEC_ATTN_NORM,   SL_DIM_EMBD,     SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.attn_q.bias",                SL_VEC_Q_BIAS,      SL_DIM_Q,        SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.attn_k.bias",                SL_VEC_K_BIAS,      SL_DIM_KV,       SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.attn_v.bias",                SL_VEC_V_BIAS,      SL_DIM_KV,       SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.attn_output.bias",           SL_VEC_O_BIAS,      SL_DIM_EMBD,     SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.attn_sinks.weight",          SL_VEC_ATTN_SINKS,  SL_DIM_HEADS,    SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.post_attention_norm.weight", SL_VEC_FFN_NORM,    SL_DIM_EMBD,     SL_DIM_ONE, true, 0, 0 },
    { "blk.%d.ffn_gate_inp.bias",          SL_VEC_ROUTER_BIAS, SL_DIM_N_EXPERT, SL_DIM_ONE, true, 0, 0 },
};

static const sl_arch_tensor gpt_oss_experts[] = {
    { "blk.%d.ffn_gate_exps.weight", SL_EXP_GATE, SL_DIM_EMBD,    SL_DIM_EXP_FFN, true, 0, 0 },
    { "blk.%d.ffn_up_exps.weight",   SL_EXP_UP,   SL_DIM_EMBD,    SL_DIM_EXP_FFN, true, 0, 0 },
    { "blk.%d.ffn_down_exps.weight", SL_EXP_DOWN, SL_DIM_EXP_FFN, SL_DIM_EMBD,    true, 0, 0 },
};

static const sl_arch_tensor gpt_oss_expert_biases[] = {
    { "blk.%d.ffn_gate_exps.bias", SL_EXP_GATE, SL_DIM_EXP_FFN, SL_DIM_N_EXPERT, true, 0, 0 },
    { "blk.%d.ffn_up_exps.bias",   SL_EXP_UP,   SL_DIM_EXP_FFN, SL_DIM_N_EXPERT, true, 0, 0 },
    { "blk.%d.ffn_down_exps.bias", SL_EXP_DOWN, SL_DIM_EMBD,    SL_DIM_N_EXPERT, true, 0, 0 },
};

/* attention.sliding_window (required) on the even blocks; the file has no pattern key (llama.cpp's
 * default period 2 for this architecture). */
static int gpt_oss_hparams(const sl_gguf *g, sl_config *c, char *err, size_t errlen)
{
    uint32_t w = 0;
    int rc = sl_arch_get_u32(g, "gpt-oss", "attention.sliding_window", &w, err, errlen);
    if (rc) return rc;
    if (w < 1 || w > (1u << 24)) {
        snprintf(err, errlen, "model: gpt-oss.attention.sliding_window = %u: needs a window in [1, 2^24]", w);
        return -EINVAL;
    }
    c->n_swa = (int)w;
    c->swa_layers = SL_SWA_EVEN;
    return 0;
}

const sl_arch sl_arch_gpt_oss = {
    .name = "gpt-oss",
    .mats = gpt_oss_mats, .n_mats = sizeof gpt_oss_mats / sizeof *gpt_oss_mats,
    .vecs = gpt_oss_vecs, .n_vecs = sizeof gpt_oss_vecs / sizeof *gpt_oss_vecs,
    .rope = SL_ROPE_NEOX,
    .act = SL_ACT_SWIGLU_OAI,
    .rope_full = true,
    .rope_yarn = true,
    .output = SL_OUTPUT_REQUIRED,
    .read_hparams = gpt_oss_hparams,
    .experts = gpt_oss_experts, .n_experts = sizeof gpt_oss_experts / sizeof *gpt_oss_experts,
    .expert_biases = gpt_oss_expert_biases,
    .n_expert_biases = sizeof gpt_oss_expert_biases / sizeof *gpt_oss_expert_biases,
    .router = "blk.%d.ffn_gate_inp.weight",
    .gating = SL_GATE_TOPK_SOFTMAX,
    .moe = true,
};
