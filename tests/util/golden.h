/* tests/util/golden.h — readers for ../shared/golden (llama.cpp's reference outputs). */
#ifndef SL_TESTS_GOLDEN_H
#define SL_TESTS_GOLDEN_H

#include <stddef.h>
#include <stdint.h>

typedef struct golden_step {
    int32_t token;           /* greedy token of this step */
    int32_t top_id[5];
    float   top_logit[5];
} golden_step;

typedef struct golden_run {
    int32_t prompt[256];
    int     n_prompt;
    golden_step steps[128];
    int     n_steps;
    int     n_vocab;
} golden_run;

/* Parse an `llref gen` .txt file.  0 on success, -1 (with a message on stderr) otherwise. */
int golden_read_txt(const char *path, golden_run *r);
/* Read a little-endian float32 file; returns the count, or -1.  *out is malloc'd. */
long golden_read_f32(const char *path, float **out);
/* Path helper: SL_SHARED_DIR "/" rel, in a static buffer (one at a time). */
const char *shared_path(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* True when the file exists. */
int file_exists(const char *path);

#endif
