/* tests/test_expert_cache.c — the expert cache's policy (runtime/engine/expert_cache.h) driven
 * directly, as the stream drives it: per block an announcement (sl_xcache_begin), a claim per expert,
 * and for a FILL every byte copied in (sl_xcache_fill) so that the entry serves next time.
 *
 * The point: which entry a miss takes follows the width of the passes.  A cache that holds one
 * token's experts but not a pass of several tokens' union must not run LRU (a loop larger than the
 * cache: every expert evicted before the next pass asks again, nothing hit), and must come back to
 * LRU once the wide passes stop.  Bit-identity of what a hit serves is tests/test_moe.c's. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "runtime/engine/expert_cache.h"
#include "runtime/engine/model.h"
#include "util/golden.h"

typedef struct fixture {
    sl_model *m;
    sl_xcache *c;
    unsigned char *buf;   /* bytes copied into entries: what they are does not matter here */
    int L, E, k;
} fixture;

/* The micro qwen3moe model and a cache of `tokens` tokens' experts (blocks x expert_used_count each). */
static void fixture_open(fixture *f, int64_t entries_per_token)
{
    char err[256];
    cr_assert_eq(sl_model_open(shared_path("models/micro-qwen3moe.Q8_0.gguf"), &f->m, err, sizeof err), 0, "%s", err);
    f->L = f->m->cfg.n_layers;
    f->E = f->m->cfg.n_expert;
    f->k = f->m->cfg.n_expert_used;
    const uint64_t eb = (sl_xcache_unit_bytes(f->m) + 63) & ~(uint64_t)63;
    const uint64_t entries = (uint64_t)entries_per_token * (uint64_t)f->L * (uint64_t)f->k;
    cr_assert_eq(sl_xcache_create(f->m, eb * entries, &f->c), 0);
    cr_assert_not_null(f->c);
    f->buf = calloc(1, eb);
    cr_assert_not_null(f->buf);
}

static void fixture_close(fixture *f)
{
    sl_xcache_free(f->c);
    sl_model_free(f->m);
    free(f->buf);
}

/* One block's announcement of `n` experts (ids[i]); fills what it must.  Returns the hits. */
static int announce(fixture *f, int block, const int *ids, int n)
{
    sl_xcache_begin(f->c);
    int hits = 0;
    for (int i = 0; i < n; i++) {
        const int unit = block * f->E + ids[i];
        const int claim = sl_xcache_claim(f->c, unit);
        if (claim == SL_XCACHE_HIT) { hits++; continue; }
        if (claim != SL_XCACHE_FILL) continue;
        const sl_layer *layer = &f->m->layers[block];
        for (int k = 0; k < SL_EXPERT_MATS; k++) {
            const sl_weight *w = sl_expert_weight(layer, ids[i], k);
            sl_xcache_fill(f->c, w, 0, (int64_t)(w->nbytes / w->row_bytes), f->buf);
        }
    }
    return hits;
}

/* A pass whose batch takes, in every block, the k "hot" experts 0..k-1 (every pass) and `cold`
 * others that rotate with the pass number.  Returns the hits of the pass. */
static int pass(fixture *f, int p, int cold)
{
    int ids[64], hits = 0;
    cr_assert_leq(f->k + cold, 64);
    cr_assert_leq(f->k + cold, f->E);
    for (int b = 0; b < f->L; b++) {
        for (int i = 0; i < f->k; i++) ids[i] = i;
        for (int i = 0; i < cold; i++) ids[f->k + i] = f->k + (p * cold + i) % (f->E - f->k);
        hits += announce(f, b, ids, f->k + cold);
    }
    return hits;
}

static sl_xcache_stats stats(const fixture *f)
{
    sl_xcache_stats st;
    sl_xcache_get_stats(f->c, &st);
    return st;
}

/* A cache of one token's experts and single-token passes: LRU, and the second pass hits them all. */
Test(expert_cache, one_token_wide_passes_run_lru)
{
    fixture f;
    fixture_open(&f, 1);
    cr_assert_eq(pass(&f, 0, 0), 0);
    cr_assert_eq(stats(&f).lfu, 0);
    cr_assert_eq(pass(&f, 1, 0), f.L * f.k, "the same experts again: every one a hit");
    cr_assert_eq(stats(&f).lfu, 0);
    fixture_close(&f);
}

/* Passes of several tokens (hot experts every pass plus as many rotating ones) in a cache that holds
 * one token's experts but not the union: LRU would hit nothing (each block's entries are gone before
 * the next pass), LFU keeps the hot ones.  Then single-token passes bring LRU back. */
Test(expert_cache, wide_passes_switch_to_lfu_and_back)
{
    fixture f;
    fixture_open(&f, 1);
    const int cold = f.k < f.E - f.k ? f.k : f.E - f.k;
    cr_assert_gt(cold, 0, "the model needs more experts than a token takes");
    int late = 0;
    for (int p = 0; p < 12; p++) {
        const int h = pass(&f, p, cold);
        if (p >= 6) late += h;
    }
    cr_assert_eq(stats(&f).lfu, 1, "a pass's union (%d) is more than the cache (%d)", f.L * (f.k + cold), f.L * f.k);
    /* LRU hits nothing here (each block's entries are evicted by the later blocks' before the next
     * pass); LFU with decay keeps the hot experts most of the time (ties after a decay still evict,
     * as in bench/moe_cache_sim.c): at least a third of their asks hit in the last six passes */
    cr_assert_geq(late * 3, 6 * f.L * f.k, "hits in the last 6 wide passes: %d of %d hot asks", late, 6 * f.L * f.k);
    for (int p = 0; p < 3; p++) pass(&f, 100 + p, 0);
    cr_assert_eq(stats(&f).lfu, 0, "narrow passes again: LRU");
    cr_assert_eq(pass(&f, 200, 0), f.L * f.k, "and the hot experts are still all there");
    fixture_close(&f);
}
