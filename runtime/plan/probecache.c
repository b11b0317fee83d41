/* runtime/plan/probecache.c — the probes' cache directory (see probecache.h). */
#include "runtime/plan/probecache.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

/* Contract: see probecache.h. */
bool sl_probe_rate_sane(double bw) { return isfinite(bw) && bw >= SL_PROBE_RATE_MIN && bw <= SL_PROBE_RATE_MAX; }

/* Contract: see probecache.h. */
double sl_probe_load_per_cpu(void)
{
    double l[1];
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (getloadavg(l, 1) != 1 || n < 1 || !isfinite(l[0]) || l[0] < 0) return 0;
    return l[0] / (double)n;
}

/* Contract: see probecache.h. */
bool sl_probe_cache_read(const char *file, const char *stamp, double *bytes_per_s, char *why, size_t whylen)
{
    if (whylen) why[0] = 0;
    FILE *f = fopen(file, "r");
    if (!f) return false;
    double bw = 0, when = 0, load = 0;
    char got_stamp[32] = "";
    int got = fscanf(f, "%lf %lf %lf %31s", &bw, &when, &load, got_stamp);
    fclose(f);
    if (got < 1 || !sl_probe_rate_sane(bw)) return false;   /* corrupt: measured again, no reason worth telling */
    double now = (double)time(NULL), now_load = sl_probe_load_per_cpu();
    if (got < 3 || !isfinite(when) || !isfinite(load) || load < 0) {
        snprintf(why, whylen, "the cached figure has no date");
        return false;
    }
    if (now - when > SL_PROBE_MAX_AGE_S || when - now > 86400) {
        snprintf(why, whylen, "the cached figure is over %d days old", SL_PROBE_MAX_AGE_S / 86400);
        return false;
    }
    if (stamp && *stamp && strcmp(stamp, got_stamp)) {
        snprintf(why, whylen, "the cached figure was measured by other kernels (%s, these are %s)",
                 *got_stamp ? got_stamp : "unstamped", stamp);
        return false;
    }
    if (load > SL_PROBE_BUSY_LOAD && now_load <= load / 2) {
        snprintf(why, whylen, "the cached figure was taken at load %.1f per CPU, now %.1f", load, now_load);
        return false;
    }
    *bytes_per_s = bw;
    return true;
}

/* Contract: see probecache.h. */
void sl_probe_cache_write(const char *file, const char *stamp, double bytes_per_s)
{
    sl_probe_cache_mkdirs(file);
    FILE *f = fopen(file, "w");
    if (!f) return;
    fprintf(f, "%.0f %lld %.2f%s%.31s\n", bytes_per_s, (long long)time(NULL), sl_probe_load_per_cpu(),
            stamp && *stamp ? " " : "", stamp ? stamp : "");
    fclose(f);
}
