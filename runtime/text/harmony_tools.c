/* runtime/text/harmony_tools.c — gpt-oss's tools in the prompt: the `functions` namespace of
 * TypeScript-like signatures its template (openai-gpt-oss-120b.jinja, render_tool_namespace and
 * render_typescript_type) writes into the developer message, and the tool turns.
 *
 * Followed statement by statement, including what jinja2 (as transformers runs it) makes of the
 * template's whitespace: a nested object's member types come after "\n" and 16 spaces.  Where
 * jinja2 fails (a tool without a description) the description is printed empty. */
#include "runtime/text/chat_internal.h"
#include "runtime/text/json_text.h"

typedef struct jv { const char *p; size_t n; } jv;   /* a JSON value's text (p NULL: absent) */

static jv member(jv o, const char *key)
{
    jv r = { NULL, 0 };
    if (o.p && o.n && o.p[0] == '{') r.p = sl_json_member(o.p, o.n, key, &r.n);
    return r;
}

/* Jinja truthiness of a JSON value: absent, null, false, 0, "", [] and {} are false. */
static bool truthy(jv v)
{
    if (!v.p) return false;
    if (v.n == 2 && (!memcmp(v.p, "\"\"", 2) || !memcmp(v.p, "[]", 2) || !memcmp(v.p, "{}", 2))) return false;
    return !(v.n == 4 && !memcmp(v.p, "null", 4)) && !(v.n == 5 && !memcmp(v.p, "false", 5)) && !(v.n == 1 && v.p[0] == '0');
}

/* A string value decoded and printed; other values printed as their JSON text. */
static void put_str(sbuf *b, jv v)
{
    if (!v.p) return;
    char *s = v.p[0] == '"' ? sl_json_string(v.p, v.n) : NULL;
    if (s) put(b, s); else put_n(b, v.p, v.n);
    free(s);
}

static bool str_is(jv v, const char *s)
{
    size_t l = strlen(s);
    return v.p && v.n == l + 2 && v.p[0] == '"' && !memcmp(v.p + 1, s, l);
}

/* key appears as a string in the array arr. */
static bool in_array(jv arr, const char *key, size_t klen)
{
    if (!arr.p || arr.p[0] != '[') return false;
    size_t i = 1, e;
    while (i < arr.n) {
        while (i < arr.n && (arr.p[i] == ' ' || arr.p[i] == ',' || arr.p[i] == '\n')) i++;
        if (i >= arr.n || arr.p[i] == ']' || sl_json_scan(arr.p + i, arr.n - i, &e) != SL_JSON_OK) return false;
        if (arr.p[i] == '"' && e == klen + 2 && !memcmp(arr.p + i + 1, key, klen)) return true;
        i += e;
    }
    return false;
}

/* The elements of an array, one at a time (pos from 1). */
static bool next_elem(jv arr, size_t *pos, jv *out)
{
    size_t i = *pos, e;
    while (i < arr.n && (arr.p[i] == ' ' || arr.p[i] == ',' || arr.p[i] == '\n')) i++;
    if (i >= arr.n || arr.p[i] == ']' || sl_json_scan(arr.p + i, arr.n - i, &e) != SL_JSON_OK) return false;
    *out = (jv){ arr.p + i, e };
    *pos = i + e;
    return true;
}

static void ts_type(sbuf *b, jv spec, int depth);

static void ts_array(sbuf *b, jv spec, int depth)
{
    jv items = member(spec, "items");
    if (truthy(items)) {
        jv it = member(items, "type");
        if (str_is(it, "string")) put(b, "string[]");
        else if (str_is(it, "number") || str_is(it, "integer")) put(b, "number[]");
        else if (str_is(it, "boolean")) put(b, "boolean[]");
        else {
            sbuf inner = { 0 };
            ts_type(&inner, items, depth + 1);
            if (inner.oom) b->oom = true;
            if (!inner.p || !strcmp(inner.p, "object | object") || inner.n > 50) put(b, "any[]");
            else { put_n(b, inner.p, inner.n); put(b, "[]"); }
            free(inner.p);
        }
    } else {
        put(b, "any[]");
    }
    if (truthy(member(spec, "nullable"))) put(b, " | null");
}

static void ts_object(sbuf *b, jv spec, int depth)
{
    jv props = member(spec, "properties"), req = member(spec, "required");
    if (!truthy(props)) { put(b, "object"); return; }
    put(b, "{\n");
    size_t pos = 0, kl, vl;
    const char *k, *v;
    bool first = true;
    while (sl_json_next_member(props.p, props.n, &pos, &k, &kl, &v, &vl)) {
        if (!first) put(b, ", ");
        first = false;
        put_n(b, k, kl);
        if (!in_array(req, k, kl)) put(b, "?");
        put(b, ": \n                ");   /* the template's newline and indent before {{ render… }} */
        ts_type(b, (jv){ v, vl }, depth + 1);
    }
    put(b, "}");
}

static void ts_type(sbuf *b, jv spec, int depth)
{
    if (depth > SL_JSON_MAX_DEPTH) { put(b, "any"); return; }
    jv type = member(spec, "type"), one = member(spec, "oneOf");
    if (str_is(type, "array")) { ts_array(b, spec, depth); return; }
    if (type.p && type.p[0] == '[' && type.n > 2) {   /* a list of types */
        size_t pos = 1;
        jv t;
        for (bool first = true; next_elem(type, &pos, &t); first = false) { if (!first) put(b, " | "); put_str(b, t); }
        return;
    }
    if (truthy(one)) {   /* (jinja2 never sees has_object_variants set: loop scoping) */
        size_t pos = 1;
        jv var;
        for (bool first = true; next_elem(one, &pos, &var); first = false) {
            if (!first) put(b, " | \n");
            ts_type(b, var, depth + 1);
            jv d = member(var, "description");
            if (truthy(d)) { put(b, "// "); put_str(b, d); }
        }
        return;
    }
    if (str_is(type, "string")) {
        jv en = member(spec, "enum");
        if (truthy(en)) {
            size_t pos = 1;
            jv e;
            put(b, "\"");
            for (bool first = true; next_elem(en, &pos, &e); first = false) { if (!first) put(b, "\" | \""); put_str(b, e); }
            put(b, "\"");
        } else {
            put(b, "string");
            if (truthy(member(spec, "nullable"))) put(b, " | null");
        }
    } else if (str_is(type, "number") || str_is(type, "integer")) {
        put(b, "number");
    } else if (str_is(type, "boolean")) {
        put(b, "boolean");
    } else if (str_is(type, "object")) {
        ts_object(b, spec, depth);
    } else {
        put(b, "any");
    }
}

/* One parameter line of a function's signature. */
static void param_line(sbuf *b, const char *name, size_t nl, jv spec, jv required)
{
    jv d = member(spec, "description"), def = member(spec, "default");
    if (truthy(d)) { put(b, "// "); put_str(b, d); put(b, "\n"); }
    put_n(b, name, nl);
    if (!in_array(required, name, nl)) put(b, "?");
    put(b, ": ");
    ts_type(b, spec, 0);
    if (def.p) {
        if (truthy(member(spec, "enum"))) { put(b, ", // default: "); put_str(b, def); }
        else if (truthy(member(spec, "oneOf"))) { put(b, "// default: "); put_str(b, def); }
        else {
            char *t = strndup(def.p, def.n), *py = t ? sl_json_pyformat(t, def.n, 0, NULL) : NULL;
            if (!py) b->oom = true;
            else { put(b, ", // default: "); put(b, py); }
            free(t);
            free(py);
        }
    }
    put(b, ",\n");
}

void sl_render_harmony_tools(sbuf *b, const sl_chat_opts *o)
{
    put(b, "## functions\n\nnamespace functions {\n\n");
    for (int t = 0; t < o->n_tools; t++) {
        jv tool = { o->tools[t], strlen(o->tools[t]) }, fn = member(tool, "function");
        jv params = member(fn, "parameters"), props = member(params, "properties");
        put(b, "// ");
        put_str(b, member(fn, "description"));
        put(b, "\ntype ");
        put_str(b, member(fn, "name"));
        put(b, " = ");
        if (!truthy(params) || !truthy(props)) { put(b, "() => any;\n\n"); continue; }
        put(b, "(_: {\n");
        size_t pos = 0, kl, vl;
        const char *k, *v;
        while (sl_json_next_member(props.p, props.n, &pos, &k, &kl, &v, &vl))
            param_line(b, k, kl, (jv){ v, vl }, member(params, "required"));
        put(b, "}) => any;\n\n");
    }
    put(b, "} // namespace functions");
}
