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

#include "loader/gguf.h"

#define SL_MAX_LAYERS 1024   /* blocks a model may have (llama.cpp's converters write up to ~200) */

/* The matrices of a block, in the order the forward pass uses them (so also the order the stream
 * reads them).  An architecture has a subset: fused tensors (phi3's attn_qkv, its gate+up ffn_up)
 * take the place of the separate ones.  Every table sized by block matrices uses these indices. */
enum sl_block_mat {
    SL_MAT_QKV,      /* fused q|k|v rows: (dim -> q_dim + 2 kv_dim) */
    SL_MAT_Q,        /* (dim -> n_heads * head_dim) */
    SL_MAT_K,        /* (dim -> n_kv_heads * head_dim) */
    SL_MAT_V,        /* (dim -> n_kv_heads * head_dim) */
    SL_MAT_O,        /* (n_heads * head_dim -> dim) */
    SL_MAT_GATE_UP,  /* fused gate|up rows: (dim -> 2 ffn_dim) */
    SL_MAT_GATE,     /* (dim -> ffn_dim) */
    SL_MAT_UP,       /* (dim -> ffn_dim) */
    SL_MAT_DOWN,     /* (ffn_dim -> dim) */
    SL_BLOCK_MATS
};

/* The vectors of a block: always resident, held as f32. */
enum sl_block_vec {
    SL_VEC_ATTN_NORM,
    SL_VEC_Q_BIAS, SL_VEC_K_BIAS, SL_VEC_V_BIAS,
    SL_VEC_Q_NORM, SL_VEC_K_NORM,            /* per-head norms of q and k (head_dim) */
    SL_VEC_POST_ATTN_NORM,
    SL_VEC_FFN_NORM,
    SL_VEC_POST_FFN_NORM,
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
    SL_DIM_HEAD      /* head_dim */
};

/* How q and k are rotated: adjacent pairs (GGML "normal", llama) or the two halves of a head
 * (GGML "neox": qwen2, phi3, gemma2, ...). */
enum sl_rope_kind { SL_ROPE_NORM, SL_ROPE_NEOX };
/* The gated FFN's activation: act(gate) * up. */
enum sl_ffn_act { SL_ACT_SILU, SL_ACT_GELU_TANH };

/* One tensor of a block.  `name` is the GGUF name with %d for the block index. */
typedef struct sl_arch_tensor {
    const char *name;
    int  slot;               /* enum sl_block_mat, or enum sl_block_vec in the vector table */
    int  cols, rows;         /* enum sl_dim: ne[0], ne[1] */
    bool required;
} sl_arch_tensor;

struct sl_config;

typedef struct sl_arch {
    const char *name;        /* general.architecture, also the prefix of its hyperparameter keys */
    const sl_arch_tensor *mats;
    int n_mats;
    const sl_arch_tensor *vecs;
    int n_vecs;
    int rope;                /* enum sl_rope_kind */
    int act;                 /* enum sl_ffn_act */
    /* The architecture's own hyperparameters, read after the common ones (NULL: none).  0 or
     * -errno with one line in err. */
    int (*read_hparams)(const sl_gguf *g, struct sl_config *c, char *err, size_t errlen);
} sl_arch;

/* The description for general.architecture = name, NULL when sluice does not run it. */
const sl_arch *sl_arch_find(sl_str name);
/* "llama qwen2 ..." — the supported names, for "supported: ..." messages. */
const char *sl_arch_supported(void);

/* The descriptions (one per runtime/engine/arch_<name>.c). */
extern const sl_arch sl_arch_llama;

#endif
