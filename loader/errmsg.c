/* loader/errmsg.c — see errmsg.h. */
#include "loader/errmsg.h"

#include <stdio.h>

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
