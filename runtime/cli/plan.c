/* runtime/cli/plan.c — `sluice plan`: the --ram-budget plan without running the model, for one
 * budget (the full plan) or a list of them (--budgets: one table of what each buys). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "include/sluice.h"
#include "loader/io.h"
#include "runtime/api/api_internal.h"
#include "runtime/cli/cli.h"
#include "runtime/cli/options.h"
#include "runtime/engine/model.h"
#include "runtime/plan/planner.h"
#include "kernels/threadpool.h"
#include "runtime/text/tokenizer.h"

enum { PLAN_MODEL = 1, PLAN_BUDGET, PLAN_BUDGETS, PLAN_CTX, PLAN_BATCH, PLAN_THREADS, PLAN_DISK, PLAN_IO, PLAN_COMPUTE,
       PLAN_JSON, PLAN_PARALLEL, PLAN_DRAFT_MODEL };

static const cli_opt plan_table[] = {
    { PLAN_MODEL, "-m|--model", "FILE", "GGUF model (or give it as the argument; default: the bundled one)" },
    { PLAN_BUDGET, "--ram-budget", "SIZE|auto", "the budget to plan for (default auto)" },
    { PLAN_BUDGETS, "--budgets", "LIST", "a table for several budgets, e.g. 64M,512M,1G,2G,4G" },
    { PLAN_CTX, "-c|--ctx|--ctx-size", "N", "context length (default min(trained context, 4096))" },
    { PLAN_BATCH, "-b|--batch|--batch-size", "N", "prompt batch (default 512)" },
    { PLAN_THREADS, "-t|--threads", "N", "threads (default: number of CPUs)" },
    { PLAN_IO, "--io", "pread|mmap|uring", "the read backend the disk rate is measured with (default uring)" },
    { PLAN_DISK, "--disk-bw", "GB/s|now", "disk rate (default: measured once per device and way of reading, cached;\n"
                                          "now: measure again; without a measurement 1.8 GB/s)" },
    { PLAN_COMPUTE, "--compute-bw", "GB/s", "compute rate (default: measured once per kernel path, thread count and type)" },
    { PLAN_JSON, "--json", NULL, "the plan as one JSON object (with --budgets: a JSON array of rows)" },
    { PLAN_PARALLEL, "--parallel", "N", "sequences decoded together (sluice serve's slots: a KV cache each, one pass\n"
                                        "for all; default 1)" },
    { PLAN_DRAFT_MODEL, "-md|--draft-model", "FILE", "plan beside a draft model (speculative decoding): its share of the\n"
                                                     "budget, and whether it is worth the memory" },
    { 0, NULL, NULL, NULL },
};
static const cli_opt *const plan_tables[] = { plan_table, cli_meta_table, NULL };
const cli_cmd cli_cmd_plan = {
    "plan", "show what stays resident and what streams under --ram-budget (the model is not run)",
    "sluice plan [-m MODEL] [--ram-budget SIZE|auto | --budgets LIST] [options]", plan_tables,
    "Prints what stays resident, what streams, the memory of each part against the budget, and the\n"
    "predicted decode speed; when the plan streams, also what a smaller file type of the same model\n"
    "(Q4_K_M, IQ4_XS, Q3_K_M, Q2_K, ...) would read per token and decode at.  Rates are cached under\n"
    "~/.cache/sluice.\n"
};

typedef struct plan_opts {
    const char *path, *budget, *budgets, *draft;
    long n_ctx, n_batch, threads, parallel;
    double disk, compute;   /* 0: measured (cached); disk -1: measured now */
    int io;
    bool json;
} plan_opts;

static int plan_parse(int argc, char **argv, plan_opts *o)
{
    *o = (plan_opts){ .n_batch = 512, .io = SL_IO_URING };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        const cli_opt *op = a[0] == '-' ? cli_find(plan_tables, a) : NULL;
        if (a[0] != '-') {
            if (o->path) { cli_err("plan: one model at a time ('%s' and '%s')", o->path, a); return -1; }
            o->path = a;
            continue;
        }
        if (!op) { cli_unknown(&cli_cmd_plan, a); return -1; }
        if (cli_meta(&cli_cmd_plan, op)) return 1;
        if (op->arg && !cli_val(argc, argv, &i, &v)) return -1;
        switch (op->id) {
        case PLAN_MODEL: o->path = v; break;
        case PLAN_BUDGET: o->budget = v; break;
        case PLAN_BUDGETS: o->budgets = v; break;
        case PLAN_CTX: if (!cli_int(a, v, 1, 1 << 22, &o->n_ctx)) return -1; break;
        case PLAN_BATCH: if (!cli_int(a, v, 1, 1 << 16, &o->n_batch)) return -1; break;
        case PLAN_THREADS: if (!cli_int(a, v, 1, 256, &o->threads)) return -1; break;
        case PLAN_DISK:
            if (!strcmp(v, "now")) o->disk = -1;
            else if (!cli_float(a, v, 0.001, 1000, &o->disk)) return -1;
            break;
        case PLAN_IO: {
            sl_io_backend b;
            if (sl_io_backend_parse(v, &b)) { cli_err("--io: '%s' is not pread, mmap or uring", v); return -1; }
            o->io = (int)b;
            break;
        }
        case PLAN_COMPUTE: if (!cli_float(a, v, 0.001, 1000, &o->compute)) return -1; break;
        case PLAN_JSON: o->json = true; break;
        case PLAN_PARALLEL: if (!cli_int(a, v, 1, 256, &o->parallel)) return -1; break;
        case PLAN_DRAFT_MODEL: o->draft = v; break;
        default: break;
        }
    }
    if (o->budget && o->budgets) { cli_err("plan: give --ram-budget or --budgets, not both"); return -1; }
    if (o->draft && o->budgets) { cli_err("plan: -md plans one budget (give --ram-budget, not --budgets)"); return -1; }
    return 0;
}

/* Make a plan for o->budget (NULL or "auto": MemAvailable / the cgroup limit).  0, or -1 after
 * printing the error (an infeasible budget prints the minimum and what dominates it). */
static int plan_for(const sl_model *m, size_t vocab_bytes, const plan_opts *o, sl_plan_model *pm, sl_plan_req *req,
                    sl_plan *plan)
{
    uint64_t budget = 0;
    char how[160] = "";
    const char *arg = o->budget;
    if (!arg || !strcmp(arg, "auto")) {
        budget = sl_plan_auto_budget(how, sizeof how);
        if (!budget) { cli_err("cannot tell how much memory is available; give --ram-budget SIZE"); return -1; }
    } else if (!cli_size("--ram-budget", arg, &budget)) {
        return -1;
    }
    sl_plan_model_from(pm, m, vocab_bytes);
    int n_ctx = o->n_ctx ? (int)o->n_ctx : m->cfg.ctx_train < 4096 ? m->cfg.ctx_train : 4096;
    *req = (sl_plan_req){ .budget = budget, .n_ctx = n_ctx, .n_batch = (int)o->n_batch,
                          .n_threads = o->threads ? (int)o->threads : sl_ncpu(), .n_parallel = (int)o->parallel,
                          .allow_spill = true,
                          .allow_q8_kv = m->cfg.head_dim % 32 == 0 };
    /* measured (and cached) unless given; the compute probe within what the plan holds (as a run does) */
    sl_plan_req first = *req;
    sl_plan_rates(m, pm, &first, o->disk > 0 ? o->disk : 0, o->compute > 0 ? o->compute : 1.0);
    if (sl_plan_make(pm, &first, plan) == 0) {
        req->budget = plan->total_bytes;
        sl_plan_rates(m, pm, req, o->disk > 0 ? o->disk : 0, o->compute);
        req->budget = budget;
    }
    if (sl_plan_make(pm, req, plan)) {
        /* where the budget came from is said only when it was derived (auto) */
        cli_err("--ram-budget %s%s%s: %s", arg ? arg : "auto", *how ? " " : "", how, plan->why);
        return -1;
    }
    sl_plan_disk_rate(m, pm, req, plan, o->io, false, o->disk < 0);   /* the way this plan reads */
    return 0;
}

/* -md FILE: the budget split with the draft model (the library's, as a run makes it), the target's
 * plan within its share and the draft's share.  0, or 1 after printing the error. */
static int plan_beside_draft(const plan_opts *o, const sl_model *m, const sl_vocab *voc)
{
    sluice_params p;
    sluice_params_default(&p);
    if (o->budget && strcmp(o->budget, "auto") && !cli_size("--ram-budget", o->budget, &p.ram_budget)) return 1;
    p.planner = SLUICE_PLANNER_ON;
    p.n_ctx = (int)o->n_ctx;
    p.n_batch = (int)o->n_batch;
    p.n_threads = (int)o->threads;
    p.n_parallel = (int)o->parallel;
    p.io = o->io;
    p.disk_bw = o->disk;
    p.compute_bw = o->compute;
    p.draft = SLUICE_DRAFT_MODEL;
    p.draft_model = o->draft;
    char err[SLUICE_ERRLEN];
    if (api_draft_check_vocab(voc, o->draft, err, sizeof err)) { cli_err("%s", err); return 1; }
    int n_ctx = o->n_ctx ? (int)o->n_ctx : m->cfg.ctx_train < 4096 ? m->cfg.ctx_train : 4096;
    sl_plan_model *pm = malloc(sizeof *pm);
    sl_plan *plan = malloc(sizeof *plan);
    sl_plan_req req;
    sl_plan_draft d;
    const char *spill;
    int status = 1;
    if (!pm || !plan) cli_err("out of memory");
    else if (api_plan_with_draft(m, sl_vocab_mem_bytes(voc), &p, n_ctx, (int)o->n_batch,
                                 o->threads ? (int)o->threads : sl_ncpu(), pm, &req, plan, &spill, &d, err, sizeof err))
        cli_err("%s", err);
    else {
        api_print_plan_with_draft(plan, pm, &req, &d, stdout, o->json);
        status = 0;
    }
    free(pm);
    free(plan);
    return status;
}

/* One budget: the full plan. */
static int plan_one(const plan_opts *o)
{
    char err[SLUICE_ERRLEN];
    sl_model *m;
    if (sl_model_open(o->path, &m, err, sizeof err)) { cli_err("%s", err); return 1; }
    sl_vocab *voc = NULL;
    if (sl_vocab_load(m->gguf, &voc, err, sizeof err)) { cli_err("%s: %s", o->path, err); sl_model_free(m); return 1; }
    if (o->draft) {
        int st = plan_beside_draft(o, m, voc);
        sl_vocab_free(voc);
        sl_model_free(m);
        return st;
    }
    sl_plan_model *pm = malloc(sizeof *pm);
    sl_plan *plan = malloc(sizeof *plan);
    sl_plan_req req;
    int status = 1;
    if (pm && plan && plan_for(m, sl_vocab_mem_bytes(voc), o, pm, &req, plan) == 0) {
        /* a streaming plan lists the smaller files of this model: their types' compute rates too */
        if (!plan->all_resident && plan->stream_bytes) sl_plan_alt_rates(pm, &req);
        if (o->json) sl_plan_print_json(plan, pm, &req, stdout);
        else sl_plan_print(plan, pm, &req, stdout);
        status = 0;
    } else if (pm && plan && o->json) {
        sl_plan_print_json(plan, pm, &req, stdout);
    }
    free(pm);
    free(plan);
    sl_vocab_free(voc);
    sl_model_free(m);
    return status;
}

/* --budgets LIST: one row per budget, through the public planning call. */
static int plan_table_rows(const plan_opts *o)
{
    char list[1024];
    snprintf(list, sizeof list, "%s", o->budgets);
    if (o->json) printf("[");
    else printf("| budget | fits | resident blocks | LM head | KV | streamed MiB/token | planned MiB | predicted tok/s |\n"
                "|---:|:---:|---:|:---:|:---:|---:|---:|---:|\n");
    int status = 0, row = 0;
    for (char *save = NULL, *b = strtok_r(list, ",", &save); b; b = strtok_r(NULL, ",", &save)) {
        sluice_params p;
        sluice_params_default(&p);
        if (!cli_size("--budgets", b, &p.ram_budget)) return 2;
        p.n_ctx = (int)o->n_ctx;
        p.n_batch = (int)o->n_batch;
        p.n_threads = (int)o->threads;
        p.io = o->io;
        p.disk_bw = o->disk;
        p.compute_bw = o->compute;
        sluice_plan_info pi;
        char err[SLUICE_ERRLEN];
        int rc = sluice_plan(o->path, &p, &pi, err, sizeof err);
        if (rc && rc != -ENOSPC) { cli_err("%s", err); return 1; }
        if (o->json) {
            printf("%s{\"budget\":%" PRIu64 ",\"feasible\":%s,\"min_budget\":%" PRIu64, row++ ? "," : "", p.ram_budget,
                   rc ? "false" : "true", pi.min_budget);
            if (!rc)
                printf(",\"blocks_resident\":%d,\"n_layers\":%d,\"lm_head_resident\":%s,\"kv\":\"%s\","
                       "\"stream_bytes_per_token\":%" PRIu64 ",\"planned_bytes\":%" PRIu64 ",\"pred_tok_s\":%.4f",
                       pi.n_layers_resident, pi.n_layers, pi.lm_head_resident ? "true" : "false",
                       pi.kv_spilled ? "spill" : pi.kv_type == SLUICE_KV_Q8_0 ? "q8_0" : "f16", pi.stream_bytes_per_token,
                       pi.planned_bytes, pi.pred_tok_s);
            printf("}");
        } else if (rc) {
            printf("| %s | no (needs %.0f MiB) | | | | | | |\n", b, (double)sl_plan_min_mib(pi.min_budget));
        } else {
            printf("| %s | yes | %d of %d | %s | %s | %.1f | %.1f | %.2f |\n", b, pi.n_layers_resident, pi.n_layers,
                   pi.lm_head_resident ? "resident" : "streamed",
                   pi.kv_spilled ? "spilled" : pi.kv_type == SLUICE_KV_Q8_0 ? "q8_0" : "f16",
                   pi.stream_bytes_per_token / 1048576.0, pi.planned_bytes / 1048576.0, pi.pred_tok_s);
        }
    }
    if (o->json) printf("]\n");
    return status;
}

int cmd_plan(int argc, char **argv)
{
    plan_opts o;
    int pr = plan_parse(argc, argv, &o);
    if (pr) return pr > 0 ? 0 : 2;
    if (!o.path) o.path = cli_default_model();
    return o.budgets ? plan_table_rows(&o) : plan_one(&o);
}
