/* tests/test_tokenizer_spm.c — SentencePiece (Llama 2 32k vocabulary) against a slow reference
 * written from the definition: escape spaces as U+2581 (plus the leading one), split into UTF-8
 * characters by lead byte, then repeatedly merge the adjacent pair whose concatenation is a
 * vocabulary entry with the highest score (leftmost on ties) over the WHOLE text, and finally
 * write symbols that are not entries as <0xNN> byte tokens.  The implementation merges word by
 * word (see tokenizer_spm.c); equality on random text checks that this is exact.
 */
#include <criterion/criterion.h>

#include "runtime/text/unicode.h"
#include "tokenizer_testutil.h"
#include "qemu_testutil.h"

typedef struct tok { const char *s; size_t n; int32_t id; float score; } tok;
typedef struct ref { tok *t; size_t n; } ref;

static int tok_cmp(const void *a, const void *b)
{
    const tok *x = a, *y = b;
    size_t m = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->s, y->s, m);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

static const tok *find(const ref *r, const char *s, size_t n)
{
    tok key = { s, n, 0, 0 };
    return bsearch(&key, r->t, r->n, sizeof *r->t, tok_cmp);
}

static void ref_init(ref *r, const sl_gguf *g)
{
    int et;
    uint64_t n;
    cr_assert(sl_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n));
    int64_t kt = sl_gguf_arr_kv(g, "tokenizer.ggml.tokens"), ks = sl_gguf_arr_kv(g, "tokenizer.ggml.scores");
    r->t = malloc(n * sizeof *r->t);
    r->n = n;
    for (uint64_t i = 0; i < n; i++) {
        sl_str s = sl_gguf_arr_str(g, kt, i);
        float sc;
        cr_assert(sl_gguf_arr_f32(g, ks, i, &sc));
        r->t[i] = (tok){ s.ptr, s.len, (int32_t)i, sc };
    }
    qsort(r->t, r->n, sizeof *r->t, tok_cmp);
}

/* Reference SPM tokenization of text[0..len) with the leading space, no BOS. */
static size_t ref_tokenize(const ref *r, const char *text, size_t len, int32_t *out)
{
    char *e = malloc(3 * len + 3);
    size_t el = 0;
    memcpy(e, "\xE2\x96\x81", 3);
    el = 3;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') { memcpy(e + el, "\xE2\x96\x81", 3); el += 3; }
        else e[el++] = text[i];
    }
    size_t *off = malloc((el + 1) * sizeof *off), ns = 0;
    for (size_t i = 0; i < el;) {
        off[ns++] = i;
        size_t cl = sl_utf8_len((unsigned char)e[i]);
        i += cl < el - i ? cl : el - i;
    }
    off[ns] = el;
    for (;;) {                            /* symbol k is e[off[k], off[k+1]) */
        long best = -1;
        float bs = 0;
        for (size_t k = 0; k + 1 < ns; k++) {
            const tok *t = find(r, e + off[k], off[k + 2] - off[k]);
            if (t && (best < 0 || t->score > bs)) { best = (long)k; bs = t->score; }
        }
        if (best < 0) break;
        memmove(off + best + 1, off + best + 2, (ns - (size_t)best - 1) * sizeof *off);
        ns--;
    }
    size_t n = 0;
    for (size_t k = 0; k < ns; k++) {
        const tok *t = find(r, e + off[k], off[k + 1] - off[k]);
        if (t) { out[n++] = t->id; continue; }
        for (size_t j = off[k]; j < off[k + 1]; j++) {
            char b[7];
            snprintf(b, sizeof b, "<0x%02X>", (unsigned char)e[j]);
            t = find(r, b, 6);
            cr_assert_not_null(t);
            out[n++] = t->id;
        }
    }
    free(e);
    free(off);
    return n;
}

static uint64_t rs = 0x13198A2E03707344ull;
static uint32_t rnd(void)
{
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (uint32_t)(rs >> 17);
}

static const char *const parts[] = { "the", "Once", "upon", "a", "time", "little", "girl", "named",
    "Lily", "internationalization", "tokenizer", "don't", "I'm", "1234", "3.14", "-42", "2024-01-01",
    " ", " ", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", ".", ",", "!", "?", "'", "\"", "(", ")",
    "...", "café", "naïve", "über", "straße", "Привет", "мир", "日本語", "こんにちは", "😀", "👍🏽",
    "❤️", "e\xCC\x81", "\xC2\xA0", "\xE2\x80\x8B", "∑", "→", "ǅ", "Ω", "한국어", "▁", "<s>", "</s>" };

Test(tokenizer_spm, llama2_vs_naive_reference)
{
    sl_gguf *g = NULL;
    sl_vocab *v = tt_load(SL_SHARED_DIR "/vocab/ggml-vocab-llama-spm.gguf", &g);
    ref r;
    ref_init(&r, g);
    char text[1024];
    int32_t a[4096], b[4096];
    for (int round = 0; round < 300; round++) {
        size_t n = 0, target = 1 + rnd() % 400;
        while (n < target) {
            const char *p = parts[rnd() % (sizeof parts / sizeof parts[0])];
            size_t l = strlen(p);
            memcpy(text + n, p, l);
            n += l;
            if (rnd() % 2) text[n++] = ' ';
        }
        int64_t na = sl_tokenize(v, text, n, false, false, a, 4096);
        size_t nb = ref_tokenize(&r, text, n, b);
        cr_assert_eq((size_t)na, nb, "round %d: %lld ids vs reference %zu", round, (long long)na, nb);
        cr_assert_arr_eq(a, b, nb * sizeof(int32_t), "round %d differs from the reference", round);
        /* SPM round trip is exact (byte fallback keeps every byte; the leading space is dropped)
         * unless the text itself contains U+2581, which comes back as ' '. */
        if (memmem(text, n, "\xE2\x96\x81", 3)) continue;
        char d[2048];
        int64_t dl = sl_detokenize(v, a, na, d, sizeof d);
        cr_assert_eq(dl, (int64_t)n);
        cr_assert(memcmp(d, text, n) == 0);
    }
    free(r.t);
    sl_vocab_free(v);
    sl_gguf_close(g);
}

/* Speed on ~1 MB English-like text, printed for the report; the bound only catches a pathological
 * regression (sanitizer builds on a loaded 2-core machine are several times slower). */
Test(tokenizer_spm, speed, .timeout = 120)
{
    sl_vocab *v = tt_load(SL_SHARED_DIR "/vocab/ggml-vocab-llama-spm.gguf", NULL);
    size_t cap = 1 << 20, n = 0;
    char *text = malloc(cap + 64);
    while (n < cap) {
        const char *p = parts[rnd() % 35];
        size_t l = strlen(p);
        memcpy(text + n, p, l);
        n += l;
        text[n++] = ' ';
    }
    int32_t *ids = malloc(sizeof(int32_t) * n);
    double t0 = tt_now();
    int64_t nt = sl_tokenize(v, text, n, true, false, ids, (int64_t)n);
    double t = tt_now() - t0;
    fprintf(stderr, "llama2 SPM: tokenize %.2f MB: %.3f s (%.1f MB/s, %lld tokens), vocab heap %.2f MB\n",
            n / 1e6, t, n / 1e6 / t, (long long)nt, sl_vocab_mem_bytes(v) / 1e6);
    cr_assert_gt(nt, 0);
    cr_assert_gt(n / 1e6 / t, tq_rate_floor(0.2));   /* a quadratic blow-up falls far below it */
    free(ids);
    free(text);
    sl_vocab_free(v);
}
