/* tests/fuzz/fuzz_tokenizer.c — libFuzzer target: tokenization and detokenization of any bytes.
 *
 * The vocabularies are real ones, loaded once: stories260K (SentencePiece, 512 tokens) and every
 * vocab-only GGUF in shared/vocab (SentencePiece 32k, Llama 3 / GPT-2 / Falcon / DeepSeek /
 * StarCoder / ... byte-level BPE with their pre-tokenizer regexes).  The vocabulary *metadata* is
 * fuzzed by fuzz_gguf; this target fuzzes the text.
 *
 * Input: byte 0 picks the vocabulary, byte 1 the flags (bit 0 add_special, bit 1 parse_special),
 * the rest is the text (any bytes: invalid UTF-8, NULs, special-token texts).  Checked: both calls
 * of the two-call protocol agree; every id is in range; every piece and the detokenized text can be
 * produced; the UTF-8 output stream emits exactly the bytes it was fed.  A violation aborts.
 *
 * Build and run: scripts/fuzz.sh (SL_SHARED_DIR names the reference data).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/gguf.h"
#include "runtime/text/tokenizer.h"

#define TZ_CHECK(cond) do { if (!(cond)) { fprintf(stderr, "fuzz_tokenizer: check failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); abort(); } } while (0)

#define TZ_MAX_VOCABS 32

static sl_vocab *g_vocab[TZ_MAX_VOCABS];
static sl_gguf *g_gguf[TZ_MAX_VOCABS];
static int g_n_vocab;

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void load_one(const char *path)
{
    char err[SL_ERRLEN];
    sl_gguf *g;
    sl_vocab *v;
    if (g_n_vocab >= TZ_MAX_VOCABS) return;
    if (sl_gguf_open(path, &g, err, sizeof err)) { fprintf(stderr, "fuzz_tokenizer: %s\n", err); return; }
    if (sl_vocab_load(g, &v, err, sizeof err)) {
        fprintf(stderr, "fuzz_tokenizer: skipping %s: %s\n", path, err);
        sl_gguf_close(g);
        return;
    }
    g_gguf[g_n_vocab] = g;
    g_vocab[g_n_vocab++] = v;
}

/* Load the vocabularies in a fixed order (sorted names), so that byte 0 means the same vocabulary
 * in every run and every saved input replays the same way. */
static void load_vocabs(void)
{
    if (g_n_vocab) return;
    load_one(SL_SHARED_DIR "/models/stories260K.gguf");
    DIR *d = opendir(SL_SHARED_DIR "/vocab");
    char *names[64];
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) && n < 64;) {
        size_t l = strlen(e->d_name);
        if (l > 5 && !strcmp(e->d_name + l - 5, ".gguf")) names[n++] = strdup(e->d_name);
    }
    if (d) closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; i < n; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/vocab/%s", SL_SHARED_DIR, names[i]);
        load_one(path);
        free(names[i]);
    }
    TZ_CHECK(g_n_vocab > 0);
}

static int fuzz_tokenizer_one(const uint8_t *data, size_t size)
{
    load_vocabs();
    if (size < 2) return 0;
    const sl_vocab *v = g_vocab[data[0] % g_n_vocab];
    const bool add_special = data[1] & 1, parse_special = data[1] & 2;
    const char *text = (const char *)data + 2;
    const size_t len = size - 2;
    const int32_t n_tok = sl_vocab_n_tokens(v);

    int64_t n = sl_tokenize(v, text, len, add_special, parse_special, NULL, 0);
    TZ_CHECK(n >= 0);
    if (n == 0) return 0;
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    TZ_CHECK(ids);
    TZ_CHECK(sl_tokenize(v, text, len, add_special, parse_special, ids, n) == n);
    /* a buffer one short must report the same total and write only what fits */
    if (n > 1) TZ_CHECK(sl_tokenize(v, text, len, add_special, parse_special, ids, n - 1) == n);
    TZ_CHECK(sl_tokenize(v, text, len, add_special, parse_special, ids, n) == n);
    for (int64_t i = 0; i < n; i++) TZ_CHECK(ids[i] >= 0 && ids[i] < n_tok);

    /* pieces through the UTF-8 stream: every byte fed comes out exactly once, in order */
    sl_utf8_stream us = { 0 };
    size_t fed = 0, emitted = 0;
    char piece[256], out[256 + 8];
    for (int64_t i = 0; i < n; i++) {
        int pl = sl_token_piece_ex(v, ids[i], i & 1, piece, sizeof piece);
        TZ_CHECK(pl >= 0);
        if (pl > (int)sizeof piece) pl = (int)sizeof piece;
        size_t r = sl_utf8_stream_feed(&us, piece, (size_t)pl, out);
        TZ_CHECK(r <= (size_t)pl + 8);
        fed += (size_t)pl;
        emitted += r;
    }
    emitted += sl_utf8_stream_flush(&us, out);
    TZ_CHECK(fed == emitted);

    /* detokenize: the two-call protocol agrees, and a short buffer is not overrun (ASan sees it) */
    char none[1];   /* (NULL, 0) is tested in test_fuzz_regressions: see fuzz_gguf.c */
    int64_t dl = sl_detokenize(v, ids, n, none, 0);
    TZ_CHECK(dl >= 0);
    char *dt = malloc((size_t)dl + 1);
    TZ_CHECK(dt);
    TZ_CHECK(sl_detokenize(v, ids, n, dt, (size_t)dl) == dl);
    if (dl > 1) {
        char *shortbuf = malloc((size_t)dl / 2);
        TZ_CHECK(sl_detokenize(v, ids, n, shortbuf, (size_t)dl / 2) == dl);
        free(shortbuf);
    }
    free(dt);
    free(ids);
    return 0;
}

#ifndef SL_FUZZ_REPLAY
/* Load the vocabularies before the first input: it takes seconds under ASan, which must not count
 * against the first input's timeout. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    load_vocabs();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_tokenizer_one(data, size); }
#endif
