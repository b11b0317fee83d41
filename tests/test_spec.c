/* tests/test_spec.c — speculative decoding: n-gram drafts verified in one pass (sluice_generate).
 *
 * Greedy: the tokens must be identical to one-token decoding, bit for bit, because the logits of
 * every position of a verifying pass equal one-token decoding's (tests/test_golden_fast.c) and the
 * KV rows of rejected drafts are never read.  Checked on every shared golden model we run, resident,
 * streamed on each backend, and under a small --ram-budget; with drafts from the context alone and
 * with a lookup text that makes most drafts right (the golden continuation) or some (every 4th token
 * changed).  Sampling: the distribution is kept (rejection sampling); checked with a two-sample
 * chi-square test on stories260K over a fixed set of seeds, plus a control that the test can tell
 * two different distributions apart.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/sluice.h"
#include "runtime/engine/draft.h"
#include "qemu_testutil.h"
#include "util/chi2.h"
#include "util/golden.h"
#include "util/spec_gen.h"

#define STORIES SL_SOURCE_DIR "/models/stories260K.gguf"

/* ---- the drafter and the draft length ---------------------------------------------------------- */

Test(draft, ngram_copies_what_followed_the_longest_match)
{
    /* ... 5 6 7 | 8 9 2 3 5 6 7 -> drafts what followed the longest suffix (5 6 7), up to the end */
    int32_t h[] = { 1, 5, 6, 7, 8, 9, 2, 3, 5, 6, 7 };
    int32_t out[8];
    int n = sl_draft_ngram(h, 11, NULL, 0, 8, out);
    cr_assert_eq(n, 7, "copies up to k tokens, at most to the end of the history (%d)", n);
    cr_assert(out[0] == 8 && out[1] == 9 && out[2] == 2 && out[3] == 3 && out[4] == 5);
    cr_assert_eq(sl_draft_ngram(h, 11, NULL, 0, 2, out), 2);
    /* no earlier occurrence of the last token anywhere: nothing */
    int32_t u[] = { 1, 2, 3, 4 };
    cr_assert_eq(sl_draft_ngram(u, 4, NULL, 0, 4, out), 0);
    /* the lookup text supplies it */
    int32_t look[] = { 9, 3, 4, 10, 11 };
    n = sl_draft_ngram(u, 4, look, 5, 4, out);
    cr_assert(n == 2 && out[0] == 10 && out[1] == 11, "n %d", n);
    /* the context wins over the lookup for the same suffix length; a longer match wins over both */
    int32_t h2[] = { 4, 7, 1, 2, 3, 4 };
    n = sl_draft_ngram(h2, 6, look, 5, 1, out);
    cr_assert(n == 1 && out[0] == 10, "3 4 from the lookup (2 tokens) beats 4 from the context (1): %d %d", n, out[0]);
    cr_assert_eq(sl_draft_ngram(h, 11, NULL, 0, 0, out), 0);
    cr_assert_eq(sl_draft_ngram(h, 1, NULL, 0, 4, out), 0);
}

/* The place whose preceding tokens match the end of the context the longest wins, in either text,
 * however long (a 4-token suffix lookup would stop at 4 and take the context's place); a lookup
 * text the output follows with one token changed gets the drafts back right after the change. */
Test(draft, ngram_longest_match_and_one_changed_token)
{
    int32_t out[8];
    /* context: "1 2 3 4 5" then 8, earlier (a 5-token match); lookup: "0 1 2 3 4 5" then 30 (6) */
    int32_t h[] = { 1, 2, 3, 4, 5, 8, 0, 1, 2, 3, 4, 5 };
    int32_t look[] = { 7, 0, 1, 2, 3, 4, 5, 30, 31 };
    int n = sl_draft_ngram(h, 12, look, 9, 4, out);
    cr_assert(n == 2 && out[0] == 30 && out[1] == 31, "the lookup's 6-token match: n %d, %d", n, out[0]);
    n = sl_draft_ngram(h, 12, look + 2, 7, 4, out);   /* "1 2 3 4 5 30 31": 5, a tie with the context's 5 */
    cr_assert(n >= 1 && out[0] == 8, "a tie goes to the context's own use: n %d, %d", n, out[0]);

    /* the output wrote 99 where the lookup has 14; the 4 tokens before match: draft 15 16 */
    int32_t e[] = { 10, 11, 12, 13, 99 };
    int32_t doc[] = { 10, 11, 12, 13, 14, 15, 16 };
    n = sl_draft_ngram(e, 5, doc, 7, 4, out);
    cr_assert(n == 2 && out[0] == 15 && out[1] == 16, "after the changed token: n %d, %d", n, out[0]);
    /* a run of 2 before the change is too weak a hint */
    int32_t e2[] = { 12, 13, 99 };
    cr_assert_eq(sl_draft_ngram(e2, 3, doc, 7, 4, out), 0);
    /* one token later the output is back on the text: its last token matches (one token) and the
     * drafts go on from there */
    int32_t e3[] = { 10, 11, 12, 13, 99, 15 };
    n = sl_draft_ngram(e3, 6, doc, 7, 4, out);
    cr_assert(n == 1 && out[0] == 16, "n %d, %d", n, out[0]);
}

Test(draft, best_k_follows_acceptance_and_costs)
{
    cr_assert_eq(sl_draft_best_k(0.0, 1.0, 0.01, 8), 0, "never accepted: no drafts");
    cr_assert_eq(sl_draft_best_k(0.95, 1.0, 0.001, 8), 8, "nearly always accepted, cheap: all");
    cr_assert_eq(sl_draft_best_k(0.9, 0.1, 0.1, 8), 0, "a drafted token costs a whole pass (compute bound): none");
    int prev = 0;
    for (double a = 0.05; a < 1; a += 0.05) {   /* more acceptance never means shorter drafts */
        int k = sl_draft_best_k(a, 1.9, 0.06, 16);
        cr_assert_geq(k, prev, "a %.2f: k %d < %d", a, k, prev);
        prev = k;
    }
    /* the fit of pass times: t1 and t_tok recovered from passes of several lengths */
    sl_draft_stats s;
    sl_draft_stats_init(&s);
    for (int i = 0; i < 40; i++) {
        int n = 1 + i % 5;
        sl_draft_stats_update(&s, n, 2.0 + 0.05 * (n - 1), n - 1, (n - 1) / 2);
    }
    cr_assert(fabs(s.t1 - 2.0) < 1e-6 && fabs(s.t_tok - 0.05) < 1e-6, "t1 %g t_tok %g", s.t1, s.t_tok);
    cr_assert(s.accept > 0.3 && s.accept < 0.6, "accept %g", s.accept);
}

/* ---- greedy: identical tokens ------------------------------------------------------------------ */

typedef struct run_cfg {
    int draft;          /* enum sluice_draft */
    bool stream;
    int io;
    bool min_budget;    /* plan at the model's minimum budget (+1 MiB); else no plan */
} run_cfg;

/* Prompt, then n greedy tokens, with `lookup` (n_lookup ids) given to the drafter. */
static void generate(const char *path, const run_cfg *rc, const int32_t *prompt, int n_prompt, const int32_t *lookup,
                     int n_lookup, int n, spec_out *out)
{
    sluice_params p;
    sluice_params_default(&p);
    p.n_threads = 2;
    p.n_ctx = 256;
    p.draft = rc->draft;
    p.draft_max = 8;
    p.stream_all = rc->stream;
    p.io = rc->io;
    p.planner = rc->min_budget ? SLUICE_PLANNER_ON : SLUICE_PLANNER_OFF;
    p.disk_bw = 1;   /* no disk probe: the figure only feeds the prediction */
    p.compute_bw = 1;
    char err[512];
    if (rc->min_budget) {
        sluice_plan_info pi;
        p.ram_budget = 1u << 20;
        cr_assert_eq(sluice_plan(path, &p, &pi, err, sizeof err), -ENOSPC, "%s", err);
        p.ram_budget = pi.min_budget + (1u << 20);
    }
    spec_generate_greedy(path, &p, prompt, n_prompt, lookup, n_lookup, n, out);
}

/* One model: off vs ngram in every configuration, with and without lookup texts. */
static void greedy_identical(const char *model, const char *golden, int n_gen, bool all_backends)
{
    golden_run g;
    cr_assert_eq(golden_read_txt(golden, &g), 0, "%s", golden);
    const char *path = model;
    spec_out ref, got;
    run_cfg off = { SLUICE_DRAFT_OFF, false, SLUICE_IO_PREAD, false };
    generate(path, &off, g.prompt, g.n_prompt, NULL, 0, n_gen, &ref);
    cr_assert_eq(ref.st.n_drafted, 0);
    /* lookup texts: the continuation itself (most drafts right), and with every 4th token changed */
    int32_t look[2][160];
    int nl = 0;
    for (int i = 0; i < g.n_prompt; i++) look[0][nl] = look[1][nl] = g.prompt[i], nl++;
    for (int i = 0; i < ref.n && nl < 160; i++, nl++) {
        look[0][nl] = ref.ids[i];
        look[1][nl] = i % 4 == 3 ? (ref.ids[i] + 1) % 100 : ref.ids[i];
    }
    const run_cfg cfgs[] = {
        { SLUICE_DRAFT_NGRAM, false, SLUICE_IO_PREAD, false },
        { SLUICE_DRAFT_NGRAM, true, SLUICE_IO_PREAD, false },
        { SLUICE_DRAFT_NGRAM, true, SLUICE_IO_MMAP, false },
        { SLUICE_DRAFT_NGRAM, true, SLUICE_IO_URING, false },
        { SLUICE_DRAFT_AUTO, false, SLUICE_IO_URING, true },   /* the smallest budget: planned streaming */
    };
    for (size_t k = 0; k < sizeof cfgs / sizeof *cfgs; k++) {
        if (!all_backends && (cfgs[k].io == SLUICE_IO_MMAP || cfgs[k].io == SLUICE_IO_URING) && !cfgs[k].min_budget) continue;
        /* qemu-user has no io_uring: the uring backend reads with pread, so cfg 3 would repeat cfg 1 */
        if (tq_under_qemu_user() && cfgs[k].io == SLUICE_IO_URING && !cfgs[k].min_budget) {
            fprintf(stderr, "skipped: %s cfg %zu (uring: qemu-user has no io_uring, it would repeat the pread run)\n", model, k);
            continue;
        }
        for (int l = 0; l < 3; l++) {
            char what[256];
            snprintf(what, sizeof what, "%s cfg %zu lookup %d", model, k, l);
            generate(path, &cfgs[k], g.prompt, g.n_prompt, l ? look[l - 1] : NULL, l ? nl : 0, n_gen, &got);
            spec_same_tokens(&ref, &got, what);
            if (l == 1 && got.st.draft_max > 0)
                cr_expect_gt(got.st.n_accepted, 0, "%s: the golden continuation as lookup must be accepted", what);
            if (l == 1 && got.st.draft_max > 0)
                cr_expect_lt(got.st.n_passes, (uint64_t)got.n, "%s: fewer passes than tokens", what);
            fprintf(stderr, "%s: %d tokens, %llu passes, drafted %llu, accepted %llu (draft_max %d)\n", what, got.n,
                    (unsigned long long)got.st.n_passes, (unsigned long long)got.st.n_drafted,
                    (unsigned long long)got.st.n_accepted, got.st.draft_max);
        }
    }
}

Test(spec, greedy_identical_stories260K)
{
    for (int p = 1; p <= 4; p++) {
        static const char *names[] = { "p1_once", "p2_dog", "p3_lily_tom", "p4_bos" };
        greedy_identical(STORIES, shared_path("golden/stories260K/%s.txt", names[p - 1]), 64, p == 1);
    }
}

Test(spec, greedy_identical_micro_models)
{
    const char *files[][2] = { { "micro-llama", "Q4_K_M" }, { "micro-llama", "Q8_0" }, { "mini-llama3", "Q4_K_M" },
                               { "micro-tied", "F16" }, { "spm32k-llama", "Q4_K_M" } };
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        char model[1024];
        snprintf(model, sizeof model, "%s", shared_path("models/%s.%s.gguf", files[f][0], files[f][1]));
        greedy_identical(model, shared_path("golden/%s/%s.p1_once.txt", files[f][0], files[f][1]), 32, f == 0);
    }
}

/* stories260K with n-gram drafts from the context alone: tokens per pass on the golden prompts
 * (reported; the trained model repeats itself enough for drafts to land). */
Test(spec, stories_tokens_per_pass)
{
    static const char *names[] = { "p1_once", "p2_dog", "p3_lily_tom", "p4_bos" };
    for (int p = 0; p < 4; p++) {
        golden_run g;
        cr_assert_eq(golden_read_txt(shared_path("golden/stories260K/%s.txt", names[p]), &g), 0);
        run_cfg ng = { SLUICE_DRAFT_NGRAM, false, SLUICE_IO_PREAD, false };
        spec_out got;
        generate(STORIES, &ng, g.prompt, g.n_prompt, NULL, 0, 128, &got);
        double tpp = got.st.n_passes ? (double)got.n / (double)got.st.n_passes : 0;
        fprintf(stderr, "stories260K %s: %d tokens in %llu passes = %.2f tokens per pass (drafted %llu, accepted %llu)\n",
                names[p], got.n, (unsigned long long)got.st.n_passes, tpp, (unsigned long long)got.st.n_drafted,
                (unsigned long long)got.st.n_accepted);
        cr_expect_geq(tpp, 1.0);
    }
}

/* ---- sampling: the distribution is kept -------------------------------------------------------- */

/* The second generated token of `runs` seeded generations (temp, top-k 10), counted per id.  The two
 * samples a test compares use disjoint seeds: with the same seeds both would draw the same first
 * token, the samples would be correlated and the chi-square statistic deflated (a test that could
 * not fail). */
static void second_token_counts(sluice_model *m, sluice_ctx *c, const int32_t *prompt, int n_prompt, float temp,
                                int runs, uint64_t seed0, int *counts, int n_vocab, sluice_stats *st)
{
    for (int r = 0; r < runs; r++) {
        sluice_reset(c);
        cr_assert_eq(sluice_eval(c, prompt, n_prompt), 0, "%s", sluice_ctx_error(c));
        sluice_sampler_params sp;
        sluice_sampler_params_default(&sp);
        sp.temp = temp;
        sp.top_k = 10;
        sp.top_p = 1;
        sp.min_p = 0;
        sp.seed = seed0 + 1000003u * (uint64_t)(r + 1);
        sluice_sampler *s = sluice_sampler_new(m, &sp);
        spec_out g = { .n = 0 };
        cr_assert_geq(sluice_generate(c, s, 3, spec_collect, &g), 0);
        cr_assert_geq(g.n, 2);
        cr_assert(g.ids[1] >= 0 && g.ids[1] < n_vocab);
        counts[g.ids[1]]++;
        sluice_sampler_free(s);
    }
    sluice_get_stats(m, c, st);
}

static sluice_model *open_stories(int draft, sluice_ctx **c)
{
    sluice_params p;
    sluice_params_default(&p);
    p.planner = SLUICE_PLANNER_OFF;
    p.n_threads = 1;
    p.n_ctx = 64;
    p.draft = draft;
    p.draft_max = 4;
    p.draft_fixed = true;   /* draft whenever possible: exercise verification as often as possible */
    char err[256];
    sluice_model *m;
    cr_assert_eq(sluice_open(STORIES, &p, &m, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sluice_ctx_new(m, c, err, sizeof err), 0, "%s", err);
    return m;
}

Test(spec, sampling_keeps_the_distribution)
{
    /* 1500 seeded generations per sample natively; under qemu-user 600 (the sampler and the
     * verification are the same C code on every architecture, so the native run carries the
     * statistical power; the emulated one checks the same test still passes on the NEON path, and
     * the control below keeps it able to fail) */
    enum { V = 512 };
    const int RUNS = tq_under_qemu_user() ? 600 : 1500;
    sluice_ctx *c0, *c1;
    sluice_model *m0 = open_stories(SLUICE_DRAFT_OFF, &c0), *m1 = open_stories(SLUICE_DRAFT_NGRAM, &c1);
    int32_t prompt[16];
    int np = sluice_tokenize(m0, "Once upon a time, there was a", -1, SLUICE_TOK_ADD_SPECIAL, prompt, 16);
    cr_assert_gt(np, 0);
    /* a lookup text that drafts after the likely first tokens ("little", "big", "girl", ...) */
    int32_t look[256];
    int nl = 0;
    const char *texts[] = { "a little girl named Lily. a big dog. a girl named Sue. a boy named Tim.",
                            "a little boy who liked to play. a big tree. a man who was very kind." };
    for (int t = 0; t < 2; t++) {
        int k = sluice_tokenize(m1, texts[t], -1, 0, look + nl, 256 - nl);
        cr_assert_gt(k, 0);
        nl += k;
    }
    cr_assert_eq(sluice_ctx_set_lookup(c1, look, nl), 0);
    static int a[V], b[V], control[V];
    sluice_stats s0, s1, sc;
    second_token_counts(m0, c0, prompt, np, 1.0f, RUNS, 1, a, V, &s0);
    second_token_counts(m1, c1, prompt, np, 1.0f, RUNS, 777777, b, V, &s1);
    cr_assert_eq(s0.n_drafted, 0);
    cr_assert_gt(s1.n_drafted, RUNS / 2, "drafts were verified (%llu)", (unsigned long long)s1.n_drafted);
    cr_assert(s1.n_accepted > 0 && s1.n_accepted < s1.n_drafted, "both accepted and rejected drafts (%llu of %llu)",
              (unsigned long long)s1.n_accepted, (unsigned long long)s1.n_drafted);
    int df;
    double chi = chi2_two_sample(a, b, V, &df);
    fprintf(stderr, "second token: chi2 %.1f, df %d, critical (p = 0.001) %.1f; drafts %llu, accepted %llu\n", chi, df,
            chi2_crit(df), (unsigned long long)s1.n_drafted, (unsigned long long)s1.n_accepted);
    cr_assert_gt(df, 3);
    cr_assert_lt(chi, chi2_crit(df), "speculative sampling changed the distribution: chi2 %.1f > %.1f", chi, chi2_crit(df));
    /* control: the same test tells a different distribution (temp 0.6) apart */
    second_token_counts(m0, c0, prompt, np, 0.6f, RUNS, 555555, control, V, &sc);
    chi = chi2_two_sample(a, control, V, &df);
    cr_assert_gt(chi, chi2_crit(df), "the test cannot tell temp 1.0 from 0.6 (chi2 %.1f)", chi);
    sluice_ctx_free(c0);
    sluice_ctx_free(c1);
    sluice_close(m0);
    sluice_close(m1);
}

/* ---- edges: a context that fills up, a context made for sluice_batch, lookup ids ---------------- */

/* n greedy tokens after "Once upon a time" on stories260K with n_ctx positions; with `look` as lookup
 * (drafting on) or none (drafting off); the context made by sluice_ctx_new_seq when `seq`. */
static void edge_generate(int n_ctx, bool seq, const int32_t *look, int nl, spec_out *out)
{
    sluice_params p;
    sluice_params_default(&p);
    p.n_threads = 1;
    p.n_ctx = n_ctx;
    p.draft = look ? SLUICE_DRAFT_NGRAM : SLUICE_DRAFT_OFF;
    p.draft_max = 8;
    p.draft_fixed = true;
    char err[512];
    sluice_model *m;
    sluice_ctx *c;
    cr_assert_eq(sluice_open(STORIES, &p, &m, err, sizeof err), 0, "%s", err);
    cr_assert_eq((seq ? sluice_ctx_new_seq : sluice_ctx_new)(m, &c, err, sizeof err), 0, "%s", err);
    if (look) cr_assert_eq(sluice_ctx_set_lookup(c, look, nl), 0, "%s", sluice_ctx_error(c));
    int32_t prompt[16];
    int np = sluice_tokenize(m, "Once upon a time", -1, SLUICE_TOK_ADD_SPECIAL, prompt, 16);
    cr_assert(np > 0 && np < 16);
    cr_assert_eq(sluice_eval(c, prompt, np), 0, "%s", sluice_ctx_error(c));
    spec_continue_greedy(m, c, 128, out);
    sluice_ctx_free(c);
    sluice_close(m);
}

Test(spec, edges_full_context_batch_context_lookup_ids)
{
    spec_out ref, got;
    /* a context that fills while drafts are accepted: as many tokens as one-token decoding gives */
    edge_generate(48, false, NULL, 0, &ref);
    cr_assert(ref.n > 20 && ref.n < 128, "the context (48) ends the reference: %d tokens", ref.n);
    edge_generate(48, false, ref.ids, ref.n, &got);
    cr_assert_gt(got.st.n_accepted, 0, "the continuation as lookup is accepted");
    spec_same_tokens(&ref, &got, "full context");
    /* a context for sluice_batch keeps one logits row: it decodes one token per pass, never
     * reading rows it does not have */
    edge_generate(48, true, ref.ids, ref.n, &got);
    spec_same_tokens(&ref, &got, "sluice_ctx_new_seq context");
    cr_assert_eq(got.st.n_drafted, 0, "no drafts without logits rows to verify them");
    /* lookup ids outside the vocabulary are refused when given, not found at a verifying pass */
    sluice_params p;
    sluice_params_default(&p);
    char err[512];
    sluice_model *m;
    sluice_ctx *c;
    cr_assert_eq(sluice_open(STORIES, &p, &m, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sluice_ctx_new(m, &c, err, sizeof err), 0, "%s", err);
    const int32_t bad[] = { 5, 100000, 7 }, neg[] = { -1 };
    cr_assert_eq(sluice_ctx_set_lookup(c, bad, 3), -EINVAL);
    cr_assert(strstr(sluice_ctx_error(c), "outside the vocabulary"), "%s", sluice_ctx_error(c));
    cr_assert_eq(sluice_ctx_set_lookup(c, neg, 1), -EINVAL);
    cr_assert_eq(sluice_ctx_set_lookup(c, bad, 1), 0);
    sluice_ctx_free(c);
    sluice_close(m);
}

/* The acceptance estimate follows tokens: two passes whose 4 drafts were all kept make the drafts
 * long at once (a streamed pass costs far more than a drafted token), and two passes with none kept
 * make them (nearly) stop. */
Test(draft, acceptance_counts_tokens)
{
    sl_draft_stats s;
    sl_draft_stats_init(&s);
    for (int i = 0; i < 2; i++) sl_draft_stats_update(&s, 5, 2.0 + 0.04 * 4, 4, 4);
    cr_assert_gt(s.accept, 0.9, "accept %g after 8 of 8", s.accept);
    cr_assert_eq(sl_draft_best_k(s.accept, s.t1, s.t_tok, 8), 8, "all kept, cheap drafts: the longest");
    sl_draft_stats_init(&s);
    for (int i = 0; i < 2; i++) sl_draft_stats_update(&s, 5, 2.0 + 0.04 * 4, 4, 0);
    cr_assert_lt(s.accept, 0.1, "accept %g after 0 of 8", s.accept);
    /* a drafted token costs ~2% of a pass here, so one draft at 6% acceptance still pays; no more */
    cr_assert_leq(sl_draft_best_k(s.accept, s.t1, s.t_tok, 8), 1, "none kept: at most one draft");
}

/* Drafts that fail at their first token half the time and otherwise run 6 long (copied spans of a
 * lookup text with every 8th token changed do this): one token rate of 0.46 would promise under two
 * tokens a pass and keep the drafts short, while the rate per position sees that a kept first draft
 * is followed by five more and asks for the run.  The per-position counts: draft j is checked only
 * once drafts 1..j-1 were kept. */
Test(draft, acceptance_per_position_sees_runs)
{
    sl_draft_stats s;
    sl_draft_stats_init(&s);
    for (int i = 0; i < 12; i++) sl_draft_stats_update(&s, 9, 3.0 + 0.1 * 8, 8, i % 2 ? 6 : 0);
    cr_assert(s.accept > 0.3 && s.accept < 0.5, "token rate %g", s.accept);
    cr_assert(s.cond[0] > 0.35 && s.cond[0] < 0.65, "first position %g", s.cond[0]);
    /* positions 2..6, always kept once reached: the decayed count of passes that reached them is
     * ~2.6 (every other pass, decay 0.8), beside one pass of prior at the position before's
     * estimate, so position 2 (prior: position 1's ~0.55) is (2.6 + 0.55) / 3.6 = 0.87 and each
     * later one, whose prior is the high one before it, higher still */
    cr_assert_gt(s.cond[1], 0.8, "position 2: %g", s.cond[1]);
    for (int j = 2; j < 6; j++) cr_assert_gt(s.cond[j], 0.95, "position %d: %g (always kept once reached)", j + 1, s.cond[j]);
    cr_assert_lt(s.cond[6], 0.3, "position 7: %g (never kept: (0 + 0.999) / 3.6)", s.cond[6]);
    int k_ind = sl_draft_best_k(s.accept, s.t1, s.t_tok, 8), k_pos = sl_draft_stats_best_k(&s, 0, 8);
    cr_assert_leq(k_ind, 4, "one rate: short drafts (%d)", k_ind);
    cr_assert_geq(k_pos, 6, "per position: the run (%d)", k_pos);
    /* the expected tokens behind the choice, by hand: 1 + c1 (1 + c2 + c2 c3 + ...) */
    double cond[3] = { 0.5, 1.0, 0.0 };
    cr_assert_eq(sl_draft_best_k_cond(cond, 3, 1.0, 0.1, 8), 2, "1.5 tok/1.1 s at k 1, 2 tok/1.2 s at k 2, no gain after");
    cond[1] = 0.0;
    cr_assert_eq(sl_draft_best_k_cond(cond, 3, 1.0, 0.1, 8), 1);
    /* one position given: it stands for every length, as the single rate */
    for (double a = 0.1; a < 1; a += 0.1)
        cr_assert_eq(sl_draft_best_k_cond(&a, 1, 1.9, 0.06, 16), sl_draft_best_k(a, 1.9, 0.06, 16), "a %.1f", a);
}
