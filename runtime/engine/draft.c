/* runtime/engine/draft.c — n-gram drafting and the draft length (see draft.h). */
#include "runtime/engine/draft.h"

#include <math.h>
#include <string.h>

/* The latest start i < limit with a[i..i+n) == key[0..n) whose continuation a[i+n] exists, or -1. */
static int find_last(const int32_t *a, int len, int limit, const int32_t *key, int n)
{
    for (int i = (limit < len - n ? limit : len - n - 1); i >= 0; i--)
        if (!memcmp(a + i, key, (size_t)n * sizeof *key)) return i;
    return -1;
}

/* Contract: see draft.h.  The suffix's own place in hist does not count (it has no continuation). */
int sl_draft_ngram(const int32_t *hist, int n_hist, const int32_t *lookup, int n_lookup, int k, int32_t *out)
{
    if (k < 1 || n_hist < 1) return 0;
    for (int n = n_hist - 1 < SL_DRAFT_NGRAM_MAX ? n_hist - 1 : SL_DRAFT_NGRAM_MAX; n >= SL_DRAFT_NGRAM_MIN; n--) {
        const int32_t *key = hist + n_hist - n;
        int at = find_last(hist, n_hist, n_hist - n - 1, key, n);
        const int32_t *src = hist;
        int src_len = n_hist;
        if (at < 0 && lookup && n_lookup > n) {
            at = find_last(lookup, n_lookup, n_lookup - n - 1, key, n);
            src = lookup;
            src_len = n_lookup;
        }
        if (at < 0) continue;
        int m = 0;
        for (int j = at + n; j < src_len && m < k; j++) out[m++] = src[j];
        return m;
    }
    if (lookup && n_lookup > 0 && n_hist >= 1) {   /* a one-token key that only the lookup text has */
        int at = find_last(lookup, n_lookup, n_lookup - 2, hist + n_hist - 1, 1);
        if (at >= 0) {
            int m = 0;
            for (int j = at + 1; j < n_lookup && m < k; j++) out[m++] = lookup[j];
            return m;
        }
    }
    return 0;
}

/* Contract: see draft.h. */
int sl_draft_best_k_cond(const double *cond, int n_cond, double t1, double t_tok, int k_max)
{
    if (k_max < 1 || !(t1 > 0) || n_cond < 1) return k_max > 0 ? 1 : 0;
    if (!(t_tok >= 0)) t_tok = 0;
    int best = 0;
    double best_rate = 1.0 / t1, reach = 1.0, tokens = 1.0;   /* k = 0: one token per pass */
    for (int k = 1; k <= k_max; k++) {
        double c = cond[(k < n_cond ? k : n_cond) - 1];
        if (!(c >= 0)) c = 0;
        if (c > 0.999) c = 0.999;
        reach *= c;        /* the chance that drafts 1..k are all kept */
        tokens += reach;   /* expected tokens of the pass */
        double rate = tokens / (t1 + k * t_tok);
        if (rate > best_rate * (1 + 1e-9)) { best_rate = rate; best = k; }
    }
    return best;
}

/* Contract: see draft.h. */
int sl_draft_best_k(double a, double t1, double t_tok, int k_max)
{
    return sl_draft_best_k_cond(&a, 1, t1, t_tok, k_max);
}

int sl_draft_stats_best_k(const sl_draft_stats *s, double t_tok_extra, int k_max)
{
    return sl_draft_best_k_cond(s->cond, SL_DRAFT_POS_MAX, s->t1, s->t_tok + t_tok_extra, k_max);
}

void sl_draft_stats_init(sl_draft_stats *s)
{
    /* optimistic start: drafts are tried until the passes say they do not pay */
    *s = (sl_draft_stats){ .accept = 0.5 };
    for (int j = 0; j < SL_DRAFT_POS_MAX; j++) s->cond[j] = 0.5;
}

/* Acceptance per draft position.  One rate for every draft assumes each is kept independently, and
 * real drafts are not like that: a copied span is either the wrong one from its first token (the
 * suffix matched somewhere that continues differently) or right for a long run, up to where the
 * source and the text part (an edited word, every 8th token of a lookup text changed).  With the
 * rate of each position given the ones before it, a text whose drafts fail at the first token half
 * the time and then run 7 long gets long drafts (1 + 0.5 * 7 tokens for 8, where one rate of ~0.5
 * promises 1.99 and picks 3).  Positions never checked yet take the estimate of the one before
 * (the first: the token rate), with the same half-pass prior weight, so an unexplored length is
 * judged as its neighbour rather than as hopeless. */
static void update_cond(sl_draft_stats *s, int drafted, int accepted, double decay)
{
    const double prior_w = 0.5;
    for (int j = 0; j < SL_DRAFT_POS_MAX; j++) {
        s->reach[j] *= decay;
        s->kept[j] *= decay;
        if (j < drafted && j <= accepted) {   /* draft j+1 was checked: drafts 1..j were kept */
            s->reach[j] += 1;
            if (j < accepted) s->kept[j] += 1;
        }
        double prior = j ? s->cond[j - 1] : s->accept;
        s->cond[j] = (s->kept[j] + prior_w * prior) / (s->reach[j] + prior_w);
    }
}

/* Acceptance: accepted / drafted tokens, both counts decayed per pass (recent passes count most:
 * how predictable the text is changes as it is written), with a prior of half a token accepted of
 * one drafted.  Counting tokens, not passes, lets two fully accepted passes of 4 drafts say 0.94
 * where a per-pass average from 0.5 would still say 0.68 and keep the drafts short.  Time: a decayed least-squares fit of secs = t1 + x * t_tok over the
 * passes (x = drafts in the pass), with a weak prior t_tok = t1 / 20 (a streamed pass is mostly
 * reads; a drafted token adds one token of compute) that matters only while x has not varied. */
void sl_draft_stats_update(sl_draft_stats *s, int n, double secs, int drafted, int accepted)
{
    const double decay = 0.9, acc_decay = 0.8;
    s->acc_sum = acc_decay * s->acc_sum + accepted;
    s->drf_sum = acc_decay * s->drf_sum + drafted;
    s->accept = (s->acc_sum + 0.5) / (s->drf_sum + 1.0);
    update_cond(s, drafted, accepted, acc_decay);
    double x = n > 1 ? n - 1 : 0;
    s->s0 = decay * s->s0 + 1;
    s->sx = decay * s->sx + x;
    s->sy = decay * s->sy + secs;
    s->sxx = decay * s->sxx + x * x;
    s->sxy = decay * s->sxy + x * secs;
    s->n_obs++;
    double det = s->s0 * s->sxx - s->sx * s->sx;
    double mean_x = s->sx / s->s0, mean_y = s->sy / s->s0;
    double slope = det > 1e-9 * s->s0 * s->s0 ? (s->s0 * s->sxy - s->sx * s->sy) / det : -1;
    if (slope >= 0) {
        s->t_tok = slope;
        s->t1 = mean_y - slope * mean_x;
    } else {   /* x never varied (or a noisy fit): the prior ratio */
        s->t1 = mean_y / (1 + mean_x / 20);
        s->t_tok = s->t1 / 20;
    }
    if (!(s->t1 > 0)) s->t1 = mean_y > 0 ? mean_y : 1e-3;
}

/* A moving average, as the acceptance's (a streamed draft's token cost varies with the disk). */
void sl_draft_stats_drafter(sl_draft_stats *s, double secs, int n_tokens)
{
    if (n_tokens < 1 || !(secs >= 0)) return;
    double per = secs / n_tokens;
    s->t_draft = s->n_draft_obs++ ? 0.8 * s->t_draft + 0.2 * per : per;
}
