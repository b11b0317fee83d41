/* runtime/engine/kvcache.h — the attention KV cache: f16, f32 or q8_0, held in memory or spilled to a file.
 *
 * Layout: for each layer, K and V are (rows, kv_dim) arrays of rows in the cache's encoding, and
 * position p lives in row p mod rows.  A full-attention layer has rows = n_ctx (so row = position).
 * A sliding-window layer (window W) only ever reads its last W positions, so it keeps a ring of
 * rows = W + slack (when that is less than n_ctx), where the slack covers what may be written or
 * given back beyond the window (sl_kv_ring_rows):
 *   - a pass of n positions stores all n before any of them attends, so its first position's window
 *     must survive the last one's store: n <= slack + 1;
 *   - a rollback (rejected drafts, sluice_rewind, a server slot's prefix) to position q needs the W - 1
 *     positions before q, which later stores may have overwritten.
 * The cache tracks, per layer, the lowest position whose row is still intact (`lo`, raised by every
 * store of position p to p - rows + 1); sl_kv_check refuses a pass or a rewind that would read a
 * lost row, with a message saying so.  The contexts of include/sluice.h use
 * slack = n_batch + the most drafts a pass verifies (draft_max, default 8): any pass the model's
 * batch allows works, and after it a rewind of up to draft_max + 1 positions (and more, up to the
 * slack, when the pass was shorter).
 * Spilled caches keep only one layer's K and V in memory (the largest layer's size): the file
 * holds each layer's rows in the same ring layout; sl_kv_layer_begin() reads the rows of positions
 * [0, n_past) (all of a ring that has wrapped), the forward pass stores its new rows and attends,
 * and sl_kv_layer_end() writes the new rows back.  The file is opened with O_DIRECT where the file
 * system allows (buffered + POSIX_FADV_DONTNEED otherwise) and unlinked at once, so it never
 * outlives the process and never fills the page cache.
 */
#ifndef SL_RUNTIME_KVCACHE_H
#define SL_RUNTIME_KVCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/engine/model.h"

enum sl_kv_type { SL_KV_F16 = 0, SL_KV_F32 = 1, SL_KV_Q8_0 = 2 };

typedef struct sl_kv sl_kv;

/* Which layers keep a ring: window[l] > 0 is layer l's sliding window (NULL: every layer attends
 * over the whole context); slack < 0 turns rings off (every layer keeps n_ctx rows). */
typedef struct sl_kv_layout {
    const int *window;
    int slack;
} sl_kv_layout;

/* The rows a layer with this window keeps: window + slack when that is a ring smaller than the
 * context, else n_ctx. */
int  sl_kv_ring_rows(int window, int n_ctx, int slack);

/* lay: NULL keeps every layer full.  spill_dir: NULL keeps the cache in memory; else the directory
 * for the (unlinked) spill file.  Q8_0 needs head_dim % 32 == 0.  0 or -errno with a message. */
int  sl_kv_create(const sl_config *c, const sl_kv_layout *lay, int n_ctx, int type, const char *spill_dir, sl_kv **out,
                  char *err, size_t errlen);
void sl_kv_free(sl_kv *kv);
/* Is dir on a file system that lives in RAM (tmpfs, ramfs)?  A spill file there holds the cache in
 * memory after all (shmem pages, charged to the process's cgroup), so a budget that relies on the
 * spill would not hold.  false when dir cannot be examined (the spill file's creation reports it);
 * fstype (may be NULL) gets "tmpfs" / "ramfs". */
bool sl_kv_dir_in_ram(const char *dir, char *fstype, size_t len);
/* Bytes of memory the cache holds (resident: all layers; spilled: one layer). */
size_t sl_kv_mem_bytes(const sl_kv *kv);
/* What sl_kv_create allocates for these parameters (spill: the one layer buffer). */
size_t sl_kv_bytes_for(const sl_config *c, const sl_kv_layout *lay, int n_ctx, int type, bool spill);
/* Bytes of all layers' rows (the spill file's payload when spilled; the memory when resident). */
size_t sl_kv_total_bytes_for(const sl_config *c, const sl_kv_layout *lay, int n_ctx, int type);
int  sl_kv_type(const sl_kv *kv);
bool sl_kv_spilled(const sl_kv *kv);
uint64_t sl_kv_io_bytes(const sl_kv *kv);   /* bytes read + written to the spill file */

/* Rows layer l keeps (n_ctx, or its ring's size). */
int  sl_kv_rows(const sl_kv *kv, int l);
/* The lowest position of layer l whose row is intact (0 until a ring wraps). */
int  sl_kv_lo(const sl_kv *kv, int l);
/* Forget every position (n_past 0 from here on: nothing is lost). */
void sl_kv_reset(sl_kv *kv);
/* Can positions [p0, p0 + n) be evaluated after the cache's first p0 positions (n = 0: can the
 * context be rewound to p0)?  Every layer's window before each new position must still be in its
 * rows, before and after the pass's stores.  0, or -EINVAL with the reason in sl_kv_errmsg
 * (naming the layer, the positions lost and the ring's size). */
int  sl_kv_check(sl_kv *kv, int p0, int n);

/* Make layer l's positions [0, n_past) available (spill: read them).  0 or -errno. */
int  sl_kv_layer_begin(sl_kv *kv, int l, int n_past);
/* Store the rope'd k and the v (kv_dim floats each) of position pos in layer l. */
void sl_kv_store(sl_kv *kv, int l, int pos, const float *k, const float *v);
/* Write back rows [p0, p0+n) of layer l (spill).  0 or -errno. */
int  sl_kv_layer_end(sl_kv *kv, int l, int p0, int n);

/* Head `kh` (head_dim floats) of the K or V row at pos of layer l, as f32.  Returns a pointer to
 * either the cache itself (f32) or tmp (converted). */
const float *sl_kv_k(const sl_kv *kv, int l, int pos, int kh, float *tmp);
const float *sl_kv_v(const sl_kv *kv, int l, int pos, int kh, float *tmp);
/* Head `kh` of row 0 of layer l's K (or V) rows, in the cache's encoding (SL_TYPE_F16,
 * SL_TYPE_F32 or SL_TYPE_Q8_0, in *type); row r's head is r * *stride bytes further, and position
 * p is in row p mod sl_kv_rows.  For sl_attn_heads_ring: valid for the intact positions below
 * n_past after sl_kv_layer_begin and the stores of this batch, until sl_kv_layer_end. */
const void *sl_kv_k_head(const sl_kv *kv, int l, int kh, int *type, size_t *stride);
const void *sl_kv_v_head(const sl_kv *kv, int l, int kh, int *type, size_t *stride);

const char *sl_kv_errmsg(const sl_kv *kv);
/* Bytes of one K (or V) row (one position of one layer). */
size_t sl_kv_row_bytes(const sl_kv *kv);

/* ---- session files (runtime/api/session.c): copy raw rows out of and into a cache ----------------- */
int  sl_kv_n_ctx(const sl_kv *kv);
int  sl_kv_n_layers(const sl_kv *kv);
int  sl_kv_window(const sl_kv *kv, int l);
/* Copy the rows of positions [p0, p0+n) of layer l's K (which = 0) or V (which = 1), in the
 * cache's encoding (n * sl_kv_row_bytes bytes), to dst; every one must be intact (>= sl_kv_lo).
 * A spilled cache reads them from its file through the layer buffer, so call this only between
 * evaluations.  0 or -errno (message: sl_kv_errmsg). */
int  sl_kv_export_rows(sl_kv *kv, int l, int which, int p0, int n, void *dst);
/* The reverse: store positions [p0, p0+n) of layer l's K or V from src (a ring keeps the last of
 * them, as stores do).  Spilled caches read-modify-write the pages covering the rows.  Call
 * sl_kv_import_floor first when positions below p0 are not restored.  0 or -errno. */
int  sl_kv_import_rows(sl_kv *kv, int l, int which, int p0, int n, const void *src);
/* Layer l's positions below lo are not restored (a session that kept only a window's worth):
 * sl_kv_lo becomes at least lo. */
void sl_kv_import_floor(sl_kv *kv, int l, int lo);

#endif
