/* runtime/text/grammar.c — a grammar's life: compiling a schema with its literal prefix and suffix,
 * freeing it, and the longest text it can produce. */
#include "runtime/text/grammar_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sl_grammar_free(sl_grammar *g)
{
    if (!g) return;
    for (int i = 0; i < g->n_nodes; i++) {
        gnode *n = &g->nodes[i];
        for (int k = 0; k < n->n_props; k++) free(n->props[k].key);
        for (int k = 0; k < n->n_lits; k++) free(n->lits[k]);
        free(n->props);
        free(n->next_req);
        free(n->lits);
        free(n->lit_lens);
        free(n->alts);
    }
    free(g->nodes);
    free(g->prefix);
    free(g->suffix);
    free(g);
}

static int set_literal(const char *s, char **out, size_t *len, const char *what, char *err, size_t errlen)
{
    *len = s ? strlen(s) : 0;
    if (*len > SL_GRAMMAR_MAX_LITERAL) {
        snprintf(err, errlen, "grammar: the %s is %zu bytes (supported: up to %d)", what, *len, SL_GRAMMAR_MAX_LITERAL);
        return -EINVAL;
    }
    *out = strdup(s ? s : "");
    if (!*out) { snprintf(err, errlen, "out of memory"); return -ENOMEM; }
    return 0;
}

int sl_grammar_compile(const char *schema_json, size_t len, const char *prefix, const char *suffix,
                       sl_grammar **out, char *err, size_t errlen)
{
    if (!out) { snprintf(err, errlen, "grammar: NULL out pointer"); return -EINVAL; }
    sl_grammar *g = calloc(1, sizeof *g);
    if (!g) { snprintf(err, errlen, "out of memory"); return -ENOMEM; }
    int rc = set_literal(prefix, &g->prefix, &g->prefix_len, "prefix", err, errlen);
    if (!rc) rc = set_literal(suffix, &g->suffix, &g->suffix_len, "suffix", err, errlen);
    if (!rc && !schema_json) {
        g->root = g_any_object(g);
        if (g->root < 0) { rc = -ENOMEM; snprintf(err, errlen, "out of memory"); }
    } else if (!rc) {
        jv *schema = NULL;
        rc = jv_parse(schema_json, len, &schema, err, errlen);
        if (!rc) rc = g_compile_schema(g, schema, err, errlen);
        jv_free(schema);
    }
    if (!rc && !g_mark_satisfiable(g)) {
        snprintf(err, errlen, "no value satisfies the schema (its definitions only refer to each other, or a required part "
                 "cannot be satisfied)");
        rc = -EINVAL;
    }
    if (rc) { sl_grammar_free(g); return rc; }
    *out = g;
    return 0;
}

static bool node_sat(const sl_grammar *g, const gnode *n)
{
    switch (n->kind) {
    case G_LITERAL: return n->n_lits > 0;
    case G_ARRAY: return n->min_items == 0 || g->nodes[n->item].sat;
    case G_OBJECT:
        for (int i = 0; i < n->n_props; i++) if (n->props[i].required && !g->nodes[n->props[i].node].sat) return false;
        return true;   /* a map may be {} */
    case G_ANYOF:
        for (int i = 0; i < n->n_alts; i++) if (g->nodes[n->alts[i]].sat) return true;
        return false;
    default: return true;   /* strings, integers, numbers: their ranges were checked when compiled */
    }
}

bool g_mark_satisfiable(sl_grammar *g)
{
    for (int i = 0; i < g->n_nodes; i++) g->nodes[i].sat = false;
    for (bool changed = true; changed;) {
        changed = false;
        for (int i = 0; i < g->n_nodes; i++)
            if (!g->nodes[i].sat && node_sat(g, &g->nodes[i])) { g->nodes[i].sat = true; changed = true; }
    }
    return g->nodes[g->root].sat;
}

#define UNBOUNDED (-1)

/* The longest text of node id, or UNBOUNDED; on_path marks the nodes being measured (recursion). */
static int64_t node_max(const sl_grammar *g, int id, uint8_t *on_path)
{
    if (on_path[id]) return UNBOUNDED;
    on_path[id] = 1;
    const gnode *n = &g->nodes[id];
    const int64_t ws = SL_GRAMMAR_WS_MAX;
    int64_t r = 0;
    switch (n->kind) {
    case G_LITERAL:
        for (int i = 0; i < n->n_lits; i++) if ((int64_t)n->lit_lens[i] > r) r = (int64_t)n->lit_lens[i];
        break;
    case G_STRING:   /* a code point is at most 12 bytes: a surrogate pair of \u escapes */
        r = n->max_len < 0 ? UNBOUNDED : 2 + 12 * n->max_len;
        break;
    case G_INTEGER:
        r = 1 + SL_GRAMMAR_INT_DIGITS;
        break;
    case G_NUMBER:
        r = 1 + SL_GRAMMAR_INT_DIGITS + (n->bounded ? 1 + SL_GRAMMAR_FRAC_DIGITS
                                                    : 1 + SL_GRAMMAR_FRAC_DIGITS + 2 + SL_GRAMMAR_EXP_DIGITS);
        break;
    case G_ARRAY: {
        int64_t item = n->max_items > 0 ? node_max(g, n->item, on_path) : 0;
        r = n->max_items < 0 || item == UNBOUNDED ? UNBOUNDED : 2 + ws + n->max_items * (item + 1 + 2 * ws);
        break;
    }
    case G_OBJECT:
        if (n->map >= 0 || !n->n_props) { r = UNBOUNDED; break; }
        r = 2 + ws;
        for (int i = 0; i < n->n_props && r != UNBOUNDED; i++) {
            int64_t v = node_max(g, n->props[i].node, on_path);
            r = v == UNBOUNDED ? UNBOUNDED : r + (int64_t)n->props[i].key_len + 2 + 3 * ws + v;
        }
        break;
    default:   /* G_ANYOF */
        for (int i = 0; i < n->n_alts && r != UNBOUNDED; i++) {
            int64_t v = node_max(g, n->alts[i], on_path);
            r = v == UNBOUNDED ? UNBOUNDED : v > r ? v : r;
        }
        break;
    }
    on_path[id] = 0;
    return r;
}

int64_t sl_grammar_max_bytes(const sl_grammar *g)
{
    uint8_t *on_path = calloc((size_t)g->n_nodes, 1);
    if (!on_path) return UNBOUNDED;
    int64_t v = node_max(g, g->root, on_path);
    free(on_path);
    return v == UNBOUNDED ? UNBOUNDED : v + (int64_t)(g->prefix_len + g->suffix_len);
}
