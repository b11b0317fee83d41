/* tests/test_grammar_vocab.c — the vocabulary mask (runtime/text/grammar_vocab.c) on Llama 3's
 * 128K-token vocabulary: the trie walk allows exactly the tokens whose bytes the automaton takes one
 * by one (checked token by token, brute force, at states along random walks), special tokens only
 * where their text is the next part of the prefix or suffix, end of generation only when complete;
 * and its cost per call (printed; docs/benchmarks.md has the figures). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_testutil.h"
#include "runtime/text/grammar.h"
#include "tokenizer_testutil.h"

#define LLAMA3 SL_SHARED_DIR "/vocab/ggml-vocab-llama-bpe.rebuilt.gguf"

static sl_gguf *gg;
static sl_vocab *voc;
static sl_gvocab *gv;

static void setup(void)
{
    char err[256];
    cr_assert_eq(sl_gguf_open(LLAMA3, &gg, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sl_vocab_load(gg, &voc, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sl_gvocab_build(voc, &gv), 0);
    cr_assert_eq(sl_gvocab_n_tokens(gv), sl_vocab_n_tokens(voc));
}
static void teardown(void)
{
    sl_gvocab_free(gv);
    sl_vocab_free(voc);
    sl_gguf_close(gg);
}
TestSuite(grammar_vocab, .init = setup, .fini = teardown, .timeout = 600);

static sl_grammar *compile3(const char *schema, const char *prefix, const char *suffix)
{
    sl_grammar *g = NULL;
    char err[256] = "";
    cr_assert_eq(sl_grammar_compile(schema, schema ? strlen(schema) : 0, prefix, suffix, &g, err, sizeof err), 0, "%s", err);
    return g;
}

static int32_t special_id(const char *text)
{
    int32_t ids[4];
    int64_t n = sl_tokenize(voc, text, strlen(text), false, true, ids, 4);
    cr_assert_eq(n, 1, "%s is one token", text);
    return ids[0];
}

/* The mask at s against feeding every token's bytes to a copy of s. */
static void check_mask(const sl_gstate *s, const sl_grammar *g, uint8_t *allowed)
{
    int n = sl_grammar_mask(gv, s, allowed), count = 0;
    cr_assert_geq(n, 0);
    sl_gstate *t = sl_gstate_new(g);
    char piece[512];
    for (int32_t id = 0; id < sl_vocab_n_tokens(voc); id++) {
        count += allowed[id];
        bool want;
        int len = sl_token_piece(voc, id, piece, sizeof piece);
        if (sl_vocab_is_eog(voc, id)) want = sl_gstate_complete(s);
        else if (len > 0) {
            sl_gstate_copy(t, s);
            want = sl_gstate_feed(t, piece, (size_t)len);
        } else {
            continue;   /* special tokens: special_tokens_follow_the_literals */
        }
        cr_assert_eq(allowed[id], want, "token %d \"%.*s\": mask %d, bytes %d", id, len, piece, allowed[id], want);
        /* accepting an allowed token advances exactly as its bytes do */
        if (want && len > 0) {
            sl_gstate *u = sl_gstate_new(g);
            sl_gstate_copy(u, s);
            cr_assert_eq(sl_gstate_accept_token(u, gv, id), 0);
            sl_gstate_free(u);
        }
    }
    cr_assert_eq(n, count);
    sl_gstate_free(t);
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

Test(grammar_vocab, mask_equals_brute_force)
{
    const char *schema = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":8},\"n\":"
                         "{\"type\":\"integer\",\"minimum\":-20,\"maximum\":300},\"xs\":{\"type\":\"array\",\"items\":"
                         "{\"type\":\"number\"},\"maxItems\":3},\"e\":{\"enum\":[\"yes\",\"no\",null]}},\"required\":[\"name\",\"e\"]}";
    sl_grammar *g = compile3(schema, NULL, NULL);
    sl_gstate *s = sl_gstate_new(g);
    uint8_t *allowed = malloc((size_t)sl_vocab_n_tokens(voc));
    uint64_t rng = 7;
    int states = 0;
    /* walk by tokens drawn among the allowed ones; check the mask at every state */
    for (int run = 0; run < 3; run++) {
        sl_gstate_reset(s);
        for (int step = 0; step < 40; step++) {
            check_mask(s, g, allowed);
            states++;
            int n = sl_grammar_mask(gv, s, allowed);
            if (sl_gstate_complete(s)) break;
            cr_assert_gt(n, 0, "nothing allowed at an incomplete state");
            int pick = (int)(rng_next(&rng) % (uint64_t)n);
            for (int32_t id = 0;; id++) if (allowed[id] && pick-- == 0) { cr_assert_eq(sl_gstate_accept_token(s, gv, id), 0); break; }
        }
    }
    cr_expect_gt(states, 20);
    free(allowed);
    sl_gstate_free(s);
    sl_grammar_free(g);
}

Test(grammar_vocab, special_tokens_follow_the_literals)
{
    int32_t hdr = special_id("<|start_header_id|>"), eot = special_id("<|eot_id|>"), end_hdr = special_id("<|end_header_id|>");
    cr_assert(sl_vocab_is_eog(voc, eot));
    sl_grammar *g = compile3("{\"const\":1}", "<|start_header_id|>x", "<|end_header_id|>");
    sl_gstate *s = sl_gstate_new(g);
    uint8_t *allowed = malloc((size_t)sl_vocab_n_tokens(voc));
    sl_grammar_mask(gv, s, allowed);
    cr_expect(allowed[hdr], "the prefix's special token is allowed where it comes next");
    cr_expect(!allowed[end_hdr] && !allowed[eot]);
    cr_expect(allowed[special_id("<")], "its text spelt by ordinary tokens is allowed too");
    cr_assert_eq(sl_gstate_accept_token(s, gv, hdr), 0);
    sl_grammar_mask(gv, s, allowed);
    cr_expect(!allowed[hdr], "not again");
    cr_assert(sl_gstate_feed(s, "x1", 2));
    sl_grammar_mask(gv, s, allowed);
    cr_expect(allowed[end_hdr] && !allowed[hdr] && !allowed[eot]);
    cr_assert_eq(sl_gstate_accept_token(s, gv, end_hdr), 0);
    cr_assert(sl_gstate_complete(s));
    cr_expect_eq(sl_grammar_mask(gv, s, allowed), 0 + allowed[eot] + (sl_vocab_eos(voc) != eot && sl_vocab_eos(voc) >= 0 ?
                                                                        allowed[sl_vocab_eos(voc)] : 0));
    cr_expect(allowed[eot], "complete: end of generation, and only that");
    cr_expect_eq(sl_gstate_accept_token(s, gv, special_id("1")), -EINVAL);
    free(allowed);
    sl_gstate_free(s);
    sl_grammar_free(g);
}

/* The cost of one mask on the 128K vocabulary at typical states (printed for docs/benchmarks.md;
 * the assertion only catches a pathological regression on a loaded 2-core machine under sanitizers). */
Test(grammar_vocab, mask_cost)
{
    sl_grammar *g = compile3("{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\"},\"n\":{\"type\":\"number\"}},"
                             "\"required\":[\"text\",\"n\"]}", NULL, NULL);
    static const char *const at[][2] = { { "start", "" }, { "key", "{\"" }, { "in a string", "{\"text\":\"ab" },
                                         { "in a number", "{\"text\":\"\",\"n\":12" } };
    uint8_t *allowed = malloc((size_t)sl_vocab_n_tokens(voc));
    for (size_t i = 0; i < sizeof at / sizeof *at; i++) {
        sl_gstate *s = sl_gstate_new(g);
        cr_assert(sl_gstate_feed(s, at[i][1], strlen(at[i][1])));
        int n = 0, reps = 5;
        double t0 = tt_now();
        for (int r = 0; r < reps; r++) n = sl_grammar_mask(gv, s, allowed);
        double ms = (tt_now() - t0) / reps * 1e3;
        printf("grammar mask, Llama 3 vocabulary (%d tokens), %-12s: %7.2f ms per token, %6d allowed\n",
               sl_vocab_n_tokens(voc), at[i][0], ms, n);
        cr_expect_lt(ms, 2000.0);
        sl_gstate_free(s);
    }
    double t0 = tt_now();
    sl_gvocab *v2;
    cr_assert_eq(sl_gvocab_build(voc, &v2), 0);
    printf("grammar trie build, Llama 3 vocabulary: %.1f ms (once per model)\n", (tt_now() - t0) * 1e3);
    sl_gvocab_free(v2);
    free(allowed);
    sl_grammar_free(g);
}
