/* runtime/engine/arch.c — the table of architecture descriptions (see arch.h). */
#include "runtime/engine/arch.h"

#include <stdio.h>

#include "runtime/engine/model.h"

static const sl_arch *const g_archs[] = {
    &sl_arch_llama,
    &sl_arch_qwen2,
    &sl_arch_qwen3,
    &sl_arch_phi3,
    &sl_arch_gemma2,
    &sl_arch_gemma3,
    &sl_arch_qwen3moe,
    &sl_arch_qwen2moe,
    &sl_arch_gpt_oss,
};

#define N_ARCHS (sizeof g_archs / sizeof *g_archs)

/* Contract: the description whose name equals `name` byte for byte, or NULL. */
const sl_arch *sl_arch_find(sl_str name)
{
    for (size_t i = 0; i < N_ARCHS; i++)
        if (sl_str_eq(name, g_archs[i]->name)) return g_archs[i];
    return NULL;
}

/* Contract: a static string naming every description, space-separated, built once. */
const char *sl_arch_supported(void)
{
    static char buf[256];
    if (!buf[0]) {
        size_t at = 0;
        for (size_t i = 0; i < N_ARCHS && at + 1 < sizeof buf; i++) {
            const char *s = g_archs[i]->name;
            if (i) buf[at++] = ' ';
            while (*s && at + 1 < sizeof buf) buf[at++] = *s++;
        }
        buf[at] = 0;
    }
    return buf;
}

/* Contract (arch.h): what the model's forward pass adds to llama's, for `inspect`. */
void sl_arch_features(const struct sl_model *m, char *buf, size_t len)
{
    const sl_config *c = &m->cfg;
    const sl_layer *L = m->layers;
    size_t at = 0;
#define ADD(...) do { if (at < len) at += (size_t)snprintf(buf + at, len - at, __VA_ARGS__); } while (0)
    ADD("%s rope", m->arch->rope == SL_ROPE_NEOX ? "neox" : "normal");
    if (c->yarn_factor > 0)
        ADD(", YaRN x%g (original context %d, attention factor %.4g)", c->yarn_factor, c->rope_ctx_orig, c->rope_mscale);
    else if (m->rope_freqs) ADD(", rope_freqs factors");
    if (m->rope_long) ADD(", longrope factors (long past %d positions, attention factor %g)", c->rope_ctx_orig, c->rope_mscale);
    if (c->rope_scale != 1.0f) ADD(", linear rope scaling x%g", 1.0 / c->rope_scale);
    ADD(", %s %s", m->arch->act == SL_ACT_GELU_TANH ? "GELU(tanh)" : m->arch->act == SL_ACT_SWIGLU_OAI ? "clamped SwiGLU" : "SwiGLU",
        c->n_expert ? "experts" : "FFN");
    for (int i = 0; i < m->arch->n_mats; i++)
        if (m->arch->mats[i].fused) ADD(", fused %s", m->arch->mats[i].fused == SL_FUSED_QKV ? "qkv" : "gate|up");
    if (L && L->vec[SL_VEC_Q_BIAS]) ADD(", q/k/v%s biases", L->vec[SL_VEC_O_BIAS] ? "/o" : "");
    if (L && L->vec[SL_VEC_ATTN_SINKS]) ADD(", attention sinks");
    if (L && L->vec[SL_VEC_Q_NORM]) ADD(", per-head q/k norms");
    if (L && L->vec[SL_VEC_POST_ATTN_NORM]) ADD(", post-attention/FFN norms");
    if (c->embd_scale) ADD(", embedding x%g", c->embd_scale);
    if (c->n_swa && c->swa_layers == SL_SWA_LAYERS && L) {
        int local = 0;
        for (int l = 0; l < c->n_layers; l++) local += m->layers[l].window > 0;
        ADD(", sliding window %d on %d of %d blocks (rope base %g there, %g with scaling x%g on the others)", c->n_swa,
            local, c->n_layers, local ? m->layers[0].rope_base : c->rope_base, c->rope_base, 1.0 / c->rope_scale);
    } else if (c->n_swa && c->swa_layers != SL_SWA_NONE)
        ADD(", sliding window %d (%s)", c->n_swa, c->swa_layers == SL_SWA_ALL ? "every block" : "even blocks");
    if (c->attn_softcap) ADD(", attention softcap %g", c->attn_softcap);
    if (c->n_expert)
        ADD(", %d routed experts (%d per token, %s)%s", c->n_expert, c->n_expert_used,
            m->arch->gating == SL_GATE_SOFTMAX_NORM ? "weights renormalised"
            : m->arch->gating == SL_GATE_TOPK_SOFTMAX ? "softmax over the chosen, router bias, expert biases" : "softmax weights",
            L && L->vec[SL_VEC_SHEXP_GATE] ? " + gated shared expert" : "");
    if (c->final_softcap) ADD(", final softcap %g", c->final_softcap);
#undef ADD
}
