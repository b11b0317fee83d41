/* tests/test_harmony.c — gpt-oss's output split into channels (runtime/text/harmony.h).
 *
 * Each case is a generated text (as the pieces print: the harmony markers are text, <|return|> and
 * <|call|> may or may not be there) with the text expected on each channel, written out by hand.  The
 * same text fed in chunks — cut at every single position, byte by byte, and at seeded random
 * positions — must give exactly the text of the whole feed, channel by channel. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/text/harmony.h"

typedef struct got { char ch[4][512]; size_t n[4]; char hdr[160]; int events; } got;

static void collect(void *user, int channel, const char *header, const char *s, size_t n)
{
    got *g = user;
    cr_assert(channel >= 0 && channel < 4);
    cr_assert_gt(n, 0u, "empty piece reported");
    cr_assert_lt(g->n[channel] + n, sizeof g->ch[channel]);
    memcpy(g->ch[channel] + g->n[channel], s, n);
    g->n[channel] += n;
    g->ch[channel][g->n[channel]] = 0;
    if (channel == SL_HARMONY_COMMENTARY) snprintf(g->hdr, sizeof g->hdr, "%s", header);
    g->events++;
}

/* Feed text cut at the given positions (cuts ascending, within the text). */
static void run(const char *text, const size_t *cuts, int ncut, got *g)
{
    memset(g, 0, sizeof *g);
    sl_harmony h;
    sl_harmony_init(&h);
    size_t len = strlen(text), prev = 0;
    for (int i = 0; i <= ncut; i++) {
        size_t end = i < ncut ? cuts[i] : len;
        sl_harmony_feed(&h, text + prev, end - prev, collect, g);
        prev = end;
    }
    sl_harmony_finish(&h, collect, g);
}

static void same(const got *a, const got *b, const char *how, const char *text)
{
    for (int c = 0; c < 4; c++)
        cr_assert_str_eq(a->ch[c], b->ch[c], "%s: channel %d differs for [%s]", how, c, text);
    cr_assert_str_eq(a->hdr, b->hdr, "%s: commentary header differs for [%s]", how, text);
}

static const struct hcase {
    const char *text, *analysis, *final, *commentary, *other, *hdr;
} cases[] = {
    /* the usual shape: chain of thought, then the answer (<|return|> printed or not) */
    { "<|channel|>analysis<|message|>User asks 2+2. Answer 4.<|end|><|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>",
      "User asks 2+2. Answer 4.", "2 + 2 = 4.", "", "", "" },
    { "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Done",
      "Think.", "Done", "", "", "" },
    /* '<' and marker look-alikes inside bodies are text; a partial marker at the very end is text too */
    { "<|channel|>analysis<|message|>is a<b? <|sta <|end <|x|><|end|><|start|>assistant<|channel|>final<|message|>x < 5 <|",
      "is a<b? <|sta <|end <|x|>", "x < 5 <|", "", "", "" },
    /* several analysis messages; a message without a channel is final */
    { "<|channel|>analysis<|message|>one <|end|><|start|>assistant<|channel|>analysis<|message|>two<|end|>"
      "<|start|>assistant<|message|>answer<|end|>", "one two", "answer", "", "", "" },
    /* a tool call: commentary channel, recipient and constraint in the header */
    { "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather "
      "<|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
      "Need weather.", "", "{\"city\":\"Paris\"}", "",
      "assistant<|channel|>commentary to=functions.get_weather <|constrain|>json" },
    /* an unknown channel name */
    { "<|channel|>scratch<|message|>zzz<|end|><|start|>assistant<|channel|>final<|message|>ok", "", "ok", "", "zzz", "" },
    /* a header directly after a body (no <|end|><|start|>) */
    { "<|channel|>analysis<|message|>a<|channel|>final<|message|>b", "a", "b", "", "", "" },
    /* no harmony at all: plain text is the answer, short or long, one line or several */
    { "Just an answer.", "", "Just an answer.", "", "", "" },
    { "Line one\nline <two>\n", "", "Line one\nline <two>\n", "", "", "" },
    { "A very long answer without any markers, longer than any harmony header could ever be, so it "
      "must be shown as the final answer as it streams, not held back until the end of generation.", "",
      "A very long answer without any markers, longer than any harmony header could ever be, so it "
      "must be shown as the final answer as it streams, not held back until the end of generation.", "", "", "" },
    /* nothing but markers: nothing to show */
    { "<|channel|>final<|message|><|end|>", "", "", "", "", "" },
    { "", "", "", "", "", "" },
};

static void check_case(const struct hcase *c)
{
    got whole, part;
    run(c->text, NULL, 0, &whole);
    cr_assert_str_eq(whole.ch[SL_HARMONY_ANALYSIS], c->analysis, "analysis of [%s]", c->text);
    cr_assert_str_eq(whole.ch[SL_HARMONY_FINAL], c->final, "final of [%s]", c->text);
    cr_assert_str_eq(whole.ch[SL_HARMONY_COMMENTARY], c->commentary, "commentary of [%s]", c->text);
    cr_assert_str_eq(whole.ch[SL_HARMONY_OTHER], c->other, "other channel of [%s]", c->text);
    cr_assert_str_eq(whole.hdr, c->hdr, "commentary header of [%s]", c->text);

    size_t len = strlen(c->text);
    for (size_t k = 1; k < len; k++) {                       /* two chunks, cut everywhere */
        run(c->text, &k, 1, &part);
        char how[32];
        snprintf(how, sizeof how, "cut at %zu", k);
        same(&whole, &part, how, c->text);
    }
    size_t *all = calloc(len ? len : 1, sizeof *all);     /* byte by byte */
    for (size_t k = 1; k < len; k++) all[k - 1] = k;
    run(c->text, all, len ? (int)len - 1 : 0, &part);
    same(&whole, &part, "byte by byte", c->text);
    uint64_t r = 0x9E3779B97F4A7C15ull ^ len;                 /* random chunkings */
    for (int t = 0; t < 200 && len > 1; t++) {
        int n = 0;
        for (size_t k = 1; k < len; k++) {
            r ^= r << 13; r ^= r >> 7; r ^= r << 17;
            if (r % 5 == 0) all[n++] = k;
        }
        run(c->text, all, n, &part);
        same(&whole, &part, "random chunks", c->text);
    }
    free(all);
}

Test(harmony, channels_and_chunking)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);
}

/* The body streams: text that cannot be a marker is reported before the end of the feed. */
Test(harmony, streams_without_waiting)
{
    got g = { 0 };
    sl_harmony h;
    sl_harmony_init(&h);
    const char *a = "<|channel|>final<|message|>Hel";
    sl_harmony_feed(&h, a, strlen(a), collect, &g);
    cr_assert_str_eq(g.ch[SL_HARMONY_FINAL], "Hel");
    sl_harmony_feed(&h, "lo <", 4, collect, &g);             /* the '<' may start a marker: held */
    cr_assert_str_eq(g.ch[SL_HARMONY_FINAL], "Hello ");
    sl_harmony_feed(&h, "3", 1, collect, &g);                /* it did not */
    cr_assert_str_eq(g.ch[SL_HARMONY_FINAL], "Hello <3");
    sl_harmony_feed(&h, "<|en", 4, collect, &g);
    cr_assert_str_eq(g.ch[SL_HARMONY_FINAL], "Hello <3");
    sl_harmony_feed(&h, "d|>", 3, collect, &g);
    sl_harmony_finish(&h, collect, &g);
    cr_assert_str_eq(g.ch[SL_HARMONY_FINAL], "Hello <3");
}

Test(harmony, split_whole_text)
{
    char *r = NULL, *c = NULL;
    const char *t = "<|channel|>analysis<|message|>why<|end|><|start|>assistant<|channel|>final<|message|>because";
    cr_assert_eq(sl_harmony_split(t, strlen(t), &r, &c), 0);
    cr_assert_str_eq(r, "why");
    cr_assert_str_eq(c, "because");
    free(r);
    free(c);
    cr_assert_eq(sl_harmony_split("plain", 5, NULL, &c), 0);
    cr_assert_str_eq(c, "plain");
    free(c);
    cr_assert_eq(sl_harmony_split("", 0, &r, &c), 0);
    cr_assert_str_eq(r, "");
    cr_assert_str_eq(c, "");
    free(r);
    free(c);
}
