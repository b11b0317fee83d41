/* kernels/iq_common.h — private helpers of the codebook ("i-quant") kernel files: block layouts of
 * IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M exactly as ggml stores them in GGUF
 * (sizes static_assert-ed), and the codebooks (kernels/iq_grids.c).
 *
 * All seven types cut a 256-element super-block into 8 sub-blocks of 32 and a sub-block into
 * groups of 8 (IQ2_*, IQ1_*: one codebook point of 8 coordinates per group) or 4 (IQ3_*: two
 * points of 4 per group).  A point's coordinates are unsigned magnitudes from a small value set
 * (IQ1: -1, 0, +1 with a shared ±1/8 shift); each group carries 8 sign bits (IQ2/IQ3) whose
 * packing differs per type.  In the 7-bit sign fields (IQ2_XXS, IQ2_XS, IQ3_XXS) the eighth sign
 * is the parity of the seven stored ones (the quantizer keeps an even number of minus signs per
 * group, flipping the least important element if needed), see sl_iq_sign8.
 *
 * Every dequantized value is exact in f32 (at most 11 + 5 + 6 = 22 significant bits), so the
 * value of an element is independent of the order of its few multiplications; the kernels still
 * keep ggml's order.  Include k_common.h first (it turns off FMA contraction).
 */
#ifndef SL_KERNELS_IQ_COMMON_H
#define SL_KERNELS_IQ_COMMON_H

#include <assert.h>
#include <stdbool.h>
#include <stdint.h>

#include "kernels/k_common.h"

/* IQ2_XXS, 2.06 bits/weight: per sub-block 8 bytes = two little-endian u32: aux0 holds 4 point
 * indices (bytes, into the 256-point grid), aux1 holds 4 x 7 sign bits (group l at bits 7l..7l+6)
 * and a 4-bit scale s in bits 28..31: x = d * (0.5 + s) / 4 * (±grid). */
typedef struct { uint16_t d; uint16_t qs[SL_QK_K / 8]; } sl_block_iq2_xxs;
static_assert(sizeof(sl_block_iq2_xxs) == 66, "block_iq2_xxs is 66 bytes on disk");

/* IQ2_XS, 2.31 bits/weight: qs[4*ib + l] = 9-bit index into the 512-point grid | 7 sign bits << 9;
 * scales[ib] low nibble scales groups 0-1 of sub-block ib, high nibble groups 2-3:
 * x = d * (0.5 + s) / 4 * (±grid). */
typedef struct { uint16_t d; uint16_t qs[SL_QK_K / 8]; uint8_t scales[SL_QK_K / 32]; } sl_block_iq2_xs;
static_assert(sizeof(sl_block_iq2_xs) == 74, "block_iq2_xs is 74 bytes on disk");

/* IQ2_S, 2.56 bits/weight: 10-bit indices into the 1024-point grid: low 8 bits qs[4*ib + l], bits
 * 8-9 = bits 2l..2l+1 of qh[ib]; full 8-bit signs in qs[32 + 4*ib + l]; scales as IQ2_XS. */
typedef struct {
    uint16_t d;
    uint8_t  qs[SL_QK_K / 4];      /* 32 index bytes, then 32 sign bytes */
    uint8_t  qh[SL_QK_K / 32];
    uint8_t  scales[SL_QK_K / 32];
} sl_block_iq2_s;
static_assert(sizeof(sl_block_iq2_s) == 82, "block_iq2_s is 82 bytes on disk");

/* IQ3_XXS, 3.06 bits/weight: qs[0..63] = byte indices into the 256-point grid of 4-vectors (8 per
 * sub-block, two per group); then per sub-block a little-endian u32 with 4 x 7 sign bits and the
 * scale s in bits 28..31: x = d * (0.5 + s) / 2 * (±grid). */
typedef struct { uint16_t d; uint8_t qs[3 * SL_QK_K / 8]; } sl_block_iq3_xxs;
static_assert(sizeof(sl_block_iq3_xxs) == 98, "block_iq3_xxs is 98 bytes on disk");

/* IQ3_S, 3.44 bits/weight: 9-bit indices into the 512-point grid of 4-vectors: low 8 bits
 * qs[8*ib + k], bit 8 = bit k of qh[ib]; 8-bit signs signs[4*ib + l]; one 4-bit scale per pair of
 * sub-blocks (scales[ib/2], low nibble for even ib): x = d * (1 + 2s) * (±grid). */
typedef struct {
    uint16_t d;
    uint8_t  qs[SL_QK_K / 4];
    uint8_t  qh[SL_QK_K / 32];
    uint8_t  signs[SL_QK_K / 8];
    uint8_t  scales[SL_QK_K / 64];
} sl_block_iq3_s;
static_assert(sizeof(sl_block_iq3_s) == 110, "block_iq3_s is 110 bytes on disk");

/* IQ1_S, 1.56 bits/weight: 11-bit indices into the 2048-point grid of {-1, 0, 1}^8: low 8 bits
 * qs[4*ib + l], bits 8-10 = bits 3l..3l+2 of qh[ib]; qh[ib] bits 12-14 = s, bit 15 = sign of the
 * shift: x = d * (2s + 1) * (grid ± 1/8). */
typedef struct { uint16_t d; uint8_t qs[SL_QK_K / 8]; uint16_t qh[SL_QK_K / 32]; } sl_block_iq1_s;
static_assert(sizeof(sl_block_iq1_s) == 50, "block_iq1_s is 50 bytes on disk");

/* IQ1_M, 1.75 bits/weight: indices as IQ1_S, but bits 8-10 come from nibbles: group l of
 * sub-block ib takes qh[2*ib + l/2] bits 4(l%2)..4(l%2)+2 and its shift sign from bit 4(l%2)+3;
 * a 3-bit scale per 16 elements (scales read as 4 little-endian u16, sub-block ib's halves at
 * bits 6(ib%2) and 6(ib%2)+3 of word ib/2); the f16 super-block scale is the top nibbles of the
 * four words (word 0 -> bits 0-3 ... word 3 -> bits 12-15).  x = d * (2s + 1) * (grid ± 1/8). */
typedef struct { uint8_t qs[SL_QK_K / 8]; uint8_t qh[SL_QK_K / 16]; uint8_t scales[SL_QK_K / 32]; } sl_block_iq1_m;
static_assert(sizeof(sl_block_iq1_m) == 56, "block_iq1_m is 56 bytes on disk");

/* IQ1 shift of every coordinate (ggml's IQ1S_DELTA / IQ1M_DELTA). */
#define SL_IQ1_DELTA 0.125f

/* Grid sizes. */
#define SL_IQ2XXS_N 256
#define SL_IQ2XS_N  512
#define SL_IQ2S_N   1024
#define SL_IQ3XXS_N 256
#define SL_IQ3S_N   512
#define SL_IQ1S_N   2048

/* The expanded codebooks: one point per entry, coordinate j in byte j (little-endian), the
 * layout ggml's tables have, so a point loads as one 64- or 32-bit word.  IQ1 coordinates are
 * int8 (-1 as 0xff).  sign_pm1[b]: byte j = 0xff (-1) when bit j of b is set, else 0x01 (+1),
 * for applying 8 sign bits with a byte-wise sign or multiply. */
typedef struct sl_iq_grids {
    uint64_t iq2xxs[SL_IQ2XXS_N], iq2xs[SL_IQ2XS_N], iq2s[SL_IQ2S_N], iq1s[SL_IQ1S_N];
    uint32_t iq3xxs[SL_IQ3XXS_N], iq3s[SL_IQ3S_N];
    uint64_t sign_pm1[256];
} sl_iq_grids;

/* The codebooks, expanded from their compact form at first use (thread-safe; never NULL). */
const sl_iq_grids *sl_iq_grids_get(void);

/* Compact form (for tests): entry i of grid `which` as stored — coordinate j in bits
 * b*j..b*j+b-1 (b = 2 for 8-vectors, 3 for 4-vectors) as an index into the value set. */
enum sl_iq_grid_id { SL_IQG_IQ2XXS, SL_IQG_IQ2XS, SL_IQG_IQ2S, SL_IQG_IQ3XXS, SL_IQG_IQ3S, SL_IQG_IQ1S, SL_IQG_COUNT };
const uint16_t *sl_iq_grid_codes(int which, int *count);

/* The full 8 signs of a 7-bit field: bit 7 = parity of bits 0..6 (ggml's ksigns_iq2xs table). */
static inline uint8_t sl_iq_sign8(unsigned s7)
{
    s7 &= 127;
    return (uint8_t)(s7 | ((unsigned)__builtin_parity(s7) << 7));
}

/* Four 7-bit sign fields, one in the low bits of each byte of b (bit 7 clear), completed with
 * their parity bits: the same bytes as sl_iq_sign8 of each, in a few word operations (bit 0 of
 * byte k after the xor-folds is the parity of byte k alone: the shifts stay within 8 bits). */
static inline uint32_t sl_iq_sign8x4(uint32_t b)
{
    uint32_t p = b ^ (b >> 4);
    p ^= p >> 2;
    p ^= p >> 1;
    return b | (p & 0x01010101u) << 7;
}

/* The four 7-bit fields at bits 0, 7, 14, 21 of a word, one per byte (IQ2_XXS, IQ3_XXS). */
static inline uint32_t sl_iq_fields7x4(uint32_t a)
{
    return (a & 0x7fu) | ((a << 1) & 0x7f00u) | ((a << 2) & 0x7f0000u) | ((a << 3) & 0x7f000000u);
}

/* Byte j of an expanded point. */
static inline int sl_iq_coord64(uint64_t p, int j) { return (int)(uint8_t)(p >> (8 * j)); }
static inline int sl_iq_coord32(uint32_t p, int j) { return (int)(uint8_t)(p >> (8 * j)); }

/* IQ1_M's f16 super-block scale from the top nibbles of the four scale words. */
static inline uint16_t sl_iq1m_scale_bits(const uint8_t scales[8])
{
    uint16_t sc[4];
    memcpy(sc, scales, sizeof sc);
    return (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
}

#endif
