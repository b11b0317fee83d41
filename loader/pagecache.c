/* loader/pagecache.c — page-cache residency of a file. */
#include "loader/pagecache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int sl_page_cache_bytes(const char *path, uint64_t *resident, uint64_t *file_size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0) { int e = errno; close(fd); return -e; }
    *file_size = (uint64_t)st.st_size;
    *resident = 0;
    if (st.st_size == 0) { close(fd); return 0; }
    long pg = sysconf(_SC_PAGESIZE);
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return -errno;
    size_t npages = ((size_t)st.st_size + (size_t)pg - 1) / (size_t)pg;
    /* walk in windows so the vector stays small for multi-GiB files */
    const size_t win = 1 << 16;
    unsigned char *vec = malloc(win);
    int rc = 0;
    if (!vec) { munmap(map, (size_t)st.st_size); return -ENOMEM; }
    for (size_t p = 0; p < npages; p += win) {
        size_t n = npages - p < win ? npages - p : win;
        size_t len = n * (size_t)pg;
        if ((p + n) * (size_t)pg > (size_t)st.st_size) len = (size_t)st.st_size - p * (size_t)pg;
        if (mincore((char *)map + p * (size_t)pg, len, vec) < 0) { rc = -errno; break; }
        for (size_t i = 0; i < n; i++) if (vec[i] & 1) *resident += (uint64_t)pg;
    }
    free(vec);
    munmap(map, (size_t)st.st_size);
    if (*resident > *file_size) *resident = *file_size;
    return rc;
}

int sl_page_cache_drop(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -errno;
    int rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    return -rc;
}

uint64_t sl_peak_rss(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    uint64_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) { kb = strtoull(line + 6, NULL, 10); break; }
    fclose(f);
    return kb * 1024;
}
