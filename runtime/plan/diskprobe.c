/* runtime/plan/diskprobe.c — measure a model file's read rate with the run's reader, once per
 * configuration. */
#include "runtime/plan/diskprobe.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "loader/pagecache.h"
#include "runtime/plan/probecache.h"

#define PROBE_BYTES   (1024ull << 20)
#define PROBE_REGIONS 8
#define MIN_FILE    (64ull << 20)

/* Contract: the cache file for device `dev` read as `pr` says (piece and depth already defaulted). */
static void cache_path(dev_t dev, const sl_disk_probe *pr, char *buf, size_t len)
{
    char dir[3800];
    sl_probe_cache_dir(dir, sizeof dir);
    snprintf(buf, len, "%s/disk-%" PRIu64 "-%s%s-%" PRIu64 "k-q%d.bw", dir, (uint64_t)dev, sl_io_backend_name(pr->backend),
             pr->no_direct && pr->backend != SL_IO_MMAP ? "-buffered" : "", pr->piece >> 10, pr->depth);
}

/* Contract: bytes/s reading PROBE_BYTES (at most half of a smaller file) in PROBE_REGIONS regions
 * spread evenly over `path`, each read sequentially in pieces of pr->piece with pr->depth in flight,
 * through loader/io.c as configured; 0 if the probe cannot run.  `active` gets the backend in use
 * (io_uring may fall back to pread).
 * Why 1 GiB in 8 places: a run streams the whole file every token, so it meets every part of the
 * disk's behaviour: a VM's disk stalls now and then and reads parts the host has cached faster than
 * others; one short read from one place catches one stall or none.
 * Why each region at a random place in its eighth of the file: probes at fixed places warm exactly
 * those places in the host's cache, so every later probe reads faster than the run it precedes.
 * (The measurements behind both choices are in docs/planner.md.) */
static double measure(const char *path, uint64_t size, const sl_disk_probe *pr, const char **active)
{
    const uint64_t piece = pr->piece;
    const int depth = pr->depth;
    uint64_t total = size / 2 < PROBE_BYTES ? size / 2 : PROBE_BYTES;
    uint64_t region = total / PROBE_REGIONS / piece * piece;   /* whole pieces, so offsets stay aligned */
    if (!region) return 0;
    const uint64_t pg = sl_page_size();   /* offsets in whole pages: no read straddles one more */
    const uint64_t stride = size / PROBE_REGIONS / pg * pg;
    uint64_t phase[PROBE_REGIONS];
    struct timespec seed;
    clock_gettime(CLOCK_REALTIME, &seed);
    uint64_t x = (uint64_t)seed.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)seed.tv_sec ^ (uint64_t)getpid() << 32;
    for (int r = 0; r < PROBE_REGIONS; r++) {   /* xorshift64: only needs to differ from run to run */
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        phase[r] = stride > region ? x % ((stride - region) / pg + 1) * pg : 0;
    }
    sl_io_opts o = { .backend = pr->backend, .slots = depth, .max_piece = (size_t)piece, .no_direct = pr->no_direct };
    char err[256];
    sl_io *io;
    (void)sl_page_cache_drop(path);   /* pages cached earlier would be free hits */
    if (sl_io_open(path, &o, &io, err, sizeof err)) return 0;
    *active = sl_io_backend_name(sl_io_backend_active(io));
    int slot[SL_IO_MAX_SLOTS];
    const uint64_t n_pieces = region / piece * PROBE_REGIONS;
    uint64_t next = 0, done = 0;   /* piece indices */
    int head = 0, n = 0, rc = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (done < n_pieces && !rc) {
        while (n < depth && next < n_pieces) {
            uint64_t r = next / (region / piece), k = next % (region / piece);
            int s = sl_io_request(io, r * stride + phase[r] + k * piece, (size_t)piece);
            if (s < 0) { rc = s; break; }
            slot[(head + n) % depth] = s;
            n++;
            next++;
        }
        if (rc || !n) break;
        const void *data;
        rc = sl_io_wait(io, slot[head], &data);
        sl_io_release(io, slot[head]);
        head = (head + 1) % depth;
        n--;
        done++;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    sl_io_close(io);
    (void)sl_page_cache_drop(path);   /* leave no pages behind to count against a budget */
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    return rc || s <= 0 ? 0 : (double)(n_pieces * piece) / s;   /* what was read, not `total` */
}

double sl_disk_read_rate(const char *path, const sl_disk_probe *given, double fallback, char *how, size_t howlen)
{
    sl_disk_probe pr = *given;
    if (!pr.piece) pr.piece = 4u << 20;
    const uint64_t pg = sl_page_size();
    pr.piece = (pr.piece + pg - 1) / pg * pg;
    if (pr.depth < 1) pr.depth = 4;
    if (pr.depth > SL_IO_MAX_SLOTS) pr.depth = SL_IO_MAX_SLOTS;
    struct stat st;
    if (stat(path, &st) < 0) { snprintf(how, howlen, "assumed %.2f GB/s", fallback / 1e9); return fallback; }
    char cp[4096];
    cache_path(st.st_dev, &pr, cp, sizeof cp);
    double bw = 0;
    char stale[160] = "";
    if (!pr.fresh && sl_probe_cache_read(cp, NULL, &bw, stale, sizeof stale)) {
        snprintf(how, howlen, "%.2f GB/s measured earlier (%s)", bw / 1e9, cp);
        return bw;
    }
    if ((uint64_t)st.st_size < MIN_FILE) {
        snprintf(how, howlen, "assumed %.2f GB/s (file too small to measure)", fallback / 1e9);
        return fallback;
    }
    const char *active = "?";
    bw = measure(path, (uint64_t)st.st_size, &pr, &active);
    if (!sl_probe_rate_sane(bw)) {
        snprintf(how, howlen, "assumed %.2f GB/s (the read probe could not run)", fallback / 1e9);
        return fallback;
    }
    sl_probe_cache_write(cp, NULL, bw);
    snprintf(how, howlen, "%.2f GB/s measured now (%s, %.1f MiB pieces, %d in flight, %d places in the file%s%s; cached in %s)",
             bw / 1e9, active, pr.piece / 1048576.0, pr.depth, PROBE_REGIONS, *stale ? "; " : "", stale, cp);
    return bw;
}
