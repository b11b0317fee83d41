/* kernels/ops.c — norms, rotary embedding, softmax, SwiGLU (the matrix products are in matmul.c). */
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
