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
 * Input: a terminal (prompt "> ", line editing and history with libedit, the history kept in
 * $XDG_STATE_HOME/sluice/chat_history; Ctrl-C stops the answer in progress, Ctrl-D or /quit leaves),
 * or any other stdin, read line by line, one message per line ("\" at the end of a line continues the
 * message on the next).  Only answers go to stdout; notices and command output go to stderr.  While
 * an answer is printed the terminal does not echo what is typed, so typed-ahead text never lands
 * inside the answer (it waits for the next prompt).
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "include/sluice.h"
#include "runtime/text/chat_template.h"
#include "kernels/clock.h"
#include "runtime/cli/chat_answer.h"
#include "runtime/cli/chat_input.h"
#include "runtime/cli/cli.h"
#include "runtime/cli/genopts.h"
#include "runtime/cli/sigwatch.h"
#include "runtime/api/progress.h"

static volatile sig_atomic_t g_sigint, g_sigterm;
static sluice_ctx *volatile g_ctx;

/* Ctrl-C: stop the answer being generated (or the line being typed); SIGTERM and SIGHUP (the
 * terminal went away): save the session and leave (exit 143 / 129). */
static void on_signal(int sig)
{
    if (sig == SIGTERM || sig == SIGHUP) g_sigterm = sig;
    else g_sigint = 1;
    sluice_ctx *c = g_ctx;
    if (c) sluice_cancel(c);
    sigwatch_signal(sig);   /* leaves if the evaluation cannot get to its next layer */
}

enum { CHAT_SYSTEM = 1, CHAT_TEMPLATE, CHAT_SHOW_REASONING };

static const cli_opt chat_table[] = {
    { CHAT_SYSTEM, "-sys|--system", "TEXT", "system message (-s is the seed, as in llama.cpp)" },
    { CHAT_TEMPLATE, "--chat-template", "NAME", "format turns with NAME instead of the model's template\n"
                                                "(an unknown NAME lists the known ones)" },
    { CHAT_SHOW_REASONING, "--show-reasoning", NULL, "print the model's reasoning (gpt-oss's analysis channel) on stderr\n"
                                                     "before the answer (default: only the answer is shown)" },
    { 0, NULL, NULL, NULL },
};
static const cli_opt *const chat_tables[] = { chat_table, gen_opt_table, gen_mem_table, cli_meta_table, NULL };
const cli_cmd cli_cmd_chat = {
    "chat", "talk with a chat model (streamed answers, the conversation kept in the KV cache)",
    "sluice chat [-m MODEL] [--system TEXT] [-n MAX] [options]", chat_tables,
    "-n is the longest answer in tokens (default 512; -1: until the end of the turn or a full context).\n"
    "In the chat: /reset (forget the conversation), /stats, /save FILE (session file), /quit.  Ctrl-C stops\n"
    "the current answer, Ctrl-D leaves; arrow keys edit the line and recall earlier messages (history in\n"
    "$XDG_STATE_HOME/sluice/chat_history, default ~/.local/state); a multi-line paste is one message.  When\n"
    "stdin is not a terminal every line is one message (end a line with \\ to continue it on the next).\n"
};

typedef struct msg { char *role, *content; } msg;

typedef struct chat {
    sluice_model *M;
    sluice_ctx *C;
    sluice_sampler *S;
    gen_opts o;
    int tmpl;
    int32_t end_tok;               /* the template's end-of-turn token, or -1 */
    msg *msgs;
    int n_msgs, cap_msgs;
    bool tty_out;
    chat_input in;                 /* stdin: terminal modes, line editor */
    bool keep_session;             /* --session is not ours to replace (another model, not a session) */
    sl_progress bar;
    chat_answer ans;               /* the answer being generated */
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

/* Restore messages from a blob; false (conversation untouched) when it is not one of ours.  Every
 * message of a saved conversation became at least one token of the saved context, so a blob with
 * more messages than the session's tokens is not one of ours: without that bound a small, highly
 * compressible session (millions of empty messages) would cost ~80 bytes of tables per 5 blob bytes. */
static bool conv_restore(chat *ch, const unsigned char *b, size_t len)
{
    if (len < 8 || memcmp(b, "SLCHAT1\n", 8)) return false;
    chat tmp = { 0 };
    size_t at = 8;
    const int max_msgs = sluice_n_past(ch->C);
    while (at < len) {
        uint32_t l;
        if (len - at < 5 || tmp.n_msgs >= max_msgs) goto bad;
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

static int on_token(void *user, int32_t id, const char *text, size_t len)
{
    chat *ch = user;
    if (id >= 0 && id == ch->end_tok) return 1;
    if (chat_answer_add(&ch->ans, text, len)) return 1;
    return ch->o.n_reverse && gen_reverse_hit(&ch->o, ch->ans.raw, ch->ans.raw_len) ? 1 : 0;   /* -r TEXT */
}

static int n_ctx_of(chat *ch) { return sluice_n_ctx(ch->C); }

/* Render, tokenize, drop old turns until the prompt leaves room for an answer.  Returns the token
 * count (ids in *out, malloc'd) or -1 after printing why. */
static int build_prompt(chat *ch, int32_t **out)
{
    int n_ctx = sluice_n_ctx(ch->C);
    for (;;) {
        sl_chat_msg *cm = malloc((size_t)ch->n_msgs * sizeof *cm);
        if (!cm) return -1;
        for (int i = 0; i < ch->n_msgs; i++) cm[i] = (sl_chat_msg){ .role = ch->msgs[i].role, .content = ch->msgs[i].content };
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
        long room = ch->o.n_predict >= 0 && ch->o.n_predict < n_ctx / 2 ? ch->o.n_predict : n_ctx / 2;
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
    chat_input_hold(&ch->in);   /* typed-ahead text must not land inside the answer (nor during the prompt) */
    int rc = sluice_prefill(ch->C, toks, n);
    sl_progress_clear(&ch->bar);
    free(toks);
    uint64_t t1 = sl_now_ns();
    if (rc < 0) {
        chat_input_release(&ch->in);
        drop_msgs(ch, ch->n_msgs - 1, 1);
        if (rc == -ECANCELED) { fprintf(stderr, "\n(interrupted)\n"); return 0; }
        cli_err("%s", sluice_ctx_error(ch->C));
        return rc == -ENOSPC ? 0 : -1;
    }
    ch->last_eval = rc;
    ch->n_prompt_eval += (uint64_t)rc;
    ch->prompt_ns += t1 - t0;
    chat_answer_begin(&ch->ans);
    int g = sluice_generate(ch->C, ch->S, ch->o.n_predict < 0 ? n_ctx_of(ch) : (int)ch->o.n_predict, on_token, ch);
    chat_input_release(&ch->in);
    chat_answer_end(&ch->ans);
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
    if (ch->ans.oom || !push_msg(ch, "assistant", ch->ans.msg, ch->ans.msg_len)) return -1;
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
    if (st.draft_max > 0)
        fprintf(stderr, "sluice: speculative: %" PRIu64 " tokens in %" PRIu64 " passes (%.2f tokens per pass), drafted %"
                PRIu64 ", accepted %" PRIu64 "\n", st.n_gen_tokens, st.n_passes,
                st.n_passes ? (double)st.n_gen_tokens / st.n_passes : 0, st.n_drafted, st.n_accepted);
    if (ch->o.sp.temp > 0)
        fprintf(stderr, "sluice: seed %" PRIu64 "%s\n", ch->o.sp.seed,
                ch->o.seed_given ? "" : " (chosen at random; --seed with it repeats this chat)");
}

/* false after printing why the session could not be written. */
static bool save_to(chat *ch, const char *path)
{
    if (ch->keep_session && ch->o.session && !strcmp(path, ch->o.session)) {
        fprintf(stderr, "sluice: %s was kept as it was (not a session of this model; --session-overwrite replaces it)\n",
                path);
        return true;
    }
    size_t bl = 0;
    unsigned char *blob = conv_blob(ch, &bl);
    char err[SLUICE_ERRLEN];
    sluice_session_stats st;
    if (!blob) { cli_err("out of memory"); return false; }
    unsigned flags = ch->o.session_overwrite ? SLUICE_SESSION_OVERWRITE : 0;   /* the library keeps a foreign one */
    bool ok = sluice_session_save_flags(ch->C, path, blob, bl, flags, &st, err, sizeof err) == 0;
    if (!ok) cli_err("%s", err);
    else if (!ch->o.quiet)
        fprintf(stderr, "sluice: saved %d tokens and %d messages to %s (%.2f MiB, %.2f MiB uncompressed, %.3f s)\n",
                st.n_tokens, ch->n_msgs, path, st.file_bytes / 1048576.0, st.raw_bytes / 1048576.0, st.seconds);
    free(blob);
    return ok;
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
    sluice_model_info mi;
    sluice_model_get_info(ch->M, &mi);
    const char *mt = mi.chat_template;
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

/* 0: go on; 1: done (help printed); -1: bad usage (printed). */
static int chat_parse(int argc, char **argv, chat *ch, const char **system, const char **forced)
{
    gen_opts_default(&ch->o, 512);
    for (int i = 1; i < argc; i++) {
        const cli_opt *op = cli_find(chat_tables, argv[i]);
        if (!op) { cli_unknown(&cli_cmd_chat, argv[i]); return -1; }
        if (cli_meta(&cli_cmd_chat, op)) return 1;
        int r = gen_opt_apply(argc, argv, &i, op, &ch->o);
        if (r < 0) return -1;
        if (r > 0) continue;
        if (op->id == CHAT_SYSTEM && !cli_val(argc, argv, &i, system)) return -1;
        if (op->id == CHAT_TEMPLATE && !cli_val(argc, argv, &i, forced)) return -1;
        if (op->id == CHAT_SHOW_REASONING) ch->ans.show_reasoning = true;
    }
    return gen_opts_check(&ch->o) ? 0 : -1;
}

/* Model, context, sampler.  false after printing why. */
static bool chat_open(chat *ch)
{
    char err[SLUICE_ERRLEN];
    sluice_params sp;
    ch->o.n_ctx = gen_default_ctx(&ch->o);
    if (!gen_opts_params(&ch->o, &sp)) return false;
    sp.log = chat_log;
    sp.progress = chat_progress;
    sp.user = ch;
    if (sluice_open(ch->o.model, &sp, &ch->M, err, sizeof err)) { sl_progress_clear(&ch->bar); cli_err("%s", err); return false; }
    if (sluice_ctx_new(ch->M, &ch->C, err, sizeof err)) { cli_err("%s", err); return false; }
    if (!gen_check_kv(&ch->o, ch->M, ch->C) || gen_load_lookup(&ch->o, ch->M, ch->C) < 0) return false;
    if (!(ch->S = sluice_sampler_new(ch->M, &ch->o.sp))) { cli_err("out of memory"); return false; }
    g_ctx = ch->C;
    return true;
}

/* Resume the conversation of --session (a file that is not a session of this model is kept). */
static void chat_resume(chat *ch)
{
    char err[SLUICE_ERRLEN];
    void *blob = NULL;
    size_t bl = 0;
    int r = sluice_session_load(ch->C, ch->o.session, &blob, &bl, NULL, err, sizeof err);
    if (r == 0 && blob && conv_restore(ch, blob, bl)) {
        if (!ch->o.quiet)
            fprintf(stderr, "sluice: resumed %d messages (%d tokens) from %s\n", ch->n_msgs, sluice_n_past(ch->C),
                    ch->o.session);
    } else if (r && r != -ENOENT) {
        ch->keep_session = !ch->o.session_overwrite;
        fprintf(stderr, "sluice: warning: %s; starting a new conversation%s\n", err,
                ch->keep_session ? " (the file is kept as it is; --session-overwrite replaces it)" : "");
    }
    free(blob);
}

/* Template, end-of-turn token, session, system message.  0, or the exit status after an error. */
static int chat_setup(chat *ch, const char *system, const char *forced)
{
    if ((ch->tmpl = pick_template(ch, forced)) < 0) return 2;
    ch->ans.stop_text = sl_chat_template_stop_text(ch->tmpl);
    ch->ans.harmony = ch->tmpl == SL_TMPL_HARMONY;
    const char *et = sl_chat_template_end_token(ch->tmpl);
    if (et) {
        int32_t id[2];
        int n = sluice_tokenize(ch->M, et, -1, SLUICE_TOK_PARSE_SPECIAL, id, 2);
        if (n == 1) ch->end_tok = id[0];   /* the marker is one special token in this vocabulary */
    }
    if (ch->o.session) chat_resume(ch);
    if (system) {
        if (has_system(ch)) drop_msgs(ch, 0, 1);
        if (!push_msg(ch, "system", system, strlen(system))) return 1;
        if (ch->n_msgs > 1) {   /* the system message goes first */
            msg m = ch->msgs[ch->n_msgs - 1];
            memmove(ch->msgs + 1, ch->msgs, (size_t)(ch->n_msgs - 1) * sizeof *ch->msgs);
            ch->msgs[0] = m;
        }
    }
    return 0;
}

/* Messages until EOF, /quit or a signal.  Returns the exit status. */
static int chat_loop(chat *ch)
{
    for (;;) {
        if (g_sigterm) return 128 + g_sigterm;
        char *line = NULL;
        size_t len = 0;
        int lr = chat_input_line(&ch->in, &line, &len);
        if (lr == CHAT_LINE_EOF) { if (ch->in.tty_in) fputc('\n', stdout); return 0; }
        if (lr == CHAT_LINE_ERR) { cli_err("chat: reading stdin failed: %s", strerror(errno)); return 1; }
        if (lr == CHAT_LINE_INTR) {
            if (g_sigterm) return 128 + g_sigterm;
            g_sigint = 0;
            sluice_uncancel(ch->C);
            if (!ch->in.tty_in) return 130;
            fputs("\n(Ctrl-D or /quit to leave)\n", stdout);
            continue;
        }
        size_t skip = strspn(line, " \t");
        if (skip == len) { free(line); continue; }
        if (line[skip] == '/') {
            int q = command(ch, line + skip);
            free(line);
            if (q) return 0;
            continue;
        }
        sigwatch_busy(SIGWATCH_EVAL);
        int r = turn(ch, line + skip, len - skip);
        sigwatch_busy(SIGWATCH_IDLE);
        free(line);
        if (g_sigint) { g_sigint = 0; sluice_uncancel(ch->C); }
        if (r) return 1;
        if (ferror(stdout)) { cli_err("writing the answer failed: %s", strerror(errno)); return 1; }
    }
}

int cmd_chat(int argc, char **argv)
{
    chat ch = { .end_tok = -1 };
    const char *system = NULL, *forced = NULL;
    int pr = chat_parse(argc, argv, &ch, &system, &forced);
    if (pr) return pr > 0 ? 0 : 2;
    if (!ch.o.model) ch.o.model = cli_default_model();
    ch.tty_out = isatty(STDOUT_FILENO);
    ch.ans.out = stdout;
    ch.ans.err = stderr;
    ch.ans.err_tty = isatty(STDERR_FILENO);
    chat_input_open(&ch.in, &g_sigint, &g_sigterm);
    sl_progress_init(&ch.bar, sl_progress_tty() && !ch.o.quiet);
    int status = 1;
    sigwatch_install(on_signal);   /* no SA_RESTART: a signal must interrupt the read of the next line */
    sigwatch_busy(SIGWATCH_LOAD);  /* the model and a resumed session */
    if (!chat_open(&ch)) goto done;
    if (g_sigterm) { status = 128 + g_sigterm; goto done; }
    if ((status = chat_setup(&ch, system, forced))) goto done;
    sigwatch_busy(SIGWATCH_IDLE);
    if (ch.tty_out) chat_input_edit(&ch.in);
    if (ch.in.tty_in && !ch.o.quiet)
        fprintf(stderr, "sluice chat: template %s, context %d tokens; /help for commands, Ctrl-D to leave\n",
                sl_chat_template_name(ch.tmpl), sluice_n_ctx(ch.C));
    status = chat_loop(&ch);
    if (ch.o.session && !save_to(&ch, ch.o.session) && status == 0) status = 1;
    if (ch.o.stats) print_stats(&ch);
    if (fflush(stdout) || ferror(stdout)) { cli_err("writing the answers failed: %s", strerror(errno)); status = 1; }
done:
    sigwatch_busy(SIGWATCH_IDLE);
    g_ctx = NULL;
    chat_input_close(&ch.in);
    sl_progress_clear(&ch.bar);
    drop_msgs(&ch, 0, ch.n_msgs);
    free(ch.msgs);
    chat_answer_free(&ch.ans);
    sluice_sampler_free(ch.S);
    sluice_ctx_free(ch.C);
    sluice_close(ch.M);
    return status;
}
