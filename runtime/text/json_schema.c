/* runtime/text/json_schema.c — a JSON Schema (the subset grammar.h lists) compiled into the
 * grammar's nodes.  Every keyword is either compiled, an annotation (no effect on the value), or
 * refused with an error naming it: a schema the automaton cannot enforce must not be accepted and
 * then ignored. */
#include "runtime/text/grammar_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUPPORTED "type, properties, required, additionalProperties, items, minItems, maxItems, enum, const, " \
                  "minLength, maxLength, minimum, maximum, anyOf, $ref, $defs, definitions"
#define INT_LIMIT 9999999999999999LL   /* SL_GRAMMAR_INT_DIGITS nines */

static const char *const keywords[] = {
    "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "enum", "const",
    "minLength", "maxLength", "minimum", "maximum", "anyOf", "$ref", "$defs", "definitions",
    /* annotations: they describe, they do not constrain */
    "title", "description", "$schema", "$id", "$comment", "default", "examples", "readOnly", "writeOnly",
    "deprecated", NULL,
};

typedef struct memo { const jv *schema; int node; } memo;
typedef struct cc {
    sl_grammar *g;
    const jv *root;
    memo *refs;
    int n_refs, cap_refs;
    char *err;
    size_t errlen;
    int depth;
} cc;

static int bad(cc *c, int rc, const char *fmt, const char *a, const char *b)
{
    snprintf(c->err, c->errlen, fmt, a, b);
    return rc;
}
#define NOMEM(c) bad(c, -ENOMEM, "out of memory%s%s", "", "")

int g_node_add(sl_grammar *g, int kind)
{
    if (g->n_nodes == g->cap_nodes) {
        int nc = g->cap_nodes ? g->cap_nodes * 2 : 16;
        gnode *nn = realloc(g->nodes, (size_t)nc * sizeof *nn);
        if (!nn) return -ENOMEM;
        g->nodes = nn;
        g->cap_nodes = nc;
    }
    gnode *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->map = n->item = -1;
    n->max_items = n->max_len = -1;
    n->imin = -INT_LIMIT;
    n->imax = INT_LIMIT;
    return g->n_nodes++;
}

static int literal_node(sl_grammar *g, const char *const *texts, int n)
{
    int id = g_node_add(g, G_LITERAL);
    if (id < 0) return id;
    gnode *nd = &g->nodes[id];
    nd->lits = calloc((size_t)n, sizeof *nd->lits);
    nd->lit_lens = calloc((size_t)n, sizeof *nd->lit_lens);
    if (!nd->lits || !nd->lit_lens) return -ENOMEM;
    for (int i = 0; i < n; i++) {
        if (!(nd->lits[i] = strdup(texts[i]))) return -ENOMEM;
        nd->lit_lens[i] = strlen(texts[i]);
        nd->n_lits++;
    }
    return id;
}

static int anyof_node(sl_grammar *g, const int *alts, int n)
{
    int id = g_node_add(g, G_ANYOF);
    if (id < 0) return id;
    gnode *nd = &g->nodes[id];
    if (!(nd->alts = malloc((size_t)(n ? n : 1) * sizeof *nd->alts))) return -ENOMEM;
    memcpy(nd->alts, alts, (size_t)n * sizeof *alts);
    nd->n_alts = n;
    return id;
}

/* A map: any string keys, values of node `values` (-1: filled in by the caller). */
static int map_node(sl_grammar *g, int values)
{
    int id = g_node_add(g, G_OBJECT);
    if (id >= 0) g->nodes[id].map = values;
    return id;
}

int g_any_value(sl_grammar *g)
{
    /* object, array, string, number, true/false/null: their first bytes differ, so at most one
     * alternative survives the first byte */
    int alts[5] = { 0 };
    int any = anyof_node(g, alts, 0);
    if (any < 0) return any;
    static const char *const words[] = { "true", "false", "null" };
    if ((alts[0] = map_node(g, any)) < 0 || (alts[1] = g_node_add(g, G_ARRAY)) < 0 ||
        (alts[2] = g_node_add(g, G_STRING)) < 0 || (alts[3] = g_node_add(g, G_NUMBER)) < 0 ||
        (alts[4] = literal_node(g, words, 3)) < 0)
        return -ENOMEM;
    g->nodes[alts[1]].item = any;
    gnode *a = &g->nodes[any];
    int *na = realloc(a->alts, sizeof alts);
    if (!na) return -ENOMEM;
    memcpy(na, alts, sizeof alts);
    a->alts = na;
    a->n_alts = 5;
    return any;
}

int g_any_object(sl_grammar *g)
{
    int any = g_any_value(g);
    return any < 0 ? any : map_node(g, any);
}

static int compile(cc *c, const jv *s);

static bool is_nonneg_int(const jv *v) { return v && v->kind == JV_NUM && v->num >= 0 && v->num == floor(v->num); }

/* minItems-style keyword: -1 when absent; -2 after an error. */
static int64_t count_kw(cc *c, const jv *s, const char *kw)
{
    const jv *v = jv_get(s, kw);
    if (!v) return -1;
    if (!is_nonneg_int(v)) { bad(c, -EINVAL, "'%s' must be a non-negative integer%s", kw, ""); return -2; }
    return v->num > 1e15 ? (int64_t)1e15 : (int64_t)v->num;
}

static int compile_object(cc *c, const jv *s)
{
    const jv *props = jv_get(s, "properties"), *req = jv_get(s, "required"), *add = jv_get(s, "additionalProperties");
    if (props && props->kind != JV_OBJ) return bad(c, -EINVAL, "'properties' must be an object%s%s", "", "");
    if (req && req->kind != JV_ARR) return bad(c, -EINVAL, "'required' must be an array of names%s%s", "", "");
    bool has_props = props && props->n > 0;
    if (!has_props) {
        if (req && req->n) return bad(c, -EINVAL, "required property '%s' is not in 'properties' (supported: "
                                      "required names that 'properties' describes)", req->items[0].str ? req->items[0].str : "?", "");
        /* no keys allowed: additionalProperties false, or an empty properties beside no additionalProperties
         * (a function without parameters) */
        if ((add && add->kind == JV_BOOL && !add->b) || (props && !add))
            return literal_node(c->g, (const char *const[]){ "{}" }, 1);
        int values = !add || add->kind == JV_BOOL ? g_any_value(c->g) : compile(c, add);
        if (values < 0) return values == -ENOMEM ? NOMEM(c) : values;
        int id = map_node(c->g, values);
        return id < 0 ? NOMEM(c) : id;
    }
    if (add && !(add->kind == JV_BOOL && !add->b))
        return bad(c, -EINVAL, "'additionalProperties' other than false beside 'properties' (supported: false or "
                   "absent, which allow only the named properties%s%s)", "", "");
    if (props->n > G_MAX_PROPS) return bad(c, -EINVAL, "more than 64 properties in one object (supported: up to 64)%s%s", "", "");
    for (int i = 0; req && i < req->n; i++) {
        if (req->items[i].kind != JV_STR) return bad(c, -EINVAL, "'required' must be an array of names%s%s", "", "");
        if (!jv_get(props, req->items[i].str))
            return bad(c, -EINVAL, "required property '%s' is not in 'properties' (supported: required names that "
                       "'properties' describes)%s", req->items[i].str, "");
    }
    int id = g_node_add(c->g, G_OBJECT);
    if (id < 0) return NOMEM(c);
    gprop *pp = calloc((size_t)props->n, sizeof *pp);
    int *nr = malloc((size_t)(props->n + 1) * sizeof *nr);
    if (!pp || !nr) { free(pp); free(nr); return NOMEM(c); }
    c->g->nodes[id].props = pp;
    c->g->nodes[id].next_req = nr;
    for (int i = 0; i < props->n; i++) {
        pp[i].key = g_json_quote(props->keys[i], strlen(props->keys[i]), &pp[i].key_len);
        if (!pp[i].key) return NOMEM(c);
        c->g->nodes[id].n_props = i + 1;
        for (int k = 0; req && k < req->n; k++) if (!strcmp(req->items[k].str, props->keys[i])) pp[i].required = true;
        int child = compile(c, &props->items[i]);
        if (child < 0) return child;
        c->g->nodes[id].props[i].node = child;   /* nodes may have moved: index again */
    }
    gnode *n = &c->g->nodes[id];
    n->next_req[n->n_props] = n->n_props;
    for (int i = n->n_props - 1; i >= 0; i--) n->next_req[i] = n->props[i].required ? i : n->next_req[i + 1];
    return id;
}

static int compile_array(cc *c, const jv *s)
{
    const jv *items = jv_get(s, "items");
    if (items && items->kind == JV_ARR)
        return bad(c, -EINVAL, "'items' as an array (a tuple) is not supported (supported: one schema for every item)%s%s", "", "");
    int64_t mn = count_kw(c, s, "minItems"), mx = count_kw(c, s, "maxItems");
    if (mn == -2 || mx == -2) return -EINVAL;
    if (mx >= 0 && mn > mx) return bad(c, -EINVAL, "minItems > maxItems: no array satisfies the schema%s%s", "", "");
    int item = items ? compile(c, items) : g_any_value(c->g);
    if (item < 0) return item == -ENOMEM ? NOMEM(c) : item;
    int id = g_node_add(c->g, G_ARRAY);
    if (id < 0) return NOMEM(c);
    gnode *n = &c->g->nodes[id];
    n->item = item;
    n->min_items = mn < 0 ? 0 : mn;
    n->max_items = mx;
    return id;
}

static int compile_string(cc *c, const jv *s)
{
    int64_t mn = count_kw(c, s, "minLength"), mx = count_kw(c, s, "maxLength");
    if (mn == -2 || mx == -2) return -EINVAL;
    if (mx >= 0 && mn > mx) return bad(c, -EINVAL, "minLength > maxLength: no string satisfies the schema%s%s", "", "");
    int id = g_node_add(c->g, G_STRING);
    if (id < 0) return NOMEM(c);
    c->g->nodes[id].min_len = mn < 0 ? 0 : mn;
    c->g->nodes[id].max_len = mx;
    return id;
}

static int compile_numeric(cc *c, const jv *s, bool integer)
{
    const jv *mn = jv_get(s, "minimum"), *mx = jv_get(s, "maximum");
    if ((mn && mn->kind != JV_NUM) || (mx && mx->kind != JV_NUM))
        return bad(c, -EINVAL, "'%s' must be a number%s", mn && mn->kind != JV_NUM ? "minimum" : "maximum", "");
    int id = g_node_add(c->g, integer ? G_INTEGER : G_NUMBER);
    if (id < 0) return NOMEM(c);
    gnode *n = &c->g->nodes[id];
    n->bounded = mn || mx;
    n->fmin = mn ? mn->num : -(double)INT_LIMIT;
    n->fmax = mx ? mx->num : (double)INT_LIMIT;
    double lo = ceil(n->fmin), hi = floor(n->fmax);
    n->imin = lo < -(double)INT_LIMIT ? -INT_LIMIT : lo > (double)INT_LIMIT ? INT_LIMIT + 1 : (int64_t)lo;
    n->imax = hi > (double)INT_LIMIT ? INT_LIMIT : hi < -(double)INT_LIMIT ? -INT_LIMIT - 1 : (int64_t)hi;
    if (n->imin > n->imax)
        return bad(c, -EINVAL, "%s: no %s in [minimum, maximum] with at most 16 digits (supported: ranges that "
                   "hold an integer)", integer ? "integer" : "number", integer ? "integer" : "integer part");
    return id;
}

/* The node of one type name with the schema's keywords for it. */
static int compile_type(cc *c, const jv *s, const char *t)
{
    if (!strcmp(t, "object")) return compile_object(c, s);
    if (!strcmp(t, "array")) return compile_array(c, s);
    if (!strcmp(t, "string")) return compile_string(c, s);
    if (!strcmp(t, "integer")) return compile_numeric(c, s, true);
    if (!strcmp(t, "number")) return compile_numeric(c, s, false);
    int id = -1;
    if (!strcmp(t, "boolean")) id = literal_node(c->g, (const char *const[]){ "true", "false" }, 2);
    else if (!strcmp(t, "null")) id = literal_node(c->g, (const char *const[]){ "null" }, 1);
    else return bad(c, -EINVAL, "unknown type '%s' (supported: object, array, string, number, integer, boolean, null)%s", t, "");
    return id < 0 ? NOMEM(c) : id;
}

static bool type_matches(const jv *v, const char *t)
{
    switch (v->kind) {
    case JV_NULL: return !strcmp(t, "null");
    case JV_BOOL: return !strcmp(t, "boolean");
    case JV_NUM: return !strcmp(t, "number") || (!strcmp(t, "integer") && v->num == floor(v->num));
    case JV_STR: return !strcmp(t, "string");
    case JV_ARR: return !strcmp(t, "array");
    default: return !strcmp(t, "object");
    }
}

static bool allowed_type(const jv *type, const jv *v)
{
    if (!type) return true;
    if (type->kind == JV_STR) return type_matches(v, type->str);
    for (int i = 0; i < type->n; i++) if (type->items[i].kind == JV_STR && type_matches(v, type->items[i].str)) return true;
    return false;
}

/* enum / const: the values (of the allowed types) as literals. */
static int compile_enum(cc *c, const jv *s)
{
    const jv *en = jv_get(s, "enum"), *cn = jv_get(s, "const"), *type = jv_get(s, "type");
    static const char *const only[] = { "type", "enum", "const" };
    for (int i = 0; i < s->n; i++) {
        bool ok = false;
        for (size_t k = 0; k < 3; k++) ok |= !strcmp(s->keys[i], only[k]);
        for (int k = 15; keywords[k]; k++) ok |= !strcmp(s->keys[i], keywords[k]);   /* $defs, annotations */
        if (!ok) return bad(c, -EINVAL, "'%s' beside '%s' (supported: enum/const with type and annotations only)",
                            s->keys[i], en ? "enum" : "const");
    }
    if (en && en->kind != JV_ARR) return bad(c, -EINVAL, "'enum' must be an array%s%s", "", "");
    const jv *vals = cn ? cn : en->items;
    int n = cn ? 1 : en->n;
    if (n > G_MAX_PROPS) return bad(c, -EINVAL, "'enum' with more than 64 values (supported: up to 64)%s%s", "", "");
    char *texts[G_MAX_PROPS];
    int k = 0, rc = 0;
    char *ctext = cn ? jv_dump(cn, NULL) : NULL;
    if (cn && !ctext) return NOMEM(c);
    for (int i = 0; i < n && !rc; i++) {
        if (!allowed_type(type, &vals[i])) continue;
        char *t = jv_dump(&vals[i], NULL);
        if (!t) { rc = NOMEM(c); break; }
        if (cn && en) {   /* both: the const, if the enum has it */
            bool in = false;
            for (int j = 0; j < en->n && !in; j++) {
                char *e = jv_dump(&en->items[j], NULL);
                in = e && !strcmp(e, t);
                free(e);
            }
            if (!in) { free(t); continue; }
        }
        texts[k++] = t;
    }
    free(ctext);
    if (!rc && !k) rc = bad(c, -EINVAL, "no value satisfies '%s' (with 'type')%s", en ? "enum" : "const", "");
    int id = rc ? rc : literal_node(c->g, (const char *const *)texts, k);
    for (int i = 0; i < k; i++) free(texts[i]);
    if (id == -ENOMEM) return NOMEM(c);
    return id;
}

static int compile_ref(cc *c, const jv *s)
{
    const jv *ref = jv_get(s, "$ref");
    if (ref->kind != JV_STR) return bad(c, -EINVAL, "'$ref' must be a string%s%s", "", "");
    const char *r = ref->str, *name = NULL;
    const jv *defs = NULL;
    if (!strncmp(r, "#/$defs/", 8)) { defs = jv_get(c->root, "$defs"); name = r + 8; }
    else if (!strncmp(r, "#/definitions/", 14)) { defs = jv_get(c->root, "definitions"); name = r + 14; }
    else if (!strcmp(r, "#")) return bad(c, -EINVAL, "'$ref' '#' (the whole schema) is not supported (supported: "
                                         "#/$defs/NAME, #/definitions/NAME)%s%s", "", "");
    else return bad(c, -EINVAL, "'$ref' '%.100s' is not supported (supported: #/$defs/NAME, #/definitions/NAME)%s", r, "");
    const jv *target = jv_get(defs, name);
    if (!target) return bad(c, -EINVAL, "'$ref' '%.100s' names no definition%s", r, "");
    for (int i = 0; i < c->n_refs; i++) if (c->refs[i].schema == target) return c->refs[i].node;
    /* a forwarding node first, so that a definition that refers to itself finds it */
    int fwd = anyof_node(c->g, (const int[]){ 0 }, 0);
    if (fwd < 0) return NOMEM(c);
    if (c->n_refs == c->cap_refs) {
        int nc = c->cap_refs ? c->cap_refs * 2 : 8;
        memo *nm = realloc(c->refs, (size_t)nc * sizeof *nm);
        if (!nm) return NOMEM(c);
        c->refs = nm;
        c->cap_refs = nc;
    }
    c->refs[c->n_refs++] = (memo){ target, fwd };
    int t = compile(c, target);
    if (t < 0) return t;
    c->g->nodes[fwd].alts[0] = t;
    c->g->nodes[fwd].n_alts = 1;
    return fwd;
}

static int compile_anyof(cc *c, const jv *s)
{
    const jv *a = jv_get(s, "anyOf");
    for (int i = 0; i < s->n; i++) {
        bool ok = !strcmp(s->keys[i], "anyOf");
        for (int k = 15; keywords[k]; k++) ok |= !strcmp(s->keys[i], keywords[k]);   /* $defs, annotations */
        if (!ok) return bad(c, -EINVAL, "'%s' beside 'anyOf' (supported: anyOf with annotations only; put the "
                            "keyword in each alternative)%s", s->keys[i], "");
    }
    if (a->kind != JV_ARR || !a->n) return bad(c, -EINVAL, "'anyOf' must be a non-empty array of schemas%s%s", "", "");
    if (a->n > G_MAX_ALTS) return bad(c, -EINVAL, "'anyOf' with more than 32 alternatives (supported: up to 32)%s%s", "", "");
    int alts[G_MAX_ALTS];
    for (int i = 0; i < a->n; i++) if ((alts[i] = compile(c, &a->items[i])) < 0) return alts[i];
    int id = anyof_node(c->g, alts, a->n);
    return id < 0 ? NOMEM(c) : id;
}

static int compile_body(cc *c, const jv *s)
{
    if (s->kind == JV_BOOL) {
        if (!s->b) return bad(c, -EINVAL, "schema false: no value satisfies it%s%s", "", "");
        int id = g_any_value(c->g);
        return id < 0 ? NOMEM(c) : id;
    }
    if (s->kind != JV_OBJ) return bad(c, -EINVAL, "a schema must be an object or a boolean%s%s", "", "");
    for (int i = 0; i < s->n; i++) {
        bool known = false;
        for (int k = 0; keywords[k] && !known; k++) known = !strcmp(s->keys[i], keywords[k]);
        if (!known) return bad(c, -EINVAL, "unsupported JSON Schema keyword '%.64s' (supported: " SUPPORTED ")%s", s->keys[i], "");
    }
    if (jv_get(s, "$ref")) {
        for (int i = 0; i < s->n; i++) {
            bool ok = !strcmp(s->keys[i], "$ref");
            for (int k = 15; keywords[k]; k++) ok |= !strcmp(s->keys[i], keywords[k]);
            if (!ok) return bad(c, -EINVAL, "'%s' beside '$ref' (supported: $ref with annotations only)%s", s->keys[i], "");
        }
        return compile_ref(c, s);
    }
    if (jv_get(s, "anyOf")) return compile_anyof(c, s);
    if (jv_get(s, "enum") || jv_get(s, "const")) return compile_enum(c, s);
    const jv *type = jv_get(s, "type");
    if (!type) {   /* the type the keywords imply, else any value */
        const char *t = jv_get(s, "properties") || jv_get(s, "required") || jv_get(s, "additionalProperties") ? "object"
                      : jv_get(s, "items") || jv_get(s, "minItems") || jv_get(s, "maxItems") ? "array"
                      : jv_get(s, "minLength") || jv_get(s, "maxLength") ? "string"
                      : jv_get(s, "minimum") || jv_get(s, "maximum") ? "number" : NULL;
        if (t) return compile_type(c, s, t);
        int id = g_any_value(c->g);
        return id < 0 ? NOMEM(c) : id;
    }
    if (type->kind == JV_STR) return compile_type(c, s, type->str);
    if (type->kind != JV_ARR || !type->n || type->n > 7)
        return bad(c, -EINVAL, "'type' must be a type name or a non-empty array of them%s%s", "", "");
    int alts[7];
    for (int i = 0; i < type->n; i++) {
        if (type->items[i].kind != JV_STR) return bad(c, -EINVAL, "'type' must be a type name or a non-empty array of them%s%s", "", "");
        if ((alts[i] = compile_type(c, s, type->items[i].str)) < 0) return alts[i];
    }
    int id = anyof_node(c->g, alts, type->n);
    return id < 0 ? NOMEM(c) : id;
}

static int compile(cc *c, const jv *s)
{
    if (++c->depth > 64) { c->depth--; return bad(c, -EINVAL, "schema nested too deeply (more than 64 levels)%s%s", "", ""); }
    int id = compile_body(c, s);
    c->depth--;
    return id;
}

int g_compile_schema(sl_grammar *g, const jv *schema, char *err, size_t errlen)
{
    cc c = { .g = g, .root = schema, .err = err, .errlen = errlen };
    int id = compile(&c, schema);
    free(c.refs);
    if (id < 0) return id;
    g->root = id;
    return 0;
}
