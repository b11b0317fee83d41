/* runtime/text/tokenizer_table.c — the vocabulary's hash tables: strings (token texts and merge
 * halves) -> id, and merge pairs (left id, right id) -> rank; plus the growable vectors and the
 * merge-candidate heap the tokenizers use.  Layout notes are in tokenizer_internal.h. */
#include "loader/errmsg.h"
#include "runtime/text/tokenizer_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Errors quote bytes from the file: sl_errf (loader/errmsg.c) escapes control characters. */
#define fail sl_errf

int sl_ivec_push(sl_ivec *a, int32_t x)
{
    if (a->n == a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 64;
        int32_t *p = realloc(a->v, nc * sizeof *p);
        if (!p) return -ENOMEM;
        a->v = p;
        a->cap = nc;
    }
    a->v[a->n++] = x;
    return 0;
}

int sl_zvec_push(sl_zvec *a, size_t x)
{
    if (a->n == a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 64;
        size_t *p = realloc(a->v, nc * sizeof *p);
        if (!p) return -ENOMEM;
        a->v = p;
        a->cap = nc;
    }
    a->v[a->n++] = x;
    return 0;
}

int sl_bytes_append(sl_bytes *b, const void *s, size_t n)
{
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n) nc *= 2;
        char *p = realloc(b->p, nc);
        if (!p) return -ENOMEM;
        b->p = p;
        b->cap = nc;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    return 0;
}

static inline bool before(const sl_bigram *a, const sl_bigram *b)
{
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

int sl_heap_push(sl_heap *h, sl_bigram x)
{
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 64;
        sl_bigram *p = realloc(h->a, nc * sizeof *p);
        if (!p) return -ENOMEM;
        h->a = p;
        h->cap = nc;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!before(&x, &h->a[up])) break;
        h->a[i] = h->a[up];
        i = up;
    }
    h->a[i] = x;
    return 0;
}

sl_bigram sl_heap_pop(sl_heap *h)
{
    sl_bigram top = h->a[0], x = h->a[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t k = 2 * i + 1;
        if (k >= n) break;
        if (k + 1 < n && before(&h->a[k + 1], &h->a[k])) k++;
        if (!before(&h->a[k], &x)) break;
        h->a[i] = h->a[k];
        i = k;
    }
    if (n) h->a[i] = x;
    return top;
}

/* ---------------------------------------------------------------- string table */

/* FNV-1a, incremental: hash(x + y) = sl_hash_more(hash(x), y). */
uint32_t sl_hash_more(uint32_t h, const void *s, size_t n)
{
    const unsigned char *p = s;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

uint32_t sl_vocab_hash(const void *s, size_t n)
{
    return sl_hash_more(2166136261u, s, n);
}

/* Id of the string s1 + s2 (s2 may be empty) with hash h, or -1.  The slot repeats the string's
 * arena offset and length, so a probe touches the slot and, on a hash match, the text only. */
static int32_t find2(const sl_vocab *v, const char *s1, size_t n1, const char *s2, size_t n2, uint32_t h)
{
    for (uint32_t i = sl_slot_of(h, v->hmask);; i = (i + 1) & v->hmask) {
        const sl_hslot *sl = &v->hslot[i];
        if (sl->id < 0)
            return -1;
        if (sl->hash == h && sl->len == n1 + n2 && memcmp(v->arena + sl->off, s1, n1) == 0 &&
            (n2 == 0 || memcmp(v->arena + sl->off + n1, s2, n2) == 0))
            return sl->id;
    }
}

int32_t sl_vocab_find_h(const sl_vocab *v, const char *s, size_t n, uint32_t h)
{
    return find2(v, s, n, NULL, 0, h);
}

int32_t sl_vocab_find(const sl_vocab *v, const char *s, size_t n)
{
    return find2(v, s, n, NULL, 0, sl_vocab_hash(s, n));
}

/* Insert string id (its text already in the arena) with no duplicate check. */
static void table_put(sl_hslot *slot, uint32_t mask, int32_t id, const sl_vstr *st, uint32_t h)
{
    uint32_t i = sl_slot_of(h, mask);
    while (slot[i].id >= 0)
        i = (i + 1) & mask;
    slot[i] = (sl_hslot){ .id = id, .hash = h, .off = st->off, .len = st->len };
}

/* (Re)size the string table to hold at least `want` entries at load <= 3/4 (linear probing stays
 * short at that load; a lower one would double the table for Llama 3's 128k tokens). */
int sl_table_resize(sl_vocab *v, size_t want)
{
    size_t cap = 64;
    while (cap < want + want / 3) cap *= 2;
    if (cap > (1u << 30)) return -ENOMEM;
    sl_hslot *slot = malloc(cap * sizeof *slot);
    if (!slot) return -ENOMEM;
    for (size_t i = 0; i < cap; i++) slot[i].id = -1;
    for (int32_t id = 0; id < v->n_strs; id++) {
        const sl_vstr *st = &v->strs[id];
        table_put(slot, (uint32_t)cap - 1, id, st, sl_vocab_hash(v->arena + st->off, st->len));
    }
    if (v->hslot) v->mem -= (size_t)(v->hmask + 1) * sizeof *slot;
    free(v->hslot);
    v->hslot = slot;
    v->hmask = (uint32_t)cap - 1;
    v->mem += cap * sizeof *slot;
    return 0;
}

/* Append a new string (not yet present) with hash h; returns its id, or -ENOMEM / -E2BIG. */
static int32_t str_add(sl_vocab *v, const char *s, size_t n, uint32_t h, size_t *strs_cap)
{
    if (v->arena_len + n > UINT32_MAX || v->n_strs == INT32_MAX)
        return -E2BIG;
    if (v->arena_len + n > v->arena_cap) {
        size_t nc = v->arena_cap ? v->arena_cap : 4096;
        while (nc < v->arena_len + n) nc *= 2;
        char *p = realloc(v->arena, nc);
        if (!p) return -ENOMEM;
        v->mem += nc - v->arena_cap;
        v->arena = p;
        v->arena_cap = nc;
    }
    if ((size_t)v->n_strs == *strs_cap) {
        size_t nc = *strs_cap ? *strs_cap * 2 : 1024;
        sl_vstr *p = realloc(v->strs, nc * sizeof *p);
        if (!p) return -ENOMEM;
        v->mem += (nc - *strs_cap) * sizeof *p;
        v->strs = p;
        *strs_cap = nc;
    }
    if (4 * ((size_t)v->n_strs + 1) > 3 * ((size_t)v->hmask + 1)) {
        int rc = sl_table_resize(v, 2 * ((size_t)v->n_strs + 1));
        if (rc) return rc;
    }
    int32_t id = v->n_strs++;
    memcpy(v->arena + v->arena_len, s, n);
    v->strs[id] = (sl_vstr){ .off = (uint32_t)v->arena_len, .len = (uint32_t)n, .score = 0.0f, .attr = 0 };
    v->arena_len += n;
    table_put(v->hslot, v->hmask, id, &v->strs[id], h);
    return id;
}

/* Id of string s, adding it as an extra if absent (used for merge halves).  id or -errno. */
static int32_t str_intern(sl_vocab *v, const char *s, size_t n, uint32_t h, size_t *strs_cap)
{
    int32_t id = find2(v, s, n, NULL, 0, h);
    return id >= 0 ? id : str_add(v, s, n, h, strs_cap);
}

/* ---------------------------------------------------------------- merges */

/* Slot of a merge pair: splitmix64's finalizer over both ids. */
static inline uint32_t pair_slot(int32_t a, int32_t b, uint32_t mask)
{
    uint64_t x = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    x ^= x >> 30; x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27; x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return (uint32_t)x & mask;
}

int32_t sl_merge_find(const sl_vocab *v, int32_t left, int32_t right, int32_t *result)
{
    if (!v->mslot || left < 0 || right < 0)
        return -1;
    for (uint32_t i = pair_slot(left, right, v->mmask);; i = (i + 1) & v->mmask) {
        const sl_mslot *m = &v->mslot[i];
        if (m->rank < 0)
            return -1;
        if (m->left == left && m->right == right) {
            *result = m->result;
            return m->rank;
        }
    }
}

/* Read tokenizer.ggml.merges ("left right" per rank, split at the first space after the first byte
 * as llama.cpp does).  Lines without such a space, or with an empty half, can never match a symbol
 * pair, so they keep their rank but get no table entry; a repeated pair keeps its first rank.
 * Merges go in batches: hashes are computed and table slots prefetched for a whole batch before
 * any lookup, which hides most of the cache misses of ~1M random probes (Llama 3). */
int sl_bpe_load_merges(sl_vocab *v, const sl_gguf *g, char *err, size_t errlen)
{
    int et = -1;
    uint64_t n = 0;
    if (!sl_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &n))
        return fail(err, errlen, -EINVAL, "vocab: gpt2 tokenizer without tokenizer.ggml.merges");
    if (et != SL_GGUF_STRING)
        return fail(err, errlen, -EINVAL, "vocab: tokenizer.ggml.merges is not a string array");
    if (n > (uint64_t)INT32_MAX / 2)
        return fail(err, errlen, -EINVAL, "vocab: %llu merges is too many", (unsigned long long)n);
    int64_t kv = sl_gguf_arr_kv(g, "tokenizer.ggml.merges");
    size_t strs_cap = (size_t)v->n_strs;   /* strs was allocated exactly for the tokens */

    v->n_merges = (int32_t)n;
    size_t cap = 64;
    while (cap < n + n / 3) cap *= 2;       /* load <= 3/4 */
    v->mslot = malloc(cap * sizeof *v->mslot);
    if (!v->mslot)
        return fail(err, errlen, -ENOMEM, "vocab: out of memory for %llu merges", (unsigned long long)n);
    v->mmask = (uint32_t)cap - 1;
    for (size_t i = 0; i < cap; i++) v->mslot[i].rank = -1;
    v->mem += cap * sizeof *v->mslot;

    enum { BATCH = 32 };
    struct { const char *l, *r; size_t ll, rl; uint32_t hl, hr, hc; int32_t a, b; } q[BATCH];
    int rc = 0;
    for (uint64_t r0 = 0; r0 < n && rc == 0; r0 += BATCH) {
        int k = n - r0 < BATCH ? (int)(n - r0) : BATCH;
        for (int j = 0; j < k; j++) {
            sl_str s = sl_gguf_arr_str(g, kv, r0 + (uint64_t)j);
            const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
            q[j].l = NULL;
            if (!sp || (uint64_t)(sp - s.ptr) + 1 >= s.len) continue;
            q[j].l = s.ptr;
            q[j].ll = (size_t)(sp - s.ptr);
            q[j].r = sp + 1;
            q[j].rl = s.len - q[j].ll - 1;
            q[j].hl = sl_vocab_hash(q[j].l, q[j].ll);
            q[j].hr = sl_vocab_hash(q[j].r, q[j].rl);
            q[j].hc = sl_hash_more(q[j].hl, q[j].r, q[j].rl);
            __builtin_prefetch(&v->hslot[sl_slot_of(q[j].hl, v->hmask)]);
            __builtin_prefetch(&v->hslot[sl_slot_of(q[j].hr, v->hmask)]);
            __builtin_prefetch(&v->hslot[sl_slot_of(q[j].hc, v->hmask)]);
        }
        /* Second stage: the slots are (mostly) in cache now; prefetch the texts they point at,
         * which the comparisons below read. */
        for (int j = 0; j < k; j++) {
            if (!q[j].l) continue;
            uint32_t hs[3] = { q[j].hl, q[j].hr, q[j].hc };
            for (int t = 0; t < 3; t++) {
                const sl_hslot *o = &v->hslot[sl_slot_of(hs[t], v->hmask)];
                if (o->id >= 0 && o->hash == hs[t]) __builtin_prefetch(v->arena + o->off);
            }
        }
        /* Intern both halves, then prefetch the pair's merge slot. */
        for (int j = 0; j < k && rc == 0; j++) {
            if (!q[j].l) continue;
            q[j].a = str_intern(v, q[j].l, q[j].ll, q[j].hl, &strs_cap);
            q[j].b = q[j].a >= 0 ? str_intern(v, q[j].r, q[j].rl, q[j].hr, &strs_cap) : q[j].a;
            if (q[j].a < 0 || q[j].b < 0) { rc = q[j].a < 0 ? q[j].a : q[j].b; break; }
            __builtin_prefetch(&v->mslot[pair_slot(q[j].a, q[j].b, v->mmask)]);
        }
        /* Insert; an equal pair already present keeps its (earlier) rank. */
        for (int j = 0; j < k && rc == 0; j++) {
            if (!q[j].l) continue;
            int32_t a = q[j].a, b = q[j].b;
            uint32_t i = pair_slot(a, b, v->mmask);
            while (v->mslot[i].rank >= 0 && !(v->mslot[i].left == a && v->mslot[i].right == b))
                i = (i + 1) & v->mmask;
            if (v->mslot[i].rank >= 0) continue;
            v->mslot[i] = (sl_mslot){ .left = a, .right = b, .rank = (int32_t)(r0 + (uint64_t)j),
                                      .result = find2(v, q[j].l, q[j].ll, q[j].r, q[j].rl, q[j].hc) };
        }
    }
    if (rc)
        return fail(err, errlen, rc, "vocab: cannot build merge table (%s)", strerror(-rc));
    /* A merge whose result was only added later as an extra (a half of a later merge) must see it. */
    for (size_t i = 0; i < cap; i++) {
        sl_mslot *m = &v->mslot[i];
        if (m->rank < 0 || m->result >= 0) continue;
        const sl_vstr *a = &v->strs[m->left], *b = &v->strs[m->right];
        uint32_t h = sl_hash_more(sl_vocab_hash(v->arena + a->off, a->len), v->arena + b->off, b->len);
        m->result = find2(v, v->arena + a->off, a->len, v->arena + b->off, b->len, h);
    }
    return 0;
}
