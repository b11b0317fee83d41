/* bench/bench_io.c — how fast can the disk deliver a model file, and how close does each read backend
 * get?
 *
 *   bench_io FILE [--backend pread|mmap|uring|all] [--piece MiB] [--slots N] [--chunk MiB] [--raw-only]
 *   bench_io FILE --sweep [--rounds N]
 *
 * First the raw ceiling: sequential O_DIRECT pread of the whole file in piece-sized reads, one at a
 * time (what a single reader thread can get), and 1 MiB reads 16 in flight or 4 MiB reads 8 in flight
 * via io_uring (what the device gives parallel work).  Then each backend (O_DIRECT and buffered variants)
 * streams the file in pieces with `slots` requests in flight, the way the layer loader does, and
 * touches every cache line (a cheap stand-in for compute; the checksums must agree across backends).
 * The file's page cache is dropped before every run, and the fraction of the file left in the page
 * cache afterwards is printed to show the reader keeps it bounded.
 */
#include "loader/io.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void drop_cache(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

/* Fraction of the file's pages in the page cache. */
static double resident(const char *path)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size == 0) { if (fd >= 0) close(fd); return 0; }
    size_t pages = ((size_t)st.st_size + 4095) / 4096, n = 0;
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    unsigned char *v = malloc(pages);
    if (m != MAP_FAILED && v && mincore(m, (size_t)st.st_size, v) == 0)
        for (size_t i = 0; i < pages; i++) n += v[i] & 1;
    free(v);
    if (m != MAP_FAILED) munmap(m, (size_t)st.st_size);
    close(fd);
    return (double)n / (double)pages;
}

/* Stand-in for compute: touch every cache line, summing the byte at each file offset that is a
 * multiple of 64 (independent of how the file was cut into pieces, so backends must agree). */
static uint64_t line_sum(const uint8_t *p, uint64_t off, size_t n)
{
    uint64_t s = 0;
    for (size_t i = (64 - off % 64) % 64; i < n; i += 64) s += p[i];
    return s;
}

/* Raw sequential O_DIRECT read, one read of `piece` bytes at a time.  GB/s, or -1. */
static double raw_direct(const char *path, size_t piece, uint64_t *bytes)
{
    int fd = open(path, O_RDONLY | O_DIRECT);
    if (fd < 0) return -1;
    void *buf = NULL;
    if (posix_memalign(&buf, 4096, piece) != 0) { close(fd); return -1; }
    memset(buf, 0, piece);
    uint64_t off = 0;
    double t0 = now_s();
    for (;;) {
        ssize_t n = pread(fd, buf, piece, (off_t)off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        off += (uint64_t)n;
    }
    double dt = now_s() - t0;
    free(buf);
    close(fd);
    *bytes = off;
    return (double)off / dt / 1e9;
}

/* Raw sequential O_DIRECT read with `qd` reads of `bs` bytes in flight (io_uring): the device's
 * ceiling when it is given parallel work.  GB/s, or -1. */
static double raw_direct_range(const char *path, size_t bs, int qd, uint64_t start, uint64_t len);
static double raw_direct_qd(const char *path, size_t bs, int qd) { return raw_direct_range(path, bs, qd, 0, UINT64_MAX); }

/* Contract: as raw_direct_qd, over [start, start + len) of the file (clamped to its size). */
static double raw_direct_range(const char *path, size_t bs, int qd, uint64_t start, uint64_t len)
{
    int fd = open(path, O_RDONLY | O_DIRECT);
    struct stat st;
    struct io_uring ring;
    if (fd < 0 || fstat(fd, &st) != 0 || io_uring_queue_init((unsigned)qd, &ring, 0) < 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    uint8_t *buf = NULL;
    if (posix_memalign((void **)&buf, 4096, bs * (size_t)qd) != 0) { close(fd); return -1; }
    memset(buf, 0, bs * (size_t)qd);
    uint64_t size = (uint64_t)st.st_size, next = start, got = 0;
    if (len < size - (start < size ? start : size)) size = start + len;
    int inflight = 0;
    double t0 = now_s();
    for (int i = 0; i < qd && next < size; i++, next += bs, inflight++) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
        io_uring_prep_read(sqe, fd, buf + (size_t)i * bs, (unsigned)bs, next);
        io_uring_sqe_set_data64(sqe, (uint64_t)i);
    }
    while (inflight > 0) {
        struct io_uring_cqe *cqe;
        io_uring_submit_and_wait(&ring, 1);
        if (io_uring_wait_cqe(&ring, &cqe) < 0) break;
        uint64_t i = io_uring_cqe_get_data64(cqe);
        if (cqe->res > 0) got += (uint64_t)cqe->res;   /* short reads only at EOF: not resubmitted */
        io_uring_cqe_seen(&ring, cqe);
        inflight--;
        if (next < size) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
            io_uring_prep_read(sqe, fd, buf + i * bs, (unsigned)bs, next);
            io_uring_sqe_set_data64(sqe, i);
            next += bs;
            inflight++;
        }
    }
    double dt = now_s() - t0;
    io_uring_queue_exit(&ring);
    free(buf);
    close(fd);
    return (double)got / dt / 1e9;
}

typedef struct result { double gbs, wait_frac; uint64_t sum, reads; size_t mem; double cached; bool ok; } result;

/* Stream the whole file through one backend configuration. */
static result run(const char *path, sl_io_backend b, bool no_direct, int slots, size_t piece, size_t chunk,
                  char *note, size_t notelen) {
    result res = { 0 };
    sl_io_opts o = { .backend = b, .slots = slots, .max_piece = piece, .no_direct = no_direct, .chunk = chunk };
    sl_io *io = NULL;
    char err[256];
    drop_cache(path);
    if (sl_io_open(path, &o, &io, err, sizeof err) != 0) {
        snprintf(note, notelen, "%s", err);
        return res;
    }
    snprintf(note, notelen, "%s", sl_io_notice(io));
    uint64_t size = sl_io_file_size(io), next = 0, done = 0;
    int q[SL_IO_MAX_SLOTS];
    size_t ql[SL_IO_MAX_SLOTS];
    int head = 0, n = 0;
    double t0 = now_s();
    while (done < size) {
        while (n < slots && next < size) {
            size_t len = size - next < piece ? (size_t)(size - next) : piece;
            int s = sl_io_request(io, next, len);
            if (s < 0) { snprintf(note, notelen, "request: %s", sl_io_errmsg(io)); goto out; }
            q[(head + n) % SL_IO_MAX_SLOTS] = s;
            ql[(head + n) % SL_IO_MAX_SLOTS] = len;
            n++;
            next += len;
        }
        const void *p;
        if (sl_io_wait(io, q[head], &p) != 0) { snprintf(note, notelen, "%s", sl_io_errmsg(io)); goto out; }
        res.sum += line_sum(p, done, ql[head]);
        sl_io_release(io, q[head]);
        done += ql[head];
        head = (head + 1) % SL_IO_MAX_SLOTS;
        n--;
    }
    double dt = now_s() - t0;
    sl_io_stats st;
    sl_io_get_stats(io, &st);
    res.gbs = (double)size / dt / 1e9;
    res.wait_frac = (double)st.wait_ns * 1e-9 / dt;
    res.reads = st.reads_issued;
    res.mem = sl_io_mem_bytes(io);
    res.ok = true;
out:
    sl_io_close(io);
    res.cached = resident(path);
    return res;
}

/* Read rate against bytes in flight: raw io_uring O_DIRECT reads for a grid of read sizes x queue
 * depths, each cell reading 128 MiB at an offset no other cell of the sweep reads (the host may cache
 * the disk image: a re-read would be a free hit), cells in a rotated order each round so drift lands
 * on all of them.  Prints the median and range per cell; the planner's disk model
 * (runtime/plan/diskprobe.c) is a curve through these points. */
static int sweep(const char *path, int rounds)
{
    static const int bs_mib[] = { 1, 2, 4, 8 }, qds[] = { 1, 2, 4, 8 };
    enum { NB = 4, NQ = 4, NC = NB * NQ, MAXR = 16 };
    const uint64_t cell = 128ull << 20;
    struct stat st;
    if (stat(path, &st) != 0) { perror(path); return 1; }
    uint64_t size = (uint64_t)st.st_size, off = 0;
    if (rounds > MAXR) rounds = MAXR;
    double r[NC][MAXR];
    for (int k = 0; k < rounds; k++)
        for (int j = 0; j < NC; j++) {
            int c = (j + k * 5) % NC;
            if (off + cell > size) off = 0;   /* wrapped: later cells may be host-cache hits */
            drop_cache(path);
            r[c][k] = raw_direct_range(path, (size_t)bs_mib[c / NQ] << 20, qds[c % NQ], off, cell);
            off += cell;
        }
    if ((uint64_t)rounds * NC * cell > size) printf("note: the file is smaller than the sweep; offsets wrapped\n");
    printf("%8s %4s %10s %8s %8s %8s\n", "read MiB", "qd", "flight MiB", "GB/s", "min", "max");
    for (int c = 0; c < NC; c++) {
        double v[MAXR];
        for (int k = 0; k < rounds; k++) {   /* insertion sort: a handful of values */
            double x = r[c][k];
            int i = k;
            while (i > 0 && v[i - 1] > x) { v[i] = v[i - 1]; i--; }
            v[i] = x;
        }
        double med = rounds % 2 ? v[rounds / 2] : (v[rounds / 2 - 1] + v[rounds / 2]) / 2;
        printf("%8d %4d %10d %8.2f %8.2f %8.2f\n", bs_mib[c / NQ], qds[c % NQ], bs_mib[c / NQ] * qds[c % NQ], med, v[0],
               v[rounds - 1]);
    }
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_io FILE [--backend pread|mmap|uring|all] [--piece MiB] [--slots N] "
                    "[--chunk MiB] [--raw-only]\n       bench_io FILE --sweep [--rounds N]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *path = NULL, *backend = "all";
    double piece_mib = 64, chunk_mib = 0;
    int slots = 3;
    bool raw_only = false;   /* only the device's ceiling: what stream_bench.sh interleaves with runs */
    bool do_sweep = false;
    int rounds = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--backend") && i + 1 < argc) backend = argv[++i];
        else if (!strcmp(argv[i], "--piece") && i + 1 < argc) piece_mib = atof(argv[++i]);
        else if (!strcmp(argv[i], "--slots") && i + 1 < argc) slots = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--chunk") && i + 1 < argc) chunk_mib = atof(argv[++i]);
        else if (!strcmp(argv[i], "--raw-only")) raw_only = true;
        else if (!strcmp(argv[i], "--sweep")) do_sweep = true;
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (argv[i][0] == '-' || path) usage();
        else path = argv[i];
    }
    if (!path || piece_mib <= 0 || slots < 1 || slots > SL_IO_MAX_SLOTS || rounds < 1) usage();
    if (do_sweep) return sweep(path, rounds);
    size_t piece = (size_t)(piece_mib * 1048576), chunk = (size_t)(chunk_mib * 1048576);
    sl_io_backend only = SL_IO_PREAD;
    bool all = !strcmp(backend, "all");
    if (!all && sl_io_backend_parse(backend, &only) != 0) usage();

    uint64_t bytes = 0;
    drop_cache(path);
    double raw = raw_direct(path, piece, &bytes);
    printf("file %s: %.2f GB, piece %.1f MiB, %d slots, chunk %s\n", path, (double)bytes / 1e9, piece_mib,
           slots, chunk ? "custom" : "4 MiB");
    if (raw < 0) printf("raw O_DIRECT sequential read: not possible here (%s)\n", strerror(errno));
    else printf("raw O_DIRECT sequential pread, %.1f MiB reads, 1 at a time: %.2f GB/s\n", piece_mib, raw);
    drop_cache(path);
    double rawq = raw_direct_qd(path, 1u << 20, 16);
    if (rawq >= 0) printf("raw O_DIRECT sequential io_uring, 1 MiB reads, 16 in flight: %.2f GB/s\n", rawq);
    /* Larger reads, deeper in bytes: the loader's own pattern (≤ 4 MiB reads, several pieces ahead). */
    drop_cache(path);
    double rawq4 = raw_direct_qd(path, 4u << 20, 8);
    if (rawq4 >= 0) printf("raw O_DIRECT sequential io_uring, 4 MiB reads, 8 in flight: %.2f GB/s\n", rawq4);
    if (raw_only) return raw < 0 && rawq < 0 && rawq4 < 0;

    printf("\n%-8s %-9s %8s %8s %9s %9s %9s  %s\n", "backend", "mode", "GB/s", "wait%", "reads", "mem MiB",
           "cached%", "checksum");
    struct { sl_io_backend b; bool nd; } cfg[] = {
        { SL_IO_PREAD, false }, { SL_IO_PREAD, true }, { SL_IO_MMAP, true },
        { SL_IO_URING, false }, { SL_IO_URING, true },
    };
    uint64_t first_sum = 0;
    bool have_sum = false, mismatch = false;
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        if (!all && cfg[c].b != only) continue;
        char note[320];
        result r = run(path, cfg[c].b, cfg[c].nd, slots, piece, chunk, note, sizeof note);
        const char *mode = cfg[c].b == SL_IO_MMAP ? "mapped" : cfg[c].nd ? "buffered" : "direct";
        if (!r.ok) { printf("%-8s %-9s failed: %s\n", sl_io_backend_name(cfg[c].b), mode, note); continue; }
        printf("%-8s %-9s %8.2f %8.1f %9llu %9.1f %9.2f  %llu%s%s\n", sl_io_backend_name(cfg[c].b), mode,
               r.gbs, r.wait_frac * 100, (unsigned long long)r.reads, (double)r.mem / 1048576.0,
               r.cached * 100, (unsigned long long)r.sum, note[0] ? "  note: " : "", note);
        if (have_sum && r.sum != first_sum) mismatch = true;
        first_sum = r.sum;
        have_sum = true;
    }
    if (mismatch) { printf("ERROR: backends disagree on the file's bytes\n"); return 1; }
    return 0;
}
