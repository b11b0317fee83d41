/* runtime/api/api_internal.h — what the public objects of include/sluice.h hold.
 *
 * The library's users see only opaque pointers; the sluice CLI (runtime/cli/) is built on the same
 * API and reaches through these definitions for figures the API does not summarise (stream counters
 * for --stats, the raw plan for --stats-json).
 */
#ifndef SL_RUNTIME_API_INTERNAL_H
#define SL_RUNTIME_API_INTERNAL_H

#include <signal.h>

#include "include/sluice.h"
#include "runtime/engine/forward.h"
#include "runtime/engine/model.h"
#include "runtime/plan/planner.h"
#include "runtime/engine/sampler.h"
#include "runtime/engine/stream.h"
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
    char      *spill_dir;       /* NULL: KV in memory */
    char      *chat_template;   /* NUL-terminated copy, or NULL */
    uint64_t   fingerprint;     /* for session files: computed on first use */
    bool       have_fingerprint;
    uint64_t   t_open_ns, t_loaded_ns;
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
    char       err[SL_ERRLEN];
};

struct sluice_sampler {
    sl_sampler *s;
    int    n_vocab;
    float *logits;              /* scratch: the context's logits, penalised */
};

/* Session fingerprint of M's model file (computed once).  0 or -errno with err. */
int sluice__fingerprint(sluice_model *M, uint64_t *fp, char *err, size_t errlen);

#endif
