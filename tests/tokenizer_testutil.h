/* tests/tokenizer_testutil.h — helpers shared by the tokenizer tests (header-only, static). */
#ifndef SL_TESTS_TOKENIZER_TESTUTIL_H
#define SL_TESTS_TOKENIZER_TESTUTIL_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loader/gguf.h"
#include "runtime/text/tokenizer.h"

static inline double tt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Whole file into a NUL-terminated malloc'd buffer, or NULL. */
static inline char *tt_slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long l = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)l + 1);
    size_t got = b ? fread(b, 1, (size_t)l, f) : 0;
    fclose(f);
    if (!b) return NULL;
    b[got] = 0;
    if (n) *n = got;
    return b;
}

/* Undo the C escaping of the golden files (\" \\ \n \r \t \xNN); s[0..n) without the quotes.
 * Returns the decoded length (o needs n bytes). */
static inline size_t tt_unescape(const char *s, size_t n, char *o)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) { o[k++] = s[i]; continue; }
        char c = s[++i];
        if (c == 'n') o[k++] = '\n';
        else if (c == 'r') o[k++] = '\r';
        else if (c == 't') o[k++] = '\t';
        else if (c == 'x' && i + 2 < n) {
            unsigned v = 0;
            sscanf(s + i + 1, "%2x", &v);
            o[k++] = (char)v;
            i += 2;
        } else o[k++] = c;
    }
    return k;
}

/* Parse whitespace-separated ints; returns the count (at most max). */
static inline int tt_parse_ids(const char *s, int32_t *ids, int max)
{
    int n = 0;
    char *end;
    while (n < max) {
        long x = strtol(s, &end, 10);
        if (end == s) break;
        ids[n++] = (int32_t)x;
        s = end;
    }
    return n;
}

/* Open a GGUF and load its vocabulary; fails the test on error. */
static inline sl_vocab *tt_load(const char *path, sl_gguf **gout)
{
    sl_gguf *g = NULL;
    sl_vocab *v = NULL;
    char err[256] = "";
    cr_assert_eq(sl_gguf_open(path, &g, err, sizeof err), 0, "open %s: %s", path, err);
    cr_assert_eq(sl_vocab_load(g, &v, err, sizeof err), 0, "vocab %s: %s", path, err);
    if (gout) *gout = g; else sl_gguf_close(g);
    return v;
}

/* In-memory GGUF v3 builder (no tensors) for hostile-metadata tests. */
typedef struct tt_gguf { unsigned char *p; size_t n, cap; uint64_t nkv; } tt_gguf;

static inline void tt_put(tt_gguf *b, const void *s, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}
static inline void tt_u32(tt_gguf *b, uint32_t x) { tt_put(b, &x, 4); }
static inline void tt_u64(tt_gguf *b, uint64_t x) { tt_put(b, &x, 8); }
static inline void tt_strn(tt_gguf *b, const char *s, size_t n) { tt_u64(b, n); tt_put(b, s, n); }
static inline void tt_key(tt_gguf *b, const char *k, uint32_t type) { tt_strn(b, k, strlen(k)); tt_u32(b, type); b->nkv++; }
static inline void tt_kv_str(tt_gguf *b, const char *k, const char *v) { tt_key(b, k, SL_GGUF_STRING); tt_strn(b, v, strlen(v)); }
static inline void tt_kv_u32(tt_gguf *b, const char *k, uint32_t v) { tt_key(b, k, SL_GGUF_U32); tt_u32(b, v); }
static inline void tt_kv_bool(tt_gguf *b, const char *k, int v) { unsigned char c = (unsigned char)v; tt_key(b, k, SL_GGUF_BOOL); tt_put(b, &c, 1); }
/* String array; strings given as (ptr, len) pairs through a NULL-free array and lengths. */
static inline void tt_kv_strs(tt_gguf *b, const char *k, const char *const *s, const size_t *len, size_t n)
{
    tt_key(b, k, SL_GGUF_ARRAY);
    tt_u32(b, SL_GGUF_STRING);
    tt_u64(b, n);
    for (size_t i = 0; i < n; i++) tt_strn(b, s[i], len ? len[i] : strlen(s[i]));
}
static inline void tt_kv_f32s(tt_gguf *b, const char *k, const float *x, size_t n)
{
    tt_key(b, k, SL_GGUF_ARRAY); tt_u32(b, SL_GGUF_F32); tt_u64(b, n); tt_put(b, x, 4 * n);
}
static inline void tt_kv_i32s(tt_gguf *b, const char *k, const int32_t *x, size_t n)
{
    tt_key(b, k, SL_GGUF_ARRAY); tt_u32(b, SL_GGUF_I32); tt_u64(b, n); tt_put(b, x, 4 * n);
}
/* Wrap the key/value body in a header and parse it. */
static inline int tt_parse(tt_gguf *b, sl_gguf **g, char *err, size_t errlen)
{
    tt_gguf f = { 0 };
    tt_put(&f, "GGUF", 4);
    tt_u32(&f, 3);
    tt_u64(&f, 0);
    tt_u64(&f, b->nkv);
    tt_put(&f, b->p, b->n);
    int rc = sl_gguf_parse(f.p, f.n, f.n, g, err, errlen);
    free(f.p);
    return rc;
}

#endif
