/* tests/util/spec_gen.c — see spec_gen.h. */
#include "spec_gen.h"

#include <criterion/criterion.h>
#include <string.h>

int spec_collect(void *u, int32_t id, const char *text, size_t len)
{
    (void)text;
    (void)len;
    spec_out *g = u;
    if (id >= 0 && g->n < SPEC_GEN_MAX) g->ids[g->n++] = id;
    return 0;
}

void spec_continue_greedy(sluice_model *m, sluice_ctx *c, int n, spec_out *out)
{
    sluice_sampler_params sp;
    sluice_sampler_params_default(&sp);
    sp.temp = 0;
    sluice_sampler *s = sluice_sampler_new(m, &sp);
    memset(out, 0, sizeof *out);
    int r = sluice_generate(c, s, n, spec_collect, out);
    cr_assert_geq(r, 0, "%s", sluice_ctx_error(c));
    sluice_get_stats(m, c, &out->st);
    sluice_model_get_plan(m, &out->pi);
    sluice_sampler_free(s);
}

void spec_generate_greedy(const char *path, const sluice_params *p, const int32_t *prompt, int n_prompt,
                          const int32_t *lookup, int n_lookup, int n, spec_out *out)
{
    char err[SLUICE_ERRLEN];
    sluice_model *m;
    sluice_ctx *c;
    cr_assert_eq(sluice_open(path, p, &m, err, sizeof err), 0, "%s: %s", path, err);
    cr_assert_eq(sluice_ctx_new(m, &c, err, sizeof err), 0, "%s", err);
    if (n_lookup) cr_assert_eq(sluice_ctx_set_lookup(c, lookup, n_lookup), 0);
    cr_assert_eq(sluice_eval(c, prompt, n_prompt), 0, "%s", sluice_ctx_error(c));
    spec_continue_greedy(m, c, n, out);
    sluice_ctx_free(c);
    sluice_close(m);
}

void spec_same_tokens(const spec_out *ref, const spec_out *got, const char *what)
{
    cr_assert_eq(ref->n, got->n, "%s: %d tokens vs %d", what, ref->n, got->n);
    for (int i = 0; i < ref->n; i++)
        cr_assert_eq(ref->ids[i], got->ids[i], "%s: token %d is %d, one-token decoding gives %d", what, i, got->ids[i],
                     ref->ids[i]);
}
