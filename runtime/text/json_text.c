/* runtime/text/json_text.c — JSON text scanning and re-spacing (see json_text.h). */
#include "runtime/text/json_text.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/text/sbuf.h"

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static size_t skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n && is_ws(s[i])) i++;
    return i;
}

/* A string from s[i] == '"': the offset past its closing quote in *end. */
static int scan_string(const char *s, size_t n, size_t i, size_t *end)
{
    for (i++; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') { *end = i + 1; return SL_JSON_OK; }
        if (c < 0x20) return SL_JSON_BAD;
        if (c != '\\') continue;
        if (++i >= n) return SL_JSON_PARTIAL;
        if (s[i] == 'u') {
            for (int k = 0; k < 4; k++) {
                if (++i >= n) return SL_JSON_PARTIAL;
                if (!strchr("0123456789abcdefABCDEF", s[i]) || !s[i]) return SL_JSON_BAD;
            }
        } else if (!strchr("\"\\/bfnrt", s[i]) || !s[i]) {
            return SL_JSON_BAD;
        }
    }
    return SL_JSON_PARTIAL;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* A number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?  At the end of the text a number may still
 * go on: PARTIAL. */
static int scan_number(const char *s, size_t n, size_t i, size_t *end)
{
    if (s[i] == '-' && ++i >= n) return SL_JSON_PARTIAL;
    if (s[i] == '0') i++;
    else if (is_digit(s[i])) while (i < n && is_digit(s[i])) i++;
    else return SL_JSON_BAD;
    if (i < n && s[i] == '.') {
        if (++i >= n) return SL_JSON_PARTIAL;
        if (!is_digit(s[i])) return SL_JSON_BAD;
        while (i < n && is_digit(s[i])) i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        if (++i >= n) return SL_JSON_PARTIAL;
        if (s[i] == '+' || s[i] == '-') { if (++i >= n) return SL_JSON_PARTIAL; }
        if (!is_digit(s[i])) return SL_JSON_BAD;
        while (i < n && is_digit(s[i])) i++;
    }
    if (i >= n) return SL_JSON_PARTIAL;
    *end = i;
    return SL_JSON_OK;
}

static int scan_value(const char *s, size_t n, size_t i, int depth, size_t *end);

/* An object or array from s[i] ('{' or '['). */
static int scan_container(const char *s, size_t n, size_t i, int depth, size_t *end)
{
    const char close = s[i] == '{' ? '}' : ']';
    const bool obj = close == '}';
    if (depth >= SL_JSON_MAX_DEPTH) return SL_JSON_BAD;
    i = skip_ws(s, n, i + 1);
    if (i >= n) return SL_JSON_PARTIAL;
    if (s[i] == close) { *end = i + 1; return SL_JSON_OK; }
    for (;;) {
        int r;
        size_t e;
        if (obj) {
            if (s[i] != '"') return SL_JSON_BAD;
            if ((r = scan_string(s, n, i, &e)) != SL_JSON_OK) return r;
            i = skip_ws(s, n, e);
            if (i >= n) return SL_JSON_PARTIAL;
            if (s[i] != ':') return SL_JSON_BAD;
            i++;
        }
        if ((r = scan_value(s, n, i, depth + 1, &e)) != SL_JSON_OK) return r;
        i = skip_ws(s, n, e);
        if (i >= n) return SL_JSON_PARTIAL;
        if (s[i] == close) { *end = i + 1; return SL_JSON_OK; }
        if (s[i] != ',') return SL_JSON_BAD;
        i = skip_ws(s, n, i + 1);
        if (i >= n) return SL_JSON_PARTIAL;
    }
}

static int scan_literal(const char *s, size_t n, size_t i, const char *lit, size_t *end)
{
    size_t l = strlen(lit);
    for (size_t k = 0; k < l; k++) {
        if (i + k >= n) return SL_JSON_PARTIAL;
        if (s[i + k] != lit[k]) return SL_JSON_BAD;
    }
    *end = i + l;
    return SL_JSON_OK;
}

static int scan_value(const char *s, size_t n, size_t i, int depth, size_t *end)
{
    i = skip_ws(s, n, i);
    if (i >= n) return SL_JSON_PARTIAL;
    switch (s[i]) {
    case '{': case '[': return scan_container(s, n, i, depth, end);
    case '"': return scan_string(s, n, i, end);
    case 't': return scan_literal(s, n, i, "true", end);
    case 'f': return scan_literal(s, n, i, "false", end);
    case 'n': return scan_literal(s, n, i, "null", end);
    default: return scan_number(s, n, i, end);
    }
}

int sl_json_scan(const char *s, size_t n, size_t *end)
{
    size_t e = 0;
    int r = scan_value(s, n, 0, 0, &e);
    if (r == SL_JSON_OK) *end = e;
    return r;
}

bool sl_json_next_member(const char *o, size_t n, size_t *pos, const char **key, size_t *klen, const char **val,
                         size_t *vlen)
{
    size_t i = *pos, e;
    if (i == 0) {
        i = skip_ws(o, n, 0);
        if (i >= n || o[i] != '{') return false;
        i++;
    }
    i = skip_ws(o, n, i);
    if (i < n && o[i] == ',') i = skip_ws(o, n, i + 1);
    if (i >= n || o[i] != '"' || scan_string(o, n, i, &e) != SL_JSON_OK) return false;
    *key = o + i + 1;
    *klen = e - i - 2;
    i = skip_ws(o, n, e);
    if (i >= n || o[i] != ':') return false;
    i = skip_ws(o, n, i + 1);
    if (scan_value(o, n, i, 1, &e) != SL_JSON_OK) return false;
    *val = o + i;
    *vlen = e - i;
    *pos = e;
    return true;
}

const char *sl_json_member(const char *obj, size_t n, const char *key, size_t *vlen)
{
    size_t pos = 0, kl, vl, want = strlen(key);
    const char *k, *v;
    while (sl_json_next_member(obj, n, &pos, &k, &kl, &v, &vl))
        if (kl == want && !memcmp(k, key, kl)) { *vlen = vl; return v; }
    return NULL;
}

static int hex4(const char *p)
{
    int v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p[k];
        v = v * 16 + (c <= '9' ? c - '0' : (c | 32) - 'a' + 10);
    }
    return v;
}

static size_t put_utf8(char *w, uint32_t cp)
{
    if (cp < 0x80) { w[0] = (char)cp; return 1; }
    if (cp < 0x800) { w[0] = (char)(0xC0 | cp >> 6); w[1] = (char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        w[0] = (char)(0xE0 | cp >> 12); w[1] = (char)(0x80 | (cp >> 6 & 63)); w[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    w[0] = (char)(0xF0 | cp >> 18); w[1] = (char)(0x80 | (cp >> 12 & 63));
    w[2] = (char)(0x80 | (cp >> 6 & 63)); w[3] = (char)(0x80 | (cp & 63));
    return 4;
}

char *sl_json_string(const char *v, size_t n)
{
    size_t e;
    if (!n || v[0] != '"' || scan_string(v, n, 0, &e) != SL_JSON_OK || e != n) return NULL;
    char *out = malloc(n), *w = out;   /* escapes never grow: \uXXXX (6) is at most 4 bytes */
    if (!out) return NULL;
    for (size_t i = 1; i + 1 < n; i++) {
        if (v[i] != '\\') { *w++ = v[i]; continue; }
        char c = v[++i];
        switch (c) {
        case 'b': *w++ = '\b'; break;
        case 'f': *w++ = '\f'; break;
        case 'n': *w++ = '\n'; break;
        case 'r': *w++ = '\r'; break;
        case 't': *w++ = '\t'; break;
        case 'u': {
            uint32_t cp = (uint32_t)hex4(v + i + 1);
            i += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && i + 6 < n && v[i + 1] == '\\' && v[i + 2] == 'u') {
                uint32_t lo = (uint32_t)hex4(v + i + 3);
                if (lo >= 0xDC00 && lo < 0xE000) { cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00); i += 6; }
            }
            if (cp == 0 || (cp >= 0xD800 && cp < 0xE000)) { free(out); return NULL; }
            w += put_utf8(w, cp);
            break;
        }
        default: *w++ = c; break;   /* " \ / */
        }
    }
    *w = 0;
    return out;
}

static void out_line(sbuf *b, int indent, int depth)
{
    put_n(b, "\n", 1);
    for (int k = 0; k < indent * depth; k++) put_n(b, " ", 1);
}

char *sl_json_pyformat(const char *s, size_t n, int indent, size_t *outlen)
{
    sbuf b = { 0 };
    put_n(&b, "", 0);
    int depth = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (is_ws(c)) continue;
        if (c == '"') {
            size_t e = i;
            if (scan_string(s, n, i, &e) != SL_JSON_OK) e = n;
            put_n(&b, s + i, e - i);
            i = e - 1;
        } else if (c == '{' || c == '[') {
            size_t j = skip_ws(s, n, i + 1);
            if (j < n && (s[j] == '}' || s[j] == ']')) { put_n(&b, s + i, 1); put_n(&b, s + j, 1); i = j; continue; }
            put_n(&b, &c, 1);
            depth++;
            if (indent) out_line(&b, indent, depth);
        } else if (c == '}' || c == ']') {
            depth--;
            if (indent) out_line(&b, indent, depth);
            put_n(&b, &c, 1);
        } else if (c == ',') {
            if (indent) { put_n(&b, ",", 1); out_line(&b, indent, depth); }
            else put_n(&b, ", ", 2);
        } else if (c == ':') {
            put_n(&b, ": ", 2);
        } else {
            put_n(&b, &c, 1);
        }
    }
    if (b.oom) { free(b.p); return NULL; }
    if (outlen) *outlen = b.n;
    return b.p;
}

char *sl_json_quote(const char *s, size_t *outlen)
{
    sbuf b = { 0 };
    put_n(&b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                        : c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        char u[8];
        if (!esc && c < 0x20) { snprintf(u, sizeof u, "\\u%04x", c); esc = u; }
        if (esc) put_n(&b, esc, strlen(esc));
        else put_n(&b, (const char *)&c, 1);
    }
    put_n(&b, "\"", 1);
    if (b.oom) { free(b.p); return NULL; }
    if (outlen) *outlen = b.n;
    return b.p;
}
