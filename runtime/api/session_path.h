/* runtime/api/session_path.h — checking and replacing a session file's path (session_path.c).
 * Internal to runtime/api/session.c. */
#ifndef SL_RUNTIME_SESSION_PATH_H
#define SL_RUNTIME_SESSION_PATH_H

#include <limits.h>
#include <stdbool.h>
#include <sys/stat.h>

#include "runtime/api/session.h"

typedef struct sl_sess_target {
    bool  exists;             /* a regular file was there when checked */
    dev_t dev;
    ino_t ino;
} sl_sess_target;

/* May a session described by `ours` be written to path?  0 (absent, empty, or a session of this
 * model and KV type — or of another one when overwrite), or -errno with why: -EINVAL a directory,
 * device, FIFO, socket or symbolic link; -EEXIST a file that is not a session, or a session of
 * another model, KV type or format version (kept unless overwrite); other errno from lstat/open. */
int sl_sess_target_check(const char *path, const sl_sess_hdr *ours, bool overwrite, sl_sess_target *t, char *why,
                         size_t whylen);

typedef struct sl_sess_tmp {
    int  fd;
    char name[PATH_MAX + 40];  /* the named temporary ("" while unnamed or after publishing) */
    char dir[PATH_MAX];
} sl_sess_tmp;

/* A new file in path's directory: unnamed (O_TMPFILE) where the file system allows, else a fresh
 * name beside path (O_EXCL | O_NOFOLLOW).  The descriptor (also in tmp->fd) or -errno. */
int  sl_sess_temp_open(const char *path, sl_sess_tmp *tmp);
/* Put the written temporary at path, if path is still what sl_sess_target_check saw: atomically,
 * never replacing anything when the target was absent; then fsync the directory.  0 or -errno with
 * why. */
int  sl_sess_publish(sl_sess_tmp *tmp, const char *path, const sl_sess_target *t, char *why, size_t whylen);
/* Close the descriptor and remove a named temporary still left. */
void sl_sess_temp_close(sl_sess_tmp *tmp);

#endif
