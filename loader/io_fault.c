/* loader/io_fault.c — the read syscall every pread path goes through, and fault injection around it
 * (EINTR, short reads, EIO at an offset) and around io_uring completions.  With no faults configured
 * the wrappers are a pread plus two counters.
 */
#include "loader/io_internal.h"

#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Parse "eintr=K,short=N,eio_at=OFFSET,eio_times=N,cqe_err=K" (any subset, any order) into *f.
 * 0 or -EINVAL. */
int sl_io_fault_parse(const char *s, sl_io_fault *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    const char *p = s;
    while (p && *p) {
        const char *eq = strchr(p, '=');
        if (!eq) break;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(eq + 1, &end, 0);
        if (errno || end == eq + 1 || (*end && *end != ',')) break;
        size_t klen = (size_t)(eq - p);
        if (klen == 5 && !strncmp(p, "eintr", 5) && v <= UINT32_MAX) f->eintr_every = (unsigned)v;
        else if (klen == 5 && !strncmp(p, "short", 5)) f->short_max = (size_t)v;
        else if (klen == 6 && !strncmp(p, "eio_at", 6)) { f->eio = true; f->eio_at = v; }
        else if (klen == 9 && !strncmp(p, "eio_times", 9) && v <= UINT32_MAX) f->eio_times = (unsigned)v;
        else if (klen == 7 && !strncmp(p, "cqe_err", 7) && v <= UINT32_MAX) f->cqe_err_every = (unsigned)v;
        else break;
        p = *end ? end + 1 : end;
    }
    if (p && *p) {
        snprintf(err, errlen, "SLUICE_IO_FAULT: cannot parse \"%s\" (want eintr=K,short=N,eio_at=OFFSET,"
                 "eio_times=N,cqe_err=K)", p);
        memset(f, 0, sizeof *f);
        return -EINVAL;
    }
    return 0;
}

/* True if the configured EIO offset lies inside [off, off+len) and (eio_times) this is one of the
 * first eio_times such reads. */
bool sl_io__fault_eio(sl_io *io, uint64_t off, size_t len)
{
    if (!io->fault.eio || io->fault.eio_at < off || io->fault.eio_at - off >= len) return false;
    return !io->fault.eio_times || atomic_fetch_add(&io->fault_eios, 1) < io->fault.eio_times;
}

/* Largest read the short-read fault allows; O_DIRECT keeps it a block multiple. */
static size_t short_cap(const sl_io *io)
{
    size_t cap = io->fault.short_max;
    if (io->direct) cap = cap < io->align ? io->align : cap - cap % io->align;
    return cap;
}

/* pread(2) with the same contract (-1 + errno), counted in the stats and subject to the faults. */
ssize_t sl_io__pread(sl_io *io, void *buf, size_t len, uint64_t off)
{
    SL_IO_ADD(io, reads_issued, 1);
    if (io->faulty) {
        unsigned k = io->fault.eintr_every;
        if (k && (atomic_fetch_add(&io->fault_reads, 1) + 1) % k == 0) { errno = EINTR; return -1; }
        if (sl_io__fault_eio(io, off, len)) { errno = EIO; return -1; }
        if (io->fault.short_max && len > short_cap(io)) len = short_cap(io);
    }
    ssize_t n = pread(io->fd, buf, len, (off_t)off);
    if (n > 0) SL_IO_ADD(io, bytes_read, n);
    return n;
}

/* Filter one io_uring completion result `res` of a read of [off, off+len) into `buf` through the faults.
 * EINTR faults alternate -EINTR and -EAGAIN so both retry paths run.  The kernel has already read
 * the bytes, so the bytes a fault claims were not read are overwritten: a reader that failed to
 * re-read them would hand out garbage, and the tests would see it. */
int sl_io__fault_cqe(sl_io *io, int res, uint64_t off, size_t len, uint8_t *buf)
{
    if (!io->faulty) return res;
    unsigned n = atomic_fetch_add(&io->fault_cqes, 1) + 1;
    int out = res;
    if (io->fault.cqe_err_every && n % io->fault.cqe_err_every == 0) out = -EIO;
    else if (io->fault.eintr_every && n % io->fault.eintr_every == 0)
        out = (n / io->fault.eintr_every) % 2 ? -EINTR : -EAGAIN;
    else if (sl_io__fault_eio(io, off, len)) out = -EIO;
    else if (io->fault.short_max && res > 0 && (size_t)res > short_cap(io)) out = (int)short_cap(io);
    if (res > 0 && out < res) {
        size_t keep = out > 0 ? (size_t)out : 0;
        memset(buf + keep, 0xA5, (size_t)res - keep);
    }
    return out;
}

/* ---- the process-wide default (debug/test hook) ---------------------------------------------- */

static pthread_mutex_t g_fault_mu = PTHREAD_MUTEX_INITIALIZER;
static sl_io_fault g_default_fault;

/* Contract: see io.h.  On a parse error the previous default stays. */
int sl_io_set_default_fault(const char *spec, char *err, size_t errlen)
{
    sl_io_fault f = { 0 };
    if (spec && *spec) {
        int rc = sl_io_fault_parse(spec, &f, err, errlen);
        if (rc) return rc;
    }
    pthread_mutex_lock(&g_fault_mu);
    g_default_fault = f;
    pthread_mutex_unlock(&g_fault_mu);
    return 0;
}

void sl_io_default_fault(sl_io_fault *out)
{
    pthread_mutex_lock(&g_fault_mu);
    *out = g_default_fault;
    pthread_mutex_unlock(&g_fault_mu);
}
