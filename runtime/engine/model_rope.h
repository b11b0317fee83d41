/* runtime/engine/model_rope.h — rope hyperparameters of a file (model.c's helpers, model_rope.c). */
#ifndef SL_RUNTIME_MODEL_ROPE_H
#define SL_RUNTIME_MODEL_ROPE_H

#include "runtime/engine/model.h"

/* Rope scaling as llama.cpp reads it: linear (rope_scale), longrope's attention factor and original
 * context (rope_mscale, rope_ctx_orig), YaRN where the architecture allows it (yarn_*, rope_mscale).
 * 0 or -errno with one line in err. */
int sl_model_read_rope_scaling(const sl_gguf *g, const sl_arch *arch, sl_config *c, char *err, size_t errlen);

/* YaRN's per-pair angle divisors for c (rope_dim / 2 of them, malloc'd), or NULL when out of memory. */
float *sl_model_yarn_divisors(const sl_config *c);

#endif
