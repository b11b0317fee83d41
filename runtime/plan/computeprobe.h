/* runtime/plan/computeprobe.h — how many bytes of weights per second the decode kernels process,
 * measured once per (kernel path, mode, thread count, weight type) and cached.
 *
 * Decode is one vector against every weight matrix, so its compute time is weight bytes divided by
 * the rate at which sl_matmul (nb = 1) gets through them.  That rate depends on the SIMD path, the
 * thread count and the weight type (a Q6_K byte costs more work than a Q4_K byte), and the weights
 * come from DRAM, not from a cache: a matrix of a model that is streamed, or that is bigger than
 * the last-level cache, is never in it.  So the probe matrix is 64 MiB and is flushed out of every
 * cache level before each timed pass (x86 clflush), which also keeps it honest on CPUs whose LLC
 * is larger than that.
 */
#ifndef SL_RUNTIME_COMPUTEPROBE_H
#define SL_RUNTIME_COMPUTEPROBE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/types.h"
#include "runtime/engine/model.h"

/* The probe matrix's standard size.  Smaller probes (a budget that leaves less room) are measured
 * but not cached: they run faster than a model's matrices do (on the development machine a flushed
 * 16 MiB matrix computed ~15% faster than a 64 or 128 MiB one), which matters little in the budgets
 * that force them, where reading dominates.  Below SL_COMPUTE_PROBE_MIN the probe does not run. */
#define SL_COMPUTE_PROBE_BYTES (64u << 20)
#define SL_COMPUTE_PROBE_MIN   (2u << 20)

/* Bytes of `type` weights per second that sl_matmul with one vector processes on n_threads threads
 * with the active kernel path and mode (sl_kernels(), sl_kernels_exact()).  Uses the cached figure
 * ($XDG_CACHE_HOME/sluice or ~/.cache/sluice, one file per key) when there is one; otherwise
 * measures for ~0.15 s on a cache-cold random matrix of at most probe_bytes and caches the result
 * (only when the full SL_COMPUTE_PROBE_BYTES were used).  Returns `fallback` when the type cannot be
 * computed with, probe_bytes < SL_COMPUTE_PROBE_MIN or memory is short.  `how` says which
 * ("measured now", "measured earlier", "fallback"). */
double sl_compute_rate(int type, int n_threads, size_t probe_bytes, double fallback, char *how, size_t howlen);

/* The probe's matrix: dst[0..bytes) (a whole number of blocks of `type`) filled with valid random
 * blocks of any supported type (f16 scales finite and normal), a pure function of seed.  0, or
 * -EINVAL (a type without kernels, or bytes not whole blocks), -ENOMEM. */
int sl_compute_probe_fill(int type, void *dst, size_t bytes, uint64_t seed);

/* bytes[t] = bytes of the matrices of type t that a decode token multiplies with: the seven of every
 * block and the LM head (the embedding table only gives one row per token and is not counted,
 * unless it is the LM head of a tied model). */
void sl_compute_bytes_by_type(const sl_model *m, uint64_t bytes[SL_TYPE_COUNT]);

/* The rate of a mix of types: sum(bytes) / sum(bytes[t] / rate[t]) over types with bytes.  0 when
 * there are no bytes or a type with bytes has no positive rate. */
double sl_compute_combine(const uint64_t bytes[SL_TYPE_COUNT], const double rate[SL_TYPE_COUNT]);

/* sl_compute_rate for every type with bytes[t] > 0: rate[t] for those types (0 for the others) and
 * the combined rate of the mix as the return value; `how` summarises (as below). */
double sl_compute_rate_mix(const uint64_t bytes[SL_TYPE_COUNT], int n_threads, size_t probe_bytes, double fallback,
                           double rate[SL_TYPE_COUNT], char *how, size_t howlen);

/* sl_compute_rate for every type m multiplies with: rate[t] for those types (0 for the others) and
 * the combined rate of m's mix as the return value; `how` summarises (rates per type, where they
 * came from). */
double sl_compute_rate_model(const sl_model *m, int n_threads, size_t probe_bytes, double fallback,
                             double rate[SL_TYPE_COUNT], char *how, size_t howlen);

#endif
