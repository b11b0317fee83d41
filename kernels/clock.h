/* kernels/clock.h — the one monotonic clock every room reads (the lowest room holds it so that the
 * thread pool, the loader and the engine can all include it without pointing up a layer). */
#ifndef SL_KERNELS_CLOCK_H
#define SL_KERNELS_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds of CLOCK_MONOTONIC: for intervals only (never a wall-clock date). */
static inline uint64_t sl_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
