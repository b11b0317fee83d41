/* runtime/serve/serve_internal.h — what the HTTP side (http.c), the request translation (oai.c)
 * and the scheduler (sched.c) share.
 *
 * A job is one generation request.  It is referenced by the connection (until libmicrohttpd says
 * the request is complete), by a streaming response (until the response is destroyed) and by the
 * scheduler (from admission until it lets go of the slot); the last reference frees it.  Every
 * field below `mu` in sl_server, and the job fields marked (mu), are guarded by the server mutex.
 */
#ifndef SL_SERVE_INTERNAL_H
#define SL_SERVE_INTERNAL_H

#include "runtime/text/harmony.h"
#include "runtime/text/tool_calls.h"
#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "include/sluice.h"
#include "runtime/serve/serve.h"

#define SERVE_MAX_STOP 4          /* stop strings per request (OpenAI allows up to 4) */
#define SERVE_MAX_STOP_LEN 256
#define SERVE_MAX_DRAFT 64        /* drafts a slot's pass verifies, at most (sluice_params.draft_max's limit) */

#define LP_MAX_TOP 20             /* top_logprobs (OpenAI's limit) */

enum job_kind { JOB_COMPLETION, JOB_CHAT };

/* One generated token's log-probability and its position's most likely alternatives (logprobs.c). */
typedef struct lp_entry {
    int32_t tok;
    float lp;
    size_t start;                 /* where its text begins in the generated text (bytes) */
    int n_top;
    int32_t top_id[LP_MAX_TOP];
    float top_lp[LP_MAX_TOP];
} lp_entry;
enum job_state { JOB_NEW, JOB_QUEUED, JOB_RUNNING, JOB_DONE };
enum job_finish { FINISH_NONE, FINISH_STOP, FINISH_LENGTH, FINISH_CANCELLED, FINISH_ERROR };

typedef struct job {
    /* the request, fixed once queued */
    int kind;
    bool stream, include_usage, return_tokens;
    int32_t *prompt;
    int n_prompt;
    int max_tokens;
    sluice_sampler_params sp;
    char *stop[SERVE_MAX_STOP + 1];  /* the request's, then the chat template's */
    int n_stop;
    int32_t end_tok;              /* the chat template's end-of-turn token, or -1 */
    bool harmony;                 /* gpt-oss's harmony output: the analysis channel is reasoning_content, the
                                   * final channel content (runtime/text/harmony.h) */
    int top_n;                    /* logprobs: alternatives per token (0..LP_MAX_TOP); -1: no logprobs */
    bool grammar;                 /* constrained decoding (response_format.c, tools.c): the sampler gets */
    char *schema;                 /*   this JSON Schema (NULL: any JSON object), */
    char *gprefix, *gsuffix;      /*   between these literals (NULL: none) */
    bool outparse;                /* chat: the answer goes through tools.c (tool calls and/or reasoning) */
    int tool_fmt;                 /* enum sl_tool_format of the calls parsed (SL_TOOLS_NONE: none) */
    bool think;                   /* Qwen3's <think> block is reasoning_content */
    bool one_call;                /* parallel_tool_calls false: the first call only */
    struct hm_call *hcall;        /* harmony: the tool call being read from the stream (tools.c) */
    char id[48];
    time_t created;
    struct MHD_Connection *conn;
    struct sl_server *srv;

    /* (mu) */
    int refs;
    int state;
    int finish;
    char err[256];                /* FINISH_ERROR: what happened */
    bool gone;                    /* the request ended (its connection is no more): cancel it */
    bool client_left;             /* its client closed its end while it waited (conns.c): cancel it */
    bool suspended;               /* the connection is suspended waiting for this job */
    char *text;                   /* generated text released so far (stop strings cut, whole UTF-8) */
    size_t text_len, text_cap;
    size_t sent;                  /* streaming: bytes of text already sent */
    int32_t *out_toks;            /* generated token ids */
    int n_out, out_cap;
    uint64_t t_queued_ns, t_first_ns, t_done_ns;
    int passes, drafted, accepted; /* decoding passes, drafts verified in them, drafts reported */
    int n_cached;                 /* prompt tokens the slot's KV cache already held (the prompt cache) */
    lp_entry *lp;                 /* logprobs of out_toks (top_n >= 0) */
    int n_lp, lp_cap;

    /* streaming response state (only the MHD thread touches these) */
    char *sse;                    /* formatted bytes not yet handed to MHD */
    size_t sse_len, sse_off;
    int lp_sent;                  /* logprobs entries already streamed */
    int sse_stage;                /* 0 role chunk due, 1 content, 2 final sent, 3 [DONE] sent */
    sl_harmony hm;                /* harmony: the channel parser over the streamed text */
    bool hm_done;                 /* harmony / outparse: the parser's held bytes flushed at the end */
    sl_out_parser op;             /* outparse: the answer parser over the streamed text (tools.c) */
    bool op_started;
    int n_calls;                  /* outparse: tool calls reported (finish_reason "tool_calls") */
    size_t body_len;              /* non-streaming: response built */
} job;

typedef struct serve_metrics {
    uint64_t requests[6];         /* by outcome: 0 ok, 1 4xx, 2 503, 3 cancelled, 4 error, 5 total */
    uint64_t prompt_tokens, completion_tokens;   /* prompt tokens evaluated (not those reused); generated */
    uint64_t prompt_cached;       /* prompt tokens reused from a slot's KV cache */
    uint64_t pc_hits, pc_misses;  /* requests that reused some of their prompt / none of it */
    uint64_t pc_saves, pc_loads, pc_disk_errors;   /* the disk tier: files written, files read, failures */
    uint64_t pc_disk_bytes, pc_disk_files;         /* the disk tier now */
    uint64_t passes, pass_tokens; /* forward passes and the tokens they carried */
    uint64_t seq_passes;          /* decoding steps: a pass counted once per sequence it decoded */
    uint64_t drafted, accepted;   /* drafts verified in them; accepted drafts reported */
    uint64_t bytes_sent;          /* response bytes handed to libmicrohttpd */
    uint64_t stream_bytes;        /* weight bytes read from disk (sluice_stats) */
    uint64_t expert_bytes, expert_hits, expert_misses;   /* routed experts read; the expert cache's hits/misses */
    uint64_t prefetch_units, prefetch_used, prefetch_bytes, prefetch_wasted, prefetch_failed;   /* --expert-prefetch */
} serve_metrics;

struct sl_server {
    sluice_model *M;
    sl_serve_opts o;
    struct MHD_Daemon *d;
    int port;
    int tmpl;                     /* enum sl_chat_tmpl */
    int32_t tmpl_end_tok;
    char *model_name;             /* o.model_name as valid UTF-8 (bad bytes as U+FFFD): o.model_name points here */
    int n_ctx, n_vocab, n_batch;
    int draft_max;                /* drafts a decoding step may verify (the model's draft_max; 0: no speculation) */

    struct sched *sch;            /* the scheduler's slots and batch (sched.c) */
    pthread_t sched;
    bool sched_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;            /* new work, shutdown */
    /* (mu) */
    job **queue;                  /* FIFO of queue_max waiting jobs */
    int q_head, q_len;
    int active;                   /* slots in use */
    bool stopping;                /* no new requests */
    bool cancel_all;              /* cancel what runs */
    bool sched_exit;
    int open_jobs;                /* jobs not yet freed */
    bool hurry;                   /* a second signal: shut down without waiting */
    serve_metrics met;

    /* the connections (conns.c), guarded by cmu (taken before mu, never after it) */
    pthread_mutex_t cmu;
    pthread_cond_t ccv;           /* the watcher's wake-up */
    struct conn_rec *conns;
    int n_conns, n_closing;       /* open; of them being closed from conns.c */
    uint64_t n_timed_out, n_evicted, n_refused;   /* closed at the request deadline, for a new one; refused at accept */
    bool watch_exit, watcher_started;
    pthread_t watcher;
};

/* ---- connections (conns.c) ---- */
#define CONN_HEADROOM 32          /* libmicrohttpd's limit over max_connections: room for those being closed */
/* libmicrohttpd's callbacks: a connection opened or closed; a request line arrived (returns NULL,
 * the request's initial state); a new connection (at the limit it takes an idle or slow one's place). */
void conns_notify(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode code);
void *conns_request_line(void *cls, const char *uri, struct MHD_Connection *c);
enum MHD_Result conns_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen);
/* c's request is in (its deadline no longer runs); j: it waits on the model, watch for its client
 * leaving.  conns_completed: the request ended (a kept-alive connection is ready for the next). */
void conns_received(sl_server *s, struct MHD_Connection *c, job *j);
void conns_handled(sl_server *s, struct MHD_Connection *c);   /* c's request reached the handler */
/* libmicrohttpd logged that it refused a request's headers itself (status 400 or 413): answer it
 * cleanly instead (from its logger, on its thread). */
void conns_mhd_refused(sl_server *s, int status);
void conns_completed(sl_server *s, struct MHD_Connection *c);
/* A whole response with `Connection: close`, written on the socket directly: for a connection
 * libmicrohttpd has no request for (or whose error answer it would get wrong). */
void conn_raw_reply(int fd, int status, const char *msg);
int  conns_start(sl_server *s, char *err, size_t errlen);   /* the watcher thread */
void conns_stop(sl_server *s);

/* ---- jobs (sched.c) ---- */
job *job_new(void);
void job_unref(sl_server *s, job *j);          /* takes mu */
void job_unref_locked(sl_server *s, job *j);
/* Queue j (state NEW) for a slot.  0, or -EBUSY when the queue is full, -ESHUTDOWN when stopping. */
int  sched_submit(sl_server *s, job *j);
int  sched_start(sl_server *s, char *err, size_t errlen);
void sched_stop(sl_server *s);                 /* cancel everything, join the thread */

/* ---- requests and responses (oai.c) ---- */
/* Parse and check a /v1/completions or /v1/chat/completions body into j.  0, or an HTTP status
 * (400, 413) with a one-line message in msg. */
int  oai_parse_request(sl_server *s, int kind, const char *body, size_t len, job *j, char *msg, size_t msglen);
/* Whole JSON response of a finished non-streaming job (malloc'd). */
char *oai_response(sl_server *s, const job *j, size_t *len);
/* One SSE event carrying text[0..n) and the logprobs of tokens [lp_from, lp_to) (finish: FINISH_NONE
 * for a content chunk); malloc'd. */
/* A harmony job's next streamed text through its channel parser (finish: flush what it holds): a
 * chunk whose delta carries reasoning_content and/or content, or NULL (*len 0) when nothing is due. */
char *oai_sse_harmony(sl_server *s, job *j, const char *text, size_t n, bool finish, int lp_from, int lp_to, size_t *len);
char *oai_sse_chunk(sl_server *s, const job *j, const char *text, size_t n, int lp_from, int lp_to, bool role, int finish,
                    size_t *len);
char *oai_sse_usage(sl_server *s, const job *j, size_t *len);
/* The event a stream ends with when its generation failed: {"error":{...}} as OpenAI sends it. */
char *oai_sse_error(const job *j, size_t *len);
/* {"error":{"message":..., "type":..., "code":...}} (malloc'd). */
char *oai_error_body(int status, const char *msg, size_t *len);
const char *oai_finish_name(int finish);
/* The /v1/models body (malloc'd). */
char *oai_models_body(const sl_server *s, size_t *len);

typedef struct json_t json_t;
/* The start of a chunk object (id, object, created, model) and one "data: {json}\n\n" event of it
 * (takes o; malloc'd), for tools.c. */
json_t *oai_chunk_head(sl_server *s, const job *j);
char *oai_event(json_t *o, size_t *len);

/* ---- tool calls and reasoning (tools.c) ---- */
typedef struct sl_chat_msg sl_chat_msg;
typedef struct chat_tools { char **tools; int n; } chat_tools;   /* compact JSON of each tool, to render */
/* tools, tool_choice and parallel_tool_calls of a chat request: j's outparse fields, and the tools
 * to render in ct (free with tools_free_request).  0, or 400 with the message. */
int  tools_parse_request(sl_server *s, json_t *o, job *j, chat_tools *ct, char *msg, size_t msglen);
void tools_free_request(chat_tools *ct);
/* The grammar that makes the model call a tool in format fmt (enum sl_tool_format): a JSON Schema
 * (malloc'd) of one call to the tool named `name` (NULL: any of them, "required"), between the
 * literals *prefix and *suffix (both malloc'd) the format writes around a call ("<tool_call>\n" …
 * "\n</tool_call>"; Mistral: "[TOOL_CALLS]" and a one-call array; Llama 3.1: the object alone;
 * gpt-oss: the commentary header naming the tool, then its arguments).  tools is the request's
 * checked array.  0, -1 (no tool of that name, out of memory) or -2 (gpt-oss: "required" with
 * several tools, which one prefix cannot say); on failure nothing is allocated. */
int  tools_call_grammar(json_t *tools, const char *name, int fmt, char **schema, char **prefix, char **suffix);
/* What tools.c keeps in a job (the stream's parser; the grammar is j->schema's, freed apart): freed
 * with the job. */
void tools_free_job(job *j);
/* A message's fields besides role and content (cm->role set): tool_calls, tool_call_id, name;
 * anything else is a 400.  tools_free_message frees what it allocated. */
int  tools_parse_message(json_t *e, size_t i, sl_chat_msg *cm, char *msg, size_t msglen);
void tools_free_message(sl_chat_msg *cm);
/* A finished outparse job's choice: message content, reasoning_content, tool_calls, finish_reason. */
void tools_fill_choice(sl_server *s, const job *j, json_t *choice);
/* An outparse job's next streamed text (finish: the end): its chunks, or NULL (*len 0) when
 * nothing is due. */
char *tools_sse(sl_server *s, job *j, const char *text, size_t n, bool finish, int lp_from, int lp_to, size_t *len);

/* Every top-level field of a request body is known here and honoured, or neutral, or refused:
 * 0, or 400 with the message naming it (fields.c). */
int  oai_check_fields(json_t *o, int kind, char *msg, size_t msglen);
/* The request's response_format (chat): text (nothing), json_object or json_schema, the schema
 * checked (an unsupported keyword is a 400 naming it); sets j->grammar and j->schema.  0 or 400
 * (response_format.c). */
int  oai_response_format(json_t *o, job *j, char *msg, size_t msglen);

/* ---- logprobs (logprobs.c) ---- */
/* Under mu, before token tok is reported: its entry from the logits it was chosen from (the text
 * it adds begins at byte `start`).  Nothing when j wants no logprobs; false: out of memory. */
bool lp_record(sl_server *s, job *j, const float *logits, int32_t tok, size_t start);
/* The end of the entries from `from` whose text has been released (those a response may carry). */
int  lp_ready(const job *j, int from);
/* The "logprobs" object of a choice for entries [from, to), in the shape of j's endpoint. */
json_t *lp_json(sl_server *s, const job *j, int from, int to);

/* ---- the prompt cache (prompt_cache.c) ---- */
/* What the slot choice sees of a slot: its context's tokens, whether a request holds it, and when
 * it was last given one (a counter: larger is more recent). */
typedef struct pc_slot_view {
    const int32_t *toks;
    int n_toks;
    bool busy;
    uint64_t last_used;
} pc_slot_view;
/* Length of the common prefix of a[0..na) and b[0..nb). */
int pc_common_prefix(const int32_t *a, int na, const int32_t *b, int nb);
/* The free slot for a request with this prompt: the one whose tokens share the longest prefix with
 * it, a prefix counting only when it is more than half the prompt; at a tie (and when none counts)
 * the least recently used.  With the cache off (enabled false) the first free slot.  -1 when every
 * slot is busy. */
int pc_pick(const pc_slot_view *v, int n, const int32_t *prompt, int n_prompt, bool enabled);
typedef int (*pc_rewind_fn)(sluice_ctx *c, int n);
/* Prepare context c for a prompt (n_prompt >= 1): keep its common prefix with the prompt, all but
 * the prompt's last token at most (its logits must be fresh), rewinding c there with `rewind`
 * (NULL: sluice_rewind; tests pass one that fails); with nothing to keep, the cache off, or a
 * rewind that fails, c is reset (a full evaluation follows).  Returns the prompt tokens kept: c
 * then holds exactly prompt[0..kept). */
int pc_adopt(sluice_ctx *c, const int32_t *prompt, int n_prompt, bool enabled, pc_rewind_fn rewind);

/* ---- the prompt cache's disk tier (prompt_disk.c) ---- */
#define PC_BLOCK 256              /* tokens between the prefix hashes a cached file is found by */
typedef struct pc_disk pc_disk;
/* A cache of session files in dir holding at most max_bytes.  0, or -errno with err (dir missing,
 * not a directory, not writable). */
int  pc_disk_open(pc_disk **out, const char *dir, uint64_t max_bytes, char *err, size_t errlen);
void pc_disk_free(pc_disk *d);   /* the files stay */
/* Write c's tokens and KV as a cache file, then evict the least recently used files over the
 * limit (a file larger than the whole limit is not kept).  1: written; 0: nothing to write (fewer
 * than PC_BLOCK tokens, these tokens are cached already, or a file of that name that this cache did
 * not write is there: it is left alone); or -errno with err. */
int  pc_disk_save(pc_disk *d, sluice_ctx *c, char *err, size_t errlen);
/* The cached file sharing the most whole PC_BLOCK blocks with prompt (by prefix hash; the most
 * recently used at a tie), the tokens of those blocks in *tokens; -1 (*tokens 0): none. */
int  pc_disk_find(pc_disk *d, const int32_t *prompt, int n_prompt, int *tokens);
/* Load file i (pc_disk_find's) into c.  0, or -errno with err: c is then empty and the file
 * forgotten (and deleted). */
int  pc_disk_load(pc_disk *d, int i, sluice_ctx *c, char *err, size_t errlen);
void pc_disk_usage(const pc_disk *d, uint64_t *bytes, int *files);
/* What pc_prepare did. */
typedef struct pc_outcome {
    int kept;                     /* prompt tokens c holds (reused) */
    bool saved, loaded;           /* the slot's KV was written to / a file was read from the disk tier */
    bool disk_error;              /* a save or load failed (err says why); the request is unaffected */
} pc_outcome;
/* The prompt cache's whole work for context c taking a prompt (prompt_cache.c): with a disk tier
 * (d not NULL), first write c's KV there if this prompt would throw away whole blocks of it, then
 * load a cached file that shares more of the prompt than c does; then pc_adopt.  Runs on the
 * scheduler thread without the server lock (a save or load takes time). */
pc_outcome pc_prepare(pc_disk *d, sluice_ctx *c, const int32_t *prompt, int n_prompt, bool enabled, char *err,
                      size_t errlen);

/* ---- text (sched.c) ---- */
/* Bytes of s[0..n) that form whole UTF-8 characters, leaving out an incomplete sequence at the end;
 * invalid bytes are rewritten as U+FFFD into out (which needs 3n bytes); returns out's length and
 * the bytes of s consumed in *used. */
size_t utf8_clean(const char *s, size_t n, char *out, size_t *used);

#endif
