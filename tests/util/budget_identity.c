/* tests/util/budget_identity.c — see budget_identity.h. */
#include "util/budget_identity.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/sluice.h"

static void params(sluice_params *p, uint64_t budget)
{
    sluice_params_default(p);
    p->planner = budget ? SLUICE_PLANNER_ON : SLUICE_PLANNER_OFF;
    p->ram_budget = budget;
    p->n_threads = 2;
    p->n_ctx = 256;
    p->n_batch = 8;   /* small: a budget above the minimum buys weights, not a bigger prompt batch */
    p->kv_type = SLUICE_KV_F16;
    p->disk_bw = 1.0;
    p->compute_bw = 1.0;
}

static void api_open(const char *path, uint64_t budget, sluice_model **m, sluice_ctx **c)
{
    sluice_params p;
    params(&p, budget);
    char err[512];
    cr_assert_eq(sluice_open(path, &p, m, err, sizeof err), 0, "%s (budget %llu): %s", path, (unsigned long long)budget, err);
    cr_assert_eq(sluice_ctx_new(*m, c, err, sizeof err), 0, "%s", err);
}

void budget_identity_check(const char *path, const golden_run *g, const int *num, int n, int den, const char *what)
{
    char err[512];
    sluice_model *m0;
    sluice_ctx *c0;
    api_open(path, 0, &m0, &c0);
    sluice_model_info info;
    sluice_model_get_info(m0, &info);
    /* the least budget that works (from an infeasible plan) and what everything resident needs */
    sluice_params p;
    params(&p, 1);
    sluice_plan_info lo, hi;
    cr_assert_neq(sluice_plan(path, &p, &lo, err, sizeof err), 0);
    cr_assert_gt(lo.min_budget, 0, "%s", err);
    p.ram_budget = 1ull << 40;
    cr_assert_eq(sluice_plan(path, &p, &hi, err, sizeof err), 0, "%s", err);
    cr_assert(hi.all_resident);
    const size_t V = (size_t)info.n_vocab;
    float *ref = malloc(3 * V * sizeof *ref);
    cr_assert_eq(sluice_eval(c0, g->prompt, g->n_prompt), 0);
    for (int s = 0; s < 3; s++) {
        memcpy(ref + (size_t)s * V, sluice_logits(c0), V * sizeof *ref);
        cr_assert_eq(sluice_eval(c0, &g->steps[s].token, 1), 0);
    }
    for (int q = 0; q < n; q++) {
        const uint64_t budget = lo.min_budget + (hi.planned_bytes - lo.min_budget) * (uint64_t)num[q] / (uint64_t)den;
        sluice_model *m1;
        sluice_ctx *c1;
        sluice_plan_info pi;
        api_open(path, budget, &m1, &c1);
        sluice_model_get_plan(m1, &pi);
        cr_assert(pi.planned && !pi.all_resident, "%s: budget %llu should stream", path, (unsigned long long)budget);
        cr_assert_leq(pi.planned_bytes, budget);
        cr_assert_eq(sluice_eval(c1, g->prompt, g->n_prompt), 0);
        for (int s = 0; s < 3; s++) {
            cr_assert_eq(memcmp(ref + (size_t)s * V, sluice_logits(c1), V * sizeof(float)), 0,
                         "%s step %d at %llu bytes: budgeted logits differ from resident", path, s,
                         (unsigned long long)budget);
            cr_assert_eq(sluice_eval(c1, &g->steps[s].token, 1), 0);
        }
        fprintf(stderr, "%s: %s at %.2f MiB (%d/%d blocks resident, LM head %s) bit-identical to resident\n", what, path,
                budget / 1048576.0, pi.n_layers_resident, pi.n_layers, pi.lm_head_resident ? "resident" : "streamed");
        sluice_ctx_free(c1);
        sluice_close(m1);
    }
    free(ref);
    sluice_ctx_free(c0);
    sluice_close(m0);
}
