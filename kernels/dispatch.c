/* kernels/dispatch.c — which kernel path runs: cpuid at first use, a per-type table of measured
 * exceptions, SLUICE_KERNELS / SLUICE_EXACT, and the switches tests use.
 *
 * The choice is made once (pthread_once) and then read with relaxed atomics on every matrix
 * product: it costs a load, and forcing a path mid-run is documented as not allowed.
 *
 * Per type, the widest path the CPU has runs unless k_prefs (below) names a narrower one that was
 * measured faster on that kind of CPU.  The table is static, so the choice is a function of the CPU
 * alone (a timing probe at start-up would let load noise pick F16/F32/BF16 kernels, whose bits
 * differ between paths); for the integer types every path returns the same bits, so mixing paths
 * per type changes no result.
 */
#include "kernels/simd.h"

#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__aarch64__)
#include <sys/auxv.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
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
    .dot_iq2_xxs_q8_k = sl_qdot_iq2_xxs_q8_k, .dot_iq2_xs_q8_k = sl_qdot_iq2_xs_q8_k,
    .dot_iq2_s_q8_k = sl_qdot_iq2_s_q8_k, .dot_iq3_xxs_q8_k = sl_qdot_iq3_xxs_q8_k,
    .dot_iq3_s_q8_k = sl_qdot_iq3_s_q8_k, .dot_iq1_s_q8_k = sl_qdot_iq1_s_q8_k,
    .dot_iq1_m_q8_k = sl_qdot_iq1_m_q8_k,
    .quantize_q8_1 = sl_quantize_act_q8_1,
    .dot_q5_0_q8_0 = sl_qdot_q5_0_q8_0, .dot_iq4_nl_q8_0 = sl_qdot_iq4_nl_q8_0,
    .dot_q4_1_q8_1 = sl_qdot_q4_1_q8_1, .dot_q5_1_q8_1 = sl_qdot_q5_1_q8_1,
    .dot_q2_k_q8_k = sl_qdot_q2_k_q8_k, .dot_q3_k_q8_k = sl_qdot_q3_k_q8_k,
    .dot_iq4_xs_q8_k = sl_qdot_iq4_xs_q8_k,
    .dot_mxfp4_q8_0 = sl_qdot_mxfp4_q8_0,
};

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static _Atomic(const sl_kernel_set *) g_active;
static atomic_int g_path;
static atomic_bool g_exact;
static _Atomic(const sl_kernel_set *) g_type_set[SL_TYPE_COUNT];   /* the set each weight type uses */
static atomic_int g_type_path[SL_TYPE_COUNT];

/* "On CPUs of `vendor` (and cpuid `family`, 0: any) whose widest path is `widest`, run `type` on
 * `path`": the per-type exceptions bench_kernels --ab measured (docs/benchmarks.md, "Kernel choice
 * per type on an AVX-512 CPU").  A type without a row runs on the widest path; a new type's row is
 * one line.  AMD needs the family: Zen 4 (0x19) runs 512-bit ops as two 256-bit halves, Zen 5
 * (0x1a) has 512-bit units, and the two measured opposite winners. */
typedef struct type_pref {
    const char *vendor;   /* __builtin_cpu_is name: "intel", "amd" */
    int family;           /* cpuid display family (base + extended), 0 for every family */
    int widest, type, path;
} type_pref;

static const type_pref k_prefs[] = {
    /* Intel Xeon (Sapphire Rapids), matvec, median avx512/avx2 speed: Q4_0 0.84 (1 thread), 0.94
     * (2).  Q8_0: the AVX-512 set runs the AVX2 forms (a 512-bit rows form, tried in December 2026,
     * decoded no faster end to end: 2.90-2.95 against 2.95-3.11 tok/s).  Since the K-quant AVX-512 dots
     * batch their reductions (docs/benchmarks.md, "Decode kernels at memory bandwidth"), AVX-512
     * wins Q4_K 1.04 / 1.05, Q5_K 1.07 / 1.07, Q6_K 1.11 / 1.11 and runs them (no row); F16 1.08,
     * BF16 1.12, F32 1.01 from the earlier table */
    { "intel", 0, SL_KPATH_AVX512, SL_TYPE_Q4_0, SL_KPATH_AVX2 },
    /* The issue-16 types have no row: AVX-512 measured fastest on this CPU for all eight SIMD
     * ones (bench_kernels 512 MiB, 3 interleaved rounds, 2T by CPU time, avx512 / avx2 medians:
     * Q2_K 1.08, Q3_K 1.19, IQ4_XS 1.23, IQ4_NL 1.31, Q5_0 1.30, IQ3_S 1.31, IQ3_XXS 1.84,
     * IQ2_XS 3.2; docs/benchmarks.md "Kernel speed pass"; the codebook types' second pass,
     * "Codebook kernels ... second pass", sped up only their AVX-512 side, so the lead grew).
     * Re-measured after the third pass and the gather-free AVX2 kernels (docs/benchmarks.md,
     * "Codebook kernels: third pass"), %bw avx512 / avx2: every type faster on AVX-512 or
     * within the noise (IQ4_NL 99 / 100, Q5_0 103 / 89, IQ2_XS 68 / 41, IQ1_M 25 / 14) */
    /* AMD EPYC Zen 4 (family 0x19), bench_kernels --ab 512 (5 and 9 rounds, session 14), avx512 /
     * avx2 median at 1 and 2 threads: Q4_0 0.916 / 0.897 and 0.959 / 0.930.  Q4_K, which an early
     * report had faster on AVX2 here, is 1.143 / 1.133 on AVX-512 since the K dots share one loop
     * (kernels/simd_avx512_kdot.h), so it has no row; F16 0.99 / 0.99 and BF16 (0.86 / 0.92 in one
     * run, 1.19 / 1.05 in the other) are within the noise (docs/benchmarks.md, "Zen 4") */
    { "amd", 0x19, SL_KPATH_AVX512, SL_TYPE_Q4_0, SL_KPATH_AVX2 },
    /* AMD EPYC Zen 5 (family 0x1a), bench_kernels --ab 512 7, avx512 / avx2 median [min-max] at 1
     * and 2 threads: F32 0.665 [0.646-0.688] / 0.666 [0.664-0.685]; every other type 1.02-2.4
     * (Q4_K 1.024 / 1.035) so no other row (docs/benchmarks.md, "Zen 5") */
    { "amd", 0x1a, SL_KPATH_AVX512, SL_TYPE_F32, SL_KPATH_AVX2 },
};

/* One row per quantized type: the activations its integer dots take (as llama.cpp pairs them) and
 * where its single, 4-vector and rows dots sit in sl_kernel_set (0: no such form; offset 0 is the
 * set's name, never a dot).  A new type's integer dots are this row and its kernel set members. */
typedef struct qtraits { int type, act; size_t dot, dot4, dotr; } qtraits;
#define KS(m) offsetof(sl_kernel_set, m)
#define QT(T, A, d, d4, dr) { SL_TYPE_##T, SL_ACT_##A, KS(d), d4, dr }
static const qtraits k_qtraits[] = {
    QT(Q4_0, Q8_0, dot_q4_0_q8_0, KS(dot4_q4_0_q8_0), 0),
    QT(Q8_0, Q8_0, dot_q8_0_q8_0, KS(dot4_q8_0_q8_0), KS(dotr_q8_0_q8_0)),
    QT(Q5_0, Q8_0, dot_q5_0_q8_0, KS(dot4_q5_0_q8_0), KS(dotr_q5_0_q8_0)),
    QT(IQ4_NL, Q8_0, dot_iq4_nl_q8_0, KS(dot4_iq4_nl_q8_0), KS(dotr_iq4_nl_q8_0)),
    QT(MXFP4, Q8_0, dot_mxfp4_q8_0, KS(dot4_mxfp4_q8_0), KS(dotr_mxfp4_q8_0)),
    QT(Q4_1, Q8_1, dot_q4_1_q8_1, 0, 0),
    QT(Q5_1, Q8_1, dot_q5_1_q8_1, 0, 0),
    QT(Q2_K, Q8_K, dot_q2_k_q8_k, KS(dot4_q2_k_q8_k), 0),
    QT(Q3_K, Q8_K, dot_q3_k_q8_k, KS(dot4_q3_k_q8_k), 0),
    QT(Q4_K, Q8_K, dot_q4_k_q8_k, KS(dot4_q4_k_q8_k), 0),
    QT(Q5_K, Q8_K, dot_q5_k_q8_k, KS(dot4_q5_k_q8_k), 0),
    QT(Q6_K, Q8_K, dot_q6_k_q8_k, KS(dot4_q6_k_q8_k), 0),
    QT(IQ4_XS, Q8_K, dot_iq4_xs_q8_k, KS(dot4_iq4_xs_q8_k), 0),
    QT(IQ3_S, Q8_K, dot_iq3_s_q8_k, KS(dot4_iq3_s_q8_k), KS(dotr_iq3_s_q8_k)),
    QT(IQ3_XXS, Q8_K, dot_iq3_xxs_q8_k, KS(dot4_iq3_xxs_q8_k), KS(dotr_iq3_xxs_q8_k)),
    QT(IQ2_XXS, Q8_K, dot_iq2_xxs_q8_k, KS(dot4_iq2_xxs_q8_k), KS(dotr_iq2_xxs_q8_k)),
    QT(IQ2_XS, Q8_K, dot_iq2_xs_q8_k, KS(dot4_iq2_xs_q8_k), KS(dotr_iq2_xs_q8_k)),
    QT(IQ2_S, Q8_K, dot_iq2_s_q8_k, KS(dot4_iq2_s_q8_k), KS(dotr_iq2_s_q8_k)),
    QT(IQ1_S, Q8_K, dot_iq1_s_q8_k, 0, 0),
    QT(IQ1_M, Q8_K, dot_iq1_m_q8_k, 0, 0),
};
#undef QT
#undef KS

static const qtraits *qtraits_of(int type)
{
    for (size_t i = 0; i < sizeof k_qtraits / sizeof *k_qtraits; i++)
        if (k_qtraits[i].type == type) return &k_qtraits[i];
    return NULL;
}

/* The kernel set member at byte offset `off` (a function pointer of the type the caller reads). */
#define MEMBER(T, ks, off) (*(const T *)((const char *)(ks) + (off)))

/* Contract: see simd.h; SL_ACT_NONE for the float types and unknown ids. */
int sl_kernels_act(int type)
{
    const qtraits *q = qtraits_of(type);
    return q ? q->act : SL_ACT_NONE;
}

/* Contract: the member of `ks` for `type` (simd.h), NULL where the type or the set has none. */
sl_qdot_fn sl_kernels_qdot(const sl_kernel_set *ks, int type)
{
    const qtraits *q = qtraits_of(type);
    return q ? MEMBER(sl_qdot_fn, ks, q->dot) : NULL;
}

sl_qdot4_fn sl_kernels_qdot4(const sl_kernel_set *ks, int type)
{
    const qtraits *q = qtraits_of(type);
    return q && q->dot4 ? MEMBER(sl_qdot4_fn, ks, q->dot4) : NULL;
}

sl_qdotr_fn sl_kernels_qdotr(const sl_kernel_set *ks, int type)
{
    const qtraits *q = qtraits_of(type);
    return q && q->dotr ? MEMBER(sl_qdotr_fn, ks, q->dotr) : NULL;
}
#undef MEMBER

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
        /* BMI2 too: the AVX-512 IQ1 dots use pdep (every AVX-512 CPU has it; a VM could mask it) */
        return sl_kernels_available(SL_KPATH_AVX2) && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("bmi2");
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
    if (path == SL_KPATH_AUTO) return "auto";
    return path >= 0 && path < SL_KPATH_COUNT ? names[path] : "?";
}

/* Contract: cpuid leaf 1's display family: the base family, plus the extended family when the
 * base is 0xf (every AMD since K8: Zen 4 0x19, Zen 5 0x1a; Intel's is 6); 0 off x86. */
int sl_cpu_family(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    const int base = (a >> 8) & 0xf;
    return base == 0xf ? base + (int)((a >> 20) & 0xff) : base;
#else
    return 0;
#endif
}

static bool cpu_is(const char *vendor, int family)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (family && sl_cpu_family() != family) return false;
    if (!strcmp(vendor, "intel")) return __builtin_cpu_is("intel");
    if (!strcmp(vendor, "amd")) return __builtin_cpu_is("amd");
#endif
    (void)vendor;
    (void)family;
    return false;
}

static int widest_path(void)
{
    for (int p = SL_KPATH_COUNT - 1; p > 0; p--)
        if (sl_kernels_available(p)) return p;
    return SL_KPATH_PORTABLE;
}

/* Contract: the path k_prefs gives `type` on this CPU (the widest path when no row applies). */
static int table_path(int type)
{
    const int widest = widest_path();
    for (size_t i = 0; i < sizeof k_prefs / sizeof *k_prefs; i++) {
        const type_pref *r = &k_prefs[i];
        if (r->type == type && r->widest == widest && sl_kernels_available(r->path) && cpu_is(r->vendor, r->family)) return r->path;
    }
    return widest;
}

/* Every type on `path`, or (SL_KPATH_AUTO) each type on its table path. */
static void set_path(int path)
{
    const int base = path == SL_KPATH_AUTO ? widest_path() : path;
    for (int t = 0; t < SL_TYPE_COUNT; t++) {
        const int p = path == SL_KPATH_AUTO ? table_path(t) : path;
        atomic_store_explicit(&g_type_path[t], p, memory_order_relaxed);
        atomic_store_explicit(&g_type_set[t], sl_kernels_for(p), memory_order_release);
    }
    atomic_store_explicit(&g_path, base, memory_order_relaxed);
    atomic_store_explicit(&g_active, sl_kernels_for(base), memory_order_release);
}

/* Contract: pick the paths once: the per-type table (sl_kernels_force and sl_kernels_set_exact
 * change it later: the debug hook sluice_debug_env applies SLUICE_KERNELS / SLUICE_EXACT so). */
static void init_once(void)
{
    set_path(SL_KPATH_AUTO);
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

const sl_kernel_set *sl_kernels_for_type(int type)
{
    pthread_once(&g_once, init_once);
    if (type < 0 || type >= SL_TYPE_COUNT) return atomic_load_explicit(&g_active, memory_order_acquire);
    return atomic_load_explicit(&g_type_set[type], memory_order_acquire);
}

int sl_kernels_path_for_type(int type)
{
    pthread_once(&g_once, init_once);
    if (type < 0 || type >= SL_TYPE_COUNT) return atomic_load_explicit(&g_path, memory_order_relaxed);
    return atomic_load_explicit(&g_type_path[type], memory_order_relaxed);
}

/* Contract: 0 after switching every later matrix product to `path` (SL_KPATH_AUTO: the per-type
 * table); -EINVAL for an unknown path, -ENOTSUP when it cannot run here (then nothing changes). */
int sl_kernels_force(int path)
{
    pthread_once(&g_once, init_once);
    if (path == SL_KPATH_AUTO) {
        set_path(path);
        return 0;
    }
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
