/* runtime/text/grammar_vocab.c — which tokens a grammar state allows.
 *
 * The vocabulary's token bytes are put once into a trie (per model); a mask walks it depth first
 * from the state, advancing a copy of the state by one byte per trie edge, so a prefix shared by
 * many tokens ("\"na", " the") is checked once and a dead branch is cut at its first bad byte.
 * Special tokens (printing nothing without `special`) are allowed only where their text is the next
 * part of the prefix or suffix; end-of-generation tokens only where the text is complete.
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

struct sl_gvocab {
    int32_t n_tokens;
    tnode *nodes;
    int32_t n_nodes, cap_nodes;
    int32_t *tok_next;
    char *bytes;                /* every token's bytes: token i is bytes[off[i] .. off[i + 1]) */
    size_t *off;
    uint8_t *kind;              /* TK_* */
    int max_len;                /* the longest token in the trie (the walk's depth) */
};

enum { TK_NONE, TK_TEXT, TK_SPECIAL, TK_EOG };

static int32_t child_of(sl_gvocab *gv, int32_t node, uint8_t b)
{
    for (int32_t c = gv->nodes[node].first_child; c >= 0; c = gv->nodes[c].next_sibling)
        if (gv->nodes[c].byte == b) return c;
    if (gv->n_nodes == gv->cap_nodes) {
        int32_t nc = gv->cap_nodes * 2;
        tnode *nn = realloc(gv->nodes, (size_t)nc * sizeof *nn);
        if (!nn) return -ENOMEM;
        gv->nodes = nn;
        gv->cap_nodes = nc;
    }
    int32_t c = gv->n_nodes++;
    gv->nodes[c] = (tnode){ -1, gv->nodes[node].first_child, -1, b };
    gv->nodes[node].first_child = c;
    return c;
}

static int insert(sl_gvocab *gv, int32_t id)
{
    int32_t node = 0;
    size_t n = gv->off[id + 1] - gv->off[id];
    for (size_t i = 0; i < n; i++) {
        node = child_of(gv, node, (uint8_t)gv->bytes[gv->off[id] + i]);
        if (node < 0) return node;
    }
    gv->tok_next[id] = gv->nodes[node].tok;
    gv->nodes[node].tok = id;
    if ((int)n > gv->max_len) gv->max_len = (int)n;
    return 0;
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
    gv->cap_nodes = 1024;
    gv->nodes = malloc((size_t)gv->cap_nodes * sizeof *gv->nodes);
    gv->tok_next = malloc((size_t)n * sizeof *gv->tok_next);
    gv->off = calloc((size_t)n + 1, sizeof *gv->off);
    gv->kind = calloc((size_t)n, 1);
    size_t cap = (size_t)n * 8;
    gv->bytes = malloc(cap);
    int rc = gv->nodes && gv->tok_next && gv->off && gv->kind && gv->bytes ? 0 : -ENOMEM;
    if (!rc) {
        gv->nodes[0] = (tnode){ -1, -1, -1, 0 };
        gv->n_nodes = 1;
    }
    for (int32_t id = 0; !rc && id < n; id++) {
        rc = add_bytes(gv, v, id, &cap);
        if (!rc && gv->kind[id] == TK_TEXT) rc = insert(gv, id);
    }
    if (rc) { sl_gvocab_free(gv); return rc; }
    *out = gv;
    return 0;
}

void sl_gvocab_free(sl_gvocab *gv)
{
    if (!gv) return;
    free(gv->nodes);
    free(gv->tok_next);
    free(gv->bytes);
    free(gv->off);
    free(gv->kind);
    free(gv);
}

int32_t sl_gvocab_n_tokens(const sl_gvocab *gv) { return gv->n_tokens; }

typedef struct walker {
    const sl_gvocab *gv;
    sl_gstate **level;          /* the state after each depth's byte (allocated on first use) */
    uint8_t *allowed;
    int count;
    bool oom;
} walker;

static void walk(walker *w, int32_t node, const sl_gstate *s, int depth)
{
    const sl_gvocab *gv = w->gv;
    if (!w->level[depth] && !(w->level[depth] = malloc(sizeof(sl_gstate)))) { w->oom = true; return; }
    sl_gstate *s2 = w->level[depth];
    for (int32_t c = gv->nodes[node].first_child; c >= 0; c = gv->nodes[c].next_sibling) {
        if (!g_state_step(s, s2, gv->nodes[c].byte)) continue;
        for (int32_t t = gv->nodes[c].tok; t >= 0; t = gv->tok_next[t]) { w->allowed[t] = 1; w->count++; }
        if (gv->nodes[c].first_child >= 0) walk(w, c, s2, depth + 1);
    }
}

int sl_grammar_mask(const sl_gvocab *gv, const sl_gstate *s, uint8_t *allowed)
{
    memset(allowed, 0, (size_t)gv->n_tokens);
    walker w = { gv, calloc((size_t)gv->max_len + 1, sizeof(sl_gstate *)), allowed, 0, false };
    if (!w.level) return -ENOMEM;
    walk(&w, 0, s, 0);
    for (int i = 0; i <= gv->max_len; i++) free(w.level[i]);
    free(w.level);
    if (w.oom) return -ENOMEM;
    const bool complete = sl_gstate_complete(s);
    for (int32_t id = 0; id < gv->n_tokens; id++) {
        if (gv->kind[id] == TK_EOG) allowed[id] = complete;
        else if (gv->kind[id] == TK_SPECIAL)
            allowed[id] = g_state_literal_next(s, gv->bytes + gv->off[id], gv->off[id + 1] - gv->off[id]);
        else continue;
        w.count += allowed[id];
    }
    return w.count;
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
