/* sluice.h — the sluice C API: run llama-family GGUF models, streaming weights from disk under a
 * RAM budget.
 *
 *   sluice_params p;  sluice_params_default(&p);  p.ram_budget = 2ull << 30;
 *   sluice_model *m;  sluice_open("model.gguf", &p, &m, err, sizeof err);      // plan + load
 *   sluice_ctx *c;    sluice_ctx_new(m, &c, err, sizeof err);                   // KV cache
 *   int32_t ids[256]; int n = sluice_tokenize(m, "Once upon a time", -1, SLUICE_TOK_ADD_SPECIAL, ids, 256);
 *   sluice_eval(c, ids, n);                                                     // the prompt
 *   sluice_sampler *s = sluice_sampler_new(m, NULL);                            // defaults
 *   sluice_generate(c, s, 64, on_token, user);                                  // stream text
 *   sluice_sampler_free(s); sluice_ctx_free(c); sluice_close(m);
 *
 * Conventions.  Functions that can fail return 0 (or a count) on success and a negative errno on
 * failure; those that take `char *err, size_t errlen` write one line there, the others leave it in
 * sluice_ctx_error().  NULL handles, NULL out pointers and values outside a field's documented range
 * give -EINVAL (with a message where there is a place for one), never undefined behaviour.
 *
 * Threads.  One object (model, context, sampler) is used by one thread at a time; the engine runs
 * its own worker threads inside each call.  Contexts of one model may be used from different threads:
 * their evaluations (and session saves and loads) share the model's thread pool and weight stream,
 * so they take turns on a lock inside the model — safe, not parallel.  Calling into the same model
 * from one of its own callbacks (progress, log, token) during an evaluation returns -EBUSY.
 * sluice_cancel() may be called from any thread or a signal handler.
 *
 * Lifetime.  sluice_close / sluice_ctx_free / sluice_sampler_free end a handle; using or freeing it
 * again is undefined behaviour, as with free().  Free a model's contexts before the model.  Debug
 * builds (NDEBUG not defined), and any build run with SLUICE_API_CHECKS=1 in the environment, keep
 * a registry of live handles and stop the process (abort, one line on stderr naming the function)
 * at a double free, a use after free or a model closed before its contexts.
 * Link with `pkg-config --libs sluice`.
 */
#ifndef SLUICE_H
#define SLUICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SLUICE_VERSION "0.1.0"
#define SLUICE_API_VERSION 1
#define SLUICE_ERRLEN 256   /* an err buffer of this size holds any message the library writes */

typedef struct sluice_model sluice_model;       /* weights, tokenizer, plan, weight stream, threads */
typedef struct sluice_ctx sluice_ctx;           /* one conversation: KV cache, tokens, logits */
typedef struct sluice_sampler sluice_sampler;   /* next-token choice */

/* ---- opening a model -------------------------------------------------------------------------- */

enum sluice_kv { SLUICE_KV_AUTO = -1, SLUICE_KV_F16 = 0, SLUICE_KV_F32 = 1, SLUICE_KV_Q8_0 = 2 };
enum sluice_io { SLUICE_IO_PREAD = 0, SLUICE_IO_MMAP = 1, SLUICE_IO_URING = 2 };
enum sluice_planner {
    SLUICE_PLANNER_DEFAULT = 0,   /* plan unless streaming is forced (stream_all/stream_lm_head) without a budget */
    SLUICE_PLANNER_ON = 1,        /* always plan (a forced streaming mode still wins) */
    SLUICE_PLANNER_OFF = 2        /* no plan: resident unless streaming is forced */
};
enum sluice_log { SLUICE_LOG_WARN = 0, SLUICE_LOG_INFO = 1, SLUICE_LOG_NOTE = 2 };
/* Speculative decoding in sluice_generate: drafted tokens verified in the pass that evaluates the
 * last accepted one.  AUTO: n-gram drafts when weights stream (a pass costs a read of the file),
 * none when resident; with sluice_params.draft_model, that model's drafts.  MODEL: a draft model
 * (draft_model must be given).  Greedy output is identical either way; sampled output keeps its
 * distribution. */
enum sluice_draft { SLUICE_DRAFT_AUTO = 0, SLUICE_DRAFT_OFF = 1, SLUICE_DRAFT_NGRAM = 2, SLUICE_DRAFT_MODEL = 3 };

/* Progress of long work: stage is "load" (units: bytes) or "prompt" (units: tokens). */
typedef void (*sluice_progress_fn)(void *user, const char *stage, uint64_t done, uint64_t total);
/* One line of information (no newline). */
typedef void (*sluice_log_fn)(void *user, int level, const char *msg);

#define SLUICE_DISK_BW_NOW (-1.0)   /* sluice_params.disk_bw: measure the disk now */
#define SLUICE_MAX_THREADS 1024     /* sluice_params.n_threads: 0..SLUICE_MAX_THREADS */
#define SLUICE_MAX_CTX (1 << 24)    /* sluice_params.n_ctx and n_batch: 0..SLUICE_MAX_CTX */

typedef struct sluice_params {
    uint64_t ram_budget;      /* bytes the process may hold (RSS + page cache); 0 = auto (MemAvailable/cgroup) */
    int      planner;         /* enum sluice_planner */
    int      n_ctx;           /* context positions; 0 = min(model's trained context, 4096) */
    int      n_batch;         /* prompt positions per forward batch; 0 = 512 (the plan may lower it) */
    int      n_threads;       /* 0 = all CPUs; at most SLUICE_MAX_THREADS */
    int      n_parallel;      /* sequences decoded together (sluice_batch; sluice serve --parallel): the plan
                               * counts a KV cache per sequence and a batch of n_batch positions; 0 = 1 */
    int      kv_type;         /* enum sluice_kv: AUTO = f16 unless the plan picks q8_0 */
    const char *kv_spill_dir; /* where a spilled KV cache lives (NULL: $TMPDIR or /var/tmp when the plan spills) */
    bool     stream_all;      /* force: stream every weight matrix */
    bool     stream_lm_head;  /* force: stream only the LM head */
    int      io;              /* enum sluice_io (uring falls back to pread) */
    uint64_t chunk_bytes;     /* streamed piece size: 0 = one piece per tensor */
    int      prefetch;        /* pieces in flight ahead of the one computing (0 = 2, at most 32) */
    int      lm_head_rows;    /* rows per LM-head piece (0 = 1024) */
    bool     no_direct;       /* buffered reads instead of O_DIRECT */
    bool     expert_prefetch; /* mixture of experts with an expert cache: when a block is done, read the
                               * experts the next block will probably take (its router on this block's
                               * output) while its attention computes; a wrong guess costs reads and
                               * cache entries, never a different result.  Off by default: see
                               * docs/benchmarks.md "Expert prefetch" */
    double   disk_bw;         /* GB/s for the plan's prediction; 0 = measured the way the plan reads (backend,
                               * piece size, pieces in flight), once per device and configuration, cached;
                               * SLUICE_DISK_BW_NOW = measured now (1 GiB, ~1-2 s), replacing the cached figure */
    double   compute_bw;      /* GB/s of weights the decode kernels process; 0 = measured once per kernel
                               * path, thread count and weight type, cached (~0.1 s per type) */
    int      draft;           /* enum sluice_draft */
    int      draft_max;       /* most drafted tokens per pass (0 = 8); the number used adapts to the
                               * measured pass times and acceptance rate; at most the plan's batch - 1 */
    bool     draft_fixed;     /* draft draft_max tokens whenever the drafter has them (no adaptation) */
    const char *draft_model;  /* a GGUF draft model with the target's vocabulary (checked), or NULL.  It
                               * proposes tokens greedily from its own KV cache; a planned run splits
                               * ram_budget: the draft resident if the target still fits beside it, else
                               * streamed within its minimum budget (sluice_plan_info.draft_*).  Its other
                               * settings are the target's (n_ctx, threads, io, forced streaming) */
    sluice_progress_fn progress;
    sluice_log_fn log;
    void    *user;            /* passed to progress and log */
} sluice_params;

void sluice_params_default(sluice_params *p);

/* Open a GGUF model, plan for the budget, load the resident part, open the weight stream.
 * *out is set only on success.  0 or -errno (-ENOSPC: the budget is too small; err says how much
 * would work and what dominates). */
int  sluice_open(const char *path, const sluice_params *p, sluice_model **out, char *err, size_t errlen);
void sluice_close(sluice_model *m);

typedef struct sluice_model_info {
    int n_vocab, n_ctx_train, n_layers, n_heads, n_kv_heads, dim, ffn_dim;
    uint64_t file_bytes;
    int32_t bos, eos, eot;    /* -1 when the vocabulary has none */
    const char *chat_template;/* tokenizer.chat_template (NUL-terminated copy) or NULL */
} sluice_model_info;
void sluice_model_get_info(const sluice_model *m, sluice_model_info *out);

typedef struct sluice_plan_info {
    bool     planned;         /* false: the planner was not used (forced mode) */
    bool     all_resident;
    uint64_t budget, planned_bytes, min_budget;
    int      n_layers_resident, n_layers;
    bool     lm_head_resident;
    uint64_t stream_bytes_per_token;
    int      kv_type;         /* enum sluice_kv of the context; spilled: see kv_spilled */
    bool     kv_spilled;
    int      n_ctx, n_batch;
    double   pred_tok_s;
    int      n_ctx_train;             /* the model's trained context (tells a caller what -c could be) */
    /* The planner's own decisions and rates (valid when planned).  They describe the plan; the fields
     * above describe what the run does, which a forced streaming mode may make differ. */
    int      plan_layers_resident;
    bool     plan_lm_head_resident;
    int      plan_kv_type;            /* enum sluice_kv the plan chose (F16 or Q8_0); see plan_kv_spilled */
    bool     plan_kv_spilled;
    int      plan_n_batch, plan_prefetch;
    uint64_t plan_chunk_bytes;        /* streamed piece size (0: one piece per tensor) */
    double   pred_io_s, pred_compute_s;   /* per token: disk busy time, compute time */
    double   disk_bw, compute_bw;     /* bytes/s the prediction used */
    const char *disk_how, *compute_how;   /* where those rates came from (owned by the model) */
    int      n_parallel;      /* sequences the plan holds (sluice_params.n_parallel) */
    double   pred_req_tok_s;  /* with n_parallel sequences decoding together: each one's rate, */
    double   pred_agg_tok_s;  /* and all of them together */
    /* with sluice_params.draft_model in a planned run: the draft's share of the budget (the fields
     * above then describe the target within budget - draft_bytes) and what it is predicted to buy */
    bool     draft_planned;
    bool     draft_resident;          /* every draft weight resident (else it streams) */
    uint64_t draft_bytes;             /* the draft's plan: weights, KV cache, scratch */
    double   pred_tok_s_alone;        /* the target alone at the whole budget */
    double   draft_breakeven;         /* acceptance above which the draft pays; > 1: it never does */
} sluice_plan_info;
void sluice_model_get_plan(const sluice_model *m, sluice_plan_info *out);
/* The plan as `sluice plan` prints it (json: one JSON object). */
void sluice_plan_print(const sluice_model *m, FILE *f, bool json);

/* Plan without loading anything: reads only the metadata.  0 (feasible), -ENOSPC (out->min_budget
 * says what would work, err why), other -errno. */
int  sluice_plan(const char *path, const sluice_params *p, sluice_plan_info *out, char *err, size_t errlen);

/* ---- tokens ----------------------------------------------------------------------------------- */

enum { SLUICE_TOK_ADD_SPECIAL = 1,    /* add BOS (and EOS) as the model's metadata says */
       SLUICE_TOK_PARSE_SPECIAL = 2 };/* match special-token texts such as <|eot_id|> in the input */

/* Tokenize text (len < 0: NUL-terminated).  Writes up to n_max ids; returns the total count (may
 * exceed n_max: call again with a larger buffer) or -errno. */
int     sluice_tokenize(const sluice_model *m, const char *text, ptrdiff_t len, int flags, int32_t *out, int n_max);
/* The bytes token id stands for (control tokens: ""; special = true: their text).  Returns the
 * length (may exceed buflen) or -EINVAL.  Pieces may be partial UTF-8: see sluice_generate. */
int     sluice_token_piece(const sluice_model *m, int32_t id, bool special, char *buf, size_t buflen);
/* Detokenize a sequence (as llama.cpp's llama_detokenize).  Returns the full length or -errno. */
int64_t sluice_detokenize(const sluice_model *m, const int32_t *ids, int n, char *buf, size_t buflen);
/* End of generation (EOS, EOT, ...). */
bool    sluice_token_is_eog(const sluice_model *m, int32_t id);

/* ---- contexts ---------------------------------------------------------------------------------- */

int  sluice_ctx_new(sluice_model *m, sluice_ctx **out, char *err, size_t errlen);
void sluice_ctx_free(sluice_ctx *c);

/* Evaluate tokens at the end of the context.  On success the logits are those after the last
 * token.  0 or -errno: -ENOSPC context full, -ECANCELED sluice_cancel() was called (the context
 * keeps every fully evaluated batch), I/O errors from the weight stream.  Message: sluice_ctx_error. */
int  sluice_eval(sluice_ctx *c, const int32_t *tokens, int n);
/* Make the context hold exactly tokens[0..n): keep the longest common prefix already evaluated,
 * evaluate the rest (at least the last token, unless its logits are still current).  Returns the
 * number of tokens evaluated (0 when all were reused) or -errno. */
int  sluice_prefill(sluice_ctx *c, const int32_t *tokens, int n);
/* Forget positions n and beyond (n <= sluice_n_past).  0 or -EINVAL: n out of range, or a
 * sliding-window layer keeps only a ring of its window + n_batch + draft_max positions and no longer
 * holds the window before n (a rewind to within n_batch + draft_max + 1 of the furthest position
 * evaluated always works); sluice_ctx_error says which, the context is unchanged, and sluice_reset
 * (or sluice_prefill, which falls back to it) starts again. */
int  sluice_rewind(sluice_ctx *c, int n);
void sluice_reset(sluice_ctx *c);

const float   *sluice_logits(const sluice_ctx *c);         /* n_vocab floats, NULL before any eval */
const int32_t *sluice_tokens(const sluice_ctx *c, int *n); /* the tokens in the context */
int  sluice_n_past(const sluice_ctx *c);
int  sluice_n_ctx(const sluice_ctx *c);
const char *sluice_ctx_error(const sluice_ctx *c);
/* Ask the evaluation in progress (or the next one) to stop with -ECANCELED; the request stays until
 * sluice_uncancel().  Async-signal-safe: may be called from a signal handler or another thread. */
void sluice_cancel(sluice_ctx *c);
void sluice_uncancel(sluice_ctx *c);

/* ---- batches: one forward pass for several contexts -------------------------------------------
 * A server (or any caller with several conversations) adds the next tokens of each context to a
 * batch and evaluates them in one pass: each block's weights are read once for all of them, which is
 * what a streamed model's pass costs.  Each context keeps its own KV cache, tokens and logits, and a
 * context's logits are bit-identical whatever it was batched with and however its tokens were split
 * into passes.  A span may ask for the logits of each of its tokens (logits_all): verifying drafted
 * tokens is one span of k+1 tokens, then sluice_rewind() to the last accepted one.
 *
 *   sluice_batch *b;  sluice_batch_new(m, 512, 8, 0, &b, err, sizeof err);
 *   sluice_ctx *c[8]; sluice_ctx_new_seq(m, &c[i], err, sizeof err);      // KV cache, no batch scratch
 *   sluice_batch_clear(b);
 *   sluice_batch_add(b, c[0], &next_token, 1, false);                     // a decoding sequence
 *   sluice_batch_add(b, c[1], prompt + done, chunk, false);               // a chunk of a new prompt
 *   sluice_batch_eval(b);  sluice_sample(s0, c[0]); ...
 */
typedef struct sluice_batch sluice_batch;

/* A context for use with batches: its KV cache, tokens and logits, with scratch for one position
 * (its own sluice_eval works, one token per pass).  Same parameters as sluice_ctx_new otherwise. */
int  sluice_ctx_new_seq(sluice_model *m, sluice_ctx **out, char *err, size_t errlen);

/* Room for n_tokens positions (0: the model's n_batch) from up to n_seq contexts (0: the model's
 * n_parallel), with n_logits rows of logits (0: as many as verifying spans may use: draft_max + 1
 * per context unless drafting is off, at most n_tokens; logits_all spans need a row per token). */
int  sluice_batch_new(sluice_model *m, int n_tokens, int n_seq, int n_logits, sluice_batch **out, char *err,
                      size_t errlen);
void sluice_batch_free(sluice_batch *b);
void sluice_batch_clear(sluice_batch *b);
/* Evaluate tokens[0..n) (copied) at the end of c in the next pass.  Returns the span's index, or
 * -EINVAL (c already in the batch, another model, n < 1), -ENOSPC (the batch's tokens, rows or
 * contexts are full; or c's context is: then sluice_ctx_error(c) says so). */
int  sluice_batch_add(sluice_batch *b, sluice_ctx *c, const int32_t *tokens, int n, bool logits_all);
int  sluice_batch_n_tokens(const sluice_batch *b);
/* One forward pass over every span; then the batch is empty again.  On success each context holds
 * its span's tokens and sluice_logits(c) are those after its last one.  0 or -errno (the message:
 * sluice_batch_error; no context advances); -ECANCELED after sluice_batch_cancel. */
int  sluice_batch_eval(sluice_batch *b);
/* After sluice_batch_eval: the logits after token i of span `span` (logits_all spans: any i; others:
 * only their last token).  NULL when out of range. */
const float *sluice_batch_logits(const sluice_batch *b, int span, int i);
const char *sluice_batch_error(const sluice_batch *b);
/* Speculative decoding in a batch (sluice serve): sluice_generate's, for a context decoding in a
 * batch.  sluice_batch_add_draft adds c's next token `next` (sampled, not yet evaluated) followed by
 * drafts of what comes after it, as one span keeping the logits of every position.  The drafts are
 * n-grams of c's own tokens (and its lookup text, sluice_ctx_set_lookup); how many is the adaptive
 * draft length (sluice_params.draft_max, draft_fixed) from c's acceptance rate and this batch's
 * measured pass times, at most k_max (the caller's bound: the batch room it leaves the other
 * contexts, the tokens the request still wants after next), the batch's rows and tokens left and
 * c's room.  A model that does not draft (draft off, or AUTO with every weight resident) adds next
 * alone.  *n_drafted says how many were added; returns the span, or -errno as sluice_batch_add. */
int  sluice_batch_add_draft(sluice_batch *b, sluice_ctx *c, int32_t next, int k_max, int *n_drafted);
/* After sluice_batch_eval, for any span whose context has finished its prompt: the tokens s
 * generates from it, into out (room for the span's drafts + 1).  For a sluice_batch_add_draft
 * span: the longest prefix of its drafts that s itself would have produced (greedy: the argmax, so
 * the tokens are one-token decoding's; sampling: speculative rejection sampling, which keeps s's
 * distribution), then the token after them (the correction, or a bonus token when every draft was
 * kept); c keeps its tokens through the last accepted draft and the logits after it, as if each
 * had been decoded alone, and its figures (sluice_get_stats: n_passes, n_drafted, n_accepted,
 * n_gen_tokens) count the pass.  For another span: one token, sluice_sample(s, c).  The last token
 * is not evaluated (it is the next pass's `next`).  A caller that stops at out[i] (a stop string)
 * simply drops the rest.  Returns the count (>= 1) or -errno (sluice_batch_error). */
int  sluice_batch_verify(sluice_batch *b, int span, sluice_sampler *s, int32_t *out);
/* Like sluice_cancel, for the pass in progress (async-signal-safe); sluice_batch_uncancel clears it. */
void sluice_batch_cancel(sluice_batch *b);
void sluice_batch_uncancel(sluice_batch *b);

/* ---- sampling and generation ------------------------------------------------------------------ */

typedef struct sluice_sampler_params {
    float temp;               /* finite; <= 0: greedy (default 0.8) */
    int   top_k;              /* >= 0; 0 = off (default 40) */
    float top_p;              /* in [0, 1]; 1 = off (default 0.95) */
    float min_p;              /* in [0, 1]; 0 = off (default 0.05) */
    float repeat_penalty;     /* finite, > 0; 1 = off (default) */
    int   repeat_last_n;      /* >= 0 (default 64) */
    uint64_t seed;
    bool  ignore_eog;         /* never choose an end-of-generation token (llama.cpp's --ignore-eos) */
} sluice_sampler_params;

void sluice_sampler_params_default(sluice_sampler_params *p);
/* NULL p: defaults.  0, or -EINVAL naming the field out of range (NaN/Inf temp, top_p outside [0, 1],
 * min_p > 1, penalty <= 0, ...), or -ENOMEM. */
int  sluice_sampler_create(const sluice_model *m, const sluice_sampler_params *p, sluice_sampler **out, char *err,
                           size_t errlen);
/* As sluice_sampler_create; NULL (errno EINVAL or ENOMEM) on failure. */
sluice_sampler *sluice_sampler_new(const sluice_model *m, const sluice_sampler_params *p);
void sluice_sampler_free(sluice_sampler *s);
/* Choose the next token from the context's current logits (which are not modified); the repetition
 * penalty looks at the context's tokens.  Returns the id, or -EINVAL before any evaluation, or
 * -EDOM when the sampler's grammar allows no token (the vocabulary cannot spell what must come
 * next; or ignore_eog where only end of generation may come). */
int32_t sluice_sample(sluice_sampler *s, sluice_ctx *c);
/* The logits the last sluice_sample chose from (after the repetition penalty). */
const float *sluice_sampler_logits(const sluice_sampler *s);

/* ---- constrained decoding: JSON output ---------------------------------------------------------
 * A sampler with a grammar chooses only tokens that keep its text a prefix of the grammar's: every
 * token whose bytes would leave it gets -inf before sampling (and before the repetition penalty's
 * effect can matter), in sluice_sample, sluice_generate and sluice_batch_verify alike (a drafted
 * token is accepted only if the grammar allows it, so speculative decoding keeps working).  The
 * grammar advances with each token the sampler returns; end-of-generation tokens are allowed only
 * once the text is complete, and then only they are.  The JSON Schema subset, what is refused and
 * the bounds (whitespace, digits, nesting) that make every answer end: runtime/text/grammar.h and
 * docs/structured-output.md. */

/* Constrain s to one JSON value: schema_json (a NUL-terminated JSON Schema) or, NULL, any JSON
 * object.  Replaces any grammar s had and starts it from the beginning.  0; -EINVAL with one line
 * in err ("unsupported JSON Schema keyword 'pattern' (supported: ...)", invalid JSON, ...); -ENOMEM. */
int  sluice_sampler_set_json_schema(sluice_sampler *s, const char *schema_json, char *err, size_t errlen);
/* As sluice_sampler_set_json_schema, with literal text before and after the value (NULL: ""), e.g.
 * "<tool_call>\n" and "\n</tool_call>".  A special token (one that prints as nothing without
 * `special`, such as <|call|>) is allowed only where its exact text is the next part of a literal. */
int  sluice_sampler_set_grammar(sluice_sampler *s, const char *schema_json, const char *prefix, const char *suffix,
                                char *err, size_t errlen);
/* Remove s's grammar (unconstrained again).  No-op without one. */
void sluice_sampler_clear_grammar(sluice_sampler *s);
/* Start s's grammar again from the beginning (a new answer with the same sampler). */
void sluice_sampler_reset_grammar(sluice_sampler *s);
enum sluice_grammar_state { SLUICE_GRAMMAR_NONE = 0,     /* no grammar */
                            SLUICE_GRAMMAR_PENDING = 1,  /* the value (or suffix) is not complete */
                            SLUICE_GRAMMAR_COMPLETE = 2 };/* complete: only end of generation may follow */
int  sluice_sampler_grammar_state(const sluice_sampler *s);
/* Check a schema (NULL: any JSON object) without a model: what sluice_sampler_set_json_schema
 * would say.  0 or -EINVAL/-ENOMEM with err. */
int  sluice_json_schema_check(const char *schema_json, char *err, size_t errlen);

/* Called for every generated token with the text it completes: whole UTF-8 characters only (a
 * token ending inside a character gives "" and the bytes come with a later token); at the end any
 * held-back bytes come with token -1.  Return non-zero to stop. */
typedef int (*sluice_token_fn)(void *user, int32_t token, const char *text, size_t len);

/* Sample, report and evaluate up to n_max tokens after the context's current logits.  Stops at an
 * end-of-generation token, at n_max, when the context is full, when the callback returns non-zero,
 * or on sluice_cancel() (sluice_stop_reason says which).  Every reported token but the last is
 * evaluated into the context; the last one is not (nothing needs its logits yet): to continue after
 * it, sluice_eval it (or sluice_prefill the whole sequence).  Returns the number of tokens reported
 * (>= 0) or -errno (the tokens evaluated before an error stay in the context). */
int  sluice_generate(sluice_ctx *c, sluice_sampler *s, int n_max, sluice_token_fn cb, void *user);

/* A text the drafter may copy from as well as the context (the document being edited, summarized
 * or quoted: `sluice run --lookup FILE`), as token ids; copied.  n = 0 clears it.  0 or -errno. */
int  sluice_ctx_set_lookup(sluice_ctx *c, const int32_t *ids, int n);

enum sluice_stop { SLUICE_STOP_NONE = 0, SLUICE_STOP_EOG, SLUICE_STOP_LIMIT, SLUICE_STOP_CALLBACK,
                   SLUICE_STOP_CTX_FULL, SLUICE_STOP_CANCELED, SLUICE_STOP_ERROR };
/* Why the last sluice_generate returned. */
int  sluice_stop_reason(const sluice_ctx *c);

/* ---- sessions ----------------------------------------------------------------------------------
 * A session file holds a context's tokens, its KV cache and logits (zstd-compressed), plus an
 * optional application blob; it is applied only to the same model file and KV precision.  Writes are
 * atomic (temporary file, fsync, rename). */

typedef struct sluice_session_stats {
    int      n_tokens;
    uint64_t raw_bytes, file_bytes;   /* payload before compression; the file */
    double   seconds;
} sluice_session_stats;

/* Save: writes only a regular file that is absent, empty or a sluice session.  -EINVAL: path is a
 * directory, device, FIFO, socket or symbolic link; -EEXIST: path holds a file that is not a session,
 * or a session of another model, KV precision or format version (kept as it was; flags
 * SLUICE_SESSION_OVERWRITE replaces such a session, never a file that is not one).  Nothing is
 * replaced on any error. */
enum { SLUICE_SESSION_OVERWRITE = 1 };
int  sluice_session_save(sluice_ctx *c, const char *path, const void *extra, size_t extra_len,
                         sluice_session_stats *st, char *err, size_t errlen);
int  sluice_session_save_flags(sluice_ctx *c, const char *path, const void *extra, size_t extra_len, unsigned flags,
                               sluice_session_stats *st, char *err, size_t errlen);
/* Restore: replaces the context's contents.  -ENOENT: no such file; -EINVAL: not a session, another
 * model, another KV precision, corrupt or truncated, NaN/Inf in it, not a regular file (the context
 * is then empty); -ENOSPC: more
 * tokens than n_ctx.  extra (may be NULL): a malloc'd copy of the blob, free() it. */
int  sluice_session_load(sluice_ctx *c, const char *path, void **extra, size_t *extra_len,
                         sluice_session_stats *st, char *err, size_t errlen);

/* ---- figures ---------------------------------------------------------------------------------- */

typedef struct sluice_stats {
    uint64_t peak_rss;            /* VmHWM of the process */
    uint64_t resident_weight_bytes;
    uint64_t stream_bytes_read, stream_reads;
    double   stream_wait_s, stream_compute_s;
    const char *backend;          /* "resident", "pread", "mmap", "uring" */
    uint64_t kv_bytes;            /* memory held by the context's KV cache */
    int      n_past, n_ctx;
    uint64_t n_eval, n_sampled;   /* tokens evaluated / sampled in this context */
    double   eval_s;              /* time spent in evaluation */
    /* sluice_generate's passes (one forward pass each), drafted tokens verified in them, drafts
     * accepted: tokens per pass = (n_gen_tokens) / n_passes, acceptance = n_accepted / n_drafted */
    uint64_t n_passes, n_drafted, n_accepted, n_gen_tokens;
    int      draft_max;           /* drafts per pass the context can verify (0: no speculation) */
    const char *drafter;          /* "ngram", "model" or "" (no speculation) */
    double   draft_s;             /* time the draft model spent evaluating (syncing and proposing) */
    uint64_t n_draft_evals;       /* tokens the draft model evaluated */
    /* the weight stream's shape (0 when every weight is resident) */
    int64_t  stream_pieces_per_pass;
    uint64_t stream_max_piece, stream_pass_bytes, stream_buffer_bytes;
    uint64_t stream_embd_rows;    /* token-embedding rows read on demand */
    /* mixture of experts: routed experts read when a router picked them (counted in
     * stream_bytes_read too); one announcement per MoE block per pass */
    uint64_t stream_expert_bytes, stream_expert_pieces, stream_expert_wants;
    /* the expert cache: experts the batches asked for that it held / read; its entries and bytes */
    uint64_t expert_hits, expert_misses;
    int64_t  expert_cache_entries;
    uint64_t expert_cache_bytes;
    /* expert prefetch: experts read on a guess, those the next block then took, bytes read on a
     * guess and of those the bytes of experts not taken, guessed reads that failed */
    uint64_t expert_prefetch_units, expert_prefetch_used, expert_prefetch_bytes, expert_prefetch_wasted,
             expert_prefetch_failed;
} sluice_stats;
/* c may be NULL (model figures only). */
void sluice_get_stats(const sluice_model *m, const sluice_ctx *c, sluice_stats *out);
/* Mixture-of-experts models: append every position's expert choices to f (a FILE *, opened for
 * writing by the caller, which also closes it after sluice_ctx_free), one line per position and MoE
 * block: "pass block position e1 ... ek" (bench/moe_cache_sim.c replays it).  NULL stops.  Lines are
 * written during evaluation; the caller checks f for errors. */
void sluice_ctx_moe_trace(sluice_ctx *c, void *f);
/* How much of the model file is in the page cache now (mincore).  0 or -errno. */
int  sluice_page_cache(const sluice_model *m, uint64_t *resident_bytes, uint64_t *file_bytes);

const char *sluice_version(void);

/* Debug and test switches, applied process-wide from the environment when a program calls this (the
 * sluice command does at start; the library never reads the environment by itself):
 *   SLUICE_KERNELS=portable|avx2|avx512  force a kernel path      SLUICE_EXACT=1   exact kernels
 *   SLUICE_GEMM=off|amx|vnni|avx2|auto  the prefill GEMM path (at most that one; off: the dots)
 *   SLUICE_SPIN_US=N   pool workers spin N µs between products     SLUICE_NO_URING=1  no io_uring
 *   SLUICE_IO_FAULT=eintr=K,short=N,eio_at=OFFSET,cqe_err=K  injected read faults
 *   SLUICE_POOL_STALL_MS=N  the last worker of each pool sleeps N ms before its first job (a stuck worker)
 * Call it before opening models.  0, or -EINVAL with a message naming the bad variable. */
int sluice_debug_env(char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
