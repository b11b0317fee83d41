/* runtime/plan/probecache.h — where the measured disk and compute rates are cached.
 *
 * One small text file per measurement under $XDG_CACHE_HOME/sluice (else ~/.cache/sluice, else
 * /var/tmp/.cache/sluice without a HOME), shared by runtime/plan/diskprobe.c and runtime/plan/computeprobe.c
 * so both put their figures in the one place users are told to look (and to delete to re-probe).
 */
#ifndef SL_RUNTIME_PROBECACHE_H
#define SL_RUNTIME_PROBECACHE_H

#include <stddef.h>

/* The cache directory, no trailing slash. */
void sl_probe_cache_dir(char *buf, size_t len);
/* Creates every missing directory on the way to `file` (errors are left to the fopen that follows:
 * a cache that cannot be written only means measuring again next time). */
void sl_probe_cache_mkdirs(const char *file);

#endif
