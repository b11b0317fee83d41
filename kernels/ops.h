/* kernels/ops.h — the float math of a llama block, and threaded matrix products. */
#ifndef SL_KERNELS_OPS_H
#define SL_KERNELS_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/threadpool.h"

/* out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i], i < n.  out may equal x. */
void sl_rmsnorm(float *out, const float *x, const float *w, int n, float eps);

/* Rotary embedding, llama "normal" layout (adjacent pairs (2i, 2i+1) of each head),
 * theta_i = pos * pos_scale * base^(-2i/rot_dim) for i < rot_dim/2; dims past rot_dim are left alone.
 * x holds n_heads heads of head_dim floats. */
void sl_rope(float *x, int n_heads, int head_dim, int rot_dim, int pos, float base, float pos_scale);

/* In-place softmax over x[0..n). */
void sl_softmax(float *x, int n);

/* gate[i] = silu(gate[i]) * up[i]. */
void sl_swiglu(float *gate, const float *up, int n);

/* out[b][r] = dot(row r of W, x[b]) for r in [0, rows), b in [0, nb).
 * W: `rows` rows of `cols` elements of `type`, row stride `row_bytes`; x: nb vectors of `cols`
 * floats (stride cols); out: nb vectors with stride out_stride (so a row-chunk of a larger output
 * can be written in place).  Rows are split across the pool's threads.  For nb > 1 each weight row
 * is dequantized once and dotted with every vector. */
void sl_matmul(sl_pool *pool, int type, const void *w, int64_t rows, int64_t cols, size_t row_bytes,
               const float *x, int nb, float *out, int64_t out_stride);

#endif
