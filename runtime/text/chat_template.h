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

typedef struct sl_chat_msg {
    const char *role;         /* "system", "user" or "assistant" ("developer" for harmony) */
    const char *content;
} sl_chat_msg;

/* Rendering options.  Only the harmony template reads the last three; NULL means the template's
 * default: reasoning_effort "medium" ("low", "medium" or "high"), model_identity "You are ChatGPT, a
 * large language model trained by OpenAI.", date today's (local time, YYYY-MM-DD, as the template's
 * strftime_now("%Y-%m-%d")). */
typedef struct sl_chat_opts {
    bool add_assistant;       /* end with the header that makes the model answer */
    const char *reasoning_effort;
    const char *model_identity;
    const char *date;
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
 * Harmony (gpt-oss's template, tools left out): a system message the template builds itself (model
 * identity, knowledge cutoff, current date, "Reasoning: <effort>", the valid channels); a first
 * message with role "system" or "developer" becomes the developer message ("# Instructions\n\n…");
 * user turns; earlier assistant turns as their final channel only (…<|end|>; a last assistant turn
 * without add_assistant ends in <|return|>); system/developer messages after the first and other
 * roles are dropped as the template drops them; add_assistant ends with "<|start|>assistant".  The
 * model then writes its channels (runtime/text/harmony.h separates them). */
char *sl_chat_render_opts(int tmpl, const sl_chat_msg *msgs, int n, const sl_chat_opts *o, size_t *len);

/* Text of the token that ends an assistant turn ("<|im_end|>", "<|eot_id|>", …; NULL when the EOS
 * token does it), and, for the plain template, the text that means the model started the user's
 * next turn ("\nUser:"; NULL otherwise).  Generation stops at either. */
const char *sl_chat_template_end_token(int tmpl);
const char *sl_chat_template_stop_text(int tmpl);

#endif
