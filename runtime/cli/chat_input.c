/* runtime/cli/chat_input.c — reading `sluice chat`'s lines (contract in chat_input.h).
 *
 * Without stdio buffering, so that a signal interrupts the read (Ctrl-C at the prompt, SIGTERM
 * while waiting for the user); with libedit when stdin and stdout are terminals.
 */
#include "runtime/cli/chat_input.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The terminal between two lines typed (stdin a terminal): no echo, so typed-ahead text never lands
 * inside an answer.  With libedit also not canonical, until libedit reads the next line: it prints
 * its prompt before it switches to its own mode, and keys typed as the prompt showed met the
 * kernel's line discipline: echoed twice, and typed-ahead text escaped the editor's Ctrl-U (CI once
 * sent "<typed-ahead>/quit" as a message).  libedit learns the terminal's settings
 * only in canonical mode, so it keeps those of el_init().  Without libedit lines are read canonical:
 * only the echo goes, and chat_input_release() restores the terminal. */
void chat_input_hold(chat_input *in)
{
    if (!in->tty_in) return;
    struct termios t = in->term0;
    t.c_lflag &= ~(tcflag_t)ECHO;
#ifdef SL_HAVE_LIBEDIT
    if (in->el) { t.c_lflag &= ~(tcflag_t)ICANON; t.c_cc[VMIN] = 1; t.c_cc[VTIME] = 0; }   /* ISIG stays: Ctrl-C */
#endif
    tcsetattr(STDIN_FILENO, TCSANOW, &t);
}

void chat_input_release(chat_input *in)
{
#ifdef SL_HAVE_LIBEDIT
    if (in->el) return;   /* el_gets() switches from the held mode to its own */
#endif
    if (in->tty_in) tcsetattr(STDIN_FILENO, TCSANOW, &in->term0);
}


/* Read one line from fd 0 without stdio buffering (so a signal interrupts it), continuing lines
 * that end in a backslash.  The line is returned without its newline in *line (malloc'd). */
static int read_line(const chat_input *in, char **line, size_t *len)
{
    size_t cap = 256, n = 0;
    char *b = malloc(cap);
    if (!b) return CHAT_LINE_ERR;
    for (;;) {
        char c;
        ssize_t r = read(STDIN_FILENO, &c, 1);
        if (r < 0 && errno == EINTR) {
            if (*in->sigint || *in->sigterm) { free(b); return CHAT_LINE_INTR; }
            continue;
        }
        if (r < 0) { free(b); return CHAT_LINE_ERR; }
        if (r == 0) {
            if (!n) { free(b); return CHAT_LINE_EOF; }
            break;
        }
        if (c == '\n') {
            if (n && b[n - 1] == '\\') { b[n - 1] = '\n'; continue; }
            break;
        }
        if (n + 2 > cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) { free(b); return CHAT_LINE_ERR; }
            b = nb;
        }
        b[n++] = c;
    }
    if (n && b[n - 1] == '\r') n--;
    b[n] = 0;
    *line = b;
    *len = n;
    return CHAT_LINE_OK;
}

#ifdef SL_HAVE_LIBEDIT
static char *el_prompt(EditLine *el) { (void)el; return "> "; }

/* $XDG_STATE_HOME/sluice/chat_history (default ~/.local/state/...); "" when there is no home. */
static void history_path(char *buf, size_t len)
{
    const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    char dir[3072];
    buf[0] = 0;
    if (state && *state) snprintf(dir, sizeof dir, "%s/sluice", state);
    else if (home && *home) snprintf(dir, sizeof dir, "%s/.local/state/sluice", home);
    else return;
    /* mkdir -p of the last two levels is enough for the default layout */
    char parent[3072];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash) { *slash = 0; mkdir(parent, 0700); }
    if (mkdir(dir, 0700) && errno != EEXIST) return;
    snprintf(buf, len, "%s/chat_history", dir);
}

/* Bracketed paste: the terminal wraps pasted text in ESC [ 200 ~ ... ESC [ 201 ~, and the whole
 * paste, newlines included, goes into the line being edited (one message), instead of every pasted
 * line becoming a message of its own. */
static unsigned char paste_in(EditLine *el, int ch)
{
    (void)ch;
    static const char end[] = "\x1b[201~";
    char buf[4096];
    size_t n = 0, matched = 0;
    for (;;) {
        char c;
        if (el_getc(el, &c) != 1) break;
        if (c == end[matched]) {
            if (++matched == sizeof end - 1) break;
            continue;
        }
        for (size_t i = 0; i < matched; i++) {   /* a false start of the end marker is text */
            if (n + 1 >= sizeof buf) { buf[n] = 0; el_insertstr(el, buf); n = 0; }
            buf[n++] = end[i];
        }
        matched = c == end[0];
        if (matched) continue;
        if (c == '\r') c = '\n';
        if (n + 1 >= sizeof buf) { buf[n] = 0; el_insertstr(el, buf); n = 0; }
        buf[n++] = c;
    }
    buf[n] = 0;
    if (n) el_insertstr(el, buf);
    return CC_REFRESH;
}

static void editor_open(chat_input *in)
{
    HistEvent ev;
    in->hist = history_init();
    in->el = el_init("sluice", stdin, stdout, stderr);
    if (!in->hist || !in->el) return;
    history(in->hist, &ev, H_SETSIZE, 1000);
    history(in->hist, &ev, H_SETUNIQUE, 1);
    history_path(in->hist_path, sizeof in->hist_path);
    if (*in->hist_path) history(in->hist, &ev, H_LOAD, in->hist_path);
    el_set(in->el, EL_EDITOR, "emacs");
    el_set(in->el, EL_PROMPT, el_prompt);
    el_set(in->el, EL_HIST, history, in->hist);
    el_set(in->el, EL_SIGNAL, 0);   /* our handlers stay in charge of Ctrl-C */
    el_source(in->el, NULL);        /* ~/.editrc, as every libedit program */
    /* the wide form keeps our static names (the narrow one copies them and never frees the copies) */
    el_wset(in->el, EL_ADDFN, L"sluice-paste", L"insert a bracketed paste as it is", paste_in);
    el_set(in->el, EL_BIND, "\x1b[200~", "sluice-paste", NULL);
    fputs("\x1b[?2004h", stdout);   /* ask the terminal for bracketed paste */
    fflush(stdout);
    chat_input_hold(in);
}

static void editor_close(chat_input *in)
{
    if (in->el) { fputs("\x1b[?2004l", stdout); fflush(stdout); }
    if (in->el) el_end(in->el);
    if (in->hist) history_end(in->hist);
    in->el = NULL;
    in->hist = NULL;
}

/* One line from the editor (a line ending in "\" continues on the next). */
static int editor_line(chat_input *in, char **line, size_t *len)
{
    size_t n = 0;
    char *b = NULL;
    for (;;) {
        int count = 0;
        errno = 0;
        const char *l = el_gets(in->el, &count);
        chat_input_hold(in);   /* el_gets() left the terminal canonical: hold it before anything else runs */
        if (!l || count <= 0) {
            free(b);
            if (*in->sigint || *in->sigterm) return CHAT_LINE_INTR;
            if (!l && errno == EINTR) continue;
            return n ? CHAT_LINE_OK : CHAT_LINE_EOF;
        }
        size_t k = (size_t)count;
        if (k && l[k - 1] == '\n') k--;
        char *nb = realloc(b, n + k + 2);
        if (!nb) { free(b); return CHAT_LINE_ERR; }
        b = nb;
        memcpy(b + n, l, k);
        n += k;
        b[n] = 0;
        if (n && b[n - 1] == '\\') { b[n - 1] = '\n'; continue; }
        break;
    }
    HistEvent ev;
    if (n && strspn(b, " \t") < n) {
        history(in->hist, &ev, H_ENTER, b);
        if (*in->hist_path) history(in->hist, &ev, H_SAVE, in->hist_path);
    }
    *line = b;
    *len = n;
    return CHAT_LINE_OK;
}
#endif

int chat_input_line(chat_input *in, char **line, size_t *len)
{
#ifdef SL_HAVE_LIBEDIT
    if (in->el) return editor_line(in, line, len);
#endif
    if (in->tty_in) { fputs("> ", stdout); fflush(stdout); }
    return read_line(in, line, len);
}

void chat_input_open(chat_input *in, const volatile sig_atomic_t *sigint, const volatile sig_atomic_t *sigterm)
{
    *in = (chat_input){ .sigint = sigint, .sigterm = sigterm };
    in->tty_in = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &in->term0) == 0;
}

void chat_input_edit(chat_input *in)
{
#ifdef SL_HAVE_LIBEDIT
    if (in->tty_in && !in->el) editor_open(in);
#else
    (void)in;
#endif
}

void chat_input_close(chat_input *in)
{
#ifdef SL_HAVE_LIBEDIT
    editor_close(in);
#endif
    if (in->tty_in) tcsetattr(STDIN_FILENO, TCSANOW, &in->term0);
}
