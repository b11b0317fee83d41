/* runtime/text/harmony.h — splitting gpt-oss's output (the harmony format) into its channels.
 *
 * After a prompt ending in "<|start|>assistant" (chat_template.h, SL_TMPL_HARMONY) gpt-oss writes
 * messages such as
 *     <|channel|>analysis<|message|>The user asks…<|end|><|start|>assistant<|channel|>final<|message|>4.<|return|>
 * The markers are tokens that print as text (tokenizer.c makes <|start|> <|channel|> <|message|>
 * <|constrain|> <|end|> USER_DEFINED, as llama.cpp does; <|return|> and <|call|> end generation and
 * print nothing without `special`), so the parser reads the generated text, chunk by chunk as it
 * streams: each message's header (between <|start|> or the start of the output and <|message|>)
 * names its channel after <|channel|>, and its body (up to <|end|>, <|return|>, <|call|> or a new
 * <|start|>) goes to that channel.  Bodies are reported as soon as they cannot be part of a marker:
 * a '<' that may begin one is held until the next chunk tells (or sl_harmony_finish).  Splitting the
 * text into chunks anywhere gives the same text per channel as feeding it whole.
 *
 * Output with no harmony markers at all (a header longer than 128 bytes or holding a newline cannot
 * be a header) is reported as final text, so a model that ignores the format still shows an answer.
 * Pure: no I/O, no allocation; one sl_harmony per generated stream, zero-initialized or
 * sl_harmony_init. */
#ifndef SL_RUNTIME_HARMONY_H
#define SL_RUNTIME_HARMONY_H

#include <stdbool.h>
#include <stddef.h>

enum sl_harmony_channel {
    SL_HARMONY_OTHER = 0,      /* a channel name other than the three below */
    SL_HARMONY_ANALYSIS,       /* chain of thought: serve's reasoning_content */
    SL_HARMONY_COMMENTARY,     /* tool calls and preambles (the header names the recipient) */
    SL_HARMONY_FINAL,          /* the answer: serve's content (also a message without <|channel|>) */
};

/* Called with each piece of message body, in order; text is not NUL-terminated.  header is the
 * message's header text (e.g. "assistant<|channel|>commentary to=functions.get_weather
 * <|constrain|>json"), NUL-terminated, for callers that need the recipient. */
typedef void (*sl_harmony_cb)(void *user, int channel, const char *header, const char *text, size_t len);

typedef struct sl_harmony {
    int state;                 /* internal */
    int channel;               /* channel of the message being read */
    int n_messages;            /* messages whose body has started */
    char pend[16];             /* a possible marker cut by the chunk boundary */
    size_t npend;
    char hdr[160];             /* header of the current message, NUL-terminated */
    size_t nhdr;
} sl_harmony;

void sl_harmony_init(sl_harmony *h);
/* Feed the next chunk of generated text. */
void sl_harmony_feed(sl_harmony *h, const char *text, size_t len, sl_harmony_cb cb, void *user);
/* End of generation: report what was held back. */
void sl_harmony_finish(sl_harmony *h, sl_harmony_cb cb, void *user);

/* Whole text at once: the analysis and final channels' text as malloc'd NUL-terminated strings
 * (either pointer may be NULL to ignore that channel).  0, or -ENOMEM (nothing allocated then). */
int sl_harmony_split(const char *text, size_t len, char **reasoning, char **content);

#endif
