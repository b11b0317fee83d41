/* kernels/f16.h — IEEE half and bfloat16 conversions (portable, exact, round-to-nearest-even). */
#ifndef SL_KERNELS_F16_H
#define SL_KERNELS_F16_H

#include <stdint.h>
#include <string.h>

static inline float sl_bits_to_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t sl_f32_to_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* half -> float, exact for every input including subnormals, inf and NaN. */
static inline float sl_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return sl_bits_to_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0) return sl_bits_to_f32(sign);
        /* subnormal: value = man * 2^-24 */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return sl_bits_to_f32(sign | ((exp + 112) << 23) | (man << 13));
}

/* float -> half, round to nearest even; overflow to inf, NaN stays NaN. */
static inline uint16_t sl_f32_to_f16(float f)
{
    uint32_t u = sl_f32_to_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) return sign | 0x7c00 | (a > 0x7f800000u ? 0x200 : 0);
    if (a >= 0x477ff000u) return sign | 0x7c00;              /* rounds to >= 65520: inf */
    if (a < 0x38800000u) {                                     /* below 2^-14: subnormal or zero */
        float v = sl_bits_to_f32(a) * 0x1p24f;                 /* exact scale, then round to int */
        uint32_t m = (uint32_t)v; float frac = v - (float)m;
        if (frac > 0.5f || (frac == 0.5f && (m & 1))) m++;
        return sign | (uint16_t)m;
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1);               /* round to nearest even on bit 13 */
    return sign | (uint16_t)((r - 0x38000000u) >> 13);
}

static inline float sl_bf16_to_f32(uint16_t h) { return sl_bits_to_f32((uint32_t)h << 16); }

static inline uint16_t sl_f32_to_bf16(float f)
{
    uint32_t u = sl_f32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);  /* quiet NaN */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

#endif
