/* tests/test_tokenizer.c — tokenizer against llama.cpp's outputs (../shared/golden):
 *   - golden/tokenizer/<vocab>.tsv: 22 hard strings x every vocabulary (SentencePiece and
 *     byte-level BPE), ids with add_special=1 and =0 and the detokenized text, all exact;
 *   - every llref gen .txt of every model: prompt ids (add_special=1, parse_special=0), the prompt
 *     pieces and the pieces of all generated tokens, exact;
 *   - parse_special splitting of control tokens, and the n_max contract.
 * Exactness is the only tolerance: token ids and bytes either match llama.cpp or they do not.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>

#include "tokenizer_testutil.h"

/* Check one golden .tsv against the vocabulary in `model`.  Returns the number of mismatches
 * (each is printed). */
static int check_tsv(const char *model, const char *tsv)
{
    sl_vocab *v = tt_load(model, NULL);
    size_t n;
    char *t = tt_slurp(tsv, &n);
    cr_assert_not_null(t, "cannot read %s", tsv);
    int bad = 0, rows = 0;
    char *save = NULL;
    for (char *line = strtok_r(t, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#') continue;
        char *f[5];
        int k = 0;
        char *p = line;
        f[k++] = p;
        while (k < 5 && (p = strchr(p, '\t'))) { *p++ = 0; f[k++] = p; }
        cr_assert_eq(k, 5, "%s: malformed row", tsv);
        size_t sl = strlen(f[1]);
        char *str = malloc(sl), *exp_text = malloc(strlen(f[4]));
        size_t len = tt_unescape(f[1] + 1, sl - 2, str);
        size_t elen = tt_unescape(f[4] + 1, strlen(f[4]) - 2, exp_text);
        for (int as = 1; as >= 0; as--) {
            int32_t exp[1024], got[1024];
            int ne = tt_parse_ids(as ? f[2] : f[3], exp, 1024);
            int64_t ng = sl_tokenize(v, str, len, as, false, got, 1024);
            if (ng != ne || memcmp(exp, got, sizeof(int32_t) * (size_t)ne) != 0) {
                bad++;
                fprintf(stderr, "%s row %s add_special=%d: expected %d ids, got %lld\n", tsv, f[0], as, ne,
                        (long long)ng);
            }
            if (!as) {
                char d[4096];
                int64_t dl = sl_detokenize(v, got, ng, d, sizeof d);
                if (dl != (int64_t)elen || memcmp(d, exp_text, elen) != 0) {
                    bad++;
                    fprintf(stderr, "%s row %s: detokenize gives \"%.*s\"\n", tsv, f[0], (int)dl, d);
                }
            }
        }
        rows++;
        free(str);
        free(exp_text);
    }
    cr_assert_eq(rows, 22, "%s: expected 22 rows, read %d", tsv, rows);
    free(t);
    sl_vocab_free(v);
    return bad;
}

#define TSV_TEST(name, file, model_path)                                                   \
    Test(tokenizer_golden, name)                                                           \
    {                                                                                      \
        int bad = check_tsv(SL_SHARED_DIR "/" model_path, SL_SHARED_DIR "/golden/tokenizer/" file ".tsv"); \
        cr_assert_eq(bad, 0, "%d mismatches in %s", bad, file);                            \
    }

TSV_TEST(llama_spm, "ggml-vocab-llama-spm", "vocab/ggml-vocab-llama-spm.gguf")
TSV_TEST(baichuan, "ggml-vocab-baichuan", "vocab/ggml-vocab-baichuan.gguf")
TSV_TEST(phi3, "ggml-vocab-phi-3", "vocab/ggml-vocab-phi-3.gguf")
TSV_TEST(stories260k, "stories260K", "models/stories260K.gguf")
TSV_TEST(llama_bpe, "ggml-vocab-llama-bpe.rebuilt", "vocab/ggml-vocab-llama-bpe.rebuilt.gguf")
TSV_TEST(gpt2, "ggml-vocab-gpt-2", "vocab/ggml-vocab-gpt-2.gguf")
TSV_TEST(gpt_neox, "ggml-vocab-gpt-neox", "vocab/ggml-vocab-gpt-neox.gguf")
TSV_TEST(mpt, "ggml-vocab-mpt", "vocab/ggml-vocab-mpt.gguf")
TSV_TEST(falcon, "ggml-vocab-falcon", "vocab/ggml-vocab-falcon.gguf")
TSV_TEST(starcoder, "ggml-vocab-starcoder", "vocab/ggml-vocab-starcoder.gguf")
TSV_TEST(refact, "ggml-vocab-refact", "vocab/ggml-vocab-refact.gguf")
TSV_TEST(deepseek_coder, "ggml-vocab-deepseek-coder", "vocab/ggml-vocab-deepseek-coder.gguf")
TSV_TEST(deepseek_llm, "ggml-vocab-deepseek-llm", "vocab/ggml-vocab-deepseek-llm.gguf")
TSV_TEST(qwen2, "ggml-vocab-qwen2.rebuilt", "vocab/ggml-vocab-qwen2.rebuilt.gguf")
/* gpt-oss (o200k_harmony): llama.cpp's ids and tiktoken's o200k_base encode_ordinary ids; the two
 * agree on these 22 strings (see test_tokenizer_o200k.c for where they do not). */
TSV_TEST(gpt_oss, "ggml-vocab-gpt-oss", "vocab/ggml-vocab-gpt-oss.gguf")
TSV_TEST(gpt_oss_tiktoken, "ggml-vocab-gpt-oss.tiktoken", "vocab/ggml-vocab-gpt-oss.gguf")

/* Family and pre-tokenizer as the metadata says (gpt-neox has no tokenizer.ggml.pre). */
Test(tokenizer_golden, families)
{
    static const struct { const char *file, *family, *pre; } want[] = {
        { "vocab/ggml-vocab-llama-spm.gguf", "llama", "default" },
        { "vocab/ggml-vocab-llama-bpe.rebuilt.gguf", "gpt2", "llama-bpe" },
        { "vocab/ggml-vocab-gpt-neox.gguf", "gpt2", "default" },
        { "vocab/ggml-vocab-deepseek-llm.gguf", "gpt2", "deepseek-llm" },
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", SL_SHARED_DIR, want[i].file);
        sl_vocab *v = tt_load(path, NULL);
        cr_assert_str_eq(sl_vocab_family(v), want[i].family);
        if (strcmp(want[i].family, "gpt2") == 0) cr_assert_str_eq(sl_vocab_pre(v), want[i].pre);
        sl_vocab_free(v);
    }
}

/* Read a C-escaped quoted string starting at or after *p; advances *p past the closing quote.
 * Returns the decoded length, or -1 if there is none. */
static long read_quoted(const char **p, char *out)
{
    const char *s = strchr(*p, '"');
    if (!s) return -1;
    const char *e = s + 1;
    while (*e && *e != '"') e += (*e == '\\' && e[1]) ? 2 : 1;
    if (*e != '"') return -1;
    size_t n = tt_unescape(s + 1, (size_t)(e - s - 1), out);
    *p = e + 1;
    return (long)n;
}

/* Check one llref gen .txt: prompt ids, prompt pieces, and the piece of every generated token.
 * `cache`/`cache_path` keep the last vocabulary loaded (many files share a model). */
static int check_gen_txt(const char *path, sl_vocab **cache, char *cache_path, int *n_pieces)
{
    char *t = tt_slurp(path, NULL);
    cr_assert_not_null(t);
    int bad = 0;
    char prompt[1024];
    long plen = -1;
    int32_t exp_ids[256];
    int n_exp = -1;
    char *save = NULL;
    for (char *line = strtok_r(t, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "# llref gen: model=models/", 26) == 0) {
            char model[512];
            const char *m = line + 26;
            size_t ml = strcspn(m, " ");
            snprintf(model, sizeof model, "%s/models/%.*s", SL_SHARED_DIR, (int)ml, m);
            if (strcmp(model, cache_path) != 0) {
                sl_vocab_free(*cache);
                *cache = tt_load(model, NULL);
                snprintf(cache_path, 512, "%s", model);
            }
        } else if (strncmp(line, "# prompt: ", 10) == 0) {
            const char *q = line + 10;
            plen = read_quoted(&q, prompt);
        } else if (strncmp(line, "# prompt_tokens (", 17) == 0) {
            const char *c = strchr(line, ':');
            n_exp = tt_parse_ids(c + 1, exp_ids, 256);
            cr_assert_gt(plen, -1, "%s: prompt_tokens before prompt", path);
            int32_t got[256];
            int64_t ng = sl_tokenize(*cache, prompt, (size_t)plen, true, false, got, 256);
            if (ng != n_exp || memcmp(got, exp_ids, sizeof(int32_t) * (size_t)n_exp) != 0) {
                bad++;
                fprintf(stderr, "%s: prompt ids differ (%lld vs %d)\n", path, (long long)ng, n_exp);
            }
        } else if (strncmp(line, "# prompt_pieces: ", 17) == 0) {
            const char *q = line + 17;
            char want[256], got[256];
            for (int i = 0; i < n_exp; i++) {
                long wl = read_quoted(&q, want);
                int gl = sl_token_piece_ex(*cache, exp_ids[i], true, got, sizeof got);
                if (wl < 0 || gl != wl || memcmp(want, got, (size_t)gl) != 0) {
                    bad++;
                    fprintf(stderr, "%s: piece of prompt token %d differs\n", path, exp_ids[i]);
                }
            }
        } else if (line[0] >= '0' && line[0] <= '9') {
            /* step <TAB> id <TAB> "piece" <TAB> top5 */
            const char *q = strchr(line, '\t');
            int32_t id = (int32_t)strtol(q + 1, NULL, 10);
            char want[256], got[256];
            long wl = read_quoted(&q, want);
            int gl = sl_token_piece_ex(*cache, id, true, got, sizeof got);
            (*n_pieces)++;
            if (wl < 0 || gl != wl || memcmp(want, got, (size_t)gl) != 0) {
                bad++;
                fprintf(stderr, "%s: piece of generated token %d differs\n", path, id);
            }
        }
    }
    cr_assert_gt(n_exp, 0, "%s: no prompt_tokens line", path);
    free(t);
    return bad;
}

/* Every .txt under golden/<model>/ and golden/<model>/noamx/. */
Test(tokenizer_golden, model_prompts_and_pieces)
{
    static const char *dirs[] = { "micro-llama", "micro-llama/noamx", "micro-tied", "micro-tied/noamx",
                                  "mini-llama3", "mini-llama3/noamx", "spm32k-llama", "spm32k-llama/noamx",
                                  "stories260K" };
    sl_vocab *cache = NULL;
    char cache_path[512] = "";
    int files = 0, bad = 0, pieces = 0;
    for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
        char dp[512];
        snprintf(dp, sizeof dp, "%s/golden/%s", SL_SHARED_DIR, dirs[d]);
        DIR *dir = opendir(dp);
        if (!dir) continue;                /* noamx copies exist only for some models */
        struct dirent *e;
        while ((e = readdir(dir))) {
            size_t l = strlen(e->d_name);
            if (l < 5 || strcmp(e->d_name + l - 4, ".txt") != 0 || strstr(e->d_name, "prompt_tokens"))
                continue;
            char fp[1024];
            snprintf(fp, sizeof fp, "%s/%s", dp, e->d_name);
            bad += check_gen_txt(fp, &cache, cache_path, &pieces);
            files++;
        }
        closedir(dir);
    }
    sl_vocab_free(cache);
    cr_assert_geq(files, 40, "only %d llref gen files found", files);
    cr_assert_geq(pieces, 32 * files, "only %d generated-token pieces checked", pieces);
    cr_assert_eq(bad, 0, "%d mismatches over %d files", bad, files);
}

/* The prompt_tokens.txt files (BOS included) against the prompts of the same-named .txt. */
Test(tokenizer_golden, prompt_token_files)
{
    static const struct { const char *model, *prompt, *file; } cases[] = {
        { "spm32k-llama.Q4_K_M.gguf", "The capital of France is", "spm32k-llama/p3_capital" },
        { "spm32k-llama.Q4_K_M.gguf", "Once upon a time", "spm32k-llama/p1_once" },
        { "spm32k-llama.Q4_K_M.gguf", "The little dog ran", "spm32k-llama/p2_dog_ran" },
        { "micro-llama.Q8_0.gguf", "The little dog ran", "micro-llama/p2_dog_ran" },
        { "mini-llama3.Q8_0.gguf", "Once upon a time", "mini-llama3/p1_once" },
        { "stories260K.gguf", "Lily and Tom went to the park", "stories260K/p3_lily_tom" },
        { "stories260K.gguf", "", "stories260K/p4_bos" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char mp[512], fp[512];
        snprintf(mp, sizeof mp, "%s/models/%s", SL_SHARED_DIR, cases[i].model);
        snprintf(fp, sizeof fp, "%s/golden/%s.prompt_tokens.txt", SL_SHARED_DIR, cases[i].file);
        char *t = tt_slurp(fp, NULL);
        cr_assert_not_null(t, "%s", fp);
        int32_t exp[256], got[256];
        int ne = tt_parse_ids(t, exp, 256);
        free(t);
        sl_vocab *v = tt_load(mp, NULL);
        int64_t ng = sl_tokenize(v, cases[i].prompt, strlen(cases[i].prompt), true, false, got, 256);
        cr_assert_eq(ng, ne, "%s", fp);
        cr_assert_arr_eq(got, exp, sizeof(int32_t) * (size_t)ne, "%s", fp);
        sl_vocab_free(v);
    }
}

/* parse_special: control texts become their ids only when asked.  Expected ids are the vocab's
 * own (<|begin_of_text|> 128000, <|eot_id|> 128009 in Llama 3; "Hello" is 9906 per the tsv). */
Test(tokenizer_special, parse_special_llama3)
{
    sl_vocab *v = tt_load(SL_SHARED_DIR "/vocab/ggml-vocab-llama-bpe.rebuilt.gguf", NULL);
    const char *s = "<|begin_of_text|>Hello<|eot_id|>";
    int32_t ids[64];
    int64_t n = sl_tokenize(v, s, strlen(s), true, true, ids, 64);
    cr_assert_eq(n, 4);
    cr_assert_eq(ids[0], 128000);
    cr_assert_eq(ids[1], 128000);
    cr_assert_eq(ids[2], 9906);
    cr_assert_eq(ids[3], 128009);
    cr_assert(sl_vocab_is_eog(v, 128009));
    cr_assert(sl_vocab_is_eog(v, sl_vocab_eos(v)));
    cr_assert(!sl_vocab_is_eog(v, 9906));
    cr_assert_eq(sl_vocab_eot(v), 128009);
    /* Without parse_special the same text is plain text: many more ids, no 128009. */
    n = sl_tokenize(v, s, strlen(s), false, false, ids, 64);
    cr_assert_gt(n, 4);
    for (int64_t i = 0; i < n; i++) cr_assert_neq(ids[i], 128009);
    /* Pieces: control tokens are empty unless special=true. */
    char buf[64];
    cr_assert_eq(sl_token_piece(v, 128009, buf, sizeof buf), 0);
    cr_assert_eq(sl_token_piece_ex(v, 128009, true, buf, sizeof buf), 10);
    cr_assert(memcmp(buf, "<|eot_id|>", 10) == 0);
    sl_vocab_free(v);
}

/* SPM: "<s>" inside text with parse_special; the text after a special token gets the space prefix
 * again (llama.cpp's is_prev_special), so "<s>Hello" == BOS BOS + tokens of " Hello". */
Test(tokenizer_special, parse_special_spm)
{
    sl_vocab *v = tt_load(SL_SHARED_DIR "/vocab/ggml-vocab-llama-spm.gguf", NULL);
    int32_t a[64], b[64];
    int64_t na = sl_tokenize(v, "<s>Hello world", 14, true, true, a, 64);
    int64_t nb = sl_tokenize(v, "Hello world", 11, false, false, b, 64);
    cr_assert_eq(na, nb + 2);
    cr_assert_eq(a[0], 1);
    cr_assert_eq(a[1], 1);
    cr_assert_arr_eq(a + 2, b, sizeof(int32_t) * (size_t)nb);
    cr_assert_eq(b[0], 15043);      /* "▁Hello" per the tsv */
    sl_vocab_free(v);
}

/* n_max: the full count is returned, only n_max ids are written. */
Test(tokenizer_special, n_max_contract)
{
    sl_vocab *v = tt_load(SL_SHARED_DIR "/vocab/ggml-vocab-llama-spm.gguf", NULL);
    const char *s = "Once upon a time, there was a little girl named Lily.";
    int32_t full[64], part[8];
    int64_t n = sl_tokenize(v, s, strlen(s), true, false, full, 64);
    cr_assert_gt(n, 8);
    for (int i = 0; i < 8; i++) part[i] = -7;
    cr_assert_eq(sl_tokenize(v, s, strlen(s), true, false, part, 5), n);
    cr_assert_arr_eq(part, full, 5 * sizeof(int32_t));
    cr_assert_eq(part[5], -7);
    cr_assert_eq(sl_tokenize(v, s, strlen(s), true, false, NULL, 0), n);
    /* Detokenize with a short buffer: full length back, prefix written. */
    char big[256], small[4];
    int64_t dl = sl_detokenize(v, full, n, big, sizeof big);
    cr_assert_eq(sl_detokenize(v, full, n, small, sizeof small), dl);
    cr_assert(memcmp(small, big, sizeof small) == 0);
    cr_assert_eq(sl_detokenize(v, (int32_t[]){ 5, 32000 }, 2, big, sizeof big), -EINVAL);
    cr_assert_eq(sl_token_piece(v, -1, big, sizeof big), -EINVAL);
    sl_vocab_free(v);
}
