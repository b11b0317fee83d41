/* tests/test_gen_arch.c — sluice-gen's architecture shapes (tools/sluice-gen/plan.c): the real
 * Q4_K_M file sizes, and files sluice binds, runs, streams and plans.
 *
 * Full-size files are 5-9 GB: the sizes are checked by dry run (the tensor table is computed and
 * the metadata measured), the engine on the same shapes with fewer, narrower blocks (the
 * architecture's tensor set, type mix and padded vocabulary unchanged). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "include/sluice.h"
#include "kernels/types.h"
#include "runtime/engine/model.h"

static const struct { const char *shape, *arch; double bytes; int vocab, n_tensors; } shapes[] = {
    { "llama3.1-8b",      "llama",  4.92e9, 128256, 3 + 1 + 9 * 32 },
    { "qwen2.5-7b",       "qwen2",  4.68e9, 152064, 3 + 12 * 28 },
    { "qwen3-8b",         "qwen3",  5.03e9, 151936, 3 + 11 * 36 },
    { "gemma2-9b",        "gemma2", 5.76e9, 256000, 2 + 11 * 42 },
    { "phi3-medium-14b",  "phi3",   8.57e9,  32064, 3 + 6 * 40 },
    { "mistral-nemo-12b", "llama",  7.48e9, 131072, 3 + 9 * 40 },
    { "gemma3-4b",        "gemma3", 2.49e9, 262144, 2 + 13 * 34 },
    { "gemma3-12b",       "gemma3", 7.30e9, 262144, 2 + 13 * 48 },
    { "gemma3-27b",       "gemma3", 16.5e9, 262144, 2 + 13 * 62 },
};
#define N_SHAPES (sizeof shapes / sizeof *shapes)

static char tdir[256];

static void setup(void)
{
    snprintf(tdir, sizeof tdir, "/tmp/sluice-test-gen-arch-XXXXXX");
    cr_assert_not_null(mkdtemp(tdir));
}

static void teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tdir);
    cr_expect_eq(system(cmd), 0);
}

/* Run sluice-gen with `args`; stdout into <tdir>/out.txt.  The exit status. */
static int gen(const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s/sluice-gen' %s > '%s/out.txt' 2> '%s/err.txt'", SL_BINARY_DIR, args, tdir, tdir);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(gen_arch, q4_k_m_sizes_and_tensor_sets, .init = setup, .fini = teardown)
{
    for (size_t i = 0; i < N_SHAPES; i++) {
        char args[512], path[300];
        snprintf(args, sizeof args, "--shape %s --type Q4_K_M --out '%s/x.gguf' --dry-run", shapes[i].shape, tdir);
        cr_assert_eq(gen(args), 0, "%s", shapes[i].shape);
        snprintf(path, sizeof path, "%s/out.txt", tdir);
        FILE *f = fopen(path, "r");
        cr_assert_not_null(f);
        char line[256];
        unsigned long long total = 0;
        int rows = 0, q5k = 0, q6k = 0;
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "total\t%llu", &total) == 1) break;
            q5k += strstr(line, "\tQ5_K\t") != NULL;
            q6k += strstr(line, "\tQ6_K\t") != NULL;
            rows++;
        }
        fclose(f);
        fprintf(stderr, "sluice-gen %-17s Q4_K_M %llu bytes (%+.2f%% vs the public file), %d tensors (%d Q5_K, %d Q6_K)\n",
                shapes[i].shape, total, 100 * (total / shapes[i].bytes - 1), rows, q5k, q6k);
        cr_assert_eq(rows, shapes[i].n_tensors, "%s tensor count", shapes[i].shape);
        cr_assert(fabs(total / shapes[i].bytes - 1) < 0.01, "%s: %llu bytes vs %.0f", shapes[i].shape, total, shapes[i].bytes);
        /* phi3's fused attn_qkv is Q5_K in llama.cpp's Q4_K_M; nothing else is */
        cr_assert_eq(q5k, strcmp(shapes[i].arch, "phi3") ? 0 : 40, "%s Q5_K count", shapes[i].shape);
    }
}

/* Resident, streamed and under a small budget: the same logits, bit for bit (C API). */
static void logits_of(const char *path, uint64_t budget, bool stream, float *out, int n_vocab)
{
    sluice_params p;
    sluice_params_default(&p);
    p.planner = budget ? SLUICE_PLANNER_ON : SLUICE_PLANNER_OFF;
    p.ram_budget = budget;
    p.stream_all = stream;
    p.n_ctx = 64;
    p.n_threads = 2;
    p.kv_type = SLUICE_KV_F16;
    p.disk_bw = 1.0;
    p.compute_bw = 1.0;
    char err[512];
    sluice_model *m;
    sluice_ctx *c;
    cr_assert_eq(sluice_open(path, &p, &m, err, sizeof err), 0, "%s: %s", path, err);
    cr_assert_eq(sluice_ctx_new(m, &c, err, sizeof err), 0, "%s", err);
    if (budget) {
        sluice_plan_info pi;
        sluice_model_get_plan(m, &pi);
        cr_assert(pi.planned && !pi.all_resident && pi.planned_bytes <= budget, "%s: budget %llu MiB does not stream", path,
                  (unsigned long long)(budget >> 20));
    }
    int32_t ids[8];
    int n = sluice_tokenize(m, "Hello world, once upon a time", -1, SLUICE_TOK_ADD_SPECIAL, ids, 8);
    cr_assert_gt(n, 1);
    cr_assert_eq(sluice_eval(c, ids, n < 8 ? n : 8), 0);
    memcpy(out, sluice_logits(c), (size_t)n_vocab * sizeof *out);
    sluice_ctx_free(c);
    sluice_close(m);
}

Test(gen_arch, small_variants_bind_run_stream_plan, .init = setup, .fini = teardown)
{
    for (size_t i = 0; i < N_SHAPES; i++) {
        char args[512], path[300], err[256];
        snprintf(path, sizeof path, "%s/%s.gguf", tdir, shapes[i].shape);
        snprintf(args, sizeof args, "--shape %s --type Q4_K_M --out '%s' --layers %d --dim 512 --heads 8 --kv-heads 2 "
                 "--ffn 512 --quiet", shapes[i].shape, path,
                 !strcmp(shapes[i].arch, "gemma2") ? 26 : !strcmp(shapes[i].arch, "gemma3") ? 12 : 2);
        cr_assert_eq(gen(args), 0, "%s", shapes[i].shape);
        sl_model *m;
        cr_assert_eq(sl_model_open(path, &m, err, sizeof err), 0, "%s: %s", shapes[i].shape, err);
        cr_assert_str_eq(m->arch->name, shapes[i].arch);
        cr_assert_eq(m->cfg.vocab, shapes[i].vocab, "%s: vocabulary padded to the real size", shapes[i].shape);
        cr_assert_eq(m->rope_freqs != NULL, !strcmp(shapes[i].shape, "llama3.1-8b"));
        if (!strcmp(shapes[i].arch, "gemma3"))   /* 5 local blocks (window 1024, base 1e4) per global one (x1/8) */
            for (int l = 0; l < m->cfg.n_layers; l++)
                cr_assert(m->layers[l].window == (l % 6 == 5 ? 0 : 1024) &&
                          m->layers[l].rope_base == (l % 6 == 5 ? 1e6f : 1e4f) &&
                          m->layers[l].rope_scale == (l % 6 == 5 ? 0.125f : 1.0f), "%s block %d", shapes[i].shape, l);
        if (!strcmp(shapes[i].arch, "phi3")) {
            /* the synthesized Q5_K attn_qkv: mean 0, std 1/sqrt(ne0) like every matrix (sluice-gen --help) */
            cr_assert_eq(sl_model_load_resident(m, err, sizeof err), 0, "%s", err);
            const sl_weight *w = &m->layers[0].mat[SL_MAT_Q];
            cr_assert_eq(w->type, SL_TYPE_Q5_K);
            float *row = malloc((size_t)w->cols * sizeof *row);
            double sum = 0, sum2 = 0;
            for (int64_t r = 0; r < w->rows; r++) {
                sl_type_get(w->type)->dequant((const unsigned char *)w->data + r * w->row_bytes, row, w->cols);
                for (int64_t k = 0; k < w->cols; k++) { sum += row[k]; sum2 += (double)row[k] * row[k]; }
            }
            free(row);
            const double n = (double)w->rows * w->cols, mean = sum / n, sd = sqrt(sum2 / n - mean * mean), want = 1 / sqrt(512.0);
            fprintf(stderr, "sluice-gen Q5_K attn_qkv: mean %.2e std %.5f (target %.5f)\n", mean, sd, want);
            cr_assert(fabs(sd / want - 1) < 0.05 && fabs(mean) < 0.05 * want, "Q5_K mean %g std %g, want 0 / %g", mean, sd, want);
        }
        const int V = m->cfg.vocab;
        const uint64_t file = sl_gguf_file_size(m->gguf);
        sl_model_free(m);
        float *a = malloc((size_t)V * 4), *b = malloc((size_t)V * 4), *c = malloc((size_t)V * 4);
        logits_of(path, 0, false, a, V);
        logits_of(path, 0, true, b, V);
        logits_of(path, file / 3 + (24u << 20), false, c, V);
        for (int k = 0; k < V; k++) cr_assert(isfinite(a[k]), "%s: logit %d not finite", shapes[i].shape, k);
        cr_assert_eq(memcmp(a, b, (size_t)V * 4), 0, "%s: streamed logits differ from resident", shapes[i].shape);
        cr_assert_eq(memcmp(a, c, (size_t)V * 4), 0, "%s: budgeted logits differ from resident", shapes[i].shape);
        free(a); free(b); free(c);
        unlink(path);
    }
}

/* ---- the smaller file types: Q3_K_M, Q2_K, IQ4_XS ------------------------------------------- */

/* Tensors of each type in a dry run of `shape` in `type`; the file size in *total. */
static void type_counts(const char *shape, const char *type, int count[SL_TYPE_COUNT], unsigned long long *total)
{
    char args[512], path[300];
    snprintf(args, sizeof args, "--shape %s --type %s --out '%s/x.gguf' --dry-run", shape, type, tdir);
    cr_assert_eq(gen(args), 0, "%s %s", shape, type);
    snprintf(path, sizeof path, "%s/out.txt", tdir);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    memset(count, 0, SL_TYPE_COUNT * sizeof *count);
    char line[256], name[128], tname[16];
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "total\t%llu", total) == 1) break;
        cr_assert_eq(sscanf(line, "%127s\t%15s", name, tname), 2, "%s", line);
        int t = 0;
        while (t < SL_TYPE_COUNT && strcmp(sl_type_name(t), tname)) t++;
        cr_assert_lt(t, SL_TYPE_COUNT, "%s", line);
        count[t]++;
    }
    fclose(f);
}

/* Named shapes: byte sizes within 1% of the public llama.cpp files (dry run: the tensor table is
 * computed and the metadata measured, no data written).  1%: the public sizes are known to 3
 * digits (0.1%); the per-tensor rules move a file by less than that bound (Q3_K_M's attn_v and
 * ffn_down rules are 0.4% of it, IQ4_XS's ffn_down rule 0.8%, Q2_K's attn_v rule 0.6%), so the rules
 * themselves are checked tensor by tensor against llama-quantize's files (tests/test_gen.c) and by
 * the type counts below. */
Test(gen_arch, named_shape_sizes, .init = setup, .fini = teardown)
{
    /* the public Meta-Llama-3-8B Q3_K_M, Q2_K and IQ4_XS files: 4.02, 3.18 and 4.45 GB */
    static const struct { const char *shape, *type; double bytes; int layers; } ref[] = {
        { "tinyllama-1.1b", "Q4_K_M", 0.668e9, 22 }, { "llama2-7b", "Q4_K_M", 4.08e9, 32 },
        { "llama3-8b", "Q4_K_M", 4.9207e9, 32 },     { "mistral-7b", "Q4_K_M", 4.37e9, 32 },
        { "llama2-13b", "Q4_K_M", 7.87e9, 40 },      { "llama3-8b", "Q3_K_M", 4.02e9, 32 },
        { "llama3-8b", "Q2_K", 3.18e9, 32 },         { "llama3-8b", "IQ4_XS", 4.45e9, 32 },
    };
    for (size_t i = 0; i < sizeof ref / sizeof *ref; i++) {
        int c[SL_TYPE_COUNT], rows = 0;
        unsigned long long total = 0;
        type_counts(ref[i].shape, ref[i].type, c, &total);
        for (int t = 0; t < SL_TYPE_COUNT; t++) rows += c[t];
        fprintf(stderr, "sluice-gen %-15s %-6s %llu bytes (%+.2f%% vs the public file)\n", ref[i].shape, ref[i].type, total,
                100 * (total / ref[i].bytes - 1));
        cr_assert_eq(rows, 3 + 9 * ref[i].layers, "%s tensor count", ref[i].shape);
        cr_assert(fabs(total / ref[i].bytes - 1) < 0.01, "%s %s: %llu bytes vs %.0f", ref[i].shape, ref[i].type, total,
                  ref[i].bytes);
        char tmp[300];
        snprintf(tmp, sizeof tmp, "%s/x.gguf", tdir);
        cr_assert_neq(access(tmp, F_OK), 0, "a dry run writes nothing");
        snprintf(tmp, sizeof tmp, "%s/x.gguf.tmp", tdir);
        cr_assert_neq(access(tmp, F_OK), 0, "a dry run leaves no temp file");
    }
}

/* llama.cpp's mixes, counted by hand from its rules for a 32-block llama3-8b (n_gqa 4) and a
 * 40-block llama2-13b (n_gqa 1): 9 matrices a block (q k v o gate up down) + token_embd + output. */
Test(gen_arch, small_file_type_mixes, .init = setup, .fini = teardown)
{
    static const struct { const char *shape, *type; int q2k, q3k, q4k, q5k, q6k, iq4xs; } want[] = {
        /* Q3_K_M: q k gate up + token_embd Q3_K; o, v (blocks >= 2), down (>= 32/16) Q4_K; v, down of blocks 0-1 Q5_K */
        { "llama3-8b", "Q3_K_M", 0, 4 * 32 + 1, 32 + 30 + 30, 4, 1, 0 },
        { "llama2-13b", "Q3_K_M", 0, 4 * 40 + 1, 40 + 38 + 38, 4, 1, 0 },
        /* Q2_K: q k gate up + token_embd Q2_K; o, down Q3_K; v Q4_K when n_gqa >= 4, else Q3_K */
        { "llama3-8b", "Q2_K", 4 * 32 + 1, 2 * 32, 32, 0, 1, 0 },
        { "llama2-13b", "Q2_K", 4 * 40 + 1, 3 * 40, 0, 0, 1, 0 },
        /* IQ4_XS: everything IQ4_XS but v (Q5_K when n_gqa >= 4) and the output */
        { "llama3-8b", "IQ4_XS", 0, 0, 0, 32, 1, 6 * 32 + 1 },
        { "llama2-13b", "IQ4_XS", 0, 0, 0, 0, 1, 7 * 40 + 1 },
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        int c[SL_TYPE_COUNT];
        unsigned long long total = 0;
        type_counts(want[i].shape, want[i].type, c, &total);
        fprintf(stderr, "sluice-gen %-10s %-6s %llu bytes: Q2_K %d Q3_K %d Q4_K %d Q5_K %d Q6_K %d IQ4_XS %d\n", want[i].shape,
                want[i].type, total, c[SL_TYPE_Q2_K], c[SL_TYPE_Q3_K], c[SL_TYPE_Q4_K], c[SL_TYPE_Q5_K], c[SL_TYPE_Q6_K],
                c[SL_TYPE_IQ4_XS]);
        cr_assert(c[SL_TYPE_Q2_K] == want[i].q2k && c[SL_TYPE_Q3_K] == want[i].q3k && c[SL_TYPE_Q4_K] == want[i].q4k &&
                  c[SL_TYPE_Q5_K] == want[i].q5k && c[SL_TYPE_Q6_K] == want[i].q6k && c[SL_TYPE_IQ4_XS] == want[i].iq4xs,
                  "%s %s: type counts differ from llama.cpp's mix", want[i].shape, want[i].type);
    }
}

/* Each new file type on a narrow llama3-8b (the real vocabulary and n_gqa 4): sluice opens it, the
 * file type key says the type, and resident, streamed and budgeted decodes give the same logits. */
Test(gen_arch, small_file_types_run_and_stream, .init = setup, .fini = teardown)
{
    static const struct { const char *type; uint32_t ftype; int v_type; } types[] = {
        { "Q3_K_M", 12, SL_TYPE_Q5_K }, { "Q2_K", 10, SL_TYPE_Q4_K }, { "IQ4_XS", 30, SL_TYPE_Q5_K },
    };
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        char args[512], path[300], err[256];
        snprintf(path, sizeof path, "%s/%s.gguf", tdir, types[i].type);
        snprintf(args, sizeof args, "--shape llama3-8b --type %s --out '%s' --layers 2 --dim 512 --heads 8 --kv-heads 2 "
                 "--ffn 512 --quiet", types[i].type, path);
        cr_assert_eq(gen(args), 0, "%s", types[i].type);
        sl_model *m;
        cr_assert_eq(sl_model_open(path, &m, err, sizeof err), 0, "%s: %s", types[i].type, err);
        uint32_t ft = 0;
        cr_assert(sl_gguf_get_u32(m->gguf, "general.file_type", &ft) && ft == types[i].ftype, "%s: file type %u",
                  types[i].type, ft);
        cr_assert_eq(m->layers[0].mat[SL_MAT_V].type, types[i].v_type, "%s attn_v", types[i].type);
        cr_assert_eq(m->output.type, SL_TYPE_Q6_K, "%s output", types[i].type);
        const int V = m->cfg.vocab;
        const uint64_t file = sl_gguf_file_size(m->gguf);
        sl_model_free(m);
        float *a = malloc((size_t)V * 4), *b = malloc((size_t)V * 4), *c = malloc((size_t)V * 4);
        logits_of(path, 0, false, a, V);
        logits_of(path, 0, true, b, V);
        logits_of(path, file / 3 + (24u << 20), false, c, V);
        for (int k = 0; k < V; k++) cr_assert(isfinite(a[k]), "%s: logit %d not finite", types[i].type, k);
        cr_assert_eq(memcmp(a, b, (size_t)V * 4), 0, "%s: streamed logits differ from resident", types[i].type);
        cr_assert_eq(memcmp(a, c, (size_t)V * 4), 0, "%s: budgeted logits differ from resident", types[i].type);
        free(a); free(b); free(c);
        unlink(path);
    }
}

/* ---- sluice plan: what a smaller file of the same model would do ------------------------------ */

/* `sluice plan -m model --ram-budget budget --disk-bw 1 --compute-bw 2 [extra]`'s stdout (malloc'd). */
static char *plan_of(const char *model, const char *budget, const char *extra)
{
    char cmd[2048], path[300];
    snprintf(path, sizeof path, "%s/plan.txt", tdir);
    snprintf(cmd, sizeof cmd, "XDG_CACHE_HOME='%s' '%s/sluice' plan -m '%s' --ram-budget %s --disk-bw 1 --compute-bw 2 %s "
             "> '%s' 2>&1", tdir, SL_BINARY_DIR, model, budget, extra, path);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strdup(buf);
}

/* The number after "key": in json from `from` on (-1 when absent). */
static double json_num(const char *from, const char *key)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(from, k);
    return p ? strtod(p + strlen(k), NULL) : -1;
}

/* A Q4_K_M file that streams lists the smaller files with what each would read per token and
 * decode at; generating those files and planning them gives the same numbers.  Tolerance 1%: the
 * estimate uses this file's metadata size (the other file's differs by a few bytes: its
 * description names another type), which can only move what the budget pins by that much; sizes
 * within 64 bytes (that difference plus the 32-byte alignment padding).  A shape whose blocks
 * outweigh the LM head (a vocabulary of 32000, 8 blocks of dim 1024, n_gqa 4). */
Test(gen_arch, plan_lists_smaller_files, .init = setup, .fini = teardown)
{
    static const char *types[] = { "Q4_K_M", "Q3_K_M", "Q2_K" };
    char path[3][300];
    for (int i = 0; i < 3; i++) {
        char args[1024];
        snprintf(path[i], sizeof path[i], "%s/%s.gguf", tdir, types[i]);
        snprintf(args, sizeof args, "--shape custom --type %s --out '%s' --layers 8 --dim 1024 --heads 8 --kv-heads 2 "
                 "--ffn 4096 --quiet", types[i], path[i]);
        cr_assert_eq(gen(args), 0, "%s", types[i]);
    }
    char *text = plan_of(path[0], "80M", "");
    cr_assert(strstr(text, "mode: streaming"), "%s", text);
    cr_assert(strstr(text, "a Q3_K_M file of this model (~100 MB) would stream ") &&
              strstr(text, "a Q2_K file of this model (~83 MB) would stream "), "%s", text);
    free(text);
    text = plan_of(path[0], "1G", "");
    cr_assert(strstr(text, "mode: resident") && !strstr(text, "file of this model"), "resident: no such lines\n%s", text);
    free(text);
    text = plan_of(path[2], "80M", "");
    cr_assert(!strstr(text, "file of this model"), "nothing is smaller than Q2_K\n%s", text);
    free(text);

    char *json = plan_of(path[0], "80M", "--json");
    const double now = json_num(json, "pred_tok_s");
    for (int i = 1; i < 3; i++) {
        char key[64];
        snprintf(key, sizeof key, "{\"type\":\"%s\"", types[i]);
        const char *alt = strstr(json, key);
        cr_assert_not_null(alt, "%s missing: %s", types[i], json);
        const double file = json_num(alt, "file_bytes"), rd = json_num(alt, "read_per_token"), tok = json_num(alt, "pred_tok_s");
        char *real = plan_of(path[i], "80M", "--json");
        const double rfile = json_num(real, "model_bytes"), rrd = json_num(real, "read_per_token"), rtok = json_num(real, "pred_tok_s");
        fprintf(stderr, "plan of Q4_K_M at 80M: %s would read %.0f bytes/token, %.3f tok/s (now %.3f); the generated %s: "
                "%.0f bytes/token, %.3f tok/s\n", types[i], rd, tok, now, types[i], rrd, rtok);
        cr_assert(fabs(file - rfile) <= 64, "%s: estimated %.0f bytes, the file has %.0f", types[i], file, rfile);
        cr_assert(fabs(rd / rrd - 1) < 0.01, "%s: read per token %.0f vs %.0f", types[i], rd, rrd);
        cr_assert(fabs(tok / rtok - 1) < 0.01, "%s: %.4f vs %.4f tok/s", types[i], tok, rtok);
        cr_assert_gt(tok, now, "%s streams less: faster", types[i]);
        free(real);
    }
    free(json);
}
