/* tests/test_chat_tools.c — tools rendered into the prompt as each model's own template does.
 *
 * The reference strings are the output of the real templates (llama.cpp's copies in
 * models/templates: Qwen-Qwen3-0.6B.jinja, meta-llama-Llama-3.1-8B-Instruct.jinja,
 * mistralai-Mistral-Nemo-Instruct-2407.jinja), rendered with Python's jinja2 3.1.6 set up as
 * transformers' apply_chat_template sets it up (trim_blocks, lstrip_blocks, tojson =
 * json.dumps(ensure_ascii=False), bos_token "" because the tokenizer adds it, eos_token "</s>"),
 * pasted here as C strings, and read through by hand against the template text.  The conversation:
 * a system message, a user question, an assistant turn that calls get_weather, the tool's result,
 * and the generation prompt; two tools, one with a non-ASCII description and one with an empty
 * properties object.  The call's arguments are what each template is given by llama.cpp: the
 * string the API carries for Qwen3 (its template prints a string as is), an object for Llama 3.1
 * and Mistral Nemo (their templates print it with tojson).  Mistral needs 9-character ids: the
 * template got "abc123XYZ", sluice the id "call_abc123XYZ" (printed as its last 9 letters and
 * digits).  gpt-oss (openai-gpt-oss-120b.jinja, strftime_now fixed to 2025-08-05): three tools
 * whose parameters exercise the TypeScript rendering (arrays, nested objects, enums, defaults,
 * type lists, nullable, an empty schema).  Rendering is string-exact.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/text/chat_template.h"
#include "runtime/text/json_text.h"

static const char want_qwen3[] =
    "<|im_start|>system\n"
    "You are a helpful assistant.\n"
    "\n"
    "# Tools\n"
    "\n"
    "You may call one or more functions to assist with the user query.\n"
    "\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather in a city — now\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"City name\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"]}}, \"required\": [\"city\"]}}}\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {\"type\": \"object\", \"properties\": {}}}}\n"
    "</tools>\n"
    "\n"
    "For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n"
    "<tool_call>\n"
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "What is the weather in Paris?<|im_end|>\n"
    "<|im_start|>assistant\n"
    "<tool_call>\n"
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "<tool_response>\n"
    "{\"temperature\": 21}\n"
    "</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n";

static const char want_llama31[] =
    "<|start_header_id|>system<|end_header_id|>\n"
    "\n"
    "Environment: ipython\n"
    "Cutting Knowledge Date: December 2023\n"
    "Today Date: 26 Jul 2024\n"
    "\n"
    "You are a helpful assistant.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
    "\n"
    "Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n"
    "\n"
    "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.Do not use variables.\n"
    "\n"
    "{\n"
    "    \"type\": \"function\",\n"
    "    \"function\": {\n"
    "        \"name\": \"get_weather\",\n"
    "        \"description\": \"Weather in a city — now\",\n"
    "        \"parameters\": {\n"
    "            \"type\": \"object\",\n"
    "            \"properties\": {\n"
    "                \"city\": {\n"
    "                    \"type\": \"string\",\n"
    "                    \"description\": \"City name\"\n"
    "                },\n"
    "                \"unit\": {\n"
    "                    \"type\": \"string\",\n"
    "                    \"enum\": [\n"
    "                        \"celsius\",\n"
    "                        \"fahrenheit\"\n"
    "                    ]\n"
    "                }\n"
    "            },\n"
    "            \"required\": [\n"
    "                \"city\"\n"
    "            ]\n"
    "        }\n"
    "    }\n"
    "}\n"
    "\n"
    "{\n"
    "    \"type\": \"function\",\n"
    "    \"function\": {\n"
    "        \"name\": \"get_time\",\n"
    "        \"parameters\": {\n"
    "            \"type\": \"object\",\n"
    "            \"properties\": {}\n"
    "        }\n"
    "    }\n"
    "}\n"
    "\n"
    "What is the weather in Paris?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
    "\n"
    "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n"
    "\n"
    "\"{\\\"temperature\\\": 21}\"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
    "\n";

static const char want_nemo[] =
    "[AVAILABLE_TOOLS][{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather in a city — now\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"City name\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"]}}, \"required\": [\"city\"]}}}, {\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {\"type\": \"object\", \"properties\": {}}}}][/AVAILABLE_TOOLS][INST]What is the weather in Paris?[/INST][TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}, \"id\": \"abc123XYZ\"}]</s>[TOOL_RESULTS]{\"content\": {\"temperature\": 21}, \"call_id\": \"abc123XYZ\"}[/TOOL_RESULTS]";

static const char want_qwen3_first[] =
    "<|im_start|>system\n"
    "You are a helpful assistant.\n"
    "\n"
    "# Tools\n"
    "\n"
    "You may call one or more functions to assist with the user query.\n"
    "\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather in a city — now\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"City name\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"]}}, \"required\": [\"city\"]}}}\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {\"type\": \"object\", \"properties\": {}}}}\n"
    "</tools>\n"
    "\n"
    "For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n"
    "<tool_call>\n"
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "What is the weather in Paris?<|im_end|>\n"
    "<|im_start|>assistant\n";

static const char want_llama31_first[] =
    "<|start_header_id|>system<|end_header_id|>\n"
    "\n"
    "Environment: ipython\n"
    "Cutting Knowledge Date: December 2023\n"
    "Today Date: 26 Jul 2024\n"
    "\n"
    "You are a helpful assistant.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
    "\n"
    "Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n"
    "\n"
    "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.Do not use variables.\n"
    "\n"
    "{\n"
    "    \"type\": \"function\",\n"
    "    \"function\": {\n"
    "        \"name\": \"get_weather\",\n"
    "        \"description\": \"Weather in a city — now\",\n"
    "        \"parameters\": {\n"
    "            \"type\": \"object\",\n"
    "            \"properties\": {\n"
    "                \"city\": {\n"
    "                    \"type\": \"string\",\n"
    "                    \"description\": \"City name\"\n"
    "                },\n"
    "                \"unit\": {\n"
    "                    \"type\": \"string\",\n"
    "                    \"enum\": [\n"
    "                        \"celsius\",\n"
    "                        \"fahrenheit\"\n"
    "                    ]\n"
    "                }\n"
    "            },\n"
    "            \"required\": [\n"
    "                \"city\"\n"
    "            ]\n"
    "        }\n"
    "    }\n"
    "}\n"
    "\n"
    "{\n"
    "    \"type\": \"function\",\n"
    "    \"function\": {\n"
    "        \"name\": \"get_time\",\n"
    "        \"parameters\": {\n"
    "            \"type\": \"object\",\n"
    "            \"properties\": {}\n"
    "        }\n"
    "    }\n"
    "}\n"
    "\n"
    "What is the weather in Paris?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
    "\n";

static const char want_nemo_first[] =
    "[AVAILABLE_TOOLS][{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather in a city — now\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"City name\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"]}}, \"required\": [\"city\"]}}}, {\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {\"type\": \"object\", \"properties\": {}}}}][/AVAILABLE_TOOLS][INST]You are a helpful assistant.\n"
    "\n"
    "What is the weather in Paris?[/INST]";

/* The tools as serve passes them: jansson's compact dump, the client's key order. */
static const char *const tools[] = {
    "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather in a city — now\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"description\":\"City name\"},"
    "\"unit\":{\"type\":\"string\",\"enum\":[\"celsius\",\"fahrenheit\"]}},\"required\":[\"city\"]}}}",
    "{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"parameters\":{\"type\":\"object\",\"properties\":{}}}}",
};

static const sl_chat_tool_call call = { .id = "call_abc123XYZ", .name = "get_weather",
                                        .arguments = "{\"city\": \"Paris\", \"unit\": \"celsius\"}" };
static const sl_chat_msg conv[] = {
    { .role = "system", .content = "You are a helpful assistant." },
    { .role = "user", .content = "What is the weather in Paris?" },
    { .role = "assistant", .content = "", .tool_calls = &call, .n_tool_calls = 1 },
    { .role = "tool", .content = "{\"temperature\": 21}", .tool_call_id = "call_abc123XYZ" },
};

static void expect_render(const char *tmpl, int n, bool add_assistant, const char *want)
{
    int t = sl_chat_template_from_name(tmpl);
    sl_chat_opts o = { .add_assistant = add_assistant, .tools = tools, .n_tools = 2 };
    char err[256] = "";
    cr_assert_eq(sl_chat_check(t, conv, n, &o, err, sizeof err), 0, "%s", err);
    size_t len = 0;
    char *s = sl_chat_render_opts(t, conv, n, &o, &len);
    cr_assert_not_null(s);
    cr_expect_eq(len, strlen(s));
    cr_expect_str_eq(s, want, "%s, %d messages:\n%s\n--- want ---\n%s", tmpl, n, s, want);
    free(s);
}

Test(chat_tools, qwen3_hermes) { expect_render("chatml", 4, true, want_qwen3); expect_render("chatml", 2, true, want_qwen3_first); }
Test(chat_tools, llama31) { expect_render("llama3", 4, true, want_llama31); expect_render("llama3", 2, true, want_llama31_first); }
/* Nemo's template has no generation prompt: [/INST] or [/TOOL_RESULTS] is where the model answers */
Test(chat_tools, mistral_nemo) { expect_render("mistral-v3-tekken", 4, true, want_nemo); expect_render("mistral-v3-tekken", 2, true, want_nemo_first); }

static const char want_harmony[] =
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
    "Knowledge cutoff: 2024-06\n"
    "Current date: 2025-08-05\n"
    "\n"
    "Reasoning: medium\n"
    "\n"
    "# Valid channels: analysis, commentary, final. Channel must be included for every message.\n"
    "Calls to these tools must go to the commentary channel: 'functions'.<|end|><|start|>developer<|message|># Instructions\n"
    "\n"
    "Be brief.\n"
    "\n"
    "# Tools\n"
    "\n"
    "## functions\n"
    "\n"
    "namespace functions {\n"
    "\n"
    "// Weather in a city — now\n"
    "type get_weather = (_: {\n"
    "// City name\n"
    "city: string,\n"
    "unit?: \"celsius\" | \"fahrenheit\",\n"
    "}) => any;\n"
    "\n"
    "// The time\n"
    "type get_time = () => any;\n"
    "\n"
    "// Search things\n"
    "type search = (_: {\n"
    "// The query\n"
    "q: string,\n"
    "tags?: string[],\n"
    "n?: number, // default: 5,\n"
    "nested?: {\n"
    "a: \n"
    "                number, b?: \n"
    "                boolean},\n"
    "mode?: \"fast\" | \"slow\", // default: fast,\n"
    "objs?: {\n"
    "x?: \n"
    "                number}[],\n"
    "multi?: string | null,\n"
    "opt?: string | null,\n"
    "anyv?: any,\n"
    "}) => any;\n"
    "\n"
    "} // namespace functions<|end|><|start|>user<|message|>Weather in Paris?<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\", \"unit\": \"celsius\"}<|call|><|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>\"{\\\"temperature\\\": 21}\"<|end|><|start|>assistant";

static const char *const harmony_tools[] = {
    "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather in a city — now\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"description\":\"City name\"},\"unit\":{\"type\":\"string\",\"enum\":[\"celsius\",\"fahrenheit\"]}},\"required\":[\"city\"]}}}",
    "{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"parameters\":{\"type\":\"object\",\"properties\":{}},\"description\":\"The time\"}}",
    "{\"type\":\"function\",\"function\":{\"name\":\"search\",\"description\":\"Search things\",\"parameters\":{\"type\":\"object\",\"properties\":{\"q\":{\"type\":\"string\",\"description\":\"The query\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},\"n\":{\"type\":\"integer\",\"default\":5},\"nested\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\"},\"b\":{\"type\":\"boolean\"}},\"required\":[\"a\"]},\"mode\":{\"type\":\"string\",\"enum\":[\"fast\",\"slow\"],\"default\":\"fast\"},\"objs\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"}}}},\"multi\":{\"type\":[\"string\",\"null\"]},\"opt\":{\"type\":\"string\",\"nullable\":true},\"anyv\":{}},\"required\":[\"q\"]}}}"
};

Test(chat_tools, gpt_oss_harmony)
{
    sl_chat_tool_call c = call;
    const sl_chat_msg conv_h[] = {
        { .role = "system", .content = "Be brief." },
        { .role = "user", .content = "Weather in Paris?" },
        { .role = "assistant", .content = "", .tool_calls = &c, .n_tool_calls = 1 },
        { .role = "tool", .content = "{\"temperature\": 21}", .tool_call_id = "call_abc123XYZ" },
    };
    sl_chat_opts o = { .add_assistant = true, .date = "2025-08-05", .tools = harmony_tools, .n_tools = 3 };
    char err[256] = "";
    cr_assert_eq(sl_chat_check(SL_TMPL_HARMONY, conv_h, 4, &o, err, sizeof err), 0, "%s", err);
    char *s = sl_chat_render_opts(SL_TMPL_HARMONY, conv_h, 4, &o, NULL);
    cr_assert_not_null(s);
    cr_expect_str_eq(s, want_harmony, "harmony:\n%s\n--- want ---\n%s", s, want_harmony);
    free(s);
    /* a tool message that follows no call */
    cr_expect_eq(sl_chat_check(SL_TMPL_HARMONY, conv_h + 3, 1, &o, err, sizeof err), -22);
}

/* Without tools and tool turns the templates render as before (test_chat_template's strings). */
Test(chat_tools, no_tools_unchanged)
{
    sl_chat_opts o = { .add_assistant = true };
    char *s = sl_chat_render_opts(SL_TMPL_CHATML, conv, 2, &o, NULL);
    cr_expect_str_eq(s, "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
                        "What is the weather in Paris?<|im_end|>\n<|im_start|>assistant\n");
    free(s);
}

Test(chat_tools, checks)
{
    char err[256];
    sl_chat_opts o = { .add_assistant = true, .tools = tools, .n_tools = 1 };
    cr_expect_eq(sl_chat_check(SL_TMPL_GEMMA, conv, 2, &o, err, sizeof err), -22);
    cr_expect(strstr(err, "supported: ") && strstr(err, "gemma"), "%s", err);
    cr_expect_eq(sl_chat_check(SL_TMPL_PHI3, conv, 4, NULL, err, sizeof err), -22, "a tool turn needs a tool format");
    sl_chat_tool_call two[2] = { call, call };
    sl_chat_msg m[2] = { { .role = "user", .content = "x" }, { .role = "assistant", .content = "", .tool_calls = two, .n_tool_calls = 2 } };
    cr_expect_eq(sl_chat_check(SL_TMPL_LLAMA3, m, 2, &o, err, sizeof err), -22);
    cr_expect(strstr(err, "one call"), "%s", err);
    cr_expect_eq(sl_chat_check(SL_TMPL_CHATML, m, 2, &o, err, sizeof err), 0, "%s", err);
    two[1].arguments = "[1]";
    cr_expect_eq(sl_chat_check(SL_TMPL_CHATML, m, 2, &o, err, sizeof err), -22);
    cr_expect(strstr(err, "JSON object"), "%s", err);
    two[1].arguments = "{\"a\": 1} x";
    cr_expect_eq(sl_chat_check(SL_TMPL_CHATML, m, 2, &o, err, sizeof err), -22);
    sl_chat_msg sys_only[1] = { { .role = "system", .content = "s" } };
    cr_expect_eq(sl_chat_check(SL_TMPL_LLAMA3, sys_only, 1, &o, err, sizeof err), -22);
    cr_expect_eq(sl_chat_check(SL_TMPL_MISTRAL_V3_TEKKEN, sys_only, 1, &o, err, sizeof err), -22);
}

/* json.dumps spacing, indent 0 and 4, strings kept as they are (including escapes and separators
 * inside them); the scanner's verdicts. */
Test(chat_tools, json_text)
{
    const char *in = "{\"a\":[1,{\"b\":\"x,y: \\\"z\\\"\"},[]],\"c\":{},\"d\":-1.5e-3}";
    char *s = sl_json_pyformat(in, strlen(in), 0, NULL);
    cr_expect_str_eq(s, "{\"a\": [1, {\"b\": \"x,y: \\\"z\\\"\"}, []], \"c\": {}, \"d\": -1.5e-3}");
    free(s);
    s = sl_json_pyformat(in, strlen(in), 4, NULL);
    cr_expect_str_eq(s, "{\n    \"a\": [\n        1,\n        {\n            \"b\": \"x,y: \\\"z\\\"\"\n        },\n"
                        "        []\n    ],\n    \"c\": {},\n    \"d\": -1.5e-3\n}");
    free(s);
    size_t end = 0;
    cr_expect_eq(sl_json_scan(" {\"a\": [1, 2]} tail", 19, &end), SL_JSON_OK);
    cr_expect_eq(end, 14);
    cr_expect_eq(sl_json_scan("{\"a\": [1, 2", 11, &end), SL_JSON_PARTIAL);
    cr_expect_eq(sl_json_scan("{\"a\": 1", 7, &end), SL_JSON_PARTIAL);
    cr_expect_eq(sl_json_scan("{\"a\" 1}", 7, &end), SL_JSON_BAD);
    cr_expect_eq(sl_json_scan("[01]", 4, &end), SL_JSON_BAD);
    cr_expect_eq(sl_json_scan("\"\\x\"", 4, &end), SL_JSON_BAD);
    cr_expect_eq(sl_json_scan("tru", 3, &end), SL_JSON_PARTIAL);
    cr_expect_eq(sl_json_scan("trux", 4, &end), SL_JSON_BAD);
    char deep[200];
    memset(deep, '[', sizeof deep);
    cr_expect_eq(sl_json_scan(deep, sizeof deep, &end), SL_JSON_BAD, "nesting is bounded");
    const char *enc = "\"a\\u00e9\\ud83d\\ude00\\n\"";
    char *d = sl_json_string(enc, strlen(enc));
    cr_expect_str_eq(d, "aé😀\n");
    free(d);
    cr_expect_null(sl_json_string("\"\\u0000\"", 8));
    cr_expect_null(sl_json_string("\"\\ud800\"", 8));
    char *q = sl_json_quote("a\"b\\c\n\x01é", NULL);
    cr_expect_str_eq(q, "\"a\\\"b\\\\c\\n\\u0001é\"");
    free(q);
}
