/* runtime/cli/chat_answer.c — printing one answer of `sluice chat` as it is generated (contract in
 * chat_answer.h). */
#include "runtime/cli/chat_answer.h"

#include <stdlib.h>
#include <string.h>

#define DIM   "\x1b[2m"
#define UNDIM "\x1b[0m"

/* Append n bytes to a growing NUL-terminated buffer; false when out of memory. */
static bool append(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap * 2 : 1024;
        while (c < *len + n + 1) c *= 2;
        char *nb = realloc(*buf, c);
        if (!nb) return false;
        *buf = nb;
        *cap = c;
    }
    if (n) memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = 0;
    return true;
}

/* The reasoning printed last ends: back to normal text on a line of its own. */
static void end_reasoning(chat_answer *a)
{
    if (!a->in_reasoning) return;
    fputs(a->err_tty ? UNDIM "\n" : "\n", a->err);
    fflush(a->err);
    a->in_reasoning = false;
}

static void out_write(chat_answer *a, const char *s, size_t n)
{
    if (a->at_start) {   /* answers usually start with the space of the first word piece */
        while (n && (*s == ' ' || *s == '\n')) { s++; n--; }
        if (n) a->at_start = false;
    }
    if (!n) return;
    end_reasoning(a);
    fwrite(s, 1, n, a->out);
    fflush(a->out);
}

/* Plain templates: print what of the text is certainly not the start of the stop text; true when
 * the stop text appeared (the text is cut before it). */
static bool flush_plain(chat_answer *a, bool final)
{
    size_t safe = a->raw_len;
    bool stop = false;
    if (a->stop_text && *a->stop_text) {
        size_t sl = strlen(a->stop_text);
        char *hit = NULL;
        for (size_t i = a->printed; i + sl <= a->raw_len; i++)
            if (!memcmp(a->raw + i, a->stop_text, sl)) { hit = a->raw + i; break; }
        if (hit) {
            safe = (size_t)(hit - a->raw);
            a->raw_len = safe;
            a->raw[safe] = 0;
            stop = true;
        } else if (!final) {
            /* hold back the longest tail that could still grow into the stop text */
            for (size_t k = sl - 1; k > 0; k--)
                if (a->raw_len - a->printed >= k && !memcmp(a->raw + a->raw_len - k, a->stop_text, k)) {
                    safe = a->raw_len - k;
                    break;
                }
        }
    }
    if (safe > a->printed) {
        out_write(a, a->raw + a->printed, safe - a->printed);
        a->printed = safe;
    }
    return stop;
}

/* Harmony: one piece of a message body.  The final channel is the answer; anything else is
 * reasoning, shown on request. */
static void on_channel(void *user, int channel, const char *header, const char *text, size_t len)
{
    (void)header;
    chat_answer *a = user;
    if (channel == SL_HARMONY_FINAL) {
        out_write(a, text, len);
        if (!append(&a->msg, &a->msg_len, &a->msg_cap, text, len)) a->oom = true;
        return;
    }
    if (!a->show_reasoning || !len) return;
    if (!a->in_reasoning) {
        fputs(a->err_tty ? DIM : "reasoning: ", a->err);
        a->in_reasoning = true;
    }
    fwrite(text, 1, len, a->err);
    fflush(a->err);
}

void chat_answer_begin(chat_answer *a)
{
    a->raw_len = a->printed = a->msg_len = 0;
    if (a->raw) a->raw[0] = 0;
    if (a->msg) a->msg[0] = 0;
    a->at_start = true;
    a->in_reasoning = false;
    a->oom = false;
    sl_harmony_init(&a->h);
}

bool chat_answer_add(chat_answer *a, const char *text, size_t len)
{
    if (!append(&a->raw, &a->raw_len, &a->raw_cap, text, len)) { a->oom = true; return true; }
    if (a->harmony) {
        sl_harmony_feed(&a->h, text, len, on_channel, a);
        return a->oom;
    }
    return flush_plain(a, false);
}

void chat_answer_end(chat_answer *a)
{
    if (a->harmony) sl_harmony_finish(&a->h, on_channel, a);
    else flush_plain(a, true);
    end_reasoning(a);
    if (!a->harmony) {   /* the message kept is the text as cut */
        a->msg_len = 0;
        if (!append(&a->msg, &a->msg_len, &a->msg_cap, a->raw ? a->raw : "", a->raw_len)) a->oom = true;
    } else if (!a->msg && !append(&a->msg, &a->msg_len, &a->msg_cap, "", 0)) {
        a->oom = true;
    }
}

void chat_answer_free(chat_answer *a)
{
    free(a->raw);
    free(a->msg);
    a->raw = a->msg = NULL;
    a->raw_cap = a->msg_cap = 0;
}
