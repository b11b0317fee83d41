/* tests/util/spec_gen.h — greedy generation for the speculative-decoding tests: open a model with
 * given parameters, evaluate a prompt, generate n tokens at temperature 0 and keep the ids, the
 * stats and the plan; and the check that two generations gave the same tokens. */
#ifndef SL_TESTS_SPEC_GEN_H
#define SL_TESTS_SPEC_GEN_H

#include <stddef.h>
#include <stdint.h>

#include "include/sluice.h"

#define SPEC_GEN_MAX 128   /* tokens kept per generation */

typedef struct spec_out {
    int32_t ids[SPEC_GEN_MAX];
    int n;
    sluice_stats st;
    sluice_plan_info pi;
} spec_out;

/* A sluice_token_fn that appends each id to the spec_out `u` (up to SPEC_GEN_MAX). */
int spec_collect(void *u, int32_t id, const char *text, size_t len);

/* n tokens generated greedily from c (its prompt already evaluated) into *out, with the stats and
 * the plan.  Criterion-asserts. */
void spec_continue_greedy(sluice_model *m, sluice_ctx *c, int n, spec_out *out);

/* path opened with *p; lookup (n_lookup ids, may be NULL) given to the drafter; the prompt
 * evaluated; n tokens generated greedily into *out.  Criterion-asserts every step. */
void spec_generate_greedy(const char *path, const sluice_params *p, const int32_t *prompt, int n_prompt,
                          const int32_t *lookup, int n_lookup, int n, spec_out *out);

/* Asserts that got has ref's tokens, naming `what` and the first difference. */
void spec_same_tokens(const spec_out *ref, const spec_out *got, const char *what);

#endif
