/* runtime/engine/stream.c — schedule of weight pieces, prefetch ring, streamed matmul and embedding rows. */
#include "runtime/engine/stream.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/ops.h"
#include "kernels/types.h"
#include "kernels/clock.h"
#include "runtime/engine/expert_cache.h"

typedef struct piece {
    const sl_weight *w;
    int64_t row0, nrows;
    uint64_t offset, len;
} piece;

/* Pieces requested through one reader, consumed in order.  The dense queue is the ring schedule of
 * every pass (position k is piece k % n: read-ahead wraps from the LM head to block 0); the expert
 * queue holds the pieces of the experts the forward pass announced (want), in its order, and is
 * refilled at each announcement. */
typedef struct queue {
    sl_io  *io;
    piece  *p;
    int64_t n, cap;
    bool    ring;          /* wraps (dense schedule); else ends at n (announced experts) */
    int64_t next_use;      /* position of the piece the forward pass consumes next */
    int64_t next_req;      /* position of the next piece to request (unbounded counter for the ring) */
    int     depth;         /* pieces requested ahead, including the one being consumed */
    int     slot[SL_STREAM_RING];   /* slot of position k is slot[k % SL_STREAM_RING] */
    uint64_t max_piece;
} queue;

struct sl_stream {
    sl_model *m;
    sl_pool *pool;
    queue dense;           /* the schedule: streamed dense matrices in forward order, then the LM head */
    queue experts;         /* routed experts, on demand (NULL io: every routed weight is resident) */
    sl_xcache *cache;      /* routed experts kept between passes (NULL: none) */
    bool prefetch;         /* act on hints (needs a cache to read into) */
    bool hinted;           /* the expert queue holds a hint's pieces, not an announcement's */
    int *hint_units;       /* (n_expert) units the last hint read, for the accuracy counters */
    int n_hint_units;
    uint64_t chunk_bytes, pass_bytes;
    void   *rowbuf;        /* one embedding row in its file encoding */
    sl_stream_stats st;
    sl_wsource src;
    char err[320];
};

static const piece *queue_at(const queue *q, int64_t k) { return &q->p[q->ring ? k % q->n : k]; }

/* Append the pieces of w: row-chunks of at most max_rows rows. */
static int add_pieces(queue *q, const sl_weight *w, int64_t max_rows)
{
    if (max_rows < 1) max_rows = 1;
    for (int64_t r = 0; r < w->rows; r += max_rows) {
        if (q->n == q->cap) {
            int64_t nc = q->cap ? q->cap * 2 : 256;
            piece *np = realloc(q->p, (size_t)nc * sizeof *np);
            if (!np) return -ENOMEM;
            q->p = np;
            q->cap = nc;
        }
        piece *p = &q->p[q->n++];
        p->w = w;
        p->row0 = r;
        p->nrows = w->rows - r < max_rows ? w->rows - r : max_rows;
        p->offset = w->offset + (uint64_t)r * w->row_bytes;
        p->len = (uint64_t)p->nrows * w->row_bytes;
        if (p->len > q->max_piece) q->max_piece = p->len;
    }
    return 0;
}

static int64_t rows_for(const sl_weight *w, uint64_t chunk_bytes)
{
    if (!chunk_bytes) return w->rows;
    int64_t r = (int64_t)(chunk_bytes / w->row_bytes);
    return r < 1 ? 1 : r;
}

/* Request pieces until `depth` are outstanding ahead of (and including) next_use. */
static int top_up(sl_stream *s, queue *q)
{
    while (q->next_req - q->next_use < q->depth && (q->ring || q->next_req < q->n)) {
        const piece *p = queue_at(q, q->next_req);
        int slot = sl_io_request(q->io, p->offset, (size_t)p->len);
        if (slot == -EBUSY) break;      /* all slots held: the consumer must release first */
        if (slot < 0) {
            snprintf(s->err, sizeof s->err, "stream: cannot request %s rows %" PRId64 "..%" PRId64 ": %s",
                     p->w->name, p->row0, p->row0 + p->nrows, sl_io_errmsg(q->io));
            return slot;
        }
        q->slot[q->next_req % SL_STREAM_RING] = slot;
        q->next_req++;
    }
    return 0;
}

static void queue_reset(queue *q)
{
    for (int64_t k = q->next_use; k < q->next_req; k++) sl_io_release(q->io, q->slot[k % SL_STREAM_RING]);
    q->next_use = q->next_req = 0;
    if (!q->ring) q->n = 0;
}

void sl_stream_reset(sl_stream *s)
{
    queue_reset(&s->dense);
    if (s->experts.io) queue_reset(&s->experts);
    sl_xcache_abort(s->cache);   /* entries that were filling would never complete */
    s->hinted = false;
    s->n_hint_units = 0;
}

/* Take the next piece of queue q, which must belong to w. */
static int acquire(sl_stream *s, queue *q, const sl_weight *w, const piece **pp, const void **data)
{
    if (q->n == 0 || (!q->ring && q->next_use >= q->n)) {
        snprintf(s->err, sizeof s->err, w->routed ? "stream: %s was not announced before its product (want)"
                                                  : "stream: %s is not resident and not in the schedule", w->name);
        sl_stream_reset(s);
        return -EPROTO;
    }
    const piece *p = queue_at(q, q->next_use);
    if (p->w != w) {
        snprintf(s->err, sizeof s->err, "stream: %s out of step: forward asks for %s, next piece is %s",
                 q->ring ? "schedule" : "expert reads", w->name, p->w->name);
        sl_stream_reset(s);
        return -EPROTO;
    }
    int rc = top_up(s, q);
    if (rc) { sl_stream_reset(s); return rc; }
    uint64_t t0 = sl_now_ns();
    rc = sl_io_wait(q->io, q->slot[q->next_use % SL_STREAM_RING], data);
    s->st.wait_ns += sl_now_ns() - t0;
    if (rc) {
        snprintf(s->err, sizeof s->err, "reading %s rows %" PRId64 "..%" PRId64 ": %s", w->name, p->row0,
                 p->row0 + p->nrows, sl_io_errmsg(q->io));
        sl_stream_reset(s);
        return rc;
    }
    *pp = p;
    return 0;
}

static void release(sl_stream *s, queue *q)
{
    sl_io_release(q->io, q->slot[q->next_use % SL_STREAM_RING]);
    q->next_use++;   /* ring counters grow without bound: schedule index k % n, slot k % SL_STREAM_RING */
    top_up(s, q);    /* an error here resurfaces at the next acquire */
}

static int stream_matmul(void *self, const sl_weight *w, const float *x, int nb, float *out, int64_t out_stride)
{
    sl_stream *s = self;
    const void *cached = sl_xcache_data(s->cache, w);
    if (cached) {   /* a hit: the unit's bytes are in memory, computed as a resident weight is */
        uint64_t t0 = sl_now_ns();
        sl_matmul(s->pool, w->type, cached, w->rows, w->cols, w->row_bytes, x, nb, out, out_stride);
        s->st.compute_ns += sl_now_ns() - t0;
        return 0;
    }
    queue *q = w->routed && s->experts.io ? &s->experts : &s->dense;
    int64_t done = 0;
    /* quantize the activations once for the whole matrix, not once per piece */
    sl_mm_input in;
    sl_mm_prepare(s->pool, w->type, x, nb, w->cols, &in);
    while (done < w->rows) {
        const piece *p;
        const void *data;
        int rc = acquire(s, q, w, &p, &data);
        if (rc) return rc;
        if (p->row0 != done) {
            snprintf(s->err, sizeof s->err, "stream: %s piece starts at row %" PRId64 ", expected %" PRId64, w->name, p->row0, done);
            sl_stream_reset(s);
            return -EPROTO;
        }
        uint64_t t0 = sl_now_ns();
        sl_matmul_prepared(s->pool, &in, data, p->nrows, w->row_bytes, out + p->row0, out_stride);
        s->st.compute_ns += sl_now_ns() - t0;
        /* mmap: the file may have shrunk under the piece while it was computed with (see sl_io_check) */
        if ((rc = sl_io_check(q->io, q->slot[q->next_use % SL_STREAM_RING]))) {
            snprintf(s->err, sizeof s->err, "reading %s rows %" PRId64 "..%" PRId64 ": %s", w->name, p->row0,
                     p->row0 + p->nrows, sl_io_errmsg(q->io));
            sl_stream_reset(s);
            return rc;
        }
        s->st.pieces++;
        s->st.bytes += p->len;
        if (w->routed) {
            s->st.expert_pieces++;
            s->st.expert_bytes += p->len;
            sl_xcache_fill(s->cache, w, p->row0, p->nrows, data);   /* before release: data dies there */
        }
        done += p->nrows;
        release(s, q);
    }
    return 0;
}

static bool unit_listed(sl_weight *const *ws, int n, int unit)
{
    for (int i = 0; i < n; i++)
        if (ws[i]->unit == unit) return true;
    return false;
}

/* Before an announcement (ws, n): the last hint's reads of experts it takes are waited for and
 * copied into their entries; the others are let go (wasted: a read in flight is cancelled or
 * waited out by the reader).  A failed read leaves its entry
 * partial, and partial entries are dropped: the announcement reads those experts itself.  Counts
 * the hint's accuracy. */
static void settle_hint(sl_stream *s, sl_weight *const *ws, int n)
{
    queue *q = &s->experts;
    int failed_unit = -1;
    for (; q->next_use < q->next_req; q->next_use++) {
        const piece *p = queue_at(q, q->next_use);
        const int slot = q->slot[q->next_use % SL_STREAM_RING];
        const void *data;
        const bool taken = unit_listed(ws, n, p->w->unit);
        s->st.prefetch_bytes += p->len;
        if (!taken) s->st.prefetch_wasted += p->len;
        if (taken && p->w->unit != failed_unit) {
            if (sl_io_wait(q->io, slot, &data) == 0) {
                sl_xcache_fill(s->cache, p->w, p->row0, p->nrows, data);
                if (sl_io_check(q->io, slot)) {   /* mmap: the file shrank under the copy */
                    sl_xcache_drop(s->cache, p->w->unit);
                    failed_unit = p->w->unit;
                    s->st.prefetch_failed++;
                }
            } else {
                failed_unit = p->w->unit;
                s->st.prefetch_failed++;
            }
        }
        sl_io_release(q->io, slot);
    }
    for (int i = 0; i < s->n_hint_units; i++)
        if (unit_listed(ws, n, s->hint_units[i])) s->st.prefetch_used++;
    sl_xcache_abort(s->cache);   /* what the hint did not finish */
    queue_reset(q);
    s->hinted = false;
    s->n_hint_units = 0;
}

/* Contract (forward.h sl_wsource.hint): with a cache and prefetch on, the expert queue becomes the
 * pieces of the hinted experts the cache gives an entry, requested at once; the reader is idle
 * (every announced piece was consumed) or the hint is ignored.  Nothing here fails the pass: a
 * request the reader refuses only ends the hint early. */
static int stream_hint(void *self, sl_weight *const *ws, int n)
{
    sl_stream *s = self;
    queue *q = &s->experts;
    if (!q->io || !s->cache || !s->prefetch || q->next_use < q->n) return 0;
    if (s->hinted) settle_hint(s, NULL, 0);
    queue_reset(q);
    sl_xcache_begin(s->cache);   /* the block just computed no longer holds its entries */
    int claim = SL_XCACHE_BYPASS, unit = -1;
    for (int i = 0; i < n; i++) {
        if (ws[i]->data) continue;
        if (ws[i]->unit != unit) {
            unit = ws[i]->unit;
            claim = sl_xcache_prefetch(s->cache, unit);
            if (claim == SL_XCACHE_FILL) {
                s->hint_units[s->n_hint_units++] = unit;
                s->st.prefetch_units++;
            }
        }
        if (claim != SL_XCACHE_FILL) continue;
        if (add_pieces(q, ws[i], rows_for(ws[i], s->chunk_bytes))) break;   /* out of memory: a shorter hint */
    }
    s->hinted = true;
    if (top_up(s, q)) {   /* not the pass's error: what was requested stays, the rest is read when wanted */
        s->err[0] = 0;
        s->st.prefetch_failed++;
    }
    return 0;
}

/* Contract (forward.h sl_wsource.want): the expert queue becomes the pieces of the listed weights
 * that stream, and the first `depth` of them are requested at once. */
static int stream_want(void *self, sl_weight *const *ws, int n)
{
    sl_stream *s = self;
    queue *q = &s->experts;
    if (!q->io) return 0;   /* every routed weight is resident */
    if (s->hinted) settle_hint(s, ws, n);
    if (q->next_use < q->n) {
        snprintf(s->err, sizeof s->err, "stream: new experts announced while %" PRId64 " announced pieces are unread "
                 "(next: %s)", q->n - q->next_use, queue_at(q, q->next_use)->w->name);
        sl_stream_reset(s);
        return -EPROTO;
    }
    queue_reset(q);
    if (s->cache) sl_xcache_begin(s->cache);
    int claim = SL_XCACHE_BYPASS, unit = -1;
    for (int i = 0; i < n; i++) {
        if (ws[i]->data) continue;
        if (s->cache && ws[i]->unit != unit) {   /* an expert's matrices come together: one claim */
            unit = ws[i]->unit;
            claim = sl_xcache_claim(s->cache, unit);
        }
        if (s->cache && claim == SL_XCACHE_HIT) continue;
        int rc = add_pieces(q, ws[i], rows_for(ws[i], s->chunk_bytes));
        if (rc) { queue_reset(q); return rc; }
    }
    s->st.expert_wants++;
    int rc = top_up(s, q);
    if (rc) sl_stream_reset(s);
    return rc;
}

static int stream_row(void *self, const sl_weight *w, int64_t row, float *out)
{
    sl_stream *s = self;
    int rc = sl_io_read(s->dense.io, w->offset + (uint64_t)row * w->row_bytes, w->row_bytes, s->rowbuf);
    if (rc) {
        snprintf(s->err, sizeof s->err, "reading %s row %" PRId64 ": %s", w->name, row, sl_io_errmsg(s->dense.io));
        return rc;
    }
    sl_type_get(w->type)->dequant(s->rowbuf, out, w->cols);
    s->st.embd_rows++;
    return 0;
}

static const char *stream_errmsg(void *self) { return ((sl_stream *)self)->err; }
static void stream_reset(void *self) { sl_stream_reset(self); }

/* Open queue q's reader for `slots` pieces in flight or held. */
static int queue_open(const sl_model *m, queue *q, const sl_stream_opts *o, int slots, char *err, size_t errlen)
{
    q->depth = slots;
    size_t chunk = (size_t)sl_stream_read_chunk(q->max_piece);
    sl_io_opts io = { .backend = o->backend, .slots = slots, .max_piece = q->max_piece ? q->max_piece : 4096,
                      .no_direct = o->no_direct, .chunk = chunk };
    return sl_io_open(m->path, &io, &q->io, err, errlen);
}

static void queues_free(sl_stream *s)
{
    sl_io_close(s->dense.io);
    sl_io_close(s->experts.io);
    sl_xcache_free(s->cache);
    free(s->dense.p);
    free(s->experts.p);
    free(s->hint_units);
    free(s->rowbuf);
    free(s);
}

/* The routed experts that stream: their largest piece sizes the expert reader (0: none streams). */
static void scan_experts(sl_stream *s, const sl_model *m)
{
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const sl_layer *L = &m->layers[l];
        if (!L->moe) continue;
        for (int i = 0; i < m->cfg.n_expert * SL_EXPERT_MATS; i++) {
            const sl_weight *w = &L->experts[i];
            if (w->data) continue;
            uint64_t len = (uint64_t)rows_for(w, s->chunk_bytes) * w->row_bytes;
            if (len > w->nbytes) len = w->nbytes;
            if (len > s->experts.max_piece) s->experts.max_piece = len;
        }
    }
}

int sl_stream_create(sl_model *m, sl_pool *pool, const sl_stream_opts *o, sl_stream **out, char *err, size_t errlen)
{
    sl_stream *s = calloc(1, sizeof *s);
    if (!s) return -ENOMEM;
    s->m = m;
    s->pool = pool;
    s->chunk_bytes = o->chunk_bytes;
    s->dense.ring = true;
    int rc = 0;
    for (int l = 0; l < m->cfg.n_layers && !rc; l++) {
        sl_weight *w[SL_BLOCK_MATS];
        for (int i = 0, n = sl_layer_weights(&m->layers[l], w); i < n && !rc; i++)
            if (!w[i]->data) rc = add_pieces(&s->dense, w[i], rows_for(w[i], o->chunk_bytes));
    }
    if (!rc && !m->output.data)
        rc = add_pieces(&s->dense, &m->output, o->lm_head_rows > 0 ? o->lm_head_rows : 1024);
    for (int64_t k = 0; k < s->dense.n; k++) s->pass_bytes += s->dense.p[k].len;
    s->rowbuf = malloc(m->tok_embd.row_bytes);
    if (rc || !s->rowbuf) { queues_free(s); return rc ? rc : -ENOMEM; }
    int depth = o->prefetch < 1 ? 1 : o->prefetch + 1;
    if (depth > SL_IO_MAX_SLOTS) depth = SL_IO_MAX_SLOTS;
    if (s->dense.n && depth > s->dense.n) depth = (int)s->dense.n;
    rc = queue_open(m, &s->dense, o, depth, err, errlen);
    if (!rc) scan_experts(s, m);
    if (!rc && s->experts.max_piece) rc = queue_open(m, &s->experts, o, sl_stream_expert_slots(&m->cfg), err, errlen);
    if (!rc && s->experts.max_piece && o->expert_cache_bytes && (rc = sl_xcache_create(m, o->expert_cache_bytes, &s->cache)))
        snprintf(err, errlen, "stream: cannot allocate %llu MiB for the expert cache",
                 (unsigned long long)(o->expert_cache_bytes >> 20));
    s->prefetch = o->expert_prefetch && s->cache;
    if (!rc && s->prefetch && !(s->hint_units = malloc((size_t)m->cfg.n_expert * sizeof *s->hint_units))) rc = -ENOMEM;
    if (rc) { queues_free(s); return rc; }
    s->src = (sl_wsource){ s, stream_matmul, stream_row, stream_errmsg, stream_reset, stream_want,
                           s->prefetch ? stream_hint : NULL };
    *out = s;
    return 0;
}

void sl_stream_free(sl_stream *s)
{
    if (!s) return;
    sl_stream_reset(s);
    queues_free(s);
}

sl_wsource *sl_stream_source(sl_stream *s) { return &s->src; }

void sl_stream_get_stats(const sl_stream *s, sl_stream_stats *st)
{
    *st = s->st;
    sl_xcache_get_stats(s->cache, &st->cache);
    sl_io_get_stats(s->dense.io, &st->io);
    if (s->experts.io) {
        sl_io_stats e;
        sl_io_get_stats(s->experts.io, &e);
        st->io.requests += e.requests;
        st->io.bytes_requested += e.bytes_requested;
        st->io.bytes_read += e.bytes_read;
        st->io.reads_issued += e.reads_issued;
        st->io.retries += e.retries;
        st->io.errors += e.errors;
        st->io.waits += e.waits;
        st->io.wait_ns += e.wait_ns;
    }
}

uint64_t sl_stream_max_piece(const sl_stream *s)
{
    return s->dense.max_piece > s->experts.max_piece ? s->dense.max_piece : s->experts.max_piece;
}
int64_t sl_stream_n_pieces(const sl_stream *s) { return s->dense.n; }
uint64_t sl_stream_pass_bytes(const sl_stream *s) { return s->pass_bytes; }
size_t sl_stream_mem_bytes(const sl_stream *s)
{
    return sl_io_mem_bytes(s->dense.io) + (s->experts.io ? sl_io_mem_bytes(s->experts.io) : 0) + s->m->tok_embd.row_bytes +
           sl_xcache_mem_bytes(s->cache);
}
const char *sl_stream_notice(const sl_stream *s) { return sl_io_notice(s->dense.io); }
const char *sl_stream_backend(const sl_stream *s) { return sl_io_backend_name(sl_io_backend_active(s->dense.io)); }
const char *sl_stream_errmsg(const sl_stream *s) { return s->err; }
