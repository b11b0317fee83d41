/* tests/test_planner.c — the --ram-budget planner as a pure function, on hand-built 8B/13B shapes. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kernels/types.h"
#include "runtime/planner.h"

#define MiB (1024ull * 1024ull)

/* llama.cpp's Q4_K_M mix: Q6_K for attn_v / ffn_down on "more bits" layers, Q4_K elsewhere,
 * Q6_K output, Q4_K embeddings. */
static bool more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static void shape(sl_plan_model *pm, int dim, int L, int heads, int kv_heads, int ffn, int vocab, uint64_t vocab_bytes)
{
    memset(pm, 0, sizeof *pm);
    sl_config *c = &pm->cfg;
    c->dim = dim; c->n_layers = L; c->n_heads = heads; c->n_kv_heads = kv_heads; c->head_dim = dim / heads;
    c->ffn_dim = ffn; c->vocab = vocab; c->ctx_train = 4096; c->rope_dim = c->head_dim;
    int kvd = kv_heads * c->head_dim;
    for (int l = 0; l < L; l++) {
        int vt = more_bits(l, L) ? SL_TYPE_Q6_K : SL_TYPE_Q4_K;
        int64_t cols[7] = { dim, dim, dim, dim, dim, dim, ffn };
        int64_t rows[7] = { dim, kvd, kvd, dim, ffn, ffn, dim };
        int types[7] = { SL_TYPE_Q4_K, SL_TYPE_Q4_K, vt, SL_TYPE_Q4_K, SL_TYPE_Q4_K, SL_TYPE_Q4_K, vt };
        for (int i = 0; i < 7; i++) {
            pm->tensor_row_bytes[l][i] = sl_row_bytes(types[i], cols[i]);
            pm->tensor_bytes[l][i] = pm->tensor_row_bytes[l][i] * (uint64_t)rows[i];
        }
    }
    pm->lm_head_row_bytes = sl_row_bytes(SL_TYPE_Q6_K, dim);
    pm->lm_head_bytes = pm->lm_head_row_bytes * (uint64_t)vocab;
    pm->embd_row_bytes = sl_row_bytes(SL_TYPE_Q4_K, dim);
    pm->embd_bytes = pm->embd_row_bytes * (uint64_t)vocab;
    pm->norm_bytes = (uint64_t)(2 * L + 1) * dim * 4;
    pm->meta_bytes = 9 * MiB;
    pm->vocab_bytes = vocab_bytes;
    pm->file_bytes = pm->lm_head_bytes + pm->embd_bytes;
    for (int l = 0; l < L; l++) for (int i = 0; i < 7; i++) pm->file_bytes += pm->tensor_bytes[l][i];
}

static sl_plan_model llama3_8b, llama2_13b;
static sl_plan plan;

static void setup(void)
{
    shape(&llama3_8b, 4096, 32, 32, 8, 14336, 128256, 15 * MiB);
    shape(&llama2_13b, 5120, 40, 40, 40, 13824, 32000, 4 * MiB);
}

static sl_plan_req req_for(uint64_t budget, int n_ctx)
{
    return (sl_plan_req){ .budget = budget, .n_ctx = n_ctx, .n_batch = 512, .n_threads = 2, .disk_bw = 1.8e9,
                          .compute_bw = 4e9, .allow_spill = true, .allow_q8_kv = true };
}

/* The generated files are within 1% of the real ones: these shapes must be too. */
Test(planner, shapes_match_real_file_sizes, .init = setup)
{
    double gb8 = llama3_8b.file_bytes / 1e9, gb13 = llama2_13b.file_bytes / 1e9;
    cr_assert(gb8 > 4.87 && gb8 < 4.97, "llama3-8b Q4_K_M weights %.3f GB (real file 4.92 GB)", gb8);
    cr_assert(gb13 > 7.78 && gb13 < 7.95, "llama2-13b Q4_K_M weights %.3f GB (real file 7.87 GB)", gb13);
}

Test(planner, more_budget_never_reads_more_and_never_overruns, .init = setup)
{
    const sl_plan_model *models[] = { &llama3_8b, &llama2_13b };
    for (int mi = 0; mi < 2; mi++) {
        uint64_t prev_read = UINT64_MAX;
        int feasible = 0;
        for (uint64_t b = 16 * MiB; b <= 12000 * MiB; b += b / 8) {
            sl_plan_req r = req_for(b, 512);
            int rc = sl_plan_make(models[mi], &r, &plan);
            if (rc) {
                cr_assert_eq(rc, -ENOSPC);
                cr_assert_gt(plan.min_budget, b, "infeasible at %llu but min_budget %llu", (unsigned long long)b,
                             (unsigned long long)plan.min_budget);
                cr_assert(strstr(plan.why, "needs at least") != NULL, "%s", plan.why);
                continue;
            }
            feasible++;
            cr_assert(plan.feasible);
            cr_assert_leq(plan.total_bytes, b, "plan of %llu bytes over budget %llu", (unsigned long long)plan.total_bytes,
                          (unsigned long long)b);
            cr_assert_leq(plan.read_per_token, prev_read, "budget %llu MiB reads more (%llu) than a smaller budget (%llu)",
                          (unsigned long long)(b / MiB), (unsigned long long)plan.read_per_token, (unsigned long long)prev_read);
            prev_read = plan.read_per_token;
            /* the parts add up */
            uint64_t sum = plan.base_bytes + plan.meta_bytes + plan.vocab_bytes + plan.norm_bytes + plan.act_bytes +
                           plan.kv_bytes + plan.stream_buf_bytes + plan.resident_bytes;
            cr_assert_eq(sum, plan.total_bytes);
        }
        cr_assert_gt(feasible, 20);
    }
}

/* Hand-checked plans (sizes computed in the comments from the shapes).
 * llama3-8b at -c 512: KV f16 = 2 (K,V) x 32 layers x 512 x 1024 x 2 B = 64 MiB; q8_0 = 34 MiB;
 * spilled = one layer = 2 MiB.  Fixed costs ~31 MiB (runtime 6, metadata 9, tokenizer 15, norms 1).
 * The budget above the minimum goes, in order, to KV precision, the prompt batch (act ~0.18 MiB per
 * position), 8 MiB pieces with prefetch 2 (~28 MiB), then weights: the 401 MiB LM head, then blocks
 * of ~136-146 MiB. */
Test(planner, llama3_8b_hand_checked, .init = setup)
{
    sl_plan_req r = req_for(64 * MiB, 512);
    cr_assert_eq(sl_plan_make(&llama3_8b, &r, &plan), 0, "%s", plan.why);
    cr_assert_leq(plan.min_budget, 64 * MiB, "the 8B must fit a 64 MiB cgroup at -c 512 (min %.1f MiB)", plan.min_budget / 1048576.0);
    cr_assert_eq(plan.kv, SL_PLAN_KV_SPILL, "64 MiB - 38 MiB minimum leaves 26 MiB: not enough for +32 MiB of q8_0 KV");
    cr_assert_eq(plan.kv_bytes, 2 * MiB);
    cr_assert_eq(plan.resident_bytes, 0);
    cr_assert_lt(plan.n_batch, 512);

    r = req_for(128 * MiB, 512);
    cr_assert_eq(sl_plan_make(&llama3_8b, &r, &plan), 0);
    cr_assert_eq(plan.kv, SL_PLAN_KV_F16, "38 + 62 MiB for the f16 cache fits 128 MiB");
    cr_assert_eq(plan.resident_bytes, 0, "the remaining ~28 MiB go to the batch");

    r = req_for(512 * MiB, 512);
    cr_assert_eq(sl_plan_make(&llama3_8b, &r, &plan), 0);
    cr_assert_eq(plan.kv, SL_PLAN_KV_F16);
    cr_assert_eq(plan.n_batch, 512);
    cr_assert_eq(plan.chunk_bytes, 8 * MiB);
    cr_assert(!plan.lm_head_resident, "the 401 MiB head does not fit in the ~300 MiB left");
    cr_assert_geq(plan.resident_bytes, 250 * MiB);
    cr_assert_geq(plan.n_layers_resident, 1);

    r = req_for(2048 * MiB, 512);
    cr_assert_eq(sl_plan_make(&llama3_8b, &r, &plan), 0);
    cr_assert(plan.lm_head_resident, "2 GiB pins the 401 MiB LM head first");
    cr_assert_geq(plan.n_layers_resident, 10);
    cr_assert_leq(plan.n_layers_resident, 12);

    r = req_for(8192 * MiB, 512);
    cr_assert_eq(sl_plan_make(&llama3_8b, &r, &plan), 0);
    cr_assert(plan.all_resident, "8 GiB holds the whole 4.9 GB model");
    cr_assert_eq(plan.read_per_token, 0);
}

/* llama2-13b has no GQA: at -c 512 the f16 KV is 2 x 40 x 512 x 5120 x 2 B = 400 MiB, q8_0 212.5 MiB,
 * one spilled layer 10 MiB. */
Test(planner, llama2_13b_hand_checked, .init = setup)
{
    sl_plan_req r = req_for(128 * MiB, 512);
    cr_assert_eq(sl_plan_make(&llama2_13b, &r, &plan), 0, "%s", plan.why);
    cr_assert_eq(plan.kv, SL_PLAN_KV_SPILL, "neither the 400 MiB f16 nor the 212 MiB q8_0 cache fits 128 MiB");
    cr_assert_eq(plan.kv_bytes, 10 * MiB);

    r = req_for(300 * MiB, 512);
    cr_assert_eq(sl_plan_make(&llama2_13b, &r, &plan), 0);
    cr_assert_eq(plan.kv, SL_PLAN_KV_Q8_0, "300 MiB holds the 212.5 MiB q8_0 cache, not the 400 MiB f16 one");
    cr_assert_eq(plan.kv_bytes, 2ull * 40 * 512 * 5120 / 32 * 34);

    r = req_for(2048 * MiB, 512);
    cr_assert_eq(sl_plan_make(&llama2_13b, &r, &plan), 0);
    cr_assert_eq(plan.kv, SL_PLAN_KV_F16);
    cr_assert(plan.lm_head_resident);

    r = req_for(8192 * MiB, 512);
    cr_assert_eq(sl_plan_make(&llama2_13b, &r, &plan), 0);
    cr_assert(plan.all_resident, "7.33 GiB of weights + 400 MiB KV + 30 MiB fixed + ~110 MiB batch = 7.86 GiB fit 8 GiB");

    /* 7 GiB: 7168 - 400 (KV) - 31 (fixed) - 110 (batch) - 28 (pieces) - 128 (LM head) = ~6470 MiB for
     * blocks of ~178-200 MiB: about 35 blocks */
    r = req_for(7168 * MiB, 512);
    cr_assert_eq(sl_plan_make(&llama2_13b, &r, &plan), 0);
    cr_assert(!plan.all_resident);
    cr_assert(plan.lm_head_resident);
    cr_assert_geq(plan.n_layers_resident, 33);
    cr_assert_leq(plan.n_layers_resident, 37);
}

Test(planner, infeasible_states_minimum_and_cause, .init = setup)
{
    sl_plan_req r = req_for(16 * MiB, 2048);
    cr_assert_eq(sl_plan_make(&llama3_8b, &r, &plan), -ENOSPC);
    cr_assert_gt(plan.min_budget, 16 * MiB);
    cr_assert(strstr(plan.why, "needs at least") && strstr(plan.why, "KV cache") && strstr(plan.why, "--ram-budget"), "%s", plan.why);
    /* and the stated minimum does work */
    r.budget = plan.min_budget;
    cr_assert_eq(sl_plan_make(&llama3_8b, &r, &plan), 0, "%s", plan.why);
    cr_assert_leq(plan.total_bytes, r.budget);
}
