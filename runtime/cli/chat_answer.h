/* runtime/cli/chat_answer.h — one answer of `sluice chat`, as it is generated: what is printed
 * (stdout: the answer; stderr: the model's reasoning, on request) and what the conversation keeps.
 *
 * Plain templates: the generated text is the answer, cut before the template's stop text (held
 * back while it may still be the start of it).  Harmony (gpt-oss): the text is split into channels
 * as it streams (runtime/text/harmony.h); the final channel is the answer and the message kept, the
 * analysis is the reasoning — printed to stderr only with `show_reasoning` (dim on a terminal), and
 * never kept: gpt-oss's template drops earlier turns' analysis too.  Commentary and other channels
 * count as reasoning here (chat has no tools). */
#ifndef SL_CLI_CHAT_ANSWER_H
#define SL_CLI_CHAT_ANSWER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "runtime/text/harmony.h"

typedef struct chat_answer {
    /* settings: set before chat_answer_begin, kept across answers */
    const char *stop_text;          /* plain templates: the text that ends the answer, or NULL */
    bool harmony;                   /* split gpt-oss's channels */
    bool show_reasoning;            /* print the reasoning to `err` */
    bool err_tty;                   /* `err` is a terminal: the reasoning dim */
    FILE *out, *err;
    /* the answer being generated */
    char *raw;                      /* every byte generated, NUL-terminated */
    size_t raw_len, raw_cap, printed;
    char *msg;                      /* what the conversation keeps (harmony: the final channel) */
    size_t msg_len, msg_cap;
    bool at_start;                  /* nothing of the answer printed yet (leading blanks skipped) */
    bool in_reasoning;              /* the last text printed was reasoning (on `err`) */
    bool oom;
    sl_harmony h;
} chat_answer;

/* Start a new answer (buffers kept for reuse). */
void chat_answer_begin(chat_answer *a);
/* The next generated text.  Returns true when the answer is complete (the stop text appeared: the
 * answer is cut before it), false to go on; sets a->oom (and returns true) when out of memory. */
bool chat_answer_add(chat_answer *a, const char *text, size_t len);
/* Generation ended: print what was held back, close the reasoning's line. */
void chat_answer_end(chat_answer *a);
/* After chat_answer_end the message the conversation keeps is a->msg, a->msg_len (NUL-terminated; NULL only
 * with a->oom). */
/* Free the buffers. */
void chat_answer_free(chat_answer *a);

#endif
