/* loader/gguf.h — GGUF (v2, v3) reader: metadata, tensor table, validation.
 *
 * Contract: sl_gguf_open() validates everything the rest of sluice will trust — magic, version,
 * counts, string lengths, value types, dims and their products, tensor offsets/extents against
 * the file size, alignment, duplicate names — before returning.  After a successful open every
 * accessor is bounds-safe: nothing in the file can make sluice read outside what it read.
 *
 * Only the metadata region (header, KV pairs, tensor infos) is copied into memory; tensor data is
 * never touched here.  Strings are views (ptr, len) into that copy and are NOT NUL-terminated.
 * Errors: functions return 0 or a negative errno (-EINVAL for a malformed file, -ENOMEM, -EIO, …)
 * and write one line naming the key/tensor and the byte offset into `err`.
 */
#ifndef SL_LOADER_GGUF_H
#define SL_LOADER_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum sl_gguf_vtype {
    SL_GGUF_U8 = 0, SL_GGUF_I8 = 1, SL_GGUF_U16 = 2, SL_GGUF_I16 = 3, SL_GGUF_U32 = 4,
    SL_GGUF_I32 = 5, SL_GGUF_F32 = 6, SL_GGUF_BOOL = 7, SL_GGUF_STRING = 8, SL_GGUF_ARRAY = 9,
    SL_GGUF_U64 = 10, SL_GGUF_I64 = 11, SL_GGUF_F64 = 12, SL_GGUF_VTYPE_COUNT = 13
};

typedef struct sl_str { const char *ptr; uint64_t len; } sl_str;

typedef struct sl_gguf_tensor {
    sl_str   name;
    int      type;        /* enum sl_type (kernels/types.h) */
    int      n_dims;      /* 1..4 */
    int64_t  ne[4];       /* ggml order: ne[0] is the row length (contiguous), ne[1] the number of rows */
    uint64_t offset;      /* absolute byte offset of the data in the file */
    uint64_t nbytes;      /* byte size of the data */
} sl_gguf_tensor;

typedef struct sl_gguf sl_gguf;

#define SL_ERRLEN 256

/* Open and validate a GGUF file.  *out is set only on success. */
int  sl_gguf_open(const char *path, sl_gguf **out, char *err, size_t errlen);
/* Parse from memory: `buf` holds the first `len` bytes of a file of `file_size` bytes (len may be less
 * than file_size if the tensor data is not in the buffer; tensor extents are checked against file_size).
 * The buffer is copied; the caller keeps ownership.  Used by tests and the fuzzer. */
int  sl_gguf_parse(const void *buf, size_t len, uint64_t file_size, sl_gguf **out, char *err, size_t errlen);
void sl_gguf_close(sl_gguf *g);

uint32_t sl_gguf_version(const sl_gguf *g);
uint64_t sl_gguf_file_size(const sl_gguf *g);
uint64_t sl_gguf_data_offset(const sl_gguf *g);   /* start of the tensor data section */
uint32_t sl_gguf_alignment(const sl_gguf *g);
size_t   sl_gguf_meta_bytes(const sl_gguf *g);    /* memory held by the parsed metadata */
const char *sl_gguf_path(const sl_gguf *g);       /* "" for parsed buffers */

/* Key/value access.  Indexes run 0..n_kv-1; find returns -1 when absent. */
int64_t  sl_gguf_n_kv(const sl_gguf *g);
int64_t  sl_gguf_find_key(const sl_gguf *g, const char *key);
sl_str   sl_gguf_key(const sl_gguf *g, int64_t i);
int      sl_gguf_kv_type(const sl_gguf *g, int64_t i);          /* enum sl_gguf_vtype */

/* Typed getters by key.  Return true and set *out when the key exists with a compatible type:
 * integer getters accept any integer type whose value fits (llama.cpp files mix u32 and u64);
 * float getters accept f32 and f64; get_str accepts strings.  False otherwise (out untouched). */
bool sl_gguf_get_u32(const sl_gguf *g, const char *key, uint32_t *out);
bool sl_gguf_get_u64(const sl_gguf *g, const char *key, uint64_t *out);
bool sl_gguf_get_i64(const sl_gguf *g, const char *key, int64_t *out);
bool sl_gguf_get_f32(const sl_gguf *g, const char *key, float *out);
bool sl_gguf_get_bool(const sl_gguf *g, const char *key, bool *out);
bool sl_gguf_get_str(const sl_gguf *g, const char *key, sl_str *out);

/* Scalar value of entry i rendered for people ("4096", "1e-05", "\"llama\"", "[string × 32000]"). */
void sl_gguf_kv_format(const sl_gguf *g, int64_t i, char *buf, size_t buflen);

/* Arrays.  sl_gguf_get_arr: true when `key` is an array; sets element type and count.
 * Element access is bounds-checked: out-of-range i returns false / an empty string. */
bool sl_gguf_get_arr(const sl_gguf *g, const char *key, int *elem_type, uint64_t *n);
int64_t sl_gguf_arr_kv(const sl_gguf *g, const char *key);     /* kv index of an array key, or -1 */
sl_str sl_gguf_arr_str(const sl_gguf *g, int64_t kv, uint64_t i);
bool   sl_gguf_arr_f32(const sl_gguf *g, int64_t kv, uint64_t i, float *out);   /* f32/f64 elements */
bool   sl_gguf_arr_i64(const sl_gguf *g, int64_t kv, uint64_t i, int64_t *out); /* any integer elements */
/* Raw little-endian bytes of a numeric array (for bulk copies); NULL for string arrays. */
const void *sl_gguf_arr_raw(const sl_gguf *g, int64_t kv, size_t *elem_size);

/* Tensors. */
int64_t sl_gguf_n_tensors(const sl_gguf *g);
const sl_gguf_tensor *sl_gguf_tensor_at(const sl_gguf *g, int64_t i);
const sl_gguf_tensor *sl_gguf_find_tensor(const sl_gguf *g, const char *name);

/* Helpers. */
bool sl_str_eq(sl_str s, const char *c);
#endif
