/* loader/errmsg.h — one-line error messages that may quote bytes from an untrusted file. */
#ifndef SL_LOADER_ERRMSG_H
#define SL_LOADER_ERRMSG_H

#include <stdarg.h>
#include <stddef.h>

/* Format into err (if err && errlen), escaping control bytes (< 0x20, 0x7f) as \xNN so a hostile
 * file cannot put newlines or terminal escapes into a message.  Returns rc. */
int sl_errf(char *err, size_t errlen, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int sl_verrf(char *err, size_t errlen, int rc, const char *fmt, va_list ap);

/* A path short enough to quote in a one-line message: `path` itself when it has fewer than
 * SL_PATH_BRIEF bytes, else its start, "...", and its end (the file name) copied into buf.  Keeps a
 * long path from pushing the errno text off the end of a fixed-size message buffer. */
#define SL_PATH_BRIEF 96
const char *sl_path_brief(const char *path, char buf[SL_PATH_BRIEF]);

#endif
