/* tests/test_kernels_util.h — small helpers shared by the kernel tests (header-only, static).
 *
 * A fixed-seed PRNG (splitmix64: every test run sees the same data, and a failure names a seed
 * that reproduces it), Gaussian samples, random finite halfs, and an exact half -> double decoder
 * written from the IEEE 754 definition (independent of kernels/f16.h).
 */
#ifndef SL_TEST_KERNELS_UTIL_H
#define SL_TEST_KERNELS_UTIL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct { uint64_t s; } tk_rng;

static inline uint64_t tk_next(tk_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double tk_unit(tk_rng *r) { return (double)(tk_next(r) >> 11) * 0x1p-53; }

/* Uniform in [lo, hi). */
static inline double tk_uniform(tk_rng *r, double lo, double hi) { return lo + (hi - lo) * tk_unit(r); }

/* Standard normal (Box-Muller; u1 in (0, 1] so log() is finite). */
static inline double tk_gauss(tk_rng *r)
{
    double u1 = 1.0 - tk_unit(r), u2 = tk_unit(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
}

static inline void tk_bytes(tk_rng *r, void *dst, size_t n)
{
    uint8_t *p = dst;
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(tk_next(r) >> 56);
}

/* A random half bit pattern that is finite (any sign, exponent 0..30, any mantissa). */
static inline uint16_t tk_finite_half(tk_rng *r)
{
    for (;;) {
        uint16_t h = (uint16_t)(tk_next(r) >> 48);
        if (((h >> 10) & 0x1f) != 0x1f) return h;
    }
}

/* A random half with exponent in [emin, emax] (unbiased, normal numbers), random sign and mantissa:
 * for dot tests, where values spanning 2^40 would make every sum one term. */
static inline uint16_t tk_half_in(tk_rng *r, int emin, int emax)
{
    uint64_t v = tk_next(r);
    int e = emin + (int)(v % (uint64_t)(emax - emin + 1));
    return (uint16_t)(((v >> 20) & 0x8000) | ((uint64_t)(e + 15) << 10) | ((v >> 32) & 0x3ff));
}

/* Exact value of a finite half from the IEEE definition: (-1)^s * 2^(e-15) * (1 + m/1024), or
 * 2^-14 * m/1024 for e = 0.  Returns NAN/INFINITY for e = 31 (callers check those separately). */
static inline double tk_half_value(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v;
    if (e == 0x1f) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp((double)m, -24);
    else v = ldexp(1024.0 + m, e - 25);
    return s ? -v : v;
}

static inline uint32_t tk_fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float tk_bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

#endif
