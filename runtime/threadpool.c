/* runtime/threadpool.c — persistent worker threads, generation-counter handoff. */
#include "runtime/threadpool.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

struct sl_pool {
    int n;                      /* threads including the caller */
    pthread_t *tid;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    unsigned long gen;          /* bumped for every job */
    int pending;                /* workers still running the current job */
    int quit;
    sl_pool_fn fn;
    void *arg;
};

typedef struct { sl_pool *p; int ith; } worker_arg;

static void *worker(void *a)
{
    worker_arg *wa = a;
    sl_pool *p = wa->p;
    int ith = wa->ith;
    free(wa);
    unsigned long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->gen == seen && !p->quit) pthread_cond_wait(&p->go, &p->mu);
        if (p->quit) break;
        seen = p->gen;
        sl_pool_fn fn = p->fn;
        void *arg = p->arg;
        pthread_mutex_unlock(&p->mu);
        fn(arg, ith, p->n);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

sl_pool *sl_pool_create(int n_threads)
{
    if (n_threads < 1) n_threads = 1;
    sl_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    p->tid = calloc((size_t)n_threads, sizeof *p->tid);
    if (!p->tid) { free(p); return NULL; }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa || pthread_create(&p->tid[i], NULL, worker, (wa->p = p, wa->ith = i, wa))) {
            free(wa);
            p->n = i;            /* run with the threads we got */
            break;
        }
    }
    return p;
}

void sl_pool_free(sl_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->tid[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    free(p->tid);
    free(p);
}

int sl_pool_size(const sl_pool *p) { return p ? p->n : 1; }

void sl_pool_run(sl_pool *p, sl_pool_fn fn, void *arg)
{
    if (!p || p->n == 1) { fn(arg, 0, 1); return; }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->pending = p->n - 1;
    p->gen++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    fn(arg, 0, p->n);
    pthread_mutex_lock(&p->mu);
    while (p->pending) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

int sl_ncpu(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}
