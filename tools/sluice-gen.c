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
 *   histograms, varying scales), without pretending to be a trained model.  Q2_K, Q3_K, IQ4_XS, MXFP4
 *   blocks: tools/sluice-gen/lowbit.c.
 *
 * Pipeline: the tensor data is cut into ≤ 4 MiB chunks; G generator threads fill a ring of slots,
 * the main thread hands them to the GGUF writer in order (bounded memory: ring + 1 MiB buffer).
 */
#include "loader/gguf.h"
#include "loader/gguf_write.h"
#include "tools/sluice-gen/gen.h"
#include "kernels/types.h"
#include "kernels/f16.h"
#include "loader/ftype.h"

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

/* ---- usage -------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
"usage: sluice-gen --shape NAME|custom --type FILETYPE --out FILE [options]\n"
"  Writes a synthetic llama GGUF: real shapes, tensor order, llama.cpp type mix and file size,\n"
"  the real tokenizer, random weights (no language ability).\n"
"shapes: tinyllama-1.1b llama2-7b llama3-8b mistral-7b llama2-13b llama3.1-8b qwen2.5-7b qwen3-8b\n"
"  gemma2-9b phi3-medium-14b mistral-nemo-12b gemma3-4b gemma3-12b gemma3-27b, Mixture-of-Experts\n"
"  qwen3-30b-a3b mixtral-8x7b\n"
"  qwen1.5-moe-a2.7b gpt-oss-20b gpt-oss-120b (their architectures' tensor sets; the released\n"
"  gpt-oss files are --type MXFP4_MOE; vocabularies without a file here are a\n"
"  real one padded to the real size), or custom (a llama; needs --dim --layers --heads --ffn); the\n"
"  options below override a named shape's values.\n"
"  --seed N          weights are a pure function of (seed, tensor, block)      [1]\n"
"  --vocab FILE      GGUF whose tokenizer.* keys are copied; the model's vocab size is its token\n"
"                    count [ggml-vocab-llama-bpe.rebuilt.gguf for llama3-8b, otherwise\n"
"                    ggml-vocab-llama-spm.gguf, in %s]\n"
"  --dim D --layers L --heads H --kv-heads K --ffn F --ctx C --rope-theta T --head-dim H\n"
"  --experts E --experts-used K   routed experts a block, used a token (a llama with experts is a\n"
"                    Mixtral: its experts are --ffn wide)\n"
"  --expert-ffn F --shexp-ffn S   qwen3moe/qwen2moe/gpt-oss expert width, qwen2moe shared-expert width\n"
"  --sliding-window W --yarn-orig-ctx N   gpt-oss: attention window, YaRN original context\n"
"  --vocab-size V    only checked against the vocabulary's token count\n"
"  --tied            no output.weight (the output reuses token_embd)\n"
"  --threads N       generator threads (1..%d)                                  [2]\n"
"  --quiet           no progress, no summary\n"
"  --dry-run         print the tensor table and the file size; write nothing\n"
"file types: %s\n"
"weights: std 1/sqrt(ne0) for matmul weights, 1 for token_embd, 1/sqrt(dim) for output,\n"
"  norms 1 + 0.1*N(0,1) in F32.  F16 holds sigma*N(0,1).  Quantized blocks are synthesized\n"
"  directly: clipped, discretized Gaussian quants centred on the zero point, uniform sub-block\n"
"  scales (Q4_K 32..63 with mins = scales, Q6_K 64..127, Q3_K 16..31, Q2_K 8..15 with mins =\n"
"  scales, IQ4_XS +-16..31), f16 block scale d0*U(0.8,1.2) with d0\n"
"  set so the element std is sigma.  Output is byte-identical for a given seed and thread count\n"
"  does not matter.\n"
"type mix (llama.cpp llama_tensor_get_type): Q4_K_M: Q4_K, with Q6_K for output (and a tied\n"
"  token_embd) and for attn_v/ffn_down of layers i < L/8, i >= 7L/8, (i - L/8) %% 3 == 2;\n"
"  Q5_K for a fused attn_qkv (phi3); Q5_K_M likewise with Q5_K and Q6_K (qkv Q6_K);\n"
"  Q3_K_M: Q3_K, attn_v Q5_K in blocks 0-1 then Q4_K, ffn_down Q5_K for i < L/16 then Q4_K,\n"
"  attn_output and attn_qkv Q4_K; Q2_K: Q2_K, attn_v Q4_K (Q3_K when heads/kv-heads < 4),\n"
"  ffn_down and attn_output Q3_K; IQ4_XS: IQ4_XS, attn_v Q5_K when heads/kv-heads >= 4 (as\n"
"  llama-quantize makes it with an importance matrix); every quantized type but Q8_0:\n"
"  output (and a tied token_embd) Q6_K; Q8_0: all Q8_0; F16: all F16;\n"
"  MXFP4_MOE (MoE shapes only): expert stacks MXFP4, every other matrix Q8_0;\n"
"  1-D tensors (norms, biases, rope factors) and MoE routers always F32.  MoE: expert stacks and\n"
"  shared experts take their FFN role's type; 8 experts (Mixtral): attn_k, attn_v Q8_0, attn_output\n"
"  Q5_K (Q2_K Q3_K_M Q4_K_M IQ4_XS); rows not a multiple of 256 fall back as llama-quantize does\n"
"  (Q4_K->Q5_0, Q5_K->Q5_1, Q6_K->Q8_0, Q2_K/Q3_K->Q4_0, IQ4_XS->IQ4_NL).\n",
            vocab_dir(), MAX_THREADS, sl_ftype_names());
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
    int dim = -1, layers = -1, heads = -1, kv = -1, ffn = -1, ctx = -1, hd = -1;
    int experts = 0, used = 0, eff = 0, sff = 0, swa = 0, yctx = 0;   /* MoE and gpt-oss options (shapes_moe.c) */
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
        else if (!strcmp(a, "--head-dim")) hd = (int)parse_int(a, v, 2, 4096);
        else if (!strcmp(a, "--experts")) experts = (int)parse_int(a, v, 1, 4096);
        else if (!strcmp(a, "--experts-used")) used = (int)parse_int(a, v, 1, 4096);
        else if (!strcmp(a, "--expert-ffn")) eff = (int)parse_int(a, v, 1, 1 << 20);
        else if (!strcmp(a, "--shexp-ffn")) sff = (int)parse_int(a, v, 1, 1 << 20);
        else if (!strcmp(a, "--sliding-window")) swa = (int)parse_int(a, v, 1, 1 << 24);
        else if (!strcmp(a, "--yarn-orig-ctx")) yctx = (int)parse_int(a, v, 1, 1 << 24);
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
        o->s = (shape){ "custom", GA_LLAMA, dim, layers, heads, heads, ffn, 0, 2048, 1e4f, "ggml-vocab-llama-spm.gguf", 0, .head_dim = 0 };
    } else {
        int k = 0;
        while (k < GEN_N_SHAPES && strcmp(GEN_SHAPES[k].name, shape_name)) k++;
        if (k == GEN_N_SHAPES) bad_args("unknown shape '%s'", shape_name);
        o->s = GEN_SHAPES[k];
        o->tied = o->tied || o->s.tied;
        if (dim > 0 || layers > 0 || heads > 0 || kv > 0 || ffn > 0 || hd > 0 || experts || used || eff || sff)
            o->custom = true;   /* no size reference */
    }
    if ((swa || yctx) && o->s.arch != GA_GPT_OSS) bad_args("--sliding-window and --yarn-orig-ctx: only the gpt-oss shapes");
    if (swa) o->s.swa = swa;
    if (yctx) o->s.yarn_orig_ctx = yctx;
    if (dim > 0) o->s.dim = dim;
    if (layers > 0) o->s.layers = layers;
    if (heads > 0) { o->s.heads = heads; if (kv < 0 && o->custom) o->s.kv_heads = heads; }
    if (kv > 0) o->s.kv_heads = kv;
    if (ffn > 0) o->s.ffn = ffn;
    if (ctx > 0) o->s.ctx = ctx;
    if (theta > 0) o->s.theta = (float)theta;
    if (hd > 0) o->s.head_dim = hd;
    const char *moe_err = gen_moe_apply(&o->s, experts, used, eff, sff);
    if (moe_err) bad_args("%s", moe_err);

    const char *t = o->ftype_name;
    const sl_ftype_info *fi = sl_ftype_by_name(t);
    if (!fi) bad_args("unknown --type '%s' (supported: %s)", t, sl_ftype_names());
    o->ftype = fi->ftype;
    if (o->ftype == SL_FTYPE_MXFP4_MOE && o->s.n_expert == 0) bad_args("--type MXFP4_MOE: only for shapes with experts");

    const shape *s = &o->s;
    if (s->dim % s->heads) bad_args("dim %d is not a multiple of heads %d", s->dim, s->heads);
    if (gen_head_dim(s) % 2) bad_args("head dim %d must be even (RoPE rotates pairs)", gen_head_dim(s));
    if (s->heads % s->kv_heads) bad_args("heads %d is not a multiple of kv-heads %d", s->heads, s->kv_heads);
    /* Row lengths dim, ffn and heads x head_dim must split into the main type's blocks (so the dense
     * shapes need no fallback).  An MoE expert width need not: llama.cpp's fallbacks for it (Q5_0,
     * Q5_1, Q8_0, Q4_0, IQ4_NL) are synthesized, and main() refuses any type that is not. */
    int need = sl_type_get(fi->base_type)->blck;
    if (s->dim % need || s->ffn % need || (gen_head_dim(s) * s->heads) % need)
        bad_args("--type %s needs dim, ffn and heads x head_dim to be multiples of %d (got %d, %d, %d)", t, need, s->dim,
                 s->ffn, gen_head_dim(s) * s->heads);
}

/* ---- random numbers and quant tables ------------------------------------------------------ */

static float gauss_tab[65536];            /* Φ⁻¹((i + 0.5) / 65536): symmetric, tails ±4.17 */
static uint8_t q4k_tab[65536], q5k_tab[65536], q6k_tab[65536], q40_tab[65536];
static int8_t q80_tab[65536];
static double q4k_std, q5k_std, q6k_std, q40_std, q80_std;

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
    double s4k = 0, s5k = 0, s6k = 0, s40 = 0, s80 = 0;
    for (int i = 0; i < 65536; i++) {
        double z = gauss_tab[i];
        /* floor(8 + 3.6z) and floor(8 - 3.6z) sum to 15: the Q4_K table is symmetric about 7.5. */
        int a = (int)floor(8 + 3.6 * z); a = a < 0 ? 0 : a > 15 ? 15 : a;
        int b = (int)lrint(14 * z); b = b < -31 ? -31 : b > 31 ? 31 : b;      /* Q6_K: q - 32 */
        int c = (int)lrint(3.7 * z); c = c < -7 ? -7 : c > 7 ? 7 : c;         /* Q4_0: q - 8 */
        int e = (int)lrint(55 * z); e = e < -127 ? -127 : e > 127 ? 127 : e;  /* Q8_0 */
        q4k_tab[i] = (uint8_t)a; q6k_tab[i] = (uint8_t)(b + 32); q40_tab[i] = (uint8_t)(c + 8); q80_tab[i] = (int8_t)e;
        /* Q5_K: floor(16 + 7.2z) clipped to 0..31, symmetric about 15.5 like Q4_K's about 7.5 */
        int f5 = (int)floor(16 + 7.2 * z); f5 = f5 < 0 ? 0 : f5 > 31 ? 31 : f5;
        q5k_tab[i] = (uint8_t)f5;
        s5k += (f5 - 15.5) * (f5 - 15.5);
        s4k += (a - 7.5) * (a - 7.5); s6k += b * b; s40 += c * c; s80 += e * e;
    }
    q5k_std = sqrt(s5k / 65536);
    gen_lowbit_init(gauss_tab);
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
    /* a 3-D expert stack is ne1 rows for each of its ne2 experts, generated as one run of blocks */
    int64_t rows = (t->n_dims >= 2 ? t->ne[1] : 1) * (t->n_dims == 3 ? t->ne[2] : 1);
    t->nbytes = (uint64_t)sl_row_bytes(t->type, t->ne[0]) * (uint64_t)rows;
    if (t->type == SL_TYPE_F16 || t->type == SL_TYPE_F32) t->unit_bytes = sl_row_bytes(t->type, t->ne[0]);
    else t->unit_bytes = (uint64_t)ti->bytes;
    t->n_units = t->nbytes / t->unit_bytes;
    double denom = 1;
    switch (t->type) {
    case SL_TYPE_Q4_K: denom = JIT_RMS * rms_uniform_int(32, 63) * q4k_std; break;
    case SL_TYPE_Q5_K: denom = JIT_RMS * rms_uniform_int(32, 63) * q5k_std; break;
    case SL_TYPE_Q6_K: denom = JIT_RMS * rms_uniform_int(64, 127) * q6k_std; break;
    case SL_TYPE_Q4_0: denom = JIT_RMS * q40_std; break;
    case SL_TYPE_Q8_0: denom = JIT_RMS * q80_std; break;
    default: if (gen_lowbit_has(t->type)) denom = gen_lowbit_denom(t->type); break;
    }
    t->d0 = (float)(t->sigma / denom);
}

static float g_theta;   /* rope base, for rope_freqs.weight */

/* ---- block synthesis ---------------------------------------------------------------------- */

static inline void put_f16(uint8_t *p, float v) { uint16_t h = sl_f32_to_f16(v); memcpy(p, &h, 2); }

/* The K-quant super-block header of Q4_K and Q5_K: f16 d, f16 dmin = mid * d, and 8 sub-block
 * scales 32..63 from r, each used as its own min, so every sub-block is centred on the quant
 * table's midpoint `mid`; packed as ggml packs them (low 6 bits, high 2 bits of 4..7 on top). */
static void k_header(uint8_t *dst, float d, float mid, uint64_t r)
{
    uint8_t sc[8], *sb = dst + 4;
    for (int j = 0; j < 8; j++, r >>= 5) sc[j] = (uint8_t)(32 + (r & 31));
    uint16_t dh = sl_f32_to_f16(d);
    uint16_t mh = sl_f32_to_f16(mid * sl_f16_to_f32(dh));
    memcpy(dst, &dh, 2);
    memcpy(dst + 2, &mh, 2);
    for (int j = 0; j < 4; j++) {
        sb[j]     = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        sb[j + 4] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        sb[j + 8] = (uint8_t)((sc[j + 4] & 15) | (sc[j + 4] & 15) << 4);
    }
}

/* One Q5_K block: the header (midpoint 15.5), qh[32], qs[128].  Element e: sub-block pair
 * p = e / 64; low nibble of qs[32p + l] (high nibble for the pair's second sub-block), fifth bit
 * in bit 2p (2p + 1) of qh[l], l = e % 32 (ggml's dequantize_row_q5_K layout). */
static void gen_q5_k(uint8_t *dst, float d, uint64_t *s)
{
    uint8_t *qh = dst + 16, *qs = dst + 48;
    k_header(dst, d, 15.5f, next64(s));
    memset(qh, 0, 32);
    memset(qs, 0, 128);
    for (int e = 0; e < 256; e += 4) {
        uint64_t r = next64(s);
        for (int k = 0; k < 4; k++, r >>= 16) {
            const int x = e + k, pr = x / 64, hi = (x % 64) >= 32, l = x % 32;
            const uint8_t q = q5k_tab[r & 0xffff];
            qs[32 * pr + l] |= (uint8_t)((q & 15) << (4 * hi));
            qh[l] |= (uint8_t)((q >> 4) << (2 * pr + hi));
        }
    }
}

/* Fill `dst` with units [first, first + n) of tensor t.  Pure function of (seed, t, unit). */
static void gen_units(const tplan *t, uint64_t seed, uint64_t first, uint64_t n, uint8_t *dst)
{
    for (uint64_t u = first; u < first + n; u++, dst += t->unit_bytes) {
        uint64_t s = mix64(seed ^ mix64(t->key + mix64(u + 0x632be59bd9b4e019ull)));
        uint64_t r = next64(&s);
        float d = t->d0 * (0.8f + 0.4f * (float)(r >> 40) * 0x1p-24f);
        if (t->kind == K_ROPE_FREQS) {   /* not random: the factors a converter writes (one row) */
            float *f = malloc((size_t)t->ne[0] * 2 * sizeof *f);
            if (f) gen_rope_freqs((int)t->ne[0] * 2, g_theta, f);
            for (int64_t i = 0; i < t->ne[0]; i++) memcpy(dst + 4 * i, f ? &f[i] : &(float){ 1.0f }, 4);
            free(f);
            continue;
        }
        switch (t->type) {
        case SL_TYPE_F32:
            for (int64_t i = 0; i < t->ne[0]; i += 4) {
                r = next64(&s);
                for (int k = 0; k < 4 && i + k < t->ne[0]; k++, r >>= 16) {
                    float v = t->center + t->sigma * gauss_tab[r & 0xffff];
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
            k_header(dst, d, 7.5f, next64(&s));
            uint8_t *qs = dst + 16;
            for (int i = 0; i < 128; i += 2) {   /* elements are i.i.d.: nibble placement is free */
                r = next64(&s);
                qs[i]     = (uint8_t)(q4k_tab[r & 0xffff] | q4k_tab[(r >> 16) & 0xffff] << 4);
                qs[i + 1] = (uint8_t)(q4k_tab[(r >> 32) & 0xffff] | q4k_tab[r >> 48] << 4);
            }
            break;
        }
        case SL_TYPE_Q5_K:
            gen_q5_k(dst, d, &s);
            break;
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
            if (gen_lowbit_has(t->type)) gen_lowbit_block(t->type, dst, d, &s);
            else memset(dst, 0, t->unit_bytes);   /* unreachable: main() checks every tensor's type */
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

/* ---- main --------------------------------------------------------------------------------- */

/* Contract: true when gen_units() synthesizes every tensor's type; else says which tensor and false.
 * Every type the mixes and their fallbacks give is synthesized today: this keeps a new file type or
 * rule from writing zero blocks silently. */
static bool types_synthesized(const tplan *plan, int n, const char *ftype_name)
{
    for (int i = 0; i < n; i++) {
        const int ty = plan[i].type;
        if (ty != SL_TYPE_F32 && ty != SL_TYPE_F16 && ty != SL_TYPE_Q8_0 && ty != SL_TYPE_Q4_0 && ty != SL_TYPE_Q4_K &&
            ty != SL_TYPE_Q5_K && ty != SL_TYPE_Q6_K && !gen_lowbit_has(ty)) {
            fprintf(stderr, "sluice-gen: %s would be %s in a %s file, which sluice-gen does not synthesize\n", plan[i].name,
                    sl_type_name(ty), ftype_name);
            return false;
        }
    }
    return true;
}

/* Contract: "13 Q3_K, 7 Q4_K, ..." — the tensors of each quantized or F16 type, in id order. */
static void type_mix(const tplan *plan, int n, char *buf, size_t len)
{
    int count[SL_TYPE_COUNT] = { 0 };
    for (int i = 0; i < n; i++) count[plan[i].type]++;
    size_t at = 0;
    buf[0] = 0;
    for (int t = 0; t < SL_TYPE_COUNT && at < len; t++)
        if (count[t] && t != SL_TYPE_F32)
            at += (size_t)snprintf(buf + at, len - at, "%s%d %s", at ? ", " : "", count[t], sl_type_name(t));
}

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
    /* a named shape's vocabulary larger than the file's: pad the file's to it (gen_write_meta) */
    if (o.s.vocab && !o.vocab && (uint64_t)o.s.vocab > vocab) vocab = (uint64_t)o.s.vocab;
    if (o.s.vocab && (uint64_t)o.s.vocab != vocab) o.custom = true;   /* not the real shape: no size reference */

    /* gen_units() writes ggml's block layouts byte by byte: make sure the kernels agree on them. */
    static const int layout[][3] = { { SL_TYPE_Q4_0, 32, 18 }, { SL_TYPE_Q8_0, 32, 34 }, { SL_TYPE_Q5_K, 256, 176 },
                                     { SL_TYPE_Q4_K, 256, 144 }, { SL_TYPE_Q6_K, 256, 210 }, { SL_TYPE_Q2_K, 256, 84 },
                                     { SL_TYPE_Q3_K, 256, 110 }, { SL_TYPE_IQ4_XS, 256, 136 }, { SL_TYPE_Q5_0, 32, 22 },
                                     { SL_TYPE_Q5_1, 32, 24 }, { SL_TYPE_IQ4_NL, 32, 18 }, { SL_TYPE_MXFP4, 32, 17 } };
    for (int i = 0; i < (int)(sizeof layout / sizeof layout[0]); i++) {
        const sl_type_info *ti = sl_type_get(layout[i][0]);
        if (!ti || ti->blck != layout[i][1] || ti->bytes != layout[i][2]) {
            fprintf(stderr, "sluice-gen: internal error: block layout of type %d disagrees with kernels/types.c\n", layout[i][0]);
            sl_gguf_close(voc);
            return 1;
        }
    }
    init_tables();
    g_theta = o.s.theta;
    tplan *plan = calloc((size_t)gen_max_tensors(&o), sizeof *plan);
    if (!plan) { fprintf(stderr, "sluice-gen: out of memory\n"); sl_gguf_close(voc); return 1; }
    int n = gen_build_plan(&o, (int64_t)vocab, plan);
    for (int i = 0; i < n; i++) plan_units(&plan[i]);
    if (!types_synthesized(plan, n, o.ftype_name)) {
        free(plan);
        sl_gguf_close(voc);
        return 1;
    }

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
    gen_write_meta(w, &o, voc, (int64_t)vocab);
    for (int i = 0; i < n; i++) sl_gguf_writer_add_tensor(w, plan[i].name, plan[i].type, plan[i].n_dims, plan[i].ne, NULL);
    sl_gguf_close(voc);
    uint64_t size = sl_gguf_writer_total_size(w);
    if (o.dry_run) {   /* the metadata went to the temp file only to measure it */
        g_tmp = NULL;
        sl_gguf_writer_abort(w);
        for (int i = 0; i < n; i++) {
            printf("%s\t%s\t%" PRId64 "x%" PRId64, plan[i].name, sl_type_name(plan[i].type), plan[i].ne[0],
                   plan[i].n_dims >= 2 ? plan[i].ne[1] : 1);
            if (plan[i].n_dims == 3) printf("x%" PRId64, plan[i].ne[2]);
            printf("\t%" PRIu64 "\n", plan[i].nbytes);
        }
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
        char mix[256];
        type_mix(plan, n, mix, sizeof mix);
        printf("sluice-gen: wrote %s: %s %s, %d layers, dim %d, vocab %" PRIu64 ", %d tensors (%s), "
               "%" PRIu64 " bytes (%.3f GB) in %.1f s (%.0f MB/s)\n", o.out, o.s.name, o.ftype_name,
               o.s.layers, o.s.dim, vocab, n, mix, size, size / 1e9, dt, size / 1e6 / dt);
        const double ref = gen_ref_bytes(&o.s, o.ftype);
        if (!o.custom && o.tied == o.s.tied && ref > 0)
            printf("sluice-gen: llama.cpp's %s %s file is about %.3f GB: %+.2f%%\n", o.s.name, o.ftype_name,
                   ref / 1e9, 100.0 * ((double)size - ref) / ref);
    }
    free(plan);
    return 0;
}
