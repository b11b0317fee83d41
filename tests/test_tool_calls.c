/* tests/test_tool_calls.c — splitting chat answers into reasoning, content and tool calls
 * (runtime/text/tool_calls.h) on hand-written model outputs in each format: valid calls, several
 * calls, malformed ones (they stay content), reasoning; every output is also fed cut at every byte
 * position and one byte at a time, and must give the same result as fed whole. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/text/chat_template.h"
#include "runtime/text/tool_calls.h"

typedef struct got {
    char reasoning[2048], content[2048], calls[2048];   /* calls: "name(args);" each */
    int n_calls, last_index;
    bool order_ok;
} got;

static void app(char *dst, const char *s, size_t n)
{
    size_t l = strlen(dst);
    cr_assert_lt(l + n, 2048);
    memcpy(dst + l, s, n);
    dst[l + n] = 0;
}

static void collect(void *user, int kind, int index, const char *name, const char *text, size_t len)
{
    got *g = user;
    if (kind == SL_OUT_REASONING) { app(g->reasoning, text, len); return; }
    if (kind == SL_OUT_CONTENT) { app(g->content, text, len); return; }
    if (index != g->n_calls) g->order_ok = false;
    g->n_calls++;
    app(g->calls, name, strlen(name));
    app(g->calls, "(", 1);
    app(g->calls, text, len);
    app(g->calls, ");", 2);
}

/* Feed text cut at the given positions (cuts ascending, ncut of them). */
static void run_cut(int fmt, bool think, const char *text, const size_t *cuts, int ncut, got *g)
{
    memset(g, 0, sizeof *g);
    g->order_ok = true;
    sl_out_parser p;
    sl_out_init(&p, fmt, think);
    size_t at = 0, n = strlen(text);
    for (int k = 0; k <= ncut; k++) {
        size_t e = k < ncut ? cuts[k] : n;
        cr_assert(sl_out_feed(&p, text + at, e - at, collect, g));
        at = e;
    }
    cr_assert(sl_out_finish(&p, collect, g));
    sl_out_free(&p);
}

static void same(const got *a, const got *b, const char *what, const char *text)
{
    cr_expect_str_eq(a->reasoning, b->reasoning, "%s: reasoning differs for %s", what, text);
    cr_expect_str_eq(a->content, b->content, "%s: content differs for %s", what, text);
    cr_expect_str_eq(a->calls, b->calls, "%s: calls differ for %s", what, text);
    cr_expect(b->order_ok);
}

/* Whole text gives (reasoning, content, calls), and so does every cut. */
static void expect_split(int fmt, bool think, const char *text, const char *reasoning, const char *content,
                         const char *calls)
{
    got whole, cut;
    run_cut(fmt, think, text, NULL, 0, &whole);
    cr_expect_str_eq(whole.reasoning, reasoning, "reasoning of %s", text);
    cr_expect_str_eq(whole.content, content, "content of %s", text);
    cr_expect_str_eq(whole.calls, calls, "calls of %s", text);
    size_t n = strlen(text);
    for (size_t c = 0; c <= n; c++) {
        run_cut(fmt, think, text, &c, 1, &cut);
        same(&whole, &cut, "one cut", text);
    }
    size_t *all = malloc(n * sizeof *all);
    for (size_t c = 0; c < n; c++) all[c] = c;
    run_cut(fmt, think, text, all, (int)n, &cut);
    same(&whole, &cut, "byte by byte", text);
    free(all);
}

Test(tool_calls, hermes)
{
    const int H = SL_TOOLS_HERMES;
    expect_split(H, false, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
                 "", "", "get_weather({\"city\": \"Paris\"});");
    expect_split(H, false, "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
                 "<tool_call>\n{\"arguments\": {\"x\": [1, 2.5e3, null]}, \"name\": \"b\\u00e9\"}\n</tool_call>",
                 "", "Let me check.", "a({});bé({\"x\": [1, 2.5e3, null]});");
    /* the closing tag may be cut off by the end of generation */
    expect_split(H, false, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"k\": \"</tool_call>\"}}", "", "",
                 "f({\"k\": \"</tool_call>\"});");
    /* malformed: not JSON, arguments not an object, no name, unclosed JSON: content, as written */
    expect_split(H, false, "<tool_call>\n{\"name\": \"f\", \"arguments\": {oops}}\n</tool_call>", "",
                 "<tool_call>\n{\"name\": \"f\", \"arguments\": {oops}}\n</tool_call>", "");
    expect_split(H, false, "x <tool_call>{\"name\": \"f\", \"arguments\": \"{}\"}</tool_call>", "",
                 "x <tool_call>{\"name\": \"f\", \"arguments\": \"{}\"}</tool_call>", "");
    expect_split(H, false, "<tool_call>{\"arguments\": {}}</tool_call>", "", "<tool_call>{\"arguments\": {}}</tool_call>", "");
    expect_split(H, false, "<tool_call>{\"name\": \"f\", \"arguments\": {", "", "<tool_call>{\"name\": \"f\", \"arguments\": {", "");
    /* a good call, then a bad one: the call stays, the rest is content */
    expect_split(H, false, "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>\n<tool_call>{\"name\": 1}</tool_call>",
                 "", "<tool_call>{\"name\": 1}</tool_call>", "f({});");
    /* text after the calls is content; text that only looks like a tag is content */
    expect_split(H, false, "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>\nDone.", "", "Done.", "f({});");
    expect_split(H, false, "a <tool_c b\n\n", "", "a <tool_c b\n\n", "");
    expect_split(H, false, "", "", "", "");
}

Test(tool_calls, llama3)
{
    const int L = SL_TOOLS_LLAMA3;
    expect_split(L, false, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "", "",
                 "get_weather({\"city\": \"Paris\"});");
    expect_split(L, false, " {\"name\": \"f\", \"arguments\": {\"a\": 1}} ", "", "", "f({\"a\": 1});");
    expect_split(L, false, "The answer is {\"name\": \"f\"}", "", "The answer is {\"name\": \"f\"}", "");
    expect_split(L, false, "{\"answer\": 42}", "", "{\"answer\": 42}", "");
    expect_split(L, false, "{\"name\": \"f\", \"parameters\": [1]}", "", "{\"name\": \"f\", \"parameters\": [1]}", "");
    expect_split(L, false, "{\"name\": \"f\", \"param", "", "{\"name\": \"f\", \"param", "");
    expect_split(L, false, "Hello there.", "", "Hello there.", "");
}

Test(tool_calls, mistral)
{
    const int M = SL_TOOLS_MISTRAL;
    expect_split(M, false, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"q\": \"x\"}, \"id\": \"abcDEF123\"}, "
                 "{\"name\": \"g\", \"arguments\": {}}]", "", "", "f({\"q\": \"x\"});g({});");
    expect_split(M, false, "[{\"name\": \"f\", \"arguments\": {}}]", "", "", "f({});");
    expect_split(M, false, "Sure. [TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}]", "", "Sure.", "f({});");
    expect_split(M, false, "[TOOL_CALLS][{\"name\": \"f\"}]", "", "[TOOL_CALLS][{\"name\": \"f\"}]", "");
    expect_split(M, false, "[1, 2]", "", "[1, 2]", "");
    expect_split(M, false, "No tools [TOOL", "", "No tools [TOOL", "");
}

Test(tool_calls, qwen3_reasoning)
{
    const int H = SL_TOOLS_HERMES, N = SL_TOOLS_NONE;
    expect_split(N, true, "<think>\nThe user greets.\n</think>\n\nHello!", "The user greets.", "Hello!", "");
    expect_split(N, true, "<think>\n\n</think>\n\nHi", "", "Hi", "");
    expect_split(N, true, "<think>\nstill thinking when the tokens ran out\n", "still thinking when the tokens ran out\n", "", "");
    expect_split(N, true, "No think tags <think>here</think>", "", "No think tags <think>here</think>", "");
    expect_split(N, true, "<thi", "", "<thi", "");
    expect_split(H, true, "<think>\nNeed weather.\n</think>\n\n<tool_call>\n{\"name\": \"w\", \"arguments\": {}}\n</tool_call>",
                 "Need weather.", "", "w({});");
    /* without think the tags are content */
    expect_split(N, false, "<think>\nx\n</think>\n\ny", "", "<think>\nx\n</think>\n\ny", "");
}
