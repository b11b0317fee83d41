/* runtime/text/chat_template.h — turning a conversation into the text a chat model was trained on.
 *
 * Not a Jinja interpreter: the common template families are recognized in tokenizer.chat_template
 * by marker strings (as llama.cpp does) and rendered by hand-written code; each renders exactly the
 * format its model family documents (tests/test_chat_template.c holds a reference string per
 * family).  A model whose template is not recognized gets the plain template ("User: …\nAssistant:").
 * The rendered text still needs tokenizing with parse_special (so "<|im_end|>" becomes its token)
 * and add_special (the BOS token is not part of the text).
 */
#ifndef SL_RUNTIME_CHAT_TEMPLATE_H
#define SL_RUNTIME_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

enum sl_chat_tmpl {
    SL_TMPL_UNKNOWN = -1,
    SL_TMPL_PLAIN = 0,        /* fallback: "System\n\nUser: …\nAssistant: …\n" */
    SL_TMPL_CHATML,           /* <|im_start|>role\n…<|im_end|>\n */
    SL_TMPL_LLAMA2,           /* [INST] … [/INST]…</s>, system folded into the first turn */
    SL_TMPL_LLAMA2_SYS,       /* … with <<SYS>>\n…\n<</SYS>>\n\n */
    SL_TMPL_LLAMA2_SYS_BOS,   /* … and <s> before each later [INST] */
    SL_TMPL_LLAMA2_SYS_STRIP, /* … with every message stripped */
    SL_TMPL_MISTRAL_V1,       /* " [INST] … [/INST] …</s>" */
    SL_TMPL_MISTRAL_V3,       /* "[INST] …[/INST] …</s>", answers stripped */
    SL_TMPL_MISTRAL_V3_TEKKEN,/* "[INST]…[/INST]…</s>" */
    SL_TMPL_MISTRAL_V7,       /* [SYSTEM_PROMPT] …[/SYSTEM_PROMPT][INST] …[/INST] …</s> */
    SL_TMPL_LLAMA3,           /* <|start_header_id|>role<|end_header_id|>\n\n…<|eot_id|> */
    SL_TMPL_ZEPHYR,           /* <|role|>\n…<|endoftext|>\n */
    SL_TMPL_GEMMA,            /* <start_of_turn>user\n…<end_of_turn>\n, assistant is "model" */
    SL_TMPL_PHI3,             /* <|role|>\n…<|end|>\n (Phi-3, Phi-3.5) */
    SL_TMPL_PHI4,             /* <|im_start|>role<|im_sep|>…<|im_end|> (Phi-4) */
    SL_TMPL_HARMONY,          /* gpt-oss: <|start|>role<|message|>…<|end|>, channels (see below) */
    SL_TMPL_COUNT
};

/* A function call an assistant message made (OpenAI's tool_calls[i]). */
typedef struct sl_chat_tool_call {
    const char *id;           /* "call_…" as the API gave it out */
    const char *name;
    const char *arguments;    /* the arguments: a JSON object's text, as the model wrote it or compact */
} sl_chat_tool_call;

typedef struct sl_chat_msg {
    const char *role;         /* "system", "user", "assistant" or "tool" ("developer" for harmony) */
    const char *content;      /* never NULL ("" for an assistant message that only calls tools) */
    const sl_chat_tool_call *tool_calls;   /* assistant: the calls it made (n_tool_calls of them) */
    int n_tool_calls;
    const char *tool_call_id; /* tool: the call this is the result of (NULL: none given) */
} sl_chat_msg;

/* How a template lists tools and how its model writes calls (runtime/text/tool_calls.h parses them). */
enum sl_tool_format {
    SL_TOOLS_NONE = 0,        /* the template has no tool calls */
    SL_TOOLS_HERMES,          /* Qwen2.5/Qwen3 (chatml): <tools> in the system turn, <tool_call>{json}</tool_call> */
    SL_TOOLS_LLAMA3,          /* Llama 3.1-3.3: tools in the first user turn, {"name": …, "parameters": …} */
    SL_TOOLS_MISTRAL,         /* Mistral Nemo (v3-tekken): [AVAILABLE_TOOLS]…, [TOOL_CALLS][{…}] */
    SL_TOOLS_HARMONY,         /* gpt-oss: a `functions` namespace in the developer message, calls in the
                               * commentary channel to=functions.NAME (runtime/text/harmony.h) */
};

/* Rendering options.  Only the harmony template reads the last three; NULL means the template's
 * default: reasoning_effort "medium" ("low", "medium" or "high"), model_identity "You are ChatGPT, a
 * large language model trained by OpenAI.", date today's (local time, YYYY-MM-DD, as the template's
 * strftime_now("%Y-%m-%d")). */
typedef struct sl_chat_opts {
    bool add_assistant;       /* end with the header that makes the model answer */
    const char *reasoning_effort;
    const char *model_identity;
    const char *date;
    /* The tools the model may call: each the compact JSON text of an OpenAI tool,
     * {"type":"function","function":{"name":…,"description":…,"parameters":{…}}}, keys in the
     * client's order (the templates print them in that order).  Only templates with a tool format
     * (sl_chat_tool_format) render them; n_tools 0: none. */
    const char *const *tools;
    int n_tools;
} sl_chat_opts;

/* Template by name ("chatml", "llama3", ... as sl_chat_template_name gives), or SL_TMPL_UNKNOWN. */
int sl_chat_template_from_name(const char *name);
const char *sl_chat_template_name(int tmpl);
/* Recognize a template from tokenizer.chat_template (a name is accepted too).  SL_TMPL_UNKNOWN when
 * none of the supported families matches. */
int sl_chat_template_detect(const char *tmpl_text);
/* Comma-separated list of the names, for help texts. */
const char *sl_chat_template_names(void);

/* Render msgs[0..n); add_assistant: end with the header that makes the model answer.  Returns a
 * malloc'd NUL-terminated string (length in *len, may be NULL), or NULL when out of memory. */
char *sl_chat_render(int tmpl, const sl_chat_msg *msgs, int n, bool add_assistant, size_t *len);
/* The same with options (o may be NULL: no assistant header, defaults).
 *
 * Tools (o->tools): the templates with a tool format render them as their model's Jinja template
 * does (chat_tools.c, harmony_tools.c), with assistant tool_calls and "tool" messages; without tools
 * and tool turns every template renders as before.
 *
 * Harmony (gpt-oss's template, builtin tools left out): a system message the template builds
 * itself (model identity, knowledge cutoff, current date, "Reasoning: <effort>", the valid
 * channels); a first message with role "system" or "developer" becomes the developer message
 * ("# Instructions\n\n…", then the tools' namespace);
 * user turns; earlier assistant turns as their final channel only (…<|end|>; a last assistant turn
 * without add_assistant ends in <|return|>); system/developer messages after the first and other
 * roles are dropped as the template drops them; a tool call as a commentary message to
 * functions.NAME, a tool result from functions.NAME; add_assistant ends with "<|start|>assistant".
 * The model then writes its channels (runtime/text/harmony.h separates them). */
char *sl_chat_render_opts(int tmpl, const sl_chat_msg *msgs, int n, const sl_chat_opts *o, size_t *len);

/* The template's tool format (enum sl_tool_format; SL_TOOLS_NONE: tools cannot be rendered). */
int sl_chat_tool_format(int tmpl);
/* Names of the templates that render tools, for error messages. */
const char *sl_chat_tool_templates(void);
/* Whether tmpl can render msgs with o's tools as its model's template does: 0, or -EINVAL with the
 * reason in err ("needs …" / "supported: …").  Tools, tool calls or tool messages need a template
 * with a tool format; Llama 3.1's template takes one call per assistant message and a user message
 * to hold the tools; the hermes and Mistral formats need each call's arguments to be a JSON object. */
int sl_chat_check(int tmpl, const sl_chat_msg *msgs, int n, const sl_chat_opts *o, char *err, size_t errlen);

/* Text of the token that ends an assistant turn ("<|im_end|>", "<|eot_id|>", …; NULL when the EOS
 * token does it), and, for the plain template, the text that means the model started the user's
 * next turn ("\nUser:"; NULL otherwise).  Generation stops at either. */
const char *sl_chat_template_end_token(int tmpl);
const char *sl_chat_template_stop_text(int tmpl);

#endif
