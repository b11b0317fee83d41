/* runtime/plan/plan_alt.c — the same model in a smaller file type: what it would stream per token
 * and how fast it would decode under the same budget, by the planner's own model.
 *
 * Under a budget decode speed is about disk rate ÷ bytes streamed per token, so a smaller file is
 * directly faster, and a user choosing a download needs that number.  The other file's tensors are
 * those llama-quantize would write for this model (loader/ftype.c, the table sluice-gen writes its
 * files from): the same shapes, each matrix in the type the file type's mix gives it.  That model
 * is planned like a real file (sl_plan_make) with the same request: budget, context, batch, disk
 * rate and per-type compute rates (sl_plan_alt_rates measures the types this file lacks).  Only the
 * metadata size is this file's, a few bytes off the other file's.
 */
#include <stdlib.h>
#include <string.h>

#include "loader/ftype.h"
#include "runtime/plan/planner.h"

/* llama.cpp's role of each block slot (a fused attn_qkv fills Q, K and V: sl_plan_model.fused_qkv). */
static const int ROLE_OF_SLOT[SL_BLOCK_MATS] = {
    [SL_MAT_Q] = SL_ROLE_ATTN_Q, [SL_MAT_K] = SL_ROLE_ATTN_K, [SL_MAT_V] = SL_ROLE_ATTN_V,
    [SL_MAT_O] = SL_ROLE_ATTN_OUTPUT, [SL_MAT_GATE] = SL_ROLE_FFN_GATE, [SL_MAT_UP] = SL_ROLE_FFN_UP,
    [SL_MAT_DOWN] = SL_ROLE_FFN_DOWN,
};

/* Contract: *rb and *bytes of a matrix of `rows` rows of `cols` elements in the type ftype gives role
 * in block layer; its type in *type.  false when the row does not split into that type's blocks. */
static bool retype(int ftype, const sl_ftype_model *fm, int role, int layer, int64_t cols, uint64_t rows, int *type,
                   uint64_t *rb, uint64_t *bytes)
{
    *type = sl_ftype_tensor_type(ftype, fm, role, layer, cols);
    *rb = sl_row_bytes(*type, cols);
    *bytes = *rb * rows;
    return *rb > 0;
}

/* Contract: elements per row of a `type` row of row_bytes bytes (0 for an unknown type). */
static int64_t cols_of(int type, uint64_t row_bytes)
{
    const sl_type_info *ti = sl_type_get(type);
    return ti && ti->bytes ? (int64_t)(row_bytes / (uint64_t)ti->bytes) * ti->blck : 0;
}

/* Contract: see planner.h. */
bool sl_plan_model_as(const sl_plan_model *pm, int ftype, sl_plan_model *out)
{
    const sl_config *c = &pm->cfg;
    if (!sl_ftype_get(ftype) || c->n_layers < 1 || c->n_layers > SL_PLAN_MAX_LAYERS || !pm->embd_row_bytes) return false;
    /* the file-type mixes of loader/ftype.c have no rows for routed experts or shared experts yet:
     * a mixture-of-experts model gets no smaller-file alternatives rather than wrong sizes */
    if (c->n_expert) return false;
    *out = *pm;
    const sl_ftype_model fm = { c->n_layers, c->n_heads, c->n_kv_heads, pm->tied };
    uint64_t was = pm->embd_bytes + (pm->tied ? 0 : pm->lm_head_bytes), now = 0;
    for (int l = 0; l < c->n_layers; l++)
        for (int i = 0; i < SL_BLOCK_MATS; i++) {
            const uint64_t rb0 = pm->tensor_row_bytes[l][i];
            if (!pm->tensor_bytes[l][i] || !rb0) continue;
            const int role = pm->fused_qkv && i <= SL_MAT_V ? SL_ROLE_ATTN_QKV : ROLE_OF_SLOT[i];
            if (!retype(ftype, &fm, role, l, cols_of(pm->tensor_type[l][i], rb0), pm->tensor_bytes[l][i] / rb0,
                        &out->tensor_type[l][i], &out->tensor_row_bytes[l][i], &out->tensor_bytes[l][i]))
                return false;
            was += pm->tensor_bytes[l][i];
            now += out->tensor_bytes[l][i];
        }
    int et;
    if (!retype(ftype, &fm, SL_ROLE_TOKEN_EMBD, -1, c->dim, pm->embd_bytes / pm->embd_row_bytes, &et,
                &out->embd_row_bytes, &out->embd_bytes))
        return false;
    now += out->embd_bytes;
    if (pm->tied) {   /* the LM head is the embedding table */
        out->lm_head_type = et;
        out->lm_head_row_bytes = out->embd_row_bytes;
        out->lm_head_bytes = out->embd_bytes;
    } else if (pm->lm_head_row_bytes) {
        if (!retype(ftype, &fm, SL_ROLE_OUTPUT, -1, c->dim, pm->lm_head_bytes / pm->lm_head_row_bytes, &out->lm_head_type,
                    &out->lm_head_row_bytes, &out->lm_head_bytes))
            return false;
        now += out->lm_head_bytes;
    }
    out->file_bytes = pm->file_bytes - was + now;
    return true;
}

/* Contract: see planner.h. */
void sl_plan_alt_bytes_by_type(const sl_plan_model *pm, uint64_t bytes[SL_TYPE_COUNT])
{
    memset(bytes, 0, SL_TYPE_COUNT * sizeof *bytes);
    sl_plan_model *alt = malloc(sizeof *alt);
    if (!alt) return;
    for (int k = 0; k < sl_n_ftypes; k++) {
        if (!sl_plan_model_as(pm, sl_ftypes[k].ftype, alt) || alt->file_bytes >= pm->file_bytes) continue;
        for (int l = 0; l < alt->cfg.n_layers; l++)
            for (int i = 0; i < SL_BLOCK_MATS; i++)
                if (alt->tensor_bytes[l][i]) bytes[alt->tensor_type[l][i]] += alt->tensor_bytes[l][i];
        bytes[alt->lm_head_type] += alt->lm_head_bytes;
    }
    free(alt);
}

/* Contract: see planner.h. */
int sl_plan_alternatives(const sl_plan_model *pm, const sl_plan_req *req, sl_plan_alt *out, int max)
{
    sl_plan_model *alt = malloc(sizeof *alt);
    sl_plan *p = malloc(sizeof *p);
    int n = 0;
    for (int k = 0; alt && p && k < sl_n_ftypes && n < max; k++) {
        /* "smaller": by more than the metadata and rounding a same-type file could differ by */
        if (!sl_plan_model_as(pm, sl_ftypes[k].ftype, alt) || alt->file_bytes >= pm->file_bytes / 100 * 99) continue;
        sl_plan_alt *a = &out[n++];
        memset(a, 0, sizeof *a);
        a->ftype = sl_ftypes[k].ftype;
        a->name = sl_ftypes[k].name;
        a->file_bytes = alt->file_bytes;
        if (sl_plan_make(alt, req, p) == 0) {
            a->feasible = true;
            a->all_resident = p->all_resident;
            a->stream_bytes = p->stream_bytes;
            a->read_per_token = p->read_per_token;
            a->pred_tok_s = p->pred_tok_s;
        }
    }
    free(alt);
    free(p);
    return n;
}
