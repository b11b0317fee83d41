/* kernels/gemm.c — which batched GEMM runs: CPUID, the OS's AMX permission, SLUICE_GEMM.
 *
 * AMX tile data is an XSAVE component Linux enables per process on request (arch_prctl
 * ARCH_REQ_XCOMP_PERM, kernel 5.16+); a tile instruction without it faults.  The request is made
 * once, at the first lookup, before any pool thread runs a tile instruction: the permission is the
 * process's, so every thread has it, and each thread loads its own tile configuration per call
 * (kernels/gemm_amx.c).
 */
#include "kernels/gemm.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/simd.h"
#include "kernels/types.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define ARCH_GET_XCOMP_PERM 0x1022
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA  18
#endif

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static bool g_amx_ok;              /* CPU, build and OS can run the AMX GEMM */
static bool g_vnni_ok;             /* the CPU runs the AVX-512 VNNI GEMM */
static atomic_bool g_on;           /* the GEMM runs (SLUICE_GEMM=off, sl_gemm_force) */
static char g_why[96];             /* why there is no AMX, when there is none */

#if defined(__x86_64__)
/* CPUID leaf 7: AMX_TILE (EDX 24), AMX_INT8 (EDX 25); the AVX-512 parts the unpacking uses come
 * from libgcc's table (it also checks the OS saves the ZMM state). */
static bool cpu_has_amx(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    __builtin_cpu_init();
    return (d >> 24 & 1) && (d >> 25 & 1) && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512vnni");
}

/* Contract: true when this process may use tile data (asking for it if not yet granted). */
static bool os_grants_amx(void)
{
    unsigned long mask = 0;
    if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &mask) == 0 && (mask >> XFEATURE_XTILEDATA & 1)) return true;
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) {
        snprintf(g_why, sizeof g_why, "the kernel refused tile data: %s", strerror(errno));
        return false;
    }
    return true;
}
#endif

static void init_once(void)
{
#if defined(__x86_64__)
    if (!sl_gemm_amx_q4_k) snprintf(g_why, sizeof g_why, "this build has no AMX code");
    else if (!cpu_has_amx()) snprintf(g_why, sizeof g_why, "the CPU has no AMX-INT8");
    else g_amx_ok = os_grants_amx();
#else
    snprintf(g_why, sizeof g_why, "AMX is x86 only");
#endif
    g_vnni_ok = sl_gemm_avx512_q8_0 && sl_kernels_available(SL_KPATH_AVX512);
    const char *e = getenv("SLUICE_GEMM");
    atomic_store(&g_on, !(e && !strcmp(e, "off")));
}

sl_qgemm_fn sl_gemm_for(int type)
{
    pthread_once(&g_once, init_once);
    if (!atomic_load_explicit(&g_on, memory_order_relaxed)) return NULL;
    switch (type) {
    case SL_TYPE_Q4_K: return g_amx_ok ? sl_gemm_amx_q4_k : NULL;
    case SL_TYPE_Q6_K: return g_amx_ok ? sl_gemm_amx_q6_k : NULL;
    case SL_TYPE_Q8_0: return g_vnni_ok ? sl_gemm_avx512_q8_0 : NULL;
    default: return NULL;
    }
}

static char g_name[160];

static void make_name(void)
{
    if (g_amx_ok) snprintf(g_name, sizeof g_name, "amx-int8 (Q4_K, Q6_K), avx512-vnni (Q8_0)");
    else if (g_vnni_ok) snprintf(g_name, sizeof g_name, "avx512-vnni (Q8_0); no AMX: %s", g_why);
    else snprintf(g_name, sizeof g_name, "none (no AVX-512 VNNI; no AMX: %s)", g_why);
}

const char *sl_gemm_name(void)
{
    static pthread_once_t name_once = PTHREAD_ONCE_INIT;
    pthread_once(&g_once, init_once);
    pthread_once(&name_once, make_name);
    return atomic_load(&g_on) || (!g_amx_ok && !g_vnni_ok) ? g_name : "none (turned off: SLUICE_GEMM=off)";
}

int sl_gemm_force(int mode)
{
    pthread_once(&g_once, init_once);
    if (mode == SL_GEMM_OFF) {
        atomic_store(&g_on, false);
        return 0;
    }
    if (mode != SL_GEMM_AMX && mode != SL_GEMM_AUTO) return -EINVAL;
    if (!g_vnni_ok && !g_amx_ok) return -ENOTSUP;
    atomic_store(&g_on, true);
    return 0;
}
