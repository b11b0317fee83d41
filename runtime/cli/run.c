/* runtime/cli/run.c — `sluice run`: prompt in, text out.
 * Built on the public API (include/sluice.h); --stats reaches into runtime/api/api_internal.h for the
 * stream counters and the raw plan. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "include/sluice.h"
#include "loader/pagecache.h"
#include "runtime/api/api_internal.h"
#include "kernels/clock.h"
#include "runtime/cli/cli.h"
#include "runtime/cli/genopts.h"
#include "runtime/api/progress.h"

static volatile sig_atomic_t g_interrupted;
static sluice_ctx *volatile g_ctx;   /* the context a signal cancels (NULL until it exists) */

static void on_signal(int sig)
{
    if (g_interrupted) _exit(128 + sig);   /* second signal: leave at once */
    g_interrupted = sig;
    sluice_ctx *c = g_ctx;
    if (c) sluice_cancel(c);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sluice run [-m MODEL] -p PROMPT [options]\n"
            "  -p, --prompt TEXT       prompt text\n"
            "  -f, --file FILE         read the prompt from a file\n"
            "  -n, --n-predict N       tokens to generate (default 128; stops early at end-of-text; 0 with\n"
            "                          --session: evaluate the prompt, save the session and exit)\n"
            "      --special           recognise special-token texts in the prompt\n");
    gen_opts_usage(f);
    fprintf(f,
            "output:\n"
            "      --stats             print load time, tok/s, peak RSS (and I/O figures) to stderr\n"
            "      --stats-json FILE   write the same figures as one JSON object to FILE (for benchmarks)\n"
            "      --json              one JSON object per generated token on stdout\n"
            "      --top-logits K      with --json: include the K best [id, logit] pairs\n"
            "      --quiet             no prompt echo, no progress bars\n");
}

typedef struct run_opts {
    gen_opts g;
    const char *prompt, *prompt_file, *stats_json;
    long top_logits;
    bool json;
} run_opts;

static int parse_args(int argc, char **argv, run_opts *o)
{
    *o = (run_opts){ 0 };
    gen_opts_default(&o->g, 128);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int r = gen_opt_parse(argc, argv, &i, &o->g);
        if (r < 0) return -1;
        if (r > 0) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 1; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { if (!cli_val(argc, argv, &i, &o->prompt)) return -1; }
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { if (!cli_val(argc, argv, &i, &o->prompt_file)) return -1; }
        else if (!strcmp(a, "--top-logits")) { if (!cli_val(argc, argv, &i, &v) || !cli_int(a, v, 0, 1000, &o->top_logits)) return -1; }
        else if (!strcmp(a, "--stats-json")) { if (!cli_val(argc, argv, &i, &o->stats_json)) return -1; }
        else if (!strcmp(a, "--json")) o->json = true;
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
        fprintf(f, ",\"budget\":%" PRIu64 ",\"planned_bytes\":%" PRIu64 ",\"pred_tok_s\":%.4f,\"pred_io_s\":%.4f,"
                "\"pred_compute_s\":%.4f,\"disk_bw\":%.0f,\"compute_bw\":%.0f,\"blocks_resident\":%d,"
                "\"lm_head_resident\":%s,\"kv\":\"%s\",\"n_batch\":%d,\"chunk_bytes\":%" PRIu64 ",\"prefetch\":%d",
                req->budget, plan->total_bytes, plan->pred_tok_s, plan->pred_io_s, plan->pred_compute_s, req->disk_bw,
                req->compute_bw, plan->n_layers_resident,
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

/* Log lines from the library: warnings always, the plan line unless --json/--quiet, notes unless --json. */
typedef struct log_ctx { bool json, quiet; sl_progress *bar; } log_ctx;

static void cli_log(void *user, int level, const char *msg)
{
    log_ctx *lc = user;
    if (level == SLUICE_LOG_INFO && (lc->json || lc->quiet)) return;
    if (level == SLUICE_LOG_NOTE && lc->json) return;
    sl_progress_clear(lc->bar);
    fprintf(stderr, "sluice: %s%s\n", level == SLUICE_LOG_NOTE ? "note: " : "", msg);
}

static void cli_progress(void *user, const char *stage, uint64_t done, uint64_t total)
{
    log_ctx *lc = user;
    sl_progress_update(lc->bar, stage, done, total);
}

/* Save the session; false (after a warning) when that failed. */
static bool save_session(sluice_ctx *C, const char *path, sluice_session_stats *st)
{
    char err[SL_ERRLEN];
    if (sluice_session_save(C, path, NULL, 0, st, err, sizeof err)) {
        fprintf(stderr, "sluice: warning: %s\n", err);
        return false;
    }
    return true;
}

int cmd_run(int argc, char **argv)
{
    run_opts o;
    int pr = parse_args(argc, argv, &o);
    if (pr) return pr > 0 ? 0 : 2;
    if (!o.g.model) o.g.model = cli_default_model();
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
    sluice_model *M = NULL;
    sluice_ctx *C = NULL;
    sluice_sampler *smp = NULL;
    int32_t *toks = NULL;
    uint64_t *lat = NULL;   /* per-token decode latency */
    sluice_session_stats ss_load = { 0 }, ss_save = { 0 };
    bool sess_loaded = false, sess_saved = false;
    int64_t n_evaluated = 0;
    uint64_t t0 = sl_now_ns();
    sl_progress bar;
    sl_progress_init(&bar, sl_progress_tty() && !o.g.quiet && !o.json);
    log_ctx lc = { o.json, o.g.quiet, &bar };

    struct sigaction sa = { .sa_handler = on_signal };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    sluice_params sp;
    if (!gen_opts_params(&o.g, &sp)) goto done;
    sp.log = cli_log;
    sp.progress = cli_progress;
    sp.user = &lc;
    if (sluice_open(o.g.model, &sp, &M, err, sizeof err)) { sl_progress_clear(&bar); cli_err("%s", err); goto done; }
    if (sluice_ctx_new(M, &C, err, sizeof err)) { cli_err("%s", err); goto done; }
    g_ctx = C;
    if (g_interrupted) sluice_cancel(C);   /* a signal during loading stops the first evaluation */
    long n_ctx = sluice_n_ctx(C);

    int flags = SLUICE_TOK_ADD_SPECIAL | (o.g.special ? SLUICE_TOK_PARSE_SPECIAL : 0);
    int64_t nt = sluice_tokenize(M, ptext, (ptrdiff_t)plen, flags, NULL, 0);
    if (nt < 0) { cli_err("tokenizing the prompt failed: %s", strerror((int)-nt)); goto done; }
    if (nt == 0) { cli_err("the prompt is empty and the model adds no BOS token: nothing to evaluate"); goto done; }
    if (nt + o.g.n_predict > n_ctx && nt > n_ctx) {
        cli_err("the prompt has %" PRId64 " tokens, more than the context of %ld (raise -c)", nt, n_ctx);
        goto done;
    }
    toks = malloc((size_t)(nt + o.g.n_predict + 1) * sizeof *toks);
    lat = malloc((size_t)(o.g.n_predict + 1) * sizeof *lat);
    if (!toks || !lat) { cli_err("out of memory"); goto done; }
    sluice_tokenize(M, ptext, (ptrdiff_t)plen, flags, toks, (int)nt);
    smp = sluice_sampler_new(M, &o.g.sp);
    if (!smp) { cli_err("out of memory"); goto done; }
    if (o.g.session) {
        int r = sluice_session_load(C, o.g.session, NULL, NULL, &ss_load, err, sizeof err);
        if (r == 0) sess_loaded = true;
        else if (r != -ENOENT) fprintf(stderr, "sluice: warning: %s; evaluating the prompt from scratch\n", err);
    }
    uint64_t t_load = sl_now_ns();

    sl_utf8_stream us = { 0 };
    char piece[512], outb[512 + 8];
    if (!o.g.quiet && !o.json) {
        /* echo the prompt as the model sees it (detokenized), so output reads as one text */
        for (int64_t i = 0; i < nt; i++) {
            int pl = sluice_token_piece(M, toks[i], false, piece, sizeof piece);
            if (pl > (int)sizeof piece) pl = sizeof piece;
            if (pl > 0) fwrite(outb, 1, sl_utf8_stream_feed(&us, piece, (size_t)pl, outb), stdout);
        }
        fflush(stdout);
    }
    /* Only the tokens past what the session already holds are evaluated. */
    int rc = sluice_prefill(C, toks, (int)nt);
    sl_progress_clear(&bar);
    if (rc >= 0) { n_evaluated = rc; rc = 0; }
    uint64_t t_prompt = sl_now_ns();
    if (rc == 0 && o.g.session && (n_evaluated > 0 || !sess_loaded)) {
        sess_saved = save_session(C, o.g.session, &ss_save);
        if (!sess_saved && o.g.n_predict == 0) { status = 1; goto done; }
    }
    uint64_t t_saved = sl_now_ns();
    int64_t n_gen = 0, n_at_save = sluice_n_past(C);
    uint64_t t_first = 0;
    while (rc == 0 && n_gen < o.g.n_predict) {
        int32_t next = sluice_sample(smp, C);
        if (o.json) {
            int pl = sluice_token_piece(M, next, false, piece, sizeof piece);
            if (pl > (int)sizeof piece) pl = sizeof piece;
            if (pl < 0) pl = 0;
            printf("{\"id\":%d,\"text\":", next);
            json_str(stdout, piece, (size_t)pl);
            if (o.top_logits) json_top(stdout, sluice_sampler_logits(smp), M->m->cfg.vocab, (int)o.top_logits);
            printf("}\n");
        }
        toks[nt + n_gen++] = next;
        if (sluice_token_is_eog(M, next)) break;
        if (!o.json) {
            int pl = sluice_token_piece(M, next, false, piece, sizeof piece);
            if (pl > (int)sizeof piece) pl = sizeof piece;
            if (pl > 0) fwrite(outb, 1, sl_utf8_stream_feed(&us, piece, (size_t)pl, outb), stdout);
        }
        fflush(stdout);
        if (n_gen == o.g.n_predict) break;
        if (sluice_n_past(C) >= n_ctx) { fprintf(stderr, "\nsluice: context full (-c %ld)\n", n_ctx); break; }
        if (n_gen == 1) t_first = sl_now_ns();
        uint64_t ts = sl_now_ns();
        rc = sluice_eval(C, &next, 1);
        lat[n_gen - 1] = sl_now_ns() - ts;
    }
    if (!o.json) {
        fwrite(outb, 1, sl_utf8_stream_flush(&us, outb), stdout);
        printf("\n");
    }
    fflush(stdout);
    uint64_t t_end = sl_now_ns();
    if (rc == -ECANCELED) {
        fprintf(stderr, "sluice: interrupted after %" PRId64 " tokens\n", n_gen);
        status = g_interrupted == SIGTERM ? 143 : 130;
    } else if (rc) {
        cli_err("%s", sluice_ctx_error(C));
        status = 1;
    } else {
        status = 0;
    }
    /* at exit the session also keeps the generated tokens (all but the last, which was never evaluated) */
    if (o.g.session && sluice_n_past(C) > 0 && (sluice_n_past(C) != n_at_save || (!sess_saved && !sess_loaded)))
        sess_saved = save_session(C, o.g.session, &ss_save) || sess_saved;
    const sl_plan *plan = M->planned ? M->plan : NULL;
    if (o.stats_json) {
        int64_t n_dec = n_gen > 1 ? n_gen - 1 : 0;
        write_stats_json(o.stats_json, M->m, M->stream, plan, &M->req, n_evaluated, t_prompt - t_load, n_dec,
                         t_first && n_dec ? t_end - t_first : 0, lat, t_end - t_load, status);
    }
    if (o.g.stats) {
        double load_s = (t_load - t0) / 1e9, pp_s = (t_prompt - t_load) / 1e9;
        int64_t n_dec = n_gen > 1 ? n_gen - 1 : 0;
        double dec_s = t_first && n_dec ? (t_end - t_first) / 1e9 : 0;
        fprintf(stderr, "sluice: load %.3f s | prompt %" PRId64 " tok in %.3f s (%.2f tok/s) | decode %" PRId64
                " tok in %.3f s (%.2f tok/s) | peak RSS %.1f MiB\n",
                load_s, n_evaluated, pp_s, pp_s > 0 ? n_evaluated / pp_s : 0, n_dec, dec_s, dec_s > 0 ? n_dec / dec_s : 0,
                peak_rss_bytes() / 1048576.0);
        print_stream_stats(M->stream, M->m, lat, n_dec, t_end - t_load);
        if (plan) {
            fprintf(stderr, "sluice: budget %.1f MiB: planned %.1f MiB (predicted %.2f tok/s), measured peak RSS %.1f MiB\n",
                    M->req.budget / 1048576.0, plan->total_bytes / 1048576.0, plan->pred_tok_s, peak_rss_bytes() / 1048576.0);
            fprintf(stderr, "sluice: prediction rates: disk %s; compute %s\n", M->req.disk_how, M->req.compute_how);
        }
        if (o.g.session) {
            if (sess_loaded)
                fprintf(stderr, "sluice: session: loaded %d tokens (%.2f MiB, %.2f MiB uncompressed) in %.3f s; reused %"
                        PRId64 " of %" PRId64 " prompt tokens\n", ss_load.n_tokens, ss_load.file_bytes / 1048576.0,
                        ss_load.raw_bytes / 1048576.0, ss_load.seconds, nt - n_evaluated, nt);
            if (sess_saved)
                fprintf(stderr, "sluice: session: saved %d tokens, %.2f MiB (%.2f MiB uncompressed, ratio %.2f) in %.3f s "
                        "(after the prompt: %.3f s)\n", ss_save.n_tokens, ss_save.file_bytes / 1048576.0,
                        ss_save.raw_bytes / 1048576.0,
                        ss_save.file_bytes ? (double)ss_save.raw_bytes / (double)ss_save.file_bytes : 0, ss_save.seconds,
                        (t_saved - t_prompt) / 1e9);
        }
    }
done:
    g_ctx = NULL;
    free(lat);
    free(toks);
    sluice_sampler_free(smp);
    sluice_ctx_free(C);
    sluice_close(M);
    free(ptext);
    return status;
}
