/* tests/test_session.c — session files: save, restore, refuse.
 *
 * The contract: a context restored from a session continues exactly as the context that saved it
 * would have — logits bit-identical (memcmp, no tolerance: the same KV bytes and the same kernels
 * must give the same floats) — and a file that is foreign, truncated or corrupt is refused with a
 * message and never applied.  Models and prompts are llama.cpp's golden ones (../shared), the
 * teacher-forced continuation is the golden greedy tokens.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include "include/sluice.h"
#include "runtime/api/api_internal.h"
#include "runtime/api/session.h"
#include "util/golden.h"

#define F16_MODEL SL_SHARED_DIR "/models/micro-llama.F16.gguf"
#define Q8_MODEL  SL_SHARED_DIR "/models/micro-llama.Q8_0.gguf"
#define STEPS 8

static char g_tmp[64];
static void setup(void) { snprintf(g_tmp, sizeof g_tmp, "/tmp/sl_sess_XXXXXX"); cr_assert_not_null(mkdtemp(g_tmp)); }
static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd)) { /* best effort */ }
}

static const char *tmp_path(const char *name)
{
    static char p[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", g_tmp, name);
    return p[k];
}

/* ---- XXH64 ------------------------------------------------------------------------------------- */

static uint64_t rng_state = 0x243f6a8885a308d3ull;
static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* XXH64 checked two independent ways: the published digest of the empty input, and zstd, which
 * stores the low 32 bits of XXH64 (seed 0) of a frame's content as its checksum. */
Test(xxh64, matches_spec_and_zstd)
{
    cr_expect_eq(sl_xxh64("", 0, 0), 0xEF46DB3751D8E999ull, "XXH64 of empty input");
    size_t lens[] = { 0, 1, 3, 4, 7, 8, 15, 31, 32, 33, 63, 64, 100, 1000, 4097, 100003 };
    unsigned char *buf = malloc(100003), *z = malloc(ZSTD_compressBound(100003));
    for (size_t i = 0; i < 100003; i++) buf[i] = (unsigned char)rnd();
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
    for (size_t k = 0; k < sizeof lens / sizeof *lens; k++) {
        size_t n = lens[k], zn = ZSTD_compress2(cc, z, ZSTD_compressBound(n), buf, n);
        cr_assert(!ZSTD_isError(zn));
        uint32_t stored;
        memcpy(&stored, z + zn - 4, 4);
        uint64_t h = sl_xxh64(buf, n, 0);
        cr_expect_eq((uint32_t)h, stored, "len %zu: low 32 bits %08x, zstd says %08x", n, (uint32_t)h, stored);
        /* streaming in uneven pieces gives the same digest */
        sl_xxh64_state s;
        sl_xxh64_init(&s, 0);
        for (size_t at = 0, step = 1; at < n; at += step, step = step * 3 % 37 + 1)
            sl_xxh64_update(&s, buf + at, at + step <= n ? step : n - at);
        cr_expect_eq(sl_xxh64_digest(&s), h, "len %zu: streaming differs", n);
    }
    cr_expect_neq(sl_xxh64(buf, 100, 1), sl_xxh64(buf, 100, 0), "the seed changes the hash");
    ZSTD_freeCCtx(cc);
    free(buf);
    free(z);
}

/* ---- helpers ----------------------------------------------------------------------------------- */

typedef struct rig { sluice_model *m; sluice_ctx *c; } rig;

static void rig_open(rig *r, const char *model, int kv, const char *spill, bool stream)
{
    sluice_params p;
    sluice_params_default(&p);
    p.planner = SLUICE_PLANNER_OFF;
    p.n_ctx = 256;
    p.n_threads = 1;
    p.kv_type = kv;
    p.kv_spill_dir = spill;
    p.stream_all = stream;
    p.io = SLUICE_IO_PREAD;
    char err[256];
    cr_assert_eq(sluice_open(model, &p, &r->m, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sluice_ctx_new(r->m, &r->c, err, sizeof err), 0, "%s", err);
}

static void rig_close(rig *r)
{
    sluice_ctx_free(r->c);
    sluice_close(r->m);
}

static int n_vocab(const rig *r)
{
    sluice_model_info mi;
    sluice_model_get_info(r->m, &mi);
    return mi.n_vocab;
}

/* Reference: the prompt in one batch, then STEPS golden tokens one at a time, without interruption.
 * Returns (STEPS + 1) logit rows: after the prompt, after each step. */
static float *reference(const char *model, const golden_run *g, int kv)
{
    rig r;
    rig_open(&r, model, kv, NULL, false);
    int V = n_vocab(&r);
    float *all = malloc((size_t)(STEPS + 1) * V * sizeof *all);
    cr_assert_eq(sluice_eval(r.c, g->prompt, g->n_prompt), 0, "%s", sluice_ctx_error(r.c));
    memcpy(all, sluice_logits(r.c), (size_t)V * 4);
    for (int s = 0; s < STEPS; s++) {
        cr_assert_eq(sluice_eval(r.c, &g->steps[s].token, 1), 0);
        memcpy(all + (size_t)(s + 1) * V, sluice_logits(r.c), (size_t)V * 4);
    }
    rig_close(&r);
    return all;
}

static void load_golden(golden_run *g, const char *name)
{
    cr_assert_eq(golden_read_txt(shared_path("golden/micro-llama/%s.p1_once.txt", name), g), 0);
    cr_assert_geq(g->n_steps, STEPS);
}

/* Restore `path` into a fresh context and continue with the golden steps: every row bit-identical. */
static void expect_continues(const char *model, const char *path, const golden_run *g, int kv, const float *ref,
                             const char *what)
{
    rig r;
    rig_open(&r, model, kv, NULL, false);
    int V = n_vocab(&r);
    char err[256];
    sluice_session_stats st;
    cr_assert_eq(sluice_session_load(r.c, path, NULL, NULL, &st, err, sizeof err), 0, "%s: %s", what, err);
    cr_expect_eq(sluice_n_past(r.c), g->n_prompt, "%s", what);
    cr_expect_eq(st.n_tokens, g->n_prompt);
    int n;
    const int32_t *t = sluice_tokens(r.c, &n);
    cr_expect_eq(memcmp(t, g->prompt, (size_t)n * 4), 0, "%s: tokens differ", what);
    cr_assert_not_null(sluice_logits(r.c), "%s: logits not restored", what);
    cr_expect_eq(memcmp(sluice_logits(r.c), ref, (size_t)V * 4), 0, "%s: restored logits differ", what);
    for (int s = 0; s < STEPS; s++) {
        cr_assert_eq(sluice_eval(r.c, &g->steps[s].token, 1), 0);
        cr_expect_eq(memcmp(sluice_logits(r.c), ref + (size_t)(s + 1) * V, (size_t)V * 4), 0,
                     "%s: step %d differs from the uninterrupted run", what, s);
    }
    rig_close(&r);
}

static void save_prompt(const char *model, const golden_run *g, int kv, const char *spill, bool stream, const char *path)
{
    rig r;
    rig_open(&r, model, kv, spill, stream);
    cr_assert_eq(sluice_eval(r.c, g->prompt, g->n_prompt), 0, "%s", sluice_ctx_error(r.c));
    char err[256];
    sluice_session_stats st;
    cr_assert_eq(sluice_session_save(r.c, path, NULL, 0, &st, err, sizeof err), 0, "%s", err);
    cr_expect_eq(st.n_tokens, g->n_prompt);
    rig_close(&r);
}

/* ---- restore = uninterrupted -------------------------------------------------------------------- */

TestSuite(session, .init = setup, .fini = teardown);

Test(session, restored_logits_are_bit_identical)
{
    golden_run g;
    load_golden(&g, "F16");
    struct { int kv; const char *name; } kvs[] = { { SLUICE_KV_F16, "f16" }, { SLUICE_KV_F32, "f32" }, { SLUICE_KV_Q8_0, "q8_0" } };
    for (size_t k = 0; k < 3; k++) {
        float *ref = reference(F16_MODEL, &g, kvs[k].kv);
        const char *path = tmp_path("a.session");
        save_prompt(F16_MODEL, &g, kvs[k].kv, NULL, false, path);
        expect_continues(F16_MODEL, path, &g, kvs[k].kv, ref, kvs[k].name);
        /* a cache spilled to disk and streamed weights save the same state */
        save_prompt(F16_MODEL, &g, kvs[k].kv, g_tmp, true, path);
        expect_continues(F16_MODEL, path, &g, kvs[k].kv, ref, "spilled + streamed");
        free(ref);
    }
}

/* Every codec restores the same bytes; sizes behave as the format says. */
Test(session, every_codec_roundtrips)
{
    golden_run g;
    load_golden(&g, "Q8_0");
    float *ref = reference(Q8_MODEL, &g, SLUICE_KV_F16);
    rig r;
    rig_open(&r, Q8_MODEL, SLUICE_KV_F16, NULL, false);
    cr_assert_eq(sluice_eval(r.c, g.prompt, g.n_prompt), 0);
    uint64_t fp;
    char err[256];
    cr_assert_eq(sluice__fingerprint(r.m, &fp, err, sizeof err), 0, "%s", err);
    int codecs[] = { SL_SESS_RAW, SL_SESS_ZSTD, SL_SESS_ZSTD_SHUFFLE };
    const char *extra = "application blob \x01\x02\x03";
    for (int k = 0; k < 3; k++) {
        sl_session_opts o = { codecs[k], 3 };
        sl_session_info info;
        const char *path = tmp_path("codec.session");
        cr_assert_eq(sl_session_save(path, r.c->c, fp, r.c->toks, r.c->n_toks, r.c->c->logits, extra, strlen(extra), &o,
                                     &info, err, sizeof err), 0, "%s", err);
        struct stat st;
        cr_assert_eq(stat(path, &st), 0);
        cr_expect_eq((uint64_t)st.st_size, info.file_bytes);
        if (codecs[k] == SL_SESS_RAW) cr_expect_eq(info.file_bytes, sizeof(sl_sess_hdr) + info.raw_bytes);
        expect_continues(Q8_MODEL, path, &g, SLUICE_KV_F16, ref, codecs[k] == SL_SESS_RAW ? "raw" : "zstd");
        rig r2;
        rig_open(&r2, Q8_MODEL, SLUICE_KV_F16, NULL, false);
        void *blob = NULL;
        size_t bl = 0;
        cr_assert_eq(sluice_session_load(r2.c, path, &blob, &bl, NULL, err, sizeof err), 0, "%s", err);
        cr_expect_eq(bl, strlen(extra));
        cr_expect(blob && !memcmp(blob, extra, bl), "extra blob differs");
        free(blob);
        rig_close(&r2);
    }
    rig_close(&r);
    free(ref);
}

/* A prompt that extends the saved one: only the new tokens are evaluated, and the logits equal
 * those of evaluating the same tokens without the save/restore in between. */
Test(session, prefill_reuses_the_saved_prefix)
{
    golden_run g;
    load_golden(&g, "F16");
    int32_t full[256];
    memcpy(full, g.prompt, (size_t)g.n_prompt * 4);
    for (int s = 0; s < 3; s++) full[g.n_prompt + s] = g.steps[s].token;
    int n_full = g.n_prompt + 3;
    /* uninterrupted: the prompt, then the 3 new tokens as one batch */
    rig a;
    rig_open(&a, F16_MODEL, SLUICE_KV_F16, NULL, false);
    cr_assert_eq(sluice_eval(a.c, g.prompt, g.n_prompt), 0);
    cr_assert_eq(sluice_eval(a.c, full + g.n_prompt, 3), 0);
    int V = n_vocab(&a);
    const char *path = tmp_path("p.session");
    save_prompt(F16_MODEL, &g, SLUICE_KV_F16, NULL, false, path);
    rig b;
    rig_open(&b, F16_MODEL, SLUICE_KV_F16, NULL, false);
    char err[256];
    cr_assert_eq(sluice_session_load(b.c, path, NULL, NULL, NULL, err, sizeof err), 0, "%s", err);
    cr_expect_eq(sluice_prefill(b.c, full, n_full), 3, "only the 3 new tokens are evaluated");
    cr_expect_eq(memcmp(sluice_logits(a.c), sluice_logits(b.c), (size_t)V * 4), 0, "logits differ");
    /* the same prompt again: nothing to evaluate, logits unchanged */
    cr_expect_eq(sluice_prefill(b.c, full, n_full), 0);
    /* a prompt that diverges inside the saved part: rewinds to the common prefix */
    full[2] ^= 1;
    cr_expect_eq(sluice_prefill(b.c, full, n_full), n_full - 2);
    rig_close(&a);
    rig_close(&b);
}

/* ---- refusals ----------------------------------------------------------------------------------- */

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(p, 1, n, f), n);
    fclose(f);
}

static unsigned char *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n);
    cr_assert_eq(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

/* Load must fail with want_rc and a message containing kw; the context is then either untouched
 * (still holding its 3 tokens) or empty, and evaluates correctly afterwards. */
static void expect_refused(rig *r, const char *path, int want_rc, const char *kw, const char *what)
{
    char err[256] = "";
    int before = sluice_n_past(r->c);
    int rc = sluice_session_load(r->c, path, NULL, NULL, NULL, err, sizeof err);
    cr_expect_eq(rc, want_rc, "%s: rc %d, want %d (%s)", what, rc, want_rc, err);
    cr_expect(strstr(err, kw), "%s: message '%s' lacks '%s'", what, err, kw);
    cr_expect(err[0] && !strchr(err, '\n'), "%s: not one line: %s", what, err);
    int n = sluice_n_past(r->c);
    cr_expect(n == before || n == 0, "%s: context holds %d tokens after a refused load", what, n);
    sluice_reset(r->c);
    int32_t t[3] = { 1, 100, 200 };
    cr_assert_eq(sluice_eval(r->c, t, 3), 0);
}

Test(session, foreign_truncated_corrupt_are_refused)
{
    golden_run g;
    load_golden(&g, "F16");
    const char *good = tmp_path("good.session"), *bad = tmp_path("bad.session");
    save_prompt(F16_MODEL, &g, SLUICE_KV_F16, NULL, false, good);
    rig r;
    rig_open(&r, F16_MODEL, SLUICE_KV_F16, NULL, false);
    int32_t t[3] = { 1, 100, 200 };
    cr_assert_eq(sluice_eval(r.c, t, 3), 0);

    expect_refused(&r, tmp_path("missing.session"), -ENOENT, "No such file", "missing");
    size_t n;
    unsigned char *img = read_all(good, &n);
    /* truncated anywhere: inside the header, right after it, inside the payload, one byte short */
    size_t cuts[] = { 0, 7, 64, sizeof(sl_sess_hdr), sizeof(sl_sess_hdr) + 10, n / 2, n - 1 };
    for (size_t k = 0; k < sizeof cuts / sizeof *cuts; k++) {
        write_file(bad, img, cuts[k]);
        expect_refused(&r, bad, -EINVAL, cuts[k] < 8 ? "not a sluice session" : "", "truncated");
    }
    /* trailing junk */
    unsigned char *longer = malloc(n + 5);
    memcpy(longer, img, n);
    memset(longer + n, 0x5a, 5);
    write_file(bad, longer, n + 5);
    expect_refused(&r, bad, -EINVAL, "trailing", "trailing data");
    free(longer);
    /* one flipped bit anywhere: header fields, tokens, logits, compressed KV */
    for (int k = 0; k < 24; k++) {
        size_t at = k < 8 ? (size_t)k * 16 : sizeof(sl_sess_hdr) + rnd() % (n - sizeof(sl_sess_hdr));
        unsigned char bit = (unsigned char)(1u << (rnd() % 8));
        img[at] ^= bit;
        write_file(bad, img, n);
        expect_refused(&r, bad, -EINVAL, "", "bit flip");
        img[at] ^= bit;
    }
    /* not a session at all */
    unsigned char junk[4096];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)rnd();
    write_file(bad, junk, sizeof junk);
    expect_refused(&r, bad, -EINVAL, "not a sluice session", "random bytes");
    free(img);
    rig_close(&r);

    /* another model with the same shapes (Q8_0 weights): the fingerprint differs */
    rig q;
    rig_open(&q, Q8_MODEL, SLUICE_KV_F16, NULL, false);
    cr_assert_eq(sluice_eval(q.c, t, 3), 0);
    expect_refused(&q, good, -EINVAL, "different model", "foreign model");
    rig_close(&q);
    /* another KV precision */
    rig k8;
    rig_open(&k8, F16_MODEL, SLUICE_KV_Q8_0, NULL, false);
    cr_assert_eq(sluice_eval(k8.c, t, 3), 0);
    expect_refused(&k8, good, -EINVAL, "f16 KV cache", "kv precision");
    rig_close(&k8);
    /* more tokens than the context holds */
    sluice_params p;
    sluice_params_default(&p);
    p.planner = SLUICE_PLANNER_OFF;
    p.n_ctx = 3;
    p.n_threads = 1;
    rig s;
    char err[256];
    cr_assert_eq(sluice_open(F16_MODEL, &p, &s.m, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sluice_ctx_new(s.m, &s.c, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sluice_eval(s.c, t, 3), 0);
    expect_refused(&s, good, -ENOSPC, "more than this context", "too long");
    rig_close(&s);
}

/* The model fingerprint: stable for a file, different across files. */
Test(session, fingerprint)
{
    rig a, b;
    rig_open(&a, F16_MODEL, SLUICE_KV_F16, NULL, false);
    rig_open(&b, Q8_MODEL, SLUICE_KV_F16, NULL, false);
    uint64_t fa, fa2, fb;
    char err[256];
    cr_assert_eq(sl_model_fingerprint(a.m->m, &fa, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sl_model_fingerprint(a.m->m, &fa2, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sl_model_fingerprint(b.m->m, &fb, err, sizeof err), 0, "%s", err);
    cr_expect_eq(fa, fa2);
    cr_expect_neq(fa, fb);
    rig_close(&a);
    rig_close(&b);
}

/* Saving replaces the file atomically and leaves no temporary behind; a bad directory is an error. */
Test(session, atomic_replace)
{
    golden_run g;
    load_golden(&g, "F16");
    const char *path = tmp_path("x.session");
    write_file(path, "old contents", 12);
    save_prompt(F16_MODEL, &g, SLUICE_KV_F16, NULL, false, path);
    save_prompt(F16_MODEL, &g, SLUICE_KV_F16, NULL, false, path);
    DIR *d = opendir(g_tmp);
    int files = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') { files++; cr_expect_str_eq(e->d_name, "x.session"); }
    closedir(d);
    cr_expect_eq(files, 1);
    rig r;
    rig_open(&r, F16_MODEL, SLUICE_KV_F16, NULL, false);
    cr_assert_eq(sluice_eval(r.c, g.prompt, g.n_prompt), 0);
    char err[256];
    int rc = sluice_session_save(r.c, "/nonexistent-dir/x.session", NULL, 0, NULL, err, sizeof err);
    cr_expect_lt(rc, 0);
    cr_expect(strstr(err, "/nonexistent-dir/x.session"), "%s", err);
    rig_close(&r);
}

/* ---- through the CLI ---------------------------------------------------------------------------- */

static int run_cli(const char *const *argv, const char *out, const char *errf)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, errf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    extern char **environ;
    cr_assert_eq(posix_spawn(&pid, SL_BINARY_DIR "/sluice", &fa, NULL, (char *const *)argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* `run -n 0 --session F` evaluates and saves; a longer prompt then reuses the saved tokens and gives
 * exactly the text a run without a session gives. */
Test(session, cli_run_reuses_the_prompt)
{
    const char *sess = tmp_path("cli.session"), *out = tmp_path("out"), *errf = tmp_path("err");
    const char *save[] = { "sluice", "run", "-m", F16_MODEL, "-t", "1", "-c", "256", "--temp", "0", "-n", "0",
                           "--session", sess, "-p", "Once upon a time", NULL };
    cr_assert_eq(run_cli(save, out, errf), 0);
    size_t n;
    unsigned char *e = read_all(errf, &n);
    cr_expect_eq(n, 0u, "stderr: %.*s", (int)n, e);
    free(e);
    const char *plain[] = { "sluice", "run", "-m", F16_MODEL, "-t", "1", "-c", "256", "--temp", "0", "-n", "12",
                            "-p", "Once upon a time there was", NULL };
    cr_assert_eq(run_cli(plain, out, errf), 0);
    size_t rn;
    unsigned char *ref = read_all(out, &rn);
    const char *reuse[] = { "sluice", "run", "-m", F16_MODEL, "-t", "1", "-c", "256", "--temp", "0", "-n", "12",
                            "--session", sess, "--stats", "-p", "Once upon a time there was", NULL };
    cr_assert_eq(run_cli(reuse, out, errf), 0);
    size_t on;
    unsigned char *got = read_all(out, &on);
    cr_expect(on == rn && !memcmp(got, ref, rn), "text differs:\n%.*s\nwant\n%.*s", (int)on, got, (int)rn, ref);
    e = read_all(errf, &n);
    char *txt = strndup((char *)e, n);
    cr_expect(strstr(txt, "reused 5 of "), "stderr: %s", txt);   /* BOS + 4 tokens of "Once upon a time" */
    free(txt);
    free(e);
    free(got);
    /* a corrupt session: one warning line, then the same text from scratch */
    write_file(sess, "SLUICESS garbage", 16);
    cr_assert_eq(run_cli(reuse, out, errf), 0);
    got = read_all(out, &on);
    cr_expect(on == rn && !memcmp(got, ref, rn), "text differs after a corrupt session");
    e = read_all(errf, &n);
    txt = strndup((char *)e, n);
    cr_expect(strstr(txt, "warning") && strstr(txt, "from scratch"), "stderr: %s", txt);
    free(txt);
    free(e);
    free(ref);
    free(got);
}
