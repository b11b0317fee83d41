/* tools/sluice-gen/gen.h — what sluice-gen.c (arguments, weights, writing) and plan.c (shapes, the
 * tensor set and type mix of each architecture, metadata) share. */
#ifndef SL_TOOLS_SLUICE_GEN_H
#define SL_TOOLS_SLUICE_GEN_H

#include <stdbool.h>
#include <stdint.h>

#include "loader/gguf.h"
#include "loader/gguf_write.h"

/* The architectures sluice-gen writes (general.architecture = gen_arch_name()). */
typedef enum gen_arch { GA_LLAMA, GA_QWEN2, GA_QWEN3, GA_PHI3, GA_GEMMA2 } gen_arch;

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
    int swa;                 /* attention.sliding_window (phi3, gemma2) */
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

/* The blocks of Q2_K, Q3_K and IQ4_XS (lowbit.c), synthesized like the others (sluice-gen.c's
 * header): init once with the inverse-CDF table; denom is the element rms for a block scale d = 1;
 * block writes one block from the stream s. */
void gen_lowbit_init(const float gauss_tab[65536]);
bool gen_lowbit_has(int type);
double gen_lowbit_denom(int type);
void gen_lowbit_block(int type, uint8_t *dst, float d, uint64_t *s);

static inline int gen_head_dim(const shape *s) { return s->head_dim ? s->head_dim : s->dim / s->heads; }

enum kind {
    K_EMBD, K_OUT_NORM, K_OUTPUT, K_ATTN_NORM, K_Q, K_K, K_V, K_O, K_FFN_NORM, K_GATE, K_UP, K_DOWN,
    K_QKV, K_GATE_UP, K_Q_BIAS, K_K_BIAS, K_V_BIAS, K_Q_NORM, K_K_NORM, K_POST_ATTN_NORM, K_POST_FFN_NORM,
    K_ROPE_FREQS
};

typedef struct tplan {
    char name[64];
    enum kind kind;
    int type, layer;
    int64_t ne[2];
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
/* Llama 3.1's rope_freqs.weight for head size n_rot and base theta (n_rot / 2 factors). */
void gen_rope_freqs(int n_rot, float theta, float *out);
const char *gen_arch_name(gen_arch a);

#endif
