/* kernels/scratch.h — per-thread work buffers for the matrix products: matrix products run back to
 * back hundreds of times per token, and a malloc/free pair per call would page-fault large buffers
 * in again and again.  One buffer per slot and thread, grown on demand, freed when the thread exits. */
#ifndef SL_KERNELS_SCRATCH_H
#define SL_KERNELS_SCRATCH_H

#include <stddef.h>

enum sl_scratch_slot {
    SL_SCRATCH_ACT = 0,   /* kernels/matmul.c: the quantized activations of a product */
    SL_SCRATCH_GEMM,      /* kernels/gemm*.c: unpacked weight blocks (live while ACT is) */
    SL_SCRATCH_SLOTS
};

/* Contract: a 64-byte aligned buffer of at least `bytes` for `slot`, owned by the calling thread
 * (freed when it exits), contents undefined (a grown buffer does not keep them); NULL when out of
 * memory (the previous buffer stays).  Valid until the thread's next call for the same slot. */
void *sl_scratch(int slot, size_t bytes);

/* The memory a request of `bytes` allocates (a buffer grows by a quarter beyond the request, so that
 * slowly growing requests do not reallocate each time): what a plan must count for it. */
size_t sl_scratch_cap(size_t bytes);

/* Tests: the capacity of the calling thread's buffer for `slot` (0: none yet). */
size_t sl_scratch_size(int slot);

#endif
