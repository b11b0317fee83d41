/* runtime/engine/sampler.h — choosing the next token from logits.
 *
 * Order of operations (as llama.cpp's common sampler chain): repetition penalty over the last
 * `repeat_last_n` tokens, then greedy if temp <= 0, else top-k, top-p, min-p, temperature, and a
 * draw from the softmax with a seeded generator (same seed, same logits -> same token).
 */
#ifndef SL_RUNTIME_SAMPLER_H
#define SL_RUNTIME_SAMPLER_H

#include <stdint.h>

typedef struct sl_sampler_params {
    float temp;            /* <= 0: greedy (argmax, ties -> lowest id) */
    int   top_k;           /* <= 0: off */
    float top_p;           /* >= 1: off */
    float min_p;           /* <= 0: off */
    float repeat_penalty;  /* 1: off */
    int   repeat_last_n;   /* tokens considered for the penalty */
    uint64_t seed;
} sl_sampler_params;

typedef struct sl_sampler sl_sampler;

sl_sampler_params sl_sampler_defaults(void);
sl_sampler *sl_sampler_create(const sl_sampler_params *p, int n_vocab);
void        sl_sampler_free(sl_sampler *s);
/* Picks a token; `logits` (n_vocab) may be modified.  `hist` holds the n_hist previous tokens. */
int32_t     sl_sample(sl_sampler *s, float *logits, const int32_t *hist, int n_hist);
/* Greedy argmax with ties to the lowest id. */
int32_t     sl_argmax(const float *logits, int n);

#endif
