/* runtime/serve/http.c — the HTTP side of `sluice serve`: libmicrohttpd's callbacks, routing,
 * authentication, limits, and the server's life cycle.
 *
 * One epoll thread serves every connection, so nothing here blocks: a generation request is
 * handed to the scheduler and its connection suspended; the scheduler resumes it when there is
 * text (streaming) or the answer is complete.  Limits: the body (Content-Length checked before any
 * byte is read; a chunked body that grows past it closes the connection), the request line and
 * headers (libmicrohttpd's connection memory: 431 past it), open connections (in all and per client
 * address), a deadline for a whole request to arrive and the watch for clients that leave while
 * their request waits (conns.c), an idle timeout (suspended connections, which wait on the model
 * and not on the client, do not time out), the queue (503).
 */
#include "runtime/serve/serve_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "kernels/clock.h"
#include "runtime/serve/webui.h"
#include "runtime/text/chat_template.h"

void sl_serve_opts_default(sl_serve_opts *o)
{
    *o = (sl_serve_opts){ .host = "127.0.0.1", .port = 8080, .model_name = "sluice", .n_parallel = 1, .queue_max = 16,
                          .max_body = 1u << 20, .max_header = 32u << 10, .max_connections = 512, .max_per_client = 64,
                          .timeout_s = 30, .request_timeout_s = 10,
                          .default_max_tokens = 256, .prompt_cache_max = 4ull << 30 };
    sluice_sampler_params_default(&o->sampling);
}

/* Per-request state (libmicrohttpd's req_cls). */
typedef struct req {
    int route;
    char *body;
    size_t len, cap;
    bool answered;                /* a response was queued before the body: ignore the rest */
    job *j;                       /* generation requests, once parsed */
} req;

enum { R_NONE, R_HEALTH, R_MODELS, R_METRICS, R_COMPLETIONS, R_CHAT, R_PLAN, R_PAGE };

/* ---- responses ---------------------------------------------------------------------------------- */

/* Queue r (len bytes) with its status's headers, and count it. */
static enum MHD_Result queue_response(sl_server *s, struct MHD_Connection *c, int status, struct MHD_Response *r, size_t len)
{
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    if (status == 503) MHD_add_response_header(r, "Retry-After", "1");
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    conns_received(s, c, NULL);   /* answered: the request deadline no longer applies */
    pthread_mutex_lock(&s->mu);
    s->met.bytes_sent += len;
    if (status >= 400) s->met.requests[status == 503 ? 2 : status < 500 ? 1 : 4]++;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static enum MHD_Result send_buf(sl_server *s, struct MHD_Connection *c, int status, char *body, size_t len, const char *type)
{
    if (!body) { body = strdup("{}"); len = 2; }
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) { free(body); return MHD_NO; }
    MHD_add_response_header(r, "Content-Type", type);
    return queue_response(s, c, status, r, len);
}

static enum MHD_Result send_error(sl_server *s, struct MHD_Connection *c, int status, const char *msg)
{
    size_t len;
    char *b = oai_error_body(status, msg, &len);
    return send_buf(s, c, status, b, len, "application/json");
}

static enum MHD_Result send_json(sl_server *s, struct MHD_Connection *c, char *body, size_t len)
{
    return send_buf(s, c, 200, body, len, "application/json");
}

/* ---- the small endpoints ------------------------------------------------------------------------- */

static enum MHD_Result health(sl_server *s, struct MHD_Connection *c)
{
    pthread_mutex_lock(&s->mu);
    int active = s->active, q = s->q_len;
    bool stopping = s->stopping;
    pthread_mutex_unlock(&s->mu);
    char *b = NULL;
    int n = asprintf(&b, "{\"status\":\"%s\",\"slots\":%d,\"slots_busy\":%d,\"queued\":%d}",
                     stopping ? "stopping" : "ok", s->o.n_parallel, active, q);
    return send_buf(s, c, stopping ? 503 : 200, n < 0 ? NULL : b, n < 0 ? 0 : (size_t)n, "application/json");
}

static enum MHD_Result models(sl_server *s, struct MHD_Connection *c)
{
    size_t len = 0;
    char *b = oai_models_body(s, &len);   /* jansson escapes the name (a file name may hold '"') */
    if (!b) return send_error(s, c, 500, "out of memory");
    return send_json(s, c, b, len);
}

static enum MHD_Result metrics(sl_server *s, struct MHD_Connection *c)
{
    pthread_mutex_lock(&s->mu);
    serve_metrics m = s->met;
    int active = s->active, q = s->q_len;
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_lock(&s->cmu);
    const double n_conns = s->n_conns, n_timed_out = (double)s->n_timed_out, n_evicted = (double)s->n_evicted,
                 n_refused = (double)s->n_refused;
    pthread_mutex_unlock(&s->cmu);
    static const char *outcome[5] = { "ok", "client_error", "overloaded", "cancelled", "server_error" };
    char *b = malloc(8192);
    if (!b) return MHD_NO;
    size_t n = 0, cap = 8192;
#define OUT(...) n += (size_t)snprintf(b + n, n < cap ? cap - n : 0, __VA_ARGS__)
    OUT("# HELP sluice_requests_total Generation and API requests by outcome.\n# TYPE sluice_requests_total counter\n");
    for (int i = 0; i < 5; i++) OUT("sluice_requests_total{outcome=\"%s\"} %" PRIu64 "\n", outcome[i], m.requests[i]);
    const double per_pass = m.passes ? (double)m.pass_tokens / (double)m.passes : 0.0;
    const double accept = m.drafted ? (double)m.accepted / (double)m.drafted : 0.0;
    const double seq_tpp = m.seq_passes ? (double)m.completion_tokens / (double)m.seq_passes : 0.0;
    /* one row per metric: name, counter (else gauge), help, value; a counter prints as an integer */
    const struct { const char *name; bool counter; const char *help; double v; } rows[] = {
        { "sluice_prompt_tokens_total", true, "Prompt tokens evaluated (not counting those the prompt cache reused).",
          (double)m.prompt_tokens },
        { "sluice_prompt_tokens_cached_total", true, "Prompt tokens reused from a slot's KV cache (the prompt cache).",
          (double)m.prompt_cached },
        { "sluice_prompt_cache_hits_total", true, "Requests that reused part of their prompt from a slot's KV cache.",
          (double)m.pc_hits },
        { "sluice_prompt_cache_misses_total", true, "Requests that evaluated their whole prompt (prompt cache on).",
          (double)m.pc_misses },
        { "sluice_prompt_cache_saves_total", true, "Slots' KV written to the prompt cache's directory.", (double)m.pc_saves },
        { "sluice_prompt_cache_loads_total", true, "Prompt cache files loaded into a slot.", (double)m.pc_loads },
        { "sluice_prompt_cache_disk_errors_total", true, "Prompt cache files that could not be written or read.",
          (double)m.pc_disk_errors },
        { "sluice_prompt_cache_disk_bytes", false, "Bytes of the prompt cache's files.", (double)m.pc_disk_bytes },
        { "sluice_prompt_cache_disk_files", false, "Prompt cache files.", (double)m.pc_disk_files },
        { "sluice_completion_tokens_total", true, "Tokens generated.", (double)m.completion_tokens },
        { "sluice_passes_total", true, "Forward passes (each reads the streamed weights once).", (double)m.passes },
        { "sluice_pass_tokens_total", true, "Tokens carried by the forward passes.", (double)m.pass_tokens },
        { "sluice_tokens_per_pass", false, "Mean tokens per forward pass.", per_pass },
        { "sluice_sequence_passes_total", true,
          "Decoding steps: a forward pass counted once for each sequence it decoded.", (double)m.seq_passes },
        { "sluice_drafted_tokens_total", true, "Drafted tokens verified in those steps (speculative decoding).",
          (double)m.drafted },
        { "sluice_accepted_tokens_total", true, "Drafted tokens accepted and generated.", (double)m.accepted },
        { "sluice_draft_acceptance", false, "Accepted / drafted tokens.", accept },
        { "sluice_sequence_tokens_per_pass", false,
          "Tokens generated per decoding step (sluice run --stats' tokens per pass).", seq_tpp },
        { "sluice_draft_max", false, "Most drafted tokens a step verifies (0: no speculative decoding).",
          (double)s->draft_max },
        { "sluice_stream_bytes_read_total", true, "Weight bytes streamed from disk.", (double)m.stream_bytes },
        { "sluice_expert_bytes_read_total", true, "Routed-expert bytes read from disk (mixture of experts; counted in "
          "sluice_stream_bytes_read_total too).", (double)m.expert_bytes },
        { "sluice_expert_cache_hits_total", true, "Experts a pass asked for that the expert cache held.", (double)m.expert_hits },
        { "sluice_expert_cache_misses_total", true, "Experts a pass asked for that were read.", (double)m.expert_misses },
        { "sluice_expert_cache_hit_rate", false, "Expert cache hits / experts asked for.",
          m.expert_hits + m.expert_misses ? (double)m.expert_hits / (double)(m.expert_hits + m.expert_misses) : 0.0 },
        { "sluice_expert_prefetch_total", true, "Experts read on a guess (--expert-prefetch).", (double)m.prefetch_units },
        { "sluice_expert_prefetch_used_total", true, "Of those, experts the next block then took.", (double)m.prefetch_used },
        { "sluice_expert_prefetch_bytes_total", true, "Bytes requested on a guess.", (double)m.prefetch_bytes },
        { "sluice_expert_prefetch_wasted_bytes_total", true, "Of those, bytes of experts the next block did not take.",
          (double)m.prefetch_wasted },
        { "sluice_expert_prefetch_failed_total", true, "Guessed reads that failed (the expert was read again when needed).",
          (double)m.prefetch_failed },
        { "sluice_response_bytes_total", true, "Response bytes sent.", (double)m.bytes_sent },
        { "sluice_queue_length", false, "Requests waiting for a slot.", (double)q },
        { "sluice_slots_busy", false, "Slots generating.", (double)active },
        { "sluice_slots", false, "Slots (--parallel).", (double)s->o.n_parallel },
        { "sluice_connections", false, "Open connections.", n_conns },
        { "sluice_request_timeouts_total", true, "Connections closed (408) because a request did not arrive whole in time.",
          n_timed_out },
        { "sluice_connections_evicted_total", true, "Idle or slow connections closed at the limit for a new one.",
          n_evicted },
        { "sluice_connections_refused_total", true, "Connections refused at the limit (none could be closed for them).",
          n_refused },
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        OUT("# HELP %s %s\n# TYPE %s %s\n%s ", rows[i].name, rows[i].help, rows[i].name,
            rows[i].counter ? "counter" : "gauge", rows[i].name);
        if (rows[i].counter || rows[i].v == (double)(int64_t)rows[i].v) OUT("%.0f\n", rows[i].v);
        else OUT("%.4f\n", rows[i].v);
    }
#undef OUT
    if (n >= cap) n = cap - 1;
    return send_buf(s, c, 200, b, n, "text/plain; version=0.0.4");
}

static enum MHD_Result plan(sl_server *s, struct MHD_Connection *c)
{
    size_t len = 0;
    char *b = webui_plan_json(s->M, &len);   /* what `sluice plan --json` prints */
    if (!b) return send_error(s, c, 500, "out of memory");
    return send_json(s, c, b, len);
}

/* A file of the web page (compiled in, never freed).  The page may load nothing from elsewhere
 * (Content-Security-Policy: this server only; no inline script or style) nor be framed. */
static enum MHD_Result page(sl_server *s, struct MHD_Connection *c, const char *url)
{
    const char *type = NULL;
    const sl_embedded_file *f = webui_file(url, &type);
    if (!f) return send_error(s, c, 404, "no such file");
    struct MHD_Response *r = MHD_create_response_from_buffer(f->len, (void *)f->data, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Content-Security-Policy", "default-src 'self'; base-uri 'none'; form-action 'none'; "
                            "frame-ancestors 'none'");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    return queue_response(s, c, 200, r, f->len);
}

/* ---- generation ---------------------------------------------------------------------------------- */

/* Streaming body: the next SSE bytes, or suspend until the scheduler has some (return 0). */
static ssize_t sse_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    job *j = cls;
    sl_server *s = j->srv;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (j->sse_off < j->sse_len) {
            size_t n = j->sse_len - j->sse_off < max ? j->sse_len - j->sse_off : max;
            memcpy(buf, j->sse + j->sse_off, n);
            j->sse_off += n;
            s->met.bytes_sent += n;
            pthread_mutex_unlock(&s->mu);
            return (ssize_t)n;
        }
        free(j->sse);
        j->sse = NULL;
        j->sse_len = j->sse_off = 0;
        if (j->sse_stage == 0) {
            j->sse_stage = 1;
            if (j->kind == JOB_CHAT) j->sse = oai_sse_chunk(s, j, "", 0, 0, 0, true, FINISH_NONE, &j->sse_len);
        } else if (j->sse_stage == 1 && j->sent < j->text_len) {
            int lp_to = lp_ready(j, j->lp_sent);
            if (j->outparse)   /* tool calls and reasoning (tools.c; gpt-oss's channels too when tools are on) */
                j->sse = tools_sse(s, j, j->text + j->sent, j->text_len - j->sent, false, j->lp_sent, lp_to, &j->sse_len);
            else if (j->harmony)
                j->sse = oai_sse_harmony(s, j, j->text + j->sent, j->text_len - j->sent, false, j->lp_sent, lp_to, &j->sse_len);
            else
                j->sse = oai_sse_chunk(s, j, j->text + j->sent, j->text_len - j->sent, j->lp_sent, lp_to, false,
                                       FINISH_NONE, &j->sse_len);
            j->sent = j->text_len;
            j->lp_sent = lp_to;
        } else if (j->sse_stage == 1 && j->state == JOB_DONE && (j->harmony || j->outparse) && !j->hm_done &&
                   j->finish != FINISH_CANCELLED && j->finish != FINISH_ERROR) {
            j->hm_done = true;   /* the bytes the parser held for a marker that never came */
            j->sse = j->outparse ? tools_sse(s, j, "", 0, true, j->lp_sent, j->lp_sent, &j->sse_len)
                                 : oai_sse_harmony(s, j, "", 0, true, j->lp_sent, j->lp_sent, &j->sse_len);
        } else if (j->sse_stage == 1 && j->state == JOB_DONE && j->finish == FINISH_CANCELLED) {
            j->sse_stage = 4;   /* cancelled (shutdown, or the client left): the stream simply ends */
        } else if (j->sse_stage == 1 && j->state == JOB_DONE && j->finish == FINISH_ERROR) {
            j->sse_stage = 3;   /* an error event in OpenAI's shape, then the end */
            j->sse = oai_sse_error(j, &j->sse_len);
        } else if (j->sse_stage == 1 && j->state == JOB_DONE) {
            j->sse_stage = 2;
            j->sse = oai_sse_chunk(s, j, "", 0, 0, 0, false, j->finish, &j->sse_len);
        } else if (j->sse_stage == 2) {
            j->sse_stage = 3;
            if (j->include_usage) j->sse = oai_sse_usage(s, j, &j->sse_len);
        } else if (j->sse_stage == 3) {
            j->sse_stage = 4;
            j->sse = strdup("data: [DONE]\n\n");
            j->sse_len = j->sse ? strlen(j->sse) : 0;
        } else if (j->sse_stage == 4) {
            pthread_mutex_unlock(&s->mu);
            return MHD_CONTENT_READER_END_OF_STREAM;
        } else {
            /* nothing yet: park the connection; the scheduler resumes it (under the same lock, so
             * no wake-up is lost between this check and the suspension) */
            j->suspended = true;
            MHD_suspend_connection(j->conn);
            pthread_mutex_unlock(&s->mu);
            return 0;
        }
    }
}

static void sse_free(void *cls)
{
    job *j = cls;
    job_unref(j->srv, j);
}

static enum MHD_Result start_generation(sl_server *s, struct MHD_Connection *c, req *rq)
{
    job *j = job_new();
    if (!j) return send_error(s, c, 500, "out of memory");
    pthread_mutex_lock(&s->mu);
    s->open_jobs++;
    pthread_mutex_unlock(&s->mu);
    j->srv = s;
    j->conn = c;
    rq->j = j;
    char msg[512];
    int st = oai_parse_request(s, rq->route == R_CHAT ? JOB_CHAT : JOB_COMPLETION, rq->body ? rq->body : "", rq->len, j,
                               msg, sizeof msg);
    free(rq->body);
    rq->body = NULL;
    if (st) return send_error(s, c, st, msg);
    static uint64_t counter;
    snprintf(j->id, sizeof j->id, "%s-%" PRIx64 "%04" PRIx64, j->kind == JOB_CHAT ? "chatcmpl" : "cmpl", sl_now_ns(),
             __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) & 0xffff);
    j->created = time(NULL);
    int rc = sched_submit(s, j);
    if (rc == -EBUSY) return send_error(s, c, 503, "the server is busy: every slot is generating and the queue is full; retry later");
    if (rc) return send_error(s, c, 503, "the server is shutting down");
    conns_received(s, c, j);   /* from now on a client that leaves cancels it */
    if (!j->stream) {
        pthread_mutex_lock(&s->mu);
        if (j->state != JOB_DONE) {
            j->suspended = true;
            MHD_suspend_connection(c);
        }
        pthread_mutex_unlock(&s->mu);
        return MHD_YES;
    }
    pthread_mutex_lock(&s->mu);
    j->refs++;   /* the response's */
    pthread_mutex_unlock(&s->mu);
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_reader, j, sse_free);
    if (!r) { job_unref(s, j); return MHD_NO; }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

/* A resumed non-streaming request: its answer, or suspend again. */
static enum MHD_Result finish_generation(sl_server *s, struct MHD_Connection *c, job *j)
{
    pthread_mutex_lock(&s->mu);
    if (j->state != JOB_DONE) {
        j->suspended = true;
        MHD_suspend_connection(c);
        pthread_mutex_unlock(&s->mu);
        return MHD_YES;
    }
    pthread_mutex_unlock(&s->mu);
    if (j->finish == FINISH_ERROR) return send_error(s, c, 500, j->err[0] ? j->err : "generation failed");
    if (j->finish == FINISH_CANCELLED) return MHD_NO;   /* shutdown, or the client left: closed without an answer */
    size_t len;
    char *b = oai_response(s, j, &len);
    if (!b) return send_error(s, c, 500, "out of memory");
    return send_json(s, c, b, len);
}

/* ---- routing ------------------------------------------------------------------------------------- */

/* Constant-time comparison of the presented bearer token with the key: the time depends only on
 * the key's length, never on how much of it matched. */
static bool key_ok(const char *key, const char *auth)
{
    if (!auth || strncmp(auth, "Bearer ", 7)) return false;
    const char *got = auth + 7;
    size_t kl = strlen(key), gl = strlen(got);
    unsigned char d = kl != gl;
    for (size_t i = 0; i < kl; i++) d |= (unsigned char)(key[i] ^ (i < gl ? got[i] : 0));
    return d == 0;
}

static int route_of(const char *url, const char *method, bool *method_ok)
{
    static const struct { const char *url, *method; int route; } routes[] = {
        { "/health", "GET", R_HEALTH }, { "/v1/models", "GET", R_MODELS }, { "/metrics", "GET", R_METRICS },
        { "/v1/completions", "POST", R_COMPLETIONS }, { "/v1/chat/completions", "POST", R_CHAT },
        { "/v1/plan", "GET", R_PLAN },
    };
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++)
        if (!strcmp(url, routes[i].url)) {
            *method_ok = !strcmp(method, routes[i].method);
            return routes[i].route;
        }
    *method_ok = !strcmp(method, "GET");
    return webui_file(url, NULL) ? R_PAGE : R_NONE;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *data, size_t *data_size, void **req_cls)
{
    (void)version;
    sl_server *s = cls;
    req *rq = *req_cls;
    if (!rq) {   /* headers are in: decide now whether to read a body at all */
        conns_handled(s, c);
        if (!(rq = calloc(1, sizeof *rq))) return MHD_NO;
        *req_cls = rq;
        bool method_ok;
        rq->route = route_of(url, method, &method_ok);
        if (rq->route == R_PAGE && s->o.no_webui) rq->route = R_NONE;
        rq->answered = true;
        if (rq->route == R_NONE) return send_error(s, c, 404, "no such endpoint (see GET /v1/models, POST /v1/chat/completions)");
        if (!method_ok) return send_error(s, c, 405, "wrong method for this endpoint");
        /* the page's files are open (the page asks for the key); what it reads is not */
        if (s->o.api_key && rq->route != R_HEALTH && rq->route != R_PAGE &&
            !key_ok(s->o.api_key, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization")))
            return send_error(s, c, 401, "missing or wrong API key (Authorization: Bearer KEY)");
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > s->o.max_body) {
            char m[160];
            snprintf(m, sizeof m, "the request body (%.24s bytes) is larger than this server accepts (%zu)", cl, s->o.max_body);
            return send_error(s, c, 413, m);
        }
        rq->answered = false;
        return MHD_YES;
    }
    if (rq->answered) {   /* refused from its headers: whatever body follows is dropped */
        *data_size = 0;
        return MHD_YES;
    }
    if (*data_size) {   /* a piece of the body */
        size_t n = *data_size;
        *data_size = 0;
        if (rq->len + n > s->o.max_body) return MHD_NO;   /* a chunked body past the limit: cut off */
        if (rq->len + n + 1 > rq->cap) {
            size_t nc = rq->cap ? rq->cap : 4096;
            while (nc < rq->len + n + 1) nc *= 2;
            char *p = realloc(rq->body, nc);
            if (!p) return MHD_NO;
            rq->body = p;
            rq->cap = nc;
        }
        memcpy(rq->body + rq->len, data, n);
        rq->len += n;
        rq->body[rq->len] = 0;
        return MHD_YES;
    }
    switch (rq->route) {
    case R_HEALTH: return health(s, c);
    case R_MODELS: return models(s, c);
    case R_METRICS: return metrics(s, c);
    case R_PLAN: return plan(s, c);
    case R_PAGE: return page(s, c, url);
    default: return rq->j ? finish_generation(s, c, rq->j) : start_generation(s, c, rq);
    }
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls, enum MHD_RequestTerminationCode why)
{
    (void)why;
    sl_server *s = cls;
    conns_completed(s, c);
    req *rq = *req_cls;
    if (!rq) return;
    if (rq->j) {
        pthread_mutex_lock(&s->mu);
        rq->j->gone = true;   /* a request still generating is cancelled: its slot is freed */
        rq->j->suspended = false;
        pthread_cond_broadcast(&s->cv);
        job_unref_locked(s, rq->j);
        pthread_mutex_unlock(&s->mu);
    }
    free(rq->body);
    free(rq);
    *req_cls = NULL;
}

/* ---- life cycle ---------------------------------------------------------------------------------- */

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    sl_server *s = cls;
    /* (0.9.75's messages for the two refusals it would answer wrongly: conns.c) */
    if (!strncmp(fmt, "Failed to parse `Content-Length'", 32)) conns_mhd_refused(s, 400);
    else if (!strncmp(fmt, "Too large value of 'Content-Length'", 35)) conns_mhd_refused(s, 413);
    fprintf(stderr, "sluice serve: http: ");
    vfprintf(stderr, fmt, ap);
}

int sl_server_start(sluice_model *M, const sl_serve_opts *o, sl_server **out, char *err, size_t errlen)
{
    sl_server *s = calloc(1, sizeof *s);
    if (!s) { snprintf(err, errlen, "out of memory"); return -ENOMEM; }
    s->M = M;
    s->o = *o;
    /* the name goes into every response's JSON, which must be UTF-8 (the default is the file's name) */
    size_t nlen = strlen(o->model_name), used = 0;
    s->model_name = malloc(3 * nlen + 1);
    if (!s->model_name) { free(s); snprintf(err, errlen, "out of memory"); return -ENOMEM; }
    s->model_name[utf8_clean(o->model_name, nlen, s->model_name, &used)] = 0;
    s->o.model_name = s->model_name;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_mutex_init(&s->cmu, NULL);
    pthread_cond_init(&s->ccv, NULL);
    sluice_model_info info;
    sluice_model_get_info(M, &info);
    sluice_plan_info pi;
    sluice_model_get_plan(M, &pi);
    s->n_ctx = pi.n_ctx;
    s->n_batch = pi.n_batch < pi.n_ctx ? pi.n_batch : pi.n_ctx;
    s->n_vocab = info.n_vocab;
    if (s->o.max_prompt_tokens <= 0 || s->o.max_prompt_tokens > s->n_ctx - 1) s->o.max_prompt_tokens = s->n_ctx - 1;
    if (s->o.max_tokens <= 0 || s->o.max_tokens > s->n_ctx) s->o.max_tokens = s->n_ctx;
    if (s->o.default_max_tokens > s->o.max_tokens) s->o.default_max_tokens = s->o.max_tokens;
    const char *tt = o->chat_template ? o->chat_template : info.chat_template;
    s->tmpl = tt ? sl_chat_template_detect(tt) : SL_TMPL_UNKNOWN;
    if (s->tmpl == SL_TMPL_UNKNOWN) {
        if (o->chat_template) {
            snprintf(err, errlen, "--chat-template: unknown template '%s' (known: %s)", o->chat_template,
                     sl_chat_template_names());
            sl_server_free(s);
            return -EINVAL;
        }
        s->tmpl = SL_TMPL_PLAIN;
    }
    s->tmpl_end_tok = -1;
    const char *et = sl_chat_template_end_token(s->tmpl);
    int32_t id[2];
    if (et && sluice_tokenize(M, et, -1, SLUICE_TOK_PARSE_SPECIAL, id, 2) == 1) s->tmpl_end_tok = id[0];

    struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_PASSIVE, .ai_socktype = SOCK_STREAM }, *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", o->port);
    int gr = getaddrinfo(o->host, port, &hints, &ai);
    if (gr) {
        snprintf(err, errlen, "--host %s: not a numeric IPv4 or IPv6 address (%s)", o->host, gai_strerror(gr));
        sl_server_free(s);
        return -EINVAL;
    }
    int rc = sched_start(s, err, errlen);
    if (!rc) rc = conns_start(s, err, errlen);
    if (rc) { freeaddrinfo(ai); sl_server_free(s); return rc; }
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                     (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    s->d = MHD_start_daemon(flags, (uint16_t)o->port, conns_accept, s, on_request, s,
                            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
                            MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_NOTIFY_CONNECTION, conns_notify, s,
                            MHD_OPTION_URI_LOG_CALLBACK, conns_request_line, s,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)o->max_per_client,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)(o->max_connections + CONN_HEADROOM),
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->timeout_s,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, o->max_header,
                            MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->d) {
        int e = errno ? errno : EADDRINUSE;
        snprintf(err, errlen, "cannot listen on %s port %d: %s", o->host, o->port, strerror(e));
        sl_server_free(s);
        return -e;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : o->port;
    *out = s;
    return 0;
}

int sl_server_port(const sl_server *s) { return s->port; }
int sl_server_draft_max(const sl_server *s) { return s->draft_max; }

void sl_server_shutdown(sl_server *s, double grace_s)
{
    if (!s->d) return;
    pthread_mutex_lock(&s->mu);
    s->stopping = true;   /* new generation requests get 503; /health says "stopping" */
    uint64_t end = sl_now_ns() + (uint64_t)(grace_s * 1e9);
    while ((s->active || s->q_len) && sl_now_ns() < end && !s->hurry) {
        pthread_mutex_unlock(&s->mu);
        struct timespec ts = { 0, 20 * 1000000L };
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    sched_stop(s);   /* cancels what is left; every waiting connection is resumed with its answer */
    /* let the resumed connections send their last bytes (bounded) before the daemon goes */
    uint64_t end2 = sl_now_ns() + 2000000000ull;
    pthread_mutex_lock(&s->mu);
    while (s->open_jobs > 0 && sl_now_ns() < end2 && !s->hurry) {
        pthread_mutex_unlock(&s->mu);
        struct timespec ts = { 0, 20 * 1000000L };
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    MHD_stop_daemon(s->d);
    s->d = NULL;
}

void sl_server_hurry(sl_server *s)
{
    pthread_mutex_lock(&s->mu);
    s->hurry = true;
    pthread_mutex_unlock(&s->mu);
}

void sl_server_free(sl_server *s)
{
    if (!s) return;
    if (s->d) sl_server_shutdown(s, 0);
    conns_stop(s);
    sched_stop(s);
    free(s->queue);
    free(s->model_name);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->cmu);
    pthread_cond_destroy(&s->ccv);
    free(s);
}
