/* loader/io_mmap.c — the mmap backend: pieces are views into read-only mappings of the file.
 *
 * Each piece gets its own mapping of its page range.  (One mapping of the whole file would let fault-
 * around map neighbouring pieces' pages as a side effect, and mapped pages cannot be dropped from the
 * page cache, so released pieces would linger.)  A request checks the file size (fstat) and queues a
 * page-in job for the shared worker thread (io_pread.c): mmap, POSIX_FADV_WILLNEED to start large
 * readahead I/O for the range, then MADV_POPULATE_READ to map the pages, waiting for them.  Populate
 * reports a page that cannot be read (I/O error, file shrunk) as an error instead of the SIGBUS a
 * plain touch would raise.  Release unmaps the piece and drops its pages from the page cache, so
 * neither RSS nor page cache grows with the file.
 *
 * A file that shrinks after wait returned makes the piece's pages beyond the new end vanish; a touch
 * then raises SIGBUS.  Every live piece is entered in a lock-free guard table, and a SIGBUS handler
 * (installed once, with the first mmap reader) maps a zero page over a vanished page of a guarded
 * piece and marks the piece lost: the computation finishes on zeros, and sl_io_check() — which the
 * weight stream calls after each piece — turns that into an ordinary -EIO error like pread's.  A
 * SIGBUS at any other address goes to the handler installed before ours (or kills, as by default).
 */
#include "loader/io_internal.h"
#include "kernels/alive.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22   /* Linux 5.14 */
#endif

/* ---- the SIGBUS guard ---------------------------------------------------------------------------
 * Entries are claimed by CAS on `start`; the handler reads them without locks (async-signal-safe:
 * atomics and one mmap system call).  A full table leaves further pieces unguarded (as before). */

#define GUARD_MAX 512

static struct guard {
    _Atomic uintptr_t start;    /* 0: free */
    _Atomic size_t    len;      /* 0 while being filled in or emptied */
    atomic_int       *lost;
} g_guard[GUARD_MAX];

static struct sigaction g_prev_bus;
static pthread_once_t g_guard_once = PTHREAD_ONCE_INIT;

static size_t g_sig_page = 4096;   /* the run-time page size, read at install (sysconf is not async-signal-safe) */

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    uintptr_t a = (uintptr_t)si->si_addr;
    for (int i = 0; i < GUARD_MAX; i++) {
        uintptr_t s = atomic_load(&g_guard[i].start);
        size_t n = atomic_load(&g_guard[i].len);
        if (!s || !n || a < s || a - s >= n) continue;
        atomic_int *lost = g_guard[i].lost;
        void *page = (void *)(a - a % g_sig_page);
        if (mmap(page, g_sig_page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) break;
        if (lost) atomic_store(lost, 1);
        return;   /* the faulting load runs again and reads zeros */
    }
    if (g_prev_bus.sa_flags & SA_SIGINFO) {
        if (g_prev_bus.sa_sigaction) { g_prev_bus.sa_sigaction(sig, si, uc); return; }
    } else if (g_prev_bus.sa_handler != SIG_DFL && g_prev_bus.sa_handler != SIG_IGN) {
        g_prev_bus.sa_handler(sig);
        return;
    }
    signal(SIGBUS, SIG_DFL);   /* not ours: the fault repeats on return and kills as it would have */
}

static void guard_install(void)
{
    const long pg = sysconf(_SC_PAGESIZE);
    if (pg > 0) g_sig_page = (size_t)pg;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_prev_bus);
}

static void guard_add(sl_io_slot *s)
{
    atomic_store(&s->lost, 0);
    s->guard = 0;
    for (int i = 0; i < GUARD_MAX; i++) {
        uintptr_t zero = 0;
        if (atomic_compare_exchange_strong(&g_guard[i].start, &zero, (uintptr_t)s->map)) {
            g_guard[i].lost = &s->lost;
            atomic_store(&g_guard[i].len, s->maplen);
            s->guard = i + 1;
            return;
        }
    }
}

static void guard_remove(sl_io_slot *s)
{
    if (!s->guard) return;
    struct guard *g = &g_guard[s->guard - 1];
    atomic_store(&g->len, 0);
    g->lost = NULL;
    atomic_store(&g->start, 0);
    s->guard = 0;
}

int sl_io__mmap_check(sl_io *io, sl_io_slot *s)
{
    if (!atomic_load(&s->lost)) return 0;
    struct stat st;
    char what[160];
    snprintf(what, sizeof what, "the file shrank while the piece was in use (now %lld bytes, %" PRIu64 " at open)",
             fstat(io->fd, &st) == 0 ? (long long)st.st_size : -1LL, io->size);
    sl_io__fmt_err(io, io->errmsg, sizeof io->errmsg, s->off, s->len, -EIO, what);
    SL_IO_ADD(io, errors, 1);
    return -EIO;
}

/* Fail early, with a message, if [off, off+len) is no longer inside the file or is set to fail by
 * the eio fault.  0 or -EIO. */
static int check_range(sl_io *io, sl_io_slot *s)
{
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

/* Worker job: map the piece's pages, read them ahead, then populate (map) them, in chunks so
 * reads_issued shows progress. */
static int mmap_fill(sl_io *io, sl_io_slot *s)
{
    int r = check_range(io, s);
    if (r) return r;
    uint64_t a = sl_io_align_down(s->off, io->page), e = sl_io_align_up(s->off + s->len, io->page);
    void *m = mmap(NULL, e - a, PROT_READ, MAP_SHARED, io->fd, (off_t)a);
    if (m == MAP_FAILED) {
        int err = errno;
        sl_io__fmt_err(io, s->msg, sizeof s->msg, s->off, s->len, -err, NULL);
        return -err;
    }
    s->map = m;
    s->maplen = e - a;
    guard_add(s);   /* before any page is touched (populate reports errors itself, but readers touch) */
    /* No read-around on faults: the range is read ahead exactly here, and a page dropped by a
     * neighbour's release must not make a fault re-read megabytes around it. */
    (void)madvise(s->map, s->maplen, MADV_RANDOM);
    /* The kernel caps one WILLNEED at the device's readahead size, so issue it in 2 MiB steps: all
     * of the piece's I/O is then in flight before the first page is waited for. */
    for (uint64_t p = a; p < e; p += 2u << 20)
        (void)posix_fadvise(io->fd, (off_t)p, (off_t)(e - p < (2u << 20) ? e - p : (2u << 20)),
                            POSIX_FADV_WILLNEED);
    /* Pages to populate: those holding the piece, in the kernel's pages.  That is the whole mapping
     * unless a simulated page size (sl_io_opts.page_size) rounds it past pages beyond end of file. */
    const long rp = sysconf(_SC_PAGESIZE);
    size_t fill = sl_io_align_up(s->off + s->len - a, rp > 0 ? (size_t)rp : 4096);
    if (fill > s->maplen) fill = s->maplen;
    for (size_t p = 0; p < fill;) {
        size_t n = fill - p < io->chunk ? fill - p : io->chunk;
        SL_IO_ADD(io, reads_issued, 1);
        if (!io->populate_ok) {          /* kernel < 5.14: readahead only, pages fault in on use */
            (void)madvise(s->map + p, n, MADV_WILLNEED);
        } else if (madvise(s->map + p, n, MADV_POPULATE_READ) != 0) {
            int err = errno;
            if (err == EINTR || err == EAGAIN) { SL_IO_ADD(io, retries, 1); continue; }
            if (err == EINVAL && p == 0) { io->populate_ok = false; continue; }
            const char *what = err == EFAULT ? "page-in failed (I/O error, or the file shrank)" : NULL;
            sl_io__fmt_err(io, s->msg, sizeof s->msg, a + p, n, err == EFAULT ? -EIO : -err, what);
            return err == EFAULT ? -EIO : -err;
        }
        SL_IO_ADD(io, bytes_read, n);
        sl_alive_stamp();   /* a slow disk is still moving (the stop-signal watchdog, kernels/alive.h) */
        p += n;
    }
    s->data = s->map + (s->off - a);
    return 0;
}

/* Check the range now (a shrunk file fails here, before any page is touched), then queue it. */
static void mmap_request(sl_io *io, sl_io_slot *s)
{
    int r = check_range(io, s);
    if (r) {
        SL_IO_ADD(io, errors, 1);
        s->err = r;
        s->state = SL_S_DONE;
        return;
    }
    sl_io__worker_request(io, s);
}

/* Stop the page-in if queued or wait it out, then unmap the piece (its pages leave this process's
 * RSS; the common release then drops them from the page cache). */
static void mmap_cancel(sl_io *io, sl_io_slot *s)
{
    sl_io__worker_cancel(io, s);
    guard_remove(s);
    if (s->map) munmap(s->map, s->maplen);
    s->map = NULL;
    s->maplen = 0;
}

static int mmap_start(sl_io *io, char *err, size_t errlen)
{
    io->populate_ok = true;
    io->fill = mmap_fill;
    pthread_once(&g_guard_once, guard_install);
    return sl_io__worker_start(io, err, errlen);
}

const sl_io_ops sl_io__mmap_ops = {
    .start = mmap_start,
    .request = mmap_request,
    .wait = sl_io__worker_wait,
    .cancel = mmap_cancel,
    .stop = sl_io__worker_stop,
};
