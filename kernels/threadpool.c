/* kernels/threadpool.c — persistent worker threads: spin-then-sleep handoff.
 *
 * A token of a llama model runs a few hundred short parallel loops (one per matrix product, plus
 * attention), each a few tens of microseconds to a few milliseconds.  A condition-variable handoff
 * costs a futex wake-up and a scheduler trip per loop on every worker (~5-50 µs), which is a
 * visible share of decode time.  So both sides spin first:
 *   - a worker that finished a job watches the job counter `gen` for up to the spin time before it
 *     goes to sleep on the condition variable;
 *   - the caller, after its own share, watches `pending` for up to the spin time before it sleeps.
 * Sleeping is race-free because the flags that say "someone sleeps" are only changed under the
 * mutex, and the wakers check them under the mutex after publishing their change (gen / pending are
 * seq_cst atomics, so a sleeper that re-checks under the mutex either sees the change or is seen).
 * Between tokens (sampling, I/O waits) the spin times out and the threads sleep, so an idle pool
 * costs no CPU.  SLUICE_SPIN_US overrides the spin time (0: always sleep at once — the old behaviour).
 */
#include "kernels/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "kernels/alive.h"
#include "kernels/clock.h"

/* Spin 50 µs (longer than the gaps between the parallel loops of a token), pausing for the first
 * 5 µs and yielding the core after that.  Measured on the shared 2-core machine (sl_pool_run of
 * ~1.5 µs of work, other processes keeping the load at 4-5, so numbers swing 2x run to run):
 * condition variable only 22-47 µs per run; pure spin 3-5 µs in quiet moments but 200-750 µs in
 * busy ones (the spinner holds the core its preempted partner needs); pause-then-yield 22-53 µs
 * when busy, and the pure-spin figure when quiet. */
#define SPIN_NS_DEFAULT 50000
#define YIELD_AFTER_NS  5000

struct sl_pool {
    int n;                      /* threads including the caller */
    pthread_t *tid;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    atomic_ulong gen;           /* bumped for every job */
    atomic_int pending;         /* workers still running the current job */
    atomic_int quit;
    int sleepers;               /* workers waiting on `go` (under mu) */
    int caller_sleeps;          /* the caller waits on `done` (under mu) */
    sl_pool_fn fn;
    void *arg;
    atomic_ullong spin_ns;      /* relaxed: a tuning knob, read while workers idle */
    bool spin_forced;           /* sl_pool_force_spin_us was in force at creation: set_spin leaves it */
    long stall_ms;              /* sl_pool_debug_stall_ms at creation: the last worker's first job waits */
};

typedef struct { sl_pool *p; int ith; } worker_arg;

/* Process-wide spin for pools created from now on (-1: the default, adjustable by sl_pool_set_spin). */
static atomic_long g_forced_spin_us = -1;

void sl_pool_force_spin_us(long us) { atomic_store(&g_forced_spin_us, us < 0 ? -1 : us); }

/* Process-wide injected stall for pools created from now on (0: none). */
static atomic_long g_stall_ms;

void sl_pool_debug_stall_ms(long ms) { atomic_store(&g_stall_ms, ms > 0 ? ms : 0); }

/* The injected stall: the whole time, whatever signals interrupt the sleep (a stuck worker does not
 * come back because the process got a signal). */
static void stall(long ms)
{
    const uint64_t end = sl_now_ns() + (uint64_t)ms * 1000000u;
    for (uint64_t t; (t = sl_now_ns()) < end;) {
        uint64_t left = end - t;
        struct timespec ts = { (time_t)(left / 1000000000u), (long)(left % 1000000000u) };
        nanosleep(&ts, NULL);
    }
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}


/* Contract: returns true as soon as cond(p) holds, false after spinning spin_ns without it
 * (the clock is read once per 64 pauses). */
static bool spin_until(sl_pool *p, bool (*cond)(sl_pool *, unsigned long), unsigned long arg)
{
    const uint64_t spin = atomic_load_explicit(&p->spin_ns, memory_order_relaxed);
    if (!spin) return cond(p, arg);
    uint64_t t0 = 0, t = 0;
    for (unsigned k = 0;; k++) {
        if (cond(p, arg)) return true;
        if ((k & 63) == 0) {
            t = sl_now_ns();
            if (!t0) t0 = t;
            else if (t - t0 > spin) return false;
        }
        /* after YIELD_AFTER_NS, offer the core to whatever waits for it (often our own preempted
         * partner on a busy machine) instead of burning it */
        if (t - t0 > YIELD_AFTER_NS) sched_yield();
        else cpu_relax();
    }
}

static bool new_job(sl_pool *p, unsigned long seen)
{
    return atomic_load(&p->gen) != seen || atomic_load_explicit(&p->quit, memory_order_relaxed);
}

static bool all_done(sl_pool *p, unsigned long unused)
{
    (void)unused;
    return atomic_load(&p->pending) == 0;
}

static void *worker(void *a)
{
    worker_arg *wa = a;
    sl_pool *p = wa->p;
    const int ith = wa->ith;
    free(wa);
    unsigned long seen = 0;
    bool first = true;
    for (;;) {
        if (!spin_until(p, new_job, seen)) {
            pthread_mutex_lock(&p->mu);
            p->sleepers++;
            while (!new_job(p, seen)) pthread_cond_wait(&p->go, &p->mu);
            p->sleepers--;
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit)) break;
        seen = atomic_load(&p->gen);
        /* fn and arg were written before gen was bumped (seq_cst store), so they are visible */
        if (first && p->stall_ms && ith == p->n - 1) stall(p->stall_ms);
        first = false;
        p->fn(p->arg, ith, p->n);
        if (atomic_fetch_sub(&p->pending, 1) == 1) {
            pthread_mutex_lock(&p->mu);
            if (p->caller_sleeps) pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

/* Contract: see threadpool.h.  A forced spin wins (it is how the A/B runs are made). */
void sl_pool_set_spin(sl_pool *p, long us)
{
    if (!p || p->spin_forced) return;
    atomic_store_explicit(&p->spin_ns, (unsigned long long)(us > 0 ? us : 0) * 1000u, memory_order_relaxed);
}

/* Contract: a pool of n_threads (>= 1; the caller counts as one) or NULL when out of memory; if
 * some threads cannot be created, the pool runs with those that were. */
sl_pool *sl_pool_create(int n_threads)
{
    if (n_threads < 1) n_threads = 1;
    sl_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    atomic_init(&p->spin_ns, SPIN_NS_DEFAULT);
    long forced = atomic_load(&g_forced_spin_us);
    if (forced >= 0) {
        atomic_store(&p->spin_ns, (unsigned long long)forced * 1000u);
        p->spin_forced = true;
    }
    p->stall_ms = atomic_load(&g_stall_ms);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    p->tid = calloc((size_t)n_threads, sizeof *p->tid);
    if (!p->tid) { free(p); return NULL; }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa || pthread_create(&p->tid[i], NULL, worker, (wa->p = p, wa->ith = i, wa))) {
            free(wa);
            p->n = i;            /* run with the threads we got */
            break;
        }
    }
    return p;
}

void sl_pool_free(sl_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, 1);
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->tid[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    free(p->tid);
    free(p);
}

int sl_pool_size(const sl_pool *p) { return p ? p->n : 1; }

/* Contract: fn(arg, i, n) has run for every i in 0..n-1 when this returns (i = 0 on the calling
 * thread).  Not reentrant: one sl_pool_run at a time per pool. */
void sl_pool_run(sl_pool *p, sl_pool_fn fn, void *arg)
{
    if (!p || p->n == 1) { fn(arg, 0, 1); sl_alive_stamp(); return; }
    p->fn = fn;
    p->arg = arg;
    atomic_store(&p->pending, p->n - 1);
    atomic_fetch_add(&p->gen, 1);
    pthread_mutex_lock(&p->mu);
    if (p->sleepers) pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    fn(arg, 0, p->n);
    if (!spin_until(p, all_done, 0)) {
        pthread_mutex_lock(&p->mu);
        p->caller_sleeps = 1;
        while (atomic_load(&p->pending)) pthread_cond_wait(&p->done, &p->mu);
        p->caller_sleeps = 0;
        pthread_mutex_unlock(&p->mu);
    }
    sl_alive_stamp();
}

int sl_ncpu(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}
