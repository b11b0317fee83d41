/* runtime/cli/sigwatch.c — see sigwatch.h. */
#include "runtime/cli/sigwatch.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/alive.h"
#include "kernels/clock.h"

/* Nothing moved for this long: the evaluation cannot reach its next layer.  Longer than anything
 * one parallel loop or one 4 MiB read takes on a working machine (a stuck worker is forever). */
#define STILL_NS   1000000000ull
/* The evaluation's own way out gets at least this long after the signal: the stamp may be old only
 * because the signal came between two loops (sampling, output). */
#define MIN_NS      200000000ull
#define POLL_NS      20000000ull

static sem_t g_sem;
static atomic_bool g_started;
static atomic_int g_busy;      /* the phase: SIGWATCH_IDLE, _LOAD or _EVAL */
static atomic_int g_sig;
static _Atomic uint64_t g_sig_ns;

static const char *sig_name(int sig)
{
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "signal";
}

static void leave(int sig, const char *why)
{
    char msg[240];
    int n = snprintf(msg, sizeof msg, "\nsluice: %s: %s\n", sig_name(sig), why);
    if (n > 0 && write(STDERR_FILENO, msg, (size_t)n) < 0) { /* nothing more to do */ }
    _exit(128 + sig);
}

/* Contract: returns when the command left its busy phase; _exit(128 + sig) when it is still loading
 * MIN_NS after the signal (nothing to save yet: a large model's load is not made to wait for), or
 * when an evaluation stopped moving first. */
static void watch(int sig, uint64_t t_sig)
{
    for (int phase; (phase = atomic_load(&g_busy)) != SIGWATCH_IDLE;) {
        uint64_t now = sl_now_ns(), last = sl_alive_last_ns();
        uint64_t deadline = phase == SIGWATCH_LOAD || last + STILL_NS < t_sig + MIN_NS ? t_sig + MIN_NS : last + STILL_NS;
        if (now >= deadline) {
            if (phase == SIGWATCH_LOAD) leave(sig, "leaving during the model load (nothing to save yet)");
            char why[200], still[48] = "since it started";
            if (last) snprintf(still, sizeof still, "for %.1f s", (double)(now - last) / 1e9);
            snprintf(why, sizeof why, "the evaluation has not moved %s (a worker thread is stuck): leaving without "
                     "finishing it", still);
            leave(sig, why);
        }
        uint64_t wait = deadline - now < POLL_NS ? deadline - now : POLL_NS;
        struct timespec ts = { 0, (long)wait };
        nanosleep(&ts, NULL);
    }
}

static void *watchdog(void *unused)
{
    (void)unused;
    for (;;) {
        while (sem_wait(&g_sem) && errno == EINTR) {}
        watch(atomic_load(&g_sig), atomic_load(&g_sig_ns));
        /* more signals of the evaluation just left are answered: the next one starts afresh */
        while (sem_trywait(&g_sem) == 0) {}
    }
    return NULL;
}

static void start_watchdog(void)
{
    if (atomic_exchange(&g_started, true)) return;
    if (sem_init(&g_sem, 0, 0)) { atomic_store(&g_started, false); return; }
    /* the watchdog takes no signal: a handler running on it would post to the semaphore it waits on,
     * which is fine, but the command's own threads are where interruptions belong */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t th;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 64 * 1024);
    if (pthread_create(&th, &at, watchdog, NULL)) atomic_store(&g_started, false);
    pthread_attr_destroy(&at);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void sigwatch_install(void (*handler)(int))
{
    struct sigaction sa = { .sa_handler = handler };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    start_watchdog();
}

/* The grace period moves the signal's time: the watchdog's 0.2 s start after it. */
void sigwatch_after(int sig, double grace_s)
{
    start_watchdog();
    if (!atomic_load(&g_started)) return;
    atomic_store(&g_busy, SIGWATCH_EVAL);
    atomic_store(&g_sig_ns, sl_now_ns() + (uint64_t)(grace_s > 0 ? grace_s * 1e9 : 0));
    atomic_store(&g_sig, sig);
    sem_post(&g_sem);
}

void sigwatch_busy(int phase) { atomic_store(&g_busy, phase); }

/* Async-signal-safe: atomics, clock_gettime (through sl_now_ns) and sem_post only. */
void sigwatch_signal(int sig)
{
    if (!atomic_load(&g_started) || !atomic_load(&g_busy)) return;
    int saved = errno;
    atomic_store(&g_sig_ns, sl_now_ns());
    atomic_store(&g_sig, sig);
    sem_post(&g_sem);
    errno = saved;
}
