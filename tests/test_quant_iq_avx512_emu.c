/* tests/test_quant_iq_avx512_emu.c — the AVX-512 codebook dots (kernels/simd_avx512_iq.c) run on any
 * CPU through SIMDe's portable AVX-512 intrinsics (libsimde-dev), against the portable reference.
 *
 * test_quant_iq.c runs the native AVX-512 code when the CPU has it; this twin checks the same source
 * compiled with SL_SIMD_EMULATE, so the path is not shipped untested on machines without AVX-512.
 * Without the SIMDe headers the test reports a skip.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if __has_include(<simde/x86/avx512.h>)
#define SL_SIMD_EMULATE 1
/* the library has the native functions under these names */
#define sl_avx512_dot_iq3_s_q8_k emu_dot_iq3_s_q8_k
#define sl_avx512_dot_iq3_xxs_q8_k emu_dot_iq3_xxs_q8_k
#define sl_avx512_dot_iq2_xs_q8_k emu_dot_iq2_xs_q8_k
#define sl_avx512_dot_iq2_xxs_q8_k emu_dot_iq2_xxs_q8_k
#define sl_avx512_dot_iq2_s_q8_k emu_dot_iq2_s_q8_k
#define sl_avx512_dot4_iq3_s_q8_k emu_dot4_iq3_s_q8_k
#define sl_avx512_dot4_iq3_xxs_q8_k emu_dot4_iq3_xxs_q8_k
#define sl_avx512_dot4_iq2_xs_q8_k emu_dot4_iq2_xs_q8_k
#define sl_avx512_dot4_iq2_xxs_q8_k emu_dot4_iq2_xxs_q8_k
#define sl_avx512_dot4_iq2_s_q8_k emu_dot4_iq2_s_q8_k
#define sl_avx512_dotr_iq3_s_q8_k emu_dotr_iq3_s_q8_k
#define sl_avx512_dotr_iq3_xxs_q8_k emu_dotr_iq3_xxs_q8_k
#define sl_avx512_dotr_iq2_xs_q8_k emu_dotr_iq2_xs_q8_k
#define sl_avx512_dotr_iq2_xxs_q8_k emu_dotr_iq2_xxs_q8_k
#define sl_avx512_dotr_iq2_s_q8_k emu_dotr_iq2_s_q8_k
#include "../kernels/simd_avx512_iq.c"
#define HAVE_SIMDE 1
#endif

#include "kernels/iq_common.h"
#include "kernels/simd.h"
#include "kernels/types.h"
#include "test_kernels_util.h"

Test(avx512_emulated, codebook_dots_bit_identical)
{
#ifndef HAVE_SIMDE
    cr_skip_test("SIMDe headers (libsimde-dev) not installed: AVX-512 code not emulated");
#else
    const struct { int type; sl_qdot_fn ref, emu; sl_qdot4_fn emu4; } k[5] = {
        { SL_TYPE_IQ3_S, sl_qdot_iq3_s_q8_k, emu_dot_iq3_s_q8_k, emu_dot4_iq3_s_q8_k },
        { SL_TYPE_IQ3_XXS, sl_qdot_iq3_xxs_q8_k, emu_dot_iq3_xxs_q8_k, emu_dot4_iq3_xxs_q8_k },
        { SL_TYPE_IQ2_XS, sl_qdot_iq2_xs_q8_k, emu_dot_iq2_xs_q8_k, emu_dot4_iq2_xs_q8_k },
        { SL_TYPE_IQ2_XXS, sl_qdot_iq2_xxs_q8_k, emu_dot_iq2_xxs_q8_k, emu_dot4_iq2_xxs_q8_k },
        { SL_TYPE_IQ2_S, sl_qdot_iq2_s_q8_k, emu_dot_iq2_s_q8_k, emu_dot4_iq2_s_q8_k },
    };
    tk_rng r = { 1605 };
    int checked = 0;
    for (int t = 0; t < 5; t++) {
        const sl_type_info *ti = sl_type_get(k[t].type);
        for (int nb = 1; nb <= 6; nb++)
            for (int rep = 0; rep < 6; rep++) {
                const int64_t n = nb * 256;
                uint8_t *w = malloc((size_t)nb * ti->bytes);
                sl_block_q8_k *y = malloc(sizeof *y * (size_t)nb);
                float *x = malloc(sizeof(float) * n);
                tk_bytes(&r, w, (size_t)nb * ti->bytes);
                for (int i = 0; i < nb; i++) {   /* f16 d at offset 0 of these layouts */
                    const uint16_t h = rep == 0 ? tk_half_in(&r, -14, 15) : tk_half_in(&r, -8, 0);
                    memcpy(w + (size_t)i * ti->bytes, &h, 2);
                }
                for (int64_t i = 0; i < n; i++) x[i] = (float)(tk_gauss(&r) * (1 + i % 5));
                sl_quantize_act_q8_k(x, y, n);
                const float a = k[t].ref(w, y, n), b = k[t].emu(w, y, n);
                cr_assert_eq(tk_fbits(a), tk_fbits(b), "%s x %d blocks: portable %a, emulated avx512 %a", ti->name, nb, a, b);
                /* the 4-vector form (the fallback's loop over the rows): rows ys apart with junk
                 * between them, row v = the same activations scaled by v + 1 */
                const size_t row = sizeof *y * (size_t)nb, ys = row + 4 + 8 * (size_t)(rep % 3);
                uint8_t *y4 = malloc(3 * ys + row);
                memset(y4, 0xa5, 3 * ys + row);
                for (int v = 0; v < 4; v++) {
                    for (int64_t i = 0; i < n; i++) x[i] *= (float)(v + 1) / (float)(v > 0 ? v : 1);
                    sl_quantize_act_q8_k(x, (sl_block_q8_k *)(y4 + v * ys), n);
                }
                float got[4];
                k[t].emu4(w, y4, ys, n, got);
                for (int v = 0; v < 4; v++) {
                    const float want = k[t].ref(w, y4 + v * ys, n);
                    cr_assert_eq(tk_fbits(got[v]), tk_fbits(want), "%s dot4 x %d blocks, row %d: portable %a, emulated avx512 %a",
                                 ti->name, nb, v, want, got[v]);
                }
                checked++;
                free(y4);
                free(w);
                free(y);
                free(x);
            }
    }
    fprintf(stderr, "avx512 codebook dots and 4-vector forms (SIMDe-emulated): %d checked against portable\n", checked);
#endif
}
