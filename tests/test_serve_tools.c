/* tests/test_serve_tools.c — tool calls and reasoning through the server's OpenAI shapes
 * (runtime/serve/tools.c): a chat job's generated text (written by hand in each model's format, as
 * its tokenizer prints it: random-weight models do not call tools by themselves) becomes content,
 * reasoning_content and tool_calls in the whole answer, and the stream's chunks add up to the same
 * wherever the scheduler cut the text; the request side's checks; the grammar a forced call gets.
 * The parsers themselves: tests/test_tool_calls.c. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/serve/serve_internal.h"
#include "runtime/text/chat_template.h"

static const char qwen3_call[] =
    "<think>\nThe user wants the weather.\n</think>\n\nLet me look.\n<tool_call>\n"
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>\n"
    "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";

static void fake_job(sl_server *s, job *j, int tmpl, const char *text)
{
    memset(s, 0, sizeof *s);
    memset(j, 0, sizeof *j);
    static char name[] = "qwen3";
    s->o.model_name = name;
    s->tmpl = tmpl;
    j->kind = JOB_CHAT;
    j->outparse = true;
    j->tool_fmt = sl_chat_tool_format(tmpl);
    j->think = tmpl == SL_TMPL_CHATML;
    j->top_n = -1;
    j->finish = FINISH_STOP;
    snprintf(j->id, sizeof j->id, "chatcmpl-test");
    j->text = strdup(text);
    j->text_len = strlen(text);
}

static json_t *whole(sl_server *s, job *j, json_t **choice)
{
    size_t len;
    char *body = oai_response(s, j, &len);
    cr_assert_not_null(body);
    json_t *o = json_loadb(body, len, 0, NULL);
    cr_assert_not_null(o, "%s", body);
    free(body);
    *choice = json_array_get(json_object_get(o, "choices"), 0);
    return o;
}

static void expect_call(json_t *c, const char *name, const char *args)
{
    const char *id = json_string_value(json_object_get(c, "id"));
    cr_assert_not_null(id);
    cr_expect(!strncmp(id, "call_", 5) && strlen(id) == 29, "id %s", id);
    cr_expect_str_eq(json_string_value(json_object_get(c, "type")), "function");
    json_t *fn = json_object_get(c, "function");
    cr_expect_str_eq(json_string_value(json_object_get(fn, "name")), name);
    cr_expect_str_eq(json_string_value(json_object_get(fn, "arguments")), args);
    json_t *parsed = json_loads(json_string_value(json_object_get(fn, "arguments")), 0, NULL);
    cr_expect(json_is_object(parsed), "arguments must parse as a JSON object");
    json_decref(parsed);
}

Test(serve_tools, whole_answer)
{
    sl_server s;
    job j;
    json_t *ch;
    fake_job(&s, &j, SL_TMPL_CHATML, qwen3_call);
    json_t *o = whole(&s, &j, &ch);
    json_t *m = json_object_get(ch, "message");
    cr_expect_str_eq(json_string_value(json_object_get(ch, "finish_reason")), "tool_calls");
    cr_expect_str_eq(json_string_value(json_object_get(m, "content")), "Let me look.");
    cr_expect_str_eq(json_string_value(json_object_get(m, "reasoning_content")), "The user wants the weather.");
    json_t *calls = json_object_get(m, "tool_calls");
    cr_assert_eq(json_array_size(calls), 2);
    expect_call(json_array_get(calls, 0), "get_weather", "{\"city\": \"Paris\", \"days\": 2}");
    expect_call(json_array_get(calls, 1), "get_time", "{}");
    cr_expect_str_neq(json_string_value(json_object_get(json_array_get(calls, 0), "id")),
                      json_string_value(json_object_get(json_array_get(calls, 1), "id")), "ids are unique");
    json_decref(o);

    j.one_call = true;   /* parallel_tool_calls false */
    o = whole(&s, &j, &ch);
    cr_expect_eq(json_array_size(json_object_get(json_object_get(ch, "message"), "tool_calls")), 1);
    json_decref(o);

    /* only calls: content null (as OpenAI sends it); no calls: plain answer, finish_reason stop */
    free(j.text);
    fake_job(&s, &j, SL_TMPL_LLAMA3, "{\"name\": \"f\", \"parameters\": {\"a\": [true]}}");
    o = whole(&s, &j, &ch);
    cr_expect(json_is_null(json_object_get(json_object_get(ch, "message"), "content")));
    expect_call(json_array_get(json_object_get(json_object_get(ch, "message"), "tool_calls"), 0), "f", "{\"a\": [true]}");
    json_decref(o);
    free(j.text);
    fake_job(&s, &j, SL_TMPL_LLAMA3, "{\"name\": \"f\", \"parameters\": oops}");
    o = whole(&s, &j, &ch);
    cr_expect_str_eq(json_string_value(json_object_get(ch, "finish_reason")), "stop");
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(ch, "message"), "content")),
                     "{\"name\": \"f\", \"parameters\": oops}");
    cr_expect_null(json_object_get(json_object_get(ch, "message"), "tool_calls"));
    json_decref(o);
    free(j.text);
}

/* The stream's chunks, put together as a client does. */
typedef struct acc { char reasoning[512], content[512], name[2][64], args[2][256], id[2][40]; int chunks[2]; } acc;

static void add_events(const char *ev, size_t len, acc *a)
{
    for (const char *p = ev; p < ev + len;) {
        const char *e = strstr(p, "\n\n");
        cr_assert(e && !memcmp(p, "data: ", 6), "not an SSE event: %.*s", (int)len, ev);
        json_t *o = json_loadb(p + 6, (size_t)(e - p - 6), 0, NULL);
        cr_assert_not_null(o);
        json_t *d = json_object_get(json_array_get(json_object_get(o, "choices"), 0), "delta");
        json_t *r = json_object_get(d, "reasoning_content"), *c = json_object_get(d, "content");
        if (r) strcat(a->reasoning, json_string_value(r));
        if (c) strcat(a->content, json_string_value(c));
        json_t *tc = json_object_get(d, "tool_calls");
        if (tc) {
            cr_assert_eq(json_array_size(tc), 1);
            json_t *t = json_array_get(tc, 0), *fn = json_object_get(t, "function");
            int k = (int)json_integer_value(json_object_get(t, "index"));
            cr_assert(k >= 0 && k < 2);
            if (a->chunks[k]++ == 0) {   /* the first chunk of a call: id, type, name, empty arguments */
                strcpy(a->id[k], json_string_value(json_object_get(t, "id")));
                cr_expect_str_eq(json_string_value(json_object_get(t, "type")), "function");
                strcpy(a->name[k], json_string_value(json_object_get(fn, "name")));
                cr_expect_str_eq(json_string_value(json_object_get(fn, "arguments")), "");
            } else {
                cr_expect_null(json_object_get(t, "id"));
                strcat(a->args[k], json_string_value(json_object_get(fn, "arguments")));
            }
        }
        json_decref(o);
        p = e + 2;
    }
}

Test(serve_tools, stream_adds_up_wherever_cut)
{
    const size_t n = strlen(qwen3_call);
    for (size_t step = 1; step <= n; step++) {
        sl_server s;
        job j;
        fake_job(&s, &j, SL_TMPL_CHATML, qwen3_call);
        acc a = { 0 };
        size_t len;
        for (size_t at = 0; at < n; at += step) {
            size_t k = n - at < step ? n - at : step;
            char *ev = tools_sse(&s, &j, qwen3_call + at, k, false, 0, 0, &len);
            if (ev) add_events(ev, len, &a);
            cr_assert(ev || !len);
            free(ev);
        }
        char *ev = tools_sse(&s, &j, "", 0, true, 0, 0, &len);
        if (ev) add_events(ev, len, &a);
        free(ev);
        cr_assert_str_eq(a.reasoning, "The user wants the weather.", "cut every %zu bytes", step);
        cr_assert_str_eq(a.content, "Let me look.", "cut every %zu bytes", step);
        cr_assert_str_eq(a.name[0], "get_weather");
        cr_assert_str_eq(a.args[0], "{\"city\": \"Paris\", \"days\": 2}");
        cr_assert_str_eq(a.name[1], "get_time");
        cr_assert_str_eq(a.args[1], "{}");
        cr_assert(a.chunks[0] == 2 && a.chunks[1] == 2);
        cr_assert_str_neq(a.id[0], a.id[1]);
        cr_assert_eq(j.n_calls, 2);
        ev = oai_sse_chunk(&s, &j, "", 0, 0, 0, false, FINISH_STOP, &len);
        cr_assert(strstr(ev, "\"finish_reason\":\"tool_calls\""), "%s", ev);
        free(ev);
        tools_free_job(&j);
        free(j.text);
    }
}

/* --reasoning-format none: the <think> block stays in content (think off), calls still parsed. */
Test(serve_tools, reasoning_inline)
{
    sl_server s;
    job j;
    json_t *ch;
    fake_job(&s, &j, SL_TMPL_CHATML, "<think>\nhm\n</think>\n\nHi");
    j.think = false;
    json_t *o = whole(&s, &j, &ch);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(ch, "message"), "content")), "<think>\nhm\n</think>\n\nHi");
    cr_expect_null(json_object_get(json_object_get(ch, "message"), "reasoning_content"));
    json_decref(o);
    free(j.text);
}

static int parse_req(int tmpl, const char *body, job *j, chat_tools *ct, char *msg)
{
    static sl_server s;
    memset(&s, 0, sizeof s);
    s.tmpl = tmpl;
    memset(j, 0, sizeof *j);
    j->sp.ignore_eog = true;   /* as parse_common leaves it on a server run with --ignore-eos */
    json_t *o = json_loads(body, 0, NULL);
    cr_assert_not_null(o, "%s", body);
    int rc = tools_parse_request(&s, o, j, ct, msg, 256);
    json_decref(o);
    return rc;
}

#define TOOL "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\"}}}"

Test(serve_tools, request_checks)
{
    job j;
    chat_tools ct;
    char msg[256];
    cr_assert_eq(parse_req(SL_TMPL_CHATML, "{\"tools\":[" TOOL "]}", &j, &ct, msg), 0, "%s", msg);
    cr_expect(j.outparse && j.think && j.tool_fmt == SL_TOOLS_HERMES && !j.one_call);
    cr_assert_eq(ct.n, 1);
    cr_expect_str_eq(ct.tools[0], TOOL);
    tools_free_request(&ct);
    cr_assert_eq(parse_req(SL_TMPL_CHATML, "{\"tools\":[" TOOL "],\"tool_choice\":\"none\",\"parallel_tool_calls\":false}",
                           &j, &ct, msg), 0, "%s", msg);
    cr_expect(ct.n == 0 && j.tool_fmt == SL_TOOLS_NONE && j.think, "none: tools neither rendered nor parsed");
    cr_assert_eq(parse_req(SL_TMPL_LLAMA3, "{\"tools\":[" TOOL "],\"tool_choice\":{\"type\":\"function\",\"function\":"
                           "{\"name\":\"get_weather\"}}}", &j, &ct, msg), 0, "%s", msg);
    cr_expect(!j.sp.ignore_eog, "a forced call ends (the server's --ignore-eos does not apply)");
    cr_expect(j.grammar && j.schema && strstr(j.schema, "\"const\":\"get_weather\"") && !strcmp(j.gprefix, "") && !j.think);
    free(j.schema);
    free(j.gprefix);
    free(j.gsuffix);
    tools_free_request(&ct);
    /* a schema the grammar refuses is fine when nothing is forced: it is only shown to the model */
    cr_assert_eq(parse_req(SL_TMPL_CHATML, "{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\",\"parameters\":"
                           "{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"pattern\":\"^a\"}}}}}]}",
                           &j, &ct, msg), 0, "%s", msg);
    cr_expect(!j.grammar && !j.schema);
    tools_free_request(&ct);
    struct { int tmpl; const char *body, *says; } bad[] = {
        { SL_TMPL_GEMMA, "{\"tools\":[" TOOL "]}", "supported: " },
        { SL_TMPL_CHATML, "{\"tools\":{}}", "must be an array" },
        { SL_TMPL_CHATML, "{\"tool_choice\":\"auto\"}", "needs 'tools'" },
        { SL_TMPL_CHATML, "{\"tools\":[" TOOL "],\"tool_choice\":\"sometimes\"}", "must be \"none\"" },
        { SL_TMPL_CHATML, "{\"tools\":[{\"type\":\"retrieval\"}]}", "only function tools" },
        { SL_TMPL_CHATML, "{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]}", "letters, digits" },
        { SL_TMPL_CHATML, "{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\",\"parameters\":[]}}]}", "parameters" },
        { SL_TMPL_CHATML, "{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\",\"strict\":true}}]}", "not constrained" },
        { SL_TMPL_CHATML, "{\"tools\":[" TOOL "],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"nope\"}}}",
          "not one of the tools" },
        { SL_TMPL_CHATML, "{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\",\"parameters\":{\"type\":\"object\","
          "\"properties\":{\"s\":{\"type\":\"string\",\"pattern\":\"^a\"}}}}}],\"tool_choice\":\"required\"}", "'pattern'" },
        { SL_TMPL_CHATML, "{\"tools\":[" TOOL "],\"parallel_tool_calls\":1}", "true or false" },
        { SL_TMPL_CHATML, "{\"tools\":[" TOOL "],\"tool_choice\":\"required\",\"response_format\":{\"type\":\"json_object\"}}",
          "both constrain" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_expect_eq(parse_req(bad[i].tmpl, bad[i].body, &j, &ct, msg), 400, "%s", bad[i].body);
        cr_expect(strstr(msg, bad[i].says), "%s: %s", bad[i].body, msg);
        tools_free_request(&ct);
    }
}

Test(serve_tools, message_checks)
{
    char msg[256];
    struct { const char *role, *body, *says; } cases[] = {
        { "assistant", "{\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}", NULL },
        { "tool", "{\"tool_call_id\":\"call_1\",\"name\":\"f\",\"content\":\"21\"}", NULL },
        { "tool", "{\"content\":\"21\"}", "needs 'tool_call_id'" },
        { "user", "{\"tool_calls\":[]}", "not supported" },
        { "assistant", "{\"tool_calls\":[{\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":{}}}]}", "arguments" },
        { "assistant", "{\"tool_calls\":[]}", "1 to 64" },
        { "assistant", "{\"tool_call_id\":\"x\"}", "not supported" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sl_chat_msg cm = { .role = cases[i].role };
        json_t *e = json_loads(cases[i].body, 0, NULL);
        int rc = tools_parse_message(e, 3, &cm, msg, sizeof msg);
        if (!cases[i].says) cr_expect_eq(rc, 0, "%s: %s", cases[i].body, msg);
        else cr_expect(rc == 400 && strstr(msg, cases[i].says), "%s: %d %s", cases[i].body, rc, msg);
        if (i == 0) cr_expect(cm.n_tool_calls == 1 && !strcmp(cm.tool_calls[0].arguments, "{}"));
        if (i == 1) cr_expect_str_eq(cm.tool_call_id, "call_1");
        tools_free_message(&cm);
        json_decref(e);
    }
}

/* The grammar of a forced call: per format, the schema of a call (name const, arguments the tool's
 * parameters, additionalProperties false) and the literals around it. */
Test(serve_tools, call_grammar)
{
    json_t *tools = json_loads("[" TOOL ",{\"type\":\"function\",\"function\":{\"name\":\"get_time\"}}]", 0, NULL);
    char *schema;
    char *pre, *suf;
    cr_assert_eq(tools_call_grammar(tools, "get_weather", SL_TOOLS_HERMES, &schema, &pre, &suf), 0);
    cr_expect_str_eq(schema, "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"get_weather\"},\"arguments\":"
                             "{\"type\":\"object\"}},\"required\":[\"name\",\"arguments\"],\"additionalProperties\":false}");
    cr_expect_str_eq(pre, "<tool_call>\n");
    cr_expect_str_eq(suf, "\n</tool_call>");
    free(schema);
    free(pre);
    free(suf);
    cr_assert_eq(tools_call_grammar(tools, NULL, SL_TOOLS_LLAMA3, &schema, &pre, &suf), 0);
    cr_expect_str_eq(schema, "{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"get_weather\"},"
                             "\"parameters\":{\"type\":\"object\"}},\"required\":[\"name\",\"parameters\"],"
                             "\"additionalProperties\":false},{\"type\":\"object\",\"properties\":{\"name\":{\"const\":"
                             "\"get_time\"},\"parameters\":{\"type\":\"object\",\"properties\":{}}},\"required\":[\"name\","
                             "\"parameters\"],\"additionalProperties\":false}]}");
    cr_expect_str_eq(pre, "");
    cr_expect_str_eq(suf, "");
    free(schema);
    free(pre);
    free(suf);
    cr_assert_eq(tools_call_grammar(tools, "get_time", SL_TOOLS_MISTRAL, &schema, &pre, &suf), 0);
    cr_expect_str_eq(schema, "{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"name\":{\"const\":"
                             "\"get_time\"},\"arguments\":{\"type\":\"object\",\"properties\":{}}},\"required\":[\"name\","
                             "\"arguments\"],\"additionalProperties\":false},\"minItems\":1,\"maxItems\":1}");
    cr_expect_str_eq(pre, "[TOOL_CALLS]");
    free(schema);
    free(pre);
    free(suf);
    /* gpt-oss: the header names the tool; the body is its arguments */
    cr_assert_eq(tools_call_grammar(tools, "get_weather", SL_TOOLS_HARMONY, &schema, &pre, &suf), 0);
    cr_expect_str_eq(schema, "{\"type\":\"object\"}");
    cr_expect_str_eq(pre, "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>");
    cr_expect_str_eq(suf, "");
    free(schema);
    free(pre);
    free(suf);
    cr_expect_eq(tools_call_grammar(tools, NULL, SL_TOOLS_HARMONY, &schema, &pre, &suf), -2, "required, two tools");
    cr_expect_eq(tools_call_grammar(tools, "nope", SL_TOOLS_HERMES, &schema, &pre, &suf), -1);
    json_decref(tools);
}

/* gpt-oss with tools: the analysis channel is reasoning, a commentary message to=functions.NAME a
 * call (its body the arguments), the final channel content — whole and streamed, cut anywhere. */
static const char harmony_call[] =
    "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
    "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\",\"days\":2}";

static void fake_harmony(sl_server *s, job *j, const char *text)
{
    fake_job(s, j, SL_TMPL_HARMONY, text);
    j->harmony = true;
    sl_harmony_init(&j->hm);
}

Test(serve_tools, harmony_calls)
{
    sl_server s;
    job j;
    json_t *ch;
    fake_harmony(&s, &j, harmony_call);
    json_t *o = whole(&s, &j, &ch);
    json_t *m = json_object_get(ch, "message");
    cr_expect_str_eq(json_string_value(json_object_get(ch, "finish_reason")), "tool_calls");
    cr_expect_str_eq(json_string_value(json_object_get(m, "reasoning_content")), "Need the weather.");
    cr_expect(json_is_null(json_object_get(m, "content")));
    expect_call(json_array_get(json_object_get(m, "tool_calls"), 0), "get_weather", "{\"city\":\"Paris\",\"days\":2}");
    json_decref(o);
    free(j.text);
    /* a call whose body is not a JSON object is content; a plain final answer stays one */
    fake_harmony(&s, &j, "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{oops<|end|>"
                         "<|start|>assistant<|channel|>final<|message|>Done.");
    o = whole(&s, &j, &ch);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(ch, "message"), "content")), "{oopsDone.");
    cr_expect_str_eq(json_string_value(json_object_get(ch, "finish_reason")), "stop");
    json_decref(o);
    free(j.text);

    const size_t n = strlen(harmony_call);
    for (size_t step = 1; step <= n; step++) {
        fake_harmony(&s, &j, harmony_call);
        acc a = { 0 };
        size_t len;
        for (size_t at = 0; at < n; at += step) {
            size_t k = n - at < step ? n - at : step;
            char *ev = tools_sse(&s, &j, harmony_call + at, k, false, 0, 0, &len);
            if (ev) add_events(ev, len, &a);
            free(ev);
        }
        char *ev = tools_sse(&s, &j, "", 0, true, 0, 0, &len);
        if (ev) add_events(ev, len, &a);
        free(ev);
        cr_assert_str_eq(a.reasoning, "Need the weather.", "cut every %zu bytes", step);
        cr_assert_str_eq(a.content, "");
        cr_assert_str_eq(a.name[0], "get_weather");
        cr_assert_str_eq(a.args[0], "{\"city\":\"Paris\",\"days\":2}");
        cr_assert_eq(j.n_calls, 1);
        tools_free_job(&j);
        free(j.text);
    }
}
