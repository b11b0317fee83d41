/* runtime/text/harmony.c — gpt-oss's harmony output split into channels (see harmony.h). */
#include "runtime/text/harmony.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { ST_HEADER = 0, ST_BODY = 1 };
enum { M_START, M_CHANNEL, M_MESSAGE, M_END, M_RETURN, M_CALL, M_CONSTRAIN, M_COUNT };

static const char *const k_marker[M_COUNT] = {
    "<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>", "<|constrain|>",
};

#define HDR_MAX 128   /* a longer header is not one: the output is not in the harmony format */

void sl_harmony_init(sl_harmony *h)
{
    memset(h, 0, sizeof *h);
}

/* The marker p[0..n) is (>= 0), -1 when it is a proper prefix of one, -2 when no marker starts so. */
static int classify(const char *p, size_t n)
{
    bool prefix = false;
    for (int m = 0; m < M_COUNT; m++) {
        size_t l = strlen(k_marker[m]);
        if (n <= l && !memcmp(k_marker[m], p, n)) {
            if (n == l) return m;
            prefix = true;
        }
    }
    return prefix ? -1 : -2;
}

/* Channel named after the last <|channel|> of the header: its word up to a space or a marker. */
static int header_channel(const char *hdr)
{
    const char *c = NULL;
    for (const char *p = hdr; (p = strstr(p, "<|channel|>")); p += 11) c = p + 11;
    if (!c) return SL_HARMONY_FINAL;
    size_t n = strcspn(c, " <");
    if (n == 8 && !memcmp(c, "analysis", 8)) return SL_HARMONY_ANALYSIS;
    if (n == 5 && !memcmp(c, "final", 5)) return SL_HARMONY_FINAL;
    if (n == 10 && !memcmp(c, "commentary", 10)) return SL_HARMONY_COMMENTARY;
    return SL_HARMONY_OTHER;
}

static void hdr_clear(sl_harmony *h)
{
    h->nhdr = 0;
    h->hdr[0] = 0;
}

/* Text that is not a marker. */
static void on_text(sl_harmony *h, const char *s, size_t n, sl_harmony_cb cb, void *user)
{
    if (!n) return;
    if (h->state == ST_BODY) {
        cb(user, h->channel, h->hdr, s, n);
        return;
    }
    if (h->nhdr + n <= HDR_MAX && !memchr(s, '\n', n)) {
        memcpy(h->hdr + h->nhdr, s, n);
        h->nhdr += n;
        h->hdr[h->nhdr] = 0;
        return;
    }
    /* Not a header: what was gathered and this text are a final answer without markers. */
    char held[HDR_MAX + 1];
    size_t nh = h->nhdr;
    memcpy(held, h->hdr, nh);
    hdr_clear(h);
    h->state = ST_BODY;
    h->channel = SL_HARMONY_FINAL;
    h->n_messages++;
    if (nh) cb(user, h->channel, h->hdr, held, nh);
    cb(user, h->channel, h->hdr, s, n);
}

static void on_marker(sl_harmony *h, int m)
{
    switch (m) {
    case M_START:                          /* a new message: its header follows */
        h->state = ST_HEADER;
        hdr_clear(h);
        break;
    case M_CHANNEL:
    case M_CONSTRAIN:
        if (h->state == ST_BODY) {         /* a header without <|end|><|start|> before it */
            h->state = ST_HEADER;
            hdr_clear(h);
        }
        if (h->nhdr + strlen(k_marker[m]) <= HDR_MAX) {
            memcpy(h->hdr + h->nhdr, k_marker[m], strlen(k_marker[m]) + 1);
            h->nhdr += strlen(k_marker[m]);
        }
        break;
    case M_MESSAGE:
        if (h->state == ST_HEADER) {
            h->channel = header_channel(h->hdr);
            h->state = ST_BODY;
            h->n_messages++;
        }
        break;
    default:                               /* <|end|>, <|return|>, <|call|>: the message ends */
        h->state = ST_HEADER;
        hdr_clear(h);
        break;
    }
}

void sl_harmony_feed(sl_harmony *h, const char *s, size_t n, sl_harmony_cb cb, void *user)
{
    size_t i = 0;
    while (i < n) {
        if (h->npend == 0) {               /* plain text up to the next '<' in one piece */
            const char *lt = memchr(s + i, '<', n - i);
            size_t k = lt ? (size_t)(lt - (s + i)) : n - i;
            on_text(h, s + i, k, cb, user);
            i += k;
            if (i == n) break;
        }
        h->pend[h->npend++] = s[i++];
        int m = classify(h->pend, h->npend);
        if (m >= 0) {
            h->npend = 0;
            on_marker(h, m);
        } else if (m == -2) {              /* the '<' was text; what follows it is looked at again */
            char tmp[sizeof h->pend];
            size_t t = h->npend;
            memcpy(tmp, h->pend, t);
            h->npend = 0;
            on_text(h, tmp, 1, cb, user);
            sl_harmony_feed(h, tmp + 1, t - 1, cb, user);
        }
    }
}

void sl_harmony_finish(sl_harmony *h, sl_harmony_cb cb, void *user)
{
    if (h->npend) {
        char tmp[sizeof h->pend];
        size_t t = h->npend;
        memcpy(tmp, h->pend, t);
        h->npend = 0;
        on_text(h, tmp, t, cb, user);
    }
    /* Output that never opened a message and holds no marker: plain text, the answer. */
    if (h->state == ST_HEADER && h->n_messages == 0 && h->nhdr && !strstr(h->hdr, "<|")) {
        char held[HDR_MAX + 1];
        size_t nh = h->nhdr;
        memcpy(held, h->hdr, nh);
        hdr_clear(h);
        h->state = ST_BODY;
        h->channel = SL_HARMONY_FINAL;
        h->n_messages++;
        cb(user, h->channel, h->hdr, held, nh);
    }
}

/* ---- whole text -------------------------------------------------------------------------------- */

typedef struct acc { char *p[2]; size_t n[2], cap[2]; bool want[2]; bool oom; } acc;

static void acc_cb(void *user, int channel, const char *header, const char *s, size_t n)
{
    (void)header;
    acc *a = user;
    int k = channel == SL_HARMONY_ANALYSIS ? 0 : channel == SL_HARMONY_FINAL ? 1 : -1;
    if (k < 0 || !a->want[k] || a->oom) return;
    if (a->n[k] + n + 1 > a->cap[k]) {
        size_t cap = a->cap[k] ? a->cap[k] : 64;
        while (cap < a->n[k] + n + 1) cap *= 2;
        char *np = realloc(a->p[k], cap);
        if (!np) { a->oom = true; return; }
        a->p[k] = np;
        a->cap[k] = cap;
    }
    memcpy(a->p[k] + a->n[k], s, n);
    a->n[k] += n;
    a->p[k][a->n[k]] = 0;
}

int sl_harmony_split(const char *text, size_t len, char **reasoning, char **content)
{
    acc a = { .want = { reasoning != NULL, content != NULL } };
    sl_harmony h;
    sl_harmony_init(&h);
    sl_harmony_feed(&h, text, len, acc_cb, &a);
    sl_harmony_finish(&h, acc_cb, &a);
    for (int k = 0; k < 2 && !a.oom; k++)
        if (a.want[k] && !a.p[k] && !(a.p[k] = calloc(1, 1))) a.oom = true;
    if (a.oom) {
        free(a.p[0]);
        free(a.p[1]);
        return -ENOMEM;
    }
    if (reasoning) *reasoning = a.p[0];
    if (content) *content = a.p[1];
    return 0;
}
