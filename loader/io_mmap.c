/* loader/io_mmap.c — the mmap backend: pieces are views into a read-only mapping of the file.
 *
 * A request checks the file size (fstat) and queues a page-in job for the shared worker thread
 * (io_pread.c): POSIX_FADV_WILLNEED starts large readahead I/O for the range, then
 * MADV_POPULATE_READ maps the pages, waiting for them.  Populate reports a page that cannot be read
 * (I/O error, file shrunk) as an error instead of the SIGBUS a plain touch would raise.  Release
 * unmaps the pages (MADV_DONTNEED) and drops them from the page cache, so neither RSS nor page cache
 * grows with the file.  What remains unprotected: a file that shrinks after wait returned still
 * raises SIGBUS when the caller touches the bytes — use pread/uring for files that may change.
 */
#include "loader/io_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22   /* Linux 5.14 */
#endif

#define PG 4096u

/* Fail early, with a message, if [off, off+len) is no longer inside the file or is set to fail by
 * the eio fault.  0 or -EIO. */
static int check_range(sl_io *io, sl_io_slot *s) {
    struct stat st;
    if (fstat(io->fd, &st) != 0) {
        int e = errno;
        sl_io__fmt_err(io, s->msg, sizeof s->msg, s->off, s->len, -e, NULL);
        return -e;
    }
    if ((uint64_t)st.st_size < s->off + s->len) {
        char what[128];
        snprintf(what, sizeof what, "file shrank to %lld bytes (%" PRIu64 " at open)",
                 (long long)st.st_size, io->size);
        sl_io__fmt_err(io, s->msg, sizeof s->msg, s->off, s->len, -EIO, what);
        return -EIO;
    }
    if (sl_io__fault_eio(io, s->off, s->len)) {
        sl_io__fmt_err(io, s->msg, sizeof s->msg, s->off, s->len, -EIO, "Input/output error (injected)");
        return -EIO;
    }
    return 0;
}

/* Worker job: read ahead and map the pages of the range, in chunks so reads_issued shows progress. */
static int mmap_fill(sl_io *io, sl_io_slot *s) {
    int r = check_range(io, s);
    if (r) return r;
    uint64_t a = sl_io_align_down(s->off, PG), e = sl_io_align_up(s->off + s->len, PG);
    (void)posix_fadvise(io->fd, (off_t)a, (off_t)(e - a), POSIX_FADV_WILLNEED);
    for (uint64_t p = a; p < e;) {
        size_t n = e - p < io->chunk ? (size_t)(e - p) : io->chunk;
        SL_IO_ADD(io, reads_issued, 1);
        if (!io->populate_ok) {          /* kernel < 5.14: readahead only, pages fault in on use */
            (void)madvise(io->map + p, n, MADV_WILLNEED);
        } else if (madvise(io->map + p, n, MADV_POPULATE_READ) != 0) {
            int err = errno;
            if (err == EINTR || err == EAGAIN) { SL_IO_ADD(io, retries, 1); continue; }
            if (err == EINVAL && p == a) { io->populate_ok = false; continue; }
            const char *what = err == EFAULT ? "page-in failed (I/O error, or the file shrank)" : NULL;
            sl_io__fmt_err(io, s->msg, sizeof s->msg, p, n, err == EFAULT ? -EIO : -err, what);
            return err == EFAULT ? -EIO : -err;
        }
        SL_IO_ADD(io, bytes_read, n);
        p += n;
    }
    s->data = io->map + s->off;
    return 0;
}

/* Check the range now (a shrunk file fails here, before any page is touched), then queue it. */
static void mmap_request(sl_io *io, sl_io_slot *s) {
    int r = check_range(io, s);
    if (r) {
        SL_IO_ADD(io, errors, 1);
        s->err = r;
        s->state = SL_S_DONE;
        return;
    }
    sl_io__worker_request(io, s);
}

/* Stop the page-in if queued or wait it out, then unmap the range's pages from this process (the
 * common release then drops them from the page cache). */
static void mmap_cancel(sl_io *io, sl_io_slot *s) {
    sl_io__worker_cancel(io, s);
    uint64_t a = sl_io_align_down(s->off, PG), e = sl_io_align_up(s->off + s->len, PG);
    if (e > a) (void)madvise(io->map + a, e - a, MADV_DONTNEED);
}

static int mmap_start(sl_io *io, char *err, size_t errlen) {
    io->populate_ok = true;
    io->fill = mmap_fill;
    if (io->size > 0) {
        void *m = mmap(NULL, io->size, PROT_READ, MAP_SHARED, io->fd, 0);
        if (m == MAP_FAILED) {
            snprintf(err, errlen, "%s: mmap of %" PRIu64 " bytes: %s", io->path, io->size, strerror(errno));
            return -errno;
        }
        io->map = m;
    }
    int r = sl_io__worker_start(io, err, errlen);
    if (r && io->map) { munmap(io->map, io->size); io->map = NULL; }
    return r;
}

static void mmap_stop(sl_io *io) {
    sl_io__worker_stop(io);
    if (io->map) munmap(io->map, io->size);
    io->map = NULL;
}

const sl_io_ops sl_io__mmap_ops = {
    .start = mmap_start,
    .request = mmap_request,
    .wait = sl_io__worker_wait,
    .cancel = mmap_cancel,
    .stop = mmap_stop,
};
