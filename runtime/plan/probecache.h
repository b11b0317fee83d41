/* runtime/plan/probecache.h — where the measured disk and compute rates are cached.
 *
 * One small text file per measurement under $XDG_CACHE_HOME/sluice (else ~/.cache/sluice, else
 * /var/tmp/.cache/sluice without a HOME), shared by runtime/plan/diskprobe.c and runtime/plan/computeprobe.c
 * so both put their figures in the one place users are told to look (and to delete to re-probe).
 */
#ifndef SL_RUNTIME_PROBECACHE_H
#define SL_RUNTIME_PROBECACHE_H

#include <stdbool.h>
#include <stddef.h>

/* The cache directory, no trailing slash. */
void sl_probe_cache_dir(char *buf, size_t len);
/* Creates every missing directory on the way to `file` (errors are left to the fopen that follows:
 * a cache that cannot be written only means measuring again next time). */
void sl_probe_cache_mkdirs(const char *file);

/* Bytes per second a cached (or just measured) rate may be: finite, at least 1 MB/s, at most
 * 10 TB/s.  A cache file is written by sluice but can be edited or corrupted: a value outside this
 * range (inf, nan, 0, 1e30) is discarded and measured again, never planned with. */
#define SL_PROBE_RATE_MIN 1e6
#define SL_PROBE_RATE_MAX 1e13
bool sl_probe_rate_sane(double bytes_per_s);

#endif
