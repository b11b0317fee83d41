/* tests/test_gen_moe.c — sluice-gen's Mixture-of-Experts shapes (tools/sluice-gen/shapes_moe.c):
 * qwen3-30b-a3b (qwen3moe), mixtral-8x7b (llama with experts), qwen1.5-moe-a2.7b (qwen2moe),
 * gpt-oss-20b and gpt-oss-120b (gpt-oss, MXFP4_MOE).
 *
 *   - scaled down to ../shared's micro MoE models, the generated files have the tensor tables
 *     (names, order, types, 3-D shapes, offsets) and the architecture keys of the files
 *     llama.cpp's converter and llama-quantize made, in F16, Q8_0 and Q4_K_M;
 *   - the full shapes' sizes (dry run: the tensor table computed, the metadata measured) are within
 *     1% of the public files, with the type counts llama-quantize's rules give;
 *   - narrowed versions of the named shapes carry their keys, their weights have the documented
 *     statistics through the kernels' dequantizers (the 3-D stacks and llama-quantize's Q5_0, Q5_1,
 *     Q8_0, Q4_0 and IQ4_NL fallbacks too), each expert's slice is its own, and `sluice inspect`
 *     lists them;
 *   - gpt-oss: scaled down to micro-gpt-oss, the F16, Q8_0 and MXFP4_MOE tables and keys of
 *     ../shared's files; the full shapes' tensor bytes and parameter counts are llama-bench's figures
 *     for ggml-org's mxfp4 files, their file sizes within 1% of the public ones; at real widths
 *     (2 blocks, 8 experts) the MXFP4 stacks have the documented statistics and the file runs. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/types.h"
#include "loader/gguf.h"

#define STORIES SL_SHARED_DIR "/models/stories260K.gguf"

static char tdir[256];

static void setup(void)
{
    snprintf(tdir, sizeof tdir, "/tmp/sluice-test-gen-moe-XXXXXX");
    cr_assert_not_null(mkdtemp(tdir));
}

static void teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tdir);
    cr_expect_eq(system(cmd), 0);
}

TestSuite(gen_moe, .init = setup, .fini = teardown);

/* Run `prog args` (sluice-gen or sluice from the build tree); stdout into <tdir>/out.txt.  The exit
 * status. */
static int run(const char *prog, const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s/%s' %s > '%s/out.txt' 2> '%s/err.txt'", SL_BINARY_DIR, prog, args, tdir, tdir);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static sl_gguf *open_gguf(const char *path)
{
    char err[SL_ERRLEN];
    sl_gguf *g = NULL;
    cr_assert_eq(sl_gguf_open(path, &g, err, sizeof err), 0, "%s: %s", path, err);
    return g;
}

static uint32_t u32_of(const sl_gguf *g, const char *key)
{
    uint32_t v = 0;
    cr_assert(sl_gguf_get_u32(g, key, &v), "missing %s", key);
    return v;
}

/* ---- the micro MoE models of ../shared, tensor for tensor --------------------------------------- */

/* The generated file has ref's tensor table (names in order, types, dims, sizes, data offsets) and
 * every one of ref's <arch>.* keys with the same value (u32 and f32 keys: all the converter writes). */
static void assert_same_layout(const char *ref_path, const char *gen_path, const char *arch)
{
    sl_gguf *r = open_gguf(ref_path), *g = open_gguf(gen_path);
    cr_assert_eq(sl_gguf_n_tensors(g), sl_gguf_n_tensors(r), "%s: tensor count", ref_path);
    for (int64_t i = 0; i < sl_gguf_n_tensors(r); i++) {
        const sl_gguf_tensor *a = sl_gguf_tensor_at(r, i), *b = sl_gguf_tensor_at(g, i);
        cr_assert(a->name.len == b->name.len && !memcmp(a->name.ptr, b->name.ptr, a->name.len),
                  "%s: tensor %" PRId64 " is %.*s, generated %.*s", ref_path, i, (int)a->name.len, a->name.ptr,
                  (int)b->name.len, b->name.ptr);
        cr_assert_eq(a->type, b->type, "%s: %.*s type %s, generated %s", ref_path, (int)a->name.len, a->name.ptr,
                     sl_type_name(a->type), sl_type_name(b->type));
        cr_assert_eq(a->n_dims, b->n_dims, "%s: %.*s dims", ref_path, (int)a->name.len, a->name.ptr);
        for (int d = 0; d < a->n_dims; d++) cr_assert_eq(a->ne[d], b->ne[d]);
        cr_assert_eq(a->nbytes, b->nbytes);
        cr_assert_eq(a->offset - sl_gguf_data_offset(r), b->offset - sl_gguf_data_offset(g));
    }
    const size_t al = strlen(arch);
    for (int64_t i = 0; i < sl_gguf_n_kv(r); i++) {
        sl_str k = sl_gguf_key(r, i);
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)k.len, k.ptr);
        const bool mine = !strncmp(key, arch, al) && key[al] == '.';
        if (!mine && strcmp(key, "general.file_type") && strcmp(key, "general.architecture")) continue;
        cr_assert_geq(sl_gguf_find_key(g, key), 0, "%s: generated file lacks %s", ref_path, key);
        uint32_t ur, ug;
        float fr, fg;
        if (sl_gguf_get_u32(r, key, &ur)) cr_assert(sl_gguf_get_u32(g, key, &ug) && ur == ug, "%s: %s", ref_path, key);
        else if (sl_gguf_get_f32(r, key, &fr)) cr_assert(sl_gguf_get_f32(g, key, &fg) && fr == fg, "%s: %s", ref_path, key);
    }
    sl_gguf_close(r);
    sl_gguf_close(g);
}

/* Each micro model as the named shape it scales down (../shared/README.md "Set 5" gives the sizes). */
Test(gen_moe, layout_matches_llama_quantize, .timeout = 120)
{
    static const struct { const char *model, *arch, *args, *quant; } micro[] = {
        { "micro-qwen3moe", "qwen3moe", "--shape qwen3-30b-a3b --dim 256 --layers 2 --heads 4 --kv-heads 2 --head-dim 128 "
                                        "--experts 16 --experts-used 4 --expert-ffn 128 --ffn 768", "Q4_K_M" },
        { "micro-mixtral", "llama", "--shape mixtral-8x7b --dim 256 --layers 2 --heads 4 --kv-heads 2 --ffn 256", "Q4_K_M" },
        { "micro-qwen2moe", "qwen2moe", "--shape qwen1.5-moe-a2.7b --dim 256 --layers 2 --heads 4 --kv-heads 2 "
                                        "--experts 8 --experts-used 4 --expert-ffn 128 --shexp-ffn 512 --ffn 512", "Q4_K_M" },
        { "micro-gpt-oss", "gpt-oss", "--shape gpt-oss-20b --dim 256 --layers 2 --heads 4 --kv-heads 2 --head-dim 64 "
                                      "--experts 8 --experts-used 4 --expert-ffn 256 --ffn 256 --sliding-window 32 "
                                      "--yarn-orig-ctx 256", "MXFP4_MOE" },
    };
    for (size_t i = 0; i < sizeof micro / sizeof *micro; i++)
        for (int t = 0; t < 3; t++) {
            const char *types[] = { "F16", "Q8_0", micro[i].quant };
            char args[1024], out[300], ref[300];
            snprintf(out, sizeof out, "%s/%s.%s.gguf", tdir, micro[i].model, types[t]);
            snprintf(ref, sizeof ref, SL_SHARED_DIR "/models/%s.%s.gguf", micro[i].model, types[t]);
            snprintf(args, sizeof args, "%s --type %s --vocab '%s' --out '%s' --quiet", micro[i].args, types[t], STORIES, out);
            cr_assert_eq(run("sluice-gen", args), 0, "%s", args);
            assert_same_layout(ref, out, micro[i].arch);
            unlink(out);
        }
}

/* ---- the full shapes: sizes and type mixes ------------------------------------------------------ */

/* Dry run of `shape` in `type`: tensors of each type into count, the file size into *total, the
 * tensor count returned. */
static int dry_run(const char *shape, const char *type, int count[SL_TYPE_COUNT], unsigned long long *total)
{
    char args[512], path[300];
    snprintf(args, sizeof args, "--shape %s --type %s --out '%s/x.gguf' --dry-run", shape, type, tdir);
    cr_assert_eq(run("sluice-gen", args), 0, "%s %s", shape, type);
    snprintf(path, sizeof path, "%s/out.txt", tdir);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    memset(count, 0, SL_TYPE_COUNT * sizeof *count);
    char line[256], name[128], tname[16];
    int rows = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "total\t%llu", total) == 1) break;
        cr_assert_eq(sscanf(line, "%127s\t%15s", name, tname), 2, "%s", line);
        int t = 0;
        while (t < SL_TYPE_COUNT && strcmp(sl_type_name(t), tname)) t++;
        cr_assert_lt(t, SL_TYPE_COUNT, "%s", line);
        count[t]++;
        rows++;
    }
    fclose(f);
    return rows;
}

/* Public sizes: Hugging Face listings, 3 digits (sources in tools/sluice-gen/plan.c).  Type counts by
 * hand from llama.cpp's rules; use_more_bits(i, n) = i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2 picks
 * 24 of 48 blocks, 16 of 32, 12 of 24.
 *   qwen3-30b-a3b Q4_K_M: Q6_K for attn_v and ffn_down_exps of those 24 blocks and the output
 *     (49); everything else Q4_K (q k o gate up of every block, v and down of the other 24, token_embd).
 *   mixtral-8x7b Q4_K_M (8 experts): attn_k and attn_v Q8_0 (64), attn_output Q5_K (32), ffn_down_exps
 *     Q6_K in 16 blocks + output (17); q, gate, up, 16 downs and token_embd Q4_K.
 *     Q3_K_M: ffn_down_exps Q5_K in blocks < 32/16 (34 Q5_K with attn_output).  Q4_0: output Q6_K.
 *   qwen1.5-moe Q4_K_M: 1408-wide down rows fall back, Q6_K -> Q8_0 (12), Q4_K -> Q5_0 (12); Q6_K for
 *     attn_v and ffn_down_shexp in 12 blocks + output (25); Q4_K the 7 others of every block, v and
 *     down_shexp of 12, token_embd (193).  Q3_K_M: block 0's down_exps Q5_K -> Q5_1, the others'
 *     Q4_K -> Q5_0 (23).  Q2_K: down_exps Q3_K -> Q4_0. */
Test(gen_moe, full_shape_sizes_and_mixes, .timeout = 60)
{
    static const struct {
        const char *shape, *type;
        double bytes;
        int tensors, q4k, q5k, q6k, q8, q50;
    } want[] = {
        { "qwen3-30b-a3b", "Q4_K_M", 18.6e9, 3 + 48 * 12, 48 * 5 + 2 * 24 + 1, 0, 49, 0, 0 },
        { "qwen3-30b-a3b", "Q8_0", 32.48e9, 3 + 48 * 12, 0, 0, 0, 48 * 7 + 2, 0 },
        { "qwen3-30b-a3b", "Q6_K", 25.10e9, 3 + 48 * 12, 0, 0, 48 * 7 + 2, 0, 0 },
        { "qwen3-30b-a3b", "Q5_K_M", 21.74e9, 3 + 48 * 12, 0, 48 * 5 + 2 * 24 + 1, 49, 0, 0 },
        { "mixtral-8x7b", "Q4_K_M", 28.4e9, 3 + 32 * 10, 32 * 3 + 16 + 1, 32, 17, 64, 0 },
        { "mixtral-8x7b", "Q8_0", 49.62e9, 3 + 32 * 10, 0, 0, 0, 32 * 7 + 2, 0 },
        { "mixtral-8x7b", "Q4_0", 26.4e9, 3 + 32 * 10, 0, 0, 1, 64, 0 },
        { "mixtral-8x7b", "Q3_K_M", 22.5e9, 3 + 32 * 10, 30, 34, 1, 64, 0 },
        { "mixtral-8x7b", "Q2_K", 17.3e9, 3 + 32 * 10, 0, 32, 1, 64, 0 },
        { "qwen1.5-moe-a2.7b", "Q4_K_M", 9.5e9, 3 + 24 * 17, 24 * 7 + 24 + 1, 0, 25, 12, 12 },
        { "qwen1.5-moe-a2.7b", "Q3_K_M", 7.44e9, 3 + 24 * 17, -1, -1, 1, 0, 23 },
        { "qwen1.5-moe-a2.7b", "Q2_K", 5.89e9, 3 + 24 * 17, -1, -1, 1, 0, 0 },
        { "qwen1.5-moe-a2.7b", "Q4_0", 8.15e9, 3 + 24 * 17, 0, 0, 1, 0, 0 },
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        int c[SL_TYPE_COUNT];
        unsigned long long total = 0;
        const int rows = dry_run(want[i].shape, want[i].type, c, &total);
        fprintf(stderr, "sluice-gen %-17s %-6s %llu bytes (%+.2f%% vs the public file): Q4_K %d Q5_K %d Q6_K %d Q8_0 %d "
                "Q5_0 %d Q5_1 %d Q4_0 %d\n", want[i].shape, want[i].type, total, 100 * (total / want[i].bytes - 1),
                c[SL_TYPE_Q4_K], c[SL_TYPE_Q5_K], c[SL_TYPE_Q6_K], c[SL_TYPE_Q8_0], c[SL_TYPE_Q5_0], c[SL_TYPE_Q5_1],
                c[SL_TYPE_Q4_0]);
        cr_assert_eq(rows, want[i].tensors, "%s %s tensor count", want[i].shape, want[i].type);
        cr_assert(fabs(total / want[i].bytes - 1) < 0.01, "%s %s: %llu bytes vs %.0f", want[i].shape, want[i].type, total,
                  want[i].bytes);
        cr_assert(want[i].q4k < 0 || c[SL_TYPE_Q4_K] == want[i].q4k, "%s %s Q4_K", want[i].shape, want[i].type);
        cr_assert(want[i].q5k < 0 || c[SL_TYPE_Q5_K] == want[i].q5k, "%s %s Q5_K", want[i].shape, want[i].type);
        cr_assert_eq(c[SL_TYPE_Q6_K], want[i].q6k, "%s %s Q6_K", want[i].shape, want[i].type);
        cr_assert_eq(c[SL_TYPE_Q8_0], want[i].q8, "%s %s Q8_0", want[i].shape, want[i].type);
        cr_assert_eq(c[SL_TYPE_Q5_0], want[i].q50, "%s %s Q5_0", want[i].shape, want[i].type);
    }
}

/* ---- narrowed named shapes: keys, weights, expert slices, inspect ---------------------------------- */

/* Target std (sluice-gen --help): 1/sqrt(ne0) for matrices and routers, 1 for token_embd,
 * 1/sqrt(dim) for output. */
static double target_sigma(const char *name, int64_t ne0, int64_t dim)
{
    if (!strcmp(name, "token_embd.weight")) return 1.0;
    if (!strcmp(name, "output.weight")) return 1.0 / sqrt((double)dim);
    return 1.0 / sqrt((double)ne0);
}

/* Every matrix of the file (the 3-D stacks whole), through the kernels' dequantizers: mean square
 * σ² within 5% (for the tensors of 2^15 elements and more: block-scale jitter and f16 rounding stay
 * well inside; the small routers are plain F32 draws), |mean| < 0.03σ, and the rms of 16-element group means σ/4 within 25% (a misplaced high
 * bit or zero point shifts whole groups).  Norms pooled: mean 1 ± 0.02, std 0.1 ± 15%.  Each
 * expert stack: its nbytes are ne2 equal slices, and no two experts' slices are the same. */
static void check_weights(const char *path, int64_t dim)
{
    char err[SL_ERRLEN];
    sl_gguf *g = open_gguf(path);
    double nsum = 0, nsum2 = 0;
    long nn = 0;
    for (int64_t i = 0; i < sl_gguf_n_tensors(g); i++) {
        const sl_gguf_tensor *t = sl_gguf_tensor_at(g, i);
        char name[80];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        const bool norm = strstr(name, "norm") != NULL;
        if (!norm && (t->n_dims < 2 || t->ne[1] == 1 || strstr(name, ".bias"))) continue;   /* biases, the shared-expert gate */
        int64_t n = 1;
        for (int d = 0; d < t->n_dims; d++) n *= t->ne[d];
        const sl_type_info *ti = sl_type_get(t->type);
        cr_assert(ti && ti->dequant, "%s: no dequantizer for %s", name, sl_type_name(t->type));
        uint8_t *raw = malloc(t->nbytes);
        FILE *f = fopen(path, "rb");
        cr_assert(f && fseeko(f, (off_t)t->offset, SEEK_SET) == 0 && fread(raw, 1, t->nbytes, f) == t->nbytes, "%s", name);
        fclose(f);
        if (t->n_dims == 3) {
            const uint64_t slice = t->nbytes / (uint64_t)t->ne[2];
            cr_assert_eq(slice * (uint64_t)t->ne[2], t->nbytes, "%s: expert slices", name);
            cr_assert_eq(slice, sl_row_bytes(t->type, t->ne[0]) * (uint64_t)t->ne[1], "%s: expert slice size", name);
            for (int64_t e = 1; e < t->ne[2]; e++)
                cr_assert_neq(memcmp(raw, raw + e * slice, slice), 0, "%s: expert %" PRId64 " repeats expert 0", name, e);
        }
        float *x = malloc((size_t)n * sizeof *x);
        ti->dequant(raw, x, n);
        free(raw);
        if (norm) {
            for (int64_t k = 0; k < n; k++) { nsum += x[k]; nsum2 += (double)x[k] * x[k]; }
            nn += n;
            free(x);
            continue;
        }
        double s = 0, s2 = 0, g2 = 0;
        for (int64_t k = 0; k < n; k += 16) {
            double gs = 0;
            for (int j = 0; j < 16; j++) { double v = x[k + j]; s += v; s2 += v * v; gs += v; }
            g2 += (gs / 16) * (gs / 16);
        }
        free(x);
        const double sig = target_sigma(name, t->ne[0], dim), mean = s / n, ms = s2 / n, grms = sqrt(g2 / (n / 16.0));
        cr_assert(isfinite(ms), "%s %s: non-finite values", path, name);
        if (n < 32768) continue;   /* small routers: plain F32 draws, too few for these bounds */
        cr_assert(fabs(ms / (sig * sig) - 1) < 0.05, "%s %s (%s): rms %g, target %g", path, name,
                  sl_type_name(t->type), sqrt(ms), sig);
        cr_assert(fabs(mean) < 0.03 * sig, "%s %s: mean %g (std %g)", path, name, mean, sig);
        cr_assert(fabs(grms / (sig / 4) - 1) < 0.25, "%s %s (%s): rms of 16-group means %g, expected %g", path, name,
                  sl_type_name(t->type), grms, sig / 4);
    }
    const double nm = nsum / nn, nsd = sqrt(nsum2 / nn - nm * nm);
    cr_assert(fabs(nm - 1) < 0.02 && fabs(nsd / 0.1 - 1) < 0.15, "%s norms: mean %g std %g", path, nm, nsd);
    sl_gguf_close(g);
    (void)err;
}

/* `sluice inspect` reads the file (it lists any well-formed GGUF, whether or not sluice runs it). */
static void check_inspect(const char *path, const char *arch)
{
    char args[512], p[300], want[64];
    snprintf(args, sizeof args, "inspect '%s'", path);
    cr_assert_eq(run("sluice", args), 0, "sluice inspect %s", path);
    snprintf(p, sizeof p, "%s/out.txt", tdir);
    FILE *f = fopen(p, "r");
    cr_assert_not_null(f);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    snprintf(want, sizeof want, "architecture %s", arch);
    cr_assert(strstr(text, want) && strstr(text, "blk.0.ffn_down_exps.weight"), "%s:\n%s", path, text);
    /* and sluice runs it: inspect names the experts, a streamed run decodes */
    cr_assert(strstr(text, "experts      ") && !strstr(text, "cannot run"), "%s:\n%s", path, text);
    snprintf(args, sizeof args, "run -m '%s' -p Once -n 3 --temp 0 -c 64 --stream", path);
    cr_assert_eq(run("sluice", args), 0, "sluice %s", args);
}

/* The named shapes with fewer blocks and experts (qwen3-30b-a3b and mixtral-8x7b keep their widths
 * where a test file allows), a 512-token vocabulary: the keys say the shape, the expert stacks are
 * 3-D with ne2 = expert_count, and the weights pass check_weights. */
Test(gen_moe, narrowed_shapes_keys_weights_inspect, .timeout = 300)
{
    static const struct {
        const char *shape, *arch, *args, *type;
        uint32_t dim, heads, kv, ffn, experts, used, eff, sff;
    } sh[] = {
        { "qwen3-30b-a3b", "qwen3moe", "--layers 2 --experts 4 --experts-used 2", "Q4_K_M", 2048, 32, 4, 6144, 4, 2, 768, 0 },
        { "mixtral-8x7b", "llama", "--layers 2 --dim 512 --heads 8 --kv-heads 2 --ffn 512", "Q4_K_M", 512, 8, 2, 512, 8, 2,
          512, 0 },
        { "qwen1.5-moe-a2.7b", "qwen2moe", "--layers 2 --dim 256 --heads 4 --kv-heads 4 --experts 2 --experts-used 1 --ffn 512 "
          "--shexp-ffn 512", "Q4_K_M", 256, 4, 4, 512, 2, 1, 1408, 512 },
        /* llama-quantize's other fallbacks for 1408-wide rows: Q5_K -> Q5_1 (block 0 of 16 under Q3_K_M,
         * the others Q4_K -> Q5_0), Q3_K -> Q4_0 (Q2_K), IQ4_XS -> IQ4_NL */
        { "qwen1.5-moe-a2.7b", "qwen2moe", "--layers 16 --dim 256 --heads 4 --kv-heads 4 --experts 2 --experts-used 1 "
          "--ffn 512 --shexp-ffn 512", "Q3_K_M", 256, 4, 4, 512, 2, 1, 1408, 512 },
        { "qwen1.5-moe-a2.7b", "qwen2moe", "--layers 2 --dim 256 --heads 4 --kv-heads 4 --experts 2 --experts-used 1 --ffn 512 "
          "--shexp-ffn 512", "Q2_K", 256, 4, 4, 512, 2, 1, 1408, 512 },
        { "qwen1.5-moe-a2.7b", "qwen2moe", "--layers 2 --dim 256 --heads 4 --kv-heads 4 --experts 2 --experts-used 1 --ffn 512 "
          "--shexp-ffn 512", "IQ4_XS", 256, 4, 4, 512, 2, 1, 1408, 512 },
    };
    static const int down_type[] = { -1, -1, SL_TYPE_Q5_0, SL_TYPE_Q5_1, SL_TYPE_Q4_0, SL_TYPE_IQ4_NL };   /* blk.0 */
    for (size_t i = 0; i < sizeof sh / sizeof *sh; i++) {
        char args[1024], out[300], key[96];
        snprintf(out, sizeof out, "%s/%s.%s.gguf", tdir, sh[i].shape, sh[i].type);
        snprintf(args, sizeof args, "--shape %s %s --type %s --vocab '%s' --out '%s' --quiet", sh[i].shape, sh[i].args,
                 sh[i].type, STORIES, out);
        cr_assert_eq(run("sluice-gen", args), 0, "%s", args);
        sl_gguf *g = open_gguf(out);
        const char *a = sh[i].arch;
#define KEY(k) (snprintf(key, sizeof key, "%s." k, a), u32_of(g, key))
        cr_assert(KEY("embedding_length") == sh[i].dim && KEY("attention.head_count") == sh[i].heads &&
                  KEY("attention.head_count_kv") == sh[i].kv && KEY("feed_forward_length") == sh[i].ffn &&
                  KEY("expert_count") == sh[i].experts && KEY("expert_used_count") == sh[i].used, "%s keys", sh[i].shape);
        snprintf(key, sizeof key, "%s.expert_feed_forward_length", a);
        cr_assert_eq(sl_gguf_find_key(g, key) >= 0, strcmp(a, "llama") != 0, "%s: %s", sh[i].shape, key);
        if (strcmp(a, "llama")) cr_assert_eq(KEY("expert_feed_forward_length"), sh[i].eff);
        if (sh[i].sff) cr_assert_eq(KEY("expert_shared_feed_forward_length"), sh[i].sff);
        if (!strcmp(a, "qwen3moe")) cr_assert_eq(KEY("attention.key_length"), 128);
#undef KEY
        const sl_gguf_tensor *up = sl_gguf_find_tensor(g, "blk.1.ffn_up_exps.weight");
        const sl_gguf_tensor *down = sl_gguf_find_tensor(g, "blk.0.ffn_down_exps.weight");
        const sl_gguf_tensor *router = sl_gguf_find_tensor(g, "blk.0.ffn_gate_inp.weight");
        cr_assert(up && down && router, "%s: expert tensors", sh[i].shape);
        cr_assert(up->n_dims == 3 && up->ne[0] == sh[i].dim && up->ne[1] == sh[i].eff && up->ne[2] == sh[i].experts,
                  "%s: ffn_up_exps shape", sh[i].shape);
        cr_assert(down->n_dims == 3 && down->ne[0] == sh[i].eff && down->ne[1] == sh[i].dim && down->ne[2] == sh[i].experts,
                  "%s: ffn_down_exps shape", sh[i].shape);
        cr_assert(router->type == SL_TYPE_F32 && router->ne[0] == sh[i].dim && router->ne[1] == sh[i].experts);
        if (down_type[i] >= 0)
            cr_assert_eq(down->type, down_type[i], "%s %s: blk.0.ffn_down_exps is %s", sh[i].shape, sh[i].type,
                         sl_type_name(down->type));
        if (sh[i].sff) {
            const sl_gguf_tensor *sg = sl_gguf_find_tensor(g, "blk.0.ffn_gate_inp_shexp.weight");
            cr_assert(sg && sg->type == SL_TYPE_F32 && sg->n_dims == 1 && sg->ne[0] == sh[i].dim, "shared-expert gate");
            cr_assert_not_null(sl_gguf_find_tensor(g, "blk.0.ffn_down_shexp.weight"));
        }
        sl_gguf_close(g);
        check_weights(out, sh[i].dim);
        check_inspect(out, a);
        unlink(out);
    }
}

/* MoE options that make no sense are usage errors (exit 2, one line saying why), not files. */
Test(gen_moe, option_errors)
{
    static const struct { const char *args, *why; } bad[] = {
        { "--shape qwen3-8b --experts 4", "only llama (Mixtral) and the MoE shapes have experts" },
        { "--shape mixtral-8x7b --experts-used 9", "more than --experts" },
        { "--shape qwen3-30b-a3b --shexp-ffn 512", "only qwen2moe has a shared expert" },
        { "--shape mixtral-8x7b --expert-ffn 512", "a Mixtral's experts are --ffn wide" },
        { "--shape llama3-8b --experts-used 2", "need --experts" },
        { "--shape qwen3-30b-a3b --sliding-window 64", "only the gpt-oss shapes" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char args[512], p[300], line[512] = "";
        snprintf(args, sizeof args, "%s --type Q4_K_M --out '%s/bad.gguf' --dry-run", bad[i].args, tdir);
        cr_assert_eq(run("sluice-gen", args), 2, "%s", args);
        snprintf(p, sizeof p, "%s/err.txt", tdir);
        FILE *f = fopen(p, "r");
        cr_assert_not_null(f);
        cr_assert_not_null(fgets(line, sizeof line, f));
        fclose(f);
        cr_assert(strstr(line, bad[i].why), "%s: %s", args, line);
    }
    char args[512];   /* a llama with experts is a Mixtral: 8 experts, the 8-expert rules */
    snprintf(args, sizeof args, "--shape custom --dim 256 --layers 2 --heads 4 --kv-heads 2 --ffn 256 --experts 8 --type Q4_K_M "
             "--out '%s/c.gguf' --dry-run", tdir);
    cr_assert_eq(run("sluice-gen", args), 0, "%s", args);
    char p[300], line[256];
    snprintf(p, sizeof p, "%s/out.txt", tdir);
    FILE *f = fopen(p, "r");
    cr_assert_not_null(f);
    int q8 = 0, stacks = 0;
    while (fgets(line, sizeof line, f)) {
        q8 += strstr(line, "\tQ8_0\t") != NULL;
        stacks += strstr(line, "_exps.weight\t") && strstr(line, "x8\t");
    }
    fclose(f);
    cr_assert(q8 == 4 && stacks == 6, "custom llama with 8 experts: %d Q8_0 (attn_k, attn_v), %d stacks", q8, stacks);
}

/* ---- gpt-oss: the full shapes against ggml-org's files, the real widths run ------------------------ */

/* Dry run of `shape` MXFP4_MOE: the file size, the tensor bytes and the parameter count (every
 * element of every tensor, as llama-bench counts them), the tensors of each type; the tensor count. */
static int dry_run_sums(const char *shape, unsigned long long *total, double *bytes, double *params,
                        int count[SL_TYPE_COUNT])
{
    char args[512], path[300], line[512], name[128], tname[16], dims[64];
    snprintf(args, sizeof args, "--shape %s --type MXFP4_MOE --out '%s/x.gguf' --dry-run", shape, tdir);
    cr_assert_eq(run("sluice-gen", args), 0, "%s", args);
    snprintf(path, sizeof path, "%s/out.txt", tdir);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    memset(count, 0, SL_TYPE_COUNT * sizeof *count);
    *bytes = *params = 0;
    int rows = 0;
    unsigned long long nb;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "total\t%llu", total) == 1) break;
        cr_assert_eq(sscanf(line, "%127s\t%15s\t%63s\t%llu", name, tname, dims, &nb), 4, "%s", line);
        double n = 1;
        for (char *p = dims, *end; *p; p = *end ? end + 1 : end) n *= (double)strtoll(p, &end, 10);
        int t = 0;
        while (t < SL_TYPE_COUNT && strcmp(sl_type_name(t), tname)) t++;
        cr_assert_lt(t, SL_TYPE_COUNT, "%s", line);
        count[t]++;
        *bytes += (double)nb;
        *params += n;
        rows++;
    }
    fclose(f);
    return rows;
}

/* Public figures: the Hugging Face listings (12.1 GB; 63.4 GB for the three shards) and llama-bench's
 * "size" and "params" columns for ggml-org's mxfp4 files (gpt-oss 20B MXFP4 MoE 11.27 GiB 20.91 B;
 * gpt-oss ?B MXFP4 MoE 59.02 GiB 116.83 B), which count the tensors only (tools/sluice-gen/plan.c).
 * 19 tensors a block: 3 MXFP4 stacks, 4 Q8_0 attention matrices, 12 F32 (norms, biases, sinks,
 * router); token_embd and output Q8_0, output_norm F32. */
Test(gen_moe, gpt_oss_full_shape_sizes, .timeout = 60)
{
    static const struct { const char *shape; double file, gib, bparams; int layers; } want[] = {
        { "gpt-oss-20b", 12.1e9, 11.27, 20.91, 24 },
        { "gpt-oss-120b", 63.4e9, 59.02, 116.83, 36 },
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        int c[SL_TYPE_COUNT], L = want[i].layers;
        unsigned long long total = 0;
        double bytes, params;
        const int rows = dry_run_sums(want[i].shape, &total, &bytes, &params, c);
        fprintf(stderr, "sluice-gen %s MXFP4_MOE: %llu bytes (%+.2f%% vs %.1f GB), tensors %.4f GiB, %.4f B params, "
                "%d MXFP4 %d Q8_0 %d F32\n", want[i].shape, total, 100 * (total / want[i].file - 1), want[i].file / 1e9,
                bytes / 1073741824.0, params / 1e9, c[SL_TYPE_MXFP4], c[SL_TYPE_Q8_0], c[SL_TYPE_F32]);
        cr_assert(fabs(total / want[i].file - 1) < 0.01, "%s: %llu bytes vs %.0f", want[i].shape, total, want[i].file);
        cr_assert(fabs(bytes / 1073741824.0 - want[i].gib) < 0.005, "%s: tensors %.4f GiB", want[i].shape, bytes / 1073741824.0);
        cr_assert(fabs(params / 1e9 - want[i].bparams) < 0.005, "%s: %.4f B params", want[i].shape, params / 1e9);
        cr_assert_eq(rows, 3 + 19 * L);
        cr_assert(c[SL_TYPE_MXFP4] == 3 * L && c[SL_TYPE_Q8_0] == 4 * L + 2 && c[SL_TYPE_F32] == 12 * L + 1, "%s mix",
                  want[i].shape);
    }
}

/* One tensor's type and shape (ne1, ne2 0: fewer dims). */
static void expect_tensor(const sl_gguf *g, const char *name, int type, int64_t ne0, int64_t ne1, int64_t ne2)
{
    const sl_gguf_tensor *t = sl_gguf_find_tensor(g, name);
    cr_assert_not_null(t, "missing %s", name);
    const int dims = ne2 ? 3 : ne1 ? 2 : 1;
    cr_assert(t->type == type && t->n_dims == dims && t->ne[0] == ne0 && (dims < 2 || t->ne[1] == ne1) &&
              (dims < 3 || t->ne[2] == ne2), "%s: %s, %d dims, %" PRId64 " x %" PRId64, name, sl_type_name(t->type),
              t->n_dims, t->ne[0], t->n_dims > 1 ? t->ne[1] : 1);
}

/* gpt-oss's keys at real widths (u32 and f32, and the YaRN type). */
static void expect_gpt_oss_keys(const sl_gguf *g)
{
    static const struct { const char *key; uint32_t v; } u[] = {
        { "gpt-oss.embedding_length", 2880 }, { "gpt-oss.block_count", 2 }, { "gpt-oss.attention.head_count", 64 },
        { "gpt-oss.attention.head_count_kv", 8 }, { "gpt-oss.attention.key_length", 64 },
        { "gpt-oss.attention.value_length", 64 }, { "gpt-oss.feed_forward_length", 2880 },
        { "gpt-oss.expert_feed_forward_length", 2880 }, { "gpt-oss.expert_count", 8 }, { "gpt-oss.expert_used_count", 4 },
        { "gpt-oss.attention.sliding_window", 128 }, { "gpt-oss.rope.scaling.original_context_length", 4096 },
        { "gpt-oss.context_length", 131072 }, { "general.file_type", 38 },
    };
    for (size_t i = 0; i < sizeof u / sizeof *u; i++) cr_assert_eq(u32_of(g, u[i].key), u[i].v, "%s", u[i].key);
    static const struct { const char *key; float v; } f[] = {
        { "gpt-oss.rope.freq_base", 150000 }, { "gpt-oss.rope.scaling.factor", 32 },
        { "gpt-oss.rope.scaling.yarn_beta_fast", 32 }, { "gpt-oss.rope.scaling.yarn_beta_slow", 1 },
        { "gpt-oss.attention.layer_norm_rms_epsilon", 1e-5f },
    };
    for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
        float v = 0;
        cr_assert(sl_gguf_get_f32(g, f[i].key, &v) && v == f[i].v, "%s = %g", f[i].key, v);
    }
    sl_str yarn;
    cr_assert(sl_gguf_get_str(g, "gpt-oss.rope.scaling.type", &yarn) && yarn.len == 4 && !memcmp(yarn.ptr, "yarn", 4));
}

/* The F32 biases: mean 0, std 0.1 (pooled over the block's biases); and the exponents of an MXFP4
 * stack vary from block to block around the one of the target std. */
static void check_biases_and_exponents(const char *path)
{
    sl_gguf *g = open_gguf(path);
    double s = 0, s2 = 0;
    long n = 0;
    int e_min = 255, e_max = 0;
    for (int64_t i = 0; i < sl_gguf_n_tensors(g); i++) {
        const sl_gguf_tensor *t = sl_gguf_tensor_at(g, i);
        const bool bias = t->name.len > 5 && !memcmp(t->name.ptr + t->name.len - 5, ".bias", 5);
        if (!bias && t->type != SL_TYPE_MXFP4) continue;
        uint8_t *raw = malloc(t->nbytes);
        FILE *f = fopen(path, "rb");
        cr_assert(f && fseeko(f, (off_t)t->offset, SEEK_SET) == 0 && fread(raw, 1, t->nbytes, f) == t->nbytes);
        fclose(f);
        if (bias) {
            for (uint64_t k = 0; k < t->nbytes / 4; k++) { float v; memcpy(&v, raw + 4 * k, 4); s += v; s2 += (double)v * v; }
            n += (long)(t->nbytes / 4);
        } else {
            for (uint64_t b = 0; b < t->nbytes; b += 17) { e_min = raw[b] < e_min ? raw[b] : e_min; e_max = raw[b] > e_max ? raw[b] : e_max; }
        }
        free(raw);
    }
    sl_gguf_close(g);
    const double m = s / n, sd = sqrt(s2 / n - m * m);
    cr_assert(fabs(m) < 0.01 && fabs(sd / 0.1 - 1) < 0.1, "biases: mean %g std %g", m, sd);
    /* sigma 1/sqrt(2880) = 2^-5.8 over an rms code of ~4.7 (doubled units): 2^(e-128) near 2^-8 */
    cr_assert(e_min >= 118 && e_max <= 122 && e_max > e_min, "MXFP4 exponents %d..%d", e_min, e_max);
}

/* gpt-oss-20b at its real widths with 2 blocks and 8 experts (4 used), the test vocabulary: the keys,
 * tensor types and shapes of ggml-org's file, the weights' statistics through the kernels' MXFP4 and
 * Q8_0 dequantizers, and `sluice inspect` / `sluice run` take it (the engine runs gpt-oss). */
Test(gen_moe, gpt_oss_real_widths_run, .timeout = 120)
{
    char out[300], args[1024];
    snprintf(out, sizeof out, "%s/gpt-oss.gguf", tdir);
    snprintf(args, sizeof args, "--shape gpt-oss-20b --layers 2 --experts 8 --experts-used 4 --type MXFP4_MOE --vocab '%s' "
             "--out '%s' --quiet", STORIES, out);
    cr_assert_eq(run("sluice-gen", args), 0, "%s", args);
    sl_gguf *g = open_gguf(out);
    expect_gpt_oss_keys(g);
    expect_tensor(g, "token_embd.weight", SL_TYPE_Q8_0, 2880, 512, 0);
    expect_tensor(g, "output.weight", SL_TYPE_Q8_0, 2880, 512, 0);
    expect_tensor(g, "blk.1.attn_q.weight", SL_TYPE_Q8_0, 2880, 4096, 0);
    expect_tensor(g, "blk.1.attn_k.weight", SL_TYPE_Q8_0, 2880, 512, 0);
    expect_tensor(g, "blk.1.attn_output.weight", SL_TYPE_Q8_0, 4096, 2880, 0);
    expect_tensor(g, "blk.1.attn_output.bias", SL_TYPE_F32, 2880, 0, 0);
    expect_tensor(g, "blk.1.attn_sinks.weight", SL_TYPE_F32, 64, 0, 0);
    expect_tensor(g, "blk.1.post_attention_norm.weight", SL_TYPE_F32, 2880, 0, 0);
    expect_tensor(g, "blk.1.ffn_gate_inp.weight", SL_TYPE_F32, 2880, 8, 0);
    expect_tensor(g, "blk.1.ffn_gate_inp.bias", SL_TYPE_F32, 8, 0, 0);
    expect_tensor(g, "blk.1.ffn_gate_exps.weight", SL_TYPE_MXFP4, 2880, 2880, 8);
    expect_tensor(g, "blk.1.ffn_gate_exps.bias", SL_TYPE_F32, 2880, 8, 0);
    expect_tensor(g, "blk.1.ffn_down_exps.weight", SL_TYPE_MXFP4, 2880, 2880, 8);
    expect_tensor(g, "blk.1.ffn_down_exps.bias", SL_TYPE_F32, 2880, 8, 0);
    cr_assert_null(sl_gguf_find_tensor(g, "blk.0.ffn_norm.weight"), "gpt-oss has no ffn_norm");
    cr_assert_eq(sl_gguf_n_tensors(g), 3 + 2 * 19);
    sl_gguf_close(g);
    check_weights(out, 2880);
    check_biases_and_exponents(out);
    check_inspect(out, "gpt-oss");
    snprintf(args, sizeof args, "run -m '%s' -p Hi -n 3 --temp 0 -c 64 --stream", out);
    cr_assert_eq(run("sluice", args), 0, "sluice %s", args);
    unlink(out);
    /* MXFP4_MOE is a mix for models with experts */
    snprintf(args, sizeof args, "--shape llama3-8b --type MXFP4_MOE --out '%s/d.gguf' --dry-run", tdir);
    cr_assert_eq(run("sluice-gen", args), 2, "%s", args);
}
