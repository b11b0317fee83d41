/* runtime/api/session.h — session files: the tokens and KV cache of a context, saved and restored.
 *
 * A session lets a later run skip re-evaluating a prompt it has already seen: the file holds the
 * evaluated tokens, the logits after the last one, the KV rows of every layer (positions
 * [start_l, n): 0 for a full-attention layer, what its ring still holds for a sliding-window one)
 * and an application blob (`sluice chat` keeps its conversation there).  File layout (little-endian):
 *
 *   sl_sess_hdr (128 bytes, below)          magic, version, model fingerprint, shapes, sizes, hashes
 *   payload (payload_bytes)                 the sections below, through the codec
 *
 * Sections, in order: tokens (n x i32), logits (n_vocab x f32, when has_logits), extra
 * (extra_bytes), [version 2: start_l for each layer (n_layers x u32)], then for each layer its K
 * rows of positions [start_l, n) and its V rows likewise (version 1: start_l = 0), in the cache's
 * own encoding, in groups of chunk_rows rows.  Version 1 files (full caches) still load.  payload_hash is XXH64 (seed 0) of the sections as
 * listed (the logical bytes, before the codec).  Codecs: raw; zstd; zstd after a byte-plane shuffle
 * of each group (f16/f32 caches, tokens and logits: element bytes transposed so that sign/exponent
 * bytes sit together — see docs/sessions.md for the measurements behind the default).
 *
 * Where a session is written: only to a regular file that is absent, empty or already a sluice
 * session (never through a symbolic link, never over a device, FIFO, socket, directory or a file
 * that is not a session); a session of another model or KV type is kept unless overwrite is asked
 * (runtime/api/session_path.c).  Reading opens only regular files (O_NONBLOCK: a FIFO cannot hang).
 *
 * Safety: a file is applied only if the magic, version, header hash, model fingerprint, shapes,
 * KV encoding and sizes all match and the payload hash verifies; a file that fails after the cache
 * was touched leaves the context empty (n_past 0), never half-restored.  Writes are atomic: an
 * unnamed temporary file in the target directory, fsync, link, rename, fsync of the directory.
 */
#ifndef SL_RUNTIME_SESSION_H
#define SL_RUNTIME_SESSION_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/engine/forward.h"
#include "runtime/engine/model.h"

#define SL_SESS_MAGIC "SLUICESS"
#define SL_SESS_VERSION 2u           /* written; 1 is read too (every layer from position 0) */
#define SL_SESS_MAX_EXTRA (64u << 20)   /* application blob limit: refuse absurd sizes before allocating */

enum sl_sess_codec { SL_SESS_RAW = 0, SL_SESS_ZSTD = 1, SL_SESS_ZSTD_SHUFFLE = 2 };

typedef struct sl_sess_hdr {
    char     magic[8];        /* "SLUICESS" (no NUL) */
    uint32_t version;         /* SL_SESS_VERSION */
    uint32_t header_bytes;    /* sizeof(sl_sess_hdr) */
    uint64_t model_fp;        /* sl_model_fingerprint of the model that produced the cache */
    uint32_t n_layers;
    uint32_t kv_dim;          /* n_kv_heads * head_dim */
    uint32_t kv_type;         /* enum sl_kv_type */
    uint32_t row_bytes;       /* bytes of one K (or V) row in that encoding */
    uint32_t n_ctx;           /* context size of the saving run (informational) */
    uint32_t n_tokens;        /* evaluated tokens = KV rows per layer */
    uint32_t n_vocab;
    uint32_t has_logits;      /* 1: the logits after the last token follow the tokens */
    uint32_t codec;           /* enum sl_sess_codec */
    uint32_t level;           /* zstd level used (informational) */
    uint64_t extra_bytes;     /* application blob */
    uint64_t raw_bytes;       /* logical payload bytes (before the codec) */
    uint64_t payload_bytes;   /* bytes after the header */
    uint64_t payload_hash;    /* XXH64 of the logical payload */
    uint32_t chunk_rows;      /* KV rows per shuffle/hash group */
    uint32_t kv_rows;         /* version 2: K rows saved over all layers, sum of n - start_l (1: 0) */
    uint8_t  reserved[16];    /* zero */
    uint64_t header_hash;     /* XXH64 of the 120 bytes before this field */
} sl_sess_hdr;
static_assert(sizeof(sl_sess_hdr) == 128, "session header layout is part of the file format");
static_assert(offsetof(sl_sess_hdr, header_hash) == 120, "header_hash is the last 8 bytes");

typedef struct sl_session_opts {
    int codec;                /* enum sl_sess_codec */
    int level;                /* zstd level */
    bool overwrite;           /* replace a session of another model, KV type or format version */
} sl_session_opts;

/* The codec and level sluice uses by default (chosen by measurement: docs/sessions.md). */
sl_session_opts sl_session_default_opts(void);

typedef struct sl_session_info {
    int      n_tokens, kv_type, codec;
    uint64_t raw_bytes;       /* logical payload */
    uint64_t file_bytes;      /* header + payload on disk */
    uint64_t ns;              /* wall time of the save or load */
} sl_session_info;

/* XXH64 (Yann Collet's xxHash, 64-bit variant), one-shot and streaming. */
uint64_t sl_xxh64(const void *p, size_t n, uint64_t seed);
typedef struct sl_xxh64_state {
    uint64_t v[4], total;
    unsigned char buf[32];
    unsigned nbuf;
    uint64_t seed;
} sl_xxh64_state;
void     sl_xxh64_init(sl_xxh64_state *s, uint64_t seed);
void     sl_xxh64_update(sl_xxh64_state *s, const void *p, size_t n);
uint64_t sl_xxh64_digest(const sl_xxh64_state *s);

/* A fingerprint of the model file: XXH64 over its size, the whole metadata region (header, KV pairs,
 * tensor table: everything before the tensor data) and three 64 KiB samples of tensor data (start,
 * middle, end).  Two files share it only if they agree on all of that.  0 or -errno. */
int sl_model_fingerprint(const sl_model *m, uint64_t *fp, char *err, size_t errlen);

/* Write c's first n positions (tokens toks[0..n), n == c->n_past) to path, atomically.  logits: the
 * vocab logits after toks[n-1], or NULL.  extra: an application blob (may be NULL).  o: NULL for the
 * default.  The context must not be evaluating.  0 or -errno with one line in err: -EINVAL the path
 * is a directory, device, FIFO, socket or symbolic link; -EEXIST it is a file that is not a session,
 * or (without o->overwrite) a session of another model, KV type or format version — left as it was. */
int sl_session_save(const char *path, sl_ctx *c, uint64_t model_fp, const int32_t *toks, int n, const float *logits,
                    const void *extra, size_t extra_len, const sl_session_opts *o, sl_session_info *info,
                    char *err, size_t errlen);

/* Restore a session into c (any n_ctx >= the saved token count; same KV encoding; any ring slack:
 * a sliding-window layer needs the saved positions from n - window + 1 on, and keeps what its ring
 * holds of them).  On success
 * c->n_past = *n, *toks is a malloc'd copy of the tokens, *has_logits says whether logits_out
 * (n_vocab floats, may be NULL) was filled, *extra and *extra_len the malloc'd blob (NULL/0 if none;
 * pass extra NULL to skip it).  Errors: -ENOENT (no file), -EINVAL (not a session, foreign model,
 * other KV encoding, corrupt, truncated, NaN/Inf in the logits or the KV rows, not a regular file:
 * err says which), -ENOSPC (more tokens than n_ctx),
 * other -errno for I/O.  On any error after the cache was touched, c->n_past is 0. */
int sl_session_load(const char *path, sl_ctx *c, uint64_t model_fp, int32_t **toks, int *n, float *logits_out,
                    bool *has_logits, void **extra, size_t *extra_len, sl_session_info *info, char *err, size_t errlen);

#endif
