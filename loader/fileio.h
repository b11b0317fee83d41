/* loader/fileio.h — whole-range positional reads for the small synchronous reads that need no
 * backend (metadata, norm vectors, resident weights). */
#ifndef SL_LOADER_FILEIO_H
#define SL_LOADER_FILEIO_H

#include <stddef.h>
#include <stdint.h>

/* pread exactly n bytes at off into dst: EINTR retried, short reads finished.  0 or -errno
 * (-EIO when the file ends first). */
int sl_pread_full(int fd, void *dst, size_t n, uint64_t off);

#endif
