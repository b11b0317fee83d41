/* runtime/plan/plan_print.c — the planner's impure companions: rendering a plan for people (table) and
 * programs (JSON), the auto budget, and the measured disk and compute rates a plan is made with. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/plan/computeprobe.h"
#include "runtime/plan/diskprobe.h"
#include "runtime/plan/planner.h"

#define MiB (1024.0 * 1024.0)

static const char *kv_name(int kv)
{
    return kv == SL_PLAN_KV_F16 ? "f16" : kv == SL_PLAN_KV_Q8_0 ? "q8_0" : "spilled to disk (f16)";
}

/* Contract: bytes of the matrices a decode token multiplies with (blocks and LM head). */
static double compute_weight_bytes(const sl_plan_model *pm)
{
    double b = (double)pm->lm_head_bytes;
    for (int l = 0; l < pm->cfg.n_layers && l < SL_PLAN_MAX_LAYERS; l++) {
        for (int i = 0; i < SL_BLOCK_MATS; i++) b += (double)pm->tensor_bytes[l][i];
        for (int k = 0; k < SL_EXPERT_MATS; k++) b += (double)pm->cfg.n_expert_used * (double)pm->expert_bytes[l][k];
    }
    return b;
}

/* Contract: bytes as "4.0 GB" / "310 MB" / "2.5 MB" (decimal units, as file sizes are quoted). */
static const char *human(uint64_t bytes, char *buf, size_t len)
{
    if (bytes >= 1000000000ull) snprintf(buf, len, "%.1f GB", bytes / 1e9);
    else if (bytes >= 10000000ull) snprintf(buf, len, "%.0f MB", bytes / 1e6);
    else snprintf(buf, len, "%.1f MB", bytes / 1e6);
    return buf;
}

/* Contract: whether p streams weights (not only embedding rows), when smaller files are listed. */
static bool streams_weights(const sl_plan *p) { return p->feasible && !p->all_resident && p->stream_bytes > 0; }

/* Contract: for a plan that streams weights, one line per smaller file type of this model (sl_plan_alternatives):
 * its size, what it would read per token and its predicted decode rate, beside this plan's. */
static void print_alternatives(FILE *f, const sl_plan *p, const sl_plan_model *pm, const sl_plan_req *req)
{
    sl_plan_alt alt[SL_PLAN_MAX_ALTS];
    const int n = streams_weights(p) ? sl_plan_alternatives(pm, req, alt, SL_PLAN_MAX_ALTS) : 0;
    if (!n) return;
    fprintf(f, "smaller files of this model under this budget (same disk and compute rates; each file type's\n"
            "llama-quantize mix; sizes in GB / MB of 10^9 / 10^6 bytes, as downloads are listed):\n");
    char now_rd[32];
    human(p->read_per_token, now_rd, sizeof now_rd);
    for (int i = 0; i < n; i++) {
        char size[32], rd[32];
        human(alt[i].file_bytes, size, sizeof size);
        const char *an = alt[i].name[0] == 'I' || alt[i].name[0] == 'F' ? "an" : "a";   /* "an IQ4_XS" */
        if (!alt[i].feasible)
            fprintf(f, "  %s %s file of this model (~%s) would not fit this budget\n", an, alt[i].name, size);
        else if (alt[i].all_resident)
            fprintf(f, "  %s %s file of this model (~%s) would fit whole, reading nothing per token: ~%.2f tok/s (now %.2f)\n",
                    an, alt[i].name, size, alt[i].pred_tok_s, p->pred_tok_s);
        else if (!alt[i].stream_bytes)
            fprintf(f, "  %s %s file of this model (~%s) would keep every matrix resident (embedding rows on demand): "
                    "~%.2f tok/s (now %.2f)\n", an, alt[i].name, size, alt[i].pred_tok_s, p->pred_tok_s);
        else
            fprintf(f, "  %s %s file of this model (~%s) would stream %s/token: ~%.2f tok/s (now %s, %.2f)\n", an,
                    alt[i].name, size, human(alt[i].read_per_token, rd, sizeof rd), alt[i].pred_tok_s, now_rd, p->pred_tok_s);
    }
}

/* Contract: s as the body of a JSON string (quotes and backslashes escaped, controls dropped). */
static void json_body(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        if ((unsigned char)*s >= 0x20) fputc(*s, f);
    }
}

void sl_plan_print(const sl_plan *p, const sl_plan_model *pm, const sl_plan_req *req, void *fp)
{
    FILE *f = fp;
    const sl_config *c = &pm->cfg;
    fprintf(f, "budget %.1f MiB, -c %d, -b %d, %d threads; model %.1f MiB (%d blocks)\n", req->budget / MiB, req->n_ctx,
            req->n_batch, req->n_threads, pm->file_bytes / MiB, c->n_layers);
    if (!p->feasible) {
        fprintf(f, "infeasible: %s\n", p->why);
        return;
    }
    fprintf(f, "mode: %s\n\n", p->all_resident ? "resident (the whole model fits)" : "streaming");
    fprintf(f, "%-34s %12s\n", "item", "MiB");
    fprintf(f, "%-34s %12.2f\n", "runtime (code, libraries, stacks)", p->base_bytes / MiB);
    fprintf(f, "%-34s %12.2f\n", "GGUF metadata", p->meta_bytes / MiB);
    fprintf(f, "%-34s %12.2f\n", "tokenizer", p->vocab_bytes / MiB);
    fprintf(f, "%-34s %12.2f\n", "norm weights (f32)", p->norm_bytes / MiB);
    char line[96];
    snprintf(line, sizeof line, "activations (batch %d)", p->n_batch);
    fprintf(f, "%-34s %12.2f\n", line, p->act_bytes / MiB);
    if (p->n_parallel > 1) snprintf(line, sizeof line, "KV caches %s (%d sequences)", kv_name(p->kv), p->n_parallel);
    else snprintf(line, sizeof line, "KV cache %s", kv_name(p->kv));
    fprintf(f, "%-34s %12.2f\n", line, p->kv_bytes / MiB);
    if (p->kv_ring_layers) {   /* by block kind: full-attention blocks keep the context, window blocks a ring */
        int win = 0;
        for (int l = 0; l < c->n_layers && !win; l++) win = pm->window[l];
        fprintf(f, "  %d full-attention blocks x %d positions, %d sliding-window blocks x a ring of %d (window %d + %d); "
                "%.2f MiB if every block kept the whole context\n", c->n_layers - p->kv_ring_layers, req->n_ctx,
                p->kv_ring_layers, p->kv_ring_rows, win, p->kv_ring_rows - win, p->kv_full_bytes / MiB);
    }
    if (!p->all_resident) {
        snprintf(line, sizeof line, "stream buffers (%d in flight + 1)", p->prefetch);
        fprintf(f, "%-34s %12.2f\n", line, p->stream_buf_bytes / MiB);
    }
    snprintf(line, sizeof line, "resident weights");
    fprintf(f, "%-34s %12.2f\n", line, (p->resident_bytes - (p->expert_cache_bytes ? p->expert_cache_bytes : 0)) / MiB);
    if (p->expert_cache_entries) {
        snprintf(line, sizeof line, "expert cache (%lld experts)", (long long)p->expert_cache_entries);
        fprintf(f, "%-34s %12.2f\n", line, p->expert_cache_bytes / MiB);
    }
    fprintf(f, "%-34s %12.2f  (%.1f%% of the budget)\n\n", "total", p->total_bytes / MiB,
            req->budget ? 100.0 * p->total_bytes / req->budget : 0);
    if (p->all_resident) {
        fprintf(f, "every weight resident; nothing is read per token\n");
    } else {
        int partial = 0;
        for (int l = p->n_layers_resident; l < c->n_layers; l++)
            for (int i = 0; i < SL_BLOCK_MATS; i++) partial += p->layer_resident[l][i] && pm->tensor_bytes[l][i];
        fprintf(f, "resident: %d of %d blocks%s%s; LM head %s\n", p->n_layers_resident, c->n_layers,
                c->n_expert ? " (their dense weights; routed experts: below)" : "",
                partial ? ", plus single tensors of later blocks" : "", p->lm_head_resident ? "resident" : "streams");
        fprintf(f, "streams:  %.1f MiB of weights per token in pieces of <= %.1f MiB (LM head: %d rows per piece), "
                "embedding rows on demand\n", p->stream_bytes / MiB, p->chunk_bytes / MiB, p->lm_head_rows);
        if (c->n_expert) {
            uint64_t one = 0;
            for (int k = 0; k < SL_EXPERT_MATS; k++) one += pm->expert_bytes[0][k];
            /* the experts' share of the stream; when nothing dense streams it is all of it */
            char share[64] = "all of the stream";
            if (p->stream_bytes > p->expert_stream_bytes + 0.05 * MiB)
                snprintf(share, sizeof share, "of %.1f MiB streamed in all", p->stream_bytes / MiB);
            fprintf(f, "experts:  %d routed experts per block, %d per token, %.2f MiB each, read when picked; expert "
                    "cache %.1f MiB (%lld of %lld experts, %.1f%%): %.1f MiB read from them per token (%s) at a hit "
                    "rate of %.1f%% (the cache's share of the experts: uniform, independent routing; trained models "
                    "hit more)\n",
                    c->n_expert, c->n_expert_used, one / MiB, p->expert_cache_bytes / MiB,
                    (long long)p->expert_cache_entries, (long long)c->n_layers * c->n_expert,
                    100.0 * p->expert_hit_rate, p->expert_stream_bytes / MiB, share, 100.0 * p->expert_hit_rate);
        }
        if (p->kv == SL_PLAN_KV_SPILL)
            fprintf(f, "KV file:  %.1f MiB at full context%s, read and appended per layer\n", p->kv_file_bytes / MiB,
                    p->kv_ring_layers ? " (sliding-window blocks: their rings)" : "");
    }
    fprintf(f, "read per token: %.1f MiB; predicted decode %.2f tok/s (%.3f s per token: I/O %.3f s at %.2f GB/s, "
            "compute %.3f s at %.2f GB/s)\n",
            p->read_per_token / MiB, p->pred_tok_s, p->pred_token_s, p->pred_io_s, req->disk_bw / 1e9, p->pred_compute_s,
            p->pred_compute_s > 0 ? compute_weight_bytes(pm) / p->pred_compute_s / 1e9 : req->compute_bw / 1e9);
    if (p->n_parallel > 1)
        fprintf(f, "--parallel %d: predicted %.2f tok/s per request, %.2f tok/s aggregate (%.3f s per pass of %d tokens; "
                "compute counted %d x one token's, an upper bound)\n", p->n_parallel, p->pred_req_tok_s, p->pred_agg_tok_s,
                p->pred_pass_s, p->n_parallel, p->n_parallel);
    if (p->n_parallel > 1 && c->n_expert)
        fprintf(f, "--parallel %d: a pass reads the union of its %d tokens' experts, %.1f MiB at the hit rate above "
                "(%.1f per block instead of %d: uniform, independent routing)\n", p->n_parallel, p->n_parallel,
                p->expert_pass_bytes / MiB,
                c->n_expert * (1 - pow(1 - (double)c->n_expert_used / c->n_expert, p->n_parallel)), c->n_expert_used);
    print_alternatives(f, p, pm, req);
    if (*req->disk_how) fprintf(f, "disk rate: %s\n", req->disk_how);
    if (*req->compute_how) fprintf(f, "compute rate: %s\n", req->compute_how);
    fprintf(f, "minimum budget for this model at -c %d%s: %" PRIu64 " MiB (--ram-budget %" PRIu64 "M)\n", req->n_ctx,
            p->n_parallel > 1 ? " with --parallel" : "", sl_plan_min_mib(p->min_budget), sl_plan_min_mib(p->min_budget));
}

void sl_plan_print_json(const sl_plan *p, const sl_plan_model *pm, const sl_plan_req *req, void *fp)
{
    FILE *f = fp;
    fprintf(f, "{\"feasible\":%s,\"budget\":%" PRIu64 ",\"n_ctx\":%d,\"min_budget\":%" PRIu64, p->feasible ? "true" : "false",
            req->budget, req->n_ctx, p->min_budget);
    if (!p->feasible) {
        fprintf(f, ",\"why\":\"");
        for (const char *s = p->why; *s; s++) fputc(*s == '"' ? '\'' : *s, f);
        fprintf(f, "\"}\n");
        return;
    }
    fprintf(f, ",\"mode\":\"%s\",\"n_batch\":%d,\"kv\":\"%s\",\"kv_bytes\":%" PRIu64 ",\"kv_file_bytes\":%" PRIu64
            ",\"base_bytes\":%" PRIu64 ",\"meta_bytes\":%" PRIu64 ",\"vocab_bytes\":%" PRIu64 ",\"norm_bytes\":%" PRIu64
            ",\"act_bytes\":%" PRIu64 ",\"stream_buf_bytes\":%" PRIu64 ",\"resident_bytes\":%" PRIu64
            ",\"total_bytes\":%" PRIu64 ",\"blocks_resident\":%d,\"n_layers\":%d,\"lm_head_resident\":%s"
            ",\"chunk_bytes\":%" PRIu64 ",\"prefetch\":%d,\"lm_head_rows\":%d,\"stream_bytes\":%" PRIu64
            ",\"read_per_token\":%" PRIu64 ",\"pred_tok_s\":%.4f,\"pred_token_s\":%.4f,\"pred_io_s\":%.4f"
            ",\"pred_compute_s\":%.4f,\"disk_bw\":%.0f,\"compute_bw\":%.0f,\"model_bytes\":%" PRIu64
            ",\"n_parallel\":%d,\"pred_pass_s\":%.4f,\"pred_req_tok_s\":%.4f,\"pred_agg_tok_s\":%.4f"
            ",\"kv_full_bytes\":%" PRIu64 ",\"kv_ring_layers\":%d,\"kv_ring_rows\":%d",
            p->all_resident ? "resident" : "streaming", p->n_batch, p->kv == SL_PLAN_KV_F16 ? "f16" : p->kv == SL_PLAN_KV_Q8_0 ? "q8_0" : "spill",
            p->kv_bytes, p->kv_file_bytes, p->base_bytes, p->meta_bytes, p->vocab_bytes, p->norm_bytes, p->act_bytes,
            p->stream_buf_bytes, p->resident_bytes, p->total_bytes, p->n_layers_resident, pm->cfg.n_layers,
            p->lm_head_resident ? "true" : "false", p->chunk_bytes, p->prefetch, p->lm_head_rows, p->stream_bytes,
            p->read_per_token, p->pred_tok_s, p->pred_token_s, p->pred_io_s, p->pred_compute_s, req->disk_bw,
            req->compute_bw, pm->file_bytes, p->n_parallel, p->pred_pass_s, p->pred_req_tok_s, p->pred_agg_tok_s,
            p->kv_full_bytes, p->kv_ring_layers, p->kv_ring_rows);
    if (pm->cfg.n_expert) {   /* mixture of experts: the routed experts and the expert cache's share */
        uint64_t one = 0;
        for (int k = 0; k < SL_EXPERT_MATS; k++) one += pm->expert_bytes[0][k];
        fprintf(f, ",\"n_expert\":%d,\"n_expert_used\":%d,\"expert_bytes\":%" PRIu64 ",\"expert_cache_bytes\":%" PRIu64
                ",\"expert_cache_entries\":%lld,\"expert_hit_rate\":%.4f,\"expert_stream_bytes\":%" PRIu64
                ",\"expert_pass_bytes\":%" PRIu64,
                pm->cfg.n_expert, pm->cfg.n_expert_used, one, p->expert_cache_bytes, (long long)p->expert_cache_entries,
                p->expert_hit_rate, p->expert_stream_bytes, p->expert_pass_bytes);
    }
    sl_plan_alt alt[SL_PLAN_MAX_ALTS];
    const int n_alt = streams_weights(p) ? sl_plan_alternatives(pm, req, alt, SL_PLAN_MAX_ALTS) : 0;
    if (streams_weights(p)) {
        fprintf(f, ",\"smaller_files\":[");
        for (int i = 0; i < n_alt; i++)
            fprintf(f, "%s{\"type\":\"%s\",\"file_bytes\":%" PRIu64 ",\"feasible\":%s,\"resident\":%s,\"stream_bytes\":%" PRIu64
                    ",\"read_per_token\":%" PRIu64 ",\"pred_tok_s\":%.4f}", i ? "," : "", alt[i].name, alt[i].file_bytes,
                    alt[i].feasible ? "true" : "false", alt[i].all_resident ? "true" : "false", alt[i].stream_bytes,
                    alt[i].read_per_token, alt[i].pred_tok_s);
        fprintf(f, "]");
    }
    fprintf(f, ",\"disk_how\":\"");
    json_body(f, req->disk_how);
    fprintf(f, "\",\"compute_how\":\"");
    json_body(f, req->compute_how);
    fprintf(f, "\"}\n");
}

/* Read one unsigned number from a file (cgroup limits); 0 when absent or "max". */
static uint64_t read_u64_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char buf[64] = "";
    uint64_t v = 0;
    if (fgets(buf, sizeof buf, f) && strncmp(buf, "max", 3)) v = strtoull(buf, NULL, 10);
    fclose(f);
    return v;
}

uint64_t sl_plan_auto_budget(char *how, size_t howlen)
{
    uint64_t avail = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[128];
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "MemAvailable:", 13)) { avail = strtoull(line + 13, NULL, 10) * 1024; break; }
        fclose(f);
    }
    /* cgroup: v1 memory controller line "N:memory:/path", or v2 "0::/path" */
    uint64_t limit = 0;
    f = fopen("/proc/self/cgroup", "r");
    if (f) {
        char line[512], path[700];
        while (fgets(line, sizeof line, f)) {
            line[strcspn(line, "\n")] = 0;
            char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
            if (!b) continue;
            uint64_t v = 0;
            if (!strncmp(a + 1, "memory:", 7)) {
                snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", b + 1);
                v = read_u64_file(path);
            } else if (a[1] == ':') {
                snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", b + 1);
                v = read_u64_file(path);
            }
            if (v && v < (1ull << 60) && (!limit || v < limit)) limit = v;
        }
        fclose(f);
    }
    uint64_t base = avail;
    const char *src = "MemAvailable";
    if (limit && (!base || limit < base)) { base = limit; src = "cgroup limit"; }
    if (!base) { snprintf(how, howlen, "unknown"); return 0; }
    /* keep 10% (at least 64 MiB, at most 1 GiB) for the rest of the system */
    uint64_t margin = base / 10;
    if (margin < (64ull << 20)) margin = 64ull << 20;
    if (margin > (1ull << 30)) margin = 1ull << 30;
    if (margin > base / 2) margin = base / 2;
    snprintf(how, howlen, "auto: %s %.0f MiB minus %.0f MiB margin", src, base / MiB, margin / MiB);
    return base - margin;
}

#define FALLBACK_DISK_BW    1.8e9   /* a SATA/NVMe-class disk, when the probe cannot run */
#define FALLBACK_COMPUTE_BW 2.0e9   /* the portable kernels' order of magnitude, likewise */
#define PROBE_MARGIN        (2ull << 20)

/* Contract: see planner.h. */
void sl_plan_disk_rate(const sl_model *m, const sl_plan_model *pm, sl_plan_req *req, sl_plan *plan, int backend,
                       bool no_direct, bool fresh)
{
    if (req->disk_bw > 0 || !plan->feasible) return;
    if (plan->all_resident) {
        snprintf(req->disk_how, sizeof req->disk_how, "not measured: nothing streams");
        return;
    }
    /* the plan's largest piece is its row chunk (whole tensors when chunk_bytes is 0, rare) */
    uint64_t piece = plan->chunk_bytes ? plan->chunk_bytes : 4u << 20;
    sl_disk_probe pr = { .backend = (sl_io_backend)backend, .no_direct = no_direct, .piece = piece,
                         .depth = plan->prefetch + 1, .fresh = fresh };
    req->disk_bw = sl_disk_read_rate(m->path, &pr, FALLBACK_DISK_BW, req->disk_how, sizeof req->disk_how);
    sl_plan_predict(pm, req, plan);
}

/* Contract: see planner.h (the probe's room as sl_plan_rates keeps it). */
void sl_plan_alt_rates(const sl_plan_model *pm, sl_plan_req *req)
{
    bool per_type = false, missing = false;
    for (int t = 0; t < SL_TYPE_COUNT; t++) per_type |= req->type_bw[t] > 0;
    if (!per_type) return;   /* --compute-bw: one rate for every type */
    uint64_t bytes[SL_TYPE_COUNT];
    sl_plan_alt_bytes_by_type(pm, bytes);
    for (int t = 0; t < SL_TYPE_COUNT; t++) {
        if (req->type_bw[t] > 0) bytes[t] = 0;
        missing |= bytes[t] > 0;
    }
    if (!missing) return;
    uint64_t fixed = sl_plan_fixed_bytes(pm) + PROBE_MARGIN;
    size_t room = req->budget > fixed ? (size_t)(req->budget - fixed) : 0;
    double rate[SL_TYPE_COUNT];
    char how[640];
    sl_compute_rate_mix(bytes, req->n_threads, room, FALLBACK_COMPUTE_BW, rate, how, sizeof how);
    for (int t = 0; t < SL_TYPE_COUNT; t++)
        if (bytes[t] && rate[t] > 0) req->type_bw[t] = rate[t];
}

/* Contract: see planner.h. */
void sl_plan_rates(const sl_model *m, const sl_plan_model *pm, sl_plan_req *req, double disk_gbs, double compute_gbs)
{
    memset(req->type_bw, 0, sizeof req->type_bw);
    if (disk_gbs > 0) {
        req->disk_bw = disk_gbs * 1e9;
        snprintf(req->disk_how, sizeof req->disk_how, "%.2f GB/s as given", disk_gbs);
    } else {
        req->disk_bw = 0;   /* sl_plan_disk_rate, once the plan is made */
        snprintf(req->disk_how, sizeof req->disk_how, "not measured yet");
    }
    if (compute_gbs > 0) {
        req->compute_bw = compute_gbs * 1e9;
        snprintf(req->compute_how, sizeof req->compute_how, "%.2f GB/s as given", compute_gbs);
        return;
    }
    /* The probe's matrix is memory the process holds for a moment: keep it within the budget, on top
     * of what the open model already holds (a run in a memory cgroup of the budget's size must not be
     * killed by its own measurement). */
    uint64_t fixed = sl_plan_fixed_bytes(pm) + PROBE_MARGIN;
    size_t room = req->budget > fixed ? (size_t)(req->budget - fixed) : 0;
    req->compute_bw = sl_compute_rate_model(m, req->n_threads, room, FALLBACK_COMPUTE_BW, req->type_bw,
                                            req->compute_how, sizeof req->compute_how);
    if (!(req->compute_bw > 0)) req->compute_bw = FALLBACK_COMPUTE_BW;
}
