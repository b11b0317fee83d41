/* runtime/cli/genopts.c — options shared by `sluice run`, `sluice chat` and `sluice bench` (see
 * genopts.h). */
#include "runtime/cli/genopts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "loader/io.h"
#include "runtime/cli/cli.h"

const cli_opt gen_opt_table[] = {
    { GEN_MODEL, "-m|--model", "FILE", "GGUF model (default: the bundled stories260K)" },
    { GEN_PREDICT, "-n|--n-predict|--predict", "N", "tokens to generate (-1: until end of text or a full context)" },
    { GEN_CTX, "-c|--ctx|--ctx-size", "N", "context length (default: the model's trained context, halved until it\n"
                                           "costs the plan no speed; reaching it ends the run normally)" },
    { GEN_BATCH, "-b|--batch|--batch-size", "N", "prompt positions per forward batch (default 512)" },
    { GEN_THREADS, "-t|--threads", "N", "threads (default: number of CPUs)" },
    { GEN_TEMP, "--temp", "T", "temperature (default 0.8; 0 = greedy)" },
    { GEN_TOP_K, "--top-k", "K", "(default 40; 0 = off)" },
    { GEN_TOP_P, "--top-p", "P", "(default 0.95; 1 = off)" },
    { GEN_MIN_P, "--min-p", "P", "(default 0.05; 0 = off)" },
    { GEN_REPEAT, "--repeat-penalty", "R", "(default 1.0 = off)" },
    { GEN_SEED, "-s|--seed", "S", "random seed (default and -1: a random one, printed by --stats; give it to repeat a run)" },
    { GEN_REVERSE, "-r|--reverse-prompt", "TEXT", "stop when the output ends with TEXT (may be given up to 8 times)" },
    { GEN_IGNORE_EOS, "--ignore-eos", NULL, "never choose an end-of-text token (generate -n tokens)" },
    { GEN_SESSION, "--session", "FILE", "reuse and save the evaluated tokens and KV cache (zstd; see docs/sessions.md)" },
    { GEN_SESSION_OVERWRITE, "--session-overwrite", NULL, "replace a --session file made for another model or KV type\n"
                                                         "(without it such a file is kept and not used)" },
    { GEN_STATS, "--stats", NULL, "print load time, tok/s, peak RSS (and I/O figures) to stderr" },
    { GEN_SPECIAL, "--special", NULL, "recognise special-token texts in the prompt" },
    { GEN_QUIET, "-q|--quiet", NULL, "no prompt echo, notices or progress bars" },
    { 0, NULL, NULL, "speculative decoding (drafted tokens verified in one weight pass; see docs/speculative.md)" },
    { GEN_DRAFT, "--draft", "auto|ngram|model|off", "drafter (default auto: n-gram drafts when weights stream, none\n"
                                               "when resident; with -md the draft model); greedy output is identical\n"
                                               "either way" },
    { GEN_DRAFT_MAX, "--draft-max", "K", "most drafted tokens per pass (default 8; the number used adapts to the\n"
                                         "measured pass times and acceptance)" },
    { GEN_DRAFT_FIXED, "--draft-fixed", NULL, "draft --draft-max tokens whenever possible (no adaptation; for benchmarks)" },
    { GEN_LOOKUP, "--lookup", "FILE", "a text the drafter may copy from (the document being edited, summarized or\n"
                                      "quoted); implies --draft ngram" },
    { GEN_DRAFT_MODEL, "-md|--draft-model", "FILE", "a smaller model with the same vocabulary that drafts greedily (implies\n"
                                                    "--draft model); it shares --ram-budget: resident if the target still\n"
                                                    "fits beside it, else streamed (the \"draft model:\" line, shown unless\n"
                                                    "-q, and sluice plan -md: its share and whether it is worth it)" },
    { 0, NULL, NULL, NULL },
};

const cli_opt gen_mem_table[] = {
    { 0, NULL, NULL, "memory" },
    { GEN_BUDGET, "--ram-budget", "SIZE", "memory the run may use, RSS + page cache (96M, 1.5G, 2GiB, bytes; default\n"
                                          "auto: MemAvailable or the cgroup limit minus a margin).  The planner keeps\n"
                                          "what fits resident and streams the rest (see sluice plan)" },
    { GEN_KV, "--kv", "f16|f32|q8_0", "KV cache precision (default f16; the planner may pick q8_0 or spill)" },
    { GEN_SPILL, "--kv-spill-dir", "DIR", "where a spilled KV cache lives (default $TMPDIR or /var/tmp)" },
    { GEN_DISK_BW, "--disk-bw", "GB/s|now", "disk read rate for the plan's prediction (default: measured once per\n"
                                            "device and way of reading, then cached; now: measured now, 1 GiB)" },
    { GEN_COMPUTE_BW, "--compute-bw", "GB/s", "weight bytes per second the decode kernels process, for the prediction\n"
                                              "(default: measured once per kernel path, thread count and weight type)" },
    { 0, NULL, NULL, "streaming (weights read from disk as the forward pass reaches them)" },
    { GEN_STREAM, "--stream", NULL, "stream every weight matrix (norms stay resident)" },
    { GEN_STREAM_HEAD, "--stream-lm-head", NULL, "stream only the LM head (output.weight), in row chunks" },
    { GEN_IO, "--io", "pread|mmap|uring", "read backend (default uring; falls back to pread)" },
    { GEN_UNIT, "--stream-unit", "U", "block | tensor | CHUNK (MiB, e.g. 4 or 0.5): piece size (default tensor)" },
    { GEN_PREFETCH, "--prefetch", "N", "pieces in flight ahead of the one computing (default 2)" },
    { GEN_HEAD_CHUNK, "--lm-head-chunk", "R", "rows per LM-head piece (default 1024)" },
    { GEN_NO_DIRECT, "--no-direct", NULL, "buffered reads + POSIX_FADV_DONTNEED instead of O_DIRECT" },
    { GEN_EXPERT_PREFETCH, "--expert-prefetch", NULL, "mixture of experts: read the experts the next block will probably\n"
                                                      "take into the expert cache while the current one computes (off)" },
    { 0, NULL, NULL, NULL },
};

/* A seed nobody chose: from the kernel's random source. */
static uint64_t random_seed(void)
{
    uint64_t s = 0;
    if (getrandom(&s, sizeof s, GRND_NONBLOCK) != (ssize_t)sizeof s) s = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    return s;
}

void gen_opts_default(gen_opts *o, long n_predict)
{
    *o = (gen_opts){ .n_predict = n_predict, .n_batch = 512, .kv_type = SLUICE_KV_AUTO, .io = SLUICE_IO_URING,
                     .prefetch = 2, .head_rows = 1024 };   /* disk_bw, compute_bw 0: measured */
    sluice_sampler_params_default(&o->sp);
    o->sp.seed = random_seed();
}

static int parse_seed(const char *v, gen_opts *o)
{
    if (!strcmp(v, "-1")) { o->sp.seed = random_seed(); o->seed_given = false; return 1; }
    char *end;
    errno = 0;
    unsigned long long s = strtoull(v, &end, 0);
    if (errno || *end || end == v || *v == '-') {
        cli_err("--seed: '%s' is not an unsigned integer (or -1 for a random seed)", v);
        return -1;
    }
    o->sp.seed = s;
    o->seed_given = true;
    return 1;
}

static int parse_kv(const char *v, gen_opts *o)
{
    if (!strcmp(v, "f16")) o->kv_type = SLUICE_KV_F16;
    else if (!strcmp(v, "f32")) o->kv_type = SLUICE_KV_F32;
    else if (!strcmp(v, "q8_0")) o->kv_type = SLUICE_KV_Q8_0;
    else { cli_err("--kv: '%s' is not f16, f32 or q8_0", v); return -1; }
    return 1;
}

/* Options whose value is a number or a word. */
static int apply_value(const char *a, const char *v, int id, gen_opts *o)
{
    double d;
    long l;
    switch (id) {
    case GEN_MODEL: o->model = v; return 1;
    case GEN_PREDICT: return cli_int(a, v, -1, 1 << 24, &o->n_predict) ? 1 : -1;
    case GEN_CTX: return cli_int(a, v, 1, 1 << 22, &o->n_ctx) ? 1 : -1;
    case GEN_BATCH: return cli_int(a, v, 1, 1 << 16, &o->n_batch) ? 1 : -1;
    case GEN_THREADS: return cli_int(a, v, 1, 256, &o->threads) ? 1 : -1;
    case GEN_TEMP: if (!cli_float(a, v, 0, 100, &d)) return -1; o->sp.temp = (float)d; return 1;
    case GEN_TOP_K: if (!cli_int(a, v, 0, 1 << 30, &l)) return -1; o->sp.top_k = (int)l; return 1;
    case GEN_TOP_P: if (!cli_float(a, v, 0, 1, &d)) return -1; o->sp.top_p = (float)d; return 1;
    case GEN_MIN_P: if (!cli_float(a, v, 0, 1, &d)) return -1; o->sp.min_p = (float)d; return 1;
    case GEN_REPEAT: if (!cli_float(a, v, 0.01, 100, &d)) return -1; o->sp.repeat_penalty = (float)d; return 1;
    case GEN_SEED: return parse_seed(v, o);
    case GEN_REVERSE:
        if (!*v) { cli_err("%s: the text is empty", a); return -1; }
        if (o->n_reverse == GEN_MAX_REVERSE) { cli_err("%s: at most %d reverse prompts", a, GEN_MAX_REVERSE); return -1; }
        o->reverse[o->n_reverse++] = v;
        return 1;
    case GEN_KV: return parse_kv(v, o);
    case GEN_BUDGET: o->budget = v; return 1;
    case GEN_SPILL: o->spill_dir = v; return 1;
    case GEN_SESSION: o->session = v; return 1;
    case GEN_DISK_BW:
        if (!strcmp(v, "now")) { o->disk_bw = SLUICE_DISK_BW_NOW; return 1; }
        return cli_float(a, v, 0.001, 1000, &o->disk_bw) ? 1 : -1;
    case GEN_COMPUTE_BW: return cli_float(a, v, 0.001, 1000, &o->compute_bw) ? 1 : -1;
    case GEN_IO: {
        sl_io_backend b;
        if (sl_io_backend_parse(v, &b)) { cli_err("--io: '%s' is not pread, mmap or uring", v); return -1; }
        o->io = (int)b;
        return 1;
    }
    case GEN_UNIT:
        if (!strcmp(v, "tensor")) o->chunk = 0;
        else if (!strcmp(v, "block")) { o->chunk = 0; if (o->prefetch < 7) o->prefetch = 7; }
        else { if (!cli_float(a, v, 0.001, 65536, &d)) return -1; o->chunk = (uint64_t)(d * 1048576); }
        return 1;
    case GEN_PREFETCH: return cli_int(a, v, 1, 32, &o->prefetch) ? 1 : -1;   /* the library's bound */
    case GEN_HEAD_CHUNK: return cli_int(a, v, 1, 1 << 24, &o->head_rows) ? 1 : -1;
    case GEN_DRAFT_MAX: return cli_int(a, v, 1, 64, &o->draft_max) ? 1 : -1;
    case GEN_DRAFT_MODEL: o->draft_model = v; return 1;
    case GEN_LOOKUP: o->lookup = v; if (o->draft == SLUICE_DRAFT_AUTO) o->draft = SLUICE_DRAFT_NGRAM; return 1;
    case GEN_DRAFT:
        if (!strcmp(v, "auto")) o->draft = SLUICE_DRAFT_AUTO;
        else if (!strcmp(v, "ngram")) o->draft = SLUICE_DRAFT_NGRAM;
        else if (!strcmp(v, "off")) o->draft = SLUICE_DRAFT_OFF;
        else if (!strcmp(v, "model")) o->draft = SLUICE_DRAFT_MODEL;
        else { cli_err("--draft: '%s' is not auto, ngram, model or off", v); return -1; }
        return 1;
    default: return 0;
    }
}

int gen_opt_apply(int argc, char **argv, int *pi, const cli_opt *op, gen_opts *o)
{
    if (!op || op->id < GEN_MODEL) return 0;
    switch (op->id) {
    case GEN_IGNORE_EOS: o->sp.ignore_eog = true; return 1;
    case GEN_SESSION_OVERWRITE: o->session_overwrite = true; return 1;
    case GEN_STREAM: o->stream = true; return 1;
    case GEN_STREAM_HEAD: o->stream_head = true; return 1;
    case GEN_NO_DIRECT: o->no_direct = true; return 1;
    case GEN_EXPERT_PREFETCH: o->expert_prefetch = true; return 1;
    case GEN_STATS: o->stats = true; return 1;
    case GEN_SPECIAL: o->special = true; return 1;
    case GEN_QUIET: o->quiet = true; return 1;
    case GEN_DRAFT_FIXED: o->draft_fixed = true; return 1;
    default: break;
    }
    const char *a = argv[*pi], *v;
    if (!cli_val(argc, argv, pi, &v)) return -1;
    return apply_value(a, v, op->id, o);
}

bool gen_opts_check(gen_opts *o)
{
    if (o->session_overwrite && !o->session) { cli_err("--session-overwrite needs --session FILE"); return false; }
    if (o->draft == SLUICE_DRAFT_MODEL && !o->draft_model) { cli_err("--draft model needs -md FILE (the draft model)"); return false; }
    if (o->draft_model && o->draft == SLUICE_DRAFT_NGRAM) {
        cli_err("-md %s and --draft ngram%s: one drafter at a time (a draft model does not use --lookup)", o->draft_model,
                o->lookup ? " (implied by --lookup)" : "");
        return false;
    }
    if (o->draft_model && o->draft == SLUICE_DRAFT_AUTO) o->draft = SLUICE_DRAFT_MODEL;
    if (o->budget && strcmp(o->budget, "auto")) {
        uint64_t b;
        if (!cli_size("--ram-budget", o->budget, &b)) return false;
        if (b < 1048576) {
            cli_err("--ram-budget %s is less than 1 MiB; give a size such as 512M or 2G (or auto)", o->budget);
            return false;
        }
    }
    return true;
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
    p->expert_prefetch = o->expert_prefetch;
    p->disk_bw = o->disk_bw;
    p->compute_bw = o->compute_bw;
    p->draft = o->draft;
    p->draft_max = (int)o->draft_max;
    p->draft_fixed = o->draft_fixed;
    p->draft_model = o->draft == SLUICE_DRAFT_OFF ? NULL : o->draft_model;
    return true;
}

int gen_load_lookup(const gen_opts *o, sluice_model *M, sluice_ctx *C)
{
    if (!o->lookup) return 0;
    FILE *f = fopen(o->lookup, "rb");
    if (!f) { cli_err("--lookup %s: %s", o->lookup, strerror(errno)); return -1; }
    const size_t cap = 16u << 20;   /* a lookup text is a document, not a corpus: 16 MiB at most */
    char *buf = malloc(cap + 1);
    size_t n = buf ? fread(buf, 1, cap + 1, f) : 0;
    int bad = !buf || ferror(f);
    fclose(f);
    if (bad || n > cap) {
        cli_err("--lookup %s: %s", o->lookup, !buf ? "out of memory" : n > cap ? "larger than 16 MiB" : "read error");
        free(buf);
        return -1;
    }
    /* count first: a byte can make several tokens (an SPM vocabulary without "▁" spells a space
     * as three byte tokens), so the text's length is no bound on its token count */
    int nt = sluice_tokenize(M, buf, (ptrdiff_t)n, 0, NULL, 0);
    int32_t *ids = nt >= 0 ? malloc(((size_t)nt + 1) * sizeof *ids) : NULL;
    int k = nt < 0 ? nt : !ids ? -ENOMEM : sluice_tokenize(M, buf, (ptrdiff_t)n, 0, ids, nt);
    free(buf);
    int rc = k < 0 ? k : sluice_ctx_set_lookup(C, ids, k);
    free(ids);
    if (rc) { cli_err("--lookup %s: cannot use it (%s)", o->lookup, strerror(-rc)); return -1; }
    return k;
}

int gen_default_ctx(const gen_opts *o)
{
    if (o->n_ctx || o->stream || o->stream_head) return (int)o->n_ctx;
    sluice_params p;
    if (!gen_opts_params(o, &p)) return 0;
    sluice_plan_info base, pi;
    char err[SLUICE_ERRLEN];
    p.disk_bw = p.disk_bw > 0 ? p.disk_bw : 1.0;   /* the decisions do not depend on the rates: no probe */
    p.compute_bw = p.compute_bw > 0 ? p.compute_bw : 1.0;
    p.n_ctx = 0;   /* the library's default context: the baseline a longer one must not make slower */
    if (sluice_plan(o->model, &p, &base, err, sizeof err)) return 0;   /* the real open reports it */
    for (int ctx = base.n_ctx_train; ctx > base.n_ctx; ctx /= 2) {
        p.n_ctx = ctx;
        if (sluice_plan(o->model, &p, &pi, err, sizeof err)) continue;
        /* the longer context may take memory, not speed: same KV precision in memory, no weight
         * pushed out to the stream */
        if (!pi.kv_spilled && pi.kv_type == base.kv_type && pi.n_layers_resident >= base.n_layers_resident &&
            (pi.lm_head_resident || !base.lm_head_resident))
            return ctx;
    }
    return 0;
}

bool gen_reverse_hit(const gen_opts *o, const char *text, size_t n)
{
    for (int i = 0; i < o->n_reverse; i++) {
        size_t l = strlen(o->reverse[i]);
        if (l <= n && !memcmp(text + n - l, o->reverse[i], l)) return true;
    }
    return false;
}

static const char *kv_label(int kv) { return kv == SLUICE_KV_F32 ? "f32" : kv == SLUICE_KV_Q8_0 ? "q8_0" : "f16"; }

/* Bytes per KV element (q8_0: 34 bytes per 32 values). */
static double kv_elem_bytes(int kv) { return kv == SLUICE_KV_F32 ? 4.0 : kv == SLUICE_KV_Q8_0 ? 34.0 / 32 : 2.0; }

bool gen_check_kv(const gen_opts *o, const sluice_model *M, const sluice_ctx *C)
{
    if (o->kv_type == SLUICE_KV_AUTO) return true;
    sluice_plan_info pi;
    sluice_model_get_plan(M, &pi);
    if (!pi.planned) return true;
    if (pi.kv_type != o->kv_type) {   /* the library changed it: say so */
        fprintf(stderr, "sluice: note: KV cache in %s, not the %s asked for: the plan for this budget spills it to "
                "disk, which holds f16\n", kv_label(pi.kv_type), kv_label(o->kv_type));
        return true;
    }
    if (pi.plan_kv_spilled || pi.plan_kv_type == o->kv_type) return true;
    sluice_stats st;
    sluice_get_stats(M, C, &st);
    double planned = st.kv_bytes * kv_elem_bytes(pi.plan_kv_type) / kv_elem_bytes(o->kv_type);
    double extra = (double)st.kv_bytes - planned;
    if (extra <= 0 || pi.planned_bytes + extra <= pi.budget) return true;
    cli_err("--kv %s: the KV cache needs %.1f MiB in %s, but the plan for the %.0f MiB budget has room for %.1f MiB "
            "(%s); raise --ram-budget or leave out --kv", kv_label(o->kv_type), st.kv_bytes / 1048576.0,
            kv_label(o->kv_type), pi.budget / 1048576.0, planned / 1048576.0, kv_label(pi.plan_kv_type));
    return false;
}
