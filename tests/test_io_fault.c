/* tests/test_io_fault.c — the readers under injected faults and a file truncated behind their back:
 * EINTR and short reads must still give exact bytes; EIO must fail exactly the requests whose reads
 * cover the bad offset and no others; CQE errors fail requests cleanly; a shrunk file is an error,
 * never a crash or a partly filled buffer. */
#include "io_testutil.h"

#include "include/sluice.h"

#include <errno.h>
#include <signal.h>

#define FILE_SIZE ((2u << 20) + 999u)
#define MAX_PIECE (600u << 10)
#define BAD_OFF   ((1u << 20) + 77u)   /* the injected EIO offset */

static iot_file F;
static void setup(void) { iot_make(&F, FILE_SIZE, 0xfa017); }
static void teardown(void) { iot_remove(&F); }

static bool have(sl_io_backend b) { return b != SL_IO_URING || sl_io_uring_available(); }

/* Random pipelined reads through `io`, every result exact. */
static void exact_reads(sl_io *io, int slots, const char *cfg)
{
    uint64_t rs = 99;
    for (int i = 0; i < 12; i += slots) {
        int s[8];
        uint64_t off[8];
        size_t len[8];
        for (int k = 0; k < slots; k++) {
            len[k] = (size_t)iot_range(&rs, 1, MAX_PIECE);
            off[k] = iot_range(&rs, 0, FILE_SIZE - len[k]);
            s[k] = sl_io_request(io, off[k], len[k]);
            cr_assert(s[k] >= 0);
        }
        for (int k = 0; k < slots; k++) {
            iot_check_slot(io, &F, s[k], off[k], len[k], cfg);
            sl_io_release(io, s[k]);
        }
    }
    uint8_t *dst = malloc(FILE_SIZE);
    cr_assert(sl_io_read(io, 3, FILE_SIZE - 5, dst) == 0, "%s: sync read: %s", cfg, sl_io_errmsg(io));
    cr_assert(memcmp(dst, F.ref + 3, FILE_SIZE - 5) == 0, "%s: sync read bytes", cfg);
    free(dst);
}

/* EINTR every 3rd read and reads of at most 10000 bytes (a block under O_DIRECT): exact bytes, and
 * the retry counter shows the faults really fired. */
Test(io_fault, eintr_and_short_reads, .init = setup, .fini = teardown) {
    sl_io_fault flt = { .eintr_every = 3, .short_max = 10000 };
    for (int b = SL_IO_PREAD; b <= SL_IO_URING; b++)
        for (int nd = 0; nd < 2; nd++) {
            if (!have((sl_io_backend)b) || b == SL_IO_MMAP) continue;   /* mmap has no read calls */
            char cfg[64];
            snprintf(cfg, sizeof cfg, "%s no_direct=%d", sl_io_backend_name((sl_io_backend)b), nd);
            sl_io *io = iot_open(F.path, (sl_io_backend)b, 3, MAX_PIECE, nd, 128 << 10, &flt);
            exact_reads(io, 3, cfg);
            sl_io_stats st;
            sl_io_get_stats(io, &st);
            /* every piece > 10000 bytes needs resumed short reads, and a third of the reads fail */
            cr_assert(st.retries > st.reads_issued / 4, "%s: retries %llu of %llu reads", cfg,
                      (unsigned long long)st.retries, (unsigned long long)st.reads_issued);
            cr_assert(st.errors == 0);
            sl_io_close(io);
        }
}

/* EIO at BAD_OFF: requests whose reads cover it fail with a message naming file and offset; ranges
 * at least a block away on either side read fine, before and after the failure. */
Test(io_fault, eio_at_offset, .init = setup, .fini = teardown) {
    sl_io_fault flt = { .eio = true, .eio_at = BAD_OFF };
    for (int b = SL_IO_PREAD; b <= SL_IO_URING; b++)
        for (int nd = 0; nd < 2; nd++) {
            if (!have((sl_io_backend)b)) continue;
            const char *name = sl_io_backend_name((sl_io_backend)b);
            sl_io *io = iot_open(F.path, (sl_io_backend)b, 4, MAX_PIECE, nd, 64 << 10, &flt);
            int before = sl_io_request(io, BAD_OFF - 8192 - 500000, 500000);
            int bad = sl_io_request(io, BAD_OFF - 1000, 5000);
            int bad1 = sl_io_request(io, BAD_OFF, 1);
            int after = sl_io_request(io, BAD_OFF + 8192, MAX_PIECE);
            cr_assert(before >= 0 && bad >= 0 && bad1 >= 0 && after >= 0);
            iot_check_slot(io, &F, before, BAD_OFF - 8192 - 500000, 500000, name);
            const void *p = (const void *)1;
            int r = sl_io_wait(io, bad, &p);
            cr_assert(r == -EIO && p == NULL, "%s nd=%d: covering request gave %d", name, nd, r);
            cr_assert(strstr(sl_io_errmsg(io), F.path) && strstr(sl_io_errmsg(io), "offset"),
                      "message: %s", sl_io_errmsg(io));
            cr_assert(sl_io_wait(io, bad, &p) == -EIO, "error is sticky until release");
            cr_assert(sl_io_wait(io, bad1, &p) == -EIO);
            iot_check_slot(io, &F, after, BAD_OFF + 8192, MAX_PIECE, name);
            sl_io_release(io, bad);
            sl_io_release(io, bad1);
            sl_io_release(io, before);
            sl_io_release(io, after);
            /* sync reads: covering fails, others work */
            uint8_t buf[300];
            cr_assert(sl_io_read(io, BAD_OFF - 100, 200, buf) == -EIO, "%s: sync read over bad offset", name);
            cr_assert(sl_io_read(io, BAD_OFF + 9000, 300, buf) == 0 && !memcmp(buf, F.ref + BAD_OFF + 9000, 300));
            sl_io_stats st;
            sl_io_get_stats(io, &st);
            cr_assert(st.errors == 3, "%s: %llu errors counted", name, (unsigned long long)st.errors);
            /* the slots are reusable after failures */
            int s = sl_io_request(io, 5, 4000);
            iot_check_slot(io, &F, s, 5, 4000, name);
            sl_io_close(io);
        }
}

/* CQE errors on every 4th completion: each wait is either exact bytes or -EIO with a message; both
 * happen; slots keep working; EINTR/EAGAIN completions alternately are retried transparently. */
Test(io_fault, uring_cqe_errors, .init = setup, .fini = teardown) {
    if (!sl_io_uring_available()) cr_skip_test("skipped: io_uring unavailable here (io_uring_queue_init fails: no kernel support, or qemu-user)");
    sl_io_fault flt = { .cqe_err_every = 4 };
    sl_io *io = iot_open(F.path, SL_IO_URING, 4, MAX_PIECE, false, 64 << 10, &flt);
    uint64_t rs = 7;
    int ok = 0, bad = 0;
    for (int i = 0; i < 40; i++) {
        size_t len = (size_t)iot_range(&rs, 1, 200000);
        uint64_t off = iot_range(&rs, 0, FILE_SIZE - len);
        int s = sl_io_request(io, off, len);
        cr_assert(s >= 0);
        const void *p;
        int r = sl_io_wait(io, s, &p);
        if (r == 0) { ok++; cr_assert(memcmp(p, F.ref + off, len) == 0, "bytes after CQE faults"); }
        else { bad++; cr_assert(r == -EIO && strstr(sl_io_errmsg(io), "offset"), "%d %s", r, sl_io_errmsg(io)); }
        sl_io_release(io, s);
    }
    cr_assert(ok > 0 && bad > 0, "ok %d bad %d", ok, bad);
    sl_io_close(io);

    sl_io_fault retry = { .eintr_every = 2, .short_max = 20000 };
    io = iot_open(F.path, SL_IO_URING, 4, MAX_PIECE, false, 64 << 10, &retry);
    exact_reads(io, 4, "uring eintr/eagain CQEs");
    sl_io_close(io);
}

/* The file shrinks to 1 MiB after open: requests past the new end fail (wait returns the error,
 * nothing crashes, no SIGBUS for mmap); requests inside still read exact bytes. */
Test(io_fault, file_truncated_after_open, .init = setup, .fini = teardown) {
    for (int b = SL_IO_PREAD; b <= SL_IO_URING; b++)
        for (int nd = 0; nd < 2; nd++) {
            if (!have((sl_io_backend)b)) continue;
            const char *name = sl_io_backend_name((sl_io_backend)b);
            int fd = open(F.path, O_WRONLY);
            cr_assert(fd >= 0 && pwrite(fd, F.ref, FILE_SIZE, 0) == FILE_SIZE);   /* restore */
            sl_io *io = iot_open(F.path, (sl_io_backend)b, 3, MAX_PIECE, nd, 0, NULL);
            cr_assert(ftruncate(fd, 1u << 20) == 0);
            close(fd);
            int past = sl_io_request(io, (1u << 20) + 100, 5000);
            int across = sl_io_request(io, (1u << 20) - 5000, 10000);
            int inside = sl_io_request(io, 4097, 100000);
            cr_assert(past >= 0 && across >= 0 && inside >= 0);
            const void *p;
            int r = sl_io_wait(io, past, &p);
            cr_assert(r < 0 && p == NULL, "%s nd=%d: read past the new end gave %d", name, nd, r);
            cr_assert(strstr(sl_io_errmsg(io), F.path), "%s", sl_io_errmsg(io));
            cr_assert(sl_io_wait(io, across, &p) < 0, "%s: range crossing the new end", name);
            iot_check_slot(io, &F, inside, 4097, 100000, name);
            uint8_t buf[64];
            cr_assert(sl_io_read(io, (1u << 20) + 10, sizeof buf, buf) < 0, "%s: sync read past end", name);
            sl_io_close(io);
        }
}

/* The CLI path: the process-wide default faults (SLUICE_IO_FAULT through sluice_debug_env) when
 * opts.fault is NULL; malformed strings rejected. */
Test(io_fault, env_and_parse, .init = setup, .fini = teardown) {
    char err[256];
    setenv("SLUICE_IO_FAULT", "eintr=2,short=5000,eio_at=1048653", 1);   /* 1048653 = BAD_OFF */
    cr_assert_eq(sluice_debug_env(err, sizeof err), 0, "%s", err);
    sl_io *io = iot_open(F.path, SL_IO_PREAD, 2, MAX_PIECE, true, 0, NULL);
    uint8_t buf[300];
    cr_assert(sl_io_read(io, BAD_OFF - 5, 10, buf) == -EIO);
    cr_assert(sl_io_read(io, 0, sizeof buf, buf) == 0 && !memcmp(buf, F.ref, sizeof buf));
    sl_io_stats st;
    sl_io_get_stats(io, &st);
    cr_assert(st.retries > 0, "eintr from the environment fired");
    sl_io_close(io);

    setenv("SLUICE_IO_FAULT", "eintr", 1);   /* malformed: refused, naming the variable */
    cr_assert_eq(sluice_debug_env(err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "SLUICE_IO_FAULT") != NULL, "%s", err);
    unsetenv("SLUICE_IO_FAULT");
    cr_assert_eq(sl_io_set_default_fault("eintr=1", err, sizeof err), 0);   /* would retry forever */
    sl_io_opts o = { .backend = SL_IO_PREAD, .slots = 1, .max_piece = 10 };
    io = NULL;
    cr_assert(sl_io_open(F.path, &o, &io, err, sizeof err) == -EINVAL && io == NULL);
    cr_assert_eq(sl_io_set_default_fault(NULL, err, sizeof err), 0);

    sl_io_fault f;
    cr_assert(sl_io_fault_parse("", &f, err, sizeof err) == 0 && !f.eio && !f.eintr_every);
    cr_assert(sl_io_fault_parse("cqe_err=5,eio_at=0x10", &f, err, sizeof err) == 0);
    cr_assert(f.cqe_err_every == 5 && f.eio && f.eio_at == 16);
    cr_assert(sl_io_fault_parse("short=12,", &f, err, sizeof err) == 0 && f.short_max == 12);
    cr_assert(sl_io_fault_parse("eintr", &f, err, sizeof err) == -EINVAL);
    cr_assert(sl_io_fault_parse("eintr=x", &f, err, sizeof err) == -EINVAL);
    cr_assert(sl_io_fault_parse("bogus=3", &f, err, sizeof err) == -EINVAL && strstr(err, "bogus"));
}

/* mmap: the file shrinks after sl_io_wait returned, while the piece is held (issue 20, item 15).
 * Touching the vanished pages used to kill the process with SIGBUS; now they read as zeros, and
 * sl_io_check reports -EIO naming the file, so the caller discards what it computed.  A piece that
 * lies wholly inside the new size is still exact and checks clean; pread/uring never lose bytes. */
Test(io_fault, mmap_file_shrinks_while_a_piece_is_held, .init = setup, .fini = teardown) {
    sl_io *io = iot_open(F.path, SL_IO_MMAP, 2, MAX_PIECE, true, 0, NULL);
    const uint64_t off = (1u << 20) - 4096;   /* crosses the new end at 1 MiB */
    int lost = sl_io_request(io, off, 300000), kept = sl_io_request(io, 8192, 300000);
    cr_assert(lost >= 0 && kept >= 0);
    const void *p, *q;
    cr_assert(sl_io_wait(io, lost, &p) == 0 && sl_io_wait(io, kept, &q) == 0, "%s", sl_io_errmsg(io));
    int fd = open(F.path, O_WRONLY);
    cr_assert(fd >= 0 && ftruncate(fd, 1u << 20) == 0);
    close(fd);
    uint64_t sum = 0;
    for (size_t i = 0; i < 300000; i += 64) sum += ((const uint8_t *)p)[i];   /* would raise SIGBUS */
    cr_expect(memcmp(p, F.ref + off, 4096) == 0, "the bytes before the new end are the file's");
    cr_expect(((const uint8_t *)p)[4096 + 100] == 0, "a vanished page reads as zeros");
    cr_expect_eq(sl_io_check(io, lost), -EIO);
    cr_expect(strstr(sl_io_errmsg(io), "shrank") && strstr(sl_io_errmsg(io), F.path), "%s", sl_io_errmsg(io));
    cr_expect(memcmp(q, F.ref + 8192, 300000) == 0);
    cr_expect_eq(sl_io_check(io, kept), 0);
    sl_io_release(io, lost);
    sl_io_release(io, kept);
    /* a later piece past the new end fails at request time, as before */
    int past = sl_io_request(io, (1u << 20) + 4096, 1000);
    cr_assert(past >= 0);
    cr_expect(sl_io_wait(io, past, &p) < 0);
    sl_io_release(io, past);
    sl_io_close(io);
    (void)sum;
}

/* A SIGBUS the reader did not cause still kills: the handler passes it on (to ASan's own handler in
 * the sanitizer build, which reports it and aborts). */
#if defined(__SANITIZE_ADDRESS__)
#define FOREIGN_SIGBUS_KILLS_WITH SIGABRT
#else
#define FOREIGN_SIGBUS_KILLS_WITH SIGBUS
#endif
Test(io_fault, foreign_sigbus_still_kills, .init = setup, .fini = teardown, .signal = FOREIGN_SIGBUS_KILLS_WITH) {
    sl_io *io = iot_open(F.path, SL_IO_MMAP, 1, MAX_PIECE, true, 0, NULL);   /* installs the handler */
    char path[] = "/tmp/sl_sigbus_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0 && ftruncate(fd, 8192) == 0);
    volatile uint8_t *m = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 0);
    cr_assert(m != MAP_FAILED);
    cr_assert(ftruncate(fd, 0) == 0);
    unlink(path);
    (void)m[4096];   /* not a reader's piece: SIGBUS as without sluice */
    sl_io_close(io);
}
