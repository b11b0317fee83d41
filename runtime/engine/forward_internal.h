/* runtime/engine/forward_internal.h — the pieces of the forward pass (forward.c) that its other
 * sub-blocks (moe.c) use.  Not part of the engine's interface. */
#ifndef SL_RUNTIME_FORWARD_INTERNAL_H
#define SL_RUNTIME_FORWARD_INTERNAL_H

#include "runtime/engine/forward.h"

/* out[b][r] = w[r] . x[b] for the nb rows of x (row length w->cols) and every row r of w, from the
 * resident copy or through the attached source.  0 or -errno with c->err set. */
int  sl_fwd_matmul(sl_ctx *c, const sl_weight *w, const float *x, int nb, float *out, int64_t stride);
/* c->xb[b] = rmsnorm(c->x[b]) * w for the nb positions of the batch. */
void sl_fwd_norm(sl_ctx *c, const float *w, int nb);
/* The mixture-of-experts FFN of block l over the batch (moe.c): x += experts(rmsnorm(x) * ffn_norm).
 * 0 or -errno with c->err set. */
int  sl_moe_ffn(sl_ctx *c, int l, int nb);

#endif
