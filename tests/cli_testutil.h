/* tests/cli_testutil.h — running the built sluice binary from a Criterion test: argv in, exit
 * status, signal, stdout and stderr (files in a per-test temporary directory) out, with the standard
 * descriptors closed, full or fed, a signal sent mid-run, or the run dropped to an unprivileged user.
 * Shared by the command-line tests (tests/test_cli.c, tests/test_cli_spec.c); each declares its suite
 * with .init = setup, .fini = teardown. */
#ifndef SL_TESTS_CLI_TESTUTIL_H
#define SL_TESTS_CLI_TESTUTIL_H

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define SLUICE_BIN SL_BINARY_DIR "/sluice"
#define STORIES SL_SOURCE_DIR "/models/stories260K.gguf"
#define MICRO SL_SHARED_DIR "/models/micro-llama.Q8_0.gguf"
#define MICRO_F16 SL_SHARED_DIR "/models/micro-llama.F16.gguf"

static char g_tmp[64];

static inline void setup(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/sl_cli_XXXXXX");
    cr_assert_not_null(mkdtemp(g_tmp));
}

static inline void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd)) { /* best effort */ }
}

/* What one run printed. */
typedef struct result { int status; int sig; char *out, *err; size_t out_len; } result;

static inline char *slurp(const char *p, size_t *n)
{
    FILE *f = fopen(p, "rb");
    if (!f) { if (n) *n = 0; return strdup(""); }
    char *b = malloc(1 << 20);
    size_t k = fread(b, 1, (1 << 20) - 1, f);
    b[k] = 0;
    fclose(f);
    if (n) *n = k;
    return b;
}

/* How a run's standard descriptors are set up. */
enum { FD_FILE = 0, FD_CLOSED = 1, FD_DEVFULL = 2 };

typedef struct spawn_opts {
    const char *stdin_text;   /* NULL: /dev/null */
    int out_mode, in_mode;    /* FD_* for fd 1 and fd 0 */
    int signal_after_ms, sig, signal_after_bytes; /* sig this long after stdout has more bytes (ms 0: none) */
    const char *out_path;     /* (set by run_ex) */
    bool as_nobody;           /* when root: run as uid/gid 65534 (to check what needs no root) */
} spawn_opts;

static inline void wait_exit(pid_t pid, result *r, const spawn_opts *so)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    bool signalled = false;
    int st;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) break;
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        double ms = (t.tv_sec - t0.tv_sec) * 1e3 + (t.tv_nsec - t0.tv_nsec) / 1e6;
        if (so && so->signal_after_ms && !signalled) {
            struct stat st_out;
            static double t_out;
            if (stat(so->out_path, &st_out) == 0 && st_out.st_size > so->signal_after_bytes) {
                if (!t_out) t_out = ms;
                if (ms - t_out >= so->signal_after_ms) { kill(pid, so->sig); signalled = true; t_out = 0; }
            }
        }
        if (ms > 120000) { kill(pid, SIGKILL); waitpid(pid, &st, 0); cr_assert_fail("sluice did not exit in 120 s"); }
        usleep(5000);
    }
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r->sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

/* Run sluice with argv (argv[0] is "sluice"). */
static inline result run_ex(const char *const *argv, const spawn_opts *so)
{
    static int seq;
    char out[128], err[128], in[128];
    snprintf(out, sizeof out, "%s/out.%d", g_tmp, seq);
    snprintf(err, sizeof err, "%s/err.%d", g_tmp, seq);
    snprintf(in, sizeof in, "%s/in.%d", g_tmp, seq++);
    if (so && so->stdin_text) {
        FILE *f = fopen(in, "w");
        cr_assert_not_null(f);
        fputs(so->stdin_text, f);
        fclose(f);
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    int out_mode = so ? so->out_mode : FD_FILE, in_mode = so ? so->in_mode : FD_FILE;
    if (in_mode == FD_CLOSED) posix_spawn_file_actions_addclose(&fa, 0);
    else posix_spawn_file_actions_addopen(&fa, 0, so && so->stdin_text ? in : "/dev/null", O_RDONLY, 0);
    if (out_mode == FD_CLOSED) posix_spawn_file_actions_addclose(&fa, 1);
    else if (out_mode == FD_DEVFULL) posix_spawn_file_actions_addopen(&fa, 1, "/dev/full", O_WRONLY, 0);
    else posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int rc;
    if (so && so->as_nobody && getuid() == 0) {
        fflush(NULL);
        pid = fork();
        if (pid == 0) {
            int in_fd = open(so->stdin_text ? in : "/dev/null", O_RDONLY);
            int out_fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0666), err_fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0666);
            dup2(in_fd, 0);
            dup2(out_fd, 1);
            dup2(err_fd, 2);
            if (setgid(65534) || setuid(65534)) _exit(126);
            execve(SLUICE_BIN, (char *const *)argv, environ);
            _exit(127);
        }
        rc = pid < 0 ? errno : 0;
    } else {
        rc = posix_spawn(&pid, SLUICE_BIN, &fa, NULL, (char *const *)argv, environ);
    }
    posix_spawn_file_actions_destroy(&fa);
    cr_assert_eq(rc, 0, "spawn: %s", strerror(rc));
    result r = { 0 };
    spawn_opts so2 = so ? *so : (spawn_opts){ 0 };
    so2.out_path = out;
    wait_exit(pid, &r, &so2);
    r.out = slurp(out, &r.out_len);
    r.err = slurp(err, NULL);
    return r;
}

static inline result run(const char *const *argv) { return run_ex(argv, NULL); }

static inline void result_free(result *r) { free(r->out); free(r->err); }

#define ARGV(...) ((const char *const[]){ "sluice", __VA_ARGS__, NULL })

/* A JSON number after "key": in j (the test fails when the key is missing). */
static inline double json_num(const char *j, const char *key)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(j, k);
    cr_assert_not_null(p, "no %s in %s", key, j);
    return strtod(p + strlen(k), NULL);
}

#endif
