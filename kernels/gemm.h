/* kernels/gemm.h — batched quantized products (prefill): a block of weight rows against many
 * activation vectors at once, with exactly the bits of the per-(row, vector) integer dot.
 *
 * The K-quant dots (kernels/simd.h, canonical float steps) reduce each super-block to exact int32
 * sums (S, and M for the dmin types) and then run a few float steps per super-block in a fixed
 * order.  A GEMM that produces the same int32 sums (any order: integer addition is associative)
 * and runs the same float steps in the same order gives the same bits, whatever the batch size,
 * the row range or the vector grouping — the batching contract of kernels/ops.h.
 *
 * Paths, fastest first; a weight type runs on the fastest one this machine allows that has it:
 *   AMX-INT8 (kernels/gemm_amx.c): Q4_K, Q6_K, Q8_0, MXFP4, on x86 CPUs with AMX_TILE, AMX_INT8, AVX512_BW
 *     and VNNI once Linux grants the tile-data permission (arch_prctl ARCH_REQ_XCOMP_PERM, asked once
 *     per process).  Q8_0, MXFP4: one tile product per 32-block gives its exact sums (their
 *     canonical step is one FMA per block, kernels/simd.h).
 *   AVX-512 VNNI: Q4_K, Q6_K (kernels/gemm_vnni.c: vpdpbusd sums per sub-block and row lane, vpmulld
 *     by the scale) and Q8_0, MXFP4 (kernels/gemm_avx512.c: 8 vpdpbusd per block and 16 row
 *     lanes, then one multiply and one FMA).  AMD Zen 4, Intel parts before Sapphire Rapids, AMX refused.
 *   AVX2 (kernels/gemm_avx2.c): Q4_K, Q6_K (vpmaddubsw sums added as exact int16, vpmaddwd by the
 *     scale): AMD Zen 2/3, Intel parts without AVX-512.  Q8_0 and MXFP4 have none (no fewer
 *     operations than their 4-vector dots: kernels/gemm_avx2.c).
 * Every GEMM's loops over the vectors of a group are unrolled by pragma: GCC 12 at -O2 (the default
 * build) left them as loops over stack arrays of accumulators, a third of the speed.
 * Elsewhere (arm64, a CPU without AVX2, SLUICE_GEMM=off) there is no GEMM and sl_matmul keeps its
 * 4-vector dots (the same bits); sl_gemm_name says per type what runs and why not a faster path.
 * The Q4_K/Q6_K VNNI and AVX2 GEMMs share one unpacked layout (kernels/gemm_kpack.h).
 */
#ifndef SL_KERNELS_GEMM_H
#define SL_KERNELS_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Rows r < nrows of a matrix (row r at w + r * row_bytes, n elements) against vectors v < nv of
 * quantized activations (vector v at y + v * y_stride, the type's activation format):
 * out[v * out_stride + r] = exactly the bits of the type's single integer dot of (row r, vector v).
 * False (nothing written) when its scratch memory cannot be had; the caller then uses the dots. */
typedef bool (*sl_qgemm_fn)(const void *restrict w, size_t row_bytes, int64_t nrows, const void *restrict y,
                            size_t y_stride, int nv, int64_t n, float *restrict out, int64_t out_stride);

/* Paths, fastest first (the order matters: a forced path is a ceiling, see sl_gemm_force). */
enum { SL_GEMM_AUTO = -1, SL_GEMM_OFF = 0, SL_GEMM_AMX = 1, SL_GEMM_VNNI = 2, SL_GEMM_AVX2 = 3 };

/* The GEMM for weight type `type` on this machine under the current setting, or NULL (none: use
 * the dots).  The first call asks the OS for the AMX permission where the CPU has AMX, and reads
 * SLUICE_GEMM = off | amx | vnni | avx2 | auto (as sl_gemm_force; a path unavailable here, or an
 * unknown value, leaves auto, and sl_gemm_name says so). */
sl_qgemm_fn sl_gemm_for(int type);
/* Vectors below which sl_matmul keeps the 4-vector dots (a GEMM's per-block weight unpacking is
 * paid back only over enough vectors). */
#define SL_GEMM_MIN_VECTORS 16
/* What runs, per type, for --version and debug output, e.g. "Q4_K avx512-vnni, Q6_K avx512-vnni,
 * Q8_0 avx512-vnni; no AMX: the CPU has no AMX-INT8" ("dots": no GEMM).  The string stays valid;
 * its contents change with sl_gemm_force. */
const char *sl_gemm_name(void);
/* Tests and benchmarks: SL_GEMM_OFF turns the GEMM off; SL_GEMM_AMX / VNNI / AVX2 allow that path
 * and the slower ones (each type takes the fastest allowed that has it: forced AVX2 runs Q8_0 on
 * the dots); SL_GEMM_AUTO allows the fastest available.
 * Returns 0; -ENOTSUP when the forced path cannot run here (CPU, build or OS), and nothing changes
 * (SL_GEMM_AUTO with no path at all: -ENOTSUP, the GEMM is off); -EINVAL for another mode.  Not
 * meant to be called while products run or sl_gemm_name is read. */
int sl_gemm_force(int mode);

/* The kernels, each NULL where the build has no code for it: kernels/gemm_amx.c (non-x86, or a
 * compiler without AMX), kernels/gemm_vnni.c, kernels/gemm_avx512.c, kernels/gemm_avx2.c (off
 * x86).  Callers go through sl_gemm_for, which checks the CPU. */
extern const sl_qgemm_fn sl_gemm_amx_q4_k, sl_gemm_amx_q6_k, sl_gemm_amx_q8_0, sl_gemm_amx_mxfp4;
extern const sl_qgemm_fn sl_gemm_avx512_q8_0, sl_gemm_avx512_mxfp4;
extern const sl_qgemm_fn sl_gemm_vnni_q4_k, sl_gemm_vnni_q6_k, sl_gemm_avx2_q4_k, sl_gemm_avx2_q6_k;

/* The SL_SCRATCH_GEMM bytes (kernels/scratch.h) the most demanding GEMM this build has asks for, per
 * thread, for a product of width n against nv vectors: what the planner counts for each thread (0
 * where the build has no GEMM).  Each GEMM sizes its request with its own function below, so the
 * two cannot drift apart (tests/test_gemm.c checks the buffers against this bound). */
size_t sl_gemm_scratch_bytes(int64_t n, int nv);
size_t sl_gemm_amx_scratch(int64_t n, int nv), sl_gemm_vnni_scratch(int64_t n, int nv),
       sl_gemm_avx512_scratch(int64_t n, int nv), sl_gemm_avx2_scratch(int64_t n, int nv);

#endif
