/* runtime/text/tokenizer_bpe.c — byte-level BPE ("gpt2" family), as llama.cpp's llm_tokenizer_bpe.
 *
 * A raw-text fragment is decoded to code points (invalid UTF-8 bytes become U+FFFD, as in
 * llama.cpp), split into words by the pre-tokenizer (tokenizer_pre.c), and each word's UTF-8 bytes
 * are mapped to GPT-2's printable "byte-level" characters.  The word starts as one symbol per byte;
 * the adjacent pair with the lowest merge rank (ties: leftmost) is merged until no pair has a rank.
 * Symbols carry string ids (see tokenizer_internal.h) so a merge test is one hash probe on two ints.
 * A final symbol that is not a token is emitted as the tokens of its single bytes, where they exist.
 */
#include "runtime/text/tokenizer_internal.h"
#include "runtime/text/unicode.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 bytes to
 * U+0100.. in byte order.  Also resolves each byte character's string id and single-byte tokens. */
void sl_bpe_init_bytes(sl_vocab *v)
{
    int n = 0;
    for (int i = 0; i < 324; i++) v->chr_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        uint32_t cp = printable ? (uint32_t)b : (uint32_t)(256 + n++);
        v->byte_chr_len[b] = (unsigned char)sl_utf8_encode(cp, v->byte_chr[b]);
        v->chr_byte[cp] = (int16_t)b;
        v->byte_sym[b] = sl_vocab_find(v, (const char *)v->byte_chr[b], v->byte_chr_len[b]);
        char c = (char)b;
        int32_t id = sl_vocab_find(v, &c, 1);
        v->single_tok[b] = id < v->n_tokens ? id : -1;
    }
}

/* llama_decode_text: every code point of a NORMAL token's text is a byte-level character standing
 * for one byte; any other code point is spelled out as "[UNK_BYTE_0x<hex>" + text + "]". */
int sl_bpe_decode_text(const sl_vocab *v, const char *text, size_t len, sl_bytes *out)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    int rc = 0;
    while (i < len && rc == 0) {
        size_t adv;
        uint32_t cp = sl_utf8_decode(s + i, len - i, &adv);
        i += adv;
        if (cp < 324 && v->chr_byte[cp] >= 0) {
            char b = (char)v->chr_byte[cp];
            rc = sl_bytes_append(out, &b, 1);
            continue;
        }
        unsigned char u[4];
        size_t ul = sl_utf8_encode(cp, u);
        char hex[16];
        static const char hx[] = "0123456789abcdef";
        for (size_t k = 0; k < ul; k++) { hex[2 * k] = hx[u[k] >> 4]; hex[2 * k + 1] = hx[u[k] & 15]; }
        rc = sl_bytes_append(out, "[UNK_BYTE_0x", 12);
        if (rc == 0) rc = sl_bytes_append(out, hex, 2 * ul);
        if (rc == 0) rc = sl_bytes_append(out, text, len);
        if (rc == 0) rc = sl_bytes_append(out, "]", 1);
    }
    return rc;
}

/* ---------------------------------------------------------------- merge loop */

typedef struct bpe_ctx {
    int32_t *prev, *next, *id;
    uint32_t *n;
    size_t cap;
    sl_heap heap;
    char *enc;                   /* byte-level encoding of a word (ignore_merges lookup) */
    size_t enccap;
} bpe_ctx;

/* Queue the pair (l, r) if the vocabulary has a merge for it. */
static int add_bigram(const sl_vocab *v, bpe_ctx *c, int32_t l, int32_t r)
{
    if (l < 0 || r < 0) return 0;
    int32_t result;
    int32_t rank = sl_merge_find(v, c->id[l], c->id[r], &result);
    if (rank < 0) return 0;
    uint32_t key = (uint32_t)rank;
    /* tiktoken: the pair whose concatenation has the lowest rank (= token id) merges first.  The
     * merge list is sorted by that rank already, but pairs making the same token are ordered by
     * their halves there and by position in tiktoken. */
    if (v->rank_by_token)
        key = result >= 0 && result < v->n_tokens ? (uint32_t)result : (uint32_t)v->n_tokens + (uint32_t)rank;
    return sl_heap_push(&c->heap, (sl_bigram){ key, l, r, c->n[l] + c->n[r], result });
}

/* Emit symbol bytes b[0..m) that did not form a token: the token of each single byte of their
 * byte-level spelling, where one exists (llama.cpp's fallback; other bytes are dropped). */
static int emit_fallback(const sl_vocab *v, const unsigned char *b, size_t m, sl_ivec *out)
{
    for (size_t i = 0; i < m; i++)
        for (int k = 0; k < v->byte_chr_len[b[i]]; k++) {
            int32_t t = v->single_tok[v->byte_chr[b[i]][k]];
            if (t >= 0) {
                int rc = sl_ivec_push(out, t);
                if (rc) return rc;
            }
        }
    return 0;
}

/* BPE of one pre-token word b[0..m), appending token ids. */
static int bpe_word(const sl_vocab *v, bpe_ctx *c, const unsigned char *b, size_t m, sl_ivec *out)
{
    if (m == 0) return 0;
    if (v->ignore_merges || m == 1) {
        /* Llama 3: a word that is a token as a whole is taken as is, without merging. */
        size_t need = 2 * m;
        if (need > c->enccap) {
            char *p = realloc(c->enc, need);
            if (!p) return -ENOMEM;
            c->enc = p;
            c->enccap = need;
        }
        size_t el = 0;
        for (size_t i = 0; i < m; i++) {
            memcpy(c->enc + el, v->byte_chr[b[i]], v->byte_chr_len[b[i]]);
            el += v->byte_chr_len[b[i]];
        }
        int32_t id = sl_vocab_find(v, c->enc, el);
        if (id >= 0 && id < v->n_tokens)
            return sl_ivec_push(out, id);
        if (m == 1)
            return emit_fallback(v, b, 1, out);
    }
    if (m > c->cap) {
        size_t nc = c->cap ? c->cap : 64;
        while (nc < m) nc *= 2;
        int32_t *pv = realloc(c->prev, nc * sizeof *pv);
        if (pv) c->prev = pv;
        int32_t *nx = realloc(c->next, nc * sizeof *nx);
        if (nx) c->next = nx;
        int32_t *id = realloc(c->id, nc * sizeof *id);
        if (id) c->id = id;
        uint32_t *n = realloc(c->n, nc * sizeof *n);
        if (n) c->n = n;
        if (!pv || !nx || !id || !n) return -ENOMEM;
        c->cap = nc;
    }
    if (m > INT32_MAX) return -E2BIG;
    for (size_t i = 0; i < m; i++) {
        c->prev[i] = (int32_t)i - 1;
        c->next[i] = i + 1 < m ? (int32_t)i + 1 : -1;
        c->id[i] = v->byte_sym[b[i]];
        c->n[i] = 1;
    }
    c->heap.n = 0;
    int rc = 0;
    for (size_t i = 1; i < m && rc == 0; i++)
        rc = add_bigram(v, c, (int32_t)i - 1, (int32_t)i);
    while (c->heap.n > 0 && rc == 0) {
        sl_bigram bg = sl_heap_pop(&c->heap);
        int32_t l = bg.left, r = bg.right;
        /* Stale if either side was merged away or grew since the pair was queued. */
        if (c->n[l] == 0 || c->n[r] == 0 || c->n[l] + c->n[r] != bg.size)
            continue;
        c->n[l] += c->n[r];
        c->n[r] = 0;
        c->id[l] = bg.result;
        c->next[l] = c->next[r];
        if (c->next[r] >= 0) c->prev[c->next[r]] = l;
        rc = add_bigram(v, c, c->prev[l], l);
        if (rc == 0) rc = add_bigram(v, c, l, c->next[l]);
    }
    for (int32_t i = 0; i >= 0 && rc == 0; i = c->next[i]) {
        int32_t id = c->id[i];
        if (id >= 0 && id < v->n_tokens)
            rc = sl_ivec_push(out, id);
        else
            rc = emit_fallback(v, b + i, c->n[i], out);
    }
    return rc;
}

int sl_bpe_tokenize(const sl_vocab *v, const char *text, size_t len, sl_ivec *out)
{
    const unsigned char *s = (const unsigned char *)text;
    uint32_t *cpt = malloc((len ? len : 1) * sizeof *cpt);
    uint16_t *fl = malloc((len ? len : 1) * sizeof *fl);
    size_t *boff = malloc((len + 1) * sizeof *boff);
    /* Re-encoded text: invalid bytes became U+FFFD (3 bytes), so at most 3x the input. */
    unsigned char *san = malloc(3 * len + 1);
    sl_zvec words = { 0 };
    bpe_ctx c = { 0 };
    int rc = 0;
    if (!cpt || !fl || !boff || !san) { rc = -ENOMEM; goto out; }

    size_t n = 0, sl = 0;
    for (size_t i = 0; i < len;) {
        size_t adv;
        uint32_t cp = sl_utf8_decode(s + i, len - i, &adv);
        /* Leads F4..F7 can decode past U+10FFFF, where llama.cpp throws while re-encoding; take
         * U+FFFD instead so the text still tokenizes. */
        if (cp > 0x10FFFF) cp = 0xFFFD;
        i += adv;
        cpt[n] = cp;
        unsigned f = sl_uc_flags(cp);
        if (v->pre == SL_PRE_GPT4O && (f & SL_UC_LETTER)) {
            unsigned lc = sl_uc_letter_case(cp);
            f |= lc == SL_UC_CASE_UPPER ? SL_FL_UPPER : lc == SL_UC_CASE_LOWER ? SL_FL_LOWER : 0;
        }
        fl[n] = (uint16_t)f;
        boff[n] = sl;
        sl += sl_utf8_encode(cp, san + sl);
        n++;
    }
    boff[n] = sl;

    if ((rc = sl_pretokenize(v->pre, cpt, fl, n, &words))) goto out;
    size_t start = 0;
    for (size_t w = 0; w < words.n && rc == 0; w++) {
        size_t end = start + words.v[w];
        rc = bpe_word(v, &c, san + boff[start], boff[end] - boff[start], out);
        start = end;
    }
out:
    free(cpt);
    free(fl);
    free(boff);
    free(san);
    free(words.v);
    free(c.prev);
    free(c.next);
    free(c.id);
    free(c.n);
    free(c.heap.a);
    free(c.enc);
    return rc;
}
