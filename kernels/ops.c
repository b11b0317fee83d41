/* kernels/ops.c — norms, rotary embedding, softmax, SwiGLU (the matrix products are in matmul.c). */
#include "kernels/ops.h"

#include <math.h>
#include <string.h>

#include "kernels/simd.h"
#include "kernels/types.h"

void sl_rmsnorm(float *out, const float *x, const float *w, int n, float eps)
{
    /* accumulate the mean square in double: it is one pass over n floats and removes the
     * summation-order question from comparisons with the float64 reference */
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float scale = (float)(1.0 / sqrt(ss / n + eps));
    for (int i = 0; i < n; i++) out[i] = x[i] * scale * w[i];
}

void sl_rope(float *x, int n_heads, int head_dim, int rot_dim, int pos, float base, float pos_scale)
{
    for (int i = 0; i < rot_dim / 2; i++) {
        double theta = (double)pos * pos_scale * pow((double)base, -2.0 * i / rot_dim);
        float c = (float)cos(theta), s = (float)sin(theta);
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (size_t)h * head_dim + 2 * i;
            float a = v[0], b = v[1];
            v[0] = a * c - b * s;
            v[1] = a * s + b * c;
        }
    }
}

void sl_softmax(float *x, int n)
{
    float mx = x[0];
    for (int i = 1; i < n; i++) if (x[i] > mx) mx = x[i];
    double sum = 0;
    for (int i = 0; i < n; i++) { x[i] = expf(x[i] - mx); sum += x[i]; }
    float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

void sl_swiglu(float *gate, const float *up, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

/* Contract: see ops.h.  Scores and the weighted sum use the active path's attention dots (adot) and
 * axpy, which give the same bits on every path (SIMD where the CPU has it); Q8_0 rows use the
 * reference dot and a dequantized row in tmp.
 * Position-outer, head-inner: each K/V row is fetched from memory once for the nq query heads that
 * share it (GQA) and then hit in L1 — at long context the cache rows, not the arithmetic, are the
 * cost (measured 4096 positions: 8 heads reading their rows separately ran ~60 ns per row). */
void sl_attn_heads(const float *q, int nq, const void *k, const void *v, int type, size_t stride, int n, int hd,
                   float scale, float *att, float *tmp, float *out)
{
    sl_attn_heads_capped(q, nq, k, v, type, stride, n, hd, scale, 0.0f, att, tmp, out);
}

/* Contract: see ops.h.  One body for capped and plain attention (a zero cap skips the one step). */
/* Contract: see ops.h.  The sink takes part in the maximum and the denominator only. */
void sl_softmax_sink(float *x, int n, float sink)
{
    float mx = sink;
    for (int i = 0; i < n; i++) if (x[i] > mx) mx = x[i];
    double sum = expf(sink - mx);
    for (int i = 0; i < n; i++) { x[i] = expf(x[i] - mx); sum += x[i]; }
    float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

void sl_swiglu_oai(float *gate, const float *up, size_t n)
{
    const float alpha = 1.702f, limit = 7.0f;
    for (size_t i = 0; i < n; i++) {
        float g = gate[i] < limit ? gate[i] : limit;
        float u = up[i] < -limit ? -limit : up[i] > limit ? limit : up[i];
        gate[i] = g / (1.0f + expf(-alpha * g)) * (u + 1.0f);
    }
}

void sl_attn_heads_capped(const float *q, int nq, const void *k, const void *v, int type, size_t stride, int n, int hd,
                          float scale, float softcap, float *att, float *tmp, float *out)
{
    sl_attn_heads_sinks(q, nq, k, v, type, stride, n, hd, scale, softcap, NULL, att, tmp, out);
}

void sl_attn_heads_sinks(const float *q, int nq, const void *k, const void *v, int type, size_t stride, int n, int hd,
                         float scale, float softcap, const float *sinks, float *att, float *tmp, float *out)
{
    sl_attn_heads_ring(q, nq, k, v, type, stride, n, 0, n, hd, scale, softcap, sinks, att, tmp, out);
}

/* Contract: see ops.h.  Position t (0..n) is row first + t, less ring once it passes the end. */
void sl_attn_heads_ring(const float *q, int nq, const void *k, const void *v, int type, size_t stride, int ring, int first,
                        int n, int hd, float scale, float softcap, const float *sinks, float *att, float *tmp, float *out)
{
    const sl_kernel_set *ks = sl_kernels();
    const unsigned char *kb = k, *vb = v;
    for (int t = 0, r = first; t < n; t++, r = r + 1 == ring ? 0 : r + 1) {
        const unsigned char *row = kb + (size_t)r * stride;
        for (int h = 0; h < nq; h++) {
            const float *qh = q + (size_t)h * hd;
            /* adot, not dot_f16/dot_f32: the weight-row dots may sum in another order per path
             * (simd.h); scores must not, or logits depend on the CPU */
            const float s = type == SL_TYPE_F16 ? ks->adot_f16(row, qh, hd)
                          : type == SL_TYPE_F32 ? ks->adot_f32(row, qh, hd) : sl_dot_q8_0(row, qh, hd);
            att[(size_t)h * n + t] = s * scale;
        }
    }
    if (softcap > 0) sl_softcap(att, (size_t)nq * (size_t)n, softcap);
    for (int h = 0; h < nq; h++)
        if (sinks) sl_softmax_sink(att + (size_t)h * n, n, sinks[h]);
        else sl_softmax(att + (size_t)h * n, n);
    memset(out, 0, (size_t)nq * hd * sizeof *out);
    for (int t = 0, r = first; t < n; t++, r = r + 1 == ring ? 0 : r + 1) {
        const unsigned char *row = vb + (size_t)r * stride;
        if (type == SL_TYPE_Q8_0) sl_dequant_q8_0(row, tmp, hd);
        for (int h = 0; h < nq; h++) {
            const float a = att[(size_t)h * n + t];
            float *o = out + (size_t)h * hd;
            if (type == SL_TYPE_F16) ks->axpy_f16(o, a, (const uint16_t *)row, hd);
            else ks->axpy_f32(o, a, type == SL_TYPE_F32 ? (const float *)row : tmp, hd);
        }
    }
}

void sl_rope_ext(float *x, int n_heads, int head_dim, int rot_dim, int pos, float base, float pos_scale,
                 const float *freq_div, float mscale, bool neox)
{
    const int half = rot_dim / 2;
    for (int i = 0; i < half; i++) {
        double theta = (double)pos * pos_scale * pow((double)base, -2.0 * i / rot_dim);
        if (freq_div) theta /= freq_div[i];
        float c = (float)cos(theta) * mscale, s = (float)sin(theta) * mscale;
        const int i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (size_t)h * head_dim;
            float a = v[i0], b = v[i1];
            v[i0] = a * c - b * s;
            v[i1] = a * s + b * c;
        }
    }
}

void sl_geglu(float *gate, const float *up, size_t n)
{
    const float sqrt_2_over_pi = 0.79788456080286535588f, coef_a = 0.044715f;
    for (size_t i = 0; i < n; i++) {
        float u = gate[i];
        gate[i] = 0.5f * u * (1.0f + tanhf(sqrt_2_over_pi * u * (1.0f + coef_a * u * u))) * up[i];
    }
}

void sl_softcap(float *x, size_t n, float cap)
{
    const float inv = 1.0f / cap;
    for (size_t i = 0; i < n; i++) x[i] = cap * tanhf(x[i] * inv);
}
