/* kernels/threadpool.h — a small persistent pthread pool for data-parallel loops.
 *
 * sl_pool_run(pool, fn, arg) calls fn(arg, i, n) for i = 0..n-1 with n = sl_pool_size(pool), one
 * call per thread (the caller's thread runs i = 0), and returns when all calls are done.  No threads
 * are created per call; between calls workers spin for up to 50 µs (sl_pool_set_spin; 0 = never)
 * watching for the next job, then sleep on a condition variable (see threadpool.c for why).
 * The matrix products (kernels/matmul.c) run on it, which is why it lives with the kernels.
 */
#ifndef SL_KERNELS_THREADPOOL_H
#define SL_KERNELS_THREADPOOL_H

typedef struct sl_pool sl_pool;
typedef void (*sl_pool_fn)(void *arg, int ith, int nth);

/* n_threads >= 1 (1: no worker threads at all).  NULL on failure. */
sl_pool *sl_pool_create(int n_threads);
void     sl_pool_free(sl_pool *p);
int      sl_pool_size(const sl_pool *p);
/* Runs fn on every thread of the pool (p may be NULL: runs fn(arg, 0, 1) inline). */
void     sl_pool_run(sl_pool *p, sl_pool_fn fn, void *arg);

/* Spin time between jobs, µs (0: sleep at once); a forced spin (below), when set, takes precedence.
 * A streaming run whose token waits mostly on the disk sets 0: spinning workers then take the CPU
 * the reads need (the pread/mmap reader thread, the VM's I/O completions; docs/planner.md). */
void     sl_pool_set_spin(sl_pool *p, long us);
/* Debug/test hook (the CLI applies env SLUICE_SPIN_US through sluice_debug_env): pools created after
 * this call spin for `us` microseconds and ignore sl_pool_set_spin; us < 0 restores the default. */
void     sl_pool_force_spin_us(long us);
/* Test hook (env SLUICE_POOL_STALL_MS through sluice_debug_env): in pools created after this call the
 * last worker sleeps `ms` milliseconds before its first job, signals or not: a stuck worker, for the
 * tests of the stop-signal watchdog (runtime/cli/sigwatch.c).  0 turns it off. */
void     sl_pool_debug_stall_ms(long ms);

/* Number of online CPUs (>= 1). */
int sl_ncpu(void);

#endif
