/* runtime/plan/plan_draft.h — a draft model inside the same --ram-budget: its share, and whether it
 * is worth the memory.
 *
 * The memory a draft model holds would otherwise pin target weights, so the target's pass gets
 * slower when the draft takes its share (streamed) and the draft's tokens are not free either.  The
 * assessment compares, per the plans' own predictions, the target alone at the whole budget with the
 * target at the budget less the draft's share plus drafting k tokens per pass at acceptance rate a:
 *
 *   rate(a) = max over k of  (1 - a^(k+1)) / (1 - a)  /  (t_pass + k * (t_verify + t_draft))
 *
 * (t_pass: the target's predicted token at its share; t_verify: one more position of the target's
 * compute in the same pass, SL_PLAN_DRAFT_VERIFY_FRAC of a token's — linear, as the engine's own
 * fit; t_draft: the draft's predicted token), and gives the acceptance rate above which drafting
 * pays.  Pure: no I/O.
 */
#ifndef SL_RUNTIME_PLAN_DRAFT_H
#define SL_RUNTIME_PLAN_DRAFT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define SL_PLAN_DRAFT_N_ACCEPT 3   /* acceptance rates the assessment tabulates: 0.5, 0.7, 0.9 */
/* What a draft's own plan counts that the process already holds once: the runtime's code and
 * libraries (the planner's 6 MiB base less 1 MiB kept for the draft's thread pool and allocator). */
#define SL_PLAN_DRAFT_SHARED_BYTES (5ull << 20)
/* A token more in a verifying pass costs this fraction of a decode token's compute: the batched
 * kernels unpack each weight row once for several positions.  Measured with the llama3.2-1b shape
 * (Q4_K_M, 2 threads, a loaded machine): prompts of 5, 9 and 17 tokens cost 0.27, 0.36 and 0.31 of a
 * decode token per position; the higher end is taken.  Only the plan's assessment uses it: a run's
 * draft length follows its own measured pass times. */
#define SL_PLAN_DRAFT_VERIFY_FRAC 0.4

typedef struct sl_plan_draft {
    /* the split (filled by the caller that planned both models) */
    uint64_t budget;          /* the whole budget */
    uint64_t draft_budget;    /* the budget the draft's own plan is made within */
    uint64_t draft_bytes;     /* what the draft adds to the process: draft_budget - SL_PLAN_DRAFT_SHARED_BYTES */
    uint64_t target_budget;   /* what the target was planned within: budget - draft_bytes */
    bool     draft_resident;  /* every draft weight resident; else the draft streams within its share */
    uint64_t draft_stream_bytes;   /* read per draft token (0: resident) */
    int      k_max;           /* most drafts per pass */
    double   t_pass;          /* s: the target's token at target_budget */
    double   t_verify;        /* s: one more position of target compute in the same pass */
    double   t_draft;         /* s: one draft token */
    double   t_alone;         /* s: the target's token at the whole budget (no draft) */
    /* the assessment (sl_plan_draft_assess) */
    double   breakeven;       /* acceptance rate above which drafting beats the target alone; > 1: never */
    double   accept[SL_PLAN_DRAFT_N_ACCEPT];
    double   tok_s[SL_PLAN_DRAFT_N_ACCEPT];   /* predicted tokens/s with the draft at accept[i] */
    int      best_k[SL_PLAN_DRAFT_N_ACCEPT];
} sl_plan_draft;

/* Predicted tokens/s of target + draft at acceptance rate a (in [0, 1)), and the k that gives it. */
double sl_plan_draft_rate(const sl_plan_draft *d, double a, int *best_k);
/* Fill the assessment fields of d from its split fields. */
void sl_plan_draft_assess(sl_plan_draft *d);
/* `sluice plan` / --verbose lines (json: one object, no newline). */
void sl_plan_draft_print(const sl_plan_draft *d, FILE *f, bool json);

#endif
