/* runtime/cli/serve.c — `sluice serve`: open the model for --parallel sequences and run the
 * OpenAI-compatible server (runtime/serve/) until SIGINT or SIGTERM.
 *
 * The signals are blocked before any thread starts and taken by sigwait() here, so no handler
 * runs inside the server's threads; the first one stops accepting requests and lets those in
 * flight finish for --grace seconds before cancelling them.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "include/sluice.h"
#include "runtime/cli/cli.h"
#include "runtime/cli/genopts.h"
#include "runtime/serve/serve.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sluice serve [-m MODEL] [--ram-budget SIZE] [--parallel N] [--host 127.0.0.1] [--port 8080] [options]\n"
            "An OpenAI-compatible server: POST /v1/chat/completions, POST /v1/completions (\"stream\": true for\n"
            "server-sent events), GET /v1/models, /health, /metrics.  Concurrent requests share each forward pass.\n"
            "server:\n"
            "      --parallel N        sequences generated together; the plan holds a KV cache for each (default 1)\n"
            "      --host ADDR         numeric address to bind (default 127.0.0.1: this machine only)\n"
            "      --port P            TCP port (default 8080; 0: any free port, printed on stderr)\n"
            "      --port-file FILE    write the port there once listening\n"
            "      --api-key KEY       require \"Authorization: Bearer KEY\" (also $SLUICE_API_KEY); /health stays open\n"
            "      --model-name NAME   the model id /v1/models reports (default: the file name)\n"
            "      --chat-template T   override the model's chat template (%s)\n"
            "      --queue N           requests waiting for a slot before 503 (default 16)\n"
            "      --max-tokens N      largest max_tokens a request may ask (default: the context)\n"
            "      --default-max-tokens N  when a request gives none (default 256)\n"
            "      --max-prompt N      prompt tokens a request may bring (default: the context - 1)\n"
            "      --max-body BYTES    request body limit (default 1M)\n"
            "      --max-header BYTES  request line + headers limit (default 32K)\n"
            "      --max-connections N open connections (default 512)\n"
            "      --timeout S         close a connection idle or stalled this long (default 30)\n"
            "      --grace S           on SIGINT/SIGTERM, let running requests finish this long (default 10)\n",
            "chatml, llama3, ...");
    gen_opts_usage(f);
}

typedef struct serve_args {
    gen_opts g;
    sl_serve_opts so;
    const char *port_file;
    double grace;
} serve_args;

static int parse(int argc, char **argv, serve_args *a)
{
    gen_opts_default(&a->g, 0);
    sl_serve_opts_default(&a->so);
    a->grace = 10;
    a->so.api_key = getenv("SLUICE_API_KEY");
    if (a->so.api_key && !*a->so.api_key) a->so.api_key = NULL;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v;
        long l;
        uint64_t sz;
        double d;
        int r = gen_opt_parse(argc, argv, &i, &a->g);
        if (r < 0) return -1;
        if (r > 0) continue;
#define VAL() do { if (!cli_val(argc, argv, &i, &v)) return -1; } while (0)
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) { usage(stdout); return 1; }
        else if (!strcmp(o, "--parallel")) { VAL(); if (!cli_int(o, v, 1, 256, &l)) return -1; a->so.n_parallel = (int)l; }
        else if (!strcmp(o, "--host")) { VAL(); a->so.host = v; }
        else if (!strcmp(o, "--port")) { VAL(); if (!cli_int(o, v, 0, 65535, &l)) return -1; a->so.port = (int)l; }
        else if (!strcmp(o, "--port-file")) { VAL(); a->port_file = v; }
        else if (!strcmp(o, "--api-key")) { VAL(); a->so.api_key = *v ? v : NULL; }
        else if (!strcmp(o, "--model-name")) { VAL(); a->so.model_name = v; }
        else if (!strcmp(o, "--chat-template")) { VAL(); a->so.chat_template = v; }
        else if (!strcmp(o, "--queue")) { VAL(); if (!cli_int(o, v, 0, 100000, &l)) return -1; a->so.queue_max = (int)l; }
        else if (!strcmp(o, "--max-tokens")) { VAL(); if (!cli_int(o, v, 1, 1 << 24, &l)) return -1; a->so.max_tokens = (int)l; }
        else if (!strcmp(o, "--default-max-tokens")) { VAL(); if (!cli_int(o, v, 1, 1 << 24, &l)) return -1; a->so.default_max_tokens = (int)l; }
        else if (!strcmp(o, "--max-prompt")) { VAL(); if (!cli_int(o, v, 1, 1 << 24, &l)) return -1; a->so.max_prompt_tokens = (int)l; }
        else if (!strcmp(o, "--max-body")) { VAL(); if (!cli_size(o, v, &sz)) return -1; a->so.max_body = (size_t)sz; }
        else if (!strcmp(o, "--max-header")) {
            VAL();
            if (!cli_size(o, v, &sz)) return -1;
            if (sz < 1024) { cli_err("--max-header: at least 1K (the request line and headers must fit)"); return -1; }
            a->so.max_header = (size_t)sz;
        }
        else if (!strcmp(o, "--max-connections")) { VAL(); if (!cli_int(o, v, 1, 1 << 20, &l)) return -1; a->so.max_connections = (int)l; }
        else if (!strcmp(o, "--timeout")) { VAL(); if (!cli_int(o, v, 1, 86400, &l)) return -1; a->so.timeout_s = (int)l; }
        else if (!strcmp(o, "--grace")) { VAL(); if (!cli_float(o, v, 0, 3600, &d)) return -1; a->grace = d; }
        else { cli_err("serve: unknown option '%s' (see sluice serve --help)", o); return -1; }
#undef VAL
    }
    return 0;
}

static void serve_log(void *user, int level, const char *msg)
{
    (void)user;
    (void)level;
    fprintf(stderr, "sluice serve: %s\n", msg);
}

/* Connections are file descriptors: allow as many as the hard limit permits. */
static void raise_fd_limit(int want)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl)) return;
    rlim_t need = (rlim_t)want + 64;
    if (rl.rlim_cur >= need) return;
    rl.rlim_cur = need < rl.rlim_max ? need : rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
}

int cmd_serve(int argc, char **argv)
{
    serve_args a;
    int r = parse(argc, argv, &a);
    if (r) return r > 0 ? 0 : 2;
    if (!a.g.model) a.g.model = cli_default_model();
    if (!strcmp(a.so.model_name, "sluice")) {
        const char *b = strrchr(a.g.model, '/');
        a.so.model_name = b ? b + 1 : a.g.model;
    }
    sluice_params sp;
    if (!gen_opts_params(&a.g, &sp)) return 2;
    sp.n_parallel = a.so.n_parallel;
    a.so.sampling = a.g.sp;   /* --temp, --top-k, ...: the defaults of requests that do not say */
    sp.log = serve_log;
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);   /* before any thread: all of them inherit it */
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit(a.so.max_connections);
    char err[512];
    sluice_model *M = NULL;
    sl_server *S = NULL;
    int status = 1;
    if (sluice_open(a.g.model, &sp, &M, err, sizeof err)) { cli_err("%s", err); goto done; }
    if (sl_server_start(M, &a.so, &S, err, sizeof err)) { cli_err("%s", err); goto done; }
    sluice_plan_info pi;
    sluice_model_get_plan(M, &pi);
    fprintf(stderr, "sluice serve: %s on http://%s%s%s:%d/v1 (%d slot%s, context %d, batch %d%s)\n", a.so.model_name,
            strchr(a.so.host, ':') ? "[" : "", a.so.host, strchr(a.so.host, ':') ? "]" : "", sl_server_port(S),
            a.so.n_parallel, a.so.n_parallel == 1 ? "" : "s", pi.n_ctx, pi.n_batch < pi.n_ctx ? pi.n_batch : pi.n_ctx, a.so.api_key ? ", API key required" : "");
    if (pi.planned)
        fprintf(stderr, "sluice serve: plan: predicted decode %.2f tok/s per request and %.2f tok/s aggregate with %d "
                "requests at once (%.2f tok/s alone); `sluice plan --parallel %d` shows the budget\n", pi.pred_req_tok_s,
                pi.pred_agg_tok_s, a.so.n_parallel, pi.pred_tok_s, a.so.n_parallel);
    if (a.port_file) {
        FILE *f = fopen(a.port_file, "w");
        if (!f || fprintf(f, "%d\n", sl_server_port(S)) < 0 || fclose(f)) { cli_err("--port-file %s: %s", a.port_file, strerror(errno)); goto done; }
    }
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "sluice serve: %s: finishing requests in flight (up to %.0f s), then exiting\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", a.grace);
    sl_server_shutdown(S, a.grace);
    status = 0;
done:
    sl_server_free(S);
    sluice_close(M);
    return status;
}
