/* runtime/text/tokenizer_spm.c — SentencePiece BPE ("llama" family), as llama.cpp's llm_tokenizer_spm.
 *
 * The fragment (prefixed with a space when asked) has every ' ' replaced by U+2581 '▁'.  It starts
 * as one symbol per UTF-8 character (length taken from the lead byte alone, so invalid bytes are
 * symbols too).  Repeatedly, the adjacent pair whose concatenation is a vocabulary entry with the
 * highest score (ties: leftmost) is merged.  Every final symbol is then a token, or — never merged
 * and not in the vocabulary — is written as byte tokens <0xNN>.
 *
 * Words: when no token has '▁' after another character (checked at load), no merge can cross the
 * start of a word ("x▁" is never a token), so each word is merged on its own: merges in different
 * words never interact, and within a word the highest-score-then-leftmost order is the same as in
 * the global queue, so the result is identical to one queue over the fragment — with small heaps.
 *
 * llama.cpp's "resegment" step also consults a map from merged texts to the pair that produced
 * them; a final symbol can only miss the vocabulary if it was never merged (every merge produces a
 * vocabulary entry), and a single character's text can never equal the text of a merged pair
 * (the pair's first symbol would start with the same lead byte and so span the whole character),
 * so that lookup always misses and the byte fallback is all that remains of it.
 */
#include "runtime/text/tokenizer_internal.h"
#include "runtime/text/unicode.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct sym { int32_t prev, next; uint32_t off, n; } sym;
/* Heap key of a score: higher scores give smaller keys (IEEE order made unsigned, then inverted;
 * -0.0 counts as +0.0, as the float comparison in llama.cpp does). */
static inline uint32_t score_key(float f)
{
    uint32_t u;
    if (f == 0.0f) f = 0.0f;
    memcpy(&u, &f, sizeof u);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ~u;
}

/* Token id of text t[0..n), or -1 (extras never exist in SPM vocabularies). */
static inline int32_t tok(const sl_vocab *v, const char *t, size_t n)
{
    int32_t id = sl_vocab_find(v, t, n);
    return id < v->n_tokens ? id : -1;
}

/* Queue the pair (l, r) if its concatenation is a token. */
static int try_bigram(const sl_vocab *v, const char *text, const sym *s, sl_heap *h, int32_t l, int32_t r)
{
    if (l < 0 || r < 0) return 0;
    uint32_t size = s[l].n + s[r].n;
    int32_t id = tok(v, text + s[l].off, size);
    if (id < 0) return 0;
    return sl_heap_push(h, (sl_bigram){ score_key(v->strs[id].score), l, r, size, id });
}

/* Is the symbol exactly U+2581? */
static inline bool is_space_sym(const char *e, const sym *x)
{
    return x->n == 3 && memcmp(e + x->off, "\xE2\x96\x81", 3) == 0;
}

/* Emit a final symbol: its token, or one byte token per byte. */
static int emit_symbol(const sl_vocab *v, const char *t, uint32_t n, sl_ivec *out)
{
    int32_t id = tok(v, t, n);
    if (id >= 0)
        return sl_ivec_push(out, id);
    for (uint32_t j = 0; j < n; j++) {
        /* llama.cpp throws when a byte has no token; the unknown token is the closest faithful
         * choice, and nothing is emitted if there is none either. */
        int32_t b = v->byte_tok[(unsigned char)t[j]];
        if (b < 0) b = v->unk;
        if (b >= 0) {
            int rc = sl_ivec_push(out, b);
            if (rc) return rc;
        }
    }
    return 0;
}

int sl_spm_tokenize(const sl_vocab *v, const char *text, size_t len, bool add_prefix, sl_ivec *out)
{
    /* Escape: optional leading space, then ' ' -> "\xE2\x96\x81". */
    size_t nsp = add_prefix ? 1 : 0;
    for (size_t i = 0; i < len; i++) nsp += text[i] == ' ';
    size_t elen = len + (add_prefix ? 1 : 0) + 2 * nsp;
    if (elen == 0) return 0;
    if (elen > UINT32_MAX / 2) return -E2BIG;
    char *e = malloc(elen);
    sym *s = malloc(elen * sizeof *s);
    sl_heap h = { 0 };
    int rc = 0;
    if (!e || !s) { rc = -ENOMEM; goto out; }
    size_t k = 0;
    if (add_prefix) { memcpy(e, "\xE2\x96\x81", 3); k = 3; }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') { memcpy(e + k, "\xE2\x96\x81", 3); k += 3; }
        else e[k++] = text[i];
    }

    int32_t ns = 0;
    for (size_t off = 0; off < elen; ns++) {
        size_t cl = sl_utf8_len((unsigned char)e[off]);
        if (cl > elen - off) cl = elen - off;
        s[ns] = (sym){ ns - 1, off + cl < elen ? ns + 1 : -1, (uint32_t)off, (uint32_t)cl };
        off += cl;
    }
    /* Merge word by word when the vocabulary allows it (v->spm_split): a word starts at a '▁'
     * that follows another character.  Otherwise the whole fragment is one word, as in llama.cpp. */
    for (int32_t w0 = 0; w0 < ns && rc == 0;) {
        int32_t w1 = w0 + 1;
        if (v->spm_split) {
            while (w1 < ns && !(is_space_sym(e, &s[w1]) && !is_space_sym(e, &s[w1 - 1]))) w1++;
        } else {
            w1 = ns;
        }
        s[w0].prev = -1;
        s[w1 - 1].next = -1;
        h.n = 0;
        for (int32_t i = w0 + 1; i < w1 && rc == 0; i++)
            rc = try_bigram(v, e, s, &h, i - 1, i);
        while (h.n > 0 && rc == 0) {
            sl_bigram bg = sl_heap_pop(&h);
            int32_t l = bg.left, r = bg.right;
            if (s[l].n == 0 || s[r].n == 0 || s[l].n + s[r].n != bg.size)
                continue;                               /* one side already merged elsewhere */
            s[l].n += s[r].n;
            s[r].n = 0;
            s[l].next = s[r].next;
            if (s[r].next >= 0) s[s[r].next].prev = l;
            rc = try_bigram(v, e, s, &h, s[l].prev, l);
            if (rc == 0) rc = try_bigram(v, e, s, &h, l, s[l].next);
        }
        for (int32_t i = w0; i >= 0 && rc == 0; i = s[i].next)
            rc = emit_symbol(v, e + s[i].off, s[i].n, out);
        w0 = w1;
    }
out:
    free(e);
    free(s);
    free(h.a);
    return rc;
}
