/* runtime/plan/planner.c — deciding what stays resident under a RAM budget.
 *
 * Cost model (all bytes the process holds):
 *   base      code, libraries, thread stacks, allocator slack (constant, measured: a resident run of
 *             the 1.2 MB bundled model peaks at 3.6 MiB RSS; 6 MiB leaves room for liburing/zstd/stacks)
 *   meta      the GGUF metadata copy; vocab: the tokenizer's tables; norms: f32 norm vectors
 *   act       activations for n_batch positions + attention scores + logits + sampler candidates
 *   kv        KV cache: f16 if it fits, else q8_0 (34 bytes per 32 values), else spilled to a file
 *             with one layer's f16 K and V in memory
 *   stream    (pieces in flight + the one computing) x (largest piece + O_DIRECT slack) + bounce buffer
 *   resident  weights pinned in memory
 * Every weight byte is read once per token whether it belongs to a block or the LM head, so each
 * resident byte saves exactly one byte of reading per token: any packing that fills the budget is
 * optimal for bytes read.  Among equal packings we prefer units that also remove per-piece overhead:
 * the LM head (read in the most pieces), then whole blocks, then single tensors of the next block.
 * The embedding table is never pinned: it costs one row per token streamed, and the full table
 * would save only that row.
 */
#include "runtime/plan/planner.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm.h"
#include "kernels/ops.h"
#include "kernels/scratch.h"
#include "runtime/engine/expert_cache.h"
#include "runtime/engine/forward.h"
#include "runtime/engine/kvcache.h"
#include "runtime/engine/stream.h"

#define MiB (1024.0 * 1024.0)
#define BASE_BYTES (6ull << 20)

void sl_plan_model_from(sl_plan_model *pm, const sl_model *m, uint64_t vocab_bytes)
{
    memset(pm, 0, sizeof *pm);
    pm->cfg = m->cfg;
    for (int l = 0; l < m->cfg.n_layers && l < SL_PLAN_MAX_LAYERS; l++) {
        for (int i = 0; i < SL_BLOCK_MATS; i++) {
            const sl_weight *w = &m->layers[l].mat[i];
            if (!sl_weight_present(w)) continue;
            pm->tensor_bytes[l][i] = w->nbytes;
            pm->tensor_row_bytes[l][i] = w->row_bytes;
            pm->tensor_type[l][i] = w->type;
        }
    }
    for (int l = 0; l < m->cfg.n_layers && l < SL_PLAN_MAX_LAYERS; l++) {
        if (!m->layers[l].moe) continue;
        for (int k = 0; k < SL_EXPERT_MATS; k++) {
            const sl_weight *w = sl_expert_weight(&m->layers[l], 0, k);
            pm->expert_bytes[l][k] = w->nbytes;
            pm->expert_row_bytes[l][k] = w->row_bytes;
            pm->expert_type[l][k] = w->type;
        }
    }
    pm->lm_head_bytes = m->output.nbytes;
    pm->lm_head_row_bytes = m->output.row_bytes;
    pm->lm_head_type = m->output.type;
    pm->embd_bytes = m->tok_embd.nbytes;
    pm->embd_row_bytes = m->tok_embd.row_bytes;
    pm->tied = m->tied;
    for (int k = 0; k < m->arch->n_mats; k++) pm->fused_qkv |= m->arch->mats[k].fused == SL_FUSED_QKV;
    pm->norm_bytes = m->norm_bytes;
    pm->meta_bytes = sl_gguf_meta_bytes(m->gguf);
    pm->vocab_bytes = vocab_bytes;
    pm->file_bytes = sl_gguf_file_size(m->gguf);
    for (int l = 0; l < m->cfg.n_layers && l < SL_PLAN_MAX_LAYERS; l++) pm->window[l] = m->layers[l].window;
}

/* Contract: see planner.h (the same fixed costs sl_plan_make charges first). */
uint64_t sl_plan_fixed_bytes(const sl_plan_model *pm)
{
    return BASE_BYTES + pm->meta_bytes + pm->vocab_bytes + pm->norm_bytes;
}

/* Sequences the plan holds (>= 1). */
static int n_par(const sl_plan_req *req) { return req->n_parallel > 1 ? req->n_parallel : 1; }

/* Activations and scratch, as the forward pass allocates them (sl_ctx_bytes without the KV cache):
 * one context for n_batch positions, keeping the logits rows a verifying pass needs (the last
 * n_logits positions, at most a batch: runtime/api/api_ctx.c); or, for n_parallel
 * sequences, the batch workspace (n_batch positions, n_logits rows of logits per sequence) and each
 * sequence's own context (one position), plus a sampler each. */
/* The matrix products' per-thread buffers (kernels/scratch.h) at the widest input a product takes:
 * the quantized activations of a batch of B, prepared on one thread (kernels/ops.h), and each
 * thread's unpacked weight block of the batched GEMMs (kernels/gemm.h), counted as the buffers grow. */
static uint64_t mm_scratch_bytes(const sl_config *c, int B, int threads)
{
    int64_t w = c->dim;
    const int64_t widths[] = { (int64_t)c->n_heads * c->head_dim, c->ffn_dim, c->expert_ffn, c->shexp_ffn };
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
        if (widths[i] > w) w = widths[i];
    return sl_scratch_cap(sl_mm_scratch_bytes(w, B)) + (uint64_t)threads * sl_scratch_cap(sl_gemm_scratch_bytes(w, B));
}

static uint64_t act_bytes(const sl_plan_model *pm, int B, const sl_plan_req *req)
{
    const sl_config *c = &pm->cfg;
    const int n_ctx = req->n_ctx, threads = req->n_threads > 0 ? req->n_threads : 1;
    int np = n_par(req);
    uint64_t scratch;
    if (np <= 1) {
        const int rows = req->n_logits > 1 ? (req->n_logits < B ? req->n_logits : B) : 1;
        sl_ctx_params one = { .n_ctx = n_ctx, .n_batch = B, .n_logits = rows, .no_kv = true };
        scratch = sl_ctx_bytes(c, &one, threads);
    } else {
        /* the workspace keeps a logits row per position every sequence's verifying span may have
         * (runtime/api/api_batch.c sluice_batch_new: the server drafts in the batch) */
        const int per_seq = req->n_logits > 1 ? req->n_logits : 1;
        const int rows = (int64_t)np * per_seq < B ? np * per_seq : B;
        sl_ctx_params work = { .n_ctx = n_ctx, .n_batch = B, .n_logits = rows, .no_kv = true };
        sl_ctx_params seq = { .n_ctx = n_ctx, .n_batch = 1, .no_kv = true };
        scratch = sl_ctx_bytes(c, &work, threads) + (uint64_t)np * sl_ctx_bytes(c, &seq, threads);
    }
    return scratch + (uint64_t)np * (uint64_t)c->vocab * 8 +          /* sampler candidates */
           pm->embd_row_bytes + (uint64_t)c->dim * 4 +                 /* embedding row */
           mm_scratch_bytes(c, B, threads);
}

/* The ring slack the request asks for (sl_plan_req.ring_slack; the engine's default rule). */
static int ring_slack(const sl_plan_req *req)
{
    return req->ring_slack ? req->ring_slack : req->n_batch + SL_RING_ROLLBACK;
}

/* Every sequence's KV cache, counted by block kind: a full-attention block keeps n_ctx positions, a
 * sliding-window block a ring of window + slack (runtime/engine/kvcache.h; slack < 0: no rings).
 * Spill: one block's K and V in f16 per sequence (the largest block's). */
static uint64_t kv_bytes_slack(const sl_plan_model *pm, int slack, int n_ctx, int kv, int n_par)
{
    const sl_config *c = &pm->cfg;
    const uint64_t kvd = (uint64_t)c->n_kv_heads * c->head_dim, n = (uint64_t)(n_par > 1 ? n_par : 1);
    uint64_t sum = 0, mx = 0;
    for (int l = 0; l < c->n_layers && l < SL_PLAN_MAX_LAYERS; l++) {
        uint64_t vals = 2ull * (uint64_t)sl_kv_ring_rows(pm->window[l], n_ctx, slack) * kvd;   /* K and V values */
        sum += vals;
        if (vals > mx) mx = vals;
    }
    switch (kv) {
    case SL_PLAN_KV_F16: return n * sum * 2;
    case SL_PLAN_KV_Q8_0: return n * (sum / 32 * 34);
    default: return n * mx * 2;
    }
}

static uint64_t kv_bytes(const sl_plan_model *pm, const sl_plan_req *req, int n_ctx, int kv, int n_par)
{
    return kv_bytes_slack(pm, ring_slack(req), n_ctx, kv, n_par);
}

/* The plan's KV figures for printing: the full-context size beside the rings'. */
static void kv_figures(const sl_plan_model *pm, const sl_plan_req *req, sl_plan *p)
{
    const int NP = n_par(req), slack = ring_slack(req);
    const int kind = p->kv == SL_PLAN_KV_SPILL ? SL_PLAN_KV_F16 : p->kv;
    p->kv_full_bytes = kv_bytes_slack(pm, -1, req->n_ctx, kind, NP);
    p->kv_ring_rows = p->kv_ring_layers = 0;
    for (int l = 0; l < pm->cfg.n_layers && l < SL_PLAN_MAX_LAYERS; l++) {
        int r = sl_kv_ring_rows(pm->window[l], req->n_ctx, slack);
        if (r == req->n_ctx) continue;
        p->kv_ring_layers++;
        if (r > p->kv_ring_rows) p->kv_ring_rows = r;
    }
}

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* One routed expert's bytes in block l (0: a dense block). */
static uint64_t expert_size(const sl_plan_model *pm, int l)
{
    uint64_t s = 0;
    for (int k = 0; k < SL_EXPERT_MATS; k++) s += pm->expert_bytes[l][k];
    return s;
}

/* All of block l's routed experts, and what a token reads of them when they stream. */
static uint64_t experts_all(const sl_plan_model *pm, int l) { return (uint64_t)pm->cfg.n_expert * expert_size(pm, l); }
static uint64_t experts_per_token(const sl_plan_model *pm, int l) { return (uint64_t)pm->cfg.n_expert_used * expert_size(pm, l); }

/* The largest piece of a matrix of `bytes` in rows of `rb` cut into chunks of at most `chunk` bytes
 * (a chunk holds at least one row; chunk 0: the whole matrix). */
static uint64_t piece_of(uint64_t bytes, uint64_t rb, uint64_t chunk)
{
    uint64_t piece = chunk ? max_u64(rb, chunk / rb * rb) : bytes;
    return piece > bytes ? bytes : piece;
}

/* Largest piece of the dense schedule when streamed tensors are cut into chunks of at most `chunk`
 * bytes and the LM head into `head_rows` rows. */
static uint64_t largest_piece(const sl_plan_model *pm, const sl_plan *p, uint64_t chunk)
{
    uint64_t mx = 0;
    for (int l = 0; l < pm->cfg.n_layers; l++)
        for (int i = 0; i < SL_BLOCK_MATS; i++) {
            if (p->layer_resident[l][i] || !pm->tensor_bytes[l][i]) continue;
            mx = max_u64(mx, piece_of(pm->tensor_bytes[l][i], pm->tensor_row_bytes[l][i], chunk));
        }
    if (!p->lm_head_resident) mx = max_u64(mx, (uint64_t)p->lm_head_rows * pm->lm_head_row_bytes);
    return mx;
}

/* Largest piece of the routed experts that stream (runtime/engine/stream.c cuts them like the dense
 * matrices); 0 when none does. */
static uint64_t largest_expert_piece(const sl_plan_model *pm, const sl_plan *p, uint64_t chunk)
{
    uint64_t mx = 0;
    for (int l = 0; l < pm->cfg.n_layers; l++)
        for (int k = 0; k < SL_EXPERT_MATS && !p->experts_resident[l]; k++)
            if (pm->expert_bytes[l][k]) mx = max_u64(mx, piece_of(pm->expert_bytes[l][k], pm->expert_row_bytes[l][k], chunk));
    return mx;
}

/* What loader/io.c allocates for (prefetch + 1) slots: each piece rounded up to pages plus a page of
 * O_DIRECT slack, the bounce buffer for embedding rows (the read chunk: the piece size clamped to
 * [256 KiB, 4 MiB], see runtime/engine/stream.c), and one embedding row.  Buffered reads (no O_DIRECT)
 * also hold each requested piece in the page cache until it is released (and dropped): counted once
 * more, with the two pages a range can straddle. */
static uint64_t reader_buf(const sl_plan_req *req, uint64_t piece, int slots)
{
    uint64_t bounce = sl_stream_read_chunk(piece);
    /* loader/io.c's slot: the piece in whole pages plus one page of O_DIRECT slack (its alignment is
     * at least a page), at the run-time page size */
    const uint64_t pg = sl_page_size(), whole = (piece + pg - 1) / pg * pg;
    uint64_t slot = whole + pg;
    if (req->buffered) slot += whole + 2 * pg;
    return (uint64_t)slots * slot + bounce;
}

/* Both readers of runtime/engine/stream.c: the dense schedule's prefetch + 1 slots (sized 4 KiB when
 * only experts stream: the reader is still opened, for the embedding rows), and the expert reader's
 * sl_stream_expert_slots when routed experts stream. */
static uint64_t stream_buf(const sl_plan_model *pm, const sl_plan_req *req, const sl_plan *p, uint64_t chunk,
                           int prefetch)
{
    uint64_t piece = largest_piece(pm, p, chunk), epiece = largest_expert_piece(pm, p, chunk);
    if (!piece && !epiece) return 0;
    uint64_t b = reader_buf(req, piece ? piece : 4096, prefetch + 1) + pm->embd_row_bytes;
    if (epiece) b += reader_buf(req, epiece, sl_stream_expert_slots(&pm->cfg));
    return b;
}


/* ---- prediction --------------------------------------------------------------------------------
 * A decode token walks the blocks in order, then the LM head.  Resident matrices compute at once;
 * streamed ones are cut into the pieces runtime/engine/stream.c reads (chunk_bytes, LM head lm_head_rows
 * rows), and the reader keeps prefetch + 1 pieces requested ahead of the one computing.  So reads
 * overlap compute only within that window: while a long run of resident weights computes (the LM
 * head and the first blocks, which follow each other from one token to the next), the disk reads
 * the window's few MiB and then idles.  max(I/O, compute) ignores that.  In bench/budget_bench.sh's
 * llama3-8b runs at 4 GiB (2026-11-30, uring: 27 blocks + head pinned, 1.08 s per token) compute
 * still waited 0.25 s per token for streamed pieces and computed on them 0.14 s, although the rest
 * of the token (~0.7 s, the pinned weights) was longer than all of the token's reading could have
 * taken (<= 0.39 s): the reads had not overlapped it.
 * The token is therefore simulated: one disk serving requests in order at disk_bw, compute in
 * forward order at the per-type rates.  Synchronous reads (the token's embedding row, the spilled
 * KV cache of each layer at full context: the worst case) hold up compute and the disk alike.
 * Not modelled: attention and the other per-token work outside matrix products (small at short
 * contexts), and per-piece costs beyond bytes / rate (thread wake-ups after an I/O wait), which the
 * disk hides whenever it is the bottleneck. */

#define SIM_RING SL_STREAM_RING

typedef struct sim {
    double bw;                /* disk bytes/s; 0: reads are free */
    int depth;                /* pieces requested ahead, including the one computing */
    double t;                 /* compute clock */
    double disk_free;         /* when the disk finishes what it has been asked for */
    double released[SIM_RING];/* when piece k finished computing (k % SIM_RING) */
    uint64_t k;               /* streamed pieces so far */
} sim;

/* Contract: seconds to compute `bytes` of `type` at the request's rate for that type. */
static double compute_s(const sl_plan_req *req, int type, uint64_t bytes)
{
    double r = type >= 0 && type < SL_TYPE_COUNT && req->type_bw[type] > 0 ? req->type_bw[type] : req->compute_bw;
    return r > 0 ? bytes / r : 0;
}

/* Contract: a synchronous read of `bytes` when compute gets to it: compute waits for it, and the
 * pieces queued on the disk wait as long (the device serves it alongside them; its time is taken
 * from theirs). */
static void sim_sync_read(sim *s, uint64_t bytes)
{
    double d = s->bw > 0 ? bytes / s->bw : 0;
    s->disk_free = (s->disk_free > s->t ? s->disk_free : s->t) + d;
    s->t += d;
}

/* Contract: one streamed piece: requested when the piece `depth` places earlier was released (or
 * at once for the first ones), read after everything requested before it, computed once read and
 * once the previous compute is done. */
static void sim_piece(sim *s, uint64_t len, double c)
{
    double req = s->k >= (uint64_t)s->depth ? s->released[(s->k - (uint64_t)s->depth) % SIM_RING] : 0;
    double done = (s->disk_free > req ? s->disk_free : req) + (s->bw > 0 ? len / s->bw : 0);
    s->disk_free = done;
    s->t = (s->t > done ? s->t : done) + c;
    s->released[s->k % SIM_RING] = s->t;
    s->k++;
}

/* Contract: a matrix of `bytes` in rows of `row_bytes`: computed in place when resident, else as
 * pieces of `rows_per_piece` rows. */
static void sim_matrix(sim *s, const sl_plan_req *req, bool resident, uint64_t bytes, uint64_t row_bytes, int type,
                       uint64_t rows_per_piece)
{
    if (resident || !row_bytes) { s->t += compute_s(req, type, bytes); return; }
    uint64_t rows = bytes / row_bytes;
    if (rows_per_piece < 1) rows_per_piece = 1;
    for (uint64_t r = 0; r < rows; r += rows_per_piece) {
        uint64_t len = (rows - r < rows_per_piece ? rows - r : rows_per_piece) * row_bytes;
        sim_piece(s, len, compute_s(req, type, len));
    }
}

/* Contract: the distinct experts a pass of `ntok` tokens takes in a block, expected under uniform,
 * independent routing: each token takes expert_used_count of n_expert, so an expert is taken by none
 * of them with probability (1 - used/n_expert)^ntok.  One token: expert_used_count. */
static double experts_taken(const sl_plan_model *pm, double ntok)
{
    const double E = pm->cfg.n_expert, k = pm->cfg.n_expert_used;
    if (ntok <= 1 || E <= k || k <= 0) return k;
    return E * (1 - pow(1 - k / E, ntok));
}

/* Contract: the experts a pass of `ntok` tokens takes in block l (the union of theirs,
 * experts_taken), computed from memory or read as pieces like the dense matrices.  `req`'s rates are
 * already divided by ntok (sim_pass): computing expert_used_count experts' bytes at them is the
 * pass's expert compute, spread here over the union's bytes. */
static void sim_experts(sim *s, const sl_plan_req *req, const sl_plan_model *pm, const sl_plan *p, int l, double ntok)
{
    const double miss = p->experts_resident[l] ? 0 : 1 - p->expert_hit_rate;
    const double taken = experts_taken(pm, ntok);
    sl_plan_req r = *req;   /* the union's bytes at the rates that give expert_used_count experts' time */
    r.compute_bw *= taken / pm->cfg.n_expert_used;
    for (int t = 0; t < SL_TYPE_COUNT; t++) r.type_bw[t] *= taken / pm->cfg.n_expert_used;
    for (int k = 0; k < SL_EXPERT_MATS && expert_size(pm, l); k++) {
        const uint64_t rb = pm->expert_row_bytes[l][k];
        const uint64_t all = (uint64_t)(taken * (double)pm->expert_bytes[l][k] + 0.5);
        const uint64_t read = rb ? (uint64_t)(miss * (double)(all / rb) + 0.5) * rb : 0;
        s->t += compute_s(&r, pm->expert_type[l][k], all - read);   /* hits compute from memory */
        sim_matrix(s, &r, !read, read, rb, pm->expert_type[l][k],
                   p->chunk_bytes && rb ? p->chunk_bytes / rb : (rb ? pm->expert_bytes[l][k] / rb : 1));
    }
}

/* Contract: seconds of one pass over the weights that computes `scale` tokens (their matrix products
 * counted scale times one token's) and synchronously reads `spill_layer` bytes of spilled KV per
 * block; the plan's resident flags, pieces and KV mode set. */
static double sim_pass(const sl_plan_model *pm, const sl_plan_req *req, const sl_plan *p, double scale,
                       uint64_t spill_layer)
{
    const int L = pm->cfg.n_layers;
    if (p->all_resident) return p->pred_compute_s * scale;
    int64_t pieces = 0;
    for (int l = 0; l < L; l++)
        for (int i = 0; i < SL_BLOCK_MATS; i++)
            if (!p->layer_resident[l][i] && pm->tensor_row_bytes[l][i]) {
                uint64_t rows = pm->tensor_bytes[l][i] / pm->tensor_row_bytes[l][i];
                uint64_t rpp = p->chunk_bytes ? p->chunk_bytes / pm->tensor_row_bytes[l][i] : rows;
                if (rpp < 1) rpp = 1;
                pieces += (int64_t)((rows + rpp - 1) / rpp);
            }
    for (int l = 0; l < L; l++)
        for (int k = 0; k < SL_EXPERT_MATS && !p->experts_resident[l]; k++)
            if (pm->expert_row_bytes[l][k]) {
                uint64_t piece = piece_of(pm->expert_bytes[l][k], pm->expert_row_bytes[l][k], p->chunk_bytes);
                pieces += (int64_t)ceil(experts_taken(pm, scale)) * (int64_t)((pm->expert_bytes[l][k] + piece - 1) / piece);
            }
    if (!p->lm_head_resident && pm->lm_head_row_bytes) {
        uint64_t rpp = (uint64_t)(p->lm_head_rows > 0 ? p->lm_head_rows : 1024);
        pieces += (int64_t)((pm->lm_head_bytes / pm->lm_head_row_bytes + rpp - 1) / rpp);
    }
    sl_plan_req r = *req;   /* scale tokens of compute: the rates divided by scale */
    r.compute_bw /= scale;
    for (int t = 0; t < SL_TYPE_COUNT; t++) r.type_bw[t] /= scale;
    sim s = { .bw = req->disk_bw > 0 ? req->disk_bw : 0, .depth = p->prefetch + 1 };
    if (s.depth > SIM_RING) s.depth = SIM_RING;
    if (pieces && s.depth > pieces) s.depth = (int)pieces;
    if (s.depth < 1) s.depth = 1;
    double t_pass[3];
    /* three passes: the first starts with an idle disk; the last is the steady state */
    for (int pass = 0; pass < 3; pass++) {
        for (int k = 0; k < (int)scale; k++) sim_sync_read(&s, pm->embd_row_bytes);
        for (int l = 0; l < L; l++) {
            if (spill_layer) sim_sync_read(&s, spill_layer);
            for (int i = 0; i < SL_BLOCK_MATS; i++) {
                if (i == SL_MAT_GATE) sim_experts(&s, &r, pm, p, l, scale);   /* the routed experts sit after attention */
                uint64_t rb = pm->tensor_row_bytes[l][i];
                sim_matrix(&s, &r, p->layer_resident[l][i], pm->tensor_bytes[l][i], rb, pm->tensor_type[l][i],
                           p->chunk_bytes && rb ? p->chunk_bytes / rb : (rb ? pm->tensor_bytes[l][i] / rb : 1));
            }
        }
        sim_matrix(&s, &r, p->lm_head_resident, pm->lm_head_bytes, pm->lm_head_row_bytes, pm->lm_head_type,
                   (uint64_t)(p->lm_head_rows > 0 ? p->lm_head_rows : 1024));
        t_pass[pass] = s.t;
    }
    return t_pass[2] - t_pass[1];
}

/* Contract: fills pred_* of a feasible plan p (its resident flags, pieces and KV mode set). */
static void predict(const sl_plan_model *pm, const sl_plan_req *req, sl_plan *p)
{
    const int L = pm->cfg.n_layers, NP = p->n_parallel > 1 ? p->n_parallel : 1;
    double comp = compute_s(req, pm->lm_head_type, pm->lm_head_bytes);
    for (int l = 0; l < L; l++) {
        for (int i = 0; i < SL_BLOCK_MATS; i++) comp += compute_s(req, pm->tensor_type[l][i], pm->tensor_bytes[l][i]);
        for (int k = 0; k < SL_EXPERT_MATS; k++)
            comp += pm->cfg.n_expert_used * compute_s(req, pm->expert_type[l][k], pm->expert_bytes[l][k]);
    }
    p->pred_compute_s = comp;
    p->pred_io_s = req->disk_bw > 0 ? p->read_per_token / req->disk_bw : 0;
    /* spilled KV: each sequence reads its own layer of K and V per block, at full context (the worst case) */
    const uint64_t spill_layer = p->kv == SL_PLAN_KV_SPILL && L ? p->kv_file_bytes / (uint64_t)NP / (uint64_t)L : 0;
    p->pred_token_s = sim_pass(pm, req, p, 1, spill_layer);
    p->pred_tok_s = p->pred_token_s > 0 ? 1 / p->pred_token_s : 0;
    p->pred_pass_s = NP > 1 ? sim_pass(pm, req, p, NP, spill_layer * (uint64_t)NP) : p->pred_token_s;
    p->expert_pass_bytes = 0;
    for (int l = 0; NP > 1 && pm->cfg.n_expert_used > 0 && l < L; l++)
        if (!p->experts_resident[l])
            p->expert_pass_bytes += (uint64_t)((1 - p->expert_hit_rate) * experts_taken(pm, NP) * (double)expert_size(pm, l));
    p->pred_req_tok_s = p->pred_pass_s > 0 ? 1 / p->pred_pass_s : 0;
    p->pred_agg_tok_s = p->pred_req_tok_s * NP;
}

/* Stage 1: does everything fit?  Then the plan is plain resident mode (the embedding table too:
 * resident mode reads nothing per token).  Returns true and fills p when it does. */
static bool plan_all_resident(const sl_plan_model *pm, const sl_plan_req *req, uint64_t fixed, uint64_t weights,
                              int B, sl_plan *p)
{
    const int NP = n_par(req);
    uint64_t tot = fixed + act_bytes(pm, B, req) + kv_bytes(pm, req, req->n_ctx, SL_PLAN_KV_F16, NP) + weights;
    if (tot > req->budget) return false;
    const int L = pm->cfg.n_layers;
    p->feasible = p->all_resident = true;
    p->n_batch = B;
    p->act_bytes = act_bytes(pm, B, req);
    p->kv = SL_PLAN_KV_F16;
    p->kv_bytes = kv_bytes(pm, req, req->n_ctx, SL_PLAN_KV_F16, NP);
    kv_figures(pm, req, p);
    for (int l = 0; l < L; l++) {
        for (int i = 0; i < SL_BLOCK_MATS; i++) p->layer_resident[l][i] = true;
        p->experts_resident[l] = true;
    }
    p->lm_head_resident = true;
    p->n_layers_resident = L;
    p->resident_bytes = weights;
    p->total_bytes = tot;
    predict(pm, req, p);
    return true;
}

/* The minimum budget's explanation: what dominates it and what to try (one figure, rounded up to a
 * MiB, for the message and the hint: sl_plan_min_mib). */
static void explain_minimum(const sl_plan_model *pm, const sl_plan_req *req, uint64_t fixed, int kv_min, int min_B,
                            uint64_t min_stream, uint64_t min_chunk, uint64_t min_act, sl_plan *p)
{
    const int NP = n_par(req);
    uint64_t kvb = kv_bytes(pm, req, req->n_ctx, kv_min, NP);
    const char *kvn = kv_min == SL_PLAN_KV_SPILL ? "one layer, rest spilled to disk" : kv_min == SL_PLAN_KV_Q8_0 ? "q8_0" : "f16";
    uint64_t min_mib = sl_plan_min_mib(p->min_budget);
    char par[64] = "";
    if (NP > 1) snprintf(par, sizeof par, " with --parallel %d (a KV cache per sequence)", NP);
    int n = snprintf(p->why, sizeof p->why,
                     "needs at least %" PRIu64 " MiB for this model at -c %d%s: KV cache%s %.1f MiB (%s), streaming buffers "
                     "%.1f MiB (4 x %.1f MiB pieces), tokenizer %.1f MiB, metadata %.1f MiB, activations %.1f MiB, "
                     "runtime %.0f MiB", min_mib, req->n_ctx, par, NP > 1 ? "s" : "", kvb / MiB, kvn, min_stream / MiB,
                     largest_piece(pm, p, min_chunk) / MiB, pm->vocab_bytes / MiB, pm->meta_bytes / MiB,
                     min_act / MiB, BASE_BYTES / MiB);
    /* a smaller context is suggested only when one fits this budget: the largest power-of-two
     * fraction of -c whose minimum does */
    int fit_ctx = 0;
    for (int ctx = req->n_ctx / 2; ctx >= 64 && !fit_ctx; ctx /= 2) {
        sl_plan_req r = *req;
        r.n_ctx = ctx;
        if (fixed + act_bytes(pm, min_B, &r) + kv_bytes(pm, req, ctx, kv_min, NP) + min_stream <= req->budget) fit_ctx = ctx;
    }
    if (fit_ctx)
        snprintf(p->why + n, sizeof p->why - (size_t)n, "; try -c %d%s or --ram-budget %" PRIu64 "M", fit_ctx,
                 NP > 1 ? ", fewer --parallel" : "", min_mib);
    else
        snprintf(p->why + n, sizeof p->why - (size_t)n, "; try %s--ram-budget %" PRIu64 "M", NP > 1 ? "fewer --parallel or " : "",
                 min_mib);
}

/* Stage 3: KV precision, spilled -> q8_0 -> f16, as far as *spare allows. */
static void grow_kv(const sl_plan_model *pm, const sl_plan_req *req, int kv_min, uint64_t *spare, sl_plan *p)
{
    const int NP = n_par(req);
    p->kv = kv_min;
    const int up[2] = { SL_PLAN_KV_Q8_0, SL_PLAN_KV_F16 };
    for (int k = 0; k < 2; k++) {
        if (up[k] == SL_PLAN_KV_Q8_0 && !req->allow_q8_kv) continue;
        uint64_t cur = kv_bytes(pm, req, req->n_ctx, p->kv, NP), nxt = kv_bytes(pm, req, req->n_ctx, up[k], NP);
        if (nxt <= cur) { p->kv = up[k]; continue; }
        if (nxt - cur > *spare) break;
        *spare -= nxt - cur;
        p->kv = up[k];
    }
    p->kv_bytes = kv_bytes(pm, req, req->n_ctx, p->kv, NP);
    if (p->kv == SL_PLAN_KV_SPILL) p->kv_file_bytes = kv_bytes(pm, req, req->n_ctx, SL_PLAN_KV_F16, NP);
    kv_figures(pm, req, p);
}

/* Stage 4: the prompt batch, doubling from min_B up to want_B. */
static void grow_batch(const sl_plan_model *pm, const sl_plan_req *req, int min_B, int want_B, uint64_t *spare,
                       sl_plan *p)
{
    int B = min_B;
    while (B < want_B) {
        int nb = B * 2 < want_B ? B * 2 : want_B;
        uint64_t d = act_bytes(pm, nb, req) - act_bytes(pm, B, req);
        if (d > *spare) break;
        *spare -= d;
        B = nb;
    }
    p->n_batch = B;
    p->act_bytes = act_bytes(pm, B, req);
}

/* Stage 5: piece size and prefetch, up a fixed ladder (only once the batch is complete). */
static void grow_pieces(const sl_plan_model *pm, const sl_plan_req *req, bool batch_done, uint64_t min_chunk,
                        uint64_t min_stream, uint64_t *spare, sl_plan *p)
{
    uint64_t chunk = min_chunk, buf = min_stream;
    int prefetch = 3;
    if (batch_done) {
        static const uint64_t ladder[][2] = { { 2u << 20, 3 }, { 4u << 20, 3 }, { 8u << 20, 3 } };
        for (size_t i = 0; i < sizeof ladder / sizeof *ladder; i++) {
            sl_plan t = *p;
            t.lm_head_rows = 1024;
            uint64_t nb = stream_buf(pm, req, &t, ladder[i][0], (int)ladder[i][1]);
            if (nb > buf && nb - buf > *spare) break;
            if (nb > buf) *spare -= nb - buf;
            buf = nb > buf ? nb : buf;
            chunk = ladder[i][0];
            prefetch = (int)ladder[i][1];
            p->lm_head_rows = 1024;
        }
    }
    p->chunk_bytes = chunk;
    p->prefetch = prefetch;
    p->stream_buf_bytes = buf;   /* sized with nothing pinned: pinning only shrinks the largest piece */
}

/* The expert cache of a plan with `avail` bytes left after the dense weights: as many entries (the
 * largest expert, 64-byte aligned, plus the cache's tables) as fit, at most one per expert.  Returns
 * its bytes. */
static uint64_t expert_cache(const sl_plan_model *pm, uint64_t avail, sl_plan *p)
{
    uint64_t eb = 0;
    int64_t units = 0;
    for (int l = 0; l < pm->cfg.n_layers; l++) {
        eb = max_u64(eb, expert_size(pm, l));
        units += expert_size(pm, l) ? pm->cfg.n_expert : 0;
    }
    if (!eb || !units) return 0;
    eb = (eb + 63) & ~(uint64_t)63;
    const uint64_t tables = (uint64_t)pm->cfg.n_layers * pm->cfg.n_expert * 12, per = eb + 48;
    if (avail <= tables + per) return 0;
    int64_t n = (int64_t)((avail - tables) / per);
    if (n > units) n = units;
    p->expert_cache_entries = n;
    p->expert_cache_bytes = (uint64_t)n * eb;
    p->expert_hit_rate = (double)n / (double)units;
    return (uint64_t)n * per + tables;
}

/* Stage 6: weights, first fit over (LM head, block 0's tensors, block 1's, ..., then block 0's routed
 * experts, block 1's, ...): each unit is pinned if it fits in what is left.  A dense byte pinned saves
 * a byte of reading per token, an expert byte only expert_used_count / expert_count of one: the
 * experts come last.  Returns the bytes pinned; *expert_res the routed experts' share. */
static uint64_t pin_weights(const sl_plan_model *pm, uint64_t avail, sl_plan *p, uint64_t *expert_res)
{
    uint64_t res = 0;
    if (!pm->tied && pm->lm_head_bytes <= avail) {
        p->lm_head_resident = true;
        avail -= pm->lm_head_bytes;
        res += pm->lm_head_bytes;
    }
    for (int l = 0; l < pm->cfg.n_layers; l++) {
        int pinned = 0;
        for (int i = 0; i < SL_BLOCK_MATS; i++) {
            if (pm->tensor_bytes[l][i] <= avail) {   /* an absent matrix (0 bytes) always "fits" */
                p->layer_resident[l][i] = true;
                avail -= pm->tensor_bytes[l][i];
                res += pm->tensor_bytes[l][i];
                pinned++;
            }
        }
        if (pinned == SL_BLOCK_MATS) p->n_layers_resident++;   /* a MoE block: its dense weights (experts: the cache) */
    }
    *expert_res = expert_cache(pm, avail, p);
    return res + *expert_res;
}

/* Stages, in the order the budget reaches them:
 *   1. everything resident, if it fits;
 *   2. the streaming minimum (the smallest batch: one position, or with parallel sequences one next
 *      token for each; the smallest KV; 1 MiB pieces; LM head in ~1 MiB pieces), or a refusal that
 *      says what it needs;
 *   3-6. what is above the minimum flows down a fixed order of uses, each taking what it can before the
 *      next gets anything: KV precision, prompt batch (up to -b), piece size and prefetch, then
 *      weights.  Because every stage's share only grows with the budget and weights come last, a
 *      larger budget never pins fewer weights: bytes read per token never increase
 *      (tests/test_planner.c checks this on a dense grid of budgets);
 *   7. the prediction (predict()). */
int sl_plan_make(const sl_plan_model *pm, const sl_plan_req *req, sl_plan *p)
{
    const sl_config *c = &pm->cfg;
    memset(p, 0, sizeof *p);
    if (c->n_layers < 1 || c->n_layers > SL_PLAN_MAX_LAYERS || req->n_ctx < 1 || req->n_batch < 1) {
        snprintf(p->why, sizeof p->why, "bad request (layers %d, context %d, batch %d)", c->n_layers, req->n_ctx, req->n_batch);
        return -EINVAL;
    }
    for (int l = 0; l < c->n_layers; l++) {   /* a matrix the block lacks costs nothing */
        for (int i = 0; i < SL_BLOCK_MATS; i++) p->layer_resident[l][i] = !pm->tensor_bytes[l][i];
        p->experts_resident[l] = !expert_size(pm, l);
    }
    const int L = c->n_layers, NP = n_par(req);
    p->n_parallel = NP;
    uint64_t weights = pm->lm_head_bytes * !pm->tied + pm->embd_bytes, experts = 0;
    for (int l = 0; l < L; l++) {
        for (int i = 0; i < SL_BLOCK_MATS; i++) weights += pm->tensor_bytes[l][i];
        experts += experts_all(pm, l);
    }

    p->base_bytes = BASE_BYTES;
    p->meta_bytes = pm->meta_bytes;
    p->vocab_bytes = pm->vocab_bytes;
    p->norm_bytes = pm->norm_bytes;
    const uint64_t fixed = p->base_bytes + p->meta_bytes + p->vocab_bytes + p->norm_bytes;
    const int want_B = req->n_batch < req->n_ctx ? req->n_batch : req->n_ctx, min_B = NP < want_B ? NP : want_B;

    /* 2. The streaming minimum.  1 MiB pieces with 3 in flight: this disk needs several reads
     *    outstanding to approach its sequential rate (docs/streaming.md); 4 slots of 1 MiB cost little
     *    even in a tight budget.  (Computed before stage 1: an all-resident plan still reports it.) */
    const uint64_t min_chunk = 1u << 20;
    int min_head_rows = (int)(min_chunk / (pm->lm_head_row_bytes ? pm->lm_head_row_bytes : 1));
    if (min_head_rows < 1) min_head_rows = 1;
    if (min_head_rows > 1024) min_head_rows = 1024;
    const int kv_min = req->allow_spill ? SL_PLAN_KV_SPILL : req->allow_q8_kv ? SL_PLAN_KV_Q8_0 : SL_PLAN_KV_F16;
    p->lm_head_rows = min_head_rows;
    const uint64_t min_stream = stream_buf(pm, req, p, min_chunk, 3);   /* nothing pinned yet: an upper bound */
    const uint64_t min_act = act_bytes(pm, min_B, req);
    p->min_budget = fixed + min_act + kv_bytes(pm, req, req->n_ctx, kv_min, NP) + min_stream;

    /* 1. */
    if (plan_all_resident(pm, req, fixed, weights + experts, want_B, p)) return 0;
    if (p->min_budget > req->budget) {
        explain_minimum(pm, req, fixed, kv_min, min_B, min_stream, min_chunk, min_act, p);
        return -ENOSPC;
    }

    /* 3-6. */
    uint64_t spare = req->budget - p->min_budget;
    grow_kv(pm, req, kv_min, &spare, p);
    grow_batch(pm, req, min_B, want_B, &spare, p);
    grow_pieces(pm, req, p->n_batch == want_B, min_chunk, min_stream, &spare, p);
    const bool stages_done = p->n_batch == want_B && p->chunk_bytes == (8u << 20);
    uint64_t expert_res = 0;
    const uint64_t res = stages_done ? pin_weights(pm, spare, p, &expert_res) : 0;
    p->resident_bytes = res;
    /* a tied LM head is the embedding table, which streams whole here (sl_plan_apply); a block's
     * streamed experts cost what a token takes of them */
    for (int l = 0; l < L; l++)
        if (!p->experts_resident[l])
            p->expert_stream_bytes += (uint64_t)((1 - p->expert_hit_rate) * (double)experts_per_token(pm, l));
    p->stream_bytes = weights - pm->embd_bytes - (res - expert_res) + (pm->tied ? pm->lm_head_bytes : 0) +
                      p->expert_stream_bytes;
    p->total_bytes = fixed + p->act_bytes + p->kv_bytes + p->stream_buf_bytes + res;
    p->feasible = p->total_bytes <= req->budget;
    if (!p->feasible) {   /* cannot happen by construction; refuse rather than overrun */
        snprintf(p->why, sizeof p->why, "internal: plan of %.1f MiB exceeds the budget", p->total_bytes / MiB);
        return -ENOSPC;
    }

    /* 7. */
    uint64_t spill_io = p->kv == SL_PLAN_KV_SPILL ? p->kv_file_bytes / (uint64_t)NP : 0;   /* worst case: full context */
    p->read_per_token = p->stream_bytes + pm->embd_row_bytes + spill_io;
    predict(pm, req, p);
    return 0;
}

void sl_plan_predict(const sl_plan_model *pm, const sl_plan_req *req, sl_plan *p)
{
    if (p->feasible) predict(pm, req, p);
}

void sl_plan_apply(const sl_plan *p, sl_model *m)
{
    for (int l = 0; l < m->cfg.n_layers; l++) {
        sl_layer *L = &m->layers[l];
        for (int i = 0; i < SL_BLOCK_MATS; i++) L->mat[i].stream = !p->layer_resident[l][i];
        for (int i = 0; L->moe && i < m->cfg.n_expert * SL_EXPERT_MATS; i++) L->experts[i].stream = !p->experts_resident[l];
    }
    m->tok_embd.stream = !p->all_resident;
    m->output.stream = !p->lm_head_resident;
    if (m->tied) m->output.stream = m->tok_embd.stream;
}
