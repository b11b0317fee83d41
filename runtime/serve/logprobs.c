/* runtime/serve/logprobs.c — "logprobs" / "top_logprobs": each generated token's log-probability and
 * the most likely alternatives at its position, in OpenAI's two shapes (completions: parallel
 * arrays; chat: a list of objects with the token's bytes).
 *
 * The figures are the model's own distribution at that position: log-softmax of the raw logits
 * (before temperature, penalties and top-k/top-p/min-p), as OpenAI and vLLM report them; they are
 * recorded by the scheduler from the pass that produced the token (a drafted token's row of the
 * verifying span is the logits one-token decoding would have had there).  A token is reported once
 * its text has been released to the client: the tokens of a cut stop string, and the end-of-text
 * token, which add no text, are not reported.
 */
#include "runtime/serve/serve_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Contract: serve_internal.h. */
bool lp_record(sl_server *s, job *j, const float *logits, int32_t tok, size_t start)
{
    if (j->top_n < 0) return true;
    if (!logits) return false;
    if (j->n_lp == j->lp_cap) {
        int nc = j->lp_cap ? 2 * j->lp_cap : 64;
        lp_entry *p = realloc(j->lp, (size_t)nc * sizeof *p);
        if (!p) return false;
        j->lp = p;
        j->lp_cap = nc;
    }
    lp_entry *e = &j->lp[j->n_lp++];
    const int n = s->n_vocab, k = j->top_n;
    float mx = logits[0];
    for (int i = 1; i < n; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += exp((double)(logits[i] - mx));
    const double lse = mx + log(sum);
    e->tok = tok;
    e->lp = (float)(logits[tok] - lse);
    e->start = start;
    e->n_top = 0;
    for (int i = 0; i < n && k > 0; i++) {   /* the k largest, kept sorted (k <= LP_MAX_TOP) */
        if (e->n_top == k && logits[i] <= e->top_lp[k - 1]) continue;
        int at = e->n_top < k ? e->n_top++ : k - 1;
        while (at > 0 && e->top_lp[at - 1] < logits[i]) {
            e->top_lp[at] = e->top_lp[at - 1];
            e->top_id[at] = e->top_id[at - 1];
            at--;
        }
        e->top_lp[at] = logits[i];
        e->top_id[at] = i;
    }
    for (int t = 0; t < e->n_top; t++) e->top_lp[t] = (float)(e->top_lp[t] - lse);
    return true;
}

int lp_ready(const job *j, int from)
{
    int to = from;
    while (to < j->n_lp && j->lp[to].start < j->text_len) to++;
    return to;
}

/* A token's text as JSON (invalid or partial UTF-8 as U+FFFD) and, for chat, its bytes. */
static json_t *token_text(sl_server *s, int32_t id, json_t **bytes)
{
    char piece[256], clean[3 * sizeof piece + 4];
    int pl = sluice_token_piece(s->M, id, false, piece, sizeof piece);
    if (pl < 0) pl = 0;
    if (pl > (int)sizeof piece) pl = sizeof piece;
    size_t used, cn = utf8_clean(piece, (size_t)pl, clean, &used);
    if (used < (size_t)pl) { memcpy(clean + cn, "\xEF\xBF\xBD", 3); cn += 3; }   /* a character cut short */
    if (bytes) {
        *bytes = json_array();
        for (int i = 0; i < pl; i++) json_array_append_new(*bytes, json_integer((unsigned char)piece[i]));
    }
    return json_stringn(clean, cn);
}

static json_t *chat_entry(sl_server *s, int32_t id, float lp)
{
    json_t *bytes, *t = token_text(s, id, &bytes);
    return json_pack("{s:o,s:f,s:o}", "token", t, "logprob", (double)lp, "bytes", bytes);
}

/* Characters (UTF-8 lead bytes) of text[0..n). */
static json_int_t chars(const char *text, size_t n)
{
    json_int_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)text[i] & 0xC0) != 0x80;
    return c;
}

json_t *lp_json(sl_server *s, const job *j, int from, int to)
{
    if (j->kind == JOB_CHAT) {
        json_t *content = json_array();
        for (int i = from; i < to; i++) {
            const lp_entry *e = &j->lp[i];
            json_t *o = chat_entry(s, e->tok, e->lp), *top = json_array();
            for (int t = 0; t < e->n_top; t++) json_array_append_new(top, chat_entry(s, e->top_id[t], e->top_lp[t]));
            json_object_set_new(o, "top_logprobs", top);
            json_array_append_new(content, o);
        }
        return json_pack("{s:o,s:n}", "content", content, "refusal");
    }
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    json_int_t at = from < to ? chars(j->text, j->lp[from].start) : 0;
    for (int i = from; i < to; i++) {
        const lp_entry *e = &j->lp[i];
        json_array_append_new(toks, token_text(s, e->tok, NULL));
        json_array_append_new(lps, json_real(e->lp));
        json_t *top = json_object();
        for (int t = 0; t < e->n_top; t++) {
            json_t *tt = token_text(s, e->top_id[t], NULL);
            /* tokens of the same text (bytes shown as U+FFFD) share a key: the likeliest keeps it */
            if (!json_object_get(top, json_string_value(tt))) json_object_set_new(top, json_string_value(tt), json_real(e->top_lp[t]));
            json_decref(tt);
        }
        json_array_append_new(tops, top);
        json_array_append_new(offs, json_integer(at));
        if (i + 1 < to) at += chars(j->text + e->start, j->lp[i + 1].start - e->start);
    }
    return json_pack("{s:o,s:o,s:o,s:o}", "tokens", toks, "token_logprobs", lps, "top_logprobs", tops, "text_offset", offs);
}
