/* kernels/alive.h — a process-wide time stamp of the last moment the computation moved.
 *
 * Every parallel loop (sl_pool_run, on every path), every row grab of a long matrix product
 * (kernels/matmul.c) and every chunk the model reader reads stamp it as they finish.  It exists for one reader: the sluice command's stop-signal watchdog
 * (runtime/cli/sigwatch.c).  After SIGINT/SIGTERM an evaluation stops at its next layer; one that is
 * slow keeps stamping (a streamed layer on a slow disk, a long prefill), one that can never get there
 * (a pool worker that does not come back) has stopped stamping, and the command then leaves at once
 * instead of waiting for it.  A relaxed store of the monotonic clock: a few tens of ns per loop.
 */
#ifndef SL_KERNELS_ALIVE_H
#define SL_KERNELS_ALIVE_H

#include <stdint.h>

/* Records "now" (sl_now_ns) as the last moment something finished. */
void     sl_alive_stamp(void);
/* The last stamp, sl_now_ns units; 0 before the first. */
uint64_t sl_alive_last_ns(void);

#endif
