/* kernels/simd.h — fast kernels: activation quantization, integer dot products, SIMD dispatch.
 *
 * The fast path computes a weight row × activation dot the way llama.cpp does on a CPU: the f32
 * activation vector is quantized once per matrix product (Q8_0 blocks of 32 for Q4_0/Q8_0 weights,
 * Q8_K blocks of 256 with per-16 sums for Q4_K/Q5_K/Q6_K), then each row is dotted with integer
 * multiply-adds.  F32/F16/BF16 weights keep f32 activations (ggml does not quantize those either;
 * for F16 weights ggml rounds the activations to f16 — we do not: the weights are widened with
 * F16C instead, which costs nothing at memory speed and keeps F16 files ~0.002 from float64).
 *
 * Determinism contract (tests/test_kernels_simd.c checks it on random blocks, under every path the
 * CPU has):
 *   - activation quantizers: every path produces the same bytes;
 *   - integer dots: every path returns the same float bits as the portable reference.  Integer
 *     sums are exact, and the few float operations per block are specified below and done in the
 *     same order (no fused multiply-add) by every path;
 *   - float dots (F32/F16/BF16): SIMD paths use other summation orders and FMA; they are within
 *     2*gamma_n*sum|w[i]*x[i]| of the exact sum (gamma_n = n*2^-24/(1-n*2^-24)), like the portable one.
 * A result never depends on anything but (row, vector): not on the batch size, the thread count or
 * how a matrix is split into row pieces.
 *
 * Paths: portable C (always), AVX2 (+FMA, F16C), AVX-512 (F, BW, VL, VNNI); on aarch64 NEON and
 * NEON + dotprod (kernels/simd_neon.c; features from getauxval(AT_HWCAP)).  At first use each
 * weight type gets the widest path the CPU supports (cpuid), unless dispatch.c's static per-type
 * table names a narrower one measured faster on that kind of CPU (bench_kernels --ab; wider is
 * not always faster: 512-bit K-quant dots ran slower than 256-bit ones on some CPUs).  Mixing
 * paths per type is safe because every integer path returns the same bits.  Env
 * SLUICE_KERNELS=portable|avx2|avx512 or sl_kernels_force() run every type on one path (a test and
 * debug hook; a path the CPU lacks is refused); "auto" / SL_KPATH_AUTO is the table.  SIMD code is
 * compiled with per-function target attributes, so the default build runs on any x86-64 (no
 * -march needed).  The tests run every path the CPU has natively and, through SIMDe, the AVX-512
 * code on CPUs without it (tests/test_kernels_avx512_emu.c); each prints which ran.
 *
 * Attention uses adot_* and axpy_*, never dot_f32/dot_f16: the weight-row float dots may sum in a
 * path's own order, and attention scores through them made logits depend on the CPU.
 *
 * Canonical float steps of the integer dots (s_i: f32 block scale products, exact in f32 for the
 * f16 x f16 products of the 32-blocks):
 *   q8_0 x q8_0, blocks of 32: t_i = the exact int32 sum of block i's 32 products (|t_i| < 2^24);
 *     acc = fmaf(s_i, (float)t_i, acc) for i = 0, 1, ... in order, acc starting at +0; result = acc.
 *     One rounding per block and one accumulator per (row, vector) is what a GEMM computes
 *     naturally (16 rows in the lanes of a VNNI register, or an AMX tile of 16 x 16 block sums), so
 *     batched prefill reproduces it at full speed; until December 2026 Q8_0 had q4_0's steps below
 *     (one rounding per 4 products), which held its GEMMs to ~0.85x llama.cpp (docs/benchmarks.md).
 *   q4_0 x q8_0, blocks of 32: lane k (0..7) of block i holds the exact integer sum of the
 *     products of elements 4k..4k+3; acc[i % 2][k] = acc[i % 2][k] + s_i * (float)lane_k; result =
 *     pairwise sum of t[k] = acc[0][k] + acc[1][k] (t[k] += t[k+4]; t[k] += t[k+2]; t[0] + t[1]).
 *   q4_K/q5_K x q8_K, super-blocks of 256: S = sum_j sc_j * dot_j, M = sum_j m_j * (bsums of
 *     sub-block j) exactly in int32; acc = acc + ((d * (float)S) - (dmin * (float)M)) with
 *     d = f16(w.d) * y.d, dmin = f16(w.dmin) * y.d.
 *   q6_K x q8_K: S = sum_s sc_s * (dot_s(q in 0..63) - 32 * bsums_s); acc = acc + d * (float)S.
 *   codebook types x q8_K, super-blocks of 256 (kernels/iq*.c): with v_e = grid coordinate times
 *     sign of element e and L = 2s + 1 for a 4-bit (IQ2/IQ3) or 3-bit (IQ1) scale s,
 *     iq2_xxs/iq2_xs/iq2_s: S = sum over scale groups of L * sum v_e * q_e (int32);
 *       acc = acc + (f16(w.d) * y.d) * (float)S; result = 0.125f * acc;
 *     iq3_xxs: the same, result = 0.25f * acc;   iq3_s: the same, result = acc;
 *     iq1_s/iq1_m: G = sum L * sum grid_e * q_e, D = sum L * (±1 shift sign) * sum q_e (int32);
 *       acc = acc + (f16(d) * y.d) * ((float)G + 0.125f * (float)D).
 *   q5_0 x q8_0, iq4_nl x q8_0: the q4_0 steps, with q = 5-bit value - 16 / kvalues[nibble].
 *   mxfp4 x q8_0 (as ggml pairs them): the q8_0 steps (one fused multiply-add per block, since
 *     December 2026; before, the q4_0 steps) with q = kvalues_mxfp4[nibble] (the E2M1 values
 *     doubled, |q| <= 12) and s_i = e8m0_half(w.e) * f16(y.d), e8m0_half(e) = 2^(e-128) as an f32
 *     (subnormal for e < 2; k_quants.h sl_e8m0_half).  s_i is exact unless it leaves the f32 range
 *     (then IEEE rounding, the same on every path: no path flushes subnormals).
 *   q4_1/q5_1 x q8_1: the q4_0 lanes with q = the unsigned 4/5-bit value, plus one more f32
 *     accumulator mn = mn + f16(w.m) * f16(y.s) per block (exact product); result =
 *     (pairwise lane sum) + mn.
 *   q2_K x q8_K: S = sum_j (sc_j & 15) * dot_j, M = sum_j (sc_j >> 4) * bsums_j over the 16
 *     sub-blocks of 16; acc = acc + ((d * (float)S) - (dmin * (float)M)) as for q4_K.
 *   q3_K x q8_K: S = sum_j (sc_j - 32) * (dot_j(u) - 4 * bsums_j), u = 2 low bits | hbit << 2
 *     (the value + 4); acc = acc + d * (float)S, d = f16(w.d) * y.d.
 *   iq4_xs x q8_K: S = sum_b (ls_b - 32) * dot_b(kvalues[q]) over 8 sub-blocks of 32;
 *     acc = acc + d * (float)S.
 */
#ifndef SL_KERNELS_SIMD_H
#define SL_KERNELS_SIMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/types.h"

enum sl_kpath {
    SL_KPATH_AUTO = -1, SL_KPATH_PORTABLE = 0, SL_KPATH_AVX2 = 1, SL_KPATH_AVX512 = 2,
    SL_KPATH_NEON = 3, SL_KPATH_NEON_DOTPROD = 4,   /* aarch64: kernels/simd_neon.c */
    SL_KPATH_COUNT = 5
};

/* Activation quantizer: x[0..n) -> blocks at y (n a multiple of the block size: 32 for Q8_0, 256
 * for Q8_K).  x must be finite. */
typedef void  (*sl_actq_fn)(const float *restrict x, void *restrict y, int64_t n);
/* Integer dot of a weight row w (n elements) with a quantized activation vector y. */
typedef float (*sl_qdot_fn)(const void *restrict w, const void *restrict y, int64_t n);
/* The same row against 4 vectors at y + v*y_stride (v < 4): out[v] has exactly the bits of the
 * single dot; the weights are unpacked once for all four (batched prefill). */
typedef void  (*sl_qdot4_fn)(const void *restrict w, const void *restrict y, size_t y_stride, int64_t n,
                             float *restrict out);
/* Rows r < nrows of a matrix (row r at w + r * row_bytes) against one vector: out[r] has exactly
 * the bits of the single dot of row r; a kernel may pipeline its work across the rows (matvec). */
typedef void  (*sl_qdotr_fn)(const void *restrict w, size_t row_bytes, const void *restrict y, int64_t n, int64_t nrows,
                             float *restrict out);

typedef struct sl_kernel_set {
    const char *name;                       /* "portable", "avx2", "avx512" */
    sl_actq_fn quantize_q8_0;               /* Q8_0 activations: d = amax/127 (f16), q = rint(x*127/amax) */
    sl_actq_fn quantize_q8_k;               /* Q8_K: d = 1/(127/amax) (f32), q = rint(x*127/amax), bsums */
    sl_qdot_fn dot_q4_0_q8_0, dot_q8_0_q8_0;
    sl_qdot_fn dot_q4_k_q8_k, dot_q5_k_q8_k, dot_q6_k_q8_k;
    sl_dot_fn  dot_f32, dot_f16, dot_bf16;  /* f32 activations */
    /* o[i] += a * v[i], i < n (attention's weighted sum of value rows; f32 rounding per step, or
     * one rounding with FMA on the SIMD paths) */
    void (*axpy_f32)(float *restrict o, float a, const float *restrict v, int64_t n);
    void (*axpy_f16)(float *restrict o, float a, const uint16_t *restrict v, int64_t n);
    /* Attention scores q . K[t]: one summation order on every path (32 FMA lanes, lane k taking
     * elements i with i % 32 == k in steps of 32, then elements of a last partial step of 8 into
     * lanes 0..7, a fixed pairwise tree over the lanes, then any n % 8 tail by FMA), so attention
     * gives the same bits on the portable, AVX2 and AVX-512 paths. */
    sl_dot_fn  adot_f32, adot_f16;
    /* 4-vector forms (NULL: callers use the single dot) */
    sl_qdot4_fn dot4_q4_0_q8_0, dot4_q8_0_q8_0;
    sl_qdot4_fn dot4_q4_k_q8_k, dot4_q5_k_q8_k, dot4_q6_k_q8_k;
    /* codebook types x Q8_K (kernels/iq*.c; the SIMD sets have all seven) */
    sl_qdot_fn dot_iq2_xxs_q8_k, dot_iq2_xs_q8_k, dot_iq2_s_q8_k, dot_iq3_xxs_q8_k, dot_iq3_s_q8_k;
    sl_qdot_fn dot_iq1_s_q8_k, dot_iq1_m_q8_k;
    /* 4-vector forms of five of them (NULL: callers use the single dot; the AVX-512 set has them) */
    sl_qdot4_fn dot4_iq2_xs_q8_k, dot4_iq3_xxs_q8_k, dot4_iq3_s_q8_k, dot4_iq2_xxs_q8_k, dot4_iq2_s_q8_k;
    /* and their rows forms (NULL: callers use the single dot row by row; the AVX-512 set has them) */
    sl_qdotr_fn dotr_iq2_xs_q8_k, dotr_iq3_xxs_q8_k, dotr_iq3_s_q8_k, dotr_iq2_xxs_q8_k, dotr_iq2_s_q8_k;
    /* Low-bit types (portable references in kernels/qdot_quants.c).  Q8_1 activations: Q8_0's
     * d and q plus s = f16((amax/127) * sum q). */
    sl_actq_fn quantize_q8_1;
    sl_qdot_fn dot_q5_0_q8_0, dot_iq4_nl_q8_0, dot_q4_1_q8_1, dot_q5_1_q8_1;
    sl_qdot_fn dot_q2_k_q8_k, dot_q3_k_q8_k, dot_iq4_xs_q8_k;
    /* their 4-vector forms (NULL: callers use the single dot; the AVX-512 set has them) */
    sl_qdot4_fn dot4_q5_0_q8_0, dot4_iq4_nl_q8_0, dot4_q2_k_q8_k, dot4_q3_k_q8_k, dot4_iq4_xs_q8_k;
    /* and rows forms of the two 32-block ones (NULL: the single dot row by row; the AVX-512 set has them) */
    sl_qdotr_fn dotr_q5_0_q8_0, dotr_iq4_nl_q8_0;
    /* MXFP4 with Q8_0 activations, its 4-vector form (NULL: the single dot; the x86 sets have it) */
    sl_qdot_fn  dot_mxfp4_q8_0;
    sl_qdot4_fn dot4_mxfp4_q8_0;
    /* Q8_0's rows form (NULL: the single dot row by row; the x86 sets have it: one row's chain of
     * FMAs is latency-bound, four rows side by side are not) */
    sl_qdotr_fn dotr_q8_0_q8_0;
    sl_qdotr_fn dotr_mxfp4_q8_0;   /* the same for MXFP4 */
} sl_kernel_set;

/* Bytes of one quantized activation block and its element count. */
#define SL_Q8_0_BYTES 34
#define SL_Q8_K_BYTES 292
#define SL_Q8_1_BYTES 36

/* The kernel set of a path, or NULL when this CPU (or this build's architecture) cannot run it.
 * Tests use it to compare paths directly. */
const sl_kernel_set *sl_kernels_for(int path);
/* The set's integer dot of weight type `type` with its paired activations (Q8_0, Q8_1 or Q8_K),
 * and its 4-vector form: NULL for types without one (floats, unknown ids) or where the set has
 * none (sl_matmul then uses the portable set's, or the single dot). */
sl_qdot_fn  sl_kernels_qdot(const sl_kernel_set *ks, int type);
sl_qdot4_fn sl_kernels_qdot4(const sl_kernel_set *ks, int type);
sl_qdotr_fn sl_kernels_qdotr(const sl_kernel_set *ks, int type);   /* rows form, or NULL */
/* The activations a weight type's integer dots take (kernels/dispatch.c's per-type table, which
 * also places each type's dots in sl_kernel_set); SL_ACT_NONE: f32 activations (float types). */
enum { SL_ACT_NONE = 0, SL_ACT_Q8_0 = 1, SL_ACT_Q8_1 = 2, SL_ACT_Q8_K = 3 };
int sl_kernels_act(int type);
bool sl_kernels_available(int path);
/* The base set (chosen at first use: SLUICE_KERNELS, else the widest available path): its
 * quantizers, adot and axpy are the ones every path shares bit for bit. */
const sl_kernel_set *sl_kernels(void);
int  sl_kernels_path(void);
/* The set whose dots run matrices of weight type `type` (any id; unknown ones get the base set). */
const sl_kernel_set *sl_kernels_for_type(int type);
int  sl_kernels_path_for_type(int type);
const char *sl_kpath_name(int path);   /* "portable", "avx2", "avx512", "neon", "neon_dotprod", "auto", "?" */
int  sl_cpu_family(void);   /* x86 cpuid display family (AMD Zen 4: 0x19, Zen 5: 0x1a), 0 elsewhere */
/* Force a path for every type for the whole process (SL_KPATH_AUTO: back to the per-type table):
 * 0, or -ENOTSUP when the CPU lacks it (nothing changes), -EINVAL for an unknown path.  Not meant
 * to be called while matrix products are running. */
int  sl_kernels_force(int path);
/* Tests: the AVX-512 codebook dots (IQ3_S, IQ3_XXS, IQ2_*) have a byte-permute version (CPUs with
 * VBMI, BITALG, GFNI, BMI2) and a gather one (the others); true forces the gather one (same bits). */
void sl_avx512_iq_force_gathers(bool on);
bool sl_avx512_iq_has_byte_permutes(void);   /* the CPU can run the byte-permute version */
/* Tests and benchmarks: the byte-permute IQ2_XS, IQ2_XXS, IQ2_S, IQ3_S and IQ3_XXS dots come in two
 * forms with the same bits.  LOADS takes the scale operands from tables and the sign masks from
 * stored copies (fewer shuffle-port uops: Intel, where port 5 is the bound); SHUFFLES makes them in
 * registers or loads the masks straight from the block (fewer instructions: AMD Zen 4 and 5, where
 * the count is the bound).  AUTO (the default): SHUFFLES on AMD, where it was measured, else
 * LOADS; sl_avx512_iq_form says which one runs.  Not meant to be changed while products run. */
enum { SL_IQ_FORM_AUTO = -1, SL_IQ_FORM_LOADS = 0, SL_IQ_FORM_SHUFFLES = 1 };
void sl_avx512_iq_force_form(int form);
int  sl_avx512_iq_form(void);

/* Exact mode: sl_matmul dequantizes weights and dots them with f32 activations (the portable
 * reference kernels of types.h, ~0.003 from a float64 forward pass on the golden models) instead of
 * quantizing activations (~0.1-0.2 from it, like llama.cpp).  Default off; env SLUICE_EXACT=1 turns
 * it on at first use. */
void sl_kernels_set_exact(bool on);
bool sl_kernels_exact(void);

/* Portable references (also members of the "portable" set). */
void  sl_axpy_f32(float *restrict o, float a, const float *restrict v, int64_t n);
void  sl_axpy_f16(float *restrict o, float a, const uint16_t *restrict v, int64_t n);
float sl_adot_f32(const void *restrict w, const float *restrict x, int64_t n);
float sl_adot_f16(const void *restrict w, const float *restrict x, int64_t n);
void  sl_quantize_act_q8_0(const float *restrict x, void *restrict y, int64_t n);
void  sl_quantize_act_q8_k(const float *restrict x, void *restrict y, int64_t n);
float sl_qdot_q4_0_q8_0(const void *restrict w, const void *restrict y, int64_t n);
float sl_qdot_q8_0_q8_0(const void *restrict w, const void *restrict y, int64_t n);
float sl_qdot_q4_k_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_qdot_q5_k_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_qdot_q6_k_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_qdot_iq2_xxs_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_qdot_iq2_xs_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_qdot_iq2_s_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_qdot_iq3_xxs_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_qdot_iq3_s_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_qdot_iq1_s_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_qdot_iq1_m_q8_k(const void *restrict w, const void *restrict y, int64_t n);
void  sl_quantize_act_q8_1(const float *restrict x, void *restrict y, int64_t n);
float sl_qdot_q5_0_q8_0(const void *restrict w, const void *restrict y, int64_t n);
float sl_qdot_iq4_nl_q8_0(const void *restrict w, const void *restrict y, int64_t n);
float sl_qdot_q4_1_q8_1(const void *restrict w, const void *restrict y, int64_t n);
float sl_qdot_q5_1_q8_1(const void *restrict w, const void *restrict y, int64_t n);
float sl_qdot_q2_k_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_qdot_q3_k_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_qdot_iq4_xs_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_qdot_mxfp4_q8_0(const void *restrict w, const void *restrict y, int64_t n);

/* Per-path sets, defined in kernels/simd_avx2.c, kernels/simd_avx512.c and kernels/simd_neon.c
 * (NULL-filled names on other architectures). */
extern const sl_kernel_set sl_kernels_avx2_set;
extern const sl_kernel_set sl_kernels_avx512_set;
extern const sl_kernel_set sl_kernels_neon_set;
extern const sl_kernel_set sl_kernels_neon_dotprod_set;
/* AVX2 functions shared with the AVX-512 set (the activation quantizers, whose bytes are the same
 * on every path, and the 4-vector dots, whose bits are). */
void sl_avx2_quantize_q8_0(const float *restrict x, void *restrict y, int64_t n);
void sl_avx2_quantize_q8_k(const float *restrict x, void *restrict y, int64_t n);
void sl_avx2_axpy_f32(float *restrict o, float a, const float *restrict v, int64_t n);
void sl_avx2_axpy_f16(float *restrict o, float a, const uint16_t *restrict v, int64_t n);
float sl_avx2_adot_f32(const void *restrict w, const float *restrict x, int64_t n);
float sl_avx2_adot_f16(const void *restrict w, const float *restrict x, int64_t n);
void sl_avx2_dot4_q4_0_q8_0(const void *restrict w, const void *restrict y, size_t ys, int64_t n, float *restrict out);
float sl_avx2_dot_q8_0_q8_0(const void *restrict w, const void *restrict y, int64_t n);
void sl_avx2_dotr_q8_0_q8_0(const void *restrict w, size_t row_bytes, const void *restrict y, int64_t n, int64_t nrows,
                            float *restrict out);
void sl_avx2_dot4_q8_0_q8_0(const void *restrict w, const void *restrict y, size_t ys, int64_t n, float *restrict out);
void sl_avx2_dot4_q4_k_q8_k(const void *restrict w, const void *restrict y, size_t ys, int64_t n, float *restrict out);
void sl_avx2_dot4_q5_k_q8_k(const void *restrict w, const void *restrict y, size_t ys, int64_t n, float *restrict out);
void sl_avx2_dot4_q6_k_q8_k(const void *restrict w, const void *restrict y, size_t ys, int64_t n, float *restrict out);
/* SIMD codebook dots (kernels/simd_avx2_iq.c, kernels/simd_avx512_iq.c): same bits as the
 * portable ones. */
float sl_avx2_dot_iq2_xs_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_avx2_dot_iq3_xxs_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_avx2_dot_iq3_s_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_avx512_dot_iq2_xs_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_avx512_dot_iq3_xxs_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_avx512_dot_iq3_s_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_avx2_dot_iq2_xxs_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_avx2_dot_iq2_s_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_avx2_dot_iq1_s_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_avx2_dot_iq1_m_q8_k(const void *restrict w, const void *restrict y, int64_t n);
/* The byte-permute codebook dots (kernels/simd_avx512_vbmi.c; need AVX512_VBMI, BITALG, BMI2, GFNI). */
float sl_avx512vbmi_dot_iq2_xs_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_avx512vbmi_dot_iq3_xxs_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_avx512vbmi_dot_iq3_s_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_avx512vbmi_dot_iq2_xxs_q8_k(const void *restrict w, const void *restrict y, int64_t n);
void  sl_avx512vbmi_dot4_iq2_xs_q8_k(const void *restrict w, const void *restrict y, size_t ys, int64_t n, float *restrict out);
void  sl_avx512vbmi_dot4_iq3_xxs_q8_k(const void *restrict w, const void *restrict y, size_t ys, int64_t n, float *restrict out);
void  sl_avx512vbmi_dot4_iq3_s_q8_k(const void *restrict w, const void *restrict y, size_t ys, int64_t n, float *restrict out);
void  sl_avx512vbmi_dot4_iq2_xxs_q8_k(const void *restrict w, const void *restrict y, size_t ys, int64_t n, float *restrict out);
float sl_avx512vbmi_dot_iq2_s_q8_k(const void *restrict w, const void *restrict y, int64_t n);
void  sl_avx512vbmi_dot4_iq2_s_q8_k(const void *restrict w, const void *restrict y, size_t ys, int64_t n, float *restrict out);
#define SL_DOTR_ARGS const void *restrict w, size_t row_bytes, const void *restrict y, int64_t n, int64_t nrows, float *restrict out
void  sl_avx512vbmi_dotr_iq2_xs_q8_k(SL_DOTR_ARGS);
void  sl_avx512vbmi_dotr_iq3_xxs_q8_k(SL_DOTR_ARGS);
void  sl_avx512vbmi_dotr_iq3_s_q8_k(SL_DOTR_ARGS);
void  sl_avx512vbmi_dotr_iq2_xxs_q8_k(SL_DOTR_ARGS);
void  sl_avx512vbmi_dotr_iq2_s_q8_k(SL_DOTR_ARGS);
/* Their 4-vector forms on the AVX-512 set: the byte-permute ones, else four gather dots. */
void  sl_avx512_dot4_iq2_xs_q8_k(const void *restrict w, const void *restrict y, size_t ys, int64_t n, float *restrict out);
void  sl_avx512_dot4_iq3_xxs_q8_k(const void *restrict w, const void *restrict y, size_t ys, int64_t n, float *restrict out);
void  sl_avx512_dot4_iq3_s_q8_k(const void *restrict w, const void *restrict y, size_t ys, int64_t n, float *restrict out);
void  sl_avx512_dot4_iq2_xxs_q8_k(const void *restrict w, const void *restrict y, size_t ys, int64_t n, float *restrict out);
void  sl_avx512_dot4_iq2_s_q8_k(const void *restrict w, const void *restrict y, size_t ys, int64_t n, float *restrict out);
/* Their rows forms on the AVX-512 set: the byte-permute ones, else the gather dot row by row. */
void  sl_avx512_dotr_iq2_xs_q8_k(SL_DOTR_ARGS);
void  sl_avx512_dotr_iq3_xxs_q8_k(SL_DOTR_ARGS);
void  sl_avx512_dotr_iq3_s_q8_k(SL_DOTR_ARGS);
void  sl_avx512_dotr_iq2_xxs_q8_k(SL_DOTR_ARGS);
void  sl_avx512_dotr_iq2_s_q8_k(SL_DOTR_ARGS);
float sl_avx512_dot_iq2_xxs_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_avx512_dot_iq2_s_q8_k(const void *restrict w, const void *restrict y, int64_t n);
/* IQ1 on the AVX-512 set (kernels/simd_avx512_iq1.c). */
float sl_avx512_dot_iq1_s_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_avx512_dot_iq1_m_q8_k(const void *restrict w, const void *restrict y, int64_t n);
/* Low-bit types on AVX2 (kernels/simd_avx2_quants.c), shared with the AVX-512 set where its own
 * version is not faster. */
void  sl_avx2_quantize_q8_1(const float *restrict x, void *restrict y, int64_t n);
float sl_avx2_dot_q5_0_q8_0(const void *restrict w, const void *restrict y, int64_t n);
float sl_avx2_dot_iq4_nl_q8_0(const void *restrict w, const void *restrict y, int64_t n);
float sl_avx2_dot_q4_1_q8_1(const void *restrict w, const void *restrict y, int64_t n);
float sl_avx2_dot_q5_1_q8_1(const void *restrict w, const void *restrict y, int64_t n);
float sl_avx2_dot_q2_k_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_avx2_dot_q3_k_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_avx2_dot_iq4_xs_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_avx2_dot_mxfp4_q8_0(const void *restrict w, const void *restrict y, int64_t n);
void sl_avx2_dot4_mxfp4_q8_0(const void *restrict w, const void *restrict y, size_t ys, int64_t n, float *restrict out);
void sl_avx2_dotr_mxfp4_q8_0(const void *restrict w, size_t row_bytes, const void *restrict y, int64_t n, int64_t nrows,
                             float *restrict out);
/* AVX-512 versions (kernels/simd_avx512_quants.c). */
float sl_avx512_dot_q5_0_q8_0(const void *restrict w, const void *restrict y, int64_t n);
float sl_avx512_dot_iq4_nl_q8_0(const void *restrict w, const void *restrict y, int64_t n);
float sl_avx512_dot_q2_k_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_avx512_dot_q3_k_q8_k(const void *restrict w, const void *restrict y, int64_t n);
float sl_avx512_dot_iq4_xs_q8_k(const void *restrict w, const void *restrict y, int64_t n);
void sl_avx512_dot4_q5_0_q8_0(const void *restrict w, const void *restrict y, size_t ys, int64_t n, float *restrict out);
void sl_avx512_dot4_iq4_nl_q8_0(const void *restrict w, const void *restrict y, size_t ys, int64_t n, float *restrict out);
void sl_avx512_dot4_q2_k_q8_k(const void *restrict w, const void *restrict y, size_t ys, int64_t n, float *restrict out);
void sl_avx512_dot4_q3_k_q8_k(const void *restrict w, const void *restrict y, size_t ys, int64_t n, float *restrict out);
void sl_avx512_dot4_iq4_xs_q8_k(const void *restrict w, const void *restrict y, size_t ys, int64_t n, float *restrict out);
/* Tests only: the AVX-512 low-bit dots above without GFNI even where the CPU has it (their GFNI
 * build is the one that runs there), so that both are tested natively. */
void sl_avx512_quants_force_plain(bool on);
bool sl_avx512_quants_has_gfni(void);
/* Their rows forms (kernels/simd_avx512_rows32.c): the activations prepared once per call. */
void sl_avx512_dotr_q5_0_q8_0(SL_DOTR_ARGS);
void sl_avx512_dotr_mxfp4_q8_0(SL_DOTR_ARGS);   /* kernels/simd_avx512_mxfp4.c */
void sl_avx512_dotr_iq4_nl_q8_0(SL_DOTR_ARGS);

#endif
