/* tests/test_cli_spec.c — speculative decoding from the command line: `--lookup` and `-md` keep the
 * greedy text in fewer passes (--stats-json says how many), and what is refused says why.  Runs the
 * built binary (tests/cli_testutil.h); models: the bundled stories260K and ../shared's. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "cli_testutil.h"

TestSuite(cli_spec, .init = setup, .fini = teardown, .timeout = 300);

/* `--lookup` with the greedy text itself: the same text, in fewer passes (--stats-json says how many);
 * `--draft model` is refused with what is supported. */
Test(cli_spec, lookup_drafts_keep_greedy_output)
{
    result off = run(ARGV("run", "-m", STORIES, "-p", "Once upon a time", "-n", "48", "--temp", "0", "-q", "--draft", "off"));
    cr_assert_eq(off.status, 0, "%s", off.err);
    char look[160], js[160];
    snprintf(look, sizeof look, "%s/lookup.txt", g_tmp);
    snprintf(js, sizeof js, "%s/stats.json", g_tmp);
    FILE *f = fopen(look, "w");
    cr_assert_not_null(f);
    fwrite(off.out, 1, off.out_len, f);
    fclose(f);
    /* --draft-fixed: the adaptive length follows measured pass times (a sanitizer build is slower
     * per token, and drafts stop paying), and this test is about the output, not the timing */
    result spec = run(ARGV("run", "-m", STORIES, "-p", "Once upon a time", "-n", "48", "--temp", "0", "-q", "--lookup",
                           look, "--draft-fixed", "--stats-json", js));
    cr_assert_eq(spec.status, 0, "%s", spec.err);
    cr_assert(off.out_len == spec.out_len && !memcmp(off.out, spec.out, off.out_len), "output differs:\n%s\n%s", off.out,
              spec.out);
    size_t n;
    char *j = slurp(js, &n);
    const double passes = json_num(j, "passes");
    free(j);
    cr_assert(passes > 0 && passes < 24, "48 tokens with their own text as lookup took %g passes", passes);
    result bad = run(ARGV("run", "-m", STORIES, "-p", "x", "--draft", "model"));
    cr_assert_eq(bad.status, 2);
    cr_assert(strstr(bad.err, "--draft model needs -md FILE"), "%s", bad.err);
    result_free(&off);
    result_free(&spec);
    result_free(&bad);
}

/* -md: stories260K drafting for itself gives the same greedy text with every draft accepted
 * (--stats-json: passes, drafted, accepted, tokens_per_pass, drafter "model"); a draft with another
 * vocabulary is refused naming the difference; `sluice plan -md` shows the draft's share. */
Test(cli_spec, draft_model_keeps_greedy_output)
{
    result off = run(ARGV("run", "-m", STORIES, "-p", "Once upon a time", "-n", "48", "--temp", "0", "-q", "--draft", "off"));
    cr_assert_eq(off.status, 0, "%s", off.err);
    char js[160];
    snprintf(js, sizeof js, "%s/stats-md.json", g_tmp);
    result spec = run(ARGV("run", "-m", STORIES, "-md", STORIES, "-p", "Once upon a time", "-n", "48", "--temp", "0", "-q",
                           "--draft-fixed", "--stats-json", js));
    cr_assert_eq(spec.status, 0, "%s", spec.err);
    cr_assert(off.out_len == spec.out_len && !memcmp(off.out, spec.out, off.out_len), "output differs:\n%s\n%s", off.out,
              spec.out);
    size_t n;
    char *j = slurp(js, &n);
    cr_assert(strstr(j, "\"drafter\":\"model\""), "%s", j);
    double passes = json_num(j, "passes"), drafted = json_num(j, "drafted"), accepted = json_num(j, "accepted");
    double tpp = json_num(j, "tokens_per_pass");
    cr_assert(passes > 0 && passes < 12, "48 tokens drafted by the model itself took %g passes", passes);
    cr_assert(drafted > 0 && accepted == drafted, "self-draft: accepted %g of %g", accepted, drafted);
    cr_assert(tpp > 4, "tokens per pass %g", tpp);
    free(j);
    const char *spm = SL_SOURCE_DIR "/../shared/models/spm32k-llama.Q4_K_M.gguf";
    result bad = run(ARGV("run", "-m", STORIES, "-md", spm, "-p", "x", "-n", "4"));
    cr_assert_neq(bad.status, 0);
    cr_assert(strstr(bad.err, "vocabulary differs from the target's: 32000 tokens, the target has 512"), "%s", bad.err);
    result both = run(ARGV("run", "-m", STORIES, "-md", STORIES, "--draft", "ngram", "-p", "x"));
    cr_assert_eq(both.status, 2);
    cr_assert(strstr(both.err, "one drafter at a time"), "%s", both.err);
    result plan = run(ARGV("plan", "-m", STORIES, "-md", STORIES, "--ram-budget", "64M", "--disk-bw", "1", "--compute-bw", "1"));
    cr_assert_eq(plan.status, 0, "%s", plan.err);
    cr_assert(strstr(plan.out, "draft model:") && strstr(plan.out, "predicted tok/s:"), "%s", plan.out);
    result pj = run(ARGV("plan", "-m", STORIES, "-md", STORIES, "--ram-budget", "64M", "--disk-bw", "1", "--compute-bw", "1",
                         "--json"));
    cr_assert_eq(pj.status, 0, "%s", pj.err);
    cr_assert(!strncmp(pj.out, "{\"target\":{", 11) && strstr(pj.out, "\"draft\":{\"budget\":67108864"), "%s", pj.out);
    result_free(&off);
    result_free(&spec);
    result_free(&bad);
    result_free(&both);
    result_free(&plan);
    result_free(&pj);
}
