/* runtime/api/progress.h — one-line progress bars on stderr, for people at a terminal.
 *
 * Drawn only when enabled (the CLI enables them when stderr is a TTY and --quiet/--json are not
 * given), redrawn at most every 80 ms, and erased when the work ends, so that they never mix with
 * the text on stdout or the one-line messages on stderr that scripts read.
 */
#ifndef SL_RUNTIME_PROGRESS_H
#define SL_RUNTIME_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct sl_progress {
    bool on;            /* draw at all */
    bool drawn;         /* a bar is on the line now */
    uint64_t t0;        /* when the current stage started */
    uint64_t last;      /* last redraw */
    char stage[16];
} sl_progress;

/* True when stderr is a terminal that understands "\r" and "\x1b[K" (TERM is not "dumb"). */
bool sl_progress_tty(void);
void sl_progress_init(sl_progress *p, bool on);
/* Show `done` of `total` for stage "load" (bytes) or "prompt" (tokens); any other stage: units.
 * done == total erases the bar. */
void sl_progress_update(sl_progress *p, const char *stage, uint64_t done, uint64_t total);
/* Erase the bar if one is drawn. */
void sl_progress_clear(sl_progress *p);

#endif
