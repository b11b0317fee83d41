/* tools/sluice-gen/lowbit.c — sluice-gen's Q2_K, Q3_K and IQ4_XS blocks (the Q3_K_M, Q2_K and
 * IQ4_XS file types), MXFP4 (the MXFP4_MOE file type's experts) and the 32-element fallbacks
 * llama-quantize picks for rows that do not split into 256-blocks (Q5_0, Q5_1, IQ4_NL: qwen1.5-moe's 1408-wide expert down rows), synthesized the way sluice-gen.c synthesizes the others: each element's quant
 * is a discretized Gaussian placed around the type's zero point, sub-block scales are uniform, and
 * the caller's f16 super-block scale d sets the std.  Layouts are ggml's (kernels/k_quants.h holds
 * the same structs; the byte offsets below are checked against kernels/types.c's block sizes by
 * sluice-gen's start-up check, the values by tests/test_gen.c's statistics through the kernels'
 * dequantizers).
 *
 *   Q2_K   x = d·sc·q − dmin·m, q ∈ 0..3: q = floor(2 + z) clipped (symmetric about 1.5), sc = m
 *          uniform in 8..15 and dmin = 1.5·d, so every sub-block of 16 is centred.
 *   Q3_K   x = d·(sc − 32)·q, q = rint(1.6 z) clipped to −3..3 (the format's −4 unused, so the
 *          mean is 0), sc − 32 uniform in 16..31.
 *   IQ4_XS x = d·(ls − 32)·kvalues[q], q the level nearest 40 z; the levels are not symmetric, so
 *          each sub-block's scale gets a random sign (|ls − 32| uniform in 16..31) and the mean is 0.
 *   Q5_0   x = d·(q − 16), q = 16 + rint(7.2 z) clipped to 1..31 (the format's 0 unused: mean 0).
 *   Q5_1   x = d·q + m, q = floor(16 + 7.2 z) clipped to 0..31 (symmetric about 15.5), m = −15.5 d.
 *   IQ4_NL x = d·kvalues[q] as IQ4_XS without sub-block scales; d gets the random sign.
 *   MXFP4  x = kvalues_mxfp4[q]·2^(e − 128) (the E2M1 levels doubled: 0 1 2 3 4 6 8 12 and their
 *          negatives), q the level nearest 5 z with z's sign (+0, never −0, as ggml's quantizer);
 *          5 puts a Gaussian block's largest |x| at levels 8-12, where the quantizer's exponent
 *          rule (the block max in [4, 8) E2M1 units) puts it.  The scale is a power of two: the
 *          block's e is log2 d rounded down or, with the probability that makes E[2^(2(e-128))] =
 *          d², up — so the std is σ on average over blocks, and exponents vary as real files' do.
 */
#include "tools/sluice-gen/gen.h"

#include <math.h>
#include <string.h>

#include "kernels/f16.h"
#include "kernels/types.h"

#define JIT_RMS 1.0066445   /* rms of U(0.8, 1.2), the block-scale jitter (as sluice-gen.c) */

/* IQ4_NL / IQ4_XS levels: a format constant (ggml's kvalues_iq4nl). */
static const int8_t iq4_levels[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };

static uint8_t q2k_tab[65536], q3k_tab[65536], iq4_tab[65536];   /* 16 random bits -> quant code */
static uint8_t q50_tab[65536], q51_tab[65536], mx_tab[65536];
static double q2k_rms, q3k_rms, iq4_rms, q50_rms, q51_rms, mx_rms;

/* The MXFP4 levels doubled (ggml's kvalues_mxfp4, a format constant), codes 0..7. */
static const int8_t mx_levels[8] = { 0, 1, 2, 3, 4, 6, 8, 12 };

/* The 4-bit MXFP4 code of the level nearest |v| (the first on a tie) with v's sign; 0 for zero. */
static uint8_t mxfp4_code(double v)
{
    int best = 0;
    for (int k = 1; k < 8; k++)
        if (fabs(fabs(v) - mx_levels[k]) < fabs(fabs(v) - mx_levels[best])) best = k;
    return (uint8_t)(best && v < 0 ? best | 8 : best);
}

static int nearest_iq4(double v)
{
    int best = 0;
    for (int k = 1; k < 16; k++)
        if (fabs(v - iq4_levels[k]) < fabs(v - iq4_levels[best])) best = k;
    return best;
}

/* Contract: see gen.h (tables from the inverse normal CDF table; rms of each code's value). */
void gen_lowbit_init(const float gauss_tab[65536])
{
    double s2 = 0, s3 = 0, s4 = 0, s50 = 0, s51 = 0;
    for (int i = 0; i < 65536; i++) {
        const double z = gauss_tab[i];
        int a = (int)floor(2 + z); a = a < 0 ? 0 : a > 3 ? 3 : a;
        int b = (int)lrint(1.6 * z); b = b < -3 ? -3 : b > 3 ? 3 : b;
        int c = nearest_iq4(40 * z);
        q2k_tab[i] = (uint8_t)a;
        q3k_tab[i] = (uint8_t)(b + 4);   /* the stored 3-bit code: value + 4 */
        iq4_tab[i] = (uint8_t)c;
        s2 += (a - 1.5) * (a - 1.5);
        s3 += (double)b * b;
        s4 += (double)iq4_levels[c] * iq4_levels[c];
        int e = (int)lrint(7.2 * z); e = e < -15 ? -15 : e > 15 ? 15 : e;
        int f = (int)floor(16 + 7.2 * z); f = f < 0 ? 0 : f > 31 ? 31 : f;
        q50_tab[i] = (uint8_t)(e + 16);
        q51_tab[i] = (uint8_t)f;
        s50 += (double)e * e;
        s51 += (f - 15.5) * (f - 15.5);
    }
    double smx = 0;
    for (int i = 0; i < 65536; i++) {
        mx_tab[i] = mxfp4_code(5.0 * gauss_tab[i]);
        const double v = mx_levels[mx_tab[i] & 7];
        smx += v * v;
    }
    mx_rms = sqrt(smx / 65536);
    q50_rms = sqrt(s50 / 65536);
    q51_rms = sqrt(s51 / 65536);
    q2k_rms = sqrt(s2 / 65536);
    q3k_rms = sqrt(s3 / 65536);
    iq4_rms = sqrt(s4 / 65536);
}

bool gen_lowbit_has(int type)
{
    return type == SL_TYPE_Q2_K || type == SL_TYPE_Q3_K || type == SL_TYPE_IQ4_XS || type == SL_TYPE_Q5_0 ||
           type == SL_TYPE_Q5_1 || type == SL_TYPE_IQ4_NL || type == SL_TYPE_MXFP4;
}

/* rms of the integers lo..hi (uniform). */
static double rms_range(int lo, int hi)
{
    double s = 0;
    for (int v = lo; v <= hi; v++) s += (double)v * v;
    return sqrt(s / (hi - lo + 1));
}

/* Contract: see gen.h. */
double gen_lowbit_denom(int type)
{
    switch (type) {
    case SL_TYPE_Q2_K: return JIT_RMS * rms_range(8, 15) * q2k_rms;
    case SL_TYPE_Q3_K: return JIT_RMS * rms_range(16, 31) * q3k_rms;
    case SL_TYPE_IQ4_XS: return JIT_RMS * rms_range(16, 31) * iq4_rms;
    case SL_TYPE_Q5_0: return JIT_RMS * q50_rms;
    case SL_TYPE_Q5_1: return JIT_RMS * q51_rms;
    case SL_TYPE_IQ4_NL: return JIT_RMS * iq4_rms;
    case SL_TYPE_MXFP4: return JIT_RMS * mx_rms;
    default: return 1;
    }
}

static inline void put_f16(uint8_t *p, float v) { uint16_t h = sl_f32_to_f16(v); memcpy(p, &h, 2); }

/* Q2_K: scales[16] (low nibble sc, high nibble m), qs[64] (four 2-bit quants a byte), f16 d, dmin.
 * Elements are i.i.d., so where each quant sits within the block does not matter. */
static void gen_q2_k(uint8_t *dst, float d, uint64_t *s)
{
    uint64_t r = next64(s);
    for (int j = 0; j < 16; j++, r >>= 3) {
        const uint8_t sc = (uint8_t)(8 + (r & 7));
        dst[j] = (uint8_t)(sc | sc << 4);
    }
    for (int i = 0; i < 64; i++) {   /* one quant per 16 random bits, four to a byte */
        r = next64(s);
        dst[16 + i] = (uint8_t)(q2k_tab[r & 0xffff] | q2k_tab[(r >> 16) & 0xffff] << 2 |
                                q2k_tab[(r >> 32) & 0xffff] << 4 | q2k_tab[r >> 48] << 6);
    }
    const uint16_t dh = sl_f32_to_f16(d);
    memcpy(dst + 80, &dh, 2);
    put_f16(dst + 82, 1.5f * sl_f16_to_f32(dh));
}

/* Q3_K: hmask[32], qs[64], scales[12], f16 d.  Element e = 128h + 32j + l: low 2 bits of its code
 * in bits 2j of qs[32h + l], the third bit in bit 4h + j of hmask[l]; scale j's low nibble in byte
 * j % 8 (nibble j / 8), its top 2 bits in byte 8 + j % 4 (bits 2(j / 4)). */
static void gen_q3_k(uint8_t *dst, float d, uint64_t *s)
{
    uint8_t *hm = dst, *qs = dst + 32, *sc = dst + 96;
    memset(dst, 0, 108);
    for (int e = 0; e < 256; e += 4) {
        uint64_t r = next64(s);
        for (int k = 0; k < 4; k++, r >>= 16) {
            const int x = e + k, h = x / 128, j = (x % 128) / 32, l = x % 32;
            const uint8_t code = q3k_tab[r & 0xffff];
            qs[32 * h + l] |= (uint8_t)((code & 3) << (2 * j));
            hm[l] |= (uint8_t)((code >> 2) << (4 * h + j));
        }
    }
    uint64_t r = next64(s);
    for (int j = 0; j < 16; j++, r >>= 4) {
        const unsigned u = 48 + (unsigned)(r & 15);   /* stored 6-bit scale; the format subtracts 32 */
        sc[j % 8] |= (uint8_t)((u & 15) << (4 * (j / 8)));
        sc[8 + j % 4] |= (uint8_t)((u >> 4) << (2 * (j / 4)));
    }
    put_f16(dst + 108, d);
}

/* IQ4_XS: f16 d, u16 scales_h, scales_l[4], qs[128].  Sub-block b's 6-bit scale ls: nibble b % 2
 * of scales_l[b / 2], top 2 bits at bits 2b of scales_h. */
static void gen_iq4_xs(uint8_t *dst, float d, uint64_t *s)
{
    uint16_t sh = 0;
    uint8_t sl[4] = { 0 };
    uint64_t r = next64(s);
    for (int b = 0; b < 8; b++, r >>= 5) {
        const int v = 16 + (int)(r & 15), ls = r & 16 ? 32 - v : 32 + v;
        sl[b / 2] |= (uint8_t)((ls & 15) << (4 * (b % 2)));
        sh |= (uint16_t)((ls >> 4) << (2 * b));
    }
    put_f16(dst, d);
    memcpy(dst + 2, &sh, 2);
    memcpy(dst + 4, sl, 4);
    for (int i = 0; i < 128; i += 2) {
        r = next64(s);
        dst[8 + i] = (uint8_t)(iq4_tab[r & 0xffff] | iq4_tab[(r >> 16) & 0xffff] << 4);
        dst[9 + i] = (uint8_t)(iq4_tab[(r >> 32) & 0xffff] | iq4_tab[r >> 48] << 4);
    }
}

/* The 5-bit codes of a Q5_0/Q5_1 block from tab: element j < 16 in the low nibble of qs[j], element
 * j + 16 in its high nibble, each fifth bit at bit j of the u32 qh (ggml's block_q5_0 layout). */
static void q5_codes(uint8_t *qh4, uint8_t *qs, const uint8_t *tab, uint64_t *s)
{
    uint32_t qh = 0;
    memset(qs, 0, 16);
    for (int j = 0; j < 32; j += 4) {
        uint64_t r = next64(s);
        for (int k = 0; k < 4; k++, r >>= 16) {
            const int e = j + k;
            const uint8_t q = tab[r & 0xffff];
            qs[e % 16] |= (uint8_t)((q & 15) << (4 * (e / 16)));
            qh |= (uint32_t)(q >> 4) << e;
        }
    }
    memcpy(qh4, &qh, 4);
}

/* IQ4_NL: f16 d, qs[16] (element j low nibble of qs[j], j + 16 high nibble).  The levels lean
 * negative; a random sign on d centres the tensor. */
static void gen_iq4_nl(uint8_t *dst, float d, uint64_t *s)
{
    uint64_t r = next64(s);
    put_f16(dst, r & 1 ? -d : d);
    for (int i = 0; i < 16; i += 2) {
        r = next64(s);
        dst[2 + i] = (uint8_t)(iq4_tab[r & 0xffff] | iq4_tab[(r >> 16) & 0xffff] << 4);
        dst[3 + i] = (uint8_t)(iq4_tab[(r >> 32) & 0xffff] | iq4_tab[r >> 48] << 4);
    }
}

/* MXFP4: u8 e, qs[16] (element j low nibble of qs[j], j + 16 high nibble).  e from d as the header
 * says: 2^k <= d < 2^(k+1), e = 128 + k, plus 1 with probability (d^2 / 4^k - 1) / 3. */
static void gen_mxfp4(uint8_t *dst, float d, uint64_t *s)
{
    int ex;
    const double m = frexp((double)d, &ex), p = ((2 * m) * (2 * m) - 1) / 3;   /* d = 2m 2^(ex-1) */
    uint64_t r = next64(s);
    int e = 128 + ex - 1 + ((double)(r >> 11) * 0x1p-53 < p);
    dst[0] = (uint8_t)(e < 2 ? 2 : e > 254 ? 254 : e);
    for (int i = 0; i < 16; i += 2) {
        r = next64(s);
        dst[1 + i] = (uint8_t)(mx_tab[r & 0xffff] | mx_tab[(r >> 16) & 0xffff] << 4);
        dst[2 + i] = (uint8_t)(mx_tab[(r >> 32) & 0xffff] | mx_tab[r >> 48] << 4);
    }
}

/* Contract: see gen.h. */
void gen_lowbit_block(int type, uint8_t *dst, float d, uint64_t *s)
{
    switch (type) {
    case SL_TYPE_Q2_K: gen_q2_k(dst, d, s); break;
    case SL_TYPE_Q3_K: gen_q3_k(dst, d, s); break;
    case SL_TYPE_IQ4_XS: gen_iq4_xs(dst, d, s); break;
    case SL_TYPE_Q5_0: put_f16(dst, d); q5_codes(dst + 2, dst + 6, q50_tab, s); break;
    case SL_TYPE_Q5_1: {
        const uint16_t dh = sl_f32_to_f16(d);
        memcpy(dst, &dh, 2);
        put_f16(dst + 2, -15.5f * sl_f16_to_f32(dh));
        q5_codes(dst + 4, dst + 8, q51_tab, s);
        break;
    }
    case SL_TYPE_IQ4_NL: gen_iq4_nl(dst, d, s); break;
    case SL_TYPE_MXFP4: gen_mxfp4(dst, d, s); break;
    default: break;
    }
}
