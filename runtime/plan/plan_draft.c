/* runtime/plan/plan_draft.c — a draft model's share of the budget and its worth (see plan_draft.h). */
#include "runtime/plan/plan_draft.h"

#include <math.h>

#include "runtime/engine/draft.h"

/* Contract: see plan_draft.h. */
double sl_plan_draft_rate(const sl_plan_draft *d, double a, int *best_k)
{
    double t_pass = d->t_pass > 0 ? d->t_pass : 1e-9;
    double per = (d->t_verify > 0 ? d->t_verify : 0) + (d->t_draft > 0 ? d->t_draft : 0);
    int k = sl_draft_best_k(a, t_pass, per, d->k_max);
    if (a > 0.999) a = 0.999;
    if (!(a >= 0)) a = 0;
    double tokens = k ? (1 - pow(a, k + 1)) / (1 - a) : 1;
    if (best_k) *best_k = k;
    return tokens / (t_pass + k * per);
}

void sl_plan_draft_assess(sl_plan_draft *d)
{
    static const double acc[SL_PLAN_DRAFT_N_ACCEPT] = { 0.5, 0.7, 0.9 };
    for (int i = 0; i < SL_PLAN_DRAFT_N_ACCEPT; i++) {
        d->accept[i] = acc[i];
        d->tok_s[i] = sl_plan_draft_rate(d, acc[i], &d->best_k[i]);
    }
    /* the rate grows with a (more tokens per pass, same costs), so bisect for where it passes the
     * target alone; drafting never pays when it does not even at a = 0.999 */
    double alone = d->t_alone > 0 ? 1 / d->t_alone : 0;
    int k;
    if (sl_plan_draft_rate(d, 0.999, &k) <= alone || k == 0) { d->breakeven = 2; return; }
    double lo = 0, hi = 0.999;
    for (int it = 0; it < 40; it++) {
        double mid = 0.5 * (lo + hi);
        if (sl_plan_draft_rate(d, mid, &k) > alone && k > 0) hi = mid;
        else lo = mid;
    }
    d->breakeven = hi;
}

void sl_plan_draft_print(const sl_plan_draft *d, FILE *f, bool json)
{
    const double mib = 1048576.0, alone = d->t_alone > 0 ? 1 / d->t_alone : 0;
    if (json) {
        fprintf(f, "{\"budget\":%llu,\"draft_budget\":%llu,\"draft_bytes\":%llu,\"target_budget\":%llu,\"draft_resident\":%s,"
                   "\"draft_stream_bytes\":%llu,\"k_max\":%d,\"t_pass\":%.6g,\"t_verify\":%.6g,\"t_draft\":%.6g,"
                   "\"pred_tok_s_alone\":%.4f,\"breakeven_accept\":%.4f,\"with_draft\":[",
                (unsigned long long)d->budget, (unsigned long long)d->draft_budget, (unsigned long long)d->draft_bytes,
                (unsigned long long)d->target_budget, d->draft_resident ? "true" : "false",
                (unsigned long long)d->draft_stream_bytes, d->k_max, d->t_pass, d->t_verify, d->t_draft, alone,
                d->breakeven > 1 ? -1.0 : d->breakeven);
        for (int i = 0; i < SL_PLAN_DRAFT_N_ACCEPT; i++)
            fprintf(f, "%s{\"accept\":%.2f,\"k\":%d,\"pred_tok_s\":%.4f}", i ? "," : "", d->accept[i], d->best_k[i],
                    d->tok_s[i]);
        fprintf(f, "]}");
        return;
    }
    fprintf(f, "draft model:    %.1f MiB of the %.1f MiB budget (its plan: %.1f MiB, the runtime counted once; %s",
            d->draft_bytes / mib, d->budget / mib, d->draft_budget / mib,
            d->draft_resident ? "resident" : "streamed");
    if (!d->draft_resident) fprintf(f, ", %.1f MiB read per draft token", d->draft_stream_bytes / mib);
    fprintf(f, "); the target is planned within the other %.1f MiB\n", d->target_budget / mib);
    fprintf(f, "  target token: %.4g s alone at the whole budget, %.4g s beside the draft (+%.4g s per verified "
               "draft); draft token %.4g s\n", d->t_alone, d->t_pass, d->t_verify, d->t_draft);
    fprintf(f, "  predicted tok/s: %.2f without the draft;", alone);
    for (int i = 0; i < SL_PLAN_DRAFT_N_ACCEPT; i++)
        fprintf(f, " %.2f at %.0f%% acceptance (k %d)%s", d->tok_s[i], 100 * d->accept[i], d->best_k[i],
                i + 1 < SL_PLAN_DRAFT_N_ACCEPT ? "," : "\n");
    if (d->breakeven > 1)
        fprintf(f, "  not worth its memory: even a draft the target always accepts would not beat the target alone "
                   "(use --draft off or a smaller draft)\n");
    else
        fprintf(f, "  worth its memory when the target accepts more than %.0f%% of the drafted tokens "
                   "(--stats shows the acceptance)\n", 100 * d->breakeven);
}
