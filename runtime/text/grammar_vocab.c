/* runtime/text/grammar_vocab.c — which tokens a grammar state allows.
 *
 * The vocabulary's token bytes are put once into a trie (per model); a mask walks it depth first
 * from the state, advancing a copy of the state by one byte per trie edge, so a prefix shared by
 * many tokens ("\"na", " the") is checked once and a dead branch is cut at its first bad byte.
 * Special tokens (printing nothing without `special`) are allowed only where their text is the next
 * part of the prefix or suffix; end-of-generation tokens only where the text is complete.
 *
 * Inside a string nearly every token is allowed and the walk would visit the whole trie; there a
 * token of plain string text (no '"', '\\', control bytes; whole UTF-8 characters: most of a
 * vocabulary) is allowed exactly when its code points fit the room the string has left, so those
 * are allowed from a table and only the other tokens' trie (quotes, escapes, byte pieces) is walked.
 */
#include "runtime/text/grammar_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct tnode {
    int32_t first_child, next_sibling;
    int32_t tok;                /* first token ending here (tok_next chains the rest), -1: none */
    uint8_t byte;
} tnode;

typedef struct trie {
    tnode *nodes;
    int32_t n_nodes, cap_nodes;
    int32_t root_child[256];    /* the root's children by byte (-1: none): the widest node */
    int max_len;                /* the longest token in it (the walk's depth) */
} trie;

struct sl_gvocab {
    int32_t n_tokens;
    trie all;                   /* every text token */
    trie rest;                  /* the text tokens that are not plain string text */
    int32_t *tok_next;          /* per trie: tokens are in one or both; chains are per trie */
    int32_t *tok_next_rest;
    int32_t *plain_cp;          /* plain string text: its code points; else -1 */
    char *bytes;                /* every token's bytes: token i is bytes[off[i] .. off[i + 1]) */
    size_t *off;
    uint8_t *kind;              /* TK_* */
};

enum { TK_NONE, TK_TEXT, TK_SPECIAL, TK_EOG };

static int trie_init(trie *t)
{
    t->cap_nodes = 1024;
    t->nodes = malloc((size_t)t->cap_nodes * sizeof *t->nodes);
    if (!t->nodes) return -ENOMEM;
    t->nodes[0] = (tnode){ -1, -1, -1, 0 };
    t->n_nodes = 1;
    for (int b = 0; b < 256; b++) t->root_child[b] = -1;
    return 0;
}

static int32_t child_of(trie *t, int32_t node, uint8_t b)
{
    if (node == 0 && t->root_child[b] >= 0) return t->root_child[b];
    if (node != 0)
        for (int32_t c = t->nodes[node].first_child; c >= 0; c = t->nodes[c].next_sibling)
            if (t->nodes[c].byte == b) return c;
    if (t->n_nodes == t->cap_nodes) {
        int32_t nc = t->cap_nodes * 2;
        tnode *nn = realloc(t->nodes, (size_t)nc * sizeof *nn);
        if (!nn) return -ENOMEM;
        t->nodes = nn;
        t->cap_nodes = nc;
    }
    int32_t c = t->n_nodes++;
    t->nodes[c] = (tnode){ -1, t->nodes[node].first_child, -1, b };
    t->nodes[node].first_child = c;
    if (node == 0) t->root_child[b] = c;
    return c;
}

static int insert(trie *t, int32_t *next, const char *bytes, size_t n, int32_t id)
{
    int32_t node = 0;
    for (size_t i = 0; i < n; i++) {
        node = child_of(t, node, (uint8_t)bytes[i]);
        if (node < 0) return node;
    }
    next[id] = t->nodes[node].tok;
    t->nodes[node].tok = id;
    if ((int)n > t->max_len) t->max_len = (int)n;
    return 0;
}

/* Code points of p[0..n) if it is plain JSON string text (printable ASCII but '"' and '\\', whole
 * UTF-8 characters as json_grammar.c takes them: no overlongs, surrogates, or beyond U+10FFFF); else -1. */
static int32_t plain_code_points(const char *p, size_t n)
{
    int32_t cp = 0;
    for (size_t i = 0; i < n; cp++) {
        uint8_t c = (uint8_t)p[i++];
        if (c < 0x80) {
            if (c < 0x20 || c == '"' || c == '\\') return -1;
            continue;
        }
        int rem;
        uint8_t lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) rem = 1;
        else if (c == 0xE0) { rem = 2; lo = 0xA0; }
        else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) rem = 2;
        else if (c == 0xED) { rem = 2; hi = 0x9F; }
        else if (c == 0xF0) { rem = 3; lo = 0x90; }
        else if (c >= 0xF1 && c <= 0xF3) rem = 3;
        else if (c == 0xF4) { rem = 3; hi = 0x8F; }
        else return -1;
        for (; rem > 0; rem--, lo = 0x80, hi = 0xBF) {
            if (i >= n || (uint8_t)p[i] < lo || (uint8_t)p[i] > hi) return -1;
            i++;
        }
    }
    return cp;
}

/* Token id's bytes appended to gv->bytes (its text, or for a control token its special text). */
static int add_bytes(sl_gvocab *gv, const sl_vocab *v, int32_t id, size_t *cap)
{
    char buf[256];
    int len = sl_token_piece(v, id, buf, sizeof buf);
    bool special = false;
    if (len == 0) { len = sl_token_piece_ex(v, id, true, buf, sizeof buf); special = len > 0; }
    gv->kind[id] = sl_vocab_is_eog(v, id) ? TK_EOG : len <= 0 ? TK_NONE : special ? TK_SPECIAL : TK_TEXT;
    if (len < 0) len = 0;
    size_t at = gv->off[id];
    if (at + (size_t)len > *cap) {
        size_t nc = (*cap + (size_t)len) * 2;
        char *nb = realloc(gv->bytes, nc);
        if (!nb) return -ENOMEM;
        gv->bytes = nb;
        *cap = nc;
    }
    if (len > (int)sizeof buf) {   /* longer than the buffer: ask again at its place */
        if (special) sl_token_piece_ex(v, id, true, gv->bytes + at, (size_t)len);
        else sl_token_piece(v, id, gv->bytes + at, (size_t)len);
    } else {
        memcpy(gv->bytes + at, buf, (size_t)len);
    }
    gv->off[id + 1] = at + (size_t)len;
    return 0;
}

int sl_gvocab_build(const sl_vocab *v, sl_gvocab **out)
{
    sl_gvocab *gv = calloc(1, sizeof *gv);
    if (!gv) return -ENOMEM;
    const int32_t n = sl_vocab_n_tokens(v);
    gv->n_tokens = n;
    gv->tok_next = malloc((size_t)n * sizeof *gv->tok_next);
    gv->tok_next_rest = malloc((size_t)n * sizeof *gv->tok_next_rest);
    gv->plain_cp = malloc((size_t)n * sizeof *gv->plain_cp);
    gv->off = calloc((size_t)n + 1, sizeof *gv->off);
    gv->kind = calloc((size_t)n, 1);
    size_t cap = (size_t)n * 8;
    gv->bytes = malloc(cap);
    int rc = gv->tok_next && gv->tok_next_rest && gv->plain_cp && gv->off && gv->kind && gv->bytes ? 0 : -ENOMEM;
    if (!rc) rc = trie_init(&gv->all);
    if (!rc) rc = trie_init(&gv->rest);
    for (int32_t id = 0; !rc && id < n; id++) {
        rc = add_bytes(gv, v, id, &cap);
        const char *b = gv->bytes + gv->off[id];
        size_t len = gv->off[id + 1] - gv->off[id];
        gv->plain_cp[id] = -1;
        if (rc || gv->kind[id] != TK_TEXT) continue;
        gv->plain_cp[id] = plain_code_points(b, len);
        rc = insert(&gv->all, gv->tok_next, b, len, id);
        if (!rc && gv->plain_cp[id] < 0) rc = insert(&gv->rest, gv->tok_next_rest, b, len, id);
    }
    if (rc) { sl_gvocab_free(gv); return rc; }
    for (trie *t = &gv->all; t; t = t == &gv->all ? &gv->rest : NULL) {   /* give back the doubling's slack */
        tnode *fit = realloc(t->nodes, (size_t)t->n_nodes * sizeof *fit);
        if (fit) { t->nodes = fit; t->cap_nodes = t->n_nodes; }
    }
    char *fit = realloc(gv->bytes, gv->off[n] ? gv->off[n] : 1);
    if (fit) gv->bytes = fit;
    *out = gv;
    return 0;
}

void sl_gvocab_free(sl_gvocab *gv)
{
    if (!gv) return;
    free(gv->all.nodes);
    free(gv->rest.nodes);
    free(gv->tok_next);
    free(gv->tok_next_rest);
    free(gv->plain_cp);
    free(gv->bytes);
    free(gv->off);
    free(gv->kind);
    free(gv);
}

int32_t sl_gvocab_n_tokens(const sl_gvocab *gv) { return gv->n_tokens; }

size_t sl_gvocab_mem_bytes(const sl_gvocab *gv)
{
    size_t n = (size_t)gv->n_tokens;
    return (size_t)(gv->all.cap_nodes + gv->rest.cap_nodes) * sizeof(tnode) + n * (3 * sizeof(int32_t) + sizeof(size_t) + 1) +
           gv->off[n] + sizeof *gv;
}

typedef struct walker {
    const trie *t;
    const int32_t *next;
    sl_gstate **level;          /* the state after each depth's byte (allocated on first use) */
    uint8_t *allowed;
    int count;
    bool oom;
} walker;

static void walk(walker *w, int32_t node, const sl_gstate *s, int depth)
{
    const tnode *nodes = w->t->nodes;
    if (!w->level[depth] && !(w->level[depth] = malloc(sizeof(sl_gstate)))) { w->oom = true; return; }
    sl_gstate *s2 = w->level[depth];
    for (int32_t c = nodes[node].first_child; c >= 0; c = nodes[c].next_sibling) {
        if (!g_state_step(s, s2, nodes[c].byte)) continue;
        for (int32_t t = nodes[c].tok; t >= 0; t = w->next[t])
            if (!w->allowed[t]) { w->allowed[t] = 1; w->count++; }
        if (nodes[c].first_child >= 0) walk(w, c, s2, depth + 1);
    }
}

static int walk_trie(const trie *t, const int32_t *next, const sl_gstate *s, uint8_t *allowed, int count)
{
    walker w = { t, next, calloc((size_t)t->max_len + 1, sizeof(sl_gstate *)), allowed, count, false };
    if (!w.level) return -ENOMEM;
    walk(&w, 0, s, 0);
    for (int i = 0; i <= t->max_len; i++) free(w.level[i]);
    free(w.level);
    return w.oom ? -ENOMEM : w.count;
}

int sl_grammar_mask(const sl_gvocab *gv, const sl_gstate *s, uint8_t *allowed)
{
    memset(allowed, 0, (size_t)gv->n_tokens);
    int count = 0;
    int64_t room;
    if (g_state_string_room(s, &room)) {   /* plain text from the table, the rest by the walk */
        for (int32_t id = 0; id < gv->n_tokens; id++)
            if (gv->plain_cp[id] >= 0 && gv->plain_cp[id] <= room) { allowed[id] = 1; count++; }
        count = walk_trie(&gv->rest, gv->tok_next_rest, s, allowed, count);
    } else {
        count = walk_trie(&gv->all, gv->tok_next, s, allowed, count);
    }
    if (count < 0) return count;
    const bool complete = sl_gstate_complete(s);
    for (int32_t id = 0; id < gv->n_tokens; id++) {
        if (gv->kind[id] == TK_EOG) allowed[id] = complete;
        else if (gv->kind[id] == TK_SPECIAL)
            allowed[id] = g_state_literal_next(s, gv->bytes + gv->off[id], gv->off[id + 1] - gv->off[id]);
        else continue;
        count += allowed[id];
    }
    return count;
}

int sl_gstate_accept_token(sl_gstate *s, const sl_gvocab *gv, int32_t id)
{
    if (id < 0 || id >= gv->n_tokens) return -EINVAL;
    const char *b = gv->bytes + gv->off[id];
    size_t n = gv->off[id + 1] - gv->off[id];
    switch (gv->kind[id]) {
    case TK_EOG: return sl_gstate_complete(s) ? 0 : -EINVAL;
    case TK_SPECIAL: if (!g_state_literal_next(s, b, n)) return -EINVAL; break;
    case TK_TEXT: break;
    default: return -EINVAL;
    }
    return sl_gstate_feed(s, b, n) ? 0 : -EINVAL;
}
