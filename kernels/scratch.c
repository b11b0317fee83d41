/* kernels/scratch.c — see scratch.h.  The buffers live in thread-local slots; a pthread key whose
 * value points at them frees them when the thread exits (thread-local storage is still valid while
 * key destructors run). */
#include "kernels/scratch.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

typedef struct slots { void *p[SL_SCRATCH_SLOTS]; size_t cap[SL_SCRATCH_SLOTS]; } slots;

static _Thread_local slots t_slots;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_key;
static bool g_key_ok;

static void free_slots(void *v)
{
    slots *s = v;
    for (int i = 0; i < SL_SCRATCH_SLOTS; i++) {
        free(s->p[i]);
        s->p[i] = NULL;
        s->cap[i] = 0;
    }
}

static void make_key(void) { g_key_ok = pthread_key_create(&g_key, free_slots) == 0; }

size_t sl_scratch_cap(size_t bytes) { return (bytes + bytes / 4 + 63) & ~(size_t)63; }

size_t sl_scratch_size(int slot) { return slot >= 0 && slot < SL_SCRATCH_SLOTS ? t_slots.cap[slot] : 0; }

void *sl_scratch(int slot, size_t bytes)
{
    if (slot < 0 || slot >= SL_SCRATCH_SLOTS) return NULL;
    if (bytes <= t_slots.cap[slot]) return t_slots.p[slot];
    pthread_once(&g_key_once, make_key);
    const size_t cap = sl_scratch_cap(bytes);
    void *p = aligned_alloc(64, cap);
    if (!p) return NULL;
    free(t_slots.p[slot]);
    t_slots.p[slot] = p;
    t_slots.cap[slot] = cap;
    if (g_key_ok) pthread_setspecific(g_key, &t_slots);
    return p;
}
