/* runtime/text/sbuf.h — a growing NUL-terminated text buffer for the text layer's writers (chat
 * templates, JSON re-spacing).  Zero-initialized is empty; after an allocation fails `oom` is set
 * and later writes do nothing, so a writer checks once at the end.  The caller frees p. */
#ifndef SL_RUNTIME_SBUF_H
#define SL_RUNTIME_SBUF_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

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

#endif
