/* runtime/engine/arch.h — architecture descriptions: what a model family's GGUF file holds and how
 * its forward pass differs from the others.
 *
 * One description per architecture (runtime/engine/arch_<name>.c), one row per tensor, like ggml's
 * type traits are one row per quant type.  Model binding (model.c) reads the rows to find, check
 * and load every tensor; the forward pass reads the kinds (norm, activation, RoPE) and which slots
 * are present; the planner counts every slot's bytes; the stream schedule reads the present slots
 * in slot order.  Adding an architecture is one new file here, one line in arch.c, and its tests.
 */
#ifndef SL_RUNTIME_ARCH_H
#define SL_RUNTIME_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loader/gguf.h"

#define SL_MAX_LAYERS 1024   /* blocks a model may have (llama.cpp's converters write up to ~200) */

/* The matrices of a block, in the order the forward pass uses them (so also the order the stream
 * reads them).  Every table sized by block matrices uses these indices.
 *
 * A fused tensor (phi3's attn_qkv = q|k|v rows, its ffn_up = gate|up rows) is bound as row-range
 * views into the separate slots: a view is an ordinary weight whose file offset is the first byte
 * of its rows, so the stream schedule cuts it in row-chunks like any matrix (no piece spans two
 * parts), the planner counts each part's bytes once, and the forward pass needs no split step and
 * no scratch for the fused product.  Row r of a view is row (first + r) of the file's tensor, and
 * every row is computed the same whatever the row range of the call (kernels/ops.h sl_matmul), so
 * the results are those of the fused product. */
enum sl_block_mat {
    SL_MAT_Q,        /* (dim -> n_heads * head_dim) */
    SL_MAT_K,        /* (dim -> n_kv_heads * head_dim) */
    SL_MAT_V,        /* (dim -> n_kv_heads * head_dim) */
    SL_MAT_O,        /* (n_heads * head_dim -> dim) */
    SL_MAT_GATE,     /* (dim -> ffn_dim) */
    SL_MAT_UP,       /* (dim -> ffn_dim) */
    SL_MAT_DOWN,     /* (ffn_dim -> dim) */
    /* A MoE block's shared expert (qwen2moe): a SwiGLU FFN every token takes beside its routed
     * experts.  After the routed experts in forward order: the router's choice is known before the
     * dense pieces around it are needed, so the expert reads start first. */
    SL_MAT_SH_GATE,  /* (dim -> shexp_ffn) */
    SL_MAT_SH_UP,    /* (dim -> shexp_ffn) */
    SL_MAT_SH_DOWN,  /* (shexp_ffn -> dim) */
    SL_BLOCK_MATS
};

/* The matrices of one routed expert.  In the file each is a 3-D stack (ne = cols, rows, n_expert);
 * expert e's matrix is the contiguous slice at offset + e * rows * row_bytes, bound as an ordinary
 * 2-D weight (a view, like the fused tensors' parts), so the stream, the planner and the kernels see
 * experts as weights.  Forward order: gate, up, down. */
enum sl_expert_mat { SL_EXP_GATE, SL_EXP_UP, SL_EXP_DOWN, SL_EXPERT_MATS };

/* How a MoE block turns its router logits into the k experts a token takes and their weights
 * (../shared/README.md "Set 5", llama.cpp build_moe_ffn). */
enum sl_gating {
    SL_GATE_SOFTMAX_NORM,   /* softmax over all experts, top-k, weights renormalised to sum 1
                             * (qwen3moe, mixtral: equivalently a softmax over the k logits) */
    SL_GATE_SOFTMAX,        /* softmax over all experts, top-k, weights as they are (qwen2moe) */
    SL_GATE_TOPK_SOFTMAX    /* top-k of the (biased) logits, softmax over those k (gpt-oss) */
};

/* When a tensor row of a description applies: always, or only to a dense or a MoE model of an
 * architecture that has both (a llama file is MoE iff llama.expert_count > 0: Mixtral). */
enum sl_when { SL_WHEN_ALWAYS, SL_WHEN_DENSE, SL_WHEN_MOE };

/* How one file tensor fills the matrix slots (sl_arch_tensor.fused). */
enum sl_fused {
    SL_FUSED_NONE,      /* the tensor is the matrix of its slot */
    SL_FUSED_QKV,       /* rows [0, q_dim) -> SL_MAT_Q, then kv_dim -> SL_MAT_K, kv_dim -> SL_MAT_V */
    SL_FUSED_GATE_UP    /* rows [0, ffn) -> SL_MAT_GATE, [ffn, 2 ffn) -> SL_MAT_UP */
};

/* The vectors of a block: always resident, held as f32. */
enum sl_block_vec {
    SL_VEC_ATTN_NORM,
    SL_VEC_Q_BIAS, SL_VEC_K_BIAS, SL_VEC_V_BIAS,
    SL_VEC_Q_NORM, SL_VEC_K_NORM,            /* per-head norms of q and k (head_dim) */
    SL_VEC_POST_ATTN_NORM,
    SL_VEC_FFN_NORM,
    SL_VEC_POST_FFN_NORM,
    SL_VEC_SHEXP_GATE,                       /* (dim): the shared expert's scalar gate sigmoid(w . x) */
    SL_VEC_O_BIAS,                           /* (dim): attention output bias (gpt-oss) */
    SL_VEC_ATTN_SINKS,                       /* (n_heads): one softmax logit per head with no value (gpt-oss) */
    SL_VEC_ROUTER_BIAS,                      /* (n_expert): added to the router logits (gpt-oss) */
    SL_BLOCK_VECS
};

/* Symbolic tensor extents, resolved against the hyperparameters when a file is bound. */
enum sl_dim {
    SL_DIM_ONE,      /* 1 (the row count of a vector) */
    SL_DIM_EMBD,     /* embedding_length */
    SL_DIM_Q,        /* n_heads * head_dim */
    SL_DIM_KV,       /* n_kv_heads * head_dim */
    SL_DIM_QKV,      /* q_dim + 2 kv_dim */
    SL_DIM_FFN,      /* feed_forward_length */
    SL_DIM_FFN2,     /* 2 * feed_forward_length */
    SL_DIM_HEAD,     /* head_dim */
    SL_DIM_EXP_FFN,  /* a routed expert's hidden width (expert_feed_forward_length) */
    SL_DIM_SHEXP_FFN,/* the shared expert's hidden width */
    SL_DIM_N_EXPERT, /* expert_count (the router's rows) */
    SL_DIM_HEADS     /* head_count */
};

/* How q and k are rotated: adjacent pairs (GGML "normal", llama) or the two halves of a head
 * (GGML "neox": qwen2, phi3, gemma2, ...). */
enum sl_rope_kind { SL_ROPE_NORM, SL_ROPE_NEOX };
/* The gated FFN's activation: act(gate) * up. */
enum sl_ffn_act { SL_ACT_SILU, SL_ACT_GELU_TANH, SL_ACT_SWIGLU_OAI /* gpt-oss: clamped, (up + 1) */ };

/* One tensor of a block.  `name` is the GGUF name with %d for the block index. */
typedef struct sl_arch_tensor {
    const char *name;
    int  slot;               /* enum sl_block_mat, or enum sl_block_vec in the vector table */
    int  cols, rows;         /* enum sl_dim: ne[0], ne[1] (a fused tensor: all its rows) */
    bool required;
    int  fused;              /* enum sl_fused (matrices only; slot is then ignored) */
    int  when;               /* enum sl_when */
} sl_arch_tensor;

/* Whether the LM head is its own tensor (output.weight) or the embedding table. */
enum sl_output_kind {
    SL_OUTPUT_OPTIONAL,  /* output.weight if present, else tied to token_embd (llama, qwen2, qwen3) */
    SL_OUTPUT_REQUIRED,  /* output.weight must be present (phi3) */
    SL_OUTPUT_TIED       /* always token_embd; an output.weight is a tensor nothing uses (gemma2) */
};

/* Which blocks attend through a sliding window of <arch>.attention.sliding_window positions. */
enum sl_swa_layers {
    SL_SWA_NONE,     /* plain causal attention everywhere */
    SL_SWA_ALL,      /* every block (phi3; a window of 0 in the file means none) */
    SL_SWA_EVEN,     /* blocks 0, 2, 4, ... (gemma2, gpt-oss) */
    SL_SWA_LAYERS    /* the architecture's layer_settings hook says, block by block (gemma3) */
};

struct sl_config;
struct sl_model;

typedef struct sl_arch {
    const char *name;        /* general.architecture, also the prefix of its hyperparameter keys */
    const sl_arch_tensor *mats;
    int n_mats;
    const sl_arch_tensor *vecs;
    int n_vecs;
    int rope;                /* enum sl_rope_kind */
    int act;                 /* enum sl_ffn_act */
    bool rope_freqs;         /* may carry rope_freqs.weight (Llama 3.1 per-pair angle divisors) */
    bool rope_long_short;    /* may carry rope_factors_long/short.weight (longrope: Phi-3-128k, Phi-3.5) */
    bool rope_full;          /* rope.dimension_count must equal head_dim (llama.cpp asserts it) */
    bool rope_yarn;          /* may carry rope.scaling.type "yarn" (gpt-oss) */
    int output;              /* enum sl_output_kind */
    /* Mixture of experts: the routed experts' stacks (slot = enum sl_expert_mat, extents of one
     * expert), the router's name (ffn_gate_inp: n_expert rows of dim, held as f32) and the gating.
     * moe: expert_count is required; moe_optional: the file decides (expert_count > 0). */
    const sl_arch_tensor *experts;
    int n_experts;
    /* per-expert biases (gpt-oss): 2-D (width x expert_count) f32 tensors, slot = enum sl_expert_mat,
     * cols = the matrix's output width; expert e's bias is row e.  NULL: none. */
    const sl_arch_tensor *expert_biases;
    int n_expert_biases;
    const char *router;
    int gating;              /* enum sl_gating */
    bool moe, moe_optional;
    /* The architecture's own hyperparameters, read after the common ones (NULL: none).  0 or
     * -errno with one line in err. */
    int (*read_hparams)(const sl_gguf *g, struct sl_config *c, char *err, size_t errlen);
    /* Per-block settings (sl_layer.window, rope_base, rope_scale) where they are not the file-wide
     * defaults, called after the blocks are bound (NULL: the defaults).  0 or -errno with err. */
    int (*layer_settings)(struct sl_model *m, char *err, size_t errlen);
} sl_arch;

/* The description for general.architecture = name, NULL when sluice does not run it. */
const sl_arch *sl_arch_find(sl_str name);
/* "llama qwen2 ..." — the supported names, for "supported: ..." messages. */
const char *sl_arch_supported(void);

/* The descriptions (one per runtime/engine/arch_<name>.c). */
extern const sl_arch sl_arch_llama;
extern const sl_arch sl_arch_qwen2;
extern const sl_arch sl_arch_qwen3;
extern const sl_arch sl_arch_phi3;
extern const sl_arch sl_arch_gemma2;
extern const sl_arch sl_arch_gemma3;
extern const sl_arch sl_arch_qwen3moe;
extern const sl_arch sl_arch_qwen2moe;
extern const sl_arch sl_arch_gpt_oss;

/* One line naming what model m's forward pass adds to plain llama ("neox rope, q/k/v biases, ..."). */
struct sl_model;
void sl_arch_features(const struct sl_model *m, char *buf, size_t len);

/* Helpers for read_hparams hooks (model.c): optional "<arch>.<key>" as a finite float / a u32
 * (left as is when absent; -EINVAL with a message when present with another type or non-finite). */
int sl_arch_get_f32(const sl_gguf *g, const char *arch, const char *key, float *out, char *err, size_t errlen);
int sl_arch_get_u32(const sl_gguf *g, const char *arch, const char *key, uint32_t *out, char *err, size_t errlen);

#endif
