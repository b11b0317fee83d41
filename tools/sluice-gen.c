/* tools/sluice-gen.c — write synthetic llama-architecture GGUF models with real shapes and sizes.
 *
 * What it makes: a file llama.cpp (and sluice) can load, with the hyperparameters, tensor names,
 * shapes, tensor order, per-tensor type mix and therefore the byte size of a real llama.cpp
 * quantization (e.g. Meta-Llama-3-8B Q4_K_M), the real tokenizer copied from a vocab GGUF, and
 * random weights.  The weights have no language ability; they exist so that benchmarks can stream
 * 8B/13B-sized files and forward passes stay numerically sane.
 *
 * Weight distribution (also in --help).  Every value is a pure function of (seed, tensor name,
 * unit index) — a unit is one quant block, or one row for F16/F32 — through a counter-based
 * splitmix64 stream, so the bytes do not depend on the thread count or on chunking.
 *   target std σ: matmul weights 1/sqrt(ne0) (fan-in), token_embd 1, output 1/sqrt(dim);
 *   norms: F32 1 + 0.1·z.  F16: σ·z.  z ~ N(0,1) through a 65536-entry inverse-CDF table.
 *   Quantized types are synthesized block by block, not quantized from floats (a search-based
 *   K-quant quantizer over 8e9 floats takes minutes): each element's quant is a discretized,
 *   clipped Gaussian placed symmetrically around the type's zero point (so the mean is exactly 0),
 *   sub-block scales are uniform (Q4_K 32..63 with min = scale so each sub-block is centred,
 *   Q6_K 64..127), and the f16 super-block scale is d0·U(0.8, 1.2) with d0 chosen so the element
 *   std equals σ.  That is roughly what quantizing Gaussian weights gives (bell-shaped quant
 *   histograms, varying scales), without pretending to be a trained model.
 *
 * Pipeline: the tensor data is cut into ≤ 4 MiB chunks; G generator threads fill a ring of slots,
 * the main thread hands them to the GGUF writer in order (bounded memory: ring + 1 MiB buffer).
 */
#include "loader/gguf.h"
#include "loader/gguf_write.h"
#include "kernels/types.h"
#include "kernels/f16.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Where a named shape's vocabulary is looked for, in order: $SLUICE_VOCAB_DIR, <exe>/../share/sluice/vocab
 * (an installed tree: `cmake --install` puts the vocabularies there when the build found them), then the
 * source tree's ../shared/vocab.  CMake passes SL_SOURCE_DIR to tests but not to tools/, where __FILE__
 * (an absolute path under CMake) gives the tree.  Returns the first directory holding `file`, else the
 * last candidate (for the error message). */
static const char *vocab_dir_for(const char *file, char *tried, size_t tried_len)
{
    static char dirs[3][4096];
    int n = 0;
    const char *env = getenv("SLUICE_VOCAB_DIR");
    if (env && *env) snprintf(dirs[n++], sizeof dirs[0], "%s", env);
    char exe[4096];
    ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (el > 0) {
        exe[el] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        snprintf(dirs[n++], sizeof dirs[0], "%.4000s/../share/sluice/vocab", exe);
    }
#ifdef SL_SOURCE_DIR
    snprintf(dirs[n++], sizeof dirs[0], "%s/../shared/vocab", SL_SOURCE_DIR);
#else
    const char *f = __FILE__, *fs = strrchr(f, '/');
    int fl = fs ? (int)(fs - f) : 1;
    snprintf(dirs[n++], sizeof dirs[0], "%.*s/../../shared/vocab", fl, fs ? f : ".");
#endif
    size_t at = 0;
    if (tried_len) tried[0] = 0;
    for (int i = 0; i < n; i++) {
        char p[8192];
        snprintf(p, sizeof p, "%s/%s", dirs[i], file);
        if (access(p, R_OK) == 0) return dirs[i];
        if (at < tried_len) at += (size_t)snprintf(tried + at, tried_len - at, "%s%s", i ? ", " : "", dirs[i]);
    }
    return dirs[n - 1];
}

static const char *vocab_dir(void) { return vocab_dir_for("ggml-vocab-llama-spm.gguf", NULL, 0); }

#define CHUNK_BYTES (4u << 20)
#define NSLOT       6
#define MAX_THREADS 16

/* ---- shapes ------------------------------------------------------------------------------- */

typedef struct shape {
    const char *name;
    int dim, layers, heads, kv_heads, ffn, vocab, ctx;
    float theta;
    const char *vocab_file;
    double ref_q4km;         /* bytes of the public llama.cpp Q4_K_M file, for the size check */
} shape;

/* Hyperparameters from the models' config.json (Mistral: v0.2, rope_theta 1e6, 32k context). */
static const shape SHAPES[] = {
    { "tinyllama-1.1b", 2048, 22, 32,  4,  5632,  32000,  2048, 1e4f, "ggml-vocab-llama-spm.gguf",       0.668e9 },
    { "llama2-7b",      4096, 32, 32, 32, 11008,  32000,  4096, 1e4f, "ggml-vocab-llama-spm.gguf",       4.08e9 },
    { "llama3-8b",      4096, 32, 32,  8, 14336, 128256,  8192, 5e5f, "ggml-vocab-llama-bpe.rebuilt.gguf", 4.92e9 },
    { "mistral-7b",     4096, 32, 32,  8, 14336,  32000, 32768, 1e6f, "ggml-vocab-llama-spm.gguf",       4.37e9 },
    { "llama2-13b",     5120, 40, 40, 40, 13824,  32000,  4096, 1e4f, "ggml-vocab-llama-spm.gguf",       7.87e9 },
};
#define N_SHAPES (int)(sizeof SHAPES / sizeof SHAPES[0])

/* File types: llama.cpp's LLAMA_FTYPE numbers go into general.file_type. */
enum ftype { FT_F16 = 1, FT_Q4_0 = 2, FT_Q8_0 = 7, FT_Q4_K_M = 15 };

typedef struct opts {
    shape s;
    bool custom, tied, quiet, dry_run;
    int ftype, threads;
    uint64_t seed;
    const char *out, *vocab, *ftype_name;
    int vocab_size_arg;
} opts;

/* ---- usage -------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
"usage: sluice-gen --shape NAME|custom --type Q4_K_M|Q8_0|Q4_0|F16 --out FILE [options]\n"
"  Writes a synthetic llama GGUF: real shapes, tensor order, llama.cpp type mix and file size,\n"
"  the real tokenizer, random weights (no language ability).\n"
"shapes: tinyllama-1.1b llama2-7b llama3-8b mistral-7b llama2-13b, or custom (needs --dim\n"
"  --layers --heads --ffn); the options below override a named shape's values.\n"
"  --seed N          weights are a pure function of (seed, tensor, block)      [1]\n"
"  --vocab FILE      GGUF whose tokenizer.* keys are copied; the model's vocab size is its token\n"
"                    count [ggml-vocab-llama-bpe.rebuilt.gguf for llama3-8b, otherwise\n"
"                    ggml-vocab-llama-spm.gguf, in %s]\n"
"  --dim D --layers L --heads H --kv-heads K --ffn F --ctx C --rope-theta T\n"
"  --vocab-size V    only checked against the vocabulary's token count\n"
"  --tied            no output.weight (the output reuses token_embd)\n"
"  --threads N       generator threads (1..%d)                                  [2]\n"
"  --quiet           no progress, no summary\n"
"  --dry-run         print the tensor table and the file size; write nothing\n"
"weights: std 1/sqrt(ne0) for matmul weights, 1 for token_embd, 1/sqrt(dim) for output,\n"
"  norms 1 + 0.1*N(0,1) in F32.  F16 holds sigma*N(0,1).  Quantized blocks are synthesized\n"
"  directly: clipped, discretized Gaussian quants centred on the zero point, uniform sub-block\n"
"  scales (Q4_K 32..63 with mins = scales, Q6_K 64..127), f16 block scale d0*U(0.8,1.2) with d0\n"
"  set so the element std is sigma.  Output is byte-identical for a given seed and thread count\n"
"  does not matter.\n"
"type mix (llama.cpp llama_tensor_get_type): Q4_K_M: Q4_K, with Q6_K for output (and a tied\n"
"  token_embd) and for attn_v/ffn_down of layers i < L/8, i >= 7L/8, (i - L/8) %% 3 == 2;\n"
"  Q4_0: Q4_0, output Q6_K; Q8_0: all Q8_0; F16: all F16; norms always F32.\n",
            vocab_dir(), MAX_THREADS);
}

static _Noreturn void bad_args(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static _Noreturn void bad_args(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("sluice-gen: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    usage(stderr);
    exit(2);
}

/* Parse a whole decimal integer in [lo, hi] or exit 2. */
static long long parse_int(const char *opt, const char *v, long long lo, long long hi)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        bad_args("%s: '%s' is not an integer in [%lld, %lld]", opt, v, lo, hi);
    return x;
}

static void parse_args(int argc, char **argv, opts *o)
{
    const char *shape_name = NULL;
    int dim = -1, layers = -1, heads = -1, kv = -1, ffn = -1, ctx = -1;
    double theta = -1;
    memset(o, 0, sizeof *o);
    o->seed = 1;
    o->threads = 2;
    o->vocab_size_arg = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); exit(0); }
        if (!strcmp(a, "--tied")) { o->tied = true; continue; }
        if (!strcmp(a, "--quiet")) { o->quiet = true; continue; }
        if (!strcmp(a, "--dry-run")) { o->dry_run = true; continue; }
        if (i + 1 >= argc) bad_args("%s: missing value (or unknown option)", a);
        const char *v = argv[++i];
        if      (!strcmp(a, "--shape")) shape_name = v;
        else if (!strcmp(a, "--type")) o->ftype_name = v;
        else if (!strcmp(a, "--out")) o->out = v;
        else if (!strcmp(a, "--vocab")) o->vocab = v;
        else if (!strcmp(a, "--seed")) o->seed = (uint64_t)parse_int(a, v, 0, INT64_MAX);
        else if (!strcmp(a, "--threads")) o->threads = (int)parse_int(a, v, 1, MAX_THREADS);
        else if (!strcmp(a, "--dim")) dim = (int)parse_int(a, v, 1, 65536);
        else if (!strcmp(a, "--layers")) layers = (int)parse_int(a, v, 1, 1024);
        else if (!strcmp(a, "--heads")) heads = (int)parse_int(a, v, 1, 4096);
        else if (!strcmp(a, "--kv-heads")) kv = (int)parse_int(a, v, 1, 4096);
        else if (!strcmp(a, "--ffn")) ffn = (int)parse_int(a, v, 1, 1 << 20);
        else if (!strcmp(a, "--vocab-size")) o->vocab_size_arg = (int)parse_int(a, v, 1, 1 << 24);
        else if (!strcmp(a, "--ctx")) ctx = (int)parse_int(a, v, 1, 1 << 24);
        else if (!strcmp(a, "--rope-theta")) {
            char *end;
            theta = strtod(v, &end);
            if (end == v || *end || !(theta > 0 && theta < 1e12)) bad_args("--rope-theta: '%s' is not a positive number", v);
        }
        else bad_args("unknown option %s", a);
    }
    if (!shape_name) bad_args("--shape is required");
    if (!o->ftype_name) bad_args("--type is required");
    if (!o->out) bad_args("--out is required");
    if (!strcmp(shape_name, "custom")) {
        if (dim < 0 || layers < 0 || heads < 0 || ffn < 0) bad_args("--shape custom needs --dim, --layers, --heads and --ffn");
        o->custom = true;
        o->s = (shape){ "custom", dim, layers, heads, heads, ffn, 0, 2048, 1e4f, "ggml-vocab-llama-spm.gguf", 0 };
    } else {
        int k = 0;
        while (k < N_SHAPES && strcmp(SHAPES[k].name, shape_name)) k++;
        if (k == N_SHAPES) bad_args("unknown shape '%s'", shape_name);
        o->s = SHAPES[k];
        if (dim > 0 || layers > 0 || heads > 0 || kv > 0 || ffn > 0) o->custom = true;   /* no size reference */
    }
    if (dim > 0) o->s.dim = dim;
    if (layers > 0) o->s.layers = layers;
    if (heads > 0) { o->s.heads = heads; if (kv < 0 && o->custom) o->s.kv_heads = heads; }
    if (kv > 0) o->s.kv_heads = kv;
    if (ffn > 0) o->s.ffn = ffn;
    if (ctx > 0) o->s.ctx = ctx;
    if (theta > 0) o->s.theta = (float)theta;

    const char *t = o->ftype_name;
    if      (!strcmp(t, "Q4_K_M")) o->ftype = FT_Q4_K_M;
    else if (!strcmp(t, "Q8_0"))   o->ftype = FT_Q8_0;
    else if (!strcmp(t, "Q4_0"))   o->ftype = FT_Q4_0;
    else if (!strcmp(t, "F16"))    o->ftype = FT_F16;
    else bad_args("unknown --type '%s' (Q4_K_M, Q8_0, Q4_0, F16)", t);

    const shape *s = &o->s;
    if (s->dim % s->heads) bad_args("dim %d is not a multiple of heads %d", s->dim, s->heads);
    if ((s->dim / s->heads) % 2) bad_args("head dim %d must be even (RoPE rotates pairs)", s->dim / s->heads);
    if (s->heads % s->kv_heads) bad_args("heads %d is not a multiple of kv-heads %d", s->heads, s->kv_heads);
    /* Row lengths are dim and ffn: each must split into whole blocks of every type used.  llama.cpp
     * would fall back to Q5_0/Q5_1/Q8_0 for odd shapes; sluice-gen generates no such fallbacks. */
    int need = o->ftype == FT_Q4_K_M ? 256 : o->ftype == FT_F16 ? 1 : 32;
    if (s->dim % need || s->ffn % need)
        bad_args("--type %s needs dim and ffn to be multiples of %d (got %d, %d)", t, need, s->dim, s->ffn);
}

/* ---- tensor plan -------------------------------------------------------------------------- */

enum kind { K_EMBD, K_OUT_NORM, K_OUTPUT, K_ATTN_NORM, K_Q, K_K, K_V, K_O, K_FFN_NORM, K_GATE, K_UP, K_DOWN };

typedef struct tplan {
    char name[64];
    enum kind kind;
    int type, layer;
    int64_t ne[2];
    int n_dims;
    float sigma;             /* target element std (norms: noise std around 1) */
    uint64_t nbytes, unit_bytes, n_units, key;
    float d0;                /* quantized types: base super-block scale */
} tplan;

/* llama.cpp's use_more_bits(): the layers that Q4_K_M gives Q6_K for attn_v and ffn_down. */
static bool more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* Type of one tensor under the file type, as llama.cpp's llama_tensor_get_type picks it. */
static int pick_type(const opts *o, enum kind k, int layer)
{
    if (k == K_OUT_NORM || k == K_ATTN_NORM || k == K_FFN_NORM) return SL_TYPE_F32;   /* 1-D: never quantized */
    bool out_like = k == K_OUTPUT || (o->tied && k == K_EMBD);
    switch (o->ftype) {
    case FT_F16:  return SL_TYPE_F16;
    case FT_Q8_0: return SL_TYPE_Q8_0;
    case FT_Q4_0: return out_like ? (o->s.dim % 256 == 0 ? SL_TYPE_Q6_K : SL_TYPE_Q8_0) : SL_TYPE_Q4_0;
    default:
        if (out_like) return SL_TYPE_Q6_K;
        if ((k == K_V || k == K_DOWN) && more_bits(layer, o->s.layers)) return SL_TYPE_Q6_K;
        return SL_TYPE_Q4_K;
    }
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static void add_plan(tplan *p, int *n, const opts *o, enum kind k, int layer, const char *name, int64_t ne0, int64_t ne1)
{
    tplan *t = &p[(*n)++];
    memset(t, 0, sizeof *t);
    if (layer >= 0) snprintf(t->name, sizeof t->name, "blk.%d.%s.weight", layer, name);
    else snprintf(t->name, sizeof t->name, "%s.weight", name);
    t->kind = k;
    t->layer = layer;
    t->type = pick_type(o, k, layer);
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->n_dims = ne1 > 0 ? 2 : 1;
    if (k == K_OUT_NORM || k == K_ATTN_NORM || k == K_FFN_NORM) t->sigma = 0.1f;
    else if (k == K_EMBD) t->sigma = 1.0f;
    else if (k == K_OUTPUT) t->sigma = 1.0f / sqrtf((float)o->s.dim);
    else t->sigma = 1.0f / sqrtf((float)ne0);
    t->key = fnv1a(t->name);
}

/* Layer tensors in the order of `order` (kinds), each with its shape. */
static void add_layer(tplan *p, int *n, const opts *o, int l, const enum kind *order)
{
    const shape *s = &o->s;
    int64_t kvd = (int64_t)s->dim / s->heads * s->kv_heads;
    for (int j = 0; j < 9; j++) {
        switch (order[j]) {
        case K_ATTN_NORM: add_plan(p, n, o, K_ATTN_NORM, l, "attn_norm", s->dim, 0); break;
        case K_Q:         add_plan(p, n, o, K_Q, l, "attn_q", s->dim, s->dim); break;
        case K_K:         add_plan(p, n, o, K_K, l, "attn_k", s->dim, kvd); break;
        case K_V:         add_plan(p, n, o, K_V, l, "attn_v", s->dim, kvd); break;
        case K_O:         add_plan(p, n, o, K_O, l, "attn_output", s->dim, s->dim); break;
        case K_FFN_NORM:  add_plan(p, n, o, K_FFN_NORM, l, "ffn_norm", s->dim, 0); break;
        case K_GATE:      add_plan(p, n, o, K_GATE, l, "ffn_gate", s->dim, s->ffn); break;
        case K_UP:        add_plan(p, n, o, K_UP, l, "ffn_up", s->dim, s->ffn); break;
        case K_DOWN:      add_plan(p, n, o, K_DOWN, l, "ffn_down", s->ffn, s->dim); break;
        default: break;
        }
    }
}

/* The tensor list in file order.  Quantized files use llama-quantize's order (its weights map is
 * sorted by layer, then name: output, output_norm, token_embd, then each block's tensors by name),
 * F16 files the converter's (token_embd, blocks, output_norm, output) — as in shared/models. */
static int build_plan(const opts *o, int64_t vocab, tplan *p)
{
    static const enum kind conv[9] = { K_ATTN_NORM, K_Q, K_K, K_V, K_O, K_FFN_NORM, K_GATE, K_UP, K_DOWN };
    static const enum kind sorted[9] = { K_K, K_ATTN_NORM, K_O, K_Q, K_V, K_DOWN, K_GATE, K_FFN_NORM, K_UP };
    int n = 0;
    int dim = o->s.dim;
    if (o->ftype == FT_F16) {
        add_plan(p, &n, o, K_EMBD, -1, "token_embd", dim, vocab);
        for (int l = 0; l < o->s.layers; l++) add_layer(p, &n, o, l, conv);
        add_plan(p, &n, o, K_OUT_NORM, -1, "output_norm", dim, 0);
        if (!o->tied) add_plan(p, &n, o, K_OUTPUT, -1, "output", dim, vocab);
    } else {
        if (!o->tied) add_plan(p, &n, o, K_OUTPUT, -1, "output", dim, vocab);
        add_plan(p, &n, o, K_OUT_NORM, -1, "output_norm", dim, 0);
        add_plan(p, &n, o, K_EMBD, -1, "token_embd", dim, vocab);
        for (int l = 0; l < o->s.layers; l++) add_layer(p, &n, o, l, sorted);
    }
    return n;
}

/* ---- random numbers and quant tables ------------------------------------------------------ */

static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* splitmix64 stream: state advances by the golden gamma, output is the mixed state. */
static inline uint64_t next64(uint64_t *s) { return mix64(*s += 0x9e3779b97f4a7c15ull); }

static float gauss_tab[65536];            /* Φ⁻¹((i + 0.5) / 65536): symmetric, tails ±4.17 */
static uint8_t q4k_tab[65536], q6k_tab[65536], q40_tab[65536];
static int8_t q80_tab[65536];
static double q4k_std, q6k_std, q40_std, q80_std;

/* Inverse normal CDF by bisection on erfc: slow but obviously right; runs once (≈ 30 ms). */
static void init_tables(void)
{
    for (int i = 32768; i < 65536; i++) {
        double p = (i + 0.5) / 65536.0, lo = 0, hi = 10;
        for (int it = 0; it < 60; it++) {
            double mid = 0.5 * (lo + hi);
            if (0.5 * erfc(-mid / sqrt(2.0)) < p) lo = mid; else hi = mid;
        }
        gauss_tab[i] = (float)(0.5 * (lo + hi));
        gauss_tab[65535 - i] = -gauss_tab[i];
    }
    double s4k = 0, s6k = 0, s40 = 0, s80 = 0;
    for (int i = 0; i < 65536; i++) {
        double z = gauss_tab[i];
        /* floor(8 + 3.6z) and floor(8 - 3.6z) sum to 15: the Q4_K table is symmetric about 7.5. */
        int a = (int)floor(8 + 3.6 * z); a = a < 0 ? 0 : a > 15 ? 15 : a;
        int b = (int)lrint(14 * z); b = b < -31 ? -31 : b > 31 ? 31 : b;      /* Q6_K: q - 32 */
        int c = (int)lrint(3.7 * z); c = c < -7 ? -7 : c > 7 ? 7 : c;         /* Q4_0: q - 8 */
        int e = (int)lrint(55 * z); e = e < -127 ? -127 : e > 127 ? 127 : e;  /* Q8_0 */
        q4k_tab[i] = (uint8_t)a; q6k_tab[i] = (uint8_t)(b + 32); q40_tab[i] = (uint8_t)(c + 8); q80_tab[i] = (int8_t)e;
        s4k += (a - 7.5) * (a - 7.5); s6k += b * b; s40 += c * c; s80 += e * e;
    }
    q4k_std = sqrt(s4k / 65536); q6k_std = sqrt(s6k / 65536); q40_std = sqrt(s40 / 65536); q80_std = sqrt(s80 / 65536);
}

/* rms of the uniform integers lo..hi, and of U(0.8, 1.2) (the block-scale jitter). */
static double rms_uniform_int(int lo, int hi)
{
    double s = 0;
    for (int v = lo; v <= hi; v++) s += (double)v * v;
    return sqrt(s / (hi - lo + 1));
}
#define JIT_RMS 1.0066445   /* sqrt(1 + 0.4^2/12) */

/* Per-tensor generation unit (one block, or one row for float types) and base scale. */
static void plan_units(tplan *t)
{
    const sl_type_info *ti = sl_type_get(t->type);
    int64_t rows = t->n_dims == 2 ? t->ne[1] : 1;
    t->nbytes = (uint64_t)sl_row_bytes(t->type, t->ne[0]) * (uint64_t)rows;
    if (t->type == SL_TYPE_F16 || t->type == SL_TYPE_F32) t->unit_bytes = sl_row_bytes(t->type, t->ne[0]);
    else t->unit_bytes = (uint64_t)ti->bytes;
    t->n_units = t->nbytes / t->unit_bytes;
    double denom = 1;
    switch (t->type) {
    case SL_TYPE_Q4_K: denom = JIT_RMS * rms_uniform_int(32, 63) * q4k_std; break;
    case SL_TYPE_Q6_K: denom = JIT_RMS * rms_uniform_int(64, 127) * q6k_std; break;
    case SL_TYPE_Q4_0: denom = JIT_RMS * q40_std; break;
    case SL_TYPE_Q8_0: denom = JIT_RMS * q80_std; break;
    default: break;
    }
    t->d0 = (float)(t->sigma / denom);
}

/* ---- block synthesis ---------------------------------------------------------------------- */

static inline void put_f16(uint8_t *p, float v) { uint16_t h = sl_f32_to_f16(v); memcpy(p, &h, 2); }

/* Fill `dst` with units [first, first + n) of tensor t.  Pure function of (seed, t, unit). */
static void gen_units(const tplan *t, uint64_t seed, uint64_t first, uint64_t n, uint8_t *dst)
{
    for (uint64_t u = first; u < first + n; u++, dst += t->unit_bytes) {
        uint64_t s = mix64(seed ^ mix64(t->key + mix64(u + 0x632be59bd9b4e019ull)));
        uint64_t r = next64(&s);
        float d = t->d0 * (0.8f + 0.4f * (float)(r >> 40) * 0x1p-24f);
        switch (t->type) {
        case SL_TYPE_F32:
            for (int64_t i = 0; i < t->ne[0]; i += 4) {
                r = next64(&s);
                for (int k = 0; k < 4 && i + k < t->ne[0]; k++, r >>= 16) {
                    float v = 1.0f + t->sigma * gauss_tab[r & 0xffff];
                    memcpy(dst + 4 * (i + k), &v, 4);
                }
            }
            break;
        case SL_TYPE_F16:
            for (int64_t i = 0; i < t->ne[0]; i += 4) {
                r = next64(&s);
                for (int k = 0; k < 4 && i + k < t->ne[0]; k++, r >>= 16)
                    put_f16(dst + 2 * (i + k), t->sigma * gauss_tab[r & 0xffff]);
            }
            break;
        case SL_TYPE_Q8_0:   /* f16 d, int8 qs[32] */
            put_f16(dst, d);
            for (int i = 0; i < 32; i += 4) {
                r = next64(&s);
                for (int k = 0; k < 4; k++, r >>= 16) dst[2 + i + k] = (uint8_t)q80_tab[r & 0xffff];
            }
            break;
        case SL_TYPE_Q4_0:   /* f16 d, 16 bytes of nibble pairs; x = d * (q - 8) */
            put_f16(dst, d);
            for (int i = 0; i < 16; i += 2) {
                r = next64(&s);
                dst[2 + i] = (uint8_t)(q40_tab[r & 0xffff] | q40_tab[(r >> 16) & 0xffff] << 4);
                dst[3 + i] = (uint8_t)(q40_tab[(r >> 32) & 0xffff] | q40_tab[r >> 48] << 4);
            }
            break;
        case SL_TYPE_Q4_K: { /* f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, 128 bytes of nibbles */
            uint8_t sc[8], *sb = dst + 4;
            r = next64(&s);
            for (int j = 0; j < 8; j++, r >>= 5) sc[j] = (uint8_t)(32 + (r & 31));
            uint16_t dh = sl_f32_to_f16(d);
            /* min = scale, dmin = 7.5 d: every sub-block is centred on the table's midpoint 7.5. */
            uint16_t mh = sl_f32_to_f16(7.5f * sl_f16_to_f32(dh));
            memcpy(dst, &dh, 2);
            memcpy(dst + 2, &mh, 2);
            for (int j = 0; j < 4; j++) {   /* ggml's packing: low 6 bits, high 2 bits of 4..7 on top */
                sb[j]     = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
                sb[j + 4] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
                sb[j + 8] = (uint8_t)((sc[j + 4] & 15) | (sc[j + 4] & 15) << 4);
            }
            uint8_t *qs = dst + 16;
            for (int i = 0; i < 128; i += 2) {   /* elements are i.i.d.: nibble placement is free */
                r = next64(&s);
                qs[i]     = (uint8_t)(q4k_tab[r & 0xffff] | q4k_tab[(r >> 16) & 0xffff] << 4);
                qs[i + 1] = (uint8_t)(q4k_tab[(r >> 32) & 0xffff] | q4k_tab[r >> 48] << 4);
            }
            break;
        }
        case SL_TYPE_Q6_K: { /* ql[128], qh[64], int8 scales[16], f16 d; x = d * sc * (q - 32) */
            uint8_t *ql = dst, *qh = dst + 128;
            int8_t *sc = (int8_t *)(dst + 192);
            for (int h = 0; h < 2; h++, ql += 64, qh += 32) {
                for (int l = 0; l < 32; l++) {
                    r = next64(&s);
                    /* one 6-bit quant per 16 random bits: low nibble into ql, top 2 bits into qh */
                    uint8_t a = q6k_tab[r & 0xffff], b = q6k_tab[(r >> 16) & 0xffff];
                    uint8_t c = q6k_tab[(r >> 32) & 0xffff], e = q6k_tab[r >> 48];
                    ql[l]      = (uint8_t)((a & 15) | (c & 15) << 4);
                    ql[l + 32] = (uint8_t)((b & 15) | (e & 15) << 4);
                    qh[l]      = (uint8_t)((a >> 4) | (b >> 4) << 2 | (c >> 4) << 4 | (e >> 4) << 6);
                }
            }
            r = next64(&s);
            uint64_t r2 = next64(&s);
            for (int j = 0; j < 8; j++, r >>= 6, r2 >>= 6) {
                sc[j] = (int8_t)(64 + (r & 63));
                sc[j + 8] = (int8_t)(64 + (r2 & 63));
            }
            put_f16(dst + 208, d);
            break;
        }
        default:
            memset(dst, 0, t->unit_bytes);   /* unreachable: pick_type only yields the types above */
        }
    }
}

/* ---- pipeline: generator threads fill a ring of slots, the main thread writes in order ----- */

typedef struct chunk { uint32_t tensor; uint64_t first, n; } chunk;

typedef struct pipe {
    const tplan *plan;
    const chunk *chunks;
    uint64_t n_chunks, seed;
    uint8_t *slot[NSLOT];
    uint64_t ready[NSLOT];       /* chunk index + 1 held by the slot, 0 = none */
    uint64_t next, written;      /* next chunk to claim; chunks handed to the writer */
    bool stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} pipe_t;

/* Generator: claim chunk i, wait until its slot (i mod NSLOT) is free, fill it, publish it. */
static void *gen_main(void *arg)
{
    pipe_t *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (p->stop || p->next >= p->n_chunks) break;
        uint64_t i = p->next++;
        while (!p->stop && i >= p->written + NSLOT) pthread_cond_wait(&p->cv, &p->mu);
        if (p->stop) break;
        pthread_mutex_unlock(&p->mu);
        const chunk *c = &p->chunks[i];
        gen_units(&p->plan[c->tensor], p->seed, c->first, c->n, p->slot[i % NSLOT]);
        pthread_mutex_lock(&p->mu);
        p->ready[i % NSLOT] = i + 1;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Cut every tensor into chunks of whole units, at most CHUNK_BYTES each (a unit larger than that,
 * e.g. an F32 row of 2M floats, cannot happen: rows are ≤ 65536 elements). */
static chunk *make_chunks(const tplan *plan, int n, uint64_t *n_chunks)
{
    uint64_t total = 0;
    for (int t = 0; t < n; t++) {
        uint64_t per = CHUNK_BYTES / plan[t].unit_bytes;
        total += (plan[t].n_units + per - 1) / per;
    }
    chunk *c = malloc(total * sizeof *c);
    if (!c) return NULL;
    uint64_t k = 0;
    for (int t = 0; t < n; t++) {
        uint64_t per = CHUNK_BYTES / plan[t].unit_bytes;
        for (uint64_t u = 0; u < plan[t].n_units; u += per)
            c[k++] = (chunk){ (uint32_t)t, u, plan[t].n_units - u < per ? plan[t].n_units - u : per };
    }
    *n_chunks = total;
    return c;
}

/* Run the generators and stream every chunk into the writer.  Returns the writer's status. */
static int stream_data(sl_gguf_writer *w, const tplan *plan, int n, const opts *o)
{
    pipe_t p = { .plan = plan, .seed = o->seed };
    pthread_t th[MAX_THREADS];
    int nth = 0, rc = 0;
    p.chunks = make_chunks(plan, n, &p.n_chunks);
    for (int i = 0; i < NSLOT; i++) p.slot[i] = malloc(CHUNK_BYTES);
    for (int i = 0; i < NSLOT; i++) if (!p.slot[i]) rc = -ENOMEM;
    if (!p.chunks) rc = -ENOMEM;
    if (rc) {
        fprintf(stderr, "sluice-gen: out of memory\n");
        goto out;
    }
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    for (; nth < o->threads; nth++)
        if (pthread_create(&th[nth], NULL, gen_main, &p)) break;
    bool tty = !o->quiet && isatty(2);
    double t0 = now_s(), last = t0;
    uint64_t total = sl_gguf_writer_data_total(w);
    for (uint64_t i = 0; i < p.n_chunks && nth > 0; i++) {
        pthread_mutex_lock(&p.mu);
        while (p.ready[i % NSLOT] != i + 1) pthread_cond_wait(&p.cv, &p.mu);
        pthread_mutex_unlock(&p.mu);
        const chunk *c = &p.chunks[i];
        rc = sl_gguf_writer_write(w, p.slot[i % NSLOT], c->n * plan[c->tensor].unit_bytes);
        pthread_mutex_lock(&p.mu);
        p.ready[i % NSLOT] = 0;
        p.written = i + 1;
        if (rc) p.stop = true;
        pthread_cond_broadcast(&p.cv);
        pthread_mutex_unlock(&p.mu);
        if (rc) break;
        double t = now_s();
        if (tty && t - last >= 0.25) {
            uint64_t done = sl_gguf_writer_data_written(w);
            fprintf(stderr, "\r  %5.1f%%  %7.0f / %.0f MB  %6.0f MB/s ", 100.0 * done / total,
                    done / 1e6, total / 1e6, done / 1e6 / (t - t0));
            last = t;
        }
    }
    if (tty) fprintf(stderr, "\r%60s\r", "");
    if (nth == 0) { fprintf(stderr, "sluice-gen: cannot start threads\n"); rc = -EAGAIN; }
    pthread_mutex_lock(&p.mu);
    p.stop = true;
    pthread_cond_broadcast(&p.cv);
    pthread_mutex_unlock(&p.mu);
    for (int i = 0; i < nth; i++) pthread_join(th[i], NULL);
    pthread_mutex_destroy(&p.mu);
    pthread_cond_destroy(&p.cv);
out:
    for (int i = 0; i < NSLOT; i++) free(p.slot[i]);
    free((void *)p.chunks);
    return rc;
}

/* ---- metadata ----------------------------------------------------------------------------- */

/* Key/values in the order llama-quantize leaves them: general, llama.*, tokenizer.*, then
 * quantization_version and file_type.  Types match llama.cpp's loader (u32 / f32 / string). */
static int write_meta(sl_gguf_writer *w, const opts *o, const sl_gguf *voc, int64_t vocab)
{
    const shape *s = &o->s;
    char desc[256];
    snprintf(desc, sizeof desc, "SYNTHETIC random weights (sluice-gen --shape %s --type %s --seed %" PRIu64
             "): real shapes and sizes, no language ability", s->name, o->ftype_name, o->seed);
    sl_gguf_writer_kv_str(w, "general.architecture", "llama");
    sl_gguf_writer_kv_str(w, "general.name", s->name);
    sl_gguf_writer_kv_str(w, "general.description", desc);
    sl_gguf_writer_kv_u32(w, "general.alignment", 32);
    sl_gguf_writer_kv_u32(w, "llama.context_length", (uint32_t)s->ctx);
    sl_gguf_writer_kv_u32(w, "llama.embedding_length", (uint32_t)s->dim);
    sl_gguf_writer_kv_u32(w, "llama.block_count", (uint32_t)s->layers);
    sl_gguf_writer_kv_u32(w, "llama.feed_forward_length", (uint32_t)s->ffn);
    sl_gguf_writer_kv_u32(w, "llama.rope.dimension_count", (uint32_t)(s->dim / s->heads));
    sl_gguf_writer_kv_u32(w, "llama.attention.head_count", (uint32_t)s->heads);
    sl_gguf_writer_kv_u32(w, "llama.attention.head_count_kv", (uint32_t)s->kv_heads);
    sl_gguf_writer_kv_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    sl_gguf_writer_kv_f32(w, "llama.rope.freq_base", s->theta);
    sl_gguf_writer_kv_u32(w, "llama.vocab_size", (uint32_t)vocab);
    for (int64_t i = 0; i < sl_gguf_n_kv(voc); i++) {
        sl_str k = sl_gguf_key(voc, i);
        if (k.len > 10 && !memcmp(k.ptr, "tokenizer.", 10)) sl_gguf_writer_copy_kv(w, voc, i);
    }
    sl_gguf_writer_kv_u32(w, "general.quantization_version", 2);
    return sl_gguf_writer_kv_u32(w, "general.file_type", (uint32_t)o->ftype);
}

/* ---- main --------------------------------------------------------------------------------- */

static const char *volatile g_tmp;   /* temp file to unlink if we are interrupted */

static void on_signal(int sig)
{
    if (g_tmp) unlink(g_tmp);
    signal(sig, SIG_DFL);
    raise(sig);
}

int main(int argc, char **argv)
{
    opts o;
    parse_args(argc, argv, &o);
    char err[SL_ERRLEN], vpath[4096];
    char tried[4096] = "";
    int pl = o.vocab ? snprintf(vpath, sizeof vpath, "%s", o.vocab)
                     : snprintf(vpath, sizeof vpath, "%s/%s", vocab_dir_for(o.s.vocab_file, tried, sizeof tried),
                                o.s.vocab_file);
    if (pl < 0 || (size_t)pl >= sizeof vpath) bad_args("vocabulary path too long");
    sl_gguf *voc = NULL;
    if (!o.vocab && access(vpath, R_OK) != 0) {
        fprintf(stderr, "sluice-gen: the %s shape needs the vocabulary %s, not found in %s; pass --vocab FILE (any GGUF "
                "with tokenizer metadata, e.g. llama.cpp's models/%s) or set SLUICE_VOCAB_DIR\n", o.s.name,
                o.s.vocab_file, tried, o.s.vocab_file);
        return 1;
    }
    if (sl_gguf_open(vpath, &voc, err, sizeof err)) {
        fprintf(stderr, "sluice-gen: vocabulary %s: %s\n", vpath, err);
        return 1;
    }
    int et;
    uint64_t vocab = 0;
    if (!sl_gguf_get_arr(voc, "tokenizer.ggml.tokens", &et, &vocab) || et != SL_GGUF_STRING || vocab == 0) {
        fprintf(stderr, "sluice-gen: %s has no tokenizer.ggml.tokens string array\n", vpath);
        sl_gguf_close(voc);
        return 1;
    }
    if (o.vocab_size_arg > 0 && (uint64_t)o.vocab_size_arg != vocab) {
        sl_gguf_close(voc);
        bad_args("--vocab-size %d disagrees with the %" PRIu64 " tokens of %s", o.vocab_size_arg, vocab, vpath);
    }
    if (o.s.vocab && (uint64_t)o.s.vocab != vocab) o.custom = true;   /* not the real shape: no size reference */

    /* gen_units() writes ggml's block layouts byte by byte: make sure the kernels agree on them. */
    static const int layout[][3] = { { SL_TYPE_Q4_0, 32, 18 }, { SL_TYPE_Q8_0, 32, 34 },
                                     { SL_TYPE_Q4_K, 256, 144 }, { SL_TYPE_Q6_K, 256, 210 } };
    for (int i = 0; i < 4; i++) {
        const sl_type_info *ti = sl_type_get(layout[i][0]);
        if (!ti || ti->blck != layout[i][1] || ti->bytes != layout[i][2]) {
            fprintf(stderr, "sluice-gen: internal error: block layout of type %d disagrees with kernels/types.c\n", layout[i][0]);
            sl_gguf_close(voc);
            return 1;
        }
    }
    init_tables();
    tplan *plan = calloc((size_t)o.s.layers * 9 + 3, sizeof *plan);
    if (!plan) { fprintf(stderr, "sluice-gen: out of memory\n"); sl_gguf_close(voc); return 1; }
    int n = build_plan(&o, (int64_t)vocab, plan);
    for (int i = 0; i < n; i++) plan_units(&plan[i]);

    double t0 = now_s();
    sl_gguf_writer *w;
    if (sl_gguf_writer_open(&w, o.out, 32, SL_GGUF_WRITE_DROP_CACHE | SL_GGUF_WRITE_PREALLOCATE, err, sizeof err)) {
        fprintf(stderr, "sluice-gen: %s\n", err);
        free(plan);
        sl_gguf_close(voc);
        return 1;
    }
    g_tmp = sl_gguf_writer_tmp_path(w);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal);
    write_meta(w, &o, voc, (int64_t)vocab);
    for (int i = 0; i < n; i++) sl_gguf_writer_add_tensor(w, plan[i].name, plan[i].type, plan[i].n_dims, plan[i].ne, NULL);
    sl_gguf_close(voc);
    uint64_t size = sl_gguf_writer_total_size(w);
    if (o.dry_run) {   /* the metadata went to the temp file only to measure it */
        g_tmp = NULL;
        sl_gguf_writer_abort(w);
        for (int i = 0; i < n; i++)
            printf("%s\t%s\t%" PRId64 "x%" PRId64 "\t%" PRIu64 "\n", plan[i].name, sl_type_name(plan[i].type),
                   plan[i].ne[0], plan[i].n_dims == 2 ? plan[i].ne[1] : 1, plan[i].nbytes);
        printf("total\t%" PRIu64 "\n", size);
        free(plan);
        return 0;
    }
    stream_data(w, plan, n, &o);
    sigset_t block, old;   /* the writer frees the temp path in finish: no signal may use it then */
    sigemptyset(&block);
    sigaddset(&block, SIGINT); sigaddset(&block, SIGTERM); sigaddset(&block, SIGHUP);
    sigprocmask(SIG_BLOCK, &block, &old);
    g_tmp = NULL;
    int rc = sl_gguf_writer_finish(w, err, sizeof err);
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        fprintf(stderr, "sluice-gen: %s (nothing written to %s)\n", err, o.out);
        free(plan);
        return 1;
    }
    double dt = now_s() - t0;
    if (!o.quiet) {
        int n6 = 0;
        for (int i = 0; i < n; i++) n6 += plan[i].type == SL_TYPE_Q6_K;
        printf("sluice-gen: wrote %s: %s %s, %d layers, dim %d, vocab %" PRIu64 ", %d tensors (%d Q6_K), "
               "%" PRIu64 " bytes (%.3f GB) in %.1f s (%.0f MB/s)\n", o.out, o.s.name, o.ftype_name,
               o.s.layers, o.s.dim, vocab, n, n6, size, size / 1e9, dt, size / 1e6 / dt);
        if (!o.custom && !o.tied && o.ftype == FT_Q4_K_M && o.s.ref_q4km > 0)
            printf("sluice-gen: llama.cpp's %s Q4_K_M file is about %.3f GB: %+.2f%%\n", o.s.name,
                   o.s.ref_q4km / 1e9, 100.0 * ((double)size - o.s.ref_q4km) / o.s.ref_q4km);
    }
    free(plan);
    return 0;
}
