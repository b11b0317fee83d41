/* loader/gguf.c — GGUF v2/v3 reader with full validation.
 *
 * The file is parsed from an in-memory copy of its first bytes (header, key/values, tensor infos).
 * The parser never trusts a count or a length: every read goes through cur_take(), which fails
 * cleanly when the bytes are not there.  When the copy is too short but the file is longer, the
 * parse is retried with a larger copy (metadata sizes are unknown up front; real files need 1 to
 * 10 MiB, the Llama 3 vocabulary being the largest).
 */
#include "loader/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/types.h"
#include "loader/errmsg.h"
#include "loader/fileio.h"

#define GGUF_MAGIC 0x46554747u         /* "GGUF" little-endian */
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_META (1ull << 30)     /* refuse metadata sections over 1 GiB */
#define GGUF_MAX_NAME 256
#define GGUF_MAX_DIMS 4

/* Key text for messages: at most 64 bytes (a key may be up to the metadata size long, and a
 * precision that does not fit in int would make printf read to the first NUL). */
#define KEYF(s) (int)((s).len > 64 ? 64 : (s).len), (s).ptr

typedef struct kv_entry {
    sl_str   key;
    int      type;        /* value type */
    int      arr_type;    /* element type when type == ARRAY */
    uint64_t n;           /* element count when type == ARRAY */
    uint64_t off;         /* offset of the value (for arrays: of the first element) in meta */
    uint32_t *str_off;    /* string arrays: offset of each element's u64 length prefix */
} kv_entry;

struct sl_gguf {
    char          *path;
    unsigned char *meta;        /* copy of bytes [0, data_offset) of the file */
    size_t         meta_len;
    uint64_t       file_size;
    uint64_t       data_offset;
    uint32_t       version;
    uint32_t       alignment;
    int64_t        n_kv;
    kv_entry      *kv;
    int64_t        n_tensors;
    sl_gguf_tensor *tensors;
    size_t         heap_bytes;
};

/* ---- parse cursor ---------------------------------------------------------------------------- */

typedef struct cursor {
    const unsigned char *buf;
    size_t len;          /* bytes available in buf */
    uint64_t file_size;  /* bytes in the file; len < file_size means "more can be read" */
    size_t pos;
    bool need_more;      /* set when a read ran past len but not past file_size */
    const char *path;
    char *err; size_t errlen;
} cursor;

static int fail(cursor *c, uint64_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(cursor *c, uint64_t at, const char *fmt, ...)
{
    if (c->err && c->errlen) {
        char msg[200];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        /* names in the message come from the file: sl_errf keeps it one printable line */
        sl_errf(c->err, c->errlen, -EINVAL, "gguf: %s%s%s at byte offset %" PRIu64,
                c->path && *c->path ? c->path : "", c->path && *c->path ? ": " : "", msg, at);
    }
    return -EINVAL;
}

/* Take n bytes at the cursor.  NULL when they are not all there: either the file is too short
 * (hard error, message written) or the buffer is (need_more set, caller retries with more). */
static const unsigned char *cur_take(cursor *c, uint64_t n, const char *what)
{
    if (n > c->len - c->pos) {
        if ((uint64_t)c->pos + n <= c->file_size && c->len < c->file_size)
            c->need_more = true;
        else
            fail(c, c->pos, "file truncated: %s needs %" PRIu64 " bytes, %" PRIu64 " left",
                 what, n, c->file_size > c->pos ? c->file_size - c->pos : 0);
        return NULL;
    }
    const unsigned char *p = c->buf + c->pos;
    c->pos += (size_t)n;
    return p;
}

/* Where the metadata must end: the file, or the 1 GiB limit on metadata if the file is larger. */
static uint64_t meta_end(const cursor *c) { return c->file_size < GGUF_MAX_META ? c->file_size : GGUF_MAX_META; }
static const char *meta_end_name(const cursor *c)
{
    return c->file_size < GGUF_MAX_META ? "end of the file" : "1 GiB metadata limit";
}

static bool rd_u32(cursor *c, uint32_t *v, const char *what)
{
    const unsigned char *p = cur_take(c, 4, what);
    if (!p) return false;
    memcpy(v, p, 4);
    return true;
}

static bool rd_u64(cursor *c, uint64_t *v, const char *what)
{
    const unsigned char *p = cur_take(c, 8, what);
    if (!p) return false;
    memcpy(v, p, 8);
    return true;
}

static bool rd_str(cursor *c, sl_str *s, const char *what)
{
    uint64_t n;
    size_t at = c->pos;
    if (!rd_u64(c, &n, what)) return false;
    if (n > c->file_size) {
        fail(c, at, "%s: string length %" PRIu64 " runs past the end of the file", what, n);
        return false;
    }
    const unsigned char *p = cur_take(c, n, what);
    if (!p) return false;
    s->ptr = (const char *)p;
    s->len = n;
    return true;
}

static size_t vtype_size(int t)
{
    switch (t) {
    case SL_GGUF_U8: case SL_GGUF_I8: case SL_GGUF_BOOL: return 1;
    case SL_GGUF_U16: case SL_GGUF_I16: return 2;
    case SL_GGUF_U32: case SL_GGUF_I32: case SL_GGUF_F32: return 4;
    case SL_GGUF_U64: case SL_GGUF_I64: case SL_GGUF_F64: return 8;
    default: return 0;
    }
}

static const char *vtype_name(int t)
{
    static const char *names[] = { "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
                                   "string", "array", "u64", "i64", "f64" };
    return t >= 0 && t < SL_GGUF_VTYPE_COUNT ? names[t] : "unknown";
}

bool sl_str_eq(sl_str s, const char *c)
{
    size_t n = strlen(c);
    return s.len == n && memcmp(s.ptr, c, n) == 0;
}

/* FNV-1a for the duplicate checks. */
static uint64_t hash_str(sl_str s)
{
    uint64_t h = 1469598103934665603ull;
    for (uint64_t i = 0; i < s.len; i++) h = (h ^ (unsigned char)s.ptr[i]) * 1099511628211ull;
    return h;
}

/* Returns true if any two of the n strings are equal; *dup gets the index of a duplicate. */
static int has_duplicate(const sl_str *names, size_t stride, int64_t n, int64_t *dup)
{
    if (n < 2) return 0;
    size_t cap = 16;
    while (cap < (size_t)n * 2) cap <<= 1;
    int64_t *slots = malloc(cap * sizeof *slots);
    if (!slots) return -ENOMEM;
    for (size_t i = 0; i < cap; i++) slots[i] = -1;
    int found = 0;
    for (int64_t i = 0; i < n && !found; i++) {
        const sl_str *s = (const sl_str *)((const char *)names + (size_t)i * stride);
        size_t h = (size_t)hash_str(*s) & (cap - 1);
        while (slots[h] >= 0) {
            const sl_str *o = (const sl_str *)((const char *)names + (size_t)slots[h] * stride);
            if (o->len == s->len && memcmp(o->ptr, s->ptr, s->len) == 0) { *dup = i; found = 1; break; }
            h = (h + 1) & (cap - 1);
        }
        if (!found) slots[h] = i;
    }
    free(slots);
    return found;
}

/* ---- parsing ---------------------------------------------------------------------------------- */

static int parse_kv(cursor *c, kv_entry *e, int64_t idx)
{
    size_t at = c->pos;
    char what[64];
    snprintf(what, sizeof what, "key of metadata entry %" PRId64, idx);
    if (!rd_str(c, &e->key, what)) return -1;
    if (e->key.len == 0) return fail(c, at, "metadata entry %" PRId64 " has an empty key", idx);
    uint32_t t;
    at = c->pos;
    if (!rd_u32(c, &t, "value type")) return -1;
    if (t >= SL_GGUF_VTYPE_COUNT)
        return fail(c, at, "key '%.*s': unknown value type %u", KEYF(e->key), t);
    e->type = (int)t;
    if (t == SL_GGUF_STRING) {
        sl_str s;
        e->off = c->pos;
        return rd_str(c, &s, "string value") ? 0 : -1;
    }
    if (t != SL_GGUF_ARRAY) {
        e->off = c->pos;
        return cur_take(c, vtype_size((int)t), "value") ? 0 : -1;
    }
    uint32_t et;
    uint64_t n;
    at = c->pos;
    if (!rd_u32(c, &et, "array element type") || !rd_u64(c, &n, "array length")) return -1;
    if (et >= SL_GGUF_VTYPE_COUNT || et == SL_GGUF_ARRAY)
        return fail(c, at, "key '%.*s': unsupported array element type %u (%s)", KEYF(e->key), et, et == SL_GGUF_ARRAY ? "nested array" : "unknown");
    e->arr_type = (int)et;
    e->n = n;
    e->off = c->pos;
    if (et != SL_GGUF_STRING) {
        size_t es = vtype_size((int)et);
        if (n > (meta_end(c) - c->pos) / es)
            return fail(c, at, "key '%.*s': array of %" PRIu64 " %s elements runs past the %s",
                        KEYF(e->key), n, vtype_name((int)et), meta_end_name(c));
        return cur_take(c, n * es, "array data") ? 0 : -1;
    }
    /* each string needs at least its 8-byte length */
    if (n > (meta_end(c) - c->pos) / 8)
        return fail(c, at, "key '%.*s': array of %" PRIu64 " strings runs past the %s",
                    KEYF(e->key), n, meta_end_name(c));
    /* Allocate only for strings the buffer can hold: a count that is plausible for a huge file must
     * not cost memory before its bytes have been read (the caller retries with a larger buffer). */
    if (n > (c->len - c->pos) / 8) { c->need_more = true; return -1; }
    e->str_off = malloc((n ? n : 1) * sizeof *e->str_off);
    if (!e->str_off) return -ENOMEM;
    for (uint64_t i = 0; i < n; i++) {
        sl_str s;
        e->str_off[i] = (uint32_t)c->pos;
        if (!rd_str(c, &s, "array string")) return -1;
    }
    return 0;
}

static int kv_find(const sl_gguf *g, const char *key)
{
    size_t n = strlen(key);
    for (int64_t i = 0; i < g->n_kv; i++)
        if (g->kv[i].key.len == n && memcmp(g->kv[i].key.ptr, key, n) == 0) return (int)i;
    return -1;
}

static int cmp_tensor_off(const void *a, const void *b)
{
    const sl_gguf_tensor *x = *(const sl_gguf_tensor *const *)a, *y = *(const sl_gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static void free_parts(sl_gguf *g)
{
    if (!g) return;
    if (g->kv)
        for (int64_t i = 0; i < g->n_kv; i++) free(g->kv[i].str_off);
    free(g->kv);
    free(g->tensors);
    free(g->meta);
    free(g->path);
    free(g);
}

/* Header: magic, version, counts.  The counts are bounded by the metadata room, so a hostile count
 * cannot make us allocate unboundedly.  0, or -EINVAL with the message set (or c->need_more). */
static int parse_header(cursor *c, uint32_t *version, uint64_t *n_tensors, uint64_t *n_kv)
{
    uint32_t magic;
    if (!rd_u32(c, &magic, "magic")) return -EINVAL;
    if (magic != GGUF_MAGIC) {
        /* llama.cpp's pre-GGUF formats wrote these magics as host-order u32s */
        bool old = magic == 0x67676d6cu || magic == 0x67676d66u || magic == 0x67676a74u;
        return fail(c, 0, "not a GGUF file (bad magic 0x%08x%s)", magic,
                    old ? ": an old GGML/GGMF/GGJT file, convert it to GGUF with llama.cpp" : "");
    }
    if (!rd_u32(c, version, "version")) return -EINVAL;
    if (*version != 2 && *version != 3) {
        /* a byte-swapped 2 or 3 is a big-endian file (llama.cpp can write those for s390x) */
        bool be = *version == 0x02000000u || *version == 0x03000000u;
        return fail(c, 4, "unsupported GGUF version %u (%s)", *version,
                    be ? "a big-endian GGUF file: sluice reads little-endian files only" : "sluice reads v2 and v3");
    }
    if (!rd_u64(c, n_tensors, "tensor count") || !rd_u64(c, n_kv, "metadata count")) return -EINVAL;
    /* A KV pair takes at least 8+1+4+1 bytes, a tensor info at least 8+1+4+8+4+8: allocate only once
     * the buffer holds that many minimal entries (else ask for a larger buffer). */
    uint64_t room = meta_end(c) - c->pos;
    if (*n_kv > room / 14)
        return fail(c, 16, "metadata count %" PRIu64 " cannot fit in a file of %" PRIu64 " bytes (truncated or corrupt)", *n_kv, c->file_size);
    if (*n_tensors > (room - *n_kv * 14) / 33)
        return fail(c, 8, "tensor count %" PRIu64 " cannot fit in a file of %" PRIu64 " bytes (truncated or corrupt)", *n_tensors, c->file_size);
    if (*n_kv * 14 + *n_tensors * 33 > c->len - c->pos) { c->need_more = true; return -EINVAL; }
    return 0;
}

/* general.alignment (u32, a power of two up to 1 MiB), or the default. */
static int read_alignment(cursor *c, sl_gguf *g)
{
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    int ai = kv_find(g, "general.alignment");
    if (ai < 0) return 0;
    uint32_t a;
    if (g->kv[ai].type != SL_GGUF_U32) return fail(c, g->kv[ai].off, "general.alignment must be u32, is %s", vtype_name(g->kv[ai].type));
    memcpy(&a, c->buf + g->kv[ai].off, 4);
    if (a == 0 || (a & (a - 1)) || a > (1u << 20)) return fail(c, g->kv[ai].off, "general.alignment %u is not a power of two in [1, 1 MiB]", a);
    g->alignment = a;
    return 0;
}

/* One tensor info: name, dimensions, type, offset; its byte size computed without overflow. */
static int parse_tensor_info(cursor *c, const sl_gguf *g, uint64_t i, sl_gguf_tensor *t)
{
    size_t at = c->pos;
    uint32_t nd, type;
    if (!rd_str(c, &t->name, "tensor name")) return -EINVAL;
    if (t->name.len == 0 || t->name.len >= GGUF_MAX_NAME)
        return fail(c, at, "tensor %" PRIu64 ": name length %" PRIu64 " not in [1, %d)", i, t->name.len, GGUF_MAX_NAME);
    const int nl = (int)t->name.len;
    at = c->pos;
    if (!rd_u32(c, &nd, "tensor n_dims")) return -EINVAL;
    if (nd < 1 || nd > GGUF_MAX_DIMS) return fail(c, at, "tensor '%.*s': %u dimensions (1..4 allowed)", nl, t->name.ptr, nd);
    t->n_dims = (int)nd;
    t->ne[0] = t->ne[1] = t->ne[2] = t->ne[3] = 1;
    int64_t nelem = 1;
    for (uint32_t k = 0; k < nd; k++) {
        uint64_t ne;
        at = c->pos;
        if (!rd_u64(c, &ne, "tensor dimension")) return -EINVAL;
        if (ne == 0 || ne > (uint64_t)INT64_MAX / (uint64_t)nelem)
            return fail(c, at, "tensor '%.*s': dimension %u = %" PRIu64 " is zero or overflows the element count", nl, t->name.ptr, k, ne);
        t->ne[k] = (int64_t)ne;
        nelem *= (int64_t)ne;
    }
    at = c->pos;
    if (!rd_u32(c, &type, "tensor type")) return -EINVAL;
    const sl_type_info *ti = sl_type_get((int)type);
    if (!ti) return fail(c, at, "tensor '%.*s': unknown ggml type id %u", nl, t->name.ptr, type);
    t->type = (int)type;
    if (t->ne[0] % ti->blck)
        return fail(c, at, "tensor '%.*s': row length %" PRId64 " is not a multiple of the %s block size %d", nl, t->name.ptr, t->ne[0], ti->name, ti->blck);
    uint64_t blocks = (uint64_t)(t->ne[0] / ti->blck);
    if (blocks > UINT64_MAX / (uint64_t)ti->bytes)
        return fail(c, at, "tensor '%.*s': row of %" PRId64 " elements overflows its byte size", nl, t->name.ptr, t->ne[0]);
    uint64_t row = blocks * (uint64_t)ti->bytes;
    uint64_t rows = (uint64_t)(nelem / t->ne[0]);
    if (rows && row > UINT64_MAX / rows) return fail(c, at, "tensor '%.*s': byte size overflows", nl, t->name.ptr);
    t->nbytes = row * rows;
    at = c->pos;
    if (!rd_u64(c, &t->offset, "tensor offset")) return -EINVAL;
    if (t->offset % g->alignment)
        return fail(c, at, "tensor '%.*s': data offset %" PRIu64 " is not a multiple of the alignment %u", nl, t->name.ptr, t->offset, g->alignment);
    return 0;
}

/* The data section starts at the next multiple of the alignment after the metadata: make the offsets
 * absolute, check every tensor lies inside the file and that no two overlap (one write would alias
 * another's data). */
static int place_tensors(cursor *c, sl_gguf *g)
{
    const uint64_t file_size = c->file_size;
    uint64_t data = ((uint64_t)c->pos + g->alignment - 1) / g->alignment * g->alignment;
    if (data > GGUF_MAX_META) return fail(c, c->pos, "metadata section of %" PRIu64 " bytes is over the 1 GiB limit", data);
    if (g->n_tensors && data > file_size)
        return fail(c, c->pos, "file truncated: tensor data would start at %" PRIu64 " but the file has %" PRIu64 " bytes", data, file_size);
    g->data_offset = data;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        sl_gguf_tensor *t = &g->tensors[i];
        /* data <= file_size here (checked above), so neither subtraction wraps */
        if (t->offset > file_size - data || t->nbytes > file_size - data - t->offset)
            return fail(c, data, "tensor '%.*s': %" PRIu64 " bytes at data offset %" PRIu64 " run past the end of the file "
                        "(%" PRIu64 " bytes, data section at %" PRIu64 ")",
                        (int)t->name.len, t->name.ptr, t->nbytes, t->offset, file_size, data);
        t->offset += data;
    }
    if (g->n_tensors < 2) return 0;
    const sl_gguf_tensor **ord = malloc((size_t)g->n_tensors * sizeof *ord);
    if (!ord) return -ENOMEM;
    for (int64_t i = 0; i < g->n_tensors; i++) ord[i] = &g->tensors[i];
    qsort(ord, (size_t)g->n_tensors, sizeof *ord, cmp_tensor_off);
    int rc = 0;
    for (int64_t i = 1; i < g->n_tensors && !rc; i++)
        if (ord[i - 1]->offset + ord[i - 1]->nbytes > ord[i]->offset)
            rc = fail(c, ord[i]->offset, "tensors '%.*s' and '%.*s' overlap",
                      (int)ord[i - 1]->name.len, ord[i - 1]->name.ptr, (int)ord[i]->name.len, ord[i]->name.ptr);
    free(ord);
    return rc;
}

/* Keep only the metadata bytes (the read buffer may be several times larger): copy them to an exact
 * allocation and rebase the views while the old buffer is still valid; frees buf on success. */
static int keep_metadata(cursor *c, sl_gguf *g, unsigned char *buf, const char *path)
{
    size_t keep = c->pos;
    unsigned char *m = malloc(keep ? keep : 1);
    if (!m) return -ENOMEM;
    char *p = strdup(path ? path : "");
    if (!p) { free(m); return -ENOMEM; }
    memcpy(m, buf, keep);
    for (int64_t i = 0; i < g->n_kv; i++) g->kv[i].key.ptr = (const char *)m + ((const unsigned char *)g->kv[i].key.ptr - buf);
    for (int64_t i = 0; i < g->n_tensors; i++) g->tensors[i].name.ptr = (const char *)m + ((const unsigned char *)g->tensors[i].name.ptr - buf);
    free(buf);
    g->meta = m;
    g->meta_len = keep;
    g->path = p;
    g->heap_bytes = keep + (size_t)g->n_kv * sizeof(kv_entry) + (size_t)g->n_tensors * sizeof(sl_gguf_tensor);
    for (int64_t i = 0; i < g->n_kv; i++)
        if (g->kv[i].str_off) g->heap_bytes += g->kv[i].n * sizeof(uint32_t);
    return 0;
}

/* Parse buf[0..len) of a file_size-byte file.  Returns 0, -EAGAIN (need a longer buffer), or
 * another negative errno with the message in err.  On success buf has been freed (the metadata was
 * copied out); on failure the caller still owns it. */
static int parse(unsigned char *buf, size_t len, uint64_t file_size, const char *path,
                 sl_gguf **out, char *err, size_t errlen)
{
    /* Never look past the metadata limit: keeps every offset below 1 GiB (str_off is 32-bit). */
    if (len > GGUF_MAX_META) len = GGUF_MAX_META;
    cursor c = { .buf = buf, .len = len, .file_size = file_size, .path = path, .err = err, .errlen = errlen };
    sl_gguf *g = calloc(1, sizeof *g);
    if (!g) return -ENOMEM;
    uint32_t version = 0;
    uint64_t n_tensors = 0, n_kv = 0;
    int64_t dup;
    int rc = parse_header(&c, &version, &n_tensors, &n_kv);
    if (rc) goto out;
    g->version = version;
    g->file_size = file_size;
    g->kv = calloc(n_kv ? n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors) { rc = -ENOMEM; goto out; }
    g->n_kv = (int64_t)n_kv;
    for (uint64_t i = 0; i < n_kv && !rc; i++) rc = parse_kv(&c, &g->kv[i], (int64_t)i);
    if (rc) { rc = rc == -ENOMEM ? rc : -EINVAL; goto out; }
    rc = has_duplicate(&g->kv[0].key, sizeof(kv_entry), g->n_kv, &dup);
    if (rc > 0) rc = fail(&c, 24, "duplicate metadata key '%.*s'", KEYF(g->kv[dup].key));
    if (rc || (rc = read_alignment(&c, g))) goto out;
    for (uint64_t i = 0; i < n_tensors && !rc; i++) rc = parse_tensor_info(&c, g, i, &g->tensors[i]);
    if (rc) goto out;
    g->n_tensors = (int64_t)n_tensors;
    rc = has_duplicate(&g->tensors[0].name, sizeof(sl_gguf_tensor), g->n_tensors, &dup);
    if (rc > 0) rc = fail(&c, c.pos, "duplicate tensor name '%.*s'", (int)g->tensors[dup].name.len, g->tensors[dup].name.ptr);
    if (rc || (rc = place_tensors(&c, g)) || (rc = keep_metadata(&c, g, buf, path))) goto out;
    *out = g;
    return 0;
out:
    if (c.need_more && rc == -EINVAL) rc = -EAGAIN;
    free_parts(g);
    return rc;
}

int sl_gguf_parse(const void *buf, size_t len, uint64_t file_size, sl_gguf **out, char *err, size_t errlen)
{
    if (err && errlen) err[0] = 0;
    if (len > file_size) len = (size_t)file_size;
    unsigned char *copy = malloc(len ? len : 1);
    if (!copy) return -ENOMEM;
    memcpy(copy, buf, len);
    int rc = parse(copy, len, file_size, "", out, err, errlen);
    if (rc) free(copy);
    if (rc == -EAGAIN) {   /* the caller gave us all it has: that is a truncated file */
        if (err && errlen) snprintf(err, errlen, "gguf: metadata runs past the %zu bytes given", len);
        rc = -EINVAL;
    }
    return rc;
}

int sl_gguf_open(const char *path, sl_gguf **out, char *err, size_t errlen)
{
    if (err && errlen) err[0] = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (err) snprintf(err, errlen, "gguf: cannot open %s: %s", path, strerror(e));
        return -e;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {   /* st is unset then: report errno, don't test st_mode */
        int e = errno;
        if (err) snprintf(err, errlen, "gguf: cannot stat %s: %s", path, strerror(e));
        close(fd);
        return -e;
    }
    if (!S_ISREG(st.st_mode)) {
        if (err) snprintf(err, errlen, "gguf: %s is not a regular file", path);
        close(fd);
        return -EINVAL;
    }
    uint64_t fsz = (uint64_t)st.st_size;
    size_t len = fsz < (1u << 20) ? (size_t)fsz : (1u << 20);
    int rc;
    for (;;) {
        unsigned char *buf = malloc(len ? len : 1);
        if (!buf) { rc = -ENOMEM; break; }
        rc = sl_pread_full(fd, buf, len, 0);
        if (rc) {
            if (err) snprintf(err, errlen, "gguf: %s: read error at byte offset 0..%zu: %s", path, len, strerror(-rc));
            free(buf);
            break;
        }
        rc = parse(buf, len, fsz, path, out, err, errlen);
        if (rc == 0) break;
        free(buf);
        if (rc != -EAGAIN) break;
        if (len >= fsz || len >= GGUF_MAX_META) {
            if (err) snprintf(err, errlen, "gguf: %s: metadata section larger than %zu bytes", path, len);
            rc = -EINVAL;
            break;
        }
        len = (uint64_t)len * 4 < fsz ? len * 4 : (size_t)fsz;
    }
    /* We read the metadata through the page cache; don't leave it behind. */
    posix_fadvise(fd, 0, (off_t)len, POSIX_FADV_DONTNEED);
    close(fd);
    if (rc == -ENOMEM && err && !err[0]) snprintf(err, errlen, "gguf: %s: out of memory reading metadata", path);
    return rc;
}

void sl_gguf_close(sl_gguf *g) { free_parts(g); }

uint32_t sl_gguf_version(const sl_gguf *g) { return g->version; }
uint64_t sl_gguf_file_size(const sl_gguf *g) { return g->file_size; }
uint64_t sl_gguf_data_offset(const sl_gguf *g) { return g->data_offset; }
uint32_t sl_gguf_alignment(const sl_gguf *g) { return g->alignment; }
size_t sl_gguf_meta_bytes(const sl_gguf *g) { return g->heap_bytes; }
const char *sl_gguf_path(const sl_gguf *g) { return g->path; }
int64_t sl_gguf_n_kv(const sl_gguf *g) { return g->n_kv; }
int64_t sl_gguf_find_key(const sl_gguf *g, const char *key) { return kv_find(g, key); }

sl_str sl_gguf_key(const sl_gguf *g, int64_t i)
{
    sl_str none = { "", 0 };
    return i >= 0 && i < g->n_kv ? g->kv[i].key : none;
}

int sl_gguf_kv_type(const sl_gguf *g, int64_t i) { return i >= 0 && i < g->n_kv ? g->kv[i].type : -1; }

/* Integer value of a scalar of any integer type (bool counts as 0/1).  False for non-integers. */
static bool scalar_int(const unsigned char *p, int type, int64_t *v, uint64_t *uv, bool *is_unsigned)
{
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32; uint64_t u64; int64_t i64; } x;
    size_t s = vtype_size(type);
    if (!s || type == SL_GGUF_F32 || type == SL_GGUF_F64) return false;
    memcpy(&x, p, s);
    *is_unsigned = false;
    switch (type) {
    case SL_GGUF_U8: case SL_GGUF_BOOL: *v = x.u8; break;
    case SL_GGUF_I8: *v = x.i8; break;
    case SL_GGUF_U16: *v = x.u16; break;
    case SL_GGUF_I16: *v = x.i16; break;
    case SL_GGUF_U32: *v = x.u32; break;
    case SL_GGUF_I32: *v = x.i32; break;
    case SL_GGUF_I64: *v = x.i64; break;
    case SL_GGUF_U64: *uv = x.u64; *is_unsigned = true; *v = x.u64 > INT64_MAX ? INT64_MAX : (int64_t)x.u64; return true;
    default: return false;
    }
    *uv = *v < 0 ? 0 : (uint64_t)*v;
    return true;
}

bool sl_gguf_get_u64(const sl_gguf *g, const char *key, uint64_t *out)
{
    int i = kv_find(g, key);
    int64_t v; uint64_t uv; bool u;
    if (i < 0 || g->kv[i].type == SL_GGUF_BOOL || !scalar_int(g->meta + g->kv[i].off, g->kv[i].type, &v, &uv, &u)) return false;
    if (!u && v < 0) return false;
    *out = uv;
    return true;
}

bool sl_gguf_get_u32(const sl_gguf *g, const char *key, uint32_t *out)
{
    uint64_t v;
    if (!sl_gguf_get_u64(g, key, &v) || v > UINT32_MAX) return false;
    *out = (uint32_t)v;
    return true;
}

bool sl_gguf_get_i64(const sl_gguf *g, const char *key, int64_t *out)
{
    int i = kv_find(g, key);
    int64_t v; uint64_t uv; bool u;
    if (i < 0 || g->kv[i].type == SL_GGUF_BOOL || !scalar_int(g->meta + g->kv[i].off, g->kv[i].type, &v, &uv, &u)) return false;
    if (u && uv > INT64_MAX) return false;
    *out = v;
    return true;
}

bool sl_gguf_get_f32(const sl_gguf *g, const char *key, float *out)
{
    int i = kv_find(g, key);
    if (i < 0) return false;
    if (g->kv[i].type == SL_GGUF_F32) { memcpy(out, g->meta + g->kv[i].off, 4); return true; }
    if (g->kv[i].type == SL_GGUF_F64) { double d; memcpy(&d, g->meta + g->kv[i].off, 8); *out = (float)d; return true; }
    return false;
}

bool sl_gguf_get_bool(const sl_gguf *g, const char *key, bool *out)
{
    int i = kv_find(g, key);
    if (i < 0 || g->kv[i].type != SL_GGUF_BOOL) return false;
    *out = g->meta[g->kv[i].off] != 0;
    return true;
}

static sl_str str_at(const sl_gguf *g, uint64_t off)
{
    sl_str s;
    memcpy(&s.len, g->meta + off, 8);
    s.ptr = (const char *)g->meta + off + 8;
    return s;
}

bool sl_gguf_get_str(const sl_gguf *g, const char *key, sl_str *out)
{
    int i = kv_find(g, key);
    if (i < 0 || g->kv[i].type != SL_GGUF_STRING) return false;
    *out = str_at(g, g->kv[i].off);
    return true;
}

bool sl_gguf_get_arr(const sl_gguf *g, const char *key, int *elem_type, uint64_t *n)
{
    int i = kv_find(g, key);
    if (i < 0 || g->kv[i].type != SL_GGUF_ARRAY) return false;
    if (elem_type) *elem_type = g->kv[i].arr_type;
    if (n) *n = g->kv[i].n;
    return true;
}

int64_t sl_gguf_arr_kv(const sl_gguf *g, const char *key)
{
    int i = kv_find(g, key);
    return i >= 0 && g->kv[i].type == SL_GGUF_ARRAY ? i : -1;
}

sl_str sl_gguf_arr_str(const sl_gguf *g, int64_t kv, uint64_t i)
{
    sl_str none = { "", 0 };
    if (kv < 0 || kv >= g->n_kv || g->kv[kv].type != SL_GGUF_ARRAY || g->kv[kv].arr_type != SL_GGUF_STRING || i >= g->kv[kv].n)
        return none;
    return str_at(g, g->kv[kv].str_off[i]);
}

bool sl_gguf_arr_f32(const sl_gguf *g, int64_t kv, uint64_t i, float *out)
{
    if (kv < 0 || kv >= g->n_kv || g->kv[kv].type != SL_GGUF_ARRAY || i >= g->kv[kv].n) return false;
    const unsigned char *p = g->meta + g->kv[kv].off;
    if (g->kv[kv].arr_type == SL_GGUF_F32) { memcpy(out, p + i * 4, 4); return true; }
    if (g->kv[kv].arr_type == SL_GGUF_F64) { double d; memcpy(&d, p + i * 8, 8); *out = (float)d; return true; }
    return false;
}

bool sl_gguf_arr_i64(const sl_gguf *g, int64_t kv, uint64_t i, int64_t *out)
{
    if (kv < 0 || kv >= g->n_kv || g->kv[kv].type != SL_GGUF_ARRAY || i >= g->kv[kv].n) return false;
    int t = g->kv[kv].arr_type;
    size_t s = vtype_size(t);
    int64_t v; uint64_t uv; bool u;
    if (!s || !scalar_int(g->meta + g->kv[kv].off + i * s, t, &v, &uv, &u)) return false;
    *out = v;
    return true;
}

const void *sl_gguf_arr_raw(const sl_gguf *g, int64_t kv, size_t *elem_size)
{
    if (kv < 0 || kv >= g->n_kv || g->kv[kv].type != SL_GGUF_ARRAY || g->kv[kv].arr_type == SL_GGUF_STRING) return NULL;
    if (elem_size) *elem_size = vtype_size(g->kv[kv].arr_type);
    return g->meta + g->kv[kv].off;
}

void sl_gguf_kv_format(const sl_gguf *g, int64_t i, char *buf, size_t buflen)
{
    if (!buflen) return;
    buf[0] = 0;
    if (i < 0 || i >= g->n_kv) return;
    const kv_entry *e = &g->kv[i];
    const unsigned char *p = g->meta + e->off;
    int64_t v; uint64_t uv; bool u;
    switch (e->type) {
    case SL_GGUF_STRING: {
        sl_str s = str_at(g, e->off);
        int n = s.len > 60 ? 60 : (int)s.len;
        snprintf(buf, buflen, "\"%.*s\"%s", n, s.ptr, s.len > 60 ? "…" : "");
        /* keep the rendering on one line */
        for (char *q = buf; *q; q++) if (*q == '\n' || *q == '\r' || *q == '\t') *q = ' ';
        break;
    }
    case SL_GGUF_ARRAY:
        snprintf(buf, buflen, "[%s × %" PRIu64 "]", vtype_name(e->arr_type), e->n);
        break;
    case SL_GGUF_F32: { float f; memcpy(&f, p, 4); snprintf(buf, buflen, "%g", f); break; }
    case SL_GGUF_F64: { double d; memcpy(&d, p, 8); snprintf(buf, buflen, "%g", d); break; }
    case SL_GGUF_BOOL: snprintf(buf, buflen, "%s", *p ? "true" : "false"); break;
    default:
        if (scalar_int(p, e->type, &v, &uv, &u)) {
            if (u) snprintf(buf, buflen, "%" PRIu64, uv);
            else snprintf(buf, buflen, "%" PRId64, v);
        }
    }
}

int64_t sl_gguf_n_tensors(const sl_gguf *g) { return g->n_tensors; }

const sl_gguf_tensor *sl_gguf_tensor_at(const sl_gguf *g, int64_t i)
{
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const sl_gguf_tensor *sl_gguf_find_tensor(const sl_gguf *g, const char *name)
{
    size_t n = strlen(name);
    for (int64_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].name.len == n && memcmp(g->tensors[i].name.ptr, name, n) == 0) return &g->tensors[i];
    return NULL;
}
