/* tests/util/gguf_craft.h — build GGUF byte images in memory, with a knob on every field.
 *
 * A gc_file is a description: header fields, a list of key/values and a list of tensors, each
 * holding the values that will be WRITTEN (so a test can write a lie: a count that is not the real
 * count, a length prefix past the end, a type id that does not exist, an offset that overlaps).
 * gc_build() serialises it into a gc_image and records every structural boundary (the byte offset
 * where each field starts), so a truncation test can cut the image exactly there.
 *
 * This is deliberately independent of loader/gguf_write.c: a writer that refuses bad input cannot
 * produce hostile files, and a parser should not be tested only with its sibling's output.
 *
 * gc_llama() fills a gc_file with a complete, valid, tiny llama model (weights with finite random
 * values, a small SentencePiece vocabulary with byte fallback) that sl_model_open accepts and the
 * CLI can run; hostile cases start from it and break exactly one thing.
 */
#ifndef SL_TESTS_GGUF_CRAFT_H
#define SL_TESTS_GGUF_CRAFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GC_AUTO UINT64_MAX      /* "write the true value" for count/length/offset overrides */
#define GC_MAX_DIMS 8           /* more than GGUF's 4, so "too many dims" can be written */

typedef struct gc_kv {
    char          *key;          /* key bytes (any bytes, not NUL-terminated for the file) */
    size_t         key_len;
    uint64_t       key_len_disk; /* length prefix written; GC_AUTO = key_len */
    uint32_t       type;         /* value type id written */
    unsigned char *val;          /* bytes after the type field (arrays: elem type, count, elements) */
    size_t         val_len;
} gc_kv;

typedef struct gc_tensor {
    char          *name;
    size_t         name_len;
    uint64_t       name_len_disk;   /* GC_AUTO = name_len */
    uint32_t       n_dims;          /* written as is; ne[0..min(n_dims, GC_MAX_DIMS)) follow */
    uint64_t       ne[GC_MAX_DIMS];
    uint32_t       type;            /* ggml type id written */
    uint64_t       offset;          /* relative to the data section; GC_AUTO = laid out in order */
    uint64_t       nbytes;          /* bytes of data placed for it (0: none) */
    unsigned char *data;            /* nbytes bytes, owned */
} gc_tensor;

typedef struct gc_file {
    uint32_t   magic, version;
    uint64_t   n_tensors_disk, n_kv_disk;  /* GC_AUTO = the real counts */
    uint32_t   alignment;                  /* used to lay out data (does NOT write general.alignment) */
    uint64_t   seed;                       /* data fill */
    gc_kv     *kv;
    size_t     n_kv, cap_kv;
    gc_tensor *t;
    size_t     n_t, cap_t;
} gc_file;

/* What gc_build produced.  bounds[] are ascending byte offsets where a field starts (the image length
 * is the last); data_off is where the tensor data section starts. */
typedef struct gc_image {
    unsigned char *p;
    size_t         len;
    size_t         data_off;
    size_t        *bounds;
    size_t         n_bounds;
} gc_image;

void gc_init(gc_file *f);
void gc_free(gc_file *f);

/* Key/values: each returns the new entry (valid until the next add). */
gc_kv *gc_kv_raw(gc_file *f, const char *key, size_t key_len, uint32_t type, const void *val, size_t val_len);
gc_kv *gc_kv_u8(gc_file *f, const char *key, uint8_t v);
gc_kv *gc_kv_i8(gc_file *f, const char *key, int8_t v);
gc_kv *gc_kv_u16(gc_file *f, const char *key, uint16_t v);
gc_kv *gc_kv_i16(gc_file *f, const char *key, int16_t v);
gc_kv *gc_kv_u32(gc_file *f, const char *key, uint32_t v);
gc_kv *gc_kv_i32(gc_file *f, const char *key, int32_t v);
gc_kv *gc_kv_f32(gc_file *f, const char *key, float v);
gc_kv *gc_kv_bool(gc_file *f, const char *key, bool v);
gc_kv *gc_kv_str(gc_file *f, const char *key, const char *s);
gc_kv *gc_kv_u64(gc_file *f, const char *key, uint64_t v);
gc_kv *gc_kv_i64(gc_file *f, const char *key, int64_t v);
gc_kv *gc_kv_f64(gc_file *f, const char *key, double v);
/* Arrays: elements given raw (little-endian, elem_size bytes each) or as C strings. */
gc_kv *gc_kv_arr(gc_file *f, const char *key, uint32_t elem_type, const void *elems, uint64_t n, size_t elem_size);
gc_kv *gc_kv_arr_str(gc_file *f, const char *key, const char *const *s, uint64_t n);
gc_kv *gc_find_kv(gc_file *f, const char *key);
bool   gc_del_kv(gc_file *f, const char *key);
/* Replace an entry's value bytes (type unchanged unless `type` != GC_KEEP_TYPE). */
#define GC_KEEP_TYPE UINT32_MAX
void   gc_kv_set(gc_kv *e, uint32_t type, const void *val, size_t val_len);

/* Tensors: shape ne[0..n_dims) in ggml order.  Data is filled with finite random values encoded in
 * the type (through its quantizer when it has one; random bytes for types sluice cannot encode).
 * `scale` bounds the values (uniform in [-scale, scale], or 1 ± scale for norm vectors: see gc_llama). */
gc_tensor *gc_tensor_add(gc_file *f, const char *name, uint32_t type, uint32_t n_dims, const uint64_t *ne,
                         float center, float scale);
gc_tensor *gc_find_tensor(gc_file *f, const char *name);
bool       gc_del_tensor(gc_file *f, const char *name);
/* Set element i of an F32 tensor (for NaN/Inf injection). */
void       gc_tensor_set_f32(gc_tensor *t, uint64_t i, float v);

/* Serialise.  0, or -1 when memory runs out.  gc_image_free releases it. */
int  gc_build(const gc_file *f, gc_image *img);
void gc_image_free(gc_image *img);
/* Write the first len bytes of img to path (len > img->len: the whole image).  0 or -errno. */
int  gc_write_file(const gc_image *img, size_t len, const char *path);

/* A complete valid tiny llama model.  Zero fields take the defaults in brackets. */
typedef struct gc_llama_cfg {
    int      dim;          /* [32] multiple of 32 */
    int      n_layers;     /* [1] */
    int      n_heads;      /* [2] */
    int      n_kv_heads;   /* [1] */
    int      ffn;          /* [64] */
    int      ctx;          /* [64] llama.context_length */
    uint32_t wtype;        /* [F32 = 0] type of the 2-D matrices (F32, F16, BF16, Q8_0, Q4_0, ...) */
    uint64_t seed;         /* [1] */
} gc_llama_cfg;
/* Number of tokens in the vocabulary gc_llama writes (the embedding table has this many rows). */
int  gc_llama_vocab_size(void);
void gc_llama(gc_file *f, const gc_llama_cfg *cfg);

#endif
