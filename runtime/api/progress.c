/* runtime/api/progress.c — progress bars on stderr (see progress.h). */
#include "runtime/api/progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include "kernels/clock.h"


bool sl_progress_tty(void)
{
    const char *term = getenv("TERM");
    return isatty(STDERR_FILENO) && !(term && !strcmp(term, "dumb"));
}

void sl_progress_init(sl_progress *p, bool on)
{
    memset(p, 0, sizeof *p);
    p->on = on;
}

void sl_progress_clear(sl_progress *p)
{
    if (!p->drawn) return;
    fputs("\r\x1b[K", stderr);
    fflush(stderr);
    p->drawn = false;
}

void sl_progress_update(sl_progress *p, const char *stage, uint64_t done, uint64_t total)
{
    if (!p->on) return;
    uint64_t now = sl_now_ns();
    if (strncmp(p->stage, stage, sizeof p->stage - 1)) {
        snprintf(p->stage, sizeof p->stage, "%s", stage);
        p->t0 = now;
        p->last = 0;
    }
    if (total && done >= total) {   /* finished: leave the line clean for what follows */
        sl_progress_clear(p);
        return;
    }
    if (p->last && now - p->last < 80000000ull) return;
    p->last = now;
    double f = total ? (double)done / (double)total : 0;
    struct winsize ws;
    int cols = ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col ? ws.ws_col : 80;
    char amount[64];
    if (!strcmp(stage, "load"))
        snprintf(amount, sizeof amount, "%.1f/%.1f MiB", done / 1048576.0, total / 1048576.0);
    else if (!strcmp(stage, "prompt"))
        snprintf(amount, sizeof amount, "%llu/%llu tok", (unsigned long long)done, (unsigned long long)total);
    else
        snprintf(amount, sizeof amount, "%llu/%llu", (unsigned long long)done, (unsigned long long)total);
    int width = cols - 44;
    if (width > 30) width = 30;
    char bar[40] = "";
    if (width >= 5) {
        int full = (int)(f * width + 0.5);
        for (int i = 0; i < width; i++) bar[i] = i < full ? '#' : '.';
        bar[width] = 0;
    }
    fprintf(stderr, "\r%-7s %s%s%s %3.0f%% %s %.1fs\x1b[K", stage, width >= 5 ? "[" : "", bar, width >= 5 ? "]" : "",
            100 * f, amount, (now - p->t0) / 1e9);
    fflush(stderr);
    p->drawn = true;
}
