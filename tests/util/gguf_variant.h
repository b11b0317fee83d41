/* tests/util/gguf_variant.h — a copy of a GGUF file with some keys replaced and tensors added.
 *
 * For variants of the shared models that the references cover but ../shared does not hold (e.g. a
 * long-context phi3 with rope_factors_long/short): every key of the source is copied verbatim except
 * those `set` replaces (same key name: its value is written instead), then the new keys of `set`;
 * every tensor is copied byte for byte, then the `add` tensors (F32 vectors) follow.  The output is
 * written through loader/gguf_write.c (atomic: <dst>.tmp, then renamed).
 */
#ifndef SL_TESTS_GGUF_VARIANT_H
#define SL_TESTS_GGUF_VARIANT_H

#include <stddef.h>
#include <stdint.h>

typedef struct gv_key {
    const char *key;
    int         type;      /* SL_GGUF_U32, SL_GGUF_F32 or SL_GGUF_STRING */
    uint32_t    u32;
    float       f32;
    const char *str;
} gv_key;

typedef struct gv_tensor {
    const char  *name;
    const float *data;     /* n F32 values: a 1-D tensor */
    int64_t      n;
} gv_tensor;

/* 0, or a negative errno with a message in err. */
int gv_write(const char *src, const char *dst, const gv_key *set, int n_set, const gv_tensor *add, int n_add,
             char *err, size_t errlen);

/* The long-context phi3 variant of micro-phi3 (the Phi-3.5 / Phi-3-128k layout): context 131072,
 * original_context_length 4096, rope.scaling.type "longrope", attn_factor sqrt(1 + ln 32 / ln 4096)
 * (what llama.cpp's converter writes for that ratio), sliding_window 262144 (Phi-3.5's), and
 * rope_factors_short[i] = 1 + 0.05 i, rope_factors_long[i] = 1 + 1.5 i for the 32 rotated pairs. */
#define GV_LONGROPE_PAIRS 32
int gv_phi3_longrope(const char *src, const char *dst, char *err, size_t errlen);

#endif
