/* runtime/api/api_check.c — catching handles used after they were freed (debug builds).
 *
 * A freed sluice_model, sluice_ctx or sluice_sampler is dangling like any freed pointer: using or
 * freeing it again is undefined behaviour, and include/sluice.h says so.  Debug builds (NDEBUG not
 * defined), or any build run with SLUICE_API_CHECKS=1, keep a registry of the live handles instead
 * of reading the object, so the check itself never touches freed memory: every entry point looks its
 * handle up, and a handle that is not live (closed twice, used after close, never made by sluice)
 * stops the process with one line naming the function — at the mistake, not later in corrupted
 * memory.  Release builds without the variable skip all of it (one load of a flag per call).
 */
#include "runtime/api/api_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct live {
    const void *p;
    int kind;
} live;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static live *g_live;
static size_t g_n, g_cap;
static atomic_int g_on = -1;   /* -1: not decided yet */

static const char *kind_name(int kind)
{
    return kind == API_MODEL ? "model" : kind == API_CTX ? "context" : "sampler";
}

bool api_checks_on(void)
{
    int on = atomic_load_explicit(&g_on, memory_order_relaxed);
    if (on < 0) {
#ifdef NDEBUG
        const char *e = getenv("SLUICE_API_CHECKS");
        on = e && *e && strcmp(e, "0") != 0;
#else
        on = 1;
#endif
        atomic_store(&g_on, on);
    }
    return on;
}

static void die(const char *fn, const void *p, int kind, const char *what)
{
    fprintf(stderr, "sluice: %s: %s %p %s\n", fn, kind_name(kind), p, what);
    abort();
}

void api_track(const void *p, int kind)
{
    if (!p || !api_checks_on()) return;
    pthread_mutex_lock(&g_mu);
    if (g_n == g_cap) {
        size_t cap = g_cap ? 2 * g_cap : 16;
        live *nl = realloc(g_live, cap * sizeof *nl);
        if (!nl) {   /* cannot track: stop checking rather than report false errors */
            atomic_store(&g_on, 0);
            pthread_mutex_unlock(&g_mu);
            return;
        }
        g_live = nl;
        g_cap = cap;
    }
    g_live[g_n++] = (live){ p, kind };
    pthread_mutex_unlock(&g_mu);
}

/* Index of p in the registry as `kind`, or -1. */
static long find(const void *p, int kind)
{
    for (size_t i = 0; i < g_n; i++)
        if (g_live[i].p == p && g_live[i].kind == kind) return (long)i;
    return -1;
}

void api_check(const void *p, int kind, const char *fn)
{
    if (!p || !api_checks_on()) return;
    pthread_mutex_lock(&g_mu);
    long i = find(p, kind);
    pthread_mutex_unlock(&g_mu);
    if (i < 0) die(fn, p, kind, "is not live: used after it was freed (or not made by sluice)");
}

void api_untrack(const void *p, int kind, const char *fn)
{
    if (!p || !api_checks_on()) return;
    pthread_mutex_lock(&g_mu);
    long i = find(p, kind);
    if (i >= 0) g_live[i] = g_live[--g_n];
    if (g_n == 0) {   /* nothing live: leave nothing allocated (leak checkers) */
        free(g_live);
        g_live = NULL;
        g_cap = 0;
    }
    pthread_mutex_unlock(&g_mu);
    if (i < 0) die(fn, p, kind, "is not live: freed twice (or not made by sluice)");
}
