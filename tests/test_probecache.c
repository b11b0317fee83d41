/* tests/test_probecache.c — the probes' cached rates (issue 20, item 12): a cache file holding a
 * non-finite or absurd figure ("inf", "nan", 0, 1e30) is discarded and the rate measured again; a
 * sane, dated figure taken on a machine no busier than now (and, for compute, by these kernels)
 * is used as cached; an undated, old, other kernels' or busy-hour one is measured again, saying
 * why.  The cache directory is a private one
 * ($XDG_CACHE_HOME). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/types.h"
#include "runtime/plan/computeprobe.h"
#include "runtime/plan/diskprobe.h"
#include "runtime/plan/probecache.h"

static char g_tmp[64];
static void setup(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/sl_probe_XXXXXX");
    cr_assert_not_null(mkdtemp(g_tmp));
    setenv("XDG_CACHE_HOME", g_tmp, 1);
}
static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd)) { /* best effort */ }
}
TestSuite(probecache, .init = setup, .fini = teardown);

/* The cache file named in a probe's "… cached in PATH)" line. */
static void cached_path(const char *how, char *out, size_t len)
{
    const char *p = strstr(how, "cached in ");
    cr_assert_not_null(p, "no cache file in: %s", how);
    snprintf(out, len, "%s", p + 10);
    char *e = strrchr(out, ')');
    if (e) *e = 0;
}

static void write_text(const char *path, const char *s)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs(s, f);
    fclose(f);
}

static const char *const absurd[] = { "inf\n", "nan\n", "1e30\n" };

/* A cache line for `rate` measured `age_s` seconds ago at `load` per CPU, by `stamp` ("" none). */
static void write_stamped(const char *path, const char *rate, long age_s, double load, const char *stamp)
{
    char line[160];
    snprintf(line, sizeof line, "%s %lld %.2f %s\n", rate, (long long)time(NULL) - age_s, load, stamp);
    write_text(path, line);
}

/* The stamp the probe wrote in its cache file (its 4th field; "" when none). */
static void stamp_of(const char *path, char *stamp, size_t len)
{
    double bw, when, load;
    char s[32] = "";
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    int got = fscanf(f, "%lf %lf %lf %31s", &bw, &when, &load, s);
    fclose(f);
    cr_assert_geq(got, 3, "%s: %d fields", path, got);
    snprintf(stamp, len, "%s", s);
}

static char g_stamp[32];   /* the compute probe's stamp, read back from its first cache file */
static void write_dated(const char *path, const char *rate, long age_s, double load)
{
    write_stamped(path, rate, age_s, load, g_stamp);
}

Test(probecache, sane_range)
{
    cr_expect(sl_probe_rate_sane(2e9));
    cr_expect(!sl_probe_rate_sane(INFINITY));
    cr_expect(!sl_probe_rate_sane(NAN));
    cr_expect(!sl_probe_rate_sane(0));
    cr_expect(!sl_probe_rate_sane(1e30));
}

Test(probecache, compute_rate_discards_absurd_cached_figures)
{
    char how[512], path[512];
    double r = sl_compute_rate(SL_TYPE_Q8_0, 1, SL_COMPUTE_PROBE_BYTES, 1e9, how, sizeof how);
    cr_assert(sl_probe_rate_sane(r), "measured %g: %s", r, how);
    cached_path(how, path, sizeof path);
    stamp_of(path, g_stamp, sizeof g_stamp);
    cr_assert_gt(strlen(g_stamp), 0, "the compute probe stamps its figure with its kernels' id");
    for (size_t k = 0; k < sizeof absurd / sizeof *absurd; k++) {
        write_text(path, absurd[k]);
        r = sl_compute_rate(SL_TYPE_Q8_0, 1, SL_COMPUTE_PROBE_BYTES, 1e9, how, sizeof how);
        cr_expect(sl_probe_rate_sane(r) && strstr(how, "measured now"), "cache '%.*s': %g, %s",
                  (int)strlen(absurd[k]) - 1, absurd[k], r, how);
    }
    write_dated(path, "5000000000", 60, 0.0);   /* a sane figure from a quiet minute is used as cached */
    r = sl_compute_rate(SL_TYPE_Q8_0, 1, SL_COMPUTE_PROBE_BYTES, 1e9, how, sizeof how);
    cr_expect(r == 5e9 && strstr(how, "measured earlier"), "%g: %s", r, how);
    write_text(path, "5000000000\n");   /* undated (an older sluice's file) */
    r = sl_compute_rate(SL_TYPE_Q8_0, 1, SL_COMPUTE_PROBE_BYTES, 1e9, how, sizeof how);
    cr_expect(strstr(how, "measured now") && strstr(how, "no date"), "%g: %s", r, how);
}

/* Dated figures that no longer stand for this machine: over a week old, or taken at a load per CPU
 * that now is at most half (99 per CPU: no test machine is that busy now). */
Test(probecache, old_and_busy_hour_figures_are_measured_again)
{
    char how[512], path[512];
    double r = sl_compute_rate(SL_TYPE_Q8_0, 1, SL_COMPUTE_PROBE_BYTES, 1e9, how, sizeof how);
    cached_path(how, path, sizeof path);
    stamp_of(path, g_stamp, sizeof g_stamp);
    write_stamped(path, "5000000000", 60, 0.0, "0123456789ab");   /* other kernels' figure */
    r = sl_compute_rate(SL_TYPE_Q8_0, 1, SL_COMPUTE_PROBE_BYTES, 1e9, how, sizeof how);
    cr_expect(r != 5e9 && strstr(how, "measured now") && strstr(how, "other kernels"), "%g: %s", r, how);
    write_dated(path, "5000000000", SL_PROBE_MAX_AGE_S + 3600, 0.0);
    r = sl_compute_rate(SL_TYPE_Q8_0, 1, SL_COMPUTE_PROBE_BYTES, 1e9, how, sizeof how);
    cr_expect(r != 5e9 && strstr(how, "measured now") && strstr(how, "days old"), "%g: %s", r, how);
    write_dated(path, "5000000000", 60, 99.0);
    r = sl_compute_rate(SL_TYPE_Q8_0, 1, SL_COMPUTE_PROBE_BYTES, 1e9, how, sizeof how);
    cr_expect(r != 5e9 && strstr(how, "measured now") && strstr(how, "load 99.0 per CPU"), "%g: %s", r, how);
    /* what the probe wrote back is dated and is used next time (unless the machine got much quieter) */
    double again = sl_compute_rate(SL_TYPE_Q8_0, 1, SL_COMPUTE_PROBE_BYTES, 1e9, how, sizeof how);
    cr_expect(strstr(how, "measured earlier") || strstr(how, "per CPU"), "%g: %s", again, how);
    double bw = 0, when = 0, load = -1;
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    cr_expect_eq(fscanf(f, "%lf %lf %lf", &bw, &when, &load), 3);
    fclose(f);
    cr_expect(sl_probe_rate_sane(bw) && fabs(when - (double)time(NULL)) < 600 && load >= 0, "%g %g %g", bw, when, load);
}

Test(probecache, disk_rate_discards_absurd_cached_figures)
{
    char file[128], how[512], path[512];
    snprintf(file, sizeof file, "%s/probe.bin", g_tmp);
    FILE *f = fopen(file, "w");
    cr_assert_not_null(f);
    static unsigned char block[1 << 20];
    memset(block, 0x5a, sizeof block);
    for (int i = 0; i < 64; i++) cr_assert_eq(fwrite(block, 1, sizeof block, f), sizeof block);   /* the probe's minimum */
    fclose(f);
    sl_disk_probe pr = { .backend = SL_IO_PREAD, .no_direct = true, .piece = 1u << 20, .depth = 2 };
    double r = sl_disk_read_rate(file, &pr, 1e9, how, sizeof how);
    cr_assert(sl_probe_rate_sane(r), "measured %g: %s", r, how);
    cached_path(how, path, sizeof path);
    for (size_t k = 0; k < sizeof absurd / sizeof *absurd; k++) {
        write_text(path, absurd[k]);
        r = sl_disk_read_rate(file, &pr, 1e9, how, sizeof how);
        cr_expect(sl_probe_rate_sane(r) && strstr(how, "measured now"), "cache '%.*s': %g, %s",
                  (int)strlen(absurd[k]) - 1, absurd[k], r, how);
    }
    write_stamped(path, "3000000000", 60, 0.0, "");
    r = sl_disk_read_rate(file, &pr, 1e9, how, sizeof how);
    cr_expect(r == 3e9 && strstr(how, "measured earlier"), "%g: %s", r, how);
    write_stamped(path, "3000000000", 60, 99.0, "");
    r = sl_disk_read_rate(file, &pr, 1e9, how, sizeof how);
    cr_expect(strstr(how, "measured now") && strstr(how, "per CPU"), "%g: %s", r, how);
}
