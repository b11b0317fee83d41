/* runtime/engine/forward.h — evaluation context: KV cache, scratch, and the llama forward pass.
 *
 * The forward pass is block-major over a batch of positions: for each block, every position of
 * the batch (the whole prompt chunk, or the one new token) goes through it before the next block
 * starts.  Each block's weights are therefore touched once per batch, which is what makes a
 * streamed prompt cost one pass over the file.
 */
#ifndef SL_RUNTIME_FORWARD_H
#define SL_RUNTIME_FORWARD_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "runtime/engine/kvcache.h"
#include "runtime/engine/model.h"
#include "kernels/threadpool.h"

/* How weights that are not resident reach the forward pass (runtime/engine/stream.c implements it).
 *   matmul: out[b][r] = W[r] . x[b] for all rows of w, reading w piece by piece;
 *   row:    dequantize row `row` of w into out (token embeddings).
 * Both return 0 or -errno (message available from the source). */
typedef struct sl_wsource {
    void *self;
    int (*matmul)(void *self, const sl_weight *w, const float *x, int nb, float *out, int64_t out_stride);
    int (*row)(void *self, const sl_weight *w, int64_t row, float *out);
    const char *(*errmsg)(void *self);   /* what the last failure was */
    void (*reset)(void *self);           /* drop reads in flight: the next pass starts at block 0 */
    /* The routed experts' matrices the forward pass will multiply next, in the order it will: the
     * source starts reading them now (all of an expert's matrices in one batch of reads, as many
     * experts ahead as its reader holds).  Resident weights in the list are skipped.  The next
     * matmul calls on routed weights must follow this order.  0 or -errno. */
    int (*want)(void *self, sl_weight *const *ws, int n);
    /* Optional (NULL: no prefetch): the routed experts' matrices the next announcement will
     * probably hold (a guess: the next MoE block's router on this block's output).  The source may
     * read them into its expert cache while the forward pass computes on, using only readers that
     * no announced weight is waiting for.  Never changes what any product computes: a guess that
     * was wrong, or whose read failed, is read again when wanted.  0 or -errno. */
    int (*hint)(void *self, sl_weight *const *ws, int n);
} sl_wsource;

typedef struct sl_ctx_params {
    int n_ctx;              /* positions in the KV cache */
    int n_batch;            /* max positions per forward batch */
    int kv_type;            /* enum sl_kv_type (runtime/engine/kvcache.h) */
    const char *kv_spill_dir;   /* non-NULL: spill the KV cache to a file in this directory */
    bool logits_all;        /* keep the logits of every position of a batch, not only the last */
    int n_logits;           /* rows of logits kept (0: n_batch with logits_all, else 1): sl_eval keeps
                             * the last n_logits positions of a batch (verifying k drafted tokens
                             * needs k + 1); a workspace for sl_eval_seqs needs one per sequence
                             * (more for logits_all spans) */
    bool no_kv;             /* a workspace for sl_eval_seqs only: no KV cache of its own */
    const int *windows;     /* sl_ctx_bytes: the per-block sliding windows (sl_layer.window; NULL: none,
                             * every layer full); sl_ctx_create takes them from the model */
    int ring_slack;         /* sliding-window layers keep window + ring_slack positions, a ring
                             * (runtime/engine/kvcache.h: at least the most positions a pass gives this
                             * context - 1, plus the rollback wanted); 0: n_batch + SL_RING_ROLLBACK;
                             * < 0: every layer keeps the whole context */
} sl_ctx_params;

/* The rollback a ring keeps room for when sl_ctx_params.ring_slack is 0 (sluice's default draft_max). */
#define SL_RING_ROLLBACK 8

/* The ring slack p asks for (ring_slack, or its default). */
static inline int sl_ctx_ring_slack(const sl_ctx_params *p)
{
    return p->ring_slack ? p->ring_slack : p->n_batch + SL_RING_ROLLBACK;
}

/* Where one position of the batch being evaluated belongs: its sequence's cache and its position. */
typedef struct sl_batch_pos {
    sl_kv *kv;
    int pos;
    bool logits;            /* compute this position's logits */
} sl_batch_pos;

typedef struct sl_ctx {
    sl_model *m;
    sl_pool  *pool;
    sl_wsource *src;        /* NULL: every weight must be resident */
    int n_ctx, n_batch, kv_type;
    int n_past;             /* positions already in the cache */
    sl_kv *kv;              /* (layer, n_ctx, kv_dim) keys and values */
    /* scratch, sized for n_batch positions */
    float *x;               /* (n_batch, dim) residual stream */
    float *xb;              /* (n_batch, dim) normed input */
    float *q;               /* (n_batch, n_heads*head_dim) */
    float *k, *v;           /* (n_batch, kv_dim) */
    float *att_out;         /* (n_batch, n_heads*head_dim) */
    float *hb, *hb2;        /* (n_batch, widest FFN: ffn_dim, expert_ffn or shexp_ffn) */
    /* mixture of experts (NULL for a dense model): runtime/engine/moe.c */
    float *moe_logits;      /* (n_batch, n_expert) router logits, then probabilities */
    int   *moe_ids;         /* (n_batch, n_expert_used) the experts each position takes */
    float *moe_w;           /* (n_batch, n_expert_used) their weights */
    int   *moe_list;        /* (n_batch * n_expert_used + n_expert + 1): positions grouped by expert */
    float *moe_x, *moe_y;   /* (n_batch, dim) one expert's gathered inputs and outputs */
    float *moe_acc;         /* (n_batch, dim) the FFN's output per position */
    sl_weight **moe_want;   /* (n_expert * SL_EXPERT_MATS) the pass's expert reads, in order */
    void *moe_trace;        /* FILE *: each position's experts per MoE block are appended (NULL: off) */
    uint64_t n_passes;      /* forward passes this context ran (numbers the trace's batches) */
    float *att;             /* (n_threads, grp*n_ctx + head_dim) attention scores + q8_0 head row */
    const float *rope_div;  /* per-pair angle divisors for this context's length (model-owned), or NULL */
    float *logits;          /* (n_logits, vocab): the last evaluated position, or with logits_all every
                             * position of the last batch (row b = position n_past - n_logits + b);
                             * after sl_eval_seqs: the rows the spans asked for, in span order */
    int n_logits;           /* rows in logits after the last evaluation */
    int logits_cap;         /* rows logits has room for */
    bool logits_all;
    sl_batch_pos *bpos;     /* (n_batch): the batch being evaluated, position by position */
    size_t mem_bytes;       /* heap held by this context (KV + scratch) */
    volatile sig_atomic_t *cancel;   /* when set to non-zero, evaluation stops with -ECANCELED */
    char err[256];
} sl_ctx;

/* The logits after the last evaluated token (the last of the n_logits rows). */
static inline float *sl_ctx_last_logits(const sl_ctx *c)
{
    return c->logits + (size_t)(c->n_logits > 0 ? c->n_logits - 1 : 0) * (size_t)c->m->cfg.vocab;
}

/* Bytes a context with these parameters will allocate (for planning). */
size_t sl_ctx_bytes(const sl_config *c, const sl_ctx_params *p, int n_threads);

int  sl_ctx_create(sl_model *m, const sl_ctx_params *p, sl_pool *pool, sl_ctx **out, char *err, size_t errlen);
void sl_ctx_free(sl_ctx *c);
void sl_ctx_reset(sl_ctx *c);   /* forget the cache (n_past = 0) */
/* Go back to n positions (0 <= n <= n_past): rows past n are never read.  A sliding-window layer's
 * ring may no longer hold the window before n (sl_kv_check): then -EINVAL with the reason in
 * c->err and nothing changes (start again from sl_ctx_reset). */
int  sl_ctx_rewind(sl_ctx *c, int n);


/* Run tokens[0..n) at positions n_past.. through the model, in batches of n_batch.  On success
 * c->logits holds the logits after the last token (with logits_all: after each token of the last
 * batch, n_logits rows; a row's bits do not depend on the batch it was computed in) and n_past
 * advances by n.  0 or -errno, with the
 * message in c->err (-ENOSPC: context full; -ECANCELED: *cancel was set; I/O errors from the source). */
int  sl_eval(sl_ctx *c, const int32_t *tokens, int n);

/* One sequence's share of a multi-sequence pass. */
typedef struct sl_seq_span {
    sl_ctx *seq;            /* the sequence: its KV cache and n_past (the span's tokens go at n_past..) */
    const int32_t *tokens;
    int n;                  /* tokens of this sequence in the pass (>= 1) */
    bool logits_all;        /* logits of every token of the span (verifying drafted tokens), else the last */
    int logits_row;         /* out: the span's first row in work->logits */
} sl_seq_span;

/* One forward pass over the tokens of several sequences (continuous batching: one sequence's next
 * token beside a chunk of another's prompt): every block's weights are touched once for all of
 * them; attention reads each sequence's own cache.  `work` holds the scratch (its n_batch >= all
 * the spans' tokens, logits rows >= those asked for, n_ctx >= every sequence's); each span's
 * sequence (a context, usually made with n_batch 1) holds the KV cache and n_past, which advances
 * by the span's n on success.  A sequence's logits depend only on its own tokens: not on the other
 * spans nor on how its tokens were split into passes (the kernels keep rows independent).
 * 0 or -errno with the message in work->err; on failure no sequence advances (rows written past a
 * sequence's n_past are never read). */
int  sl_eval_seqs(sl_ctx *work, sl_seq_span *spans, int n_spans);

#endif
