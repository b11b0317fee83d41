/* runtime/text/chat_tools.c — the tool-calling forms of the chat templates (see chat_template.h).
 *
 * Each function follows its model's Jinja template statement by statement (the templates as
 * llama.cpp's models/templates keeps them, read for the facts only):
 *  - hermes: Qwen3's template (Qwen-Qwen3-0.6B.jinja).  Tool schemas are printed with tojson
 *    (Python's json.dumps spacing, sl_json_pyformat), a call's arguments as the string the API
 *    carries (Qwen3 prints a string argument as is; what the model wrote comes back unchanged).
 *    Qwen2.5's template differs in two ways this does not follow: a default system line ("You are
 *    Qwen, created by Alibaba Cloud…") and tojson of arguments parsed to an object;
 *  - Llama 3.1's template (meta-llama-Llama-3.1-8B-Instruct.jinja; 3.2 and 3.3 differ only in the
 *    date, which here is the template's default, "26 Jul 2024"), tools_in_user_message = true;
 *  - Mistral Nemo's (mistralai-Mistral-Nemo-Instruct-2407.jinja), which needs 9-character
 *    alphanumeric call ids: an id given out as "call_…" is printed as its last 9 letters and digits.
 */
#include <errno.h>
#include <stdio.h>

#include "runtime/text/chat_internal.h"
#include "runtime/text/json_text.h"

int sl_chat_tool_format(int t)
{
    switch (t) {
    case SL_TMPL_CHATML: return SL_TOOLS_HERMES;
    case SL_TMPL_LLAMA3: return SL_TOOLS_LLAMA3;
    case SL_TMPL_MISTRAL_V3_TEKKEN: return SL_TOOLS_MISTRAL;
    case SL_TMPL_HARMONY: return SL_TOOLS_HARMONY;
    default: return SL_TOOLS_NONE;
    }
}

const char *sl_chat_tool_templates(void)
{
    return "chatml (Qwen2.5, Qwen3), llama3 (Llama 3.1-3.3), mistral-v3-tekken (Mistral Nemo), harmony (gpt-oss)";
}

/* JSON text re-spaced as tojson prints it (indent 0: one line). */
static void put_pyjson(sbuf *b, const char *json, int indent)
{
    size_t n;
    char *p = sl_json_pyformat(json, strlen(json), indent, &n);
    if (!p) { b->oom = true; return; }
    put_n(b, p, n);
    free(p);
}

/* ---- Qwen (hermes) ------------------------------------------------------------------------------ */

static void hermes_calls(sbuf *b, const sl_chat_msg *m)
{
    for (int k = 0; k < m->n_tool_calls; k++) {
        if (k > 0 || m->content[0]) put(b, "\n");
        put(b, "<tool_call>\n{\"name\": \"");
        put(b, m->tool_calls[k].name);
        put(b, "\", \"arguments\": ");
        put(b, m->tool_calls[k].arguments);
        put(b, "}\n</tool_call>");
    }
}

void sl_render_hermes(sbuf *b, const sl_chat_msg *m, int n, const sl_chat_opts *o)
{
    int first = 0;
    if (o->n_tools) {
        put(b, "<|im_start|>system\n");
        if (n && is_role(m[0].role, "system")) { put(b, m[0].content); put(b, "\n\n"); first = 1; }
        put(b, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
               "You are provided with function signatures within <tools></tools> XML tags:\n<tools>");
        for (int t = 0; t < o->n_tools; t++) { put(b, "\n"); put_pyjson(b, o->tools[t], 0); }
        put(b, "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
               "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
               "<args-json-object>}\n</tool_call><|im_end|>\n");
    }
    for (int i = first; i < n; i++) {
        if (is_role(m[i].role, "tool")) {
            if (i == 0 || !is_role(m[i - 1].role, "tool")) put(b, "<|im_start|>user");
            put(b, "\n<tool_response>\n");
            put(b, m[i].content);
            put(b, "\n</tool_response>");
            if (i == n - 1 || !is_role(m[i + 1].role, "tool")) put(b, "<|im_end|>\n");
            continue;
        }
        put(b, "<|im_start|>");
        put(b, m[i].role);
        put(b, "\n");
        put(b, m[i].content);
        if (is_role(m[i].role, "assistant")) hermes_calls(b, &m[i]);
        put(b, "<|im_end|>\n");
    }
    if (o->add_assistant) put(b, "<|im_start|>assistant\n");
}

/* ---- Llama 3.1 ---------------------------------------------------------------------------------- */

static void llama3_turn(sbuf *b, const char *role, const char *content, bool trim)
{
    put(b, "<|start_header_id|>");
    put(b, role);
    put(b, "<|end_header_id|>\n\n");
    if (trim) put_trim(b, content); else put(b, content);
    put(b, "<|eot_id|>");
}

void sl_render_llama3_tools(sbuf *b, const sl_chat_msg *m, int n, const sl_chat_opts *o)
{
    int i = 0;
    put(b, "<|start_header_id|>system<|end_header_id|>\n\n");
    if (o->n_tools) put(b, "Environment: ipython\n");
    put(b, "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n");
    if (n && is_role(m[0].role, "system")) put_trim(b, m[i++].content);
    put(b, "<|eot_id|>");
    if (o->n_tools && i < n) {
        put(b, "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a "
               "JSON for a function call with its proper arguments that best answers the given prompt.\n\n"
               "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its "
               "value}.Do not use variables.\n\n");
        for (int t = 0; t < o->n_tools; t++) { put_pyjson(b, o->tools[t], 4); put(b, "\n\n"); }
        put_trim(b, m[i++].content);
        put(b, "<|eot_id|>");
    }
    for (; i < n; i++) {
        if (is_role(m[i].role, "tool")) {   /* a string is iterable to Jinja: the template prints it with tojson */
            char *q = sl_json_quote(m[i].content, NULL);
            if (!q) b->oom = true;
            else llama3_turn(b, "ipython", q, false);
            free(q);
            continue;
        }
        if (!m[i].n_tool_calls) { llama3_turn(b, m[i].role, m[i].content, true); continue; }
        const sl_chat_tool_call *c = &m[i].tool_calls[0];   /* sl_chat_check: exactly one */
        put(b, "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"");
        put(b, c->name);
        put(b, "\", \"parameters\": ");
        put_pyjson(b, c->arguments, 0);
        put(b, "}<|eot_id|>");
    }
    if (o->add_assistant) put(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* ---- Mistral Nemo ------------------------------------------------------------------------------- */

/* The last 9 letters and digits of id ('0'-padded in front): the template refuses other ids. */
static void put_id9(sbuf *b, const char *id)
{
    char out[10] = "000000000";
    int k = 9;
    for (size_t i = id ? strlen(id) : 0; i-- > 0 && k > 0;)
        if (isalnum((unsigned char)id[i])) out[--k] = id[i];
    put(b, out);
}

/* One tool of [AVAILABLE_TOOLS]: '{"type": "function", "function": {' and each member of
 * "function" but "return", a string value printed raw between quotes, others with tojson. */
static void mistral_tool(sbuf *b, const char *tool)
{
    size_t fl = 0, pos = 0, kl, vl;
    const char *fn = sl_json_member(tool, strlen(tool), "function", &fl), *k, *v;
    put(b, "{\"type\": \"function\", \"function\": {");
    bool first = true;
    while (fn && sl_json_next_member(fn, fl, &pos, &k, &kl, &v, &vl)) {
        if (kl == 6 && !memcmp(k, "return", 6)) continue;
        if (!first) put(b, ", ");
        first = false;
        char *key = sl_json_string(k - 1, kl + 2), *str = v[0] == '"' ? sl_json_string(v, vl) : NULL;
        put(b, "\"");
        put(b, key ? key : "");
        put(b, "\": ");
        if (str) { put(b, "\""); put(b, str); put(b, "\""); }
        else {
            char *val = strndup(v, vl);
            if (val) put_pyjson(b, val, 0); else b->oom = true;
            free(val);
        }
        free(key);
        free(str);
    }
    put(b, "}}");
}

void sl_render_mistral_tools(sbuf *b, const sl_chat_msg *m, int n, const sl_chat_opts *o)
{
    int first = 0, last_user = -1;
    const char *sys = NULL;
    if (n && is_role(m[0].role, "system")) { sys = m[0].content; first = 1; }
    for (int i = first; i < n; i++)
        if (is_role(m[i].role, "user")) last_user = i;
    for (int i = first; i < n; i++) {
        const sl_chat_msg *x = &m[i];
        if (is_role(x->role, "user")) {
            if (o->n_tools && i == last_user) {
                put(b, "[AVAILABLE_TOOLS][");
                for (int t = 0; t < o->n_tools; t++) { if (t) put(b, ", "); mistral_tool(b, o->tools[t]); }
                put(b, "][/AVAILABLE_TOOLS]");
            }
            put(b, "[INST]");
            if (i == n - 1 && sys) { put(b, sys); put(b, "\n\n"); }
            put(b, x->content);
            put(b, "[/INST]");
        } else if (x->n_tool_calls) {
            put(b, "[TOOL_CALLS][");
            for (int k = 0; k < x->n_tool_calls; k++) {
                put(b, k ? ", {\"name\": \"" : "{\"name\": \"");
                put(b, x->tool_calls[k].name);
                put(b, "\", \"arguments\": ");
                put_pyjson(b, x->tool_calls[k].arguments, 0);
                put(b, ", \"id\": \"");
                put_id9(b, x->tool_calls[k].id);
                put(b, "\"}");
            }
            put(b, "]</s>");
        } else if (is_role(x->role, "assistant")) {
            put(b, x->content);
            put(b, "</s>");
        } else if (is_role(x->role, "tool")) {
            put(b, "[TOOL_RESULTS]{\"content\": ");
            put(b, x->content);
            put(b, ", \"call_id\": \"");
            put_id9(b, x->tool_call_id);
            put(b, "\"}[/TOOL_RESULTS]");
        }
    }
}

/* ---- what a template can render ----------------------------------------------------------------- */

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); return -EINVAL; } while (0)

int sl_chat_check(int t, const sl_chat_msg *m, int n, const sl_chat_opts *o, char *err, size_t errlen)
{
    bool tools = o && o->n_tools > 0;
    int fmt = sl_chat_tool_format(t);
    for (int i = 0; i < n; i++) {
        bool turn = m[i].n_tool_calls > 0 || is_role(m[i].role, "tool");
        if ((turn || tools) && fmt == SL_TOOLS_NONE)
            FAIL("tools need a chat template with tool calls; this model's is %s (supported: %s)",
                 sl_chat_template_name(t), sl_chat_tool_templates());
        for (int k = 0; k < m[i].n_tool_calls; k++) {
            const char *a = m[i].tool_calls[k].arguments;
            size_t end = 0;
            if (sl_json_scan(a, strlen(a), &end) != SL_JSON_OK || a[end + strspn(a + end, " \t\r\n")] ||
                a[strspn(a, " \t\r\n")] != '{')
                FAIL("message %d: tool call %d's arguments must be a JSON object", i, k);
        }
        if ((fmt == SL_TOOLS_LLAMA3 || fmt == SL_TOOLS_HARMONY) && m[i].n_tool_calls > 1)
            FAIL("message %d has %d tool calls; %s template takes one call per assistant message", i, m[i].n_tool_calls,
                 fmt == SL_TOOLS_LLAMA3 ? "Llama 3.1's" : "gpt-oss's");
        if (fmt == SL_TOOLS_HARMONY && is_role(m[i].role, "tool")) {
            int k = i - 1;
            while (k >= 0 && !m[k].n_tool_calls && !is_role(m[k].role, "assistant")) k--;
            if (k < 0 || !m[k].n_tool_calls)
                FAIL("message %d (role tool) follows no assistant tool call; gpt-oss's template names the tool from it", i);
        }
    }
    if (fmt == SL_TOOLS_HERMES || fmt == SL_TOOLS_NONE) return 0;
    if (tools && fmt == SL_TOOLS_LLAMA3 && n - (n && is_role(m[0].role, "system")) < 1)
        FAIL("Llama 3.1's template needs a user message after the system message to hold the tools");
    if (tools && fmt == SL_TOOLS_MISTRAL) {
        bool user = false;
        for (int i = 0; i < n; i++) user |= is_role(m[i].role, "user");
        if (!user) FAIL("Mistral's template needs a user message to put the tools before");
    }
    return 0;
}
