/* tests/test_chat_tty.c — `sluice chat` as a person and as a script use it.
 *
 * Terminal: the chat runs on a pseudo-terminal (forkpty), the test types two messages, waits for
 * each answer to end (the next "> " prompt), presses Ctrl-C in the middle of a long answer (the
 * answer stops, the chat goes on), and leaves with /quit.  Pipe: the conversation comes from stdin,
 * only answers reach stdout, one line each; a session file resumes the conversation.
 * Models: the bundled stories260K (fast answers) and micro-llama F16 (slow enough to interrupt).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "qemu_testutil.h"

#define SLUICE_BIN SL_BINARY_DIR "/sluice"
#define STORIES SL_SOURCE_DIR "/models/stories260K.gguf"
#define SLOW_MODEL SL_SHARED_DIR "/models/micro-llama.F16.gguf"

typedef struct term { int fd; pid_t pid; char buf[1 << 16]; size_t n; } term;

static char g_state[64] = "/tmp";   /* XDG_STATE_HOME of the terminal tests (made per test) */

static void state_dir(void)
{
    snprintf(g_state, sizeof g_state, "/tmp/sl_state_XXXXXX");
    cr_assert_not_null(mkdtemp(g_state));
}

static void state_dir_rm(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_state);
    if (system(cmd)) { /* best effort */ }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void term_start(term *t, const char *const *argv)
{
    struct winsize ws = { .ws_row = 40, .ws_col = 120 };
    t->n = 0;
    t->pid = forkpty(&t->fd, NULL, NULL, &ws);
    cr_assert_geq(t->pid, 0, "forkpty: %s", strerror(errno));
    if (t->pid == 0) {
        setenv("TERM", "xterm", 1);
        setenv("XDG_STATE_HOME", g_state, 1);   /* the chat history goes here, not into $HOME */
        execv(SLUICE_BIN, (char *const *)argv);
        _exit(127);
    }
}

/* Read what the terminal shows until `want` appears after offset `from` (returns its offset), or
 * fail after `limit` seconds. */
static size_t term_wait(term *t, size_t from, const char *want, double limit)
{
    double t0 = now_s();
    for (;;) {
        t->buf[t->n] = 0;
        char *hit = strstr(t->buf + from, want);
        if (hit) return (size_t)(hit - t->buf);
        double left = limit - (now_s() - t0);
        cr_assert_gt(left, 0, "no '%s' after %.0f s; the terminal shows:\n%s", want, limit, t->buf + from);
        struct pollfd p = { t->fd, POLLIN, 0 };
        if (poll(&p, 1, 100) > 0) {
            ssize_t r = read(t->fd, t->buf + t->n, sizeof t->buf - 1 - t->n);
            if (r <= 0) {   /* EIO: the child closed the terminal */
                t->buf[t->n] = 0;
                cr_assert_fail("the chat exited while waiting for '%s':\n%s", want, t->buf + from);
            }
            t->n += (size_t)r;
        }
    }
}

static void term_type(term *t, const char *s)
{
    size_t n = strlen(s);
    cr_assert_eq(write(t->fd, s, n), (ssize_t)n);
}

static int term_exit(term *t, double limit)
{
    double t0 = now_s();
    int st;
    for (;;) {
        char tmp[4096];
        struct pollfd p = { t->fd, POLLIN, 0 };
        ssize_t got = poll(&p, 1, 50) > 0 ? read(t->fd, tmp, sizeof tmp) : 0;
        if (got > 0) {   /* keep the last 2 KiB for the failure message */
            if (t->n + (size_t)got >= sizeof t->buf) t->n = 0;
            memcpy(t->buf + t->n, tmp, (size_t)got);
            t->n += (size_t)got;
        }
        pid_t r = waitpid(t->pid, &st, WNOHANG);
        if (r == t->pid) break;
        if (now_s() - t0 > limit) {
            kill(t->pid, SIGKILL);
            waitpid(t->pid, &st, 0);
            t->buf[t->n] = 0;
            cr_assert_fail("the chat did not exit within %.0f s; the terminal ends with:\n%s", limit,
                           t->buf + (t->n > 2048 ? t->n - 2048 : 0));
        }
    }
    close(t->fd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Wait for exit, keeping everything the terminal shows in t->buf. */
static int term_exit_keep(term *t, double limit)
{
    double t0 = now_s();
    int st;
    for (;;) {
        struct pollfd p = { t->fd, POLLIN, 0 };
        if (poll(&p, 1, 50) > 0) {
            ssize_t r = read(t->fd, t->buf + t->n, sizeof t->buf - 1 - t->n);
            if (r > 0) t->n += (size_t)r;
        }
        pid_t r = waitpid(t->pid, &st, WNOHANG);
        if (r == t->pid) break;
        if (now_s() - t0 > limit) {
            kill(t->pid, SIGKILL);
            waitpid(t->pid, &st, 0);
            cr_assert_fail("sluice did not exit within %.0f s", limit);
        }
    }
    for (;;) {   /* what is left after the exit */
        struct pollfd p = { t->fd, POLLIN, 0 };
        if (poll(&p, 1, 50) <= 0) break;
        ssize_t r = read(t->fd, t->buf + t->n, sizeof t->buf - 1 - t->n);
        if (r <= 0) break;
        t->n += (size_t)r;
    }
    t->buf[t->n] = 0;
    close(t->fd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The text between two offsets, without the echoed input line and terminal control sequences. */
static char *between(const term *t, size_t a, size_t b)
{
    char *s = strndup(t->buf + a, b - a), *w = s;
    for (char *r = s; *r; r++) {
        if (*r == '\x1b') { while (*r && !(*r >= '@' && *r <= '~' && *r != '[')) r++; if (!*r) break; continue; }
        if (*r != '\r') *w++ = *r;
    }
    *w = 0;
    return s;
}

/* `sluice chat` on the slow model (greedy, one thread, chatml) with context `ctx` and answers of at
 * most `n` tokens: the offset of its first prompt. */
static size_t slow_chat_start(term *t, const char *ctx, const char *n)
{
    const char *argv[] = { "sluice", "chat", "-m", SLOW_MODEL, "-t", "1", "--temp", "0", "-c", ctx, "-n", n,
                           "--chat-template", "chatml", NULL };
    term_start(t, argv);
    return term_wait(t, 0, "> ", 60);
}

/* No Criterion timeouts (they leak inside Criterion under LSan when tests run in parallel): every
 * wait here has its own limit, after which the chat is killed. */
Test(chat_tty, two_turns_and_quit)
{
    const char *argv[] = { "sluice", "chat", "-m", STORIES, "-t", "1", "--temp", "0", "-n", "12", NULL };
    term t;
    term_start(&t, argv);
    size_t p0 = term_wait(&t, 0, "> ", 60);
    char *banner = between(&t, 0, p0);
    cr_expect(strstr(banner, "plain template"), "no notice about the missing chat template: %s", banner);
    cr_expect(strstr(banner, "/help"), "no banner: %s", banner);
    free(banner);

    term_type(&t, "Hello, who are you?\n");
    size_t e1 = term_wait(&t, p0 + 2, "Hello, who are you?", 10);   /* the terminal echoes the line */
    size_t p1 = term_wait(&t, e1, "\n> ", 60);
    char *a1 = between(&t, e1 + strlen("Hello, who are you?"), p1);
    cr_expect_gt(strlen(a1), 3u, "first answer is empty: '%s'", a1);
    free(a1);

    term_type(&t, "Tell me a story.\n");
    size_t e2 = term_wait(&t, p1 + 3, "Tell me a story.", 10);
    size_t p2 = term_wait(&t, e2, "\n> ", 60);
    char *a2 = between(&t, e2 + strlen("Tell me a story."), p2);
    cr_expect_gt(strlen(a2), 3u, "second answer is empty: '%s'", a2);
    free(a2);

    term_type(&t, "/stats\n");
    size_t s = term_wait(&t, p2 + 3, "context positions used, 4 messages", 10);
    term_wait(&t, s, "\n> ", 10);
    term_type(&t, "/quit\n");
    cr_expect_eq(term_exit(&t, 20), 0);
}

/* Ctrl-C in the middle of an answer stops that answer only; the next message is answered. */
Test(chat_tty, ctrl_c_stops_the_answer_not_the_chat)
{
    term t;
    size_t p0 = slow_chat_start(&t, "512", "450");
    term_type(&t, "Once upon a time\n");
    size_t e1 = term_wait(&t, p0 + 2, "Once upon a time", 10);
    /* wait for the answer to start streaming, then interrupt it */
    double t0 = now_s();
    while (t.n < e1 + 40) {
        struct pollfd p = { t.fd, POLLIN, 0 };
        cr_assert_lt(now_s() - t0, 60, "no answer after 60 s");
        if (poll(&p, 1, 100) > 0) {
            ssize_t r = read(t.fd, t.buf + t.n, sizeof t.buf - 1 - t.n);
            cr_assert_gt(r, 0);
            t.n += (size_t)r;
        }
    }
    t.buf[t.n] = 0;
    cr_assert_null(strstr(t.buf + e1, "\n> "), "the answer ended before Ctrl-C could be tested");
    term_type(&t, "\x03");   /* the terminal's VINTR: SIGINT to the foreground process */
    size_t st = term_wait(&t, e1, "[stopped]", 10);
    size_t p1 = term_wait(&t, st, "\n> ", 10);
    term_type(&t, "/reset\n");
    size_t r = term_wait(&t, p1 + 3, "conversation cleared", 10);
    size_t p2 = term_wait(&t, r, "\n> ", 10);
    (void)p2;
    /* /quit, not Ctrl-D: right after an interrupted answer the prompt can show while the terminal
     * is still in cooked mode, and a Ctrl-D typed in that moment is eaten by the line discipline
     * (seen in CI under load; see the closing note of session 4): a known issue, not what this
     * test is about (Ctrl-C stops the answer and the chat goes on). */
    term_type(&t, "/quit\r");
    cr_expect_eq(term_exit(&t, 30), 0);
}

/* ---- line editing, history, type-ahead, progress bars (issue 21) -------------------------------- */

/* Arrow keys move in the line: "/qit", two steps left, "u" makes "/quit", which leaves. */
Test(chat_tty, arrow_keys_edit_the_line, .init = state_dir, .fini = state_dir_rm)
{
    const char *argv[] = { "sluice", "chat", "-m", STORIES, "-t", "1", "--temp", "0", "-n", "8", NULL };
    term t;
    term_start(&t, argv);
    term_wait(&t, 0, "> ", 60);
    term_type(&t, "/qit\x1b[D\x1b[Du\r");
    cr_expect_eq(term_exit(&t, 20), 0, "the edited line was not /quit");
}

/* Up arrow recalls the last line; the history is kept in $XDG_STATE_HOME/sluice/chat_history. */
Test(chat_tty, history_recalls_the_last_message, .init = state_dir, .fini = state_dir_rm)
{
    const char *argv[] = { "sluice", "chat", "-m", STORIES, "-t", "1", "--temp", "0", "-n", "8", NULL };
    term t;
    term_start(&t, argv);
    size_t p0 = term_wait(&t, 0, "> ", 60);
    term_type(&t, "/stats\r");
    size_t s1 = term_wait(&t, p0, "context positions used", 10);
    size_t p1 = term_wait(&t, s1, "\n> ", 10);
    term_type(&t, "\x1b[A\r");   /* up arrow, Enter: /stats again */
    size_t s2 = term_wait(&t, p1, "context positions used", 10);
    term_wait(&t, s2, "\n> ", 10);
    term_type(&t, "/quit\r");
    cr_expect_eq(term_exit(&t, 20), 0);
    char path[128], line[256] = "";
    snprintf(path, sizeof path, "%s/sluice/chat_history", g_state);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "no history file at %s", path);
    bool found = false;
    while (fgets(line, sizeof line, f)) found |= strstr(line, "/stats") != NULL;
    fclose(f);
    cr_expect(found, "the history file lacks /stats");
}

/* A multi-line paste (bracketed by the terminal) is one message, not one per line. */
Test(chat_tty, multi_line_paste_is_one_message, .init = state_dir, .fini = state_dir_rm)
{
    const char *argv[] = { "sluice", "chat", "-m", STORIES, "-t", "1", "--temp", "0", "-n", "8", NULL };
    term t;
    term_start(&t, argv);
    size_t p0 = term_wait(&t, 0, "> ", 60);
    cr_expect(strstr(t.buf, "\x1b[?2004h"), "bracketed paste was not asked for");
    term_type(&t, "\x1b[200~Once upon a time\nthere was a cat\x1b[201~\r");
    size_t p1 = term_wait(&t, p0 + 2, "\n> ", 60);
    term_type(&t, "/stats\r");
    size_t s = term_wait(&t, p1, "context positions used, 2 messages", 10);
    term_wait(&t, s, "\n> ", 10);
    term_type(&t, "/quit\r");
    cr_expect_eq(term_exit(&t, 20), 0);
}

/* What is typed while an answer streams is not echoed into it; it waits for the next prompt. */
Test(chat_tty, typed_ahead_text_stays_out_of_the_answer, .init = state_dir, .fini = state_dir_rm)
{
    /* the keys must arrive after the chat turned echo off and before the answer ends; the test sees
     * only output, and under qemu-user on a loaded machine that window moves (an emulated run at
     * load 12 on 2 cores saw the keys echoed; the same test alone passed) */
    if (tq_under_qemu_user())
        cr_skip_test("skipped: under qemu-user the typed-ahead keys cannot be timed into the answer reliably");
    term t;
    size_t p0 = slow_chat_start(&t, "512", "120");
    term_type(&t, "Once upon a time\r");
    size_t e1 = term_wait(&t, p0 + 2, "Once upon a time", 10);
    double t0 = now_s();
    while (t.n < e1 + 30) {   /* the answer is streaming */
        struct pollfd p = { t.fd, POLLIN, 0 };
        cr_assert_lt(now_s() - t0, 60, "no answer after 60 s");
        if (poll(&p, 1, 100) > 0) {
            ssize_t r = read(t.fd, t.buf + t.n, sizeof t.buf - 1 - t.n);
            cr_assert_gt(r, 0);
            t.n += (size_t)r;
        }
    }
    t.buf[t.n] = 0;
    cr_assert_null(strstr(t.buf + e1, "\n> "), "the answer ended before the type-ahead could be tested");
    term_type(&t, "zqzq");
    size_t p1 = term_wait(&t, e1, "\n> ", 60);
    char *answer = between(&t, e1, p1);
    cr_expect_null(strstr(answer, "zqzq"), "typed-ahead text was echoed into the answer: %s", answer);
    free(answer);
    term_type(&t, "\x15/quit\r");   /* Ctrl-U clears the waiting text */
    cr_expect_eq(term_exit(&t, 30), 0);
}

/* Keys typed the moment the prompt shows reach the line editor, not the kernel's line discipline:
 * libedit prints "> " before it switches the terminal to its own mode, and a chat that left the
 * terminal canonical between lines had them echoed twice (and text typed ahead could no longer be
 * erased with Ctrl-U; that made a "/quit" into a message in CI).  The window is microseconds, so
 * one turn rarely hits it; the old code failed 7 turns in 100 with the two cores loaded. */
Test(chat_tty, keys_typed_as_the_prompt_shows_are_echoed_once, .init = state_dir, .fini = state_dir_rm)
{
    if (tq_under_qemu_user())
        cr_skip_test("skipped: a timing race the emulator's pace does not reproduce (the terminal code is the same C everywhere)");
    term t;
    size_t p = slow_chat_start(&t, "4096", "1");
    int twice = 0;
    for (int i = 0; i < 40; i++) {
        char word[16];
        snprintf(word, sizeof word, "w%03dq", i);
        size_t from = p;
        term_type(&t, word);
        term_type(&t, "\r");
        p = term_wait(&t, from + 2, "\n> ", 60);
        char *shown = strndup(t.buf + from, p - from);
        char *first = strstr(shown, word);
        cr_assert_not_null(first, "the typed '%s' was not shown", word);
        if (strstr(first + 1, word)) twice++;
        free(shown);
    }
    cr_expect_eq(twice, 0, "%d of 40 typed lines were echoed twice", twice);
    term_type(&t, "/quit\r");
    cr_expect_eq(term_exit(&t, 30), 0);
}

/* `sluice run` on a terminal: the progress bar of the prompt never erases the echoed prompt. */
Test(chat_tty, echoed_prompt_survives_the_progress_bar)
{
    char prompt[4096] = "Once upon a time";
    /* long enough for the bar to be drawn natively; under qemu-user a sixth of it takes longer still */
    const int reps = tq_under_qemu_user() ? 10 : 60;
    for (int i = 0; i < reps; i++) strcat(prompt, " there was a cat");
    const char *argv[] = { "sluice", "run", "-m", SLOW_MODEL, "-t", "1", "--temp", "0", "-b", "4", "-n", "2",
                           "-p", prompt, NULL };
    term t;
    term_start(&t, argv);
    cr_expect_eq(term_exit_keep(&t, 120), 0);
    t.buf[t.n] = 0;
    cr_assert(strstr(t.buf, "prompt ") && strstr(t.buf, " tok"), "no progress bar was drawn:\n%s", t.buf);
    /* everything after the bar's last erase must still hold the whole prompt */
    char *last = NULL;
    for (char *p = strstr(t.buf, "\x1b[K"); p; p = strstr(p + 1, "\x1b[K")) last = p;
    cr_assert_not_null(last);
    cr_expect(strstr(last, "Once upon a time there was a cat") && strstr(last, "there was a cat there was a cat"),
              "the prompt echo was erased by the bar:\n%s", last);
}

/* ---- stdin is not a terminal -------------------------------------------------------------------- */

static char g_tmp[64];

static int run_pipe(const char *const *argv, const char *input, char **out, char **err)
{
    char in_p[128], out_p[128], err_p[128];
    snprintf(in_p, sizeof in_p, "%s/in", g_tmp);
    snprintf(out_p, sizeof out_p, "%s/out", g_tmp);
    snprintf(err_p, sizeof err_p, "%s/err", g_tmp);
    FILE *f = fopen(in_p, "w");
    fputs(input, f);
    fclose(f);
    pid_t pid = fork();
    if (pid == 0) {
        int i = open(in_p, O_RDONLY), o = open(out_p, O_WRONLY | O_CREAT | O_TRUNC, 0644),
            e = open(err_p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(i, 0);
        dup2(o, 1);
        dup2(e, 2);
        execv(SLUICE_BIN, (char *const *)argv);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    char *bufs[2] = { NULL, NULL };
    const char *paths[2] = { out_p, err_p };
    for (int k = 0; k < 2; k++) {
        f = fopen(paths[k], "r");
        bufs[k] = calloc(1, 1 << 16);
        size_t n = fread(bufs[k], 1, (1 << 16) - 1, f);
        bufs[k][n] = 0;
        fclose(f);
    }
    *out = bufs[0];
    *err = bufs[1];
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int count(const char *s, char c)
{
    int n = 0;
    for (; *s; s++) n += *s == c;
    return n;
}

static void setup(void) { snprintf(g_tmp, sizeof g_tmp, "/tmp/sl_chat_XXXXXX"); cr_assert_not_null(mkdtemp(g_tmp)); }
static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd)) { /* best effort */ }
}

TestSuite(chat_pipe, .init = setup, .fini = teardown);

Test(chat_pipe, answers_only_on_stdout_and_sessions_resume)
{
    char sess[128];
    snprintf(sess, sizeof sess, "%s/chat.session", g_tmp);
    const char *argv[] = { "sluice", "chat", "-m", STORIES, "-t", "1", "--temp", "0", "-n", "10", "--session", sess,
                           "--system", "You tell stories.", NULL };
    char *out, *err;
    /* two messages (the second continued over two lines), a command, a blank line */
    int rc = run_pipe(argv, "Hello\n/stats\n\nTell me\\\na story\n", &out, &err);
    cr_expect_eq(rc, 0, "exit %d: %s", rc, err);
    cr_expect_eq(count(out, '\n'), 2, "want two answer lines on stdout, got: [%s]", out);
    cr_expect_null(strstr(out, "> "), "a prompt was printed without a terminal: [%s]", out);
    cr_expect(strstr(err, "context positions used"), "/stats goes to stderr: %s", err);
    cr_expect(strstr(err, "saved"), "no session saved: %s", err);
    free(out);
    free(err);
    /* the second run resumes the saved conversation (system + 2 exchanges) and continues it */
    rc = run_pipe(argv, "And then?\n", &out, &err);
    cr_expect_eq(rc, 0, "exit %d: %s", rc, err);
    cr_expect(strstr(err, "resumed 5 messages"), "stderr: %s", err);
    cr_expect_eq(count(out, '\n'), 1, "stdout: [%s]", out);
    free(out);
    free(err);
    /* an unknown template name is refused with the list of known ones */
    const char *bad[] = { "sluice", "chat", "-m", STORIES, "--chat-template", "nope", NULL };
    rc = run_pipe(bad, "", &out, &err);
    cr_expect_eq(rc, 2);
    cr_expect(strstr(err, "chatml") && strstr(err, "nope"), "%s", err);
    free(out);
    free(err);
}
