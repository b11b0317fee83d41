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
} sl_wsource;

typedef struct sl_ctx_params {
    int n_ctx;              /* positions in the KV cache */
    int n_batch;            /* max positions per forward batch */
    int kv_type;            /* enum sl_kv_type (runtime/engine/kvcache.h) */
    const char *kv_spill_dir;   /* non-NULL: spill the KV cache to a file in this directory */
    int  logits_max;        /* keep the logits of the last logits_max positions of a batch (0, 1: the
                             * last only); verifying k drafted tokens needs k + 1 */
} sl_ctx_params;

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
    float *hb, *hb2;        /* (n_batch, ffn_dim) */
    float *att;             /* (n_threads, grp*n_ctx + head_dim) attention scores + q8_0 head row */
    float *logits;          /* (n_logits, vocab): the last n_logits positions of the last batch, row b
                             * = position n_past - n_logits + b (n_logits = 1: the last position) */
    int n_logits;           /* rows in logits after the last evaluation */
    int logits_max;
    size_t mem_bytes;       /* heap held by this context (KV + scratch) */
    volatile sig_atomic_t *cancel;   /* when set to non-zero, evaluation stops with -ECANCELED */
    char err[256];
} sl_ctx;

/* Bytes a context with these parameters will allocate (for planning). */
size_t sl_ctx_bytes(const sl_config *c, const sl_ctx_params *p, int n_threads);

int  sl_ctx_create(sl_model *m, const sl_ctx_params *p, sl_pool *pool, sl_ctx **out, char *err, size_t errlen);
void sl_ctx_free(sl_ctx *c);
void sl_ctx_reset(sl_ctx *c);   /* forget the cache (n_past = 0) */

/* Run tokens[0..n) at positions n_past.. through the model, in batches of n_batch.  On success
 * c->logits holds the logits after the last token (with logits_max > 1: after each of the last
 * n_logits tokens of the last batch; a row's bits do not depend on the batch it was computed in) and n_past
 * advances by n.  0 or -errno, with the
 * message in c->err (-ENOSPC: context full; -ECANCELED: *cancel was set; I/O errors from the source). */
int  sl_eval(sl_ctx *c, const int32_t *tokens, int n);

#endif
