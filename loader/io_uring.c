/* loader/io_uring.c — the io_uring backend: O_DIRECT reads into registered (fixed) slot buffers, many
 * in flight, no helper thread.
 *
 * A request splits its block-aligned range into chunk-sized operations ("ops") and submits as many
 * as the ring has room for; the kernel reads while the caller computes.  sl_io_wait reaps completions
 * (for any slot) until its own slot is complete, topping the ring up with pending ops of later
 * requests in FIFO order as room frees.  An op that completes short is resubmitted for the rest;
 * -EINTR/-EAGAIN are resubmitted whole.  On a hard error the slot stops submitting and is finished
 * once its ops still in flight have completed, so a buffer is never reused while the kernel may
 * still write it.  In flight never exceeds the SQ size and the CQ is twice that, so no CQE is lost.
 */
#include "loader/io_internal.h"
#include "kernels/alive.h"

#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

enum { OP_IDLE, OP_PENDING, OP_INFLIGHT, OP_DONE };

typedef struct uop {
    int      slot;
    int      state;
    uint64_t pos;        /* next file offset to read */
    uint64_t end;        /* end of this op's part of the (aligned) range */
    uint64_t need;       /* bytes up to here must arrive; past it is alignment padding */
    size_t   sub_len;    /* length of the read in flight */
} uop;

typedef struct uslot {
    uop     *ops;        /* io->chunk-sized parts of the range */
    int      nops, ndone, inflight;
    uint8_t *base;       /* memory address of file offset `base_off` */
    uint64_t base_off;
} uslot;

typedef struct ustate {
    struct io_uring ring;
    bool     fixed;      /* slot buffers registered: buf_index = slot id */
    unsigned depth;      /* most ops in flight (prepared SQEs included) */
    unsigned inflight;
    uop     *pool;
    uslot    us[SL_IO_MAX_SLOTS];
} ustate;

static pthread_mutex_t g_disable_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_disabled_why[96];   /* non-empty: sl_io_disable_uring is in force */

/* Contract: see io.h (debug/test hook: simulates a kernel without io_uring). */
void sl_io_disable_uring(const char *why)
{
    pthread_mutex_lock(&g_disable_mu);
    snprintf(g_disabled_why, sizeof g_disabled_why, "%s", why ? why : "");
    pthread_mutex_unlock(&g_disable_mu);
}

/* 1 if a ring can be created (and io_uring is not disabled), else 0 with the reason in why. */
int sl_io__uring_probe(char *why, size_t whylen)
{
    pthread_mutex_lock(&g_disable_mu);
    bool off = g_disabled_why[0] != 0;
    if (off) snprintf(why, whylen, "%s", g_disabled_why);
    pthread_mutex_unlock(&g_disable_mu);
    if (off) return 0;
    struct io_uring ring;
    int r = io_uring_queue_init(4, &ring, 0);
    if (r < 0) {
        snprintf(why, whylen, "io_uring_queue_init: %s", strerror(-r));
        return 0;
    }
    io_uring_queue_exit(&ring);
    return 1;
}

int sl_io_uring_available(void)
{
    char why[160];
    return sl_io__uring_probe(why, sizeof why);
}

static bool slot_finished(const sl_io_slot *s, const uslot *u)
{
    return u->inflight == 0 && (s->err != 0 || u->ndone == u->nops);
}

/* Prepare SQEs for pending ops, oldest request first, while there is room (the caller submits). */
static void pump(sl_io *io)
{
    ustate *u = io->uring;
    int order[SL_IO_MAX_SLOTS], n = 0;
    for (int i = 0; i < io->nslots; i++) {
        if (!io->slot[i].held || io->slot[i].state != SL_S_RUNNING || io->slot[i].err) continue;
        int j = n++;
        while (j > 0 && io->slot[order[j - 1]].seq > io->slot[i].seq) { order[j] = order[j - 1]; j--; }
        order[j] = i;
    }
    for (int k = 0; k < n && u->inflight < u->depth; k++) {
        uslot *us = &u->us[order[k]];
        for (int i = 0; i < us->nops && u->inflight < u->depth; i++) {
            uop *op = &us->ops[i];
            if (op->state != OP_PENDING) continue;
            struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
            if (!sqe) break;
            uint8_t *dst = us->base + (op->pos - us->base_off);
            op->sub_len = (size_t)(op->end - op->pos);
            if (u->fixed) io_uring_prep_read_fixed(sqe, io->fd, dst, (unsigned)op->sub_len, op->pos, op->slot);
            else io_uring_prep_read(sqe, io->fd, dst, (unsigned)op->sub_len, op->pos);
            io_uring_sqe_set_data(sqe, op);
            op->state = OP_INFLIGHT;
            u->inflight++;
            us->inflight++;
            SL_IO_ADD(io, reads_issued, 1);
        }
    }
}

static bool transient(int r) { return r == -EINTR || r == -EAGAIN || r == -EBUSY; }

/* Fail slot s with err (first error wins) and drop its ops that were never submitted. */
static void fail_slot(sl_io *io, sl_io_slot *s, uslot *us, int err, uint64_t off, size_t len,
                      const char *what) {
    if (!s->err) {
        s->err = err;
        sl_io__fmt_err(io, s->msg, sizeof s->msg, off, len, err, what);
        SL_IO_ADD(io, errors, 1);
    }
    for (int i = 0; i < us->nops; i++)
        if (us->ops[i].state == OP_PENDING) us->ops[i].state = OP_DONE;
}

/* Account one completion. */
static void complete(sl_io *io, struct io_uring_cqe *cqe)
{
    ustate *u = io->uring;
    uop *op = io_uring_cqe_get_data(cqe);
    sl_io_slot *s = &io->slot[op->slot];
    uslot *us = &u->us[op->slot];
    u->inflight--;
    us->inflight--;
    int res = sl_io__fault_cqe(io, cqe->res, op->pos, op->sub_len, us->base + (op->pos - us->base_off));
    if (s->err) { op->state = OP_DONE; return; }             /* slot already failed or cancelled */
    if (res == -EINTR || res == -EAGAIN) {
        SL_IO_ADD(io, retries, 1);
        op->state = OP_PENDING;
        return;
    }
    if (res < 0) {
        op->state = OP_DONE;
        fail_slot(io, s, us, res, op->pos, op->sub_len, NULL);
        return;
    }
    SL_IO_ADD(io, bytes_read, res);
    op->pos += (uint64_t)res;
    if (op->pos >= op->need) {
        op->state = OP_DONE;
        us->ndone++;
        return;
    }
    /* Short: at end of file if nothing came or (O_DIRECT) it stopped off a block boundary. */
    if (res == 0 || (io->direct && op->pos % io->align != 0)) {
        char what[96];
        snprintf(what, sizeof what, "unexpected end of file (%" PRIu64 " bytes at open)", io->size);
        op->state = OP_DONE;
        fail_slot(io, s, us, -EIO, op->pos, (size_t)(op->need - op->pos), what);
        return;
    }
    SL_IO_ADD(io, retries, 1);
    op->state = OP_PENDING;
}

/* Reap completions until slot s is finished: every op done, or failed with none left in flight.
 * A submit/wait that fails transiently (signal, no resources, CQ overflow pending) is retried; a
 * fatal one fails s, and s is then finished only if none of its reads is still in the kernel. */
static void drive(sl_io *io, sl_io_slot *s)
{
    ustate *u = io->uring;
    uslot *us = &u->us[s - io->slot];
    while (!slot_finished(s, us)) {
        pump(io);
        int r = u->inflight ? io_uring_submit_and_wait(&u->ring, 1) : -EIO;  /* 0 in flight: impossible */
        if (r < 0 && !transient(r)) {
            fail_slot(io, s, us, r, s->off, s->len, NULL);
            if (io_uring_cq_ready(&u->ring) == 0) break;
        }
        unsigned head, seen = 0;
        struct io_uring_cqe *cqe;
        io_uring_for_each_cqe(&u->ring, head, cqe) {
            complete(io, cqe);
            seen++;
        }
        io_uring_cq_advance(&u->ring, seen);
        if (seen) sl_alive_stamp();   /* a slow disk is still moving (the stop-signal watchdog) */
    }
    s->state = SL_S_DONE;
    if (!s->err) s->data = us->base + (s->off - us->base_off);
}

/* Split the slot's range into ops and get them into the ring. */
static void uring_request(sl_io *io, sl_io_slot *s)
{
    ustate *u = io->uring;
    uslot *us = &u->us[s - io->slot];
    uint64_t start, total, need = s->off + s->len;
    if (io->direct) {
        start = sl_io_align_down(s->off, io->align);
        total = sl_io_align_up(need, io->align) - start;
        us->base = s->buf;
    } else {
        start = s->off;
        total = s->len;
        us->base = s->buf + s->off % io->align;
    }
    us->base_off = start;
    us->nops = (int)((total + io->chunk - 1) / io->chunk);
    us->ndone = us->inflight = 0;
    for (int i = 0; i < us->nops; i++) {
        uop *op = &us->ops[i];
        op->slot = (int)(s - io->slot);
        op->state = OP_PENDING;
        op->pos = start + (uint64_t)i * io->chunk;
        op->end = op->pos + io->chunk < start + total ? op->pos + io->chunk : start + total;
        op->need = op->end < need ? op->end : need;
    }
    s->state = SL_S_RUNNING;
    pump(io);
    int r = io_uring_submit(&u->ring);
    if (r < 0 && !transient(r)) fail_slot(io, s, us, r, s->off, s->len, NULL);
}

static void uring_wait(sl_io *io, sl_io_slot *s)
{
    if (s->state != SL_S_DONE) drive(io, s);
}

/* Cancel: drop ops not yet submitted, then reap until none of the slot's reads is in flight. */
static void uring_cancel(sl_io *io, sl_io_slot *s)
{
    if (s->state != SL_S_RUNNING) return;
    ustate *u = io->uring;
    uslot *us = &u->us[s - io->slot];
    if (!s->err) {
        s->err = -ECANCELED;
        snprintf(s->msg, sizeof s->msg, "%s: request cancelled", io->path);
    }
    for (int i = 0; i < us->nops; i++)
        if (us->ops[i].state == OP_PENDING) us->ops[i].state = OP_DONE;
    drive(io, s);
}

/* Ring sized for every slot's ops (capped); slot buffers registered as fixed buffers when possible. */
static int uring_start(sl_io *io, char *err, size_t errlen)
{
    ustate *u = calloc(1, sizeof *u);
    int per_slot = (int)((io->bufsize + io->chunk - 1) / io->chunk);
    if (!u || !(u->pool = calloc((size_t)io->nslots * (size_t)per_slot, sizeof *u->pool))) {
        free(u);
        snprintf(err, errlen, "%s: out of memory", io->path);
        return -ENOMEM;
    }
    unsigned want = (unsigned)(io->nslots * per_slot);
    u->depth = 8;
    while (u->depth < want && u->depth < 256) u->depth *= 2;
    int r = io_uring_queue_init(u->depth, &u->ring, 0);
    if (r < 0) {
        snprintf(err, errlen, "io_uring_queue_init(%u): %s", u->depth, strerror(-r));
        free(u->pool);
        free(u);
        return r;
    }
    for (int i = 0; i < io->nslots; i++) u->us[i].ops = u->pool + (size_t)i * (size_t)per_slot;
    struct iovec iov[SL_IO_MAX_SLOTS];
    for (int i = 0; i < io->nslots; i++) iov[i] = (struct iovec){ io->slot[i].buf, io->bufsize };
    r = io->bufsize <= (1u << 30) ? io_uring_register_buffers(&u->ring, iov, (unsigned)io->nslots) : -E2BIG;
    u->fixed = r == 0;
    if (!u->fixed)
        snprintf(io->notice, sizeof io->notice, "io_uring: slot buffers not registered (%s): plain reads",
                 strerror(-r));
    io->uring = u;
    return 0;
}

static void uring_stop(sl_io *io)
{
    ustate *u = io->uring;
    if (!u) return;
    io_uring_queue_exit(&u->ring);
    free(u->pool);
    free(u);
    io->uring = NULL;
}

const sl_io_ops sl_io__uring_ops = {
    .start = uring_start,
    .request = uring_request,
    .wait = uring_wait,
    .cancel = uring_cancel,
    .stop = uring_stop,
};
