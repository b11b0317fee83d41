/* tests/test_spec_model.c — speculative decoding with a draft model (sluice_params.draft_model).
 *
 * Greedy: the tokens must be identical to one-token decoding whatever the draft proposes (the
 * target verifies every draft; its logits for each position of a verifying pass equal one-token
 * decoding's).  Checked for target/draft pairs of the shared models that share the stories260K
 * vocabulary — stories260K as its own draft (every draft right: the acceptance must be 100%),
 * micro-llama Q8_0 drafted by its F16 file, mini-llama3 by stories260K, micro-tied by micro-llama
 * Q4_0 (random weights: mostly wrong drafts) — resident, streamed (target and draft), planned at
 * the smallest budget that holds both, and at a budget that keeps the draft resident beside a
 * streamed target.  Sampling: the distribution is kept (two-sample chi-square over fixed seeds).
 * The vocabulary check: a different size and one changed token text are refused, naming the
 * difference.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "include/sluice.h"
#include "runtime/plan/plan_draft.h"
#include "util/chi2.h"
#include "util/golden.h"
#include "util/spec_gen.h"
#include "qemu_testutil.h"

#define STORIES SL_SOURCE_DIR "/models/stories260K.gguf"

enum { RESIDENT, STREAM_PREAD, STREAM_URING, MIN_BUDGET, DRAFT_RESIDENT_BUDGET };

typedef struct run_cfg {
    int  mode;
    bool fixed;          /* draft_fixed: draft 8 whenever possible (the adaptive length follows timings) */
} run_cfg;

static void base_params(sluice_params *p, const char *draft)
{
    sluice_params_default(p);
    p->n_threads = 2;
    p->n_ctx = 256;
    p->draft = draft ? SLUICE_DRAFT_MODEL : SLUICE_DRAFT_OFF;
    p->draft_model = draft;
    p->draft_max = 8;
    p->planner = SLUICE_PLANNER_OFF;
    p->disk_bw = 1;   /* no disk probe: the figure only feeds the prediction */
    p->compute_bw = 1;
}

/* The smallest budget (whole MiB) at which target + draft plan, and the smallest at which the draft
 * is resident while the target streams (0 when there is none below 256 MiB). */
static void find_budgets(const char *target, const char *draft, uint64_t *min_b, uint64_t *res_b)
{
    sluice_params p;
    base_params(&p, draft);
    p.planner = SLUICE_PLANNER_ON;
    *min_b = *res_b = 0;
    char err[SLUICE_ERRLEN];
    for (uint64_t mib = 8; mib < 256 && !*res_b; mib++) {
        sluice_plan_info pi;
        p.ram_budget = mib << 20;
        int rc = sluice_plan(target, &p, &pi, err, sizeof err);
        cr_assert(rc == 0 || rc == -ENOSPC, "%s", err);
        if (rc) continue;
        cr_assert(pi.draft_planned && pi.draft_bytes > 0);
        cr_assert_leq(pi.budget + pi.draft_bytes, p.ram_budget, "the two shares fit the budget");
        if (!*min_b) *min_b = p.ram_budget;
        if (pi.draft_resident && !pi.all_resident) *res_b = p.ram_budget;
        if (pi.all_resident) break;
    }
    cr_assert_gt(*min_b, 0, "%s beside %s: no budget below 256 MiB plans", target, draft);
}

/* Prompt, then n greedy tokens. */
static void generate(const char *target, const char *draft, const run_cfg *rc, uint64_t budget, const int32_t *prompt,
                     int n_prompt, int n, spec_out *out)
{
    sluice_params p;
    base_params(&p, draft);
    p.draft_fixed = rc->fixed;
    p.stream_all = rc->mode == STREAM_PREAD || rc->mode == STREAM_URING;
    p.io = rc->mode == STREAM_PREAD ? SLUICE_IO_PREAD : SLUICE_IO_URING;
    if (budget) {
        p.planner = SLUICE_PLANNER_ON;
        p.ram_budget = budget;
    }
    spec_generate_greedy(target, &p, prompt, n_prompt, NULL, 0, n, out);
}

/* One target/draft pair on one golden prompt: off vs the draft model in every configuration. */
static void greedy_identical(const char *target, const char *draft, const char *golden, int n_gen, bool self, bool all)
{
    golden_run g;
    cr_assert_eq(golden_read_txt(golden, &g), 0, "%s", golden);
    spec_out ref, got;
    run_cfg off = { RESIDENT, false };
    generate(target, NULL, &off, 0, g.prompt, g.n_prompt, n_gen, &ref);
    cr_assert_eq(ref.st.n_drafted, 0);
    uint64_t min_b, res_b;
    find_budgets(target, draft, &min_b, &res_b);
    const run_cfg cfgs[] = { { RESIDENT, true }, { RESIDENT, false }, { STREAM_PREAD, true }, { STREAM_URING, true },
                             { MIN_BUDGET, true }, { MIN_BUDGET, false }, { DRAFT_RESIDENT_BUDGET, true } };
    for (size_t k = 0; k < sizeof cfgs / sizeof *cfgs; k++) {
        if (!all && (cfgs[k].mode == STREAM_URING || !cfgs[k].fixed)) continue;
        uint64_t b = cfgs[k].mode == MIN_BUDGET ? min_b : cfgs[k].mode == DRAFT_RESIDENT_BUDGET ? res_b : 0;
        if (cfgs[k].mode == DRAFT_RESIDENT_BUDGET && !b) continue;   /* all resident before the draft is */
        char what[512];
        snprintf(what, sizeof what, "%s drafted by %s, cfg %zu (budget %llu MiB)", target, draft, k,
                 (unsigned long long)(b >> 20));
        generate(target, draft, &cfgs[k], b, g.prompt, g.n_prompt, n_gen, &got);
        spec_same_tokens(&ref, &got, what);
        cr_assert_str_eq(got.st.drafter, got.st.draft_max > 0 ? "model" : "", "%s", what);
        if (cfgs[k].fixed && got.st.draft_max > 0) {
            cr_assert_gt(got.st.n_drafted, 0, "%s: fixed drafting drafted nothing", what);
            cr_assert_gt(got.st.n_draft_evals, 0, "%s", what);
        }
        /* its own draft proposes exactly the target's argmax (same file, same kernels, same KV type) */
        if (self && cfgs[k].fixed && cfgs[k].mode != MIN_BUDGET)
            cr_assert_eq(got.st.n_accepted, got.st.n_drafted, "%s: self-draft accepted %llu of %llu", what,
                         (unsigned long long)got.st.n_accepted, (unsigned long long)got.st.n_drafted);
        if (b) cr_assert(got.pi.draft_planned && got.pi.budget + got.pi.draft_bytes <= b, "%s", what);
        if (cfgs[k].mode == DRAFT_RESIDENT_BUDGET) cr_assert(got.pi.draft_resident && !got.pi.all_resident, "%s", what);
        fprintf(stderr, "%s: %d tokens, %llu passes (%.2f per pass), drafted %llu, accepted %llu, draft evals %llu, "
                "draft_max %d\n", what, got.n, (unsigned long long)got.st.n_passes,
                got.st.n_passes ? (double)got.n / (double)got.st.n_passes : 0, (unsigned long long)got.st.n_drafted,
                (unsigned long long)got.st.n_accepted, (unsigned long long)got.st.n_draft_evals, got.st.draft_max);
    }
}

Test(spec_model, greedy_identical_stories260K_drafting_itself)
{
    static const char *names[] = { "p1_once", "p2_dog", "p3_lily_tom", "p4_bos" };
    for (int p = 0; p < 4; p++)
        greedy_identical(STORIES, STORIES, shared_path("golden/stories260K/%s.txt", names[p]), 64, true, p == 0);
}

Test(spec_model, greedy_identical_micro_models)
{
    const char *pairs[][3] = { { "micro-llama", "Q8_0", "models/micro-llama.F16.gguf" },
                               { "mini-llama3", "Q4_K_M", STORIES },
                               { "micro-tied", "F16", "models/micro-llama.Q4_0.gguf" } };
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        char target[1024], draft[1024];
        snprintf(target, sizeof target, "%s", shared_path("models/%s.%s.gguf", pairs[i][0], pairs[i][1]));
        snprintf(draft, sizeof draft, "%s", pairs[i][2][0] == '/' ? pairs[i][2] : shared_path("%s", pairs[i][2]));
        greedy_identical(target, draft, shared_path("golden/%s/%s.p1_once.txt", pairs[i][0], pairs[i][1]), 32, false,
                         i == 0);
    }
}

/* ---- sampling: the distribution is kept -------------------------------------------------------- */

/* The second generated token of `runs` seeded generations (temp 1, top-k 10), counted per id. */
static void second_token_counts(sluice_model *m, sluice_ctx *c, const int32_t *prompt, int n_prompt, int runs,
                                uint64_t seed0, int *counts, int n_vocab, sluice_stats *st)
{
    for (int r = 0; r < runs; r++) {
        sluice_reset(c);
        cr_assert_eq(sluice_eval(c, prompt, n_prompt), 0, "%s", sluice_ctx_error(c));
        sluice_sampler_params sp;
        sluice_sampler_params_default(&sp);
        sp.temp = 1;
        sp.top_k = 10;
        sp.top_p = 1;
        sp.min_p = 0;
        sp.seed = seed0 + 1000003u * (uint64_t)(r + 1);
        sluice_sampler *s = sluice_sampler_new(m, &sp);
        spec_out g = { .n = 0 };
        cr_assert_geq(sluice_generate(c, s, 3, spec_collect, &g), 0, "%s", sluice_ctx_error(c));
        cr_assert_geq(g.n, 2);
        cr_assert(g.ids[1] >= 0 && g.ids[1] < n_vocab);
        counts[g.ids[1]]++;
        sluice_sampler_free(s);
    }
    sluice_get_stats(m, c, st);
}

static sluice_model *open_stories(const char *draft, sluice_ctx **c)
{
    sluice_params p;
    base_params(&p, draft);
    p.n_threads = 1;
    p.n_ctx = 64;
    p.draft_max = 4;
    p.draft_fixed = true;   /* draft whenever possible: verification as often as possible */
    char err[SLUICE_ERRLEN];
    sluice_model *m;
    cr_assert_eq(sluice_open(STORIES, &p, &m, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sluice_ctx_new(m, c, err, sizeof err), 0, "%s", err);
    return m;
}

/* The draft (stories260K itself) proposes its argmax; at temperature 1 the target keeps it with
 * probability p(argmax), so both outcomes of the rejection sampling occur. */
Test(spec_model, sampling_keeps_the_distribution)
{
    /* 1500 seeded generations per sample natively; under qemu-user 600, as in test_spec (the sampler
     * and the verification are the same C on every architecture: the native run carries the
     * statistical power, the emulated one that the test still holds on the NEON path) */
    enum { V = 512 };
    const int RUNS = tq_under_qemu_user() ? 600 : 1500;
    sluice_ctx *c0, *c1;
    sluice_model *m0 = open_stories(NULL, &c0), *m1 = open_stories(STORIES, &c1);
    int32_t prompt[16];
    int np = sluice_tokenize(m0, "Once upon a time, there was a", -1, SLUICE_TOK_ADD_SPECIAL, prompt, 16);
    cr_assert_gt(np, 0);
    static int a[V], b[V];
    sluice_stats s0, s1;
    second_token_counts(m0, c0, prompt, np, RUNS, 1, a, V, &s0);
    second_token_counts(m1, c1, prompt, np, RUNS, 777777, b, V, &s1);
    cr_assert_eq(s0.n_drafted, 0);
    cr_assert_geq(s1.n_drafted, RUNS, "a draft verified in every run (%llu)", (unsigned long long)s1.n_drafted);
    cr_assert(s1.n_accepted > 0 && s1.n_accepted < s1.n_drafted, "both accepted and rejected drafts (%llu of %llu)",
              (unsigned long long)s1.n_accepted, (unsigned long long)s1.n_drafted);
    int df;
    double chi = chi2_two_sample(a, b, V, &df);
    fprintf(stderr, "draft model, second token: chi2 %.1f, df %d, critical (p = 0.001) %.1f; drafts %llu, accepted %llu\n",
            chi, df, chi2_crit(df), (unsigned long long)s1.n_drafted, (unsigned long long)s1.n_accepted);
    cr_assert_gt(df, 3);
    cr_assert_lt(chi, chi2_crit(df), "drafting with a model changed the distribution: chi2 %.1f > %.1f", chi,
                 chi2_crit(df));
    sluice_ctx_free(c0);
    sluice_ctx_free(c1);
    sluice_close(m0);
    sluice_close(m1);
}

/* ---- the vocabulary check and the parameters ---------------------------------------------------- */

static int open_with_draft(const char *target, const char *draft, char *err, size_t errlen)
{
    sluice_params p;
    base_params(&p, draft);
    sluice_model *m = NULL;
    int rc = sluice_open(target, &p, &m, err, errlen);
    if (!rc) sluice_close(m);
    return rc;
}

Test(spec_model, a_different_vocabulary_is_refused_naming_the_difference)
{
    char err[SLUICE_ERRLEN];
    const char *spm32k = shared_path("models/spm32k-llama.Q4_K_M.gguf");
    char spm[1024];
    snprintf(spm, sizeof spm, "%s", spm32k);
    cr_assert_eq(open_with_draft(STORIES, spm, err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "vocabulary differs from the target's") && strstr(err, "32000 tokens, the target has 512"),
              "%s", err);
    /* the same file with one token's text changed (same length: the file stays valid) */
    FILE *f = fopen(STORIES, "rb");
    cr_assert_not_null(f);
    static unsigned char buf[2u << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    unsigned char *hit = memmem(buf, n, "\xe2\x96\x81Lily", 7);
    cr_assert_not_null(hit, "the token \"Lily\" is in stories260K's vocabulary");
    hit[6] = 'z';
    char path[] = "/tmp/sl_draft_vocab_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    f = fdopen(fd, "wb");
    cr_assert_eq(fwrite(buf, 1, n, f), n);
    fclose(f);
    int rc = open_with_draft(STORIES, path, err, sizeof err);
    sluice_params p;
    base_params(&p, path);
    p.ram_budget = 64u << 20;
    sluice_plan_info pi;
    char err2[SLUICE_ERRLEN];
    int prc = sluice_plan(STORIES, &p, &pi, err2, sizeof err2);
    int same = open_with_draft(path, path, err2, sizeof err2);   /* the changed file is a valid model of its own */
    unlink(path);
    cr_assert_eq(rc, -EINVAL);
    cr_assert(strstr(err, "vocabulary differs from the target's") && strstr(err, "Lilz") && strstr(err, "Lily"), "%s", err);
    cr_assert_eq(prc, -EINVAL, "sluice_plan checks it too");
    cr_assert_eq(same, 0, "%s", err2);
}

Test(spec_model, draft_parameters_are_checked)
{
    sluice_params p;
    base_params(&p, NULL);
    p.draft = SLUICE_DRAFT_MODEL;
    char err[SLUICE_ERRLEN];
    sluice_model *m = NULL;
    cr_assert_eq(sluice_open(STORIES, &p, &m, err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "needs draft_model"), "%s", err);
    base_params(&p, STORIES);
    p.draft = SLUICE_DRAFT_NGRAM;
    cr_assert_eq(sluice_open(STORIES, &p, &m, err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "draft"), "%s", err);
    base_params(&p, "/nonexistent/draft.gguf");
    cr_assert_lt(sluice_open(STORIES, &p, &m, err, sizeof err), 0);
    cr_assert(strstr(err, "draft model /nonexistent/draft.gguf"), "%s", err);
    /* off: the draft model is not opened at all */
    base_params(&p, "/nonexistent/draft.gguf");
    p.draft = SLUICE_DRAFT_OFF;
    cr_assert_eq(sluice_open(STORIES, &p, &m, err, sizeof err), 0, "%s", err);
    sluice_close(m);
    /* a budget too small for both names both parts */
    base_params(&p, STORIES);
    p.planner = SLUICE_PLANNER_ON;
    p.ram_budget = 9u << 20;
    int rc = sluice_open(STORIES, &p, &m, err, sizeof err);
    cr_assert_eq(rc, -ENOSPC, "%s", err);
    cr_assert(strstr(err, "draft model"), "%s", err);
}

/* ---- sessions: the draft context follows a loaded one ------------------------------------------ */

/* 16 tokens with the draft, saved; a new context loads the session and goes on with the draft (its
 * draft context starts empty and catches up in one batch): the 32 tokens equal one-token decoding's. */
Test(spec_model, a_loaded_session_keeps_greedy_output)
{
    sluice_params p;
    base_params(&p, STORIES);
    p.draft_fixed = true;
    char err[SLUICE_ERRLEN];
    sluice_model *m;
    cr_assert_eq(sluice_open(STORIES, &p, &m, err, sizeof err), 0, "%s", err);
    int32_t prompt[16];
    int np = sluice_tokenize(m, "Once upon a time", -1, SLUICE_TOK_ADD_SPECIAL, prompt, 16);
    cr_assert_gt(np, 0);
    spec_out ref;
    run_cfg off = { RESIDENT, false };
    generate(STORIES, NULL, &off, 0, prompt, np, 32, &ref);
    cr_assert_eq(ref.n, 32);
    sluice_sampler_params sp;
    sluice_sampler_params_default(&sp);
    sp.temp = 0;
    sluice_sampler *s = sluice_sampler_new(m, &sp);
    sluice_ctx *a, *b;
    cr_assert_eq(sluice_ctx_new(m, &a, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sluice_eval(a, prompt, np), 0);
    spec_out g1 = { .n = 0 }, g2 = { .n = 0 };
    cr_assert_eq(sluice_generate(a, s, 16, spec_collect, &g1), 16, "%s", sluice_ctx_error(a));
    cr_assert_eq(sluice_eval(a, &g1.ids[15], 1), 0);   /* the last reported token is not evaluated */
    char path[] = "/tmp/sl_draft_session_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    cr_assert_eq(sluice_session_save_flags(a, path, NULL, 0, SLUICE_SESSION_OVERWRITE, NULL, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sluice_ctx_new(m, &b, err, sizeof err), 0, "%s", err);
    int lrc = sluice_session_load(b, path, NULL, NULL, NULL, err, sizeof err);
    unlink(path);
    cr_assert_eq(lrc, 0, "%s", err);
    cr_assert_eq(sluice_generate(b, s, 16, spec_collect, &g2), 16, "%s", sluice_ctx_error(b));
    sluice_stats st;
    sluice_get_stats(m, b, &st);
    cr_assert_gt(st.n_drafted, 0);
    cr_assert_eq(st.n_accepted, st.n_drafted, "self-draft after a session load: %llu of %llu",
                 (unsigned long long)st.n_accepted, (unsigned long long)st.n_drafted);
    for (int i = 0; i < 16; i++) {
        cr_assert_eq(g1.ids[i], ref.ids[i], "token %d before the save", i);
        cr_assert_eq(g2.ids[i], ref.ids[16 + i], "token %d after the load", 16 + i);
    }
    sluice_sampler_free(s);
    sluice_ctx_free(a);
    sluice_ctx_free(b);
    sluice_close(m);
}

/* ---- the plan's assessment ---------------------------------------------------------------------- */

Test(spec_model, the_assessment_follows_the_costs)
{
    /* an 8B-like streamed target: a pass 2 s, a verified position 0.1 s, the draft 0.2 s per token */
    sl_plan_draft d = { .k_max = 8, .t_pass = 2.2, .t_verify = 0.1, .t_draft = 0.2, .t_alone = 2.0 };
    sl_plan_draft_assess(&d);
    cr_assert(d.breakeven > 0 && d.breakeven < 1, "breakeven %g", d.breakeven);
    double alone = 1 / d.t_alone;
    cr_assert_leq(sl_plan_draft_rate(&d, d.breakeven - 0.01, NULL), alone * (1 + 1e-9));
    cr_assert_gt(sl_plan_draft_rate(&d, d.breakeven + 0.01, NULL), alone);
    for (int i = 1; i < SL_PLAN_DRAFT_N_ACCEPT; i++) {
        cr_assert_geq(d.tok_s[i], d.tok_s[i - 1], "more acceptance is never slower");
        cr_assert_geq(d.best_k[i], d.best_k[i - 1]);
    }
    /* k = 0 costs the draft nothing: the rate is the target's beside it */
    int k;
    cr_assert_float_eq(sl_plan_draft_rate(&d, 0, &k), 1 / d.t_pass, 1e-12);
    cr_assert_eq(k, 0);
    /* a resident target: a verified position costs as much as a token; a draft costs more than the
     * target pass saves: never worth it */
    sl_plan_draft r = { .k_max = 8, .t_pass = 0.1, .t_verify = 0.1, .t_draft = 0.02, .t_alone = 0.1 };
    sl_plan_draft_assess(&r);
    cr_assert_gt(r.breakeven, 1, "breakeven %g", r.breakeven);
}

/* ---- a full context ----------------------------------------------------------------------------- */

/* Generation that runs into the end of the context stops at the same token with drafts as without
 * (the pass evaluates drafts beyond the point where one-token decoding would stop). */
Test(spec_model, a_full_context_stops_at_the_same_token)
{
    const char *drafts[] = { NULL, STORIES, NULL };
    spec_out out[3];
    for (int d = 0; d < 3; d++) {
        sluice_params p;
        base_params(&p, drafts[d]);
        p.n_ctx = 48;
        p.draft_fixed = true;
        if (d == 2) p.draft = SLUICE_DRAFT_NGRAM;
        char err[SLUICE_ERRLEN];
        sluice_model *m;
        sluice_ctx *c;
        cr_assert_eq(sluice_open(STORIES, &p, &m, err, sizeof err), 0, "%s", err);
        cr_assert_eq(sluice_ctx_new(m, &c, err, sizeof err), 0, "%s", err);
        int32_t prompt[16];
        int np = sluice_tokenize(m, "Once upon a time", -1, SLUICE_TOK_ADD_SPECIAL, prompt, 16);
        cr_assert_eq(sluice_eval(c, prompt, np), 0);
        if (d == 2) cr_assert_eq(sluice_ctx_set_lookup(c, out[0].ids, out[0].n), 0);   /* drafts mostly right */
        sluice_sampler_params sp;
        sluice_sampler_params_default(&sp);
        sp.temp = 0;
        sluice_sampler *s = sluice_sampler_new(m, &sp);
        memset(&out[d], 0, sizeof out[d]);
        cr_assert_geq(sluice_generate(c, s, 100, spec_collect, &out[d]), 0, "%s", sluice_ctx_error(c));
        cr_assert_eq(sluice_stop_reason(c), SLUICE_STOP_CTX_FULL);
        sluice_get_stats(m, c, &out[d].st);
        sluice_sampler_free(s);
        sluice_ctx_free(c);
        sluice_close(m);
    }
    cr_assert_gt(out[1].st.n_drafted, 0);
    cr_assert_gt(out[2].st.n_accepted, 0);
    spec_same_tokens(&out[0], &out[1], "draft model, full context");
    spec_same_tokens(&out[0], &out[2], "n-grams, full context");
}
