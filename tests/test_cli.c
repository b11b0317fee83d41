/* tests/test_cli.c — the sluice command line as a user and a script meet it: flags, messages, exit
 * codes, write errors, standard descriptors, signals, bench and plan tables.  Each test runs the built
 * binary (stdout and stderr go to files in a temporary directory) and checks what it printed.
 * Models: the bundled stories260K and the micro models of ../shared. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
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

static void setup(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/sl_cli_XXXXXX");
    cr_assert_not_null(mkdtemp(g_tmp));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd)) { /* best effort */ }
}

/* What one run printed. */
typedef struct result { int status; int sig; char *out, *err; size_t out_len; } result;

static char *slurp(const char *p, size_t *n)
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
    int signal_after_ms, sig; /* send sig after this long (0: none) */
} spawn_opts;

static void wait_exit(pid_t pid, result *r, const spawn_opts *so)
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
        if (so && so->signal_after_ms && !signalled && ms >= so->signal_after_ms) { kill(pid, so->sig); signalled = true; }
        if (ms > 120000) { kill(pid, SIGKILL); waitpid(pid, &st, 0); cr_assert_fail("sluice did not exit in 120 s"); }
        usleep(5000);
    }
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r->sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

/* Run sluice with argv (argv[0] is "sluice"). */
static result run_ex(const char *const *argv, const spawn_opts *so)
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
    int rc = posix_spawn(&pid, SLUICE_BIN, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    cr_assert_eq(rc, 0, "spawn: %s", strerror(rc));
    result r = { 0 };
    wait_exit(pid, &r, so);
    r.out = slurp(out, &r.out_len);
    r.err = slurp(err, NULL);
    return r;
}

static result run(const char *const *argv) { return run_ex(argv, NULL); }

static void result_free(result *r) { free(r->out); free(r->err); }

#define ARGV(...) ((const char *const[]){ "sluice", __VA_ARGS__, NULL })

TestSuite(cli, .init = setup, .fini = teardown, .timeout = 300);

/* ---- issue 14: the shared library exports the public API only ---------------------------------- */

Test(cli, shared_library_exports_no_internals)
{
    void *h = dlopen(SL_BINARY_DIR "/libsluice.so", RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(h, "%s", dlerror());
    cr_expect_not_null(dlsym(h, "sluice_open"));
    cr_expect_not_null(dlsym(h, "sluice_page_cache"));
    cr_expect_null(dlsym(h, "sluice__fingerprint"), "an internal sluice__ symbol is exported");
    cr_expect_null(dlsym(h, "sl_model_open"), "an internal sl_ symbol is exported");
    dlclose(h);
}
