/* kernels/ops.c — norms, rotary embedding, softmax, SwiGLU, threaded matmul. */
#include "kernels/ops.h"

#include <math.h>

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

void sl_swiglu(float *gate, const float *up, int n)
{
    for (int i = 0; i < n; i++) {
        float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

typedef struct matmul_job {
    const sl_type_info *ti;
    const unsigned char *w;
    int64_t rows, cols;
    size_t row_bytes;
    const float *x;
    int nb;
    float *out;
    int64_t out_stride;
} matmul_job;

static void matmul_worker(void *arg, int ith, int nth)
{
    const matmul_job *j = arg;
    int64_t per = (j->rows + nth - 1) / nth;
    int64_t r0 = per * ith, r1 = r0 + per < j->rows ? r0 + per : j->rows;
    /* Row-outer, batch-inner: each weight row is fetched from memory once per batch.  Every
     * (row, vector) product uses the same dot kernel as the one-vector case, so batched prefill
     * and one-token decode give bit-identical results. */
    for (int64_t r = r0; r < r1; r++) {
        const unsigned char *wr = j->w + (size_t)r * j->row_bytes;
        for (int b = 0; b < j->nb; b++)
            j->out[(size_t)b * j->out_stride + r] = j->ti->dot(wr, j->x + (size_t)b * j->cols, j->cols);
    }
}

void sl_matmul(sl_pool *pool, int type, const void *w, int64_t rows, int64_t cols, size_t row_bytes,
               const float *x, int nb, float *out, int64_t out_stride)
{
    matmul_job j = { sl_type_get(type), w, rows, cols, row_bytes, x, nb, out, out_stride };
    sl_pool_run(pool, matmul_worker, &j);
}
