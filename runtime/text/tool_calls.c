/* runtime/text/tool_calls.c — splitting a chat answer into reasoning, content and tool calls (see
 * tool_calls.h).
 *
 * The parser keeps the whole text and, after every chunk, reads it again from the start (analyze):
 * what is certain then is a pure function of the text so far, and what was already reported is a
 * prefix of it, so any cut gives the same reports.  Answers are short beside the forward passes
 * that write them; reading them again costs nothing that shows. */
#include "runtime/text/tool_calls.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/text/chat_template.h"
#include "runtime/text/json_text.h"

#define MAX_CALLS 64

typedef struct span { size_t a, b; } span;

typedef struct call { span name, args; } call;

/* What the text so far says for certain. */
typedef struct analysis {
    span reasoning;           /* certain reasoning */
    span head;                /* certain content before the calls */
    span tail;                /* content after the calls (a malformed call and what follows, or text) */
    call calls[MAX_CALLS];
    int n_calls;
} analysis;

static bool ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

static size_t skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n && ws(s[i])) i++;
    return i;
}

/* Longest suffix of s[a..n) that is a proper prefix of m: the bytes to hold back. */
static size_t partial_marker(const char *s, size_t a, size_t n, const char *m)
{
    size_t ml = strlen(m);
    for (size_t k = ml - 1; k > 0; k--)
        if (n - a >= k && !memcmp(s + n - k, m, k)) return k;
    return 0;
}

static const char *find(const char *s, size_t a, size_t n, const char *m)
{
    size_t ml = strlen(m);
    for (size_t i = a; i + ml <= n; i++)
        if (!memcmp(s + i, m, ml)) return s + i;
    return NULL;
}

/* A call object at s[a..e): name and arguments (args_key, or "arguments") found and well-formed. */
static bool call_object(const char *s, size_t a, size_t e, const char *args_key, call *c)
{
    size_t nl, al;
    const char *nm = sl_json_member(s + a, e - a, "name", &nl);
    const char *ar = sl_json_member(s + a, e - a, args_key, &al);
    if (!ar) ar = sl_json_member(s + a, e - a, "arguments", &al);
    if (!nm || nm[0] != '"' || !ar || ar[0] != '{') return false;
    char *name = sl_json_string(nm, nl);
    bool ok = name && *name;
    free(name);
    c->name = (span){ (size_t)(nm - s), (size_t)(nm - s) + nl };
    c->args = (span){ (size_t)(ar - s), (size_t)(ar - s) + al };
    return ok;
}

/* Content from `from` on, hermes: [text] (<tool_call> {call} [</tool_call>])* [text]. */
static void parse_hermes(const char *s, size_t from, size_t n, bool final, analysis *r)
{
    static const char open[] = "<tool_call>", close[] = "</tool_call>";
    const char *m = find(s, from, n, open);
    if (!m) {
        size_t e = n;
        if (!final) {
            e -= partial_marker(s, from, n, open);
            while (e > from && ws(s[e - 1])) e--;
        }
        r->head = (span){ from, e };
        return;
    }
    size_t he = (size_t)(m - s);
    while (he > from && ws(s[he - 1])) he--;
    r->head = (span){ from, he };
    size_t i = (size_t)(m - s), rest = he;   /* rest: where content resumes if this call is not one */
    for (;;) {
        size_t j = i + strlen(open), end;
        int st = sl_json_scan(s + j, n - j, &end);
        if (st == SL_JSON_PARTIAL && !final) return;
        call c;
        if (st != SL_JSON_OK || r->n_calls == MAX_CALLS || !call_object(s, j, j + end, "arguments", &c)) {
            if (st == SL_JSON_OK || final) r->tail = (span){ rest, n };   /* a malformed call: content */
            return;
        }
        size_t k = skip_ws(s, n, j + end);
        size_t cl = strlen(close);
        if (n - k < cl && !memcmp(s + k, close, n - k) && !final) return;   /* the closing tag may be coming */
        if (n - k >= cl && !memcmp(s + k, close, cl)) k += cl;
        else if (k < n) { r->tail = (span){ rest, n }; return; }           /* something else follows: not a call */
        r->calls[r->n_calls++] = c;
        size_t next = skip_ws(s, n, k);
        rest = next;
        if (next == n) return;
        if (n - next < strlen(open) && !memcmp(s + next, open, n - next) && !final) return;
        if (n - next >= strlen(open) && !memcmp(s + next, open, strlen(open))) { i = next; continue; }
        if (final) r->tail = (span){ next, n };
        else if (!find(s, next, n, open)) r->tail = (span){ next, n - partial_marker(s, next, n, open) };
        else r->tail = (span){ next, (size_t)(find(s, next, n, open) - s) };
        return;
    }
}

/* llama3: the whole content one call object; mistral: [TOOL_CALLS] then an array of them (or the
 * array alone from the start). */
static void parse_json_calls(const char *s, size_t from, size_t n, bool final, int fmt, analysis *r)
{
    static const char marker[] = "[TOOL_CALLS]";
    size_t i = skip_ws(s, n, from), he = from, j;
    if (fmt == SL_TOOLS_MISTRAL) {
        const char *m = find(s, from, n, marker);
        if (m) {
            he = (size_t)(m - s);
            while (he > from && ws(s[he - 1])) he--;
            j = (size_t)(m - s) + strlen(marker);
        } else if (!final && n - i < strlen(marker) && !memcmp(s + i, marker, n - i)) {
            r->head = (span){ from, from };   /* the marker may be coming */
            return;
        } else if (i < n && s[i] == '[') {
            j = i;
        } else {
            size_t e = n;
            if (!final) { e -= partial_marker(s, from, n, marker); while (e > from && ws(s[e - 1])) e--; }
            if (i == n && !final) e = from;
            r->head = (span){ from, e };
            return;
        }
    } else {
        if (i == n || s[i] != '{') { r->head = (span){ from, i == n && !final ? from : n }; return; }
        j = i;
    }
    r->head = (span){ from, he };
    size_t end;
    int st = sl_json_scan(s + j, n - j, &end);
    if (st == SL_JSON_PARTIAL && !final) return;
    bool ok = st == SL_JSON_OK;
    size_t k = skip_ws(s, n, j), e = j + end;
    if (ok && fmt == SL_TOOLS_LLAMA3) ok = call_object(s, k, e, "parameters", &r->calls[r->n_calls++]);
    else if (ok) {
        ok = s[k] == '[';
        size_t a = k + 1;
        while (ok && (a = skip_ws(s, e, a)) < e - 1) {
            size_t oe;
            ok = r->n_calls < MAX_CALLS && sl_json_scan(s + a, e - 1 - a, &oe) == SL_JSON_OK &&
                 call_object(s, a, a + oe, "arguments", &r->calls[r->n_calls++]);
            a = skip_ws(s, e, a + oe);
            if (ok && s[a] == ',') a++;
        }
    }
    if (!ok) { r->n_calls = 0; r->tail = (span){ he, n }; return; }
    size_t t = skip_ws(s, n, e);
    r->tail = (span){ t, final ? n : t == n ? t : n };
}

static void analyze(const char *s, size_t n, int fmt, bool think, bool final, analysis *r)
{
    memset(r, 0, sizeof *r);
    size_t from = 0;
    if (think) {
        static const char open[] = "<think>", close[] = "</think>";
        size_t i = skip_ws(s, n, 0), ol = strlen(open);
        if (!final && (n - i < ol ? !memcmp(s + i, open, n - i) : false)) return;   /* maybe <think> */
        if (n - i >= ol && !memcmp(s + i, open, ol)) {
            size_t a = i + ol;
            while (a < n && s[a] == '\n') a++;
            const char *c = find(s, a, n, close);
            size_t e = c ? (size_t)(c - s) : final ? n : n - partial_marker(s, a, n, close);
            size_t re = e;
            if (c || !final) while (re > a && s[re - 1] == '\n') re--;
            r->reasoning = (span){ a, re < a ? a : re };
            if (!c) return;
            from = (size_t)(c - s) + strlen(close);
            while (from < n && s[from] == '\n') from++;
            if (from == n && !final) { r->head = (span){ from, from }; return; }
        }
    }
    if (fmt == SL_TOOLS_HERMES) parse_hermes(s, from, n, final, r);
    else if (fmt == SL_TOOLS_LLAMA3 || fmt == SL_TOOLS_MISTRAL) parse_json_calls(s, from, n, final, fmt, r);
    else r->head = (span){ from, n };
}

void sl_out_init(sl_out_parser *p, int fmt, bool think)
{
    memset(p, 0, sizeof *p);
    p->fmt = fmt;
    p->think = think;
}

void sl_out_free(sl_out_parser *p)
{
    free(p->buf);
    p->buf = NULL;
    p->n = p->cap = 0;
}

/* Report what r holds beyond what was reported. */
static bool report(sl_out_parser *p, const analysis *r, sl_out_cb cb, void *user)
{
    const char *s = p->buf;
    size_t rl = r->reasoning.b - r->reasoning.a;
    if (rl > p->sent_reasoning) {
        cb(user, SL_OUT_REASONING, 0, NULL, s + r->reasoning.a + p->sent_reasoning, rl - p->sent_reasoning);
        p->sent_reasoning = rl;
    }
    size_t hl = r->head.b - r->head.a;
    if (hl > p->sent_content) {
        cb(user, SL_OUT_CONTENT, 0, NULL, s + r->head.a + p->sent_content, hl - p->sent_content);
        p->sent_content = hl;
    }
    for (; p->sent_calls < r->n_calls; p->sent_calls++) {
        const call *c = &r->calls[p->sent_calls];
        char *name = sl_json_string(s + c->name.a, c->name.b - c->name.a);
        if (!name) { p->oom = true; return false; }
        cb(user, SL_OUT_CALL, p->sent_calls, name, s + c->args.a, c->args.b - c->args.a);
        free(name);
    }
    size_t tl = r->tail.b - r->tail.a;
    if (hl + tl > p->sent_content) {
        size_t off = p->sent_content - hl;
        cb(user, SL_OUT_CONTENT, 0, NULL, s + r->tail.a + off, tl - off);
        p->sent_content = hl + tl;
    }
    return true;
}

static bool run(sl_out_parser *p, bool final, sl_out_cb cb, void *user)
{
    if (p->oom) return false;
    analysis *r = malloc(sizeof *r);
    if (!r) { p->oom = true; return false; }
    analyze(p->buf ? p->buf : "", p->n, p->fmt, p->think, final, r);
    bool ok = report(p, r, cb, user);
    free(r);
    return ok;
}

bool sl_out_feed(sl_out_parser *p, const char *text, size_t len, sl_out_cb cb, void *user)
{
    if (p->oom) return false;
    if (p->n + len + 1 > p->cap) {
        size_t cap = p->cap ? p->cap : 256;
        while (cap < p->n + len + 1) cap *= 2;
        char *nb = realloc(p->buf, cap);
        if (!nb) { p->oom = true; return false; }
        p->buf = nb;
        p->cap = cap;
    }
    memcpy(p->buf + p->n, text, len);
    p->n += len;
    p->buf[p->n] = 0;
    return run(p, false, cb, user);
}

bool sl_out_finish(sl_out_parser *p, sl_out_cb cb, void *user) { return run(p, true, cb, user); }
