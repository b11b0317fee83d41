/* loader/io_internal.h — what the read backends (io_pread.c, io_mmap.c, io_uring.c) share with io.c.
 * Not part of the public API: only loader/io*.c include it.
 *
 * Layout of a slot buffer: the piece's first byte sits at buf + offset % align, so the pointer handed
 * back keeps the file offset's alignment.  O_DIRECT reads the block-aligned superset
 * [align_down(off), align_up(off+len)) into buf; buffered reads read exactly [off, off+len) there.
 */
#ifndef SL_LOADER_IO_INTERNAL_H
#define SL_LOADER_IO_INTERNAL_H

#include "loader/io.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>

#define SL_IO_MSGLEN 320
#define SL_IO_DROP_GRAIN (2u << 20)   /* largest page-cache folio (PMD size): cache drops round to it */

/* Backend-side state of a slot.  Worker backends (pread, mmap) change it under io->mu. */
enum sl_io_sstate { SL_S_FREE, SL_S_QUEUED, SL_S_RUNNING, SL_S_DONE };

typedef struct sl_io_slot {
    bool      held;       /* caller's view: requested and not yet released */
    int       state;      /* enum sl_io_sstate */
    uint64_t  off;        /* requested range */
    size_t    len;
    uint64_t  seq;        /* request order, for FIFO service */
    uint8_t  *buf;        /* slot buffer (NULL for mmap) */
    const uint8_t *data;  /* first byte of the range once DONE and ok */
    int       err;        /* 0 or negative errno once DONE */
    char      msg[SL_IO_MSGLEN];   /* error line written by whoever failed the read */
    uint8_t  *map;        /* mmap backend: this piece's own mapping of [align_down(off), align_up(end)) */
    size_t    maplen;
    int       guard;      /* mmap: 1 + index in the SIGBUS guard table (io_mmap.c), 0 when unguarded */
    atomic_int lost;      /* mmap: set by the SIGBUS handler when a page of the piece vanished */
} sl_io_slot;

struct sl_io;
typedef struct sl_io_ops {
    int  (*start)(struct sl_io *io, char *err, size_t errlen);   /* after fd + buffers exist */
    void (*request)(struct sl_io *io, sl_io_slot *s);            /* slot filled in: start reading */
    void (*wait)(struct sl_io *io, sl_io_slot *s);               /* return once s->state == DONE */
    void (*cancel)(struct sl_io *io, sl_io_slot *s);             /* stop/await a read; on return the
                                                                    buffer is no longer written */
    void (*stop)(struct sl_io *io);                              /* undo start */
} sl_io_ops;

struct sl_io {
    char        *path;
    int          fd;
    bool         direct;      /* fd has O_DIRECT */
    size_t       page;        /* run-time page size (sl_io_opts.page_size in tests): mmap ranges */
    size_t       align;       /* O_DIRECT offset/length/memory alignment: the device's, at least a page */
    size_t       chunk;       /* largest single read, multiple of align */
    uint64_t     size;        /* file size at open */
    sl_io_backend asked, active;
    int          nslots;
    size_t       max_piece;
    size_t       bufsize;     /* bytes per slot buffer */
    sl_io_slot   slot[SL_IO_MAX_SLOTS];
    uint64_t     next_seq;
    uint8_t     *bounce;      /* sync reads under O_DIRECT: chunk + align bytes */
    size_t       bounce_size;
    size_t       mem_bytes;

    sl_io_fault  fault;
    bool         faulty;      /* any fault configured */
    atomic_uint  fault_reads; /* counter for eintr_every on syscalls */
    atomic_uint  fault_cqes;  /* counter for CQE faults */
    atomic_uint  fault_eios;  /* reads failed by eio_at, for eio_times */

    const sl_io_ops *ops;
    /* worker backends (pread, mmap): one helper thread, FIFO queue of slot ids under mu */
    pthread_t        thr;
    bool             thr_started;
    pthread_mutex_t  mu;
    pthread_cond_t   cv_work, cv_done;
    bool             stopping;
    int              q[SL_IO_MAX_SLOTS];
    int              qlen;
    int            (*fill)(struct sl_io *io, sl_io_slot *s);   /* runs on the worker, unlocked */
    /* mmap */
    bool             populate_ok;
    /* uring */
    void            *uring;

    struct {
        _Atomic uint64_t requests, bytes_requested, bytes_read, reads_issued, retries, errors,
                         waits, wait_ns, sync_reads, sync_bytes;
    } st;

    char errmsg[SL_IO_MSGLEN];
    char notice[SL_IO_MSGLEN];
};

#define SL_IO_ADD(io, field, v) atomic_fetch_add_explicit(&(io)->st.field, (uint64_t)(v), memory_order_relaxed)

static inline uint64_t sl_io_align_down(uint64_t x, uint64_t a) { return x - x % a; }
static inline uint64_t sl_io_align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* io.c */
int  sl_io__read_range(sl_io *io, uint8_t *buf, uint64_t start, size_t total, size_t need,
                       char *msg, size_t msglen);
void sl_io__fmt_err(const sl_io *io, char *msg, size_t msglen, uint64_t off, size_t len, int err,
                    const char *what);
void sl_io__drop_cache(sl_io *io, uint64_t off, size_t len, const sl_io_slot *self);
/* io_fault.c */
ssize_t sl_io__pread(sl_io *io, void *buf, size_t len, uint64_t off);
int     sl_io__fault_cqe(sl_io *io, int res, uint64_t off, size_t len, uint8_t *buf);
bool    sl_io__fault_eio(sl_io *io, uint64_t off, size_t len);
/* io_pread.c: the worker thread shared by pread and mmap */
extern const sl_io_ops sl_io__pread_ops;
int  sl_io__worker_start(sl_io *io, char *err, size_t errlen);
void sl_io__worker_request(sl_io *io, sl_io_slot *s);
void sl_io__worker_wait(sl_io *io, sl_io_slot *s);
void sl_io__worker_cancel(sl_io *io, sl_io_slot *s);
void sl_io__worker_stop(sl_io *io);
/* io_mmap.c: 0, or -EIO with io->errmsg when a page of the slot's mapping vanished while held */
int sl_io__mmap_check(sl_io *io, sl_io_slot *s);
/* io_mmap.c, io_uring.c */
extern const sl_io_ops sl_io__mmap_ops;
extern const sl_io_ops sl_io__uring_ops;
int sl_io__uring_probe(char *why, size_t whylen);

#endif
