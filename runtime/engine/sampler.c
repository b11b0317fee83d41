/* runtime/engine/sampler.c — repetition penalty, top-k, top-p, min-p, temperature, seeded draw. */
#include "runtime/engine/sampler.h"

#include <math.h>
#include <stdlib.h>

typedef struct cand { float logit; int32_t id; } cand;

struct sl_sampler {
    sl_sampler_params p;
    int n_vocab;
    uint64_t rng;
    cand *c;
};

sl_sampler_params sl_sampler_defaults(void)
{
    sl_sampler_params p = { .temp = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
                            .repeat_penalty = 1.0f, .repeat_last_n = 64, .seed = 0x5eed };
    return p;
}

sl_sampler *sl_sampler_create(const sl_sampler_params *p, int n_vocab)
{
    sl_sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->p = *p;
    s->n_vocab = n_vocab;
    s->rng = p->seed ? p->seed : 0x9e3779b97f4a7c15ull;
    s->c = malloc((size_t)n_vocab * sizeof *s->c);
    if (!s->c) { free(s); return NULL; }
    return s;
}

void sl_sampler_free(sl_sampler *s)
{
    if (!s) return;
    free(s->c);
    free(s);
}

int32_t sl_argmax(const float *logits, int n)
{
    int32_t best = 0;
    for (int i = 1; i < n; i++) if (logits[i] > logits[best]) best = i;
    return best;
}

/* splitmix64 -> uniform double in [0, 1) */
static double next_uniform(uint64_t *st)
{
    uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1p-53;
}

static int cmp_desc(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return x->id - y->id;
}

int32_t sl_sample(sl_sampler *s, float *logits, const int32_t *hist, int n_hist)
{
    const sl_sampler_params *p = &s->p;
    if (p->repeat_penalty != 1.0f && hist) {
        int from = n_hist > p->repeat_last_n ? n_hist - p->repeat_last_n : 0;
        /* each distinct token is penalized once, as llama.cpp does */
        for (int i = from; i < n_hist; i++) {
            int32_t t = hist[i];
            if (t < 0 || t >= s->n_vocab) continue;
            int seen = 0;
            for (int j = from; j < i; j++) if (hist[j] == t) { seen = 1; break; }
            if (seen) continue;
            logits[t] = logits[t] > 0 ? logits[t] / p->repeat_penalty : logits[t] * p->repeat_penalty;
        }
    }
    if (p->temp <= 0) return sl_argmax(logits, s->n_vocab);

    int n = s->n_vocab;
    for (int i = 0; i < n; i++) { s->c[i].logit = logits[i]; s->c[i].id = i; }
    qsort(s->c, (size_t)n, sizeof *s->c, cmp_desc);
    if (p->top_k > 0 && p->top_k < n) n = p->top_k;
    /* probabilities at temperature 1 for top-p / min-p (as the llama.cpp chain does before temp) */
    double mx = s->c[0].logit, sum = 0;
    for (int i = 0; i < n; i++) sum += exp(s->c[i].logit - mx);
    if (p->top_p < 1.0f) {
        double acc = 0;
        for (int i = 0; i < n; i++) {
            acc += exp(s->c[i].logit - mx) / sum;
            if (acc >= p->top_p) { n = i + 1; break; }
        }
    }
    if (p->min_p > 0) {
        /* keep tokens whose probability is at least min_p times the best one's */
        double lim = mx + log(p->min_p);
        int k = 1;
        while (k < n && s->c[k].logit >= lim) k++;
        n = k;
    }
    double z = 0;
    for (int i = 0; i < n; i++) z += exp((s->c[i].logit - mx) / p->temp);
    double r = next_uniform(&s->rng) * z, acc = 0;
    for (int i = 0; i < n; i++) {
        acc += exp((s->c[i].logit - mx) / p->temp);
        if (r < acc) return s->c[i].id;
    }
    return s->c[n - 1].id;
}
