/* loader/errmsg.c — see errmsg.h. */
#include "loader/errmsg.h"

#include <stdio.h>
#include <string.h>

int sl_verrf(char *err, size_t errlen, int rc, const char *fmt, va_list ap)
{
    if (!err || !errlen) return rc;
    char raw[1024];
    vsnprintf(raw, sizeof raw, fmt, ap);
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)raw; *p && o + 1 < errlen; p++) {
        if (*p < 0x20 || *p == 0x7f) {
            if (o + 5 >= errlen) break;
            o += (size_t)snprintf(err + o, errlen - o, "\\x%02x", *p);
        } else {
            err[o++] = (char)*p;
        }
    }
    err[o] = 0;
    return rc;
}

int sl_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sl_verrf(err, errlen, rc, fmt, ap);
    va_end(ap);
    return rc;
}

const char *sl_path_brief(const char *path, char buf[SL_PATH_BRIEF])
{
    if (!path) return "(null)";
    size_t n = strlen(path);
    if (n < SL_PATH_BRIEF) return path;
    enum { HEAD = 32, TAIL = SL_PATH_BRIEF - HEAD - 4 };   /* 32 + "..." + 59 + NUL */
    memcpy(buf, path, HEAD);
    memcpy(buf + HEAD, "...", 3);
    memcpy(buf + HEAD + 3, path + n - TAIL, TAIL);
    buf[HEAD + 3 + TAIL] = 0;
    return buf;
}
