/* runtime/text/tokenizer.c — vocabulary loading from GGUF metadata (llama.cpp llama_vocab::load rules),
 * special-token bookkeeping and the small public accessors.
 *
 * Tokenizing and detokenizing live in tokenizer_text.c, the SentencePiece merge loop in
 * tokenizer_spm.c, byte-level BPE in tokenizer_bpe.c and its pre-tokenizer in tokenizer_pre.c,
 * the hash tables (and the merge-list loader) in tokenizer_table.c.
 */
#include "loader/errmsg.h"
#include "runtime/text/tokenizer_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Errors quote bytes from the file: sl_errf (loader/errmsg.c) escapes control characters. */
#define fail sl_errf

/* ---------------------------------------------------------------- loading */

/* tokenizer.ggml.pre value -> rule set and the flags llama.cpp ties to it.  -1 if unsupported. */
static int pre_lookup(const char *name, sl_vocab *v)
{
    static const struct { const char *name; int pre; int clean; int llama3; } map[] = {
        { "default", SL_PRE_DEFAULT, 1, 0 },
        { "llama3", SL_PRE_LLAMA3, 1, 1 }, { "llama-v3", SL_PRE_LLAMA3, 1, 1 },
        { "llama-bpe", SL_PRE_LLAMA3, 1, 1 }, { "falcon3", SL_PRE_LLAMA3, 1, 1 },
        { "dbrx", SL_PRE_LLAMA3, 1, 0 }, { "smaug-bpe", SL_PRE_LLAMA3, 1, 0 },
        { "chatglm-bpe", SL_PRE_LLAMA3, 1, 0 },
        { "deepseek-llm", SL_PRE_DEEPSEEK_LLM, 0, 0 },
        { "deepseek-coder", SL_PRE_DEEPSEEK_CODER, 0, 0 },
        { "falcon", SL_PRE_FALCON, 1, 0 },
        { "mpt", SL_PRE_GPT2, 1, 0 }, { "olmo", SL_PRE_GPT2, 1, 0 }, { "jais", SL_PRE_GPT2, 1, 0 },
        { "gpt-2", SL_PRE_GPT2, 1, 0 }, { "phi-2", SL_PRE_GPT2, 1, 0 }, { "jina-es", SL_PRE_GPT2, 1, 0 },
        { "jina-de", SL_PRE_GPT2, 1, 0 }, { "gigachat", SL_PRE_GPT2, 1, 0 },
        { "jina-v1-en", SL_PRE_GPT2, 1, 0 }, { "jina-v2-es", SL_PRE_GPT2, 1, 0 },
        { "jina-v2-de", SL_PRE_GPT2, 1, 0 }, { "jina-v2-code", SL_PRE_GPT2, 1, 0 },
        { "roberta-bpe", SL_PRE_GPT2, 1, 0 },
        { "starcoder", SL_PRE_STARCODER, 1, 0 }, { "refact", SL_PRE_STARCODER, 1, 0 },
        { "command-r", SL_PRE_STARCODER, 0, 0 }, { "smollm", SL_PRE_STARCODER, 0, 0 },
        { "codeshell", SL_PRE_STARCODER, 1, 0 }, { "exaone", SL_PRE_STARCODER, 1, 0 },
        { "minerva-7b", SL_PRE_STARCODER, 1, 0 },
        { "qwen2", SL_PRE_QWEN2, 0, 0 }, { "deepseek-r1-qwen", SL_PRE_QWEN2, 0, 0 },
        { "gpt-4o", SL_PRE_GPT4O, 0, 0 },
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        if (strcmp(map[i].name, name) != 0) continue;
        v->pre = map[i].pre;
        v->clean_spaces = map[i].clean;
        if (map[i].llama3) { v->ignore_merges = true; v->add_bos = true; }
        if (strcmp(name, "chatglm-bpe") == 0) v->bos = -1;
        /* o200k (gpt-oss) follows tiktoken, the encoder the model was trained with, where it and
         * llama.cpp differ: a pre-token that is a token is taken whole, and merges go by the merged
         * token's rank (leftmost first on ties).  No BOS: llama.cpp adds none for this vocabulary. */
        if (map[i].pre == SL_PRE_GPT4O) { v->ignore_merges = true; v->rank_by_token = true; }
        return 0;
    }
    return -1;
}

/* Copy the token texts into the arena and fill the string table (duplicates are an error:
 * llama.cpp asserts on them).  An empty text becomes "[EMPTY_<id>]" as in llama.cpp. */
static int load_tokens(sl_vocab *v, const sl_gguf *g, int64_t kv, uint64_t n, char *err, size_t errlen)
{
    size_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        sl_str s = sl_gguf_arr_str(g, kv, i);
        total += s.len ? s.len : 32;
        if (total > UINT32_MAX)
            return fail(err, errlen, -E2BIG, "vocab: token texts exceed 4 GiB");
    }
    v->arena_cap = total + 1;
    v->arena = malloc(v->arena_cap);
    v->strs = malloc((size_t)n * sizeof *v->strs);
    if (!v->arena || !v->strs)
        return fail(err, errlen, -ENOMEM, "vocab: out of memory for %llu tokens", (unsigned long long)n);
    v->mem += v->arena_cap + (size_t)n * sizeof *v->strs;
    int rc = sl_table_resize(v, (size_t)n + n / 16);  /* room for a few merge-only strings */
    if (rc) return fail(err, errlen, rc, "vocab: out of memory");
    uint32_t *hash = malloc((size_t)n * sizeof *hash);
    if (!hash) return fail(err, errlen, -ENOMEM, "vocab: out of memory");
    for (uint64_t i = 0; i < n; i++) {
        sl_str s = sl_gguf_arr_str(g, kv, i);
        char tmp[32];
        const char *p = s.ptr;
        size_t len = s.len;
        if (len == 0) {
            len = (size_t)snprintf(tmp, sizeof tmp, "[EMPTY_%llu]", (unsigned long long)i);
            p = tmp;
        }
        memcpy(v->arena + v->arena_len, p, len);
        v->strs[i] = (sl_vstr){ .off = (uint32_t)v->arena_len, .len = (uint32_t)len,
                                .score = 0.0f, .attr = SL_ATTR_NORMAL };
        v->arena_len += len;
        hash[i] = sl_vocab_hash(p, len);
    }
    v->n_strs = (int32_t)n;
    /* Insert with a duplicate check in the same probe; slots are prefetched 16 tokens ahead. */
    for (uint64_t i = 0; i < n; i++) {
        if (i + 16 < n) __builtin_prefetch(&v->hslot[sl_slot_of(hash[i + 16], v->hmask)]);
        const sl_vstr *st = &v->strs[i];
        uint32_t k = sl_slot_of(hash[i], v->hmask);
        for (; v->hslot[k].id >= 0; k = (k + 1) & v->hmask) {
            const sl_hslot *o = &v->hslot[k];
            if (o->hash == hash[i] && o->len == st->len && memcmp(v->arena + o->off, v->arena + st->off, st->len) == 0) {
                free(hash);
                return fail(err, errlen, -EINVAL, "vocab: token %llu duplicates the text of token %d",
                            (unsigned long long)i, o->id);
            }
        }
        v->hslot[k] = (sl_hslot){ .id = (int32_t)i, .hash = hash[i], .off = st->off, .len = st->len };
    }
    free(hash);
    return 0;
}

/* Scores (optional, float array) and token types (optional, integer array): when present they
 * must have one entry per token — llama.cpp would read past the end otherwise. */
static int load_scores_types(sl_vocab *v, const sl_gguf *g, uint64_t n, char *err, size_t errlen)
{
    int et;
    uint64_t m;
    if (sl_gguf_get_arr(g, "tokenizer.ggml.scores", &et, &m)) {
        if (et != SL_GGUF_F32 && et != SL_GGUF_F64)
            return fail(err, errlen, -EINVAL, "vocab: tokenizer.ggml.scores is not a float array");
        if (m != n)
            return fail(err, errlen, -EINVAL, "vocab: %llu scores for %llu tokens",
                        (unsigned long long)m, (unsigned long long)n);
        int64_t kv = sl_gguf_arr_kv(g, "tokenizer.ggml.scores");
        for (uint64_t i = 0; i < n; i++)
            if (!sl_gguf_arr_f32(g, kv, i, &v->strs[i].score))
                return fail(err, errlen, -EINVAL, "vocab: unreadable score %llu", (unsigned long long)i);
    }
    if (sl_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &m)) {
        if (et == SL_GGUF_STRING || et == SL_GGUF_F32 || et == SL_GGUF_F64 || et == SL_GGUF_ARRAY ||
            et == SL_GGUF_BOOL)
            return fail(err, errlen, -EINVAL, "vocab: tokenizer.ggml.token_type is not an integer array");
        if (m != n)
            return fail(err, errlen, -EINVAL, "vocab: %llu token types for %llu tokens",
                        (unsigned long long)m, (unsigned long long)n);
        int64_t kv = sl_gguf_arr_kv(g, "tokenizer.ggml.token_type");
        /* llama_token_type -> llama_token_attr; unknown values are UNDEFINED as in llama.cpp. */
        static const uint32_t attr_of[7] = { SL_ATTR_UNDEFINED, SL_ATTR_NORMAL, SL_ATTR_UNKNOWN,
            SL_ATTR_CONTROL, SL_ATTR_USER_DEFINED, SL_ATTR_UNUSED, SL_ATTR_BYTE };
        for (uint64_t i = 0; i < n; i++) {
            int64_t t = -1;
            if (!sl_gguf_arr_i64(g, kv, i, &t))
                return fail(err, errlen, -EINVAL, "vocab: unreadable token type %llu", (unsigned long long)i);
            v->strs[i].attr = (t >= 0 && t < 7) ? attr_of[t] : SL_ATTR_UNDEFINED;
        }
    }
    return 0;
}

/* Token id of an exact text, or -1. */
static int32_t tok_by_text(const sl_vocab *v, const char *s)
{
    int32_t id = sl_vocab_find(v, s, strlen(s));
    return id < v->n_tokens ? id : -1;
}

/* o200k_harmony (gpt-oss), as llama.cpp (2026) does it by token text: the harmony markers
 * <|channel|> <|message|> <|start|> <|constrain|> become USER_DEFINED, so their pieces show in
 * the generated text (runtime/text/harmony.c splits the channels on them); and when <|return|>,
 * <|call|> and <|end|> all end generation, <|end|> does not (it closes the analysis message the model
 * follows with the final one) and becomes USER_DEFINED too. */
static void harmony_tokens(sl_vocab *v)
{
    static const char *const marks[] = { "<|channel|>", "<|message|>", "<|start|>", "<|constrain|>" };
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++) {
        int32_t id = tok_by_text(v, marks[i]);
        if (id >= 0) v->strs[id].attr = SL_ATTR_USER_DEFINED;
    }
    int32_t ret = tok_by_text(v, "<|return|>"), call = tok_by_text(v, "<|call|>"), end = tok_by_text(v, "<|end|>");
    bool has_ret = false, has_call = false, has_end = false;
    for (int32_t i = 0; i < v->n_eog; i++) {
        has_ret |= v->eog[i] == ret;
        has_call |= v->eog[i] == call;
        has_end |= v->eog[i] == end;
    }
    if (!(ret >= 0 && call >= 0 && end >= 0 && has_ret && has_call && has_end)) return;
    int32_t k = 0;
    for (int32_t i = 0; i < v->n_eog; i++)
        if (v->eog[i] != end) v->eog[k++] = v->eog[i];
    v->n_eog = k;
    v->strs[end].attr = SL_ATTR_USER_DEFINED;
}

/* Special ids: metadata overrides the family defaults when in range (else llama.cpp warns and
 * keeps the default); then the text-based detection of EOT/EOM/FIM tokens, which also forces
 * those tokens to CONTROL (changing how text is split), and the end-of-generation set. */
static int setup_special(sl_vocab *v, const sl_gguf *g)
{
    struct { const char *key; int32_t *id; } keys[] = {
        { "tokenizer.ggml.bos_token_id", &v->bos }, { "tokenizer.ggml.eos_token_id", &v->eos },
        { "tokenizer.ggml.eot_token_id", &v->eot }, { "tokenizer.ggml.eom_token_id", &v->eom },
        { "tokenizer.ggml.unknown_token_id", &v->unk }, { "tokenizer.ggml.seperator_token_id", &v->sep },
        { "tokenizer.ggml.padding_token_id", &v->pad }, { "tokenizer.ggml.mask_token_id", &v->mask },
        { "tokenizer.ggml.fim_pre_token_id", &v->fim_pre }, { "tokenizer.ggml.fim_suf_token_id", &v->fim_suf },
        { "tokenizer.ggml.fim_mid_token_id", &v->fim_mid }, { "tokenizer.ggml.fim_pad_token_id", &v->fim_pad },
        { "tokenizer.ggml.fim_rep_token_id", &v->fim_rep }, { "tokenizer.ggml.fim_sep_token_id", &v->fim_sep },
        { "tokenizer.ggml.prefix_token_id", &v->fim_pre }, { "tokenizer.ggml.suffix_token_id", &v->fim_suf },
        { "tokenizer.ggml.middle_token_id", &v->fim_mid },
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        uint32_t id;
        if (sl_gguf_get_u32(g, keys[i].key, &id) && id < (uint32_t)v->n_tokens)
            *keys[i].id = (int32_t)id;
    }
    /* A default that does not exist in this vocabulary means "none" (llama.cpp would crash later). */
    int32_t *all[] = { &v->bos, &v->eos, &v->eot, &v->eom, &v->unk, &v->sep, &v->pad, &v->mask,
                       &v->fim_pre, &v->fim_suf, &v->fim_mid, &v->fim_pad, &v->fim_rep, &v->fim_sep };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (*all[i] >= v->n_tokens) *all[i] = -1;

    bool b;
    if (sl_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b)) v->add_bos = b;
    if (sl_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b)) v->add_eos = b;

    /* Text-based detection, first match in id order (llama.cpp walks a hash map). */
    static const char *const eot_txt[] = { "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
        "<|endoftext|>", "<EOT>", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", NULL };
    static const char *const eom_txt[] = { "<|eom_id|>", NULL };
    static const char *const pre_txt[] = { "<|fim_prefix|>", "<fim-prefix>",
        "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", "<PRE>", NULL };
    static const char *const suf_txt[] = { "<|fim_suffix|>", "<fim-suffix>",
        "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>", "<SUF>", NULL };
    static const char *const mid_txt[] = { "<|fim_middle|>", "<fim-middle>",
        "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", "<MID>", NULL };
    static const char *const pad_txt[] = { "<|fim_pad|>", "<fim-pad>", "<PAD>", NULL };
    static const char *const rep_txt[] = { "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", NULL };
    static const char *const sep_txt[] = { "<|file_sep|>", NULL };
    struct { const char *const *txt; int32_t *id; } det[] = {
        { eot_txt, &v->eot }, { eom_txt, &v->eom }, { pre_txt, &v->fim_pre }, { suf_txt, &v->fim_suf },
        { mid_txt, &v->fim_mid }, { pad_txt, &v->fim_pad }, { rep_txt, &v->fim_rep }, { sep_txt, &v->fim_sep },
    };
    for (size_t d = 0; d < sizeof det / sizeof det[0]; d++) {
        if (*det[d].id >= 0) continue;
        int32_t best = -1;
        for (const char *const *t = det[d].txt; *t; t++) {
            int32_t id = tok_by_text(v, *t);
            if (id >= 0 && (best < 0 || id < best)) best = id;
        }
        if (best >= 0) {
            *det[d].id = best;
            if (!(v->strs[best].attr & SL_ATTR_CONTROL)) v->strs[best].attr = SL_ATTR_CONTROL;
        }
    }

    static const char *const eog_txt[] = { "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",
        "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>" };
    int32_t cand[16];
    int nc = 0;
    int32_t fixed[] = { v->fim_pad, v->fim_rep, v->fim_sep, v->eos, v->eot, v->eom };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (fixed[i] >= 0) cand[nc++] = fixed[i];
    for (size_t i = 0; i < sizeof eog_txt / sizeof eog_txt[0]; i++) {
        int32_t id = tok_by_text(v, eog_txt[i]);
        if (id < 0) continue;
        if (!(v->strs[id].attr & SL_ATTR_CONTROL)) v->strs[id].attr = SL_ATTR_CONTROL;
        cand[nc++] = id;
    }
    /* Sort and dedupe (at most 13 entries). */
    for (int i = 1; i < nc; i++)
        for (int j = i; j > 0 && cand[j - 1] > cand[j]; j--) {
            int32_t t = cand[j]; cand[j] = cand[j - 1]; cand[j - 1] = t;
        }
    v->eog = malloc(sizeof(int32_t) * (nc ? (size_t)nc : 1));
    if (!v->eog) return -ENOMEM;
    v->mem += sizeof(int32_t) * (nc ? (size_t)nc : 1);
    for (int i = 0; i < nc; i++)
        if (v->n_eog == 0 || v->eog[v->n_eog - 1] != cand[i]) v->eog[v->n_eog++] = cand[i];
    harmony_tokens(v);
    return 0;
}

/* Sort keys for the special-token cache: longest text first, equal lengths by id.  llama.cpp uses
 * std::sort here (unspecified order among equal lengths); that order only matters when two
 * equal-length special texts overlap in the input. */
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Special-token cache (CONTROL, USER_DEFINED, UNKNOWN) and llama.cpp's per-model strip attributes. */
static int setup_cache(sl_vocab *v, const sl_gguf *g)
{
    int32_t n = 0;
    for (int32_t id = 0; id < v->n_tokens; id++)
        if (v->strs[id].attr & (SL_ATTR_CONTROL | SL_ATTR_USER_DEFINED | SL_ATTR_UNKNOWN)) n++;
    v->special = malloc(sizeof(int32_t) * (n ? (size_t)n : 1));
    if (!v->special) return -ENOMEM;
    v->mem += sizeof(int32_t) * (n ? (size_t)n : 1);
    uint64_t *keys = malloc(sizeof(uint64_t) * (n ? (size_t)n : 1));
    if (!keys) return -ENOMEM;
    for (int32_t id = 0; id < v->n_tokens; id++)
        if (v->strs[id].attr & (SL_ATTR_CONTROL | SL_ATTR_USER_DEFINED | SL_ATTR_UNKNOWN))
            keys[v->n_special++] = ((uint64_t)(UINT32_MAX - v->strs[id].len) << 32) | (uint32_t)id;
    qsort(keys, (size_t)v->n_special, sizeof(uint64_t), cmp_u64);
    for (int32_t i = 0; i < v->n_special; i++)
        v->special[i] = (int32_t)(uint32_t)keys[i];
    free(keys);

    sl_str name = { 0 };
    char lname[256] = { 0 };
    if (sl_gguf_get_str(g, "general.name", &name)) {
        size_t k = name.len < sizeof lname - 1 ? (size_t)name.len : sizeof lname - 1;
        for (size_t i = 0; i < k; i++) {
            char c = name.ptr[i];
            lname[i] = (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
        }
    }
    if (strstr(v->pre_name, "jina-v2-de") || strstr(v->pre_name, "jina-v2-es") ||
        strstr(v->pre_name, "jina-v2-code")) {
        int32_t id = tok_by_text(v, "<mask>");
        if (id >= 0) v->strs[id].attr |= SL_ATTR_LSTRIP;
    } else if (strstr(lname, "phi-3") || strstr(lname, "phi3")) {
        for (int32_t i = 0; i < v->n_special; i++) v->strs[v->special[i]].attr |= SL_ATTR_RSTRIP;
        int32_t id = tok_by_text(v, "</s>");
        if (id >= 0) v->strs[id].attr |= SL_ATTR_RSTRIP;
        static const char *const no[] = { "<unk>", "<s>", "<|endoftext|>" };
        for (size_t i = 0; i < 3; i++)
            if ((id = tok_by_text(v, no[i])) >= 0) v->strs[id].attr &= ~(uint32_t)SL_ATTR_RSTRIP;
    }
    return 0;
}

/* True when no token contains U+2581 preceded by anything but U+2581: then no merge can join the
 * character before a word-initial '▁' with that '▁', and tokenizer_spm.c may merge each word
 * separately (same result, far smaller heaps).  Holds for every Llama/Baichuan/Phi-3 vocabulary. */
static bool spm_words_independent(const sl_vocab *v)
{
    for (int32_t id = 0; id < v->n_tokens; id++) {
        const char *t = v->arena + v->strs[id].off;
        size_t n = v->strs[id].len;
        for (size_t k = 1; k + 3 <= n; k++) {
            if (memcmp(t + k, "\xE2\x96\x81", 3) != 0) continue;
            if (k < 3 || memcmp(t + k - 3, "\xE2\x96\x81", 3) != 0) return false;
        }
    }
    return true;
}

/* Trie of the special texts (rank = index in v->special), see tokenizer_internal.h. */
static int build_special_trie(sl_vocab *v)
{
    size_t total = 0, cap;
    for (int32_t k = 0; k < v->n_special; k++) total += v->strs[v->special[k]].len;
    cap = total ? total : 1;
    v->trie = malloc(cap * sizeof *v->trie);
    if (!v->trie) return -ENOMEM;
    v->mem += cap * sizeof *v->trie;
    for (int b = 0; b < 256; b++) v->trie_root[b] = -1;
    for (int32_t k = 0; k < v->n_special; k++) {
        const sl_vstr *st = &v->strs[v->special[k]];
        const unsigned char *t = (const unsigned char *)v->arena + st->off;
        if (!(st->attr & (SL_ATTR_CONTROL | SL_ATTR_UNKNOWN))) v->n_special_plain++;
        int32_t *link = &v->trie_root[t[0]], node = -1;
        for (uint32_t i = 0; i < st->len; i++) {
            /* `link` points at the head of the sibling list where byte t[i] belongs. */
            for (node = *link; node >= 0 && v->trie[node].byte != t[i]; node = v->trie[node].sibling) {}
            if (node < 0) {
                node = v->n_trie++;
                v->trie[node] = (struct sl_tnode){ .child = -1, .sibling = i ? *link : -1, .rank = -1, .byte = t[i] };
                *link = node;
            }
            link = &v->trie[node].child;
        }
        v->trie[node].rank = k;
    }
    return 0;
}

/* SPM byte fallback table: "<0xNN>" (upper-case hex, as llama.cpp formats it), else the token
 * whose text is that single byte, else none. */
static void setup_spm_bytes(sl_vocab *v)
{
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; b++) {
        char buf[6] = { '<', '0', 'x', hex[b >> 4], hex[b & 15], '>' };
        int32_t id = sl_vocab_find(v, buf, 6);
        if (id < 0 || id >= v->n_tokens) {
            char c = (char)b;
            id = sl_vocab_find(v, &c, 1);
        }
        v->byte_tok[b] = (id >= 0 && id < v->n_tokens) ? id : -1;
    }
}

int sl_vocab_load(const sl_gguf *g, sl_vocab **out, char *err, size_t errlen)
{
    if (!g || !out)
        return fail(err, errlen, -EINVAL, "vocab: NULL argument");
    *out = NULL;
    sl_str model;
    if (!sl_gguf_get_str(g, "tokenizer.ggml.model", &model))
        return fail(err, errlen, -EINVAL, "vocab: missing tokenizer.ggml.model");

    sl_vocab *v = calloc(1, sizeof *v);
    if (!v) return fail(err, errlen, -ENOMEM, "vocab: out of memory");
    v->mem = sizeof *v;
    v->eot = v->eom = v->sep = v->pad = v->mask = v->nl = -1;
    v->fim_pre = v->fim_suf = v->fim_mid = v->fim_pad = v->fim_rep = v->fim_sep = -1;
    strcpy(v->pre_name, "default");
    int rc;

    if (sl_str_eq(model, "llama")) {
        v->type = SL_VOCAB_SPM;
        v->bos = 1; v->eos = 2; v->unk = 0;
        v->add_space_prefix = true;
        v->add_bos = true;
    } else if (sl_str_eq(model, "gpt2")) {
        v->type = SL_VOCAB_BPE;
        v->bos = 11; v->eos = 11; v->unk = -1;
        v->clean_spaces = true;
        sl_str pre;
        if (sl_gguf_get_str(g, "tokenizer.ggml.pre", &pre) && pre.len > 0) {
            size_t k = pre.len < sizeof v->pre_name - 1 ? (size_t)pre.len : sizeof v->pre_name - 1;
            memcpy(v->pre_name, pre.ptr, k);
            v->pre_name[k] = 0;
            if (pre.len >= sizeof v->pre_name || memchr(pre.ptr, 0, pre.len) || pre_lookup(v->pre_name, v) < 0) {
                rc = fail(err, errlen, -ENOTSUP, "vocab: unsupported pre-tokenizer '%.*s'",
                          (int)(pre.len > 64 ? 64 : pre.len), pre.ptr);
                goto out;
            }
        } else {
            pre_lookup("default", v);
        }
    } else {
        rc = fail(err, errlen, -ENOTSUP, "vocab: unsupported tokenizer model '%.*s'",
                  (int)(model.len > 64 ? 64 : model.len), model.ptr);
        goto out;
    }
    bool b;
    if (sl_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &b)) v->add_space_prefix = b;

    int et = -1;
    uint64_t n = 0;
    if (!sl_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n) || et != SL_GGUF_STRING) {
        rc = fail(err, errlen, -EINVAL, "vocab: missing or non-string tokenizer.ggml.tokens");
        goto out;
    }
    if (n == 0 || n > (uint64_t)INT32_MAX / 2) {
        rc = fail(err, errlen, -EINVAL, "vocab: bad token count %llu", (unsigned long long)n);
        goto out;
    }
    v->n_tokens = (int32_t)n;
    if ((rc = load_tokens(v, g, sl_gguf_arr_kv(g, "tokenizer.ggml.tokens"), n, err, errlen))) goto out;
    if ((rc = load_scores_types(v, g, n, err, errlen))) goto out;
    if (v->type == SL_VOCAB_BPE) {
        if ((rc = sl_bpe_load_merges(v, g, err, errlen))) goto out;
        sl_bpe_init_bytes(v);
    } else {
        setup_spm_bytes(v);
        v->nl = v->byte_tok['\n'];
        v->spm_split = spm_words_independent(v);
    }
    if ((rc = setup_special(v, g)) || (rc = setup_cache(v, g)) || (rc = build_special_trie(v))) {
        fail(err, errlen, rc, "vocab: out of memory");
        goto out;
    }
    if (v->type == SL_VOCAB_BPE) {
        sl_ivec ids = { 0 };
        if (sl_bpe_tokenize(v, "\n", 1, &ids) == 0 && ids.n > 0) v->nl = ids.v[0];
        else v->nl = v->pad;
        free(ids.v);
    }
    *out = v;
    return 0;
out:
    sl_vocab_free(v);
    return rc;
}

void sl_vocab_free(sl_vocab *v)
{
    if (!v) return;
    free(v->strs);
    free(v->arena);
    free(v->hslot);
    free(v->mslot);
    free(v->special);
    free(v->trie);
    free(v->eog);
    free(v);
}

int32_t sl_vocab_n_tokens(const sl_vocab *v) { return v->n_tokens; }
int32_t sl_vocab_bos(const sl_vocab *v) { return v->bos; }
int32_t sl_vocab_eos(const sl_vocab *v) { return v->eos; }
int32_t sl_vocab_eot(const sl_vocab *v) { return v->eot; }
size_t  sl_vocab_mem_bytes(const sl_vocab *v) { return v->mem; }
const char *sl_vocab_family(const sl_vocab *v) { return v->type == SL_VOCAB_SPM ? "llama" : "gpt2"; }
const char *sl_vocab_pre(const sl_vocab *v) { return v->pre_name; }

bool sl_vocab_is_eog(const sl_vocab *v, int32_t id)
{
    for (int32_t i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id) return true;
    return false;
}

const char *sl_vocab_text(const sl_vocab *v, int32_t id, size_t *len)
{
    if (id < 0 || id >= v->n_tokens) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = v->strs[id].len;
    return v->arena + v->strs[id].off;
}
