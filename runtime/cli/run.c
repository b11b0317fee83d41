/* runtime/cli/run.c — `sluice run`: prompt in, text out. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loader/pagecache.h"
#include "runtime/cli/cli.h"
#include "runtime/forward.h"
#include "runtime/model.h"
#include "runtime/planner.h"
#include "runtime/sampler.h"
#include "runtime/stream.h"
#include "runtime/tokenizer.h"

static volatile sig_atomic_t g_interrupted;

static void on_signal(int sig)
{
    if (g_interrupted) _exit(128 + sig);   /* second signal: leave at once */
    g_interrupted = sig;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sluice run [-m MODEL] -p PROMPT [options]\n"
            "  -m, --model FILE        GGUF model (default: the bundled stories260K)\n"
            "  -p, --prompt TEXT       prompt text\n"
            "  -f, --file FILE         read the prompt from a file\n"
            "  -n, --n-predict N       tokens to generate (default 128; stops early at end-of-text)\n"
            "  -c, --ctx N             context length (default min(model context, 4096))\n"
            "  -b, --batch N           prompt positions per forward batch (default 512)\n"
            "  -t, --threads N         threads (default: number of CPUs)\n"
            "      --temp T            temperature (default 0.8; 0 = greedy)\n"
            "      --top-k K           (default 40; 0 = off)\n"
            "      --top-p P           (default 0.95; 1 = off)\n"
            "      --min-p P           (default 0.05; 0 = off)\n"
            "      --repeat-penalty R  (default 1.0 = off)\n"
            "      --seed S            random seed (default 0x5eed)\n"
            "      --special           recognise special-token texts in the prompt\n"
            "memory:\n"
            "      --ram-budget SIZE   memory the run may use, RSS + page cache (96M, 1.5G, 2GiB, bytes; default\n"
            "                          auto: MemAvailable or the cgroup limit minus a margin). The planner keeps\n"
            "                          what fits resident and streams the rest (see sluice plan)\n"
            "      --kv f16|f32|q8_0   KV cache precision (default f16; the planner may pick q8_0 or spill)\n"
            "      --kv-spill-dir DIR  where a spilled KV cache lives (default $TMPDIR or /var/tmp)\n"
            "      --disk-bw GB/s      disk read rate for the plan's prediction (default: measured once per device)\n"
            "streaming (weights read from disk as the forward pass reaches them):\n"
            "      --stream            stream every weight matrix (norms stay resident)\n"
            "      --stream-lm-head    stream only the LM head (output.weight), in row chunks\n"
            "      --io pread|mmap|uring   read backend (default uring; falls back to pread)\n"
            "      --stream-unit U     block | tensor | CHUNK (MiB, e.g. 4 or 0.5): piece size (default tensor)\n"
            "      --prefetch N        pieces in flight ahead of the one computing (default 2)\n"
            "      --lm-head-chunk R   rows per LM-head piece (default 1024)\n"
            "      --no-direct         buffered reads + POSIX_FADV_DONTNEED instead of O_DIRECT\n"
            "      --stats             print load time, tok/s, peak RSS (and I/O figures) to stderr\n"
            "      --stats-json FILE   write the same figures as one JSON object to FILE (for benchmarks)\n"
            "      --json              one JSON object per generated token on stdout\n"
            "      --top-logits K      with --json: include the K best [id, logit] pairs\n"
            "      --quiet             no prompt echo\n");
}

typedef struct run_opts {
    const char *model, *prompt, *prompt_file;
    long n_predict, n_ctx, n_batch, threads, top_logits;
    int kv_type;
    bool stats, json, special, quiet;
    sl_sampler_params sp;
    bool stream, stream_head, no_direct;
    sl_io_backend io;
    uint64_t chunk;          /* 0: tensor unit */
    long prefetch, head_rows;
    const char *budget, *spill_dir, *stats_json;
    double disk_bw, compute_bw;
    bool kv_set;
} run_opts;

static int parse_args(int argc, char **argv, run_opts *o)
{
    *o = (run_opts){ .n_predict = 128, .n_batch = 512, .threads = 0, .kv_type = SL_KV_F16, .io = SL_IO_URING,
                     .prefetch = 2, .head_rows = 1024, .disk_bw = 0, .compute_bw = SL_DEFAULT_COMPUTE_GBS };
    o->sp = sl_sampler_defaults();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        double d;
        long l;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 1; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { if (!cli_val(argc, argv, &i, &o->model)) return -1; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { if (!cli_val(argc, argv, &i, &o->prompt)) return -1; }
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { if (!cli_val(argc, argv, &i, &o->prompt_file)) return -1; }
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) { if (!cli_val(argc, argv, &i, &v) || !cli_int(a, v, 0, 1 << 24, &o->n_predict)) return -1; }
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) { if (!cli_val(argc, argv, &i, &v) || !cli_int(a, v, 1, 1 << 22, &o->n_ctx)) return -1; }
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch")) { if (!cli_val(argc, argv, &i, &v) || !cli_int(a, v, 1, 1 << 16, &o->n_batch)) return -1; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { if (!cli_val(argc, argv, &i, &v) || !cli_int(a, v, 1, 256, &o->threads)) return -1; }
        else if (!strcmp(a, "--temp")) { if (!cli_val(argc, argv, &i, &v) || !cli_float(a, v, 0, 100, &d)) return -1; o->sp.temp = (float)d; }
        else if (!strcmp(a, "--top-k")) { if (!cli_val(argc, argv, &i, &v) || !cli_int(a, v, 0, 1 << 30, &l)) return -1; o->sp.top_k = (int)l; }
        else if (!strcmp(a, "--top-p")) { if (!cli_val(argc, argv, &i, &v) || !cli_float(a, v, 0, 1, &d)) return -1; o->sp.top_p = (float)d; }
        else if (!strcmp(a, "--min-p")) { if (!cli_val(argc, argv, &i, &v) || !cli_float(a, v, 0, 1, &d)) return -1; o->sp.min_p = (float)d; }
        else if (!strcmp(a, "--repeat-penalty")) { if (!cli_val(argc, argv, &i, &v) || !cli_float(a, v, 0.01, 100, &d)) return -1; o->sp.repeat_penalty = (float)d; }
        else if (!strcmp(a, "--seed")) {
            char *end;
            if (!cli_val(argc, argv, &i, &v)) return -1;
            errno = 0;
            o->sp.seed = strtoull(v, &end, 0);
            if (errno || *end || end == v) { cli_err("--seed: '%s' is not an unsigned integer", v); return -1; }
        }
        else if (!strcmp(a, "--kv")) {
            if (!cli_val(argc, argv, &i, &v)) return -1;
            if (!strcmp(v, "f16")) o->kv_type = SL_KV_F16;
            else if (!strcmp(v, "f32")) o->kv_type = SL_KV_F32;
            else if (!strcmp(v, "q8_0")) o->kv_type = SL_KV_Q8_0;
            else { cli_err("--kv: '%s' is not f16, f32 or q8_0", v); return -1; }
            o->kv_set = true;
        }
        else if (!strcmp(a, "--top-logits")) { if (!cli_val(argc, argv, &i, &v) || !cli_int(a, v, 0, 1000, &o->top_logits)) return -1; }
        else if (!strcmp(a, "--ram-budget")) { if (!cli_val(argc, argv, &i, &o->budget)) return -1; }
        else if (!strcmp(a, "--kv-spill-dir")) { if (!cli_val(argc, argv, &i, &o->spill_dir)) return -1; }
        else if (!strcmp(a, "--disk-bw")) { if (!cli_val(argc, argv, &i, &v) || !cli_float(a, v, 0.001, 1000, &o->disk_bw)) return -1; }
        else if (!strcmp(a, "--compute-bw")) { if (!cli_val(argc, argv, &i, &v) || !cli_float(a, v, 0.001, 1000, &o->compute_bw)) return -1; }
        else if (!strcmp(a, "--stream")) o->stream = true;
        else if (!strcmp(a, "--stream-lm-head")) o->stream_head = true;
        else if (!strcmp(a, "--no-direct")) o->no_direct = true;
        else if (!strcmp(a, "--io")) {
            if (!cli_val(argc, argv, &i, &v)) return -1;
            if (sl_io_backend_parse(v, &o->io)) { cli_err("--io: '%s' is not pread, mmap or uring", v); return -1; }
        }
        else if (!strcmp(a, "--stream-unit")) {
            if (!cli_val(argc, argv, &i, &v)) return -1;
            if (!strcmp(v, "tensor")) o->chunk = 0;
            else if (!strcmp(v, "block")) { o->chunk = 0; if (o->prefetch < 7) o->prefetch = 7; }
            else { if (!cli_float(a, v, 0.001, 65536, &d)) return -1; o->chunk = (uint64_t)(d * 1048576); }
        }
        else if (!strcmp(a, "--prefetch")) { if (!cli_val(argc, argv, &i, &v) || !cli_int(a, v, 1, 60, &o->prefetch)) return -1; }
        else if (!strcmp(a, "--lm-head-chunk")) { if (!cli_val(argc, argv, &i, &v) || !cli_int(a, v, 1, 1 << 24, &o->head_rows)) return -1; }
        else if (!strcmp(a, "--stats")) o->stats = true;
        else if (!strcmp(a, "--stats-json")) { if (!cli_val(argc, argv, &i, &o->stats_json)) return -1; }
        else if (!strcmp(a, "--json")) o->json = true;
        else if (!strcmp(a, "--special")) o->special = true;
        else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) o->quiet = true;
        else { cli_err("run: unknown option '%s' (see sluice run --help)", a); return -1; }
    }
    if (o->prompt && o->prompt_file) { cli_err("run: give -p or -f, not both"); return -1; }
    return 0;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) { cli_err("cannot open prompt file %s: %s", path, strerror(errno)); return NULL; }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (size_t r; buf && (r = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += r;
        if (n == cap) { char *nb = realloc(buf, cap *= 2); if (!nb) { free(buf); buf = NULL; } else buf = nb; }
    }
    if (!buf || ferror(f)) { cli_err("cannot read prompt file %s", path); free(buf); buf = NULL; }
    fclose(f);
    *len = n;
    return buf;
}

/* Print the k best logits as [[id, logit], ...]. */
static void json_top(FILE *f, const float *logits, int n, int k)
{
    int *best = malloc((size_t)k * sizeof *best);
    int m = 0;
    if (!best) return;
    for (int i = 0; i < n; i++) {
        if (m < k) best[m++] = i;
        else if (logits[i] > logits[best[m - 1]]) best[m - 1] = i;
        else continue;
        for (int j = m - 1; j > 0 && (logits[best[j]] > logits[best[j - 1]] ||
                                      (logits[best[j]] == logits[best[j - 1]] && best[j] < best[j - 1])); j--) {
            int t = best[j]; best[j] = best[j - 1]; best[j - 1] = t;
        }
    }
    fputs(",\"top\":[", f);
    for (int i = 0; i < m; i++) fprintf(f, "%s[%d,%.6f]", i ? "," : "", best[i], logits[best[i]]);
    fputc(']', f);
    free(best);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The streaming half of --stats: what was read, how fast, how long compute waited for it. */
static void print_stream_stats(sl_stream *s, const sl_model *m, uint64_t *lat, int64_t n_lat, uint64_t run_ns)
{
    if (n_lat > 0) {
        qsort(lat, (size_t)n_lat, sizeof *lat, cmp_u64);
        fprintf(stderr, "sluice: token latency median %.1f ms, p90 %.1f ms\n", lat[n_lat / 2] / 1e6,
                lat[(n_lat * 9) / 10 < n_lat ? (n_lat * 9) / 10 : n_lat - 1] / 1e6);
    }
    if (s) {
        sl_stream_stats st;
        sl_stream_get_stats(s, &st);
        double io_s = run_ns / 1e9;
        fprintf(stderr, "sluice: stream: backend %s, %" PRId64 " pieces per pass (largest %.2f MiB, %.1f MiB per pass), "
                "buffers %.1f MiB\n", sl_stream_backend(s),
                sl_stream_n_pieces(s), sl_stream_max_piece(s) / 1048576.0, sl_stream_pass_bytes(s) / 1048576.0,
                sl_stream_mem_bytes(s) / 1048576.0);
        fprintf(stderr, "sluice: stream: read %.1f MiB in %" PRIu64 " reads (%.2f GB/s over the run), "
                "compute on streamed pieces %.3f s, blocked on I/O %.3f s, %" PRIu64 " embedding rows\n",
                st.io.bytes_read / 1048576.0, st.io.reads_issued, io_s > 0 ? st.io.bytes_read / io_s / 1e9 : 0,
                st.compute_ns / 1e9, st.wait_ns / 1e9, st.embd_rows);
    }
    uint64_t res, fsz;
    if (sl_page_cache_bytes(m->path, &res, &fsz) == 0)
        fprintf(stderr, "sluice: page cache: %.2f MiB of the model file (%.2f%%) resident at exit\n", res / 1048576.0,
                fsz ? 100.0 * res / fsz : 0);
}

/* One JSON object with every figure a benchmark needs.  Sorting lat is harmless (stats use it sorted). */
static void write_stats_json(const char *path, const sl_model *m, sl_stream *s, const sl_plan *plan, const sl_plan_req *req,
                             int64_t n_prompt, uint64_t prompt_ns, int64_t n_dec, uint64_t dec_ns, uint64_t *lat,
                             uint64_t run_ns, int status)
{
    FILE *f = fopen(path, "w");
    if (!f) { cli_err("--stats-json: cannot write %s", path); return; }
    if (n_dec > 0) qsort(lat, (size_t)n_dec, sizeof *lat, cmp_u64);
    uint64_t res = 0, fsz = 0;
    sl_page_cache_bytes(m->path, &res, &fsz);
    fprintf(f, "{\"status\":%d,\"model_bytes\":%" PRIu64 ",\"n_prompt\":%" PRId64 ",\"prompt_s\":%.6f,\"prompt_tok_s\":%.4f,"
            "\"n_decode\":%" PRId64 ",\"decode_s\":%.6f,\"decode_tok_s\":%.4f,\"lat_median_ms\":%.3f,\"lat_p90_ms\":%.3f,"
            "\"peak_rss\":%" PRIu64 ",\"page_cache_at_exit\":%" PRIu64,
            status, fsz, n_prompt, prompt_ns / 1e9, prompt_ns ? n_prompt / (prompt_ns / 1e9) : 0, n_dec, dec_ns / 1e9,
            dec_ns ? n_dec / (dec_ns / 1e9) : 0, n_dec ? lat[n_dec / 2] / 1e6 : 0,
            n_dec ? lat[(n_dec * 9) / 10 < n_dec ? (n_dec * 9) / 10 : n_dec - 1] / 1e6 : 0, peak_rss_bytes(), res);
    if (plan)
        fprintf(f, ",\"budget\":%" PRIu64 ",\"planned_bytes\":%" PRIu64 ",\"pred_tok_s\":%.4f,\"blocks_resident\":%d,"
                "\"lm_head_resident\":%s,\"kv\":\"%s\",\"n_batch\":%d,\"chunk_bytes\":%" PRIu64 ",\"prefetch\":%d",
                req->budget, plan->total_bytes, plan->pred_tok_s, plan->n_layers_resident,
                plan->lm_head_resident ? "true" : "false",
                plan->kv == SL_PLAN_KV_F16 ? "f16" : plan->kv == SL_PLAN_KV_Q8_0 ? "q8_0" : "spill", plan->n_batch,
                plan->chunk_bytes, plan->prefetch);
    if (s) {
        sl_stream_stats st;
        sl_stream_get_stats(s, &st);
        fprintf(f, ",\"backend\":\"%s\",\"bytes_read\":%" PRIu64 ",\"reads\":%" PRIu64 ",\"pass_bytes\":%" PRIu64
                ",\"wait_s\":%.6f,\"compute_s\":%.6f,\"read_gbs\":%.4f",
                sl_stream_backend(s), st.io.bytes_read, st.io.reads_issued, sl_stream_pass_bytes(s), st.wait_ns / 1e9,
                st.compute_ns / 1e9, run_ns ? st.io.bytes_read / (run_ns / 1e9) / 1e9 : 0);
    } else {
        fprintf(f, ",\"backend\":\"resident\",\"bytes_read\":0");
    }
    fprintf(f, "}\n");
    fclose(f);
}

int cmd_run(int argc, char **argv)
{
    run_opts o;
    int pr = parse_args(argc, argv, &o);
    if (pr) return pr > 0 ? 0 : 2;
    if (!o.model) o.model = cli_default_model();
    size_t plen = 0;
    char *ptext = NULL;
    if (o.prompt_file) {
        if (!(ptext = read_file(o.prompt_file, &plen))) return 1;
    } else {
        const char *p = o.prompt ? o.prompt : "";
        plen = strlen(p);
        ptext = strdup(p);
    }
    char err[SL_ERRLEN] = "";
    int status = 1;
    sl_model *m = NULL;
    sl_vocab *voc = NULL;
    sl_pool *pool = NULL;
    sl_ctx *ctx = NULL;
    sl_sampler *smp = NULL;
    sl_stream *stream = NULL;
    int32_t *toks = NULL;
    uint64_t *lat = NULL;   /* per-token decode latency */
    sl_plan_model *pm = NULL;
    sl_plan *plan = NULL;
    sl_plan_req preq;
    uint64_t t0 = now_ns();

    struct sigaction sa = { .sa_handler = on_signal };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    if (sl_model_open(o.model, &m, err, sizeof err)) { cli_err("%s", err); goto done; }
    if (sl_vocab_load(m->gguf, &voc, err, sizeof err)) { cli_err("%s: %s", o.model, err); goto done; }
    if (sl_vocab_n_tokens(voc) != m->cfg.vocab) {
        cli_err("%s: vocabulary has %d tokens but the embedding table has %d rows", o.model, sl_vocab_n_tokens(voc), m->cfg.vocab);
        goto done;
    }
    long n_ctx = o.n_ctx ? o.n_ctx : (m->cfg.ctx_train < 4096 ? m->cfg.ctx_train : 4096);
    if (o.n_ctx > m->cfg.ctx_train)
        fprintf(stderr, "sluice: warning: -c %ld is larger than the model's trained context %d\n", o.n_ctx, m->cfg.ctx_train);
    int threads = o.threads ? (int)o.threads : sl_ncpu();
    const char *spill = NULL;
    bool streaming = o.stream || o.stream_head;
    if (!streaming || o.budget) {
        /* The planner decides what stays resident (default budget: auto).  --stream / --stream-lm-head
         * without a budget bypass it (tests and benchmarks force a mode). */
        pm = malloc(sizeof *pm);
        plan = malloc(sizeof *plan);
        if (!pm || !plan) { cli_err("out of memory"); goto done; }
        if (cli_plan_for(m, sl_vocab_mem_bytes(voc), o.budget, (int)n_ctx, (int)o.n_batch, threads, o.disk_bw * 1e9,
                         o.compute_bw * 1e9, pm, &preq, plan))
            goto done;
        if (!streaming && !plan->all_resident) {
            sl_plan_apply(plan, m);
            streaming = true;
            o.chunk = plan->chunk_bytes;
            o.prefetch = plan->prefetch;
            o.head_rows = plan->lm_head_rows;
            o.n_batch = plan->n_batch;
            if (!o.kv_set) o.kv_type = plan->kv == SL_PLAN_KV_Q8_0 ? SL_KV_Q8_0 : SL_KV_F16;
            if (plan->kv == SL_PLAN_KV_SPILL) {
                spill = o.spill_dir ? o.spill_dir : getenv("TMPDIR") ? getenv("TMPDIR") : "/var/tmp";
                if (o.kv_type == SL_KV_F32) o.kv_type = SL_KV_F16;
            }
            if (!o.json && !o.quiet)
                fprintf(stderr, "sluice: plan: %d of %d blocks resident, LM head %s, %.0f MiB streamed per token, KV %s; "
                        "%.0f of %.0f MiB\n", plan->n_layers_resident, m->cfg.n_layers,
                        plan->lm_head_resident ? "resident" : "streamed", plan->stream_bytes / 1048576.0,
                        plan->kv == SL_PLAN_KV_SPILL ? "spilled" : plan->kv == SL_PLAN_KV_Q8_0 ? "q8_0" : "f16",
                        plan->total_bytes / 1048576.0, preq.budget / 1048576.0);
        }
    }
    if (o.spill_dir && !spill) spill = o.spill_dir;
    sl_model_set_streaming(m, o.stream, o.stream_head);
    if (sl_model_load_resident(m, err, sizeof err)) { cli_err("%s", err); goto done; }
    pool = sl_pool_create(threads);
    if (!pool) { cli_err("out of memory"); goto done; }
    if (streaming) {
        sl_stream_opts so = { o.io, o.chunk, (int)o.prefetch, (int)o.head_rows, o.no_direct };
        if (sl_stream_create(m, pool, &so, &stream, err, sizeof err)) { cli_err("%s", err); goto done; }
        if (*sl_stream_notice(stream) && !o.json) fprintf(stderr, "sluice: note: %s\n", sl_stream_notice(stream));
    }
    sl_ctx_params cp = { (int)n_ctx, (int)o.n_batch, o.kv_type, spill };
    if (sl_ctx_create(m, &cp, pool, &ctx, err, sizeof err)) { cli_err("%s", err); goto done; }
    if (stream) ctx->src = sl_stream_source(stream);
    ctx->cancel = &g_interrupted;

    int64_t nt = sl_tokenize(voc, ptext, plen, true, o.special, NULL, 0);
    if (nt < 0) { cli_err("tokenizing the prompt failed: %s", strerror((int)-nt)); goto done; }
    if (nt == 0) { cli_err("the prompt is empty and the model adds no BOS token: nothing to evaluate"); goto done; }
    if (nt + o.n_predict > n_ctx && nt > n_ctx) {
        cli_err("the prompt has %" PRId64 " tokens, more than the context of %ld (raise -c)", nt, n_ctx);
        goto done;
    }
    toks = malloc((size_t)(nt + o.n_predict + 1) * sizeof *toks);
    lat = malloc((size_t)(o.n_predict + 1) * sizeof *lat);
    if (!toks || !lat) { cli_err("out of memory"); goto done; }
    sl_tokenize(voc, ptext, plen, true, o.special, toks, nt);
    smp = sl_sampler_create(&o.sp, m->cfg.vocab);
    if (!smp) { cli_err("out of memory"); goto done; }
    uint64_t t_load = now_ns();

    sl_utf8_stream us = { 0 };
    char piece[512], outb[512 + 8];
    if (!o.quiet && !o.json) {
        /* echo the prompt as the model sees it (detokenized), so output reads as one text */
        for (int64_t i = 0; i < nt; i++) {
            int pl = sl_token_piece(voc, toks[i], piece, sizeof piece);
            if (pl > (int)sizeof piece) pl = sizeof piece;
            if (pl > 0) fwrite(outb, 1, sl_utf8_stream_feed(&us, piece, (size_t)pl, outb), stdout);
        }
        fflush(stdout);
    }
    int rc = sl_eval(ctx, toks, (int)nt);
    uint64_t t_prompt = now_ns();
    int64_t n_gen = 0;
    uint64_t t_first = 0;
    while (rc == 0 && n_gen < o.n_predict) {
        int32_t next = sl_sample(smp, ctx->logits, toks, (int)(nt + n_gen));
        if (o.json) {
            int pl = sl_token_piece(voc, next, piece, sizeof piece);
            if (pl > (int)sizeof piece) pl = sizeof piece;
            if (pl < 0) pl = 0;
            printf("{\"id\":%d,\"text\":", next);
            json_str(stdout, piece, (size_t)pl);
            if (o.top_logits) json_top(stdout, ctx->logits, m->cfg.vocab, (int)o.top_logits);
            printf("}\n");
        }
        toks[nt + n_gen++] = next;
        if (sl_vocab_is_eog(voc, next)) break;
        if (!o.json) {
            int pl = sl_token_piece(voc, next, piece, sizeof piece);
            if (pl > (int)sizeof piece) pl = sizeof piece;
            if (pl > 0) fwrite(outb, 1, sl_utf8_stream_feed(&us, piece, (size_t)pl, outb), stdout);
        }
        fflush(stdout);
        if (n_gen == o.n_predict) break;
        if (ctx->n_past >= ctx->n_ctx) { fprintf(stderr, "\nsluice: context full (-c %d)\n", ctx->n_ctx); break; }
        if (n_gen == 1) t_first = now_ns();
        uint64_t ts = now_ns();
        rc = sl_eval(ctx, &next, 1);
        lat[n_gen - 1] = now_ns() - ts;
    }
    if (!o.json) {
        fwrite(outb, 1, sl_utf8_stream_flush(&us, outb), stdout);
        printf("\n");
    }
    fflush(stdout);
    uint64_t t_end = now_ns();
    if (rc == -ECANCELED) {
        fprintf(stderr, "sluice: interrupted after %" PRId64 " tokens\n", n_gen);
        status = g_interrupted == SIGTERM ? 143 : 130;
    } else if (rc) {
        cli_err("%s", ctx->err);
        status = 1;
    } else {
        status = 0;
    }
    if (o.stats_json) {
        int64_t n_dec = n_gen > 1 ? n_gen - 1 : 0;
        write_stats_json(o.stats_json, m, stream, plan, &preq, nt, t_prompt - t_load, n_dec,
                         t_first && n_dec ? t_end - t_first : 0, lat, t_end - t_load, status);
    }
    if (o.stats) {
        double load_s = (t_load - t0) / 1e9, pp_s = (t_prompt - t_load) / 1e9;
        int64_t n_dec = n_gen > 1 ? n_gen - 1 : 0;
        double dec_s = t_first && n_dec ? (t_end - t_first) / 1e9 : 0;
        fprintf(stderr, "sluice: load %.3f s | prompt %" PRId64 " tok in %.3f s (%.2f tok/s) | decode %" PRId64
                " tok in %.3f s (%.2f tok/s) | peak RSS %.1f MiB\n",
                load_s, nt, pp_s, pp_s > 0 ? nt / pp_s : 0, n_dec, dec_s, dec_s > 0 ? n_dec / dec_s : 0,
                peak_rss_bytes() / 1048576.0);
        print_stream_stats(stream, m, lat, n_dec, t_end - t_load);
        if (plan)
            fprintf(stderr, "sluice: budget %.1f MiB: planned %.1f MiB (predicted %.2f tok/s), measured peak RSS %.1f MiB\n",
                    preq.budget / 1048576.0, plan->total_bytes / 1048576.0, plan->pred_tok_s, peak_rss_bytes() / 1048576.0);
    }
done:
    free(pm);
    free(plan);
    free(lat);
    sl_stream_free(stream);
    free(toks);
    sl_sampler_free(smp);
    sl_ctx_free(ctx);
    sl_pool_free(pool);
    sl_vocab_free(voc);
    sl_model_free(m);
    free(ptext);
    return status;
}
