/* runtime/engine/draft.c — n-gram drafting and the draft length (see draft.h). */
#include "runtime/engine/draft.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#define MATCH_CAP 32   /* a match this long is as good as any longer one (and bounds the work) */

/* How many tokens before hist's end equal those before src[j], going back from hist[end-1] and
 * src[j-1] (at most MATCH_CAP, and never reaching src index 0 - 1). */
static int match_back(const int32_t *hist, int end, const int32_t *src, int j)
{
    int L = 0;
    while (L < MATCH_CAP && L < end && L < j && hist[end - 1 - L] == src[j - 1 - L]) L++;
    return L;
}

typedef struct cand { const int32_t *src; int len, at, score; } cand;

/* The best place in src[0..len) to copy from: src[j] follows tokens that match hist's end.  A
 * place's score is its match length; one whose token before src[j] differs from hist's last but
 * whose MIN_SUB_RUN or more tokens before that match scores that run less one (a text the output
 * follows with a token changed: an edited word, a corrected name).  Later places win ties (the most
 * recent use is the likeliest to continue).  `self`: src is hist itself, whose own end is no place. */
#define MIN_SUB_RUN 3
static void best_place(const int32_t *hist, int n_hist, const int32_t *src, int len, bool self, cand *best)
{
    int last = self ? n_hist - 1 : len - 1;   /* src[j] must exist; hist[n_hist-1]'s own place is not one */
    for (int j = 1; j <= last; j++) {
        int score = 0;
        if (src[j - 1] == hist[n_hist - 1]) {
            score = match_back(hist, n_hist, src, j);
        } else if (n_hist >= 2 && j >= 2) {   /* hist[n_hist-1] replaced src[j-1]: the run before it */
            int run = match_back(hist, n_hist - 1, src, j - 1);
            if (run >= MIN_SUB_RUN) score = run - 1;
        }
        if (score > 0 && score >= best->score) *best = (cand){ src, len, j, score };
    }
}

/* Contract: see draft.h.  Both texts are searched for the place whose preceding tokens match the
 * end of hist the longest (the lookup text first, so that a tie goes to the context's own later
 * use); the drafts are what follows that place. */
int sl_draft_ngram(const int32_t *hist, int n_hist, const int32_t *lookup, int n_lookup, int k, int32_t *out)
{
    if (k < 1 || n_hist < 1) return 0;
    cand best = { 0 };
    if (lookup && n_lookup > 1) best_place(hist, n_hist, lookup, n_lookup, false, &best);
    best_place(hist, n_hist, hist, n_hist, true, &best);
    if (!best.score) return 0;
    int m = 0;
    for (int j = best.at; j < best.len && m < k; j++) out[m++] = best.src[j];
    return m;
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

/* Contract: see draft.h. */
int sl_draft_choose_k(const sl_draft_stats *acc, const sl_draft_stats *timing, int k_max, bool streamed,
                      uint64_t n_passes)
{
    if (timing->n_obs < 2)   /* no timings yet: a streamed pass costs its reads whatever its length,
                              * so its first passes draft the most; a resident one starts moderately */
        return streamed || k_max < 4 ? k_max : 4;
    /* a draft model's tokens cost t_draft each on top of the pass's compute */
    int best = sl_draft_best_k_cond(acc->cond, SL_DRAFT_POS_MAX, timing->t1, timing->t_tok + acc->t_draft, k_max);
    /* drafts that do not pay are still tried now and then, or the estimate could never recover
     * when the text becomes predictable */
    return best > 0 ? best : n_passes % 16 == 0 ? 1 : 0;
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
 * promises 1.99 and picks 3).  Each position's estimate has a prior worth one pass: the first
 * position's is 0.5, every later one's the estimate of the position before it, so an unexplored
 * length is judged as its neighbour rather than as hopeless.  The prior keeps two failed passes
 * from ending the drafting: after them the first position still says ~0.2, which a streamed pass
 * (a draft costs ~3% of its reads) keeps testing with one draft, where a rate from the counts
 * alone (~0.01) stopped drafting for the 16 passes to the next probe. */
static void update_cond(sl_draft_stats *s, int drafted, int accepted, double decay)
{
    const double prior_w = 1.0;
    for (int j = 0; j < SL_DRAFT_POS_MAX; j++) {
        s->reach[j] *= decay;
        s->kept[j] *= decay;
        if (j < drafted && j <= accepted) {   /* draft j+1 was checked: drafts 1..j were kept */
            s->reach[j] += 1;
            if (j < accepted) s->kept[j] += 1;
        }
        double prior = j ? s->cond[j - 1] : 0.5;
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
