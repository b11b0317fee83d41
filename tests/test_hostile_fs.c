/* tests/test_hostile_fs.c — hostile file systems and file kinds (issue 20): a model path that is a
 * FIFO or a device, a KV spill directory on a RAM file system, a model file that shrinks under the
 * mmap reader, the budget with buffered reads.  Each case ends with a clear error or a bounded run,
 * never a hang, a crash or memory outside the budget.
 *
 * Cases that need root (mounting a tmpfs, mknod) skip with a message when that is not possible.
 * No Criterion `.timeout` (see tests/test_hostile.c); a child process with alarm() guards the cases
 * that used to hang.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "include/sluice.h"
#include "loader/gguf.h"
#include "loader/io.h"
#include "loader/pagecache.h"
#include "runtime/engine/kvcache.h"

extern char **environ;

#define SLUICE_BIN SL_BINARY_DIR "/sluice"
#define MICRO SL_SHARED_DIR "/models/micro-llama.F16.gguf"

static char g_tmp[64];
static void make_tmp(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/sl_hfs_XXXXXX");
    cr_assert_not_null(mkdtemp(g_tmp));
}
static void rm_tmp(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd)) { /* best effort */ }
}
TestSuite(hostile_fs, .init = make_tmp, .fini = rm_tmp);

/* Run sluice with argv; kill it after `limit_s` seconds.  Returns the wait status (killed: the
 * signal shows in it); stderr goes to errbuf. */
static int run_cli_limited(const char *const *argv, int limit_s, char *errbuf, size_t errlen)
{
    char errpath[128];
    snprintf(errpath, sizeof errpath, "%s/stderr.XXXXXX", g_tmp);
    int efd = mkstemp(errpath);
    cr_assert_geq(efd, 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, efd, 2);
    pid_t pid;
    cr_assert_eq(posix_spawn(&pid, SLUICE_BIN, &fa, NULL, (char *const *)argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    int st = 0;
    for (int waited = 0;; waited++) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) break;
        if (waited >= limit_s * 10) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            break;
        }
        usleep(100 * 1000);
    }
    ssize_t n = pread(efd, errbuf, errlen - 1, 0);
    errbuf[n > 0 ? n : 0] = 0;
    close(efd);
    unlink(errpath);
    return st;
}

/* ---- item 5: opens never block on a FIFO; non-regular files are refused ------------------------ */

/* In a child with an alarm: a blocking open would be killed by SIGALRM instead of hanging the suite. */
static void library_refuses(const char *path, const char *kind)
{
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        alarm(10);
        char err[256];
        sl_gguf *g = NULL;
        int rc = sl_gguf_open(path, &g, err, sizeof err);
        if (rc != -EINVAL || !strstr(err, kind)) { fprintf(stderr, "gguf: %d %s\n", rc, err); _exit(2); }
        sluice_params p;
        sluice_params_default(&p);
        sluice_model *m = NULL;
        rc = sluice_open(path, &p, &m, err, sizeof err);
        if (rc != -EINVAL || !strstr(err, kind)) { fprintf(stderr, "open: %d %s\n", rc, err); _exit(3); }
        sl_io_opts o = { .backend = SL_IO_PREAD, .slots = 1, .max_piece = 4096 };
        sl_io *io = NULL;
        rc = sl_io_open(path, &o, &io, err, sizeof err);
        if (rc != -EINVAL || !strstr(err, kind)) { fprintf(stderr, "io: %d %s\n", rc, err); _exit(4); }
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: child status 0x%x (SIGALRM = it blocked)", path, st);
}

Test(hostile_fs, fifo_and_devices_are_refused_without_blocking)
{
    char fifo[128];
    snprintf(fifo, sizeof fifo, "%s/model.gguf", g_tmp);
    cr_assert_eq(mkfifo(fifo, 0644), 0);
    library_refuses(fifo, "a FIFO");
    library_refuses("/dev/null", "a character device");
    library_refuses(g_tmp, "a directory");
    char errbuf[4096];
    const char *run[] = { "sluice", "run", "-m", fifo, "-p", "x", "-n", "1", NULL };
    int st = run_cli_limited(run, 20, errbuf, sizeof errbuf);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 1, "run on a FIFO: status 0x%x, stderr %s", st, errbuf);
    cr_expect(strstr(errbuf, "a FIFO, not a regular file"), "%s", errbuf);
    const char *inspect[] = { "sluice", "inspect", fifo, NULL };
    st = run_cli_limited(inspect, 20, errbuf, sizeof errbuf);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 1, "inspect on a FIFO: status 0x%x, stderr %s", st, errbuf);
}

/* ---- item 14: a vocabulary-only GGUF is named as such ------------------------------------------- */

Test(hostile_fs, vocab_only_file_says_so)
{
    char err[256];
    sluice_params p;
    sluice_params_default(&p);
    sluice_model *m = NULL;
    cr_expect_eq(sluice_open(SL_SHARED_DIR "/vocab/ggml-vocab-llama-spm.gguf", &p, &m, err, sizeof err), -EINVAL);
    cr_expect(strstr(err, "vocabulary-only file (no weights)"), "%s", err);
    char errbuf[4096];
    const char *run[] = { "sluice", "run", "-m", SL_SHARED_DIR "/vocab/ggml-vocab-gpt-2.gguf", "-p", "x", NULL };
    int st = run_cli_limited(run, 20, errbuf, sizeof errbuf);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(errbuf, "vocabulary-only file (no weights)"), "%s", errbuf);
}

/* ---- item 3: a KV spill on a RAM file system ----------------------------------------------------- */

/* A tmpfs directory: a fresh mount under the test's directory (root), else /dev/shm when it is one;
 * NULL (the case is skipped) when neither is possible. */
static const char *ram_dir(char *buf, size_t len, bool *mounted)
{
    *mounted = false;
    snprintf(buf, len, "%s/ram", g_tmp);
    if (mkdir(buf, 0755) == 0 && mount("sluice-test", buf, "tmpfs", 0, "size=64m") == 0) {
        *mounted = true;
        return buf;
    }
    snprintf(buf, len, "/dev/shm/sl_hfs_%d", (int)getpid());
    if (mkdir(buf, 0755) == 0 && sl_kv_dir_in_ram(buf, NULL, 0)) return buf;
    rmdir(buf);
    return NULL;
}

static void ram_dir_done(const char *dir, bool mounted)
{
    if (mounted) umount(dir);
    rmdir(dir);
}

typedef struct logbuf { char text[2048]; size_t len; } logbuf;
static void on_log(void *user, int level, const char *msg)
{
    (void)level;
    logbuf *b = user;
    b->len += (size_t)snprintf(b->text + b->len, sizeof b->text - b->len, "%s\n", msg);
    if (b->len >= sizeof b->text) b->len = sizeof b->text - 1;
}

/* micro-llama at -c 16384: under 26 MiB the plan must spill the KV cache (32 MiB f16, 17 MiB q8_0) */
static int open_spilling(uint64_t budget, const char *spill_dir, logbuf *lb, sluice_plan_info *pi, char *err, size_t errlen)
{
    sluice_params p;
    sluice_params_default(&p);
    p.ram_budget = budget;
    p.n_ctx = 16384;
    p.disk_bw = 1;
    p.compute_bw = 10;
    p.kv_spill_dir = spill_dir;
    p.log = on_log;
    p.user = lb;
    p.io = SLUICE_IO_PREAD;
    sluice_model *m = NULL;
    int rc = sluice_open(MICRO, &p, &m, err, errlen);
    if (rc == 0) {
        sluice_model_get_plan(m, pi);
        sluice_close(m);
    }
    return rc;
}

Test(hostile_fs, kv_spill_on_a_ram_file_system)
{
    char dir[128];
    bool mounted;
    const char *ram = ram_dir(dir, sizeof dir, &mounted);
    if (!ram) {
        cr_log_warn("no tmpfs available (mount needs root, /dev/shm is not tmpfs): skipped");
        return;
    }
    cr_assert(sl_kv_dir_in_ram(ram, NULL, 0), "%s should be tmpfs", ram);
    cr_expect(!sl_kv_dir_in_ram(g_tmp, NULL, 0) || mounted, "the test's own directory is on a disk");
    char err[512];
    logbuf lb = { 0 };
    sluice_plan_info pi;
    /* the budget relies on the spill and the only directory is in RAM: refused, saying why */
    cr_expect_eq(open_spilling(20u << 20, ram, &lb, &pi, err, sizeof err), -ENOSPC);
    cr_expect(strstr(err, ram) && strstr(err, "in RAM"), "%s", err);
    /* the same budget with the spill on a disk works: the plan does spill there */
    lb.len = 0;
    cr_expect_eq(open_spilling(20u << 20, g_tmp, &lb, &pi, err, sizeof err), 0, "%s", err);
    cr_expect(pi.kv_spilled);
    /* $TMPDIR in RAM is not the default spill directory when the budget relies on the spill */
    if (!sl_kv_dir_in_ram("/var/tmp", NULL, 0)) {
        char *old = getenv("TMPDIR") ? strdup(getenv("TMPDIR")) : NULL;
        setenv("TMPDIR", ram, 1);
        lb.len = 0;
        lb.text[0] = 0;
        cr_expect_eq(open_spilling(20u << 20, NULL, &lb, &pi, err, sizeof err), 0, "%s", err);
        cr_expect(pi.kv_spilled && strstr(lb.text, "spills to /var/tmp instead"), "log: %s", lb.text);
        if (old) { setenv("TMPDIR", old, 1); free(old); } else unsetenv("TMPDIR");
    }
    /* a budget that holds the cache in memory: a RAM spill directory is not used */
    lb.len = 0;
    lb.text[0] = 0;
    cr_expect_eq(open_spilling(30u << 20, ram, &lb, &pi, err, sizeof err), 0, "%s", err);
    cr_expect(!pi.kv_spilled && strstr(lb.text, "stays in memory"), "spilled %d, log: %s", pi.kv_spilled, lb.text);
    ram_dir_done(ram, mounted);
}

/* ---- item 15: the mmap reader and a model file that shrinks during the run ---------------------- */

static void copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    cr_assert(a && b);
    char buf[1 << 16];
    for (size_t n; (n = fread(buf, 1, sizeof buf, a)) > 0;) cr_assert_eq(fwrite(buf, 1, n, b), n);
    fclose(a);
    fclose(b);
}

Test(hostile_fs, mmap_model_truncated_during_a_run)
{
    char model[128], errpath[128];
    snprintf(model, sizeof model, "%s/model.gguf", g_tmp);
    snprintf(errpath, sizeof errpath, "%s/stderr", g_tmp);
    copy_file(MICRO, model);
    int out[2];
    cr_assert_eq(pipe(out), 0);
    const char *argv[] = { "sluice", "run", "-m", model, "--stream", "--io", "mmap", "-t", "1", "-c", "512", "-n", "400",
                           "--temp", "0", "-p", "Once upon a time", NULL };
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    posix_spawn_file_actions_addopen(&fa, 2, errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    cr_assert_eq(posix_spawn(&pid, SLUICE_BIN, &fa, NULL, (char *const *)argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    char buf[256];
    ssize_t n = read(out[0], buf, sizeof buf);   /* the prompt echo: the run is streaming weights now */
    cr_expect_gt(n, 0);
    cr_assert_eq(truncate(model, 4096 * 64), 0);   /* keep the metadata, lose the weights */
    while (read(out[0], buf, sizeof buf) > 0) {}
    close(out[0]);
    int st;
    waitpid(pid, &st, 0);
    FILE *f = fopen(errpath, "r");
    size_t en = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[en] = 0;
    if (f) fclose(f);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status 0x%x (a signal here is the bug): %s", st, buf);
    cr_expect(strstr(buf, "shrank"), "stderr: %s", buf);
}

/* ---- item 9: buffered reads (--no-direct) leave no page cache beyond the pieces held ------------- */

/* Kernel readahead read up to read_ahead_kb (8 MiB on the test machine's disk, doubled by async
 * readahead) past every buffered piece: page cache the budget did not count (87-97 MiB peak at a
 * 64 MiB budget).  Now the reader reads only its pieces: during a sequential pass with 2 slots of
 * 1 MiB the file's cached bytes stay within the held pieces rounded out to the 2 MiB drop grain. */
Test(hostile_fs, buffered_reads_leave_no_readahead_behind)
{
    char path[128];
    snprintf(path, sizeof path, "%s/big.bin", g_tmp);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    static unsigned char block[1 << 20];
    for (size_t i = 0; i < sizeof block; i++) block[i] = (unsigned char)(i * 131 + 7);
    for (int i = 0; i < 64; i++) cr_assert_eq(fwrite(block, 1, sizeof block, f), sizeof block);
    fflush(f);
    fsync(fileno(f));   /* dirty pages cannot be dropped */
    fclose(f);
    cr_assert_eq(sl_page_cache_drop(path), 0);
    uint64_t cached0, size0;
    cr_assert_eq(sl_page_cache_bytes(path, &cached0, &size0), 0);
    cr_assert_lt(cached0, 1u << 20, "the file could not be dropped from the page cache first");
    for (int b = SL_IO_PREAD; b <= SL_IO_URING; b += SL_IO_URING - SL_IO_PREAD) {
        sl_io_opts o = { .backend = (sl_io_backend)b, .slots = 2, .max_piece = 1u << 20, .no_direct = true };
        sl_io *io = NULL;
        char err[256];
        cr_assert_eq(sl_io_open(path, &o, &io, err, sizeof err), 0, "%s", err);
        uint64_t worst = 0;
        for (int k = 0; k < 48; k++) {
            int s = sl_io_request(io, (uint64_t)k << 20, 1u << 20);
            cr_assert_geq(s, 0);
            const void *p;
            cr_assert_eq(sl_io_wait(io, s, &p), 0, "%s", sl_io_errmsg(io));
            cr_assert_eq(memcmp(p, block, 4096), 0);
            uint64_t cached, size;
            cr_assert_eq(sl_page_cache_bytes(path, &cached, &size), 0);
            if (cached > worst) worst = cached;
            sl_io_release(io, s);
        }
        cr_expect_leq(worst, 4u << 20, "%s: up to %.1f MiB of the file cached while reading 1 MiB pieces",
                      sl_io_backend_name(sl_io_backend_active(io)), worst / 1048576.0);
        sl_io_close(io);
        sl_page_cache_drop(path);
    }
}
