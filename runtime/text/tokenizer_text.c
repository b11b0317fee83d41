/* runtime/text/tokenizer_text.c — text <-> ids: special-token partitioning, the tokenize driver,
 * pieces, detokenization (with llama.cpp's clean-up passes) and the UTF-8 output stream. */
#include "runtime/text/tokenizer_internal.h"
#include "runtime/text/unicode.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A fragment of the input: raw text [off, off+len) when tok < 0, else the special token tok. */
typedef struct frag { int32_t tok; size_t off, len; } frag;
typedef struct fvec { frag *v; size_t n, cap; } fvec;

static int fpush(fvec *a, frag f)
{
    if (a->n == a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 16;
        frag *p = realloc(a->v, nc * sizeof *p);
        if (!p) return -ENOMEM;
        a->v = p;
        a->cap = nc;
    }
    a->v[a->n++] = f;
    return 0;
}

/* C-locale isspace, as llama.cpp's LSTRIP/RSTRIP use it. */
static inline bool c_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* llama.cpp's tokenizer_st_partition: for each special token, longest text first, split every raw
 * fragment at its non-overlapping occurrences (leftmost first).  Without parse_special only
 * USER_DEFINED entries take part.  LSTRIP/RSTRIP drop whitespace beside the match. */
static int partition(const sl_vocab *v, const char *text, size_t len, bool parse_special, fvec *out)
{
    fvec a = { 0 }, b = { 0 };
    int rc = fpush(&a, (frag){ -1, 0, len });
    if (rc) return rc;
    if (v->n_special == 0 || (!parse_special && v->n_special_plain == 0)) {
        *out = a;
        return 0;
    }
    /* One pass over the text with the trie marks the special texts that occur at all; only those
     * are searched for below (Deepseek has 2400 user-defined tokens, almost never in a text). */
    unsigned char *present = calloc((size_t)v->n_special, 1);
    if (!present) { free(a.v); return -ENOMEM; }
    const unsigned char *u = (const unsigned char *)text;
    for (size_t i = 0; i < len; i++) {
        int32_t node = v->trie_root[u[i]];
        for (size_t k = i; node >= 0;) {
            if (v->trie[node].rank >= 0) present[v->trie[node].rank] = 1;
            if (++k >= len) break;
            for (node = v->trie[node].child; node >= 0 && v->trie[node].byte != u[k]; node = v->trie[node].sibling) {}
        }
    }
    for (int32_t k = 0; k < v->n_special && rc == 0; k++) {
        int32_t id = v->special[k];
        const sl_vstr *st = &v->strs[id];
        if (!present[k] || (!parse_special && (st->attr & (SL_ATTR_CONTROL | SL_ATTR_UNKNOWN))))
            continue;
        const char *t = v->arena + st->off;
        size_t tl = st->len;
        b.n = 0;
        for (size_t i = 0; i < a.n && rc == 0; i++) {
            frag f = a.v[i];
            if (f.tok >= 0) { rc = fpush(&b, f); continue; }
            size_t base = f.off, blen = f.len;
            while (rc == 0 && blen > 0) {
                const char *m = tl <= blen ? memmem(text + base, blen, t, tl) : NULL;
                if (!m) { rc = fpush(&b, (frag){ -1, base, blen }); break; }
                size_t mo = (size_t)(m - text), ll = mo - base;
                if (st->attr & SL_ATTR_LSTRIP)
                    while (ll > 0 && c_space(text[base + ll - 1])) ll--;
                if (ll > 0) rc = fpush(&b, (frag){ -1, base, ll });
                if (rc == 0) rc = fpush(&b, (frag){ id, 0, 0 });
                size_t roff = mo + tl, rlen = base + blen - roff;
                if (st->attr & SL_ATTR_RSTRIP)
                    while (rlen > 0 && c_space(text[roff])) { roff++; rlen--; }
                base = roff;
                blen = rlen;
            }
        }
        fvec t2 = a; a = b; b = t2;
    }
    free(present);
    free(b.v);
    if (rc) { free(a.v); return rc; }
    *out = a;
    return 0;
}

int64_t sl_tokenize(const sl_vocab *v, const char *text, size_t len, bool add_special,
                    bool parse_special, int32_t *out, int64_t n_max)
{
    if (!v || (!text && len) || n_max < 0 || (!out && n_max > 0))
        return -EINVAL;
    sl_ivec ids = { 0 };
    fvec frags = { 0 };
    int rc = 0;
    if (len > 0 && (rc = partition(v, text, len, parse_special, &frags)))
        return rc;
    if (add_special && v->add_bos && v->bos >= 0)
        rc = sl_ivec_push(&ids, v->bos);
    bool prev_special = true;    /* SPM: the first fragment and any after a special get a space */
    for (size_t i = 0; i < frags.n && rc == 0; i++) {
        frag f = frags.v[i];
        if (f.tok >= 0) {
            rc = sl_ivec_push(&ids, f.tok);
            prev_special = true;
        } else if (v->type == SL_VOCAB_SPM) {
            rc = sl_spm_tokenize(v, text + f.off, f.len, v->add_space_prefix && prev_special, &ids);
            prev_special = false;
        } else {
            rc = sl_bpe_tokenize(v, text + f.off, f.len, &ids);
        }
    }
    if (rc == 0 && add_special && v->add_eos && v->eos >= 0)
        rc = sl_ivec_push(&ids, v->eos);
    free(frags.v);
    if (rc) { free(ids.v); return rc; }
    if (ids.n > INT64_MAX / 2) { free(ids.v); return -E2BIG; }
    size_t k = ids.n < (size_t)n_max ? ids.n : (size_t)n_max;
    if (k) memcpy(out, ids.v, k * sizeof *out);
    int64_t n = (int64_t)ids.n;
    free(ids.v);
    return n;
}

/* ---------------------------------------------------------------- pieces */

/* Append the piece of token id (llama_token_to_piece), dropping up to `lstrip` leading spaces.  0, -EINVAL for a bad id, or -ENOMEM. */
static int piece_append(const sl_vocab *v, int32_t id, bool special, int lstrip, sl_bytes *out)
{
    if (id < 0 || id >= v->n_tokens)
        return -EINVAL;
    const sl_vstr *st = &v->strs[id];
    const char *t = v->arena + st->off;
    size_t start = out->n;
    int rc = 0;
    if (!special && (st->attr & (SL_ATTR_UNKNOWN | SL_ATTR_CONTROL)))
        return 0;
    if (st->attr & (SL_ATTR_UNKNOWN | SL_ATTR_CONTROL | SL_ATTR_USER_DEFINED)) {
        rc = sl_bytes_append(out, t, st->len);
    } else if (st->attr & SL_ATTR_NORMAL) {
        if (v->type == SL_VOCAB_BPE) {
            rc = sl_bpe_decode_text(v, t, st->len, out);
        } else {
            /* Unescape U+2581 -> ' '. */
            for (size_t i = 0; i < st->len && rc == 0;) {
                if (i + 3 <= st->len && memcmp(t + i, "\xE2\x96\x81", 3) == 0) {
                    rc = sl_bytes_append(out, " ", 1);
                    i += 3;
                } else {
                    rc = sl_bytes_append(out, t + i, 1);
                    i++;
                }
            }
        }
    } else if ((st->attr & SL_ATTR_BYTE) && v->type == SL_VOCAB_SPM) {
        /* "<0xNN>": strtol(base 16) of the two characters after "<0x", as llama.cpp does. */
        char hex[3] = { 0 };
        if (st->len > 3) memcpy(hex, t + 3, st->len - 3 < 2 ? st->len - 3 : 2);
        char b = (char)(unsigned char)strtol(hex, NULL, 16);
        rc = sl_bytes_append(out, &b, 1);
    }
    if (rc) return rc;
    size_t skip = 0;
    while (skip < (size_t)lstrip && start + skip < out->n && out->p[start + skip] == ' ')
        skip++;
    if (skip) {
        memmove(out->p + start, out->p + start + skip, out->n - start - skip);
        out->n -= skip;
    }
    return 0;
}

int sl_token_piece_ex(const sl_vocab *v, int32_t id, bool special, char *buf, size_t buflen)
{
    if (!v || (!buf && buflen > 0))
        return -EINVAL;
    sl_bytes b = { 0 };
    int rc = piece_append(v, id, special, 0, &b);
    if (rc == 0) {
        if (b.n > INT32_MAX) rc = -E2BIG;
        else {
            if (b.n && buflen) memcpy(buf, b.p, b.n < buflen ? b.n : buflen);
            rc = (int)b.n;
        }
    }
    free(b.p);
    return rc;
}

int sl_token_piece(const sl_vocab *v, int32_t id, char *buf, size_t buflen)
{
    return sl_token_piece_ex(v, id, false, buf, buflen);
}

/* llama.cpp's clean_up_tokenization_spaces passes, in place, with its exact in-place reads. */
static size_t clean_spaces(char *text, size_t total)
{
    size_t total1 = total;                         /* " ?", " !", " .", " ," lose the space */
    total = total ? 1 : 0;
    for (size_t i = 1; i < total1; i++) {
        char x = text[i];
        if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ','))
            total--;
        text[total++] = x;
    }
    size_t total2 = total;                         /* " ' " becomes "'" */
    total = total ? 1 : 0;
    for (size_t i = 1; i < total2; i++) {
        char x = text[i];
        if (x == '\'' && i + 1 < total2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
            total--;
            text[++i] = '\0';
        }
        text[total++] = x;
    }
    size_t total3 = total;                         /* " 's", " 'm", " 're", " 've" lose the space */
    total = total ? 1 : 0;
    for (size_t i = 1; i < total3; i++) {
        char x = text[i];
        if (text[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
            char x1 = text[i + 1];
            if (x1 == 's' || x1 == 'm')
                total--;
            else if (i + 2 < total3 && ((x1 == 'r' && text[i + 2] == 'e') || (x1 == 'v' && text[i + 2] == 'e')))
                total--;
        }
        text[total++] = x;
    }
    return total;
}

int64_t sl_detokenize(const sl_vocab *v, const int32_t *ids, int64_t n, char *buf, size_t buflen)
{
    if (!v || n < 0 || (!ids && n > 0) || (!buf && buflen > 0))
        return -EINVAL;
    sl_bytes b = { 0 };
    int rc = 0;
    /* The space SPM prepends to the text is removed from the first piece (even when the first
     * token is BOS: its piece is empty and the flag is consumed — llama.cpp's remove_special=false). */
    bool remove_space = v->add_space_prefix;
    for (int64_t i = 0; i < n && rc == 0; i++) {
        rc = piece_append(v, ids[i], false, remove_space ? 1 : 0, &b);
        remove_space = false;
    }
    if (rc) { free(b.p); return rc; }
    size_t total = v->clean_spaces ? clean_spaces(b.p, b.n) : b.n;
    if (total && buflen) memcpy(buf, b.p, total < buflen ? total : buflen);   /* buf may be NULL for a size query */
    free(b.p);
    return (int64_t)total;
}

/* ---------------------------------------------------------------- UTF-8 stream */

/* Bytes s[0..n) hold pending input.  Returns how many leading bytes can be released now: whole
 * valid characters, and any byte that can never start one (passed through alone).  Stops before an
 * incomplete but so far valid sequence at the end. */
static size_t releasable(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t ok = sl_utf8_valid_prefix(s + i, n - i);
        i += ok;
        if (i == n) break;
        /* s[i] starts no valid complete character: incomplete at the end, or invalid. */
        unsigned c = s[i];
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
        if (need && c <= 0xF4) {
            size_t have = n - i;
            if (have < need) {
                /* Valid so far?  Check the bytes present against the strict rules. */
                unsigned char tmp[4] = { 0 };
                memcpy(tmp, s + i, have);
                bool prefix_ok = true;
                for (size_t k = 1; k < have; k++) {
                    unsigned lo = 0x80, hi = 0xBF;
                    if (k == 1 && c == 0xE0) lo = 0xA0;
                    if (k == 1 && c == 0xED) hi = 0x9F;
                    if (k == 1 && c == 0xF0) lo = 0x90;
                    if (k == 1 && c == 0xF4) hi = 0x8F;
                    if (tmp[k] < lo || tmp[k] > hi) prefix_ok = false;
                }
                if (prefix_ok) return i;          /* wait for the rest */
            }
        }
        i++;                                      /* invalid: release this byte alone */
    }
    return i;
}

size_t sl_utf8_stream_feed(sl_utf8_stream *s, const char *piece, size_t len, char *out)
{
    /* Work in `out` (it holds len + 8 bytes): pending bytes, then the new piece. */
    size_t np = s->npend > 0 ? (size_t)s->npend : 0;
    memcpy(out, s->pend, np);
    if (len) memcpy(out + np, piece, len);
    size_t total = np + len;
    size_t r = releasable((const unsigned char *)out, total);
    s->npend = (int)(total - r);                  /* at most 3: an incomplete valid prefix */
    memcpy(s->pend, out + r, total - r);
    return r;
}

size_t sl_utf8_stream_flush(sl_utf8_stream *s, char *out)
{
    size_t np = s->npend > 0 ? (size_t)s->npend : 0;
    memcpy(out, s->pend, np);
    s->npend = 0;
    return np;
}
