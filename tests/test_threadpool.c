/* tests/test_threadpool.c — the thread pool alone (kernels/threadpool.c): every handoff, many times.
 *
 * The reduced reproducer of issue 45 (a `sluice run -t 2` that never finished under qemu-aarch64):
 * tens of thousands of back-to-back sl_pool_run calls of a tiny job, as a token's few hundred matrix
 * products make them, with 2, 3 and 4 threads (more threads than this machine's 2 cores, so workers
 * are preempted mid-handoff), spinning between jobs (the default) and sleeping at once (spin 0: the
 * condition-variable path every time).  After each call every thread must have run the job exactly
 * once and the caller must see what the workers wrote (the handoff's ordering: plain stores before
 * the workers' pending decrement, read after the caller saw it reach zero).  A lost wake-up hangs;
 * the timeout turns that into a failure.  Under qemu-user (scripts/test-arm64.sh) this is the same
 * code on the emulated aarch64 memory model and futex path.
 */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kernels/alive.h"
#include "kernels/clock.h"
#include "kernels/threadpool.h"
#include "qemu_testutil.h"

#define LINE 16   /* longs per thread: a cache line or two of plain stores per job */

typedef struct job {
    long round;
    long data[8][LINE];
    atomic_int calls;
    atomic_int bad_nth;
} job;

static void fn(void *a, int ith, int nth)
{
    job *j = a;
    if (nth < 1 || ith < 0 || ith >= nth || nth > 8) { atomic_fetch_add(&j->bad_nth, 1); return; }
    for (int k = 0; k < LINE; k++) j->data[ith][k] = j->round * 31 + ith * LINE + k;   /* plain stores */
    atomic_fetch_add_explicit(&j->calls, 1, memory_order_relaxed);
}

/* rounds back-to-back jobs on a pool of n threads with the given spin (µs; -1: the default). */
static void hammer(int n, long spin_us, long rounds)
{
    sl_pool_force_spin_us(spin_us);
    sl_pool *p = sl_pool_create(n);
    sl_pool_force_spin_us(-1);
    cr_assert_not_null(p);
    cr_assert_eq(sl_pool_size(p), n);
    static job j;
    memset(&j, 0, sizeof j);
    uint64_t t0 = sl_now_ns(), worst = 0;
    for (long r = 1; r <= rounds; r++) {
        j.round = r;
        uint64_t a = sl_now_ns();
        sl_pool_run(p, fn, &j);
        uint64_t d = sl_now_ns() - a;
        if (d > worst) worst = d;
        cr_assert_eq(atomic_load_explicit(&j.calls, memory_order_relaxed), (int)(r * n),
                     "%d threads, spin %ld: after round %ld, %d calls (want %ld)", n, spin_us, r,
                     atomic_load(&j.calls), r * n);
        for (int i = 0; i < n; i++)
            for (int k = 0; k < LINE; k++)
                cr_assert_eq(j.data[i][k], r * 31 + i * LINE + k,
                             "%d threads, spin %ld, round %ld: thread %d's store %d not seen by the caller", n, spin_us,
                             r, i, k);
    }
    cr_assert_eq(atomic_load(&j.bad_nth), 0, "fn called with a wrong (ith, nth)");
    sl_pool_free(p);
    fprintf(stderr, "pool: %d threads, spin %ld us: %ld runs, %.1f us each, slowest %.1f ms\n", n, spin_us, rounds,
            (double)(sl_now_ns() - t0) / 1e3 / (double)rounds, (double)worst / 1e6);
}

/* emulated, a handoff costs ~50 µs instead of ~1: fewer rounds, the same paths */
static long rounds(void) { return tq_under_qemu_user() ? 4000 : 20000; }

Test(pool, two_threads_spinning, .timeout = 600) { hammer(2, -1, rounds()); }
Test(pool, two_threads_sleeping, .timeout = 600) { hammer(2, 0, rounds()); }
Test(pool, four_threads_spinning, .timeout = 600) { hammer(4, -1, rounds()); }
Test(pool, four_threads_sleeping, .timeout = 600) { hammer(4, 0, rounds()); }
Test(pool, three_threads_short_spin, .timeout = 600) { hammer(3, 2, rounds()); }

/* One thread runs inline; a NULL pool too. */
Test(pool, one_thread_and_null_run_inline)
{
    hammer(1, -1, 100);
    static job j;
    memset(&j, 0, sizeof j);
    j.round = 7;
    sl_pool_run(NULL, fn, &j);
    cr_assert_eq(atomic_load(&j.calls), 1);
    cr_assert_eq(j.data[0][0], 7 * 31);
    cr_assert_eq(sl_pool_size(NULL), 1);
}

/* Every finished loop stamps the liveness clock the stop-signal watchdog reads (kernels/alive.h). */
Test(pool, each_run_stamps_the_alive_clock)
{
    for (int n = 1; n <= 2; n++) {
        sl_pool *p = sl_pool_create(n);
        static job j;
        memset(&j, 0, sizeof j);
        uint64_t before = sl_now_ns();
        sl_pool_run(p, fn, &j);
        uint64_t stamp = sl_alive_last_ns();
        cr_assert_geq(stamp, before, "%d thread(s): no stamp after sl_pool_run", n);
        cr_assert_leq(stamp, sl_now_ns());
        sl_pool_free(p);
    }
}
