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
    size_t layer_bytes;      /* n_ctx * row */
    unsigned char *k, *v;    /* resident: (n_layers, n_ctx, row); spilled: (n_ctx, row), page aligned */
    /* spill */
    int fd;
    bool direct;
    size_t region;           /* layer_bytes rounded up to pages */
    int cur_layer;
    uint64_t io_bytes;
    char err[256];
};

static size_t row_bytes(int type, int kvd)
{
    return type == SL_KV_F32 ? (size_t)kvd * 4 : type == SL_KV_F16 ? (size_t)kvd * 2 : (size_t)kvd / 32 * 34;
}

size_t sl_kv_bytes_for(const sl_config *c, int n_ctx, int type, bool spill)
{
    size_t lb = (size_t)n_ctx * row_bytes(type, c->n_kv_heads * c->head_dim);
    if (spill) return 2 * ((lb + PAGE - 1) / PAGE * PAGE);
    return 2 * lb * (size_t)c->n_layers;
}

int sl_kv_create(const sl_config *c, int n_ctx, int type, const char *spill_dir, sl_kv **out, char *err, size_t errlen)
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
    kv->layer_bytes = (size_t)n_ctx * kv->row;
    kv->fd = -1;
    kv->cur_layer = -1;
    size_t each = spill_dir ? (kv->layer_bytes + PAGE - 1) / PAGE * PAGE : kv->layer_bytes * (size_t)c->n_layers;
    kv->region = (kv->layer_bytes + PAGE - 1) / PAGE * PAGE;
    if (posix_memalign((void **)&kv->k, PAGE, each ? each : PAGE) || posix_memalign((void **)&kv->v, PAGE, each ? each : PAGE)) {
        snprintf(err, errlen, "kv: cannot allocate %zu MiB for the KV cache (context %d)", 2 * each >> 20, n_ctx);
        sl_kv_free(kv);
        return -ENOMEM;
    }
    if (spill_dir) {
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
            sl_kv_free(kv);
            return -e;
        }
        off_t total = (off_t)(2 * kv->region * (size_t)c->n_layers);
        int r = posix_fallocate(kv->fd, 0, total);
        if (r) {
            snprintf(err, errlen, "kv: cannot reserve %lld MiB for the KV spill file in %s: %s", (long long)(total >> 20),
                     spill_dir, strerror(r));
            sl_kv_free(kv);
            return -r;
        }
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
    free(kv);
}

size_t sl_kv_mem_bytes(const sl_kv *kv)
{
    return kv->fd >= 0 ? 2 * kv->region : 2 * kv->layer_bytes * (size_t)kv->n_layers;
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

int sl_kv_layer_begin(sl_kv *kv, int l, int n_past)
{
    if (kv->fd < 0) return 0;
    kv->cur_layer = l;
    size_t n = (size_t)n_past * kv->row;
    if (!n) return 0;
    n = (n + PAGE - 1) / PAGE * PAGE;
    uint64_t base = (uint64_t)l * 2 * kv->region;
    int rc = xfer(kv, false, kv->k, n, base);
    if (!rc) rc = xfer(kv, false, kv->v, n, base + kv->region);
    return rc;
}

static unsigned char *row_ptr(const sl_kv *kv, unsigned char *arr, int l, int pos)
{
    size_t layer_off = kv->fd >= 0 ? 0 : (size_t)l * kv->layer_bytes;
    return arr + layer_off + (size_t)pos * kv->row;
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

void sl_kv_store(sl_kv *kv, int l, int pos, const float *k, const float *v)
{
    encode(kv, row_ptr(kv, kv->k, l, pos), k);
    encode(kv, row_ptr(kv, kv->v, l, pos), v);
}

int sl_kv_layer_end(sl_kv *kv, int l, int p0, int n)
{
    if (kv->fd < 0 || n <= 0) return 0;
    /* write the pages covering rows [p0, p0+n): the buffer holds every row of those pages, the
     * earlier ones read back in layer_begin (rows past p0+n in the last page are not yet used) */
    size_t a = (size_t)p0 * kv->row / PAGE * PAGE;
    size_t b = ((size_t)(p0 + n) * kv->row + PAGE - 1) / PAGE * PAGE;
    if (b > kv->region) b = kv->region;
    uint64_t base = (uint64_t)l * 2 * kv->region;
    int rc = xfer(kv, true, kv->k + a, b - a, base + a);
    if (!rc) rc = xfer(kv, true, kv->v + a, b - a, base + kv->region + a);
    return rc;
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
    const unsigned char *r = row_ptr(kv, arr, l, 0);
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

/* Checks shared by export and import: a real layer, K or V, rows inside the cache. */
static int rows_ok(sl_kv *kv, int l, int which, int r0, int n)
{
    if (l < 0 || l >= kv->n_layers || (which != 0 && which != 1) || r0 < 0 || n < 0 || r0 > kv->n_ctx - n) {
        snprintf(kv->err, sizeof kv->err, "kv: rows [%d, %d) of layer %d (%s) are outside the cache (%d layers, context %d)",
                 r0, r0 + n, l, which ? "V" : "K", kv->n_layers, kv->n_ctx);
        return -EINVAL;
    }
    return 0;
}

/* Spilled caches: the page-aligned span of the file that holds rows [r0, r0+n) of one array, read
 * into that array's layer buffer (which is scratch between evaluations: layer_end wrote it back). */
static int spill_span(sl_kv *kv, int l, int which, int r0, int n, size_t *a, size_t *b, unsigned char **buf)
{
    *a = (size_t)r0 * kv->row / PAGE * PAGE;
    *b = ((size_t)(r0 + n) * kv->row + PAGE - 1) / PAGE * PAGE;
    if (*b > kv->region) *b = kv->region;
    *buf = which ? kv->v : kv->k;
    kv->cur_layer = -1;
    uint64_t base = (uint64_t)l * 2 * kv->region + (which ? kv->region : 0);
    return xfer(kv, false, *buf + *a, *b - *a, base + *a);
}

int sl_kv_export_rows(sl_kv *kv, int l, int which, int r0, int n, void *dst)
{
    int rc = rows_ok(kv, l, which, r0, n);
    if (rc || n == 0) return rc;
    if (kv->fd < 0) {
        memcpy(dst, row_ptr(kv, which ? kv->v : kv->k, l, r0), (size_t)n * kv->row);
        return 0;
    }
    size_t a, b;
    unsigned char *buf;
    if ((rc = spill_span(kv, l, which, r0, n, &a, &b, &buf))) return rc;
    memcpy(dst, buf + (size_t)r0 * kv->row, (size_t)n * kv->row);
    return 0;
}

int sl_kv_import_rows(sl_kv *kv, int l, int which, int r0, int n, const void *src)
{
    int rc = rows_ok(kv, l, which, r0, n);
    if (rc || n == 0) return rc;
    if (kv->fd < 0) {
        memcpy(row_ptr(kv, which ? kv->v : kv->k, l, r0), src, (size_t)n * kv->row);
        return 0;
    }
    size_t a, b;
    unsigned char *buf;
    if ((rc = spill_span(kv, l, which, r0, n, &a, &b, &buf))) return rc;
    memcpy(buf + (size_t)r0 * kv->row, src, (size_t)n * kv->row);
    uint64_t base = (uint64_t)l * 2 * kv->region + (which ? kv->region : 0);
    return xfer(kv, true, buf + a, b - a, base + a);
}
