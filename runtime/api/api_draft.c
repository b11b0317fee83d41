/* runtime/api/api_draft.c — a draft model (sluice_params.draft_model): checking its vocabulary,
 * splitting the budget with it, and proposing tokens from it for sluice_generate.
 *
 * The draft is a second sluice_model (its own plan, weights or weight stream, thread pool) and each
 * target context that may draft holds a context of it.  That context is not updated as the target
 * evaluates: before it drafts, it is brought to the target's tokens with sluice_prefill, which keeps
 * the longest common prefix of its KV cache and evaluates the rest — after a verifying pass that is
 * the rollback to the accepted prefix plus the correction (or bonus) token, after a prompt or a
 * session load the whole new part, in one batch.  Proposals are greedy (the draft's argmax), so the
 * target's rejection sampling keeps its own distribution exactly (runtime/engine/sampler.c).
 */
#include "runtime/api/api_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/clock.h"

/* ---- the vocabulary ---------------------------------------------------------------------------- */

/* Token text for a message: at most 16 bytes of it, C-escaped. */
static void show_text(const sl_vocab *v, int32_t id, char *out, size_t outlen)
{
    size_t len = 0, o = 0;
    const char *s = sl_vocab_text(v, id, &len);
    for (size_t i = 0; s && i < len && i < 16 && o + 5 < outlen; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') { out[o++] = '\\'; out[o++] = (char)ch; }
        else if (ch < 0x20 || ch == 0x7f) o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", ch);
        else out[o++] = (char)ch;
    }
    if (len > 16 && o + 4 < outlen) { memcpy(out + o, "...", 3); o += 3; }
    out[o] = 0;
}

/* The first difference between the target's vocabulary t and the draft's d (size, a token's text,
 * BOS, EOS), written into why; false when they are the same. */
static bool vocab_differs(const sl_vocab *t, const sl_vocab *d, char *why, size_t len)
{
    int32_t nt = sl_vocab_n_tokens(t), nd = sl_vocab_n_tokens(d);
    if (nt != nd) { snprintf(why, len, "%d tokens, the target has %d", nd, nt); return true; }
    if (strcmp(sl_vocab_family(t), sl_vocab_family(d))) {
        snprintf(why, len, "a %s tokenizer, the target's is %s", sl_vocab_family(d), sl_vocab_family(t));
        return true;
    }
    for (int32_t id = 0; id < nt; id++) {
        size_t lt, ld;
        const char *st = sl_vocab_text(t, id, &lt), *sd = sl_vocab_text(d, id, &ld);
        if (lt == ld && (!lt || !memcmp(st, sd, lt))) continue;
        char a[80], b[80];
        show_text(d, id, a, sizeof a);
        show_text(t, id, b, sizeof b);
        snprintf(why, len, "token %d is \"%s\", the target's is \"%s\"", id, a, b);
        return true;
    }
    if (sl_vocab_bos(t) != sl_vocab_bos(d)) {
        snprintf(why, len, "BOS is %d, the target's is %d", sl_vocab_bos(d), sl_vocab_bos(t));
        return true;
    }
    if (sl_vocab_eos(t) != sl_vocab_eos(d)) {
        snprintf(why, len, "EOS is %d, the target's is %d", sl_vocab_eos(d), sl_vocab_eos(t));
        return true;
    }
    return false;
}

int api_draft_check_vocab(const sl_vocab *target, const char *path, char *err, size_t errlen)
{
    sl_model *m = NULL;
    sl_vocab *v = NULL;
    char e2[512], why[240];
    int rc = sl_model_open(path, &m, e2, sizeof e2);
    if (!rc && (rc = sl_vocab_load(m->gguf, &v, e2, sizeof e2)) == 0 && vocab_differs(target, v, why, sizeof why)) {
        snprintf(e2, sizeof e2, "vocabulary differs from the target's: %s (a draft needs the target's vocabulary: "
                 "a smaller model of the same family)", why);
        rc = -EINVAL;
    }
    if (rc) snprintf(err, errlen, "draft model %s: %s", path, e2);
    sl_vocab_free(v);
    sl_model_free(m);
    return rc;
}

/* ---- the budget -------------------------------------------------------------------------------- */

/* The draft model's parameters: the target's settings, no drafting of its own, planned within
 * `budget` (0: not planned, as the target is not). */
sluice_params api_draft_params(const sluice_params *p, int n_ctx, uint64_t budget)
{
    sluice_params d = *p;
    d.ram_budget = budget;
    d.planner = budget ? SLUICE_PLANNER_ON : p->planner;
    d.n_ctx = n_ctx;
    d.n_parallel = 1;
    d.draft = SLUICE_DRAFT_OFF;
    d.draft_model = NULL;
    d.draft_fixed = false;
    d.progress = NULL;   /* one load bar (the target's): the draft is the smaller model */
    d.log = NULL;        /* its plan is reported as the draft's share (sl_plan_draft_print), not as a second plan */
    return d;
}

/* "64M", "2G" or a byte count, as api.c names budgets. */
static void size_name(char *buf, size_t len, uint64_t b)
{
    if (b && b % (1ull << 30) == 0) snprintf(buf, len, "%" PRIu64 "G", b >> 30);
    else if (b && b % (1ull << 20) == 0) snprintf(buf, len, "%" PRIu64 "M", b >> 20);
    else snprintf(buf, len, "%" PRIu64, b);
}

/* The draft's plan at `budget`: 0, -ENOSPC (pi->min_budget set) or -errno with err. */
static int plan_draft(const sluice_params *p, int n_ctx, uint64_t budget, sluice_plan_info *pi, char *err,
                      size_t errlen)
{
    sluice_params dp = api_draft_params(p, n_ctx, budget);
    char e2[SL_ERRLEN];
    int rc = sluice_plan(p->draft_model, &dp, pi, e2, sizeof e2);
    if (rc && rc != -ENOSPC) snprintf(err, errlen, "draft model %s: %s", p->draft_model, e2);
    return rc;
}

/* The target's plan at `budget` (make_plan with p's budget replaced). */
static int plan_target(const sl_model *m, size_t vocab_bytes, const sluice_params *p, uint64_t budget, int n_ctx,
                       int n_batch, int threads, sl_plan_model *pm, sl_plan_req *req, sl_plan *plan,
                       const char **spill, char *err, size_t errlen)
{
    sluice_params tp = *p;
    tp.ram_budget = budget;
    return api_make_plan(m, vocab_bytes, &tp, n_ctx, n_batch, threads, pm, req, plan, spill, err, errlen);
}

/* Contract: see api_internal.h.  The draft resident if the target still fits beside it (the memory
 * a draft holds is best spent whole: a streamed draft reads its weights for every drafted token),
 * else streamed at its own minimum budget, else -ENOSPC naming both parts. */
int api_plan_with_draft(const sl_model *m, size_t vocab_bytes, const sluice_params *p, int n_ctx, int n_batch,
                        int threads, sl_plan_model *pm, sl_plan_req *req, sl_plan *plan, const char **spill,
                        sl_plan_draft *d, char *err, size_t errlen)
{
    uint64_t B = p->ram_budget;
    char how[160] = "", name[32], e2[SL_ERRLEN];
    if (!B && !(B = sl_plan_auto_budget(how, sizeof how))) {
        snprintf(err, errlen, "cannot tell how much memory is available; set a RAM budget");
        return -EINVAL;
    }
    size_name(name, sizeof name, B);
    sluice_plan_info dpi;
    int rc = plan_draft(p, n_ctx, B, &dpi, err, errlen);
    if (rc == -ENOSPC) {
        snprintf(err, errlen, "RAM budget %s: the draft model %s alone needs at least %" PRIu64 " MiB", name,
                 p->draft_model, sl_plan_min_mib(dpi.min_budget));
        return rc;
    }
    if (rc) return rc;
    /* share: the draft's own budget; it adds share - SHARED to the process (the code is there once) */
    const uint64_t shared = SL_PLAN_DRAFT_SHARED_BYTES;
    uint64_t share = dpi.all_resident ? dpi.planned_bytes : 0;
    rc = -ENOSPC;
    if (share && share - shared < B)
        rc = plan_target(m, vocab_bytes, p, B - (share - shared), n_ctx, n_batch, threads, pm, req, plan, spill, e2,
                         sizeof e2);
    if (rc == -ENOSPC) {   /* streamed within its minimum */
        uint64_t res = share;
        share = sl_plan_min_mib(dpi.min_budget) << 20;
        rc = share - shared < B ? plan_target(m, vocab_bytes, p, B - (share - shared), n_ctx, n_batch, threads, pm, req,
                                              plan, spill, e2, sizeof e2)
                                : -ENOSPC;
        if (rc == -ENOSPC) {
            char res_s[48] = "";
            if (res) snprintf(res_s, sizeof res_s, "%.1f MiB resident, ", (res - shared) / 1048576.0);
            snprintf(err, errlen, "RAM budget %s%s%s: too small for the target beside the draft model %s (which adds "
                     "%sat least %.1f MiB streamed); the target needs at least %" PRIu64 " MiB of its own (or use "
                     "--draft off)", name, *how ? " " : "", how, p->draft_model, res_s, (share - shared) / 1048576.0,
                     sl_plan_min_mib(plan->min_budget));
            return rc;
        }
        if (!rc && (rc = plan_draft(p, n_ctx, share, &dpi, err, errlen))) return rc;
    }
    if (rc) { snprintf(err, errlen, "%s (the budget %s less the draft model's share)", e2, name); return rc; }
    *d = (sl_plan_draft){ .budget = B, .draft_budget = share, .draft_bytes = share - shared,
                          .target_budget = B - (share - shared), .draft_resident = dpi.all_resident,
                          .draft_stream_bytes = dpi.stream_bytes_per_token,
                          .t_pass = plan->pred_token_s, .t_verify = plan->pred_compute_s * SL_PLAN_DRAFT_VERIFY_FRAC,
                          .t_draft = dpi.pred_tok_s > 0 ? 1 / dpi.pred_tok_s : 0 };
    int rows = req->n_logits > 1 ? req->n_logits - 1 : 0;
    d->k_max = rows < plan->n_batch - 1 ? rows : plan->n_batch - 1;
    /* the target alone at the whole budget: the same request and rates, a pure re-plan */
    sl_plan *alone = malloc(sizeof *alone);
    sl_plan_req ra = *req;
    ra.budget = B;
    d->t_alone = alone && sl_plan_make(pm, &ra, alone) == 0 ? alone->pred_token_s : plan->pred_token_s;
    free(alone);
    sl_plan_draft_assess(d);
    return 0;
}

void api_print_plan_with_draft(const sl_plan *plan, const sl_plan_model *pm, const sl_plan_req *req,
                               const sl_plan_draft *d, FILE *f, bool json)
{
    if (!json) {
        sl_plan_print(plan, pm, req, f);
        sl_plan_draft_print(d, f, false);
        return;
    }
    /* one object: the target's plan (its own JSON, without the newline) and the draft's share */
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    if (!mf) return;
    sl_plan_print_json(plan, pm, req, mf);
    fclose(mf);
    while (len && (buf[len - 1] == '\n')) buf[--len] = 0;
    fprintf(f, "{\"target\":%s,\"draft\":", buf);
    sl_plan_draft_print(d, f, true);
    fprintf(f, "}\n");
    free(buf);
}

/* ---- drafting ---------------------------------------------------------------------------------- */

static int32_t argmax(const float *l, int n)
{
    int32_t best = 0;
    for (int i = 1; i < n; i++) if (l[i] > l[best]) best = i;   /* ties: the lowest id, as the sampler's greedy */
    return best;
}

/* Contract: see api_internal.h. */
int api_draft_propose(sluice_ctx *C, const int32_t *hist, int n, int k, int32_t *out)
{
    sluice_ctx *D = C->dctx;
    const sluice_model *DM = D->M;
    const int V = DM->m->cfg.vocab;
    uint64_t t0 = sl_now_ns();
    int ev = sluice_prefill(D, hist, n);   /* rollback to the common prefix + the new tokens */
    if (ev < 0) {
        snprintf(C->err, sizeof C->err, "draft model: %s", sluice_ctx_error(D));
        return ev;
    }
    uint64_t t_sync = sl_now_ns() - t0;
    /* the cost of a drafted token: single-token evaluations; a sync of one or two tokens (the usual
     * correction or bonus) counts as one, a longer catch-up (a prompt, passes without drafts) not */
    double secs = ev <= 2 ? t_sync / 1e9 : 0;
    int timed = ev <= 2 ? 1 : 0, m = 0;
    C->n_draft_evals += (uint64_t)ev;
    while (m < k) {
        const float *l = sluice_logits(D);
        if (!l) break;
        int32_t t = argmax(l, V);
        out[m++] = t;
        if (m == k || sl_vocab_is_eog(DM->voc, t)) break;   /* nothing follows an end of text */
        uint64_t t1 = sl_now_ns();
        int rc = sluice_eval(D, &t, 1);
        if (rc) {
            snprintf(C->err, sizeof C->err, "draft model: %s", sluice_ctx_error(D));
            return rc;
        }
        secs += (sl_now_ns() - t1) / 1e9;
        timed++;
        C->n_draft_evals++;
    }
    C->draft_ns += sl_now_ns() - t0;
    if (timed) sl_draft_stats_drafter(&C->dstats, secs, timed);
    return m;
}
