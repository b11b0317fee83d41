/* runtime/cli/run.c — `sluice run`: prompt in, text out.
 * Built on the public API (include/sluice.h) alone: the figures of --stats and --stats-json come from
 * sluice_get_stats, sluice_model_get_plan and sluice_page_cache. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "include/sluice.h"
#include "kernels/clock.h"
#include "runtime/cli/cli.h"
#include "runtime/cli/genopts.h"
#include "runtime/cli/sigwatch.h"
#include "runtime/api/progress.h"
#include "runtime/text/tokenizer.h"

static volatile sig_atomic_t g_interrupted;
static sluice_ctx *volatile g_ctx;   /* the context a signal cancels (NULL until it exists) */

/* SIGINT, SIGTERM and SIGHUP (a closed terminal): stop the evaluation in progress; the run then
 * saves its session and exits 130 / 143 / 129.  A second signal leaves at once. */
static void on_signal(int sig)
{
    if (g_interrupted) _exit(128 + sig);   /* second signal: leave at once */
    g_interrupted = sig;
    sluice_ctx *c = g_ctx;
    if (c) sluice_cancel(c);
    sigwatch_signal(sig);   /* ends the run if the evaluation cannot get to its next layer */
}

enum { RUN_PROMPT = 1, RUN_FILE, RUN_STATS_JSON, RUN_JSON, RUN_TOP_LOGITS, RUN_MOE_TRACE, RUN_JSON_SCHEMA, RUN_JSON_OBJECT };

static const cli_opt run_in_table[] = {
    { RUN_PROMPT, "-p|--prompt", "TEXT", "prompt text" },
    { RUN_FILE, "-f|--file", "FILE", "read the prompt from a file (at most what the context can hold, plus a margin)" },
    { 0, NULL, NULL, NULL },
};
static const cli_opt run_out_table[] = {
    { 0, NULL, NULL, "output" },
    { RUN_STATS_JSON, "--stats-json", "FILE", "write the --stats figures as one JSON object to FILE (for benchmarks)" },
    { RUN_JSON, "--json", NULL, "one JSON object per generated token on stdout" },
    { RUN_TOP_LOGITS, "--top-logits", "K", "with --json: include the K best [id, logit] pairs" },
    { RUN_JSON_SCHEMA, "--json-schema", "FILE", "constrain the answer to one JSON value valid against the JSON Schema\n"
      "in FILE (a subset: docs/structured-output.md; other keywords are refused)" },
    { RUN_JSON_OBJECT, "--json-object", NULL, "constrain the answer to one JSON object (OpenAI's json_object)" },
    { RUN_MOE_TRACE, "--moe-trace", "FILE", "mixture-of-experts models: write every position's expert choices to FILE "
      "(\"pass block position experts...\" per line; bench/moe_cache_sim replays it)" },
    { 0, NULL, NULL, NULL },
};
static const cli_opt *const run_tables[] = { run_in_table, gen_opt_table, run_out_table, gen_mem_table, cli_meta_table,
                                              NULL };
const cli_cmd cli_cmd_run = {
    "run", "generate text from a prompt", "sluice run [-m MODEL] -p PROMPT [options]", run_tables,
    "-n defaults to 128; with --session, -n 0 evaluates the prompt, saves the session and exits.\n"
    "Exit status: 0 done (also when the context is full), 1 error, 2 bad usage, 129/130/143 SIGHUP/SIGINT/SIGTERM.\n"
};

typedef struct run_opts {
    gen_opts g;
    const char *prompt, *prompt_file, *stats_json, *moe_trace;
    long top_logits;
    bool json;
    const char *json_schema;  /* --json-schema FILE */
    bool json_object;         /* --json-object */
    char *schema;             /* FILE's text, checked */
} run_opts;

static int run_opt_apply(int argc, char **argv, int *i, const cli_opt *op, run_opts *o)
{
    const char *a = argv[*i], *v;
    switch (op->id) {
    case RUN_PROMPT: return cli_val(argc, argv, i, &o->prompt) ? 0 : -1;
    case RUN_FILE: return cli_val(argc, argv, i, &o->prompt_file) ? 0 : -1;
    case RUN_TOP_LOGITS: return cli_val(argc, argv, i, &v) && cli_int(a, v, 1, 1000, &o->top_logits) ? 0 : -1;
    case RUN_STATS_JSON: return cli_val(argc, argv, i, &o->stats_json) ? 0 : -1;
    case RUN_MOE_TRACE: return cli_val(argc, argv, i, &o->moe_trace) ? 0 : -1;
    case RUN_JSON: o->json = true; return 0;
    case RUN_JSON_SCHEMA: return cli_val(argc, argv, i, &o->json_schema) ? 0 : -1;
    case RUN_JSON_OBJECT: o->json_object = true; return 0;
    default: return 0;
    }
}

static char *read_bounded(FILE *f, const char *path, size_t cap, size_t *len, bool *truncated);

/* --json-schema FILE: read and check it before the model is opened.  0, or -1 after printing why. */
static int load_schema(run_opts *o)
{
    if (!o->json_schema) return 0;
    FILE *f = fopen(o->json_schema, "rb");
    if (!f) { cli_err("--json-schema %s: %s", o->json_schema, strerror(errno)); return -1; }
    size_t len = 0;
    bool truncated = false;
    o->schema = read_bounded(f, o->json_schema, 1u << 20, &len, &truncated);
    fclose(f);
    if (!o->schema) return -1;
    o->schema[len] = 0;
    char err[SLUICE_ERRLEN];
    if (truncated) cli_err("--json-schema %s: larger than 1 MiB", o->json_schema);
    else if (strlen(o->schema) != len) cli_err("--json-schema %s: a NUL byte in the file", o->json_schema);
    else if (sluice_json_schema_check(o->schema, err, sizeof err)) cli_err("--json-schema %s: %s", o->json_schema, err);
    else return 0;
    free(o->schema);
    o->schema = NULL;
    return -1;
}

/* 0: go on; 1: done (help printed); -1: bad usage (printed). */
static int parse_args(int argc, char **argv, run_opts *o)
{
    *o = (run_opts){ 0 };
    gen_opts_default(&o->g, 128);
    for (int i = 1; i < argc; i++) {
        const cli_opt *op = cli_find(run_tables, argv[i]);
        if (!op) { cli_unknown(&cli_cmd_run, argv[i]); return -1; }
        if (cli_meta(&cli_cmd_run, op)) return 1;
        int r = gen_opt_apply(argc, argv, &i, op, &o->g);
        if (r < 0) return -1;
        if (r == 0 && run_opt_apply(argc, argv, &i, op, o)) return -1;
    }
    if (o->prompt && o->prompt_file) { cli_err("run: give -p or -f, not both"); return -1; }
    if (o->top_logits && !o->json) { cli_err("run: --top-logits K needs --json (the logits go into the JSON lines)"); return -1; }
    if (!gen_opts_check(&o->g)) return -1;
    if (o->json_schema && o->json_object) { cli_err("run: give --json-schema FILE or --json-object, not both"); return -1; }
    if ((o->json_schema || o->json_object) && o->g.sp.ignore_eog) {
        cli_err("run: --ignore-eos with %s: a constrained answer ends where its JSON value does (end of generation is then "
                "the only token allowed)", o->json_schema ? "--json-schema" : "--json-object");
        return -1;
    }
    return load_schema(o);
}

/* Read at most `cap` bytes of f; *truncated when there was more. */
static char *read_bounded(FILE *f, const char *path, size_t cap, size_t *len, bool *truncated)
{
    size_t n = 0, size = 4096;
    char *buf = malloc(size + 1);
    *truncated = false;
    while (buf) {
        size_t want = size - n < cap + 1 - n ? size - n : cap + 1 - n;
        size_t r = fread(buf + n, 1, want, f);
        n += r;
        if (n > cap) { n = cap; *truncated = true; break; }
        if (r < want) break;
        if (n == size) { char *nb = realloc(buf, (size *= 2) + 1); if (!nb) { free(buf); buf = NULL; } else buf = nb; }
    }
    if (!buf || ferror(f)) { cli_err("cannot read prompt file %s%s", path, buf ? "" : ": out of memory"); free(buf); return NULL; }
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

/* Log lines from the library: warnings always, the plan line unless --json/--quiet, notes unless --json. */
typedef struct log_ctx { bool json, quiet; sl_progress *bar; } log_ctx;

/* Everything one `sluice run` holds, so that its steps are functions of one argument. */
typedef struct run_state {
    run_opts o;
    sluice_model *M;
    sluice_ctx *C;
    sluice_sampler *smp;
    char *ptext;
    size_t plen;
    int32_t *toks;                 /* prompt, then generated tokens */
    int64_t nt;                    /* prompt tokens */
    uint64_t *lat;                 /* per-token decode latency */
    int n_vocab;
    long n_ctx;
    sluice_session_stats ss_load, ss_save;
    FILE *moe_trace;               /* --moe-trace */
    bool sess_loaded, sess_saved;
    int64_t n_evaluated, n_gen, n_at_save;
    uint64_t t0, t_load, t_prompt, t_saved, t_first, t_end, t_prev;
    int rc;                        /* of the last evaluation */
    long n_predict;                /* -n, with -1 made the room left in the context */
    FILE *prompt_f;                /* -f FILE, opened before the model so that a typo fails fast */
    bool keep_session;             /* --session names a file that is not ours to replace: never save */
    bool ctx_full, reverse_hit;    /* why generation ended early */
    int out_errno;                 /* stdout failed (ENOSPC, EBADF, ...): 0 while fine */
    char tail[256];                /* the end of the generated text, for -r */
    size_t tail_len;
    sl_utf8_stream us;
    sl_progress bar;
    log_ctx lc;
} run_state;

static int64_t n_decoded(const run_state *r) { return r->n_gen > 1 ? r->n_gen - 1 : 0; }
static uint64_t decode_ns(const run_state *r) { return r->t_first && n_decoded(r) ? r->t_end - r->t_first : 0; }

/* The streaming half of --stats: what was read, how fast, how long compute waited for it. */
static void print_stream_stats(run_state *r)
{
    int64_t n_lat = n_decoded(r);
    uint64_t *lat = r->lat, run_ns = r->t_end - r->t_load;
    if (n_lat > 0) {
        qsort(lat, (size_t)n_lat, sizeof *lat, cmp_u64);
        fprintf(stderr, "sluice: token latency median %.1f ms, p90 %.1f ms\n", lat[n_lat / 2] / 1e6,
                lat[(n_lat * 9) / 10 < n_lat ? (n_lat * 9) / 10 : n_lat - 1] / 1e6);
    }
    sluice_stats st;
    sluice_get_stats(r->M, r->C, &st);
    if (strcmp(st.backend, "resident")) {
        double io_s = run_ns / 1e9;
        fprintf(stderr, "sluice: stream: backend %s, %" PRId64 " pieces per pass (largest %.2f MiB, %.1f MiB per pass), "
                "buffers %.1f MiB\n", st.backend, st.stream_pieces_per_pass, st.stream_max_piece / 1048576.0,
                st.stream_pass_bytes / 1048576.0, st.stream_buffer_bytes / 1048576.0);
        fprintf(stderr, "sluice: stream: read %.1f MiB in %" PRIu64 " reads (%.2f GB/s over the run), "
                "compute on streamed pieces %.3f s, blocked on I/O %.3f s, %" PRIu64 " embedding rows\n",
                st.stream_bytes_read / 1048576.0, st.stream_reads, io_s > 0 ? st.stream_bytes_read / io_s / 1e9 : 0,
                st.stream_compute_s, st.stream_wait_s, st.stream_embd_rows);
        if (st.stream_expert_wants)
            fprintf(stderr, "sluice: experts: %.1f MiB of routed experts read when picked, in %" PRIu64 " pieces over %"
                    PRIu64 " block passes (%.2f MiB per block pass)\n", st.stream_expert_bytes / 1048576.0,
                    st.stream_expert_pieces, st.stream_expert_wants,
                    st.stream_expert_bytes / 1048576.0 / (double)st.stream_expert_wants);
        if (st.expert_cache_entries) {
            const uint64_t asked = st.expert_hits + st.expert_misses;
            fprintf(stderr, "sluice: expert cache: %" PRId64 " experts (%.1f MiB), %" PRIu64 " hits of %" PRIu64
                    " asked (%.1f%%)\n", st.expert_cache_entries, st.expert_cache_bytes / 1048576.0, st.expert_hits,
                    asked, asked ? 100.0 * (double)st.expert_hits / (double)asked : 0);
        }
        if (st.expert_prefetch_units)
            fprintf(stderr, "sluice: expert prefetch: %" PRIu64 " experts read on a guess, %" PRIu64 " taken (%.1f%%), "
                    "%.1f MiB read, %.1f MiB of it not taken, %" PRIu64 " failed reads\n", st.expert_prefetch_units,
                    st.expert_prefetch_used, 100.0 * (double)st.expert_prefetch_used / (double)st.expert_prefetch_units,
                    st.expert_prefetch_bytes / 1048576.0, st.expert_prefetch_wasted / 1048576.0, st.expert_prefetch_failed);
    }
    uint64_t res, fsz;
    if (sluice_page_cache(r->M, &res, &fsz) == 0)
        fprintf(stderr, "sluice: page cache: %.2f MiB of the model file (%.2f%%) resident at exit\n", res / 1048576.0,
                fsz ? 100.0 * res / fsz : 0);
}

static const char *kv_name(int kv, bool spilled)
{
    return spilled ? "spill" : kv == SLUICE_KV_Q8_0 ? "q8_0" : kv == SLUICE_KV_F32 ? "f32" : "f16";
}

/* One JSON object with every figure a benchmark needs.  Sorting lat is harmless (stats use it sorted).
 * false after printing why the file could not be written. */
static bool write_stats_json(run_state *r, int status)
{
    const char *path = r->o.stats_json;
    FILE *f = fopen(path, "w");
    if (!f) { cli_err("--stats-json: cannot write %s: %s", path, strerror(errno)); return false; }
    int64_t n_dec = n_decoded(r);
    uint64_t prompt_ns = r->t_prompt - r->t_load, dec_ns = decode_ns(r), run_ns = r->t_end - r->t_load, *lat = r->lat;
    if (n_dec > 0) qsort(lat, (size_t)n_dec, sizeof *lat, cmp_u64);
    uint64_t res = 0, fsz = 0;
    sluice_page_cache(r->M, &res, &fsz);
    fprintf(f, "{\"status\":%d,\"model_bytes\":%" PRIu64 ",\"n_prompt\":%" PRId64 ",\"prompt_s\":%.6f,\"prompt_tok_s\":%.4f,"
            "\"n_decode\":%" PRId64 ",\"decode_s\":%.6f,\"decode_tok_s\":%.4f,\"lat_median_ms\":%.3f,\"lat_p90_ms\":%.3f,"
            "\"peak_rss\":%" PRIu64 ",\"page_cache_at_exit\":%" PRIu64 ",\"seed\":%" PRIu64 ",\"n_ctx\":%ld",
            status, fsz, r->n_evaluated, prompt_ns / 1e9, prompt_ns ? r->n_evaluated / (prompt_ns / 1e9) : 0, n_dec,
            dec_ns / 1e9, dec_ns ? n_dec / (dec_ns / 1e9) : 0, n_dec ? lat[n_dec / 2] / 1e6 : 0,
            n_dec ? lat[(n_dec * 9) / 10 < n_dec ? (n_dec * 9) / 10 : n_dec - 1] / 1e6 : 0, peak_rss_bytes(), res,
            r->o.g.sp.seed, r->n_ctx);
    sluice_plan_info pi;
    sluice_model_get_plan(r->M, &pi);
    if (pi.planned)
        fprintf(f, ",\"budget\":%" PRIu64 ",\"planned_bytes\":%" PRIu64 ",\"pred_tok_s\":%.4f,\"pred_io_s\":%.4f,"
                "\"pred_compute_s\":%.4f,\"disk_bw\":%.0f,\"compute_bw\":%.0f,\"blocks_resident\":%d,"
                "\"lm_head_resident\":%s,\"kv\":\"%s\",\"n_batch\":%d,\"chunk_bytes\":%" PRIu64 ",\"prefetch\":%d",
                pi.budget, pi.planned_bytes, pi.pred_tok_s, pi.pred_io_s, pi.pred_compute_s, pi.disk_bw, pi.compute_bw,
                pi.plan_layers_resident, pi.plan_lm_head_resident ? "true" : "false",
                kv_name(pi.plan_kv_type, pi.plan_kv_spilled), pi.plan_n_batch, pi.plan_chunk_bytes, pi.plan_prefetch);
    sluice_stats st;
    sluice_get_stats(r->M, r->C, &st);
    fprintf(f, ",\"passes\":%" PRIu64 ",\"drafted\":%" PRIu64 ",\"accepted\":%" PRIu64 ",\"tokens_per_pass\":%.4f,"
            "\"draft_max\":%d", st.n_passes, st.n_drafted, st.n_accepted,
            st.n_passes ? (double)st.n_gen_tokens / st.n_passes : 0, st.draft_max);
    fprintf(f, ",\"drafter\":\"%s\"", st.drafter ? st.drafter : "");
    if (st.drafter && !strcmp(st.drafter, "model"))
        fprintf(f, ",\"draft_s\":%.6f,\"draft_evals\":%" PRIu64, st.draft_s, st.n_draft_evals);
    if (pi.draft_planned)
        fprintf(f, ",\"draft_bytes\":%" PRIu64 ",\"draft_resident\":%s,\"pred_tok_s_alone\":%.4f,\"draft_breakeven\":%.4f",
                pi.draft_bytes, pi.draft_resident ? "true" : "false", pi.pred_tok_s_alone,
                pi.draft_breakeven > 1 ? -1.0 : pi.draft_breakeven);
    if (strcmp(st.backend, "resident"))
        fprintf(f, ",\"backend\":\"%s\",\"bytes_read\":%" PRIu64 ",\"reads\":%" PRIu64 ",\"pass_bytes\":%" PRIu64
                ",\"wait_s\":%.6f,\"compute_s\":%.6f,\"read_gbs\":%.4f",
                st.backend, st.stream_bytes_read, st.stream_reads, st.stream_pass_bytes, st.stream_wait_s,
                st.stream_compute_s, run_ns ? st.stream_bytes_read / (run_ns / 1e9) / 1e9 : 0);
    if (strcmp(st.backend, "resident") && st.stream_expert_wants)
        fprintf(f, ",\"expert_bytes\":%" PRIu64 ",\"expert_pieces\":%" PRIu64 ",\"expert_block_passes\":%" PRIu64
                ",\"expert_hits\":%" PRIu64 ",\"expert_misses\":%" PRIu64 ",\"expert_cache_entries\":%" PRId64
                ",\"expert_cache_bytes\":%" PRIu64, st.stream_expert_bytes, st.stream_expert_pieces, st.stream_expert_wants,
                st.expert_hits, st.expert_misses, st.expert_cache_entries, st.expert_cache_bytes);
    if (strcmp(st.backend, "resident") && st.expert_prefetch_units)
        fprintf(f, ",\"expert_prefetch_units\":%" PRIu64 ",\"expert_prefetch_used\":%" PRIu64
                ",\"expert_prefetch_bytes\":%" PRIu64 ",\"expert_prefetch_wasted\":%" PRIu64
                ",\"expert_prefetch_failed\":%" PRIu64, st.expert_prefetch_units, st.expert_prefetch_used,
                st.expert_prefetch_bytes, st.expert_prefetch_wasted, st.expert_prefetch_failed);
    if (!strcmp(st.backend, "resident"))
        fprintf(f, ",\"backend\":\"resident\",\"bytes_read\":0");
    fprintf(f, "}\n");
    bool ok = !ferror(f);
    if (fclose(f) || !ok) { cli_err("--stats-json: writing %s failed: %s", path, strerror(errno)); return false; }
    return true;
}

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

/* Save the session; false (after the error) when that failed. */
static bool save_session(sluice_ctx *C, const char *path, bool overwrite, sluice_session_stats *st)
{
    char err[SLUICE_ERRLEN];
    if (sluice_session_save_flags(C, path, NULL, 0, overwrite ? SLUICE_SESSION_OVERWRITE : 0, st, err, sizeof err)) {
        cli_err("%s", err);
        return false;
    }
    return true;
}

/* Open the model and a context; false after printing why. */
static bool run_open(run_state *r)
{
    char err[SLUICE_ERRLEN] = "";
    sluice_params sp;
    r->o.g.n_ctx = gen_default_ctx(&r->o.g);
    if (!gen_opts_params(&r->o.g, &sp)) return false;
    sp.log = cli_log;
    sp.progress = cli_progress;
    sp.user = &r->lc;
    if (sluice_open(r->o.g.model, &sp, &r->M, err, sizeof err)) { sl_progress_clear(&r->bar); cli_err("%s", err); return false; }
    if (sluice_ctx_new(r->M, &r->C, err, sizeof err)) { cli_err("%s", err); return false; }
    if (!gen_check_kv(&r->o.g, r->M, r->C) || gen_load_lookup(&r->o.g, r->M, r->C) < 0) return false;
    if (r->o.moe_trace) {
        if (!(r->moe_trace = fopen(r->o.moe_trace, "w"))) {
            cli_err("--moe-trace: cannot write %s: %s", r->o.moe_trace, strerror(errno));
            return false;
        }
        sluice_ctx_moe_trace(r->C, r->moe_trace);
    }
    g_ctx = r->C;
    if (g_interrupted) sluice_cancel(r->C);   /* a signal during loading stops the first evaluation */
    r->n_ctx = sluice_n_ctx(r->C);
    sluice_model_info mi;
    sluice_model_get_info(r->M, &mi);
    r->n_vocab = mi.n_vocab;
    r->n_predict = r->o.g.n_predict < 0 || r->o.g.n_predict > r->n_ctx ? r->n_ctx : r->o.g.n_predict;
    return true;
}

/* Tokenize the prompt into r->toks (with room for the tokens to generate); false after printing why. */
static bool run_tokenize(run_state *r)
{
    int flags = SLUICE_TOK_ADD_SPECIAL | (r->o.g.special ? SLUICE_TOK_PARSE_SPECIAL : 0);
    int64_t nt = sluice_tokenize(r->M, r->ptext, (ptrdiff_t)r->plen, flags, NULL, 0);
    if (nt < 0) { cli_err("tokenizing the prompt failed: %s", strerror((int)-nt)); return false; }
    if (nt == 0) { cli_err("the prompt is empty and the model adds no BOS token: nothing to evaluate"); return false; }
    if (nt > r->n_ctx) {
        cli_err("the prompt has %" PRId64 " tokens, more than the context of %ld (raise -c)", nt, r->n_ctx);
        return false;
    }
    r->nt = nt;
    r->toks = malloc((size_t)(nt + r->n_predict + 1) * sizeof *r->toks);
    r->lat = malloc((size_t)(r->n_predict + 1) * sizeof *r->lat);
    if (!r->toks || !r->lat) { cli_err("out of memory"); return false; }
    sluice_tokenize(r->M, r->ptext, (ptrdiff_t)r->plen, flags, r->toks, (int)nt);
    r->smp = sluice_sampler_new(r->M, &r->o.g.sp);
    if (!r->smp) { cli_err("out of memory"); return false; }
    char err[SLUICE_ERRLEN];
    if ((r->o.schema || r->o.json_object) && sluice_sampler_set_json_schema(r->smp, r->o.schema, err, sizeof err)) {
        cli_err("%s", err);
        return false;
    }
    return true;
}

static void run_load_session(run_state *r)
{
    char err[SLUICE_ERRLEN] = "";
    if (!r->o.g.session) return;
    int rc = sluice_session_load(r->C, r->o.g.session, NULL, NULL, &r->ss_load, err, sizeof err);
    if (rc == 0) { r->sess_loaded = true; return; }
    if (rc == -ENOENT) return;
    /* not a session of this model and KV type (or not a session at all): keep the file as it is
     * unless --session-overwrite says it may be replaced */
    r->keep_session = !r->o.g.session_overwrite;
    fprintf(stderr, "sluice: warning: %s; evaluating the prompt from scratch%s\n", err,
            r->keep_session ? " and keeping the file as it is (--session-overwrite replaces it)" : "");
}

/* Remember the end of the generated text (for -r). */
static void keep_tail(run_state *r, const char *s, size_t n)
{
    if (!r->o.g.n_reverse) return;
    if (n >= sizeof r->tail) { s += n - sizeof r->tail; n = sizeof r->tail; }
    if (r->tail_len + n > sizeof r->tail) {
        size_t drop = r->tail_len + n - sizeof r->tail;
        memmove(r->tail, r->tail + drop, r->tail_len - drop);
        r->tail_len -= drop;
    }
    memcpy(r->tail + r->tail_len, s, n);
    r->tail_len += n;
}

/* Write to stdout; a failure (a full disk, a closed descriptor) is remembered and ends the run. */
static void out_write(run_state *r, const char *s, size_t n)
{
    if (n && !r->out_errno && fwrite(s, 1, n, stdout) != n) r->out_errno = errno ? errno : EIO;
}

static void out_flush(run_state *r)
{
    if (!r->out_errno && (fflush(stdout) || ferror(stdout))) r->out_errno = errno ? errno : EIO;
}

/* Text of one token on stdout, whole UTF-8 characters only; generated text also feeds -r. */
static void emit_piece(run_state *r, int32_t id, bool generated)
{
    char piece[512], outb[512 + 8];
    int pl = sluice_token_piece(r->M, id, false, piece, sizeof piece);
    if (pl > (int)sizeof piece) pl = sizeof piece;
    if (pl <= 0) return;
    size_t n = sl_utf8_stream_feed(&r->us, piece, (size_t)pl, outb);
    out_write(r, outb, n);
    if (generated) keep_tail(r, outb, n);
}

/* Echo the prompt as the model sees it (detokenized), so the output reads as one text; then
 * evaluate what the session does not already hold, and save the session.  false: stop (status set). */
static void echo_prompt(run_state *r)
{
    if (r->o.g.quiet || r->o.json) return;
    for (int64_t i = 0; i < r->nt; i++) emit_piece(r, r->toks[i], false);
    out_flush(r);
}

static bool run_prompt(run_state *r, int *status)
{
    /* A progress bar owns the terminal's last line while the prompt is evaluated: the prompt is
     * echoed once the bar is gone, so the bar never erases it.  Without a bar it comes first. */
    bool bar = r->bar.on;
    if (!bar) echo_prompt(r);
    int rc = sluice_prefill(r->C, r->toks, (int)r->nt);
    sl_progress_clear(&r->bar);
    if (bar) echo_prompt(r);
    if (rc >= 0) { r->n_evaluated = rc; rc = 0; }
    r->rc = rc;
    r->t_prompt = sl_now_ns();
    if (rc == 0 && r->o.g.session && !r->keep_session && (r->n_evaluated > 0 || !r->sess_loaded)) {
        r->sess_saved = save_session(r->C, r->o.g.session, r->o.g.session_overwrite, &r->ss_save);
        if (!r->sess_saved) { *status = 1; return false; }   /* an unwritable --session is an error */
    }
    r->t_saved = sl_now_ns();
    return true;
}

/* One generated token as a JSON line. */
static void emit_json(run_state *r, int32_t id)
{
    char piece[512];
    int pl = sluice_token_piece(r->M, id, false, piece, sizeof piece);
    if (pl > (int)sizeof piece) pl = sizeof piece;
    if (pl < 0) pl = 0;
    printf("{\"id\":%d,\"text\":", id);
    json_str(stdout, piece, (size_t)pl);
    if (!cli_utf8_valid(piece, (size_t)pl)) {   /* a piece of a character: its bytes, to join with the next */
        fputs(",\"bytes\":[", stdout);
        for (int i = 0; i < pl; i++) printf("%s%u", i ? "," : "", (unsigned char)piece[i]);
        fputc(']', stdout);
    }
    if (r->o.top_logits) json_top(stdout, sluice_sampler_logits(r->smp), r->n_vocab, (int)r->o.top_logits);
    printf("}\n");
}

/* sluice_generate's callback: print the token (JSON line, or its whole UTF-8 characters), time it,
 * stop at -r or when stdout fails.  Every token is reported before the next one is chosen, so a
 * speculative pass's accepted drafts arrive one by one, each with its sampler logits. */
static int on_token(void *user, int32_t id, const char *text, size_t len)
{
    run_state *r = user;
    uint64_t now = sl_now_ns();
    if (id < 0) {   /* held-back bytes at the end */
        if (!r->o.json) out_write(r, text, len);
        return 0;
    }
    if (r->o.json) emit_json(r, id);
    r->toks[r->nt + r->n_gen++] = id;
    if (r->n_gen == 1) r->t_first = now;
    else r->lat[r->n_gen - 2] = now - r->t_prev;
    r->t_prev = now;
    if (!r->o.json && !sluice_token_is_eog(r->M, id)) {
        out_write(r, text, len);
        keep_tail(r, text, len);
    }
    out_flush(r);
    if (r->out_errno) return 1;
    if (r->o.g.n_reverse && gen_reverse_hit(&r->o.g, r->tail, r->tail_len)) { r->reverse_hit = true; return 1; }
    return 0;
}

/* Sample, print and evaluate until -n, end of generation, a full context or an error (with
 * drafted tokens verified in the same pass when the context drafts: docs/speculative.md). */
static void run_generate(run_state *r)
{
    r->n_at_save = sluice_n_past(r->C);
    if (r->rc == 0 && r->n_predict > 0 && !r->out_errno) {
        int g = sluice_generate(r->C, r->smp, (int)r->n_predict, on_token, r);
        if (g < 0) r->rc = g;
        r->ctx_full = sluice_stop_reason(r->C) == SLUICE_STOP_CTX_FULL;
    }
    if (!r->o.json) out_write(r, "\n", 1);
    out_flush(r);
    r->t_end = sl_now_ns();
    /* the whole context used is a normal end, said plainly (not an error) */
    if (r->ctx_full && !r->o.g.quiet && !r->o.json)
        fprintf(stderr, "sluice: reached the end of the context (%ld tokens; -c sets it)\n", r->n_ctx);
}

/* The exit status of the generation (an interruption or an error is reported here). */
static int run_status(run_state *r)
{
    if (r->out_errno) { cli_err("writing the output failed: %s", strerror(r->out_errno)); return 1; }
    if (r->rc == -ECANCELED) {
        fprintf(stderr, "sluice: interrupted after %" PRId64 " tokens\n", r->n_gen);
        return 128 + (g_interrupted ? g_interrupted : SIGINT);
    }
    if (r->rc) { cli_err("%s", sluice_ctx_error(r->C)); return 1; }
    return 0;
}

/* At exit the session also keeps the generated tokens (all but the last, which was never evaluated).
 * false when that save failed. */
static bool run_save_final(run_state *r)
{
    int n = sluice_n_past(r->C);
    if (r->o.g.session && !r->keep_session && n > 0 && (n != r->n_at_save || (!r->sess_saved && !r->sess_loaded))) {
        bool ok = save_session(r->C, r->o.g.session, r->o.g.session_overwrite, &r->ss_save);
        r->sess_saved = ok || r->sess_saved;
        return ok;
    }
    return true;
}

static void print_session_stats(const run_state *r)
{
    const sluice_session_stats *l = &r->ss_load, *s = &r->ss_save;
    if (r->sess_loaded)
        fprintf(stderr, "sluice: session: loaded %d tokens (%.2f MiB, %.2f MiB uncompressed) in %.3f s; reused %"
                PRId64 " of %" PRId64 " prompt tokens\n", l->n_tokens, l->file_bytes / 1048576.0,
                l->raw_bytes / 1048576.0, l->seconds, r->nt - r->n_evaluated, r->nt);
    if (r->sess_saved)
        fprintf(stderr, "sluice: session: saved %d tokens, %.2f MiB (%.2f MiB uncompressed, ratio %.2f) in %.3f s "
                "(after the prompt: %.3f s)\n", s->n_tokens, s->file_bytes / 1048576.0, s->raw_bytes / 1048576.0,
                s->file_bytes ? (double)s->raw_bytes / (double)s->file_bytes : 0, s->seconds,
                (r->t_saved - r->t_prompt) / 1e9);
}

/* --stats: load, prompt and decode rates, peak RSS, the stream and the plan against the budget. */
static void print_stats(run_state *r)
{
    double load_s = (r->t_load - r->t0) / 1e9, pp_s = (r->t_prompt - r->t_load) / 1e9, dec_s = decode_ns(r) / 1e9;
    int64_t n_dec = n_decoded(r);
    fprintf(stderr, "sluice: load %.3f s | prompt %" PRId64 " tok in %.3f s (%.2f tok/s) | decode %" PRId64
            " tok in %.3f s (%.2f tok/s) | peak RSS %.1f MiB\n",
            load_s, r->n_evaluated, pp_s, pp_s > 0 ? r->n_evaluated / pp_s : 0, n_dec, dec_s, dec_s > 0 ? n_dec / dec_s : 0,
            peak_rss_bytes() / 1048576.0);
    sluice_stats gs;
    sluice_get_stats(r->M, r->C, &gs);
    if (gs.draft_max > 0)
        fprintf(stderr, "sluice: speculative: %" PRIu64 " tokens in %" PRIu64 " passes (%.2f tokens per pass), drafted %"
                PRIu64 ", accepted %" PRIu64 " (%.0f%%), up to %d drafts per pass\n", gs.n_gen_tokens, gs.n_passes,
                gs.n_passes ? (double)gs.n_gen_tokens / gs.n_passes : 0, gs.n_drafted, gs.n_accepted,
                gs.n_drafted ? 100.0 * gs.n_accepted / gs.n_drafted : 0, gs.draft_max);
    if (gs.drafter && !strcmp(gs.drafter, "model"))
        fprintf(stderr, "sluice: draft model: %" PRIu64 " tokens evaluated in %.3f s\n", gs.n_draft_evals, gs.draft_s);
    if (r->o.g.sp.temp > 0)
        fprintf(stderr, "sluice: seed %" PRIu64 "%s\n", r->o.g.sp.seed,
                r->o.g.seed_given ? "" : " (chosen at random; --seed with it repeats this run)");
    print_stream_stats(r);
    sluice_plan_info pi;
    sluice_model_get_plan(r->M, &pi);
    if (pi.planned && pi.draft_planned) {
        fprintf(stderr, "sluice: budget %.1f MiB: planned %.1f MiB for the target + %.1f MiB for the draft model "
                "(predicted %.2f tok/s without drafts), measured peak RSS %.1f MiB\n",
                (pi.budget + pi.draft_bytes) / 1048576.0, pi.planned_bytes / 1048576.0, pi.draft_bytes / 1048576.0,
                pi.pred_tok_s, peak_rss_bytes() / 1048576.0);
        fprintf(stderr, "sluice: prediction rates: disk %s; compute %s\n", pi.disk_how, pi.compute_how);
    } else if (pi.planned) {
        fprintf(stderr, "sluice: budget %.1f MiB: planned %.1f MiB (predicted %.2f tok/s), measured peak RSS %.1f MiB\n",
                pi.budget / 1048576.0, pi.planned_bytes / 1048576.0, pi.pred_tok_s, peak_rss_bytes() / 1048576.0);
        fprintf(stderr, "sluice: prediction rates: disk %s; compute %s\n", pi.disk_how, pi.compute_how);
    }
    if (r->o.g.session) print_session_stats(r);
}

/* Longest prompt file read: no token of a vocabulary sluice knows is longer than 64 bytes on average
 * over a context, and a margin covers the rest; more cannot fit the context anyway. */
static size_t prompt_cap(long n_ctx) { return (size_t)n_ctx * 64 + (1u << 20); }

/* The prompt text: -f FILE (opened already), -p TEXT or empty (the BOS token alone).  false after
 * printing why. */
static bool run_read_prompt(run_state *r)
{
    if (r->prompt_f) {
        bool cut;
        size_t cap = prompt_cap(r->n_ctx);
        r->ptext = read_bounded(r->prompt_f, r->o.prompt_file, cap, &r->plen, &cut);
        fclose(r->prompt_f);
        r->prompt_f = NULL;
        if (cut)
            fprintf(stderr, "sluice: note: -f %s: read the first %.1f MiB only (a context of %ld tokens cannot hold more)\n",
                    r->o.prompt_file, cap / 1048576.0, r->n_ctx);
        return r->ptext != NULL;
    }
    const char *p = r->o.prompt ? r->o.prompt : "";
    r->plen = strlen(p);
    r->ptext = strdup(p);
    if (!r->ptext) cli_err("out of memory");
    return r->ptext != NULL;
}

static void run_free(run_state *r)
{
    g_ctx = NULL;
    if (r->prompt_f) fclose(r->prompt_f);
    free(r->lat);
    free(r->toks);
    sluice_sampler_free(r->smp);
    free(r->o.schema);
    sluice_ctx_free(r->C);
    sluice_close(r->M);
    if (r->moe_trace) fclose(r->moe_trace);
    free(r->ptext);
}

int cmd_run(int argc, char **argv)
{
    run_state *r = calloc(1, sizeof *r);
    if (!r) { cli_err("out of memory"); return 1; }
    int pr = parse_args(argc, argv, &r->o);
    if (pr) { free(r); return pr > 0 ? 0 : 2; }
    if (!r->o.g.model) r->o.g.model = cli_default_model();
    int status = 1;
    r->t0 = sl_now_ns();
    sl_progress_init(&r->bar, sl_progress_tty() && !r->o.g.quiet && !r->o.json);
    r->lc = (log_ctx){ r->o.json, r->o.g.quiet, &r->bar };
    sigwatch_install(on_signal);
    sigwatch_busy(SIGWATCH_LOAD);

    if (r->o.prompt_file && !(r->prompt_f = fopen(r->o.prompt_file, "rb"))) {
        cli_err("cannot open prompt file %s: %s", r->o.prompt_file, strerror(errno));
        goto done;
    }
    if (!run_open(r) || !run_read_prompt(r) || !run_tokenize(r)) goto done;
    run_load_session(r);
    r->t_load = sl_now_ns();
    sigwatch_busy(SIGWATCH_EVAL);   /* until the generation returns */
    if (!run_prompt(r, &status)) goto done;
    run_generate(r);
    sigwatch_busy(SIGWATCH_IDLE);
    status = run_status(r);
    if (!run_save_final(r) && status == 0) status = 1;
    if (r->o.stats_json && !write_stats_json(r, status) && status == 0) status = 1;
    if (r->o.g.stats) print_stats(r);
    if (r->moe_trace) {
        bool ok = !ferror(r->moe_trace);
        if (fclose(r->moe_trace) || !ok) {
            cli_err("--moe-trace: writing %s failed: %s", r->o.moe_trace, strerror(errno));
            if (status == 0) status = 1;
        }
        r->moe_trace = NULL;
    }
done:
    sigwatch_busy(SIGWATCH_IDLE);
    run_free(r);
    free(r);
    return status;
}
