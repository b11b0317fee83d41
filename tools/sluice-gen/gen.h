/* tools/sluice-gen/gen.h — what sluice-gen.c (arguments, weights, writing) and plan.c (shapes, the
 * tensor set and type mix of each architecture, metadata) share. */
#ifndef SL_TOOLS_SLUICE_GEN_H
#define SL_TOOLS_SLUICE_GEN_H

#include <stdbool.h>
#include <stdint.h>

#include "loader/gguf.h"
#include "loader/gguf_write.h"

/* The architectures sluice-gen writes (general.architecture = gen_arch_name()).  Mixtral is GA_LLAMA
 * with experts (llama.expert_count), as llama.cpp's converter writes it. */
typedef enum gen_arch { GA_LLAMA, GA_QWEN2, GA_QWEN3, GA_PHI3, GA_GEMMA2, GA_QWEN3MOE, GA_QWEN2MOE, GA_GPT_OSS, GA_GEMMA3 } gen_arch;

typedef struct shape {
    const char *name;
    gen_arch arch;
    int dim, layers, heads, kv_heads, ffn, vocab, ctx;
    float theta;
    const char *vocab_file;
    double ref_q4km;         /* bytes of the public llama.cpp Q4_K_M file, for the size check (0: none) */
    int head_dim;            /* attention.key_length; 0: dim / heads */
    float rms_eps;           /* 0: 1e-5 */
    bool tied;               /* no output.weight */
    bool rope_freqs;         /* Llama 3.1 rope_freqs.weight (factor 8, low 1, high 4, original context 8192) */
    int swa;                 /* attention.sliding_window (phi3, gemma2, gemma3, gpt-oss) */
    int yarn_orig_ctx;       /* gpt-oss: YaRN (factor 32) rope.scaling.original_context_length */
    /* Mixture-of-Experts (shapes_moe.c): routed experts a block (0: dense), experts used a token,
     * one expert's FFN width (expert_feed_forward_length; Mixtral's is `ffn`), the shared expert's
     * width (qwen2moe; 0: none).  `ffn` stays the config's intermediate_size, written as
     * feed_forward_length. */
    int n_expert, n_expert_used, expert_ffn, shexp_ffn;
} shape;

extern const shape GEN_SHAPES[];
extern const int GEN_N_SHAPES;

/* Reference size of the public llama.cpp file of shape s in file type ftype (enum sl_ftype), for
 * the size check; 0 when there is none. */
double gen_ref_bytes(const shape *s, int ftype);

typedef struct opts {
    shape s;
    bool custom, tied, quiet, dry_run;
    int ftype, threads;      /* ftype: enum sl_ftype (loader/ftype.h), written as general.file_type */
    uint64_t seed;
    const char *out, *vocab, *ftype_name;
    int vocab_size_arg;
} opts;

static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* splitmix64 stream: state advances by the golden gamma, output is the mixed state. */
static inline uint64_t next64(uint64_t *s) { return mix64(*s += 0x9e3779b97f4a7c15ull); }

/* The blocks of Q2_K, Q3_K, IQ4_XS and of the fallbacks for rows that do not split into 256-blocks
 * (Q5_0, Q5_1, IQ4_NL: e.g. qwen1.5-moe's 1408-wide expert down rows) (lowbit.c), synthesized like
 * the others (sluice-gen.c's header): init once with the inverse-CDF table; denom is the element rms for a block scale d = 1;
 * block writes one block from the stream s. */
void gen_lowbit_init(const float gauss_tab[65536]);
bool gen_lowbit_has(int type);
double gen_lowbit_denom(int type);
void gen_lowbit_block(int type, uint8_t *dst, float d, uint64_t *s);

static inline int gen_head_dim(const shape *s) { return s->head_dim ? s->head_dim : s->dim / s->heads; }

enum kind {
    K_EMBD, K_OUT_NORM, K_OUTPUT, K_ATTN_NORM, K_Q, K_K, K_V, K_O, K_FFN_NORM, K_GATE, K_UP, K_DOWN,
    K_QKV, K_GATE_UP, K_Q_BIAS, K_K_BIAS, K_V_BIAS, K_Q_NORM, K_K_NORM, K_POST_ATTN_NORM, K_POST_FFN_NORM,
    K_ROPE_FREQS,
    /* MoE: the router, the 3-D expert stacks, the shared expert and its scalar gate */
    K_GATE_INP, K_GATE_EXPS, K_UP_EXPS, K_DOWN_EXPS, K_GATE_INP_SHEXP, K_GATE_SHEXP, K_UP_SHEXP, K_DOWN_SHEXP,
    /* gpt-oss: F32 biases (the expert stacks' are 2-D: one row an expert) and the attention sinks */
    K_O_BIAS, K_GATE_INP_BIAS, K_GATE_EXPS_BIAS, K_UP_EXPS_BIAS, K_DOWN_EXPS_BIAS, K_SINKS
};

typedef struct tplan {
    char name[64];
    enum kind kind;
    int type, layer;
    int64_t ne[3];           /* ggml order; ne[2] = experts of a 3-D stack (expert e = rows [e ne1, (e+1) ne1)) */
    int n_dims;
    float center, sigma;     /* F32 vectors: center + sigma z (norms 1 + 0.1 z, biases 0.5 z); else target std */
    uint64_t nbytes, unit_bytes, n_units, key;
    float d0;                /* quantized types: base super-block scale */
} tplan;

/* Room for the tensor table of o (an upper bound). */
int gen_max_tensors(const opts *o);
/* The tensor table in file order; returns the count. */
int gen_build_plan(const opts *o, int64_t vocab, tplan *p);
/* Key/values; the vocabulary's tokenizer.* keys copied, its token arrays padded to vocab entries
 * ("[PAD<id>]", unused) when the vocabulary file has fewer.  The writer's status. */
int gen_write_meta(sl_gguf_writer *w, const opts *o, const sl_gguf *voc, int64_t vocab);
/* Append a tensor to the table p (count *n): its name "blk.<layer>.<name>.weight" (".bias" for the
 * bias kinds; "<name>.weight" for layer -1), its type under o's file type, its shape (ne1 0: 1-D;
 * ne2 0: 2-D) and weight distribution. */
void gen_add_plan(tplan *p, int *n, const opts *o, enum kind k, int layer, const char *name, int64_t ne0, int64_t ne1,
                  int64_t ne2);
/* One MoE block's tensors (shapes_moe.c), in the order of ../shared's micro MoE files (the
 * converter's); and the architecture's expert keys (<arch>.expert_count, ...; gpt-oss: also its
 * YaRN and sliding-window keys).  Writer status. */
void gen_add_layer_moe(tplan *p, int *n, const opts *o, int l);
int gen_write_meta_moe(sl_gguf_writer *w, const opts *o);
/* Apply the MoE options (each 0 when not given) to s, after its dim/ffn overrides; fill the derived
 * values (Mixtral's expert width is its ffn; experts used default 2).  NULL, or what is wrong. */
const char *gen_moe_apply(shape *s, int experts, int used, int expert_ffn, int shexp_ffn);

/* Llama 3.1's rope_freqs.weight for head size n_rot and base theta (n_rot / 2 factors). */
void gen_rope_freqs(int n_rot, float theta, float *out);
const char *gen_arch_name(gen_arch a);

#endif
