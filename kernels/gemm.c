/* kernels/gemm.c — which batched GEMM runs per weight type: CPUID, the OS's AMX permission, the
 * build, SLUICE_GEMM / sl_gemm_force.  Paths, fastest first: AMX-INT8 (Q4_K, Q6_K, Q8_0, MXFP4),
 * AVX-512 VNNI (Q4_K, Q6_K, Q8_0, MXFP4), AVX2 (Q4_K, Q6_K); a type takes the fastest path allowed that has it, and
 * the 4-vector dots when none does (every path gives the same bits).
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
static bool g_ok[4];               /* [SL_GEMM_AMX..AVX2]: CPU, build (and OS for AMX) can run it */
static atomic_int g_cap;           /* the fastest path allowed (SL_GEMM_AMX..AVX2), or SL_GEMM_OFF */
static atomic_bool g_auto;         /* chosen by auto (not forced) */
static char g_env_note[64];        /* a SLUICE_GEMM value that could not be honoured */
#if defined(__x86_64__)
static char g_why[96];             /* why there is no AMX, when there is none */

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

static const char *const k_path_name[4] = { "off", "amx", "vnni", "avx2" };
static const char *const k_kernel_name[4] = { "dots", "amx-int8", "avx512-vnni", "avx2" };

/* The path's kernel for `type`, NULL where the path has none (or the build lacks it). */
static sl_qgemm_fn path_kernel(int path, int type)
{
    switch (path) {
    case SL_GEMM_AMX:
        return type == SL_TYPE_Q4_K ? sl_gemm_amx_q4_k : type == SL_TYPE_Q6_K ? sl_gemm_amx_q6_k
             : type == SL_TYPE_Q8_0 ? sl_gemm_amx_q8_0 : type == SL_TYPE_MXFP4 ? sl_gemm_amx_mxfp4 : NULL;
    case SL_GEMM_VNNI:
        return type == SL_TYPE_Q4_K ? sl_gemm_vnni_q4_k : type == SL_TYPE_Q6_K ? sl_gemm_vnni_q6_k
             : type == SL_TYPE_Q8_0 ? sl_gemm_avx512_q8_0 : type == SL_TYPE_MXFP4 ? sl_gemm_avx512_mxfp4 : NULL;
    case SL_GEMM_AVX2:
        return type == SL_TYPE_Q4_K ? sl_gemm_avx2_q4_k : type == SL_TYPE_Q6_K ? sl_gemm_avx2_q6_k : NULL;
    default: return NULL;
    }
}

/* Auto on an AMX machine runs every Q4_K / Q6_K batch on AMX.  (Until this session small batches
 * went to VNNI on a single-call probe; bench_kernels --gemm, interleaved, 1 thread, GFLOP/s AMX / VNNI:
 * Q4_K 16 vectors 162.6 / 103.8, 64: 410 / 121, 512: 552 / 119; Q6_K 16: 148 / 84 — AMX wins at every
 * batch, at 4096 and at 14336 columns.) */
/* The fastest available path (SL_GEMM_OFF when none). */
static int best_path(void)
{
    for (int p = SL_GEMM_AMX; p <= SL_GEMM_AVX2; p++)
        if (g_ok[p]) return p;
    return SL_GEMM_OFF;
}

static void make_name(void);

static void init_once(void)
{
#if defined(__x86_64__)
    if (!sl_gemm_amx_q4_k) snprintf(g_why, sizeof g_why, "this build has no AMX code");
    else if (!cpu_has_amx()) snprintf(g_why, sizeof g_why, "the CPU has no AMX-INT8");
    else g_ok[SL_GEMM_AMX] = os_grants_amx();
#endif
    g_ok[SL_GEMM_VNNI] = sl_gemm_vnni_q4_k && sl_gemm_avx512_q8_0 && sl_kernels_available(SL_KPATH_AVX512);
    g_ok[SL_GEMM_AVX2] = sl_gemm_avx2_q4_k && sl_kernels_available(SL_KPATH_AVX2);
    int cap = best_path();
    bool is_auto = true;
    const char *e = getenv("SLUICE_GEMM");
    if (e && *e && strcmp(e, "auto") != 0) {
        int want = -2;
        for (int p = SL_GEMM_OFF; p <= SL_GEMM_AVX2; p++)
            if (!strcmp(e, k_path_name[p])) want = p;
        if (want == SL_GEMM_OFF || (want > 0 && g_ok[want])) cap = want, is_auto = false;
        else snprintf(g_env_note, sizeof g_env_note, "; SLUICE_GEMM=%.20s %s", e, want > 0 ? "unavailable here" : "unknown");
    }
    atomic_store(&g_cap, cap);
    atomic_store(&g_auto, is_auto);
    make_name();
}

/* The fastest allowed path at or below `cap` that has a kernel for `type`, SL_GEMM_OFF if none.
 * (Until December 2026 auto left the AVX2 GEMMs out, slower than the dots end to end: GCC 12 at -O2
 * had kept their per-vector loops over stack arrays.  Unrolled, the llama3-8b shape Q4_K_M's
 * 512-token prompt runs 16.6 tok/s on them against the dots' 9.3, bench/prefill_paths.sh.) */
static int pick(int cap, int type)
{
    if (cap == SL_GEMM_OFF) return SL_GEMM_OFF;
    for (int p = cap; p <= SL_GEMM_AVX2; p++)
        if (g_ok[p] && path_kernel(p, type)) return p;
    return SL_GEMM_OFF;
}

sl_qgemm_fn sl_gemm_for(int type)
{
    pthread_once(&g_once, init_once);
    const int p = pick(atomic_load_explicit(&g_cap, memory_order_relaxed), type);
    return path_kernel(p, type);
}

/* Per type: the path that runs ("dots": none), and why not a faster one. */
static char g_name[320];

static void make_name(void)
{
    static const int types[] = { SL_TYPE_Q4_K, SL_TYPE_Q6_K, SL_TYPE_Q8_0, SL_TYPE_MXFP4 };
    const int cap = atomic_load(&g_cap);
    size_t o = 0;
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        const int p = pick(cap, types[t]);
        o += (size_t)snprintf(g_name + o, sizeof g_name - o, "%s%s %s", t ? ", " : "", sl_type_name(types[t]),
                              k_kernel_name[p]);
    }
    if (!atomic_load(&g_auto))
        o += (size_t)snprintf(g_name + o, sizeof g_name - o, cap == SL_GEMM_OFF ? " (turned off)" : " (forced: %s)",
                              k_path_name[cap]);
#if defined(__x86_64__)
    if (!g_ok[SL_GEMM_AMX]) o += (size_t)snprintf(g_name + o, sizeof g_name - o, "; no AMX: %s", g_why);
    if (!g_ok[SL_GEMM_VNNI]) o += (size_t)snprintf(g_name + o, sizeof g_name - o, "; no AVX-512 VNNI");
    if (!g_ok[SL_GEMM_AVX2]) o += (size_t)snprintf(g_name + o, sizeof g_name - o, "; no AVX2");
#else
    o += (size_t)snprintf(g_name + o, sizeof g_name - o, "; the GEMMs are x86 only");
#endif
    if (o < sizeof g_name) snprintf(g_name + o, sizeof g_name - o, "%s", g_env_note);
}

const char *sl_gemm_name(void)
{
    pthread_once(&g_once, init_once);
    return g_name;
}

int sl_gemm_force(int mode)
{
    pthread_once(&g_once, init_once);
    int rc = 0;
    const bool is_auto_request = mode == SL_GEMM_AUTO;
    if (mode == SL_GEMM_AUTO) {
        mode = best_path();
        rc = mode == SL_GEMM_OFF ? -ENOTSUP : 0;
    } else if (mode < SL_GEMM_OFF || mode > SL_GEMM_AVX2) {
        return -EINVAL;
    } else if (mode != SL_GEMM_OFF && !g_ok[mode]) {
        return -ENOTSUP;
    }
    atomic_store(&g_cap, mode);
    atomic_store(&g_auto, is_auto_request);
    make_name();
    return rc;
}

size_t sl_gemm_scratch_bytes(int64_t n, int nv)
{
    const size_t each[] = { sl_gemm_amx_scratch(n, nv), sl_gemm_vnni_scratch(n, nv), sl_gemm_avx512_scratch(n, nv),
                            sl_gemm_avx2_scratch(n, nv) };
    size_t mx = 0;
    for (size_t i = 0; i < sizeof each / sizeof each[0]; i++)
        if (each[i] > mx) mx = each[i];
    return mx;
}
