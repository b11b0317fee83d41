/* tests/test_fuzz_regressions.c — replay saved fuzzer inputs and the hostile corpus in ctest.
 *
 * The harnesses are the fuzz targets themselves (tests/fuzz/fuzz_*.c compiled here with
 * SL_FUZZ_REPLAY, so no libFuzzer entry point), so a replay checks exactly what the fuzzer checked:
 * no crash, no sanitizer report (in the -DSL_SANITIZE=ON build), the loader's contract holds, errors
 * are one line.  Inputs:
 *   tests/fuzz/regressions/gguf-...       (written by scripts/fuzz.sh when the GGUF target fails)
 *   tests/fuzz/regressions/tokenizer-...  (same, tokenizer target)
 *   tests/hostile/NAME.gguf               (the hostile corpus: each must be refused or accepted, cleanly)
 *   the first 64 KiB and the whole of every shared model and vocabulary (the fuzzers' seeds)
 */
#define SL_FUZZ_REPLAY 1
#include "fuzz/fuzz_gguf.c"
#include "fuzz/fuzz_tokenizer.c"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>

#include "hostile_cases.h"

/* Read a whole file (at most `cap` bytes) into a malloc'd buffer. */
static unsigned char *read_all(const char *path, size_t cap, size_t *n)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    size_t want = (size_t)sz < cap ? (size_t)sz : cap;
    unsigned char *b = malloc(want ? want : 1);
    cr_assert_eq(fread(b, 1, want, f), want, "%s: short read", path);
    fclose(f);
    *n = want;
    return b;
}

/* Call fn on every file in dir whose name starts with prefix and ends with suffix.  Returns the count. */
static int replay_dir(const char *dir, const char *prefix, const char *suffix, size_t cap,
                      int (*fn)(const uint8_t *, size_t))
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s: %s (the replay folder must exist: a missing folder would test nothing)", dir, strerror(errno));
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name), sl = strlen(suffix);
        if (e->d_name[0] == '.' || strncmp(e->d_name, prefix, strlen(prefix)) || l < sl || strcmp(e->d_name + l - sl, suffix))
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len;
        unsigned char *b = read_all(path, cap, &len);
        cr_log_info("replay %s (%zu bytes)", path, len);
        fn(b, len);
        free(b);
        n++;
    }
    closedir(d);
    return n;
}

/* Saved finds.  (An abort in the harness ends the test at that file: the log names it.) */
Test(fuzz_regressions, gguf_inputs)
{
    int n = replay_dir(SL_SOURCE_DIR "/tests/fuzz/regressions", "gguf-", "", SIZE_MAX, fuzz_gguf_one);
    cr_expect_geq(n, 1, "no saved GGUF finds replayed (tests/fuzz/regressions holds at least one)");
}

/* The hostile corpus, case by case (cases awaiting a fix elsewhere are test_hostile's hostile_pending). */
Test(fuzz_regressions, hostile_corpus)
{
    for (size_t i = 0; i < N_CASES; i++) {
        if (g_cases[i].pending) continue;
        char path[512];
        snprintf(path, sizeof path, "%s/tests/hostile/%s.gguf", SL_SOURCE_DIR, g_cases[i].name);
        size_t len;
        unsigned char *b = read_all(path, SIZE_MAX, &len);
        fuzz_gguf_one(b, len);
        free(b);
    }
}

Test(fuzz_regressions, gguf_seeds)
{
    int n = replay_dir(SL_SHARED_DIR "/models", "", ".gguf", 65536, fuzz_gguf_one);
    n += replay_dir(SL_SHARED_DIR "/vocab", "", ".gguf", 65536, fuzz_gguf_one);
    cr_expect_geq(n, 20);
    /* whole files: the vocabulary-bearing path of the harness (tokenizer loaded from the metadata) */
    n = replay_dir(SL_SHARED_DIR "/models", "stories260K", ".gguf", SIZE_MAX, fuzz_gguf_one);
    n += replay_dir(SL_SHARED_DIR "/vocab", "ggml-vocab-llama-bpe", ".gguf", SIZE_MAX, fuzz_gguf_one);
    cr_expect_eq(n, 2);
}

Test(fuzz_regressions, tokenizer_inputs)
{
    replay_dir(SL_SOURCE_DIR "/tests/fuzz/regressions", "tokenizer-", "", 1 << 20, fuzz_tokenizer_one);
    /* fixed inputs so the harness runs even with no saved regression: for every vocabulary, invalid
     * UTF-8, NULs, a lone continuation byte, special-token texts with parse_special on and off */
#define S(x) { x, sizeof(x) - 1 }
    static const struct { const char *s; size_t n; } texts[] = {
        S("\xff\xfe\x00\x80 hello"), S("<s></s><|endoftext|><|begin_of_text|>"), S("\xe2\x96\x81\xe2\x96"),
        S("   \n\n\t x"), S("\xf0\x9f\x98\x80\xf0\x9f"), S("a\x00" "b\x00\x00"), S(""),
    };
#undef S
    for (int v = 0; v < TZ_MAX_VOCABS; v++)
        for (size_t t = 0; t < sizeof texts / sizeof *texts; t++)
            for (int flags = 0; flags < 4; flags++) {
                uint8_t in[64] = { (uint8_t)v, (uint8_t)flags };
                cr_assert_leq(texts[t].n, sizeof in - 2);   /* also tells GCC's overflow check the bound */
                memcpy(in + 2, texts[t].s, texts[t].n);
                fuzz_tokenizer_one(in, 2 + texts[t].n);
            }
    cr_expect_geq(g_n_vocab, 10, "only %d vocabularies loaded", g_n_vocab);
}

/* The fuzzer's first find: the documented size query sl_detokenize(v, ids, n, NULL, 0) passed NULL
 * to memcpy (undefined behaviour, reported by UBSan's nonnull-attribute check in the sanitizer build). */
Test(fuzz_regressions, detokenize_size_query_with_null_buffer)
{
    load_vocabs();
    const sl_vocab *v = g_vocab[0];
    int32_t ids[3] = { 1, 300, 400 };
    int64_t n = sl_detokenize(v, ids, 3, NULL, 0);
    cr_assert_gt(n, 0);
    char *buf = malloc((size_t)n);
    cr_expect_eq(sl_detokenize(v, ids, 3, buf, (size_t)n), n);
    free(buf);
}
