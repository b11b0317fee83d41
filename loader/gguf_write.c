/* loader/gguf_write.c — streaming GGUF v3 writer (see gguf_write.h for the contract).
 *
 * On-disk layout produced (all little-endian):
 *   "GGUF" u32 version=3 u64 n_tensors u64 n_kv
 *   n_kv × { str key, u32 type, value }           str = u64 len + bytes (no NUL)
 *   n_tensors × { str name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset }
 *   zero padding to the alignment
 *   tensor data, each tensor zero-padded to the alignment; offsets are relative to the data start.
 * The two counts are not known until the key/value and tensor phases are over, so the header is
 * written with zeros and patched with pwrite() when the data phase starts.
 */
#include "loader/gguf_write.h"

#include "kernels/types.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_VERSION       3u
#define HEADER_BYTES       24u           /* magic + version + n_tensors + n_kv */
#define MAX_NAME           63u           /* ggml's GGML_MAX_NAME is 64 including the NUL */
#define CACHE_WINDOW       (64ull << 20) /* DROP_CACHE granularity */

enum phase { PH_KV, PH_ARRAY, PH_TENSORS, PH_DATA, PH_FAILED };

struct sl_gguf_writer {
    int       fd;
    unsigned  flags;
    uint32_t  alignment;
    enum phase phase;
    int       err;                 /* first error (negative errno), 0 while healthy */
    char      msg[SL_ERRLEN];
    char     *path, *tmp;

    unsigned char *buf;            /* SL_GGUF_WRITE_BUF bytes */
    size_t    buf_len;
    uint64_t  flushed;             /* bytes already handed to write(2) */

    uint64_t  n_kv;
    char    **keys;  size_t n_keys, cap_keys;       /* for the duplicate check */
    int       arr_type; uint64_t arr_left;          /* streaming array state */

    uint64_t  n_tensors;
    char    **names; size_t n_names, cap_names;     /* tensor names, for the duplicate check */
    uint64_t *tsize; size_t cap_tsize;              /* data bytes of each tensor */
    uint64_t  data_total_padded;                    /* sum of aligned sizes = next relative offset */
    uint64_t  data_total;                           /* sum of sizes, no padding */

    uint64_t  data_start;          /* absolute offset of the data section (valid in PH_DATA) */
    uint64_t  cur, cur_done;       /* tensor being streamed and its bytes so far */
    uint64_t  data_written;
    uint64_t  cache_next;          /* DROP_CACHE: end of the next window to hand to writeback */
};

static const unsigned char zeros[256];

/* Record the first error and its message; later errors keep the first.  Returns the errno. */
static int wfail(sl_gguf_writer *w, int e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int wfail(sl_gguf_writer *w, int e, const char *fmt, ...)
{
    if (w->err) return w->err;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg, sizeof w->msg, fmt, ap);
    va_end(ap);
    w->err = e;
    w->phase = PH_FAILED;
    return e;
}

/* Human text for a write-side errno: the generic strerror plus what it usually means here. */
static const char *why(int e)
{
    switch (e) {
    case ENOSPC: return "no space left on device (disk full)";
    case EDQUOT: return "disk quota exceeded";
    case EFBIG:  return "file too large (file size limit)";
    case EIO:    return "I/O error (device failed)";
    default:     return strerror(e);
    }
}

/* write(2) all n bytes at the current file position, retrying EINTR and short writes.
 * Returns 0 or -errno (a write that makes no progress is reported as -ENOSPC, as POSIX allows). */
static int write_all(int fd, const void *p, size_t n)
{
    const unsigned char *c = p;
    while (n > 0) {
        ssize_t k = write(fd, c, n > (1u << 30) ? (1u << 30) : n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (k == 0) return -ENOSPC;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

/* DROP_CACHE: once a whole 64 MiB window is written, start its writeback without waiting; then
 * wait for the window before it (its writeback was started one window ago, so this rarely blocks)
 * and drop it from the page cache.  Unsupported filesystems just turn the feature off. */
static int cache_advance(sl_gguf_writer *w)
{
    while (w->flushed >= w->cache_next) {
        uint64_t start = w->cache_next - CACHE_WINDOW;
        if (sync_file_range(w->fd, (off64_t)start, CACHE_WINDOW, SYNC_FILE_RANGE_WRITE) != 0) {
            if (errno == EIO || errno == ENOSPC)
                return wfail(w, -errno, "writeback of %s: %s", w->tmp, why(errno));
            w->flags &= ~(unsigned)SL_GGUF_WRITE_DROP_CACHE;
            return 0;
        }
        if (start >= CACHE_WINDOW) {
            uint64_t prev = start - CACHE_WINDOW;
            if (sync_file_range(w->fd, (off64_t)prev, CACHE_WINDOW, SYNC_FILE_RANGE_WAIT_BEFORE |
                                SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER) != 0) {
                if (errno == EIO || errno == ENOSPC)
                    return wfail(w, -errno, "writeback of %s: %s", w->tmp, why(errno));
            }
            (void)posix_fadvise(w->fd, (off_t)prev, CACHE_WINDOW, POSIX_FADV_DONTNEED);
        }
        w->cache_next += CACHE_WINDOW;
    }
    return 0;
}

/* Hand the buffered bytes to the kernel. */
static int flush(sl_gguf_writer *w)
{
    if (w->buf_len == 0) return 0;
    int rc = write_all(w->fd, w->buf, w->buf_len);
    if (rc) return wfail(w, rc, "write %s: %s after %" PRIu64 " bytes", w->tmp, why(-rc), w->flushed);
    w->flushed += w->buf_len;
    w->buf_len = 0;
    return (w->flags & SL_GGUF_WRITE_DROP_CACHE) ? cache_advance(w) : 0;
}

/* Append n bytes to the file through the buffer; large pieces bypass it (no extra copy). */
static int put(sl_gguf_writer *w, const void *p, size_t n)
{
    if (w->err) return w->err;
    if (w->buf_len + n > SL_GGUF_WRITE_BUF) {
        int rc = flush(w);
        if (rc) return rc;
    }
    if (n >= SL_GGUF_WRITE_BUF) {
        int rc = write_all(w->fd, p, n);
        if (rc) return wfail(w, rc, "write %s: %s after %" PRIu64 " bytes", w->tmp, why(-rc), w->flushed);
        w->flushed += n;
        return (w->flags & SL_GGUF_WRITE_DROP_CACHE) ? cache_advance(w) : 0;
    }
    memcpy(w->buf + w->buf_len, p, n);
    w->buf_len += n;
    return 0;
}

static int put_u32(sl_gguf_writer *w, uint32_t v) { return put(w, &v, 4); }
static int put_u64(sl_gguf_writer *w, uint64_t v) { return put(w, &v, 8); }
static int put_str(sl_gguf_writer *w, const char *s, uint64_t n)
{
    int rc = put_u64(w, n);
    return rc ? rc : put(w, s, (size_t)n);
}
static int put_zeros(sl_gguf_writer *w, uint64_t n)
{
    while (n > 0) {
        size_t k = n > sizeof zeros ? sizeof zeros : (size_t)n;
        int rc = put(w, zeros, k);
        if (rc) return rc;
        n -= k;
    }
    return 0;
}

static uint64_t pos(const sl_gguf_writer *w) { return w->flushed + w->buf_len; }
static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }

/* Byte size of one element of a scalar GGUF value type; 0 for strings, arrays and unknown ids. */
static size_t vsize(int t)
{
    switch (t) {
    case SL_GGUF_U8: case SL_GGUF_I8: case SL_GGUF_BOOL: return 1;
    case SL_GGUF_U16: case SL_GGUF_I16: return 2;
    case SL_GGUF_U32: case SL_GGUF_I32: case SL_GGUF_F32: return 4;
    case SL_GGUF_U64: case SL_GGUF_I64: case SL_GGUF_F64: return 8;
    default: return 0;
    }
}

/* Append a copy of s to a growable string list. */
static int list_add(char ***list, size_t *n, size_t *cap, const char *s, size_t len)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        char **nl = realloc(*list, nc * sizeof *nl);
        if (!nl) return -ENOMEM;
        *list = nl;
        *cap = nc;
    }
    char *c = malloc(len + 1);
    if (!c) return -ENOMEM;
    memcpy(c, s, len);
    c[len] = 0;
    (*list)[(*n)++] = c;
    return 0;
}

static bool list_has(char **list, size_t n, const char *s, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(list[i]) == len && memcmp(list[i], s, len) == 0) return true;
    return false;
}

int sl_gguf_writer_open(sl_gguf_writer **out, const char *path, uint32_t alignment, unsigned flags,
                        char *err, size_t errlen)
{
    if (err && errlen) err[0] = 0;
    if (!path || !*path || alignment < 8 || alignment > (1u << 16) || (alignment & (alignment - 1))) {
        if (err) snprintf(err, errlen, "gguf writer: bad arguments (path %s, alignment %u)",
                          path ? path : "(null)", alignment);
        return -EINVAL;
    }
    sl_gguf_writer *w = calloc(1, sizeof *w);
    size_t pl = strlen(path);
    if (w) {
        w->path = strdup(path);
        w->tmp = malloc(pl + 5);
        w->buf = malloc(SL_GGUF_WRITE_BUF);
    }
    if (!w || !w->path || !w->tmp || !w->buf) {
        if (w) { free(w->path); free(w->tmp); free(w->buf); free(w); }
        if (err) snprintf(err, errlen, "gguf writer: out of memory");
        return -ENOMEM;
    }
    memcpy(w->tmp, path, pl);
    memcpy(w->tmp + pl, ".tmp", 5);
    w->alignment = alignment;
    w->flags = flags;
    w->cache_next = CACHE_WINDOW;
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        int e = errno;
        if (err) snprintf(err, errlen, "create %s: %s", w->tmp, strerror(e));
        free(w->path); free(w->tmp); free(w->buf); free(w);
        return -e;
    }
    /* Counts are placeholders, patched when the data phase starts. */
    static const unsigned char head[HEADER_BYTES] = { 'G', 'G', 'U', 'F', GGUF_VERSION, 0, 0, 0 };
    put(w, head, sizeof head);
    *out = w;
    return 0;
}

/* Common start of every key/value pair: phase and key checks, then the key and the type id. */
static int kv_begin(sl_gguf_writer *w, const char *key, int type)
{
    if (w->err) return w->err;
    if (w->phase != PH_KV)
        return wfail(w, -EINVAL, "gguf writer: key %s added after the tensor infos or inside an array", key);
    size_t len = key ? strlen(key) : 0;
    if (len == 0 || len > 65535)
        return wfail(w, -EINVAL, "gguf writer: empty or over-long key");
    if (list_has(w->keys, w->n_keys, key, len))
        return wfail(w, -EINVAL, "gguf writer: duplicate key %s", key);
    if (list_add(&w->keys, &w->n_keys, &w->cap_keys, key, len))
        return wfail(w, -ENOMEM, "gguf writer: out of memory");
    w->n_kv++;
    int rc = put_str(w, key, len);
    return rc ? rc : put_u32(w, (uint32_t)type);
}

static int kv_scalar(sl_gguf_writer *w, const char *key, int type, const void *v)
{
    int rc = kv_begin(w, key, type);
    return rc ? rc : put(w, v, vsize(type));
}

int sl_gguf_writer_kv_u8 (sl_gguf_writer *w, const char *k, uint8_t v)  { return kv_scalar(w, k, SL_GGUF_U8, &v); }
int sl_gguf_writer_kv_i8 (sl_gguf_writer *w, const char *k, int8_t v)   { return kv_scalar(w, k, SL_GGUF_I8, &v); }
int sl_gguf_writer_kv_u16(sl_gguf_writer *w, const char *k, uint16_t v) { return kv_scalar(w, k, SL_GGUF_U16, &v); }
int sl_gguf_writer_kv_i16(sl_gguf_writer *w, const char *k, int16_t v)  { return kv_scalar(w, k, SL_GGUF_I16, &v); }
int sl_gguf_writer_kv_u32(sl_gguf_writer *w, const char *k, uint32_t v) { return kv_scalar(w, k, SL_GGUF_U32, &v); }
int sl_gguf_writer_kv_i32(sl_gguf_writer *w, const char *k, int32_t v)  { return kv_scalar(w, k, SL_GGUF_I32, &v); }
int sl_gguf_writer_kv_u64(sl_gguf_writer *w, const char *k, uint64_t v) { return kv_scalar(w, k, SL_GGUF_U64, &v); }
int sl_gguf_writer_kv_i64(sl_gguf_writer *w, const char *k, int64_t v)  { return kv_scalar(w, k, SL_GGUF_I64, &v); }
int sl_gguf_writer_kv_f32(sl_gguf_writer *w, const char *k, float v)    { return kv_scalar(w, k, SL_GGUF_F32, &v); }
int sl_gguf_writer_kv_f64(sl_gguf_writer *w, const char *k, double v)   { return kv_scalar(w, k, SL_GGUF_F64, &v); }
int sl_gguf_writer_kv_bool(sl_gguf_writer *w, const char *k, bool v)
{
    uint8_t b = v ? 1 : 0;
    return kv_scalar(w, k, SL_GGUF_BOOL, &b);
}

int sl_gguf_writer_kv_strn(sl_gguf_writer *w, const char *key, const char *v, uint64_t len)
{
    int rc = kv_begin(w, key, SL_GGUF_STRING);
    return rc ? rc : put_str(w, v, len);
}

int sl_gguf_writer_kv_str(sl_gguf_writer *w, const char *key, const char *v)
{
    return sl_gguf_writer_kv_strn(w, key, v, strlen(v));
}

int sl_gguf_writer_arr_begin(sl_gguf_writer *w, const char *key, int elem_type, uint64_t n)
{
    if (w->err) return w->err;
    if (elem_type != SL_GGUF_STRING && vsize(elem_type) == 0)
        return wfail(w, -EINVAL, "gguf writer: key %s: unsupported array element type %d", key, elem_type);
    int rc = kv_begin(w, key, SL_GGUF_ARRAY);
    if (!rc) rc = put_u32(w, (uint32_t)elem_type);
    if (!rc) rc = put_u64(w, n);
    if (rc) return rc;
    w->arr_type = elem_type;
    w->arr_left = n;
    w->phase = n ? PH_ARRAY : PH_KV;
    return 0;
}

int sl_gguf_writer_arr_push_str(sl_gguf_writer *w, const char *s, uint64_t len)
{
    if (w->err) return w->err;
    if (w->phase != PH_ARRAY || w->arr_type != SL_GGUF_STRING || w->arr_left == 0)
        return wfail(w, -EINVAL, "gguf writer: string pushed outside a string array, or too many");
    int rc = put_str(w, s, len);
    if (rc) return rc;
    if (--w->arr_left == 0) w->phase = PH_KV;
    return 0;
}

int sl_gguf_writer_arr_push_raw(sl_gguf_writer *w, const void *elems, uint64_t count)
{
    if (w->err) return w->err;
    if (w->phase != PH_ARRAY || w->arr_type == SL_GGUF_STRING || count > w->arr_left)
        return wfail(w, -EINVAL, "gguf writer: elements pushed outside a numeric array, or too many");
    size_t es = vsize(w->arr_type);
    const unsigned char *p = elems;
    uint64_t bytes = count * es;
    while (bytes > 0) {   /* put() takes size_t; split so that 32-bit size_t never truncates */
        size_t k = bytes > (1u << 30) ? (1u << 30) : (size_t)bytes;
        int rc = put(w, p, k);
        if (rc) return rc;
        p += k;
        bytes -= k;
    }
    w->arr_left -= count;
    if (w->arr_left == 0) w->phase = PH_KV;
    return 0;
}

int sl_gguf_writer_kv_arr(sl_gguf_writer *w, const char *key, int elem_type, const void *data, uint64_t n)
{
    if (elem_type == SL_GGUF_STRING) return wfail(w, -EINVAL, "gguf writer: key %s: use kv_arr_str", key);
    int rc = sl_gguf_writer_arr_begin(w, key, elem_type, n);
    return rc || n == 0 ? rc : sl_gguf_writer_arr_push_raw(w, data, n);
}

int sl_gguf_writer_kv_arr_str(sl_gguf_writer *w, const char *key, const sl_str *v, uint64_t n)
{
    int rc = sl_gguf_writer_arr_begin(w, key, SL_GGUF_STRING, n);
    for (uint64_t i = 0; !rc && i < n; i++) rc = sl_gguf_writer_arr_push_str(w, v[i].ptr, v[i].len);
    return rc;
}

int sl_gguf_writer_copy_kv(sl_gguf_writer *w, const sl_gguf *src, int64_t kv)
{
    if (w->err) return w->err;
    sl_str k = sl_gguf_key(src, kv);
    char key[1024];
    if (k.len == 0 || k.len >= sizeof key)
        return wfail(w, -EINVAL, "gguf writer: copy: no key %" PRId64 " (or key longer than %zu bytes)",
                     kv, sizeof key - 1);
    memcpy(key, k.ptr, k.len);
    key[k.len] = 0;
    int t = sl_gguf_kv_type(src, kv);
    switch (t) {
    case SL_GGUF_STRING: {
        sl_str s;
        if (!sl_gguf_get_str(src, key, &s)) break;
        return sl_gguf_writer_kv_strn(w, key, s.ptr, s.len);
    }
    case SL_GGUF_BOOL: {
        bool b;
        if (!sl_gguf_get_bool(src, key, &b)) break;
        return sl_gguf_writer_kv_bool(w, key, b);
    }
    case SL_GGUF_F32: {
        float f;
        if (!sl_gguf_get_f32(src, key, &f)) break;
        return sl_gguf_writer_kv_f32(w, key, f);
    }
    case SL_GGUF_F64: {
        /* The reader exposes scalars only as f32; an f64 scalar is re-widened (exact for every value
         * an f32 can hold, which covers what llama.cpp writes). */
        float f;
        if (!sl_gguf_get_f32(src, key, &f)) break;
        return sl_gguf_writer_kv_f64(w, key, f);
    }
    case SL_GGUF_U8: case SL_GGUF_U16: case SL_GGUF_U32: case SL_GGUF_U64: {
        uint64_t u;
        if (!sl_gguf_get_u64(src, key, &u)) break;
        return kv_scalar(w, key, t, &u);        /* little-endian: the low bytes are the value */
    }
    case SL_GGUF_I8: case SL_GGUF_I16: case SL_GGUF_I32: case SL_GGUF_I64: {
        int64_t i;
        if (!sl_gguf_get_i64(src, key, &i)) break;
        return kv_scalar(w, key, t, &i);
    }
    case SL_GGUF_ARRAY: {
        int et;
        uint64_t n;
        if (!sl_gguf_get_arr(src, key, &et, &n)) break;
        if (et == SL_GGUF_STRING) {
            int rc = sl_gguf_writer_arr_begin(w, key, et, n);
            for (uint64_t i = 0; !rc && i < n; i++) {
                sl_str s = sl_gguf_arr_str(src, kv, i);
                rc = sl_gguf_writer_arr_push_str(w, s.ptr, s.len);
            }
            return rc;
        }
        if (vsize(et) == 0)
            return wfail(w, -ENOTSUP, "gguf writer: copy %s: arrays of type %d are not supported", key, et);
        size_t es = 0;
        const void *raw = sl_gguf_arr_raw(src, kv, &es);
        if (!raw && n > 0) break;
        return sl_gguf_writer_kv_arr(w, key, et, raw, n);
    }
    default:
        break;
    }
    return wfail(w, -EINVAL, "gguf writer: copy %s: cannot read value of type %d", key, t);
}

int sl_gguf_writer_add_tensor(sl_gguf_writer *w, const char *name, int type, int n_dims,
                              const int64_t *ne, uint64_t *nbytes)
{
    if (w->err) return w->err;
    if (w->phase == PH_KV) w->phase = PH_TENSORS;
    if (w->phase != PH_TENSORS)
        return wfail(w, -EINVAL, "gguf writer: tensor %s declared after data or inside an array", name);
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len > MAX_NAME)
        return wfail(w, -EINVAL, "gguf writer: tensor name empty or longer than %u bytes", MAX_NAME);
    const sl_type_info *ti = sl_type_get(type);
    if (!ti || ti->blck <= 0 || ti->bytes <= 0)
        return wfail(w, -EINVAL, "gguf writer: tensor %s: unknown type %d", name, type);
    if (n_dims < 1 || n_dims > 4)
        return wfail(w, -EINVAL, "gguf writer: tensor %s: %d dims (1..4)", name, n_dims);
    uint64_t rows = 1;
    for (int i = 0; i < n_dims; i++) {
        if (ne[i] < 1 || ne[i] > INT64_MAX / 2)
            return wfail(w, -EINVAL, "gguf writer: tensor %s: bad dim ne[%d]=%" PRId64, name, i, ne[i]);
        if (i > 0) {
            if (rows > UINT64_MAX / (uint64_t)ne[i]) return wfail(w, -EOVERFLOW, "gguf writer: tensor %s too large", name);
            rows *= (uint64_t)ne[i];
        }
    }
    if (ne[0] % ti->blck)
        return wfail(w, -EINVAL, "gguf writer: tensor %s: row length %" PRId64 " is not a multiple of "
                     "the %s block size %d", name, ne[0], ti->name, ti->blck);
    uint64_t row = (uint64_t)(ne[0] / ti->blck) * (uint64_t)ti->bytes;
    if (rows > (UINT64_MAX / 4) / row) return wfail(w, -EOVERFLOW, "gguf writer: tensor %s too large", name);
    uint64_t size = row * rows;
    if (list_has(w->names, w->n_names, name, len))
        return wfail(w, -EINVAL, "gguf writer: duplicate tensor name %s", name);
    if (w->n_tensors == w->cap_tsize) {
        size_t nc = w->cap_tsize ? w->cap_tsize * 2 : 256;
        uint64_t *ns = realloc(w->tsize, nc * sizeof *ns);
        if (!ns) return wfail(w, -ENOMEM, "gguf writer: out of memory");
        w->tsize = ns;
        w->cap_tsize = nc;
    }
    if (list_add(&w->names, &w->n_names, &w->cap_names, name, len))
        return wfail(w, -ENOMEM, "gguf writer: out of memory");
    w->tsize[w->n_tensors++] = size;

    int rc = put_str(w, name, len);
    if (!rc) rc = put_u32(w, (uint32_t)n_dims);
    for (int i = 0; !rc && i < n_dims; i++) rc = put_u64(w, (uint64_t)ne[i]);
    if (!rc) rc = put_u32(w, (uint32_t)type);
    if (!rc) rc = put_u64(w, w->data_total_padded);
    if (rc) return rc;
    w->data_total_padded += align_up(size, w->alignment);
    w->data_total += size;
    if (nbytes) *nbytes = size;
    return 0;
}

uint64_t sl_gguf_writer_total_size(sl_gguf_writer *w)
{
    uint64_t start = w->phase == PH_DATA ? w->data_start : align_up(pos(w), w->alignment);
    return start + w->data_total_padded;
}

uint64_t sl_gguf_writer_data_written(const sl_gguf_writer *w) { return w->data_written; }
uint64_t sl_gguf_writer_data_total(const sl_gguf_writer *w) { return w->data_total; }
const char *sl_gguf_writer_error(const sl_gguf_writer *w) { return w->msg; }
const char *sl_gguf_writer_tmp_path(const sl_gguf_writer *w) { return w->tmp; }

/* Close the metadata: pad to the alignment, patch the counts, reserve the file if asked. */
static int begin_data(sl_gguf_writer *w)
{
    if (w->phase == PH_ARRAY)
        return wfail(w, -EINVAL, "gguf writer: array ended early (%" PRIu64 " elements missing)", w->arr_left);
    int rc = put_zeros(w, align_up(pos(w), w->alignment) - pos(w));
    if (!rc) rc = flush(w);
    if (rc) return rc;
    w->data_start = w->flushed;
    uint64_t counts[2] = { w->n_tensors, w->n_kv };
    ssize_t k;
    do k = pwrite(w->fd, counts, sizeof counts, 8); while (k < 0 && errno == EINTR);
    if (k != (ssize_t)sizeof counts)
        return wfail(w, k < 0 ? -errno : -EIO, "write %s header: %s", w->tmp, why(k < 0 ? errno : EIO));
    w->phase = PH_DATA;
    if (w->flags & SL_GGUF_WRITE_PREALLOCATE) {
        uint64_t total = w->data_start + w->data_total_padded;
        if (fallocate(w->fd, 0, 0, (off_t)total) != 0) {
            int e = errno;
            if (e == ENOSPC || e == EDQUOT || e == EFBIG || e == EIO)
                return wfail(w, -e, "reserve %" PRIu64 " bytes for %s: %s", total, w->tmp, why(e));
            /* EOPNOTSUPP and friends: this filesystem cannot reserve; write errors will tell. */
        }
    }
    return 0;
}

int sl_gguf_writer_write(sl_gguf_writer *w, const void *buf, size_t n)
{
    if (w->err) return w->err;
    if (w->phase != PH_DATA) {
        int rc = begin_data(w);
        if (rc) return rc;
    }
    const unsigned char *p = buf;
    while (n > 0) {
        if (w->cur >= w->n_tensors)
            return wfail(w, -EINVAL, "gguf writer: %zu bytes written past the last tensor", n);
        uint64_t left = w->tsize[w->cur] - w->cur_done;
        size_t take = n < left ? n : (size_t)left;
        int rc = put(w, p, take);
        if (rc) return rc;
        p += take;
        n -= take;
        w->cur_done += take;
        w->data_written += take;
        if (w->cur_done == w->tsize[w->cur]) {
            rc = put_zeros(w, align_up(w->cur_done, w->alignment) - w->cur_done);
            if (rc) return rc;
            w->cur++;
            w->cur_done = 0;
        }
    }
    return 0;
}

static void destroy(sl_gguf_writer *w)
{
    for (size_t i = 0; i < w->n_keys; i++) free(w->keys[i]);
    for (size_t i = 0; i < w->n_names; i++) free(w->names[i]);
    free(w->keys);
    free(w->names);
    free(w->tsize);
    free(w->buf);
    free(w->path);
    free(w->tmp);
    free(w);
}

/* fsync the directory holding `path`, so that the rename itself is durable. */
static int sync_dir(const char *path)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash) { dir[0] = '.'; dir[1] = 0; }
    else if (slash == path) { dir[0] = '/'; dir[1] = 0; }
    else {
        size_t n = (size_t)(slash - path);
        if (n >= sizeof dir) return -ENAMETOOLONG;
        memcpy(dir, path, n);
        dir[n] = 0;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -errno;
    int rc = fsync(fd) == 0 || errno == EINVAL ? 0 : -errno;   /* some filesystems refuse dir fsync */
    close(fd);
    return rc;
}

int sl_gguf_writer_finish(sl_gguf_writer *w, char *err, size_t errlen)
{
    if (err && errlen) err[0] = 0;
    int rc = w->err;
    if (!rc && w->phase != PH_DATA) rc = begin_data(w);
    if (!rc && w->cur < w->n_tensors)
        rc = wfail(w, -EINVAL, "gguf writer: %s: only %" PRIu64 " of %" PRIu64 " tensor bytes were written",
                   w->tmp, w->data_written, w->data_total);
    if (!rc) rc = flush(w);
    /* fsync before rename: the name must never point at data that is not on the disk yet. */
    if (!rc && fsync(w->fd) != 0) rc = wfail(w, -errno, "fsync %s: %s", w->tmp, why(errno));
    if (!rc) {
        int fd = w->fd;
        w->fd = -1;
        if (close(fd) != 0) rc = wfail(w, -errno, "close %s: %s", w->tmp, why(errno));
    }
    if (!rc && rename(w->tmp, w->path) != 0)
        rc = wfail(w, -errno, "rename %s -> %s: %s", w->tmp, w->path, strerror(errno));
    if (rc) {
        if (w->fd >= 0) close(w->fd);
        unlink(w->tmp);
    } else {
        /* The file is complete and in place; a failed directory sync is still reported, because
         * the rename may not survive a crash, but the file is kept. */
        int drc = sync_dir(w->path);
        if (drc) rc = wfail(w, drc, "fsync directory of %s: %s", w->path, strerror(-drc));
    }
    if (rc && err) snprintf(err, errlen, "%s", w->msg);
    destroy(w);
    return rc;
}

void sl_gguf_writer_abort(sl_gguf_writer *w)
{
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    unlink(w->tmp);
    destroy(w);
}
