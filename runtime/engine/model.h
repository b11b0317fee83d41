/* runtime/engine/model.h — a model bound from its GGUF file: hyperparameters and the weight table.
 *
 * The model describes where every weight is (file offset, type, shape) and, for weights held in
 * memory, where that copy is.  Whether a weight is resident or streamed is decided by the caller
 * (resident mode: everything; streaming: see runtime/engine/stream.h; the planner: runtime/plan/planner.h).
 */
#ifndef SL_RUNTIME_MODEL_H
#define SL_RUNTIME_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loader/fileio.h"
#include "loader/gguf.h"
#include "runtime/engine/arch.h"

typedef struct sl_config {
    int   dim;          /* embedding width (<arch>.embedding_length) */
    int   n_layers;     /* transformer blocks */
    int   n_heads;      /* query heads */
    int   n_kv_heads;   /* key/value heads (GQA: n_heads is a multiple of it) */
    int   head_dim;     /* per-head width (dim / n_heads unless the file says otherwise) */
    int   ffn_dim;      /* hidden width of the SwiGLU MLP */
    int   vocab;        /* rows of the embedding table / output head */
    int   ctx_train;    /* <arch>.context_length */
    int   rope_dim;     /* rotated dims per head (<arch>.rope.dimension_count) */
    float rope_base;    /* <arch>.rope.freq_base */
    float rope_scale;   /* position multiplier (1 / linear scaling factor) */
    float rope_mscale;  /* cos/sin multiplier (<arch>.rope.scaling.attn_factor, 1 without it) */
    int   rope_ctx_orig;/* longrope: contexts longer than this use rope_factors_long (original_context_length) */
    float rms_eps;
    /* what the architecture's forward pass adds to llama's (runtime/engine/arch.h; 0: not used) */
    float attn_scale;   /* q.k multiplier before the softmax: 1/sqrt(head_dim) unless the arch says */
    float attn_softcap; /* scores = c * tanh(scores / c) before the softmax (gemma2) */
    float final_softcap;/* logits = c * tanh(logits / c) (gemma2) */
    float embd_scale;   /* embedding rows are multiplied by it (gemma2: sqrt(dim)) */
    int   n_swa;        /* sliding window: a block in swa_layers sees the last n_swa positions */
    int   swa_layers;   /* enum sl_swa_layers */
    /* mixture of experts (0 experts: a dense model) */
    int   n_expert;     /* <arch>.expert_count: routed experts per MoE block */
    int   n_expert_used;/* <arch>.expert_used_count: experts each token takes (top-k) */
    int   expert_ffn;   /* a routed expert's hidden width */
    int   shexp_ffn;    /* the shared expert's hidden width (0: none) */
    /* YaRN rope scaling (gpt-oss; yarn_factor 0: none): the angles become per-pair divisors
     * (sl_model.rope_freqs) and cos/sin are scaled by rope_mscale */
    float yarn_factor, yarn_beta_fast, yarn_beta_slow;
} sl_config;

/* The sliding window block l attends through, or 0 for plain causal attention, as the file-wide
 * hyperparameters say (the default of sl_layer.window). */
static inline int sl_config_window(const sl_config *c, int l)
{
    if (c->n_swa <= 0 || c->swa_layers == SL_SWA_NONE || c->swa_layers == SL_SWA_LAYERS) return 0;
    return c->swa_layers == SL_SWA_ALL || l % 2 == 0 ? c->n_swa : 0;
}

/* One weight matrix (or vector) as stored in the file. */
typedef struct sl_weight {
    const char *name;     /* NUL-terminated copy */
    int      type;        /* enum sl_type */
    int64_t  cols;        /* ne[0]: elements per row */
    int64_t  rows;        /* ne[1] (1 for vectors) */
    size_t   row_bytes;
    uint64_t offset;      /* absolute file offset */
    uint64_t nbytes;
    const void *data;     /* resident copy, or NULL when the weight streams */
    bool     stream;      /* set before sl_model_load_resident: leave this weight on disk */
    bool     routed;      /* a routed expert's matrix: read when the router picks it, not every token */
    int      unit;        /* routed: the expert's unit, block * expert_count + expert (expert_cache.h) */
    uint64_t unit_off;    /* routed: this matrix's first byte within its unit (the experts' matrices in
                           * enum sl_expert_mat order, back to back) */
} sl_weight;

/* A block's tensors by slot (runtime/engine/arch.h): a matrix with rows == 0 or a NULL vector is one
 * the architecture (or this file, for optional ones) does not have. */
typedef struct sl_layer {
    sl_weight mat[SL_BLOCK_MATS];   /* see enum sl_block_mat for each one's shape */
    float    *vec[SL_BLOCK_VECS];   /* f32, always resident */
    /* per-block settings, filled at binding from the hyperparameters (one place for what varies by
     * block, instead of a rule per field of sl_config) */
    int   window;       /* sliding window in positions; 0: causal over the whole context */
    float rope_base;    /* RoPE base of this block (gemma3: local and global blocks differ) */
    float rope_scale;   /* its position multiplier (linear scaling; 1: none) */
    bool  moe;          /* the FFN is routed experts (+ shared expert), not mat[GATE/UP/DOWN] */
    /* mixture of experts (moe only) */
    sl_weight router;   /* ffn_gate_inp: (n_expert rows, dim), held as f32, always resident */
    sl_weight *experts; /* n_expert * SL_EXPERT_MATS views: expert e's matrix k is [e * SL_EXPERT_MATS + k] */
    float *expert_bias[SL_EXPERT_MATS];   /* (n_expert, matrix rows) f32, or NULL (gpt-oss has them) */
} sl_layer;

/* Routed expert e's matrix k (enum sl_expert_mat) of a MoE block. */
static inline sl_weight *sl_expert_weight(const sl_layer *L, int e, int k) { return &L->experts[e * SL_EXPERT_MATS + k]; }

static inline bool sl_weight_present(const sl_weight *w) { return w->rows > 0; }

typedef struct sl_model {
    const sl_arch *arch;      /* the description the file was bound with */
    sl_gguf   *gguf;
    char      *path;
    sl_config  cfg;
    sl_weight  tok_embd;      /* (vocab, dim): one row per token */
    float     *output_norm;   /* (dim) */
    float     *rope_freqs;    /* (rope_dim / 2) angle divisors from rope_freqs.weight, or NULL */
    float     *rope_long, *rope_short;   /* longrope's divisors (rope_factors_long/short.weight), or NULL */
    sl_weight  output;        /* (vocab, dim); equals tok_embd when tied */
    bool       tied;          /* no output.weight: the embedding table is the LM head */
    sl_layer  *layers;        /* (n_layers) */
    void      *resident;      /* one allocation holding resident weights (sl_model_load_resident) */
    size_t     resident_bytes;
    size_t     norm_bytes;    /* f32 vectors (norms, biases, rope factors), always resident */
    uint64_t   weight_bytes;  /* sum of all tensor bytes in the file */
} sl_model;

/* Parse and validate: architecture, hyperparameters, every tensor's presence, shape and type.
 * Loads only the norm vectors (small) into memory.  0 or -errno with one line in err. */
int  sl_model_open(const char *path, sl_model **out, char *err, size_t errlen);
void sl_model_free(sl_model *m);

/* Read every matrix whose `stream` flag is clear into one allocation.  0 or -errno. */
int  sl_model_load_resident(sl_model *m, char *err, size_t errlen);

/* Mark weights to stream: every matrix (all = true), or only the LM head (for a tied model that is
 * the embedding table, which then also streams its rows). */
void sl_model_set_streaming(sl_model *m, bool all, bool lm_head);

/* The matrices block L has, in forward order (slot order), into out[0..SL_BLOCK_MATS); returns how
 * many. */
int  sl_layer_weights(sl_layer *L, sl_weight **out);

/* Bytes of the matrices of block l (its dense matrices; a MoE block's routed experts are counted by
 * sl_layer_expert_bytes). */
uint64_t sl_layer_bytes(const sl_model *m, int l);
/* Bytes of one routed expert of block l (its SL_EXPERT_MATS matrices); 0 for a dense block. */
uint64_t sl_layer_expert_bytes(const sl_model *m, int l);
/* Every matrix of the model that is not resident-only (dense block matrices, routed experts,
 * embedding table, untied LM head), in file-independent order; calls f(w, arg) for each. */
void sl_model_for_each_weight(sl_model *m, void (*f)(sl_weight *w, void *arg), void *arg);

#endif
