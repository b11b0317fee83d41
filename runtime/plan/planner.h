/* runtime/plan/planner.h — the --ram-budget planner: what stays resident, what streams, and how.
 *
 * A pure function: (model description, budget, context, batch, disk and compute rates) -> plan.
 * It performs no I/O and allocates nothing, so it is unit-tested on hand-built 8B/13B shapes.
 * The plan accounts for everything the process holds (see sl_plan fields); the run then allocates
 * exactly what the plan says, and --stats compares the plan with the measured peak.
 * The rates come in through the request; sl_plan_rates (plan_print.c) measures them.
 */
#ifndef SL_RUNTIME_PLANNER_H
#define SL_RUNTIME_PLANNER_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/types.h"
#include "runtime/engine/model.h"

#define SL_PLAN_MAX_LAYERS SL_MAX_LAYERS

/* What the planner needs to know about a model (built from sl_model, or by hand in tests). */
typedef struct sl_plan_model {
    sl_config cfg;
    /* per block and slot (enum sl_block_mat, forward order); 0 bytes: the block has no such matrix */
    uint64_t tensor_bytes[SL_PLAN_MAX_LAYERS][SL_BLOCK_MATS];
    uint64_t tensor_row_bytes[SL_PLAN_MAX_LAYERS][SL_BLOCK_MATS];
    int      tensor_type[SL_PLAN_MAX_LAYERS][SL_BLOCK_MATS];   /* enum sl_type: picks the compute rate */
    /* routed experts of each MoE block (all 0 in a dense block): one expert's matrices (enum
     * sl_expert_mat), the same for every expert of the block; cfg.n_expert experts, of which a token
     * reads cfg.n_expert_used */
    uint64_t expert_bytes[SL_PLAN_MAX_LAYERS][SL_EXPERT_MATS];
    uint64_t expert_row_bytes[SL_PLAN_MAX_LAYERS][SL_EXPERT_MATS];
    int      expert_type[SL_PLAN_MAX_LAYERS][SL_EXPERT_MATS];
    uint64_t lm_head_bytes, lm_head_row_bytes;
    int      lm_head_type;
    uint64_t embd_bytes, embd_row_bytes;
    bool     tied;
    bool     fused_qkv;       /* Q, K and V are one attn_qkv tensor in the file (phi3): one quantizer role */
    uint64_t norm_bytes;      /* f32 norm vectors (always resident) */
    uint64_t meta_bytes;      /* parsed GGUF metadata held in memory */
    uint64_t vocab_bytes;     /* tokenizer tables */
    uint64_t file_bytes;
    int      window[SL_PLAN_MAX_LAYERS];   /* each block's sliding window (0: full attention) */
} sl_plan_model;

enum sl_plan_kv { SL_PLAN_KV_F16 = 0, SL_PLAN_KV_Q8_0 = 1, SL_PLAN_KV_SPILL = 2 };

typedef struct sl_plan_req {
    uint64_t budget;          /* bytes the process may hold: RSS + page cache it creates */
    int      n_ctx;
    int      n_batch;         /* requested max batch; the plan may lower it */
    int      n_logits;        /* logits rows kept per batch (speculative decoding verifies n_logits - 1
                               * drafts in a pass); 0 or 1: the last position only */
    int      n_threads;
    int      n_parallel;      /* sequences decoded together (sluice serve --parallel): a KV cache each, one
                               * batch workspace; 0 or 1: one sequence (a plain context) */
    double   disk_bw;         /* bytes/s, O_DIRECT sequential (0: unknown, reads cost no time) */
    double   compute_bw;      /* bytes of weights per second the kernels process (decode), for any
                               * type without its own rate below (0: unknown, compute is free) */
    double   type_bw[SL_TYPE_COUNT];   /* per weight type (runtime/plan/computeprobe.h); 0: compute_bw */
    char     disk_how[320];   /* where the rates came from, for printing (not used by the planner) */
    char     compute_how[640];
    bool     allow_spill;     /* KV may live in a file (the engine supports it) */
    bool     allow_q8_kv;
    bool     buffered;        /* pieces are read through the page cache (no O_DIRECT): counted twice */
    int      ring_slack;      /* sliding-window blocks keep window + ring_slack positions of KV (a ring,
                               * runtime/engine/kvcache.h); 0: n_batch + SL_RING_ROLLBACK; < 0: no ring */
} sl_plan_req;

typedef struct sl_plan {
    bool     feasible;
    bool     all_resident;    /* plain resident mode: nothing streams */
    uint64_t min_budget;      /* the least budget that works at this -c */
    char     why[512];        /* infeasible: what dominates the minimum, what to try */

    /* fixed costs */
    uint64_t base_bytes;      /* code, libraries, stacks, allocator slack */
    uint64_t meta_bytes, vocab_bytes, norm_bytes;
    uint64_t act_bytes;       /* activations and scratch for n_batch positions, logits, sampler; with
                               * n_parallel > 1 the batch workspace + each sequence's context and sampler */
    int      n_batch;

    /* KV cache */
    int      kv;              /* enum sl_plan_kv */
    uint64_t kv_bytes;        /* resident KV bytes (spill: one layer's buffer), all sequences */
    uint64_t kv_file_bytes;   /* spill: size of the KV files, all sequences */
    uint64_t kv_full_bytes;   /* what kv_bytes (spill: kv_file_bytes) would be if every block kept the
                               * whole context (no rings): for printing */
    int      kv_ring_rows;    /* rows of the largest ring (0: no block keeps a ring) */
    int      kv_ring_layers;  /* blocks that keep a ring */

    /* weights */
    bool     layer_resident[SL_PLAN_MAX_LAYERS][SL_BLOCK_MATS];   /* absent matrices count as resident */
    bool     lm_head_resident;
    /* routed experts: all resident (an all-resident plan), or read when a token picks one and kept in
     * the expert cache (runtime/engine/expert_cache.h), which takes every byte the dense weights leave */
    bool     experts_resident[SL_PLAN_MAX_LAYERS];   /* dense blocks: true */
    uint64_t expert_cache_bytes;    /* memory given to the expert cache (0: none) */
    int64_t  expert_cache_entries;  /* experts it holds (of n_layers * expert_count) */
    double   expert_hit_rate;       /* the hit rate the prediction assumes: entries / experts (uniform,
                                     * independent routing: what an LRU cache of that share hits; trained
                                     * models route with locality and hit more) */
    int      n_layers_resident;   /* blocks whose matrices are all resident (a MoE block's routed experts are
                                   * the expert cache's, counted apart) */
    uint64_t resident_bytes;  /* weights held in memory */
    uint64_t stream_bytes;    /* weights read per token (one pass): dense streamed matrices, the LM head if
                               * streamed, and the routed experts a token takes (expert_used_count of each
                               * block whose experts stream) */
    uint64_t expert_stream_bytes;   /* of stream_bytes: the routed experts' share */
    uint64_t expert_pass_bytes;     /* with n_parallel > 1: the routed-expert bytes a pass of n_parallel tokens
                                     * reads, the union of their experts (uniform, independent routing:
                                     * n_expert x (1 - (1 - used/n_expert)^N) per block, times the miss rate) */

    /* streaming */
    uint64_t chunk_bytes;     /* row-chunk size (0: whole tensors) */
    int      prefetch;
    int      lm_head_rows;
    uint64_t stream_buf_bytes;/* slots x (largest piece + O_DIRECT slack), both readers */

    uint64_t total_bytes;     /* everything above: <= budget when feasible */
    uint64_t read_per_token;  /* weights + embedding row + KV spill traffic */
    double   pred_tok_s;      /* decode prediction: 1 / pred_token_s */
    double   pred_token_s;    /* one decode token, reads overlapping compute as the reader allows */
    double   pred_io_s, pred_compute_s;   /* per token: disk busy time, compute time */
    /* with n_parallel sequences: one pass carries a token of each; its compute counted n_parallel
     * times one token's (an upper bound: the batched kernels unpack each weight row once per 4) */
    int      n_parallel;
    double   pred_pass_s;     /* one pass of n_parallel tokens */
    double   pred_req_tok_s;  /* each request's decode rate: 1 / pred_pass_s */
    double   pred_agg_tok_s;  /* all of them: n_parallel / pred_pass_s */
} sl_plan;

/* The minimum budget as one whole number of MiB, rounded up: the figure `sluice plan`, the
 * infeasible-budget error and its "try --ram-budget" hint all give (that many MiB always suffice). */
static inline uint64_t sl_plan_min_mib(uint64_t min_budget) { return (min_budget + (1u << 20) - 1) >> 20; }

/* Fill pm from an opened model (only the table; no I/O). */
void sl_plan_model_from(sl_plan_model *pm, const sl_model *m, uint64_t vocab_bytes);

/* Make the plan.  Returns 0 with plan->feasible set, or -ENOSPC (plan->why explains, min_budget
 * says how much would work), or -EINVAL for a bad request. */
int sl_plan_make(const sl_plan_model *pm, const sl_plan_req *req, sl_plan *plan);

/* Apply a feasible plan to a model: set each weight's stream flag. */
void sl_plan_apply(const sl_plan *p, sl_model *m);

/* The fixed costs the planner charges before anything else: runtime, metadata, tokenizer, norms.
 * What the process already holds once a model is open, before its plan is applied. */
uint64_t sl_plan_fixed_bytes(const sl_plan_model *pm);

/* Fill req->compute_bw, type_bw and compute_how for model m (pm made from it; req->budget and
 * n_threads set), and req->disk_bw / disk_how when the disk rate is given: disk_gbs > 0 (--disk-bw
 * GB/s); otherwise disk_bw is left 0 for sl_plan_disk_rate, once the plan says how the run reads.
 * compute_gbs > 0 is used as given (--compute-bw); otherwise the compute rate is measured once per
 * kernel path, thread count and weight type (runtime/plan/computeprobe.h), its probe matrix kept within
 * what the budget leaves above the fixed costs.  Does I/O: not part of the pure planner. */
void sl_plan_rates(const sl_model *m, const sl_plan_model *pm, sl_plan_req *req, double disk_gbs, double compute_gbs);

/* For a plan made without a disk rate (req->disk_bw 0): measure how fast the model file reads the
 * way this plan streams it — `backend` (enum sl_io_backend; buffered when no_direct), the plan's
 * piece size, prefetch + 1 pieces in flight (runtime/plan/diskprobe.h; cached per configuration unless
 * `fresh`) — set req->disk_bw and disk_how, and redo the prediction.  The plan's decisions do not
 * depend on the disk rate, only its prediction does.  An all-resident plan reads nothing: no probe. */
void sl_plan_disk_rate(const sl_model *m, const sl_plan_model *pm, sl_plan_req *req, sl_plan *plan, int backend,
                       bool no_direct, bool fresh);

/* Redo plan's pred_* fields from req's rates (sl_plan_make does this already). */
void sl_plan_predict(const sl_plan_model *pm, const sl_plan_req *req, sl_plan *plan);

/* ---- smaller files of the same model (runtime/plan/plan_alt.c) --------------------------------- */

/* pm as the file llama-quantize would write in file type ftype (enum sl_ftype, loader/ftype.h): the
 * same shapes, each matrix in the type of that file type's mix (the table sluice-gen writes from),
 * file_bytes adjusted.  false for an ftype the table does not know or a row the types cannot hold. */
bool sl_plan_model_as(const sl_plan_model *pm, int ftype, sl_plan_model *out);

/* One smaller file type's plan under the same request. */
typedef struct sl_plan_alt {
    int ftype;
    const char *name;         /* "Q3_K_M" */
    uint64_t file_bytes;
    bool feasible, all_resident;
    uint64_t stream_bytes, read_per_token;
    double pred_tok_s;
} sl_plan_alt;

#define SL_PLAN_MAX_ALTS 16

/* For every known file type whose file of this model would be at least 1% smaller than pm's, largest
 * first: its plan made with req (same budget and rates; a type without a rate in req->type_bw takes
 * compute_bw, so measure them first: sl_plan_alt_rates).  Returns how many (<= max). */
int sl_plan_alternatives(const sl_plan_model *pm, const sl_plan_req *req, sl_plan_alt *out, int max);

/* bytes[t]: matrix bytes of type t over all those smaller files (which types they need rates for). */
void sl_plan_alt_bytes_by_type(const sl_plan_model *pm, uint64_t bytes[SL_TYPE_COUNT]);

/* Fill req->type_bw for the types the smaller files use and this model does not, measured like
 * sl_plan_rates measures this model's (cached; within the budget's room).  Does nothing when the
 * compute rate was given (no per-type rates).  Does I/O. */
void sl_plan_alt_rates(const sl_plan_model *pm, sl_plan_req *req);

/* Human-readable table (sluice plan) and JSON.  A streaming plan also lists the smaller files
 * (sl_plan_alternatives). */
void sl_plan_print(const sl_plan *p, const sl_plan_model *pm, const sl_plan_req *req, void *FILE_out);
void sl_plan_print_json(const sl_plan *p, const sl_plan_model *pm, const sl_plan_req *req, void *FILE_out);

/* Budget "auto": MemAvailable and the cgroup limit, whichever is lower, minus a safety margin.
 * Writes how it was derived into `how`.  0 if unknown. */
uint64_t sl_plan_auto_budget(char *how, size_t howlen);

#endif
