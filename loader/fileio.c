/* loader/fileio.c — see fileio.h. */
#include "loader/fileio.h"

#include <errno.h>
#include <unistd.h>

int sl_pread_full(int fd, void *dst, size_t n, uint64_t off)
{
    unsigned char *p = dst;
    while (n) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (r == 0) return -EIO;
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}
