/* runtime/engine/expert_cache.h — routed experts kept in memory between passes, in a fixed number of
 * equal entries (the budget the plan gives it).
 *
 * Which entry a miss takes (bench/moe_cache_sim.c replays traces under each policy; docs/benchmarks.md
 * "Expert cache policies"): the least recently used one when the cache holds at least one pass's
 * experts (blocks x the experts a block's batch claims: expert_used_count for one token, the union of
 * the tokens' for parallel sequences or a verification): LRU then hits best.  A smaller cache under
 * LRU evicts every expert before the next pass asks for it again (a pass walks the blocks in order: a
 * loop larger than the cache) and hits nothing; there the least frequently used entry goes instead,
 * its counts halved every (blocks x expert_count) asks so that old favourites fade (LFU with decay).
 * The width is the widest batch of about the last two passes (sl_xcache_begin), so a server that
 * goes back to one sequence goes back to LRU.
 *
 * A unit is one expert of one block: its SL_EXPERT_MATS matrices, stored back to back in an entry at
 * sl_weight.unit_off.  The stream (runtime/engine/stream.c) asks, when a MoE block announces the
 * experts of a batch: sl_xcache_claim for each unit; a hit is computed from the entry (nothing read),
 * a miss gets an entry (the least recently used one no unit of this batch holds) that fills as the
 * unit's pieces are read and computed with; it serves only once every byte is in.  With no entry
 * free for this batch the unit is read through, uncached.  A failed or interrupted pass leaves
 * partial entries, which are never served (sl_xcache_abort drops them).
 *
 * Contract: the bytes an entry serves are the file's bytes of that unit, so a hit computes exactly
 * what reading it would (the kernels do not care where the rows are): every logit is bit-identical
 * with the cache on, off, and at any size (tests/test_moe.c).
 */
#ifndef SL_RUNTIME_EXPERT_CACHE_H
#define SL_RUNTIME_EXPERT_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/engine/model.h"

typedef struct sl_xcache sl_xcache;

typedef struct sl_xcache_stats {
    uint64_t hits, misses;      /* units a batch asked for: found whole / read (whether then cached or not) */
    uint64_t fills, evictions;  /* entries completed / entries taken from another unit */
    uint64_t bypass;            /* misses read through without an entry (the batch held every entry) */
    int64_t  entries;           /* entries in the cache */
    int      lfu;               /* 1: least frequently used first out now (a cache smaller than a pass's experts) */
    uint64_t entry_bytes;       /* bytes per entry (the largest unit) */
} sl_xcache_stats;

/* Bytes of the largest routed expert of m (an entry's size); 0 for a dense model. */
uint64_t sl_xcache_unit_bytes(const sl_model *m);

/* A cache of as many entries as `bytes` holds (at most one per unit of m); *out = NULL when that is
 * none (bytes below one entry, or a dense model).  0 or -ENOMEM. */
int  sl_xcache_create(const sl_model *m, uint64_t bytes, sl_xcache **out);
void sl_xcache_free(sl_xcache *c);

/* Start a batch's announcement: the previous batch's entries may be evicted again. */
void sl_xcache_begin(sl_xcache *c);

enum sl_xcache_claim { SL_XCACHE_HIT, SL_XCACHE_FILL, SL_XCACHE_BYPASS };
/* The unit (sl_weight.unit) is needed by this batch: HIT (whole in an entry, kept for the batch),
 * FILL (an entry is now the unit's and fills from its reads), BYPASS (read it through). */
int  sl_xcache_claim(sl_xcache *c, int unit);

/* Prefetch (stream.c, a hint of the experts the next block will probably take): the unit gets an
 * entry that fills from the prefetch reads, as a miss's would — SL_XCACHE_FILL; SL_XCACHE_HIT when
 * it is whole in the cache already (nothing to read; it becomes the most recent entry, so the
 * hint's other fills do not evict it); SL_XCACHE_BYPASS when there is no entry to give (every one
 * held by the current batch or the hint, or an LFU cache: a cache smaller than one token's experts
 * keeps what it asked for, not guesses).  Counts no hit or miss: the next claim does. */
int  sl_xcache_prefetch(sl_xcache *c, int unit);

/* w's bytes when its unit is whole in the cache, else NULL. */
const void *sl_xcache_data(const sl_xcache *c, const sl_weight *w);

/* Rows [row0, row0 + nrows) of w, just read (data: their bytes): copied into w's unit's entry if it
 * is filling; the entry serves once all its bytes are in. */
void sl_xcache_fill(sl_xcache *c, const sl_weight *w, int64_t row0, int64_t nrows, const void *data);

/* The unit's entry, whole or not, is dropped (its bytes are not the file's: a read went wrong after
 * they were copied in). */
void sl_xcache_drop(sl_xcache *c, int unit);

/* After a failed or interrupted pass: entries that were filling are dropped. */
void sl_xcache_abort(sl_xcache *c);

void sl_xcache_get_stats(const sl_xcache *c, sl_xcache_stats *st);
/* Memory the cache holds (its entries and tables). */
size_t sl_xcache_mem_bytes(const sl_xcache *c);

#endif
