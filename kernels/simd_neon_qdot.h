/* kernels/simd_neon_qdot.h — the NEON integer dots, included twice by kernels/simd_neon.c: once as
 * plain NEON (AArch64 baseline) and once compiled for the dotprod extension.  Not a header of its
 * own: the includer defines
 *   NQ(name)   the name of a function of this inclusion (name##_neon, name##_dotprod)
 *   NQ_DOT16   int32x4_t f(int32x4_t acc, int8x16_t a, int8x16_t b): lane k of acc plus the exact
 *              sum of the products of bytes 4k..4k+3 (sdot's lanes)
 * Every function returns the portable reference's bits (kernels/qdot.c): the integer sums are
 * exact in any order, and the float steps are the canonical ones of kernels/simd.h, written with
 * separate multiplies and adds (k_common.h turns contraction off, so no FMLA is formed) except
 * where the canonical step is itself a fused multiply-add (q8_0 x q8_0), written explicitly
 * (fmaf / vfmaq_f32: one rounding, as the reference's fmaf).
 */

/* Exact int32 sum of 32 weight bytes times 32 activation bytes (in lanes: any order is exact). */
static inline int32x4_t NQ(dot32)(int32x4_t acc, int8x16_t w0, int8x16_t w1, const int8_t *a)
{
    return NQ_DOT16(NQ_DOT16(acc, w0, vld1q_s8(a)), w1, vld1q_s8(a + 16));
}

/* Lane j = the sum of the 4 lanes of l[j] (exact: integers), for 4 sums reduced at once instead of
 * four across-vector adds. */
static inline int32x4_t NQ(hsum4)(int32x4_t l0, int32x4_t l1, int32x4_t l2, int32x4_t l3)
{
    return vpaddq_s32(vpaddq_s32(l0, l1), vpaddq_s32(l2, l3));
}

/* Four blocks of the one-FMA-per-block chain (Q8_0, MXFP4: kernels/simd.h), in block order:
 * acc = fmaf(s[j], t[j], acc), j = 0..3. */
static inline float NQ(fma_chain4)(float acc, const float s[4], float32x4_t t)
{
    acc = fmaf(s[0], vgetq_lane_f32(t, 0), acc);
    acc = fmaf(s[1], vgetq_lane_f32(t, 1), acc);
    acc = fmaf(s[2], vgetq_lane_f32(t, 2), acc);
    return fmaf(s[3], vgetq_lane_f32(t, 3), acc);
}

/* ---- blocks of 32: 8 canonical lanes in two float32x4 (lanes 0-3 = bytes 0-15, 4-7 = 16-31) ---- */

/* Contract: as sl_qdot_q4_0_q8_0 (same bits). */
static float NQ(dot_q4_0_q8_0)(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q4_0 *w = vw;
    const sl_block_q8_0 *y = vy;
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    const int8x16_t eight = vdupq_n_s8(8);
    float32x4_t acc[2][2] = { { vdupq_n_f32(0), vdupq_n_f32(0) }, { vdupq_n_f32(0), vdupq_n_f32(0) } };
    for (int64_t i = 0; i < n / SL_QK; i++) {
        const uint8x16_t raw = vld1q_u8(w[i].qs);
        const int8x16_t q0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(raw, m4)), eight);   /* elements 0..15 */
        const int8x16_t q1 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(raw, 4)), eight);  /* 16..31 */
        const int32x4_t l0 = NQ_DOT16(vdupq_n_s32(0), q0, vld1q_s8(y[i].qs));
        const int32x4_t l1 = NQ_DOT16(vdupq_n_s32(0), q1, vld1q_s8(y[i].qs + 16));
        const float32x4_t s = vdupq_n_f32(sl_f16_to_f32(w[i].d) * sl_f16_to_f32(y[i].d));
        acc[i & 1][0] = vaddq_f32(acc[i & 1][0], vmulq_f32(s, vcvtq_f32_s32(l0)));
        acc[i & 1][1] = vaddq_f32(acc[i & 1][1], vmulq_f32(s, vcvtq_f32_s32(l1)));
    }
    return neon_lanes_reduce(acc);
}

/* ---- q8_0 x q8_0: one fused multiply-add per 32-block into one accumulator ------------------- */

/* Contract: as sl_qdot_q8_0_q8_0 (same bits): t_i = exact int32 sum of block i's 32 products,
 * acc = fmaf(s_i, (float)t_i, acc) in block order from +0 (|t_i| < 2^24, so (float)t_i is exact;
 * s_i, a product of two halfs, is exact too).  Four blocks' sums are found side by side and reduced
 * together; only the fused multiply-adds, a serial chain, run one block at a time. */
static float NQ(dot_q8_0_q8_0)(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q8_0 *w = vw;
    const sl_block_q8_0 *y = vy;
    const int64_t nb = n / SL_QK;
    const int32x4_t z = vdupq_n_s32(0);
    float acc = 0.0f;
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        int32x4_t l[4];
        float s[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            l[j] = NQ(dot32)(z, vld1q_s8(w[i + j].qs), vld1q_s8(w[i + j].qs + 16), y[i + j].qs);
            s[j] = sl_f16_to_f32(w[i + j].d) * sl_f16_to_f32(y[i + j].d);
        }
        const float32x4_t t = vcvtq_f32_s32(NQ(hsum4)(l[0], l[1], l[2], l[3]));
        acc = NQ(fma_chain4)(acc, s, t);
    }
    for (; i < nb; i++) {
        const int32_t t = vaddvq_s32(NQ(dot32)(z, vld1q_s8(w[i].qs), vld1q_s8(w[i].qs + 16), y[i].qs));
        acc = fmaf(sl_f16_to_f32(w[i].d) * sl_f16_to_f32(y[i].d), (float)t, acc);
    }
    return acc;
}

/* ---- K-quants: S and M exactly in int32, then acc + (d*S - dmin*M) ---------------------------- */

/* Contract: as sl_qdot_q4_k_q8_k (same bits). */
static float NQ(dot_q4_k_q8_k)(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q4_k *w = vw;
    const sl_block_q8_k *y = vy;
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        uint8_t sc[8], m[8];
        sl_k_scales8(w[i].scales, sc, m);
        int32x4_t s = vdupq_n_s32(0);
        for (int g = 0; g < 4; g++) {
            const uint8x16_t q0 = vld1q_u8(w[i].qs + 32 * g), q1 = vld1q_u8(w[i].qs + 32 * g + 16);
            const int8x16_t lo0 = vreinterpretq_s8_u8(vandq_u8(q0, m4)), lo1 = vreinterpretq_s8_u8(vandq_u8(q1, m4));
            const int8x16_t hi0 = vreinterpretq_s8_u8(vshrq_n_u8(q0, 4)), hi1 = vreinterpretq_s8_u8(vshrq_n_u8(q1, 4));
            s = vmlaq_n_s32(s, NQ(dot32)(vdupq_n_s32(0), lo0, lo1, y[i].qs + 64 * g), sc[2 * g]);
            s = vmlaq_n_s32(s, NQ(dot32)(vdupq_n_s32(0), hi0, hi1, y[i].qs + 64 * g + 32), sc[2 * g + 1]);
        }
        const int32_t S = vaddvq_s32(s), M = neon_k_mins(y[i].bsums, m);
        const float d = sl_f16_to_f32(w[i].d) * y[i].d, dmin = sl_f16_to_f32(w[i].dmin) * y[i].d;
        acc = acc + (d * (float)S - dmin * (float)M);
    }
    return acc;
}

/* Contract: as sl_qdot_q5_k_q8_k (same bits). */
static float NQ(dot_q5_k_q8_k)(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q5_k *w = vw;
    const sl_block_q8_k *y = vy;
    const uint8x16_t m4 = vdupq_n_u8(0x0f), one = vdupq_n_u8(1);
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        uint8_t sc[8], m[8];
        sl_k_scales8(w[i].scales, sc, m);
        /* bit 2g of qh[l] is the fifth bit of element 64g+l, bit 2g+1 that of 64g+32+l; h is
         * shifted right by 2 per group, so they are always bits 0 and 1 here */
        uint8x16_t h0 = vld1q_u8(w[i].qh), h1 = vld1q_u8(w[i].qh + 16);
        int32x4_t s = vdupq_n_s32(0);
        for (int g = 0; g < 4; g++) {
            const uint8x16_t q0 = vld1q_u8(w[i].qs + 32 * g), q1 = vld1q_u8(w[i].qs + 32 * g + 16);
            const int8x16_t lo0 = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q0, m4), vshlq_n_u8(vandq_u8(h0, one), 4)));
            const int8x16_t lo1 = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q1, m4), vshlq_n_u8(vandq_u8(h1, one), 4)));
            const int8x16_t hi0 = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(h0, 1), one), 4)));
            const int8x16_t hi1 = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q1, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(h1, 1), one), 4)));
            h0 = vshrq_n_u8(h0, 2);
            h1 = vshrq_n_u8(h1, 2);
            s = vmlaq_n_s32(s, NQ(dot32)(vdupq_n_s32(0), lo0, lo1, y[i].qs + 64 * g), sc[2 * g]);
            s = vmlaq_n_s32(s, NQ(dot32)(vdupq_n_s32(0), hi0, hi1, y[i].qs + 64 * g + 32), sc[2 * g + 1]);
        }
        const int32_t S = vaddvq_s32(s), M = neon_k_mins(y[i].bsums, m);
        const float d = sl_f16_to_f32(w[i].d) * y[i].d, dmin = sl_f16_to_f32(w[i].dmin) * y[i].d;
        acc = acc + (d * (float)S - dmin * (float)M);
    }
    return acc;
}

/* Contract: as sl_qdot_q6_k_q8_k (same bits).  The weights enter as 0..63 (fit int8); the -32
 * offset is applied through the bsums: S = sum_s sc_s * dot_s - 32 * sum_s sc_s * bsums_s. */
static float NQ(dot_q6_k_q8_k)(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q6_k *w = vw;
    const sl_block_q8_k *y = vy;
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m3 = vdupq_n_u8(0x03);
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        int32x4_t s = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w[i].ql + 64 * h, *qh = w[i].qh + 32 * h;
            const uint8x16_t l0a = vld1q_u8(ql), l0b = vld1q_u8(ql + 16), l1a = vld1q_u8(ql + 32), l1b = vld1q_u8(ql + 48);
            const uint8x16_t ha = vld1q_u8(qh), hb = vld1q_u8(qh + 16);
            /* q[k][0..1]: elements 32k..32k+15 and 32k+16..32k+31 of the half (sub-blocks 8h+2k, +1) */
            const uint8x16_t q[4][2] = {
                { vorrq_u8(vandq_u8(l0a, m4), vshlq_n_u8(vandq_u8(ha, m3), 4)),
                  vorrq_u8(vandq_u8(l0b, m4), vshlq_n_u8(vandq_u8(hb, m3), 4)) },
                { vorrq_u8(vandq_u8(l1a, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(ha, 2), m3), 4)),
                  vorrq_u8(vandq_u8(l1b, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m3), 4)) },
                { vorrq_u8(vshrq_n_u8(l0a, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(ha, 4), m3), 4)),
                  vorrq_u8(vshrq_n_u8(l0b, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m3), 4)) },
                { vorrq_u8(vshrq_n_u8(l1a, 4), vshlq_n_u8(vshrq_n_u8(ha, 6), 4)),
                  vorrq_u8(vshrq_n_u8(l1b, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4)) },
            };
            for (int k = 0; k < 4; k++) {
                const int8_t *a = y[i].qs + 128 * h + 32 * k;
                const int s0 = 8 * h + 2 * k;
                s = vmlaq_n_s32(s, NQ_DOT16(vdupq_n_s32(0), vreinterpretq_s8_u8(q[k][0]), vld1q_s8(a)), w[i].scales[s0]);
                s = vmlaq_n_s32(s, NQ_DOT16(vdupq_n_s32(0), vreinterpretq_s8_u8(q[k][1]), vld1q_s8(a + 16)),
                                w[i].scales[s0 + 1]);
            }
        }
        const int16x8_t sc0 = vmovl_s8(vld1_s8(w[i].scales)), sc1 = vmovl_s8(vld1_s8(w[i].scales + 8));
        const int16x8_t b0 = vld1q_s16(y[i].bsums), b1 = vld1q_s16(y[i].bsums + 8);
        int32x4_t c = vmull_s16(vget_low_s16(sc0), vget_low_s16(b0));
        c = vmlal_high_s16(c, sc0, b0);
        c = vmlal_s16(c, vget_low_s16(sc1), vget_low_s16(b1));
        c = vmlal_high_s16(c, sc1, b1);
        const int32_t S = vaddvq_s32(s) - 32 * vaddvq_s32(c);
        const float d = sl_f16_to_f32(w[i].d) * y[i].d;
        acc = acc + d * (float)S;
    }
    return acc;
}

/* ---- 4-vector forms: one weight row against 4 activation vectors at vy + v*ys --------------------
 * The weight bytes are unpacked once per block and reused; per vector the integer sums are the
 * same exact values and the float steps the same operations as in the single dots above, so each
 * out[v] has the single dot's bits (tests/test_kernels_simd.c checks it). */

#define NQ_YV(T, v, i) ((const T *)((const unsigned char *)vy + (size_t)(v) * ys) + (i))

static inline void NQ(blocks32_x4)(int8x16_t q0, int8x16_t q1, float dw, const void *restrict vy, size_t ys,
                                   int64_t i, float32x4_t acc[4][2][2])
{
    for (int v = 0; v < 4; v++) {
        const sl_block_q8_0 *y = NQ_YV(sl_block_q8_0, v, i);
        const int32x4_t l0 = NQ_DOT16(vdupq_n_s32(0), q0, vld1q_s8(y->qs));
        const int32x4_t l1 = NQ_DOT16(vdupq_n_s32(0), q1, vld1q_s8(y->qs + 16));
        const float32x4_t s = vdupq_n_f32(dw * sl_f16_to_f32(y->d));
        acc[v][i & 1][0] = vaddq_f32(acc[v][i & 1][0], vmulq_f32(s, vcvtq_f32_s32(l0)));
        acc[v][i & 1][1] = vaddq_f32(acc[v][i & 1][1], vmulq_f32(s, vcvtq_f32_s32(l1)));
    }
}

/* Contract: out[v] = dot_q4_0_q8_0(w, vy + v*ys, n) bit for bit, v < 4. */
static void NQ(dot4_q4_0_q8_0)(const void *restrict vw, const void *restrict vy, size_t ys, int64_t n,
                               float *restrict out)
{
    const sl_block_q4_0 *w = vw;
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    const int8x16_t eight = vdupq_n_s8(8);
    float32x4_t acc[4][2][2];
    for (int v = 0; v < 4; v++) acc[v][0][0] = acc[v][0][1] = acc[v][1][0] = acc[v][1][1] = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / SL_QK; i++) {
        const uint8x16_t raw = vld1q_u8(w[i].qs);
        NQ(blocks32_x4)(vsubq_s8(vreinterpretq_s8_u8(vandq_u8(raw, m4)), eight),
                        vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(raw, 4)), eight), sl_f16_to_f32(w[i].d), vy, ys, i, acc);
    }
    for (int v = 0; v < 4; v++) out[v] = neon_lanes_reduce(acc[v]);
}

/* Contract: out[v] = dot_q8_0_q8_0(w, vy + v*ys, n) bit for bit, v < 4: lane v of the accumulator
 * is vector v's chain of fused multiply-adds, with s = dw * dy_v (the single dot's product, exact)
 * and t = vector v's exact block sum in lane v. */
static void NQ(dot4_q8_0_q8_0)(const void *restrict vw, const void *restrict vy, size_t ys, int64_t n,
                               float *restrict out)
{
    const sl_block_q8_0 *w = vw;
    const int32x4_t z = vdupq_n_s32(0);
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < n / SL_QK; i++) {
        const int8x16_t q0 = vld1q_s8(w[i].qs), q1 = vld1q_s8(w[i].qs + 16);
        int32x4_t l[4];
        float yd[4];
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) {
            const sl_block_q8_0 *y = NQ_YV(sl_block_q8_0, v, i);
            l[v] = NQ(dot32)(z, q0, q1, y->qs);
            yd[v] = sl_f16_to_f32(y->d);
        }
        const float32x4_t s = vmulq_f32(vdupq_n_f32(sl_f16_to_f32(w[i].d)), vld1q_f32(yd));
        acc = vfmaq_f32(acc, s, vcvtq_f32_s32(NQ(hsum4)(l[0], l[1], l[2], l[3])));
    }
    vst1q_f32(out, acc);
}

/* Q4_K / Q5_K: the 8 unpacked sub-blocks of a super-block (q[j][0..1] = its 32 weights) against the
 * 4 vectors, then the canonical float step per vector. */
static inline void NQ(k_x4)(const int8x16_t q[8][2], const uint8_t sc[8], const uint8_t m[8], float d16, float dmin16,
                            const void *restrict vy, size_t ys, int64_t i, float acc[4])
{
    for (int v = 0; v < 4; v++) {
        const sl_block_q8_k *y = NQ_YV(sl_block_q8_k, v, i);
        int32x4_t s = vdupq_n_s32(0);
        for (int j = 0; j < 8; j++) s = vmlaq_n_s32(s, NQ(dot32)(vdupq_n_s32(0), q[j][0], q[j][1], y->qs + 32 * j), sc[j]);
        const int32_t S = vaddvq_s32(s), M = neon_k_mins(y->bsums, m);
        const float d = d16 * y->d, dmin = dmin16 * y->d;
        acc[v] = acc[v] + (d * (float)S - dmin * (float)M);
    }
}

/* Contract: out[v] = dot_q4_k_q8_k(w, vy + v*ys, n) bit for bit, v < 4. */
static void NQ(dot4_q4_k_q8_k)(const void *restrict vw, const void *restrict vy, size_t ys, int64_t n,
                               float *restrict out)
{
    const sl_block_q4_k *w = vw;
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    float acc[4] = { 0, 0, 0, 0 };
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        uint8_t sc[8], m[8];
        sl_k_scales8(w[i].scales, sc, m);
        int8x16_t q[8][2];
        for (int g = 0; g < 4; g++)
            for (int h = 0; h < 2; h++) {
                const uint8x16_t b = vld1q_u8(w[i].qs + 32 * g + 16 * h);
                q[2 * g][h] = vreinterpretq_s8_u8(vandq_u8(b, m4));
                q[2 * g + 1][h] = vreinterpretq_s8_u8(vshrq_n_u8(b, 4));
            }
        NQ(k_x4)(q, sc, m, sl_f16_to_f32(w[i].d), sl_f16_to_f32(w[i].dmin), vy, ys, i, acc);
    }
    memcpy(out, acc, sizeof acc);
}

/* Contract: out[v] = dot_q5_k_q8_k(w, vy + v*ys, n) bit for bit, v < 4. */
static void NQ(dot4_q5_k_q8_k)(const void *restrict vw, const void *restrict vy, size_t ys, int64_t n,
                               float *restrict out)
{
    const sl_block_q5_k *w = vw;
    const uint8x16_t m4 = vdupq_n_u8(0x0f), one = vdupq_n_u8(1);
    float acc[4] = { 0, 0, 0, 0 };
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        uint8_t sc[8], m[8];
        sl_k_scales8(w[i].scales, sc, m);
        int8x16_t q[8][2];
        for (int h = 0; h < 2; h++) {
            uint8x16_t hb = vld1q_u8(w[i].qh + 16 * h);   /* bits 2g, 2g+1: fifth bits of group g */
            for (int g = 0; g < 4; g++) {
                const uint8x16_t b = vld1q_u8(w[i].qs + 32 * g + 16 * h);
                q[2 * g][h] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(b, m4), vshlq_n_u8(vandq_u8(hb, one), 4)));
                q[2 * g + 1][h] = vreinterpretq_s8_u8(
                    vorrq_u8(vshrq_n_u8(b, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 1), one), 4)));
                hb = vshrq_n_u8(hb, 2);
            }
        }
        NQ(k_x4)(q, sc, m, sl_f16_to_f32(w[i].d), sl_f16_to_f32(w[i].dmin), vy, ys, i, acc);
    }
    memcpy(out, acc, sizeof acc);
}

/* Contract: out[v] = dot_q6_k_q8_k(w, vy + v*ys, n) bit for bit, v < 4. */
static void NQ(dot4_q6_k_q8_k)(const void *restrict vw, const void *restrict vy, size_t ys, int64_t n,
                               float *restrict out)
{
    const sl_block_q6_k *w = vw;
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m3 = vdupq_n_u8(0x03);
    float acc[4] = { 0, 0, 0, 0 };
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        int8x16_t q[16];   /* q[s]: the 16 weights (0..63) of sub-block s */
        for (int h = 0; h < 2; h++)
            for (int p = 0; p < 2; p++) {   /* p: bytes 0-15 or 16-31 of the 32-byte rows */
                const uint8_t *ql = w[i].ql + 64 * h + 16 * p, *qh = w[i].qh + 32 * h + 16 * p;
                const uint8x16_t l0 = vld1q_u8(ql), l1 = vld1q_u8(ql + 32), hb = vld1q_u8(qh);
                q[8 * h + 0 + p] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(hb, m3), 4)));
                q[8 * h + 2 + p] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m3), 4)));
                q[8 * h + 4 + p] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m3), 4)));
                q[8 * h + 6 + p] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4)));
            }
        const int16x8_t sc0 = vmovl_s8(vld1_s8(w[i].scales)), sc1 = vmovl_s8(vld1_s8(w[i].scales + 8));
        const float d16 = sl_f16_to_f32(w[i].d);
        for (int v = 0; v < 4; v++) {
            const sl_block_q8_k *y = NQ_YV(sl_block_q8_k, v, i);
            int32x4_t s = vdupq_n_s32(0);
            for (int sb = 0; sb < 16; sb++) s = vmlaq_n_s32(s, NQ_DOT16(vdupq_n_s32(0), q[sb], vld1q_s8(y->qs + 16 * sb)), w[i].scales[sb]);
            const int16x8_t b0 = vld1q_s16(y->bsums), b1 = vld1q_s16(y->bsums + 8);
            int32x4_t c = vmull_s16(vget_low_s16(sc0), vget_low_s16(b0));
            c = vmlal_high_s16(c, sc0, b0);
            c = vmlal_s16(c, vget_low_s16(sc1), vget_low_s16(b1));
            c = vmlal_high_s16(c, sc1, b1);
            const int32_t S = vaddvq_s32(s) - 32 * vaddvq_s32(c);
            const float d = d16 * y->d;
            acc[v] = acc[v] + d * (float)S;
        }
    }
    memcpy(out, acc, sizeof acc);
}

#undef NQ_YV
