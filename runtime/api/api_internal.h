/* runtime/api/api_internal.h — what the public objects of include/sluice.h hold.
 *
 * The library's users see only opaque pointers; the sluice CLI (runtime/cli/) is built on the same
 * API and reaches through these definitions for figures the API does not summarise (stream counters
 * for --stats, the raw plan for --stats-json).
 */
#ifndef SL_RUNTIME_API_INTERNAL_H
#define SL_RUNTIME_API_INTERNAL_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#include "include/sluice.h"
#include "runtime/engine/draft.h"
#include "runtime/engine/forward.h"
#include "runtime/engine/model.h"
#include "runtime/plan/plan_draft.h"
#include "runtime/plan/planner.h"
#include "runtime/engine/sampler.h"
#include "runtime/engine/stream.h"
#include "runtime/text/grammar.h"
#include "runtime/text/tokenizer.h"

struct sluice_model {
    sl_model  *m;
    sl_vocab  *voc;
    sl_pool   *pool;
    sl_stream *stream;          /* NULL: every weight is resident */
    sluice_params p;            /* as given (defaults filled in) */
    bool       planned;         /* the planner ran; plan/pm/req are valid */
    sl_plan   *plan;
    sl_plan_model *pm;
    sl_plan_req req;
    int        n_ctx, n_batch, kv_type, threads;
    int        draft_k;         /* most drafts a pass verifies (0: no speculative decoding) */
    bool       draft_fixed;     /* always draft_k (sluice_params.draft_fixed) */
    int        logit_rows;      /* logits rows a context keeps (at most its batch): draft_max + 1 unless
                                 * drafting is off; the planner counts the same (sl_plan_req.n_logits) */
    int        n_parallel;      /* sequences the plan holds KV caches for (>= 1) */
    sluice_model *draft;        /* sluice_params.draft_model, opened (NULL: none) */
    sl_plan_draft *dplan;       /* planned with a draft: its share of the budget and its worth */
    char      *spill_dir;       /* NULL: KV in memory */
    char      *chat_template;   /* NUL-terminated copy, or NULL */
    uint64_t   fingerprint;     /* for session files: computed on first use */
    bool       have_fingerprint;
    uint64_t   t_open_ns, t_loaded_ns;
    /* Contexts of one model share its thread pool and weight stream: evaluations (and session
     * saves/loads) take eval_mu, so two threads with a context each take turns.  owner is the
     * thread holding it, so that re-entry from a callback is refused (-EBUSY) instead of deadlocking. */
    pthread_mutex_t eval_mu;
    _Atomic unsigned long owner;
    atomic_int n_ctx_live;
    sl_gvocab *gvocab;          /* the vocabulary's trie for grammars: built on first use (api_grammar.c) */
};

struct sluice_ctx {
    sluice_model *M;
    sl_ctx    *c;
    int32_t   *toks;            /* the tokens whose KV rows are in the cache: n_toks == c->n_past */
    int        n_toks, cap;
    bool       logits_valid;    /* c->logits belong to toks[n_toks - 1] */
    volatile sig_atomic_t cancel;
    uint64_t   n_eval, n_sampled, eval_ns;
    int        stop;            /* enum sluice_stop of the last sluice_generate */
    int32_t   *lookup;          /* sluice_ctx_set_lookup's tokens */
    int        n_lookup;
    sl_draft_stats dstats;      /* acceptance and pass times, for the draft length */
    uint64_t   n_passes, n_drafted, n_accepted, n_gen;
    sluice_ctx *dctx;           /* the draft model's context (NULL: no draft model) */
    uint64_t   draft_ns, n_draft_evals;
    char       err[SL_ERRLEN];
};

struct sluice_sampler {
    sl_sampler *s;
    int    n_vocab;
    float *logits;              /* scratch: the context's logits, penalised */
    int32_t *eog_ids;           /* ignore_eog: the end-of-generation tokens, masked before sampling */
    int    n_eog;
    /* constrained decoding (api_grammar.c): the grammar, this sequence's place in it, the mask */
    const sluice_model *M;
    sl_grammar *grammar;
    sl_gstate *gstate;
    uint8_t *allowed;
};

/* ---- constrained decoding (api_grammar.c) ---- */
/* Set -inf on the logits (S->logits) of every token S's grammar does not allow next.  0 (also
 * without a grammar), -EDOM when no token is allowed, -ENOMEM. */
int  api_grammar_mask(sluice_sampler *S);
/* S chose token id: advance its grammar (no-op without one). */
void api_grammar_accept(sluice_sampler *S, int32_t id);
/* Free what the sampler's grammar holds (sluice_sampler_free), and the model's trie (sluice_close). */
void api_grammar_sampler_free(sluice_sampler *S);
void api_grammar_model_free(sluice_model *M);

/* Positions a sliding-window layer's ring keeps beyond its window in M's contexts (n_batch asked
 * for + draft_max: runtime/engine/kvcache.h); the plan's sl_plan_req.ring_slack is the same. */
int api_ring_slack(const sluice_model *M);

/* A context whose own evaluations run n_batch positions per pass (sluice_ctx_new: the model's). */
int sluice__ctx_new(sluice_model *M, int n_batch, sluice_ctx **out, char *err, size_t errlen);

/* Heap held by a batch's workspace (scratch for its tokens, logits rows): the planner's share of a
 * server's activations beside each sequence's context (tests compare the two). */
size_t sluice__batch_mem_bytes(const sluice_batch *b);
/* Live-handle registry (api_check.c): active in debug builds or with SLUICE_API_CHECKS=1; a handle
 * that is not live aborts with a message naming fn. */
enum { API_MODEL, API_CTX, API_SAMPLER };
bool api_checks_on(void);
void api_track(const void *p, int kind);
void api_check(const void *p, int kind, const char *fn);
void api_untrack(const void *p, int kind, const char *fn);

/* Take / give back M->eval_mu.  0, or -EBUSY (with err) when this thread already holds it. */
int  api_model_lock(sluice_model *M, char *err, size_t errlen);
void api_model_unlock(sluice_model *M);

/* -EINVAL with a message in err (when err && errlen): for arguments the API refuses. */
int api_einval(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The planner's request for model m under p, its plan, and *spill (the KV spill directory when
 * the plan spills, else NULL).  0, or -errno with err (infeasible: -ENOSPC, plan->why). */
int api_make_plan(const sl_model *m, size_t vocab_bytes, const sluice_params *p, int n_ctx, int n_batch, int threads,
                  sl_plan_model *pm, sl_plan_req *req, sl_plan *plan, const char **spill, char *err, size_t errlen);

/* ---- a draft model (api_draft.c) ---- */
/* 0 when the model at path has the target's vocabulary (size, every token's text, tokenizer
 * family, BOS, EOS); else -EINVAL (or the open error) with "draft model PATH: ..." naming the first
 * difference. */
int api_draft_check_vocab(const sl_vocab *target, const char *path, char *err, size_t errlen);
/* The draft's sluice_params: p's settings, no drafting, planned within budget (0: as p). */
sluice_params api_draft_params(const sluice_params *p, int n_ctx, uint64_t budget);
/* api_make_plan for the target of p->draft_model: the budget split (d), the target planned within
 * its part. */
int api_plan_with_draft(const sl_model *m, size_t vocab_bytes, const sluice_params *p, int n_ctx, int n_batch,
                        int threads, sl_plan_model *pm, sl_plan_req *req, sl_plan *plan, const char **spill,
                        sl_plan_draft *d, char *err, size_t errlen);
/* The target's plan and the draft's share (json: {"target": ..., "draft": ...}). */
void api_print_plan_with_draft(const sl_plan *plan, const sl_plan_model *pm, const sl_plan_req *req,
                               const sl_plan_draft *d, FILE *f, bool json);
/* Up to k tokens C's draft model proposes (greedily) after hist[0..n), its context first brought to
 * hist.  Returns the count (0..k) or -errno (C->err says why). */
int api_draft_propose(sluice_ctx *C, const int32_t *hist, int n, int k, int32_t *out);

/* ---- speculative decoding (api_ctx.c; sluice_generate and sluice_batch share it) ---- */
/* How many tokens to draft for C's next pass: the adaptive length (sl_draft_best_k from C's
 * acceptance and the pass times fitted in `timing`: C's own passes, or a batch's), or draft_max
 * with draft_fixed; at most rows - 1 (the pass keeps a logits row per position), n_left - 1 (the
 * tokens still wanted, the pass's own included) and the context's room. */
int api_draft_len(const sluice_ctx *C, const sl_draft_stats *timing, int rows, int n_left);
/* Up to k drafts for after C's tokens followed by id (the draft model's, else n-grams of the
 * context and the lookup text) into out; id is written at C->toks[n_toks] (not counted).  The
 * count (0..k) or -errno. */
int api_draft(sluice_ctx *C, int32_t id, int k, int32_t *out);
/* Called with each accepted draft, in order; true: stop after reporting it. */
typedef bool (*api_verify_emit_fn)(void *user, int32_t id);
/* C's last pass evaluated its tokens base .. base + nd: the token sampled before, then nd drafts;
 * rows holds nd + 1 rows of logits, row i the logits after token base + i.  Accepts the longest
 * prefix of the drafts that S itself would have produced (greedy: the argmax after the repetition
 * penalty over one-token decoding's history; sampling: rejection sampling, sl_sample_verify),
 * reporting each to report (NULL: none), and samples the token after them into *next (the correction,
 * or the bonus token when every draft was kept).  C then keeps its tokens through the last accepted
 * draft with the logits after it, and its figures and draft statistics (the pass's time: from
 * t0_ns to now) are updated.  Returns the drafts accepted, or -1 when report stopped (*next unset),
 * or -EDOM / -ENOMEM (< -1) when S's grammar allows no token at a row (C keeps the drafts accepted
 * before it; *next unset). */
int api_verify(sluice_ctx *C, sluice_sampler *S, int base, int nd, const float *rows, uint64_t t0_ns,
               api_verify_emit_fn report, void *user, int32_t *next);

/* Session fingerprint of M's model file (computed once).  0 or -errno with err. */
int sluice__fingerprint(sluice_model *M, uint64_t *fp, char *err, size_t errlen);

#endif
