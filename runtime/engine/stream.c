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

typedef struct piece {
    const sl_weight *w;
    int64_t row0, nrows;
    uint64_t offset, len;
} piece;

struct sl_stream {
    sl_model *m;
    sl_pool *pool;
    sl_io *io;
    piece *sched;          /* one forward pass, in order */
    int64_t n;
    int64_t next_use;      /* index (mod n) of the piece the forward pass consumes next */
    int64_t next_req;      /* index (mod n, unbounded counter) of the next piece to request */
    int     depth;         /* pieces requested ahead, including the one being consumed */
    int     slot[SL_STREAM_RING];   /* slot of schedule position k is slot[k % SL_STREAM_RING] */
    uint64_t max_piece, pass_bytes;
    void   *rowbuf;        /* one embedding row in its file encoding */
    sl_stream_stats st;
    sl_wsource src;
    char err[320];
};


/* Append the pieces of w: row-chunks of at most max_rows rows. */
static int add_pieces(sl_stream *s, size_t *cap, const sl_weight *w, int64_t max_rows)
{
    if (max_rows < 1) max_rows = 1;
    for (int64_t r = 0; r < w->rows; r += max_rows) {
        if ((size_t)s->n == *cap) {
            size_t nc = *cap ? *cap * 2 : 256;
            piece *np = realloc(s->sched, nc * sizeof *np);
            if (!np) return -ENOMEM;
            s->sched = np;
            *cap = nc;
        }
        piece *p = &s->sched[s->n++];
        p->w = w;
        p->row0 = r;
        p->nrows = w->rows - r < max_rows ? w->rows - r : max_rows;
        p->offset = w->offset + (uint64_t)r * w->row_bytes;
        p->len = (uint64_t)p->nrows * w->row_bytes;
        if (p->len > s->max_piece) s->max_piece = p->len;
        s->pass_bytes += p->len;
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
static int top_up(sl_stream *s)
{
    while (s->next_req - s->next_use < s->depth) {
        const piece *p = &s->sched[s->next_req % s->n];
        int slot = sl_io_request(s->io, p->offset, (size_t)p->len);
        if (slot == -EBUSY) break;      /* all slots held: the consumer must release first */
        if (slot < 0) {
            snprintf(s->err, sizeof s->err, "stream: cannot request %s rows %" PRId64 "..%" PRId64 ": %s",
                     p->w->name, p->row0, p->row0 + p->nrows, sl_io_errmsg(s->io));
            return slot;
        }
        s->slot[s->next_req % SL_STREAM_RING] = slot;
        s->next_req++;
    }
    return 0;
}

void sl_stream_reset(sl_stream *s)
{
    for (int64_t k = s->next_use; k < s->next_req; k++) sl_io_release(s->io, s->slot[k % SL_STREAM_RING]);
    s->next_use = s->next_req = 0;
}

/* Take the next piece of the schedule, which must belong to w. */
static int acquire(sl_stream *s, const sl_weight *w, const piece **pp, const void **data)
{
    if (s->n == 0) {
        snprintf(s->err, sizeof s->err, "stream: %s is not resident and not in the schedule", w->name);
        return -EPROTO;
    }
    const piece *p = &s->sched[s->next_use % s->n];
    if (p->w != w) {
        snprintf(s->err, sizeof s->err, "stream: schedule out of step: forward asks for %s, next piece is %s",
                 w->name, p->w->name);
        sl_stream_reset(s);
        return -EPROTO;
    }
    int rc = top_up(s);
    if (rc) { sl_stream_reset(s); return rc; }
    uint64_t t0 = sl_now_ns();
    rc = sl_io_wait(s->io, s->slot[s->next_use % SL_STREAM_RING], data);
    s->st.wait_ns += sl_now_ns() - t0;
    if (rc) {
        snprintf(s->err, sizeof s->err, "reading %s rows %" PRId64 "..%" PRId64 ": %s", w->name, p->row0,
                 p->row0 + p->nrows, sl_io_errmsg(s->io));
        sl_stream_reset(s);
        return rc;
    }
    *pp = p;
    return 0;
}

static void release(sl_stream *s)
{
    sl_io_release(s->io, s->slot[s->next_use % SL_STREAM_RING]);
    s->next_use++;   /* counters grow without bound: schedule index k % n, slot k % SL_STREAM_RING */
    top_up(s);   /* an error here resurfaces at the next acquire */
}

static int stream_matmul(void *self, const sl_weight *w, const float *x, int nb, float *out, int64_t out_stride)
{
    sl_stream *s = self;
    int64_t done = 0;
    /* quantize the activations once for the whole matrix, not once per piece */
    sl_mm_input in;
    sl_mm_prepare(s->pool, w->type, x, nb, w->cols, &in);
    while (done < w->rows) {
        const piece *p;
        const void *data;
        int rc = acquire(s, w, &p, &data);
        if (rc) return rc;
        if (p->row0 != done) {
            snprintf(s->err, sizeof s->err, "stream: %s piece starts at row %" PRId64 ", expected %" PRId64, w->name, p->row0, done);
            sl_stream_reset(s);
            return -EPROTO;
        }
        uint64_t t0 = sl_now_ns();
        sl_matmul_prepared(s->pool, &in, data, p->nrows, w->row_bytes, out + p->row0, out_stride);
        s->st.compute_ns += sl_now_ns() - t0;
        s->st.pieces++;
        s->st.bytes += p->len;
        done += p->nrows;
        release(s);
    }
    return 0;
}

static int stream_row(void *self, const sl_weight *w, int64_t row, float *out)
{
    sl_stream *s = self;
    int rc = sl_io_read(s->io, w->offset + (uint64_t)row * w->row_bytes, w->row_bytes, s->rowbuf);
    if (rc) {
        snprintf(s->err, sizeof s->err, "reading %s row %" PRId64 ": %s", w->name, row, sl_io_errmsg(s->io));
        return rc;
    }
    sl_type_get(w->type)->dequant(s->rowbuf, out, w->cols);
    s->st.embd_rows++;
    return 0;
}

static const char *stream_errmsg(void *self) { return ((sl_stream *)self)->err; }
static void stream_reset(void *self) { sl_stream_reset(self); }

int sl_stream_create(sl_model *m, sl_pool *pool, const sl_stream_opts *o, sl_stream **out, char *err, size_t errlen)
{
    sl_stream *s = calloc(1, sizeof *s);
    if (!s) return -ENOMEM;
    s->m = m;
    s->pool = pool;
    size_t cap = 0;
    int rc = 0;
    for (int l = 0; l < m->cfg.n_layers && !rc; l++) {
        sl_weight *w[SL_BLOCK_MATS];
        for (int i = 0, n = sl_layer_weights(&m->layers[l], w); i < n && !rc; i++)
            if (!w[i]->data) rc = add_pieces(s, &cap, w[i], rows_for(w[i], o->chunk_bytes));
    }
    if (!rc && !m->output.data)
        rc = add_pieces(s, &cap, &m->output, o->lm_head_rows > 0 ? o->lm_head_rows : 1024);
    if (rc) { free(s->sched); free(s); return rc; }
    s->depth = o->prefetch < 1 ? 1 : o->prefetch + 1;
    if (s->depth > SL_IO_MAX_SLOTS) s->depth = SL_IO_MAX_SLOTS;
    if (s->n && s->depth > s->n) s->depth = (int)s->n;
    s->rowbuf = malloc(m->tok_embd.row_bytes);
    if (!s->rowbuf) { free(s->sched); free(s); return -ENOMEM; }
    size_t chunk = (size_t)sl_stream_read_chunk(s->max_piece);
    sl_io_opts io = { .backend = o->backend, .slots = s->depth, .max_piece = s->max_piece ? s->max_piece : 4096,
                      .no_direct = o->no_direct, .chunk = chunk };
    rc = sl_io_open(m->path, &io, &s->io, err, errlen);
    if (rc) { free(s->rowbuf); free(s->sched); free(s); return rc; }
    s->src = (sl_wsource){ s, stream_matmul, stream_row, stream_errmsg, stream_reset };
    *out = s;
    return 0;
}

void sl_stream_free(sl_stream *s)
{
    if (!s) return;
    sl_stream_reset(s);
    sl_io_close(s->io);
    free(s->rowbuf);
    free(s->sched);
    free(s);
}

sl_wsource *sl_stream_source(sl_stream *s) { return &s->src; }

void sl_stream_get_stats(const sl_stream *s, sl_stream_stats *st)
{
    *st = s->st;
    sl_io_get_stats(s->io, &st->io);
}

uint64_t sl_stream_max_piece(const sl_stream *s) { return s->max_piece; }
int64_t sl_stream_n_pieces(const sl_stream *s) { return s->n; }
uint64_t sl_stream_pass_bytes(const sl_stream *s) { return s->pass_bytes; }
size_t sl_stream_mem_bytes(const sl_stream *s) { return sl_io_mem_bytes(s->io) + s->m->tok_embd.row_bytes; }
const char *sl_stream_notice(const sl_stream *s) { return sl_io_notice(s->io); }
const char *sl_stream_backend(const sl_stream *s) { return sl_io_backend_name(sl_io_backend_active(s->io)); }
const char *sl_stream_errmsg(const sl_stream *s) { return s->err; }
