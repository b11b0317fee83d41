/* loader/io.h — read backends for the streaming layer loader: pread (+O_DIRECT), mmap, io_uring.
 *
 * The loader asks for byte ranges of the model file ("pieces") a few steps ahead of the compute,
 * holds each piece while computing with it, then releases it.  A reader owns `slots` piece buffers;
 * a slot is taken by sl_io_request() and given back by sl_io_release(), so the RAM the reader holds
 * is fixed at open (sl_io_mem_bytes) and the page cache stays bounded: pieces are read with O_DIRECT
 * when the filesystem allows it, otherwise buffered and dropped from the cache on release.
 *
 *   int s = sl_io_request(io, off, len);        // starts the read (returns at once)
 *   ... compute with an earlier piece ...
 *   const void *p; sl_io_wait(io, s, &p);       // blocks until the bytes are there (or an error)
 *   ... use p[0..len) ...
 *   sl_io_release(io, s);                       // p is dead; the slot can be requested again
 *
 * Threading: an sl_io is driven by one thread at a time (calls are not serialised internally).
 * The pread and mmap backends run one helper thread of their own that serves requests in FIFO
 * order; io_uring needs none (the kernel works while the caller computes).  sl_io_get_stats() may be
 * called from any thread.
 *
 * Errors: functions return 0 (or a slot id) or a negative errno.  I/O errors, end of file before the
 * end of a range and a file that shrank are reported by sl_io_wait()/sl_io_read() as -EIO (or the
 * syscall's errno) with a one-line message from sl_io_errmsg() naming the file, offset, length and
 * the errno text; the caller prefixes the tensor name.  A caller never sees a partly read piece.
 */
#ifndef SL_LOADER_IO_H
#define SL_LOADER_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { SL_IO_PREAD = 0, SL_IO_MMAP = 1, SL_IO_URING = 2 } sl_io_backend;

#define SL_IO_MAX_SLOTS     64
#define SL_IO_DEFAULT_CHUNK (4u << 20)   /* largest single read syscall / SQE */

/* Fault injection (tests and CLI smoke tests only).  All-zero means no faults.  A reader takes
 * opts.fault, or when that is NULL the process-wide default (sl_io_set_default_fault; the CLI sets
 * it from env SLUICE_IO_FAULT="eintr=K,short=N,eio_at=OFFSET,cqe_err=K" through sluice_debug_env). */
typedef struct sl_io_fault {
    unsigned eintr_every;   /* K>0: every K-th read syscall fails with EINTR; with io_uring every K-th
                               CQE reports -EINTR or -EAGAIN (alternately): all must be retried */
    size_t   short_max;     /* N>0: every read returns at most N bytes (O_DIRECT: N rounded down to the
                               block size, at least one block, since a direct read must stay aligned) */
    bool     eio;           /* true: any read whose range covers byte `eio_at` fails with EIO */
    uint64_t eio_at;        /*   (mmap: checked when the piece is requested/populated) */
    unsigned eio_times;     /* N>0: only the first N such reads fail (a transient error); 0: all of them */
    unsigned cqe_err_every; /* K>0 (io_uring only): every K-th CQE reports -EIO */
} sl_io_fault;

typedef struct sl_io_opts {
    sl_io_backend backend;
    int      slots;       /* max pieces requested-or-held at once (prefetch depth + pieces in use), 1..64 */
    size_t   max_piece;   /* largest piece in bytes (slot buffers are sized from it) */
    bool     no_direct;   /* don't try O_DIRECT: buffered reads, POSIX_FADV_DONTNEED after use */
    size_t   chunk;       /* largest single read (syscall or SQE); 0 = SL_IO_DEFAULT_CHUNK */
    const sl_io_fault *fault;   /* NULL in production (then the process-wide default applies) */
    size_t   page_size;   /* 0 = the run-time page size; tests pass a larger power of two (a multiple of
                             the real one, <= 1 MiB) to run as on a 16 or 64 KiB-page kernel */
} sl_io_opts;

typedef struct sl_io_stats {
    uint64_t requests;        /* sl_io_request calls that got a slot */
    uint64_t bytes_requested; /* sum of their lengths */
    uint64_t bytes_read;      /* bytes the reads returned (O_DIRECT includes block padding; mmap: bytes populated) */
    uint64_t reads_issued;    /* read syscalls, SQEs, or madvise populate calls (retries included) */
    uint64_t retries;         /* EINTR/EAGAIN retried and short reads resumed */
    uint64_t errors;          /* requests and sync reads that failed */
    uint64_t waits;           /* sl_io_wait calls */
    uint64_t wait_ns;         /* time spent blocked inside sl_io_wait */
    uint64_t sync_reads;      /* sl_io_read calls */
    uint64_t sync_bytes;      /* bytes they delivered */
} sl_io_stats;

typedef struct sl_io sl_io;

/* Open `path` for reading with the backend and limits in `o`.  Allocates all slot buffers now (so
 * sl_io_mem_bytes is exact from the start).  backend URING falls back to PREAD when io_uring cannot be
 * set up or SLUICE_NO_URING=1; sl_io_backend_active() and sl_io_notice() then say so.  O_DIRECT is
 * probed with a real read; filesystems that refuse it get buffered reads.  *out is set only on
 * success; on failure `err` holds one line and a negative errno is returned. */
int  sl_io_open(const char *path, const sl_io_opts *o, sl_io **out, char *err, size_t errlen);

/* Start reading [offset, offset+len).  Returns a slot id >= 0 at once (the read proceeds in the
 * background), -EBUSY if all slots are requested-or-held, -EINVAL if len is 0, len > max_piece or the
 * range passes the end of the file as it was at open.  Requests are served in FIFO order. */
int  sl_io_request(sl_io *io, uint64_t offset, size_t len);

/* Block until slot `slot` has its bytes.  On success returns 0 and *data = first byte of the range;
 * *data stays valid until sl_io_release.  (uintptr_t)*data % P == offset % P for P = the page size
 * (4096 or more; with a simulated page_size, the real one), so *data is
 * 32-byte aligned whenever offset is.  On failure returns a negative errno (sl_io_errmsg says why),
 * *data = NULL, and the slot must still be released.  Calling it again returns the same result. */
int  sl_io_wait(sl_io *io, int slot, const void **data);

/* Give back a slot (whether waited for or not; an unfinished read is cancelled or waited out, never
 * left writing into a reused buffer).  mmap unmaps the piece; buffered modes then drop the range from
 * the page cache, rounded out to 2 MiB (the largest folio) minus what other held slots touch, so
 * neither RSS nor page cache grows with the file.  (Kernel readahead past the last requested piece
 * can stay cached until that range is read and released.) */
void sl_io_release(sl_io *io, int slot);

/* After using a held piece: 0 if its bytes were the file's, or -EIO (sl_io_errmsg says why) when the
 * file shrank while the piece was in use.  Only the mmap backend can lose bytes after sl_io_wait —
 * a truncated file's pages vanish from the mapping, and touching them raises SIGBUS.  That backend
 * installs a SIGBUS handler (once, chaining to any previous one for other addresses) that maps a zero
 * page over a vanished page of a live piece and marks the piece, so the computation finishes on
 * zeros and this call reports the loss; the caller must discard what it computed.  0 for pread and
 * io_uring (their buffers are the caller's memory). */
int  sl_io_check(sl_io *io, int slot);

/* Synchronous read of [offset, offset+len) into caller memory (any alignment, any length): resident
 * tensors, embedding rows.  Loops over EINTR and short reads; leaves no page cache behind.  Uses none
 * of the slots and may be called while pieces are in flight.  0 or a negative errno. */
int  sl_io_read(sl_io *io, uint64_t offset, size_t len, void *dst);

/* Last error: one line naming the file, offset, length and errno text ("" if none). */
const char *sl_io_errmsg(const sl_io *io);
/* Why the reader is not what was asked for (uring fell back to pread, O_DIRECT refused), or "". */
const char *sl_io_notice(const sl_io *io);
sl_io_backend sl_io_backend_active(const sl_io *io);
bool sl_io_is_direct(const sl_io *io);        /* reads bypass the page cache */
uint64_t sl_io_file_size(const sl_io *io);    /* size at open */
const char *sl_io_backend_name(sl_io_backend b);   /* "pread", "mmap", "uring" */
/* Parse "pread" / "mmap" / "uring"; 0 or -EINVAL. */
int  sl_io_backend_parse(const char *s, sl_io_backend *out);

void sl_io_get_stats(const sl_io *io, sl_io_stats *st);

/* RAM this reader holds or may hold, for the budget planner: slot buffers + the sync bounce buffer
 * (pread/uring); for mmap the most mapped pages the held slots can pin, slots*(max_piece+2 pages). */
size_t sl_io_mem_bytes(const sl_io *io);

/* The run-time page size (sysconf; 4 KiB on x86-64, 4, 16 or 64 KiB on aarch64 kernels), 4096
 * when the system does not say.  What buffers, mmap ranges and page-cache drops round to. */
size_t sl_page_size(void);
/* The O_DIRECT offset/length/memory alignment of an open fd: the file system's (statx), else the
 * device's logical block size, else 4096 (see loader/io.c). */
size_t sl_io_fd_dio_align(int fd);

/* Release every slot (cancelling reads), stop the helper thread, free everything.  NULL is a no-op. */
void sl_io_close(sl_io *io);

/* 1 if an io_uring can be created here, 0 if not (or env SLUICE_NO_URING=1 simulates absence). */
int  sl_io_uring_available(void);

/* Parse a SLUICE_IO_FAULT-style string into *f (zeroed first).  0 or -EINVAL with a message. */
int  sl_io_fault_parse(const char *s, sl_io_fault *f, char *err, size_t errlen);
/* Debug/test hooks, process-wide, for readers opened afterwards: the default fault set (spec as
 * sl_io_fault_parse reads it; NULL or "" clears it; 0 or -EINVAL with err), and disabling io_uring
 * (readers asked for uring fall back to pread and say `why`; NULL enables it again). */
int  sl_io_set_default_fault(const char *spec, char *err, size_t errlen);
void sl_io_default_fault(sl_io_fault *out);
void sl_io_disable_uring(const char *why);

#endif
