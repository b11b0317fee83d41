/* kernels/gemm.h — batched quantized products (prefill): a block of weight rows against many
 * activation vectors at once, with exactly the bits of the per-(row, vector) integer dot.
 *
 * The K-quant dots (kernels/simd.h, canonical float steps) reduce each super-block to exact int32
 * sums (S, and M for the dmin types) and then run a few float steps per super-block in a fixed
 * order.  A GEMM that produces the same int32 sums (any order: integer addition is associative)
 * and runs the same float steps in the same order gives the same bits, whatever the batch size,
 * the row range or the vector grouping — the batching contract of kernels/ops.h.
 *
 * Paths: AMX-INT8 (kernels/gemm_amx.c) on x86 CPUs with AMX_TILE, AMX_INT8, AVX512_BW and VNNI once
 * Linux grants the tile-data permission (arch_prctl ARCH_REQ_XCOMP_PERM, asked once per process).
 * Without it (other CPUs, an older kernel, a VM hiding AMX, arm64) there is no GEMM and sl_matmul
 * keeps its 4-vector dots (the same bits) for those; sl_gemm_name says which and why.  Types: Q4_K,
 * Q6_K on AMX.  Q8_0 on AVX-512 VNNI (kernels/gemm_avx512.c): its canonical steps round in f32 once
 * per 4 products, a granularity a tile product (64 products per sum) cannot reproduce exactly, but
 * one vpdpbusd lane can.
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

enum { SL_GEMM_AUTO = -1, SL_GEMM_OFF = 0, SL_GEMM_AMX = 1 };

/* The GEMM for weight type `type` on this machine, or NULL (none: use the dots).  The first call
 * asks the OS for the AMX permission where the CPU has AMX. */
sl_qgemm_fn sl_gemm_for(int type);
/* Vectors below which sl_matmul keeps the 4-vector dots (a GEMM's per-block weight unpacking is
 * paid back only over enough vectors). */
#define SL_GEMM_MIN_VECTORS 16
/* What runs, for --version and debug output: "amx-int8 (Q4_K, Q6_K)", or "none (...why...)". */
const char *sl_gemm_name(void);
/* Tests and benchmarks: SL_GEMM_OFF turns the GEMM off, SL_GEMM_AMX / SL_GEMM_AUTO back on where
 * available; 0, or -ENOTSUP when AMX cannot run here (nothing changes).  Env SLUICE_GEMM=off does
 * the same at first use.  Not meant to be called while products run. */
int sl_gemm_force(int mode);

/* kernels/gemm_amx.c (NULL where the build has no AMX code: non-x86, or a compiler without it) and
 * kernels/gemm_avx512.c (NULL off x86). */
extern const sl_qgemm_fn sl_gemm_amx_q4_k, sl_gemm_amx_q6_k, sl_gemm_avx512_q8_0;

#endif
