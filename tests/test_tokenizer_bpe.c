/* tests/test_tokenizer_bpe.c — Llama 3 byte-level BPE against a slow, obviously-correct reference
 * written here from the definitions (not from the implementation):
 *   - pre-tokens: the Llama 3 regex evaluated alternative by alternative with its backtracking
 *     spelled out;
 *   - each pre-token: GPT-2 byte-to-unicode mapping, the whole word if it is a token (Llama 3's
 *     ignore_merges), else naive repeated "merge the lowest-rank adjacent pair, leftmost first"
 *     with ranks looked up as "left right" strings in the sorted merge list.
 * Random text (English words, digits, punctuation, whitespace runs, accented, CJK, emoji, other
 * scripts) is compared on random substrings; exact equality is required.  Also measures speed
 * and load time/memory (printed; the speed bound below is deliberately loose, see there).
 */
#include <criterion/criterion.h>

#include "runtime/text/unicode.h"
#include "tokenizer_testutil.h"

#define LLAMA3 SL_SHARED_DIR "/vocab/ggml-vocab-llama-bpe.rebuilt.gguf"

/* ---------------------------------------------------------------- reference tables */

typedef struct ent { const char *s; size_t n; int32_t val; } ent;
typedef struct ref { ent *tok, *mrg; size_t ntok, nmrg; char cs[256][3]; int cslen[256]; } ref;

static int ent_cmp(const void *a, const void *b)
{
    const ent *x = a, *y = b;
    size_t m = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->s, y->s, m);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

static int32_t ent_find(const ent *t, size_t n, const char *s, size_t len)
{
    ent key = { s, len, 0 };
    const ent *e = bsearch(&key, t, n, sizeof *t, ent_cmp);
    return e ? e->val : -1;
}

/* Tokens and merges straight from the GGUF arrays; byte map from GPT-2's definition. */
static void ref_init(ref *r, const sl_gguf *g)
{
    int et;
    uint64_t n;
    cr_assert(sl_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n));
    int64_t kv = sl_gguf_arr_kv(g, "tokenizer.ggml.tokens");
    r->tok = malloc(n * sizeof *r->tok);
    r->ntok = n;
    for (uint64_t i = 0; i < n; i++) {
        sl_str s = sl_gguf_arr_str(g, kv, i);
        r->tok[i] = (ent){ s.ptr, s.len, (int32_t)i };
    }
    qsort(r->tok, r->ntok, sizeof *r->tok, ent_cmp);
    cr_assert(sl_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &n));
    kv = sl_gguf_arr_kv(g, "tokenizer.ggml.merges");
    r->mrg = malloc(n * sizeof *r->mrg);
    r->nmrg = n;
    for (uint64_t i = 0; i < n; i++) {
        sl_str s = sl_gguf_arr_str(g, kv, i);
        r->mrg[i] = (ent){ s.ptr, s.len, (int32_t)i };
    }
    /* Stable by rank for equal strings: keep the first rank of a repeated merge. */
    qsort(r->mrg, r->nmrg, sizeof *r->mrg, ent_cmp);
    size_t k = 0;
    for (size_t i = 0; i < r->nmrg; i++) {
        if (k && ent_cmp(&r->mrg[k - 1], &r->mrg[i]) == 0) {
            if (r->mrg[i].val < r->mrg[k - 1].val) r->mrg[k - 1].val = r->mrg[i].val;
            continue;
        }
        r->mrg[k++] = r->mrg[i];
    }
    r->nmrg = k;
    /* bytes_to_unicode(): '!'..'~', '¡'..'¬', '®'..'ÿ' are themselves; the rest 256+n in order. */
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        bool self = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        uint32_t cp = self ? (uint32_t)b : 256u + (uint32_t)extra++;
        r->cslen[b] = (int)sl_utf8_encode(cp, (unsigned char *)r->cs[b]);
    }
}

/* ---------------------------------------------------------------- reference pre-tokenizer */

static bool L(uint32_t c) { return sl_uc_flags(c) & SL_UC_LETTER; }
static bool N(uint32_t c) { return sl_uc_flags(c) & SL_UC_NUMBER; }
static bool S(uint32_t c) { return sl_uc_flags(c) & SL_UC_SPACE; }
static bool crlf(uint32_t c) { return c == '\r' || c == '\n'; }
static uint32_t lc(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* Length of the Llama 3 regex match at p (alternatives tried in order, leftmost-first):
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*
 * |\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t ref_match(const uint32_t *c, size_t p, size_t n)
{
    if (c[p] == '\'' && p + 1 < n) {
        uint32_t a = lc(c[p + 1]);
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
        if (p + 2 < n) {
            uint32_t b = lc(c[p + 2]);
            if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
        }
    }
    /* [^\r\n\p{L}\p{N}]? greedy: with the optional char if letters follow it, else without. */
    size_t q = p;
    if (!crlf(c[p]) && !L(c[p]) && !N(c[p]) && p + 1 < n && L(c[p + 1])) q = p + 1;
    if (L(c[q])) {
        while (q < n && L(c[q])) q++;
        return q - p;
    }
    if (N(c[p])) {
        q = p;
        while (q < n && q - p < 3 && N(c[q])) q++;
        return q - p;
    }
    /* ' ?[^\s\p{L}\p{N}]+[\r\n]*' */
    #define OTHER(x) (!S(x) && !L(x) && !N(x))
    q = p;
    if (c[p] == ' ' && p + 1 < n && OTHER(c[p + 1])) q = p + 1;
    if (OTHER(c[q])) {
        while (q < n && OTHER(c[q])) q++;
        while (q < n && crlf(c[q])) q++;
        return q - p;
    }
    /* Whitespace run [p, e). */
    size_t e = p;
    while (e < n && S(c[e])) e++;
    if (e == p) return 1;                 /* cannot happen: every character matches something */
    for (size_t k = e; k > p; k--)        /* \s*[\r\n]+ : backtrack to the last CR/LF in the run */
        if (crlf(c[k - 1])) return k - p;
    if (e == n) return e - p;             /* \s+(?!\S) at the end */
    if (e - p >= 2) return e - p - 1;     /* \s+(?!\S): give the last one back */
    return e - p;                         /* \s+ */
}

/* ---------------------------------------------------------------- reference BPE */

static void ref_word(const ref *r, const unsigned char *b, size_t m, int32_t *out, size_t *nout)
{
    /* Parts: byte-level strings. */
    char (*part)[256] = malloc(m * sizeof *part);
    size_t *plen = malloc(m * sizeof *plen);
    char whole[4096];
    size_t wl = 0;
    for (size_t i = 0; i < m; i++) {
        memcpy(part[i], r->cs[b[i]], (size_t)r->cslen[b[i]]);
        plen[i] = (size_t)r->cslen[b[i]];
        memcpy(whole + wl, part[i], plen[i]);
        wl += plen[i];
    }
    int32_t id = ent_find(r->tok, r->ntok, whole, wl);
    size_t np = m;
    if (id >= 0) { out[(*nout)++] = id; goto done; }
    for (;;) {
        int32_t best = -1;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < np; i++) {
            char key[600];
            memcpy(key, part[i], plen[i]);
            key[plen[i]] = ' ';
            memcpy(key + plen[i] + 1, part[i + 1], plen[i + 1]);
            int32_t rank = ent_find(r->mrg, r->nmrg, key, plen[i] + plen[i + 1] + 1);
            if (rank >= 0 && (best < 0 || rank < best)) { best = rank; bi = i; }
        }
        if (best < 0) break;
        memcpy(part[bi] + plen[bi], part[bi + 1], plen[bi + 1]);
        plen[bi] += plen[bi + 1];
        memmove(part + bi + 1, part + bi + 2, (np - bi - 2) * sizeof *part);
        memmove(plen + bi + 1, plen + bi + 2, (np - bi - 2) * sizeof *plen);
        np--;
    }
    for (size_t i = 0; i < np; i++) {
        id = ent_find(r->tok, r->ntok, part[i], plen[i]);
        if (id >= 0) { out[(*nout)++] = id; continue; }
        for (size_t k = 0; k < plen[i]; k++) {     /* llama.cpp: single-byte tokens, if any */
            id = ent_find(r->tok, r->ntok, part[i] + k, 1);
            if (id >= 0) out[(*nout)++] = id;
        }
    }
done:
    free(part);
    free(plen);
}

/* Reference tokenization of valid UTF-8 s[0..len) (no BOS, no special tokens). */
static size_t ref_tokenize(const ref *r, const char *s, size_t len, int32_t *out)
{
    uint32_t *c = malloc((len + 1) * sizeof *c);
    size_t *off = malloc((len + 1) * sizeof *off);
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t adv;
        off[n] = i;
        c[n++] = sl_utf8_decode((const unsigned char *)s + i, len - i, &adv);
        i += adv;
    }
    off[n] = len;
    size_t nout = 0;
    for (size_t p = 0; p < n;) {
        size_t k = ref_match(c, p, n);
        ref_word(r, (const unsigned char *)s + off[p], off[p + k] - off[p], out, &nout);
        p += k;
    }
    free(c);
    free(off);
    return nout;
}

/* ---------------------------------------------------------------- random text */

static uint64_t rs = 0x243F6A8885A308D3ull;
static uint32_t rnd(void)
{
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (uint32_t)(rs >> 17);
}

static const char *const words[] = {
    "the", "of", "and", "to", "in", "is", "was", "that", "for", "it", "with", "as", "his", "on", "be",
    "at", "by", "had", "are", "but", "from", "or", "have", "an", "they", "which", "one", "you", "were",
    "Once", "upon", "time", "little", "girl", "named", "Lily", "THE", "Hello", "World", "tokenizer",
    "internationalization", "antidisestablishmentarianism", "GPU", "iPhone", "x86_64", "foo_bar",
    "don't", "I'm", "they'll", "we've", "you'd", "she's", "IT'S", "O'Neil", "rock'n'roll",
};
static const char *const exotic[] = {
    "café", "naïve", "résumé", "über", "straße", "Ærøskøbing", "Ελληνικά", "Привет", "мир", "日本語",
    "中文字符", "한국어", "こんにちは", "😀", "👍🏽", "❤️", "👨‍👩‍👧", "e\xCC\x81", "ﬁ", "Ｆｕｌｌ",
    "١٢٣", "٣.١٤", "Ⅻ", "½", "²", "\xC2\xA0", "\xE3\x80\x80", "\xE2\x80\x8B", "\xE2\x80\xAF", "\xC2\x85",
    "€", "£100", "→", "∑", "🇫🇷", "\xF0\x9F\x8F\xB3\xEF\xB8\x8F", "ǅ", "ᾈ", "K",
};
static const char *const punct[] = { ".", ",", "!", "?", ";", ":", "'", "\"", "(", ")", "[", "]", "{",
    "}", "-", "--", "...", "…", "/", "\\", "@", "#", "$", "%", "^", "&", "*", "+", "=", "<", ">", "|",
    "~", "`", "_", "'s", "'T", "'Re", "'ll", "'VE", "'d", "'M", "''", "?!", "->", "::", "==" };
static const char *const spaces[] = { " ", " ", " ", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n",
    " \n", "\t\t", "    \n  ", "\r", " \t \n" };

static size_t gen_text(char *buf, size_t cap, bool english_only)
{
    size_t n = 0;
    while (n + 64 < cap) {
        unsigned k = rnd() % 100;
        const char *piece;
        char num[32];
        if (k < 55) piece = words[rnd() % (sizeof words / sizeof words[0])];
        else if (k < 70) piece = spaces[rnd() % (sizeof spaces / sizeof spaces[0])];
        else if (k < 82) piece = punct[rnd() % (sizeof punct / sizeof punct[0])];
        else if (k < 90) {
            snprintf(num, sizeof num, "%u", rnd() % (rnd() % 2 ? 100u : 10000000u));
            piece = num;
        } else piece = english_only ? " " : exotic[rnd() % (sizeof exotic / sizeof exotic[0])];
        size_t l = strlen(piece);
        memcpy(buf + n, piece, l);
        n += l;
        if (rnd() % 3) buf[n++] = ' ';
    }
    return n;
}

/* Random substrings (cut at character boundaries) of a random text: implementation == reference. */
Test(tokenizer_bpe, llama3_vs_naive_reference)
{
    sl_gguf *g = NULL;
    sl_vocab *v = tt_load(LLAMA3, &g);
    ref r;
    ref_init(&r, g);
    size_t cap = 120000;
    char *text = malloc(cap);
    size_t n = gen_text(text, cap, false);
    int32_t *a = malloc(sizeof(int32_t) * 8192), *b = malloc(sizeof(int32_t) * 8192);
    int cases = 0;
    size_t total_ids = 0;
    for (int round = 0; round < 400; round++) {
        size_t s = rnd() % n, len = 1 + rnd() % (round % 10 == 0 ? 4000 : 300);
        while (s < n && ((unsigned char)text[s] & 0xC0) == 0x80) s++;
        size_t e = s + len > n ? n : s + len;
        while (e < n && ((unsigned char)text[e] & 0xC0) == 0x80) e++;
        int64_t na = sl_tokenize(v, text + s, e - s, false, false, a, 8192);
        size_t nb = ref_tokenize(&r, text + s, e - s, b);
        cr_assert_eq((size_t)na, nb, "substring [%zu,%zu): %lld ids vs reference %zu", s, e, (long long)na, nb);
        cr_assert_arr_eq(a, b, nb * sizeof(int32_t), "substring [%zu,%zu) differs from the reference", s, e);
        /* Round trip: byte-level BPE loses nothing on valid UTF-8 except clean-up spaces; compare
         * with the detokenizer's clean-up off by checking each piece concatenation. */
        char *d = malloc(e - s + 16);
        size_t dl = 0;
        for (int64_t i = 0; i < na; i++) {
            int pl = sl_token_piece(v, a[i], d + dl, e - s + 16 - dl);
            cr_assert_geq(pl, 0);
            dl += (size_t)pl;
        }
        cr_assert_eq(dl, e - s);
        cr_assert(memcmp(d, text + s, dl) == 0);
        free(d);
        cases++;
        total_ids += nb;
    }
    cr_log_info("llama3 BPE: %d random substrings, %zu ids, all equal to the naive reference", cases, total_ids);
    free(a); free(b); free(text);
    free(r.tok); free(r.mrg);
    sl_vocab_free(v);
    sl_gguf_close(g);
}

/* Speed and footprint.  Printed for the report; the assertion only catches a pathological
 * regression (>= 5 s per MB even under sanitizers on a loaded 2-core machine), not a target. */
Test(tokenizer_bpe, speed_and_memory, .timeout = 120)
{
    sl_gguf *g = NULL;
    char err[256];
    cr_assert_eq(sl_gguf_open(LLAMA3, &g, err, sizeof err), 0, "%s", err);
    double t0 = tt_now();
    sl_vocab *v = NULL;
    cr_assert_eq(sl_vocab_load(g, &v, err, sizeof err), 0, "%s", err);
    double t_load = tt_now() - t0;
    size_t cap = 1 << 20;
    char *text = malloc(cap);
    size_t n = gen_text(text, cap, true);
    int32_t *ids = malloc(sizeof(int32_t) * n);
    t0 = tt_now();
    int64_t nt = sl_tokenize(v, text, n, true, false, ids, (int64_t)n);
    double t_tok = tt_now() - t0;
    cr_assert_gt(nt, 0);
    double mbps = (double)n / 1e6 / t_tok;
    fprintf(stderr, "llama3 vocab: load %.1f ms, %.2f MB heap; tokenize %.2f MB English-like text: %.3f s "
            "(%.1f MB/s, %lld tokens)\n", 1e3 * t_load, sl_vocab_mem_bytes(v) / 1e6, n / 1e6, t_tok, mbps,
            (long long)nt);
    cr_assert_gt(mbps, 0.2);
    free(ids);
    free(text);
    sl_vocab_free(v);
    sl_gguf_close(g);
}
