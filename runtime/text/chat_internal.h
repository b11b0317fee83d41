/* runtime/text/chat_internal.h — what the chat template's rooms share (chat_template.c renders the
 * plain families, chat_tools.c the tool-calling forms, harmony_tools.c gpt-oss's tools). */
#ifndef SL_RUNTIME_CHAT_INTERNAL_H
#define SL_RUNTIME_CHAT_INTERNAL_H

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/text/chat_template.h"
#include "runtime/text/sbuf.h"


/* s without leading and trailing ASCII whitespace (as the templates' trim / strip()). */
static inline void put_trim(sbuf *b, const char *s)
{
    size_t a = 0, e = strlen(s);
    while (a < e && isspace((unsigned char)s[a])) a++;
    while (e > a && isspace((unsigned char)s[e - 1])) e--;
    put_n(b, s + a, e - a);
}

static inline bool is_role(const char *role, const char *r) { return !strcmp(role, r); }

/* chat_tools.c: the whole conversation in the hermes (chatml), Llama 3.1 tool and Mistral Nemo tool
 * forms; o->tools may be empty. */
void sl_render_hermes(sbuf *b, const sl_chat_msg *m, int n, const sl_chat_opts *o);
void sl_render_llama3_tools(sbuf *b, const sl_chat_msg *m, int n, const sl_chat_opts *o);
void sl_render_mistral_tools(sbuf *b, const sl_chat_msg *m, int n, const sl_chat_opts *o);
/* harmony_tools.c: gpt-oss's `functions` namespace of o's tools (the developer message's # Tools). */
void sl_render_harmony_tools(sbuf *b, const sl_chat_opts *o);

#endif
