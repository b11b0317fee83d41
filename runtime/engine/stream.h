/* runtime/engine/stream.h — the streaming layer loader: weights that are not resident are read piece by
 * piece, in forward order, a few pieces ahead of the compute, and let go after use.
 *
 * The schedule is the list of pieces one forward pass consumes: for each block its streamed
 * matrices (wq wk wv wo w_gate w_up w_down), then the LM head; each matrix is one piece (unit
 * "tensor") or row-chunks of at most `chunk_bytes` (unit CHUNK), the LM head always in chunks of
 * `lm_head_rows` rows.  Every token walks the same schedule, so the reader simply keeps `prefetch`
 * pieces in flight ahead of the one being computed, wrapping from the LM head to block 0.
 * Token embeddings are read one row at a time, synchronously.
 */
#ifndef SL_RUNTIME_STREAM_H
#define SL_RUNTIME_STREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "loader/io.h"
#include "runtime/engine/forward.h"
#include "runtime/engine/model.h"

/* Schedule positions whose reader slots the stream remembers: pieces in flight never exceed the
 * reader's slot limit, so a ring of that size suffices (the planner's simulation uses the same). */
#define SL_STREAM_RING SL_IO_MAX_SLOTS

/* The reader's largest single read, which is also the O_DIRECT bounce buffer for embedding rows:
 * the largest piece clamped to [256 KiB, 4 MiB] — 4 MiB reads for big pieces, no 4 MiB bounce
 * buffer in a tight budget.  The planner charges exactly this. */
static inline uint64_t sl_stream_read_chunk(uint64_t max_piece)
{
    const uint64_t lo = 256u << 10, hi = 4u << 20;
    return max_piece < lo ? lo : max_piece > hi ? hi : max_piece;
}

typedef struct sl_stream_opts {
    sl_io_backend backend;
    uint64_t chunk_bytes;   /* 0: one piece per tensor; else row-chunks of at most this many bytes */
    int      prefetch;      /* pieces in flight ahead of the one computing (>= 1) */
    int      lm_head_rows;  /* rows per LM-head chunk (default 1024) */
    bool     no_direct;     /* buffered reads instead of O_DIRECT */
} sl_stream_opts;

typedef struct sl_stream_stats {
    uint64_t pieces;        /* pieces consumed */
    uint64_t bytes;         /* bytes of weights consumed (excluding alignment padding) */
    uint64_t embd_rows;     /* embedding rows read */
    uint64_t wait_ns;       /* time blocked waiting for pieces */
    uint64_t compute_ns;    /* time computing on streamed pieces */
    sl_io_stats io;         /* the reader's own counters */
} sl_stream_stats;

typedef struct sl_stream sl_stream;

/* Build the schedule from the weights of m whose data is NULL, open the reader.  0 or -errno. */
int  sl_stream_create(sl_model *m, sl_pool *pool, const sl_stream_opts *o, sl_stream **out, char *err, size_t errlen);
void sl_stream_free(sl_stream *s);
/* The weight source to attach to a context (ctx->src). */
sl_wsource *sl_stream_source(sl_stream *s);
/* Drop everything in flight and restart the schedule at its beginning (after an error or interrupt). */
void sl_stream_reset(sl_stream *s);
void sl_stream_get_stats(const sl_stream *s, sl_stream_stats *st);
/* Largest piece, pieces per pass, bytes per pass, RAM held by buffers. */
uint64_t sl_stream_max_piece(const sl_stream *s);
int64_t  sl_stream_n_pieces(const sl_stream *s);
uint64_t sl_stream_pass_bytes(const sl_stream *s);
size_t   sl_stream_mem_bytes(const sl_stream *s);
const char *sl_stream_notice(const sl_stream *s);
const char *sl_stream_backend(const sl_stream *s);   /* the backend actually in use */
const char *sl_stream_errmsg(const sl_stream *s);

#endif
