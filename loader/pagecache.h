/* loader/pagecache.h — how much of a file sits in the page cache (like util-linux fincore). */
#ifndef SL_LOADER_PAGECACHE_H
#define SL_LOADER_PAGECACHE_H

#include <stdint.h>

/* Bytes of `path` resident in the page cache, via mincore() on a fresh read-only mapping (which
 * itself faults nothing in).  0 or -errno. */
int sl_page_cache_bytes(const char *path, uint64_t *resident, uint64_t *file_size);

/* Ask the kernel to drop the file's clean pages (POSIX_FADV_DONTNEED).  0 or -errno. */
int sl_page_cache_drop(const char *path);

/* Peak resident set size of this process (VmHWM of /proc/self/status), bytes; 0 if unknown. */
uint64_t sl_peak_rss(void);

#endif
