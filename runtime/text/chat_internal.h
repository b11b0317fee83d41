/* runtime/text/chat_internal.h — what the chat template's rooms share: the growing output buffer
 * (chat_template.c renders the plain families, chat_tools.c the tool-calling forms). */
#ifndef SL_RUNTIME_CHAT_INTERNAL_H
#define SL_RUNTIME_CHAT_INTERNAL_H

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/text/chat_template.h"

typedef struct sbuf { char *p; size_t n, cap; bool oom; } sbuf;

static inline void put_n(sbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) { b->oom = true; return; }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static inline void put(sbuf *b, const char *s) { put_n(b, s, strlen(s)); }

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
