/* tests/test_grammar_model.c — constrained decoding through the C API on a random-weight model
 * (mini-llama3: 512-token SentencePiece vocabulary with byte fallback): answers sampled at
 * temperature 1 (no top-k/top-p/min-p) all end with end-of-generation within the bound the grammar
 * states, and all parse and validate (grammar_testutil.h's validator, independent of the automaton);
 * speculative decoding (n-gram drafts verified against the masked logits) gives greedy tokens
 * identical to one-token decoding and valid sampled answers; errors are clear. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_testutil.h"
#include "include/sluice.h"

#define MODEL SL_SHARED_DIR "/models/mini-llama3.Q8_0.gguf"

typedef struct answer { char text[16384]; size_t n; int32_t toks[8192]; int n_toks; } answer;

static int on_token(void *user, int32_t tok, const char *text, size_t len)
{
    answer *a = user;
    cr_assert_lt(a->n + len, sizeof a->text);
    memcpy(a->text + a->n, text, len);
    a->n += len;
    if (tok >= 0 && a->n_toks < 8192) a->toks[a->n_toks++] = tok;
    return 0;
}

static sluice_model *open_model(int draft)
{
    sluice_params p;
    sluice_params_default(&p);
    p.n_ctx = 2048;
    p.n_threads = 2;
    p.draft = draft;
    p.draft_max = 4;
    sluice_model *m = NULL;
    char err[SLUICE_ERRLEN];
    cr_assert_eq(sluice_open(MODEL, &p, &m, err, sizeof err), 0, "%s", err);
    return m;
}

static uint64_t n_drafted, n_accepted;   /* over the answers generated so far */

/* One answer for schema with sampler params sp; returns the stop reason. */
static int generate(sluice_model *m, const char *schema, const sluice_sampler_params *sp, const char *prompt, answer *a)
{
    char err[SLUICE_ERRLEN];
    sluice_ctx *c = NULL;
    cr_assert_eq(sluice_ctx_new(m, &c, err, sizeof err), 0, "%s", err);
    sluice_sampler *s = NULL;
    cr_assert_eq(sluice_sampler_create(m, sp, &s, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sluice_sampler_set_json_schema(s, schema, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sluice_sampler_grammar_state(s), SLUICE_GRAMMAR_PENDING);
    int32_t ids[256];
    int n = sluice_tokenize(m, prompt, -1, SLUICE_TOK_ADD_SPECIAL, ids, 256);
    cr_assert(n > 0 && n <= 256);
    cr_assert_eq(sluice_prefill(c, ids, n), n);
    memset(a, 0, sizeof *a);
    int rc = sluice_generate(c, s, 4000, on_token, a);
    cr_assert_geq(rc, 0, "generate: %s", sluice_ctx_error(c));
    int why = sluice_stop_reason(c);
    sluice_stats st;
    sluice_get_stats(m, c, &st);
    n_drafted += st.n_drafted;
    n_accepted += st.n_accepted;
    if (why == SLUICE_STOP_EOG) cr_assert_eq(sluice_sampler_grammar_state(s), SLUICE_GRAMMAR_COMPLETE);
    sluice_sampler_free(s);
    sluice_ctx_free(c);
    return why;
}

static const char *const schemas[] = {
    NULL,
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":12},\"age\":"
    "{\"type\":\"integer\",\"minimum\":0,\"maximum\":120},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"x\",\"y\"]},"
    "\"maxItems\":3},\"score\":{\"type\":\"number\",\"minimum\":-1,\"maximum\":1}},\"required\":[\"name\",\"age\"],"
    "\"additionalProperties\":false}",
    "{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"get_weather\"},\"arguments\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":10}},\"required\":[\"city\"]}},\"required\":[\"name\","
    "\"arguments\"]},{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"get_time\"},\"arguments\":{\"type\":\"object\","
    "\"properties\":{\"tz\":{\"enum\":[\"UTC\",\"CET\"]}},\"required\":[\"tz\"]}},\"required\":[\"name\",\"arguments\"]}]}",
};

static sluice_sampler_params temp1(uint64_t seed)
{
    sluice_sampler_params sp;
    sluice_sampler_params_default(&sp);
    sp.temp = 1.0f;
    sp.top_k = 0;
    sp.top_p = 1.0f;
    sp.min_p = 0.0f;
    sp.seed = seed;
    return sp;
}

static void sample_many(sluice_model *m, int n_each, uint64_t seed0)
{
    answer *a = malloc(sizeof *a);
    for (size_t k = 0; k < sizeof schemas / sizeof *schemas; k++) {
        int ended = 0;
        for (int i = 0; i < n_each; i++) {
            sluice_sampler_params sp = temp1(seed0 + 1000 * k + (uint64_t)i);
            int why = generate(m, schemas[k], &sp, "Once upon a time {\"name\": \"x\", \"age\": 3}", a);
            /* the object schema without maxLength on keys (schema 0, a map) is unbounded: it may run to 4000 */
            if (k > 0) cr_assert_eq(why, SLUICE_STOP_EOG, "schema %zu answer %d did not end: %.*s", k, i, (int)a->n, a->text);
            if (why != SLUICE_STOP_EOG) continue;
            ended++;
            if (i < 2) printf("grammar_model: schema %zu: %.*s\n", k, (int)a->n, a->text);
            cr_assert(gt_check(schemas[k], a->text, a->n), "schema %zu answer %d invalid: %.*s", k, i, (int)a->n, a->text);
        }
        cr_assert_geq(ended, n_each / 2, "schema %zu: only %d of %d answers ended", k, ended, n_each);
    }
    free(a);
}

Test(grammar_model, sampled_answers_validate, .timeout = 600)
{
    sluice_model *m = open_model(SLUICE_DRAFT_OFF);
    sample_many(m, 20, 1);
    sluice_close(m);
}

Test(grammar_model, speculative_decoding_keeps_the_grammar, .timeout = 600)
{
    sluice_model *plain = open_model(SLUICE_DRAFT_OFF), *spec = open_model(SLUICE_DRAFT_NGRAM);
    answer *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    sluice_sampler_params greedy = temp1(1);
    greedy.temp = 0;
    /* a prompt that repeats JSON so the n-gram drafter proposes from it */
    const char *prompt = "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}} "
                         "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}";
    for (size_t k = 1; k < sizeof schemas / sizeof *schemas; k++) {
        cr_assert_eq(generate(plain, schemas[k], &greedy, prompt, a), SLUICE_STOP_EOG);
        cr_assert_eq(generate(spec, schemas[k], &greedy, prompt, b), SLUICE_STOP_EOG);
        cr_assert_eq(a->n_toks, b->n_toks, "schema %zu: %.*s vs %.*s", k, (int)a->n, a->text, (int)b->n, b->text);
        cr_assert_arr_eq(a->toks, b->toks, (size_t)a->n_toks * sizeof *a->toks, "greedy tokens differ with drafting");
        cr_assert(gt_check(schemas[k], b->text, b->n), "%.*s", (int)b->n, b->text);
    }
    cr_assert_gt(n_drafted, 0, "the drafter proposed nothing: verification was not exercised");
    uint64_t drafted_greedy = n_drafted;
    sample_many(spec, 8, 77);
    printf("grammar_model: drafts verified %llu (greedy %llu), accepted %llu\n", (unsigned long long)n_drafted,
           (unsigned long long)drafted_greedy, (unsigned long long)n_accepted);
    cr_assert_gt(n_accepted, 0);
    free(a);
    free(b);
    sluice_close(plain);
    sluice_close(spec);
}

Test(grammar_model, errors_are_clear)
{
    sluice_model *m = open_model(SLUICE_DRAFT_OFF);
    sluice_sampler *s = sluice_sampler_new(m, NULL);
    char err[SLUICE_ERRLEN] = "";
    cr_expect_eq(sluice_sampler_set_json_schema(s, "{\"type\":\"string\",\"pattern\":\"a+\"}", err, sizeof err), -EINVAL);
    cr_expect(strstr(err, "unsupported JSON Schema keyword 'pattern' (supported: "), "%s", err);
    cr_expect_eq(sluice_sampler_grammar_state(s), SLUICE_GRAMMAR_NONE, "a refused schema leaves the sampler as it was");
    cr_expect_eq(sluice_json_schema_check("{\"type\":\"object\",\"oneOf\":[]}", err, sizeof err), -EINVAL);
    cr_expect(strstr(err, "'oneOf'"), "%s", err);
    cr_expect_eq(sluice_json_schema_check(NULL, err, sizeof err), 0);
    cr_expect_eq(sluice_sampler_set_grammar(NULL, NULL, NULL, NULL, err, sizeof err), -EINVAL);
    /* ignore_eog where only end of generation may come: -EDOM, said plainly */
    sluice_sampler_params sp = temp1(3);
    sp.ignore_eog = true;
    sluice_sampler *s2 = sluice_sampler_new(m, &sp);
    cr_assert_eq(sluice_sampler_set_json_schema(s2, "{\"const\":1}", err, sizeof err), 0, "%s", err);
    sluice_ctx *c = NULL;
    cr_assert_eq(sluice_ctx_new(m, &c, err, sizeof err), 0);
    int32_t ids[16];
    int n = sluice_tokenize(m, "Hi", -1, SLUICE_TOK_ADD_SPECIAL, ids, 16);
    cr_assert_eq(sluice_prefill(c, ids, n), n);
    int rc = sluice_generate(c, s2, 50, NULL, NULL);
    cr_expect_eq(rc, -EDOM);
    cr_expect(strstr(sluice_ctx_error(c), "grammar allows no token"), "%s", sluice_ctx_error(c));
    sluice_reset(c);
    cr_assert_eq(sluice_prefill(c, ids, n), n);
    sluice_sampler_clear_grammar(s2);
    cr_expect_eq(sluice_sampler_grammar_state(s2), SLUICE_GRAMMAR_NONE);
    cr_expect_eq(sluice_generate(c, s2, 5, NULL, NULL), 5, "unconstrained again");
    sluice_ctx_free(c);
    sluice_sampler_free(s2);
    sluice_sampler_free(s);
    sluice_close(m);
}
