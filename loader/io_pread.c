/* loader/io_pread.c — the pread backend, and the helper thread it shares with the mmap backend.
 *
 * One worker thread takes requested slots in FIFO order and runs io->fill on each (a chunked pread
 * loop here, a page-in for mmap), so the next piece is read while the caller computes; the caller
 * only blocks in sl_io_wait.  One thread is enough: a single 4 MiB O_DIRECT read already keeps the
 * device queue busy (the block layer splits it), and pieces are needed in order anyway.
 *
 * Locking: io->mu guards slot->state, the queue and `stopping`.  A RUNNING slot's buffer, data, err
 * and msg belong to the worker until it sets DONE (under mu), after which they belong to the caller.
 */
#include "loader/io_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void *worker_main(void *arg)
{
    sl_io *io = arg;
    pthread_mutex_lock(&io->mu);
    for (;;) {
        while (!io->stopping && io->qlen == 0) pthread_cond_wait(&io->cv_work, &io->mu);
        if (io->stopping) break;
        sl_io_slot *s = &io->slot[io->q[0]];
        memmove(io->q, io->q + 1, (size_t)(--io->qlen) * sizeof io->q[0]);
        s->state = SL_S_RUNNING;
        pthread_mutex_unlock(&io->mu);
        int r = io->fill(io, s);
        if (r) SL_IO_ADD(io, errors, 1);
        pthread_mutex_lock(&io->mu);
        s->err = r;
        s->state = SL_S_DONE;
        pthread_cond_broadcast(&io->cv_done);
    }
    pthread_mutex_unlock(&io->mu);
    return NULL;
}

/* Create the mutex, condition variables and the worker thread.  0 or a negative errno. */
int sl_io__worker_start(sl_io *io, char *err, size_t errlen)
{
    pthread_mutex_init(&io->mu, NULL);
    pthread_cond_init(&io->cv_work, NULL);
    pthread_cond_init(&io->cv_done, NULL);
    int r = pthread_create(&io->thr, NULL, worker_main, io);
    if (r) {
        snprintf(err, errlen, "%s: cannot start the I/O thread: %s", io->path, strerror(r));
        return -r;
    }
    io->thr_started = true;
    (void)pthread_setname_np(io->thr, "sluice-io");
    return 0;
}

/* Queue slot s (already filled in by sl_io_request) behind earlier requests. */
void sl_io__worker_request(sl_io *io, sl_io_slot *s)
{
    pthread_mutex_lock(&io->mu);
    s->state = SL_S_QUEUED;
    io->q[io->qlen++] = (int)(s - io->slot);
    pthread_cond_signal(&io->cv_work);
    pthread_mutex_unlock(&io->mu);
}

/* Block until the worker has finished slot s (returns at once if it already has). */
void sl_io__worker_wait(sl_io *io, sl_io_slot *s)
{
    pthread_mutex_lock(&io->mu);
    while (s->state != SL_S_DONE) pthread_cond_wait(&io->cv_done, &io->mu);
    pthread_mutex_unlock(&io->mu);
}

/* Make sure the worker will not touch slot s again: a queued slot leaves the queue unread, a running
 * one is waited for. */
void sl_io__worker_cancel(sl_io *io, sl_io_slot *s)
{
    pthread_mutex_lock(&io->mu);
    if (s->state == SL_S_QUEUED) {
        int id = (int)(s - io->slot), j = 0;
        for (int i = 0; i < io->qlen; i++)
            if (io->q[i] != id) io->q[j++] = io->q[i];
        io->qlen = j;
        s->err = -ECANCELED;
        s->state = SL_S_DONE;
    }
    while (s->state == SL_S_RUNNING) pthread_cond_wait(&io->cv_done, &io->mu);
    pthread_mutex_unlock(&io->mu);
}

/* Stop and join the worker (callers released every slot first) and destroy the sync objects. */
void sl_io__worker_stop(sl_io *io)
{
    if (!io->thr_started) return;
    pthread_mutex_lock(&io->mu);
    io->stopping = true;
    pthread_cond_broadcast(&io->cv_work);
    pthread_mutex_unlock(&io->mu);
    pthread_join(io->thr, NULL);
    io->thr_started = false;
    pthread_cond_destroy(&io->cv_done);
    pthread_cond_destroy(&io->cv_work);
    pthread_mutex_destroy(&io->mu);
}

/* Worker job for pread: O_DIRECT reads the block-aligned superset of the range into the slot buffer;
 * buffered reads read the range itself at buf + off % align (same pointer alignment either way). */
static int pread_fill(sl_io *io, sl_io_slot *s)
{
    uint64_t end = s->off + s->len;
    if (io->direct) {
        uint64_t a = sl_io_align_down(s->off, io->align);
        s->data = s->buf + (s->off - a);
        return sl_io__read_range(io, s->buf, a, sl_io_align_up(end, io->align) - a, end - a,
                                 s->msg, sizeof s->msg);
    }
    uint8_t *dst = s->buf + s->off % io->align;
    s->data = dst;
    return sl_io__read_range(io, dst, s->off, s->len, s->len, s->msg, sizeof s->msg);
}

static int pread_start(sl_io *io, char *err, size_t errlen)
{
    io->fill = pread_fill;
    return sl_io__worker_start(io, err, errlen);
}

const sl_io_ops sl_io__pread_ops = {
    .start = pread_start,
    .request = sl_io__worker_request,
    .wait = sl_io__worker_wait,
    .cancel = sl_io__worker_cancel,
    .stop = sl_io__worker_stop,
};
