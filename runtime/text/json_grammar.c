/* runtime/text/json_grammar.c — the automaton: a compiled grammar run over bytes.
 *
 * A parse is a stack of frames, one per value being read (object, array, string, number, literal);
 * each frame's handler takes a byte and says: consumed; consumed and the value is complete (pop);
 * not mine but the value is complete (pop and give the byte to the parent: numbers and literals
 * end where the next byte cannot continue them); start a child value with this byte (push); or
 * fail.  An anyOf splits the parse into one per alternative at its first byte; a state is the set
 * of parses still alive (identical ones merged, at most G_MAX_CFG).  Every state the automaton
 * reaches can still be completed (ranges and required keys are checked when a byte is taken, not
 * at the end), so a mask built from it never leads into a dead end: that is what makes the
 * sampler's "no token allowed" impossible for a vocabulary that has every byte.
 */
#include "runtime/text/grammar_internal.h"

#include <stdlib.h>
#include <string.h>

enum g_seq { SEQ_PREFIX, SEQ_VALUE, SEQ_SUFFIX, SEQ_DONE, SEQ_DEAD };
enum { R_OK, R_DONE, R_POP, R_FAIL, R_PUSH };
enum { S_OPEN, S_BODY, S_UTF8, S_ESC, S_HEX, S_LOW1, S_LOW2, S_LOWHEX };
enum { O_OPEN, O_FIRST, O_KEY, O_MAPKEY, O_COLON, O_VALUE, O_INVALUE, O_AFTER, O_NEXT };
enum { A_OPEN, A_FIRST, A_INITEM, A_AFTER, A_NEXT };
enum { N_START, N_NEG, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

#define NO_NODE (-1)
#define KEY_NODE (-2)           /* a map's key: a string without limits */
#define ANYOF_GUARD 16          /* anyOf/$ref forwarding followed without a byte: at most this deep */

static bool is_ws(uint8_t c) { return c == ' ' || c == '\n' || c == '\t'; }

static int ws_byte(gframe *f)
{
    if (f->ws >= SL_GRAMMAR_WS_MAX) return R_FAIL;
    f->ws++;
    return R_OK;
}

static int hexval(uint8_t c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A UTF-8 lead byte: continuation count and the first continuation's range; false if invalid. */
static bool utf8_lead(gframe *f, uint8_t c)
{
    f->lo = 0x80;
    f->hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) f->rem = 1;
    else if (c == 0xE0) { f->rem = 2; f->lo = 0xA0; }
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) f->rem = 2;
    else if (c == 0xED) { f->rem = 2; f->hi = 0x9F; }   /* no surrogates */
    else if (c == 0xF0) { f->rem = 3; f->lo = 0x90; }   /* no overlongs */
    else if (c >= 0xF1 && c <= 0xF3) f->rem = 3;
    else if (c == 0xF4) { f->rem = 3; f->hi = 0x8F; }   /* nothing above U+10FFFF */
    else return false;
    return true;
}

static int escape_byte(gframe *f, uint8_t c)
{
    int h = hexval(c);
    switch (f->phase) {
    case S_ESC:
        if (c == 'u') { f->phase = S_HEX; f->pos = 0; f->val = 0; return R_OK; }
        if (!c || !strchr("\"\\/bfnrt", c)) return R_FAIL;
        f->count++;
        f->phase = S_BODY;
        return R_OK;
    case S_HEX:
        if (h < 0) return R_FAIL;
        f->val = f->val * 16 + h;
        f->pos++;
        if (f->pos == 2 && f->val >= 0xDC && f->val <= 0xDF) return R_FAIL;   /* a lone low surrogate */
        if (f->pos < 4) return R_OK;
        if (f->val == 0) return R_FAIL;                                        /* \u0000 is never emitted */
        f->count++;
        f->phase = f->val >= 0xD800 && f->val <= 0xDBFF ? S_LOW1 : S_BODY;
        return R_OK;
    case S_LOW1: if (c != '\\') return R_FAIL; f->phase = S_LOW2; return R_OK;
    case S_LOW2: if (c != 'u') return R_FAIL; f->phase = S_LOWHEX; f->pos = 0; f->val = 0; return R_OK;
    default:   /* S_LOWHEX: DC00..DFFF */
        if (h < 0) return R_FAIL;
        f->val = f->val * 16 + h;
        f->pos++;
        if ((f->pos == 1 && f->val != 0xD) || (f->pos == 2 && f->val < 0xDC)) return R_FAIL;
        if (f->pos == 4) f->phase = S_BODY;
        return R_OK;
    }
}

static int string_byte(const gnode *n, gframe *f, uint8_t c)
{
    const int64_t mx = n ? n->max_len : -1, mn = n ? n->min_len : 0;
    const bool room = mx < 0 || f->count < mx;
    switch (f->phase) {
    case S_OPEN:
        if (c != '"') return R_FAIL;
        f->phase = S_BODY;
        return R_OK;
    case S_BODY:
        if (c == '"') return f->count >= mn ? R_DONE : R_FAIL;
        if (c < 0x20 || !room) return R_FAIL;
        if (c == '\\') { f->phase = S_ESC; return R_OK; }
        if (c >= 0x80) {
            if (!utf8_lead(f, c)) return R_FAIL;
            f->phase = S_UTF8;
        }
        f->count++;
        return R_OK;
    case S_UTF8:
        if (c < f->lo || c > f->hi) return R_FAIL;
        f->lo = 0x80;
        f->hi = 0xBF;
        if (--f->rem == 0) f->phase = S_BODY;
        return R_OK;
    default:
        return escape_byte(f, c);
    }
}

/* Some integer with the sign neg, magnitude v so far (nd digits), completed with at most
 * SL_GRAMMAR_INT_DIGITS digits in all, lies in [imin, imax]. */
static bool int_viable(const gnode *n, bool neg, int64_t v, int nd)
{
    int64_t p = 1;
    for (int j = 0; nd + j <= SL_GRAMMAR_INT_DIGITS; j++, p *= 10) {
        if (j > 0 && nd == 1 && v == 0) break;   /* "0" takes no more digits */
        int64_t lo, hi;
        if (nd == 0) {
            if (j == 0) continue;
            lo = p / 10;
            hi = p - 1;
        } else {
            lo = v * p;
            hi = v * p + (p - 1);
        }
        if (neg && hi == 0) continue;   /* no "-0" */
        int64_t a = neg ? -hi : lo, b = neg ? -lo : hi;
        if (a <= n->imax && b >= n->imin) return true;
    }
    return false;
}

static bool int_end_ok(const gnode *n, const gframe *f)
{
    int64_t v = f->neg ? -f->val : f->val;
    return !(f->neg && f->val == 0) && v >= n->imin && v <= n->imax;
}

/* A fraction after integer part ip keeps the value in range: [ip, ip + 1) inside [fmin, fmax]. */
static bool frac_ok(const gnode *n, const gframe *f)
{
    if (!n->bounded) return true;
    double ip = (double)f->val;
    return f->neg ? (f->val > 0 && -(ip + 1) >= n->fmin && -ip <= n->fmax) : (ip >= n->fmin && ip + 1 <= n->fmax);
}

static int number_byte(const gnode *n, gframe *f, uint8_t c)
{
    const bool number = n->kind == G_NUMBER, digit = c >= '0' && c <= '9';
    const int d = c - '0';
    switch (f->phase) {
    case N_START:
        if (c == '-') { f->neg = true; f->phase = N_NEG; return int_viable(n, true, 0, 0) ? R_OK : R_FAIL; }
        /* fall through */
    case N_NEG:
        if (!digit) return R_FAIL;
        if (d == 0) {   /* "-0" only as the start of an unbounded number's "-0.5" or "-0" */
            if (f->neg && !(number && !n->bounded)) return R_FAIL;
            if (!f->neg && !int_viable(n, false, 0, 1)) return R_FAIL;
            f->phase = N_ZERO;
            f->pos = 1;
            return R_OK;
        }
        if (!int_viable(n, f->neg, d, 1)) return R_FAIL;
        f->val = d;
        f->pos = 1;
        f->phase = N_INT;
        return R_OK;
    case N_ZERO:
    case N_INT:
        if (digit && f->phase == N_INT && f->pos < SL_GRAMMAR_INT_DIGITS && int_viable(n, f->neg, f->val * 10 + d, f->pos + 1)) {
            f->val = f->val * 10 + d;
            f->pos++;
            return R_OK;
        }
        if (number && c == '.' && frac_ok(n, f)) { f->phase = N_DOT; f->sel = 0; return R_OK; }
        if (number && !n->bounded && (c == 'e' || c == 'E')) { f->phase = N_E; return R_OK; }
        if (number && !n->bounded) return R_POP;   /* "-0" included */
        return int_end_ok(n, f) ? R_POP : R_FAIL;
    case N_DOT:
    case N_FRAC:
        if (digit && f->sel < SL_GRAMMAR_FRAC_DIGITS) { f->sel++; f->phase = N_FRAC; return R_OK; }
        if (f->phase == N_DOT) return R_FAIL;
        if (!n->bounded && (c == 'e' || c == 'E')) { f->phase = N_E; return R_OK; }
        return R_POP;
    case N_E:
        if (c == '+' || c == '-') { f->phase = N_ESIGN; return R_OK; }
        /* fall through */
    case N_ESIGN:
        if (!digit) return R_FAIL;
        f->phase = N_EXP;
        f->sel = 1;
        return R_OK;
    default:   /* N_EXP */
        if (digit && f->sel < SL_GRAMMAR_EXP_DIGITS) { f->sel++; return R_OK; }
        return R_POP;
    }
}

static bool number_can_end(const gnode *n, const gframe *f)
{
    switch (f->phase) {
    case N_ZERO: case N_INT: return (n->kind == G_NUMBER && !n->bounded) || int_end_ok(n, f);
    case N_FRAC: case N_EXP: return true;
    default: return false;
    }
}

static int literal_byte(const gnode *n, gframe *f, uint8_t c)
{
    uint64_t nm = 0;
    for (int i = 0; i < n->n_lits; i++)
        if ((f->mask >> i & 1) && n->lit_lens[i] > (size_t)f->pos && (uint8_t)n->lits[i][f->pos] == c) nm |= 1ull << i;
    if (nm) { f->mask = nm; f->pos++; return R_OK; }
    for (int i = 0; i < n->n_lits; i++) if ((f->mask >> i & 1) && n->lit_lens[i] == (size_t)f->pos) return R_POP;
    return R_FAIL;
}

static bool literal_can_end(const gnode *n, const gframe *f)
{
    for (int i = 0; i < n->n_lits; i++) if ((f->mask >> i & 1) && n->lit_lens[i] == (size_t)f->pos) return true;
    return false;
}

/* The properties that may come next in an object at index `from`: up to and including the next
 * required one. */
static uint64_t key_candidates(const sl_grammar *g, const gnode *n, int64_t from)
{
    uint64_t m = 0;
    int last = n->next_req[from] < n->n_props ? n->next_req[from] : n->n_props - 1;
    for (int64_t i = from; i <= last; i++)
        if (g->nodes[n->props[i].node].sat) m |= 1ull << i;   /* an optional property no value satisfies: never */
    return m;
}

static int key_byte(const gnode *n, gframe *f, uint8_t c)
{
    uint64_t nm = 0;
    for (int i = 0; i < n->n_props; i++)
        if ((f->mask >> i & 1) && n->props[i].key_len > (size_t)f->pos && (uint8_t)n->props[i].key[f->pos] == c)
            nm |= 1ull << i;
    if (!nm) return R_FAIL;
    f->mask = nm;
    f->pos++;
    for (int i = 0; i < n->n_props; i++)   /* keys carry their closing quote: a complete one is alone */
        if ((nm >> i & 1) && n->props[i].key_len == (size_t)f->pos) {
            f->sel = i;
            f->count = i + 1;
            f->phase = O_COLON;
            f->ws = 0;
        }
    return R_OK;
}

static int object_byte(const sl_grammar *g, const gnode *n, gframe *f, uint8_t c, int *child)
{
    const bool map = n->map >= 0 || n->n_props == 0;
    const bool may_close = map || n->next_req[f->count] == n->n_props;
    switch (f->phase) {
    case O_OPEN:
        if (c != '{') return R_FAIL;
        f->phase = O_FIRST;
        return R_OK;
    case O_FIRST:
    case O_NEXT:
        if (is_ws(c)) return ws_byte(f);
        if (c == '}' && f->phase == O_FIRST) return may_close ? R_DONE : R_FAIL;
        if (c != '"') return R_FAIL;
        if (map) {
            if (n->map >= 0 && !g->nodes[n->map].sat) return R_FAIL;
            f->phase = O_MAPKEY;
            *child = KEY_NODE;
            return R_PUSH;
        }
        if (f->count >= n->n_props || !(f->mask = key_candidates(g, n, f->count))) return R_FAIL;
        f->pos = 1;
        f->phase = O_KEY;
        return R_OK;
    case O_KEY:
        return key_byte(n, f, c);
    case O_COLON:
        if (is_ws(c)) return ws_byte(f);
        if (c != ':') return R_FAIL;
        f->phase = O_VALUE;
        f->ws = 0;
        return R_OK;
    case O_VALUE:
        if (is_ws(c)) return ws_byte(f);
        f->phase = O_INVALUE;
        *child = map ? n->map : n->props[f->sel].node;
        return R_PUSH;
    default:   /* O_AFTER */
        if (is_ws(c)) return ws_byte(f);
        if (c == '}') return may_close ? R_DONE : R_FAIL;
        if (c != ',') return R_FAIL;
        if (map ? n->map >= 0 && !g->nodes[n->map].sat : f->count >= n->n_props || !key_candidates(g, n, f->count))
            return R_FAIL;   /* a comma only where a key can follow */
        f->phase = O_NEXT;
        f->ws = 0;
        return R_OK;
    }
}

static int array_byte(const gnode *n, gframe *f, uint8_t c, int *child)
{
    switch (f->phase) {
    case A_OPEN:
        if (c != '[') return R_FAIL;
        f->phase = A_FIRST;
        return R_OK;
    case A_FIRST:
    case A_NEXT:
        if (is_ws(c)) return ws_byte(f);
        if (c == ']' && f->phase == A_FIRST) return n->min_items == 0 ? R_DONE : R_FAIL;
        if (f->phase == A_FIRST && n->max_items == 0) return R_FAIL;
        f->phase = A_INITEM;
        *child = n->item;
        return R_PUSH;
    default:   /* A_AFTER */
        if (is_ws(c)) return ws_byte(f);
        if (c == ']') return f->count >= n->min_items ? R_DONE : R_FAIL;
        if (c != ',' || (n->max_items >= 0 && f->count >= n->max_items)) return R_FAIL;
        f->phase = A_NEXT;
        f->ws = 0;
        return R_OK;
    }
}

static int frame_byte(const sl_grammar *g, gframe *f, uint8_t c, int *child)
{
    if (f->node == KEY_NODE) return string_byte(NULL, f, c);
    const gnode *n = &g->nodes[f->node];
    switch (n->kind) {
    case G_OBJECT: return object_byte(g, n, f, c, child);
    case G_ARRAY: return array_byte(n, f, c, child);
    case G_STRING: return string_byte(n, f, c);
    case G_LITERAL: return literal_byte(n, f, c);
    default: return number_byte(n, f, c);
    }
}

static bool frame_can_end(const sl_grammar *g, const gframe *f)
{
    if (f->node == KEY_NODE) return false;
    const gnode *n = &g->nodes[f->node];
    if (n->kind == G_LITERAL) return literal_can_end(n, f);
    if (n->kind == G_INTEGER || n->kind == G_NUMBER) return number_can_end(n, f);
    return false;   /* containers and strings end on their closing byte, and are popped then */
}

/* The frame below the popped one has a complete child value. */
static void value_done(const sl_grammar *g, gcfg *k)
{
    if (k->depth == 0) {
        k->seq = g->suffix_len ? SEQ_SUFFIX : SEQ_DONE;
        k->pos = 0;
        return;
    }
    gframe *p = &k->f[k->depth - 1];
    p->ws = 0;
    if (g->nodes[p->node].kind == G_ARRAY) { p->count++; p->phase = A_AFTER; }
    else p->phase = p->phase == O_MAPKEY ? O_COLON : O_AFTER;
}

static void push(const sl_grammar *g, gcfg *k, int node)
{
    gframe *f = &k->f[k->depth++];
    memset(f, 0, sizeof *f);
    f->node = node;
    if (node >= 0 && g->nodes[node].kind == G_LITERAL)
        f->mask = g->nodes[node].n_lits >= 64 ? ~0ull : (1ull << g->nodes[node].n_lits) - 1;
}

static void cfg_copy(gcfg *dst, const gcfg *src)
{
    dst->seq = src->seq;
    dst->pos = src->pos;
    dst->depth = src->depth;
    memcpy(dst->f, src->f, (size_t)src->depth * sizeof *src->f);
}

static bool literal_byte_ok(const char *lit, size_t len, gcfg *k, uint8_t c, int next_seq)
{
    if ((size_t)k->pos >= len || (uint8_t)lit[k->pos] != c) return false;
    if ((size_t)++k->pos == len) { k->seq = (uint8_t)next_seq; k->pos = 0; }
    return true;
}

/* Feed c to parse i of st (after pushing node `pending` when >= 0 or KEY_NODE); an anyOf adds a
 * parse per further alternative.  A parse that cannot take c is marked SEQ_DEAD. */
static void feed(const sl_grammar *g, sl_gstate *st, int i, uint8_t c, int pending, int guard)
{
    gcfg *k = &st->cfg[i];
    for (;;) {
        if (pending != NO_NODE) {
            if (pending >= 0 && g->nodes[pending].kind == G_ANYOF) {
                const gnode *n = &g->nodes[pending];
                if (guard >= ANYOF_GUARD || !n->n_alts) { k->seq = SEQ_DEAD; return; }
                for (int a = 1; a < n->n_alts && st->n < G_MAX_CFG; a++) {
                    int j = st->n++;
                    cfg_copy(&st->cfg[j], k);
                    feed(g, st, j, c, n->alts[a], guard + 1);
                }
                pending = n->alts[0];
                guard++;
                continue;
            }
            if (k->depth >= SL_GRAMMAR_MAX_DEPTH || (pending >= 0 && !g->nodes[pending].sat)) { k->seq = SEQ_DEAD; return; }
            push(g, k, pending);
            pending = NO_NODE;
        }
        switch (k->seq) {
        case SEQ_PREFIX:
            if (!literal_byte_ok(g->prefix, g->prefix_len, k, c, SEQ_VALUE)) k->seq = SEQ_DEAD;
            return;
        case SEQ_SUFFIX:
            if (!literal_byte_ok(g->suffix, g->suffix_len, k, c, SEQ_DONE)) k->seq = SEQ_DEAD;
            return;
        case SEQ_VALUE:
            break;
        default:
            k->seq = SEQ_DEAD;
            return;
        }
        if (k->depth == 0) { pending = g->root; continue; }
        int child = NO_NODE;
        switch (frame_byte(g, &k->f[k->depth - 1], c, &child)) {
        case R_OK: return;
        case R_FAIL: k->seq = SEQ_DEAD; return;
        case R_PUSH: pending = child; continue;
        case R_DONE: k->depth--; value_done(g, k); return;
        default: k->depth--; value_done(g, k); continue;   /* R_POP: the byte goes to the parent */
        }
    }
}

static bool cfg_equal(const gcfg *a, const gcfg *b)
{
    return a->seq == b->seq && a->pos == b->pos && a->depth == b->depth &&
           !memcmp(a->f, b->f, (size_t)a->depth * sizeof *a->f);
}

bool g_state_step(const sl_gstate *s, sl_gstate *s2, uint8_t c)
{
    const sl_grammar *g = s->g;
    s2->g = g;
    s2->n = 0;
    for (int i = 0; i < s->n && s2->n < G_MAX_CFG; i++) {
        int j = s2->n++;
        cfg_copy(&s2->cfg[j], &s->cfg[i]);
        feed(g, s2, j, c, NO_NODE, 0);
    }
    int n = 0;   /* drop dead parses and duplicates */
    for (int i = 0; i < s2->n; i++) {
        if (s2->cfg[i].seq == SEQ_DEAD) continue;
        bool dup = false;
        for (int j = 0; j < n && !dup; j++) dup = cfg_equal(&s2->cfg[j], &s2->cfg[i]);
        if (dup) continue;
        if (n != i) cfg_copy(&s2->cfg[n], &s2->cfg[i]);
        n++;
    }
    s2->n = n;
    return n > 0;
}

void g_state_copy(sl_gstate *dst, const sl_gstate *src)
{
    dst->g = src->g;
    dst->n = src->n;
    for (int i = 0; i < src->n; i++) cfg_copy(&dst->cfg[i], &src->cfg[i]);
}

bool g_state_literal_next(const sl_gstate *s, const char *lit, size_t n)
{
    const sl_grammar *g = s->g;
    for (int i = 0; i < s->n; i++) {
        const gcfg *k = &s->cfg[i];
        const char *l = k->seq == SEQ_PREFIX ? g->prefix : k->seq == SEQ_SUFFIX ? g->suffix : NULL;
        size_t len = k->seq == SEQ_PREFIX ? g->prefix_len : g->suffix_len;
        if (l && n > 0 && len - (size_t)k->pos >= n && !memcmp(l + k->pos, lit, n)) return true;
        /* a top-level number or literal that may end here: the suffix may begin */
        if (k->seq == SEQ_VALUE && k->depth == 1 && frame_can_end(g, &k->f[0]) && g->suffix_len >= n &&
            !memcmp(g->suffix, lit, n))
            return true;
    }
    return false;
}

bool g_state_string_room(const sl_gstate *s, int64_t *room)
{
    int64_t best = -1;
    for (int i = 0; i < s->n; i++) {
        const gcfg *k = &s->cfg[i];
        if (k->seq != SEQ_VALUE || k->depth < 1) return false;
        const gframe *f = &k->f[k->depth - 1];
        if (f->node != KEY_NODE && s->g->nodes[f->node].kind != G_STRING) return false;
        if (f->phase != S_BODY) return false;
        int64_t mx = f->node == KEY_NODE ? -1 : s->g->nodes[f->node].max_len;
        int64_t r = mx < 0 ? INT64_MAX : mx - f->count;
        if (r > best) best = r;
    }
    *room = best;
    return s->n > 0;
}

/* ---- the public state API (grammar.h) ---- */

sl_gstate *sl_gstate_new(const sl_grammar *g)
{
    sl_gstate *s = malloc(sizeof *s);
    if (!s) return NULL;
    s->g = g;
    sl_gstate_reset(s);
    return s;
}

void sl_gstate_free(sl_gstate *s) { free(s); }

void sl_gstate_reset(sl_gstate *s)
{
    s->n = 1;
    s->cfg[0].seq = s->g->prefix_len ? SEQ_PREFIX : SEQ_VALUE;
    s->cfg[0].pos = 0;
    s->cfg[0].depth = 0;
}

void sl_gstate_copy(sl_gstate *dst, const sl_gstate *src) { g_state_copy(dst, src); }

bool sl_gstate_feed(sl_gstate *s, const char *p, size_t n)
{
    if (!n) return true;
    sl_gstate *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    bool ok = a && b;
    if (ok) g_state_copy(a, s);
    for (size_t i = 0; ok && i < n; i++) {
        ok = g_state_step(a, b, (uint8_t)p[i]);
        sl_gstate *t = a; a = b; b = t;
    }
    if (ok) g_state_copy(s, a);
    free(a);
    free(b);
    return ok;
}

bool sl_gstate_complete(const sl_gstate *s)
{
    const sl_grammar *g = s->g;
    for (int i = 0; i < s->n; i++) {
        const gcfg *k = &s->cfg[i];
        if (k->seq == SEQ_DONE) return true;
        if (k->seq == SEQ_VALUE && !g->suffix_len && k->depth == 1 && frame_can_end(g, &k->f[0])) return true;
    }
    return false;
}

bool sl_grammar_accepts(const sl_grammar *g, const char *text, size_t n)
{
    sl_gstate *s = sl_gstate_new(g);
    bool ok = s && sl_gstate_feed(s, text, n) && sl_gstate_complete(s);
    sl_gstate_free(s);
    return ok;
}
