/* runtime/diskprobe.h — the device's O_DIRECT sequential read rate, measured once and cached. */
#ifndef SL_RUNTIME_DISKPROBE_H
#define SL_RUNTIME_DISKPROBE_H

#include <stddef.h>

/* Bytes/s of O_DIRECT sequential reads of `path`'s device.  Uses the cached figure for the device
 * (in $XDG_CACHE_HOME/sluice or ~/.cache/sluice, keyed by st_dev) when there is one; otherwise reads
 * up to 256 MiB of `path` through io_uring (4 MiB reads, 4 in flight) and caches the result.  Files
 * under 64 MiB are too small to measure: returns `fallback` then.  `how` says which it was. */
double sl_disk_read_rate(const char *path, double fallback, char *how, size_t howlen);

#endif
