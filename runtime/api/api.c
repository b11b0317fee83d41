/* runtime/api/api.c — include/sluice.h, part 1: opening a model (plan, load, stream), planning, tokens.
 * Contexts, generation and sessions are in runtime/api/api_ctx.c. */
#include "runtime/api/api_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/api/session.h"
#include "runtime/engine/kvcache.h"
#include "kernels/threadpool.h"
#include "kernels/clock.h"


_Static_assert(SLUICE_ERRLEN >= SL_ERRLEN, "SLUICE_ERRLEN holds every internal message");

const char *sluice_version(void) { return SLUICE_VERSION; }

void sluice_params_default(sluice_params *p)
{
    if (!p) return;
    *p = (sluice_params){ .kv_type = SLUICE_KV_AUTO, .io = SLUICE_IO_URING };
}

/* One log line through the caller's callback (nothing when there is none). */
static void logf_(const sluice_params *p, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void logf_(const sluice_params *p, int level, const char *fmt, ...)
{
    if (!p->log) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    p->log(p->user, level, line);
}

int api_einval(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

/* "64M", "2G" or a byte count: how a budget is named in messages. */
static void fmt_size(char *buf, size_t len, uint64_t b)
{
    if (b && b % (1ull << 30) == 0) snprintf(buf, len, "%" PRIu64 "G", b >> 30);
    else if (b && b % (1ull << 20) == 0) snprintf(buf, len, "%" PRIu64 "M", b >> 20);
    else snprintf(buf, len, "%" PRIu64, b);
}

/* Every field of p in its documented range.  0 or -EINVAL naming the field. */
static int check_params(const sluice_params *p, char *err, size_t errlen)
{
    const char *bad = NULL;
    char buf[96];
    if (p->planner < SLUICE_PLANNER_DEFAULT || p->planner > SLUICE_PLANNER_OFF) bad = "planner (0, 1 or 2)";
    else if (p->n_ctx < 0 || p->n_ctx > SLUICE_MAX_CTX) bad = "n_ctx (0 = auto, at most SLUICE_MAX_CTX)";
    else if (p->n_batch < 0 || p->n_batch > SLUICE_MAX_CTX) bad = "n_batch (0 = auto, at most SLUICE_MAX_CTX)";
    else if (p->n_threads < 0 || p->n_threads > SLUICE_MAX_THREADS) bad = "n_threads (0 = all CPUs, at most SLUICE_MAX_THREADS)";
    else if (p->kv_type < SLUICE_KV_AUTO || p->kv_type > SLUICE_KV_Q8_0) bad = "kv_type (enum sluice_kv)";
    else if (p->io < SLUICE_IO_PREAD || p->io > SLUICE_IO_URING) bad = "io (enum sluice_io)";
    else if (p->prefetch < 0 || p->prefetch > 32) bad = "prefetch (0 = 2, at most 32)";
    else if (p->lm_head_rows < 0) bad = "lm_head_rows (0 = 1024)";
    else if (!isfinite(p->disk_bw) || (p->disk_bw < 0 && p->disk_bw != SLUICE_DISK_BW_NOW) || p->disk_bw > 1e4)
        bad = "disk_bw (GB/s, finite, 0 = measured, SLUICE_DISK_BW_NOW)";
    else if (!isfinite(p->compute_bw) || p->compute_bw < 0 || p->compute_bw > 1e4) bad = "compute_bw (GB/s, finite, 0 = measured)";
    else if (p->kv_spill_dir && !*p->kv_spill_dir) bad = "kv_spill_dir (empty string; NULL = default)";
    else if (p->draft < SLUICE_DRAFT_AUTO || p->draft > SLUICE_DRAFT_MODEL) bad = "draft (enum sluice_draft)";
    else if (p->draft == SLUICE_DRAFT_MODEL && !p->draft_model) bad = "draft (SLUICE_DRAFT_MODEL needs draft_model)";
    else if (p->draft == SLUICE_DRAFT_NGRAM && p->draft_model) bad = "draft (NGRAM with a draft_model; use MODEL or AUTO)";
    else if (p->draft_model && !*p->draft_model) bad = "draft_model (empty string; NULL = none)";
    else if (p->draft_max < 0 || p->draft_max > 64) bad = "draft_max (0 = 8, at most 64)";
    else if (p->n_parallel < 0 || p->n_parallel > 256) bad = "n_parallel (0 = 1, at most 256)";
    if (!bad) return 0;
    snprintf(buf, sizeof buf, "%s", bad);
    return api_einval(err, errlen, "sluice_params: %s is out of range", buf);
}

/* ---- planning ---------------------------------------------------------------------------------- */

/* Logits rows a context keeps: one per position a verifying pass evaluates (up to 64 drafts + 1),
 * or one when drafting is off.  The planner and sluice__ctx_new use the same figure. */
static int logit_rows_for(const sluice_params *p)
{
    if (p->draft == SLUICE_DRAFT_OFF) return 1;
    int k = p->draft_max > 0 ? p->draft_max : 8;
    return (k < 64 ? k : 64) + 1;
}

/* Positions a sliding-window layer's ring keeps beyond its window (runtime/engine/kvcache.h): a pass
 * of the model's batch (n_batch, at most the context) plus the drafts a verifying pass may give back
 * (draft_max, default 8, whether or not this model drafts: a draft model's context is brought back
 * by the target's rejected drafts).  Contexts and the planner use the same figure. */
static int ring_slack_for(const sluice_params *p, int n_ctx)
{
    int b = p->n_batch > 0 ? p->n_batch : 512, k = p->draft_max > 0 ? p->draft_max : 8;
    return (b < n_ctx ? b : n_ctx) + (k < 64 ? k : 64);
}

/* Contract: see api_internal.h (from the batch asked for: the plan's is no larger). */
int api_ring_slack(const sluice_model *M) { return ring_slack_for(&M->p, M->n_ctx); }

/* Where a plan's KV spill may go: kv_spill_dir when given, else $TMPDIR or /var/tmp — the first that
 * is not a RAM file system (the spill would then sit in memory the budget does not count).  NULL
 * when every candidate is one; *ram names the first such directory and its type. */
static const char *spill_dir_for(const sluice_params *p, char *ram, size_t ramlen)
{
    const char *env = getenv("TMPDIR");
    const char *cand[2] = { p->kv_spill_dir ? p->kv_spill_dir : env && *env ? env : "/var/tmp",
                            p->kv_spill_dir || !(env && *env) ? NULL : "/var/tmp" };
    ram[0] = 0;
    for (int i = 0; i < 2 && cand[i]; i++) {
        char fs[16];
        if (!sl_kv_dir_in_ram(cand[i], fs, sizeof fs)) return cand[i];
        if (!ram[0]) snprintf(ram, ramlen, "%s (%s)", cand[i], fs);
    }
    return NULL;
}

/* Contract: see api_internal.h. */
int api_make_plan(const sl_model *m, size_t vocab_bytes, const sluice_params *p, int n_ctx, int n_batch, int threads,
                  sl_plan_model *pm, sl_plan_req *req, sl_plan *plan, const char **spill, char *err, size_t errlen)
{
    *spill = NULL;
    uint64_t budget = p->ram_budget;
    char how[160] = "", name[32];
    if (!budget) {
        budget = sl_plan_auto_budget(how, sizeof how);
        if (!budget) {
            snprintf(err, errlen, "cannot tell how much memory is available; set a RAM budget");
            return -EINVAL;
        }
        snprintf(name, sizeof name, "auto");
    } else {
        fmt_size(name, sizeof name, budget);
    }
    sl_plan_model_from(pm, m, vocab_bytes);
    *req = (sl_plan_req){ .budget = budget, .n_ctx = n_ctx, .n_batch = n_batch, .n_threads = threads,
                          .n_logits = logit_rows_for(p), .ring_slack = ring_slack_for(p, n_ctx),
                          .n_parallel = p->n_parallel,
                          .allow_spill = true, .allow_q8_kv = m->cfg.head_dim % 32 == 0,
                          .buffered = p->no_direct && p->io != SLUICE_IO_MMAP };
    /* Rates not given are measured (once per device / kernel path, then cached).  The plan's
     * decisions do not depend on the rates, only its prediction does; so it is made first with a
     * placeholder rate, and the compute probe then measures within what the plan itself will hold,
     * which keeps the run's peak within its plan, not merely within the budget. */
    double disk = p->disk_bw > 0 ? p->disk_bw : 0;
    sl_plan_req first = *req;
    sl_plan_rates(m, pm, &first, disk, p->compute_bw > 0 ? p->compute_bw : 1.0);
    int rc = sl_plan_make(pm, &first, plan);
    char ram[160] = "";
    if (!rc && plan->kv == SL_PLAN_KV_SPILL && !(*spill = spill_dir_for(p, ram, sizeof ram))) {
        /* only RAM to spill to: the cache is counted in the budget, as the memory it is */
        req->allow_spill = first.allow_spill = false;
        rc = sl_plan_make(pm, &first, plan);
        if (rc) {
            snprintf(err, errlen, "RAM budget %s: the KV spill directory %s is in RAM (a spill there saves no "
                     "memory; use one on a disk); in memory the cache %s", name, ram, plan->why);
            return rc;
        }
        logf_(p, SLUICE_LOG_NOTE, "the KV spill directory %s is in RAM: the KV cache is kept in memory and counted "
              "in the budget", ram);
    } else if (!rc && *spill && ram[0]) {
        logf_(p, SLUICE_LOG_NOTE, "%s is in RAM: the KV cache spills to %s instead", ram, *spill);
    }
    if (rc == 0) {
        req->budget = plan->total_bytes;
        sl_plan_rates(m, pm, req, disk, p->compute_bw);
        req->budget = budget;
        rc = sl_plan_make(pm, req, plan);
    }
    if (rc) {
        snprintf(err, errlen, "RAM budget %s%s%s: %s", name, *how ? " " : "", how, plan->why);
        return rc;
    }
    /* the disk's rate depends on how the plan reads: measured for that (before any weight is loaded,
     * so the probe's buffers, no larger than the plan's, come and go within the budget) */
    sl_plan_disk_rate(m, pm, req, plan, p->io, p->no_direct, p->disk_bw < 0);
    return 0;
}

/* A draft model is used: given and not switched off. */
static bool wants_draft_model(const sluice_params *p) { return p->draft_model && p->draft != SLUICE_DRAFT_OFF; }

/* api_make_plan, or with d: the budget split with p's draft model (api_plan_with_draft). */
static int plan_model(const sl_model *m, const sl_vocab *voc, const sluice_params *p, int n_ctx, int n_batch,
                      int threads, sl_plan_model *pm, sl_plan_req *req, sl_plan *plan, const char **spill,
                      sl_plan_draft *d, char *err, size_t errlen)
{
    if (d) return api_plan_with_draft(m, sl_vocab_mem_bytes(voc), p, n_ctx, n_batch, threads, pm, req, plan, spill, d,
                                      err, errlen);
    return api_make_plan(m, sl_vocab_mem_bytes(voc), p, n_ctx, n_batch, threads, pm, req, plan, spill, err, errlen);
}

/* The planner's decisions and rates, as sluice_plan_info's plan_* fields. */
static void fill_plan_decisions(const sl_plan *p, const sl_plan_req *req, sluice_plan_info *o)
{
    o->plan_layers_resident = p->n_layers_resident;
    o->plan_lm_head_resident = p->lm_head_resident;
    o->plan_kv_type = p->kv == SL_PLAN_KV_Q8_0 ? SLUICE_KV_Q8_0 : SLUICE_KV_F16;
    o->plan_kv_spilled = p->kv == SL_PLAN_KV_SPILL;
    o->plan_n_batch = p->n_batch;
    o->plan_prefetch = p->prefetch;
    o->plan_chunk_bytes = p->chunk_bytes;
    o->pred_io_s = p->pred_io_s;
    o->pred_compute_s = p->pred_compute_s;
    o->disk_bw = req->disk_bw;
    o->compute_bw = req->compute_bw;
    o->disk_how = req->disk_how;
    o->compute_how = req->compute_how;
}

static void fill_draft_info(const sl_plan_draft *d, sluice_plan_info *o)
{
    o->draft_planned = true;
    o->draft_resident = d->draft_resident;
    o->draft_bytes = d->draft_bytes;
    o->pred_tok_s_alone = d->t_alone > 0 ? 1 / d->t_alone : 0;
    o->draft_breakeven = d->breakeven;
}

static void fill_plan_info(const sluice_model *M, sluice_plan_info *o)
{
    memset(o, 0, sizeof *o);
    o->planned = M->planned;
    o->n_layers = M->m->cfg.n_layers;
    o->n_ctx_train = M->m->cfg.ctx_train;
    o->n_ctx = M->n_ctx;
    o->n_batch = M->n_batch;
    o->kv_type = M->kv_type;
    o->kv_spilled = M->spill_dir != NULL;
    bool any_stream = M->stream != NULL;
    o->all_resident = !any_stream;
    if (M->planned) {
        const sl_plan *p = M->plan;
        o->budget = M->req.budget;
        o->planned_bytes = p->total_bytes;
        o->min_budget = p->min_budget;
        o->pred_tok_s = p->pred_tok_s;
        fill_plan_decisions(p, &M->req, o);
        o->pred_req_tok_s = p->pred_req_tok_s;
        o->pred_agg_tok_s = p->pred_agg_tok_s;
        if (M->dplan) fill_draft_info(M->dplan, o);
    }
    o->n_parallel = M->n_parallel;
    /* what the run actually does (a forced mode may differ from the plan) */
    int full = 0;
    for (int l = 0; l < M->m->cfg.n_layers; l++) {
        sl_weight *w[SL_BLOCK_MATS];
        int n = sl_layer_weights(&M->m->layers[l], w), res = 1;
        for (int i = 0; i < n; i++) {
            if (w[i]->stream) { res = 0; o->stream_bytes_per_token += w[i]->nbytes; }
        }
        const sl_layer *L = &M->m->layers[l];
        if (L->moe && L->experts[0].stream) {   /* a token reads the experts it takes */
            res = 0;
            o->stream_bytes_per_token += (uint64_t)M->m->cfg.n_expert_used * sl_layer_expert_bytes(M->m, l);
        }
        full += res;
    }
    o->n_layers_resident = full;
    o->lm_head_resident = !M->m->output.stream;
    if (M->m->output.stream) o->stream_bytes_per_token += M->m->output.nbytes;
}

/* ---- load progress ----------------------------------------------------------------------------
 * sl_model_load_resident is one blocking call; its progress is read from the kernel's count of
 * bytes this process has read (/proc/self/io rchar) by a helper thread, which also calls the
 * progress callback.  Only started when there is a callback. */

typedef struct load_watch {
    const sluice_params *p;
    uint64_t base, total;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
} load_watch;

static uint64_t proc_rchar(void)
{
    FILE *f = fopen("/proc/self/io", "r");
    if (!f) return 0;
    char line[128];
    uint64_t v = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "rchar:", 6)) { v = strtoull(line + 6, NULL, 10); break; }
    fclose(f);
    return v;
}

static void *watch_main(void *arg)
{
    load_watch *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&w->cv, &w->mu, &ts);
        if (w->stop) break;
        uint64_t d = proc_rchar() - w->base;
        w->p->progress(w->p->user, "load", d < w->total ? d : w->total, w->total);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static uint64_t resident_load_bytes(sl_model *m)
{
    uint64_t t = 0;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        sl_weight *w[SL_BLOCK_MATS];
        for (int i = 0, n = sl_layer_weights(&m->layers[l], w); i < n; i++) if (!w[i]->stream) t += w[i]->nbytes;
        if (m->layers[l].moe && !m->layers[l].experts[0].stream)
            t += (uint64_t)m->cfg.n_expert * sl_layer_expert_bytes(m, l);
    }
    bool embd_stream = m->tok_embd.stream || (m->tied && m->output.stream);
    if (!embd_stream) t += m->tok_embd.nbytes;
    if (!m->tied && !m->output.stream) t += m->output.nbytes;
    return t;
}

static int load_with_progress(sluice_model *M, char *err, size_t errlen)
{
    const sluice_params *p = &M->p;
    load_watch w = { .p = p, .total = resident_load_bytes(M->m) };
    pthread_t th;
    bool watching = false;
    if (p->progress && w.total >= (64u << 20)) {   /* small models load in a blink: no bar */
        w.base = proc_rchar();
        pthread_mutex_init(&w.mu, NULL);
        pthread_cond_init(&w.cv, NULL);
        watching = pthread_create(&th, NULL, watch_main, &w) == 0;
    }
    int rc = sl_model_load_resident(M->m, err, errlen);
    if (watching) {
        pthread_mutex_lock(&w.mu);
        w.stop = true;
        pthread_cond_signal(&w.cv);
        pthread_mutex_unlock(&w.mu);
        pthread_join(th, NULL);
        pthread_mutex_destroy(&w.mu);
        pthread_cond_destroy(&w.cv);
        p->progress(p->user, "load", w.total, w.total);
    }
    return rc;
}

static void close_model(sluice_model *M);

/* ---- open / close ------------------------------------------------------------------------------ */

/* A spill directory given is used even when the plan keeps the cache in memory (as asked), unless
 * it is in RAM: the plan's budget then holds only with the cache in memory, where it planned it. */
static const char *given_spill_dir(const sluice_model *M, const sluice_params *p)
{
    char ramfs[16];
    if (!p->kv_spill_dir) return NULL;
    if (!sl_kv_dir_in_ram(p->kv_spill_dir, ramfs, sizeof ramfs)) return p->kv_spill_dir;
    if (M->planned) {
        logf_(p, SLUICE_LOG_NOTE, "the KV spill directory %s is in RAM (%s): the KV cache stays in memory, as planned",
              p->kv_spill_dir, ramfs);
        return NULL;
    }
    logf_(p, SLUICE_LOG_WARN, "warning: the KV spill directory %s is %s, in RAM: the spilled cache uses memory",
          p->kv_spill_dir, ramfs);
    return p->kv_spill_dir;
}

/* Open M's draft model within the share the plan gave it (unplanned: as the target). */
static int open_draft(sluice_model *M, char *err, size_t errlen)
{
    const sluice_params *p = &M->p;
    sluice_params dp = api_draft_params(p, M->n_ctx, M->dplan ? M->dplan->draft_budget : 0);
    char e2[SL_ERRLEN];
    int rc = sluice_open(p->draft_model, &dp, &M->draft, e2, sizeof e2);
    if (rc) {
        snprintf(err, errlen, "draft model %s: %s", p->draft_model, e2);
        return rc;
    }
    const sl_plan_draft *d = M->dplan;
    char worth[64] = "not worth its memory at any acceptance";
    if (d && d->breakeven <= 1) snprintf(worth, sizeof worth, "worth its memory above %.0f%% acceptance", 100 * d->breakeven);
    if (d)
        logf_(p, SLUICE_LOG_INFO, "draft model: %.1f of %.1f MiB (%s); predicted %.2f tok/s without it, %.2f with it at "
              "70%% acceptance; %s", d->draft_bytes / 1048576.0, d->budget / 1048576.0,
              d->draft_resident ? "resident" : "streamed", d->t_alone > 0 ? 1 / d->t_alone : 0, d->tok_s[1], worth);
    return 0;
}

int sluice_open(const char *path, const sluice_params *pp, sluice_model **out, char *err, size_t errlen)
{
    sluice_params defaults;
    sluice_params_default(&defaults);
    const sluice_params *p = pp ? pp : &defaults;
    if (!path || !out) return api_einval(err, errlen, "sluice_open: NULL %s", !path ? "model path" : "out pointer");
    int prc = check_params(p, err, errlen);
    if (prc) return prc;
    sluice_model *M = calloc(1, sizeof *M);
    if (!M) { snprintf(err, errlen, "out of memory"); return -ENOMEM; }
    pthread_mutex_init(&M->eval_mu, NULL);
    M->p = *p;
    M->t_open_ns = sl_now_ns();
    char e2[SL_ERRLEN];
    int rc = sl_model_open(path, &M->m, err, errlen);
    if (rc) goto fail;
    if ((rc = sl_vocab_load(M->m->gguf, &M->voc, e2, sizeof e2))) {
        snprintf(err, errlen, "%s: %s", path, e2);
        goto fail;
    }
    const sl_config *cf = &M->m->cfg;
    const bool want_draft = wants_draft_model(p);
    if (want_draft && (rc = api_draft_check_vocab(M->voc, p->draft_model, err, errlen))) goto fail;
    if (sl_vocab_n_tokens(M->voc) != cf->vocab) {
        snprintf(err, errlen, "%s: vocabulary has %d tokens but the embedding table has %d rows", path,
                 sl_vocab_n_tokens(M->voc), cf->vocab);
        rc = -EINVAL;
        goto fail;
    }
    sl_str tmpl;
    if (sl_gguf_get_str(M->m->gguf, "tokenizer.chat_template", &tmpl)) {
        M->chat_template = malloc(tmpl.len + 1);
        if (!M->chat_template) { rc = -ENOMEM; snprintf(err, errlen, "out of memory"); goto fail; }
        memcpy(M->chat_template, tmpl.ptr, tmpl.len);
        M->chat_template[tmpl.len] = 0;
    }
    M->n_ctx = p->n_ctx > 0 ? p->n_ctx : (cf->ctx_train < 4096 ? cf->ctx_train : 4096);
    if (p->n_ctx > cf->ctx_train)
        logf_(p, SLUICE_LOG_WARN, "warning: -c %d is larger than the model's trained context %d", p->n_ctx, cf->ctx_train);
    M->threads = p->n_threads > 0 ? p->n_threads : sl_ncpu();
    M->n_batch = p->n_batch > 0 ? p->n_batch : 512;
    M->n_parallel = p->n_parallel > 0 ? p->n_parallel : 1;
    int kv = p->kv_type;
    uint64_t chunk = p->chunk_bytes, expert_cache = 0;
    int prefetch = p->prefetch > 0 ? p->prefetch : 2, head_rows = p->lm_head_rows > 0 ? p->lm_head_rows : 1024;
    const char *spill = NULL;
    bool forced = p->stream_all || p->stream_lm_head, streaming = forced;
    bool plan_it = p->planner == SLUICE_PLANNER_ON || (p->planner == SLUICE_PLANNER_DEFAULT && (!forced || p->ram_budget));
    if (plan_it) {
        /* The planner decides what stays resident.  A forced streaming mode is kept as is (tests and
         * benchmarks use it); its plan is still made, for the figures. */
        M->pm = malloc(sizeof *M->pm);
        M->plan = malloc(sizeof *M->plan);
        if (!M->pm || !M->plan) { rc = -ENOMEM; snprintf(err, errlen, "out of memory"); goto fail; }
        const char *plan_spill;
        if (want_draft && !(M->dplan = calloc(1, sizeof *M->dplan))) {
            rc = -ENOMEM;
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
        if ((rc = plan_model(M->m, M->voc, p, M->n_ctx, M->n_batch, M->threads, M->pm, &M->req, M->plan, &plan_spill,
                             M->dplan, err, errlen)))
            goto fail;
        M->planned = true;
        const sl_plan *pl = M->plan;
        if (!forced && !pl->all_resident) {
            sl_plan_apply(pl, M->m);
            streaming = true;
            chunk = pl->chunk_bytes;
            prefetch = pl->prefetch;
            head_rows = pl->lm_head_rows;
            expert_cache = pl->expert_cache_bytes;
            M->n_batch = pl->n_batch;
            if (kv == SLUICE_KV_AUTO) kv = pl->kv == SL_PLAN_KV_Q8_0 ? SL_KV_Q8_0 : SL_KV_F16;
            if (pl->kv == SL_PLAN_KV_SPILL) {
                spill = plan_spill;
                if (kv == SL_KV_F32) kv = SL_KV_F16;
            }
            logf_(p, SLUICE_LOG_INFO, "plan: %d of %d blocks resident, LM head %s, %.0f MiB streamed per token, KV %s; "
                  "%.0f of %.0f MiB", pl->n_layers_resident, cf->n_layers, pl->lm_head_resident ? "resident" : "streamed",
                  pl->stream_bytes / 1048576.0,
                  pl->kv == SL_PLAN_KV_SPILL ? "spilled" : pl->kv == SL_PLAN_KV_Q8_0 ? "q8_0" : "f16",
                  pl->total_bytes / 1048576.0, M->req.budget / 1048576.0);
        }
    }
    if (kv == SLUICE_KV_AUTO) kv = SL_KV_F16;
    if (!spill) spill = given_spill_dir(M, p);
    M->kv_type = kv;
    if (spill && !(M->spill_dir = strdup(spill))) { rc = -ENOMEM; snprintf(err, errlen, "out of memory"); goto fail; }
    sl_model_set_streaming(M->m, p->stream_all, p->stream_lm_head);
    if ((rc = load_with_progress(M, err, errlen))) goto fail;
    M->pool = sl_pool_create(M->threads);
    if (!M->pool) { rc = -ENOMEM; snprintf(err, errlen, "out of memory"); goto fail; }
    /* A token that waits mostly on the disk gains nothing from workers spinning between the loops,
     * and loses reads: measured (docs/planner.md) a pread run read 10-20% slower than its probe with
     * spinning workers and at the probe's rate without.  So an I/O-bound plan sleeps at once. */
    if (streaming && (!M->planned || M->plan->all_resident || M->plan->pred_io_s > M->plan->pred_compute_s))
        sl_pool_set_spin(M->pool, 0);   /* (a forced --stream run: its plan may say resident) */
    if (streaming) {
        sl_stream_opts so = { (sl_io_backend)p->io, chunk, prefetch, head_rows, p->no_direct, expert_cache,
                              p->expert_prefetch };
        if ((rc = sl_stream_create(M->m, M->pool, &so, &M->stream, err, errlen))) goto fail;
        if (*sl_stream_notice(M->stream)) logf_(p, SLUICE_LOG_NOTE, "%s", sl_stream_notice(M->stream));
    }
    if (want_draft && (rc = open_draft(M, err, errlen))) goto fail;
    /* speculative decoding: at most draft_max drafts, and a verifying pass must be one batch */
    int dk = p->draft == SLUICE_DRAFT_OFF || (p->draft == SLUICE_DRAFT_AUTO && !streaming && !M->draft) ? 0
           : p->draft_max > 0 ? p->draft_max : 8;
    if (dk > M->n_batch - 1) dk = M->n_batch - 1;
    if (dk > 64) dk = 64;
    M->draft_k = dk < 0 ? 0 : dk;
    M->logit_rows = logit_rows_for(p);
    M->draft_fixed = p->draft_fixed;
    M->t_loaded_ns = sl_now_ns();
    api_track(M, API_MODEL);
    *out = M;
    return 0;
fail:
    close_model(M);
    return rc;
}

void sluice_close(sluice_model *M)
{
    if (!M) return;
    api_untrack(M, API_MODEL, "sluice_close");
    if (atomic_load(&M->n_ctx_live) && api_checks_on()) {
        fprintf(stderr, "sluice: sluice_close: model %p still has %d live contexts (free them first)\n", (void *)M,
                atomic_load(&M->n_ctx_live));
        abort();
    }
    close_model(M);
}

static void close_model(sluice_model *M)
{
    if (M->draft) sluice_close(M->draft);
    free(M->dplan);
    sl_stream_free(M->stream);
    sl_pool_free(M->pool);
    api_grammar_model_free(M);
    sl_vocab_free(M->voc);
    sl_model_free(M->m);
    free(M->pm);
    free(M->plan);
    free(M->spill_dir);
    free(M->chat_template);
    pthread_mutex_destroy(&M->eval_mu);
    free(M);
}

int api_model_lock(sluice_model *M, char *err, size_t errlen)
{
    unsigned long me = (unsigned long)pthread_self();
    if (atomic_load(&M->owner) == me) {   /* only this thread can have stored its own id */
        if (err && errlen) snprintf(err, errlen, "busy: this thread is inside an evaluation of the same model "
                                                 "(called from a callback?)");
        return -EBUSY;
    }
    pthread_mutex_lock(&M->eval_mu);
    atomic_store(&M->owner, me);
    return 0;
}

void api_model_unlock(sluice_model *M)
{
    atomic_store(&M->owner, 0ul);
    pthread_mutex_unlock(&M->eval_mu);
}

void sluice_model_get_info(const sluice_model *M, sluice_model_info *o)
{
    if (!o) return;
    if (!M) { memset(o, 0, sizeof *o); return; }
    api_check(M, API_MODEL, "sluice_model_get_info");
    const sl_config *c = &M->m->cfg;
    *o = (sluice_model_info){ .n_vocab = c->vocab, .n_ctx_train = c->ctx_train, .n_layers = c->n_layers,
                              .n_heads = c->n_heads, .n_kv_heads = c->n_kv_heads, .dim = c->dim, .ffn_dim = c->ffn_dim,
                              .file_bytes = sl_gguf_file_size(M->m->gguf), .bos = sl_vocab_bos(M->voc),
                              .eos = sl_vocab_eos(M->voc), .eot = sl_vocab_eot(M->voc),
                              .chat_template = M->chat_template };
}

void sluice_model_get_plan(const sluice_model *M, sluice_plan_info *o)
{
    if (!o) return;
    if (!M) { memset(o, 0, sizeof *o); return; }
    api_check(M, API_MODEL, "sluice_model_get_plan");
    fill_plan_info(M, o);
}

void sluice_plan_print(const sluice_model *M, FILE *f, bool json)
{
    if (!M || !f) return;
    api_check(M, API_MODEL, "sluice_plan_print");
    if (!M->planned) {
        fprintf(f, json ? "{\"planned\":false}\n" : "no plan: a streaming mode was forced without a budget\n");
        return;
    }
    if (M->dplan) api_print_plan_with_draft(M->plan, M->pm, &M->req, M->dplan, f, json);
    else if (json) sl_plan_print_json(M->plan, M->pm, &M->req, f);
    else sl_plan_print(M->plan, M->pm, &M->req, f);
}

int sluice_plan(const char *path, const sluice_params *pp, sluice_plan_info *o, char *err, size_t errlen)
{
    sluice_params defaults;
    sluice_params_default(&defaults);
    const sluice_params *p = pp ? pp : &defaults;
    if (!path || !o) return api_einval(err, errlen, "sluice_plan: NULL %s", !path ? "model path" : "out pointer");
    memset(o, 0, sizeof *o);
    int prc = check_params(p, err, errlen);
    if (prc) return prc;
    sl_model *m = NULL;
    sl_vocab *voc = NULL;
    sl_plan_model *pm = malloc(sizeof *pm);
    sl_plan *plan = malloc(sizeof *plan);
    char e2[SL_ERRLEN];
    int rc = -ENOMEM;
    if (!pm || !plan) { snprintf(err, errlen, "out of memory"); goto done; }
    if ((rc = sl_model_open(path, &m, err, errlen))) goto done;
    if ((rc = sl_vocab_load(m->gguf, &voc, e2, sizeof e2))) { snprintf(err, errlen, "%s: %s", path, e2); goto done; }
    int n_ctx = p->n_ctx > 0 ? p->n_ctx : (m->cfg.ctx_train < 4096 ? m->cfg.ctx_train : 4096);
    int threads = p->n_threads > 0 ? p->n_threads : sl_ncpu();
    sl_plan_req req = { 0 };
    const char *spill;
    sl_plan_draft d;
    memset(plan, 0, sizeof *plan);
    if (wants_draft_model(p) && (rc = api_draft_check_vocab(voc, p->draft_model, err, errlen))) goto done;
    rc = plan_model(m, voc, p, n_ctx, p->n_batch > 0 ? p->n_batch : 512, threads, pm, &req, plan, &spill,
                    wants_draft_model(p) ? &d : NULL, err, errlen);
    if (rc == 0 && wants_draft_model(p)) fill_draft_info(&d, o);
    o->planned = rc == 0 || rc == -ENOSPC;
    o->budget = req.budget;
    o->min_budget = plan->min_budget;
    o->n_layers = m->cfg.n_layers;
    o->n_ctx_train = m->cfg.ctx_train;
    o->n_ctx = n_ctx;
    if (rc == 0) {
        o->all_resident = plan->all_resident;
        o->planned_bytes = plan->total_bytes;
        o->n_layers_resident = plan->n_layers_resident;
        o->lm_head_resident = plan->lm_head_resident;
        o->stream_bytes_per_token = plan->stream_bytes;
        o->kv_type = plan->kv == SL_PLAN_KV_Q8_0 ? SLUICE_KV_Q8_0 : SLUICE_KV_F16;
        o->kv_spilled = plan->kv == SL_PLAN_KV_SPILL;
        o->n_batch = plan->n_batch;
        o->pred_tok_s = plan->pred_tok_s;
        o->pred_req_tok_s = plan->pred_req_tok_s;
        o->pred_agg_tok_s = plan->pred_agg_tok_s;
    }
    o->n_parallel = p->n_parallel > 1 ? p->n_parallel : 1;
done:
    sl_vocab_free(voc);
    sl_model_free(m);
    free(pm);
    free(plan);
    return rc;
}

/* ---- tokens ------------------------------------------------------------------------------------ */

int sluice_tokenize(const sluice_model *M, const char *text, ptrdiff_t len, int flags, int32_t *out, int n_max)
{
    if (!M || !text || n_max < 0 || (n_max > 0 && !out)) return -EINVAL;
    api_check(M, API_MODEL, "sluice_tokenize");
    size_t n = len < 0 ? strlen(text) : (size_t)len;
    int64_t r = sl_tokenize(M->voc, text, n, flags & SLUICE_TOK_ADD_SPECIAL, flags & SLUICE_TOK_PARSE_SPECIAL, out,
                            out ? n_max : 0);
    if (r > INT32_MAX) return -EOVERFLOW;
    return (int)r;
}

int sluice_token_piece(const sluice_model *M, int32_t id, bool special, char *buf, size_t buflen)
{
    if (!M || (buflen && !buf)) return -EINVAL;
    api_check(M, API_MODEL, "sluice_token_piece");
    return sl_token_piece_ex(M->voc, id, special, buf, buflen);
}

int64_t sluice_detokenize(const sluice_model *M, const int32_t *ids, int n, char *buf, size_t buflen)
{
    if (!M || n < 0 || (n > 0 && !ids) || (buflen && !buf)) return -EINVAL;
    api_check(M, API_MODEL, "sluice_detokenize");
    return sl_detokenize(M->voc, ids, n, buf, buflen);
}

bool sluice_token_is_eog(const sluice_model *M, int32_t id)
{
    if (!M) return false;
    api_check(M, API_MODEL, "sluice_token_is_eog");
    return sl_vocab_is_eog(M->voc, id);
}

int sluice__fingerprint(sluice_model *M, uint64_t *fp, char *err, size_t errlen)
{
    if (!M->have_fingerprint) {
        int rc = sl_model_fingerprint(M->m, &M->fingerprint, err, errlen);
        if (rc) return rc;
        M->have_fingerprint = true;
    }
    *fp = M->fingerprint;
    return 0;
}
