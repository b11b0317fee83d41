/* runtime/cli/chat_input.h — the lines `sluice chat` reads: a terminal with libedit (prompt, line
 * editing, history, bracketed paste) or any other stdin read line by line, and the terminal modes
 * around an answer.  A signal interrupts a read: the caller's handler sets *sigint or *sigterm and
 * the read returns CHAT_LINE_INTR. */
#ifndef SL_CLI_CHAT_INPUT_H
#define SL_CLI_CHAT_INPUT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <termios.h>
#ifdef SL_HAVE_LIBEDIT
#include <histedit.h>
#endif

enum { CHAT_LINE_OK, CHAT_LINE_EOF, CHAT_LINE_INTR, CHAT_LINE_ERR };

typedef struct chat_input {
    bool tty_in;                                 /* stdin is a terminal (term0 holds its settings) */
    struct termios term0;                        /* the terminal as we found it */
    const volatile sig_atomic_t *sigint, *sigterm;
#ifdef SL_HAVE_LIBEDIT
    EditLine *el;
    History *hist;
    char hist_path[4096];
#endif
} chat_input;

/* Find out whether stdin is a terminal.  The flags are read by every later call; they must
 * outlive `in`. */
void chat_input_open(chat_input *in, const volatile sig_atomic_t *sigint, const volatile sig_atomic_t *sigterm);
/* From now on edit lines with libedit (when built in and stdin is a terminal): the caller checked
 * that stdout is a terminal too. */
void chat_input_edit(chat_input *in);
/* The terminal restored as it was found; the editor's history saved already (per line). */
void chat_input_close(chat_input *in);
/* The next message or command (a line ending in "\" continues on the next), malloc'd in *line
 * without its newline.  CHAT_LINE_OK, _EOF, _INTR (a signal), _ERR (errno says why). */
int  chat_input_line(chat_input *in, char **line, size_t *len);
/* While an answer is produced: no echo (typed-ahead text must not land inside the answer). */
void chat_input_hold(chat_input *in);
/* After the answer: the terminal back for the next line. */
void chat_input_release(chat_input *in);

#endif
