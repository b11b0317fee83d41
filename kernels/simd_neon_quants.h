/* kernels/simd_neon_quants.h — the NEON integer dots of the low-bit types (Q5_0, IQ4_NL, MXFP4,
 * Q4_1, Q5_1 with 32-blocks; Q2_K, Q3_K, IQ4_XS with Q8_K), included by kernels/simd_neon.c right after
 * kernels/simd_neon_qdot.h, once per path, with the same NQ / NQ_DOT16 (see that file).
 *
 * Each returns the bits of its portable reference in kernels/qdot_quants.c: the integer sums are
 * exact (the bounds are there), and the float steps are the canonical ones of kernels/simd.h, in
 * the same order, as separate multiplies and adds, except MXFP4's, whose canonical step is a fused
 * multiply-add per block (written explicitly, as in kernels/simd_neon_qdot.h's Q8_0).  MXFP4 also
 * has a 4-vector form for batched prefill.
 */

/* ---- blocks of 32: the q4_0 steps on the 2 x 8 canonical lanes ---------------------------------- */

/* Lanes of one block: q0 = elements 0..15, q1 = 16..31 against a[0..32), times s, into acc[i & 1]. */
static inline void NQ(lanes32_add)(float32x4_t acc[2], int8x16_t q0, int8x16_t q1, const int8_t *a, float s)
{
    const int32x4_t l0 = NQ_DOT16(vdupq_n_s32(0), q0, vld1q_s8(a));
    const int32x4_t l1 = NQ_DOT16(vdupq_n_s32(0), q1, vld1q_s8(a + 16));
    const float32x4_t vs = vdupq_n_f32(s);
    acc[0] = vaddq_f32(acc[0], vmulq_f32(vs, vcvtq_f32_s32(l0)));
    acc[1] = vaddq_f32(acc[1], vmulq_f32(vs, vcvtq_f32_s32(l1)));
}

/* The fifth bits of a Q5_0/Q5_1 block as 0x10 bytes: *h0 for elements 0..15, *h1 for 16..31. */
static inline void NQ(q5_high)(const uint8_t qh4[4], uint8x16_t *h0, uint8x16_t *h1)
{
    static const uint8_t bit[16] = { 1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128 };
    const uint8x16_t sel = vld1q_u8(bit), b4 = vdupq_n_u8(0x10);
    const uint8x16_t r0 = vcombine_u8(vdup_n_u8(qh4[0]), vdup_n_u8(qh4[1]));
    const uint8x16_t r1 = vcombine_u8(vdup_n_u8(qh4[2]), vdup_n_u8(qh4[3]));
    *h0 = vandq_u8(vtstq_u8(r0, sel), b4);
    *h1 = vandq_u8(vtstq_u8(r1, sel), b4);
}

/* Contract: as sl_qdot_q5_0_q8_0 (same bits). */
static float NQ(dot_q5_0_q8_0)(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q5_0 *w = vw;
    const sl_block_q8_0 *y = vy;
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    const int8x16_t sixteen = vdupq_n_s8(16);
    float32x4_t acc[2][2] = { { vdupq_n_f32(0), vdupq_n_f32(0) }, { vdupq_n_f32(0), vdupq_n_f32(0) } };
    for (int64_t i = 0; i < n / SL_QK; i++) {
        uint8x16_t h0, h1;
        NQ(q5_high)(w[i].qh, &h0, &h1);
        const uint8x16_t raw = vld1q_u8(w[i].qs);
        const int8x16_t q0 = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vandq_u8(raw, m4), h0)), sixteen);
        const int8x16_t q1 = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(raw, 4), h1)), sixteen);
        NQ(lanes32_add)(acc[i & 1], q0, q1, y[i].qs, sl_f16_to_f32(w[i].d) * sl_f16_to_f32(y[i].d));
    }
    return neon_lanes_reduce(acc);
}

/* Contract: as sl_qdot_iq4_nl_q8_0 (same bits); the grid by table lookup (|q| <= 127). */
static float NQ(dot_iq4_nl_q8_0)(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_iq4_nl *w = vw;
    const sl_block_q8_0 *y = vy;
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    const int8x16_t grid = vld1q_s8(sl_kvalues_iq4nl);
    float32x4_t acc[2][2] = { { vdupq_n_f32(0), vdupq_n_f32(0) }, { vdupq_n_f32(0), vdupq_n_f32(0) } };
    for (int64_t i = 0; i < n / SL_QK; i++) {
        const uint8x16_t raw = vld1q_u8(w[i].qs);
        NQ(lanes32_add)(acc[i & 1], vqtbl1q_s8(grid, vandq_u8(raw, m4)), vqtbl1q_s8(grid, vshrq_n_u8(raw, 4)), y[i].qs,
                        sl_f16_to_f32(w[i].d) * sl_f16_to_f32(y[i].d));
    }
    return neon_lanes_reduce(acc);
}

/* Contract: as sl_qdot_q4_1_q8_1 (same bits): the lanes with q in 0..15, plus the f32 min term
 * mn = mn + f16(w.m) * f16(y.s) per block, added after the lane reduction. */
static float NQ(dot_q4_1_q8_1)(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q4_1 *w = vw;
    const sl_block_q8_1 *y = vy;
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    float32x4_t acc[2][2] = { { vdupq_n_f32(0), vdupq_n_f32(0) }, { vdupq_n_f32(0), vdupq_n_f32(0) } };
    float mn = 0;
    for (int64_t i = 0; i < n / SL_QK; i++) {
        const uint8x16_t raw = vld1q_u8(w[i].qs);
        NQ(lanes32_add)(acc[i & 1], vreinterpretq_s8_u8(vandq_u8(raw, m4)), vreinterpretq_s8_u8(vshrq_n_u8(raw, 4)), y[i].qs,
                        sl_f16_to_f32(w[i].d) * sl_f16_to_f32(y[i].d));
        mn = mn + sl_f16_to_f32(w[i].m) * sl_f16_to_f32(y[i].s);
    }
    return neon_lanes_reduce(acc) + mn;
}

/* Contract: as sl_qdot_q5_1_q8_1 (same bits). */
static float NQ(dot_q5_1_q8_1)(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q5_1 *w = vw;
    const sl_block_q8_1 *y = vy;
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    float32x4_t acc[2][2] = { { vdupq_n_f32(0), vdupq_n_f32(0) }, { vdupq_n_f32(0), vdupq_n_f32(0) } };
    float mn = 0;
    for (int64_t i = 0; i < n / SL_QK; i++) {
        uint8x16_t h0, h1;
        NQ(q5_high)(w[i].qh, &h0, &h1);
        const uint8x16_t raw = vld1q_u8(w[i].qs);
        NQ(lanes32_add)(acc[i & 1], vreinterpretq_s8_u8(vorrq_u8(vandq_u8(raw, m4), h0)),
                        vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(raw, 4), h1)), y[i].qs,
                        sl_f16_to_f32(w[i].d) * sl_f16_to_f32(y[i].d));
        mn = mn + sl_f16_to_f32(w[i].m) * sl_f16_to_f32(y[i].s);
    }
    return neon_lanes_reduce(acc) + mn;
}

/* ---- MXFP4: the q8_0 steps, one fused multiply-add per 32-block into one accumulator -------------
 * q = kvalues_mxfp4 by table lookup (|q| <= 12: |t_i| <= 32 * 12 * 127 < 2^24, so (float)t_i is
 * exact); s_i = e8m0_half(e) * f16(y.d) as the portable dot computes it (exact unless it leaves the
 * f32 range, then the same IEEE rounding: AArch64 NEON does not flush subnormals with FPCR.FZ
 * clear, as Linux leaves it).  The fused multiply-adds are written (fmaf / vfmaq_f32) because the
 * build does not contract. */

/* A block's 32 weights as int8: *q0 = elements 0..15 (low nibbles), *q1 = 16..31 (high nibbles). */
static inline void NQ(mxfp4_q)(const sl_block_mxfp4 *b, int8x16_t grid, int8x16_t *q0, int8x16_t *q1)
{
    const uint8x16_t raw = vld1q_u8(b->qs);
    *q0 = vqtbl1q_s8(grid, vandq_u8(raw, vdupq_n_u8(0x0f)));
    *q1 = vqtbl1q_s8(grid, vshrq_n_u8(raw, 4));
}

/* Contract: as sl_qdot_mxfp4_q8_0 (same bits): acc = fmaf(s_i, (float)t_i, acc) in block order
 * from +0.  As in dot_q8_0_q8_0, four blocks' sums are found side by side and reduced together;
 * only the fused multiply-adds, a serial chain, run one block at a time. */
static float NQ(dot_mxfp4_q8_0)(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_mxfp4 *w = vw;
    const sl_block_q8_0 *y = vy;
    const int64_t nb = n / SL_QK;
    const int8x16_t grid = vld1q_s8(sl_kvalues_mxfp4);
    const int32x4_t z = vdupq_n_s32(0);
    float acc = 0.0f;
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        int32x4_t l[4];
        float s[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            int8x16_t q0, q1;
            NQ(mxfp4_q)(&w[i + j], grid, &q0, &q1);
            l[j] = NQ(dot32)(z, q0, q1, y[i + j].qs);
            s[j] = sl_e8m0_half(w[i + j].e) * sl_f16_to_f32(y[i + j].d);
        }
        const float32x4_t t = vcvtq_f32_s32(NQ(hsum4)(l[0], l[1], l[2], l[3]));
        acc = NQ(fma_chain4)(acc, s, t);
    }
    for (; i < nb; i++) {
        int8x16_t q0, q1;
        NQ(mxfp4_q)(&w[i], grid, &q0, &q1);
        const int32_t t = vaddvq_s32(NQ(dot32)(z, q0, q1, y[i].qs));
        acc = fmaf(sl_e8m0_half(w[i].e) * sl_f16_to_f32(y[i].d), (float)t, acc);
    }
    return acc;
}

/* Contract: out[v] = dot_mxfp4_q8_0(w, vy + v*ys, n) bit for bit, v < 4: the weights are looked up
 * once per block; lane v of the accumulator is vector v's chain of fused multiply-adds, with
 * s = e8m0_half(e) * f16(y_v.d) (the single dot's product, the same IEEE multiply per lane) and
 * t = vector v's exact block sum in lane v. */
static void NQ(dot4_mxfp4_q8_0)(const void *restrict vw, const void *restrict vy, size_t ys, int64_t n,
                                float *restrict out)
{
    const sl_block_mxfp4 *w = vw;
    const int8x16_t grid = vld1q_s8(sl_kvalues_mxfp4);
    const int32x4_t z = vdupq_n_s32(0);
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < n / SL_QK; i++) {
        int8x16_t q0, q1;
        NQ(mxfp4_q)(&w[i], grid, &q0, &q1);
        int32x4_t l[4];
        float yd[4];
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) {
            const sl_block_q8_0 *y = (const sl_block_q8_0 *)((const unsigned char *)vy + (size_t)v * ys) + i;
            l[v] = NQ(dot32)(z, q0, q1, y->qs);
            yd[v] = sl_f16_to_f32(y->d);
        }
        const float32x4_t s = vmulq_f32(vdupq_n_f32(sl_e8m0_half(w[i].e)), vld1q_f32(yd));
        acc = vfmaq_f32(acc, s, vcvtq_f32_s32(NQ(hsum4)(l[0], l[1], l[2], l[3])));
    }
    vst1q_f32(out, acc);
}

/* ---- super-blocks of 256 with Q8_K ------------------------------------------------------------- */

/* sum_j c[j] * bsums[j] over the 16 sub-blocks, exactly (|c| <= 63, |bsums| <= 16*127). */
static inline int32_t NQ(bsums_dot)(int16x8_t c0, int16x8_t c1, const int16_t *bsums)
{
    const int16x8_t b0 = vld1q_s16(bsums), b1 = vld1q_s16(bsums + 8);
    int32x4_t c = vmull_s16(vget_low_s16(c0), vget_low_s16(b0));
    c = vmlal_high_s16(c, c0, b0);
    c = vmlal_s16(c, vget_low_s16(c1), vget_low_s16(b1));
    c = vmlal_high_s16(c, c1, b1);
    return vaddvq_s32(c);
}

/* Contract: as sl_qdot_q2_k_q8_k (same bits).  Sub-block 8h+2j+half takes bits 2j..2j+1 of
 * qs[32h + 16half ..], against activations 16 * (8h+2j+half) ..; the low nibble of its scale
 * byte multiplies the dot, the high nibble the bsum. */
static float NQ(dot_q2_k_q8_k)(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q2_k *w = vw;
    const sl_block_q8_k *y = vy;
    const uint8x16_t m3 = vdupq_n_u8(3);
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        int32x4_t s = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            uint8x16_t q0 = vld1q_u8(w[i].qs + 32 * h), q1 = vld1q_u8(w[i].qs + 32 * h + 16);
            for (int j = 0; j < 4; j++) {
                const int sb = 8 * h + 2 * j;
                const int8_t *a = y[i].qs + 16 * sb;
                s = vmlaq_n_s32(s, NQ_DOT16(vdupq_n_s32(0), vreinterpretq_s8_u8(vandq_u8(q0, m3)), vld1q_s8(a)),
                                w[i].scales[sb] & 0x0f);
                s = vmlaq_n_s32(s, NQ_DOT16(vdupq_n_s32(0), vreinterpretq_s8_u8(vandq_u8(q1, m3)), vld1q_s8(a + 16)),
                                w[i].scales[sb + 1] & 0x0f);
                q0 = vshrq_n_u8(q0, 2);
                q1 = vshrq_n_u8(q1, 2);
            }
        }
        const uint8x16_t mins = vshrq_n_u8(vld1q_u8(w[i].scales), 4);
        const int16x8_t m0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mins)));
        const int16x8_t m1 = vreinterpretq_s16_u16(vmovl_high_u8(mins));
        const int32_t S = vaddvq_s32(s), M = NQ(bsums_dot)(m0, m1, y[i].bsums);
        const float d = sl_f16_to_f32(w[i].d) * y[i].d, dmin = sl_f16_to_f32(w[i].dmin) * y[i].d;
        acc = acc + (d * (float)S - dmin * (float)M);
    }
    return acc;
}

/* Contract: as sl_qdot_q3_k_q8_k (same bits).  u = 2 low bits | hbit << 2 (0..7, the value + 4),
 * hbit of sub-block 8h+2j+half = bit 4h+j of hmask[16half ..]; S = sum (sc-32) * dot(u) -
 * 4 * sum (sc-32) * bsums, the reference's sum regrouped (exact in int32). */
static float NQ(dot_q3_k_q8_k)(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_q3_k *w = vw;
    const sl_block_q8_k *y = vy;
    const uint8x16_t m3 = vdupq_n_u8(3), one = vdupq_n_u8(1);
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        uint8_t sc[16];
        sl_q3_k_scales(w[i].scales, sc);
        uint8x16_t hm0 = vld1q_u8(w[i].hmask), hm1 = vld1q_u8(w[i].hmask + 16);   /* shifted 1 bit per j */
        int32x4_t s = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            uint8x16_t q0 = vld1q_u8(w[i].qs + 32 * h), q1 = vld1q_u8(w[i].qs + 32 * h + 16);
            for (int j = 0; j < 4; j++) {
                const int sb = 8 * h + 2 * j;
                const int8_t *a = y[i].qs + 16 * sb;
                const uint8x16_t u0 = vorrq_u8(vandq_u8(q0, m3), vshlq_n_u8(vandq_u8(hm0, one), 2));
                const uint8x16_t u1 = vorrq_u8(vandq_u8(q1, m3), vshlq_n_u8(vandq_u8(hm1, one), 2));
                s = vmlaq_n_s32(s, NQ_DOT16(vdupq_n_s32(0), vreinterpretq_s8_u8(u0), vld1q_s8(a)), (int32_t)sc[sb] - 32);
                s = vmlaq_n_s32(s, NQ_DOT16(vdupq_n_s32(0), vreinterpretq_s8_u8(u1), vld1q_s8(a + 16)), (int32_t)sc[sb + 1] - 32);
                q0 = vshrq_n_u8(q0, 2);
                q1 = vshrq_n_u8(q1, 2);
                hm0 = vshrq_n_u8(hm0, 1);
                hm1 = vshrq_n_u8(hm1, 1);
            }
        }
        const uint8x16_t scv = vld1q_u8(sc);
        const int16x8_t thirty_two = vdupq_n_s16(32);
        const int16x8_t c0 = vsubq_s16(vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(scv))), thirty_two);
        const int16x8_t c1 = vsubq_s16(vreinterpretq_s16_u16(vmovl_high_u8(scv)), thirty_two);
        const int32_t S = vaddvq_s32(s) - 4 * NQ(bsums_dot)(c0, c1, y[i].bsums);
        const float d = sl_f16_to_f32(w[i].d) * y[i].d;
        acc = acc + d * (float)S;
    }
    return acc;
}

/* Contract: as sl_qdot_iq4_xs_q8_k (same bits); the grid by table lookup.  Per sub-block of 32
 * the lanes hold at most 8 products of |127 * 127|, times |ls - 32| <= 32: exact in int32. */
static float NQ(dot_iq4_xs_q8_k)(const void *restrict vw, const void *restrict vy, int64_t n)
{
    const sl_block_iq4_xs *w = vw;
    const sl_block_q8_k *y = vy;
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    const int8x16_t grid = vld1q_s8(sl_kvalues_iq4nl);
    float acc = 0;
    for (int64_t i = 0; i < n / SL_QK_K; i++) {
        int32x4_t s = vdupq_n_s32(0);
        for (int ib = 0; ib < 8; ib++) {
            const uint8x16_t raw = vld1q_u8(w[i].qs + 16 * ib);
            const int8_t *a = y[i].qs + 32 * ib;
            int32x4_t t = NQ_DOT16(vdupq_n_s32(0), vqtbl1q_s8(grid, vandq_u8(raw, m4)), vld1q_s8(a));
            t = NQ_DOT16(t, vqtbl1q_s8(grid, vshrq_n_u8(raw, 4)), vld1q_s8(a + 16));
            s = vmlaq_n_s32(s, t, sl_iq4_xs_scale(&w[i], ib) - 32);
        }
        const float d = sl_f16_to_f32(w[i].d) * y[i].d;
        acc = acc + d * (float)vaddvq_s32(s);
    }
    return acc;
}
