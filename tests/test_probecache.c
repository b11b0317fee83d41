/* tests/test_probecache.c — the probes' cached rates (issue 20, item 12): a cache file holding a
 * non-finite or absurd figure ("inf", "nan", 0, 1e30) is discarded and the rate measured again; a
 * sane figure is used as cached.  The cache directory is a private one ($XDG_CACHE_HOME). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    for (size_t k = 0; k < sizeof absurd / sizeof *absurd; k++) {
        write_text(path, absurd[k]);
        r = sl_compute_rate(SL_TYPE_Q8_0, 1, SL_COMPUTE_PROBE_BYTES, 1e9, how, sizeof how);
        cr_expect(sl_probe_rate_sane(r) && strstr(how, "measured now"), "cache '%.*s': %g, %s",
                  (int)strlen(absurd[k]) - 1, absurd[k], r, how);
    }
    write_text(path, "5000000000\n");   /* a sane figure is used as cached */
    r = sl_compute_rate(SL_TYPE_Q8_0, 1, SL_COMPUTE_PROBE_BYTES, 1e9, how, sizeof how);
    cr_expect(r == 5e9 && strstr(how, "measured earlier"), "%g: %s", r, how);
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
    write_text(path, "3000000000\n");
    r = sl_disk_read_rate(file, &pr, 1e9, how, sizeof how);
    cr_expect(r == 3e9 && strstr(how, "measured earlier"), "%g: %s", r, how);
}
