/* runtime/engine/stream.h — the streaming layer loader: weights that are not resident are read piece by
 * piece as the forward pass asks for them, ahead of the compute where the order is known, and let
 * go after use.
 *
 * Two kinds of request, each with its own reader (loader/io.h):
 *  - Dense weights: the schedule is the list of pieces every forward pass consumes: for each block
 *    its streamed matrices in slot order (arch.h enum sl_block_mat), then the LM head; each matrix
 *    is one piece (unit "tensor") or row-chunks of at most `chunk_bytes`, the LM head in chunks of
 *    `lm_head_rows` rows.  Their order does not depend on the token, so the reader keeps `prefetch`
 *    pieces in flight ahead of the one being computed, wrapping from the LM head to block 0.
 *  - Routed experts (weights with `routed` set): which ones a pass needs is known only once the
 *    block's router has run.  The forward pass then announces them (sl_wsource.want: every expert
 *    the batch takes, each once, its matrices together) and the expert reader starts on them at
 *    once, up to sl_stream_expert_slots pieces ahead, while the dense read-ahead continues on its
 *    own reader.  Nothing of an expert is read unless a token picked it — except with
 *    expert_prefetch: when a MoE block is done its expert reader is idle until the next block's
 *    router has run, and the forward pass's guess of that block's experts (sl_wsource.hint) is
 *    read into the expert cache meanwhile; the next announcement takes what arrived, drops the
 *    rest, and reads whatever the guess missed as usual.
 * Token embeddings are read one row at a time, synchronously.
 */
#ifndef SL_RUNTIME_STREAM_H
#define SL_RUNTIME_STREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "loader/io.h"
#include "runtime/engine/expert_cache.h"
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

/* Pieces the expert reader keeps in flight or held: every matrix of the experts one token takes
 * (3 x expert_used_count), at least 3 and at most 24.  The planner charges exactly this. */
static inline int sl_stream_expert_slots(const sl_config *c)
{
    int n = 3 * c->n_expert_used;
    return n < 3 ? 3 : n > 24 ? 24 : n;
}

typedef struct sl_stream_opts {
    sl_io_backend backend;
    uint64_t chunk_bytes;   /* 0: one piece per tensor; else row-chunks of at most this many bytes */
    int      prefetch;      /* pieces in flight ahead of the one computing (>= 1) */
    int      lm_head_rows;  /* rows per LM-head chunk (default 1024) */
    bool     no_direct;     /* buffered reads instead of O_DIRECT */
    uint64_t expert_cache_bytes;   /* memory for routed experts kept between passes (expert_cache.h); 0: none */
    bool     expert_prefetch;      /* act on the forward pass's hints (sl_wsource.hint): read the experts the
                                    * next block will probably take into the cache ahead of its router */
} sl_stream_opts;

typedef struct sl_stream_stats {
    uint64_t pieces;        /* pieces consumed */
    uint64_t bytes;         /* bytes of weights consumed (excluding alignment padding), experts included */
    uint64_t expert_pieces; /* of those: pieces of routed experts */
    uint64_t expert_bytes;  /*   and their bytes */
    uint64_t expert_wants;  /* announcements of a batch's experts (one per MoE block per pass) */
    sl_xcache_stats cache;  /* the expert cache's hits, misses, fills (zero without one) */
    uint64_t prefetch_units;   /* experts a hint read (or started to read) into the cache */
    uint64_t prefetch_used;    /*   of those: taken by the next announcement (a hit then) */
    uint64_t prefetch_bytes;   /* bytes the hints requested */
    uint64_t prefetch_wasted;  /*   of those: pieces of experts the next announcement did not take */
    uint64_t prefetch_failed;  /* hint reads that failed (the expert is read again when wanted) */
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
/* Largest piece, pieces per pass and bytes per pass of the dense schedule (routed experts come on
 * top, as the router picks them), RAM held by buffers (both readers). */
uint64_t sl_stream_max_piece(const sl_stream *s);
int64_t  sl_stream_n_pieces(const sl_stream *s);
uint64_t sl_stream_pass_bytes(const sl_stream *s);
size_t   sl_stream_mem_bytes(const sl_stream *s);
const char *sl_stream_notice(const sl_stream *s);
const char *sl_stream_backend(const sl_stream *s);   /* the backend actually in use */
const char *sl_stream_errmsg(const sl_stream *s);

#endif
