/* tests/test_api_args.c — the library's arguments (issue 20, item 13): NULL pointers, values out of
 * range and absurd thread counts give -EINVAL with a message, never undefined behaviour (run under
 * ASan/UBSan too); a freed handle used again stops the process with a message when the live-handle
 * registry is on (SLUICE_API_CHECKS=1 or a debug build); two contexts of one model driven from two
 * threads give exactly the logits each gives alone, and re-entry from a callback is -EBUSY.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/sluice.h"

#define MICRO SL_SHARED_DIR "/models/micro-llama.F16.gguf"
#define STEPS 24

static sluice_params small_params(bool stream)
{
    sluice_params p;
    sluice_params_default(&p);
    p.planner = SLUICE_PLANNER_OFF;
    p.n_threads = 1;
    p.n_ctx = 64;
    p.stream_all = stream;
    p.io = SLUICE_IO_PREAD;
    return p;
}

static void open_micro(bool stream, sluice_model **m, sluice_ctx **c)
{
    sluice_params p = small_params(stream);
    char err[256];
    cr_assert_eq(sluice_open(MICRO, &p, m, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sluice_ctx_new(*m, c, err, sizeof err), 0, "%s", err);
}

#define EXPECT_EINVAL(call, kw)                                                                             \
    do {                                                                                                    \
        err[0] = 0;                                                                                         \
        int rc_ = (call);                                                                                   \
        cr_expect_eq(rc_, -EINVAL, "%s: %d", #call, rc_);                                                   \
        cr_expect(strstr(err, kw), "%s: message '%s' lacks '%s'", #call, err, kw);                          \
    } while (0)

Test(api_args, open_refuses_null_and_out_of_range)
{
    char err[256];
    sluice_model *m = (sluice_model *)1;
    sluice_plan_info pi;
    EXPECT_EINVAL(sluice_open(NULL, NULL, &m, err, sizeof err), "NULL model path");
    EXPECT_EINVAL(sluice_open(MICRO, NULL, NULL, err, sizeof err), "NULL out pointer");
    EXPECT_EINVAL(sluice_plan(NULL, NULL, &pi, err, sizeof err), "NULL model path");
    EXPECT_EINVAL(sluice_plan(MICRO, NULL, NULL, err, sizeof err), "NULL out pointer");
    /* one field out of range at a time: each is named in the message, and nothing is opened */
    static const char *const fields[] = { "n_threads", "n_threads", "n_ctx", "n_batch", "kv_type", "io", "planner",
                                          "prefetch", "disk_bw", "disk_bw", "compute_bw", "kv_spill_dir" };
    for (int k = 0; k < (int)(sizeof fields / sizeof *fields); k++) {
        sluice_params p = small_params(false);
        switch (k) {
        case 0: p.n_threads = 100000; break;
        case 1: p.n_threads = -3; break;
        case 2: p.n_ctx = -1; break;
        case 3: p.n_batch = 1 << 30; break;
        case 4: p.kv_type = 7; break;
        case 5: p.io = 9; break;
        case 6: p.planner = -2; break;
        case 7: p.prefetch = 1000; break;
        case 8: p.disk_bw = NAN; break;
        case 9: p.disk_bw = INFINITY; break;
        case 10: p.compute_bw = -2; break;
        case 11: p.kv_spill_dir = ""; break;
        }
        m = (sluice_model *)1;
        EXPECT_EINVAL(sluice_open(MICRO, &p, &m, err, sizeof err), fields[k]);
        cr_expect_eq(m, (sluice_model *)1, "case %d: *out is set only on success", k);
        EXPECT_EINVAL(sluice_plan(MICRO, &p, &pi, err, sizeof err), fields[k]);
    }
}

Test(api_args, handles_and_buffers)
{
    char err[256];
    sluice_model *m;
    sluice_ctx *c;
    open_micro(false, &m, &c);
    EXPECT_EINVAL(sluice_ctx_new(NULL, &c, err, sizeof err), "NULL model");
    EXPECT_EINVAL(sluice_ctx_new(m, NULL, err, sizeof err), "NULL out pointer");
    int32_t t[3] = { 1, 100, 200 };
    cr_expect_eq(sluice_eval(NULL, t, 3), -EINVAL);
    cr_expect_eq(sluice_eval(c, NULL, 3), -EINVAL);
    cr_expect(strstr(sluice_ctx_error(c), "NULL tokens"), "%s", sluice_ctx_error(c));
    cr_expect_eq(sluice_eval(c, t, -1), -EINVAL);
    int32_t bad[2] = { 1, 1 << 30 };
    cr_expect_eq(sluice_eval(c, bad, 2), -EINVAL);
    cr_expect(strstr(sluice_ctx_error(c), "outside the vocabulary"), "%s", sluice_ctx_error(c));
    cr_expect_eq(sluice_n_past(c), 0, "a refused eval evaluates nothing");
    cr_expect_eq(sluice_prefill(NULL, t, 3), -EINVAL);
    cr_expect_eq(sluice_rewind(NULL, 0), -EINVAL);
    cr_expect_eq(sluice_rewind(c, 5), -EINVAL);
    sluice_reset(NULL);
    cr_expect_null(sluice_logits(NULL));
    int n = 7;
    cr_expect_null(sluice_tokens(NULL, &n));
    cr_expect_eq(n, 0);
    cr_expect_eq(sluice_n_past(NULL), -EINVAL);
    cr_expect_eq(sluice_n_ctx(NULL), -EINVAL);
    cr_expect_str_eq(sluice_ctx_error(NULL), "NULL context");
    sluice_cancel(NULL);
    sluice_uncancel(NULL);
    cr_expect_eq(sluice_tokenize(NULL, "x", -1, 0, t, 3), -EINVAL);
    cr_expect_eq(sluice_tokenize(m, NULL, -1, 0, t, 3), -EINVAL);
    cr_expect_eq(sluice_tokenize(m, "x", -1, 0, NULL, 3), -EINVAL);
    cr_expect_geq(sluice_tokenize(m, "x", -1, 0, NULL, 0), 1, "a size query stays allowed");
    cr_expect_eq(sluice_token_piece(NULL, 1, false, NULL, 0), -EINVAL);
    cr_expect_eq(sluice_token_piece(m, 1, false, NULL, 8), -EINVAL);
    cr_expect_eq(sluice_detokenize(NULL, t, 3, NULL, 0), -EINVAL);
    cr_expect_eq(sluice_detokenize(m, NULL, 3, NULL, 0), -EINVAL);
    cr_expect_eq(sluice_detokenize(m, t, -1, NULL, 0), -EINVAL);
    cr_expect(!sluice_token_is_eog(NULL, 2));
    sluice_model_info mi;
    sluice_model_get_info(NULL, &mi);
    cr_expect_eq(mi.n_vocab, 0);
    sluice_model_get_info(m, NULL);
    sluice_stats st;
    sluice_get_stats(NULL, NULL, &st);
    sluice_get_stats(m, c, NULL);
    sluice_plan_print(NULL, stdout, false);
    EXPECT_EINVAL(sluice_session_save(NULL, "/tmp/x", NULL, 0, NULL, err, sizeof err), "NULL context");
    EXPECT_EINVAL(sluice_session_save(c, NULL, NULL, 0, NULL, err, sizeof err), "NULL path");
    EXPECT_EINVAL(sluice_session_save(c, "/tmp/x", NULL, 5, NULL, err, sizeof err), "NULL extra");
    EXPECT_EINVAL(sluice_session_save_flags(c, "/tmp/x", NULL, 0, 0x80, NULL, err, sizeof err), "unknown flags");
    EXPECT_EINVAL(sluice_session_load(NULL, "/tmp/x", NULL, NULL, NULL, err, sizeof err), "NULL context");
    EXPECT_EINVAL(sluice_session_load(c, NULL, NULL, NULL, NULL, err, sizeof err), "NULL path");
    sluice_ctx_free(NULL);
    sluice_close(NULL);
    sluice_sampler_free(NULL);
    sluice_ctx_free(c);
    sluice_close(m);
}

Test(api_args, sampler_parameters_out_of_range)
{
    char err[256];
    sluice_model *m;
    sluice_ctx *c;
    open_micro(false, &m, &c);
    sluice_sampler *s = (sluice_sampler *)1;
    static const char *const fields[] = { "temp", "temp", "top_k", "top_p", "top_p", "top_p", "min_p", "min_p",
                                          "repeat_penalty", "repeat_penalty", "repeat_penalty", "repeat_last_n" };
    for (int k = 0; k < (int)(sizeof fields / sizeof *fields); k++) {
        sluice_sampler_params p;
        sluice_sampler_params_default(&p);
        switch (k) {
        case 0: p.temp = NAN; break;
        case 1: p.temp = INFINITY; break;
        case 2: p.top_k = -1; break;
        case 3: p.top_p = 1.5f; break;
        case 4: p.top_p = -0.1f; break;
        case 5: p.top_p = NAN; break;
        case 6: p.min_p = 1.01f; break;
        case 7: p.min_p = NAN; break;
        case 8: p.repeat_penalty = 0; break;
        case 9: p.repeat_penalty = -1; break;
        case 10: p.repeat_penalty = NAN; break;
        case 11: p.repeat_last_n = -5; break;
        }
        EXPECT_EINVAL(sluice_sampler_create(m, &p, &s, err, sizeof err), fields[k]);
        cr_expect_eq(s, (sluice_sampler *)1, "*out is set only on success");
        errno = 0;
        cr_expect_null(sluice_sampler_new(m, &p));
        cr_expect_eq(errno, EINVAL);
    }
    EXPECT_EINVAL(sluice_sampler_create(NULL, NULL, &s, err, sizeof err), "NULL model");
    cr_assert_eq(sluice_sampler_create(m, NULL, &s, err, sizeof err), 0, "%s", err);   /* defaults are valid */
    cr_expect_eq(sluice_sample(NULL, c), -EINVAL);
    cr_expect_eq(sluice_sample(s, NULL), -EINVAL);
    cr_expect_eq(sluice_sample(s, c), -EINVAL, "no logits yet");
    cr_expect_eq(sluice_generate(c, NULL, 4, NULL, NULL), -EINVAL);
    cr_expect_eq(sluice_generate(NULL, s, 4, NULL, NULL), -EINVAL);
    cr_expect_eq(sluice_generate(c, s, -1, NULL, NULL), -EINVAL);
    cr_expect_null(sluice_sampler_logits(NULL));
    sluice_sampler_free(s);
    sluice_ctx_free(c);
    sluice_close(m);
}

/* ---- freed handles: caught (registry on) ---------------------------------------------------------- */

static void checks_on(void) { setenv("SLUICE_API_CHECKS", "1", 1); }

Test(api_args_freed, double_close_aborts, .init = checks_on, .signal = SIGABRT)
{
    sluice_model *m;
    sluice_ctx *c;
    open_micro(false, &m, &c);
    sluice_ctx_free(c);
    sluice_close(m);
    sluice_close(m);
}

Test(api_args_freed, use_after_free_aborts, .init = checks_on, .signal = SIGABRT)
{
    sluice_model *m;
    sluice_ctx *c;
    open_micro(false, &m, &c);
    sluice_ctx_free(c);
    int32_t t = 1;
    sluice_eval(c, &t, 1);
}

Test(api_args_freed, double_sampler_free_aborts, .init = checks_on, .signal = SIGABRT)
{
    sluice_model *m;
    sluice_ctx *c;
    open_micro(false, &m, &c);
    sluice_sampler *s = sluice_sampler_new(m, NULL);
    cr_assert_not_null(s);
    sluice_sampler_free(s);
    sluice_sampler_free(s);
}

Test(api_args_freed, model_closed_before_its_context_aborts, .init = checks_on, .signal = SIGABRT)
{
    sluice_model *m;
    sluice_ctx *c;
    open_micro(false, &m, &c);
    sluice_close(m);
}

Test(api_args_freed, correct_use_does_not_abort, .init = checks_on)
{
    sluice_model *m;
    sluice_ctx *c;
    open_micro(false, &m, &c);
    sluice_sampler *s = sluice_sampler_new(m, NULL);
    int32_t t[3] = { 1, 100, 200 };
    cr_assert_eq(sluice_eval(c, t, 3), 0);
    cr_expect_geq(sluice_sample(s, c), 0);
    sluice_sampler_free(s);
    sluice_ctx_free(c);
    sluice_close(m);
}

/* ---- two contexts of one model, two threads ------------------------------------------------------- */

typedef struct job {
    sluice_ctx *c;
    int32_t first;
    float *logits;   /* STEPS rows */
    int n_vocab, rc;
} job;

/* Teacher-forced greedy: each step's argmax is the next input, so one wrong float changes the rest. */
static void *drive(void *arg)
{
    job *j = arg;
    int32_t tok = j->first;
    for (int s = 0; s < STEPS && !j->rc; s++) {
        if ((j->rc = sluice_eval(j->c, &tok, 1))) break;
        const float *l = sluice_logits(j->c);
        memcpy(j->logits + (size_t)s * j->n_vocab, l, (size_t)j->n_vocab * 4);
        int best = 0;
        for (int i = 1; i < j->n_vocab; i++) if (l[i] > l[best]) best = i;
        tok = best;
    }
    return NULL;
}

static void two_threads(bool stream)
{
    sluice_model *m;
    sluice_ctx *c[2];
    char err[256];
    open_micro(stream, &m, &c[0]);
    cr_assert_eq(sluice_ctx_new(m, &c[1], err, sizeof err), 0, "%s", err);
    sluice_model_info mi;
    sluice_model_get_info(m, &mi);
    job ref[2], par[2];
    for (int k = 0; k < 2; k++) {   /* alone, one after the other */
        ref[k] = (job){ c[k], k ? 200 : 1, malloc((size_t)STEPS * mi.n_vocab * 4), mi.n_vocab, 0 };
        drive(&ref[k]);
        cr_assert_eq(ref[k].rc, 0, "%s", sluice_ctx_error(c[k]));
        sluice_reset(c[k]);
    }
    for (int round = 0; round < 3; round++) {
        pthread_t th[2];
        for (int k = 0; k < 2; k++) {
            par[k] = (job){ c[k], ref[k].first, malloc((size_t)STEPS * mi.n_vocab * 4), mi.n_vocab, 0 };
            cr_assert_eq(pthread_create(&th[k], NULL, drive, &par[k]), 0);
        }
        for (int k = 0; k < 2; k++) {
            pthread_join(th[k], NULL);
            cr_expect_eq(par[k].rc, 0, "%s", sluice_ctx_error(c[k]));
            cr_expect_eq(memcmp(par[k].logits, ref[k].logits, (size_t)STEPS * mi.n_vocab * 4), 0,
                         "%s, round %d: context %d differs from its run alone", stream ? "streamed" : "resident", round, k);
            free(par[k].logits);
            sluice_reset(c[k]);
        }
    }
    for (int k = 0; k < 2; k++) { free(ref[k].logits); sluice_ctx_free(c[k]); }
    sluice_close(m);
}

Test(api_args, two_contexts_two_threads_resident) { two_threads(false); }
Test(api_args, two_contexts_two_threads_streamed) { two_threads(true); }

/* Re-entering the model from its own progress callback: -EBUSY, not a deadlock. */
typedef struct reenter { sluice_ctx *other; int rc; bool called; } reenter;
static void on_progress(void *user, const char *stage, uint64_t done, uint64_t total)
{
    (void)done; (void)total;
    reenter *r = user;
    if (strcmp(stage, "prompt") || r->called || !r->other) return;
    r->called = true;
    int32_t t = 1;
    r->rc = sluice_eval(r->other, &t, 1);
}

Test(api_args, reentry_from_a_callback_is_ebusy)
{
    sluice_params p = small_params(true);
    reenter re = { 0 };
    p.progress = on_progress;
    p.user = &re;
    sluice_model *m;
    sluice_ctx *a, *b;
    char err[256];
    cr_assert_eq(sluice_open(MICRO, &p, &m, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sluice_ctx_new(m, &a, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sluice_ctx_new(m, &b, err, sizeof err), 0, "%s", err);
    re.other = b;
    int32_t t[4] = { 1, 100, 200, 300 };
    cr_assert_eq(sluice_eval(a, t, 4), 0, "%s", sluice_ctx_error(a));
    cr_expect(re.called);
    cr_expect_eq(re.rc, -EBUSY);
    cr_expect(strstr(sluice_ctx_error(b), "busy"), "%s", sluice_ctx_error(b));
    cr_expect_eq(sluice_n_past(b), 0);
    sluice_ctx_free(a);
    sluice_ctx_free(b);
    sluice_close(m);
}
