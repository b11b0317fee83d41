/* tests/test_gen.c — the GGUF writer (loader/gguf_write.c) and the model generator (sluice-gen).
 *
 * References:
 *   - the writer's output is read back with the project's GGUF reader (sl_gguf_open);
 *   - sluice-gen's tensor table (order, names, types, shapes, sizes, relative offsets) must equal
 *     the files llama-quantize made in ../shared/models (micro-llama F16/Q8_0/Q4_0/Q4_K_M/Q5_K_M/
 *     Q6_K/Q3_K_M/Q2_K/IQ4_XS, mini-llama3, micro-tied, spm32k-llama), run with the same
 *     hyperparameters;
 *   - weight statistics are measured through the kernels' dequantizers, not the generator's code;
 *   - named-shape sizes are compared with the public llama.cpp files in tests/test_gen_arch.c.
 * Each test works in its own mkdtemp() directory and removes it.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/types.h"
#include "loader/gguf.h"
#include "loader/gguf_write.h"
#include "runtime/engine/forward.h"
#include "runtime/engine/model.h"
#include "util/golden.h"

#define GEN SL_BINARY_DIR "/sluice-gen"
#define SPM SL_SHARED_DIR "/vocab/ggml-vocab-llama-spm.gguf"
#define BPE SL_SHARED_DIR "/vocab/ggml-vocab-llama-bpe.rebuilt.gguf"
#define STORIES SL_SHARED_DIR "/models/stories260K.gguf"

/* ---- helpers ------------------------------------------------------------------------------ */

static char tdir[64];

static void mk_tdir(void)
{
    strcpy(tdir, "/tmp/sl_test_gen_XXXXXX");
    cr_assert_not_null(mkdtemp(tdir));
}

static void rm_tdir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tdir);
    cr_assert_eq(system(cmd), 0);
}

/* <tdir>/name in a ring of 32 static buffers: a test may hold up to 32 such paths at once. */
static const char *tpath(const char *name)
{
    static char p[32][256];
    static int k;
    k = (k + 1) % 32;
    snprintf(p[k], sizeof p[k], "%s/%s", tdir, name);
    return p[k];
}

static bool exists(const char *p) { struct stat st; return stat(p, &st) == 0; }

/* Run sluice-gen with the NULL-terminated arguments `args`; stderr goes to <tdir>/stderr.txt
 * (returned in `err`, first 1 KiB), stdout to <tdir>/stdout.txt.  fsize_limit > 0 caps the child's
 * file size (RLIMIT_FSIZE) to fake a full disk.  Returns the exit status, -1 for death by signal. */
static int run_genv(char *err, long fsize_limit, char **args)
{
    char *argv[48] = { GEN };
    for (int n = 1; n < 47 && args[n - 1]; n++) argv[n] = args[n - 1];
    char ep[256], op[256];
    snprintf(ep, sizeof ep, "%s/stderr.txt", tdir);
    snprintf(op, sizeof op, "%s/stdout.txt", tdir);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int fd = open(ep, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fo = open(op, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 2);
        dup2(fo, 1);
        if (fsize_limit > 0) {
            struct rlimit rl = { (rlim_t)fsize_limit, (rlim_t)fsize_limit };
            setrlimit(RLIMIT_FSIZE, &rl);
            signal(SIGXFSZ, SIG_IGN);   /* exceeding the limit then fails with EFBIG */
        }
        execv(GEN, argv);
        _exit(127);
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    if (err) {
        err[0] = 0;
        FILE *f = fopen(ep, "r");
        if (f) { size_t k = fread(err, 1, 1023, f); err[k] = 0; fclose(f); }
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* run_genv with the arguments as a NULL-terminated list. */
static int run_gen(char *err, long fsize_limit, ...)
{
    char *args[48];
    int n = 0;
    va_list ap;
    va_start(ap, fsize_limit);
    while (n < 47 && (args[n] = va_arg(ap, char *)) != NULL) n++;
    va_end(ap);
    args[n] = NULL;
    return run_genv(err, fsize_limit, args);
}

static sl_gguf *open_gguf(const char *path)
{
    char err[SL_ERRLEN];
    sl_gguf *g = NULL;
    int rc = sl_gguf_open(path, &g, err, sizeof err);
    cr_assert_eq(rc, 0, "open %s: %s", path, err);
    return g;
}

static uint64_t get_u32(const sl_gguf *g, const char *key)
{
    int64_t i = sl_gguf_find_key(g, key);
    cr_assert_geq(i, 0, "missing key %s", key);
    cr_assert_eq(sl_gguf_kv_type(g, i), SL_GGUF_U32, "%s is not u32 (llama.cpp's loader insists)", key);
    uint32_t v = 0;
    sl_gguf_get_u32(g, key, &v);
    return v;
}

static void *read_bytes(const char *path, uint64_t off, uint64_t n)
{
    void *b = malloc(n ? n : 1);
    int fd = open(path, O_RDONLY);
    cr_assert_geq(fd, 0);
    cr_assert_eq(pread(fd, b, n, (off_t)off), (ssize_t)n);
    close(fd);
    return b;
}

static bool same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    cr_assert(fa && fb);
    bool same = true;
    static char ba[1 << 16], bb[1 << 16];
    for (;;) {
        size_t na = fread(ba, 1, sizeof ba, fa), nb = fread(bb, 1, sizeof bb, fb);
        if (na != nb || memcmp(ba, bb, na)) { same = false; break; }
        if (na == 0) break;
    }
    fclose(fa); fclose(fb);
    return same;
}

/* Equal values for key i of a and key j of b, compared through the reader (all types, arrays
 * element by element). */
static void assert_same_kv(const sl_gguf *a, int64_t i, const sl_gguf *b, int64_t j)
{
    sl_str k = sl_gguf_key(a, i);
    char key[256];
    snprintf(key, sizeof key, "%.*s", (int)k.len, k.ptr);
    cr_assert_eq(sl_gguf_kv_type(a, i), sl_gguf_kv_type(b, j), "%s: type differs", key);
    char fa[128], fb[128];
    sl_gguf_kv_format(a, i, fa, sizeof fa);
    sl_gguf_kv_format(b, j, fb, sizeof fb);
    cr_assert_str_eq(fa, fb, "%s", key);
    int ta, tb; uint64_t na, nb;
    if (!sl_gguf_get_arr(a, key, &ta, &na)) return;
    cr_assert(sl_gguf_get_arr(b, key, &tb, &nb));
    cr_assert_eq(ta, tb); cr_assert_eq(na, nb, "%s", key);
    if (ta == SL_GGUF_STRING) {
        for (uint64_t e = 0; e < na; e++) {
            sl_str x = sl_gguf_arr_str(a, i, e), y = sl_gguf_arr_str(b, j, e);
            cr_assert(x.len == y.len && !memcmp(x.ptr, y.ptr, x.len), "%s[%" PRIu64 "] differs", key, e);
        }
    } else {
        size_t ea, eb;
        const void *ra = sl_gguf_arr_raw(a, i, &ea), *rb = sl_gguf_arr_raw(b, j, &eb);
        cr_assert_eq(ea, eb);
        cr_assert(na == 0 || !memcmp(ra, rb, na * ea), "%s: array values differ", key);
    }
}

/* Every test gets a fresh temp directory, removed afterwards (also when an assertion fails). */
TestSuite(gguf_write, .init = mk_tdir, .fini = rm_tdir);
TestSuite(sluice_gen, .init = mk_tdir, .fini = rm_tdir);

/* ---- the writer --------------------------------------------------------------------------- */

Test(gguf_write, roundtrip_every_type)
{
    const char *path = tpath("w.gguf");
    char err[SL_ERRLEN];
    sl_gguf_writer *w;
    cr_assert_eq(sl_gguf_writer_open(&w, path, 64, 0, err, sizeof err), 0, "%s", err);
    sl_gguf_writer_kv_u8(w, "t.u8", 200);
    sl_gguf_writer_kv_i8(w, "t.i8", -100);
    sl_gguf_writer_kv_u16(w, "t.u16", 60000);
    sl_gguf_writer_kv_i16(w, "t.i16", -30000);
    sl_gguf_writer_kv_u32(w, "general.alignment", 64);
    sl_gguf_writer_kv_i32(w, "t.i32", -2000000000);
    sl_gguf_writer_kv_u64(w, "t.u64", 0xfedcba9876543210ull);
    sl_gguf_writer_kv_i64(w, "t.i64", -5000000000ll);
    sl_gguf_writer_kv_f32(w, "t.f32", 0.15625f);
    sl_gguf_writer_kv_f64(w, "t.f64", 0.5);
    sl_gguf_writer_kv_bool(w, "t.bool", true);
    sl_gguf_writer_kv_str(w, "t.str", "héllo");
    sl_gguf_writer_kv_strn(w, "t.empty", "", 0);
    const sl_str strs[3] = { { "a", 1 }, { "", 0 }, { "x\0y", 3 } };
    sl_gguf_writer_kv_arr_str(w, "t.astr", strs, 3);
    const int32_t ai[4] = { 1, -2, 3, -4 };
    sl_gguf_writer_kv_arr(w, "t.ai32", SL_GGUF_I32, ai, 4);
    const float af[2] = { 1.5f, -0.25f };
    sl_gguf_writer_kv_arr(w, "t.af32", SL_GGUF_F32, af, 2);
    const uint8_t ab[3] = { 1, 0, 1 };
    sl_gguf_writer_kv_arr(w, "t.abool", SL_GGUF_BOOL, ab, 3);
    sl_gguf_writer_kv_arr(w, "t.aempty", SL_GGUF_U64, NULL, 0);
    /* tensors: an odd-length F32 vector (28 bytes: padding follows), Q8_0 and Q4_K matrices */
    const int64_t ne_a[1] = { 7 }, ne_b[2] = { 64, 3 }, ne_c[2] = { 256, 2 };
    uint64_t nb[3];
    cr_assert_eq(sl_gguf_writer_add_tensor(w, "a", SL_TYPE_F32, 1, ne_a, &nb[0]), 0);
    cr_assert_eq(sl_gguf_writer_add_tensor(w, "b", SL_TYPE_Q8_0, 2, ne_b, &nb[1]), 0);
    cr_assert_eq(sl_gguf_writer_add_tensor(w, "c", SL_TYPE_Q4_K, 2, ne_c, &nb[2]), 0);
    cr_assert_eq(nb[0], 28); cr_assert_eq(nb[1], 3 * 2 * 34); cr_assert_eq(nb[2], 2 * 144);
    uint64_t total = nb[0] + nb[1] + nb[2];
    unsigned char *data = malloc(total);
    for (uint64_t i = 0; i < total; i++) data[i] = (unsigned char)(i * 131 + 7);
    /* odd split sizes: pieces span tensor boundaries */
    for (uint64_t off = 0; off < total; off += 37)
        cr_assert_eq(sl_gguf_writer_write(w, data + off, total - off < 37 ? total - off : 37), 0);
    cr_assert(exists(sl_gguf_writer_tmp_path(w)));
    cr_assert_not(exists(path), "the final name must not appear before finish()");
    cr_assert_eq(sl_gguf_writer_finish(w, err, sizeof err), 0, "%s", err);
    cr_assert_not(exists(tpath("w.gguf.tmp")));

    sl_gguf *g = open_gguf(path);
    cr_assert_eq(sl_gguf_version(g), 3);
    cr_assert_eq(sl_gguf_n_kv(g), 18);
    cr_assert_eq(sl_gguf_alignment(g), 64);
    uint64_t u; int64_t i64; float f; bool b; sl_str s;
    cr_assert(sl_gguf_get_u64(g, "t.u8", &u) && u == 200);
    cr_assert(sl_gguf_get_i64(g, "t.i8", &i64) && i64 == -100);
    cr_assert(sl_gguf_get_u64(g, "t.u16", &u) && u == 60000);
    cr_assert(sl_gguf_get_i64(g, "t.i16", &i64) && i64 == -30000);
    cr_assert(sl_gguf_get_i64(g, "t.i32", &i64) && i64 == -2000000000);
    cr_assert(sl_gguf_get_u64(g, "t.u64", &u) && u == 0xfedcba9876543210ull);
    cr_assert(sl_gguf_get_i64(g, "t.i64", &i64) && i64 == -5000000000ll);
    cr_assert(sl_gguf_get_f32(g, "t.f32", &f) && f == 0.15625f);
    cr_assert(sl_gguf_get_f32(g, "t.f64", &f) && f == 0.5f);
    cr_assert(sl_gguf_get_bool(g, "t.bool", &b) && b);
    cr_assert(sl_gguf_get_str(g, "t.str", &s) && s.len == 6 && !memcmp(s.ptr, "héllo", 6));
    cr_assert(sl_gguf_get_str(g, "t.empty", &s) && s.len == 0);
    const int types[] = { SL_GGUF_U8, SL_GGUF_I8, SL_GGUF_U16, SL_GGUF_I16, SL_GGUF_U32, SL_GGUF_I32, SL_GGUF_U64,
                          SL_GGUF_I64, SL_GGUF_F32, SL_GGUF_F64, SL_GGUF_BOOL, SL_GGUF_STRING, SL_GGUF_STRING };
    for (int k = 0; k < 13; k++) cr_assert_eq(sl_gguf_kv_type(g, k), types[k], "kv %d", k);
    int et; uint64_t n;
    cr_assert(sl_gguf_get_arr(g, "t.astr", &et, &n) && et == SL_GGUF_STRING && n == 3);
    int64_t kv = sl_gguf_arr_kv(g, "t.astr");
    for (int k = 0; k < 3; k++) {
        sl_str e = sl_gguf_arr_str(g, kv, (uint64_t)k);
        cr_assert(e.len == strs[k].len && !memcmp(e.ptr, strs[k].ptr, e.len), "astr[%d]", k);
    }
    kv = sl_gguf_arr_kv(g, "t.ai32");
    for (int k = 0; k < 4; k++) cr_assert(sl_gguf_arr_i64(g, kv, (uint64_t)k, &i64) && i64 == ai[k]);
    kv = sl_gguf_arr_kv(g, "t.af32");
    for (int k = 0; k < 2; k++) cr_assert(sl_gguf_arr_f32(g, kv, (uint64_t)k, &f) && f == af[k]);
    cr_assert(sl_gguf_get_arr(g, "t.abool", &et, &n) && et == SL_GGUF_BOOL && n == 3);
    cr_assert(sl_gguf_get_arr(g, "t.aempty", &et, &n) && et == SL_GGUF_U64 && n == 0);

    cr_assert_eq(sl_gguf_n_tensors(g), 3);
    cr_assert_eq(sl_gguf_data_offset(g) % 64, 0);
    uint64_t off = 0;
    for (int k = 0; k < 3; k++) {
        const sl_gguf_tensor *t = sl_gguf_tensor_at(g, k);
        cr_assert_eq(t->nbytes, nb[k]);
        cr_assert_eq(t->offset % 64, 0, "tensor %d not aligned", k);
        unsigned char *got = read_bytes(path, t->offset, t->nbytes);
        cr_assert_eq(memcmp(got, data + off, t->nbytes), 0, "tensor %d data", k);
        free(got);
        off += nb[k];
    }
    /* each tensor is padded, the last one too (as ggml and gguf-py write it) */
    cr_assert_eq(sl_gguf_file_size(g), sl_gguf_data_offset(g) + 64 + 256 + 320);
    sl_gguf_close(g);
    free(data);
}

/* Misuse and short data: the error is reported, and neither the file nor its temp survives. */
Test(gguf_write, errors_leave_no_file)
{
    const char *path = tpath("e.gguf"), *tmp = tpath("e.gguf.tmp");
    char err[SL_ERRLEN];
    sl_gguf_writer *w;
    const int64_t ne[2] = { 32, 2 };

    cr_assert_eq(sl_gguf_writer_open(&w, path, 32, 0, err, sizeof err), 0);
    cr_assert_eq(sl_gguf_writer_kv_u32(w, "a", 1), 0);
    cr_assert_eq(sl_gguf_writer_kv_u32(w, "a", 2), -EINVAL, "duplicate key");
    cr_assert_eq(sl_gguf_writer_finish(w, err, sizeof err), -EINVAL, "the first error sticks");
    cr_assert(strstr(err, "duplicate key a"), "%s", err);
    cr_assert_not(exists(path)); cr_assert_not(exists(tmp));

    cr_assert_eq(sl_gguf_writer_open(&w, path, 32, 0, err, sizeof err), 0);
    cr_assert_eq(sl_gguf_writer_add_tensor(w, "t", SL_TYPE_Q8_0, 2, ne, NULL), 0);
    cr_assert_eq(sl_gguf_writer_kv_u32(w, "late", 1), -EINVAL, "key after the tensor infos");
    sl_gguf_writer_abort(w);
    cr_assert_not(exists(tmp));

    cr_assert_eq(sl_gguf_writer_open(&w, path, 32, 0, err, sizeof err), 0);
    const int64_t odd[2] = { 33, 2 };
    cr_assert_eq(sl_gguf_writer_add_tensor(w, "t", SL_TYPE_Q8_0, 2, odd, NULL), -EINVAL, "33 is not a block multiple");
    sl_gguf_writer_abort(w);

    cr_assert_eq(sl_gguf_writer_open(&w, path, 32, 0, err, sizeof err), 0);
    cr_assert_eq(sl_gguf_writer_add_tensor(w, "this-name-is-longer-than-ggml-allows-which-is-63-bytes-plus-nul!", SL_TYPE_F32, 1, ne, NULL), -EINVAL);
    sl_gguf_writer_abort(w);

    cr_assert_eq(sl_gguf_writer_open(&w, path, 32, 0, err, sizeof err), 0);
    cr_assert_eq(sl_gguf_writer_add_tensor(w, "t", SL_TYPE_Q8_0, 2, ne, NULL), 0);
    char buf[200] = { 0 };
    cr_assert_eq(sl_gguf_writer_write(w, buf, 68), 0);
    cr_assert_eq(sl_gguf_writer_write(w, buf, 1), -EINVAL, "past the last tensor");
    cr_assert_neq(sl_gguf_writer_finish(w, err, sizeof err), 0);
    cr_assert_not(exists(path)); cr_assert_not(exists(tmp));

    cr_assert_eq(sl_gguf_writer_open(&w, path, 32, 0, err, sizeof err), 0);
    cr_assert_eq(sl_gguf_writer_add_tensor(w, "t", SL_TYPE_Q8_0, 2, ne, NULL), 0);
    cr_assert_eq(sl_gguf_writer_write(w, buf, 60), 0);
    cr_assert_eq(sl_gguf_writer_finish(w, err, sizeof err), -EINVAL, "8 bytes missing");
    cr_assert(strstr(err, "only 60 of 68"), "%s", err);
    cr_assert_not(exists(path)); cr_assert_not(exists(tmp));

    cr_assert_eq(sl_gguf_writer_open(&w, path, 12, 0, err, sizeof err), -EINVAL, "alignment must be a power of 2");
    cr_assert_eq(sl_gguf_writer_open(&w, "/nonexistent-dir/x.gguf", 32, 0, err, sizeof err), -ENOENT);
}

/* A full disk, faked with RLIMIT_FSIZE (Criterion runs each test in its own process): the write
 * that crosses the limit fails with EFBIG, finish() reports it, the temp file is gone. */
Test(gguf_write, file_size_limit)
{
    const char *path = tpath("big.gguf");
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = { 1 << 20, 1 << 20 };
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    char err[SL_ERRLEN];
    sl_gguf_writer *w;
    cr_assert_eq(sl_gguf_writer_open(&w, path, 32, 0, err, sizeof err), 0);
    const int64_t ne[2] = { 1024, 1024 };   /* 4 MiB of F32 */
    cr_assert_eq(sl_gguf_writer_add_tensor(w, "t", SL_TYPE_F32, 2, ne, NULL), 0);
    static float row[1024];
    int rc = 0;
    for (int r = 0; r < 1024 && !rc; r++) rc = sl_gguf_writer_write(w, row, sizeof row);
    cr_assert_eq(rc, -EFBIG);
    cr_assert_eq(sl_gguf_writer_finish(w, err, sizeof err), -EFBIG);
    cr_assert(strstr(err, "file too large") && strstr(err, "big.gguf.tmp"), "%s", err);
    cr_assert_not(exists(path)); cr_assert_not(exists(tpath("big.gguf.tmp")));
    rl.rlim_cur = rl.rlim_max = RLIM_INFINITY;
    setrlimit(RLIMIT_FSIZE, &rl);
}

/* copy_kv reproduces every key of a real vocabulary (280k-entry merges array included). */
Test(gguf_write, copy_kv_vocab)
{
    const char *path = tpath("v.gguf");
    sl_gguf *src = open_gguf(BPE);
    char err[SL_ERRLEN];
    sl_gguf_writer *w;
    cr_assert_eq(sl_gguf_writer_open(&w, path, 32, 0, err, sizeof err), 0);
    for (int64_t i = 0; i < sl_gguf_n_kv(src); i++) cr_assert_eq(sl_gguf_writer_copy_kv(w, src, i), 0, "%s", sl_gguf_writer_error(w));
    cr_assert_eq(sl_gguf_writer_finish(w, err, sizeof err), 0, "%s", err);
    sl_gguf *g = open_gguf(path);
    cr_assert_eq(sl_gguf_n_kv(g), sl_gguf_n_kv(src));
    for (int64_t i = 0; i < sl_gguf_n_kv(src); i++) {
        sl_str k = sl_gguf_key(src, i), k2 = sl_gguf_key(g, i);
        cr_assert(k.len == k2.len && !memcmp(k.ptr, k2.ptr, k.len), "key %" PRId64 " order", i);
        assert_same_kv(src, i, g, i);
    }
    sl_gguf_close(g);
    sl_gguf_close(src);
}

/* ---- sluice-gen against llama-quantize's own files ---------------------------------------- */

/* The generated file's tensor table must equal the reference's: same order, names, types, shapes,
 * byte sizes and offsets relative to the data section; same llama.* hyperparameters and file type. */
static void assert_same_layout(const char *ref_path, const char *gen_path)
{
    sl_gguf *r = open_gguf(ref_path), *g = open_gguf(gen_path);
    cr_assert_eq(sl_gguf_n_tensors(g), sl_gguf_n_tensors(r), "%s: tensor count", ref_path);
    for (int64_t i = 0; i < sl_gguf_n_tensors(r); i++) {
        const sl_gguf_tensor *a = sl_gguf_tensor_at(r, i), *b = sl_gguf_tensor_at(g, i);
        cr_assert(a->name.len == b->name.len && !memcmp(a->name.ptr, b->name.ptr, a->name.len),
                  "%s: tensor %" PRId64 " is %.*s, generated %.*s", ref_path, i, (int)a->name.len, a->name.ptr,
                  (int)b->name.len, b->name.ptr);
        cr_assert_eq(a->type, b->type, "%s: %.*s type %s, generated %s", ref_path, (int)a->name.len, a->name.ptr,
                     sl_type_name(a->type), sl_type_name(b->type));
        cr_assert_eq(a->n_dims, b->n_dims);
        for (int d = 0; d < a->n_dims; d++) cr_assert_eq(a->ne[d], b->ne[d]);
        cr_assert_eq(a->nbytes, b->nbytes);
        cr_assert_eq(a->offset - sl_gguf_data_offset(r), b->offset - sl_gguf_data_offset(g));
    }
    for (int64_t i = 0; i < sl_gguf_n_kv(r); i++) {
        sl_str k = sl_gguf_key(r, i);
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)k.len, k.ptr);
        if (strncmp(key, "llama.", 6) && strcmp(key, "general.file_type") && strcmp(key, "general.architecture")) continue;
        int64_t j = sl_gguf_find_key(g, key);
        cr_assert_geq(j, 0, "%s: generated file lacks %s", ref_path, key);
        assert_same_kv(r, i, g, j);
    }
    sl_gguf_close(r);
    sl_gguf_close(g);
}

static void gen_like(const char *model, const char *type, const char *vocab, const char *dim, const char *layers,
                     const char *heads, const char *kv, const char *ffn, const char *theta, const char *ctx, bool tied)
{
    char err[1024], name[128], ref[256];
    snprintf(name, sizeof name, "%s.%s.gguf", model, type);
    snprintf(ref, sizeof ref, SL_SHARED_DIR "/models/%s", name);
    const char *out = tpath(name);
    int rc = run_gen(err, 0, "--shape", "custom", "--type", type, "--out", out, "--vocab", vocab, "--dim", dim,
                     "--layers", layers, "--heads", heads, "--kv-heads", kv, "--ffn", ffn, "--rope-theta", theta,
                     "--ctx", ctx, "--quiet", tied ? "--tied" : NULL, NULL);
    cr_assert_eq(rc, 0, "%s: %s", name, err);
    assert_same_layout(ref, out);
}

Test(sluice_gen, layout_matches_llama_quantize, .timeout = 120)
{
    static const char *micro[] = { "F16", "Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K", "Q3_K_M", "Q2_K", "IQ4_XS" };
    for (int i = 0; i < 9; i++) gen_like("micro-llama", micro[i], STORIES, "256", "4", "4", "2", "768", "10000", "512", false);
    gen_like("mini-llama3", "Q4_K_M", STORIES, "512", "2", "4", "1", "1536", "500000", "1024", false);
    gen_like("mini-llama3", "Q8_0", STORIES, "512", "2", "4", "1", "1536", "500000", "1024", false);
    gen_like("micro-tied", "Q8_0", STORIES, "256", "2", "4", "4", "512", "10000", "512", true);
    gen_like("micro-tied", "F16", STORIES, "256", "2", "4", "4", "512", "10000", "512", true);
    gen_like("spm32k-llama", "Q4_K_M", SPM, "256", "2", "4", "2", "768", "10000", "512", false);
}

/* ---- a small custom model, checked against the rules directly --------------------------------- */

static const char *gen_small(const char *type, const char *seed, const char *threads, const char *name)
{
    char err[1024];
    const char *out = tpath(name);
    int rc = run_gen(err, 0, "--shape", "custom", "--type", type, "--out", out, "--dim", "256", "--layers", "3",
                     "--heads", "4", "--kv-heads", "2", "--ffn", "512", "--seed", seed, "--threads", threads,
                     "--quiet", NULL);
    cr_assert_eq(rc, 0, "%s", err);
    return out;
}

/* 3 layers: use_more_bits(i, 3) = i < 0 || i >= 2 || i % 3 == 2, so only layer 2 gets Q6_K for
 * attn_v and ffn_down under Q4_K_M; output.weight is Q6_K; norms F32.  Q3_K_M: attn_v Q5_K in
 * blocks 0 and 1, then Q4_K; ffn_down Q4_K (3 / 16 = 0 blocks of Q5_K); attn_output Q4_K.  Q2_K
 * with 2 kv heads of 4 (n_gqa 2 < 4): attn_v, attn_output and ffn_down Q3_K.  IQ4_XS (n_gqa < 4):
 * everything IQ4_XS. */
static int expected_type(const char *type, const char *name)
{
    if (strstr(name, "norm")) return SL_TYPE_F32;
    if (!strcmp(type, "F16")) return SL_TYPE_F16;
    if (!strcmp(type, "Q8_0")) return SL_TYPE_Q8_0;
    if (!strcmp(name, "output.weight")) return SL_TYPE_Q6_K;
    bool v = strstr(name, "attn_v"), down = strstr(name, "ffn_down"), o = strstr(name, "attn_output");
    if (!strcmp(type, "Q3_K_M")) {
        if (v) return strstr(name, "blk.2.") ? SL_TYPE_Q4_K : SL_TYPE_Q5_K;
        return down || o ? SL_TYPE_Q4_K : SL_TYPE_Q3_K;
    }
    if (!strcmp(type, "Q2_K")) return v || down || o ? SL_TYPE_Q3_K : SL_TYPE_Q2_K;
    if (!strcmp(type, "IQ4_XS")) return SL_TYPE_IQ4_XS;
    if (!strcmp(name, "blk.2.attn_v.weight") || !strcmp(name, "blk.2.ffn_down.weight")) return SL_TYPE_Q6_K;
    return SL_TYPE_Q4_K;
}

Test(sluice_gen, small_custom_model_rules)
{
    static const char *types[] = { "Q4_K_M", "Q8_0", "F16", "Q3_K_M", "Q2_K", "IQ4_XS" };
    static const uint32_t ftype[] = { 15, 7, 1, 12, 10, 30 };   /* llama.cpp's LLAMA_FTYPE_MOSTLY_* */
    sl_gguf *voc = open_gguf(SPM);
    for (int ti = 0; ti < 6; ti++) {
        const char *path = gen_small(types[ti], "7", "2", "small.gguf");
        sl_gguf *g = open_gguf(path);
        cr_assert_eq(sl_gguf_n_tensors(g), 3 + 3 * 9);
        cr_assert_eq(sl_gguf_alignment(g), 32);
        cr_assert_eq(get_u32(g, "general.alignment"), 32);
        cr_assert_eq(sl_gguf_data_offset(g) % 32, 0);
        uint64_t end = 0;
        for (int64_t i = 0; i < sl_gguf_n_tensors(g); i++) {
            const sl_gguf_tensor *t = sl_gguf_tensor_at(g, i);
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
            cr_assert_eq(t->type, expected_type(types[ti], name), "%s %s: %s", types[ti], name, sl_type_name(t->type));
            int64_t ne0 = strstr(name, "ffn_down") ? 512 : 256, ne1;
            if (strstr(name, "norm")) ne1 = 1;
            else if (strstr(name, "attn_k") || strstr(name, "attn_v")) ne1 = 128;     /* 2 kv heads × 64 */
            else if (strstr(name, "ffn_gate") || strstr(name, "ffn_up")) ne1 = 512;
            else if (strstr(name, "token_embd") || !strcmp(name, "output.weight")) ne1 = 32000;
            else ne1 = 256;
            cr_assert_eq(t->n_dims, ne1 == 1 ? 1 : 2, "%s", name);
            cr_assert_eq(t->ne[0], ne0, "%s", name);
            if (ne1 > 1) cr_assert_eq(t->ne[1], ne1, "%s", name);
            cr_assert_eq(t->nbytes, (uint64_t)ne1 * sl_row_bytes(t->type, ne0), "%s", name);
            cr_assert_eq(t->offset % 32, 0, "%s", name);
            cr_assert_geq(t->offset, end, "%s overlaps its predecessor", name);
            end = t->offset + t->nbytes;
        }
        cr_assert_eq(sl_gguf_file_size(g), (end + 31) / 32 * 32);
        cr_assert_eq(get_u32(g, "general.file_type"), ftype[ti]);
        cr_assert_eq(get_u32(g, "general.quantization_version"), 2);
        cr_assert_eq(get_u32(g, "llama.embedding_length"), 256);
        cr_assert_eq(get_u32(g, "llama.block_count"), 3);
        cr_assert_eq(get_u32(g, "llama.feed_forward_length"), 512);
        cr_assert_eq(get_u32(g, "llama.attention.head_count"), 4);
        cr_assert_eq(get_u32(g, "llama.attention.head_count_kv"), 2);
        cr_assert_eq(get_u32(g, "llama.rope.dimension_count"), 64);
        cr_assert_eq(get_u32(g, "llama.context_length"), 2048);
        cr_assert_eq(get_u32(g, "llama.vocab_size"), 32000);
        float f;
        cr_assert(sl_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &f) && f == 1e-5f);
        cr_assert(sl_gguf_get_f32(g, "llama.rope.freq_base", &f) && f == 10000.0f);
        sl_str s;
        cr_assert(sl_gguf_get_str(g, "general.architecture", &s) && sl_str_eq(s, "llama"));
        /* every tokenizer.* key of the vocabulary, verbatim */
        int n_tok = 0;
        for (int64_t i = 0; i < sl_gguf_n_kv(voc); i++) {
            sl_str k = sl_gguf_key(voc, i);
            if (k.len < 10 || memcmp(k.ptr, "tokenizer.", 10)) continue;
            char key[128];
            snprintf(key, sizeof key, "%.*s", (int)k.len, k.ptr);
            int64_t j = sl_gguf_find_key(g, key);
            cr_assert_geq(j, 0, "%s missing", key);
            assert_same_kv(voc, i, g, j);
            n_tok++;
        }
        cr_assert_geq(n_tok, 9);
        sl_gguf_close(g);
    }
    sl_gguf_close(voc);
}

/* Same seed: same bytes, whatever the thread count; another seed: other weights. */
Test(sluice_gen, deterministic)
{
    const char *a = gen_small("Q4_K_M", "5", "2", "a.gguf");
    const char *b = gen_small("Q4_K_M", "5", "1", "b.gguf");
    const char *c = gen_small("Q4_K_M", "5", "3", "c.gguf");
    const char *d = gen_small("Q4_K_M", "6", "2", "d.gguf");
    cr_assert(same_file(a, b), "threads 1 vs 2");
    cr_assert(same_file(a, c), "threads 3 vs 2");
    sl_gguf *ga = open_gguf(a), *gd = open_gguf(d);
    for (int64_t i = 0; i < sl_gguf_n_tensors(ga); i++) {   /* every tensor changes, norms included */
        const sl_gguf_tensor *ta = sl_gguf_tensor_at(ga, i), *td = sl_gguf_tensor_at(gd, i);
        void *x = read_bytes(a, ta->offset, ta->nbytes), *y = read_bytes(d, td->offset, td->nbytes);
        cr_assert_neq(memcmp(x, y, ta->nbytes), 0, "tensor %.*s did not change with the seed", (int)ta->name.len, ta->name.ptr);
        free(x); free(y);
    }
    sl_gguf_close(ga);
    sl_gguf_close(gd);
}

/* ---- weight statistics, measured with the kernels' dequantizers ------------------------------- */

/* Target std of each tensor (see sluice-gen --help): 1/sqrt(ne0) for matmul weights, 1 for
 * token_embd, 1/sqrt(dim) for output; norms are 1 + 0.1 z. */
static double target_sigma(const char *name, int64_t ne0, int64_t dim)
{
    if (!strcmp(name, "token_embd.weight")) return 1.0;
    if (!strcmp(name, "output.weight")) return 1.0 / sqrt((double)dim);
    return 1.0 / sqrt((double)ne0);
}

/* Tolerances: the generator calibrates its block scales exactly against its quant tables, so the
 * expected std is σ up to f16 rounding of the scales (< 0.3%).  The sampling error of the variance
 * is not 1/sqrt(N/2): elements of one 256-element block share its jittered scale (and sub-blocks
 * theirs), so it is measured from the spread of the per-block mean squares, SE = sd / sqrt(blocks)
 * (about 2.5% of σ² for the smallest tensors here, 32768 elements = 128 blocks; 0.1% for
 * token_embd, which therefore pins the calibration).  Bounds: the mean square within 5 of those
 * standard errors + 0.6% (the f16 rounding, squared) of σ², |mean| < 0.03σ (the mean's SE is 0.55%
 * of σ at 32768 elements: ≥ 5 standard errors).  Local centring: the rms of the means of 16-element groups must be σ/4 (independent
 * zero-mean elements) within 25% — a mis-packed scale/min or zero point shifts whole sub-blocks and
 * blows this up, even where shifts cancel in the global mean. */
static void check_stats(const char *path, const char *what)
{
    sl_gguf *g = open_gguf(path);
    double nsum = 0, nsum2 = 0;
    long nn = 0;
    for (int64_t i = 0; i < sl_gguf_n_tensors(g); i++) {
        const sl_gguf_tensor *t = sl_gguf_tensor_at(g, i);
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        int64_t n = t->ne[0] * (t->n_dims == 2 ? t->ne[1] : 1);
        const sl_type_info *ti = sl_type_get(t->type);
        cr_assert(ti && ti->dequant, "%s: no dequantizer for %s", name, sl_type_name(t->type));
        void *raw = read_bytes(path, t->offset, t->nbytes);
        float *x = malloc((size_t)n * sizeof *x);
        ti->dequant(raw, x, n);
        free(raw);
        if (strstr(name, "norm")) {
            for (int64_t k = 0; k < n; k++) { nsum += x[k]; nsum2 += (double)x[k] * x[k]; }
            nn += n;
            free(x);
            continue;
        }
        double s = 0, s2 = 0, g2 = 0, b2 = 0, b4 = 0, bs = 0;
        for (int64_t k = 0; k < n; k += 16) {
            double gs = 0;
            for (int j = 0; j < 16; j++) { double v = x[k + j]; s += v; s2 += v * v; gs += v; bs += v * v; }
            g2 += (gs / 16) * (gs / 16);
            cr_assert(isfinite(s2), "%s %s: non-finite value", what, name);
            if ((k + 16) % 256 == 0) { b2 += bs / 256; b4 += (bs / 256) * (bs / 256); bs = 0; }
        }
        free(x);
        double mean = s / n, sd = sqrt(s2 / n - mean * mean), sig = target_sigma(name, t->ne[0], 256);
        double grms = sqrt(g2 / (n / 16.0)), nb = n / 256.0;
        double ms = s2 / n, se = sqrt(fmax(b4 / nb - (b2 / nb) * (b2 / nb), 0) / nb), sig2 = sig * sig;
        cr_assert(fabs(ms / sig2 - 1) < 5 * se / sig2 + 0.006, "%s %s: std %g, target %g (mean square %g, SE %g)", what,
                  name, sd, sig, ms, se);
        cr_assert(fabs(mean) < 0.03 * sig, "%s %s: mean %g (std %g)", what, name, mean, sig);
        cr_assert(fabs(grms / (sig / 4) - 1) < 0.25, "%s %s: rms of 16-group means %g, expected %g", what, name,
                  grms, sig / 4);
    }
    /* norms pooled (7 × 256 values): mean 1 ± 0.015 (6 standard errors), std 0.1 ± 10% (SE 1.7%) */
    double nm = nsum / nn, nsd = sqrt(nsum2 / nn - nm * nm);
    cr_assert(fabs(nm - 1) < 0.015 && fabs(nsd / 0.1 - 1) < 0.1, "%s norms: mean %g std %g", what, nm, nsd);
    sl_gguf_close(g);
}

Test(sluice_gen, weight_statistics, .timeout = 120)
{
    check_stats(gen_small("F16", "3", "2", "f16.gguf"), "F16");
    check_stats(gen_small("Q8_0", "3", "2", "q8.gguf"), "Q8_0");
    check_stats(gen_small("Q4_0", "3", "2", "q40.gguf"), "Q4_0");
    check_stats(gen_small("Q4_K_M", "3", "2", "q4km.gguf"), "Q4_K_M");
    check_stats(gen_small("Q3_K_M", "3", "2", "q3km.gguf"), "Q3_K_M");
    check_stats(gen_small("Q2_K", "3", "2", "q2k.gguf"), "Q2_K");
    check_stats(gen_small("IQ4_XS", "3", "2", "iq4xs.gguf"), "IQ4_XS");
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* No two rows of output.weight (or token_embd) are equal: no tied logits, no repeated embeddings. */
Test(sluice_gen, rows_are_distinct)
{
    const char *path = gen_small("Q4_K_M", "9", "2", "r.gguf");
    sl_gguf *g = open_gguf(path);
    static const char *names[] = { "output.weight", "token_embd.weight" };
    for (int k = 0; k < 2; k++) {
        const sl_gguf_tensor *t = sl_gguf_find_tensor(g, names[k]);
        cr_assert_not_null(t);
        size_t rb = sl_row_bytes(t->type, t->ne[0]);
        unsigned char *raw = read_bytes(path, t->offset, t->nbytes);
        uint64_t *h = malloc((size_t)t->ne[1] * sizeof *h);
        for (int64_t r = 0; r < t->ne[1]; r++) {
            uint64_t x = 0xcbf29ce484222325ull;
            for (size_t b = 0; b < rb; b++) x = (x ^ raw[r * rb + b]) * 0x100000001b3ull;
            h[r] = x;
        }
        qsort(h, (size_t)t->ne[1], sizeof *h, cmp_u64);
        for (int64_t r = 1; r < t->ne[1]; r++) cr_assert_neq(h[r], h[r - 1], "%s: two rows are identical", names[k]);
        free(h);
        free(raw);
    }
    sl_gguf_close(g);
}

/* ---- the command line --------------------------------------------------------------------- */

/* Bad arguments: exit 2 with one "sluice-gen: ..." line followed by the usage text. */
static void expect_usage_error(const char *want, ...)
{
    char err[1024], *args[48];
    int n = 0;
    va_list ap;
    va_start(ap, want);
    while (n < 47 && (args[n] = va_arg(ap, char *)) != NULL) n++;
    va_end(ap);
    args[n] = NULL;
    int rc = run_genv(err, 0, args);
    cr_assert_eq(rc, 2, "expected exit 2 for '%s', got %d: %s", want, rc, err);
    char *nl = strchr(err, '\n');
    cr_assert(!strncmp(err, "sluice-gen: ", 12) && nl && !strncmp(nl + 1, "usage:", 6), "%s", err);
    cr_assert(strstr(err, want) && strstr(err, want) < nl, "expected '%s' in: %s", want, err);
}

Test(sluice_gen, cli_errors)
{
    const char *out = tpath("x.gguf");
    char o[256];
    snprintf(o, sizeof o, "%s", out);
    expect_usage_error("--shape is required", NULL);
    expect_usage_error("unknown shape", "--shape", "llama9", "--type", "F16", "--out", o, NULL);
    expect_usage_error("unknown --type", "--shape", "llama2-7b", "--type", "Q5_K", "--out", o, NULL);
    expect_usage_error("supported: F16 Q8_0", "--shape", "llama2-7b", "--type", "IQ2_M", "--out", o, NULL);
    expect_usage_error("--out is required", "--shape", "llama2-7b", "--type", "F16", NULL);
    expect_usage_error("multiples of 256", "--shape", "custom", "--type", "Q4_K_M", "--out", o, "--dim", "96",
                       "--layers", "1", "--heads", "2", "--ffn", "256", NULL);
    expect_usage_error("not a multiple of heads", "--shape", "custom", "--type", "F16", "--out", o, "--dim", "256",
                       "--layers", "1", "--heads", "3", "--ffn", "256", NULL);
    expect_usage_error("needs --dim", "--shape", "custom", "--type", "F16", "--out", o, NULL);
    expect_usage_error("--threads", "--shape", "llama2-7b", "--type", "F16", "--out", o, "--threads", "0", NULL);
    expect_usage_error("--seed", "--shape", "llama2-7b", "--type", "F16", "--out", o, "--seed", "1x", NULL);
    expect_usage_error("unknown option", "--shape", "llama2-7b", "--type", "F16", "--out", o, "--bogus", "1", NULL);
    expect_usage_error("disagrees", "--shape", "llama2-7b", "--type", "F16", "--out", o, "--vocab-size", "1000", NULL);
    cr_assert_not(exists(out));

    char err[1024];
    int rc = run_gen(err, 0, "--shape", "tinyllama-1.1b", "--type", "Q8_0", "--out", o, "--vocab", "/nonexistent.gguf", NULL);
    cr_assert_eq(rc, 1, "%s", err);
    cr_assert(strstr(err, "/nonexistent.gguf"), "%s", err);
    rc = run_gen(err, 0, "--shape", "custom", "--type", "F16", "--dim", "64", "--layers", "1", "--heads", "2",
                 "--ffn", "64", "--out", "/nonexistent-dir/x.gguf", NULL);
    cr_assert_eq(rc, 1, "%s", err);
    cr_assert(strstr(err, "x.gguf.tmp"), "%s", err);
}

/* A disk that fills up (RLIMIT_FSIZE 1 MiB for a 13 MB model): exit 1, a clear message, and no
 * output or temp file. */
Test(sluice_gen, disk_full)
{
    const char *out = tpath("full.gguf");
    char err[1024], o[256];
    snprintf(o, sizeof o, "%s", out);
    int rc = run_gen(err, 1 << 20, "--shape", "custom", "--type", "Q4_K_M", "--dim", "256", "--layers", "2",
                     "--heads", "4", "--ffn", "768", "--out", o, NULL);
    cr_assert_eq(rc, 1, "%s", err);
    cr_assert(strstr(err, "file too large") && strstr(err, "nothing written"), "%s", err);
    cr_assert_not(exists(out));
    cr_assert_not(exists(tpath("full.gguf.tmp")));
}

/* ---- end to end: sluice runs what sluice-gen writes ------------------------------------------- */

/* Logit scale: the final RMSNorm gives x with rms ≈ 1 (norm weights 1 ± 0.1), output rows have std
 * 1/sqrt(dim), so each logit is ≈ N(0, 1): the std over the vocabulary must be in [0.5, 2]. */
static void run_model(const char *path)
{
    char err[256];
    sl_model *m;
    cr_assert_eq(sl_model_open(path, &m, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sl_model_load_resident(m, err, sizeof err), 0, "%s", err);
    sl_pool *pool = sl_pool_create(2);
    sl_ctx *c;
    sl_ctx_params p = { .n_ctx = 64, .n_batch = 16, .kv_type = SL_KV_F16 };
    cr_assert_eq(sl_ctx_create(m, &p, pool, &c, err, sizeof err), 0, "%s", err);
    const int32_t toks[4] = { 1, 450, 4996, 2501 };
    float prev0 = 0;
    for (int step = 0; step < 4; step++) {
        cr_assert_eq(sl_eval(c, &toks[step], 1), 0, "%s", c->err);
        int nv = m->cfg.vocab;
        double s = 0, s2 = 0, mn = 1e30, mx = -1e30;
        for (int i = 0; i < nv; i++) {
            double v = c->logits[i];
            cr_assert(isfinite(v), "logit %d not finite", i);
            s += v; s2 += v * v; mn = fmin(mn, v); mx = fmax(mx, v);
        }
        double sd = sqrt(s2 / nv - (s / nv) * (s / nv));
        cr_assert(sd > 0.5 && sd < 2.0, "%s step %d: logit std %g", path, step, sd);
        cr_assert_gt(mx - mn, 1.0);
        if (step) cr_assert_neq(c->logits[0], prev0, "logits did not change with the token");
        prev0 = c->logits[0];
    }
    sl_ctx_free(c);
    sl_pool_free(pool);
    sl_model_free(m);
}

Test(sluice_gen, sluice_runs_generated_models, .timeout = 120)
{
    run_model(gen_small("Q4_K_M", "11", "2", "e2e.q4km.gguf"));
    run_model(gen_small("F16", "11", "2", "e2e.f16.gguf"));
    run_model(gen_small("Q3_K_M", "11", "2", "e2e.q3km.gguf"));
    run_model(gen_small("Q2_K", "11", "2", "e2e.q2k.gguf"));
    run_model(gen_small("IQ4_XS", "11", "2", "e2e.iq4xs.gguf"));
}
