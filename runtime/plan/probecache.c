/* runtime/plan/probecache.c — the probes' cache directory (see probecache.h). */
#include "runtime/plan/probecache.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* Contract: see probecache.h. */
void sl_probe_cache_dir(char *buf, size_t len)
{
    const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (x && *x) snprintf(buf, len, "%s/sluice", x);
    else snprintf(buf, len, "%s/.cache/sluice", home && *home ? home : "/var/tmp");
}

/* Contract: see probecache.h. */
void sl_probe_cache_mkdirs(const char *file)
{
    char d[4096];
    snprintf(d, sizeof d, "%s", file);
    for (char *p = d + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        mkdir(d, 0755);
        *p = '/';
    }
}
