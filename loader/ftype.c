/* loader/ftype.c — llama.cpp file types and llama-quantize's per-tensor type mix (see ftype.h).
 *
 * The rules are llama.cpp's llama_tensor_get_type (src/llama-quant.cpp) for the file types below,
 * read as facts: the same choices, written from their description.  One deliberate difference: a
 * fused attn_qkv (phi3) follows llama.cpp's own attn_qkv rule (Q3_K_M: Q4_K, Q4_K_M: Q5_K, Q5_K_M:
 * Q6_K), as the public Phi-3 files have it, where newer llama.cpp versions send it down the attn_v
 * branch.  The micro-llama files and the micro MoE files (qwen3moe, Mixtral, qwen2moe) llama-quantize
 * made (../shared/models) check the table in tests/test_gen.c.
 */
#include "loader/ftype.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "kernels/types.h"

/* Largest first (bytes per weight of the main type, then the extras each mix adds). */
const sl_ftype_info sl_ftypes[] = {
    { SL_FTYPE_F16, "F16", SL_TYPE_F16 },         { SL_FTYPE_Q8_0, "Q8_0", SL_TYPE_Q8_0 },
    { SL_FTYPE_Q6_K, "Q6_K", SL_TYPE_Q6_K },      { SL_FTYPE_Q5_K_M, "Q5_K_M", SL_TYPE_Q5_K },
    { SL_FTYPE_Q4_K_M, "Q4_K_M", SL_TYPE_Q4_K },  { SL_FTYPE_Q4_0, "Q4_0", SL_TYPE_Q4_0 },
    { SL_FTYPE_MXFP4_MOE, "MXFP4_MOE", SL_TYPE_MXFP4 },
    { SL_FTYPE_IQ4_XS, "IQ4_XS", SL_TYPE_IQ4_XS }, { SL_FTYPE_Q3_K_M, "Q3_K_M", SL_TYPE_Q3_K },
    { SL_FTYPE_Q2_K, "Q2_K", SL_TYPE_Q2_K },
};
const int sl_n_ftypes = (int)(sizeof sl_ftypes / sizeof sl_ftypes[0]);

/* Contract: the table entry for a general.file_type number, NULL for others. */
const sl_ftype_info *sl_ftype_get(int ftype)
{
    for (int i = 0; i < sl_n_ftypes; i++)
        if (sl_ftypes[i].ftype == ftype) return &sl_ftypes[i];
    return NULL;
}

/* Contract: the table entry named `name`, NULL for others (and for NULL). */
const sl_ftype_info *sl_ftype_by_name(const char *name)
{
    for (int i = 0; name && i < sl_n_ftypes; i++)
        if (!strcmp(sl_ftypes[i].name, name)) return &sl_ftypes[i];
    return NULL;
}

static char g_names[128];

static void build_names(void)
{
    size_t at = 0;
    for (int i = 0; i < sl_n_ftypes && at < sizeof g_names; i++)
        at += (size_t)snprintf(g_names + at, sizeof g_names - at, "%s%s", i ? " " : "", sl_ftypes[i].name);
}

/* Contract: see ftype.h (built from the table once). */
const char *sl_ftype_names(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, build_names);
    return g_names;
}

/* llama.cpp's use_more_bits(): the blocks Q4_K_M and Q5_K_M give Q6_K for attn_v and ffn_down. */
static bool more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static int blck(int type)
{
    const sl_type_info *t = sl_type_get(type);
    return t ? t->blck : 1;
}

/* llama-quantize's fallback for a row length the chosen type's blocks do not divide: a type with
 * blocks of 32 of about the same size, else F16. */
static int fallback(int type, int64_t ne0)
{
    if (ne0 % blck(type) == 0) return type;
    int r = SL_TYPE_F16;
    switch (type) {
    case SL_TYPE_IQ4_XS: r = SL_TYPE_IQ4_NL; break;
    case SL_TYPE_Q2_K: case SL_TYPE_Q3_K: r = SL_TYPE_Q4_0; break;
    case SL_TYPE_Q4_K: r = SL_TYPE_Q5_0; break;
    case SL_TYPE_Q5_K: r = SL_TYPE_Q5_1; break;
    case SL_TYPE_Q6_K: r = SL_TYPE_Q8_0; break;
    default: break;
    }
    return ne0 % blck(r) == 0 ? r : SL_TYPE_F16;
}

/* The attn_v rule: GQA models keep more bits in the (smaller) V projection; 8-expert models
 * (Mixtral) Q8_0 whatever the file type ("trades just ~128MB", llama.cpp says). */
static int attn_v_type(int ftype, int t, int layer, int n, int gqa, int n_expert)
{
    if (n_expert == 8) return SL_TYPE_Q8_0;
    switch (ftype) {
    case SL_FTYPE_Q2_K: return gqa >= 4 ? SL_TYPE_Q4_K : SL_TYPE_Q3_K;
    case SL_FTYPE_Q3_K_M: return layer < 2 ? SL_TYPE_Q5_K : SL_TYPE_Q4_K;
    case SL_FTYPE_IQ4_XS: return gqa >= 4 ? SL_TYPE_Q5_K : t;
    case SL_FTYPE_Q4_K_M: case SL_FTYPE_Q5_K_M: return more_bits(layer, n) ? SL_TYPE_Q6_K : t;
    default: return t;
    }
}

/* The ffn_down rule.  IQ4_XS as made with an importance matrix, as IQ4_XS files are (the public
 * Meta-Llama-3-8B one is 4.45 GB, which this mix gives; without one llama-quantize would make
 * ffn_down of the first L/8 blocks Q5_K, 0.8% more). */
static int ffn_down_type(int ftype, int t, int layer, int n)
{
    switch (ftype) {
    case SL_FTYPE_Q2_K: return SL_TYPE_Q3_K;
    case SL_FTYPE_Q3_K_M: return layer < n / 16 ? SL_TYPE_Q5_K : SL_TYPE_Q4_K;
    case SL_FTYPE_Q4_K_M: case SL_FTYPE_Q5_K_M: return more_bits(layer, n) ? SL_TYPE_Q6_K : t;
    default: return t;
    }
}

/* Contract: see ftype.h. */
int sl_ftype_tensor_type(int ftype, const sl_ftype_model *m, int role, int layer, int64_t ne0)
{
    return sl_ftype_tensor_type_moe(ftype, m, 0, role, layer, ne0);
}

/* Contract: see ftype.h.  Expert stacks and shared experts need no rule of their own: llama.cpp
 * tells tensors apart by name substrings ("ffn_down" matches ffn_down_exps), and its MoE layer index
 * is the block number, as for dense models; only 8-expert models get extra rules. */
int sl_ftype_tensor_type_moe(int ftype, const sl_ftype_model *m, int n_expert, int role, int layer, int64_t ne0)
{
    const sl_ftype_info *fi = sl_ftype_get(ftype);
    const bool stack = role & SL_ROLE_EXPS;
    role &= ~SL_ROLE_EXPS;
    if (!fi) return -1;
    if (role == SL_ROLE_OTHER) return SL_TYPE_F32;
    /* MXFP4_MOE (llama-quantize): expert stacks MXFP4, every other matrix (output included) Q8_0 */
    if (ftype == SL_FTYPE_MXFP4_MOE)
        return n_expert ? fallback(stack && n_expert > 1 ? SL_TYPE_MXFP4 : SL_TYPE_Q8_0, ne0) : -1;
    int t = fi->base_type;
    if (t == SL_TYPE_F16) return t;   /* not a quantized type: every matrix as it is */
    const int n = m->n_layers, gqa = m->n_kv_heads > 0 ? m->n_heads / m->n_kv_heads : 1;
    if (role == SL_ROLE_OUTPUT || (m->tied && role == SL_ROLE_TOKEN_EMBD)) {
        /* the LM head: Q6_K (Q8_0 stays Q8_0), Q8_0 when rows do not split into the main type's blocks */
        if (ne0 % blck(t)) t = SL_TYPE_Q8_0;
        else if (t != SL_TYPE_Q8_0) t = SL_TYPE_Q6_K;
        return fallback(t, ne0);
    }
    switch (role) {
    case SL_ROLE_ATTN_V: t = attn_v_type(ftype, t, layer, n, gqa, n_expert); break;
    case SL_ROLE_ATTN_K: if (n_expert == 8) t = SL_TYPE_Q8_0; break;
    case SL_ROLE_FFN_DOWN: t = ffn_down_type(ftype, t, layer, n); break;
    case SL_ROLE_ATTN_QKV:
        if (ftype == SL_FTYPE_Q3_K_M) t = SL_TYPE_Q4_K;
        else if (ftype == SL_FTYPE_Q4_K_M) t = SL_TYPE_Q5_K;
        else if (ftype == SL_FTYPE_Q5_K_M) t = SL_TYPE_Q6_K;
        break;
    case SL_ROLE_ATTN_OUTPUT:
        if (n_expert == 8) {   /* the 8-expert rule replaces the dense one for these file types */
            if (ftype == SL_FTYPE_Q2_K || ftype == SL_FTYPE_Q3_K_M || ftype == SL_FTYPE_Q4_K_M || ftype == SL_FTYPE_IQ4_XS)
                t = SL_TYPE_Q5_K;
        } else if (ftype == SL_FTYPE_Q2_K) t = SL_TYPE_Q3_K;
        else if (ftype == SL_FTYPE_Q3_K_M) t = SL_TYPE_Q4_K;
        break;
    default: break;
    }
    return fallback(t, ne0);
}
