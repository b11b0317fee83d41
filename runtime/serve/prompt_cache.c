/* runtime/serve/prompt_cache.c — the prompt cache of `sluice serve`: which free slot a request goes
 * to, and how much of its prompt that slot's KV cache already holds.
 *
 * A slot keeps the tokens and KV rows of its last request when the request ends (its context is
 * simply not reset).  An agent or a chat client resends the whole conversation every turn, so the
 * next request usually begins with the tokens some slot already holds: that slot is rewound to the
 * common prefix and only the rest of the prompt is evaluated.  The KV row of position p depends
 * only on tokens [0, p], and the engine's chunked and batched evaluation is bit-identical to
 * one-token evaluation, so the answer is the one a full evaluation gives.  The slots' KV caches are
 * the ones the plan already counts (--parallel KV caches at the full context, allocated when the
 * server starts): keeping them costs no memory.
 */
#include "runtime/serve/serve_internal.h"

/* Contract: serve_internal.h. */
int pc_common_prefix(const int32_t *a, int na, const int32_t *b, int nb)
{
    int n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

/* Contract: serve_internal.h. */
int pc_pick(const pc_slot_view *v, int n, const int32_t *prompt, int n_prompt, bool enabled)
{
    int best = -1, best_lcp = -1;
    for (int i = 0; i < n; i++) {
        if (v[i].busy) continue;
        if (!enabled) return i;   /* no cache: the first free slot, as before */
        int lcp = pc_common_prefix(v[i].toks, v[i].n_toks, prompt, n_prompt);
        /* a prefix of half the prompt or less counts as none (llama-server's slot similarity 0.5): a
         * shared BOS or system prompt would otherwise pull every new conversation into one slot,
         * throwing away the KV of the conversation there while another slot sits idle */
        if (2 * (int64_t)lcp <= n_prompt) lcp = 0;
        /* more shared tokens wins; at a tie the slot used longest ago (its KV is the least likely
         * to be asked for again) */
        if (lcp > best_lcp || (lcp == best_lcp && v[i].last_used < v[best].last_used)) {
            best = i;
            best_lcp = lcp;
        }
    }
    return best;
}

/* Contract: serve_internal.h. */
int pc_adopt(sluice_ctx *c, const int32_t *prompt, int n_prompt, bool enabled, pc_rewind_fn rewind)
{
    int n_toks = 0;
    const int32_t *toks = enabled ? sluice_tokens(c, &n_toks) : NULL;
    int keep = toks ? pc_common_prefix(toks, n_toks, prompt, n_prompt) : 0;
    /* the last prompt token is always evaluated: the first sampled token needs its logits fresh */
    if (keep > n_prompt - 1) keep = n_prompt - 1;
    if (keep < 0) keep = 0;
    if (keep > 0 && (rewind ? rewind : sluice_rewind)(c, keep) == 0 && sluice_n_past(c) == keep) return keep;
    /* no prefix, or the context cannot go back there (e.g. a sliding-window layer keeps only a ring of
     * recent positions): start from nothing, a full evaluation */
    sluice_reset(c);
    return 0;
}

/* Contract: serve_internal.h. */
pc_outcome pc_prepare(pc_disk *d, sluice_ctx *c, const int32_t *prompt, int n_prompt, bool enabled, char *err,
                      size_t errlen)
{
    pc_outcome o = { 0 };
    if (enabled && d) {
        int n_toks = 0;
        const int32_t *toks = sluice_tokens(c, &n_toks);
        int lcp = pc_common_prefix(toks, n_toks, prompt, n_prompt);
        int keep = lcp < n_prompt - 1 ? lcp : n_prompt - 1;
        /* whole blocks of this slot's KV that the request would throw away: keep them on disk */
        if (n_toks / PC_BLOCK * PC_BLOCK > keep) {
            int rc = pc_disk_save(d, c, err, errlen);
            o.saved = rc > 0;
            o.disk_error |= rc < 0;
        }
        int have = 0, i = pc_disk_find(d, prompt, n_prompt, &have);
        if (i >= 0 && have > lcp) {
            int rc = pc_disk_load(d, i, c, err, errlen);
            o.loaded = !rc;
            o.disk_error |= rc != 0;
        }
    }
    o.kept = pc_adopt(c, prompt, n_prompt, enabled, NULL);
    return o;
}
