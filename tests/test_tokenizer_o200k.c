/* tests/test_tokenizer_o200k.c — gpt-oss's o200k_harmony vocabulary (tokenizer.ggml.pre "gpt-4o").
 *
 * The 22 shared golden strings (test_tokenizer.c) have no combining marks, where llama.cpp's GPT4O
 * split and tiktoken's o200k pattern differ; gpt-oss was trained with tiktoken, so sluice follows
 * tiktoken (runtime/text/tokenizer_pre.c says how they differ).  Here:
 *   - hand-picked strings with combining marks, non-ASCII case changes and contractions, ids from
 *     tiktoken 1.0.22 (npm) o200k_base encode_ordinary — " हिन्दी" is one token (191681) there and
 *     four for llama.cpp (../shared/README.md, "gpt-oss vocabulary");
 *   - 400 seeded random strings of the same kind, ids from the same encoder
 *     (tests/data/o200k_tiktoken.tsv, made by scripts/gen_o200k_golden.cjs);
 *   - the harmony control tokens in a rendered chat, BOS/EOS/EOG, pieces;
 *   - load time and the vocabulary's heap (printed; memory checked against malloc's own count).
 */
#include <criterion/criterion.h>
#include <malloc.h>

#include "tokenizer_testutil.h"

#define GPTOSS SL_SHARED_DIR "/vocab/ggml-vocab-gpt-oss.gguf"

static int64_t tok(const sl_vocab *v, const char *s, bool parse_special, int32_t *ids, int64_t max)
{
    return sl_tokenize(v, s, strlen(s), false, parse_special, ids, max);
}

/* Compare the ids of s with the expected list; prints both on a mismatch.  Returns 1 if different. */
static int differs(const sl_vocab *v, const char *s, size_t len, const int32_t *exp, int ne, const char *what)
{
    int32_t got[4096];
    int64_t ng = sl_tokenize(v, s, len, false, false, got, 4096);
    if (ng == ne && memcmp(got, exp, sizeof(int32_t) * (size_t)ne) == 0) return 0;
    fprintf(stderr, "%s: expected", what);
    for (int i = 0; i < ne; i++) fprintf(stderr, " %d", exp[i]);
    fprintf(stderr, "\n  got");
    for (int64_t i = 0; i < ng && i < 4096; i++) fprintf(stderr, " %d", got[i]);
    fprintf(stderr, "\n");
    return 1;
}

Test(tokenizer_o200k, combining_marks_follow_tiktoken)
{
    /* tiktoken 1.0.22 o200k_base encode_ordinary, one run per string. */
    static const struct { const char *s; int32_t ids[12]; int n; } cases[] = {
        { " \xe0\xa4\xb9\xe0\xa4\xbf\xe0\xa4\xa8\xe0\xa5\x8d\xe0\xa4\xa6\xe0\xa5\x80", { 191681 }, 1 }, /* " हिन्दी" */
        { "हिन्दी भाषा", { 1554, 71602, 840, 108881 }, 4 },
        { "नमस्ते दुनिया", { 998, 1637, 14681, 628, 64593 }, 5 },
        { "cafe\xcc\x81", { 66, 6903, 13430 }, 3 },                    /* e + U+0301 */
        { "E\xcc\x81TE\xcc\x81", { 36, 13430, 5075, 13430 }, 4 },
        { "ខ្មែរ", { 37984, 196415 }, 2 },
        { "ภาษาไทย", { 194649, 20619 }, 2 },
        { "ПРИВЕТмир", { 3118, 122786, 3540, 109783, 500, 2479 }, 6 },
        { "приВЕТ", { 79185, 3540, 109783 }, 3 },                     /* lower then upper: two words */
        { "ǅungla", { 131, 227, 988, 1675 }, 4 },                      /* titlecase letter */
        { "DON'T \xc5\xbf '\xc5\xbf it'\xc5\xbf", { 134882, 51532, 20757, 123, 461, 70067, 480, 6, 70067 }, 9 },
        { "a/b/\n\nc", { 64, 7611, 15094, 66 }, 4 },
        { "x  \xe3\x80\x80\xc2\xa0y", { 87, 256, 1397, 5310, 88 }, 5 }, /* U+3000, U+00A0 */
        { "x86_64 1234567", { 87, 7189, 62, 2220, 220, 7633, 19354, 22 }, 8 },
    };
    sl_vocab *v = tt_load(GPTOSS, NULL);
    cr_assert_str_eq(sl_vocab_pre(v), "gpt-4o");
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        bad += differs(v, cases[i].s, strlen(cases[i].s), cases[i].ids, cases[i].n, cases[i].s);
    cr_assert_eq(bad, 0, "%d of %zu strings differ from tiktoken", bad, sizeof cases / sizeof cases[0]);
    sl_vocab_free(v);
}

Test(tokenizer_o200k, random_strings_equal_tiktoken)
{
    sl_vocab *v = tt_load(GPTOSS, NULL);
    size_t n;
    char *t = tt_slurp(SL_SOURCE_DIR "/tests/data/o200k_tiktoken.tsv", &n);
    cr_assert_not_null(t);
    int rows = 0, bad = 0;
    char *save = NULL;
    static char s[8192];
    static int32_t exp[4096];
    for (char *line = strtok_r(t, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *hex = strchr(line, '\t'), *ids = hex ? strchr(hex + 1, '\t') : NULL;
        cr_assert(hex && ids, "malformed row %d", rows);
        size_t len = 0;
        for (char *h = hex + 1; h + 1 < ids && len < sizeof s; h += 2) {
            unsigned x;
            cr_assert_eq(sscanf(h, "%2x", &x), 1);
            s[len++] = (char)x;
        }
        int ne = tt_parse_ids(ids + 1, exp, 4096);
        char what[32];
        snprintf(what, sizeof what, "row %d", rows);
        bad += differs(v, s, len, exp, ne, what);
        rows++;
    }
    cr_assert_eq(rows, 400, "expected 400 rows, read %d", rows);
    cr_assert_eq(bad, 0, "%d of %d strings differ from tiktoken", bad, rows);
    free(t);
    sl_vocab_free(v);
}

static int32_t id_of(const sl_vocab *v, const char *text)
{
    for (int32_t id = 199998; id < sl_vocab_n_tokens(v); id++) {
        size_t l;
        const char *t = sl_vocab_text(v, id, &l);
        if (l == strlen(text) && !memcmp(t, text, l)) return id;
    }
    return -1;
}

/* A harmony rendering: every marker is its one token (parse_special), the text between them is
 * tokenized as plain text; no BOS is added (the vocabulary has no add_bos_token, llama.cpp adds none). */
Test(tokenizer_o200k, harmony_specials_bos_eos)
{
    sl_vocab *v = tt_load(GPTOSS, NULL);
    cr_assert_eq(sl_vocab_n_tokens(v), 201088);
    cr_assert_eq(sl_vocab_bos(v), 199998);
    cr_assert_eq(sl_vocab_eos(v), 200002);
    int32_t start = id_of(v, "<|start|>"), msg = id_of(v, "<|message|>"), end = id_of(v, "<|end|>"),
            chan = id_of(v, "<|channel|>"), ret = id_of(v, "<|return|>"), call = id_of(v, "<|call|>");
    cr_assert(start == 200006 && msg == 200008 && end == 200007 && chan == 200005 && ret == 200002 && call == 200012);

    const char *text = "<|start|>user<|message|>Hi there<|end|><|start|>assistant<|channel|>final<|message|>Hello<|return|>";
    int32_t got[64], a[8], b[8], c[8], d[8], e[8];
    int64_t n = tok(v, text, true, got, 64);
    int64_t na = tok(v, "user", false, a, 8), nb = tok(v, "Hi there", false, b, 8), nc = tok(v, "assistant", false, c, 8),
            nd = tok(v, "final", false, d, 8), ne = tok(v, "Hello", false, e, 8);
    cr_assert(na == 1 && nb == 2 && nc == 1 && nd == 1 && ne == 1);
    int32_t want[] = { start, a[0], msg, b[0], b[1], end, start, c[0], chan, d[0], msg, e[0], ret };
    cr_assert_eq(n, (int64_t)(sizeof want / sizeof want[0]));
    cr_assert_arr_eq(got, want, sizeof want);
    /* add_special adds nothing (no BOS, no EOS) */
    int32_t w2[64];
    cr_assert_eq(sl_tokenize(v, text, strlen(text), true, true, w2, 64), n);
    cr_assert_arr_eq(w2, got, sizeof want);

    /* End of generation: <|return|>, <|call|> and <|endoftext|>; <|end|> is not (the analysis
     * message ends with it and the final one follows), as in llama.cpp. */
    cr_assert(sl_vocab_is_eog(v, ret) && sl_vocab_is_eog(v, call) && sl_vocab_is_eog(v, 199999));
    cr_assert(!sl_vocab_is_eog(v, end) && !sl_vocab_is_eog(v, start) && !sl_vocab_is_eog(v, chan));
    /* The markers print as text (llama.cpp makes them USER_DEFINED) so the channels can be told apart
     * in the output; <|return|> stays a control token that prints nothing. */
    char p[32];
    const int32_t shown[] = { start, msg, end, chan };
    for (size_t i = 0; i < 4; i++) {
        int l = sl_token_piece(v, shown[i], p, sizeof p);
        size_t tl;
        const char *t = sl_vocab_text(v, shown[i], &tl);
        cr_assert(l == (int)tl && !memcmp(p, t, tl), "piece of %d", shown[i]);
    }
    cr_assert_eq(sl_token_piece(v, ret, p, sizeof p), 0);
    /* parse_special off: the USER_DEFINED markers are still matched (llama.cpp), <|return|> is text */
    n = tok(v, "<|start|>x<|return|>", false, got, 64);
    cr_assert_gt(n, 3);
    cr_assert_eq(got[0], start);
    for (int64_t i = 1; i < n; i++) cr_assert_neq(got[i], ret);
    sl_vocab_free(v);
}

/* 201088 tokens and 446189 merges: printed for the report; the bound only catches a pathological
 * regression (sanitizers on a loaded 2-core machine included).  The heap the vocabulary reports is
 * what malloc handed out while loading it. */
Test(tokenizer_o200k, load_time_and_memory, .timeout = 120)
{
    sl_gguf *g = NULL;
    char err[256];
    cr_assert_eq(sl_gguf_open(GPTOSS, &g, err, sizeof err), 0, "%s", err);
    struct mallinfo2 m0 = mallinfo2();
    double t0 = tt_now();
    sl_vocab *v = NULL;
    cr_assert_eq(sl_vocab_load(g, &v, err, sizeof err), 0, "%s", err);
    double dt = tt_now() - t0;
    struct mallinfo2 m1 = mallinfo2();
    size_t heap = (m1.uordblks + m1.hblkhd) - (m0.uordblks + m0.hblkhd);
    fprintf(stderr, "gpt-oss vocab: %d tokens, load %.1f ms, %.2f MB reported, %.2f MB allocated%s\n",
            sl_vocab_n_tokens(v), 1e3 * dt, sl_vocab_mem_bytes(v) / 1e6, heap / 1e6,
            heap ? "" : " (malloc statistics unavailable)");
    cr_assert_lt(dt, 10.0);
    /* tokenizing speed on ~1 MB of mixed text (English, accents, Devanagari, Cyrillic, digits) */
    static const char para[] = "Once upon a time, there was a little girl named Lily. She didn't like caf\xc3\xa9s; "
        "\xe0\xa4\xb9\xe0\xa4\xbf\xe0\xa4\xa8\xe0\xa5\x8d\xe0\xa4\xa6\xe0\xa5\x80 \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 "
        "2024-01-01 3.14159\n\n    return x/y; // THE END\n";
    size_t pl = sizeof para - 1, reps = (1u << 20) / pl, tn = reps * pl;
    char *text = malloc(tn);
    for (size_t i = 0; i < reps; i++) memcpy(text + i * pl, para, pl);
    int32_t *ids = malloc(sizeof(int32_t) * tn);
    double t1 = tt_now();
    int64_t nt = sl_tokenize(v, text, tn, false, false, ids, (int64_t)tn);
    double tt = tt_now() - t1;
    cr_assert_gt(nt, 0);
    fprintf(stderr, "gpt-oss vocab: tokenize %.2f MB: %.3f s (%.1f MB/s, %lld tokens)\n", tn / 1e6, tt, tn / 1e6 / tt,
            (long long)nt);
    cr_assert_gt(tn / 1e6 / tt, 0.2);
    free(ids);
    free(text);
    /* malloc's count includes its chunk headers: within 1% + 64 KiB of the reported bytes.  Under
     * the sanitizers malloc is theirs and glibc's statistics stay at zero: nothing to compare. */
    if (m1.uordblks + m1.hblkhd == 0) {
        sl_vocab_free(v);
        sl_gguf_close(g);
        return;
    }
    double rep = (double)sl_vocab_mem_bytes(v);
    cr_assert(heap >= sl_vocab_mem_bytes(v) - 65536 && (double)heap <= rep * 1.01 + 65536,
              "reported %zu bytes, malloc handed out %zu", sl_vocab_mem_bytes(v), heap);
    sl_vocab_free(v);
    sl_gguf_close(g);
}
