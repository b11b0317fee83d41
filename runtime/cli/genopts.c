/* runtime/cli/genopts.c — options shared by `sluice run` and `sluice chat` (see genopts.h). */
#include "runtime/cli/genopts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "loader/io.h"
#include "runtime/cli/cli.h"

void gen_opts_default(gen_opts *o, long n_predict)
{
    *o = (gen_opts){ .n_predict = n_predict, .n_batch = 512, .kv_type = SLUICE_KV_AUTO, .io = SLUICE_IO_URING,
                     .prefetch = 2, .head_rows = 1024 };   /* disk_bw, compute_bw 0: measured */
    sluice_sampler_params_default(&o->sp);
}

int gen_opt_parse(int argc, char **argv, int *pi, gen_opts *o)
{
    int i = *pi;
    const char *a = argv[i], *v;
    double d;
    long l;
#define VAL() do { if (!cli_val(argc, argv, &i, &v)) return -1; } while (0)
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) { VAL(); o->model = v; }
    else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) { VAL(); if (!cli_int(a, v, 0, 1 << 24, &o->n_predict)) return -1; }
    else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) { VAL(); if (!cli_int(a, v, 1, 1 << 22, &o->n_ctx)) return -1; }
    else if (!strcmp(a, "-b") || !strcmp(a, "--batch")) { VAL(); if (!cli_int(a, v, 1, 1 << 16, &o->n_batch)) return -1; }
    else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { VAL(); if (!cli_int(a, v, 1, 256, &o->threads)) return -1; }
    else if (!strcmp(a, "--temp")) { VAL(); if (!cli_float(a, v, 0, 100, &d)) return -1; o->sp.temp = (float)d; }
    else if (!strcmp(a, "--top-k")) { VAL(); if (!cli_int(a, v, 0, 1 << 30, &l)) return -1; o->sp.top_k = (int)l; }
    else if (!strcmp(a, "--top-p")) { VAL(); if (!cli_float(a, v, 0, 1, &d)) return -1; o->sp.top_p = (float)d; }
    else if (!strcmp(a, "--min-p")) { VAL(); if (!cli_float(a, v, 0, 1, &d)) return -1; o->sp.min_p = (float)d; }
    else if (!strcmp(a, "--repeat-penalty")) { VAL(); if (!cli_float(a, v, 0.01, 100, &d)) return -1; o->sp.repeat_penalty = (float)d; }
    else if (!strcmp(a, "--seed")) {
        char *end;
        VAL();
        errno = 0;
        o->sp.seed = strtoull(v, &end, 0);
        if (errno || *end || end == v) { cli_err("--seed: '%s' is not an unsigned integer", v); return -1; }
    }
    else if (!strcmp(a, "--kv")) {
        VAL();
        if (!strcmp(v, "f16")) o->kv_type = SLUICE_KV_F16;
        else if (!strcmp(v, "f32")) o->kv_type = SLUICE_KV_F32;
        else if (!strcmp(v, "q8_0")) o->kv_type = SLUICE_KV_Q8_0;
        else { cli_err("--kv: '%s' is not f16, f32 or q8_0", v); return -1; }
    }
    else if (!strcmp(a, "--ram-budget")) { VAL(); o->budget = v; }
    else if (!strcmp(a, "--kv-spill-dir")) { VAL(); o->spill_dir = v; }
    else if (!strcmp(a, "--session")) { VAL(); o->session = v; }
    else if (!strcmp(a, "--session-overwrite")) o->session_overwrite = true;
    else if (!strcmp(a, "--disk-bw")) {
        VAL();
        if (!strcmp(v, "now")) o->disk_bw = SLUICE_DISK_BW_NOW;
        else if (!cli_float(a, v, 0.001, 1000, &o->disk_bw)) return -1;
    }
    else if (!strcmp(a, "--compute-bw")) { VAL(); if (!cli_float(a, v, 0.001, 1000, &o->compute_bw)) return -1; }
    else if (!strcmp(a, "--stream")) o->stream = true;
    else if (!strcmp(a, "--stream-lm-head")) o->stream_head = true;
    else if (!strcmp(a, "--no-direct")) o->no_direct = true;
    else if (!strcmp(a, "--io")) {
        sl_io_backend b;
        VAL();
        if (sl_io_backend_parse(v, &b)) { cli_err("--io: '%s' is not pread, mmap or uring", v); return -1; }
        o->io = (int)b;
    }
    else if (!strcmp(a, "--stream-unit")) {
        VAL();
        if (!strcmp(v, "tensor")) o->chunk = 0;
        else if (!strcmp(v, "block")) { o->chunk = 0; if (o->prefetch < 7) o->prefetch = 7; }
        else { if (!cli_float(a, v, 0.001, 65536, &d)) return -1; o->chunk = (uint64_t)(d * 1048576); }
    }
    else if (!strcmp(a, "--prefetch")) { VAL(); if (!cli_int(a, v, 1, 60, &o->prefetch)) return -1; }
    else if (!strcmp(a, "--lm-head-chunk")) { VAL(); if (!cli_int(a, v, 1, 1 << 24, &o->head_rows)) return -1; }
    else if (!strcmp(a, "--stats")) o->stats = true;
    else if (!strcmp(a, "--special")) o->special = true;
    else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) o->quiet = true;
    else return 0;
#undef VAL
    *pi = i;
    return 1;
}

bool gen_opts_params(const gen_opts *o, sluice_params *p)
{
    sluice_params_default(p);
    if (o->budget) {
        /* an explicit budget (even "auto") always plans; a forced streaming mode still wins */
        p->planner = SLUICE_PLANNER_ON;
        if (strcmp(o->budget, "auto") && !cli_size("--ram-budget", o->budget, &p->ram_budget)) return false;
    }
    p->n_ctx = (int)o->n_ctx;
    p->n_batch = (int)o->n_batch;
    p->n_threads = (int)o->threads;
    p->kv_type = o->kv_type;
    p->kv_spill_dir = o->spill_dir;
    p->stream_all = o->stream;
    p->stream_lm_head = o->stream_head;
    p->io = o->io;
    p->chunk_bytes = o->chunk;
    p->prefetch = (int)o->prefetch;
    p->lm_head_rows = (int)o->head_rows;
    p->no_direct = o->no_direct;
    p->disk_bw = o->disk_bw;
    p->compute_bw = o->compute_bw;
    return true;
}

void gen_opts_usage(FILE *f)
{
    fprintf(f,
            "  -m, --model FILE        GGUF model (default: the bundled stories260K)\n"
            "  -c, --ctx N             context length (default min(model context, 4096))\n"
            "  -b, --batch N           prompt positions per forward batch (default 512)\n"
            "  -t, --threads N         threads (default: number of CPUs)\n"
            "      --temp T            temperature (default 0.8; 0 = greedy)\n"
            "      --top-k K           (default 40; 0 = off)\n"
            "      --top-p P           (default 0.95; 1 = off)\n"
            "      --min-p P           (default 0.05; 0 = off)\n"
            "      --repeat-penalty R  (default 1.0 = off)\n"
            "      --seed S            random seed (default 0x5eed)\n"
            "      --session FILE      reuse and save the evaluated tokens and KV cache (zstd; see docs/sessions.md)\n"
            "      --session-overwrite replace a --session file saved with another model or KV type (kept otherwise)\n"
            "memory:\n"
            "      --ram-budget SIZE   memory the run may use, RSS + page cache (96M, 1.5G, 2GiB, bytes; default\n"
            "                          auto: MemAvailable or the cgroup limit minus a margin). The planner keeps\n"
            "                          what fits resident and streams the rest (see sluice plan)\n"
            "      --kv f16|f32|q8_0   KV cache precision (default f16; the planner may pick q8_0 or spill)\n"
            "      --kv-spill-dir DIR  where a spilled KV cache lives (default $TMPDIR or /var/tmp)\n"
            "      --disk-bw GB/s|now  disk read rate for the plan's prediction (default: measured once per device\n"
            "                          and way of reading, then cached; now: measured now, 1 GiB, ~1-2 s)\n"
            "      --compute-bw GB/s   weight bytes per second the decode kernels process, for the prediction\n"
            "                          (default: measured once per kernel path, thread count and weight type)\n"
            "streaming (weights read from disk as the forward pass reaches them):\n"
            "      --stream            stream every weight matrix (norms stay resident)\n"
            "      --stream-lm-head    stream only the LM head (output.weight), in row chunks\n"
            "      --io pread|mmap|uring   read backend (default uring; falls back to pread)\n"
            "      --stream-unit U     block | tensor | CHUNK (MiB, e.g. 4 or 0.5): piece size (default tensor)\n"
            "      --prefetch N        pieces in flight ahead of the one computing (default 2)\n"
            "      --lm-head-chunk R   rows per LM-head piece (default 1024)\n"
            "      --no-direct         buffered reads + POSIX_FADV_DONTNEED instead of O_DIRECT\n");
}
