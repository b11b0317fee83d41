/* runtime/plan/diskprobe.h — the disk's read rate for a model file, measured the way a run reads it.
 *
 * The rate this machine's disk delivers depends on how it is asked: the backend (O_DIRECT through
 * io_uring or a reader thread, or the page cache through mmap), the size of each piece and how many
 * pieces are in flight.  docs/planner.md shows the spread.  So the probe reads the model file with
 * the run's own reader (loader/io.h) and the plan's piece size and depth, and caches the figure per
 * device and configuration.
 */
#ifndef SL_RUNTIME_DISKPROBE_H
#define SL_RUNTIME_DISKPROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loader/io.h"

typedef struct sl_disk_probe {
    sl_io_backend backend;
    bool     no_direct;   /* buffered reads (as --no-direct runs them) */
    uint64_t piece;       /* bytes per request (0: 4 MiB) */
    int      depth;       /* requests in flight (0: 4) */
    bool     fresh;       /* measure now even if a figure is cached (and replace it) */
} sl_disk_probe;

/* Bytes/s at which `path` reads as configured by `pr`.  Uses the cached figure for the device and
 * configuration (in the sl_probe_cache_dir, keyed by st_dev, backend, piece and depth) unless
 * pr->fresh; otherwise reads 1 GiB (at most half the file) of `path` in 8 regions, one at a random place in each eighth of it
 * (after dropping its page cache, and again after), caches and returns the rate.  Files under 64 MiB are too small to
 * measure, and a probe that fails (an I/O error) measures nothing: `fallback` is returned then.
 * `how` says which it was. */
double sl_disk_read_rate(const char *path, const sl_disk_probe *pr, double fallback, char *how, size_t howlen);

#endif
