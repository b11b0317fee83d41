/* runtime/serve/serve.h — `sluice serve`: an OpenAI-compatible HTTP server over the C API.
 *
 * Concurrent requests share each forward pass (sluice_batch): up to n_parallel sequences decode
 * together, a new request's prompt is evaluated in chunks inside the same passes as the others'
 * tokens (continuous batching), and every sequence's tokens are those it would get alone.  When the
 * model drafts (sluice_params.draft: by default when weights stream), each decoding sequence's
 * next token comes with n-gram drafts of its own context, verified in the same pass
 * (speculative decoding: greedy tokens unchanged, sampling keeps its distribution).  HTTP is
 * libmicrohttpd (one epoll thread; streaming connections are suspended while they wait for tokens),
 * JSON is jansson.  The model runs on one scheduler thread (runtime/serve/sched.c).
 */
#ifndef SL_SERVE_H
#define SL_SERVE_H

#include <stdbool.h>
#include <stddef.h>

#include "include/sluice.h"

typedef struct sl_serve_opts {
    const char *host;           /* address to bind (default 127.0.0.1) */
    int port;                   /* 0: any free port (sl_server_port says which) */
    const char *api_key;        /* NULL: no authentication; else "Authorization: Bearer KEY" on /v1 and /metrics
                                   (the web page's files stay open: the page asks for the key) */
    const char *model_name;     /* the id /v1/models reports */
    int n_parallel;             /* sequences decoded together (the model was opened for as many) */
    int queue_max;              /* requests waiting for a slot beyond n_parallel; more get 503 */
    size_t max_body;            /* bytes of a request body; larger: 413 */
    size_t max_header;          /* bytes of the request line + headers (connection memory); larger: 431 */
    int max_connections;        /* open connections; at the limit a new one takes the place of an idle kept-alive
                                   one (else of a request arriving for over a second), or is refused */
    int max_per_client;         /* open connections from one client address (0: no limit); more are refused */
    int timeout_s;              /* a connection idle (no bytes either way) this long is closed */
    int request_timeout_s;      /* a request must arrive whole within this long (else 408); 0: no deadline */
    int max_prompt_tokens;      /* 0: the context size - 1 */
    int max_tokens;             /* largest max_tokens a request may ask (0: the context size) */
    int default_max_tokens;     /* when a request gives none */
    const char *default_stop[4];/* stop strings of a request that gives none */
    int n_default_stop;
    const char *chat_template;  /* NULL: the model's (or the plain one) */
    bool no_webui;              /* no web page at GET / (then 404, as any unknown path) */
    bool reasoning_inline;      /* --reasoning-format none: Qwen3's <think> block stays in content */
    bool no_prompt_cache;       /* true: every request evaluates its whole prompt (default: a request goes to the
                                   slot whose KV cache shares the longest prefix with it, and evaluates the rest) */
    const char *prompt_cache_dir;   /* NULL: no disk tier; else idle slots' KV that a request would throw away is
                                   written there (zstd session files) and found again by prefix */
    uint64_t prompt_cache_max;  /* bytes of those files at most (least recently used deleted first) */
    sluice_sampler_params sampling;   /* defaults for what a request does not give (seed: random per request) */
} sl_serve_opts;

void sl_serve_opts_default(sl_serve_opts *o);

typedef struct sl_server sl_server;

/* Bind and start answering.  0 or -errno with a message in err. */
int  sl_server_start(sluice_model *M, const sl_serve_opts *o, sl_server **out, char *err, size_t errlen);
int  sl_server_port(const sl_server *s);
/* Most drafted tokens a decoding step verifies (the model's draft_max; 0: the model does not draft,
 * e.g. --draft off, or AUTO with every weight resident). */
int  sl_server_draft_max(const sl_server *s);
/* Stop accepting requests; let those in flight finish for up to grace_s seconds, then cancel them
 * (a stream simply ends, a non-streaming request is closed without an answer); return when every
 * connection is closed or given up on. */
void sl_server_shutdown(sl_server *s, double grace_s);
/* From another thread during sl_server_shutdown (a second signal): cancel everything now and
 * return without waiting out the grace period. */
void sl_server_hurry(sl_server *s);
void sl_server_free(sl_server *s);

#endif
