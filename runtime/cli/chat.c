/* runtime/cli/chat.c — `sluice chat`: a conversation with a chat model, kept in the KV cache.
 *
 * Every turn renders the whole conversation with the model's chat template, tokenizes it, and
 * hands it to sluice_prefill(), which keeps the longest prefix already in the cache and evaluates
 * only the rest (the new user message, plus whatever of the last answer tokenizes differently from
 * how it was generated).  This stays correct whatever a template does with whitespace or special
 * tokens, and costs little: with streamed weights a batch of new tokens costs about one pass over
 * the file whatever its length.  When the conversation outgrows the context, the oldest turns are
 * dropped (the system message stays) and the rest is evaluated again.
 *
 * Input: a terminal (prompt "> ", Ctrl-C stops the answer in progress, Ctrl-D or /quit leaves), or
 * any other stdin, read line by line, one message per line ("\" at the end of a line continues the
 * message on the next).  Only answers go to stdout; notices and command output go to stderr.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "include/sluice.h"
#include "runtime/api/api_internal.h"
#include "runtime/text/chat_template.h"
#include "kernels/clock.h"
#include "runtime/cli/cli.h"
#include "runtime/cli/genopts.h"
#include "runtime/api/progress.h"

int cmd_chat(int argc, char **argv);

static volatile sig_atomic_t g_sigint, g_sigterm;
static sluice_ctx *volatile g_ctx;

/* Ctrl-C: stop the answer being generated (or the line being typed); SIGTERM: leave. */
static void on_signal(int sig)
{
    if (sig == SIGTERM) g_sigterm = 1;
    else g_sigint = 1;
    sluice_ctx *c = g_ctx;
    if (c) sluice_cancel(c);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sluice chat [-m MODEL] [--system TEXT] [-n MAX] [options]\n"
            "  -s, --system TEXT       system message\n"
            "  -n, --n-predict N       longest answer in tokens (default 512)\n"
            "      --chat-template NAME  format turns with NAME instead of the model's template:\n"
            "                          %s\n"
            "      --stats             print figures to stderr at the end\n"
            "      --quiet             no banner, notices or progress bars\n",
            sl_chat_template_names());
    gen_opts_usage(f);
    fprintf(f,
            "in the chat: /reset (forget the conversation), /stats, /save FILE (session file), /quit;\n"
            "Ctrl-C stops the current answer, Ctrl-D leaves.  When stdin is not a terminal every line is\n"
            "one message (end a line with \\ to continue the message on the next line).\n");
}

typedef struct msg { char *role, *content; } msg;

typedef struct chat {
    sluice_model *M;
    sluice_ctx *C;
    sluice_sampler *S;
    gen_opts o;
    int tmpl;
    const char *stop_text;
    int32_t end_tok;               /* the template's end-of-turn token, or -1 */
    msg *msgs;
    int n_msgs, cap_msgs;
    bool tty_in, tty_out;
    sl_progress bar;
    /* the answer being generated */
    char *ans;
    size_t ans_len, ans_cap, printed;
    bool at_start;                 /* nothing of the answer printed yet (leading spaces are skipped) */
    /* figures */
    uint64_t prompt_ns, gen_ns, n_prompt_eval, n_gen, turns;
    int last_eval, last_gen;
    double last_tok_s;
} chat;

/* ---- conversation ------------------------------------------------------------------------------ */

static bool push_msg(chat *ch, const char *role, const char *content, size_t len)
{
    if (ch->n_msgs == ch->cap_msgs) {
        int cap = ch->cap_msgs ? 2 * ch->cap_msgs : 16;
        msg *nm = realloc(ch->msgs, (size_t)cap * sizeof *nm);
        if (!nm) return false;
        ch->msgs = nm;
        ch->cap_msgs = cap;
    }
    msg *m = &ch->msgs[ch->n_msgs];
    m->role = strdup(role);
    m->content = malloc(len + 1);
    if (!m->role || !m->content) { free(m->role); free(m->content); return false; }
    memcpy(m->content, content, len);
    m->content[len] = 0;
    ch->n_msgs++;
    return true;
}

static void drop_msgs(chat *ch, int from, int n)
{
    if (n <= 0) return;
    for (int i = from; i < from + n; i++) { free(ch->msgs[i].role); free(ch->msgs[i].content); }
    memmove(ch->msgs + from, ch->msgs + from + n, (size_t)(ch->n_msgs - from - n) * sizeof *ch->msgs);
    ch->n_msgs -= n;
}

static bool has_system(const chat *ch) { return ch->n_msgs > 0 && !strcmp(ch->msgs[0].role, "system"); }

/* The conversation as session blob: "SLCHAT1\n", then per message: role byte (s/u/a), u32 length,
 * bytes. */
static unsigned char *conv_blob(const chat *ch, size_t *len)
{
    size_t n = 8;
    for (int i = 0; i < ch->n_msgs; i++) n += 5 + strlen(ch->msgs[i].content);
    unsigned char *b = malloc(n), *p = b;
    if (!b) return NULL;
    memcpy(p, "SLCHAT1\n", 8);
    p += 8;
    for (int i = 0; i < ch->n_msgs; i++) {
        uint32_t l = (uint32_t)strlen(ch->msgs[i].content);
        *p++ = (unsigned char)ch->msgs[i].role[0];
        memcpy(p, &l, 4);
        memcpy(p + 4, ch->msgs[i].content, l);
        p += 4 + l;
    }
    *len = n;
    return b;
}

/* Restore messages from a blob; false (conversation untouched) when it is not one of ours. */
static bool conv_restore(chat *ch, const unsigned char *b, size_t len)
{
    if (len < 8 || memcmp(b, "SLCHAT1\n", 8)) return false;
    chat tmp = { 0 };
    size_t at = 8;
    while (at < len) {
        uint32_t l;
        if (len - at < 5) goto bad;
        char r = (char)b[at];
        memcpy(&l, b + at + 1, 4);
        if (len - at - 5 < l || (r != 's' && r != 'u' && r != 'a')) goto bad;
        if (!push_msg(&tmp, r == 's' ? "system" : r == 'u' ? "user" : "assistant", (const char *)b + at + 5, l)) goto bad;
        at += 5 + l;
    }
    drop_msgs(ch, 0, ch->n_msgs);
    free(ch->msgs);
    ch->msgs = tmp.msgs;
    ch->n_msgs = tmp.n_msgs;
    ch->cap_msgs = tmp.cap_msgs;
    return true;
bad:
    drop_msgs(&tmp, 0, tmp.n_msgs);
    free(tmp.msgs);
    return false;
}

/* ---- one turn ---------------------------------------------------------------------------------- */

static void out_write(chat *ch, const char *s, size_t n)
{
    if (ch->at_start) {   /* answers usually start with the space of the first word piece */
        while (n && (*s == ' ' || *s == '\n')) { s++; n--; }
        if (n) ch->at_start = false;
    }
    if (n) fwrite(s, 1, n, stdout);
    fflush(stdout);
}

/* Print what of the answer is certainly not the start of the stop text; true when the stop text
 * appeared (the answer is cut before it). */
static bool flush_answer(chat *ch, bool final)
{
    size_t safe = ch->ans_len;
    bool stop = false;
    if (ch->stop_text) {
        size_t sl = strlen(ch->stop_text);
        char *hit = NULL;
        for (size_t i = ch->printed; i + sl <= ch->ans_len; i++)
            if (!memcmp(ch->ans + i, ch->stop_text, sl)) { hit = ch->ans + i; break; }
        if (hit) {
            safe = (size_t)(hit - ch->ans);
            ch->ans_len = safe;
            stop = true;
        } else if (!final) {
            /* hold back the longest tail that could still grow into the stop text */
            for (size_t k = sl - 1; k > 0; k--)
                if (ch->ans_len - ch->printed >= k && !memcmp(ch->ans + ch->ans_len - k, ch->stop_text, k)) {
                    safe = ch->ans_len - k;
                    break;
                }
        }
    }
    if (safe > ch->printed) out_write(ch, ch->ans + ch->printed, safe - ch->printed);
    if (safe > ch->printed) ch->printed = safe;
    return stop;
}

static int on_token(void *user, int32_t id, const char *text, size_t len)
{
    chat *ch = user;
    if (id >= 0 && id == ch->end_tok) return 1;
    if (ch->ans_len + len + 1 > ch->ans_cap) {
        size_t cap = ch->ans_cap ? ch->ans_cap * 2 : 1024;
        while (cap < ch->ans_len + len + 1) cap *= 2;
        char *na = realloc(ch->ans, cap);
        if (!na) return 1;
        ch->ans = na;
        ch->ans_cap = cap;
    }
    memcpy(ch->ans + ch->ans_len, text, len);
    ch->ans_len += len;
    ch->ans[ch->ans_len] = 0;
    return flush_answer(ch, false) ? 1 : 0;
}

/* Render, tokenize, drop old turns until the prompt leaves room for an answer.  Returns the token
 * count (ids in *out, malloc'd) or -1 after printing why. */
static int build_prompt(chat *ch, int32_t **out)
{
    int n_ctx = sluice_n_ctx(ch->C);
    for (;;) {
        sl_chat_msg *cm = malloc((size_t)ch->n_msgs * sizeof *cm);
        if (!cm) return -1;
        for (int i = 0; i < ch->n_msgs; i++) cm[i] = (sl_chat_msg){ ch->msgs[i].role, ch->msgs[i].content };
        size_t tl;
        char *text = sl_chat_render(ch->tmpl, cm, ch->n_msgs, true, &tl);
        free(cm);
        if (!text) return -1;
        int flags = SLUICE_TOK_ADD_SPECIAL | SLUICE_TOK_PARSE_SPECIAL;
        int n = sluice_tokenize(ch->M, text, (ptrdiff_t)tl, flags, NULL, 0);
        int32_t *t = n > 0 ? malloc((size_t)n * sizeof *t) : NULL;
        if (t) sluice_tokenize(ch->M, text, (ptrdiff_t)tl, flags, t, n);
        free(text);
        if (n <= 0 || !t) { free(t); cli_err("chat: tokenizing the conversation failed"); return -1; }
        long room = ch->o.n_predict < n_ctx / 2 ? ch->o.n_predict : n_ctx / 2;
        int first = has_system(ch) ? 1 : 0;
        if (n + room <= n_ctx || ch->n_msgs - first <= 1) {
            if (n >= n_ctx) {
                free(t);
                cli_err("chat: the message needs %d tokens, the context holds %d (raise -c)", n, n_ctx);
                return -1;
            }
            *out = t;
            return n;
        }
        free(t);
        /* drop the oldest exchange (a user message and the answer to it) */
        int k = ch->n_msgs - first >= 2 && !strcmp(ch->msgs[first + 1].role, "assistant") ? 2 : 1;
        drop_msgs(ch, first, k);
        if (!ch->o.quiet) fprintf(stderr, "sluice: (context full: the oldest turn was dropped)\n");
    }
}

/* One user message in, one answer out.  0, or -1 on a fatal error. */
static int turn(chat *ch, const char *text, size_t len)
{
    if (!push_msg(ch, "user", text, len)) return -1;
    int32_t *toks = NULL;
    int n = build_prompt(ch, &toks);
    if (n < 0) { drop_msgs(ch, ch->n_msgs - 1, 1); return 0; }
    uint64_t t0 = sl_now_ns();
    int rc = sluice_prefill(ch->C, toks, n);
    sl_progress_clear(&ch->bar);
    free(toks);
    uint64_t t1 = sl_now_ns();
    if (rc < 0) {
        drop_msgs(ch, ch->n_msgs - 1, 1);
        if (rc == -ECANCELED) { fprintf(stderr, "\n(interrupted)\n"); return 0; }
        cli_err("%s", sluice_ctx_error(ch->C));
        return rc == -ENOSPC ? 0 : -1;
    }
    ch->last_eval = rc;
    ch->n_prompt_eval += (uint64_t)rc;
    ch->prompt_ns += t1 - t0;
    ch->ans_len = ch->printed = 0;
    ch->at_start = true;
    int g = sluice_generate(ch->C, ch->S, (int)ch->o.n_predict, on_token, ch);
    flush_answer(ch, true);
    uint64_t t2 = sl_now_ns();
    int why = sluice_stop_reason(ch->C);
    if (g < 0 && g != -ECANCELED) {
        fputc('\n', stdout);
        cli_err("%s", sluice_ctx_error(ch->C));
        drop_msgs(ch, ch->n_msgs - 1, 1);
        return -1;
    }
    if (why == SLUICE_STOP_CANCELED) fputs(" [stopped]", stdout);
    fputc('\n', stdout);
    fflush(stdout);
    if (why == SLUICE_STOP_CTX_FULL && !ch->o.quiet) fprintf(stderr, "sluice: (context full: answer cut)\n");
    ch->last_gen = g > 0 ? g : 0;
    ch->n_gen += (uint64_t)ch->last_gen;
    ch->gen_ns += t2 - t1;
    ch->last_tok_s = t2 > t1 && ch->last_gen ? ch->last_gen / ((t2 - t1) / 1e9) : 0;
    ch->turns++;
    if (!push_msg(ch, "assistant", ch->ans ? ch->ans : "", ch->ans_len)) return -1;
    return 0;
}

/* ---- commands ---------------------------------------------------------------------------------- */

static void print_stats(chat *ch)
{
    sluice_stats st;
    sluice_get_stats(ch->M, ch->C, &st);
    fprintf(stderr, "sluice: %d of %d context positions used, %d messages; last turn: %d prompt tokens evaluated, "
            "%d generated (%.2f tok/s)\n", st.n_past, st.n_ctx, ch->n_msgs, ch->last_eval, ch->last_gen, ch->last_tok_s);
    fprintf(stderr, "sluice: all turns: %" PRIu64 " prompt tokens in %.2f s, %" PRIu64 " generated in %.2f s; "
            "peak RSS %.1f MiB; weights %s", ch->n_prompt_eval, ch->prompt_ns / 1e9, ch->n_gen, ch->gen_ns / 1e9,
            st.peak_rss / 1048576.0, st.backend);
    if (strcmp(st.backend, "resident"))
        fprintf(stderr, " (%.1f MiB read, blocked on I/O %.2f s)", st.stream_bytes_read / 1048576.0, st.stream_wait_s);
    fputc('\n', stderr);
}

static void save_to(chat *ch, const char *path)
{
    size_t bl = 0;
    unsigned char *blob = conv_blob(ch, &bl);
    char err[SL_ERRLEN];
    sluice_session_stats st;
    if (!blob) { cli_err("out of memory"); return; }
    if (sluice_session_save(ch->C, path, blob, bl, &st, err, sizeof err)) cli_err("%s", err);
    else if (!ch->o.quiet)
        fprintf(stderr, "sluice: saved %d tokens and %d messages to %s (%.2f MiB, %.2f MiB uncompressed, %.3f s)\n",
                st.n_tokens, ch->n_msgs, path, st.file_bytes / 1048576.0, st.raw_bytes / 1048576.0, st.seconds);
    free(blob);
}

/* 1: leave; 0: handled. */
static int command(chat *ch, char *line)
{
    char *arg = line + strcspn(line, " \t");
    if (*arg) *arg++ = 0;
    arg += strspn(arg, " \t");
    if (!strcmp(line, "/quit") || !strcmp(line, "/exit") || !strcmp(line, "/q")) return 1;
    if (!strcmp(line, "/reset")) {
        drop_msgs(ch, has_system(ch) ? 1 : 0, ch->n_msgs - (has_system(ch) ? 1 : 0));
        fprintf(stderr, "sluice: (conversation cleared)\n");
    } else if (!strcmp(line, "/stats")) {
        print_stats(ch);
    } else if (!strcmp(line, "/save")) {
        if (!*arg) cli_err("/save needs a file name");
        else save_to(ch, arg);
    } else if (!strcmp(line, "/help")) {
        fprintf(stderr, "sluice: /reset  /stats  /save FILE  /quit   (Ctrl-C stops an answer, Ctrl-D leaves)\n");
    } else {
        cli_err("unknown command %s (try /help)", line);
    }
    return 0;
}

/* ---- input ------------------------------------------------------------------------------------- */

enum { LINE_OK, LINE_EOF, LINE_INTR, LINE_ERR };

/* Read one line from fd 0 without stdio buffering (so a signal interrupts it), continuing lines
 * that end in a backslash.  The line is returned without its newline in *line (malloc'd). */
static int read_line(char **line, size_t *len)
{
    size_t cap = 256, n = 0;
    char *b = malloc(cap);
    if (!b) return LINE_ERR;
    for (;;) {
        char c;
        ssize_t r = read(STDIN_FILENO, &c, 1);
        if (r < 0 && errno == EINTR) {
            if (g_sigint || g_sigterm) { free(b); return LINE_INTR; }
            continue;
        }
        if (r < 0) { free(b); return LINE_ERR; }
        if (r == 0) {
            if (!n) { free(b); return LINE_EOF; }
            break;
        }
        if (c == '\n') {
            if (n && b[n - 1] == '\\') { b[n - 1] = '\n'; continue; }
            break;
        }
        if (n + 2 > cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) { free(b); return LINE_ERR; }
            b = nb;
        }
        b[n++] = c;
    }
    if (n && b[n - 1] == '\r') n--;
    b[n] = 0;
    *line = b;
    *len = n;
    return LINE_OK;
}

/* ---- main -------------------------------------------------------------------------------------- */

static void chat_log(void *user, int level, const char *line)
{
    chat *ch = user;
    if (level != SLUICE_LOG_WARN && ch->o.quiet) return;
    sl_progress_clear(&ch->bar);
    fprintf(stderr, "sluice: %s%s\n", level == SLUICE_LOG_NOTE ? "note: " : "", line);
}

static void chat_progress(void *user, const char *stage, uint64_t done, uint64_t total)
{
    chat *ch = user;
    sl_progress_update(&ch->bar, stage, done, total);
}

/* The template to use: --chat-template, else the model's tokenizer.chat_template, else plain. */
static int pick_template(chat *ch, const char *forced)
{
    if (forced) {
        int t = sl_chat_template_detect(forced);
        if (t == SL_TMPL_UNKNOWN) {
            cli_err("--chat-template: unknown template '%s' (known: %s)", forced, sl_chat_template_names());
            return -1;
        }
        return t;
    }
    const char *mt = ch->M->chat_template;
    int t = mt ? sl_chat_template_detect(mt) : SL_TMPL_UNKNOWN;
    if (t == SL_TMPL_UNKNOWN) {
        if (!ch->o.quiet)
            fprintf(stderr, "sluice: note: %s; using the plain template (User: / Assistant:); "
                    "choose one with --chat-template NAME\n",
                    mt ? "the model's chat template is not one sluice recognizes" : "the model has no chat template");
        t = SL_TMPL_PLAIN;
    }
    return t;
}

int cmd_chat(int argc, char **argv)
{
    chat ch = { .end_tok = -1 };
    const char *system = NULL, *forced = NULL;
    gen_opts_default(&ch.o, 512);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r = gen_opt_parse(argc, argv, &i, &ch.o);
        if (r < 0) return 2;
        if (r > 0) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "-s") || !strcmp(a, "--system")) { if (!cli_val(argc, argv, &i, &system)) return 2; }
        else if (!strcmp(a, "--chat-template")) { if (!cli_val(argc, argv, &i, &forced)) return 2; }
        else { cli_err("chat: unknown option '%s' (see sluice chat --help)", a); return 2; }
    }
    if (!ch.o.model) ch.o.model = cli_default_model();
    ch.tty_in = isatty(STDIN_FILENO);
    ch.tty_out = isatty(STDOUT_FILENO);
    sl_progress_init(&ch.bar, sl_progress_tty() && !ch.o.quiet);
    int status = 1;
    char err[SL_ERRLEN];

    /* no SA_RESTART: a signal must interrupt the read of the next line */
    struct sigaction sa = { .sa_handler = on_signal };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    sluice_params sp;
    if (!gen_opts_params(&ch.o, &sp)) goto done;
    sp.log = chat_log;
    sp.progress = chat_progress;
    sp.user = &ch;
    if (sluice_open(ch.o.model, &sp, &ch.M, err, sizeof err)) { sl_progress_clear(&ch.bar); cli_err("%s", err); goto done; }
    if (sluice_ctx_new(ch.M, &ch.C, err, sizeof err)) { cli_err("%s", err); goto done; }
    if (!(ch.S = sluice_sampler_new(ch.M, &ch.o.sp))) { cli_err("out of memory"); goto done; }
    g_ctx = ch.C;
    if (g_sigterm) goto done;
    if ((ch.tmpl = pick_template(&ch, forced)) < 0) { status = 2; goto done; }
    ch.stop_text = sl_chat_template_stop_text(ch.tmpl);
    const char *et = sl_chat_template_end_token(ch.tmpl);
    if (et) {
        int32_t id[2];
        int n = sluice_tokenize(ch.M, et, -1, SLUICE_TOK_PARSE_SPECIAL, id, 2);
        if (n == 1) ch.end_tok = id[0];   /* the marker is one special token in this vocabulary */
    }
    if (ch.o.session) {
        void *blob = NULL;
        size_t bl = 0;
        int r = sluice_session_load(ch.C, ch.o.session, &blob, &bl, NULL, err, sizeof err);
        if (r == 0 && blob && conv_restore(&ch, blob, bl)) {
            if (!ch.o.quiet)
                fprintf(stderr, "sluice: resumed %d messages (%d tokens) from %s\n", ch.n_msgs, sluice_n_past(ch.C),
                        ch.o.session);
        } else if (r && r != -ENOENT) {
            fprintf(stderr, "sluice: warning: %s; starting a new conversation\n", err);
        }
        free(blob);
    }
    if (system) {
        if (has_system(&ch)) drop_msgs(&ch, 0, 1);
        if (!push_msg(&ch, "system", system, strlen(system))) goto done;
        if (ch.n_msgs > 1) {   /* the system message goes first */
            msg s = ch.msgs[ch.n_msgs - 1];
            memmove(ch.msgs + 1, ch.msgs, (size_t)(ch.n_msgs - 1) * sizeof *ch.msgs);
            ch.msgs[0] = s;
        }
    }
    if (ch.tty_in && !ch.o.quiet)
        fprintf(stderr, "sluice chat: template %s, context %d tokens; /help for commands, Ctrl-D to leave\n",
                sl_chat_template_name(ch.tmpl), sluice_n_ctx(ch.C));

    status = 0;
    for (;;) {
        if (g_sigterm) { status = 143; break; }
        if (ch.tty_in) { fputs("> ", stdout); fflush(stdout); }
        char *line = NULL;
        size_t len = 0;
        int lr = read_line(&line, &len);
        if (lr == LINE_EOF) { if (ch.tty_in) fputc('\n', stdout); break; }
        if (lr == LINE_ERR) { cli_err("chat: reading stdin failed: %s", strerror(errno)); status = 1; break; }
        if (lr == LINE_INTR) {
            if (g_sigterm) { status = 143; break; }
            g_sigint = 0;
            sluice_uncancel(ch.C);
            if (ch.tty_in) fputs("\n(Ctrl-D or /quit to leave)\n", stdout);
            else { status = 130; break; }
            continue;
        }
        size_t skip = strspn(line, " \t");
        if (skip == len) { free(line); continue; }
        if (line[skip] == '/') {
            int q = command(&ch, line + skip);
            free(line);
            if (q) break;
            continue;
        }
        int r = turn(&ch, line + skip, len - skip);
        free(line);
        if (g_sigint) { g_sigint = 0; sluice_uncancel(ch.C); }
        if (r) { status = 1; break; }
    }
    if (ch.o.session) save_to(&ch, ch.o.session);
    if (ch.o.stats) print_stats(&ch);
done:
    g_ctx = NULL;
    sl_progress_clear(&ch.bar);
    drop_msgs(&ch, 0, ch.n_msgs);
    free(ch.msgs);
    free(ch.ans);
    sluice_sampler_free(ch.S);
    sluice_ctx_free(ch.C);
    sluice_close(ch.M);
    return status;
}
