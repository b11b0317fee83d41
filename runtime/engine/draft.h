/* runtime/engine/draft.h — drafting tokens for speculative decoding, and choosing how many.
 *
 * Under streaming a token costs a pass over the weights; verifying k drafted tokens in the same
 * pass costs the same reads plus k tokens of compute.  The drafter here needs no model: it looks the
 * last few tokens up in the context so far (prompt lookup) and in a text the user gives (the
 * document being edited or quoted), and proposes what followed there.  A draft model (runtime/api/
 * api_draft.c) is the other drafter; its per-token cost enters the draft length through t_draft.
 */
#ifndef SL_RUNTIME_DRAFT_H
#define SL_RUNTIME_DRAFT_H

#include <stdbool.h>
#include <stdint.h>

/* Up to k tokens copied from the place in hist[0..n_hist) or lookup[0..n_lookup) whose preceding
 * tokens match the end of hist the longest (up to 32 tokens; ties: the latest place, and the
 * context's over the lookup text's), where a place may also be one whose token before it differs
 * from hist's last but whose 3 or more tokens before that match (a text followed with a token
 * changed; it scores that run less one).  0 when no place matches.  Writes out[0..return). */
int sl_draft_ngram(const int32_t *hist, int n_hist, const int32_t *lookup, int n_lookup, int k, int32_t *out);

/* The draft length that maximizes expected tokens per second: a pass that verifies k drafts takes
 * t1 + k * t_tok seconds and yields (1 - a^(k+1)) / (1 - a) tokens when each draft is accepted with
 * probability a (independently; the last pass position always yields one).  0 <= result <= k_max. */
int sl_draft_best_k(double a, double t1, double t_tok, int k_max);

/* The same with a probability per draft position: cond[j-1] is the chance that draft j is accepted
 * given drafts 1..j-1 were (positions past n_cond use cond[n_cond-1]), so k drafts yield
 * 1 + sum_{j<=k} prod_{i<=j} cond[i-1] tokens.  n_cond >= 1. */
int sl_draft_best_k_cond(const double *cond, int n_cond, double t1, double t_tok, int k_max);

#define SL_DRAFT_POS_MAX 16   /* draft positions with an acceptance estimate of their own */

/* Running estimates for sl_draft_best_k, from what the passes measured. */
typedef struct sl_draft_stats {
    double accept;          /* acceptance rate estimate (accepted / drafted tokens) */
    double acc_sum, drf_sum;/* decayed counts of accepted and drafted tokens behind it */
    /* cond[j]: the chance that draft j+1 is kept once drafts 1..j were (see sl_draft_stats_update);
     * reach[j] / kept[j]: decayed counts of passes whose draft j+1 was checked / kept */
    double cond[SL_DRAFT_POS_MAX];
    double reach[SL_DRAFT_POS_MAX], kept[SL_DRAFT_POS_MAX];
    double t1;              /* seconds per pass with no drafts */
    double t_tok;           /* extra seconds per drafted token in a pass */
    int    n_obs;           /* passes observed */
    double t_draft;         /* seconds per token a draft model evaluates (0: a free drafter, n-grams) */
    int    n_draft_obs;
    double s0, sx, sy, sxx, sxy;   /* decayed sums for the fit secs = t1 + drafts * t_tok */
} sl_draft_stats;

void sl_draft_stats_init(sl_draft_stats *s);
/* How many tokens to draft for the next pass, at most k_max (the caller then bounds it by the
 * context, the batch and the tokens still wanted): the adaptive length from acc's per-position
 * acceptance (and its draft model's t_draft per draft) and timing's fitted pass times (the
 * sequence's own, or those of the batch it shares: then acc == timing need not hold) once two
 * passes are timed, with one probe draft every 16th pass where none pays; before that k_max for a
 * streamed plan, min(4, k_max) for a resident one. */
int sl_draft_choose_k(const sl_draft_stats *acc, const sl_draft_stats *timing, int k_max, bool streamed,
                      uint64_t n_passes);
/* The adaptive length from s (sl_draft_best_k_cond over s->cond), each draft costing t_tok_extra
 * seconds beyond the fitted t_tok (a draft model's own evaluation). */
int sl_draft_stats_best_k(const sl_draft_stats *s, double t_tok_extra, int k_max);
/* One pass of n tokens (1 + drafts) took `secs`; `drafted` tokens were checked, `accepted` kept. */
void sl_draft_stats_update(sl_draft_stats *s, int n, double secs, int drafted, int accepted);
/* A draft model evaluated n_tokens (syncing to the accepted tokens, then proposing) in `secs`: the
 * cost per drafted token that sl_draft_best_k adds to t_tok. */
void sl_draft_stats_drafter(sl_draft_stats *s, double secs, int n_tokens);

#endif
