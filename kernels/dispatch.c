/* kernels/dispatch.c — which kernel path runs: cpuid at first use, SLUICE_KERNELS / SLUICE_EXACT,
 * and the switches tests use.
 *
 * The choice is made once (pthread_once) and then read with relaxed atomics on every matrix
 * product: it costs a load, and forcing a path mid-run is documented as not allowed.
 */
#include "kernels/simd.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

static const sl_kernel_set portable_set = {
    "portable",
    sl_quantize_act_q8_0, sl_quantize_act_q8_k,
    sl_qdot_q4_0_q8_0, sl_qdot_q8_0_q8_0,
    sl_qdot_q4_k_q8_k, sl_qdot_q5_k_q8_k, sl_qdot_q6_k_q8_k,
    sl_dot_f32, sl_dot_f16, sl_dot_bf16,
    sl_axpy_f32, sl_axpy_f16,
    sl_adot_f32, sl_adot_f16,
    NULL, NULL, NULL, NULL, NULL,
};

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static _Atomic(const sl_kernel_set *) g_active;
static atomic_int g_path;
static atomic_bool g_exact;

/* Contract: true when this CPU and OS can run `path` (x86 feature bits via libgcc's cpuid table,
 * which also checks that the OS saves the wide registers; aarch64 ones from the kernel's HWCAP). */
bool sl_kernels_available(int path)
{
    switch (path) {
    case SL_KPATH_PORTABLE: return true;
#if defined(__x86_64__) || defined(__i386__)
    case SL_KPATH_AVX2:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               __builtin_cpu_supports("f16c");
    case SL_KPATH_AVX512:
        __builtin_cpu_init();
        return sl_kernels_available(SL_KPATH_AVX2) && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512vnni");
#endif
#if defined(__aarch64__)
    /* Advanced SIMD is part of every AArch64 CPU Linux runs on; the kernel still reports it */
    case SL_KPATH_NEON: return (getauxval(AT_HWCAP) & HWCAP_ASIMD) != 0;
    case SL_KPATH_NEON_DOTPROD:
        return (getauxval(AT_HWCAP) & HWCAP_ASIMD) && (getauxval(AT_HWCAP) & HWCAP_ASIMDDP);
#endif
    default: return false;
    }
}

/* Contract: the kernel set of `path`, NULL when unavailable here. */
const sl_kernel_set *sl_kernels_for(int path)
{
    if (!sl_kernels_available(path)) return NULL;
    switch (path) {
    case SL_KPATH_PORTABLE: return &portable_set;
    case SL_KPATH_AVX2: return &sl_kernels_avx2_set;
    case SL_KPATH_AVX512: return &sl_kernels_avx512_set;
    case SL_KPATH_NEON: return &sl_kernels_neon_set;
    case SL_KPATH_NEON_DOTPROD: return &sl_kernels_neon_dotprod_set;
    default: return NULL;
    }
}

const char *sl_kpath_name(int path)
{
    static const char *const names[SL_KPATH_COUNT] = { "portable", "avx2", "avx512", "neon", "neon_dotprod" };
    return path >= 0 && path < SL_KPATH_COUNT ? names[path] : "?";
}

static void set_path(int path)
{
    atomic_store_explicit(&g_path, path, memory_order_relaxed);
    atomic_store_explicit(&g_active, sl_kernels_for(path), memory_order_release);
}

/* Contract: pick the path once: SLUICE_KERNELS when set and runnable (a warning on stderr
 * otherwise), else the best available; SLUICE_EXACT=1 turns exact mode on. */
static void init_once(void)
{
    int best = SL_KPATH_PORTABLE;
    for (int p = SL_KPATH_COUNT - 1; p > 0; p--)
        if (sl_kernels_available(p)) { best = p; break; }
    const char *env = getenv("SLUICE_KERNELS");
    if (env && *env) {
        int want = -1;
        for (int p = 0; p < SL_KPATH_COUNT; p++)
            if (!strcmp(env, sl_kpath_name(p))) want = p;
        if (want < 0)
            fprintf(stderr, "sluice: SLUICE_KERNELS=%s is not portable|avx2|avx512|neon|neon_dotprod; using %s\n", env, sl_kpath_name(best));
        else if (!sl_kernels_available(want))
            fprintf(stderr, "sluice: SLUICE_KERNELS=%s: this CPU cannot run it; using %s\n", env, sl_kpath_name(best));
        else
            best = want;
    }
    set_path(best);
    const char *ex = getenv("SLUICE_EXACT");
    if (ex && *ex && strcmp(ex, "0") != 0) atomic_store(&g_exact, true);
}

const sl_kernel_set *sl_kernels(void)
{
    pthread_once(&g_once, init_once);
    return atomic_load_explicit(&g_active, memory_order_acquire);
}

int sl_kernels_path(void)
{
    pthread_once(&g_once, init_once);
    return atomic_load_explicit(&g_path, memory_order_relaxed);
}

/* Contract: 0 after switching every later matrix product to `path`; -EINVAL for an unknown path,
 * -ENOTSUP when it cannot run here (then nothing changes). */
int sl_kernels_force(int path)
{
    pthread_once(&g_once, init_once);
    if (path < 0 || path >= SL_KPATH_COUNT) return -EINVAL;
    if (!sl_kernels_available(path)) return -ENOTSUP;
    set_path(path);
    return 0;
}

void sl_kernels_set_exact(bool on)
{
    pthread_once(&g_once, init_once);   /* so a later first use cannot overwrite it from the env */
    atomic_store(&g_exact, on);
}

bool sl_kernels_exact(void)
{
    pthread_once(&g_once, init_once);
    return atomic_load_explicit(&g_exact, memory_order_relaxed);
}
