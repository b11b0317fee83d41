/* kernels/matmul.c — threaded weight-matrix x batch products (sl_matmul and its two halves).
 *
 * Work split: rows are handed out in chunks (~1/8 of an even share each) from an atomic counter,
 * so a thread that the OS preempts or that shares a core with another process does not hold the
 * whole product back (with a fixed even split the other thread spun idle for up to a third of
 * decode time on a loaded machine).  Each thread walks a chunk in tiles of ~32 KiB of weights and
 * the batch in tiles of ~256 KiB of (quantized) activations, so in prefill a weight tile stays in
 * L1/L2 while a vector tile streams past it, and every weight row is read from memory once per
 * call.  The per-(row, vector) kernel never depends on the tiling,
 * the batch size or the row range (see ops.h), which the forward and streaming tests check bit for
 * bit.
 *
 * Quantized activations live in a per-thread scratch buffer (kernels/scratch.h).
 */
#include "kernels/ops.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/alive.h"
#include "kernels/scratch.h"
#include "kernels/gemm.h"
#include "kernels/simd.h"
#include "kernels/types.h"

#define TILE_W_BYTES   (32u << 10)    /* weights per row tile */
#define TILE_ACT_BYTES (256u << 10)   /* activations per vector tile */
#define PAR_QUANT_MIN  (1 << 15)      /* elements below which activations are quantized inline */
#define PAR_MM_MIN     (1 << 17)      /* row x vector products below which one thread does it all:
                                       * ~10 µs of work, where a pool handoff costs 1-2 µs idle and
                                       * far more when the other core is busy elsewhere */

/* What each weight type is dotted with in fast mode. */
typedef struct act_fmt {
    sl_actq_fn quant;     /* NULL: f32 activations */
    int blck, bytes;      /* quantized block geometry */
    sl_qdot_fn qdot;
    sl_qdot4_fn qdot4;    /* 4 vectors at once (NULL: not on this path) */
    sl_qdotr_fn qdotr;    /* rows of a tile against one vector (NULL: the single dot per row) */
    sl_dot_fn fdot;
    sl_qgemm_fn gemm;     /* many vectors at once (NULL: none for this type or CPU; kernels/gemm.h) */
} act_fmt;

static act_fmt fmt_for(const sl_kernel_set *ks, int type, bool exact)
{
    act_fmt f = { 0 };
    const sl_type_info *ti = sl_type_get(type);
    f.fdot = ti ? ti->dot : NULL;
    if (exact) return f;
    switch (type) {
    case SL_TYPE_F32:  f.fdot = ks->dot_f32; break;
    case SL_TYPE_F16:  f.fdot = ks->dot_f16; break;
    case SL_TYPE_BF16: f.fdot = ks->dot_bf16; break;
    default: break;
    }
    /* the activation format each quantized type is paired with (kernels/dispatch.c's table) */
    switch (sl_kernels_act(type)) {
    case SL_ACT_Q8_0: f = (act_fmt){ ks->quantize_q8_0, 32, SL_Q8_0_BYTES, NULL, NULL, NULL, NULL, NULL }; break;
    case SL_ACT_Q8_1: f = (act_fmt){ ks->quantize_q8_1, 32, SL_Q8_1_BYTES, NULL, NULL, NULL, NULL, NULL }; break;
    case SL_ACT_Q8_K: f = (act_fmt){ ks->quantize_q8_k, 256, SL_Q8_K_BYTES, NULL, NULL, NULL, NULL, NULL }; break;
    default: break;   /* the float types, and types without integer dots: the reference f32 dot */
    }
    f.qdot = sl_kernels_qdot(ks, type);   /* NULL for the float types */
    f.qdot4 = sl_kernels_qdot4(ks, type);
    f.qdotr = sl_kernels_qdotr(ks, type);
    /* the batched GEMM gives the dots' bits; a forced portable path keeps the portable dots */
    f.gemm = ks != sl_kernels_for(SL_KPATH_PORTABLE) && f.qdot ? sl_gemm_for(type) : NULL;
    /* a set without this type's integer dot (or its activation quantizer): the portable set's,
     * which gives the same bits (kernels/simd.h); failing that, the exact f32 dot */
    if ((f.quant && !f.qdot) || (!f.quant && f.qdot) || (!f.qdot && !f.fdot)) {
        const sl_kernel_set *portable = sl_kernels_for(SL_KPATH_PORTABLE);
        if (portable && ks != portable) return fmt_for(portable, type, exact);
        f = (act_fmt){ .fdot = ti ? ti->dot : NULL };
    }
    return f;
}

size_t sl_mm_scratch_bytes(int64_t cols, int nb)
{
    const size_t q8_0 = (size_t)(cols / 32) * SL_Q8_0_BYTES, q8_1 = (size_t)(cols / 32) * SL_Q8_1_BYTES,
                 q8_k = (size_t)(cols / 256) * SL_Q8_K_BYTES;
    size_t mx = q8_0 > q8_1 ? q8_0 : q8_1;
    if (q8_k > mx) mx = q8_k;
    return mx * (size_t)(nb > 0 ? nb : 0);
}

typedef struct quant_job {
    sl_actq_fn quant;
    const float *x;
    unsigned char *q;
    int nb;
    int64_t cols;
    size_t q_stride;
} quant_job;

static void quant_worker(void *arg, int ith, int nth)
{
    const quant_job *j = arg;
    const int b0 = (int)((int64_t)j->nb * ith / nth), b1 = (int)((int64_t)j->nb * (ith + 1) / nth);
    for (int b = b0; b < b1; b++) j->quant(j->x + (size_t)b * j->cols, j->q + (size_t)b * j->q_stride, j->cols);
}

/* Contract: fills *in for running x (nb vectors of cols floats) against matrices of `type`; in
 * fast mode the quantized copy is made here (in parallel over vectors for large batches).  If the
 * scratch buffer cannot be allocated, falls back to the exact f32 path (correct, slower). */
void sl_mm_prepare(sl_pool *pool, int type, const float *x, int nb, int64_t cols, sl_mm_input *in)
{
    const sl_kernel_set *ks = sl_kernels_for_type(type);   /* per type: the fastest path measured */
    const bool exact = sl_kernels_exact();
    *in = (sl_mm_input){ .type = type, .nb = nb, .cols = cols, .x = x, .kernels = ks, .exact = exact };
    const act_fmt f = fmt_for(ks, type, exact);
    if (!f.quant || cols % f.blck != 0 || nb < 1) return;
    const size_t stride = (size_t)(cols / f.blck) * (size_t)f.bytes;
    unsigned char *q = sl_scratch(SL_SCRATCH_ACT, stride * (size_t)nb);
    if (!q) {
        in->exact = true;
        return;
    }
    quant_job j = { f.quant, x, q, nb, cols, stride };
    if ((int64_t)nb * cols >= PAR_QUANT_MIN && nb > 1) sl_pool_run(pool, quant_worker, &j);
    else quant_worker(&j, 0, 1);
    in->q = q;
    in->q_stride = stride;
}

typedef struct mm_job {
    const sl_mm_input *in;
    act_fmt f;
    const unsigned char *w;
    int64_t rows;
    size_t row_bytes;
    float *out;
    int64_t out_stride;
    int64_t chunk;          /* rows per grab */
    atomic_llong next;      /* first row not yet handed out */
    bool stamp;             /* a long product: each finished grab stamps kernels/alive */
} mm_job;

/* Rows [ra0, rb0) against every vector, in weight-row tiles x vector tiles. */
static void mm_rows(const mm_job *j, int64_t ra0, int64_t rb0)
{
    const sl_mm_input *in = j->in;
    const int64_t cols = in->cols;
    const size_t act_bytes = in->q ? in->q_stride : (size_t)cols * sizeof(float);
    int64_t rt = (int64_t)(TILE_W_BYTES / (j->row_bytes ? j->row_bytes : 1));
    int vt = (int)(TILE_ACT_BYTES / act_bytes);
    if (rt < 1) rt = 1;
    if (vt < 1) vt = 1;
    /* a prefill batch and a GEMM: the whole range at once (it tiles rows and vectors itself) */
    if (in->q && j->f.gemm && in->nb >= SL_GEMM_MIN_VECTORS &&
        j->f.gemm(j->w + (size_t)ra0 * j->row_bytes, j->row_bytes, rb0 - ra0, in->q, in->q_stride, in->nb, cols,
                  j->out + ra0, j->out_stride))
        return;
    /* one vector (every decode step) and a rows form: the whole range in one call, whose pipeline
     * runs on across all its rows and whose setup (the plane-order forms put the activations in
     * the grid's order, kernels/simd_avx512_vbmi_planes.c) is paid once, not per tile */
    if (in->q && j->f.qdotr && in->nb == 1) {
        j->f.qdotr(j->w + (size_t)ra0 * j->row_bytes, j->row_bytes, in->q, cols, rb0 - ra0, j->out + ra0);
        return;
    }
    for (int64_t ra = ra0; ra < rb0; ra += rt) {
        const int64_t rb = ra + rt < rb0 ? ra + rt : rb0;
        for (int va = 0; va < in->nb; va += vt) {
            const int vb = va + vt < in->nb ? va + vt : in->nb;
            /* the vectors past the 4-vector groups: the rows form over the tile where there is one
             * (one call, its pipeline running on across the rows), else the single dot below */
            const int v1 = j->f.qdot4 ? va + (vb - va) / 4 * 4 : va;
            if (in->q && j->f.qdotr) {
                for (int b = v1; b < vb; b++) {
                    const unsigned char *q = (const unsigned char *)in->q + (size_t)b * in->q_stride;
                    j->f.qdotr(j->w + (size_t)ra * j->row_bytes, j->row_bytes, q, cols, rb - ra,
                               j->out + ra + (size_t)b * j->out_stride);
                }
                if (v1 == va) continue;   /* no 4-vector groups: the tile is done (every decode step) */
            }
            for (int64_t r = ra; r < rb; r++) {
                const unsigned char *wr = j->w + (size_t)r * j->row_bytes;
                float *o = j->out + r;
                if (in->q) {
                    const unsigned char *q = (const unsigned char *)in->q + (size_t)va * in->q_stride;
                    int b = va;
                    if (j->f.qdot4)
                        for (; b + 4 <= vb; b += 4, q += 4 * in->q_stride) {
                            float r4[4];
                            j->f.qdot4(wr, q, in->q_stride, cols, r4);
                            for (int v = 0; v < 4; v++) o[(size_t)(b + v) * j->out_stride] = r4[v];
                        }
                    if (!j->f.qdotr)
                        for (; b < vb; b++, q += in->q_stride) o[(size_t)b * j->out_stride] = j->f.qdot(wr, q, cols);
                } else {
                    for (int b = va; b < vb; b++)
                        o[(size_t)b * j->out_stride] = j->f.fdot(wr, in->x + (size_t)b * cols, cols);
                }
            }
        }
    }
}

static void mm_worker(void *arg, int ith, int nth)
{
    (void)ith;
    (void)nth;
    mm_job *j = arg;
    for (;;) {
        const int64_t r = atomic_fetch_add_explicit(&j->next, j->chunk, memory_order_relaxed);
        if (r >= j->rows) break;
        mm_rows(j, r, r + j->chunk < j->rows ? r + j->chunk : j->rows);
        if (j->stamp) sl_alive_stamp();
    }
}

/* Contract: out[b*out_stride + r] = row r of w (rows rows from w) . vector b of `in`, with the
 * kernels and mode captured by sl_mm_prepare. */
void sl_matmul_prepared(sl_pool *pool, const sl_mm_input *in, const void *w, int64_t rows, size_t row_bytes,
                        float *out, int64_t out_stride)
{
    if (rows < 1 || in->nb < 1) return;
    /* the row kernels' preconditions (kernels/types.h), checked in debug builds */
    assert(sl_type_get(in->type) && in->cols % sl_type_get(in->type)->blck == 0);
    assert(row_bytes == sl_row_bytes(in->type, in->cols));
    assert(sl_type_get(in->type)->bytes % 2 || (((uintptr_t)w & 1) == 0 && row_bytes % 2 == 0));   /* MXFP4: 17 */
    assert(out_stride >= rows);
    mm_job j = { in, fmt_for(in->kernels, in->type, in->exact), w, rows, row_bytes, out, out_stride, rows, 0, false };
    if (!in->q) j.f.qdot = NULL, j.f.qdot4 = NULL, j.f.qdotr = NULL, j.f.gemm = NULL;
    if (!j.f.fdot && !in->q) j.f.fdot = sl_type_get(in->type)->dot;
    /* ~8 grabs per thread, at least 16 rows (a grab costs an atomic add; rows are >= 128 bytes) */
    const int nth = sl_pool_size(pool);
    if (nth > 1) {
        j.chunk = rows / (8 * nth);
        if (j.chunk < 16) j.chunk = 16;
        if (j.f.gemm && in->nb >= SL_GEMM_MIN_VECTORS) j.chunk = (j.chunk + 15) & ~(int64_t)15;   /* whole 16-row blocks */
    }
    atomic_init(&j.next, 0);
    /* A product of 2^27 multiply-adds (a prefill batch of a large model) can outlast the stop-signal
     * watchdog's second on a slow board: its grabs stamp as they finish, so it is seen moving.  A
     * decode product is far below that and does not pay the clock reads. */
    j.stamp = (double)rows * (double)in->cols * in->nb >= (double)(1 << 27);
    if ((double)rows * (double)in->cols * in->nb < PAR_MM_MIN) mm_worker(&j, 0, 1);
    else sl_pool_run(pool, mm_worker, &j);
}

void sl_matmul(sl_pool *pool, int type, const void *w, int64_t rows, int64_t cols, size_t row_bytes,
               const float *x, int nb, float *out, int64_t out_stride)
{
    sl_mm_input in;
    sl_mm_prepare(pool, type, x, nb, cols, &in);
    sl_matmul_prepared(pool, &in, w, rows, row_bytes, out, out_stride);
}
