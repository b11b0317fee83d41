/* tests/test_api.c — the public C API (include/sluice.h) and the installed library.
 *
 * The API is a thin layer over the engine, so most checks are exact: the same logits as the engine
 * called directly (memcmp), llama.cpp's greedy tokens on the trained stories260K model (whose
 * top-1/top-2 margins over the first 32 steps are >= 0.067, far above the ~0.02 by which a correct
 * F32 runtime differs from llama.cpp there: see ../shared/README.md), streamed = resident bitwise.
 * The last test installs the build into a temporary prefix with `cmake --install`, builds
 * examples/ against it with pkg-config and runs the example on the bundled model.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "include/sluice.h"
#include "runtime/engine/forward.h"
#include "runtime/engine/model.h"
#include "util/golden.h"

#define STORIES SL_SOURCE_DIR "/models/stories260K.gguf"
#define MICRO   SL_SHARED_DIR "/models/micro-llama.Q8_0.gguf"

static void open_model(const char *path, bool stream, sluice_model **m, sluice_ctx **c)
{
    sluice_params p;
    sluice_params_default(&p);
    p.planner = SLUICE_PLANNER_OFF;
    p.n_threads = 1;
    p.n_ctx = 256;
    p.stream_all = stream;
    p.io = SLUICE_IO_PREAD;
    char err[256];
    cr_assert_eq(sluice_open(path, &p, m, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sluice_ctx_new(*m, c, err, sizeof err), 0, "%s", err);
}

/* Greedy generation through the API reproduces llama.cpp's tokens on stories260K. */
typedef struct collect { int32_t ids[256]; int n; char text[4096]; size_t len; } collect;

static int on_tok(void *u, int32_t id, const char *text, size_t len)
{
    collect *c = u;
    if (id >= 0) c->ids[c->n++] = id;
    cr_assert_lt(c->len + len, sizeof c->text);
    memcpy(c->text + c->len, text, len);
    c->len += len;
    return 0;
}

/* No Criterion timeouts (they leak inside Criterion under LSan when tests run in parallel); ctest
 * has its own, and every child process here is waited for with a limit of its own or exits. */
Test(api, greedy_matches_llama_cpp_on_stories)
{
    golden_run g;
    cr_assert_eq(golden_read_txt(shared_path("golden/stories260K/p1_once.txt"), &g), 0);
    sluice_model *m;
    sluice_ctx *c;
    open_model(STORIES, false, &m, &c);
    /* the prompt tokenizes as llama.cpp tokenized it */
    int32_t ids[64];
    int n = sluice_tokenize(m, "Once upon a time", -1, SLUICE_TOK_ADD_SPECIAL, ids, 64);
    cr_assert_eq(n, g.n_prompt);
    cr_expect_eq(memcmp(ids, g.prompt, (size_t)n * 4), 0);
    cr_expect_eq(sluice_tokenize(m, "Once upon a time", -1, SLUICE_TOK_ADD_SPECIAL, NULL, 0), n, "counting call");
    cr_expect_null(sluice_logits(c), "no logits before an evaluation");
    cr_assert_eq(sluice_eval(c, ids, n), 0, "%s", sluice_ctx_error(c));
    sluice_sampler_params sp;
    sluice_sampler_params_default(&sp);
    sp.temp = 0;
    sluice_sampler *s = sluice_sampler_new(m, &sp);
    collect col = { .n = 0 };
    int got = sluice_generate(c, s, 32, on_tok, &col);
    cr_assert_eq(got, 32);
    cr_expect_eq(sluice_stop_reason(c), SLUICE_STOP_LIMIT);
    for (int i = 0; i < 32; i++)
        cr_expect_eq(col.ids[i], g.steps[i].token, "step %d: %d, llama.cpp %d", i, col.ids[i], g.steps[i].token);
    /* every reported token but the last is in the context */
    cr_expect_eq(sluice_n_past(c), n + 31);
    /* the streamed text is the detokenized ids (minus the SPM leading space rule) */
    char det[4096];
    int64_t dl = sluice_detokenize(m, col.ids, 32, det, sizeof det);
    cr_assert_gt(dl, 0);
    cr_expect(col.len == (size_t)dl || (col.len == (size_t)dl + 1 && col.text[0] == ' '),
              "text '%.*s' vs detokenized '%.*s'", (int)col.len, col.text, (int)dl, det);
    cr_expect_eq(memcmp(col.text + (col.len - (size_t)dl), det, (size_t)dl), 0);
    sluice_sampler_free(s);
    sluice_ctx_free(c);
    sluice_close(m);
}

/* The API's logits are the engine's: same tokens through sl_eval directly give the same floats. */
Test(api, logits_equal_the_engine_and_streaming)
{
    int32_t t[6] = { 1, 403, 407, 261, 378, 383 };
    sluice_model *m, *ms;
    sluice_ctx *c, *cs;
    open_model(MICRO, false, &m, &c);
    open_model(MICRO, true, &ms, &cs);
    sluice_model_info mi;
    sluice_model_get_info(m, &mi);
    cr_assert_eq(sluice_eval(c, t, 6), 0);
    cr_assert_eq(sluice_eval(cs, t, 6), 0, "%s", sluice_ctx_error(cs));
    cr_expect_eq(memcmp(sluice_logits(c), sluice_logits(cs), (size_t)mi.n_vocab * 4), 0, "streamed != resident");
    sluice_plan_info pi;
    sluice_model_get_plan(ms, &pi);
    cr_expect(!pi.all_resident && pi.n_layers_resident == 0 && pi.stream_bytes_per_token > 0);
    sluice_stats st;
    sluice_get_stats(ms, cs, &st);
    cr_expect_str_eq(st.backend, "pread");
    cr_expect_gt(st.stream_bytes_read, 0u);
    cr_expect_eq(st.n_past, 6);
    cr_expect_eq(st.n_eval, 6u);

    char err[256];
    sl_model *em;
    cr_assert_eq(sl_model_open(MICRO, &em, err, sizeof err), 0);
    cr_assert_eq(sl_model_load_resident(em, err, sizeof err), 0);
    sl_pool *pool = sl_pool_create(1);
    sl_ctx *ec;
    sl_ctx_params cp = { .n_ctx = 256, .n_batch = 512, .kv_type = 0, .kv_spill_dir = NULL };
    cr_assert_eq(sl_ctx_create(em, &cp, pool, &ec, err, sizeof err), 0);
    cr_assert_eq(sl_eval(ec, t, 6), 0);
    cr_expect_eq(memcmp(sluice_logits(c), ec->logits, (size_t)mi.n_vocab * 4), 0, "API != engine");
    sl_ctx_free(ec);
    sl_pool_free(pool);
    sl_model_free(em);

    /* rewind and re-evaluate: the same logits again */
    cr_assert_eq(sluice_rewind(c, 3), 0);
    cr_expect_null(sluice_logits(c));
    cr_assert_eq(sluice_eval(c, t + 3, 3), 0);
    cr_expect_eq(memcmp(sluice_logits(c), sluice_logits(cs), (size_t)mi.n_vocab * 4), 0, "after rewind");
    cr_expect_eq(sluice_rewind(c, 7), -EINVAL);
    sluice_ctx_free(c);
    sluice_close(m);
    sluice_ctx_free(cs);
    sluice_close(ms);
}

/* Errors: one line each, the right errno, objects still usable. */
Test(api, errors)
{
    sluice_model *m = (sluice_model *)0x1;
    char err[256] = "";
    cr_expect_eq(sluice_open("/nonexistent/model.gguf", NULL, &m, err, sizeof err), -ENOENT);
    cr_expect(strstr(err, "/nonexistent/model.gguf"), "%s", err);
    cr_expect_eq(m, (sluice_model *)0x1, "*out untouched on failure");

    sluice_ctx *c;
    sluice_params p;
    sluice_params_default(&p);
    p.planner = SLUICE_PLANNER_OFF;
    p.n_ctx = 4;
    p.n_threads = 1;
    cr_assert_eq(sluice_open(STORIES, &p, &m, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sluice_ctx_new(m, &c, err, sizeof err), 0, "%s", err);
    int32_t t[5] = { 1, 403, 407, 261, 378 };
    cr_expect_eq(sluice_eval(c, t, 5), -ENOSPC);
    cr_expect(strstr(sluice_ctx_error(c), "context full"), "%s", sluice_ctx_error(c));
    cr_expect_eq(sluice_n_past(c), 0);
    cr_assert_eq(sluice_eval(c, t, 4), 0);
    /* generation stops when the context is full */
    sluice_sampler *s = sluice_sampler_new(m, NULL);
    cr_expect_eq(sluice_generate(c, s, 10, NULL, NULL), 1);
    cr_expect_eq(sluice_stop_reason(c), SLUICE_STOP_CTX_FULL);
    /* a cancel request stops generation until it is cleared */
    sluice_reset(c);
    cr_assert_eq(sluice_eval(c, t, 2), 0);
    sluice_cancel(c);
    cr_expect_eq(sluice_generate(c, s, 2, NULL, NULL), -ECANCELED);
    cr_expect_eq(sluice_stop_reason(c), SLUICE_STOP_CANCELED);
    cr_expect_eq(sluice_eval(c, t, 1), -ECANCELED);
    cr_expect_eq(sluice_n_past(c), 2, "a cancelled evaluation adds nothing");
    sluice_uncancel(c);
    /* a failed evaluation leaves no current logits; prefill redoes the last token to get them */
    cr_expect_lt(sluice_sample(s, c), 0);
    cr_expect_eq(sluice_prefill(c, t, 2), 1);
    cr_expect_eq(sluice_generate(c, s, 2, NULL, NULL), 2);
    /* sampling before any evaluation is refused */
    sluice_reset(c);
    cr_expect_lt(sluice_sample(s, c), 0);
    cr_expect_eq(sluice_token_piece(m, -5, false, err, sizeof err), -EINVAL);
    cr_expect(sluice_token_is_eog(m, 2), "</s> ends generation");
    sluice_sampler_free(s);
    sluice_ctx_free(c);
    sluice_close(m);
}

/* Planning without loading; the budget is honoured or refused with the minimum that works. */
Test(api, plan)
{
    sluice_params p;
    sluice_params_default(&p);
    p.ram_budget = 1ull << 30;
    p.n_threads = 1;
    sluice_plan_info pi;
    char err[256];
    cr_assert_eq(sluice_plan(MICRO, &p, &pi, err, sizeof err), 0, "%s", err);
    cr_expect(pi.planned && pi.all_resident);
    cr_expect_leq(pi.planned_bytes, p.ram_budget);
    p.ram_budget = 64 << 10;   /* 64 KiB: less than the runtime itself */
    cr_expect_eq(sluice_plan(MICRO, &p, &pi, err, sizeof err), -ENOSPC);
    cr_expect_gt(pi.min_budget, p.ram_budget);
    cr_expect(strstr(err, "--ram-budget"), "%s", err);
    cr_expect_str_eq(sluice_version(), SLUICE_VERSION);
}

/* Progress: prompt progress rises to the total, with streamed weights moving inside the batch. */
typedef struct prog { uint64_t last, total; int calls; bool monotonic; } prog;
static void on_prog(void *u, const char *stage, uint64_t done, uint64_t total)
{
    prog *p = u;
    if (strcmp(stage, "prompt")) return;
    if (done < p->last) p->monotonic = false;
    p->last = done;
    p->total = total;
    p->calls++;
}

Test(api, prompt_progress)
{
    sluice_params p;
    sluice_params_default(&p);
    p.planner = SLUICE_PLANNER_OFF;
    p.n_threads = 1;
    p.n_ctx = 64;
    p.n_batch = 4;
    p.stream_all = true;
    p.io = SLUICE_IO_PREAD;
    prog pr = { .monotonic = true };
    p.progress = on_prog;
    p.user = &pr;
    sluice_model *m;
    sluice_ctx *c;
    char err[256];
    cr_assert_eq(sluice_open(MICRO, &p, &m, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sluice_ctx_new(m, &c, err, sizeof err), 0, "%s", err);
    int32_t t[10] = { 1, 403, 407, 261, 378, 383, 286, 261, 400, 300 };
    cr_assert_eq(sluice_eval(c, t, 10), 0);
    cr_expect(pr.monotonic);
    cr_expect_eq(pr.last, 10u);
    cr_expect_eq(pr.total, 10u);
    cr_expect_gt(pr.calls, 3 * 7, "progress moves inside batches (%d calls)", pr.calls);
    sluice_ctx_free(c);
    sluice_close(m);
}

/* ---- the installed library ---------------------------------------------------------------------- */

static int sh(const char *cmd)
{
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(install, example_builds_against_the_installed_library)
{
#ifdef SL_CROSSCOMPILING
    cr_skip_test("skipped: cross build: the example would be built by the host's cc against the target's library");
#endif
    char tmp[] = "/tmp/sl_install_XXXXXX", cmd[4096];
    cr_assert_not_null(mkdtemp(tmp));
    snprintf(cmd, sizeof cmd, "cmake --install '%s' --prefix '%s/prefix' > '%s/install.log' 2>&1", SL_BINARY_DIR, tmp, tmp);
    cr_assert_eq(sh(cmd), 0, "cmake --install failed (see %s/install.log)", tmp);
    const char *files[] = { "bin/sluice", "lib/libsluice.so", "lib/libsluice.a", "include/sluice.h",
                            "lib/pkgconfig/sluice.pc", "share/sluice/stories260K.gguf" };
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char p[512];
        struct stat st;
        snprintf(p, sizeof p, "%s/prefix/%s", tmp, files[i]);
        cr_expect_eq(stat(p, &st), 0, "%s was not installed", files[i]);
    }
    /* an instrumented library needs an instrumented program */
#if defined(__SANITIZE_ADDRESS__)
    const char *cflags = "-O1 -g -fsanitize=address,undefined";
#else
    const char *cflags = "-O2 -g";
#endif
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s/ex' && PKG_CONFIG_PATH='%s/prefix/lib/pkgconfig' make -s -C '%s/examples' OUT='%s/ex' "
             "CFLAGS='%s -Wall -Wextra -Werror' > '%s/make.log' 2>&1",
             tmp, tmp, SL_SOURCE_DIR, tmp, cflags, tmp);
    cr_assert_eq(sh(cmd), 0, "building the example failed (see %s/make.log)", tmp);
    /* linked against the installed shared library, which exports only the API */
    snprintf(cmd, sizeof cmd, "ldd '%s/ex/generate' | grep -q '%s/prefix/lib/pkgconfig/../../lib/libsluice.so\\|%s/prefix/lib/libsluice.so'",
             tmp, tmp, tmp);
    cr_expect_eq(sh(cmd), 0, "the example does not load the installed libsluice.so");
    snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s/prefix/lib/libsluice.so' | awk '$2 == \"T\" && $3 !~ /^sluice_/' | grep -q .",
             tmp);
    cr_expect_neq(sh(cmd), 0, "libsluice.so exports symbols outside the sluice_ API");
    snprintf(cmd, sizeof cmd, "cd / && '%s/ex/generate' -n 24 > '%s/out.txt' 2> '%s/err.txt'", tmp, tmp, tmp);
    cr_assert_eq(sh(cmd), 0, "the example failed (see %s/err.txt)", tmp);
    char out[4096] = "";
    snprintf(cmd, sizeof cmd, "%s/out.txt", tmp);
    FILE *f = fopen(cmd, "r");
    cr_assert_not_null(f);
    size_t n = fread(out, 1, sizeof out - 1, f);
    fclose(f);
    out[n] = 0;
    /* greedy on the bundled model: llama.cpp's continuation of "Once upon a time" */
    cr_expect(!strncmp(out, "Once upon a time, there was a little girl named Lily.", 53), "example printed: %s", out);
    /* the installed CLI finds the installed model */
    snprintf(cmd, sizeof cmd, "cd / && '%s/prefix/bin/sluice' run -t 1 --temp 0 -n 8 -p 'Once upon a time' > '%s/cli.txt' 2>&1",
             tmp, tmp);
    cr_expect_eq(sh(cmd), 0, "the installed sluice failed (see %s/cli.txt)", tmp);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    sh(cmd);
}
