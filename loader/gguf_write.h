/* loader/gguf_write.h — streaming GGUF v3 writer.
 *
 * The file is produced in three phases, in this order:
 *   1. key/value pairs      sl_gguf_writer_kv_*()            (any number, any type incl. arrays)
 *   2. tensor infos         sl_gguf_writer_add_tensor()      (name, type, shape; offsets are computed)
 *   3. tensor data          sl_gguf_writer_write()           (the tensors' bytes, in info order)
 * then sl_gguf_writer_finish() makes the file visible, or sl_gguf_writer_abort() discards it.
 *
 * Contract:
 *   - Memory is bounded: metadata and data stream through one fixed buffer (SL_GGUF_WRITE_BUF bytes);
 *     nothing of the file is kept beyond that, so a 5 GB model costs the same RAM as a 5 MB one.
 *   - Atomic output: bytes go to "<path>.tmp"; finish() flushes, fsyncs, renames it over <path> and
 *     fsyncs the directory.  On any error (and on abort) the temporary file is unlinked, so no
 *     half-written file is ever left under either name.
 *   - Layout: every tensor's data starts at a multiple of the alignment (general.alignment, default
 *     32), relative to the start of the data section, which itself starts at an aligned file offset;
 *     padding bytes are zero.  write() inserts the padding between tensors itself, so the caller only
 *     streams each tensor's nbytes (= rows × sl_row_bytes(type, ne0)) back to back.
 *   - Calls out of phase order return -EINVAL; after any error the writer is "failed" and every later
 *     call returns that first error (so a caller may check only finish()).  The caller still calls
 *     finish() or abort() exactly once to free the writer.
 *   - Errors: 0 or a negative errno, with a one-line message in the writer's error buffer
 *     (sl_gguf_writer_error()) that names the file; ENOSPC/EDQUOT/EFBIG/EIO say what happened and
 *     how far the write got.
 *
 * Not thread-safe: one thread drives a writer (generators hand it finished chunks).
 */
#ifndef SL_LOADER_GGUF_WRITE_H
#define SL_LOADER_GGUF_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loader/gguf.h"

#define SL_GGUF_WRITE_BUF (1u << 20)   /* bytes buffered before a write(2) */

typedef struct sl_gguf_writer sl_gguf_writer;

enum sl_gguf_write_flags {
    /* Keep the page cache small while writing multi-GB files: start writeback of every 64 MiB
     * window as soon as it is written and drop the window before it from the cache.  Bounds dirty
     * memory to ~128 MiB and leaves the file cold in cache (what a streaming benchmark wants). */
    SL_GGUF_WRITE_DROP_CACHE = 1 << 0,
    /* Reserve the whole file with fallocate() when the data phase starts, so that a full disk is
     * reported before gigabytes are written.  Filesystems without fallocate are tolerated. */
    SL_GGUF_WRITE_PREALLOCATE = 1 << 1,
};

/* Create "<path>.tmp" (truncating a stale one) and start a GGUF v3 file with the given alignment
 * (a power of two ≥ 8; 32 is llama.cpp's default).  The alignment is NOT written as a key by this
 * call: add "general.alignment" (u32) yourself if it is not 32, or to be explicit.
 * *out is set only on success; on failure `err` holds the reason. */
int sl_gguf_writer_open(sl_gguf_writer **out, const char *path, uint32_t alignment, unsigned flags,
                        char *err, size_t errlen);

/* Scalars.  Keys must be unique and non-empty (checked: duplicates are -EINVAL). */
int sl_gguf_writer_kv_u8 (sl_gguf_writer *w, const char *key, uint8_t v);
int sl_gguf_writer_kv_i8 (sl_gguf_writer *w, const char *key, int8_t v);
int sl_gguf_writer_kv_u16(sl_gguf_writer *w, const char *key, uint16_t v);
int sl_gguf_writer_kv_i16(sl_gguf_writer *w, const char *key, int16_t v);
int sl_gguf_writer_kv_u32(sl_gguf_writer *w, const char *key, uint32_t v);
int sl_gguf_writer_kv_i32(sl_gguf_writer *w, const char *key, int32_t v);
int sl_gguf_writer_kv_u64(sl_gguf_writer *w, const char *key, uint64_t v);
int sl_gguf_writer_kv_i64(sl_gguf_writer *w, const char *key, int64_t v);
int sl_gguf_writer_kv_f32(sl_gguf_writer *w, const char *key, float v);
int sl_gguf_writer_kv_f64(sl_gguf_writer *w, const char *key, double v);
int sl_gguf_writer_kv_bool(sl_gguf_writer *w, const char *key, bool v);
int sl_gguf_writer_kv_str(sl_gguf_writer *w, const char *key, const char *v);
int sl_gguf_writer_kv_strn(sl_gguf_writer *w, const char *key, const char *v, uint64_t len);

/* Arrays.  Numeric: `data` holds n elements of elem_type in host order (little-endian hosts only;
 * bools are one byte each, 0 or 1).  Strings: n views (ptr, len), not necessarily NUL-terminated.
 * Streaming variant for arrays too large or too scattered to hold at once: begin, then exactly n
 * elements through arr_push_str / arr_push_raw (the writer counts them and fails on a mismatch). */
int sl_gguf_writer_kv_arr(sl_gguf_writer *w, const char *key, int elem_type, const void *data, uint64_t n);
int sl_gguf_writer_kv_arr_str(sl_gguf_writer *w, const char *key, const sl_str *v, uint64_t n);
int sl_gguf_writer_arr_begin(sl_gguf_writer *w, const char *key, int elem_type, uint64_t n);
int sl_gguf_writer_arr_push_str(sl_gguf_writer *w, const char *s, uint64_t len);
int sl_gguf_writer_arr_push_raw(sl_gguf_writer *w, const void *elems, uint64_t count);

/* Copy key/value pair `kv` (index into src) verbatim: same key, same type, same value(s).
 * Arrays of arrays are not supported (-ENOTSUP); no llama.cpp key uses them. */
int sl_gguf_writer_copy_kv(sl_gguf_writer *w, const sl_gguf *src, int64_t kv);

/* Declare the next tensor: ggml order, ne[0] = row length.  `type` is an enum sl_type with known
 * block geometry; ne[0] must be a multiple of its block size.  Ends the key/value phase.
 * Returns the tensor's data size in bytes through *nbytes (may be NULL). */
int sl_gguf_writer_add_tensor(sl_gguf_writer *w, const char *name, int type, int n_dims,
                              const int64_t *ne, uint64_t *nbytes);

/* Stream tensor data: the concatenation of every tensor's bytes, in declaration order, split into
 * calls of any size (a call may span tensors).  Writing more than declared is -EINVAL. */
int sl_gguf_writer_write(sl_gguf_writer *w, const void *buf, size_t n);

/* Offsets and sizes, valid once the tensor infos are complete (after the first write(), or after
 * all add_tensor() calls for total_size()). */
uint64_t sl_gguf_writer_total_size(sl_gguf_writer *w);   /* final file size in bytes */
uint64_t sl_gguf_writer_data_written(const sl_gguf_writer *w);   /* tensor bytes so far, no padding */
uint64_t sl_gguf_writer_data_total(const sl_gguf_writer *w);     /* all tensors' bytes, no padding */

/* Finish: verify that every declared tensor byte was written, pad, flush, fsync, rename
 * "<path>.tmp" → <path>, fsync the directory, free the writer.  On error the temporary file is
 * removed, the message copied to `err`, and the writer freed all the same. */
int sl_gguf_writer_finish(sl_gguf_writer *w, char *err, size_t errlen);

/* Discard: close and unlink the temporary file, free the writer.  NULL is allowed. */
void sl_gguf_writer_abort(sl_gguf_writer *w);

/* The current error message ("" when none). */
const char *sl_gguf_writer_error(const sl_gguf_writer *w);

/* Path of the temporary file, for signal handlers that must unlink it (async-signal-safe to read:
 * the string does not move while the writer lives). */
const char *sl_gguf_writer_tmp_path(const sl_gguf_writer *w);

#endif
