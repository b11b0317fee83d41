/* runtime/api/session_path.c — where a session file may be written, and how it is put there.
 *
 * A session path comes from a user, and sluice may run as root: writing must never replace a device,
 * a FIFO, a socket or a directory with a regular file, follow a symbolic link, or destroy a file that
 * is not a session.  So before anything is written the existing target is examined (lstat, then an
 * O_NOFOLLOW | O_NONBLOCK open and fstat of the same inode, and its first 128 bytes), and right
 * before the rename it is checked again to be that same regular file: a target that appeared or
 * changed meanwhile is left alone and the save fails.  A target that did not exist is created with
 * a link that cannot replace anything (linkat/RENAME_NOREPLACE).
 */
#include "runtime/api/session_path.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loader/fileio.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

/* A session file is recognised by its magic; a header that is intact (hash, version) also says which
 * model and KV encoding it belongs to. */
static bool header_intact(const sl_sess_hdr *h)
{
    return h->version >= 1 && h->version <= SL_SESS_VERSION && h->header_bytes == sizeof *h &&
           h->header_hash == sl_xxh64(h, offsetof(sl_sess_hdr, header_hash), 0);
}

int sl_sess_target_check(const char *path, const sl_sess_hdr *ours, bool overwrite, sl_sess_target *t, char *why,
                         size_t whylen)
{
    struct stat ls;
    memset(t, 0, sizeof *t);
    if (lstat(path, &ls) != 0) {
        if (errno == ENOENT) return 0;
        int e = errno;
        snprintf(why, whylen, "%s", strerror(e));
        return -e;
    }
    if (!S_ISREG(ls.st_mode)) {
        snprintf(why, whylen, "it is %s; sessions are written only to regular files (not replaced)",
                 sl_file_kind(ls.st_mode));
        return -EINVAL;
    }
    struct stat st;
    int fd = sl_open_regular(path, O_NOFOLLOW, &st);
    if (fd < 0 || st.st_dev != ls.st_dev || st.st_ino != ls.st_ino) {
        int e = fd < 0 ? -fd : EAGAIN;
        if (fd >= 0) close(fd);
        snprintf(why, whylen, "cannot check that the existing file is a session (%s); not replaced",
                 e == EAGAIN ? "it changed while being checked" : strerror(e));
        return fd < 0 ? fd : -EAGAIN;
    }
    t->exists = true;
    t->dev = st.st_dev;
    t->ino = st.st_ino;
    sl_sess_hdr h;
    ssize_t got = st.st_size ? pread(fd, &h, sizeof h, 0) : 0;
    int e = errno;
    close(fd);
    if (st.st_size == 0) return 0;   /* an empty file holds nothing to lose */
    if (got < 0) {
        snprintf(why, whylen, "cannot read the existing file to check it is a session (%s); not replaced", strerror(e));
        return -e;
    }
    if (got < 8 || memcmp(h.magic, SL_SESS_MAGIC, 8)) {
        snprintf(why, whylen, "the existing file is not a sluice session; refusing to overwrite it");
        return -EEXIST;
    }
    if (overwrite || (size_t)got < sizeof h) return 0;   /* a truncated session of ours: useless, replaced */
    if ((h.version < 1 || h.version > SL_SESS_VERSION) && h.header_bytes == sizeof h) {   /* 1 is read: ours */
        snprintf(why, whylen, "the existing session has format version %u (this sluice writes %u); kept, "
                 "not overwritten unless asked to", h.version, SL_SESS_VERSION);
        return -EEXIST;
    }
    if (!header_intact(&h)) return 0;                    /* a corrupt session of ours: replaced */
    if (h.model_fp != ours->model_fp || h.n_layers != ours->n_layers || h.kv_dim != ours->kv_dim) {
        snprintf(why, whylen, "the existing session is for another model (fingerprint %016" PRIx64 ", this model %016"
                 PRIx64 "); kept, not overwritten unless asked to", h.model_fp, ours->model_fp);
        return -EEXIST;
    }
    if (h.kv_type != ours->kv_type || h.row_bytes != ours->row_bytes) {
        snprintf(why, whylen, "the existing session holds another KV cache type; kept, not overwritten unless asked to");
        return -EEXIST;
    }
    return 0;
}

/* A temporary name next to path that nothing else uses; "" when none could be made. */
static int claim_name(const char *path, char *name, size_t len, int (*try)(const char *name, void *arg), void *arg)
{
    unsigned seed = (unsigned)getpid() ^ (unsigned)time(NULL) ^ (unsigned)(uintptr_t)name;
    for (int k = 0; k < 64; k++) {
        seed = seed * 1103515245u + 12345u;
        if ((size_t)snprintf(name, len, "%s.tmp%ld.%08x", path, (long)getpid(), seed) >= len) break;
        int r = try(name, arg);
        if (r != -EEXIST) {
            if (r < 0) name[0] = 0;
            return r;
        }
    }
    name[0] = 0;
    return -EEXIST;
}

static int try_create(const char *name, void *arg)
{
    (void)arg;
    int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    return fd < 0 ? -errno : fd;
}

static int try_link(const char *name, void *arg)
{
    return linkat(AT_FDCWD, (const char *)arg, AT_FDCWD, name, AT_SYMLINK_FOLLOW) ? -errno : 0;
}

int sl_sess_temp_open(const char *path, sl_sess_tmp *tmp)
{
    char copy[PATH_MAX];
    memset(tmp, 0, sizeof *tmp);
    tmp->fd = -1;
    if ((size_t)snprintf(copy, sizeof copy, "%s", path) >= sizeof copy) return -ENAMETOOLONG;
    snprintf(tmp->dir, sizeof tmp->dir, "%s", dirname(copy));
    int fd = open(tmp->dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
    if (fd >= 0) return tmp->fd = fd;
    fd = claim_name(path, tmp->name, sizeof tmp->name, try_create, NULL);
    return fd < 0 ? fd : (tmp->fd = fd);
}

/* Is path still the regular file examined before writing (or still absent)? */
static int target_unchanged(const char *path, const sl_sess_target *t, char *why, size_t whylen)
{
    struct stat ls;
    int r = lstat(path, &ls);
    if (!t->exists && r != 0 && errno == ENOENT) return 0;
    if (t->exists && r == 0 && S_ISREG(ls.st_mode) && ls.st_dev == t->dev && ls.st_ino == t->ino) return 0;
    snprintf(why, whylen, "the target %s while the session was written; not replaced",
             t->exists ? "was replaced or removed" : "appeared");
    return -EAGAIN;
}

int sl_sess_publish(sl_sess_tmp *tmp, const char *path, const sl_sess_target *t, char *why, size_t whylen)
{
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", tmp->fd);
    int rc = target_unchanged(path, t, why, whylen);
    if (rc) return rc;
    if (!t->exists && !tmp->name[0]) {   /* unnamed file, new target: one link that cannot replace */
        if (linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) == 0) goto durable;
        rc = -errno;
        goto rename_failed;
    }
    if (!tmp->name[0] && (rc = claim_name(path, tmp->name, sizeof tmp->name, try_link, proc))) {
        snprintf(why, whylen, "linking the file: %s", strerror(-rc));
        return rc;
    }
    if (!t->exists) {
        if (renameat2(AT_FDCWD, tmp->name, AT_FDCWD, path, RENAME_NOREPLACE) != 0) {
            rc = -errno;
            if (rc != -EINVAL && rc != -ENOSYS) goto rename_failed;
            /* the file system cannot rename without replacing: a hard link cannot replace either */
            if (link(tmp->name, path) != 0) { rc = -errno; goto rename_failed; }
            unlink(tmp->name);
        }
    } else {
        if ((rc = target_unchanged(path, t, why, whylen))) return rc;   /* checked again, right before */
        if (rename(tmp->name, path) != 0) { rc = -errno; goto rename_failed; }
    }
    tmp->name[0] = 0;
durable:;
    int dfd = open(tmp->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
rename_failed:
    if (rc == -EEXIST) snprintf(why, whylen, "the target appeared while the session was written; not replaced");
    else snprintf(why, whylen, "putting the file in place: %s", strerror(-rc));
    return rc;
}

void sl_sess_temp_close(sl_sess_tmp *tmp)
{
    if (tmp->fd >= 0) close(tmp->fd);
    if (tmp->name[0]) unlink(tmp->name);
    tmp->fd = -1;
    tmp->name[0] = 0;
}
