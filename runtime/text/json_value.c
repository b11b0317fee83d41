/* runtime/text/json_value.c — a small JSON reader for schemas: one document into a tree, strings
 * decoded (escapes, surrogate pairs), scalars keeping their source text (enum/const values are
 * emitted as written).  Depth is bounded so that a hostile schema cannot exhaust the stack. */
#include "runtime/text/grammar_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JV_MAX_DEPTH 64

typedef struct rd {
    const char *s, *e, *p;
    char *err;
    size_t errlen;
    int rc;
} rd;

static int fail(rd *r, const char *what)
{
    if (!r->rc) {
        snprintf(r->err, r->errlen, "invalid JSON at byte %zu: %s", (size_t)(r->p - r->s), what);
        r->rc = -EINVAL;
    }
    return r->rc;
}

static void skip_ws(rd *r)
{
    while (r->p < r->e && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) r->p++;
}

static int hex4(rd *r, unsigned *out)
{
    if (r->e - r->p < 4) return fail(r, "short \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = *r->p++;
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return fail(r, "bad hex digit in \\u escape");
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12); o[1] = (char)(0x80 | ((cp >> 6) & 63)); o[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18); o[1] = (char)(0x80 | ((cp >> 12) & 63));
    o[2] = (char)(0x80 | ((cp >> 6) & 63)); o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

/* A string at r->p (on its quote): decoded into a malloc'd buffer. */
static int read_string(rd *r, char **out, size_t *len)
{
    const char *q = ++r->p;
    size_t cap = 0;
    while (q < r->e && *q != '"') { if (*q == '\\') q++; q++; cap++; }
    char *o = malloc(cap * 4 + 1), *w = o;   /* an escape never decodes longer than 4 bytes per source byte */
    if (!o) { r->rc = -ENOMEM; snprintf(r->err, r->errlen, "out of memory"); return r->rc; }
    for (;;) {
        if (r->p >= r->e) { free(o); return fail(r, "unterminated string"); }
        unsigned char c = (unsigned char)*r->p++;
        if (c == '"') break;
        if (c < 0x20) { free(o); return fail(r, "control character in a string"); }
        if (c != '\\') { *w++ = (char)c; continue; }
        if (r->p >= r->e) { free(o); return fail(r, "unterminated escape"); }
        char e = *r->p++;
        const char *map = strchr("\"\\/bfnrt", e);
        if (map && e) { *w++ = "\"\\/\b\f\n\r\t"[map - "\"\\/bfnrt"]; continue; }
        if (e != 'u') { free(o); return fail(r, "bad escape"); }
        unsigned cp;
        if (hex4(r, &cp)) { free(o); return r->rc; }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            unsigned lo;
            if (r->e - r->p < 2 || r->p[0] != '\\' || r->p[1] != 'u') { free(o); return fail(r, "lone surrogate"); }
            r->p += 2;
            if (hex4(r, &lo)) { free(o); return r->rc; }
            if (lo < 0xDC00 || lo > 0xDFFF) { free(o); return fail(r, "lone surrogate"); }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) { free(o); return fail(r, "lone surrogate"); }
        w += put_utf8(w, cp);
    }
    *w = 0;
    *out = o;
    *len = (size_t)(w - o);
    return 0;
}

static int read_value(rd *r, jv *v, int depth);

static int read_container(rd *r, jv *v, int depth, bool obj)
{
    r->p++;
    int cap = 0;
    skip_ws(r);
    if (r->p < r->e && *r->p == (obj ? '}' : ']')) { r->p++; return 0; }
    for (;;) {
        if (v->n == cap) {
            cap = cap ? cap * 2 : 4;
            jv *ni = realloc(v->items, (size_t)cap * sizeof *ni);
            if (ni) v->items = ni;
            char **nk = obj ? realloc(v->keys, (size_t)cap * sizeof *nk) : NULL;
            if (obj && nk) v->keys = nk;
            if (!ni || (obj && !nk)) { r->rc = -ENOMEM; snprintf(r->err, r->errlen, "out of memory"); return r->rc; }
        }
        memset(&v->items[v->n], 0, sizeof v->items[v->n]);
        skip_ws(r);
        if (obj) {
            v->keys[v->n] = NULL;
            if (r->p >= r->e || *r->p != '"') { v->n++; return fail(r, "expected a key"); }
            size_t kl;
            if (read_string(r, &v->keys[v->n], &kl)) { v->n++; return r->rc; }
            skip_ws(r);
            if (r->p >= r->e || *r->p != ':') { v->n++; return fail(r, "expected ':'"); }
            r->p++;
        }
        int rc = read_value(r, &v->items[v->n++], depth + 1);
        if (rc) return rc;
        skip_ws(r);
        if (r->p < r->e && *r->p == ',') { r->p++; continue; }
        if (r->p < r->e && *r->p == (obj ? '}' : ']')) { r->p++; return 0; }
        return fail(r, obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int read_number(rd *r, jv *v)
{
    const char *b = r->p;
    if (r->p < r->e && *r->p == '-') r->p++;
    if (r->p >= r->e || *r->p < '0' || *r->p > '9') return fail(r, "bad number");
    if (*r->p == '0') r->p++;
    else while (r->p < r->e && *r->p >= '0' && *r->p <= '9') r->p++;
    if (r->p < r->e && *r->p == '.') {
        r->p++;
        if (r->p >= r->e || *r->p < '0' || *r->p > '9') return fail(r, "bad number");
        while (r->p < r->e && *r->p >= '0' && *r->p <= '9') r->p++;
    }
    if (r->p < r->e && (*r->p == 'e' || *r->p == 'E')) {
        r->p++;
        if (r->p < r->e && (*r->p == '+' || *r->p == '-')) r->p++;
        if (r->p >= r->e || *r->p < '0' || *r->p > '9') return fail(r, "bad number");
        while (r->p < r->e && *r->p >= '0' && *r->p <= '9') r->p++;
    }
    char buf[64];
    size_t n = (size_t)(r->p - b);
    if (n >= sizeof buf) n = sizeof buf - 1;   /* the value of a 64-digit literal: close enough for a bound */
    memcpy(buf, b, n);
    buf[n] = 0;
    v->kind = JV_NUM;
    v->num = strtod(buf, NULL);
    return 0;
}

static int read_value(rd *r, jv *v, int depth)
{
    if (depth > JV_MAX_DEPTH) return fail(r, "nested too deeply");
    skip_ws(r);
    if (r->p >= r->e) return fail(r, "expected a value");
    const char *b = r->p;
    int rc = 0;
    switch (*r->p) {
    case '{': v->kind = JV_OBJ; rc = read_container(r, v, depth, true); break;
    case '[': v->kind = JV_ARR; rc = read_container(r, v, depth, false); break;
    case '"': v->kind = JV_STR; rc = read_string(r, &v->str, &v->len); break;
    case 't': case 'f': case 'n': {
        const char *w = *r->p == 't' ? "true" : *r->p == 'f' ? "false" : "null";
        size_t n = strlen(w);
        if ((size_t)(r->e - r->p) < n || memcmp(r->p, w, n)) return fail(r, "bad literal");
        r->p += n;
        v->kind = *w == 'n' ? JV_NULL : JV_BOOL;
        v->b = *w == 't';
        break;
    }
    default: rc = read_number(r, v); break;
    }
    v->raw = b;
    v->raw_len = (size_t)(r->p - b);
    return rc;
}

static void jv_clear(jv *v)
{
    free(v->str);
    for (int i = 0; i < v->n; i++) {
        jv_clear(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
}

void jv_free(jv *v)
{
    if (!v) return;
    jv_clear(v);
    free(v);
}

int jv_parse(const char *text, size_t len, jv **out, char *err, size_t errlen)
{
    rd r = { text, text + len, text, err, errlen, 0 };
    jv *v = calloc(1, sizeof *v);
    if (!v) { snprintf(err, errlen, "out of memory"); return -ENOMEM; }
    int rc = read_value(&r, v, 0);
    if (!rc) {
        skip_ws(&r);
        if (r.p != r.e) rc = fail(&r, "text after the value");
    }
    if (rc) { jv_free(v); return rc; }
    *out = v;
    return 0;
}

const jv *jv_get(const jv *o, const char *key)
{
    if (!o || o->kind != JV_OBJ) return NULL;
    for (int i = 0; i < o->n; i++) if (!strcmp(o->keys[i], key)) return &o->items[i];
    return NULL;
}

/* Append the compact text of v to *buf (growing it); false on ENOMEM. */
static bool dump(const jv *v, char **buf, size_t *len, size_t *cap)
{
    size_t need = v->kind == JV_ARR || v->kind == JV_OBJ ? 2 : v->raw_len;
    if (*len + need + 1 > *cap) {
        size_t nc = (*cap + need + 1) * 2;
        char *nb = realloc(*buf, nc);
        if (!nb) return false;
        *buf = nb;
        *cap = nc;
    }
    if (v->kind != JV_ARR && v->kind != JV_OBJ) {
        memcpy(*buf + *len, v->raw, v->raw_len);
        *len += v->raw_len;
        return true;
    }
    bool obj = v->kind == JV_OBJ;
    (*buf)[(*len)++] = obj ? '{' : '[';
    for (int i = 0; i < v->n; i++) {
        if (i) { jv comma = { .raw = ",", .raw_len = 1 }; if (!dump(&comma, buf, len, cap)) return false; }
        if (obj) {
            /* the key as JSON: re-encoded from its decoded bytes */
            char *k = g_json_quote(v->keys[i], strlen(v->keys[i]), NULL);
            if (!k) return false;
            jv kk = { .raw = k, .raw_len = strlen(k) };
            jv colon = { .raw = ":", .raw_len = 1 };
            bool ok = dump(&kk, buf, len, cap) && dump(&colon, buf, len, cap);
            free(k);
            if (!ok) return false;
        }
        if (!dump(&v->items[i], buf, len, cap)) return false;
    }
    jv close = { .raw = obj ? "}" : "]", .raw_len = 1 };
    return dump(&close, buf, len, cap);
}

char *jv_dump(const jv *v, size_t *len)
{
    char *buf = NULL;
    size_t n = 0, cap = 0;
    if (!dump(v, &buf, &n, &cap)) { free(buf); return NULL; }
    if (!buf) buf = calloc(1, 1);
    if (buf) buf[n] = 0;
    if (len) *len = n;
    return buf;
}

char *g_json_quote(const char *s, size_t n, size_t *len)
{
    char *o = malloc(n * 6 + 3), *w = o;
    if (!o) return NULL;
    *w++ = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') { *w++ = '\\'; *w++ = (char)c; }
        else if (c == '\n') { *w++ = '\\'; *w++ = 'n'; }
        else if (c == '\t') { *w++ = '\\'; *w++ = 't'; }
        else if (c == '\r') { *w++ = '\\'; *w++ = 'r'; }
        else if (c < 0x20) w += sprintf(w, "\\u%04x", c);
        else *w++ = (char)c;
    }
    *w++ = '"';
    *w = 0;
    if (len) *len = (size_t)(w - o);
    return o;
}
