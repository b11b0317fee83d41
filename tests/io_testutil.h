/* tests/io_testutil.h — helpers shared by tests/test_io*.c: a temp dir holding a file of seeded
 * random bytes (kept in memory as the reference), cache dropping, and residency via mincore. */
#ifndef SL_TESTS_IO_TESTUTIL_H
#define SL_TESTS_IO_TESTUTIL_H

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loader/io.h"

typedef struct iot_file {
    char     dir[64];
    char     path[96];
    uint8_t *ref;     /* the file's bytes */
    size_t   size;
} iot_file;

static inline uint64_t iot_rand(uint64_t *s) {   /* xorshift64*: fixed seeds give fixed tests */
    *s ^= *s >> 12; *s ^= *s << 25; *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}
static inline uint64_t iot_range(uint64_t *s, uint64_t lo, uint64_t hi) {   /* uniform-ish in [lo, hi] */
    return lo + iot_rand(s) % (hi - lo + 1);
}

/* Drop the file's pages from the page cache (fsync first: dirty pages cannot be dropped). */
static inline void iot_drop(const char *path)
{
    int fd = open(path, O_RDONLY);
    cr_assert(fd >= 0);
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

/* Make a temp dir with a file of `size` random bytes from `seed`; the reference is checked against a
 * plain pread of the file so the tests compare with what is really on disk. */
static inline void iot_make(iot_file *f, size_t size, uint64_t seed)
{
    snprintf(f->dir, sizeof f->dir, "/tmp/sl_io_test_XXXXXX");
    cr_assert(mkdtemp(f->dir), "mkdtemp");
    snprintf(f->path, sizeof f->path, "%s/data.bin", f->dir);
    f->size = size;
    f->ref = malloc(size);
    cr_assert(f->ref);
    uint64_t s = seed | 1;
    for (size_t i = 0; i < size; i++) f->ref[i] = (uint8_t)(iot_rand(&s) >> 56);
    int fd = open(f->path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(fd >= 0);
    cr_assert(write(fd, f->ref, size) == (ssize_t)size);
    close(fd);
    iot_drop(f->path);
    uint8_t *chk = malloc(size);
    fd = open(f->path, O_RDONLY);
    cr_assert(pread(fd, chk, size, 0) == (ssize_t)size, "reference pread");
    close(fd);
    cr_assert(memcmp(chk, f->ref, size) == 0);
    free(chk);
    iot_drop(f->path);
}

static inline void iot_remove(iot_file *f)
{
    unlink(f->path);
    rmdir(f->dir);
    free(f->ref);
    f->ref = NULL;
}

/* Fraction of the file's pages that are in the page cache (mincore on a fresh mapping). */
static inline double iot_resident(const char *path)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    fstat(fd, &st);
    size_t pages = ((size_t)st.st_size + 4095) / 4096, n = 0;
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    cr_assert(m != MAP_FAILED);
    unsigned char *v = malloc(pages);
    cr_assert(mincore(m, (size_t)st.st_size, v) == 0);
    for (size_t i = 0; i < pages; i++) n += v[i] & 1;
    free(v);
    munmap(m, (size_t)st.st_size);
    close(fd);
    return (double)n / (double)pages;
}

static inline sl_io *iot_open(const char *path, sl_io_backend b, int slots, size_t max_piece,
                              bool no_direct, size_t chunk, const sl_io_fault *fault) {
    sl_io_opts o = { .backend = b, .slots = slots, .max_piece = max_piece, .no_direct = no_direct,
                     .chunk = chunk, .fault = fault };
    sl_io *io = NULL;
    char err[256] = "";
    int r = sl_io_open(path, &o, &io, err, sizeof err);
    cr_assert(r == 0, "sl_io_open(%s, %s): %d %s", path, sl_io_backend_name(b), r, err);
    cr_assert(sl_io_backend_active(io) == b, "backend %s fell back: %s", sl_io_backend_name(b),
              sl_io_notice(io));
    return io;
}

/* Wait for slot s and compare its bytes with the reference range [off, off+len). */
static inline void iot_check_slot(sl_io *io, const iot_file *f, int s, uint64_t off, size_t len,
                                  const char *cfg) {
    const void *p = NULL;
    int r = sl_io_wait(io, s, &p);
    cr_assert(r == 0, "%s: wait(%llu,+%zu) = %d: %s", cfg, (unsigned long long)off, len, r, sl_io_errmsg(io));
    cr_assert((uintptr_t)p % 4096 == off % 4096, "%s: data pointer alignment", cfg);
    cr_assert(memcmp(p, f->ref + off, len) == 0, "%s: bytes differ at [%llu,+%zu)", cfg,
              (unsigned long long)off, len);
}

#endif
