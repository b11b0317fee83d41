/* runtime/engine/kvcache.h — the attention KV cache: f16, f32 or q8_0, held in memory or spilled to a file.
 *
 * Layout: for each layer, K and V are (n_ctx, kv_dim) arrays of rows in the cache's encoding.
 * Spilled caches keep only one layer's K and V in memory: sl_kv_layer_begin() reads positions
 * [0, n_past) of that layer from the file, the forward pass appends its new rows and attends, and
 * sl_kv_layer_end() writes the new rows back.  The file is opened with O_DIRECT where the file
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

/* spill_dir: NULL keeps the cache in memory; else the directory for the (unlinked) spill file.
 * Q8_0 needs head_dim % 32 == 0.  0 or -errno with a message. */
int  sl_kv_create(const sl_config *c, int n_ctx, int type, const char *spill_dir, sl_kv **out, char *err, size_t errlen);
void sl_kv_free(sl_kv *kv);
/* Bytes of memory the cache holds (resident: all layers; spilled: one layer). */
size_t sl_kv_mem_bytes(const sl_kv *kv);
size_t sl_kv_bytes_for(const sl_config *c, int n_ctx, int type, bool spill);
int  sl_kv_type(const sl_kv *kv);
bool sl_kv_spilled(const sl_kv *kv);
uint64_t sl_kv_io_bytes(const sl_kv *kv);   /* bytes read + written to the spill file */

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
/* Head `kh` of position 0 of layer l's K (or V) rows, in the cache's encoding (SL_TYPE_F16,
 * SL_TYPE_F32 or SL_TYPE_Q8_0, in *type); position t's head is *stride bytes further per t.  For
 * sl_attn_heads: valid for positions [0, n_past) after sl_kv_layer_begin and the stores of this
 * batch, until sl_kv_layer_end. */
const void *sl_kv_k_head(const sl_kv *kv, int l, int kh, int *type, size_t *stride);
const void *sl_kv_v_head(const sl_kv *kv, int l, int kh, int *type, size_t *stride);

const char *sl_kv_errmsg(const sl_kv *kv);
/* Raw access for session files: bytes of one layer's K (or V) rows [0, n). */
size_t sl_kv_row_bytes(const sl_kv *kv);

/* ---- session files (runtime/api/session.c): copy raw rows out of and into a cache ----------------- */
int  sl_kv_n_ctx(const sl_kv *kv);
int  sl_kv_n_layers(const sl_kv *kv);
/* Copy rows [r0, r0+n) of layer l's K (which = 0) or V (which = 1), in the cache's encoding
 * (n * sl_kv_row_bytes bytes), to dst.  A spilled cache reads them from its file through the
 * layer buffer, so call this only between evaluations.  0 or -errno (message: sl_kv_errmsg). */
int  sl_kv_export_rows(sl_kv *kv, int l, int which, int r0, int n, void *dst);
/* The reverse: overwrite rows [r0, r0+n) of layer l's K or V with src.  Spilled caches
 * read-modify-write the pages covering the rows.  0 or -errno. */
int  sl_kv_import_rows(sl_kv *kv, int l, int which, int r0, int n, const void *src);

#endif
