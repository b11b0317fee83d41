/* loader/io.c — the backend-independent half of the reader: open (O_DIRECT probe, buffers),
 * request/wait/release bookkeeping, synchronous reads, the read loop every pread path uses, error
 * lines, stats.  The backends (io_pread.c, io_mmap.c, io_uring.c) only move bytes.
 */
#include "loader/io_internal.h"

#include "loader/errmsg.h"
#include "loader/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include "kernels/alive.h"
#include "kernels/clock.h"


const char *sl_io_backend_name(sl_io_backend b)
{
    switch (b) {
    case SL_IO_PREAD: return "pread";
    case SL_IO_MMAP:  return "mmap";
    case SL_IO_URING: return "uring";
    }
    return "?";
}

/* Parse a backend name as the CLI spells it.  0, or -EINVAL leaving *out alone. */
int sl_io_backend_parse(const char *s, sl_io_backend *out)
{
    static const sl_io_backend all[] = { SL_IO_PREAD, SL_IO_MMAP, SL_IO_URING };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (s && strcmp(s, sl_io_backend_name(all[i])) == 0) { *out = all[i]; return 0; }
    return -EINVAL;
}

/* Write the standard error line for a failed read of [off, off+len): file, range, cause.
 * `what` overrides the errno text (e.g. for end of file); err is a negative errno. */
void sl_io__fmt_err(const sl_io *io, char *msg, size_t msglen, uint64_t off, size_t len, int err,
                    const char *what) {
    char pb[SL_PATH_BRIEF];
    snprintf(msg, msglen, "%s: read of %zu bytes at offset %" PRIu64 " failed: %s", sl_path_brief(io->path, pb), len, off,
             what ? what : strerror(-err));
}

/* Drop from the page cache [off, off+len) rounded out to SL_IO_DROP_GRAIN, except what the range of a
 * held slot other than `self` (also rounded out) touches.  Why round so far: the kernel drops only
 * folios lying wholly inside the range, and readahead builds large folios (up to 2 MiB) that straddle
 * piece boundaries; rounding to the largest folio size lets one DONTNEED empty them.  Why spare held
 * slots: they may still be reading or mapping those pages, and dropping them would make the kernel
 * read them again.  A spared block goes when the last slot touching it is released.  Neighbouring
 * pages that nobody holds are dropped too (released pieces, or readahead for a later piece, which is
 * then read again — at most a grain at each end).  No-op for O_DIRECT (nothing was cached). */
void sl_io__drop_cache(sl_io *io, uint64_t off, size_t len, const sl_io_slot *self)
{
    if (io->direct || len == 0) return;
    const uint64_t g = SL_IO_DROP_GRAIN;
    uint64_t oa[SL_IO_MAX_SLOTS], oe[SL_IO_MAX_SLOTS];
    int n = 0;
    for (int i = 0; i < io->nslots; i++) {      /* other held ranges, sorted by start */
        const sl_io_slot *o = &io->slot[i];
        if (o == self || !o->held) continue;
        uint64_t a = sl_io_align_down(o->off, g), e = sl_io_align_up(o->off + o->len, g);
        int j = n++;
        while (j > 0 && oa[j - 1] > a) { oa[j] = oa[j - 1]; oe[j] = oe[j - 1]; j--; }
        oa[j] = a;
        oe[j] = e;
    }
    uint64_t cur = sl_io_align_down(off, g), end = sl_io_align_up(off + len, g);
    for (int k = 0; k <= n && cur < end; k++) {
        uint64_t stop = k < n && oa[k] < end ? oa[k] : end;
        if (stop > cur) (void)posix_fadvise(io->fd, (off_t)cur, (off_t)(stop - cur), POSIX_FADV_DONTNEED);
        if (k < n && oe[k] > cur) cur = oe[k];
    }
}

/* Read file bytes [start, start+need) into buf, issuing reads of at most io->chunk bytes and up to
 * `total` bytes in all (total >= need; under O_DIRECT start and total are block multiples and the
 * bytes past `need` are alignment padding that may lie past end of file).  EINTR/EAGAIN are retried,
 * short reads resumed.  Returns 0 once `need` bytes are in, else a negative errno with `msg` set
 * (end of file before `need` is -EIO).  Safe on any thread: touches only buf, msg and atomics. */
int sl_io__read_range(sl_io *io, uint8_t *buf, uint64_t start, size_t total, size_t need,
                      char *msg, size_t msglen) {
    size_t done = 0;
    while (done < need) {
        size_t want = total - done < io->chunk ? total - done : io->chunk;
        ssize_t n = sl_io__pread(io, buf + done, want, start + done);
        if (n < 0) {
            int e = errno;
            if (e == EINTR || e == EAGAIN) { SL_IO_ADD(io, retries, 1); continue; }
            sl_io__fmt_err(io, msg, msglen, start + done, want, -e, NULL);
            return -e;
        }
        done += (size_t)n;
        sl_alive_stamp();   /* a slow disk is still moving (the stop-signal watchdog, kernels/alive.h) */
        /* A short O_DIRECT read that ends off a block boundary can only mean end of file. */
        bool eof = n == 0 || (io->direct && done < need && done % io->align != 0);
        if (eof && done < need) {
            struct stat st;
            char what[128];
            long long now = fstat(io->fd, &st) == 0 ? (long long)st.st_size : -1;
            snprintf(what, sizeof what, "unexpected end of file (file is %lld bytes now, %" PRIu64
                     " at open)", now, io->size);
            sl_io__fmt_err(io, msg, msglen, start + done, need - done, -EIO, what);
            return -EIO;
        }
        if (done < need && (size_t)n < want) SL_IO_ADD(io, retries, 1);
    }
    return 0;
}

/* Contract: the O_DIRECT alignment of fd (a power of two): the file system's (statx
 * STATX_DIOALIGN: offset and memory alignment), else the logical block size of the device (BLKSSZGET
 * on a block device, sysfs queue/logical_block_size for the device a file lives on), else 4096, the
 * largest logical block size in common use, when nothing tells. */
static size_t dio_alignment(int fd, const struct stat *st)
{
    size_t a = 0;
#ifdef STATX_DIOALIGN
    struct statx sx;
    if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN) &&
        sx.stx_dio_offset_align > 0) {
        a = sx.stx_dio_offset_align > sx.stx_dio_mem_align ? sx.stx_dio_offset_align : sx.stx_dio_mem_align;
    }
#endif
    int lbs = 0;
    if (!a && S_ISBLK(st->st_mode) && ioctl(fd, BLKSSZGET, &lbs) == 0 && lbs > 0) a = (size_t)lbs;
    if (!a) {   /* a partition has no queue/ of its own: its disk's is one level up */
        const char *const fmt[2] = { "/sys/dev/block/%u:%u/queue/logical_block_size",
                                     "/sys/dev/block/%u:%u/../queue/logical_block_size" };
        for (int k = 0; k < 2 && !a; k++) {
            char p[96];
            snprintf(p, sizeof p, fmt[k], major(st->st_dev), minor(st->st_dev));
            FILE *f = fopen(p, "r");
            unsigned long v = 0;
            if (f && fscanf(f, "%lu", &v) == 1 && v >= 512 && v <= (1u << 20)) a = v;
            if (f) fclose(f);
        }
    }
    if (!a || (a & (a - 1))) a = 4096;
    return a;
}

/* Open the file descriptor: with O_DIRECT unless refused (or not wanted), then prove O_DIRECT works
 * with one real aligned read (some filesystems accept the flag and fail every read). */
static int open_fd(sl_io *io, bool want_direct, char *err, size_t errlen)
{
    io->fd = -1;
    struct stat st;
    char pb[SL_PATH_BRIEF];
    int fd = -EINVAL;
    if (want_direct) {   /* O_DIRECT refused: -EINVAL from open, before any fstat (st_mode still 0) */
        fd = sl_open_regular(io->path, O_DIRECT, &st);
        if (fd >= 0) { io->fd = fd; io->direct = true; }
        else if (fd != -EINVAL || st.st_mode) goto refused;
    }
    if (io->fd < 0) {
        fd = sl_open_regular(io->path, 0, &st);
        if (fd < 0) goto refused;
        io->fd = fd;
    }
    io->size = (uint64_t)st.st_size;
    io->align = io->direct ? dio_alignment(io->fd, &st) : 0;
    if (io->align < io->page) io->align = io->page;
    if (io->direct && io->size > 0) {
        void *probe = NULL;
        ssize_t n = -1;
        if (posix_memalign(&probe, io->align, io->align) == 0) {
            do n = pread(io->fd, probe, io->align, 0); while (n < 0 && errno == EINTR);
            free(probe);
        }
        if (n < 0) {
            snprintf(io->notice, sizeof io->notice, "O_DIRECT read failed (%s): using buffered reads",
                     strerror(errno));
            close(io->fd);
            io->direct = false;
            return open_fd(io, false, err, errlen);
        }
    } else if (want_direct && !io->direct) {
        snprintf(io->notice, sizeof io->notice, "filesystem refuses O_DIRECT: using buffered reads");
    }
    return 0;
refused:
    if (st.st_mode && !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: is %s, not a regular file", sl_path_brief(io->path, pb), sl_file_kind(st.st_mode));
        return -EINVAL;
    }
    snprintf(err, errlen, "%s: open: %s", sl_path_brief(io->path, pb), strerror(-fd));
    return fd;
}

/* Contract: `len` zeroed bytes aligned to `align`, straight from the kernel when the alignment is a
 * page's (always, for block devices), so that freeing them returns them at once and never moves
 * glibc's dynamic mmap threshold: a reader opened and closed before the run (the disk probe) would
 * otherwise push the run's later multi-MiB allocations onto the heap, where freed memory lingers in
 * the peak RSS.  NULL when out of memory. */
static size_t sys_page(void)
{
    const long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

size_t sl_page_size(void) { return sys_page(); }

size_t sl_io_fd_dio_align(int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0) return 4096;
    return dio_alignment(fd, &st);
}

static void *buf_alloc(size_t len, size_t align)
{
    if (align <= sys_page()) {   /* mmap aligns to the real page (not to a simulated one) */
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    void *p = NULL;
    return posix_memalign(&p, align, len) == 0 ? p : NULL;
}

static void buf_free(void *p, size_t len, size_t align)
{
    if (!p) return;
    if (align <= sys_page()) munmap(p, len);
    else free(p);
}

/* Allocate the slot buffers (and the bounce buffer for O_DIRECT sync reads) and touch them, so that
 * mem_bytes is real RSS from the start and tools like valgrind see the kernel-written bytes as
 * initialised. */
static int alloc_buffers(sl_io *io, char *err, size_t errlen)
{
    if (io->active == SL_IO_MMAP) {
        io->mem_bytes = (size_t)io->nslots * (io->max_piece + 2 * io->page);
        return 0;
    }
    /* whole pages: what a slot costs in RSS is what mem_bytes says, on any page size */
    io->bufsize = sl_io_align_up(sl_io_align_up(io->max_piece, io->align) + io->align, io->page);
    for (int i = 0; i < io->nslots; i++) {
        void *p = buf_alloc(io->bufsize, io->align);
        if (!p) {
            snprintf(err, errlen, "%s: cannot allocate %d slot buffers of %zu bytes", io->path,
                     io->nslots, io->bufsize);
            return -ENOMEM;
        }
        memset(p, 0, io->bufsize);
        io->slot[i].buf = p;
    }
    io->mem_bytes = (size_t)io->nslots * io->bufsize;
    if (io->direct) {
        io->bounce_size = io->chunk;
        void *p = buf_alloc(io->bounce_size, io->align);
        if (!p) {
            snprintf(err, errlen, "%s: cannot allocate the %zu-byte bounce buffer", io->path,
                     io->bounce_size);
            return -ENOMEM;
        }
        memset(p, 0, io->bounce_size);
        io->bounce = p;
        io->mem_bytes += io->bounce_size;
    }
    return 0;
}

static void free_io(sl_io *io)
{
    if (io->fd >= 0) close(io->fd);
    for (int i = 0; i < SL_IO_MAX_SLOTS; i++) buf_free(io->slot[i].buf, io->bufsize, io->align);
    buf_free(io->bounce, io->bounce_size, io->align);
    free(io->path);
    free(io);
}

/* See io.h.  Order: validate, pick the backend, open + probe, buffers, backend start (uring may still
 * fall back to pread there). */
int sl_io_open(const char *path, const sl_io_opts *o, sl_io **out, char *err, size_t errlen)
{
    const size_t real_page = sys_page();
    const size_t page = o && o->page_size ? o->page_size : real_page;
    if (!path || !o || !out || o->slots < 1 || o->slots > SL_IO_MAX_SLOTS || o->max_piece == 0 ||
        o->max_piece > SIZE_MAX / 4 || o->backend < SL_IO_PREAD || o->backend > SL_IO_URING ||
        (page & (page - 1)) || page % real_page || page > (1u << 20)) {
        snprintf(err, errlen, "%s: bad reader options (slots 1..%d, max_piece > 0, page_size 0 or a "
                 "power-of-two multiple of %zu up to 1 MiB)", path ? path : "(null)", SL_IO_MAX_SLOTS, real_page);
        return -EINVAL;
    }
    sl_io *io = calloc(1, sizeof *io);
    if (!io || !(io->path = strdup(path))) {
        free(io);
        snprintf(err, errlen, "%s: out of memory", path);
        return -ENOMEM;
    }
    io->fd = -1;
    io->page = page;
    io->nslots = o->slots;
    io->max_piece = o->max_piece;
    io->asked = io->active = o->backend;
    int r = 0;
    if (o->fault) io->fault = *o->fault;
    else sl_io_default_fault(&io->fault);
    if (r == 0 && io->fault.eintr_every == 1) {
        snprintf(err, errlen, "%s: fault eintr=1 would retry forever (use K >= 2)", path);
        r = -EINVAL;
    }
    if (r) { free_io(io); return r; }
    io->faulty = io->fault.eintr_every || io->fault.short_max || io->fault.eio || io->fault.cqe_err_every;

    char why[160] = "";
    if (io->asked == SL_IO_URING && !sl_io__uring_probe(why, sizeof why)) io->active = SL_IO_PREAD;
    r = open_fd(io, io->active != SL_IO_MMAP && !o->no_direct, err, errlen);
    if (r) { free_io(io); return r; }
    /* Buffered pread/uring: no kernel readahead.  It would read up to the device's read_ahead_kb (8 MiB
     * and more) past every piece into the page cache, memory the budget does not count and the drop
     * on release never sees (measured: 87-97 MiB peak at a 64 MiB budget before).  Pieces are read in
     * requests of up to `chunk` bytes, which need no readahead to keep the device busy.  (mmap reads
     * ahead exactly the piece itself with WILLNEED.) */
    if (!io->direct && io->active != SL_IO_MMAP) (void)posix_fadvise(io->fd, 0, 0, POSIX_FADV_RANDOM);
    /* one read's length must fit an SQE's 32-bit length (and its int result) */
    size_t chunk = o->chunk ? o->chunk : SL_IO_DEFAULT_CHUNK;
    io->chunk = sl_io_align_up(chunk < (1u << 30) ? chunk : (1u << 30), io->align);
    r = alloc_buffers(io, err, errlen);
    if (r) { free_io(io); return r; }

    io->ops = io->active == SL_IO_MMAP ? &sl_io__mmap_ops
            : io->active == SL_IO_URING ? &sl_io__uring_ops : &sl_io__pread_ops;
    r = io->ops->start(io, err, errlen);
    if (r && io->active == SL_IO_URING) {   /* ring setup failed after the probe passed */
        snprintf(why, sizeof why, "%s", err);
        io->active = SL_IO_PREAD;
        io->ops = &sl_io__pread_ops;
        r = io->ops->start(io, err, errlen);
    }
    if (r) { free_io(io); return r; }
    if (io->asked != io->active) {
        char prev[SL_IO_MSGLEN];
        snprintf(prev, sizeof prev, "%s", io->notice);
        snprintf(io->notice, sizeof io->notice, "io_uring unavailable (%.150s): using pread%s%.120s",
                 why, prev[0] ? "; " : "", prev);
    }
    *out = io;
    return 0;
}

/* See io.h.  Finds a free slot, records the range and hands it to the backend. */
int sl_io_request(sl_io *io, uint64_t offset, size_t len)
{
    if (len == 0 || len > io->max_piece || offset > io->size || len > io->size - offset) {
        snprintf(io->errmsg, sizeof io->errmsg, "%s: bad request of %zu bytes at offset %" PRIu64
                 " (file %" PRIu64 " bytes, max piece %zu)", io->path, len, offset, io->size,
                 io->max_piece);
        return -EINVAL;
    }
    int id = -1;
    for (int i = 0; i < io->nslots && id < 0; i++)
        if (!io->slot[i].held) id = i;
    if (id < 0) return -EBUSY;
    sl_io_slot *s = &io->slot[id];
    s->held = true;
    s->off = offset;
    s->len = len;
    s->seq = io->next_seq++;
    s->err = 0;
    s->data = NULL;
    s->msg[0] = 0;
    SL_IO_ADD(io, requests, 1);
    SL_IO_ADD(io, bytes_requested, len);
    /* buffered without kernel readahead (see sl_io_open): start the whole piece's I/O now, so the
     * requested pieces are read concurrently as they were with readahead, and nothing past them */
    if (!io->direct && io->active != SL_IO_MMAP) (void)posix_fadvise(io->fd, (off_t)offset, (off_t)len, POSIX_FADV_WILLNEED);
    io->ops->request(io, s);
    return id;
}

/* See io.h. */
int sl_io_wait(sl_io *io, int slot, const void **data)
{
    if (data) *data = NULL;
    if (slot < 0 || slot >= io->nslots || !io->slot[slot].held) return -EINVAL;
    sl_io_slot *s = &io->slot[slot];
    uint64_t t0 = sl_now_ns();
    io->ops->wait(io, s);
    SL_IO_ADD(io, wait_ns, sl_now_ns() - t0);
    SL_IO_ADD(io, waits, 1);
    if (s->err) {
        snprintf(io->errmsg, sizeof io->errmsg, "%s", s->msg);
        return s->err;
    }
    if (data) *data = s->data;
    return 0;
}

/* See io.h. */
int sl_io_check(sl_io *io, int slot)
{
    if (slot < 0 || slot >= io->nslots || !io->slot[slot].held) return -EINVAL;
    return io->active == SL_IO_MMAP ? sl_io__mmap_check(io, &io->slot[slot]) : 0;
}

/* See io.h. */
void sl_io_release(sl_io *io, int slot)
{
    if (slot < 0 || slot >= io->nslots || !io->slot[slot].held) return;
    sl_io_slot *s = &io->slot[slot];
    io->ops->cancel(io, s);
    sl_io__drop_cache(io, s->off, s->len, s);
    s->state = SL_S_FREE;
    s->held = false;
    s->data = NULL;
}

/* See io.h.  Buffered: read straight into dst, then drop the cache.  O_DIRECT: read block-aligned
 * chunks into the bounce buffer and copy the wanted part out. */
int sl_io_read(sl_io *io, uint64_t offset, size_t len, void *dst)
{
    if (len == 0) return 0;
    if (offset > io->size || len > io->size - offset) {
        snprintf(io->errmsg, sizeof io->errmsg, "%s: read of %zu bytes at offset %" PRIu64
                 " is past the end of the file (%" PRIu64 " bytes)", io->path, len, offset, io->size);
        return -EINVAL;
    }
    SL_IO_ADD(io, sync_reads, 1);
    int r = 0;
    if (!io->direct) {
        r = sl_io__read_range(io, dst, offset, len, len, io->errmsg, sizeof io->errmsg);
        sl_io__drop_cache(io, offset, len, NULL);
    } else {
        uint64_t end = offset + len, pos = offset;
        while (r == 0 && pos < end) {
            uint64_t a = sl_io_align_down(pos, io->align);
            uint64_t total = sl_io_align_up(end, io->align) - a;
            if (total > io->chunk) total = io->chunk;
            uint64_t upto = a + total < end ? a + total : end;
            r = sl_io__read_range(io, io->bounce, a, total, upto - a, io->errmsg, sizeof io->errmsg);
            if (r == 0) memcpy((uint8_t *)dst + (pos - offset), io->bounce + (pos - a), upto - pos);
            pos = upto;
        }
    }
    if (r) SL_IO_ADD(io, errors, 1);
    else SL_IO_ADD(io, sync_bytes, len);
    return r;
}

const char *sl_io_errmsg(const sl_io *io) { return io->errmsg; }
const char *sl_io_notice(const sl_io *io) { return io->notice; }
sl_io_backend sl_io_backend_active(const sl_io *io) { return io->active; }
bool sl_io_is_direct(const sl_io *io) { return io->direct; }
uint64_t sl_io_file_size(const sl_io *io) { return io->size; }
size_t sl_io_mem_bytes(const sl_io *io) { return io->mem_bytes; }

void sl_io_get_stats(const sl_io *io, sl_io_stats *st)
{
#define LD(f) st->f = atomic_load_explicit(&((sl_io *)io)->st.f, memory_order_relaxed)
    LD(requests); LD(bytes_requested); LD(bytes_read); LD(reads_issued); LD(retries); LD(errors);
    LD(waits); LD(wait_ns); LD(sync_reads); LD(sync_bytes);
#undef LD
}

/* See io.h. */
void sl_io_close(sl_io *io)
{
    if (!io) return;
    for (int i = 0; i < io->nslots; i++) sl_io_release(io, i);
    io->ops->stop(io);
    free_io(io);
}
