/* kernels/ops.h — the float math of a llama block, and threaded matrix products. */
#ifndef SL_KERNELS_OPS_H
#define SL_KERNELS_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/threadpool.h"

/* out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i], i < n.  out may equal x. */
void sl_rmsnorm(float *out, const float *x, const float *w, int n, float eps);

/* Rotary embedding, llama "normal" layout (adjacent pairs (2i, 2i+1) of each head),
 * theta_i = pos * pos_scale * base^(-2i/rot_dim) for i < rot_dim/2; dims past rot_dim are left alone.
 * x holds n_heads heads of head_dim floats. */
void sl_rope(float *x, int n_heads, int head_dim, int rot_dim, int pos, float base, float pos_scale);

/* In-place softmax over x[0..n). */
void sl_softmax(float *x, int n);

/* Attention of nq query heads that share one kv head (GQA group; nq = 1 without GQA) over n cached
 * positions, for each head h < nq:
 *   att_h[t] = scale * (q_h . K[t]),  att_h = softmax(att_h),  out_h = sum_t att_h[t] * V[t]   (t < n)
 * q: nq heads of hd floats, consecutive; out likewise.  K and V rows hold hd elements of `type`
 * (SL_TYPE_F16, SL_TYPE_F32 or SL_TYPE_Q8_0 with hd a multiple of 32) and sit `stride` bytes apart
 * (k, v point at position 0 of this kv head).  att: scratch of nq*n floats; tmp: hd floats (Q8_0).
 * Uses the SIMD dots/axpy of the active kernel path; out_h depends only on (q_h, K, V, n): not on
 * nq, batching or threads. */
void sl_attn_heads(const float *q, int nq, const void *k, const void *v, int type, size_t stride, int n, int hd,
                   float scale, float *att, float *tmp, float *out);

/* gate[i] = silu(gate[i]) * up[i]. */
void sl_swiglu(float *gate, const float *up, size_t n);

/* out[b][r] = dot(row r of W, x[b]) for r in [0, rows), b in [0, nb).
 * W: `rows` rows of `cols` elements of `type`, row stride `row_bytes`; x: nb vectors of `cols`
 * floats (stride cols); out: nb vectors with stride out_stride (so a row-chunk of a larger output
 * can be written in place).  Rows are split evenly across the pool's threads; each thread walks
 * its rows in tiles (row-outer, batch-inner), so a weight row is read from memory once per call.
 *
 * Fast mode (default): x is quantized once per call (Q8_0 for Q4_0/Q8_0 weights, Q8_K for
 * Q4_K/Q5_K/Q6_K) and rows are dotted with the integer kernels of kernels/simd.h; F32/F16/BF16
 * rows use SIMD f32 dots.  Exact mode (sl_kernels_set_exact): the f32 reference dots of types.h.
 * Either way every (row, vector) result is computed the same way whatever nb, the thread count or
 * the row range of the call, so batched prefill, one-token decode and row-chunked streaming agree
 * bit for bit. */
void sl_matmul(sl_pool *pool, int type, const void *w, int64_t rows, int64_t cols, size_t row_bytes,
               const float *x, int nb, float *out, int64_t out_stride);

/* The two halves of sl_matmul, for a caller that runs one input against a matrix in several row
 * pieces (streaming): prepare quantizes x once (into a buffer owned by the calling thread, valid
 * until that thread's next sl_mm_prepare or sl_matmul), then each piece calls sl_matmul_prepared
 * with `w` pointing at its first row and `out` at that row's output.  Same results as sl_matmul. */
typedef struct sl_mm_input {
    int type;               /* weight type prepared for */
    int nb;
    int64_t cols;
    const float *x;         /* the f32 vectors */
    const void *q;          /* quantized vectors (NULL: rows are dotted with x) */
    size_t q_stride;        /* bytes per quantized vector */
    const void *kernels;    /* the kernel set (and mode) chosen at prepare time */
    bool exact;
} sl_mm_input;

void sl_mm_prepare(sl_pool *pool, int type, const float *x, int nb, int64_t cols, sl_mm_input *in);
/* The SL_SCRATCH_ACT bytes sl_mm_prepare asks for, at most, for nb vectors of `cols` elements in any
 * activation format (Q8_0, Q8_1, Q8_K): what the planner counts for the thread that prepares. */
size_t sl_mm_scratch_bytes(int64_t cols, int nb);
void sl_matmul_prepared(sl_pool *pool, const sl_mm_input *in, const void *w, int64_t rows, size_t row_bytes,
                        float *out, int64_t out_stride);

/* ---- beyond llama (runtime/engine/arch.h) ---------------------------------------------------- */

/* Rotary embedding of either layout, with optional per-pair angle divisors:
 *   theta_i = pos * pos_scale * base^(-2i/rot_dim) / (freq_div ? freq_div[i] : 1),  i < rot_dim/2,
 * rotating (x[2i], x[2i+1]) when neox is false (as sl_rope) or (x[i], x[i + rot_dim/2]) when true
 * (GGML "neox": the two halves of the rotated part of each head).  Dims past rot_dim are left alone.
 * cos and sin are multiplied by mscale (ggml's attn_factor: longrope's attention scaling; 1 = none).
 * With neox false, freq_div NULL and mscale 1 the results are sl_rope's, bit for bit. */
void sl_rope_ext(float *x, int n_heads, int head_dim, int rot_dim, int pos, float base, float pos_scale,
                 const float *freq_div, float mscale, bool neox);

/* gate[i] = gelu(gate[i]) * up[i], gelu in its tanh form 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3))),
 * evaluated in f32 (ggml evaluates it through an f16 table; see ../shared/README.md "gemma2"). */
void sl_geglu(float *gate, const float *up, size_t n);

/* x[i] = cap * tanh(x[i] / cap) (Gemma 2's logit soft-capping), computed as ggml does: the
 * division as a product with 1/cap. */
void sl_softcap(float *x, size_t n, float cap);

/* sl_attn_heads with the scores soft-capped before the softmax (softcap 0: none, exactly
 * sl_attn_heads): att_h[t] = softcap * tanh(scale * (q_h . K[t]) / softcap). */
void sl_attn_heads_capped(const float *q, int nq, const void *k, const void *v, int type, size_t stride, int n, int hd,
                          float scale, float softcap, float *att, float *tmp, float *out);

/* sl_attn_heads_capped with attention sinks (gpt-oss): head h's softmax has one more logit, sinks[h],
 * which has no value row, so its probabilities sum to less than 1:
 *   p_t = exp(s_t - m) / (sum_u exp(s_u - m) + exp(sinks[h] - m)),  m = max(max_u s_u, sinks[h]).
 * sinks NULL: exactly sl_attn_heads_capped. */
void sl_attn_heads_sinks(const float *q, int nq, const void *k, const void *v, int type, size_t stride, int n, int hd,
                         float scale, float softcap, const float *sinks, float *att, float *tmp, float *out);

/* sl_attn_heads_sinks over rows kept in a ring of `ring` rows (a sliding-window layer's KV cache,
 * runtime/engine/kvcache.h): the n positions attended are rows first, first + 1, ... taken mod
 * ring (k and v point at row 0).  The scores, softmax and weighted sum visit the positions in the
 * same order as sl_attn_heads_sinks over the same rows laid out contiguously, so the result is bit
 * for bit the same (first + n <= ring: exactly sl_attn_heads_sinks at row first). */
void sl_attn_heads_ring(const float *q, int nq, const void *k, const void *v, int type, size_t stride, int ring, int first,
                        int n, int hd, float scale, float softcap, const float *sinks, float *att, float *tmp, float *out);

/* x = softmax over the n values and one more logit `sink` that is then dropped (see above). */
void sl_softmax_sink(float *x, int n, float sink);

/* gpt-oss's clamped SwiGLU (llama.cpp swiglu_oai, alpha 1.702 and limit 7 are constants there):
 *   g = min(gate, 7), u = clamp(up, -7, 7), gate[i] = g * sigmoid(1.702 g) * (u + 1). */
void sl_swiglu_oai(float *gate, const float *up, size_t n);

#endif
