/* tests/test_io.c — read backends against the bytes on disk: every backend × O_DIRECT on/off × slot
 * counts × syscall chunk sizes, with random odd ranges, pipelined requests, -EBUSY, sync reads;
 * bad arguments; the uring→pread fallback; and the page-cache bound.  Exact byte equality throughout
 * (a reader has no tolerance).  Fault injection is in test_io_fault.c. */
#include "io_testutil.h"
#include "qemu_testutil.h"

#include <errno.h>

/* 3 MiB + an odd tail, so the last O_DIRECT block is partial and EOF handling runs. */
#define FILE_SIZE ((3u << 20) + 1237u)
#define MAX_PIECE ((1u << 20) + 333u)

static iot_file F;
static void setup(void) { iot_make(&F, FILE_SIZE, 0x5eed1001); }
static void teardown(void) { iot_remove(&F); }

/* Pipelined random requests: keep up to `slots` outstanding, check the oldest when full; check that
 * one more request gets -EBUSY; then stream the whole file in max-size consecutive pieces; then sync
 * reads (some longer than a chunk and than max_piece). */
static void workload(sl_io *io, int slots, const char *cfg, uint64_t seed)
{
    uint64_t rs = seed;
    int q[SL_IO_MAX_SLOTS];
    uint64_t qo[SL_IO_MAX_SLOTS];
    size_t ql[SL_IO_MAX_SLOTS];
    int n = 0;
    for (int i = 0; i < 24; i++) {
        if (n == slots) {
            cr_assert(sl_io_request(io, 0, 1) == -EBUSY, "%s: request over %d slots must be -EBUSY", cfg, slots);
            iot_check_slot(io, &F, q[0], qo[0], ql[0], cfg);
            sl_io_release(io, q[0]);
            memmove(q, q + 1, (size_t)(n - 1) * sizeof q[0]);
            memmove(qo, qo + 1, (size_t)(n - 1) * sizeof qo[0]);
            memmove(ql, ql + 1, (size_t)(n - 1) * sizeof ql[0]);
            n--;
        }
        /* mix tiny, odd, and maximal pieces; offsets anywhere including the last bytes */
        size_t len = i % 5 == 0 ? MAX_PIECE : i % 5 == 1 ? (size_t)iot_range(&rs, 1, 100)
                                            : (size_t)iot_range(&rs, 1, MAX_PIECE);
        uint64_t off = i % 7 == 3 ? FILE_SIZE - len : iot_range(&rs, 0, FILE_SIZE - len);
        int s = sl_io_request(io, off, len);
        cr_assert(s >= 0 && s < slots, "%s: request(%llu,+%zu) = %d: %s", cfg, (unsigned long long)off,
                  len, s, sl_io_errmsg(io));
        q[n] = s; qo[n] = off; ql[n] = len; n++;
    }
    for (int i = 0; i < n; i++) {
        iot_check_slot(io, &F, q[i], qo[i], ql[i], cfg);
        cr_assert(sl_io_wait(io, q[i], &(const void *){0}) == 0, "%s: second wait", cfg);
        sl_io_release(io, q[i]);
    }
    /* sequential streaming, `slots` pieces ahead */
    uint64_t next = 0, done = 0;
    int head = 0;
    n = 0;
    while (done < FILE_SIZE) {
        while (n < slots && next < FILE_SIZE) {
            size_t len = FILE_SIZE - next < MAX_PIECE ? FILE_SIZE - next : MAX_PIECE;
            int s = sl_io_request(io, next, len);
            cr_assert(s >= 0, "%s: stream request: %s", cfg, sl_io_errmsg(io));
            q[(head + n) % SL_IO_MAX_SLOTS] = s;
            qo[(head + n) % SL_IO_MAX_SLOTS] = next;
            ql[(head + n) % SL_IO_MAX_SLOTS] = len;
            n++;
            next += len;
        }
        iot_check_slot(io, &F, q[head], qo[head], ql[head], cfg);
        sl_io_release(io, q[head]);
        done += ql[head];
        head = (head + 1) % SL_IO_MAX_SLOTS;
        n--;
    }
    /* synchronous reads into unaligned memory */
    uint8_t *dst = malloc(FILE_SIZE + 1);
    for (int i = 0; i < 8; i++) {
        size_t len = i == 0 ? FILE_SIZE : (size_t)iot_range(&rs, 1, FILE_SIZE / 2);
        uint64_t off = iot_range(&rs, 0, FILE_SIZE - len);
        int r = sl_io_read(io, off, len, dst + 1);
        cr_assert(r == 0, "%s: sl_io_read(%llu,+%zu) = %d: %s", cfg, (unsigned long long)off, len, r,
                  sl_io_errmsg(io));
        cr_assert(memcmp(dst + 1, F.ref + off, len) == 0, "%s: sync read bytes differ", cfg);
    }
    free(dst);
    sl_io_stats st;
    sl_io_get_stats(io, &st);
    cr_assert(st.requests > 24 && st.bytes_read >= st.bytes_requested && st.errors == 0 &&
              st.sync_reads == 8 && st.waits > 24, "%s: stats", cfg);
}

static void matrix(sl_io_backend b)
{
    static const int slot_counts[] = { 1, 2, 3, 8 };
    static const size_t chunks[] = { 0, 64 << 10 };   /* default 4 MiB, and small so pieces need many reads */
    for (int nd = 0; nd < 2; nd++)
        for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++)
            for (size_t k = 0; k < sizeof slot_counts / sizeof slot_counts[0]; k++) {
                char cfg[96];
                snprintf(cfg, sizeof cfg, "%s no_direct=%d chunk=%zu slots=%d", sl_io_backend_name(b), nd,
                         chunks[c], slot_counts[k]);
                sl_io *io = iot_open(F.path, b, slot_counts[k], MAX_PIECE, nd, chunks[c], NULL);
                cr_assert(sl_io_file_size(io) == FILE_SIZE);
                if (b != SL_IO_MMAP) {
                    cr_assert(sl_io_is_direct(io) == !nd, "%s: O_DIRECT expected on /tmp", cfg);
                    cr_assert(sl_io_mem_bytes(io) >= (size_t)slot_counts[k] * MAX_PIECE, "%s: mem_bytes", cfg);
                }
                workload(io, slot_counts[k], cfg, 77 + k * 13 + c * 7 + (uint64_t)nd);
                sl_io_close(io);
            }
}

Test(io, pread_matrix, .init = setup, .fini = teardown) { matrix(SL_IO_PREAD); }
Test(io, mmap_matrix, .init = setup, .fini = teardown) { matrix(SL_IO_MMAP); }
Test(io, uring_matrix, .init = setup, .fini = teardown) {
    if (!sl_io_uring_available()) cr_skip_test("skipped: io_uring unavailable here (io_uring_queue_init fails: no kernel support, or qemu-user)");
    matrix(SL_IO_URING);
}

/* Requests the API must refuse, and calls on slots that are not held. */
Test(io, bad_arguments, .init = setup, .fini = teardown) {
    for (int b = SL_IO_PREAD; b <= SL_IO_URING; b++) {
        if (b == SL_IO_URING && !sl_io_uring_available()) continue;
        sl_io *io = iot_open(F.path, (sl_io_backend)b, 2, 4096, false, 0, NULL);
        cr_assert(sl_io_request(io, 0, 0) == -EINVAL);
        cr_assert(sl_io_request(io, 0, 4097) == -EINVAL, "longer than max_piece");
        cr_assert(sl_io_request(io, FILE_SIZE - 10, 11) == -EINVAL, "past EOF");
        cr_assert(sl_io_request(io, UINT64_MAX - 5, 10) == -EINVAL, "offset overflow");
        cr_assert(strstr(sl_io_errmsg(io), F.path), "message names the file: %s", sl_io_errmsg(io));
        cr_assert(sl_io_read(io, FILE_SIZE, 1, &(char){0}) == -EINVAL);
        const void *p = (const void *)1;
        cr_assert(sl_io_wait(io, 0, &p) == -EINVAL && p == NULL, "wait on a free slot");
        cr_assert(sl_io_wait(io, 5, &p) == -EINVAL);
        sl_io_release(io, 1);   /* no-op */
        /* the last byte of the file, then a request released without waiting (cancel path) */
        int s = sl_io_request(io, FILE_SIZE - 1, 1);
        cr_assert(s >= 0);
        int s2 = sl_io_request(io, 4096, 4096);
        cr_assert(s2 >= 0 && s2 != s);
        sl_io_release(io, s2);
        iot_check_slot(io, &F, s, FILE_SIZE - 1, 1, sl_io_backend_name((sl_io_backend)b));
        sl_io_close(io);   /* closes with slot s still held */
    }
    sl_io_opts o = { .backend = SL_IO_PREAD, .slots = 0, .max_piece = 1 };
    sl_io *io = NULL;
    char err[256];
    cr_assert(sl_io_open(F.path, &o, &io, err, sizeof err) == -EINVAL && io == NULL);
    o.slots = 1;
    cr_assert(sl_io_open("/nonexistent/x.gguf", &o, &io, err, sizeof err) == -ENOENT && io == NULL);
    cr_assert(strstr(err, "/nonexistent/x.gguf"), "%s", err);
    sl_io_backend bk;
    cr_assert(sl_io_backend_parse("mmap", &bk) == 0 && bk == SL_IO_MMAP);
    cr_assert(sl_io_backend_parse("aio", &bk) == -EINVAL);
}

/* Page size as a parameter (sl_io_opts.page_size): every backend, with and without O_DIRECT, reads
 * the exact bytes when run as on a 16 or 64 KiB-page kernel (mmap ranges and buffer sizes in those
 * pages), slot buffers come in whole pages, and a page size the kernel cannot map with (not a
 * power-of-two multiple of the real one) is refused. */
Test(io, simulated_page_sizes, .init = setup, .fini = teardown) {
    const long real = sysconf(_SC_PAGESIZE);
    const size_t pages[] = { 16u << 10, 64u << 10 };
    for (size_t k = 0; k < 2; k++) {
        if (pages[k] % (size_t)real) continue;   /* a real page larger than the simulated one */
        for (int b = SL_IO_PREAD; b <= SL_IO_URING; b++)
            for (int nd = 0; nd < 2; nd++) {
                if (b == SL_IO_URING && !sl_io_uring_available()) continue;
                char cfg[96], err[256];
                snprintf(cfg, sizeof cfg, "%s no_direct=%d page=%zu", sl_io_backend_name((sl_io_backend)b), nd, pages[k]);
                sl_io_opts o = { .backend = (sl_io_backend)b, .slots = 3, .max_piece = MAX_PIECE, .no_direct = nd,
                                 .page_size = pages[k] };
                sl_io *io = NULL;
                cr_assert(sl_io_open(F.path, &o, &io, err, sizeof err) == 0, "%s: %s", cfg, err);
                if (b != SL_IO_MMAP) cr_assert(sl_io_mem_bytes(io) % pages[k] == 0, "%s: mem_bytes %zu", cfg, sl_io_mem_bytes(io));
                else cr_assert_eq(sl_io_mem_bytes(io), 3 * (MAX_PIECE + 2 * pages[k]), "%s: mmap pieces span pages", cfg);
                workload(io, 3, cfg, 991 + k * 3 + (uint64_t)nd);
                sl_io_close(io);
            }
    }
    const size_t bad[] = { 3000, (size_t)real / 2, (size_t)real * 3, 2u << 20 };
    for (size_t k = 0; k < 4; k++) {
        sl_io_opts o = { .backend = SL_IO_PREAD, .slots = 2, .max_piece = 4096, .page_size = bad[k] };
        sl_io *io = NULL;
        char err[256] = "";
        cr_assert(sl_io_open(F.path, &o, &io, err, sizeof err) == -EINVAL, "page_size %zu accepted", bad[k]);
        cr_assert(strstr(err, "page_size"), "%s", err);
    }
}

/* SLUICE_NO_URING=1 (the sl_io_disable_uring hook) simulates a kernel without io_uring: URING falls
 * back to pread and says so. */
Test(io, uring_fallback, .init = setup, .fini = teardown) {
    sl_io_disable_uring("SLUICE_NO_URING=1");   /* each Criterion test runs in its own process */
    cr_assert(sl_io_uring_available() == 0);
    sl_io_opts o = { .backend = SL_IO_URING, .slots = 2, .max_piece = MAX_PIECE };
    sl_io *io = NULL;
    char err[256];
    cr_assert(sl_io_open(F.path, &o, &io, err, sizeof err) == 0, "%s", err);
    cr_assert(sl_io_backend_active(io) == SL_IO_PREAD);
    cr_assert(strstr(sl_io_notice(io), "SLUICE_NO_URING"), "notice: %s", sl_io_notice(io));
    workload(io, 2, "uring->pread fallback", 5);
    sl_io_close(io);
}

/* Reading everything through a backend with a cold cache leaves <= 1% of the file's pages cached
 * (1% = 20 pages of 8 MiB: slack for pages another process or readahead might touch; the design
 * target is 0).  Skipped if the filesystem does not drop pages on POSIX_FADV_DONTNEED. */
static iot_file PC;
static void pc_setup(void) { iot_make(&PC, (8u << 20) + 100, 0xcafe); }
static void pc_teardown(void) { iot_remove(&PC); }

Test(io, page_cache_bounded, .init = pc_setup, .fini = pc_teardown) {
    iot_file f = PC;
    if (iot_resident(f.path) > 0.01) cr_skip_test("filesystem ignores POSIX_FADV_DONTNEED: cannot measure");
    struct { sl_io_backend b; bool nd; } cfg[] = {
        { SL_IO_PREAD, false }, { SL_IO_PREAD, true }, { SL_IO_URING, false }, { SL_IO_URING, true },
        { SL_IO_MMAP, false },
    };
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        if (cfg[c].b == SL_IO_URING && !sl_io_uring_available()) {
            fprintf(stderr, "skipped: uring page-cache bound (io_uring unavailable here)\n");
            continue;
        }
        if (cfg[c].b == SL_IO_MMAP && tq_under_qemu_user()) {
            fprintf(stderr, "skipped: mmap page-cache bound under qemu-user (it ignores madvise hints)\n");
            continue;
        }
        iot_drop(f.path);
        sl_io *io = iot_open(f.path, cfg[c].b, 3, 777777, cfg[c].nd, 256 << 10, NULL);
        /* pieces of odd size so piece edges fall inside pages */
        int q[3], n = 0, head = 0;
        uint64_t off = 0;
        size_t piece = 777777;
        while (off < f.size || n > 0) {
            while (n < 3 && off < f.size) {
                size_t len = f.size - off < piece ? f.size - off : piece;
                q[(head + n++) % 3] = sl_io_request(io, off, len);
                off += len;
            }
            const void *p;
            cr_assert(sl_io_wait(io, q[head], &p) == 0, "%s", sl_io_errmsg(io));
            sl_io_release(io, q[head]);
            head = (head + 1) % 3;
            n--;
        }
        double res = iot_resident(f.path);
        cr_assert(res <= 0.01, "%s no_direct=%d: pieces left %.2f%% of the file in the page cache",
                  sl_io_backend_name(cfg[c].b), cfg[c].nd, res * 100);
        iot_drop(f.path);
        uint8_t *dst = malloc(f.size);
        for (uint64_t o = 0; o < f.size; o += 1000003) {   /* sync reads with edges inside pages */
            size_t len = f.size - o < 1000003 ? f.size - o : 1000003;
            cr_assert(sl_io_read(io, o, len, dst + o) == 0);
        }
        cr_assert(memcmp(dst, f.ref, f.size) == 0);
        free(dst);
        sl_io_close(io);
        res = iot_resident(f.path);
        cr_assert(res <= 0.01, "%s no_direct=%d: sync reads left %.2f%% of the file in the page cache",
                  sl_io_backend_name(cfg[c].b), cfg[c].nd, res * 100);
    }
}
