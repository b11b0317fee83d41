/* tests/fuzz/fuzz_gguf.c — libFuzzer target: the GGUF reader and everything that reads its result.
 *
 * Input: the first bytes of a GGUF file.  It is parsed twice: as a whole file, and as the head of a
 * file 4 KiB longer (the "buffer shorter than the file" path that sl_gguf_open retries through).
 * On success every accessor is exercised, including out-of-range indexes, and the validation
 * contract of loader/gguf.h is checked (tensor extents inside the file, aligned, sizes consistent):
 * a violation aborts, so the fuzzer finds wrong answers as well as memory errors.  If the metadata
 * describes a vocabulary it is loaded and used to tokenize part of the input; if it describes a llama
 * model, the input is put in a memfd and opened with sl_model_open (hyperparameter and tensor-table
 * validation, norm vectors read from the "file").
 *
 * Build and run: scripts/fuzz.sh.  tests/test_fuzz_regressions.c compiles this file with
 * SL_FUZZ_REPLAY defined and calls fuzz_gguf_one() on every saved input.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernels/types.h"
#include "loader/gguf.h"
#include "runtime/engine/model.h"
#include "runtime/text/tokenizer.h"

#define FZ_CHECK(cond) do { if (!(cond)) { fprintf(stderr, "fuzz_gguf: contract violated: %s (%s:%d)\n", #cond, __FILE__, __LINE__); abort(); } } while (0)

/* A key as a C string (keys may hold NULs: those simply cannot be looked up by name). */
static void key_cstr(sl_str k, char *buf, size_t n)
{
    size_t l = k.len < n - 1 ? (size_t)k.len : n - 1;
    memcpy(buf, k.ptr, l);
    buf[l] = 0;
}

static void exercise_vocab(const sl_gguf *g, const uint8_t *data, size_t size)
{
    sl_vocab *v = NULL;
    char err[SL_ERRLEN];
    if (sl_vocab_load(g, &v, err, sizeof err) != 0) {
        FZ_CHECK(err[0]);
        /* A message that echoes file bytes must stay one printable line.  SL_FUZZ_KNOWN_VOCAB_MSG=1
         * downgrades this one check to a note, to keep fuzzing while a known case awaits its fix
         * (the saved input still fails test_fuzz_regressions, which never sets it). */
        bool ctrl = false;
        for (const char *p = err; *p; p++) ctrl |= (unsigned char)*p < 0x20 || *p == 0x7f;
        if (ctrl && !getenv("SL_FUZZ_KNOWN_VOCAB_MSG")) FZ_CHECK(!"vocabulary error message holds a control character");
        return;
    }
    int32_t n_tok = sl_vocab_n_tokens(v);
    FZ_CHECK(n_tok > 0);
    size_t len = size < 256 ? size : 256;   /* the tokenizer has its own fuzzer: a taste is enough */
    int64_t n = sl_tokenize(v, (const char *)data, len, true, true, NULL, 0);
    if (n > 0) {
        int32_t *ids = malloc((size_t)n * sizeof *ids);
        FZ_CHECK(ids);
        FZ_CHECK(sl_tokenize(v, (const char *)data, len, true, true, ids, n) == n);
        for (int64_t i = 0; i < n; i++) FZ_CHECK(ids[i] >= 0 && ids[i] < n_tok);
        char piece[64];
        for (int64_t i = 0; i < n; i++) FZ_CHECK(sl_token_piece(v, ids[i], piece, sizeof piece) >= 0);
        /* size query with a non-NULL empty buffer: (NULL, 0) is covered by test_fuzz_regressions
         * (memcpy(NULL, p, 0) in sl_detokenize was this target's first find) */
        char none[1];
        int64_t dl = sl_detokenize(v, ids, n, none, 0);
        FZ_CHECK(dl >= 0);
        free(ids);
    }
    char piece[8];
    FZ_CHECK(sl_token_piece(v, -1, piece, sizeof piece) < 0);
    FZ_CHECK(sl_token_piece(v, n_tok, piece, sizeof piece) < 0);
    sl_vocab_free(v);
}

static void exercise(const sl_gguf *g, const uint8_t *data, size_t size)
{
    char key[300], buf[128];
    const uint64_t fsz = sl_gguf_file_size(g), data_off = sl_gguf_data_offset(g);
    const uint32_t align = sl_gguf_alignment(g);
    FZ_CHECK(align && !(align & (align - 1)));
    for (int64_t i = -1; i <= sl_gguf_n_kv(g); i++) {
        sl_str k = sl_gguf_key(g, i);
        int t = sl_gguf_kv_type(g, i);
        sl_gguf_kv_format(g, i, buf, sizeof buf);
        if (i < 0 || i == sl_gguf_n_kv(g)) { FZ_CHECK(k.len == 0 && t == -1 && !buf[0]); continue; }
        FZ_CHECK(k.len > 0 && t >= 0 && t < SL_GGUF_VTYPE_COUNT);
        key_cstr(k, key, sizeof key);
        uint32_t u32; uint64_t u64; int64_t i64; float f; bool b; sl_str s;
        (void)sl_gguf_get_u32(g, key, &u32);
        (void)sl_gguf_get_u64(g, key, &u64);
        (void)sl_gguf_get_i64(g, key, &i64);
        (void)sl_gguf_get_f32(g, key, &f);
        (void)sl_gguf_get_bool(g, key, &b);
        if (sl_gguf_get_str(g, key, &s)) FZ_CHECK(s.len <= fsz);
        int et;
        uint64_t n;
        if (sl_gguf_get_arr(g, key, &et, &n)) {
            int64_t kv = sl_gguf_arr_kv(g, key);
            FZ_CHECK(kv >= 0);
            uint64_t probe[] = { 0, 1, n / 2, n ? n - 1 : 0, n, n + 1, UINT64_MAX };
            for (size_t p = 0; p < sizeof probe / sizeof *probe; p++) {
                sl_str as = sl_gguf_arr_str(g, kv, probe[p]);
                if (probe[p] >= n) FZ_CHECK(as.len == 0);
                (void)sl_gguf_arr_f32(g, kv, probe[p], &f);
                bool got = sl_gguf_arr_i64(g, kv, probe[p], &i64);
                if (probe[p] >= n) FZ_CHECK(!got);
            }
            size_t es = 0;
            const void *raw = sl_gguf_arr_raw(g, kv, &es);
            if (raw && n) { volatile unsigned char last = ((const unsigned char *)raw)[n * es - 1]; (void)last; }
        }
    }
    /* tensors: the contract of sl_gguf_open */
    for (int64_t i = 0; i < sl_gguf_n_tensors(g); i++) {
        const sl_gguf_tensor *t = sl_gguf_tensor_at(g, i);
        FZ_CHECK(t && t->name.len > 0 && t->n_dims >= 1 && t->n_dims <= 4);
        const sl_type_info *ti = sl_type_get(t->type);
        FZ_CHECK(ti);
        uint64_t rows = 1;
        for (int d = 0; d < 4; d++) {
            FZ_CHECK(t->ne[d] >= 1);
            if (d >= t->n_dims) FZ_CHECK(t->ne[d] == 1);
            if (d) rows *= (uint64_t)t->ne[d];   /* cannot overflow: the parser bounded the product */
        }
        FZ_CHECK(t->ne[0] % ti->blck == 0);
        FZ_CHECK(t->nbytes == (uint64_t)(t->ne[0] / ti->blck) * (uint64_t)ti->bytes * rows);
        FZ_CHECK(t->offset >= data_off && t->offset <= fsz && t->nbytes <= fsz - t->offset);
        FZ_CHECK((t->offset - data_off) % align == 0);
        key_cstr(t->name, key, sizeof key);
        if (!memchr(t->name.ptr, 0, t->name.len)) FZ_CHECK(sl_gguf_find_tensor(g, key) == t);
    }
    FZ_CHECK(sl_gguf_tensor_at(g, -1) == NULL && sl_gguf_tensor_at(g, sl_gguf_n_tensors(g)) == NULL);
    exercise_vocab(g, data, size);
}

/* sl_model_open on the input as a file (a memfd: no disk I/O).  Only for llama metadata: other inputs
 * stop at the architecture check, which costs a file for nothing. */
static void exercise_model(const sl_gguf *g, const uint8_t *data, size_t size)
{
    sl_str arch;
    if (!sl_gguf_get_str(g, "general.architecture", &arch) || !sl_str_eq(arch, "llama")) return;
    int fd = memfd_create("fuzz_gguf", MFD_CLOEXEC);
    if (fd < 0) return;
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0) { close(fd); return; }
        done += (size_t)w;
    }
    char path[64], err[SL_ERRLEN];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    sl_model *m = NULL;
    int rc = sl_model_open(path, &m, err, sizeof err);
    if (rc == 0) {
        const sl_config *c = &m->cfg;
        FZ_CHECK(c->dim > 0 && c->n_layers > 0 && c->n_heads > 0 && c->n_kv_heads > 0 && c->vocab > 0);
        FZ_CHECK(c->n_heads % c->n_kv_heads == 0 && c->rope_dim <= c->head_dim);
        FZ_CHECK(m->tok_embd.nbytes <= size && m->output.nbytes <= size);
        sl_model_free(m);
    } else {
        FZ_CHECK(rc < 0 && !m && err[0] && !strchr(err, '\n'));
    }
    close(fd);
}

/* One input.  Always returns 0 (libFuzzer convention); problems abort. */
static int fuzz_gguf_one(const uint8_t *data, size_t size)
{
    char err[SL_ERRLEN];
    sl_gguf *g = NULL;
    int rc = sl_gguf_parse(data, size, size, &g, err, sizeof err);
    if (rc == 0) {
        exercise(g, data, size);
        exercise_model(g, data, size);
        sl_gguf_close(g);
    } else {
        FZ_CHECK(rc < 0 && !g && err[0] && !strchr(err, '\n'));
    }
    g = NULL;
    rc = sl_gguf_parse(data, size, (uint64_t)size + 4096, &g, err, sizeof err);
    if (rc == 0) {
        exercise(g, data, size);
        sl_gguf_close(g);
    } else {
        FZ_CHECK(rc < 0 && !g && err[0] && !strchr(err, '\n'));
    }
    return 0;
}

#ifndef SL_FUZZ_REPLAY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_gguf_one(data, size); }
#endif
