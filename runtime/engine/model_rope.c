/* runtime/engine/model_rope.c — how a file's rope keys become sl_config (split from model.c: the
 * rope scaling families llama.cpp reads — linear, longrope's attention factor, YaRN). */
#include "runtime/engine/model_rope.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "loader/errmsg.h"

/* longrope's keys (llama_model::load_hparams reads them for every architecture): the cos/sin
 * multiplier rope.scaling.attn_factor (default 1) and rope.scaling.original_context_length (default
 * the training context), the length past which rope_factors_long applies. */
static int read_rope_attn(const sl_gguf *g, const char *a, sl_config *c, char *err, size_t errlen)
{
    char key[96];
    c->rope_mscale = 1.0f;
    int rc = sl_arch_get_f32(g, a, "rope.scaling.attn_factor", &c->rope_mscale, err, errlen);
    if (rc) return rc;
    if (!(c->rope_mscale > 0) || c->rope_mscale > 100) {
        snprintf(err, errlen, "model: %s.rope.scaling.attn_factor = %g is out of range (0, 100]", a, c->rope_mscale);
        return -EINVAL;
    }
    uint32_t orig = (uint32_t)c->ctx_train;
    snprintf(key, sizeof key, "%s.rope.scaling.original_context_length", a);
    if (sl_gguf_find_key(g, key) >= 0 && (!sl_gguf_get_u32(g, key, &orig) || orig < 1 || orig > (1u << 24))) {
        snprintf(err, errlen, "model: %s must be a count of positions in [1, 2^24]", key);
        return -EINVAL;
    }
    c->rope_ctx_orig = (int)orig;
    return 0;
}

/* YaRN (gpt-oss; ../shared/README.md "Set 5"): rope.scaling.factor (required, > 1 makes sense but any
 * > 0 is taken), yarn_beta_fast (default 32) and yarn_beta_slow (default 1); the positions are not
 * scaled (the interpolation is per pair, sl_model_open's divisors), cos and sin are multiplied by
 * attn_factor * (1 + 0.1 ln factor). */
static int read_yarn(const sl_gguf *g, const char *a, sl_config *c, char *err, size_t errlen)
{
    c->yarn_factor = 0;
    c->yarn_beta_fast = 32.0f;
    c->yarn_beta_slow = 1.0f;
    int rc;
    if ((rc = sl_arch_get_f32(g, a, "rope.scaling.factor", &c->yarn_factor, err, errlen)) ||
        (rc = sl_arch_get_f32(g, a, "rope.scaling.yarn_beta_fast", &c->yarn_beta_fast, err, errlen)) ||
        (rc = sl_arch_get_f32(g, a, "rope.scaling.yarn_beta_slow", &c->yarn_beta_slow, err, errlen)))
        return rc;
    if (!(c->yarn_factor > 0) || c->yarn_factor > 1e6f || !(c->yarn_beta_fast > 0) || !(c->yarn_beta_slow > 0)) {
        snprintf(err, errlen, "model: %s.rope.scaling: yarn needs factor > 0 and betas > 0 (factor %g, beta_fast %g, "
                 "beta_slow %g)", a, c->yarn_factor, c->yarn_beta_fast, c->yarn_beta_slow);
        return -EINVAL;
    }
    c->rope_mscale *= 1.0f + 0.1f * logf(c->yarn_factor);
    return 0;
}

/* YaRN's per-pair divisors (ggml rope_yarn, llama.cpp's corr dims):  theta_i = p base^(-2i/n) / div_i
 * with div_i = 1 / (ramp_i + (1 - ramp_i) / factor), ramp_i = 1 - clamp((i - lo) / max(0.001, hi - lo),
 * 0, 1), lo = max(0, floor(d(beta_fast))), hi = min(n - 1, ceil(d(beta_slow))),
 * d(b) = n ln(n_ctx_orig / (2 pi b)) / (2 ln base).  NULL when out of memory. */
float *sl_model_yarn_divisors(const sl_config *c)
{
    const int n = c->rope_dim, half = n / 2;
    float *d = malloc((size_t)half * sizeof *d);
    if (!d) return NULL;
    const double pi = 3.14159265358979323846, lb = 2 * log((double)c->rope_base);
    double lo = floor(n * log(c->rope_ctx_orig / (2 * pi * c->yarn_beta_fast)) / lb);
    double hi = ceil(n * log(c->rope_ctx_orig / (2 * pi * c->yarn_beta_slow)) / lb);
    lo = lo > 0 ? lo : 0;
    hi = hi < n - 1 ? hi : n - 1;
    for (int i = 0; i < half; i++) {
        double y = (i - lo) / (hi - lo > 0.001 ? hi - lo : 0.001);
        double ramp = 1 - (y < 0 ? 0 : y > 1 ? 1 : y);
        d[i] = (float)(1.0 / (ramp + (1 - ramp) / c->yarn_factor));
    }
    return d;
}

/* Rope scaling as llama.cpp reads it (llama_model::load_hparams): the type defaults to "linear";
 * the factor is <arch>.rope.scaling.factor, else the legacy <arch>.rope.scale_linear; type "none"
 * never scales; "longrope" (per-pair divisors from rope_factors_long/short.weight, bound later)
 * only where the architecture has those tensors.  Types that change the angles otherwise (yarn) are
 * refused: running them as linear would silently change every logit. */
int sl_model_read_rope_scaling(const sl_gguf *g, const sl_arch *arch, sl_config *c, char *err, size_t errlen)
{
    const char *a = arch->name;
    char key[96];
    c->rope_scale = 1.0f;
    int rc = read_rope_attn(g, a, c, err, errlen);
    if (rc) return rc;
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    sl_str st = { "linear", 6 };
    if (sl_gguf_find_key(g, key) >= 0 && !sl_gguf_get_str(g, key, &st)) {
        snprintf(err, errlen, "model: %s must be a string (none, linear%s)", key, arch->rope_long_short ? ", longrope" : "");
        return -EINVAL;
    }
    bool none = sl_str_eq(st, "none"), longrope = arch->rope_long_short && sl_str_eq(st, "longrope");
    bool yarn = arch->rope_yarn && sl_str_eq(st, "yarn");
    if (!none && !longrope && !yarn && !sl_str_eq(st, "linear")) {
        sl_errf(err, errlen, 0, "model: rope scaling '%.*s' is not supported for %s (supported: none, linear%s)",
                (int)(st.len > 20 ? 20 : st.len), st.ptr, a, arch->rope_long_short ? ", longrope" : arch->rope_yarn ? ", yarn" : "");
        return -ENOTSUP;
    }
    if (yarn) return read_yarn(g, a, c, err, errlen);
    float f = 0;
    const char *fkey = "rope.scaling.factor";
    snprintf(key, sizeof key, "%s.%s", a, fkey);
    if (sl_gguf_find_key(g, key) < 0) fkey = "rope.scale_linear";
    snprintf(key, sizeof key, "%s.%s", a, fkey);
    if (sl_gguf_find_key(g, key) < 0) return 0;
    rc = sl_arch_get_f32(g, a, fkey, &f, err, errlen);
    if (rc) return rc;
    if (!(f > 0)) {
        snprintf(err, errlen, "model: %s = %g: a rope scaling factor must be > 0", key, f);
        return -EINVAL;
    }
    if (!none) c->rope_scale = 1.0f / f;
    return 0;
}

