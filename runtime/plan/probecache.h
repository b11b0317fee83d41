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

/* A cache file is one line, "RATE WHEN LOAD [STAMP]": bytes per second, when it was measured (Unix
 * seconds), the 1-minute load average per online CPU at that moment, and what measured it (the
 * compute probe's: SL_KERNELS_ID, a hash of the kernel sources; none for the disk).  A measurement
 * stands for the conditions it was taken in, so a cached figure is not used (and is measured
 * again) when it is older than SL_PROBE_MAX_AGE_S, has no date (a file of an older sluice, or
 * written by hand: pin a rate with --disk-bw / --compute-bw instead), was taken by other kernels
 * (a stamp that differs from `stamp`: an upgrade made Q4_K 1.4x faster and the cache kept the old
 * figure), or was taken on a busy machine (load above SL_PROBE_BUSY_LOAD per CPU) that is now at
 * most half as busy: a planner that read a figure from a loaded hour kept predicting half the
 * speed a quiet machine ran at.  `stamp`: NULL or "" when none applies; at most 31 characters.
 * sl_probe_cache_read returns true with *bytes_per_s set for a usable figure; false otherwise,
 * with the reason in why[] ("" when there is no usable file at all).  sl_probe_cache_write
 * replaces the file (creating its directories); a cache that cannot be written is not an error. */
#define SL_PROBE_MAX_AGE_S (7 * 86400)
#define SL_PROBE_BUSY_LOAD 1.0
bool sl_probe_cache_read(const char *file, const char *stamp, double *bytes_per_s, char *why, size_t whylen);
void sl_probe_cache_write(const char *file, const char *stamp, double bytes_per_s);
/* The 1-minute load average per online CPU now (0 when unknown). */
double sl_probe_load_per_cpu(void);

#endif
