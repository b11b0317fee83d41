/* tools/sluice-gen/plan.c — sluice-gen's named shapes, the tensor set and llama.cpp type mix of each
 * architecture, and the metadata (see gen.h).
 *
 * Tensor sets are the ones llama.cpp's loader creates for each architecture (and sluice binds:
 * runtime/engine/arch_*.c); the type mix of each file type is llama.cpp's llama_tensor_get_type
 * (loader/ftype.c); 1-D tensors (norms, biases, rope factors) stay F32. */
#include "tools/sluice-gen/gen.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/types.h"
#include "loader/ftype.h"

/* Hyperparameters from the models' config.json (Mistral: v0.2, rope_theta 1e6, 32k context).
 * Vocabularies without a file here are a real one padded to the real size: Gemma 2's 256000 from
 * Llama 2's 32000, Mistral-NeMo's Tekken 131072 from Llama 3's 128256, Qwen2.5-7B's 152064 rows
 * from the Qwen tokenizer's 151936.  Reference sizes of the newer shapes: the sizes the public
 * Q4_K_M files' pages show to 3 digits (Meta-Llama-3.1-8B-Instruct, Qwen2.5-7B-Instruct, Qwen3-8B,
 * gemma-2-9b-it, Phi-3-medium-4k-instruct, Mistral-Nemo-Instruct-2407), as recalled, not re-measured
 * here.  Gemma 3 (text part of gemma-3-{4b,12b,27b}-it: config.json text_config; head_dim 256 / 256 /
 * 128, sliding_window 1024 on 5 of 6 blocks, rope_theta 1e6 with linear scaling 8 on the global
 * blocks, rope_local_base_freq 1e4, rms 1e-6, tied): the 262,144-token vocabulary padded from Llama
 * 2's 32000; reference sizes the ggml-org/gemma-3-*-it-GGUF Q4_K_M files (2.49, 7.30, 16.5 GB), as
 * recalled, not re-measured here. */
const shape GEN_SHAPES[] = {
    { "tinyllama-1.1b", GA_LLAMA, 2048, 22, 32,  4,  5632,  32000,  2048, 1e4f, "ggml-vocab-llama-spm.gguf",       0.668e9, .head_dim = 0 },
    { "llama2-7b",      GA_LLAMA, 4096, 32, 32, 32, 11008,  32000,  4096, 1e4f, "ggml-vocab-llama-spm.gguf",       4.08e9, .head_dim = 0 },
    { "llama3-8b",      GA_LLAMA, 4096, 32, 32,  8, 14336, 128256,  8192, 5e5f, "ggml-vocab-llama-bpe.rebuilt.gguf", 4.92e9, .head_dim = 0 },
    { "mistral-7b",     GA_LLAMA, 4096, 32, 32,  8, 14336,  32000, 32768, 1e6f, "ggml-vocab-llama-spm.gguf",       4.37e9, .head_dim = 0 },
    { "llama2-13b",     GA_LLAMA, 5120, 40, 40, 40, 13824,  32000,  4096, 1e4f, "ggml-vocab-llama-spm.gguf",       7.87e9, .head_dim = 0 },
    { "llama3.1-8b",    GA_LLAMA, 4096, 32, 32,  8, 14336, 128256, 131072, 5e5f, "ggml-vocab-llama-bpe.rebuilt.gguf", 4.92e9,
      .rope_freqs = true },
    { "qwen2.5-7b",     GA_QWEN2, 3584, 28, 28,  4, 18944, 152064, 32768, 1e6f, "ggml-vocab-qwen2.rebuilt.gguf", 4.68e9,
      .rms_eps = 1e-6f },
    { "qwen3-8b",       GA_QWEN3, 4096, 36, 32,  8, 12288, 151936, 40960, 1e6f, "ggml-vocab-qwen2.rebuilt.gguf", 5.03e9,
      .head_dim = 128, .rms_eps = 1e-6f },
    { "gemma2-9b",      GA_GEMMA2, 3584, 42, 16, 8, 14336, 256000,  8192, 1e4f, "ggml-vocab-llama-spm.gguf", 5.76e9,
      .head_dim = 256, .rms_eps = 1e-6f, .tied = true, .swa = 4096 },
    { "phi3-medium-14b", GA_PHI3, 5120, 40, 40, 10, 17920,  32064,  4096, 1e4f, "ggml-vocab-phi-3.gguf", 8.57e9,
      .swa = 2047 },
    { "mistral-nemo-12b", GA_LLAMA, 5120, 40, 32, 8, 14336, 131072, 1024000, 1e6f, "ggml-vocab-llama-bpe.rebuilt.gguf", 7.48e9,
      .head_dim = 128 },
    { "gemma3-4b",      GA_GEMMA3, 2560, 34,  8,  4, 10240, 262144, 131072, 1e6f, "ggml-vocab-llama-spm.gguf", 2.49e9,
      .head_dim = 256, .rms_eps = 1e-6f, .tied = true, .swa = 1024 },
    { "gemma3-12b",     GA_GEMMA3, 3840, 48, 16,  8, 15360, 262144, 131072, 1e6f, "ggml-vocab-llama-spm.gguf", 7.30e9,
      .head_dim = 256, .rms_eps = 1e-6f, .tied = true, .swa = 1024 },
    { "gemma3-27b",     GA_GEMMA3, 5376, 62, 32, 16, 21504, 262144, 131072, 1e6f, "ggml-vocab-llama-spm.gguf", 16.5e9,
      .head_dim = 128, .rms_eps = 1e-6f, .tied = true, .swa = 1024 },
    /* Mixture-of-Experts (hyperparameter sources: shapes_moe.c; reference sizes: REF_SIZES below) */
    { "qwen3-30b-a3b", GA_QWEN3MOE, 2048, 48, 32, 4, 6144, 151936, 40960, 1e6f, "ggml-vocab-qwen2.rebuilt.gguf", 18.6e9,
      .head_dim = 128, .rms_eps = 1e-6f, .n_expert = 128, .n_expert_used = 8, .expert_ffn = 768 },
    { "mixtral-8x7b", GA_LLAMA, 4096, 32, 32, 8, 14336, 32000, 32768, 1e6f, "ggml-vocab-llama-spm.gguf", 28.4e9,
      .n_expert = 8, .n_expert_used = 2, .expert_ffn = 14336 },
    { "qwen1.5-moe-a2.7b", GA_QWEN2MOE, 2048, 24, 16, 16, 5632, 151936, 8192, 1e6f, "ggml-vocab-qwen2.rebuilt.gguf",
      9.5e9, .rms_eps = 1e-6f, .n_expert = 60, .n_expert_used = 4, .expert_ffn = 1408, .shexp_ffn = 5632 },
    { "gpt-oss-20b", GA_GPT_OSS, 2880, 24, 64, 8, 2880, 201088, 131072, 150000.0f, "ggml-vocab-gpt-oss.gguf", 0,
      .head_dim = 64, .swa = 128, .yarn_orig_ctx = 4096, .n_expert = 32, .n_expert_used = 4, .expert_ffn = 2880 },
    { "gpt-oss-120b", GA_GPT_OSS, 2880, 36, 64, 8, 2880, 201088, 131072, 150000.0f, "ggml-vocab-gpt-oss.gguf", 0,
      .head_dim = 64, .swa = 128, .yarn_orig_ctx = 4096, .n_expert = 128, .n_expert_used = 4, .expert_ffn = 2880 },
};
const int GEN_N_SHAPES = (int)(sizeof GEN_SHAPES / sizeof GEN_SHAPES[0]);

/* Public file sizes in the other file types, as the model pages show them to 3 digits (recalled, not
 * re-measured here): Meta-Llama-3-8B's Q3_K_M, Q2_K and IQ4_XS files.
 *
 * MoE shapes (looked up in Hugging Face file listings, Dec 2026; 3 digits):
 *   qwen3-30b-a3b  Q4_K_M 18.6 GB (unsloth/Qwen3-30B-A3B-GGUF, the figure issue #37 quotes; a model
 *                  card elsewhere gives it as 17.28 GiB = 18.55 GB); bartowski/Qwen_Qwen3-30B-A3B-GGUF:
 *                  Q8_0 32.48, Q6_K 25.10, Q5_K_M 21.74 GB (its bf16 61.10 GB is our F16's size).
 *   mixtral-8x7b   mradermacher/Mixtral-8x7B-v0.1-GGUF (a 2024+ llama.cpp, 3-D expert tensors):
 *                  Q4_K_M 28.4, Q3_K_M 22.5, Q2_K 17.3, Q5_K_M 33.2 GB; Q8_0 49.62 and Q4_0 26.4 GB
 *                  (TheBloke/Mixtral-8x7B-v0.1-GGUF; uniform types, so its December 2023 llama.cpp
 *                  does not matter); Q6_K 38.4 GB (gobean/Mixtral-8x7B-Instruct-v0.1-GGUF).
 *                  TheBloke's Q4_K_M (26.4 GB, llama.cpp 8a7b2fa) is NOT a reference: that
 *                  llama.cpp stored each expert as its own 2-D tensor (blk.N.ffn_down.E.weight), which
 *                  its "ffn_down.weight" rule did not match, so no expert got Q6_K — the file is the
 *                  size of its Q4_0 and Q4_K_S; today's llama-quantize makes 28.4 GB.
 *   qwen1.5-moe    RichardErkhov/Qwen_-_Qwen1.5-MoE-A2.7B-gguf (the base model; the chat model has the
 *                  same tensors): Q4_K_M 9.5, Q3_K_M 7.44, Q2_K 5.89, Q4_0 8.15 GB.
 *   gpt-oss        ggml-org/gpt-oss-20b-GGUF gpt-oss-20b-mxfp4.gguf 12.1 GB (bartowski's MXFP4 file: the
 *                  same), ggml-org/gpt-oss-120b-GGUF's three mxfp4 shards 63.4 GB together; their
 *                  tensor bytes as llama-bench prints them (public benchmark tables): "gpt-oss 20B
 *                  MXFP4 MoE 11.27 GiB 20.91 B", "gpt-oss ?B MXFP4 MoE 59.02 GiB 116.83 B" — which
 *                  the MXFP4_MOE mix gives to 4 digits (tests/test_gen_moe.c). */
static const struct { const char *shape; int ftype; double bytes; } REF_SIZES[] = {
    { "llama3-8b", SL_FTYPE_Q3_K_M, 4.02e9 }, { "llama3-8b", SL_FTYPE_Q2_K, 3.18e9 },
    { "llama3-8b", SL_FTYPE_IQ4_XS, 4.45e9 },
    { "qwen3-30b-a3b", SL_FTYPE_Q8_0, 32.48e9 }, { "qwen3-30b-a3b", SL_FTYPE_Q6_K, 25.10e9 },
    { "qwen3-30b-a3b", SL_FTYPE_Q5_K_M, 21.74e9 },
    { "mixtral-8x7b", SL_FTYPE_Q8_0, 49.62e9 }, { "mixtral-8x7b", SL_FTYPE_Q4_0, 26.4e9 },
    { "mixtral-8x7b", SL_FTYPE_Q3_K_M, 22.5e9 }, { "mixtral-8x7b", SL_FTYPE_Q2_K, 17.3e9 },
    { "mixtral-8x7b", SL_FTYPE_Q5_K_M, 33.2e9 }, { "mixtral-8x7b", SL_FTYPE_Q6_K, 38.4e9 },
    { "qwen1.5-moe-a2.7b", SL_FTYPE_Q3_K_M, 7.44e9 }, { "qwen1.5-moe-a2.7b", SL_FTYPE_Q2_K, 5.89e9 },
    { "qwen1.5-moe-a2.7b", SL_FTYPE_Q4_0, 8.15e9 },
    { "gpt-oss-20b", SL_FTYPE_MXFP4_MOE, 12.1e9 }, { "gpt-oss-120b", SL_FTYPE_MXFP4_MOE, 63.4e9 },
};

/* Contract: see gen.h. */
double gen_ref_bytes(const shape *s, int ftype)
{
    if (ftype == SL_FTYPE_Q4_K_M) return s->ref_q4km;
    for (size_t i = 0; i < sizeof REF_SIZES / sizeof REF_SIZES[0]; i++)
        if (REF_SIZES[i].ftype == ftype && !strcmp(REF_SIZES[i].shape, s->name)) return REF_SIZES[i].bytes;
    return 0;
}

const char *gen_arch_name(gen_arch a)
{
    static const char *const names[] = { "llama", "qwen2", "qwen3", "phi3", "gemma2", "qwen3moe", "qwen2moe", "gpt-oss",
                                         "gemma3" };
    return names[a];
}

static bool is_bias(enum kind k)
{
    return k == K_Q_BIAS || k == K_K_BIAS || k == K_V_BIAS || k == K_O_BIAS || k == K_GATE_INP_BIAS ||
           k == K_GATE_EXPS_BIAS || k == K_UP_EXPS_BIAS || k == K_DOWN_EXPS_BIAS;
}

/* F32 tensors llama-quantize never quantizes: 1-D ones and the biases (gpt-oss's 2-D expert biases:
 * it quantizes only names ending in "weight"). */
static bool is_vector(enum kind k)
{
    return k == K_OUT_NORM || k == K_ATTN_NORM || k == K_FFN_NORM || is_bias(k) || k == K_SINKS ||
           k == K_Q_NORM || k == K_K_NORM || k == K_POST_ATTN_NORM || k == K_POST_FFN_NORM || k == K_ROPE_FREQS;
}

/* What llama.cpp's quantizer takes each kind of tensor for (by its name). */
static int role_of(enum kind k)
{
    switch (k) {
    case K_EMBD: return SL_ROLE_TOKEN_EMBD;
    case K_OUTPUT: return SL_ROLE_OUTPUT;
    case K_Q: return SL_ROLE_ATTN_Q;
    case K_K: return SL_ROLE_ATTN_K;
    case K_V: return SL_ROLE_ATTN_V;
    case K_QKV: return SL_ROLE_ATTN_QKV;
    case K_O: return SL_ROLE_ATTN_OUTPUT;
    case K_GATE: case K_GATE_SHEXP: return SL_ROLE_FFN_GATE;
    case K_UP: case K_GATE_UP: case K_UP_SHEXP: return SL_ROLE_FFN_UP;
    case K_DOWN: case K_DOWN_SHEXP: return SL_ROLE_FFN_DOWN;
    case K_GATE_EXPS: return SL_ROLE_FFN_GATE | SL_ROLE_EXPS;
    case K_UP_EXPS: return SL_ROLE_FFN_UP | SL_ROLE_EXPS;
    case K_DOWN_EXPS: return SL_ROLE_FFN_DOWN | SL_ROLE_EXPS;
    default: return SL_ROLE_OTHER;
    }
}

/* Type of one tensor under the file type: llama-quantize's mix (loader/ftype.c, shared with the
 * planner's estimates for other file types). */
static int pick_type(const opts *o, enum kind k, int layer, int64_t ne0)
{
    if (is_vector(k)) return SL_TYPE_F32;   /* 1-D: never quantized */
    return sl_ftype_tensor_type_moe(o->ftype, &(sl_ftype_model){ o->s.layers, o->s.heads, o->s.kv_heads, o->tied },
                                    o->s.n_expert, role_of(k), layer, ne0);
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* Contract: see gen.h. */
void gen_add_plan(tplan *p, int *n, const opts *o, enum kind k, int layer, const char *name, int64_t ne0, int64_t ne1,
                  int64_t ne2)
{
    tplan *t = &p[(*n)++];
    memset(t, 0, sizeof *t);
    const char *suffix = is_bias(k) ? "bias" : "weight";
    if (layer >= 0) snprintf(t->name, sizeof t->name, "blk.%d.%s.%s", layer, name, suffix);
    else snprintf(t->name, sizeof t->name, "%s.%s", name, suffix);
    t->kind = k;
    t->layer = layer;
    t->type = pick_type(o, k, layer, ne0);
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = ne2;
    t->n_dims = ne2 > 0 ? 3 : ne1 > 0 ? 2 : 1;
    if (is_bias(k)) t->sigma = 0.1f;                                           /* around 0 */
    else if (k == K_SINKS) t->sigma = 1.0f;              /* one logit a head, beside q.k / sqrt(hd) */
    else if (k == K_ROPE_FREQS) t->center = 1.0f;                              /* computed, not random */
    else if (is_vector(k)) { t->center = 1.0f; t->sigma = 0.1f; }               /* norms: 1 + 0.1 z */
    /* gemma2 multiplies the embedding by sqrt(dim) and reuses it as the LM head: std 1/sqrt(dim)
     * keeps inputs and logits at std ~1 */
    else if (k == K_EMBD) t->sigma = o->s.arch == GA_GEMMA2 || o->s.arch == GA_GEMMA3 ? 1.0f / sqrtf((float)o->s.dim) : 1.0f;
    else if (k == K_OUTPUT) t->sigma = 1.0f / sqrtf((float)o->s.dim);
    else t->sigma = 1.0f / sqrtf((float)ne0);
    t->key = fnv1a(t->name);
}

/* A 1-D or 2-D tensor (see gen_add_plan). */
static void add_plan(tplan *p, int *n, const opts *o, enum kind k, int layer, const char *name, int64_t ne0, int64_t ne1)
{
    gen_add_plan(p, n, o, k, layer, name, ne0, ne1, 0);
}

/* One block's tensors in the converter's order for the architecture. */
static void add_layer(tplan *p, int *n, const opts *o, int l)
{
    const shape *s = &o->s;
    if (s->n_expert > 0) {
        gen_add_layer_moe(p, n, o, l);
        return;
    }
    const int64_t d = s->dim, hd = gen_head_dim(s), qd = hd * s->heads, kvd = hd * s->kv_heads, f = s->ffn;
    const bool gemma = s->arch == GA_GEMMA2 || s->arch == GA_GEMMA3;
    add_plan(p, n, o, K_ATTN_NORM, l, "attn_norm", d, 0);
    if (s->arch == GA_PHI3) {
        add_plan(p, n, o, K_QKV, l, "attn_qkv", d, qd + 2 * kvd);
    } else if (s->arch == GA_GEMMA3) {   /* the converter's order: q, q_norm, k, k_norm, v */
        add_plan(p, n, o, K_Q, l, "attn_q", d, qd);
        add_plan(p, n, o, K_Q_NORM, l, "attn_q_norm", hd, 0);
        add_plan(p, n, o, K_K, l, "attn_k", d, kvd);
        add_plan(p, n, o, K_K_NORM, l, "attn_k_norm", hd, 0);
        add_plan(p, n, o, K_V, l, "attn_v", d, kvd);
    } else {
        add_plan(p, n, o, K_Q, l, "attn_q", d, qd);
        add_plan(p, n, o, K_K, l, "attn_k", d, kvd);
        add_plan(p, n, o, K_V, l, "attn_v", d, kvd);
    }
    if (s->arch == GA_QWEN2) {
        add_plan(p, n, o, K_Q_BIAS, l, "attn_q", qd, 0);
        add_plan(p, n, o, K_K_BIAS, l, "attn_k", kvd, 0);
        add_plan(p, n, o, K_V_BIAS, l, "attn_v", kvd, 0);
    }
    if (s->arch == GA_QWEN3) {
        add_plan(p, n, o, K_Q_NORM, l, "attn_q_norm", hd, 0);
        add_plan(p, n, o, K_K_NORM, l, "attn_k_norm", hd, 0);
    }
    add_plan(p, n, o, K_O, l, "attn_output", qd, d);
    if (gemma) add_plan(p, n, o, K_POST_ATTN_NORM, l, "post_attention_norm", d, 0);
    add_plan(p, n, o, K_FFN_NORM, l, "ffn_norm", d, 0);
    if (s->arch == GA_PHI3) {
        add_plan(p, n, o, K_GATE_UP, l, "ffn_up", d, 2 * f);
    } else {
        add_plan(p, n, o, K_GATE, l, "ffn_gate", d, f);
        add_plan(p, n, o, K_UP, l, "ffn_up", d, f);
    }
    add_plan(p, n, o, K_DOWN, l, "ffn_down", f, d);
    if (gemma) add_plan(p, n, o, K_POST_FFN_NORM, l, "post_ffw_norm", d, 0);
}

int gen_max_tensors(const opts *o) { return o->s.layers * 20 + 8; }

static int by_name(const void *a, const void *b) { return strcmp(((const tplan *)a)->name, ((const tplan *)b)->name); }

/* The tensor list in file order.  Quantized files use llama-quantize's order (its weights map is
 * sorted by layer, then name: the non-block tensors first, then each block's tensors by name),
 * F16 files the converter's (token_embd, blocks, output_norm, output) — as in shared/models. */
int gen_build_plan(const opts *o, int64_t vocab, tplan *p)
{
    int n = 0, dim = o->s.dim;
    const bool tied = o->tied || o->s.arch == GA_GEMMA2 || o->s.arch == GA_GEMMA3;
    if (o->ftype == SL_FTYPE_F16) {
        if (o->s.rope_freqs) add_plan(p, &n, o, K_ROPE_FREQS, -1, "rope_freqs", gen_head_dim(&o->s) / 2, 0);
        add_plan(p, &n, o, K_EMBD, -1, "token_embd", dim, vocab);
        for (int l = 0; l < o->s.layers; l++) add_layer(p, &n, o, l);
        add_plan(p, &n, o, K_OUT_NORM, -1, "output_norm", dim, 0);
        if (!tied) add_plan(p, &n, o, K_OUTPUT, -1, "output", dim, vocab);
        return n;
    }
    if (!tied) add_plan(p, &n, o, K_OUTPUT, -1, "output", dim, vocab);
    add_plan(p, &n, o, K_OUT_NORM, -1, "output_norm", dim, 0);
    if (o->s.rope_freqs) add_plan(p, &n, o, K_ROPE_FREQS, -1, "rope_freqs", gen_head_dim(&o->s) / 2, 0);
    add_plan(p, &n, o, K_EMBD, -1, "token_embd", dim, vocab);
    qsort(p, (size_t)n, sizeof *p, by_name);
    for (int l = 0; l < o->s.layers; l++) {
        int first = n;
        add_layer(p, &n, o, l);
        qsort(p + first, (size_t)(n - first), sizeof *p, by_name);
    }
    return n;
}

/* Contract (gen.h): convert_hf_to_gguf's Llama 3.1 factors (factor 8, low_freq_factor 1,
 * high_freq_factor 4, original_max_position_embeddings 8192). */
void gen_rope_freqs(int n_rot, float theta, float *out)
{
    const double factor = 8, lo = 1, hi = 4, old_ctx = 8192, lo_wl = old_ctx / lo, hi_wl = old_ctx / hi;
    for (int i = 0; i < n_rot / 2; i++) {
        double freq = 1.0 / pow((double)theta, 2.0 * i / n_rot), wl = 2 * M_PI / freq;
        if (wl < hi_wl) out[i] = 1.0f;
        else if (wl > lo_wl) out[i] = (float)factor;
        else {
            double smooth = (old_ctx / wl - lo) / (hi - lo);
            out[i] = (float)(1.0 / ((1 - smooth) / factor + smooth));
        }
    }
}

/* A token array padded to vocab entries: texts "[PAD<id>]", scores -1000, type 5 (unused), as
 * llama.cpp's converter pads a vocabulary.  0 when nothing needed padding, else the writer's status. */
static int write_padded(sl_gguf_writer *w, const sl_gguf *voc, int64_t kv, int64_t vocab, bool *done)
{
    sl_str key = sl_gguf_key(voc, kv);
    char k[64];
    snprintf(k, sizeof k, "%.*s", (int)(key.len < 63 ? key.len : 63), key.ptr);
    int et;
    uint64_t nf;
    *done = false;
    if (!sl_gguf_get_arr(voc, k, &et, &nf) || (int64_t)nf >= vocab) return 0;
    bool tokens = !strcmp(k, "tokenizer.ggml.tokens"), scores = !strcmp(k, "tokenizer.ggml.scores"),
         types = !strcmp(k, "tokenizer.ggml.token_type");
    if (!tokens && !scores && !types) return 0;
    int rc = -1;
    if (tokens) {
        sl_str *v = malloc((size_t)vocab * sizeof *v);
        char *pad = malloc((size_t)(vocab - (int64_t)nf) * 20);
        if (v && pad) {
            for (uint64_t i = 0; i < nf; i++) v[i] = sl_gguf_arr_str(voc, kv, i);
            for (int64_t i = (int64_t)nf; i < vocab; i++) {
                char *s = pad + (size_t)(i - (int64_t)nf) * 20;
                v[i] = (sl_str){ s, (uint64_t)snprintf(s, 20, "[PAD%" PRId64 "]", i) };
            }
            rc = sl_gguf_writer_kv_arr_str(w, k, v, (uint64_t)vocab);
        }
        free(v);
        free(pad);
    } else {
        void *v = malloc((size_t)vocab * 4);
        for (int64_t i = 0; v && i < vocab; i++) {
            if (scores) { float x = -1000.0f; if ((uint64_t)i < nf) sl_gguf_arr_f32(voc, kv, (uint64_t)i, &x); ((float *)v)[i] = x; }
            else { int64_t x = 5; if ((uint64_t)i < nf) sl_gguf_arr_i64(voc, kv, (uint64_t)i, &x); ((int32_t *)v)[i] = (int32_t)x; }
        }
        if (v) rc = sl_gguf_writer_kv_arr(w, k, scores ? SL_GGUF_F32 : SL_GGUF_I32, v, (uint64_t)vocab);
        free(v);
    }
    *done = true;
    return rc;
}

/* Key/values in the order llama-quantize leaves them: general, <arch>.*, tokenizer.*, then
 * quantization_version and file_type.  Types match llama.cpp's loader (u32 / f32 / string). */
int gen_write_meta(sl_gguf_writer *w, const opts *o, const sl_gguf *voc, int64_t vocab)
{
    const shape *s = &o->s;
    const char *a = gen_arch_name(s->arch);
    const int hd = gen_head_dim(s);
    char desc[256], k[96];
    snprintf(desc, sizeof desc, "SYNTHETIC random weights (sluice-gen --shape %s --type %s --seed %" PRIu64
             "): real shapes and sizes, no language ability", s->name, o->ftype_name, o->seed);
#define KU32(key, v) (snprintf(k, sizeof k, "%s." key, a), sl_gguf_writer_kv_u32(w, k, (uint32_t)(v)))
#define KF32(key, v) (snprintf(k, sizeof k, "%s." key, a), sl_gguf_writer_kv_f32(w, k, (float)(v)))
    sl_gguf_writer_kv_str(w, "general.architecture", a);
    sl_gguf_writer_kv_str(w, "general.name", s->name);
    sl_gguf_writer_kv_str(w, "general.description", desc);
    sl_gguf_writer_kv_u32(w, "general.alignment", 32);
    KU32("context_length", s->ctx);
    KU32("embedding_length", s->dim);
    KU32("block_count", s->layers);
    KU32("feed_forward_length", s->ffn);
    if (s->arch == GA_LLAMA || s->arch == GA_PHI3) KU32("rope.dimension_count", hd);
    KU32("attention.head_count", s->heads);
    KU32("attention.head_count_kv", s->kv_heads);
    KF32("attention.layer_norm_rms_epsilon", s->rms_eps ? s->rms_eps : 1e-5f);
    if (s->arch == GA_GEMMA3) {   /* the converter's order (../shared/README.md set 6) */
        sl_gguf_writer_kv_str(w, "gemma3.rope.scaling.type", "linear");
        KF32("rope.scaling.factor", 8.0f);
    }
    if (s->arch != GA_GEMMA2) KF32("rope.freq_base", s->theta);
    if (s->arch == GA_GEMMA3) KF32("rope.freq_base_swa", 10000.0f);
    if (hd != s->dim / s->heads || s->arch == GA_QWEN3 || s->arch == GA_QWEN3MOE || s->arch == GA_GEMMA2 ||
        s->arch == GA_GEMMA3 || s->arch == GA_GPT_OSS) {
        KU32("attention.key_length", hd);
        KU32("attention.value_length", hd);
    }
    if (s->arch == GA_PHI3) {
        KU32("attention.sliding_window", s->swa);
        KU32("rope.scaling.original_context_length", s->ctx);
    }
    if (s->arch == GA_GEMMA3) KU32("attention.sliding_window", s->swa);
    if (s->arch == GA_GEMMA2) {
        KU32("attention.sliding_window", s->swa);
        KF32("attn_logit_softcapping", 50.0f);
        KF32("final_logit_softcapping", 30.0f);
    }
    if (s->arch == GA_LLAMA) KU32("vocab_size", vocab);
    if (s->n_expert > 0) gen_write_meta_moe(w, o);
#undef KU32
#undef KF32
    for (int64_t i = 0; i < sl_gguf_n_kv(voc); i++) {
        sl_str key = sl_gguf_key(voc, i);
        if (key.len <= 10 || memcmp(key.ptr, "tokenizer.", 10)) continue;
        bool padded;
        int rc = write_padded(w, voc, i, vocab, &padded);
        if (rc) return rc;
        if (!padded) sl_gguf_writer_copy_kv(w, voc, i);
    }
    sl_gguf_writer_kv_u32(w, "general.quantization_version", 2);
    return sl_gguf_writer_kv_u32(w, "general.file_type", (uint32_t)o->ftype);
}
