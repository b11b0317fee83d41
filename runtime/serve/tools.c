/* runtime/serve/tools.c — tool calls and reasoning on the OpenAI wire (chat completions).
 *
 * In: `tools` (function tools: name, description, parameters, strict false), `tool_choice` ("none":
 * tools neither rendered nor parsed; "auto", the default with tools; "required" and a named
 * function: the model is made to write one call by constrained decoding, the call's JSON Schema
 * between the format's literals, tools_call_grammar), `parallel_tool_calls`
 * (false: only the first call is returned), assistant messages with `tool_calls` (content may then
 * be null) and `tool` messages with `tool_call_id` (and an optional `name`, which none of the
 * templates prints).  The chat template renders them (runtime/text/chat_template.h).
 * Out: the answer split by runtime/text/tool_calls.h into `content`, `reasoning_content` (Qwen3's
 * <think> block, unless the server runs with --reasoning-format none) and `tool_calls` (id
 * "call_" + 24 letters/digits, unique per call; type function; name; arguments as a JSON string),
 * finish_reason "tool_calls" when there are calls.  Streamed: content and reasoning deltas as they
 * become certain, each call as two chunks, {index, id, type, function: {name, arguments: ""}} then
 * {index, function: {arguments}}.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/clock.h"
#include "runtime/serve/serve_internal.h"
#include "runtime/text/json_text.h"
#include "runtime/text/chat_template.h"

#define BAD(...) do { snprintf(msg, msglen, __VA_ARGS__); return 400; } while (0)
#define MAX_TOOLS 128

/* ---- request ------------------------------------------------------------------------------------ */

static bool valid_name(const char *n)
{
    size_t l = strlen(n);
    if (!l || l > 64) return false;
    for (size_t i = 0; i < l; i++) {
        char c = n[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* tools[i]: {"type":"function","function":{"name":…,"description"?:…,"parameters"?:{…},"strict"?:…}} */
static int check_tool(json_t *t, size_t i, char *msg, size_t msglen)
{
    json_t *type = json_object_get(t, "type"), *fn = json_object_get(t, "function");
    if (!json_is_object(t) || !json_is_string(type) || strcmp(json_string_value(type), "function") || !json_is_object(fn))
        BAD("'tools'[%zu] must be {\"type\": \"function\", \"function\": {...}} (only function tools are supported)", i);
    const char *key;
    json_t *v;
    json_object_foreach(t, key, v)
        if (strcmp(key, "type") && strcmp(key, "function")) BAD("'tools'[%zu].%.32s is not supported", i, key);
    json_t *name = json_object_get(fn, "name");
    if (!json_is_string(name) || !valid_name(json_string_value(name)))
        BAD("'tools'[%zu].function.name must be 1-64 letters, digits, '_' or '-'", i);
    json_object_foreach(fn, key, v) {
        if (!strcmp(key, "name")) continue;
        if (!strcmp(key, "description") && json_is_string(v)) continue;
        if (!strcmp(key, "parameters") && json_is_object(v)) continue;
        if (!strcmp(key, "strict") && json_is_false(v)) continue;
        if (!strcmp(key, "strict") && json_is_true(v))
            BAD("'tools'[%zu].function.strict true is not supported: with tool_choice \"auto\" calls are not constrained "
                "(tool_choice \"required\" or naming the function constrains them to the schema)", i);
        BAD("'tools'[%zu].function.%.32s is not supported (name, description: a string, parameters: an object, "
            "strict: false)", i, key);
    }
    return 0;
}

/* The JSON Schema of one call to tool t in format fmt: name fixed, arguments its parameters (none:
 * an empty object); properties in the order the format writes them. */
static json_t *call_schema(json_t *t, int fmt)
{
    json_t *fn = json_object_get(t, "function"), *params = json_object_get(fn, "parameters");
    const char *args = fmt == SL_TOOLS_LLAMA3 ? "parameters" : "arguments";
    json_t *props = json_pack("{s:{s:O}}", "name", "const", json_object_get(fn, "name"));
    json_object_set_new(props, args, params ? json_deep_copy(params) : json_pack("{s:s,s:{}}", "type", "object", "properties"));
    return json_pack("{s:s,s:o,s:[s,s],s:b}", "type", "object", "properties", props, "required", "name", args,
                     "additionalProperties", 0);
}

/* gpt-oss: the tool's name is in the message header, the body is the arguments alone. */
static int harmony_grammar(json_t *tools, const char *name, char **schema, char **prefix)
{
    json_t *t, *fn = NULL;
    size_t i;
    if (!name && json_array_size(tools) != 1) return -2;
    json_array_foreach(tools, i, t) {
        json_t *f = json_object_get(t, "function");
        if (!name || !strcmp(json_string_value(json_object_get(f, "name")), name)) { fn = f; break; }
    }
    if (!fn) return -1;
    json_t *params = json_object_get(fn, "parameters");
    *schema = params ? json_dumps(params, JSON_COMPACT) : strdup("{\"type\":\"object\",\"properties\":{}}");
    const char *nm = json_string_value(json_object_get(fn, "name"));
    size_t pl = strlen(nm) + sizeof "<|channel|>commentary to=functions. <|constrain|>json<|message|>";
    if ((*prefix = malloc(pl))) snprintf(*prefix, pl, "<|channel|>commentary to=functions.%s <|constrain|>json<|message|>", nm);
    return *schema && *prefix ? 0 : -1;
}

static int call_grammar(json_t *tools, const char *name, int fmt, char **schema, char **prefix, char **suffix)
{
    json_t *one = NULL, *any = json_array(), *t;
    size_t i;
    *schema = *prefix = NULL;
    /* harmony: <|call|> is an end-of-generation token, allowed once the value is complete */
    if (!(*suffix = strdup(fmt == SL_TOOLS_HERMES ? "\n</tool_call>" : ""))) { json_decref(any); return -1; }
    if (fmt == SL_TOOLS_HARMONY) { json_decref(any); return harmony_grammar(tools, name, schema, prefix); }
    json_array_foreach(tools, i, t) {
        json_t *nm = json_object_get(json_object_get(t, "function"), "name");
        if (!name) json_array_append_new(any, call_schema(t, fmt));
        else if (!one && !strcmp(json_string_value(nm), name)) one = call_schema(t, fmt);
    }
    if (!name) one = json_array_size(any) == 1 ? json_incref(json_array_get(any, 0)) : json_pack("{s:O}", "anyOf", any);
    json_decref(any);
    if (!one) return -1;
    if (fmt == SL_TOOLS_MISTRAL) one = json_pack("{s:s,s:o,s:i,s:i}", "type", "array", "items", one, "minItems", 1, "maxItems", 1);
    *prefix = strdup(fmt == SL_TOOLS_HERMES ? "<tool_call>\n" : fmt == SL_TOOLS_MISTRAL ? "[TOOL_CALLS]" : "");
    *schema = json_dumps(one, JSON_COMPACT);
    json_decref(one);
    return *schema && *prefix ? 0 : -1;
}

int tools_call_grammar(json_t *tools, const char *name, int fmt, char **schema, char **prefix, char **suffix)
{
    int rc = call_grammar(tools, name, fmt, schema, prefix, suffix);
    if (rc) {   /* nothing stays allocated */
        free(*schema);
        free(*prefix);
        free(*suffix);
        *schema = *prefix = *suffix = NULL;
    }
    return rc;
}

static void drop_grammar(job *j)
{
    free(j->schema);
    free(j->gprefix);
    free(j->gsuffix);
    j->schema = j->gprefix = j->gsuffix = NULL;
    j->grammar = false;
}

int tools_parse_request(sl_server *s, json_t *o, job *j, chat_tools *ct, char *msg, size_t msglen)
{
    memset(ct, 0, sizeof *ct);
    json_t *tools = json_object_get(o, "tools"), *choice = json_object_get(o, "tool_choice");
    bool parallel = true;
    json_t *par = json_object_get(o, "parallel_tool_calls");
    if (par && !json_is_null(par)) {
        if (!json_is_boolean(par)) BAD("'parallel_tool_calls' must be true or false");
        parallel = json_is_true(par);
    }
    size_t n = tools && !json_is_null(tools) ? (json_is_array(tools) ? json_array_size(tools) : (size_t)-1) : 0;
    if (n == (size_t)-1) BAD("'tools' must be an array");
    if (n > MAX_TOOLS) BAD("at most %d tools", MAX_TOOLS);
    const char *mode = n ? "auto" : "none";
    if (json_is_string(choice)) {
        mode = json_string_value(choice);
        if (strcmp(mode, "none") && strcmp(mode, "auto") && strcmp(mode, "required"))
            BAD("'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": "
                "{\"name\": ...}}");
    } else if (json_is_object(choice)) {
        json_t *fn = json_object_get(choice, "function"), *nm = json_object_get(fn, "name");
        if (!json_is_string(nm)) BAD("'tool_choice' must name a function: {\"type\": \"function\", \"function\": {\"name\": ...}}");
        mode = "named";
    } else if (choice && !json_is_null(choice)) {
        BAD("'tool_choice' must be a string or an object");
    }
    if (!n && strcmp(mode, "none")) BAD("'tool_choice' \"%s\" needs 'tools'", mode);
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        int r = check_tool(t, i, msg, msglen);
        if (r) return r;
    }
    j->think = s->tmpl == SL_TMPL_CHATML && !s->o.reasoning_inline;   /* (harmony's channels are split apart) */
    if (!strcmp(mode, "none")) { j->outparse = j->think; return 0; }
    if (sl_chat_tool_format(s->tmpl) == SL_TOOLS_NONE)
        BAD("'tools' need a chat template with tool calls; this model's is %s (supported: %s)",
            sl_chat_template_name(s->tmpl), sl_chat_tool_templates());
    if (!(ct->tools = calloc(n, sizeof *ct->tools))) BAD("out of memory");
    json_array_foreach(tools, i, t) {
        if (!(ct->tools[i] = json_dumps(t, JSON_COMPACT))) { tools_free_request(ct); BAD("out of memory"); }
        ct->n++;
    }
    j->tool_fmt = sl_chat_tool_format(s->tmpl);
    j->one_call = !parallel;
    j->outparse = true;
    if (!strcmp(mode, "required") || !strcmp(mode, "named")) {
        const char *want = !strcmp(mode, "named") ? json_string_value(json_object_get(json_object_get(choice, "function"), "name")) : NULL;
        json_t *rf = json_object_get(o, "response_format"), *rft = json_object_get(rf, "type");
        if (rf && !json_is_null(rf) && !(json_is_string(rft) && !strcmp(json_string_value(rft), "text"))) {
            tools_free_request(ct);
            BAD("'tool_choice' %s and 'response_format' both constrain the answer: give one",
                want ? "naming a function" : "\"required\"");
        }
        j->grammar = true;
        j->sp.ignore_eog = false;   /* --ignore-eos: a forced call ends where its value (and suffix) does */
        int g = tools_call_grammar(tools, want, j->tool_fmt, &j->schema, &j->gprefix, &j->gsuffix);
        if (g) {
            tools_free_request(ct);
            drop_grammar(j);
            if (g == -2) BAD("'tool_choice' \"required\" with several tools is not supported for gpt-oss (its call names the "
                             "tool in the message header): name the function");
            if (want) BAD("'tool_choice' names '%.64s', which is not one of the tools", want);
            BAD("out of memory");
        }
        char err[256];
        if (sluice_json_schema_check(j->schema, err, sizeof err)) {
            tools_free_request(ct);
            drop_grammar(j);
            BAD("'tools': a forced call's schema cannot be enforced: %s", err);
        }
    }
    return 0;
}

void tools_free_request(chat_tools *ct)
{
    for (int i = 0; i < ct->n; i++) free(ct->tools[i]);
    free(ct->tools);
    memset(ct, 0, sizeof *ct);
}

/* messages[i].tool_calls: [{"id":…,"type":"function","function":{"name":…,"arguments":"{…}"}}] */
static int parse_calls(json_t *a, size_t i, sl_chat_msg *cm, char *msg, size_t msglen)
{
    if (!json_is_array(a) || !json_array_size(a) || json_array_size(a) > 64)
        BAD("'messages'[%zu].tool_calls must be an array of 1 to 64 calls", i);
    sl_chat_tool_call *tc = calloc(json_array_size(a), sizeof *tc);
    if (!tc) BAD("out of memory");
    cm->tool_calls = tc;
    size_t k;
    json_t *c;
    json_array_foreach(a, k, c) {
        json_t *id = json_object_get(c, "id"), *ty = json_object_get(c, "type"), *fn = json_object_get(c, "function");
        json_t *nm = json_object_get(fn, "name"), *ar = json_object_get(fn, "arguments");
        if (!json_is_string(id) || (ty && (!json_is_string(ty) || strcmp(json_string_value(ty), "function"))) ||
            !json_is_string(nm) || !json_is_string(ar))
            BAD("'messages'[%zu].tool_calls[%zu] must be {\"id\": ..., \"type\": \"function\", \"function\": {\"name\": "
                "..., \"arguments\": \"<JSON text>\"}}", i, k);
        tc[k].id = strdup(json_string_value(id));
        tc[k].name = strdup(json_string_value(nm));
        tc[k].arguments = strdup(json_string_value(ar));
        cm->n_tool_calls++;
        if (!tc[k].id || !tc[k].name || !tc[k].arguments) BAD("out of memory");
    }
    return 0;
}

int tools_parse_message(json_t *e, size_t i, sl_chat_msg *cm, char *msg, size_t msglen)
{
    bool tool = !strcmp(cm->role, "tool"), assistant = !strcmp(cm->role, "assistant");
    const char *key;
    json_t *v;
    json_object_foreach(e, key, v) {
        if (!strcmp(key, "role") || !strcmp(key, "content") || json_is_null(v)) continue;
        if (assistant && !strcmp(key, "tool_calls")) {
            int r = parse_calls(v, i, cm, msg, msglen);
            if (r) return r;
        } else if (tool && !strcmp(key, "tool_call_id") && json_is_string(v)) {
            if (!(cm->tool_call_id = strdup(json_string_value(v)))) BAD("out of memory");
        } else if (tool && !strcmp(key, "name") && json_is_string(v)) {
            continue;   /* the function's name: none of the templates prints it (the call id ties the result) */
        } else {
            BAD("'messages'[%zu].%.32s is not supported (a message holds role and content; an assistant message also "
                "tool_calls, a tool message tool_call_id and name)", i, key);
        }
    }
    if (tool && !cm->tool_call_id) BAD("'messages'[%zu] (role tool) needs 'tool_call_id'", i);
    return 0;
}

void tools_free_message(sl_chat_msg *cm)
{
    for (int k = 0; k < cm->n_tool_calls; k++) {
        free((char *)cm->tool_calls[k].id);
        free((char *)cm->tool_calls[k].name);
        free((char *)cm->tool_calls[k].arguments);
    }
    free((sl_chat_tool_call *)cm->tool_calls);
    free((char *)cm->tool_call_id);
    cm->tool_calls = NULL;
    cm->n_tool_calls = 0;
    cm->tool_call_id = NULL;
}

/* ---- answer ------------------------------------------------------------------------------------- */

/* "call_" + 24 letters and digits: splitmix64 over a per-process start and a counter (distinct
 * counters give distinct 64-bit values, so ids cannot repeat within a process). */
static void new_call_id(char out[32])
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    static uint64_t start, counter;
    uint64_t zero = 0;
    __atomic_compare_exchange_n(&start, &zero, sl_now_ns() | 1, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    uint64_t c = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    memcpy(out, "call_", 5);
    for (int half = 0; half < 2; half++) {
        uint64_t z = __atomic_load_n(&start, __ATOMIC_RELAXED) + (2 * c + (uint64_t)half) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        for (int k = 0; k < 12; k++, z /= 62) out[5 + half * 12 + k] = abc[z % 62];
    }
    out[29] = 0;
}

/* gpt-oss: the call being read, a commentary message to=functions.NAME whose body is the arguments. */
typedef struct hm_call { int msg; char name[72]; char *args; size_t len, cap; bool oom; } hm_call;

void tools_free_job(job *j)
{
    sl_out_free(&j->op);
    if (j->hcall) free(j->hcall->args);
    free(j->hcall);
    j->hcall = NULL;
}

/* What the parser reported, in order: text grows in the current delta; a call closes it. */
typedef struct collected {
    const job *j;
    int n_calls;              /* calls reported */
    json_t *calls;            /* the tool_calls array (whole answer) */
    char *txt[2];             /* 0 reasoning, 1 content */
    size_t len[2], cap[2];
    bool oom;
    /* streaming: SSE events built so far */
    sl_server *s;
    bool stream;
    char *ev;
    size_t ev_len;
    int lp_from, lp_to;
    /* harmony */
    const sl_harmony *hm;
    hm_call *hc;
    int base;                 /* calls reported before this piece of the stream */
} collected;

static void grow_add(collected *c, int k, const char *t, size_t n)
{
    if (c->len[k] + n + 1 > c->cap[k]) {
        size_t cap = (c->len[k] + n + 1) * 2;
        char *nb = realloc(c->txt[k], cap);
        if (!nb) { c->oom = true; return; }
        c->txt[k] = nb;
        c->cap[k] = cap;
    }
    memcpy(c->txt[k] + c->len[k], t, n);
    c->len[k] += n;
    c->txt[k][c->len[k]] = 0;
}

static void add_event(collected *c, json_t *delta)
{
    json_t *o = oai_chunk_head(c->s, c->j);
    json_t *ch = json_pack("{s:i,s:o,s:n,s:n}", "index", 0, "delta", delta, "logprobs", "finish_reason");
    if (c->j->top_n >= 0 && c->lp_to > c->lp_from) {   /* the logprobs go with the first event */
        json_object_set_new(ch, "logprobs", lp_json(c->s, c->j, c->lp_from, c->lp_to));
        c->lp_from = c->lp_to;
    }
    json_object_set_new(o, "choices", json_pack("[o]", ch));
    size_t n;
    char *e = oai_event(o, &n);
    char *nb = e ? realloc(c->ev, c->ev_len + n + 1) : NULL;
    if (!nb) { free(e); c->oom = true; return; }
    memcpy(nb + c->ev_len, e, n + 1);
    c->ev = nb;
    c->ev_len += n;
    free(e);
}

/* Streaming: the text gathered so far as one delta. */
static void flush_text(collected *c)
{
    if (!c->len[0] && !c->len[1]) return;
    json_t *d = json_object();
    if (c->len[0]) json_object_set_new(d, "reasoning_content", json_stringn(c->txt[0], c->len[0]));
    if (c->len[1]) json_object_set_new(d, "content", json_stringn(c->txt[1], c->len[1]));
    add_event(c, d);
    c->len[0] = c->len[1] = 0;
}

static void on_output(void *user, int kind, int index, const char *name, const char *text, size_t len)
{
    collected *c = user;
    if (kind != SL_OUT_CALL) { grow_add(c, kind == SL_OUT_REASONING ? 0 : 1, text, len); return; }
    if (c->j->one_call && index > 0) return;   /* parallel_tool_calls false: the first call only */
    char id[32];
    new_call_id(id);
    c->n_calls++;
    if (!c->stream) {
        json_array_append_new(c->calls, json_pack("{s:s,s:s,s:{s:s,s:s%}}", "id", id, "type", "function", "function",
                                                  "name", name, "arguments", text, len));
        return;
    }
    flush_text(c);
    add_event(c, json_pack("{s:[{s:i,s:s,s:s,s:{s:s,s:s}}]}", "tool_calls", "index", index, "id", id, "type",
                           "function", "function", "name", name, "arguments", ""));
    add_event(c, json_pack("{s:[{s:i,s:{s:s%}}]}", "tool_calls", "index", index, "function", "arguments", text, len));
}

/* gpt-oss: the call read so far is complete (its message ended): a call if its body is a JSON
 * object, else content. */
static void hm_flush(collected *c)
{
    hm_call *hc = c->hc;
    if (!hc->msg) return;
    size_t e = 0;
    const char *a = hc->args ? hc->args : "";
    bool ok = !hc->oom && hc->len && a[0] == '{' && sl_json_scan(a, hc->len, &e) == SL_JSON_OK && e == hc->len;
    if (ok) on_output(c, SL_OUT_CALL, c->base + c->n_calls, hc->name, a, hc->len);
    else grow_add(c, 1, a, hc->len);
    hc->msg = 0;
    hc->len = 0;
}

static void hm_piece(void *user, int channel, const char *header, const char *text, size_t len)
{
    collected *c = user;
    hm_call *hc = c->hc;
    if (hc->msg && hc->msg != c->hm->n_messages) hm_flush(c);
    const char *to = channel == SL_HARMONY_COMMENTARY ? strstr(header, "to=functions.") : NULL;
    if (channel == SL_HARMONY_ANALYSIS || channel == SL_HARMONY_FINAL) {
        grow_add(c, channel == SL_HARMONY_ANALYSIS ? 0 : 1, text, len);
    } else if (to) {   /* other commentary (preambles) has no place in the answer */
        if (!hc->msg) {
            hc->msg = c->hm->n_messages;
            size_t nl = strcspn(to + 13, " <");
            if (nl >= sizeof hc->name) nl = sizeof hc->name - 1;
            memcpy(hc->name, to + 13, nl);
            hc->name[nl] = 0;
        }
        if (hc->len + len + 1 > hc->cap) {
            size_t cap = (hc->len + len + 1) * 2;
            char *nb = realloc(hc->args, cap);
            if (!nb) { hc->oom = true; return; }
            hc->args = nb;
            hc->cap = cap;
        }
        memcpy(hc->args + hc->len, text, len);
        hc->len += len;
        hc->args[hc->len] = 0;
    }
}

/* The whole text (or the next piece, stream) through j's parser: harmony's channels or tool_calls.c. */
static bool parse_text(collected *c, sl_out_parser *p, sl_harmony *hm, const char *text, size_t n, bool finish)
{
    const job *j = c->j;
    if (j->harmony) {
        c->hm = hm;
        if (n) sl_harmony_feed(hm, text, n, hm_piece, c);
        if (finish) { sl_harmony_finish(hm, hm_piece, c); hm_flush(c); }
        return !c->hc->oom;
    }
    bool ok = !n || sl_out_feed(p, text, n, on_output, c);
    return ok && (!finish || sl_out_finish(p, on_output, c));
}

void tools_fill_choice(sl_server *s, const job *j, json_t *choice)
{
    hm_call hc = { 0 };
    collected c = { .j = j, .s = s, .calls = json_array(), .hc = &hc };
    sl_out_parser p;
    sl_harmony hm;
    sl_out_init(&p, j->tool_fmt, j->think);
    sl_harmony_init(&hm);
    bool ok = parse_text(&c, &p, &hm, j->text ? j->text : "", j->text_len, true);
    sl_out_free(&p);
    free(hc.args);
    json_t *m = json_object_get(choice, "message");
    if (ok && !c.oom) {
        json_object_set_new(m, "content", c.len[1] || !c.n_calls ? json_stringn(c.txt[1] ? c.txt[1] : "", c.len[1])
                                                                 : json_null());
        if (c.len[0]) json_object_set_new(m, "reasoning_content", json_stringn(c.txt[0], c.len[0]));
        if (c.n_calls) {
            json_object_set(m, "tool_calls", c.calls);
            json_object_set_new(choice, "finish_reason", json_string("tool_calls"));
        }
    }   /* out of memory: the raw text stays the content */
    json_decref(c.calls);
    free(c.txt[0]);
    free(c.txt[1]);
}

char *tools_sse(sl_server *s, job *j, const char *text, size_t n, bool finish, int lp_from, int lp_to, size_t *len)
{
    if (!j->hcall && !(j->hcall = calloc(1, sizeof *j->hcall))) { *len = 0; return NULL; }
    collected c = { .j = j, .s = s, .stream = true, .lp_from = lp_from, .lp_to = lp_to, .hc = j->hcall, .base = j->n_calls };
    if (!j->op_started) { sl_out_init(&j->op, j->tool_fmt, j->think); j->op_started = true; }
    parse_text(&c, &j->op, &j->hm, text, n, finish);
    flush_text(&c);
    j->n_calls += c.n_calls;
    if (!c.ev_len && c.lp_to > c.lp_from) add_event(&c, json_object());   /* logprobs of held text */
    free(c.txt[0]);
    free(c.txt[1]);
    if (c.oom) { free(c.ev); c.ev = NULL; c.ev_len = 0; }
    *len = c.ev_len;
    return c.ev;
}
