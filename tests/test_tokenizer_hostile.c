/* tests/test_tokenizer_hostile.c — vocabularies built from hostile metadata (in-memory GGUFs):
 * every malformed input gives a clear error or a well-defined result, never a crash (run under
 * -DSL_SANITIZE=ON too); plus the UTF-8 output stream on random and invalid input. */
#include <criterion/criterion.h>
#include <errno.h>

#include "runtime/text/unicode.h"
#include "tokenizer_testutil.h"

/* Build a vocabulary from the body b; returns the load result (0 or -errno), err filled. */
static int load_from(tt_gguf *b, sl_vocab **v, char *err, size_t errlen)
{
    sl_gguf *g = NULL;
    int rc = tt_parse(b, &g, err, errlen);
    cr_assert_eq(rc, 0, "gguf parse: %s", err);
    err[0] = 0;
    rc = sl_vocab_load(g, v, err, errlen);
    sl_gguf_close(g);
    free(b->p);
    return rc;
}

static const char *const small_toks[] = { "<unk>", "<s>", "</s>", "a", "b", "ab", "\xE2\x96\x81", "\xE2\x96\x81" "a" };

Test(tokenizer_hostile, missing_or_bad_keys)
{
    char err[256];
    sl_vocab *v = NULL;
    tt_gguf b = { 0 };
    /* no tokenizer.ggml.model */
    tt_kv_strs(&b, "tokenizer.ggml.tokens", small_toks, NULL, 8);
    cr_assert_lt(load_from(&b, &v, err, sizeof err), 0);
    cr_assert(strstr(err, "tokenizer.ggml.model"), "%s", err);

    b = (tt_gguf){ 0 };
    tt_kv_str(&b, "tokenizer.ggml.model", "bert");
    tt_kv_strs(&b, "tokenizer.ggml.tokens", small_toks, NULL, 8);
    cr_assert_eq(load_from(&b, &v, err, sizeof err), -ENOTSUP);
    cr_assert(strstr(err, "bert"), "%s", err);

    b = (tt_gguf){ 0 };                           /* no tokens */
    tt_kv_str(&b, "tokenizer.ggml.model", "llama");
    cr_assert_eq(load_from(&b, &v, err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "tokens"), "%s", err);

    b = (tt_gguf){ 0 };                           /* tokens of the wrong type */
    tt_kv_str(&b, "tokenizer.ggml.model", "llama");
    tt_kv_i32s(&b, "tokenizer.ggml.tokens", (int32_t[]){ 1, 2, 3 }, 3);
    cr_assert_eq(load_from(&b, &v, err, sizeof err), -EINVAL);

    b = (tt_gguf){ 0 };                           /* empty token list */
    tt_kv_str(&b, "tokenizer.ggml.model", "llama");
    tt_kv_strs(&b, "tokenizer.ggml.tokens", small_toks, NULL, 0);
    cr_assert_eq(load_from(&b, &v, err, sizeof err), -EINVAL);

    b = (tt_gguf){ 0 };                           /* scores: one short */
    tt_kv_str(&b, "tokenizer.ggml.model", "llama");
    tt_kv_strs(&b, "tokenizer.ggml.tokens", small_toks, NULL, 8);
    tt_kv_f32s(&b, "tokenizer.ggml.scores", (float[]){ 0, 0, 0, 1, 1, 2, 1, 3 }, 7);
    cr_assert_eq(load_from(&b, &v, err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "scores"), "%s", err);

    b = (tt_gguf){ 0 };                           /* token types: one too many */
    tt_kv_str(&b, "tokenizer.ggml.model", "llama");
    tt_kv_strs(&b, "tokenizer.ggml.tokens", small_toks, NULL, 8);
    tt_kv_i32s(&b, "tokenizer.ggml.token_type", (int32_t[]){ 2, 3, 3, 1, 1, 1, 1, 1, 1 }, 9);
    cr_assert_eq(load_from(&b, &v, err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "token types"), "%s", err);

    b = (tt_gguf){ 0 };                           /* token types as strings */
    tt_kv_str(&b, "tokenizer.ggml.model", "llama");
    tt_kv_strs(&b, "tokenizer.ggml.tokens", small_toks, NULL, 8);
    tt_kv_strs(&b, "tokenizer.ggml.token_type", small_toks, NULL, 8);
    cr_assert_eq(load_from(&b, &v, err, sizeof err), -EINVAL);

    b = (tt_gguf){ 0 };                           /* duplicate token text */
    tt_kv_str(&b, "tokenizer.ggml.model", "llama");
    tt_kv_strs(&b, "tokenizer.ggml.tokens", (const char *const[]){ "x", "y", "x" }, NULL, 3);
    cr_assert_eq(load_from(&b, &v, err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "duplicates"), "%s", err);

    b = (tt_gguf){ 0 };                           /* gpt2 without merges */
    tt_kv_str(&b, "tokenizer.ggml.model", "gpt2");
    tt_kv_strs(&b, "tokenizer.ggml.tokens", small_toks, NULL, 8);
    cr_assert_eq(load_from(&b, &v, err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "merges"), "%s", err);

    b = (tt_gguf){ 0 };                           /* unsupported pre-tokenizer */
    tt_kv_str(&b, "tokenizer.ggml.model", "gpt2");
    tt_kv_str(&b, "tokenizer.ggml.pre", "qwen2");
    tt_kv_strs(&b, "tokenizer.ggml.tokens", small_toks, NULL, 8);
    tt_kv_strs(&b, "tokenizer.ggml.merges", (const char *const[]){ "a b" }, NULL, 1);
    cr_assert_eq(load_from(&b, &v, err, sizeof err), -ENOTSUP);
    cr_assert(strstr(err, "qwen2"), "%s", err);
    cr_assert_null(v);
}

/* A one-token SPM vocabulary: the default BOS (1) and EOS (2) do not exist, so none are added;
 * bytes without tokens fall back to the unknown token (0). */
Test(tokenizer_hostile, tiny_spm_and_out_of_range_ids)
{
    char err[256];
    sl_vocab *v = NULL;
    tt_gguf b = { 0 };
    tt_kv_str(&b, "tokenizer.ggml.model", "llama");
    tt_kv_strs(&b, "tokenizer.ggml.tokens", (const char *const[]){ "a" }, NULL, 1);
    tt_kv_u32(&b, "tokenizer.ggml.bos_token_id", 99999);
    tt_kv_u32(&b, "tokenizer.ggml.eos_token_id", 0xFFFFFFFFu);
    cr_assert_eq(load_from(&b, &v, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sl_vocab_bos(v), -1);
    cr_assert_eq(sl_vocab_eos(v), -1);
    int32_t ids[64];
    int64_t n = sl_tokenize(v, "hello", 5, true, true, ids, 64);
    cr_assert_eq(n, 8);                 /* "▁hello": 8 bytes without tokens -> unknown token each */
    for (int i = 0; i < n; i++) cr_assert_eq(ids[i], 0);
    cr_assert_eq(sl_tokenize(v, "", 0, true, false, ids, 64), 0);
    sl_vocab_free(v);
}

/* Empty texts, invalid UTF-8 in tokens, malformed byte tokens, NULs: loads and round-trips. */
Test(tokenizer_hostile, odd_token_texts)
{
    char err[256];
    sl_vocab *v = NULL;
    tt_gguf b = { 0 };
    const char *toks[] = { "<unk>", "<s>", "</s>", "", "\xFF\xFE", "<0x", "<0xZZ>", "a\0b", "<0x41>", "\xE2\x96\x81" };
    size_t lens[] = { 5, 3, 4, 0, 2, 3, 6, 3, 6, 3 };
    int32_t types[] = { 2, 3, 3, 1, 1, 6, 6, 4, 6, 1 };
    tt_kv_str(&b, "tokenizer.ggml.model", "llama");
    tt_kv_strs(&b, "tokenizer.ggml.tokens", toks, lens, 10);
    tt_kv_i32s(&b, "tokenizer.ggml.token_type", types, 10);
    cr_assert_eq(load_from(&b, &v, err, sizeof err), 0, "%s", err);
    size_t len;
    const char *t = sl_vocab_text(v, 3, &len);
    cr_assert_eq(len, 9);
    cr_assert(memcmp(t, "[EMPTY_3]", 9) == 0);
    cr_assert_null(sl_vocab_text(v, 10, &len));
    char buf[32];
    for (int32_t id = 0; id < 10; id++)
        cr_assert_geq(sl_token_piece(v, id, buf, sizeof buf), 0);
    cr_assert_eq(sl_token_piece(v, 8, buf, sizeof buf), 1);
    cr_assert_eq(buf[0], 'A');
    /* USER_DEFINED "a\0b" is matched in text even without parse_special. */
    int32_t ids[64];
    int64_t n = sl_tokenize(v, "xa\0by", 5, false, false, ids, 64);
    cr_assert_gt(n, 0);
    bool found = false;
    for (int64_t i = 0; i < n; i++) found |= ids[i] == 7;
    cr_assert(found);
    /* Invalid UTF-8 input. */
    n = sl_tokenize(v, "\xC3\x28\xF8\x80\xE2", 5, true, true, ids, 64);
    cr_assert_gt(n, 0);
    sl_vocab_free(v);
}

/* BPE with malformed merges (no space, empty halves, extra spaces, repeats, halves that are not
 * tokens): loads, and merging still follows the valid ranks. */
Test(tokenizer_hostile, bpe_malformed_merges)
{
    char err[256];
    sl_vocab *v = NULL;
    tt_gguf b = { 0 };
    const char *toks[] = { "a", "b", "c", "ab", "abc", "<|endoftext|>", "\xC4\xA0" };
    const char *merges[] = { "", "ab", " a", "a ", "a b", "a b", "ab c", "x y z", "\xFF \xFE" };
    tt_kv_str(&b, "tokenizer.ggml.model", "gpt2");
    tt_kv_str(&b, "tokenizer.ggml.pre", "gpt-2");
    tt_kv_strs(&b, "tokenizer.ggml.tokens", toks, NULL, 7);
    tt_kv_strs(&b, "tokenizer.ggml.merges", merges, NULL, 9);
    cr_assert_eq(load_from(&b, &v, err, sizeof err), 0, "%s", err);
    int32_t ids[64];
    int64_t n = sl_tokenize(v, "abc", 3, false, false, ids, 64);
    cr_assert_eq(n, 1);
    cr_assert_eq(ids[0], 4);
    /* "<|endoftext|>" is forced to CONTROL (llama.cpp's EOG detection), so it is text here... */
    n = sl_tokenize(v, "<|endoftext|>", 13, false, false, ids, 64);
    cr_assert_geq(n, 0);
    for (int64_t i = 0; i < n; i++) cr_assert_neq(ids[i], 5);
    /* ...and a token with parse_special; it is also an end-of-generation token. */
    n = sl_tokenize(v, "<|endoftext|>", 13, false, true, ids, 64);
    cr_assert_eq(n, 1);
    cr_assert_eq(ids[0], 5);
    cr_assert(sl_vocab_is_eog(v, 5));
    /* Bytes that have no token vanish (llama.cpp's fallback), nothing crashes. */
    n = sl_tokenize(v, "\xFF z \xE2\x82", 7, true, false, ids, 64);
    cr_assert_geq(n, 0);
    sl_vocab_free(v);
}

/* ---------------------------------------------------------------- UTF-8 stream */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

/* Random valid UTF-8 cut into random pieces: the output is the input, and every chunk released
 * is complete, valid UTF-8. */
Test(utf8_stream, random_valid_text)
{
    static const uint32_t ranges[][2] = { { 0x20, 0x7E }, { 0xA0, 0x7FF }, { 0x800, 0xD7FF },
                                          { 0xE000, 0xFFFD }, { 0x10000, 0x10FFFF } };
    for (int round = 0; round < 200; round++) {
        unsigned char text[4096];
        size_t n = 0;
        while (n < sizeof text - 4) {
            const uint32_t *r = ranges[rnd() % 5];
            n += sl_utf8_encode(r[0] + rnd() % (r[1] - r[0] + 1), text + n);
        }
        sl_utf8_stream st = { 0 };
        char out[4096 + 64], all[8192];
        size_t total = 0;
        for (size_t i = 0; i < n;) {
            size_t k = 1 + rnd() % 7;
            if (k > n - i) k = n - i;
            size_t got = sl_utf8_stream_feed(&st, (const char *)text + i, k, out);
            cr_assert_eq(sl_utf8_valid_prefix((const unsigned char *)out, got), got);
            memcpy(all + total, out, got);
            total += got;
            i += k;
        }
        total += sl_utf8_stream_flush(&st, all + total);
        cr_assert_eq(total, n);
        cr_assert(memcmp(all, text, n) == 0);
    }
}

/* Invalid bytes pass through one by one, nothing is lost or held longer than needed. */
Test(utf8_stream, invalid_bytes)
{
    sl_utf8_stream st = { 0 };
    char out[64];
    cr_assert_eq(sl_utf8_stream_feed(&st, "\xE2\x82", 2, out), 0);          /* held: valid prefix */
    cr_assert_eq(sl_utf8_stream_feed(&st, "\xAC", 1, out), 3);              /* "€" */
    cr_assert(memcmp(out, "\xE2\x82\xAC", 3) == 0);
    cr_assert_eq(sl_utf8_stream_feed(&st, "\x80z", 2, out), 2);             /* stray continuation */
    cr_assert_eq(sl_utf8_stream_feed(&st, "\xE2(", 2, out), 2);             /* broken sequence */
    cr_assert(memcmp(out, "\xE2(", 2) == 0);
    cr_assert_eq(sl_utf8_stream_feed(&st, "\xED\xA0", 2, out), 2);          /* surrogate: invalid */
    cr_assert_eq(sl_utf8_stream_feed(&st, "\xF0\x9F\x98", 3, out), 0);
    cr_assert_eq(sl_utf8_stream_flush(&st, out), 3);                        /* end: release as is */
    cr_assert_eq(st.npend, 0);
    /* Random bytes: output equals input once flushed; at most 3 bytes ever pending. */
    for (int round = 0; round < 200; round++) {
        unsigned char in[512];
        for (size_t i = 0; i < sizeof in; i++) in[i] = (unsigned char)(rnd() % 4 ? 0x80 + rnd() % 0x80 : rnd());
        char buf[600], all[1024];
        size_t total = 0;
        for (size_t i = 0; i < sizeof in;) {
            size_t k = 1 + rnd() % 5;
            if (k > sizeof in - i) k = sizeof in - i;
            size_t got = sl_utf8_stream_feed(&st, (const char *)in + i, k, buf);
            cr_assert_leq(st.npend, 3);
            memcpy(all + total, buf, got);
            total += got;
            i += k;
        }
        total += sl_utf8_stream_flush(&st, all + total);
        cr_assert_eq(total, sizeof in);
        cr_assert(memcmp(all, in, sizeof in) == 0);
    }
}

/* An SPM vocabulary with a token that has '▁' after another character ("a▁") must be merged over
 * the whole text, not word by word: with "a▁" scoring higher than "▁b", "a b" (escaped "▁a▁b")
 * gives ▁ + a▁ + b; word-by-word merging would give ▁ + a + ▁b. */
Test(tokenizer_hostile, spm_cross_word_token)
{
    char err[256];
    sl_vocab *v = NULL;
    tt_gguf b = { 0 };
    const char *toks[] = { "<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "a\xE2\x96\x81", "\xE2\x96\x81" "b" };
    tt_kv_str(&b, "tokenizer.ggml.model", "llama");
    tt_kv_strs(&b, "tokenizer.ggml.tokens", toks, NULL, 8);
    tt_kv_f32s(&b, "tokenizer.ggml.scores", (float[]){ 0, 0, 0, -1, -2, -2, -3, -4 }, 8);
    cr_assert_eq(load_from(&b, &v, err, sizeof err), 0, "%s", err);
    int32_t ids[16];
    int64_t n = sl_tokenize(v, "a b", 3, false, false, ids, 16);
    cr_assert_eq(n, 3);
    cr_assert_eq(ids[0], 3);
    cr_assert_eq(ids[1], 6);
    cr_assert_eq(ids[2], 5);
    sl_vocab_free(v);
}

/* Random bytes (invalid UTF-8, NULs, fragments of special texts) through every vocabulary with every
 * flag combination: ids stay in range, detokenization and pieces succeed.  Mostly a sanitizer test. */
Test(tokenizer_hostile, random_bytes_all_vocabs, .timeout = 120)
{
    static const char *const files[] = { "vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-baichuan.gguf",
        "vocab/ggml-vocab-phi-3.gguf", "models/stories260K.gguf", "vocab/ggml-vocab-llama-bpe.rebuilt.gguf",
        "vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-gpt-neox.gguf", "vocab/ggml-vocab-mpt.gguf",
        "vocab/ggml-vocab-falcon.gguf", "vocab/ggml-vocab-starcoder.gguf", "vocab/ggml-vocab-refact.gguf",
        "vocab/ggml-vocab-deepseek-coder.gguf", "vocab/ggml-vocab-deepseek-llm.gguf" };
    static const char *const frags[] = { "<s>", "</s>", "<|endoftext|>", "<|begin_of_text|>", "<|eot_id|>",
        "\xE2\x96\x81", "  ", "\n", "'s", "123", "\xEF\xBD\x9C", "<0x41>", "\xF0\x9F\x98\x80", "\xC3\xBC" };
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", SL_SHARED_DIR, files[f]);
        sl_vocab *v = tt_load(path, NULL);
        int32_t nt = sl_vocab_n_tokens(v);
        for (int round = 0; round < 60; round++) {
            char s[256];
            size_t n = 0, target = rnd() % 200;
            while (n < target) {
                if (rnd() % 3 == 0) {
                    const char *p = frags[rnd() % (sizeof frags / sizeof frags[0])];
                    size_t l = strlen(p);
                    memcpy(s + n, p, l);
                    n += l;
                } else s[n++] = (char)rnd();
            }
            for (int c = 0; c < 4; c++) {
                int32_t ids[1024];
                int64_t k = sl_tokenize(v, s, n, c & 1, c & 2, ids, 1024);
                cr_assert_geq(k, 0);
                cr_assert_leq(k, 1024);
                for (int64_t i = 0; i < k; i++) cr_assert(ids[i] >= 0 && ids[i] < nt);
                char d[4096], p[512];
                cr_assert_geq(sl_detokenize(v, ids, k, d, sizeof d), 0);
                for (int64_t i = 0; i < k; i++) cr_assert_geq(sl_token_piece_ex(v, ids[i], c & 1, p, sizeof p), 0);
            }
        }
        sl_vocab_free(v);
    }
}

/* Random small vocabularies (random texts incl. empty/duplicate/invalid UTF-8, random types incl.
 * invalid values, random scores, random merges incl. garbage, random and out-of-range special ids,
 * random flags and pre-tokenizers): loading either succeeds or fails with a message; a loaded
 * vocabulary tokenizes random text with ids in range.  A sanitizer test above all. */
Test(tokenizer_hostile, random_vocabularies, .timeout = 120)
{
    static const char *const pres[] = { "default", "llama-bpe", "gpt-2", "mpt", "falcon", "starcoder", "refact",
                                        "deepseek-llm", "deepseek-coder", "dbrx", "no-such-pre" };
    static const char alpha[] = "ab <>|'s\n\t\xE2\x96\x81\xC4\xA0\xC3\xBC\xFF" "0";
    int loaded = 0;
    for (int round = 0; round < 300; round++) {
        int n = 1 + (int)(rnd() % 40);
        char texts[40][12];
        const char *tp[40];
        size_t tl[40];
        int32_t types[40];
        float scores[40];
        for (int i = 0; i < n; i++) {
            tl[i] = rnd() % 6;
            for (size_t k = 0; k < tl[i]; k++) texts[i][k] = alpha[rnd() % (sizeof alpha - 1)];
            if (rnd() % 8 == 0 && tl[i] == 0) {              /* byte tokens, well formed or not */
                snprintf(texts[i], sizeof texts[i], rnd() % 2 ? "<0x%02X>" : "<0x%X", rnd() % 256);
                tl[i] = strlen(texts[i]);
            }
            tp[i] = texts[i];
            types[i] = (int32_t)(rnd() % 9) - 1;
            scores[i] = (float)(rnd() % 100) - 50.0f;
        }
        bool bpe = rnd() % 2;
        tt_gguf b = { 0 };
        tt_kv_str(&b, "tokenizer.ggml.model", bpe ? "gpt2" : "llama");
        if (bpe && rnd() % 4) tt_kv_str(&b, "tokenizer.ggml.pre", pres[rnd() % (sizeof pres / sizeof pres[0])]);
        tt_kv_strs(&b, "tokenizer.ggml.tokens", tp, tl, (size_t)n);
        if (rnd() % 4) tt_kv_i32s(&b, "tokenizer.ggml.token_type", types, (size_t)(rnd() % 8 ? n : n - 1));
        if (rnd() % 2) tt_kv_f32s(&b, "tokenizer.ggml.scores", scores, (size_t)n);
        if (bpe && rnd() % 8) {
            char mt[30][24];
            const char *mp[30];
            int nm = (int)(rnd() % 30);
            for (int i = 0; i < nm; i++) {
                int x = (int)(rnd() % n), y = (int)(rnd() % n);
                snprintf(mt[i], sizeof mt[i], "%.*s%s%.*s", (int)tl[x], texts[x], rnd() % 6 ? " " : "",
                         (int)tl[y], texts[y]);
                mp[i] = mt[i];
            }
            tt_kv_strs(&b, "tokenizer.ggml.merges", mp, NULL, (size_t)nm);
        }
        if (rnd() % 2) tt_kv_u32(&b, "tokenizer.ggml.bos_token_id", rnd() % 64);
        if (rnd() % 2) tt_kv_u32(&b, "tokenizer.ggml.eos_token_id", rnd() % 64);
        if (rnd() % 2) tt_kv_u32(&b, "tokenizer.ggml.unknown_token_id", rnd() % 64);
        if (rnd() % 2) tt_kv_bool(&b, "tokenizer.ggml.add_eos_token", (int)(rnd() % 2));
        if (rnd() % 4 == 0) tt_kv_bool(&b, "tokenizer.ggml.add_space_prefix", (int)(rnd() % 2));
        char err[256];
        sl_vocab *v = NULL;
        int rc = load_from(&b, &v, err, sizeof err);
        if (rc != 0) {
            cr_assert_lt(rc, 0);
            cr_assert_neq(err[0], 0, "load failed (%d) without a message", rc);
            cr_assert_null(v);
            continue;
        }
        loaded++;
        int32_t nt = sl_vocab_n_tokens(v);
        for (int t = 0; t < 10; t++) {
            char s[64];
            size_t sl = rnd() % sizeof s;
            for (size_t k = 0; k < sl; k++) s[k] = rnd() % 2 ? alpha[rnd() % (sizeof alpha - 1)] : (char)rnd();
            int32_t ids[1024];
            int64_t k = sl_tokenize(v, s, sl, t & 1, t & 2, ids, 1024);
            cr_assert_geq(k, 0);
            for (int64_t i = 0; i < k && i < 1024; i++) cr_assert(ids[i] >= 0 && ids[i] < nt);
            char d[8192];
            cr_assert_geq(sl_detokenize(v, ids, k < 1024 ? k : 1024, d, sizeof d), 0);
        }
        sl_vocab_free(v);
    }
    cr_assert_gt(loaded, 50, "only %d of 300 random vocabularies loaded", loaded);
}
