/* runtime/cli/bench.c — `sluice bench`: decode and prompt speed, memory and the plan for each model
 * x budget, in the spirit of llama-bench.
 *
 * Every measurement is a separate `sluice run` (this binary, re-executed) with --stats-json, so each
 * one starts with a fresh process and its peak RSS is its own.  Before each run the model file's pages
 * are dropped from the page cache (POSIX_FADV_DONTNEED: no root needed) so every repetition reads the
 * same way.  When a memory cgroup can be created under our own one (root, or a delegated cgroup v2
 * subtree), each run goes into one limited to its budget and the cgroup's peak (RSS + page cache) is
 * reported too; otherwise bench says so and reports the process's peak RSS only.  The repetitions
 * go round the rows (every row's first run, then every row's second, ...): an A/B of two files or
 * budgets is interleaved, as a fair comparison on a machine whose disk speed drifts needs. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loader/gguf.h"
#include "kernels/types.h"
#include "loader/pagecache.h"
#include "runtime/cli/cli.h"
#include "runtime/cli/options.h"
#include "runtime/text/tokenizer.h"

enum { BENCH_MODELS = 1, BENCH_BUDGETS, BENCH_PROMPT, BENCH_GEN, BENCH_REPS, BENCH_OUT, BENCH_THREADS, BENCH_IO,
       BENCH_NO_CGROUP };

static const cli_opt bench_table[] = {
    { BENCH_MODELS, "-m|--model", "LIST", "GGUF models, comma-separated (default: the bundled one)" },
    { BENCH_BUDGETS, "--ram-budget|--budgets", "LIST", "budgets, comma-separated: 64M,1G,4G,... or auto (default auto)" },
    { BENCH_PROMPT, "-p|--n-prompt", "N", "prompt tokens (default 64)" },
    { BENCH_GEN, "-n|--n-gen", "N", "generated tokens (default 16)" },
    { BENCH_REPS, "-r|--repetitions", "N", "runs per model x budget (default 3)" },
    { BENCH_OUT, "-o|--output", "md|csv|json", "table format (default md)" },
    { BENCH_THREADS, "-t|--threads", "N", "threads (default: number of CPUs)" },
    { BENCH_IO, "--io", "pread|mmap|uring", "read backend (default uring)" },
    { BENCH_NO_CGROUP, "--no-cgroup", NULL, "do not put the runs in memory cgroups (peak RSS only)" },
    { 0, NULL, NULL, NULL },
};
static const cli_opt *const bench_tables[] = { bench_table, cli_meta_table, NULL };
const cli_cmd cli_cmd_bench = {
    "bench", "measure prompt and decode speed and memory for models x budgets (llama-bench style)",
    "sluice bench [-m MODEL[,MODEL...]] [--ram-budget SIZE[,SIZE...]] [-p N] [-n N] [-r N] [-o md|csv|json]",
    bench_tables,
    "Columns: model, size, type, budget, backend, plan (resident blocks, MiB streamed per token), pp and\n"
    "tg tok/s (mean +- sd over -r runs), peak RSS, page cache at exit, cgroup peak (RSS + page cache, when\n"
    "the runs are in memory cgroups) and the plan's predicted tok/s.  Needs no root.\n"
};

typedef struct bench_opts {
    char *models, *budgets;
    long n_prompt, n_gen, reps, threads;
    const char *out, *io;
    bool no_cgroup;
} bench_opts;

static int bench_parse(int argc, char **argv, bench_opts *o)
{
    *o = (bench_opts){ .n_prompt = 64, .n_gen = 16, .reps = 3, .out = "md" };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        const cli_opt *op = cli_find(bench_tables, a);
        if (!op) { cli_unknown(&cli_cmd_bench, a); return -1; }
        if (cli_meta(&cli_cmd_bench, op)) return 1;
        if (op->arg && !cli_val(argc, argv, &i, &v)) return -1;
        switch (op->id) {
        case BENCH_MODELS: o->models = (char *)v; break;
        case BENCH_BUDGETS: o->budgets = (char *)v; break;
        case BENCH_PROMPT: if (!cli_int(a, v, 1, 1 << 16, &o->n_prompt)) return -1; break;
        case BENCH_GEN: if (!cli_int(a, v, 1, 1 << 16, &o->n_gen)) return -1; break;
        case BENCH_REPS: if (!cli_int(a, v, 1, 1000, &o->reps)) return -1; break;
        case BENCH_THREADS: if (!cli_int(a, v, 1, 256, &o->threads)) return -1; break;
        case BENCH_IO: o->io = v; break;
        case BENCH_OUT:
            if (strcmp(v, "md") && strcmp(v, "csv") && strcmp(v, "json")) { cli_err("-o: '%s' is not md, csv or json", v); return -1; }
            o->out = v;
            break;
        case BENCH_NO_CGROUP: o->no_cgroup = true; break;
        default: break;
        }
    }
    return 0;
}

/* ---- memory cgroups ---------------------------------------------------------------------------- */

typedef struct cgroup {
    bool v2;
    char base[1024];       /* our own memory cgroup directory */
    char dir[1100];        /* the run's child cgroup ("" when none) */
} cgroup;

/* Our memory cgroup's directory; false (with why) when there is none we can see. */
static bool cgroup_find(cgroup *cg, char *why, size_t len)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) { snprintf(why, len, "cannot read /proc/self/cgroup"); return false; }
    char line[PATH_MAX], v1[PATH_MAX] = "", v2[PATH_MAX] = "";
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = 0;
        if (!strcmp(c1 + 1, "memory")) snprintf(v1, sizeof v1, "%s", c2 + 1);
        else if (!strcmp(line, "0") && !c1[1]) snprintf(v2, sizeof v2, "%s", c2 + 1);
    }
    fclose(f);
    if (*v1) {
        cg->v2 = false;
        snprintf(cg->base, sizeof cg->base, "/sys/fs/cgroup/memory%.900s", v1);
    } else if (*v2 && access("/sys/fs/cgroup/cgroup.controllers", R_OK) == 0) {
        cg->v2 = true;
        snprintf(cg->base, sizeof cg->base, "/sys/fs/cgroup%.900s", v2);
    } else {
        snprintf(why, len, "no memory cgroup controller visible");
        return false;
    }
    return true;
}

static bool write_file(const char *dir, const char *name, const char *val)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, O_WRONLY);
    if (fd < 0) return false;
    bool ok = write(fd, val, strlen(val)) == (ssize_t)strlen(val);
    return close(fd) == 0 && ok;
}

static uint64_t read_u64_file(const char *dir, const char *name)
{
    char p[PATH_MAX + 64], buf[64] = "";
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    if (!fgets(buf, sizeof buf, f)) buf[0] = 0;
    fclose(f);
    return strtoull(buf, NULL, 10);
}

/* A child cgroup limited to `limit` bytes (0: no limit, measure only).  false (with why) when we
 * may not create one. */
static bool cgroup_create(cgroup *cg, uint64_t limit, char *why, size_t len)
{
    static int seq;
    snprintf(cg->dir, sizeof cg->dir, "%s/sluice-bench-%d-%d", cg->base, (int)getpid(), seq++);
    if (mkdir(cg->dir, 0755)) {
        snprintf(why, len, "cannot create a cgroup under %.300s: %s", cg->base, strerror(errno));
        cg->dir[0] = 0;
        return false;
    }
    char v[32];
    snprintf(v, sizeof v, "%" PRIu64, limit);
    if (limit && !write_file(cg->dir, cg->v2 ? "memory.max" : "memory.limit_in_bytes", v)) {
        snprintf(why, len, "cannot set the limit of %.300s: %s", cg->dir, strerror(errno));
        rmdir(cg->dir);
        cg->dir[0] = 0;
        return false;
    }
    return true;
}

/* The cgroup's peak (RSS + page cache) and whether it OOM-killed; removes it. */
static uint64_t cgroup_finish(cgroup *cg, bool *oom)
{
    *oom = false;
    if (!*cg->dir) return 0;
    uint64_t peak = read_u64_file(cg->dir, cg->v2 ? "memory.peak" : "memory.max_usage_in_bytes");
    char p[PATH_MAX + 64], line[128];
    snprintf(p, sizeof p, "%s/%s", cg->dir, cg->v2 ? "memory.events" : "memory.oom_control");
    FILE *f = fopen(p, "r");
    while (f && fgets(line, sizeof line, f)) {
        unsigned long long n;
        if (sscanf(line, "oom_kill %llu", &n) == 1 && n) *oom = true;
    }
    if (f) fclose(f);
    rmdir(cg->dir);
    cg->dir[0] = 0;
    return peak;
}

/* ---- one run ----------------------------------------------------------------------------------- */

/* The figures of one run, from its --stats-json. */
typedef struct run_figures {
    bool ok, oom;
    double pp, tg, pred;
    uint64_t peak_rss, page_cache, cg_peak, pass_bytes;
    int blocks;             /* -1: no plan */
    char backend[16];
    char why[200];
} run_figures;

static bool json_num(const char *js, const char *key, double *out)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(js, k);
    if (!p) return false;
    *out = strtod(p + strlen(k), NULL);
    return true;
}

static void json_word(const char *js, const char *key, char *out, size_t len)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\":\"", key);
    const char *p = strstr(js, k);
    out[0] = 0;
    if (p) snprintf(out, len, "%.*s", (int)strcspn(p + strlen(k), "\""), p + strlen(k));
}

static void read_figures(const char *json_path, run_figures *f)
{
    FILE *fp = fopen(json_path, "r");
    char js[4096] = "";
    if (fp) { size_t n = fread(js, 1, sizeof js - 1, fp); js[n] = 0; fclose(fp); }
    double st = -1, v;
    if (!json_num(js, "status", &st) || st != 0) return;
    f->ok = true;
    if (json_num(js, "prompt_tok_s", &v)) f->pp = v;
    if (json_num(js, "decode_tok_s", &v)) f->tg = v;
    if (json_num(js, "pred_tok_s", &v)) f->pred = v;
    if (json_num(js, "peak_rss", &v)) f->peak_rss = (uint64_t)v;
    if (json_num(js, "page_cache_at_exit", &v)) f->page_cache = (uint64_t)v;
    if (json_num(js, "pass_bytes", &v)) f->pass_bytes = (uint64_t)v;
    f->blocks = json_num(js, "blocks_resident", &v) ? (int)v : -1;
    json_word(js, "backend", f->backend, sizeof f->backend);
}

/* The last line of a run's stderr: why it failed. */
static void last_line(const char *path, char *out, size_t len)
{
    FILE *f = fopen(path, "r");
    char line[192];
    out[0] = 0;
    while (f && fgets(line, sizeof line, f)) if (line[0] != '\n') snprintf(out, len, "%s", line);
    if (f) fclose(f);
    out[strcspn(out, "\n")] = 0;
}

typedef struct bench_run {
    const bench_opts *o;
    const char *model, *budget, *prompt;
    char dir[64];
    cgroup *cg;             /* NULL: no cgroups */
    uint64_t limit;
} bench_run;

static void child_exec(const bench_run *b, const char *json, const char *err)
{
    int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644), nul = open("/dev/null", O_RDWR);
    if (fd < 0 || nul < 0) _exit(126);
    dup2(nul, 0);
    dup2(nul, 1);
    dup2(fd, 2);
    if (b->cg && *b->cg->dir) {
        char pid[24];
        snprintf(pid, sizeof pid, "%d", (int)getpid());
        if (!write_file(b->cg->dir, "cgroup.procs", pid)) _exit(125);
    }
    char np[24], nc[24], thr[24];
    snprintf(np, sizeof np, "%ld", b->o->n_gen);
    snprintf(nc, sizeof nc, "%ld", b->o->n_prompt + b->o->n_gen + 16);
    snprintf(thr, sizeof thr, "%ld", b->o->threads);
    const char *argv[40] = { "sluice", "run", "-m", b->model, "-p", b->prompt, "-n", np, "-c", nc, "--temp", "0",
                             "--ignore-eos", "--quiet", "--stats-json", json, "--ram-budget", b->budget };
    int n = 18;
    if (b->o->threads) { argv[n++] = "-t"; argv[n++] = thr; }
    if (b->o->io) { argv[n++] = "--io"; argv[n++] = b->o->io; }
    argv[n] = NULL;
    execv("/proc/self/exe", (char *const *)argv);
    _exit(127);
}

static run_figures run_once(bench_run *b, int seq)
{
    run_figures f = { .blocks = -1 };
    char json[128], err[128], why[190];
    snprintf(json, sizeof json, "%s/run%d.json", b->dir, seq);
    snprintf(err, sizeof err, "%s/run%d.err", b->dir, seq);
    sl_page_cache_drop(b->model);   /* every repetition starts from the disk */
    if (b->cg && !cgroup_create(b->cg, b->limit, why, sizeof why)) {
        snprintf(f.why, sizeof f.why, "%.190s", why);
        return f;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) child_exec(b, json, err);
    int st = 0;
    if (pid > 0) while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (b->cg) f.cg_peak = cgroup_finish(b->cg, &f.oom);
    if (pid < 0) { snprintf(f.why, sizeof f.why, "fork: %s", strerror(errno)); return f; }
    read_figures(json, &f);
    if (!f.ok) {
        if (f.oom || (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)) snprintf(f.why, sizeof f.why, "killed (out of memory?)");
        else last_line(err, f.why, sizeof f.why);
    }
    return f;
}

/* ---- the table --------------------------------------------------------------------------------- */

typedef struct row {
    char model[64], type[40], budget[24], backend[16], plan[48], why[200];
    uint64_t size;
    int n_ok;
    double pp_mean, pp_sd, tg_mean, tg_sd, pred;
    uint64_t peak_rss, page_cache, cg_peak;
} row;

static void mean_sd(const double *x, int n, double *mean, double *sd)
{
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++) s += x[i];
    *mean = n ? s / n : 0;
    for (int i = 0; i < n; i++) ss += (x[i] - *mean) * (x[i] - *mean);
    *sd = n > 1 ? sqrt(ss / (n - 1)) : 0;
}

/* Name, file size, type (llama.cpp's file-type name when the file has one, else the weight type
 * with the most bytes) and block count. */
static void model_facts(const char *path, row *r, int *n_layers)
{
    const char *base = strrchr(path, '/');
    snprintf(r->model, sizeof r->model, "%s", base ? base + 1 : path);
    char *dot = strstr(r->model, ".gguf");
    if (dot) *dot = 0;
    sl_gguf *g;
    char err[SL_ERRLEN];
    snprintf(r->type, sizeof r->type, "?");
    *n_layers = 0;
    if (sl_gguf_open(path, &g, err, sizeof err)) return;
    r->size = sl_gguf_file_size(g);
    /* the most common weight type by bytes */
    uint64_t by_type[64] = { 0 };
    for (int64_t i = 0; i < sl_gguf_n_tensors(g); i++) {
        const sl_gguf_tensor *t = sl_gguf_tensor_at(g, i);
        if (t->type >= 0 && t->type < 64 && t->n_dims >= 2) by_type[t->type] += t->nbytes;
    }
    int best = -1;
    for (int t = 0; t < 64; t++) if (by_type[t] && (best < 0 || by_type[t] > by_type[best])) best = t;
    uint32_t ft;
    const char *ftn = sl_gguf_get_u32(g, "general.file_type", &ft) ? cli_file_type_name(ft) : NULL;
    if (ftn) snprintf(r->type, sizeof r->type, "%s", ftn);
    else if (best >= 0) snprintf(r->type, sizeof r->type, "%s", sl_type_name(best));
    sl_str arch;
    if (sl_gguf_get_str(g, "general.architecture", &arch) && arch.len < 40) {
        char key[64];
        uint32_t nl;
        snprintf(key, sizeof key, "%.*s.block_count", (int)arch.len, arch.ptr);
        if (sl_gguf_get_u32(g, key, &nl)) *n_layers = (int)nl;
    }
    sl_gguf_close(g);
}

/* A prompt of exactly n tokens (BOS included) for this model's tokenizer: " the" repeated, then
 * trimmed or padded word by word.  NULL (with a message) when the tokenizer cannot be read. */
static char *make_prompt(const char *path, long n)
{
    sl_gguf *g;
    sl_vocab *v;
    char err[SL_ERRLEN];
    if (sl_gguf_open(path, &g, err, sizeof err)) { cli_err("%s", err); return NULL; }
    if (sl_vocab_load(g, &v, err, sizeof err)) { cli_err("%s: %s", path, err); sl_gguf_close(g); return NULL; }
    size_t cap = (size_t)n * 4 + 8;
    char *text = malloc(cap + 1);
    long words = n;
    for (int tries = 0; text && tries < 64; tries++) {
        size_t len = 0;
        for (long i = 0; i < words && len + 4 <= cap; i++) { memcpy(text + len, i ? " the" : "the", i ? 4 : 3); len += i ? 4 : 3; }
        text[len] = 0;
        int64_t got = sl_tokenize(v, text, len, true, false, NULL, 0);
        if (got == n || got < 0) break;
        words += got < n ? 1 : -1;
        if (words < 0) break;
    }
    sl_vocab_free(v);
    sl_gguf_close(g);
    return text;
}

/* One model x budget of the table: its runs so far, then their summary. */
typedef struct bench_row {
    row r;
    bench_run b;
    int n_layers;
    bool failed;             /* a run failed: the row takes no more runs (r.why says why) */
    char model_path[PATH_MAX], budget[24];
    double *pp, *tg;         /* (reps) the runs' figures */
    run_figures last;
} bench_row;

/* One more run of row w; the first failure ends the row. */
static void row_run(bench_row *w, int seq)
{
    if (w->failed) return;
    row *out = &w->r;
    w->b.model = w->model_path;
    w->b.budget = w->budget;
    run_figures f = run_once(&w->b, seq);
    if (!f.ok) {
        snprintf(out->why, sizeof out->why, "%s", f.why);
        w->failed = true;
        return;
    }
    w->pp[out->n_ok] = f.pp;
    w->tg[out->n_ok] = f.tg;
    out->n_ok++;
    if (f.peak_rss > out->peak_rss) out->peak_rss = f.peak_rss;
    if (f.cg_peak > out->cg_peak) out->cg_peak = f.cg_peak;
    out->page_cache = f.page_cache;
    w->last = f;
}

/* The row's summary from its runs. */
static void row_finish(bench_row *w)
{
    row *out = &w->r;
    const run_figures *last = &w->last;
    mean_sd(w->pp, out->n_ok, &out->pp_mean, &out->pp_sd);
    mean_sd(w->tg, out->n_ok, &out->tg_mean, &out->tg_sd);
    out->pred = last->pred;
    snprintf(out->backend, sizeof out->backend, "%s", out->n_ok ? last->backend : "-");
    if (!out->n_ok) snprintf(out->plan, sizeof out->plan, "-");
    else if (last->blocks < 0) snprintf(out->plan, sizeof out->plan, "resident");
    else snprintf(out->plan, sizeof out->plan, "%d/%d blocks, %.1f MiB/tok", last->blocks, w->n_layers,
                  last->pass_bytes / 1048576.0);
}

static void print_row(const bench_opts *o, const row *r, bool cg, bool first)
{
    double M = 1048576.0;
    if (!strcmp(o->out, "json")) {
        printf("%s\n  {\"model\":", first ? "" : ",");
        json_str(stdout, r->model, strlen(r->model));
        printf(",\"size\":%" PRIu64 ",\"type\":\"%s\",\"budget\":\"%s\",\"backend\":\"%s\",\"plan\":\"%s\",\"runs\":%d,"
               "\"pp_tok_s\":%.3f,\"pp_sd\":%.3f,\"tg_tok_s\":%.3f,\"tg_sd\":%.3f,\"peak_rss\":%" PRIu64
               ",\"page_cache\":%" PRIu64 ",\"cgroup_peak\":%" PRIu64 ",\"pred_tok_s\":%.3f",
               r->size, r->type, r->budget, r->backend, r->plan, r->n_ok, r->pp_mean, r->pp_sd, r->tg_mean, r->tg_sd,
               r->peak_rss, r->page_cache, r->cg_peak, r->pred);
        if (*r->why) { printf(",\"error\":"); json_str(stdout, r->why, strlen(r->why)); }
        printf("}");
        return;
    }
    bool csv = !strcmp(o->out, "csv");
    if (csv) {
        printf("%s,%" PRIu64 ",%s,%s,%s,\"%s\",%d,%.3f,%.3f,%.3f,%.3f,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%.3f,\"%s\"\n",
               r->model, r->size, r->type, r->budget, r->backend, r->plan, r->n_ok, r->pp_mean, r->pp_sd, r->tg_mean,
               r->tg_sd, r->peak_rss, r->page_cache, r->cg_peak, r->pred, r->why);
        return;
    }
    if (!r->n_ok) {
        printf("| %s | %.1f MiB | %s | %s | - | %s | | | | | %s| |\n", r->model, r->size / M, r->type, r->budget, r->why,
               cg ? "| " : "");
        return;
    }
    printf("| %s | %.1f MiB | %s | %s | %s | %s | %.2f ± %.2f | %.2f ± %.2f | %.1f MiB | %.1f MiB |", r->model,
           r->size / M, r->type, r->budget, r->backend, r->plan, r->pp_mean, r->pp_sd, r->tg_mean, r->tg_sd,
           r->peak_rss / M, r->page_cache / M);
    if (cg) printf(" %.1f MiB |", r->cg_peak / M);
    printf(" %.2f |\n", r->pred);
}

static void print_header(const bench_opts *o, bool cg)
{
    if (!strcmp(o->out, "json")) { printf("["); return; }
    if (!strcmp(o->out, "csv")) {
        printf("model,size,type,budget,backend,plan,runs,pp_tok_s,pp_sd,tg_tok_s,tg_sd,peak_rss,page_cache,cgroup_peak,"
               "pred_tok_s,error\n");
        return;
    }
    printf("| model | size | type | budget | backend | plan | pp%ld tok/s | tg%ld tok/s | peak RSS | page cache |%s "
           "predicted tok/s |\n|---|---:|---|---:|---|---|---:|---:|---:|---:|%s---:|\n", o->n_prompt, o->n_gen,
           cg ? " cgroup peak |" : "", cg ? "---:|" : "");
}

/* Memory cgroups for the runs, when we may create them; says which on stderr. */
static bool setup_cgroups(const bench_opts *o, cgroup *cg)
{
    char why[512] = "--no-cgroup";
    bool ok = !o->no_cgroup && cgroup_find(cg, why, sizeof why) && cgroup_create(cg, 0, why, sizeof why);
    if (ok) {
        bool oom;
        cgroup_finish(cg, &oom);   /* the probe cgroup: we may create them */
        fprintf(stderr, "sluice bench: each run in its own memory cgroup (v%d, limit = its budget) under %s\n",
                cg->v2 ? 2 : 1, cg->base);
    } else {
        fprintf(stderr, "sluice bench: no memory cgroup (%s): peak RSS is the process's, the page cache is not "
                "limited\n", why);
    }
    return ok;
}

/* Every model x budget row of the table (models and budgets: comma lists), each with its prompt
 * (one per model, in *prompts) and its bench_run.  False when a model's prompt could not be made
 * (that model has no rows) or memory ran out. */
static bool collect_rows(const bench_opts *o, const char *models, const char *budgets, const bench_run *proto,
                         bench_row **rows, int *n_rows, char ***prompts, int *n_models)
{
    char mlist[4096];
    bool ok = true;
    snprintf(mlist, sizeof mlist, "%s", models);
    for (char *s1 = NULL, *m = strtok_r(mlist, ",", &s1); m; m = strtok_r(NULL, ",", &s1)) {
        char *prompt = make_prompt(m, o->n_prompt);
        char **np = realloc(*prompts, (size_t)(*n_models + 1) * sizeof *np);
        if (!prompt || !np) { free(prompt); if (np) *prompts = np; ok = false; continue; }
        *prompts = np;
        np[(*n_models)++] = prompt;
        int n_layers;
        row facts = { 0 };
        model_facts(m, &facts, &n_layers);
        char blist[1024];
        snprintf(blist, sizeof blist, "%s", budgets);
        for (char *s2 = NULL, *bud = strtok_r(blist, ",", &s2); bud; bud = strtok_r(NULL, ",", &s2)) {
            bench_row *nr = realloc(*rows, (size_t)(*n_rows + 1) * sizeof *nr);
            if (!nr) return false;
            *rows = nr;
            bench_row *w = &nr[*n_rows];
            *w = (bench_row){ .r = facts, .b = *proto, .n_layers = n_layers };
            /* the row's own copies: strtok_r's buffers are reused for the next model */
            snprintf(w->model_path, sizeof w->model_path, "%s", m);
            snprintf(w->budget, sizeof w->budget, "%s", bud);
            snprintf(w->r.budget, sizeof w->r.budget, "%s", bud);
            w->b.prompt = prompt;   /* b.model / b.budget: set per run (realloc moves the rows) */
            if (strcmp(bud, "auto")) cli_size("--ram-budget", bud, &w->b.limit);
            w->pp = calloc((size_t)o->reps, sizeof *w->pp);
            w->tg = calloc((size_t)o->reps, sizeof *w->tg);
            if (!w->pp || !w->tg) { free(w->pp); free(w->tg); return false; }
            (*n_rows)++;
        }
    }
    return ok;
}

int cmd_bench(int argc, char **argv)
{
    bench_opts o;
    int pr = bench_parse(argc, argv, &o);
    if (pr) return pr > 0 ? 0 : 2;
    char models[4096], budgets[1024];
    snprintf(models, sizeof models, "%s", o.models ? o.models : cli_default_model());
    snprintf(budgets, sizeof budgets, "%s", o.budgets ? o.budgets : "auto");
    for (char *save = NULL, *b = strtok_r(budgets, ",", &save); b; b = strtok_r(NULL, ",", &save)) {
        uint64_t v;
        if (strcmp(b, "auto") && !cli_size("--ram-budget", b, &v)) return 2;
    }
    snprintf(budgets, sizeof budgets, "%s", o.budgets ? o.budgets : "auto");
    cgroup cg = { 0 };
    bool use_cg = setup_cgroups(&o, &cg);
    bench_run b = { .o = &o, .cg = use_cg ? &cg : NULL };
    snprintf(b.dir, sizeof b.dir, "/tmp/sluice-bench-XXXXXX");
    if (!mkdtemp(b.dir)) { cli_err("bench: cannot create a temporary directory: %s", strerror(errno)); return 1; }
    fprintf(stderr, "sluice bench: -p %ld -n %ld, %ld runs each, page cache of the model dropped before each run\n",
            o.n_prompt, o.n_gen, o.reps);
    int status = 0;
    bench_row *rows = NULL;
    char **prompts = NULL;
    int n_rows = 0, n_models = 0;
    if (!collect_rows(&o, models, budgets, &b, &rows, &n_rows, &prompts, &n_models)) status = 1;
    /* the repetitions go round the rows (run 1 of every row, then run 2, ...), so that a disk or a
     * machine that is slower for a while slows every row alike instead of one row's every run */
    for (int i = 0; i < o.reps; i++)
        for (int w = 0; w < n_rows; w++) {
            fprintf(stderr, "sluice bench: run %d of %ld, %s at %s\n", i + 1, o.reps, rows[w].r.model, rows[w].budget);
            row_run(&rows[w], w * (int)o.reps + i);
        }
    print_header(&o, use_cg);
    for (int w = 0; w < n_rows; w++) {
        row_finish(&rows[w]);
        if (!rows[w].r.n_ok) status = 1;
        print_row(&o, &rows[w].r, use_cg, w == 0);
        free(rows[w].pp);
        free(rows[w].tg);
    }
    free(rows);
    for (int i = 0; i < n_models; i++) free(prompts[i]);
    free(prompts);
    if (!strcmp(o.out, "json")) printf("\n]\n");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", b.dir);
    if (system(cmd)) { /* a leftover temporary directory is harmless */ }
    return status;
}
