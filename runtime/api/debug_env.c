/* runtime/api/debug_env.c — the debug and test switches, read from the environment only when a
 * program asks (the sluice command does, first thing; the library never reads them on its own). */
#include "include/sluice.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm.h"
#include "kernels/simd.h"
#include "kernels/threadpool.h"
#include "loader/io.h"

static const char *env_set(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* Contract: see sluice.h.  Applies every variable that is set and valid; returns 0, or -EINVAL for
 * the first one that is not (the message says which; the others are still applied). */
int sluice_debug_env(char *err, size_t errlen)
{
    int rc = 0;
    const char *v;
#define BAD(...) do { if (!rc) { snprintf(err, errlen, __VA_ARGS__); rc = -EINVAL; } } while (0)
    if ((v = env_set("SLUICE_KERNELS"))) {
        int want = strcmp(v, "auto") ? -2 : SL_KPATH_AUTO;
        for (int p = 0; p < SL_KPATH_COUNT; p++)
            if (!strcmp(v, sl_kpath_name(p))) want = p;
        if (want == -2) BAD("SLUICE_KERNELS=%s is not one of auto|portable|avx2|avx512|neon|neon_dotprod", v);
        else if (sl_kernels_force(want)) BAD("SLUICE_KERNELS=%s: this CPU cannot run it", v);
    }
    if ((v = env_set("SLUICE_GEMM"))) {   /* kernels/gemm.c also reads it at first use; here it is checked */
        static const char *const names[] = { "off", "amx", "vnni", "avx2" };
        int want = strcmp(v, "auto") ? -2 : SL_GEMM_AUTO;
        for (int p = 0; p < 4; p++)
            if (!strcmp(v, names[p])) want = p;
        if (want == -2) BAD("SLUICE_GEMM=%s is not one of auto|off|amx|vnni|avx2", v);
        else if (sl_gemm_force(want) != 0 && want != SL_GEMM_AUTO)   /* auto with no GEMM here: fine */
            BAD("SLUICE_GEMM=%s: this machine cannot run it (%s)", v, sl_gemm_name());
    }
    if ((v = env_set("SLUICE_EXACT"))) sl_kernels_set_exact(strcmp(v, "0") != 0);
    if ((v = env_set("SLUICE_SPIN_US"))) {
        char *end;
        long us = strtol(v, &end, 10);
        if (*end || us < 0 || us > 1000000) BAD("SLUICE_SPIN_US=%s is not a whole number of microseconds in [0, 1000000]", v);
        else sl_pool_force_spin_us(us);
    }
    if ((v = env_set("SLUICE_POOL_STALL_MS"))) {
        char *end;
        long ms = strtol(v, &end, 10);
        if (*end || ms < 0 || ms > 3600000) BAD("SLUICE_POOL_STALL_MS=%s is not a whole number of milliseconds in [0, 3600000]", v);
        else sl_pool_debug_stall_ms(ms);
    }
    if ((v = env_set("SLUICE_IO_FAULT"))) {
        char why[200];
        if (sl_io_set_default_fault(v, why, sizeof why)) BAD("SLUICE_IO_FAULT: %s", why);
    }
    if ((v = env_set("SLUICE_NO_URING")) && !strcmp(v, "1")) sl_io_disable_uring("SLUICE_NO_URING=1");
#undef BAD
    return rc;
}
