/* tools/sluice-gen/shapes_moe.c — sluice-gen's Mixture-of-Experts blocks: the tensor set of a
 * qwen3moe, a Mixtral (llama with experts) and a qwen2moe block, their GGUF keys, and the checks of
 * the MoE options (see gen.h).
 *
 * What a file holds (llama.cpp's converter, conversion/qwen.py Qwen2MoeModel / Qwen3MoeModel and
 * conversion/llama.py, and its loader; ../shared/README.md "Set 5" lists the same):
 *   - the router ffn_gate_inp {dim, n_expert} F32 (the converter forces it to F32, llama-quantize
 *     never quantizes it);
 *   - the expert stacks ffn_gate_exps / ffn_up_exps {dim, F, n_expert} and ffn_down_exps
 *     {F, dim, n_expert}: expert e's matrix is the contiguous slice e (the converter stacks the
 *     experts' 2-D weights along a new outer axis), quantized like any matrix of their role;
 *   - qwen2moe's shared expert ffn_{gate,up}_shexp {dim, S}, ffn_down_shexp {S, dim} and its scalar
 *     gate ffn_gate_inp_shexp, {dim, 1} F32 as converted, {dim} in quantized files (llama-quantize
 *     writes ggml_n_dims, which drops the trailing 1 — as ../shared's micro-qwen2moe files show);
 *   - keys: <arch>.expert_count, expert_used_count (the base TextModel keys); qwen2moe/qwen3moe add
 *     expert_feed_forward_length (moe_intermediate_size), qwen2moe expert_shared_feed_forward_length
 *     (shared_expert_intermediate_size).  Mixtral's expert width is llama.feed_forward_length.
 *
 * The named shapes' hyperparameters are the models' config.json (Qwen/Qwen3-30B-A3B: hidden 2048,
 * 48 layers, 32/4 heads, head_dim 128, intermediate 6144, moe_intermediate 768, 128 experts, 8 a
 * token, max_position_embeddings 40960, rope_theta 1e6, rms 1e-6, vocab 151936, untied;
 * mistralai/Mixtral-8x7B-v0.1: hidden 4096, 32 layers, 32/8 heads, intermediate 14336, 8 experts,
 * 2 a token, 32768, 1e6, rms 1e-5, vocab 32000; Qwen/Qwen1.5-MoE-A2.7B: hidden 2048, 24 layers,
 * 16/16 heads, intermediate 5632, moe_intermediate 1408, shared_expert_intermediate 5632, 60
 * experts, 4 a token, 8192, 1e6, rms 1e-6, vocab 151936, untied; openai/gpt-oss-20b: hidden 2880,
 * 24 layers, 64/8 heads, head_dim 64, intermediate 2880 (each expert's width), 32 local experts, 4 a
 * token, sliding_window 128 (even layers), rope_theta 150000, rope_scaling yarn factor 32 beta_fast
 * 32 beta_slow 1 original_max_position_embeddings 4096, max_position_embeddings 131072, rms 1e-5,
 * vocab 201088 (o200k_harmony), untied; openai/gpt-oss-120b the same but 36 layers and 128 experts)
 * — see plan.c's table.  gpt-oss (conversion/gpt_oss.py GptOssModel): expert_feed_forward_length =
 * intermediate_size, attention.sliding_window, the rope.scaling.* keys; per block the biases of
 * q/k/v/o, router and experts, attn_sinks, post_attention_norm (no ffn_norm); its released GGUF files
 * (ggml-org's "mxfp4") are llama-quantize's MXFP4_MOE mix: expert stacks MXFP4, every other matrix
 * Q8_0 (loader/ftype.c).
 */
#include "tools/sluice-gen/gen.h"

#include <stdio.h>

#include "loader/ftype.h"

/* A gpt-oss block in micro-gpt-oss.F16.gguf's order: attention with q/k/v/o biases and the sinks
 * (one logit a head), post_attention_norm (the FFN's input norm), the router and its bias, each
 * expert stack followed by its bias ({F, E} for gate/up, {dim, E} for down: a row an expert). */
static void add_layer_gpt_oss(tplan *p, int *n, const opts *o, int l)
{
    const shape *s = &o->s;
    const int64_t d = s->dim, hd = gen_head_dim(s), qd = hd * s->heads, kvd = hd * s->kv_heads;
    const int64_t E = s->n_expert, F = s->expert_ffn;
    gen_add_plan(p, n, o, K_ATTN_NORM, l, "attn_norm", d, 0, 0);
    gen_add_plan(p, n, o, K_Q, l, "attn_q", d, qd, 0);
    gen_add_plan(p, n, o, K_Q_BIAS, l, "attn_q", qd, 0, 0);
    gen_add_plan(p, n, o, K_K, l, "attn_k", d, kvd, 0);
    gen_add_plan(p, n, o, K_K_BIAS, l, "attn_k", kvd, 0, 0);
    gen_add_plan(p, n, o, K_V, l, "attn_v", d, kvd, 0);
    gen_add_plan(p, n, o, K_V_BIAS, l, "attn_v", kvd, 0, 0);
    gen_add_plan(p, n, o, K_O, l, "attn_output", qd, d, 0);
    gen_add_plan(p, n, o, K_O_BIAS, l, "attn_output", d, 0, 0);
    gen_add_plan(p, n, o, K_SINKS, l, "attn_sinks", s->heads, 0, 0);
    gen_add_plan(p, n, o, K_POST_ATTN_NORM, l, "post_attention_norm", d, 0, 0);
    gen_add_plan(p, n, o, K_GATE_INP, l, "ffn_gate_inp", d, E, 0);
    gen_add_plan(p, n, o, K_GATE_INP_BIAS, l, "ffn_gate_inp", E, 0, 0);
    gen_add_plan(p, n, o, K_GATE_EXPS, l, "ffn_gate_exps", d, F, E);
    gen_add_plan(p, n, o, K_GATE_EXPS_BIAS, l, "ffn_gate_exps", F, E, 0);
    gen_add_plan(p, n, o, K_UP_EXPS, l, "ffn_up_exps", d, F, E);
    gen_add_plan(p, n, o, K_UP_EXPS_BIAS, l, "ffn_up_exps", F, E, 0);
    gen_add_plan(p, n, o, K_DOWN_EXPS, l, "ffn_down_exps", F, d, E);
    gen_add_plan(p, n, o, K_DOWN_EXPS_BIAS, l, "ffn_down_exps", d, E, 0);
}

/* Contract: see gen.h.  Orders: the micro MoE files of ../shared (the converter's for F16; quantized
 * files are re-sorted by gen_build_plan). */
void gen_add_layer_moe(tplan *p, int *n, const opts *o, int l)
{
    const shape *s = &o->s;
    if (s->arch == GA_GPT_OSS) {
        add_layer_gpt_oss(p, n, o, l);
        return;
    }
    const int64_t d = s->dim, hd = gen_head_dim(s), qd = hd * s->heads, kvd = hd * s->kv_heads;
    const int64_t E = s->n_expert, F = s->expert_ffn, S = s->shexp_ffn;
    gen_add_plan(p, n, o, K_ATTN_NORM, l, "attn_norm", d, 0, 0);
    gen_add_plan(p, n, o, K_Q, l, "attn_q", d, qd, 0);
    if (s->arch == GA_QWEN2MOE) gen_add_plan(p, n, o, K_Q_BIAS, l, "attn_q", qd, 0, 0);
    if (s->arch == GA_QWEN3MOE) gen_add_plan(p, n, o, K_Q_NORM, l, "attn_q_norm", hd, 0, 0);
    gen_add_plan(p, n, o, K_K, l, "attn_k", d, kvd, 0);
    if (s->arch == GA_QWEN2MOE) gen_add_plan(p, n, o, K_K_BIAS, l, "attn_k", kvd, 0, 0);
    if (s->arch == GA_QWEN3MOE) gen_add_plan(p, n, o, K_K_NORM, l, "attn_k_norm", hd, 0, 0);
    gen_add_plan(p, n, o, K_V, l, "attn_v", d, kvd, 0);
    if (s->arch == GA_QWEN2MOE) gen_add_plan(p, n, o, K_V_BIAS, l, "attn_v", kvd, 0, 0);
    gen_add_plan(p, n, o, K_O, l, "attn_output", qd, d, 0);
    gen_add_plan(p, n, o, K_FFN_NORM, l, "ffn_norm", d, 0, 0);
    gen_add_plan(p, n, o, K_GATE_INP, l, "ffn_gate_inp", d, E, 0);
    gen_add_plan(p, n, o, K_GATE_EXPS, l, "ffn_gate_exps", d, F, E);
    gen_add_plan(p, n, o, K_UP_EXPS, l, "ffn_up_exps", d, F, E);
    gen_add_plan(p, n, o, K_DOWN_EXPS, l, "ffn_down_exps", F, d, E);
    if (S > 0) {
        gen_add_plan(p, n, o, K_GATE_INP_SHEXP, l, "ffn_gate_inp_shexp", d, o->ftype == SL_FTYPE_F16 ? 1 : 0, 0);
        gen_add_plan(p, n, o, K_GATE_SHEXP, l, "ffn_gate_shexp", d, S, 0);
        gen_add_plan(p, n, o, K_UP_SHEXP, l, "ffn_up_shexp", d, S, 0);
        gen_add_plan(p, n, o, K_DOWN_SHEXP, l, "ffn_down_shexp", S, d, 0);
    }
}

/* gpt-oss's own keys, as the converter writes them from config.json (rope_scaling: yarn, factor 32,
 * beta_fast 32, beta_slow 1, original_max_position_embeddings; sliding_window).  Writer status. */
static int write_meta_gpt_oss(sl_gguf_writer *w, const shape *s)
{
    int rc = sl_gguf_writer_kv_str(w, "gpt-oss.rope.scaling.type", "yarn");
    if (!rc) rc = sl_gguf_writer_kv_f32(w, "gpt-oss.rope.scaling.factor", 32.0f);
    if (!rc) rc = sl_gguf_writer_kv_u32(w, "gpt-oss.rope.scaling.original_context_length", (uint32_t)s->yarn_orig_ctx);
    if (!rc) rc = sl_gguf_writer_kv_f32(w, "gpt-oss.rope.scaling.yarn_beta_fast", 32.0f);
    if (!rc) rc = sl_gguf_writer_kv_f32(w, "gpt-oss.rope.scaling.yarn_beta_slow", 1.0f);
    if (!rc) rc = sl_gguf_writer_kv_u32(w, "gpt-oss.attention.sliding_window", (uint32_t)s->swa);
    return rc;
}

/* Contract: see gen.h. */
int gen_write_meta_moe(sl_gguf_writer *w, const opts *o)
{
    const shape *s = &o->s;
    const char *a = gen_arch_name(s->arch);
    char k[96];
    snprintf(k, sizeof k, "%s.expert_count", a);
    int rc = sl_gguf_writer_kv_u32(w, k, (uint32_t)s->n_expert);
    snprintf(k, sizeof k, "%s.expert_used_count", a);
    if (!rc) rc = sl_gguf_writer_kv_u32(w, k, (uint32_t)s->n_expert_used);
    if (!rc && s->arch != GA_LLAMA) {
        snprintf(k, sizeof k, "%s.expert_feed_forward_length", a);
        rc = sl_gguf_writer_kv_u32(w, k, (uint32_t)s->expert_ffn);
    }
    if (!rc && s->shexp_ffn > 0) {
        snprintf(k, sizeof k, "%s.expert_shared_feed_forward_length", a);
        rc = sl_gguf_writer_kv_u32(w, k, (uint32_t)s->shexp_ffn);
    }
    if (!rc && s->arch == GA_GPT_OSS) rc = write_meta_gpt_oss(w, s);
    return rc;
}

/* Contract: see gen.h. */
const char *gen_moe_apply(shape *s, int experts, int used, int expert_ffn, int shexp_ffn)
{
    const bool moe_arch = s->arch == GA_QWEN3MOE || s->arch == GA_QWEN2MOE || s->arch == GA_GPT_OSS;
    if (experts > 0 && !moe_arch && s->arch != GA_LLAMA) return "--experts: only llama (Mixtral) and the MoE shapes have experts";
    if (experts > 0) s->n_expert = experts;
    if ((used > 0 || expert_ffn > 0) && s->n_expert == 0) return "--experts-used and --expert-ffn need --experts";
    if (shexp_ffn > 0 && s->arch != GA_QWEN2MOE) return "--shexp-ffn: only qwen2moe has a shared expert";
    if (expert_ffn > 0 && s->arch == GA_LLAMA) return "--expert-ffn: a Mixtral's experts are --ffn wide";
    if (used > 0) s->n_expert_used = used;
    if (expert_ffn > 0) s->expert_ffn = expert_ffn;
    if (shexp_ffn > 0) s->shexp_ffn = shexp_ffn;
    if (s->n_expert == 0) return NULL;
    if (s->arch == GA_LLAMA) s->expert_ffn = s->ffn;   /* Mixtral: feed_forward_length is the expert's */
    if (s->n_expert_used == 0) s->n_expert_used = s->n_expert < 2 ? s->n_expert : 2;
    if (s->n_expert_used > s->n_expert) return "--experts-used: more than --experts";
    if (s->expert_ffn <= 0) return "--expert-ffn is required with --experts on this shape";
    return NULL;
}
