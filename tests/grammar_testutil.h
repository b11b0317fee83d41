/* tests/grammar_testutil.h — an independent check of what the grammar produces: the text is
 * parsed as JSON (json_value.c's reader, strict RFC 8259) and checked against the schema by a small
 * validator written here from the JSON Schema rules, sharing nothing with the automaton
 * (runtime/text/json_grammar.c) it checks. */
#ifndef SL_TESTS_GRAMMAR_TESTUTIL_H
#define SL_TESTS_GRAMMAR_TESTUTIL_H

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "runtime/text/grammar_internal.h"

/* Code points of UTF-8 bytes s[0..n). */
static inline int64_t gt_code_points(const char *s, size_t n)
{
    int64_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

static inline bool gt_equal(const jv *a, const jv *b)
{
    if (a->kind != b->kind) return false;
    switch (a->kind) {
    case JV_NULL: return true;
    case JV_BOOL: return a->b == b->b;
    case JV_NUM: return a->num == b->num;
    case JV_STR: return a->len == b->len && !memcmp(a->str, b->str, a->len);
    case JV_ARR:
        if (a->n != b->n) return false;
        for (int i = 0; i < a->n; i++) if (!gt_equal(&a->items[i], &b->items[i])) return false;
        return true;
    default:
        if (a->n != b->n) return false;
        for (int i = 0; i < a->n; i++) {
            const jv *o = jv_get(b, a->keys[i]);
            if (!o || !gt_equal(&a->items[i], o)) return false;
        }
        return true;
    }
}

static inline bool gt_valid(const jv *root, const jv *s, const jv *v, int depth);

static inline bool gt_type_ok(const char *t, const jv *v)
{
    if (!strcmp(t, "null")) return v->kind == JV_NULL;
    if (!strcmp(t, "boolean")) return v->kind == JV_BOOL;
    if (!strcmp(t, "number")) return v->kind == JV_NUM;
    if (!strcmp(t, "integer")) return v->kind == JV_NUM && v->num == floor(v->num);
    if (!strcmp(t, "string")) return v->kind == JV_STR;
    if (!strcmp(t, "array")) return v->kind == JV_ARR;
    return v->kind == JV_OBJ;
}

/* v is valid against schema s (root: for $ref). */
static inline bool gt_valid(const jv *root, const jv *s, const jv *v, int depth)
{
    if (depth > 100) return false;
    if (s->kind == JV_BOOL) return s->b;
    const jv *k;
    if ((k = jv_get(s, "$ref"))) {
        const char *r = k->str;
        const jv *defs = jv_get(root, !strncmp(r, "#/$defs/", 8) ? "$defs" : "definitions");
        const jv *t = jv_get(defs, strrchr(r, '/') + 1);
        return t && gt_valid(root, t, v, depth + 1);
    }
    if ((k = jv_get(s, "type"))) {
        bool ok = false;
        if (k->kind == JV_STR) ok = gt_type_ok(k->str, v);
        else for (int i = 0; i < k->n; i++) ok |= gt_type_ok(k->items[i].str, v);
        if (!ok) return false;
    }
    if ((k = jv_get(s, "const")) && !gt_equal(k, v)) return false;
    if ((k = jv_get(s, "enum"))) {
        bool in = false;
        for (int i = 0; i < k->n; i++) in |= gt_equal(&k->items[i], v);
        if (!in) return false;
    }
    if ((k = jv_get(s, "anyOf"))) {
        bool any = false;
        for (int i = 0; i < k->n && !any; i++) any = gt_valid(root, &k->items[i], v, depth + 1);
        if (!any) return false;
    }
    if (v->kind == JV_STR) {
        int64_t n = gt_code_points(v->str, v->len);
        if ((k = jv_get(s, "minLength")) && n < k->num) return false;
        if ((k = jv_get(s, "maxLength")) && n > k->num) return false;
    }
    if (v->kind == JV_NUM) {
        if ((k = jv_get(s, "minimum")) && v->num < k->num) return false;
        if ((k = jv_get(s, "maximum")) && v->num > k->num) return false;
    }
    if (v->kind == JV_ARR) {
        if ((k = jv_get(s, "minItems")) && v->n < k->num) return false;
        if ((k = jv_get(s, "maxItems")) && v->n > k->num) return false;
        if ((k = jv_get(s, "items")))
            for (int i = 0; i < v->n; i++) if (!gt_valid(root, k, &v->items[i], depth + 1)) return false;
    }
    if (v->kind == JV_OBJ) {
        const jv *props = jv_get(s, "properties"), *add = jv_get(s, "additionalProperties");
        if ((k = jv_get(s, "required")))
            for (int i = 0; i < k->n; i++) if (!jv_get(v, k->items[i].str)) return false;
        for (int i = 0; i < v->n; i++) {
            for (int j = 0; j < i; j++) if (!strcmp(v->keys[i], v->keys[j])) return false;   /* no duplicate keys */
            const jv *ps = jv_get(props, v->keys[i]);
            if (ps) { if (!gt_valid(root, ps, &v->items[i], depth + 1)) return false; }
            else if (add && !gt_valid(root, add, &v->items[i], depth + 1)) return false;
        }
    }
    return true;
}

/* text[0..n) parses as JSON and is valid against schema_json (NULL: an object). */
static inline bool gt_check(const char *schema_json, const char *text, size_t n)
{
    jv *v = NULL, *s = NULL;
    char err[256];
    bool ok = jv_parse(text, n, &v, err, sizeof err) == 0;
    if (ok && schema_json) ok = jv_parse(schema_json, strlen(schema_json), &s, err, sizeof err) == 0 && gt_valid(s, s, v, 0);
    else if (ok) ok = v->kind == JV_OBJ;
    jv_free(v);
    jv_free(s);
    return ok;
}

#endif
