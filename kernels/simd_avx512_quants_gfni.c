/* kernels/simd_avx512_quants_gfni.c — the single dots of kernels/simd_avx512_quants.c built a
 * second time with GFNI (sl_avx512gfni_*; the 4-vector forms exist only in the plain build): their
 * 2-bit and 4-bit weight fields come out of one vgf2p8affineqb each instead of a vpsrlvw and a
 * vpand.  Same bits; the entry points there pick this build where the CPU has GFNI.
 * docs/benchmarks.md, "Zen 4, session 17", has the measurements. */
#define SL_AVX512Q_GFNI 1
#include "kernels/simd_avx512_quants.c"
