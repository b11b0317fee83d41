/* tests/test_kernels_avx512_emu.c — the AVX-512 kernel code, run on any CPU through SIMDe's
 * portable implementation of the AVX-512 intrinsics (Debian package libsimde-dev), against the
 * portable reference.
 *
 * test_kernels_simd.c runs the AVX-512 path natively when the CPU has it; this file checks the same
 * source (kernels/simd_avx512.c compiled with SL_SIMD_EMULATE) on every machine, so a machine
 * without AVX-512 does not ship the path untested; it prints which of the two ran.  Emulation
 * compiles without the AVX-512/FMA code generation of the real build, so it cannot see contraction
 * or code-generation differences: only the native run can.  Integer dots must return the portable bits; float dots stay within
 * 2*gamma_n*sum|w*x| of the exact sum.  Without the SIMDe headers the test reports a skip.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* x86 only: the emulated set shares the AVX2 path's functions, which other architectures lack. */
#if (defined(__x86_64__) || defined(__i386__)) && __has_include(<simde/x86/avx512.h>)
#define SL_SIMD_EMULATE 1
#define sl_kernels_avx512_set emu_avx512_set   /* the library has the native one */
#include "../kernels/simd_avx512.c"
#undef sl_kernels_avx512_set
#define HAVE_SIMDE 1
#endif

#include "kernels/f16.h"
#include "kernels/simd.h"
#include "kernels/types.h"
#include "test_kernels_util.h"

Test(avx512_emulated, integer_dots_bit_identical_float_dots_bounded)
{
#ifndef HAVE_SIMDE
    cr_skip_test("skipped: not x86, or SIMDe headers (libsimde-dev) not installed: AVX-512 code not emulated");
#else
    tk_rng r = { 201 };
    const sl_kernel_set *P = sl_kernels_for(SL_KPATH_PORTABLE), *E = &emu_avx512_set;
    const int types[5] = { SL_TYPE_Q4_0, SL_TYPE_Q8_0, SL_TYPE_Q4_K, SL_TYPE_Q5_K, SL_TYPE_Q6_K };
    const int h0[5] = { 0, 0, 0, 0, 208 }, h1[5] = { -1, -1, 2, 2, -1 };
    int checked = 0;
    for (int t = 0; t < 5; t++) {
        const sl_type_info *ti = sl_type_get(types[t]);
        for (int nb = 1; nb <= 9; nb++)       /* odd block counts: the one-block tail of Q4_0/Q8_0 */
            for (int rep = 0; rep < 6; rep++) {
                const int64_t n = (int64_t)nb * ti->blck;
                uint8_t *w = malloc((size_t)nb * ti->bytes), *y = malloc((size_t)n * 2 + 1024);
                float *x = malloc((size_t)n * sizeof *x);
                tk_bytes(&r, w, (size_t)nb * ti->bytes);
                for (int i = 0; i < nb; i++)
                    for (int k = 0; k < 2; k++) {
                        const int off = k ? h1[t] : h0[t];
                        if (off < 0) continue;
                        const uint16_t h = rep == 0 ? tk_half_in(&r, -14, 15) : tk_half_in(&r, -3, 3);
                        memcpy(w + (size_t)i * ti->bytes + off, &h, 2);
                    }
                for (int64_t i = 0; i < n; i++) x[i] = (float)(tk_gauss(&r) * (1 + i % 7));
                (ti->blck == 32 ? P->quantize_q8_0 : P->quantize_q8_k)(x, y, n);
                const float a = sl_kernels_qdot(P, types[t])(w, y, n), b = sl_kernels_qdot(E, types[t])(w, y, n);
                cr_assert_eq(tk_fbits(a), tk_fbits(b), "%s x %d blocks: portable %a, emulated avx512 %a", ti->name, nb, a, b);
                checked++;
                free(w); free(y); free(x);
            }
    }
    const int ftypes[3] = { SL_TYPE_F32, SL_TYPE_F16, SL_TYPE_BF16 };
    for (int k = 0; k < 3; k++)
        for (int n = 1; n < 300; n += 13) {
            const sl_type_info *ti = sl_type_get(ftypes[k]);
            float *src = malloc((size_t)n * 4), *x = malloc((size_t)n * 4), *wf = malloc((size_t)n * 4);
            void *w = malloc((size_t)n * 4);
            for (int i = 0; i < n; i++) src[i] = (float)tk_gauss(&r), x[i] = (float)tk_gauss(&r);
            ti->quantize(src, w, n);
            ti->dequant(w, wf, n);
            double exact = 0, mag = 0;
            for (int i = 0; i < n; i++) exact += (double)wf[i] * x[i], mag += fabs((double)wf[i] * x[i]);
            const sl_dot_fn f = k == 0 ? E->dot_f32 : k == 1 ? E->dot_f16 : E->dot_bf16;
            const double u = 0x1p-24 * n;
            cr_assert_leq(fabs(f(w, x, n) - exact), u / (1 - u) * mag + 1e-30, "%s n=%d", ti->name, n);
            checked++;
            free(src); free(x); free(wf); free(w);
        }
    fprintf(stderr, "avx512 (SIMDe-emulated): %d dots checked against portable; %s\n", checked,
            sl_kernels_available(SL_KPATH_AVX512) ? "this CPU also runs AVX-512 natively (test_kernels_simd checks it)"
                                                  : "this CPU lacks AVX-512: this is the only check of that code");
#endif
}
