/* runtime/text/tool_calls.h — a chat model's answer split into reasoning, content and tool calls.
 *
 * The model writes its calls in its template's format (chat_template.h, enum sl_tool_format):
 *   hermes   text <tool_call>\n{"name": "f", "arguments": {…}}\n</tool_call> …  (the closing tag may
 *            be missing at the end of the output)
 *   llama3   {"name": "f", "parameters": {…}}   (the whole answer; "arguments" is accepted too)
 *   mistral  text [TOOL_CALLS][{"name": "f", "arguments": {…}, "id": "…"}, …]   (an answer that is
 *            only the array counts too: [TOOL_CALLS] is a control token that prints nothing)
 * and, with `think` (Qwen3), may open with <think>…</think>: that is the reasoning (newlines next
 * to the tags dropped, as Qwen3's template does when it reads it back), and content starts after
 * it.  A call whose JSON is malformed, lacks a string "name" or has arguments that are not an
 * object is not a call: it and everything after it stay content.  Whitespace between content and a
 * call, and between calls, belongs to neither.
 *
 * Streaming: text arrives in chunks; each piece is reported as soon as no later text can change
 * what it is (content is held while it may be the start of a call or of trailing whitespace before
 * one; a call is reported whole once it is complete).  Cutting the text anywhere gives the same
 * reports, concatenated, as feeding it whole.
 */
#ifndef SL_RUNTIME_TOOL_CALLS_H
#define SL_RUNTIME_TOOL_CALLS_H

#include <stdbool.h>
#include <stddef.h>

enum sl_out_kind { SL_OUT_CONTENT, SL_OUT_REASONING, SL_OUT_CALL };

/* A piece of output: text[0..len) of content or reasoning, or (SL_OUT_CALL) call number `index`
 * (from 0) with its name (NUL-terminated, decoded) and arguments (args[0..len), a JSON object's
 * text as the model wrote it). */
typedef void (*sl_out_cb)(void *user, int kind, int index, const char *name, const char *text, size_t len);

typedef struct sl_out_parser {
    int fmt;                  /* enum sl_tool_format; SL_TOOLS_NONE: no calls are parsed */
    bool think;               /* split a leading <think>…</think> off as reasoning */
    char *buf;                /* the text so far (internal) */
    size_t n, cap;
    size_t sent_reasoning, sent_content;
    int sent_calls;
    bool oom;
} sl_out_parser;

/* A parser for fmt; think: split reasoning off. */
void sl_out_init(sl_out_parser *p, int fmt, bool think);
/* The next chunk of generated text; reports what became certain.  false: out of memory (the parser
 * then reports nothing more). */
bool sl_out_feed(sl_out_parser *p, const char *text, size_t len, sl_out_cb cb, void *user);
/* The end of the output: reports the rest. */
bool sl_out_finish(sl_out_parser *p, sl_out_cb cb, void *user);
void sl_out_free(sl_out_parser *p);

#endif
