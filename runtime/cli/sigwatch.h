/* runtime/cli/sigwatch.h — a stop signal ends the command even when its evaluation cannot stop.
 *
 * run and chat stop on SIGINT/SIGTERM/SIGHUP by cancelling the context: the evaluation returns at its
 * next layer, then the command flushes, saves its session and exits (128 + signal).  That needs the
 * layer to finish.  A pool worker that never comes back keeps the caller in sl_pool_run for ever, and
 * the signal alone cannot end that (issue 45: under qemu-user a `timeout 20` run took 10 min 52 s to
 * end).  After a stop signal that lands while the command is evaluating (sigwatch_busy), a watchdog
 * thread waits as long as the computation keeps moving (kernels/alive.h: every parallel loop and
 * every chunk read stamps it), so a slow layer still stops cleanly; once nothing has moved for a
 * second (and at least 0.2 s after the signal) it says so on stderr and leaves with 128 + signal,
 * without saving (the KV cache is mid-step).
 */
#ifndef SL_CLI_SIGWATCH_H
#define SL_CLI_SIGWATCH_H

#include <stdbool.h>

/* Installs `handler` for SIGINT, SIGTERM and SIGHUP (without SA_RESTART: a signal interrupts a blocked
 * read) and starts the watchdog thread (once per process; without it the signals work as before). */
void sigwatch_install(void (*handler)(int));
/* What the command is doing.  IDLE: nothing the watchdog watches (reading input, saving, printing);
 * entering it means a signal was honoured (the evaluation returned) and the watchdog stands down.
 * LOAD: opening the model and what comes before the first evaluation; a stop signal then leaves
 * 0.2 s later if the command is still there (nothing is lost; a big model's load is not waited for).
 * EVAL: prompt and generation, watched as above. */
enum { SIGWATCH_IDLE = 0, SIGWATCH_LOAD = 1, SIGWATCH_EVAL = 2 };
void sigwatch_busy(int phase);
/* From a signal handler (async-signal-safe): a stop signal arrived. */
void sigwatch_signal(int sig);
/* serve, which takes its signals with sigwait: `sig` arrived and the server gets grace_s seconds to
 * finish its requests; from then on the watchdog watches as in EVAL, until sigwatch_busy(IDLE). */
void sigwatch_after(int sig, double grace_s);

#endif
