/* tests/test_serve_spec.c — speculative decoding in `sluice serve` (runtime/serve/sched.c).
 *
 * A server runs in this process on a free loopback port; plain HTTP/1.1 requests (one connection
 * each, "Connection: close") go to it from several threads at once.  The same requests go to a
 * server over the same model file opened with drafting off, and the greedy answers must be equal:
 * tokens, text and finish_reason — with the adaptive draft length and with --draft-fixed (every
 * pass drafts draft_max tokens when the n-grams have them, so drafts are cut by stop strings and
 * max_tokens), on stories260K and a random-weight micro model, both planned at a streamed budget
 * with several requests decoding together.  /metrics and each response's "timings" must report the
 * drafting, and agree with each other.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "include/sluice.h"
#include "runtime/serve/serve.h"

#define STORIES SL_SOURCE_DIR "/models/stories260K.gguf"
#define MICRO SL_SHARED_DIR "/models/micro-llama.Q4_K_M.gguf"
#define N_PAR 4

enum { DRAFT_OFF, DRAFT_ADAPTIVE, DRAFT_FIXED };

typedef struct server {
    sluice_model *m;
    sl_server *s;
    int port;
} server;

/* The model planned for N_PAR sequences at the smallest budget (from its minimum, in steps of
 * 64 KiB) where the weights stream, the KV caches stay in memory and the batch leaves room for
 * drafts.  `buffered`: buffered reads (the streamed path is the same, and the test does not wait
 * on a disk shared with other jobs; stories260K has no such budget with them, its buffers being
 * larger). */
static void server_start(server *sv, const char *path, int mode, bool buffered)
{
    sluice_params p;
    sluice_params_default(&p);
    p.n_threads = 2;
    p.n_ctx = 128;
    p.n_parallel = N_PAR;
    p.draft = mode == DRAFT_OFF ? SLUICE_DRAFT_OFF : SLUICE_DRAFT_AUTO;
    p.draft_fixed = mode == DRAFT_FIXED;
    p.planner = SLUICE_PLANNER_ON;
    p.disk_bw = 1;   /* no disk probe: the figure only feeds the prediction */
    p.compute_bw = 1;
    p.no_direct = buffered;
    char err[512];
    sluice_plan_info pi;
    p.ram_budget = 1u << 20;
    cr_assert_eq(sluice_plan(path, &p, &pi, err, sizeof err), -ENOSPC, "%s", err);
    for (p.ram_budget = pi.min_budget;; p.ram_budget += 64u << 10) {
        cr_assert_eq(sluice_plan(path, &p, &pi, err, sizeof err), 0, "%s", err);
        cr_assert(!pi.all_resident, "%s: no budget streams the weights with the KV caches in memory", path);
        if (!pi.kv_spilled && pi.n_batch >= 2 * N_PAR) break;
    }
    cr_assert_eq(sluice_open(path, &p, &sv->m, err, sizeof err), 0, "%s: %s", path, err);
    sluice_model_get_plan(sv->m, &pi);
    cr_assert(pi.planned && !pi.all_resident && !pi.kv_spilled, "%s: the plan at %llu bytes changed", path,
              (unsigned long long)p.ram_budget);
    sl_serve_opts o;
    sl_serve_opts_default(&o);
    o.port = 0;
    o.n_parallel = N_PAR;
    o.model_name = "m";
    o.queue_max = 64;
    cr_assert_eq(sl_server_start(sv->m, &o, &sv->s, err, sizeof err), 0, "%s", err);
    sv->port = sl_server_port(sv->s);
    cr_assert_eq(sl_server_draft_max(sv->s) > 0, mode != DRAFT_OFF, "draft_max %d with mode %d",
                 sl_server_draft_max(sv->s), mode);
}

static void server_stop(server *sv)
{
    sl_server_shutdown(sv->s, 5);
    sl_server_free(sv->s);
    sluice_close(sv->m);
}

/* The request threads do not call cr_assert (Criterion's asserts belong to the test's own
 * thread): a failure is written to err and checked after the join. */
#define CHECK(cond, ...) do { if (!(cond)) { snprintf(err, errlen, __VA_ARGS__); goto fail; } } while (0)

/* One request: method + path (+ body); the response body (malloc'd, NUL-terminated) and status,
 * or NULL with err. */
static char *http_try(int port, const char *method, const char *path, const char *body, int *status, char *err,
                      size_t errlen)
{
    char *req = NULL, *buf = NULL, *out = NULL;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect: %s", strerror(errno));
    size_t blen = body ? strlen(body) : 0;
    req = malloc(blen + 256);
    CHECK(req, "out of memory");
    int hl = snprintf(req, 256, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n", method, path, blen);
    memcpy(req + hl, body ? body : "", blen);
    size_t len = (size_t)hl + blen;
    for (size_t off = 0; off < len;) {
        ssize_t w = write(fd, req + off, len - off);
        CHECK(w > 0, "write: %s", strerror(errno));
        off += (size_t)w;
    }
    size_t cap = 1 << 16, n = 0;
    buf = malloc(cap);
    CHECK(buf, "out of memory");
    for (;;) {
        if (n + 4096 > cap) {
            char *nb = realloc(buf, cap *= 2);
            CHECK(nb, "out of memory");
            buf = nb;
        }
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r <= 0) break;
        n += (size_t)r;
    }
    buf[n] = 0;
    CHECK(sscanf(buf, "HTTP/1.%*d %d", status) == 1, "no status line in '%.200s'", buf);
    char *b = strstr(buf, "\r\n\r\n");
    CHECK(b, "no end of headers");
    out = strdup(b + 4);
fail:
    if (fd >= 0) close(fd);
    free(req);
    free(buf);
    return out;
}

static char *http(int port, const char *method, const char *path, const char *body, int *status)
{
    char err[512];
    char *r = http_try(port, method, path, body, status, err, sizeof err);
    cr_assert(r, "%s %s: %s", method, path, err);
    return r;
}

typedef struct answer {
    char text[4096];
    int32_t toks[256];
    int n_toks;
    char finish[16];
    int passes, drafted, accepted;
    char err[512];                /* what went wrong ("": nothing) */
} answer;

/* A /v1/completions request (temp 0: greedy; else seeded).  0, or -1 with an->err. */
static int complete(int port, const char *prompt, int max_tokens, const char *stop, double temp, answer *an)
{
    char *err = an->err, *resp = NULL;
    size_t errlen = sizeof an->err;
    json_t *r = NULL;
    err[0] = 0;
    json_t *rq = json_pack("{s:s,s:i,s:f,s:b,s:i}", "prompt", prompt, "max_tokens", max_tokens, "temperature", temp,
                           "return_tokens", 1, "seed", 1234);
    if (stop) json_object_set_new(rq, "stop", json_pack("[s]", stop));
    char *body = json_dumps(rq, JSON_COMPACT);
    json_decref(rq);
    int status = 0;
    resp = http_try(port, "POST", "/v1/completions", body, &status, err, errlen);
    free(body);
    if (!resp) return -1;
    CHECK(status == 200, "status %d: %.300s", status, resp);
    json_error_t je;
    r = json_loads(resp, 0, &je);
    CHECK(r, "bad JSON (%s): %.300s", je.text, resp);
    json_t *ch = json_array_get(json_object_get(r, "choices"), 0), *t = json_object_get(r, "timings");
    CHECK(ch && t, "no choices or timings: %.300s", resp);
    snprintf(an->text, sizeof an->text, "%s", json_string_value(json_object_get(ch, "text")));
    snprintf(an->finish, sizeof an->finish, "%s", json_string_value(json_object_get(ch, "finish_reason")));
    json_t *tk = json_object_get(ch, "tokens");
    an->n_toks = (int)json_array_size(tk);
    CHECK(an->n_toks <= 256, "%d tokens", an->n_toks);
    for (int i = 0; i < an->n_toks; i++) an->toks[i] = (int32_t)json_integer_value(json_array_get(tk, (size_t)i));
    an->passes = (int)json_integer_value(json_object_get(t, "passes"));
    an->drafted = (int)json_integer_value(json_object_get(t, "drafted"));
    an->accepted = (int)json_integer_value(json_object_get(t, "accepted"));
fail:
    json_decref(r);
    free(resp);
    return err[0] ? -1 : 0;
}

typedef struct request {
    int port;
    const char *prompt;
    int max_tokens;
    const char *stop;
    answer an;
    double temp;
} request;

static void *request_thread(void *arg)
{
    request *r = arg;
    complete(r->port, r->prompt, r->max_tokens, r->stop, r->temp, &r->an);
    return NULL;
}

/* All n requests at once (more than the slots: some queue and join running batches). */
static void complete_all(request *rq, int n)
{
    pthread_t th[64];
    cr_assert_leq(n, 64);
    for (int i = 0; i < n; i++) cr_assert_eq(pthread_create(&th[i], NULL, request_thread, &rq[i]), 0);
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < n; i++) cr_assert(!rq[i].an.err[0], "request %d (%s): %s", i, rq[i].prompt, rq[i].an.err);
}

/* A figure from the /metrics text (-1: missing). */
static double metric(int port, const char *name)
{
    int status = 0;
    char *b = http(port, "GET", "/metrics", NULL, &status);
    cr_assert_eq(status, 200);
    double v = -1;
    size_t nl = strlen(name);
    for (char *l = b; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (!strncmp(l, name, nl) && l[nl] == ' ') { v = strtod(l + nl + 1, NULL); break; }
    free(b);
    return v;
}

/* Prompts stories260K continues with repeats (n-gram drafts then get accepted) and plain ones. */
static const char *const prompts[] = {
    "Once upon a time",
    "Tom said, \"I like the red ball. I like the red ball. I like the red ball. I like the red ball.",
    "The little dog ran to the",
    "Lily and Tom went to the park. Lily and Tom went to the park. Lily and Tom went to the",
    "One day, a bird",
    "Sam was sad. Sam was sad. Sam was sad. Sam was",
};
#define N_PROMPTS (int)(sizeof prompts / sizeof *prompts)

static void assert_same(const answer *want, const answer *got, const char *what)
{
    cr_assert_eq(got->n_toks, want->n_toks, "%s: %d tokens, without drafting %d", what, got->n_toks, want->n_toks);
    for (int i = 0; i < want->n_toks; i++)
        cr_assert_eq(got->toks[i], want->toks[i], "%s: token %d is %d, without drafting %d", what, i, got->toks[i],
                     want->toks[i]);
    cr_assert_str_eq(got->text, want->text, "%s: text", what);
    cr_assert_str_eq(got->finish, want->finish, "%s: finish_reason", what);
}

/* The requests' timings add up to /metrics' figures, which count only this server's requests. */
static void assert_metrics(int port, const request *rq, int n)
{
    long passes = 0, drafted = 0, accepted = 0, toks = 0;
    for (int i = 0; i < n; i++) {
        passes += rq[i].an.passes;
        drafted += rq[i].an.drafted;
        accepted += rq[i].an.accepted;
        toks += rq[i].an.n_toks;
        cr_assert_leq(rq[i].an.accepted, rq[i].an.drafted);
        cr_assert_leq(rq[i].an.passes, rq[i].an.n_toks, "request %d: %d decoding passes for %d tokens", i,
                      rq[i].an.passes, rq[i].an.n_toks);
    }
    cr_assert_eq((long)metric(port, "sluice_sequence_passes_total"), passes);
    cr_assert_eq((long)metric(port, "sluice_drafted_tokens_total"), drafted);
    cr_assert_eq((long)metric(port, "sluice_accepted_tokens_total"), accepted);
    cr_assert_eq((long)metric(port, "sluice_completion_tokens_total"), toks);
    double tpp = metric(port, "sluice_sequence_tokens_per_pass");
    cr_assert_float_eq(tpp, (double)toks / (double)passes, 1e-3, "tokens per pass %g, want %g", tpp,
                       (double)toks / (double)passes);
}

/* Every prompt at once, on a server with drafting off and on (adaptive and fixed), and then, on
 * the fixed one, stop strings and max_tokens that end a request inside an accepted draft. */
static void greedy_on_equals_off(const char *path, int n_tokens, bool buffered)
{
    server off, on[2];
    server_start(&off, path, DRAFT_OFF, buffered);
    request want[N_PROMPTS];
    for (int i = 0; i < N_PROMPTS; i++)
        want[i] = (request){ .port = off.port, .prompt = prompts[i], .max_tokens = n_tokens };
    complete_all(want, N_PROMPTS);
    assert_metrics(off.port, want, N_PROMPTS);
    cr_assert_eq(metric(off.port, "sluice_drafted_tokens_total"), 0);
    cr_assert_eq(metric(off.port, "sluice_draft_max"), 0);
    for (int v = 0; v < 2; v++) {
        server_start(&on[v], path, v ? DRAFT_FIXED : DRAFT_ADAPTIVE, buffered);
        request got[N_PROMPTS];
        for (int i = 0; i < N_PROMPTS; i++)
            got[i] = (request){ .port = on[v].port, .prompt = prompts[i], .max_tokens = n_tokens };
        complete_all(got, N_PROMPTS);
        long drafted = 0, accepted = 0;
        for (int i = 0; i < N_PROMPTS; i++) {
            char what[128];
            snprintf(what, sizeof what, "%s, %s drafts, prompt %d", path, v ? "fixed" : "adaptive", i);
            assert_same(&want[i].an, &got[i].an, what);
            drafted += got[i].an.drafted;
            accepted += got[i].an.accepted;
        }
        assert_metrics(on[v].port, got, N_PROMPTS);
        cr_assert_gt(drafted, 0, "%s: nothing was drafted", path);
        fprintf(stderr, "test_serve_spec: %s, %s draft length: %ld drafted, %ld accepted, %.3f tokens per pass\n",
                path, v ? "fixed" : "adaptive", drafted, accepted, metric(on[v].port, "sluice_sequence_tokens_per_pass"));
    }
    /* the fixed server accepts drafts on the repeating prompts; end requests in the middle of them */
    request cut[64];
    int n_cut = 0, n_mid = 0;
    for (int i = 1; i < N_PROMPTS && n_cut < 60; i += 2) {
        const answer *w = &want[i].an;
        size_t L = strlen(w->text);
        for (int q = 1; q <= 4 && n_cut < 60; q++) {   /* stop strings at a quarter, half, ... of the text */
            size_t at = L * (size_t)q / 5;
            if (at + 3 > L) continue;
            char *stop = strndup(w->text + at, 3);
            cut[n_cut++] = (request){ .port = on[1].port, .prompt = prompts[i], .max_tokens = n_tokens, .stop = stop };
        }
        static const int mts[] = { 1, 2, 3, 5, 8, 13 };
        for (int m = 0; m < 6 && n_cut < 60; m++) {
            int mt = mts[m];
            cut[n_cut++] = (request){ .port = on[1].port, .prompt = prompts[i], .max_tokens = mt };
        }
    }
    complete_all(cut, n_cut);
    request ref[64];
    for (int i = 0; i < n_cut; i++)
        ref[i] = (request){ .port = off.port, .prompt = cut[i].prompt, .max_tokens = cut[i].max_tokens, .stop = cut[i].stop };
    complete_all(ref, n_cut);
    for (int i = 0; i < n_cut; i++) {
        char what[160];
        snprintf(what, sizeof what, "%s, stop \"%s\", max_tokens %d", cut[i].prompt, cut[i].stop ? cut[i].stop : "",
                 cut[i].max_tokens);
        assert_same(&ref[i].an, &cut[i].an, what);
        if (cut[i].an.accepted > 0) n_mid++;
        free((char *)cut[i].stop);
    }
    /* the test means something only if requests that were cut had drafts accepted */
    cr_assert_gt(n_mid, n_cut / 4, "%s: only %d of %d cut requests accepted any draft", path, n_mid, n_cut);
    fprintf(stderr, "test_serve_spec: %s: %d requests cut by stop strings or max_tokens, %d of them after accepted "
            "drafts\n", path, n_cut, n_mid);
    server_stop(&on[1]);
    server_stop(&on[0]);
    server_stop(&off);
}

Test(serve_spec, greedy_stories_drafting_on_equals_off, .timeout = 600)
{
    greedy_on_equals_off(STORIES, 48, false);
}

Test(serve_spec, greedy_micro_drafting_on_equals_off, .timeout = 600)
{
    greedy_on_equals_off(MICRO, 32, true);
}

/* Sampling with drafts: every request finishes with its max_tokens (or a stop), and the figures
 * add up; its distribution is sluice_generate's rejection sampling (tests/test_spec.c tests it). */
Test(serve_spec, sampling_with_drafts, .timeout = 300)
{
    server on;
    server_start(&on, STORIES, DRAFT_FIXED, false);
    request rq[N_PROMPTS];
    for (int i = 0; i < N_PROMPTS; i++)
        rq[i] = (request){ .port = on.port, .prompt = prompts[i], .max_tokens = 40, .temp = 0.8 };
    complete_all(rq, N_PROMPTS);
    long drafted = 0;
    for (int i = 0; i < N_PROMPTS; i++) {
        cr_assert(!strcmp(rq[i].an.finish, "length") || !strcmp(rq[i].an.finish, "stop"), "finish %s", rq[i].an.finish);
        cr_assert(!strcmp(rq[i].an.finish, "stop") || rq[i].an.n_toks == 40, "%d tokens", rq[i].an.n_toks);
        drafted += rq[i].an.drafted;
    }
    cr_assert_gt(drafted, 0);
    assert_metrics(on.port, rq, N_PROMPTS);
    server_stop(&on);
}

/* What the server does not do is refused at the command line, naming what it supports. */
Test(serve_spec, cli_refuses_draft_model_and_lookup)
{
    static const char *const args[] = { "-md " STORIES, "--draft model -md " STORIES, "--lookup " STORIES };
    for (int i = 0; i < 3; i++) {
        char cmd[1024], out[2048] = "";
        snprintf(cmd, sizeof cmd, "%s/sluice serve -m %s --port 0 %s 2>&1", SL_BINARY_DIR, STORIES, args[i]);
        FILE *f = popen(cmd, "r");
        cr_assert(f);
        size_t n = fread(out, 1, sizeof out - 1, f);
        out[n] = 0;
        int st = pclose(f);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "%s: status %d: %s", args[i], st, out);
        cr_assert(strstr(out, "not supported by the server") && strstr(out, "supported: --draft auto|ngram|off"),
                  "%s: %s", args[i], out);
    }
}
