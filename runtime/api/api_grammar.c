/* runtime/api/api_grammar.c — constrained decoding in the sampler (include/sluice.h): a compiled
 * grammar (runtime/text/grammar.h) per sampler, the model's vocabulary trie built once, the mask
 * applied to the sampler's working logits before each choice, the grammar advanced by the chosen
 * token.  sluice_sample, sluice_generate and speculative verification (api_verify) all load logits
 * through sampler_load (api_ctx.c), which calls api_grammar_mask: a drafted token the grammar does
 * not allow has probability 0 and is rejected, so drafting stays exact. */
#include "runtime/api/api_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Builds of any model's trie take turns (rare: once per model). */
static pthread_mutex_t gvocab_mu = PTHREAD_MUTEX_INITIALIZER;

static int model_gvocab(const sluice_model *M, const sl_gvocab **out)
{
    sluice_model *m = (sluice_model *)M;   /* the trie is a cache of the model's vocabulary */
    pthread_mutex_lock(&gvocab_mu);
    int rc = m->gvocab ? 0 : sl_gvocab_build(m->voc, &m->gvocab);
    pthread_mutex_unlock(&gvocab_mu);
    *out = m->gvocab;
    return rc;
}

void api_grammar_model_free(sluice_model *M)
{
    sl_gvocab_free(M->gvocab);
    M->gvocab = NULL;
}

void api_grammar_sampler_free(sluice_sampler *S)
{
    sl_gstate_free(S->gstate);
    sl_grammar_free(S->grammar);
    free(S->allowed);
    S->gstate = NULL;
    S->grammar = NULL;
    S->allowed = NULL;
}

int sluice_sampler_set_grammar(sluice_sampler *S, const char *schema_json, const char *prefix, const char *suffix,
                               char *err, size_t errlen)
{
    if (!S) return api_einval(err, errlen, "sluice_sampler_set_grammar: NULL sampler");
    api_check(S, API_SAMPLER, "sluice_sampler_set_grammar");
    const sl_gvocab *gv;
    if (model_gvocab(S->M, &gv)) { snprintf(err, errlen, "out of memory"); return -ENOMEM; }
    sl_grammar *g = NULL;
    int rc = sl_grammar_compile(schema_json, schema_json ? strlen(schema_json) : 0, prefix, suffix, &g, err, errlen);
    if (rc) return rc;
    sl_gstate *st = sl_gstate_new(g);
    uint8_t *allowed = malloc((size_t)S->n_vocab);
    if (!st || !allowed) {
        sl_gstate_free(st);
        sl_grammar_free(g);
        free(allowed);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    api_grammar_sampler_free(S);
    S->grammar = g;
    S->gstate = st;
    S->allowed = allowed;
    return 0;
}

int sluice_sampler_set_json_schema(sluice_sampler *S, const char *schema_json, char *err, size_t errlen)
{
    return sluice_sampler_set_grammar(S, schema_json, NULL, NULL, err, errlen);
}

void sluice_sampler_clear_grammar(sluice_sampler *S)
{
    if (!S) return;
    api_check(S, API_SAMPLER, "sluice_sampler_clear_grammar");
    api_grammar_sampler_free(S);
}

void sluice_sampler_reset_grammar(sluice_sampler *S)
{
    if (!S) return;
    api_check(S, API_SAMPLER, "sluice_sampler_reset_grammar");
    if (S->gstate) sl_gstate_reset(S->gstate);
}

int sluice_sampler_grammar_state(const sluice_sampler *S)
{
    if (!S || !S->gstate) return SLUICE_GRAMMAR_NONE;
    api_check(S, API_SAMPLER, "sluice_sampler_grammar_state");
    return sl_gstate_complete(S->gstate) ? SLUICE_GRAMMAR_COMPLETE : SLUICE_GRAMMAR_PENDING;
}

int sluice_json_schema_check(const char *schema_json, char *err, size_t errlen)
{
    sl_grammar *g = NULL;
    int rc = sl_grammar_compile(schema_json, schema_json ? strlen(schema_json) : 0, NULL, NULL, &g, err, errlen);
    sl_grammar_free(g);
    return rc;
}

int api_grammar_mask(sluice_sampler *S)
{
    if (!S->gstate) return 0;
    int n = sl_grammar_mask(S->M->gvocab, S->gstate, S->allowed);
    if (n < 0) return n;
    int left = 0;
    for (int i = 0; i < S->n_vocab; i++) {
        if (!S->allowed[i]) S->logits[i] = -INFINITY;
        else left += S->logits[i] > -INFINITY;
    }
    return left ? 0 : -EDOM;
}

void api_grammar_accept(sluice_sampler *S, int32_t id)
{
    if (S->gstate) sl_gstate_accept_token(S->gstate, S->M->gvocab, id);
}
