/* runtime/engine/expert_cache.c — see expert_cache.h.  Entries in a doubly linked LRU list; a table
 * from unit (block * expert_count + expert) to entry. */
#include "runtime/engine/expert_cache.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    int unit;              /* -1: free */
    uint64_t filled;       /* bytes copied in while filling */
    uint64_t need;         /* the unit's bytes: whole when filled == need */
    bool whole;
    uint64_t batch;        /* the batch that last claimed it: not evicted during that batch */
    int prev, next;        /* LRU list: head = most recent */
} entry;

struct sl_xcache {
    unsigned char *mem;    /* n entries of entry_bytes */
    entry *e;
    int n, head, tail;
    int *of_unit;          /* (n_units): entry index or -1 */
    int n_units;
    uint64_t *unit_bytes;  /* (n_units) */
    uint32_t *freq;        /* (n_units) LFU: asks for the unit, cached or not, halved at every decay: an
                            * expert asked for often wins its entry back even after it was evicted */
    uint64_t entry_bytes, batch;
    bool lfu;              /* the cache holds less than a pass's experts: least frequently used out */
    int n_layers, k_used;  /* a pass announces once per block, each token taking k_used experts */
    int width;             /* units claimed by the current batch (one block's announcement) */
    int wide, wide_age;    /* the widest batch of about the last two passes; batches since it was seen */
    uint64_t asks, decay_every;
    sl_xcache_stats st;
};

uint64_t sl_xcache_unit_bytes(const sl_model *m)
{
    uint64_t mx = 0;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        uint64_t b = sl_layer_expert_bytes(m, l);
        if (b > mx) mx = b;
    }
    return mx;
}

static void unlink_entry(sl_xcache *c, int i)
{
    entry *x = &c->e[i];
    if (x->prev >= 0) c->e[x->prev].next = x->next; else c->head = x->next;
    if (x->next >= 0) c->e[x->next].prev = x->prev; else c->tail = x->prev;
    x->prev = x->next = -1;
}

static void push_front(sl_xcache *c, int i)
{
    c->e[i].prev = -1;
    c->e[i].next = c->head;
    if (c->head >= 0) c->e[c->head].prev = i;
    c->head = i;
    if (c->tail < 0) c->tail = i;
}

int sl_xcache_create(const sl_model *m, uint64_t bytes, sl_xcache **out)
{
    *out = NULL;
    const uint64_t eb = (sl_xcache_unit_bytes(m) + 63) & ~(uint64_t)63;
    const int units = m->cfg.n_layers * m->cfg.n_expert;
    if (!eb || bytes < eb) return 0;
    int64_t n = (int64_t)(bytes / eb);
    if (n > units) n = units;
    sl_xcache *c = calloc(1, sizeof *c);
    if (!c) return -ENOMEM;
    c->n = (int)n;
    c->n_units = units;
    c->entry_bytes = eb;
    c->e = calloc((size_t)n, sizeof *c->e);
    c->of_unit = malloc((size_t)units * sizeof *c->of_unit);
    c->unit_bytes = calloc((size_t)units, sizeof *c->unit_bytes);
    c->freq = calloc((size_t)units, sizeof *c->freq);
    if (!c->e || !c->of_unit || !c->unit_bytes || !c->freq || posix_memalign((void **)&c->mem, 64, (size_t)(n * (int64_t)eb))) {
        sl_xcache_free(c);
        return -ENOMEM;
    }
    for (int u = 0; u < units; u++) {
        c->of_unit[u] = -1;
        c->unit_bytes[u] = sl_layer_expert_bytes(m, u / m->cfg.n_expert);
    }
    c->n_layers = m->cfg.n_layers;
    c->k_used = c->wide = m->cfg.n_expert_used;
    c->lfu = n < (int64_t)m->cfg.n_layers * m->cfg.n_expert_used;
    c->decay_every = (uint64_t)units;
    c->st.lfu = c->lfu;
    c->head = c->tail = -1;
    for (int i = 0; i < c->n; i++) {
        c->e[i] = (entry){ .unit = -1, .prev = -1, .next = -1 };
        push_front(c, i);
    }
    c->st.entries = c->n;
    c->st.entry_bytes = eb;
    *out = c;
    return 0;
}

void sl_xcache_free(sl_xcache *c)
{
    if (!c) return;
    free(c->mem);
    free(c->e);
    free(c->of_unit);
    free(c->unit_bytes);
    free(c->freq);
    free(c);
}

/* The policy follows the width of the passes: a batch of several tokens (parallel sequences, a
 * speculative verification, a prompt chunk) claims the union of their experts, and a pass claims
 * about blocks x that width.  When the cache holds less than that, LRU evicts every expert before the
 * next pass asks for it again (the loop is larger than the cache) and LFU keeps the often-asked ones;
 * when the wide batches stop for two passes' worth of announcements, LRU comes back. */
void sl_xcache_begin(sl_xcache *c)
{
    c->batch++;
    if (!c->width) return;   /* a hint's announcement (sl_xcache_prefetch) claims nothing */
    if (c->width >= c->wide || ++c->wide_age > 2 * c->n_layers) {
        c->wide = c->width > c->k_used ? c->width : c->k_used;
        c->wide_age = 0;
    }
    c->width = 0;
    c->lfu = (int64_t)c->n < (int64_t)c->n_layers * c->wide;
    c->st.lfu = c->lfu;
}

/* The entry a miss takes: a free one, else the policy's choice among the entries this batch does
 * not hold (the tail-most on ties); -1 when the batch holds them all. */
static int victim(const sl_xcache *c)
{
    int v = -1;
    for (int i = c->tail; i >= 0; i = c->e[i].prev) {
        const entry *x = &c->e[i];
        if (x->unit < 0) return i;
        if (x->batch == c->batch) continue;
        if (!c->lfu) return i;   /* LRU: the least recent one this batch does not hold */
        if (v < 0 || c->freq[x->unit] < c->freq[c->e[v].unit]) v = i;
    }
    return v;
}

int sl_xcache_claim(sl_xcache *c, int unit)
{
    if (unit < 0 || unit >= c->n_units) return SL_XCACHE_BYPASS;
    c->width++;
    /* counted under LRU too: the policy can change with the width of the passes */
    if (++c->asks % c->decay_every == 0)
        for (int u = 0; u < c->n_units; u++) c->freq[u] /= 2;
    c->freq[unit]++;
    int i = c->of_unit[unit];
    if (i >= 0 && c->e[i].whole) {
        c->st.hits++;
        c->e[i].batch = c->batch;
        unlink_entry(c, i);
        push_front(c, i);
        return SL_XCACHE_HIT;
    }
    c->st.misses++;
    if (i < 0) {
        i = victim(c);
        /* none free for this batch, or (LFU) every entry it could take holds an expert asked for more
         * often than this one: read it through and keep them */
        if (i < 0 || (c->lfu && c->e[i].unit >= 0 && c->freq[c->e[i].unit] > c->freq[unit])) {
            c->st.bypass++;
            return SL_XCACHE_BYPASS;
        }
        if (c->e[i].unit >= 0) {
            c->of_unit[c->e[i].unit] = -1;
            c->st.evictions++;
        }
        c->of_unit[unit] = i;
    }
    c->e[i] = (entry){ .unit = unit, .need = c->unit_bytes[unit], .batch = c->batch, .prev = c->e[i].prev,
                       .next = c->e[i].next };
    unlink_entry(c, i);
    push_front(c, i);
    return SL_XCACHE_FILL;
}

int sl_xcache_prefetch(sl_xcache *c, int unit)
{
    if (unit < 0 || unit >= c->n_units || c->lfu) return SL_XCACHE_BYPASS;
    int i = c->of_unit[unit];
    if (i < 0) {
        if ((i = victim(c)) < 0) return SL_XCACHE_BYPASS;
        if (c->e[i].unit >= 0) {
            c->of_unit[c->e[i].unit] = -1;
            c->st.evictions++;
        }
        c->of_unit[unit] = i;
    }
    const bool whole = c->e[i].unit == unit && c->e[i].whole;
    if (!whole)
        c->e[i] = (entry){ .unit = unit, .need = c->unit_bytes[unit], .prev = c->e[i].prev, .next = c->e[i].next };
    c->e[i].batch = c->batch;   /* held until the next announcement, like the batch's own */
    unlink_entry(c, i);
    push_front(c, i);
    return whole ? SL_XCACHE_HIT : SL_XCACHE_FILL;
}

const void *sl_xcache_data(const sl_xcache *c, const sl_weight *w)
{
    if (!c || !w->routed || w->unit < 0 || w->unit >= c->n_units) return NULL;
    int i = c->of_unit[w->unit];
    return i >= 0 && c->e[i].whole ? c->mem + (size_t)i * c->entry_bytes + w->unit_off : NULL;
}

void sl_xcache_fill(sl_xcache *c, const sl_weight *w, int64_t row0, int64_t nrows, const void *data)
{
    if (!c || !w->routed || w->unit < 0 || w->unit >= c->n_units) return;
    int i = c->of_unit[w->unit];
    if (i < 0 || c->e[i].whole) return;
    const uint64_t off = w->unit_off + (uint64_t)row0 * w->row_bytes, len = (uint64_t)nrows * w->row_bytes;
    memcpy(c->mem + (size_t)i * c->entry_bytes + off, data, len);
    c->e[i].filled += len;
    if (c->e[i].filled == c->e[i].need) {
        c->e[i].whole = true;
        c->st.fills++;
    }
}

void sl_xcache_drop(sl_xcache *c, int unit)
{
    if (!c || unit < 0 || unit >= c->n_units || c->of_unit[unit] < 0) return;
    entry *x = &c->e[c->of_unit[unit]];
    c->of_unit[unit] = -1;
    x->unit = -1;
    x->filled = 0;
    x->whole = false;
}

void sl_xcache_abort(sl_xcache *c)
{
    if (!c) return;
    for (int i = 0; i < c->n; i++)
        if (c->e[i].unit >= 0 && !c->e[i].whole) {
            c->of_unit[c->e[i].unit] = -1;
            c->e[i].unit = -1;
            c->e[i].filled = 0;
        }
}

void sl_xcache_get_stats(const sl_xcache *c, sl_xcache_stats *st)
{
    if (c) *st = c->st;
    else memset(st, 0, sizeof *st);
}

size_t sl_xcache_mem_bytes(const sl_xcache *c)
{
    return c ? (size_t)c->n * (c->entry_bytes + sizeof(entry)) + (size_t)c->n_units * (sizeof(int) + sizeof(uint64_t)) : 0;
}
