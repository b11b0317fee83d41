/* runtime/engine/kvcache.c — KV cache encodings and the spill file. */
#include "runtime/engine/kvcache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "kernels/f16.h"
#include "kernels/types.h"
#include "loader/io.h"

/* The spill file's unit: the run-time page size (16 KiB on a Raspberry Pi 5 kernel, 64 KiB on
 * some arm64 ones), so buffers stay page aligned and the page-cache drops of the buffered mode
 * cover whole pages; O_DIRECT is used only when the device's alignment divides it. */
static size_t spill_page(void)
{
    static size_t page;
    if (!page) page = sl_page_size();
    return page;
}
#define PAGE spill_page()

struct sl_kv {
    int type, n_layers, n_ctx, kvd, hd;
    size_t row;              /* bytes per position row */
    int *rows;               /* per layer: rows kept (n_ctx, or a ring of window + slack) */
    int *window;             /* per layer: sliding window (0: full attention) */
    int *lo;                 /* per layer: lowest position whose row is intact */
    size_t *off;             /* per layer: resident: byte offset of its rows in k and v;
                              * spilled: file offset of its K region (V follows at + region[l]) */
    size_t *region;          /* per layer: its rows' bytes, spilled: rounded up to pages */
    size_t buf_bytes;        /* spilled: the layer buffer (largest region) */
    unsigned char *k, *v;    /* resident: every layer's rows; spilled: one layer's, page aligned */
    /* spill */
    int fd;
    bool direct;
    int cur_layer;
    uint64_t io_bytes;
    char err[256];
};

static size_t row_bytes(int type, int kvd)
{
    return type == SL_KV_F32 ? (size_t)kvd * 4 : type == SL_KV_F16 ? (size_t)kvd * 2 : (size_t)kvd / 32 * 34;
}

static size_t page_up(size_t n) { return (n + PAGE - 1) / PAGE * PAGE; }

int sl_kv_ring_rows(int window, int n_ctx, int slack)
{
    if (window <= 0 || slack < 0 || (int64_t)window + slack >= n_ctx) return n_ctx;
    return window + slack;
}

static int layer_rows(const sl_kv_layout *lay, int l, int n_ctx)
{
    return lay && lay->window ? sl_kv_ring_rows(lay->window[l], n_ctx, lay->slack) : n_ctx;
}

size_t sl_kv_total_bytes_for(const sl_config *c, const sl_kv_layout *lay, int n_ctx, int type)
{
    size_t r = row_bytes(type, c->n_kv_heads * c->head_dim), t = 0;
    for (int l = 0; l < c->n_layers; l++) t += 2 * (size_t)layer_rows(lay, l, n_ctx) * r;
    return t;
}

size_t sl_kv_bytes_for(const sl_config *c, const sl_kv_layout *lay, int n_ctx, int type, bool spill)
{
    if (!spill) return sl_kv_total_bytes_for(c, lay, n_ctx, type);
    size_t r = row_bytes(type, c->n_kv_heads * c->head_dim), mx = 0;
    for (int l = 0; l < c->n_layers; l++) {
        size_t b = page_up((size_t)layer_rows(lay, l, n_ctx) * r);
        if (b > mx) mx = b;
    }
    return 2 * (mx ? mx : PAGE);
}

/* The per-layer tables of a new cache: rows, windows, offsets, regions.  0 or -ENOMEM. */
static int kv_tables(sl_kv *kv, const sl_kv_layout *lay, bool spill)
{
    const int L = kv->n_layers;
    kv->rows = calloc((size_t)L + 1, sizeof *kv->rows);
    kv->window = calloc((size_t)L + 1, sizeof *kv->window);
    kv->lo = calloc((size_t)L + 1, sizeof *kv->lo);
    kv->off = calloc((size_t)L + 1, sizeof *kv->off);
    kv->region = calloc((size_t)L + 1, sizeof *kv->region);
    if (!kv->rows || !kv->window || !kv->lo || !kv->off || !kv->region) return -ENOMEM;
    size_t at = 0;
    for (int l = 0; l < L; l++) {
        kv->window[l] = lay && lay->window ? lay->window[l] : 0;
        kv->rows[l] = layer_rows(lay, l, kv->n_ctx);
        size_t b = (size_t)kv->rows[l] * kv->row;
        kv->region[l] = spill ? page_up(b) : b;
        kv->off[l] = at;
        at += spill ? 2 * kv->region[l] : b;
        if (kv->region[l] > kv->buf_bytes) kv->buf_bytes = kv->region[l];
    }
    kv->off[L] = at;   /* resident: bytes of each array; spilled: the file's size */
    return 0;
}

/* The (unlinked) spill file in dir, reserved at its full size.  0 or -errno with err. */
static int spill_open(sl_kv *kv, const char *spill_dir, char *err, size_t errlen)
{
    kv->fd = open(spill_dir, O_TMPFILE | O_RDWR | O_DIRECT | O_CLOEXEC, 0600);
    if (kv->fd >= 0 && PAGE % sl_io_fd_dio_align(kv->fd) != 0) {   /* blocks larger than a page */
        close(kv->fd);
        kv->fd = -1;
    }
    kv->direct = kv->fd >= 0;
    if (kv->fd < 0) kv->fd = open(spill_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (kv->fd < 0) {
        int e = errno;
        snprintf(err, errlen, "kv: cannot create a spill file in %s: %s", spill_dir, strerror(e));
        return -e;
    }
    off_t total = (off_t)kv->off[kv->n_layers];
    int r = total ? posix_fallocate(kv->fd, 0, total) : 0;
    if (r) {
        snprintf(err, errlen, "kv: cannot reserve %lld MiB for the KV spill file in %s: %s", (long long)(total >> 20),
                 spill_dir, strerror(r));
        return -r;
    }
    return 0;
}

int sl_kv_create(const sl_config *c, const sl_kv_layout *lay, int n_ctx, int type, const char *spill_dir, sl_kv **out,
                 char *err, size_t errlen)
{
    if (type != SL_KV_F16 && type != SL_KV_F32 && type != SL_KV_Q8_0) {
        snprintf(err, errlen, "kv: unknown cache type %d", type);
        return -EINVAL;
    }
    if (type == SL_KV_Q8_0 && c->head_dim % 32) {
        snprintf(err, errlen, "kv: a q8_0 cache needs head_dim %% 32 == 0 (head_dim is %d)", c->head_dim);
        return -EINVAL;
    }
    sl_kv *kv = calloc(1, sizeof *kv);
    if (!kv) return -ENOMEM;
    kv->type = type;
    kv->n_layers = c->n_layers;
    kv->n_ctx = n_ctx;
    kv->hd = c->head_dim;
    kv->kvd = c->n_kv_heads * c->head_dim;
    kv->row = row_bytes(type, kv->kvd);
    kv->fd = -1;
    kv->cur_layer = -1;
    if (kv_tables(kv, lay, spill_dir != NULL)) {
        snprintf(err, errlen, "kv: out of memory");
        sl_kv_free(kv);
        return -ENOMEM;
    }
    size_t each = spill_dir ? kv->buf_bytes : kv->off[kv->n_layers];
    if (posix_memalign((void **)&kv->k, PAGE, each ? each : PAGE) || posix_memalign((void **)&kv->v, PAGE, each ? each : PAGE)) {
        snprintf(err, errlen, "kv: cannot allocate %zu MiB for the KV cache (context %d)", 2 * each >> 20, n_ctx);
        sl_kv_free(kv);
        return -ENOMEM;
    }
    int rc = spill_dir ? spill_open(kv, spill_dir, err, errlen) : 0;
    if (rc) {
        sl_kv_free(kv);
        return rc;
    }
    *out = kv;
    return 0;
}

#define SL_TMPFS_MAGIC 0x01021994   /* linux/magic.h */
#define SL_RAMFS_MAGIC 0x858458f6

bool sl_kv_dir_in_ram(const char *dir, char *fstype, size_t len)
{
    struct statfs sf;
    if (!dir || statfs(dir, &sf) != 0) return false;
    const char *name = (unsigned long)sf.f_type == SL_TMPFS_MAGIC ? "tmpfs"
                     : (unsigned long)sf.f_type == SL_RAMFS_MAGIC ? "ramfs" : NULL;
    if (name && fstype && len) snprintf(fstype, len, "%s", name);
    return name != NULL;
}

void sl_kv_free(sl_kv *kv)
{
    if (!kv) return;
    if (kv->fd >= 0) close(kv->fd);
    free(kv->k);
    free(kv->v);
    free(kv->rows);
    free(kv->window);
    free(kv->lo);
    free(kv->off);
    free(kv->region);
    free(kv);
}

size_t sl_kv_mem_bytes(const sl_kv *kv)
{
    return kv->fd >= 0 ? 2 * kv->buf_bytes : 2 * kv->off[kv->n_layers];
}

int sl_kv_rows(const sl_kv *kv, int l) { return kv->rows[l]; }
int sl_kv_lo(const sl_kv *kv, int l) { return kv->lo[l]; }
int sl_kv_window(const sl_kv *kv, int l) { return kv->window[l]; }

void sl_kv_reset(sl_kv *kv)
{
    for (int l = 0; l < kv->n_layers; l++) kv->lo[l] = 0;
}

/* Contract: see kvcache.h.  Position p0 attends to [p0 - window + 1, p0] (forward.c), the later
 * positions of the pass to less far back; the pass's stores raise lo to p0 + n - rows. */
int sl_kv_check(sl_kv *kv, int p0, int n)
{
    for (int l = 0; l < kv->n_layers; l++) {
        const int w = kv->window[l], R = kv->rows[l];
        const int need = w > 0 && p0 - w + 1 > 0 ? p0 - w + 1 : 0;
        const int after = n > 0 && p0 + n - R > kv->lo[l] ? p0 + n - R : kv->lo[l];
        if (after <= need) continue;
        if (n > 0 && p0 + n - R > need)
            snprintf(kv->err, sizeof kv->err, "kv: a pass of %d positions at %d needs a ring of at least %d rows on "
                     "layer %d (window %d), which keeps %d: at most %d positions per pass", n, p0, w + n - 1, l, w, R,
                     R - w + 1);
        else
            snprintf(kv->err, sizeof kv->err, "kv: cannot go back to position %d: layer %d (sliding window %d, a ring "
                     "of %d rows) no longer holds positions %d..%d, overwritten by later ones (a rewind within %d "
                     "positions of the furthest one evaluated works; else start again from 0)",
                     p0, l, w, R, need, kv->lo[l] - 1, R - w);
        return -EINVAL;
    }
    return 0;
}

int sl_kv_type(const sl_kv *kv) { return kv->type; }
bool sl_kv_spilled(const sl_kv *kv) { return kv->fd >= 0; }
uint64_t sl_kv_io_bytes(const sl_kv *kv) { return kv->io_bytes; }
size_t sl_kv_row_bytes(const sl_kv *kv) { return kv->row; }
const char *sl_kv_errmsg(const sl_kv *kv) { return kv->err; }

/* Full-length pread/pwrite with EINTR and short-transfer handling. */
static int xfer(sl_kv *kv, bool wr, unsigned char *buf, size_t n, uint64_t off)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = wr ? pwrite(kv->fd, buf + done, n - done, (off_t)(off + done))
                       : pread(kv->fd, buf + done, n - done, (off_t)(off + done));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = r < 0 ? errno : EIO;
            snprintf(kv->err, sizeof kv->err, "kv spill file: %s of %zu bytes at offset %llu failed: %s",
                     wr ? "write" : "read", n, (unsigned long long)off, strerror(e));
            return -e;
        }
        done += (size_t)r;
    }
    kv->io_bytes += n;
    if (!kv->direct) {   /* keep the spill out of the page cache (a write must reach the disk first) */
        if (wr) fdatasync(kv->fd);
        posix_fadvise(kv->fd, (off_t)off, (off_t)n, POSIX_FADV_DONTNEED);
    }
    return 0;
}

/* The rows of positions [0, n_past): all of a ring that has wrapped (after a rewind below the
 * ring's size, rows [0, n_past) hold the window: sl_kv_check allowed it only if nothing there was
 * lost). */
int sl_kv_layer_begin(sl_kv *kv, int l, int n_past)
{
    if (kv->fd < 0) return 0;
    kv->cur_layer = l;
    int nr = n_past < kv->rows[l] ? n_past : kv->rows[l];
    size_t n = (size_t)nr * kv->row;
    if (!n) return 0;
    n = page_up(n);
    int rc = xfer(kv, false, kv->k, n, kv->off[l]);
    if (!rc) rc = xfer(kv, false, kv->v, n, kv->off[l] + kv->region[l]);
    return rc;
}

static unsigned char *row_ptr(const sl_kv *kv, unsigned char *arr, int l, int pos)
{
    size_t layer_off = kv->fd >= 0 ? 0 : kv->off[l];
    return arr + layer_off + (size_t)(pos % kv->rows[l]) * kv->row;
}

static void encode(const sl_kv *kv, unsigned char *dst, const float *src)
{
    switch (kv->type) {
    case SL_KV_F32: memcpy(dst, src, (size_t)kv->kvd * 4); break;
    case SL_KV_F16:
        for (int i = 0; i < kv->kvd; i++) {
            uint16_t h = sl_f32_to_f16(src[i]);
            memcpy(dst + 2 * i, &h, 2);
        }
        break;
    default: sl_quantize_q8_0(src, dst, kv->kvd); break;
    }
}

/* Storing position pos overwrites the row of pos - rows: lo rises past it. */
static void note_store(sl_kv *kv, int l, int pos)
{
    if (pos - kv->rows[l] + 1 > kv->lo[l]) kv->lo[l] = pos - kv->rows[l] + 1;
}

void sl_kv_store(sl_kv *kv, int l, int pos, const float *k, const float *v)
{
    encode(kv, row_ptr(kv, kv->k, l, pos), k);
    encode(kv, row_ptr(kv, kv->v, l, pos), v);
    note_store(kv, l, pos);
}

/* Write the pages covering rows [r0, r1) of layer l's K and V (one run, r1 <= rows). */
static int write_rows(sl_kv *kv, int l, int r0, int r1)
{
    size_t a = (size_t)r0 * kv->row / PAGE * PAGE, b = page_up((size_t)r1 * kv->row);
    if (b > kv->region[l]) b = kv->region[l];
    int rc = xfer(kv, true, kv->k + a, b - a, kv->off[l] + a);
    if (!rc) rc = xfer(kv, true, kv->v + a, b - a, kv->off[l] + kv->region[l] + a);
    return rc;
}

int sl_kv_layer_end(sl_kv *kv, int l, int p0, int n)
{
    if (kv->fd < 0 || n <= 0) return 0;
    /* write the pages covering the rows of positions [p0, p0+n) (one run, or two where the ring
     * wraps): the buffer holds every row of those pages, the others read back in layer_begin (rows
     * past the last new one, where the ring has not wrapped, are not yet used) */
    const int R = kv->rows[l];
    if (n > R) n = R;
    int s0 = p0 % R, s1 = s0 + n;
    if (s1 <= R) return write_rows(kv, l, s0, s1);
    int rc = write_rows(kv, l, s0, R);
    return rc ? rc : write_rows(kv, l, 0, s1 - R);
}

static const float *head(const sl_kv *kv, unsigned char *arr, int l, int pos, int kh, float *tmp)
{
    const unsigned char *r = row_ptr(kv, arr, l, pos);
    switch (kv->type) {
    case SL_KV_F32: return (const float *)r + (size_t)kh * kv->hd;
    case SL_KV_F16: {
        const unsigned char *h = r + (size_t)kh * kv->hd * 2;
        for (int i = 0; i < kv->hd; i++) {
            uint16_t x;
            memcpy(&x, h + 2 * i, 2);
            tmp[i] = sl_f16_to_f32(x);
        }
        return tmp;
    }
    default:
        sl_dequant_q8_0(r + (size_t)kh * (kv->hd / 32) * 34, tmp, kv->hd);
        return tmp;
    }
}

const float *sl_kv_k(const sl_kv *kv, int l, int pos, int kh, float *tmp) { return head(kv, kv->k, l, pos, kh, tmp); }
const float *sl_kv_v(const sl_kv *kv, int l, int pos, int kh, float *tmp) { return head(kv, kv->v, l, pos, kh, tmp); }

/* Contract: see kvcache.h.  A head's bytes within a row: hd elements (f16/f32), or hd/32 Q8_0
 * blocks (head_dim % 32 == 0 is required for a q8_0 cache). */
static const void *head_raw(const sl_kv *kv, unsigned char *arr, int l, int kh, int *type, size_t *stride)
{
    const unsigned char *r = row_ptr(kv, arr, l, 0);   /* row 0 */
    *stride = kv->row;
    switch (kv->type) {
    case SL_KV_F32: *type = SL_TYPE_F32; return r + (size_t)kh * kv->hd * 4;
    case SL_KV_F16: *type = SL_TYPE_F16; return r + (size_t)kh * kv->hd * 2;
    default:        *type = SL_TYPE_Q8_0; return r + (size_t)kh * (kv->hd / 32) * 34;
    }
}

const void *sl_kv_k_head(const sl_kv *kv, int l, int kh, int *type, size_t *stride) { return head_raw(kv, kv->k, l, kh, type, stride); }
const void *sl_kv_v_head(const sl_kv *kv, int l, int kh, int *type, size_t *stride) { return head_raw(kv, kv->v, l, kh, type, stride); }

/* ---- session files ---------------------------------------------------------------------------- */

int sl_kv_n_ctx(const sl_kv *kv) { return kv->n_ctx; }
int sl_kv_n_layers(const sl_kv *kv) { return kv->n_layers; }

/* Checks shared by export and import: a real layer, K or V, positions inside the context. */
static int rows_ok(sl_kv *kv, int l, int which, int p0, int n)
{
    if (l < 0 || l >= kv->n_layers || (which != 0 && which != 1) || p0 < 0 || n < 0 || p0 > kv->n_ctx - n) {
        snprintf(kv->err, sizeof kv->err, "kv: positions [%d, %d) of layer %d (%s) are outside the cache (%d layers, context %d)",
                 p0, p0 + n, l, which ? "V" : "K", kv->n_layers, kv->n_ctx);
        return -EINVAL;
    }
    return 0;
}

/* Spilled caches: the page-aligned span of the file that holds rows [r0, r1) of one array, read
 * into that array's layer buffer (which is scratch between evaluations: layer_end wrote it back). */
static int spill_span(sl_kv *kv, int l, int which, int r0, int r1, size_t *a, size_t *b, unsigned char **buf)
{
    *a = (size_t)r0 * kv->row / PAGE * PAGE;
    *b = page_up((size_t)r1 * kv->row);
    if (*b > kv->region[l]) *b = kv->region[l];
    *buf = which ? kv->v : kv->k;
    kv->cur_layer = -1;
    uint64_t base = kv->off[l] + (which ? kv->region[l] : 0);
    return xfer(kv, false, *buf + *a, *b - *a, base + *a);
}

/* Copy the rows [r0, r1) of one run (no wrap) out of (wr false) or into (wr true) the cache. */
static int run_copy(sl_kv *kv, int l, int which, int r0, int r1, unsigned char *mem, bool wr)
{
    const size_t len = (size_t)(r1 - r0) * kv->row;
    if (kv->fd < 0) {
        unsigned char *at = (which ? kv->v : kv->k) + kv->off[l] + (size_t)r0 * kv->row;
        if (wr) memcpy(at, mem, len);
        else memcpy(mem, at, len);
        return 0;
    }
    size_t a, b;
    unsigned char *buf;
    int rc = spill_span(kv, l, which, r0, r1, &a, &b, &buf);
    if (rc) return rc;
    if (!wr) {
        memcpy(mem, buf + (size_t)r0 * kv->row, len);
        return 0;
    }
    memcpy(buf + (size_t)r0 * kv->row, mem, len);
    return xfer(kv, true, buf + a, b - a, kv->off[l] + (which ? kv->region[l] : 0) + a);
}

/* The rows of positions [p0, p0+n) (n <= rows), in one or two runs. */
static int pos_copy(sl_kv *kv, int l, int which, int p0, int n, unsigned char *mem, bool wr)
{
    const int R = kv->rows[l], s0 = p0 % R;
    const int first = n < R - s0 ? n : R - s0;
    int rc = run_copy(kv, l, which, s0, s0 + first, mem, wr);
    if (!rc && first < n) rc = run_copy(kv, l, which, 0, n - first, mem + (size_t)first * kv->row, wr);
    return rc;
}

int sl_kv_export_rows(sl_kv *kv, int l, int which, int p0, int n, void *dst)
{
    int rc = rows_ok(kv, l, which, p0, n);
    if (rc || n == 0) return rc;
    if (p0 < kv->lo[l] || n > kv->rows[l]) {
        snprintf(kv->err, sizeof kv->err, "kv: positions [%d, %d) of layer %d are not all in its ring of %d rows (kept: %d on)",
                 p0, p0 + n, l, kv->rows[l], kv->lo[l]);
        return -EINVAL;
    }
    return pos_copy(kv, l, which, p0, n, dst, false);
}

int sl_kv_import_rows(sl_kv *kv, int l, int which, int p0, int n, const void *src)
{
    int rc = rows_ok(kv, l, which, p0, n);
    if (rc || n == 0) return rc;
    const int R = kv->rows[l];
    const unsigned char *s = src;
    if (n > R) {   /* a ring keeps the last R of them */
        s += (size_t)(n - R) * kv->row;
        p0 += n - R;
        n = R;
    }
    if ((rc = pos_copy(kv, l, which, p0, n, (unsigned char *)s, true))) return rc;
    note_store(kv, l, p0 + n - 1);
    return 0;
}

void sl_kv_import_floor(sl_kv *kv, int l, int lo)
{
    if (lo > kv->lo[l]) kv->lo[l] = lo;
}
