/* kernels/alive.c — see alive.h. */
#include "kernels/alive.h"

#include <stdatomic.h>

#include "kernels/clock.h"

/* relaxed: a reader only compares it with the clock; it orders nothing */
static _Atomic uint64_t g_last_ns;

void sl_alive_stamp(void) { atomic_store_explicit(&g_last_ns, sl_now_ns(), memory_order_relaxed); }

uint64_t sl_alive_last_ns(void) { return atomic_load_explicit(&g_last_ns, memory_order_relaxed); }
