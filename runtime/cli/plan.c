/* runtime/cli/plan.c — `sluice plan`: the --ram-budget plan without running the model. */
#include <stdlib.h>
#include <string.h>

#include "loader/io.h"
#include "runtime/cli/cli.h"
#include "runtime/engine/model.h"
#include "runtime/plan/planner.h"
#include "kernels/threadpool.h"
#include "runtime/text/tokenizer.h"

int cli_plan_for(const sl_model *m, size_t vocab_bytes, const char *budget_arg, int n_ctx, int n_batch, int threads,
                 double disk_gbs, double compute_gbs, int io, sl_plan_model *pm, sl_plan_req *req, sl_plan *plan)
{
    uint64_t budget = 0;
    char how[160] = "";
    if (!budget_arg || !strcmp(budget_arg, "auto")) {
        budget = sl_plan_auto_budget(how, sizeof how);
        if (!budget) { cli_err("cannot tell how much memory is available; give --ram-budget SIZE"); return -1; }
    } else if (!cli_size("--ram-budget", budget_arg, &budget)) {
        return -1;
    }
    sl_plan_model_from(pm, m, vocab_bytes);
    *req = (sl_plan_req){ .budget = budget, .n_ctx = n_ctx, .n_batch = n_batch, .n_threads = threads,
                          .allow_spill = true, .allow_q8_kv = m->cfg.head_dim % 32 == 0 };
    sl_plan_rates(m, pm, req, disk_gbs > 0 ? disk_gbs : 0, compute_gbs);   /* measured (and cached) unless given */
    if (sl_plan_make(pm, req, plan)) {
        cli_err("--ram-budget %s%s%s: %s", budget_arg ? budget_arg : "auto", *how ? " " : "", how, plan->why);
        return -1;
    }
    sl_plan_disk_rate(m, pm, req, plan, io, false, disk_gbs < 0);   /* the way this plan reads */
    return 0;
}

int cmd_plan(int argc, char **argv)
{
    const char *path = NULL, *budget = NULL, *v;
    long n_ctx = 0, n_batch = 512, threads = 0;
    double disk = 0, compute = 0;   /* 0: measured (cached); disk -1: measured now */
    int io = SL_IO_URING;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) { if (!cli_val(argc, argv, &i, &path)) return 2; }
        else if (!strcmp(a, "--ram-budget")) { if (!cli_val(argc, argv, &i, &budget)) return 2; }
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) { if (!cli_val(argc, argv, &i, &v) || !cli_int(a, v, 1, 1 << 22, &n_ctx)) return 2; }
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch")) { if (!cli_val(argc, argv, &i, &v) || !cli_int(a, v, 1, 1 << 16, &n_batch)) return 2; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { if (!cli_val(argc, argv, &i, &v) || !cli_int(a, v, 1, 256, &threads)) return 2; }
        else if (!strcmp(a, "--disk-bw")) {
            if (!cli_val(argc, argv, &i, &v)) return 2;
            if (!strcmp(v, "now")) disk = -1;
            else if (!cli_float(a, v, 0.001, 1000, &disk)) return 2;
        } else if (!strcmp(a, "--io")) {
            sl_io_backend b;
            if (!cli_val(argc, argv, &i, &v)) return 2;
            if (sl_io_backend_parse(v, &b)) { cli_err("--io: '%s' is not pread, mmap or uring", v); return 2; }
            io = (int)b;
        }
        else if (!strcmp(a, "--compute-bw")) { if (!cli_val(argc, argv, &i, &v) || !cli_float(a, v, 0.001, 1000, &compute)) return 2; }
        else if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: sluice plan [-m MODEL] --ram-budget SIZE|auto [-c CTX] [-b BATCH] [-t THREADS]\n"
                   "                  [--io pread|mmap|uring] [--disk-bw GB/s|now] [--compute-bw GB/s] [--json]\n"
                   "The disk rate defaults to a figure measured once per device and way of reading: 1 GiB of\n"
                   "the model file read with the backend of --io (default uring), the plan's piece size and\n"
                   "pieces in flight, cached under ~/.cache/sluice; `--disk-bw now` measures again.  Without a\n"
                   "measurement 1.8 GB/s is assumed.  The compute\n"
                   "rate defaults to one measured once per kernel path, thread count and weight type (~0.15 s\n"
                   "of matrix-vector products per type, cached likewise); without one 2 GB/s is assumed.\n"
                   "Prints what stays resident, what streams, the memory of each part against the budget,\n"
                   "and the predicted decode speed.  The model is not run.\n");
            return 0;
        } else if (a[0] != '-') path = a;
        else { cli_err("plan: unknown option '%s'", a); return 2; }
    }
    if (!path) path = cli_default_model();
    char err[SL_ERRLEN];
    sl_model *m;
    if (sl_model_open(path, &m, err, sizeof err)) { cli_err("%s", err); return 1; }
    sl_vocab *voc = NULL;
    if (sl_vocab_load(m->gguf, &voc, err, sizeof err)) { cli_err("%s: %s", path, err); sl_model_free(m); return 1; }
    if (!n_ctx) n_ctx = m->cfg.ctx_train < 4096 ? m->cfg.ctx_train : 4096;
    sl_plan_model *pm = malloc(sizeof *pm);
    sl_plan *plan = malloc(sizeof *plan);
    sl_plan_req req;
    int status = 1;
    if (pm && plan &&
        cli_plan_for(m, sl_vocab_mem_bytes(voc), budget, (int)n_ctx, (int)n_batch, threads ? (int)threads : sl_ncpu(),
                     disk, compute, io, pm, &req, plan) == 0) {
        if (json) sl_plan_print_json(plan, pm, &req, stdout);
        else sl_plan_print(plan, pm, &req, stdout);
        status = 0;
    } else if (pm && plan && json) {
        sl_plan_print_json(plan, pm, &req, stdout);
    }
    free(pm);
    free(plan);
    sl_vocab_free(voc);
    sl_model_free(m);
    return status;
}
