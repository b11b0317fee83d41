/* runtime/cli/serve.c — `sluice serve`: open the model for --parallel sequences and run the
 * OpenAI-compatible server (runtime/serve/) until SIGINT or SIGTERM.
 *
 * The signals are blocked before any thread starts and taken by sigwait() here, so no handler
 * runs inside the server's threads; the first one stops accepting requests and lets those in
 * flight finish for --grace seconds before cancelling them; a second one, taken by a thread while
 * that grace runs, cancels them at once, and the exit status is then a signal's (128 + its number).
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
#include "runtime/cli/options.h"
#include "runtime/cli/sigwatch.h"

#ifndef SL_HAVE_SERVE
/* Built without libmicrohttpd or jansson (e.g. a cross build without their arm64 packages): the
 * command exists and says what it needs. */
static const cli_opt *const serve_tables[] = { cli_meta_table, NULL };
const cli_cmd cli_cmd_serve = { "serve", "an OpenAI-compatible HTTP server (not in this build)", "sluice serve [options]",
                                serve_tables, NULL };

int cmd_serve(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    cli_err("serve: this sluice was built without the server (it needs libmicrohttpd and jansson: "
            "scripts/install-deps.sh installs them, then rebuild)");
    return 1;
}
#else
#include "runtime/serve/serve.h"

enum {
    SRV_PARALLEL = 1, SRV_HOST, SRV_PORT, SRV_PORT_FILE, SRV_API_KEY, SRV_MODEL_NAME, SRV_TEMPLATE, SRV_QUEUE,
    SRV_MAX_TOKENS, SRV_DEFAULT_MAX_TOKENS, SRV_STOP, SRV_MAX_PROMPT, SRV_MAX_BODY, SRV_MAX_HEADER,
    SRV_MAX_CONNECTIONS, SRV_MAX_PER_CLIENT, SRV_TIMEOUT, SRV_REQUEST_TIMEOUT, SRV_GRACE, SRV_REASONING,
    SRV_NO_WEBUI, SRV_NO_PROMPT_CACHE, SRV_PROMPT_CACHE_DIR, SRV_PROMPT_CACHE_MAX,
};

/* Only the options the server uses (llama-server's spellings as aliases where they mean the same);
 * the shared generation rows are written here with their GEN_* ids, with what each means here. */
static const cli_opt serve_table[] = {
    { 0, NULL, NULL, "server" },
    { SRV_PARALLEL, "-np|--parallel", "N", "sequences generated together; the plan holds a KV cache for each (default 1)" },
    { SRV_HOST, "--host", "ADDR", "numeric address to bind (default 127.0.0.1: this machine only)" },
    { SRV_PORT, "--port", "P", "TCP port (default 8080; 0: any free port, printed on stderr)" },
    { SRV_PORT_FILE, "--port-file", "FILE", "write the port there once listening" },
    { SRV_API_KEY, "--api-key", "KEY", "require \"Authorization: Bearer KEY\" (also $SLUICE_API_KEY); /health and\n"
                                               "the web page's own files stay open" },
    { SRV_MODEL_NAME, "-a|--model-name|--alias", "NAME", "the model id /v1/models reports (default: the file name)" },
    { SRV_TEMPLATE, "--chat-template", "T", "override the model's chat template (chatml, llama3, ...)" },
    { SRV_REASONING, "--reasoning-format", "F", "auto: a Qwen3 <think> block is returned as reasoning_content (default);\n"
                                                "none: it stays in content as the model wrote it" },
    { SRV_QUEUE, "--queue", "N", "requests waiting for a slot before 503 (default 16)" },
    { SRV_MAX_TOKENS, "--max-tokens", "N", "largest max_tokens a request may ask (default: the context)" },
    { SRV_DEFAULT_MAX_TOKENS, "-n|--default-max-tokens|--n-predict|--predict", "N",
      "max_tokens of a request that gives none (default 256; -1: --max-tokens)" },
    { SRV_STOP, "-r|--stop|--reverse-prompt", "TEXT", "a stop string of requests that give no \"stop\" (up to 4 times)" },
    { SRV_MAX_PROMPT, "--max-prompt", "N", "prompt tokens a request may bring (default: the context - 1)" },
    { SRV_MAX_BODY, "--max-body", "BYTES", "request body limit (default 1M)" },
    { SRV_MAX_HEADER, "--max-header", "BYTES", "request line + headers limit (default 32K)" },
    { SRV_MAX_CONNECTIONS, "--max-connections", "N", "open connections (default 512); at the limit a new one takes the\n"
                                                     "place of an idle kept-alive one, else of a request still arriving\n"
                                                     "after a second (503), else it is refused" },
    { SRV_MAX_PER_CLIENT, "--max-per-client", "N", "open connections from one client address (default 64; 0: no limit)" },
    { SRV_TIMEOUT, "-to|--timeout", "S", "close a connection idle this long, no bytes either way (default 30)" },
    { SRV_REQUEST_TIMEOUT, "--request-timeout", "S", "a request must arrive whole (line, headers, body) this long after\n"
                                                     "it began, else 408 (default 10; 0: no deadline)" },
    { SRV_GRACE, "--grace", "S", "on SIGINT/SIGTERM, let running requests finish this long (default 10)" },
    { SRV_NO_WEBUI, "--no-webui", NULL, "no web page at / (by default: a chat and the plan at work; no API key\n"
                                        "needed for the page itself, its API calls ask for one)" },
    { SRV_NO_PROMPT_CACHE, "--no-prompt-cache", NULL, "evaluate every prompt whole (default: a request goes to the slot\n"
                                                      "whose KV cache shares the longest prefix with it and evaluates\n"
                                                      "only the rest; usage.prompt_tokens_details.cached_tokens)" },
    { SRV_PROMPT_CACHE_DIR, "--prompt-cache-dir", "DIR", "keep idle slots' KV that a request would throw away in DIR as\n"
                                                         "zstd session files, found again by prefix (default: none)" },
    { SRV_PROMPT_CACHE_MAX, "--prompt-cache-max", "BYTES", "size limit of those files, least recently used deleted first\n"
                                                           "(default 4G; only files the server wrote are deleted)" },
    { 0, NULL, NULL, "model and sampling defaults (a request's own fields win)" },
    { GEN_MODEL, "-m|--model", "FILE", "GGUF model (default: the bundled stories260K)" },
    { GEN_CTX, "-c|--ctx|--ctx-size", "N", "context length of each slot (default: the model's trained context, halved\n"
                                           "until it costs the plan no speed)" },
    { GEN_BATCH, "-b|--batch|--batch-size", "N", "positions per forward pass, all slots together (default 512)" },
    { GEN_THREADS, "-t|--threads", "N", "threads (default: number of CPUs)" },
    { GEN_TEMP, "--temp", "T", "temperature (default 0.8; 0 = greedy)" },
    { GEN_TOP_K, "--top-k", "K", "(default 40; 0 = off)" },
    { GEN_TOP_P, "--top-p", "P", "(default 0.95; 1 = off)" },
    { GEN_MIN_P, "--min-p", "P", "(default 0.05; 0 = off)" },
    { GEN_REPEAT, "--repeat-penalty", "R", "(default 1.0 = off)" },
    { GEN_IGNORE_EOS, "--ignore-eos", NULL, "never choose an end-of-text token (requests run to max_tokens)" },
    { 0, NULL, NULL, "speculative decoding (each request drafts from its own context; docs/speculative.md)" },
    { GEN_DRAFT, "--draft", "auto|ngram|off", "drafter (default auto: n-gram drafts when weights stream, none when\n"
                                               "resident); greedy output is identical either way" },
    { GEN_DRAFT_MAX, "--draft-max", "K", "most drafted tokens per pass (default 8; adapts to the measured passes)" },
    { GEN_DRAFT_FIXED, "--draft-fixed", NULL, "draft --draft-max tokens whenever possible (no adaptation; for benchmarks)" },
    { 0, NULL, NULL, NULL },
};

/* Options of sluice run and chat that the server has no use for, and why. */
static const struct { const char *flags, *why; } not_for_serve[] = {
    { "|-s|--seed|", "each request has its own seed (\"seed\" in the request; random without it)" },
    { "|--session|--session-overwrite|", "sessions are sluice run's and chat's; each request starts from its prompt" },
    { "|--stats|", "the server's figures are at GET /metrics and in each response's \"timings\"" },
    { "|-q|--quiet|", "the server prints only its start-up lines and errors" },
    { "|--special|", "a completion prompt is text (or token ids); chat templates' special tokens are always parsed" },
    { "|--metrics|", "GET /metrics is always served (behind --api-key when one is set)" },
    { "|-cb|--cont-batching|", "requests are always batched continuously (--parallel N slots)" },
    { "|-md|--draft-model|--lookup|", "supported: --draft auto|ngram|off, --draft-max K, --draft-fixed; each request "
                                      "drafts from its own context" },
};

static bool refuse_not_for_serve(const char *arg)
{
    char key[64];
    if (strlen(arg) > sizeof key - 3) return false;
    snprintf(key, sizeof key, "|%s|", arg);
    for (size_t i = 0; i < sizeof not_for_serve / sizeof *not_for_serve; i++)
        if (strstr(not_for_serve[i].flags, key)) {
            cli_err("serve: %s is not supported by the server: %s", arg, not_for_serve[i].why);
            return true;
        }
    return false;
}

static const cli_opt *const serve_tables[] = { serve_table, gen_mem_table, cli_meta_table, NULL };
const cli_cmd cli_cmd_serve = {
    "serve", "an OpenAI-compatible HTTP server; concurrent requests share each forward pass",
    "sluice serve [-m MODEL] [--ram-budget SIZE] [--parallel N] [--host 127.0.0.1] [--port 8080] [options]",
    serve_tables,
    "Endpoints: POST /v1/chat/completions, POST /v1/completions (\"stream\": true for server-sent events),\n"
    "GET /v1/models, /v1/plan (the plan as `sluice plan --json`), /health, /metrics; a web page at /\n"
    "(--no-webui: none).  --temp, --top-k, ... set the defaults of requests that do not say.\n"
};

typedef struct serve_args {
    gen_opts g;
    sl_serve_opts so;
    const char *port_file;
    double grace;
} serve_args;

/* One server option's value (the row op, value v).  0, or -1 after printing why. */
static int serve_value(serve_args *a, int id, const char *o, const char *v)
{
    long l;
    uint64_t sz;
    double d;
    switch (id) {
    case SRV_PARALLEL: if (!cli_int(o, v, 1, 256, &l)) return -1; a->so.n_parallel = (int)l; return 0;
    case SRV_HOST: a->so.host = v; return 0;
    case SRV_PORT: if (!cli_int(o, v, 0, 65535, &l)) return -1; a->so.port = (int)l; return 0;
    case SRV_PORT_FILE: a->port_file = v; return 0;
    case SRV_API_KEY: a->so.api_key = *v ? v : NULL; return 0;
    case SRV_MODEL_NAME: a->so.model_name = v; return 0;
    case SRV_TEMPLATE: a->so.chat_template = v; return 0;
    case SRV_REASONING:
        if (strcmp(v, "auto") && strcmp(v, "none")) { cli_err("%s: '%s' (supported: auto, none)", o, v); return -1; }
        a->so.reasoning_inline = !strcmp(v, "none");
        return 0;
    case SRV_QUEUE: if (!cli_int(o, v, 0, 100000, &l)) return -1; a->so.queue_max = (int)l; return 0;
    case SRV_MAX_TOKENS: if (!cli_int(o, v, 1, 1 << 24, &l)) return -1; a->so.max_tokens = (int)l; return 0;
    case SRV_DEFAULT_MAX_TOKENS:
        if (!cli_int(o, v, -1, 1 << 24, &l)) return -1;
        if (!l) { cli_err("%s: 0 tokens would answer nothing (give N >= 1, or -1 for --max-tokens)", o); return -1; }
        a->so.default_max_tokens = l < 0 ? 1 << 24 : (int)l;   /* (the server caps it at --max-tokens) */
        return 0;
    case SRV_STOP:
        if (!*v) { cli_err("%s: the stop string is empty", o); return -1; }
        if (strlen(v) > 256) { cli_err("%s: a stop string may have at most 256 bytes", o); return -1; }
        if (a->so.n_default_stop == 4) { cli_err("%s: at most 4 stop strings (OpenAI's limit)", o); return -1; }
        a->so.default_stop[a->so.n_default_stop++] = v;
        return 0;
    case SRV_MAX_PROMPT: if (!cli_int(o, v, 1, 1 << 24, &l)) return -1; a->so.max_prompt_tokens = (int)l; return 0;
    case SRV_MAX_BODY: if (!cli_size(o, v, &sz)) return -1; a->so.max_body = (size_t)sz; return 0;
    case SRV_MAX_HEADER:
        if (!cli_size(o, v, &sz)) return -1;
        if (sz < 1024) { cli_err("--max-header: at least 1K (the request line and headers must fit)"); return -1; }
        a->so.max_header = (size_t)sz;
        return 0;
    case SRV_MAX_CONNECTIONS: if (!cli_int(o, v, 1, 1 << 20, &l)) return -1; a->so.max_connections = (int)l; return 0;
    case SRV_MAX_PER_CLIENT: if (!cli_int(o, v, 0, 1 << 20, &l)) return -1; a->so.max_per_client = (int)l; return 0;
    case SRV_TIMEOUT: if (!cli_int(o, v, 1, 86400, &l)) return -1; a->so.timeout_s = (int)l; return 0;
    case SRV_REQUEST_TIMEOUT: if (!cli_int(o, v, 0, 86400, &l)) return -1; a->so.request_timeout_s = (int)l; return 0;
    case SRV_GRACE: if (!cli_float(o, v, 0, 3600, &d)) return -1; a->grace = d; return 0;
    case SRV_PROMPT_CACHE_DIR: a->so.prompt_cache_dir = v; return 0;
    case SRV_PROMPT_CACHE_MAX: if (!cli_size(o, v, &sz)) return -1; a->so.prompt_cache_max = sz; return 0;
    default: return -1;
    }
}

/* 0 to serve, 1 after --help/--version, -1 after printing an error. */
static int parse(int argc, char **argv, serve_args *a)
{
    gen_opts_default(&a->g, 0);
    sl_serve_opts_default(&a->so);
    a->grace = 10;
    a->so.api_key = getenv("SLUICE_API_KEY");
    if (a->so.api_key && !*a->so.api_key) a->so.api_key = NULL;
    for (int i = 1; i < argc; i++) {
        const cli_opt *op = cli_find(serve_tables, argv[i]);
        if (!op && refuse_not_for_serve(argv[i])) return -1;
        if (!op) { cli_unknown(&cli_cmd_serve, argv[i]); return -1; }
        if (cli_meta(&cli_cmd_serve, op)) return 1;
        int r = gen_opt_apply(argc, argv, &i, op, &a->g);
        if (r < 0) return -1;
        if (r > 0) continue;
        if (op->id == SRV_NO_WEBUI) { a->so.no_webui = true; continue; }
        if (op->id == SRV_NO_PROMPT_CACHE) { a->so.no_prompt_cache = true; continue; }
        const char *o = argv[i], *v;
        if (!cli_val(argc, argv, &i, &v) || serve_value(a, op->id, o, v)) return -1;
    }
    /* each slot drafts from its own context (n-grams); a draft model is sluice run's and chat's */
    if (a->g.draft == SLUICE_DRAFT_MODEL) {
        cli_err("serve: --draft model is not supported by the server (supported: --draft auto|ngram|off, "
                "--draft-max K, --draft-fixed; each request drafts from its own context)");
        return -1;
    }
    if (a->so.prompt_cache_dir && a->so.no_prompt_cache) {
        cli_err("serve: --prompt-cache-dir keeps the prompt cache's files: it needs the prompt cache (drop --no-prompt-cache)");
        return -1;
    }
    return gen_opts_check(&a->g) ? 0 : -1;
}

static void serve_log(void *user, int level, const char *msg)
{
    (void)user;
    (void)level;
    fprintf(stderr, "sluice serve: %s\n", msg);
}

typedef struct second_signal {
    sl_server *S;
    sigset_t sigs;
    int sig;                      /* the second signal, 0: none came */
    bool done;                    /* the shutdown is over: a signal now only wakes the thread */
} second_signal;

static void *wait_second_signal(void *arg)
{
    second_signal *ss = arg;
    int sig = 0;
    if (sigwait(&ss->sigs, &sig) || __atomic_load_n(&ss->done, __ATOMIC_SEQ_CST)) return NULL;
    __atomic_store_n(&ss->sig, sig, __ATOMIC_SEQ_CST);
    fprintf(stderr, "sluice serve: %s again: cancelling every request now\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    sl_server_hurry(ss->S);
    return NULL;
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
    if (!a.so.no_webui)
        fprintf(stderr, "sluice serve: web page: http://%s%s%s:%d/ (chat, and the plan at work)\n",
                strchr(a.so.host, ':') ? "[" : "", a.so.host, strchr(a.so.host, ':') ? "]" : "", sl_server_port(S));
    fprintf(stderr, "sluice serve: speculative decoding: %s\n", sl_server_draft_max(S) ? "n-gram drafts of each "
            "request's context, verified in the batch (--draft off to disable)" : "off (--draft ngram to force)");
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
    second_signal ss = { .S = S, .sigs = sigs };
    pthread_t th;
    bool watching = !pthread_create(&th, NULL, wait_second_signal, &ss);
    sigwatch_after(sig, a.grace);   /* a scheduler whose worker is stuck cannot finish: leave then */
    sl_server_shutdown(S, a.grace);
    sigwatch_busy(SIGWATCH_IDLE);
    if (watching) {
        __atomic_store_n(&ss.done, true, __ATOMIC_SEQ_CST);
        if (!__atomic_load_n(&ss.sig, __ATOMIC_SEQ_CST)) pthread_kill(th, SIGTERM);   /* wake its sigwait */
        pthread_join(th, NULL);
    }
    int sig2 = __atomic_load_n(&ss.sig, __ATOMIC_SEQ_CST);
    status = sig2 ? 128 + sig2 : 0;
done:
    sl_server_free(S);
    sluice_close(M);
    return status;
}
#endif /* SL_HAVE_SERVE */
