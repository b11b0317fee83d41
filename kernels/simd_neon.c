/* kernels/simd_neon.c — the 64-bit ARM kernel paths: NEON (AArch64 baseline, Advanced SIMD) and
 * NEON + dotprod (sdot: 4 int8 products summed into an int32 lane, ARMv8.2 optional, v8.4 and
 * later always; Raspberry Pi 5 / Cortex-A76 has it, Pi 4 / Cortex-A72 does not).
 *
 * Same contract as the x86 paths (kernels/simd.h): the activation quantizers write the portable
 * bytes, the integer dots return the portable bits (kernels/simd_neon_qdot.h, compiled once per
 * path), the attention dots follow the one 32-lane FMA order and axpy is one FMA per element, so
 * attention is bit-identical to the portable path; F32/F16/BF16 weight rows use the attention
 * order too (any order would do: within the gamma_n bound).  Only the integer dots differ between
 * the two paths (sdot pays there; everything else is shared), with their 4-vector forms for batched
 * prefill.  The low-bit types (Q5_0, IQ4_NL, MXFP4, Q4_1, Q5_1, Q2_K, Q3_K, IQ4_XS) have single
 * dots, MXFP4 a 4-vector form too (kernels/simd_neon_quants.h); the codebook types (IQ1/IQ2/IQ3)
 * have none yet, so sl_matmul runs their portable dots.  dispatch.c selects a path from
 * getauxval(AT_HWCAP).  On other architectures the file defines empty sets only.
 */
#include "kernels/k_quants.h"
#include "kernels/simd.h"

#include <float.h>

#if defined(__aarch64__)
#include <arm_neon.h>

/* The canonical reduction of the 32-block dots' 2 x 8 lanes (acc[b][0] = lanes 0-3 of acc[b],
 * acc[b][1] = lanes 4-7): t = acc[0] + acc[1]; t[k] += t[k+4]; t[k] += t[k+2]; t[0] + t[1]. */
static inline float neon_lanes_reduce(float32x4_t acc[2][2])
{
    const float32x4_t u = vaddq_f32(vaddq_f32(acc[0][0], acc[1][0]), vaddq_f32(acc[0][1], acc[1][1]));
    const float v0 = vgetq_lane_f32(u, 0) + vgetq_lane_f32(u, 2), v1 = vgetq_lane_f32(u, 1) + vgetq_lane_f32(u, 3);
    return v0 + v1;
}

/* M = sum_j m[j] * (bsums[2j] + bsums[2j+1]), exact (pair sums <= 2*16*127 fit int16). */
static inline int32_t neon_k_mins(const int16_t *bsums, const uint8_t m[8])
{
    const int16x8_t pairs = vpaddq_s16(vld1q_s16(bsums), vld1q_s16(bsums + 8));
    const int16x8_t m16 = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(m)));
    return vaddvq_s32(vmlal_high_s16(vmull_s16(vget_low_s16(pairs), vget_low_s16(m16)), pairs, m16));
}

/* ---- activation quantizers (shared by both paths) --------------------------------------------- */

/* Largest |x| of 32 floats (exact); *bad set when one is NaN or infinite (!(|x| <= FLT_MAX)). */
static inline float neon_amax32(const float *v, int *bad)
{
    const float32x4_t big = vdupq_n_f32(FLT_MAX);
    float32x4_t m = vdupq_n_f32(0);
    uint32x4_t ok = vdupq_n_u32(~0u);
    for (int j = 0; j < 32; j += 4) {
        const float32x4_t a = vabsq_f32(vld1q_f32(v + j));
        ok = vandq_u32(ok, vcleq_f32(a, big));
        m = vmaxq_f32(m, a);
    }
    *bad |= vminvq_u32(ok) == 0;
    return vmaxvq_f32(m);
}

/* 32 floats * id rounded to nearest even (FCVTNS, as sl_round_int), as int8 in element order;
 * |v*id| <= 127 by construction. */
static inline void neon_round_pack32(const float *v, float id, int8_t *q)
{
    const float32x4_t vid = vdupq_n_f32(id);
    for (int j = 0; j < 32; j += 8) {
        const int32x4_t i0 = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(v + j), vid));
        const int32x4_t i1 = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(v + j + 4), vid));
        vst1_s8(q + j, vmovn_s16(vcombine_s16(vmovn_s32(i0), vmovn_s32(i1))));
    }
}

/* Contract: as sl_quantize_act_q8_0 (same bytes). */
static void neon_quantize_q8_0(const float *restrict x, void *restrict vy, int64_t n)
{
    sl_block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / SL_QK; i++) {
        const float *v = x + i * SL_QK;
        int bad = 0;
        const float amax = neon_amax32(v, &bad);
        if (bad) {
            sl_act_nonfinite_q8_0(&y[i]);
            continue;
        }
        const float id = amax != 0 ? 127.0f / amax : 0.0f;
        y[i].d = sl_f32_to_f16(amax / 127.0f);
        neon_round_pack32(v, id, y[i].qs);
    }
}

/* Contract: as sl_quantize_act_q8_k (same bytes). */
static void neon_quantize_q8_k(const float *restrict x, void *restrict vy, int64_t n)
{
    sl_block_q8_k *y = vy;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        const float *v = x + i * SL_QK_K;
        float amax = 0;
        int bad = 0;
        for (int j = 0; j < SL_QK_K; j += 32) {
            const float a = neon_amax32(v + j, &bad);
            amax = a > amax ? a : amax;
        }
        if (bad) {
            sl_act_nonfinite_q8_k(&y[i]);
            continue;
        }
        if (amax == 0) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = 127.0f / amax;
        for (int j = 0; j < SL_QK_K; j += 32) neon_round_pack32(v + j, iscale, y[i].qs + j);
        for (int k = 0; k < SL_QK_K / 16; k++) y[i].bsums[k] = vaddlvq_s8(vld1q_s8(y[i].qs + 16 * k));
        y[i].d = 1.0f / iscale;
    }
}

/* Contract: as sl_quantize_act_q8_1 (same bytes): the Q8_0 d and q, and s = f16(d * sum q) with
 * the f32 d. */
static void neon_quantize_q8_1(const float *restrict x, void *restrict vy, int64_t n)
{
    sl_block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / SL_QK; i++) {
        const float *v = x + i * SL_QK;
        int bad = 0;
        const float amax = neon_amax32(v, &bad);
        if (bad) {
            sl_act_nonfinite_q8_1(&y[i]);
            continue;
        }
        const float d = amax / 127.0f, id = amax != 0 ? 127.0f / amax : 0.0f;
        neon_round_pack32(v, id, y[i].qs);
        const int sum = vaddlvq_s8(vld1q_s8(y[i].qs)) + vaddlvq_s8(vld1q_s8(y[i].qs + 16));
        y[i].d = sl_f32_to_f16(d);
        y[i].s = sl_f32_to_f16(d * (float)sum);
    }
}

/* ---- integer dots: plain NEON, then dotprod ---------------------------------------------------- */

/* sdot's lanes without sdot: 8-bit products widened to int16 (|p| <= 128*127), pairs summed
 * (<= 32512, no overflow), then pairs of pairs widened to int32. */
static inline int32x4_t dot16_neon(int32x4_t acc, int8x16_t a, int8x16_t b)
{
    const int16x8_t p0 = vmull_s8(vget_low_s8(a), vget_low_s8(b)), p1 = vmull_high_s8(a, b);
    return vaddq_s32(acc, vpaddlq_s16(vpaddq_s16(p0, p1)));
}

#define NQ(name) name##_neon
#define NQ_DOT16 dot16_neon
#include "kernels/simd_neon_qdot.h"
#include "kernels/simd_neon_quants.h"
#undef NQ
#undef NQ_DOT16

#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod")
#define NQ(name) name##_dotprod
#define NQ_DOT16 vdotq_s32
#include "kernels/simd_neon_qdot.h"
#include "kernels/simd_neon_quants.h"
#undef NQ
#undef NQ_DOT16
#pragma GCC pop_options

/* ---- float dots: the attention order (simd.h, sl_kernel_set.adot_*) ----------------------------
 * 32 FMA lanes in eight float32x4 a[0..7] (lane k = a[k/4][k%4]), a last step of 8 into a[0..1],
 * the tree t[k] = (acc[k] + acc[8+k]) + (acc[16+k] + acc[24+k]), u[k] = t[k] + t[4+k],
 * (u0 + u2) + (u1 + u3), then the tail by fmaf: the operations of kernels/qdot.c's adot_lanes. */

static inline float32x4_t ld4_f32(const float *p) { return vld1q_f32(p); }
static inline float32x4_t ld4_f16(const uint16_t *p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
static inline float32x4_t ld4_bf16(const uint16_t *p) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)); }
static inline float f32_id(float v) { return v; }

#define NEON_FLOAT_DOT(NAME, T, LOAD, SCALAR)                                                          \
    static float NAME(const void *restrict vw, const float *restrict x, int64_t n)                     \
    {                                                                                                  \
        const T *w = vw;                                                                               \
        float32x4_t a[8];                                                                              \
        for (int k = 0; k < 8; k++) a[k] = vdupq_n_f32(0);                                             \
        int64_t i = 0;                                                                                 \
        for (; i + 32 <= n; i += 32)                                                                   \
            for (int k = 0; k < 8; k++) a[k] = vfmaq_f32(a[k], LOAD(w + i + 4 * k), vld1q_f32(x + i + 4 * k)); \
        for (; i + 8 <= n; i += 8) {                                                                   \
            a[0] = vfmaq_f32(a[0], LOAD(w + i), vld1q_f32(x + i));                                     \
            a[1] = vfmaq_f32(a[1], LOAD(w + i + 4), vld1q_f32(x + i + 4));                             \
        }                                                                                              \
        const float32x4_t t0 = vaddq_f32(vaddq_f32(a[0], a[2]), vaddq_f32(a[4], a[6]));                \
        const float32x4_t t1 = vaddq_f32(vaddq_f32(a[1], a[3]), vaddq_f32(a[5], a[7]));                \
        const float32x4_t u = vaddq_f32(t0, t1);                                                       \
        float s = (vgetq_lane_f32(u, 0) + vgetq_lane_f32(u, 2)) + (vgetq_lane_f32(u, 1) + vgetq_lane_f32(u, 3)); \
        for (; i < n; i++) s = fmaf(SCALAR(w[i]), x[i], s);                                            \
        return s;                                                                                      \
    }

NEON_FLOAT_DOT(neon_adot_f32, float, ld4_f32, f32_id)
NEON_FLOAT_DOT(neon_adot_f16, uint16_t, ld4_f16, sl_f16_to_f32)
NEON_FLOAT_DOT(neon_dot_bf16, uint16_t, ld4_bf16, sl_bf16_to_f32)

/* Contract: o[i] = fma(a, v[i], o[i]), i < n (the portable sl_axpy_f32's bits). */
static void neon_axpy_f32(float *restrict o, float a, const float *restrict v, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(o + i, vfmaq_n_f32(vld1q_f32(o + i), vld1q_f32(v + i), a));
    for (; i < n; i++) o[i] = fmaf(a, v[i], o[i]);
}

/* Contract: as neon_axpy_f32 with v given as halfs (converted exactly). */
static void neon_axpy_f16(float *restrict o, float a, const uint16_t *restrict v, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(o + i, vfmaq_n_f32(vld1q_f32(o + i), ld4_f16(v + i), a));
    for (; i < n; i++) o[i] = fmaf(a, sl_f16_to_f32(v[i]), o[i]);
}

/* Designated initializers: members added to sl_kernel_set later start NULL here (see simd.h). */
#define NEON_SET(NAME, SFX)                                                                            \
    {                                                                                                  \
        .name = NAME,                                                                                  \
        .quantize_q8_0 = neon_quantize_q8_0, .quantize_q8_k = neon_quantize_q8_k,                      \
        .dot_q4_0_q8_0 = dot_q4_0_q8_0_##SFX, .dot_q8_0_q8_0 = dot_q8_0_q8_0_##SFX,                    \
        .dot_q4_k_q8_k = dot_q4_k_q8_k_##SFX, .dot_q5_k_q8_k = dot_q5_k_q8_k_##SFX,                    \
        .dot_q6_k_q8_k = dot_q6_k_q8_k_##SFX,                                                          \
        .dot_f32 = neon_adot_f32, .dot_f16 = neon_adot_f16, .dot_bf16 = neon_dot_bf16,                 \
        .axpy_f32 = neon_axpy_f32, .axpy_f16 = neon_axpy_f16,                                          \
        .adot_f32 = neon_adot_f32, .adot_f16 = neon_adot_f16,                                          \
        .dot4_q4_0_q8_0 = dot4_q4_0_q8_0_##SFX, .dot4_q8_0_q8_0 = dot4_q8_0_q8_0_##SFX,                \
        .dot4_q4_k_q8_k = dot4_q4_k_q8_k_##SFX, .dot4_q5_k_q8_k = dot4_q5_k_q8_k_##SFX,                \
        .dot4_q6_k_q8_k = dot4_q6_k_q8_k_##SFX,                                                        \
        .quantize_q8_1 = neon_quantize_q8_1,                                                           \
        .dot_q5_0_q8_0 = dot_q5_0_q8_0_##SFX, .dot_iq4_nl_q8_0 = dot_iq4_nl_q8_0_##SFX,                \
        .dot_q4_1_q8_1 = dot_q4_1_q8_1_##SFX, .dot_q5_1_q8_1 = dot_q5_1_q8_1_##SFX,                    \
        .dot_q2_k_q8_k = dot_q2_k_q8_k_##SFX, .dot_q3_k_q8_k = dot_q3_k_q8_k_##SFX,                    \
        .dot_iq4_xs_q8_k = dot_iq4_xs_q8_k_##SFX, .dot_mxfp4_q8_0 = dot_mxfp4_q8_0_##SFX,              \
        .dot4_mxfp4_q8_0 = dot4_mxfp4_q8_0_##SFX,                                                      \
    }

const sl_kernel_set sl_kernels_neon_set = NEON_SET("neon", neon);
const sl_kernel_set sl_kernels_neon_dotprod_set = NEON_SET("neon_dotprod", dotprod);

#else   /* not aarch64: dispatch.c never hands these sets out */
const sl_kernel_set sl_kernels_neon_set = { .name = "neon" };
const sl_kernel_set sl_kernels_neon_dotprod_set = { .name = "neon_dotprod" };
#endif
