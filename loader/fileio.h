/* loader/fileio.h — whole-range positional reads for the small synchronous reads that need no
 * backend (metadata, norm vectors, resident weights), and the one way sluice opens a file it reads. */
#ifndef SL_LOADER_FILEIO_H
#define SL_LOADER_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* pread exactly n bytes at off into dst: EINTR retried, short reads finished.  0 or -errno
 * (-EIO when the file ends first). */
int sl_pread_full(int fd, void *dst, size_t n, uint64_t off);

/* Open `path` read-only (O_CLOEXEC | extra_flags) for sluice to read as a file: the open itself uses
 * O_NONBLOCK, so a FIFO with no writer or a device that waits for a carrier cannot hang it, and
 * anything but a regular file is refused with -EINVAL after the fstat (a directory, FIFO, socket or
 * device); O_NONBLOCK is then cleared.  Returns the descriptor, or -errno; *st (may be NULL) gets
 * the fstat of whatever was opened, so the caller can name it with sl_file_kind. */
int sl_open_regular(const char *path, int extra_flags, struct stat *st);

/* "a regular file", "a directory", "a FIFO", "a socket", "a character device", "a block device",
 * "a symbolic link" — for messages. */
const char *sl_file_kind(mode_t mode);

#endif
