/* runtime/api/api.c — include/sluice.h, part 1: opening a model (plan, load, stream), planning, tokens.
 * Contexts, generation and sessions are in runtime/api/api_ctx.c. */
#include "runtime/api/api_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/api/session.h"
#include "kernels/threadpool.h"
#include "kernels/clock.h"


const char *sluice_version(void) { return SLUICE_VERSION; }

void sluice_params_default(sluice_params *p)
{
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

/* "64M", "2G" or a byte count: how a budget is named in messages. */
static void fmt_size(char *buf, size_t len, uint64_t b)
{
    if (b && b % (1ull << 30) == 0) snprintf(buf, len, "%" PRIu64 "G", b >> 30);
    else if (b && b % (1ull << 20) == 0) snprintf(buf, len, "%" PRIu64 "M", b >> 20);
    else snprintf(buf, len, "%" PRIu64, b);
}

/* ---- planning ---------------------------------------------------------------------------------- */

/* Fill pm/req/plan for model m under p.  0, or -errno with err (infeasible: -ENOSPC, plan->why). */
static int make_plan(const sl_model *m, size_t vocab_bytes, const sluice_params *p, int n_ctx, int n_batch, int threads,
                     sl_plan_model *pm, sl_plan_req *req, sl_plan *plan, char *err, size_t errlen)
{
    uint64_t budget = p->ram_budget;
    char how[160] = "", name[32];
    if (!budget) {
        budget = sl_plan_auto_budget(how, sizeof how);
        if (!budget) {
            snprintf(err, errlen, "cannot tell how much memory is available; give --ram-budget SIZE");
            return -EINVAL;
        }
        snprintf(name, sizeof name, "auto");
    } else {
        fmt_size(name, sizeof name, budget);
    }
    sl_plan_model_from(pm, m, vocab_bytes);
    *req = (sl_plan_req){ .budget = budget, .n_ctx = n_ctx, .n_batch = n_batch, .n_threads = threads,
                          .allow_spill = true, .allow_q8_kv = m->cfg.head_dim % 32 == 0 };
    /* rates not given are measured (once per device / kernel path, then cached) */
    sl_plan_rates(m, pm, req, p->disk_bw > 0 ? p->disk_bw : 0, p->compute_bw);
    int rc = sl_plan_make(pm, req, plan);
    if (rc) {
        snprintf(err, errlen, "--ram-budget %s%s%s: %s", name, *how ? " " : "", how, plan->why);
        return rc;
    }
    /* the disk's rate depends on how the plan reads: measured for that (before any weight is loaded,
     * so the probe's buffers, no larger than the plan's, come and go within the budget) */
    sl_plan_disk_rate(m, pm, req, plan, p->io, p->no_direct, p->disk_bw < 0);
    return 0;
}

static void fill_plan_info(const sluice_model *M, sluice_plan_info *o)
{
    memset(o, 0, sizeof *o);
    o->planned = M->planned;
    o->n_layers = M->m->cfg.n_layers;
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
    }
    /* what the run actually does (a forced mode may differ from the plan) */
    int full = 0;
    for (int l = 0; l < M->m->cfg.n_layers; l++) {
        sl_weight *w[SL_BLOCK_MATS];
        int n = sl_layer_weights(&M->m->layers[l], w), res = 1;
        for (int i = 0; i < n; i++) {
            if (w[i]->stream) { res = 0; o->stream_bytes_per_token += w[i]->nbytes; }
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

/* ---- open / close ------------------------------------------------------------------------------ */

int sluice_open(const char *path, const sluice_params *pp, sluice_model **out, char *err, size_t errlen)
{
    sluice_params defaults;
    sluice_params_default(&defaults);
    const sluice_params *p = pp ? pp : &defaults;
    sluice_model *M = calloc(1, sizeof *M);
    if (!M) { snprintf(err, errlen, "out of memory"); return -ENOMEM; }
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
    int kv = p->kv_type;
    uint64_t chunk = p->chunk_bytes;
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
        if ((rc = make_plan(M->m, sl_vocab_mem_bytes(M->voc), p, M->n_ctx, M->n_batch, M->threads, M->pm, &M->req,
                            M->plan, err, errlen)))
            goto fail;
        M->planned = true;
        const sl_plan *pl = M->plan;
        if (!forced && !pl->all_resident) {
            sl_plan_apply(pl, M->m);
            streaming = true;
            chunk = pl->chunk_bytes;
            prefetch = pl->prefetch;
            head_rows = pl->lm_head_rows;
            M->n_batch = pl->n_batch;
            if (kv == SLUICE_KV_AUTO) kv = pl->kv == SL_PLAN_KV_Q8_0 ? SL_KV_Q8_0 : SL_KV_F16;
            if (pl->kv == SL_PLAN_KV_SPILL) {
                spill = p->kv_spill_dir ? p->kv_spill_dir : getenv("TMPDIR") ? getenv("TMPDIR") : "/var/tmp";
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
    if (p->kv_spill_dir && !spill) spill = p->kv_spill_dir;
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
        sl_stream_opts so = { (sl_io_backend)p->io, chunk, prefetch, head_rows, p->no_direct };
        if ((rc = sl_stream_create(M->m, M->pool, &so, &M->stream, err, errlen))) goto fail;
        if (*sl_stream_notice(M->stream)) logf_(p, SLUICE_LOG_NOTE, "%s", sl_stream_notice(M->stream));
    }
    M->t_loaded_ns = sl_now_ns();
    *out = M;
    return 0;
fail:
    sluice_close(M);
    return rc;
}

void sluice_close(sluice_model *M)
{
    if (!M) return;
    sl_stream_free(M->stream);
    sl_pool_free(M->pool);
    sl_vocab_free(M->voc);
    sl_model_free(M->m);
    free(M->pm);
    free(M->plan);
    free(M->spill_dir);
    free(M->chat_template);
    free(M);
}

void sluice_model_get_info(const sluice_model *M, sluice_model_info *o)
{
    const sl_config *c = &M->m->cfg;
    *o = (sluice_model_info){ .n_vocab = c->vocab, .n_ctx_train = c->ctx_train, .n_layers = c->n_layers,
                              .n_heads = c->n_heads, .n_kv_heads = c->n_kv_heads, .dim = c->dim, .ffn_dim = c->ffn_dim,
                              .file_bytes = sl_gguf_file_size(M->m->gguf), .bos = sl_vocab_bos(M->voc),
                              .eos = sl_vocab_eos(M->voc), .eot = sl_vocab_eot(M->voc),
                              .chat_template = M->chat_template };
}

void sluice_model_get_plan(const sluice_model *M, sluice_plan_info *o) { fill_plan_info(M, o); }

void sluice_plan_print(const sluice_model *M, FILE *f, bool json)
{
    if (!M->planned) {
        fprintf(f, json ? "{\"planned\":false}\n" : "no plan: a streaming mode was forced without a budget\n");
        return;
    }
    if (json) sl_plan_print_json(M->plan, M->pm, &M->req, f);
    else sl_plan_print(M->plan, M->pm, &M->req, f);
}

int sluice_plan(const char *path, const sluice_params *pp, sluice_plan_info *o, char *err, size_t errlen)
{
    sluice_params defaults;
    sluice_params_default(&defaults);
    const sluice_params *p = pp ? pp : &defaults;
    memset(o, 0, sizeof *o);
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
    sl_plan_req req;
    rc = make_plan(m, sl_vocab_mem_bytes(voc), p, n_ctx, p->n_batch > 0 ? p->n_batch : 512, threads, pm, &req, plan,
                   err, errlen);
    o->planned = rc == 0 || rc == -ENOSPC;
    o->budget = req.budget;
    o->min_budget = plan->min_budget;
    o->n_layers = m->cfg.n_layers;
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
    }
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
    if (!text || n_max < 0) return -EINVAL;
    size_t n = len < 0 ? strlen(text) : (size_t)len;
    int64_t r = sl_tokenize(M->voc, text, n, flags & SLUICE_TOK_ADD_SPECIAL, flags & SLUICE_TOK_PARSE_SPECIAL, out,
                            out ? n_max : 0);
    if (r > INT32_MAX) return -EOVERFLOW;
    return (int)r;
}

int sluice_token_piece(const sluice_model *M, int32_t id, bool special, char *buf, size_t buflen)
{
    return sl_token_piece_ex(M->voc, id, special, buf, buflen);
}

int64_t sluice_detokenize(const sluice_model *M, const int32_t *ids, int n, char *buf, size_t buflen)
{
    return sl_detokenize(M->voc, ids, n, buf, buflen);
}

bool sluice_token_is_eog(const sluice_model *M, int32_t id) { return sl_vocab_is_eog(M->voc, id); }

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
