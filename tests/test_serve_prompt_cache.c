/* tests/test_serve_prompt_cache.c — the prompt cache of `sluice serve` (runtime/serve/prompt_cache.c).
 *
 * The slot choice (pc_pick) on random token sequences: the longest common prefix wins, busy slots
 * are skipped, ties and prefixes of half the prompt or less go to the least recently used slot, the
 * cache off takes the first free slot.  Adopting a prompt (pc_adopt) on a real context: it keeps
 * exactly the common prefix (all but the last prompt token at most), and the rest evaluated the way
 * the scheduler does (chunks in a sluice_batch) gives logits bit-identical (memcmp) to the whole
 * prompt evaluated in a fresh context, after the prompt and after each greedy token; a rewind that
 * fails (as one too far back in a sliding-window ring will) falls back to a reset and a full
 * evaluation, with the same logits.  The end-to-end test (the scheduler, usage and /metrics through
 * the openai client) is tests/serve/prompt_cache.mjs.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/api/session.h"

#include "runtime/serve/serve_internal.h"

#define STORIES SL_SOURCE_DIR "/models/stories260K.gguf"
#define STEPS 6

static uint64_t rng_state;
static uint32_t rnd(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

static void seed(void)
{
    rng_state = (uint64_t)time(NULL) ^ (uint64_t)clock();
    cr_log_info("seed %llu", (unsigned long long)rng_state);
}

/* n random ids in [3, 512) (stories260K's vocabulary: 512; 0-2 are its control tokens) */
static void random_tokens(int32_t *t, int n)
{
    for (int i = 0; i < n; i++) t[i] = 3 + (int32_t)(rnd() % 509);
}

/* a copy of p's first k tokens followed by n - k tokens that differ from p[k] at position k */
static void branch(int32_t *out, const int32_t *p, int k, int n)
{
    memcpy(out, p, (size_t)k * sizeof *p);
    random_tokens(out + k, n - k);
    if (k < n && out[k] == p[k]) out[k] = 3 + (p[k] - 3 + 1) % 509;
}

Test(serve_pcache, pick_longest_prefix_then_lru)
{
    seed();
    for (int rep = 0; rep < 50; rep++) {
        enum { N = 200 };
        int32_t prompt[N], s[5][N];
        random_tokens(prompt, N);
        const int k1 = 110 + (int)(rnd() % 40), k2 = k1 + 1 + (int)(rnd() % 40);   /* both more than half */
        branch(s[0], prompt, k1, N);
        branch(s[1], prompt, k2, N);
        memcpy(s[2], prompt, sizeof prompt);   /* the whole prompt: but busy */
        branch(s[3], prompt, 0, N);
        pc_slot_view v[5] = {
            { s[0], N, false, 7 }, { s[1], N - 20 + (int)(rnd() % 20), false, 9 }, { s[2], N, true, 1 },
            { s[3], N, false, 2 }, { NULL, 0, false, 0 },
        };
        if (v[1].n_toks < k2) v[1].n_toks = k2;
        cr_assert_eq(pc_pick(v, 5, prompt, N, true), 1, "rep %d: the longest free prefix (%d tokens) is slot 1", rep, k2);
        /* a tie: the least recently used of the two */
        branch(s[0], prompt, k2, N);
        cr_assert_eq(pc_pick(v, 5, prompt, N, true), 0, "rep %d: a tie goes to the slot used longest ago", rep);
        v[0].last_used = 10;
        cr_assert_eq(pc_pick(v, 5, prompt, N, true), 1, "rep %d: a tie goes to the slot used longest ago", rep);
        /* a prompt the slots' tokens cover for half its length or less: the least recently used free slot
         * (the empty one), not the one sharing a BOS or a short system prompt */
        const int half = N / 2 - (int)(rnd() % 30);
        branch(s[0], prompt, half, N);
        branch(s[1], prompt, half, N);
        cr_assert_eq(pc_pick(v, 5, prompt, N, true), 4, "rep %d: prefixes of %d/%d tokens count as none", rep, half, N);
        v[4].busy = true;
        cr_assert_eq(pc_pick(v, 5, prompt, N, true), 3, "rep %d: then the least recently used free slot", rep);
        /* the cache off: the first free slot, whatever the slots hold */
        branch(s[1], prompt, N - 1, N);
        cr_assert_eq(pc_pick(v, 5, prompt, N, false), 0, "rep %d: cache off", rep);
        for (int i = 0; i < 5; i++) v[i].busy = true;
        cr_assert_eq(pc_pick(v, 5, prompt, N, true), -1);
        cr_assert_eq(pc_pick(v, 5, prompt, N, false), -1);
    }
}

Test(serve_pcache, common_prefix)
{
    seed();
    int32_t a[64], b[64];
    random_tokens(a, 64);
    for (int k = 0; k <= 64; k++) {
        branch(b, a, k, 64);
        cr_assert_eq(pc_common_prefix(a, 64, b, 64), k);
        cr_assert_eq(pc_common_prefix(a, k / 2, b, 64), k / 2);
        cr_assert_eq(pc_common_prefix(a, 64, b, 0), 0);
    }
}

static int failing_rewind(sluice_ctx *c, int n)
{
    (void)c;
    (void)n;
    return -EINVAL;
}

typedef struct fixture { sluice_model *m; sluice_batch *b; int V; } fixture;

static void open_model(fixture *f)
{
    sluice_params p;
    sluice_params_default(&p);
    p.planner = SLUICE_PLANNER_OFF;
    p.n_threads = 2;
    p.n_ctx = 512;
    p.n_batch = 64;
    p.n_parallel = 2;
    char err[256];
    cr_assert_eq(sluice_open(STORIES, &p, &f->m, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sluice_batch_new(f->m, 0, 2, 0, &f->b, err, sizeof err), 0, "%s", err);
    sluice_model_info mi;
    sluice_model_get_info(f->m, &mi);
    f->V = mi.n_vocab;
    cr_assert_eq(f->V, 512);
}

static int32_t argmax(const float *l, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++) if (l[i] > l[best]) best = i;
    return best;
}

/* ref: (STEPS + 1) x V logits of prompt[0..n) evaluated whole in a fresh context, then greedy. */
static void reference(fixture *f, const int32_t *prompt, int n, float *ref)
{
    char err[256];
    sluice_ctx *c;
    cr_assert_eq(sluice_ctx_new(f->m, &c, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sluice_eval(c, prompt, n), 0, "%s", sluice_ctx_error(c));
    for (int st = 0; st <= STEPS; st++) {
        memcpy(ref + (size_t)st * f->V, sluice_logits(c), (size_t)f->V * sizeof(float));
        int32_t t = argmax(sluice_logits(c), f->V);
        if (st < STEPS) cr_assert_eq(sluice_eval(c, &t, 1), 0, "%s", sluice_ctx_error(c));
    }
    sluice_ctx_free(c);
}

/* c holds prompt[0..from): the rest in chunks of `chunk` through the batch (as sched.c feeds it), then
 * greedy steps; every logits vector must equal ref's. */
static void finish_and_compare(fixture *f, sluice_ctx *c, const int32_t *prompt, int n, int from, int chunk,
                               const float *ref, const char *what)
{
    for (int fed = from; fed < n;) {
        int k = n - fed < chunk ? n - fed : chunk;
        sluice_batch_clear(f->b);
        cr_assert_geq(sluice_batch_add(f->b, c, prompt + fed, k, false), 0, "%s: %s", what, sluice_batch_error(f->b));
        cr_assert_eq(sluice_batch_eval(f->b), 0, "%s: %s", what, sluice_batch_error(f->b));
        fed += k;
    }
    cr_assert_eq(sluice_n_past(c), n);
    for (int st = 0; st <= STEPS; st++) {
        cr_assert(!memcmp(sluice_logits(c), ref + (size_t)st * f->V, (size_t)f->V * sizeof(float)),
                  "%s: step %d: logits differ from the whole prompt evaluated alone", what, st);
        int32_t t = argmax(sluice_logits(c), f->V);
        if (st == STEPS) break;
        sluice_batch_clear(f->b);
        cr_assert_geq(sluice_batch_add(f->b, c, &t, 1, false), 0);
        cr_assert_eq(sluice_batch_eval(f->b), 0, "%s: %s", what, sluice_batch_error(f->b));
    }
}

/* c holds exactly t[0..n) after this (chunks through the batch). */
static void fill(fixture *f, sluice_ctx *c, const int32_t *t, int n)
{
    sluice_reset(c);
    for (int fed = 0; fed < n;) {
        int k = n - fed < 64 ? n - fed : 64;
        sluice_batch_clear(f->b);
        cr_assert_geq(sluice_batch_add(f->b, c, t + fed, k, false), 0, "%s", sluice_batch_error(f->b));
        cr_assert_eq(sluice_batch_eval(f->b), 0, "%s", sluice_batch_error(f->b));
        fed += k;
    }
}

/* The slot held `held`; adopting `prompt` must keep `want` tokens, and the rest evaluated after them
 * must give the whole prompt's logits. */
static void adopt_case(fixture *f, sluice_ctx *c, const int32_t *held, int n_held, const int32_t *prompt, int n,
                       bool enabled, pc_rewind_fn rw, int want, float *ref, const char *what)
{
    fill(f, c, held, n_held);
    int kept = pc_adopt(c, prompt, n, enabled, rw);
    cr_assert_eq(kept, want, "%s: kept %d tokens, expected %d", what, kept, want);
    cr_assert_eq(sluice_n_past(c), kept, "%s: the context holds %d tokens after keeping %d", what, sluice_n_past(c), kept);
    int nt = 0;
    const int32_t *t = sluice_tokens(c, &nt);
    cr_assert(nt == kept && (!kept || !memcmp(t, prompt, (size_t)kept * sizeof *t)), "%s: the kept tokens", what);
    reference(f, prompt, n, ref);
    finish_and_compare(f, c, prompt, n, kept, 1 + (int)(rnd() % 48), ref, what);
}

Test(serve_pcache, adopt_keeps_the_prefix_bit_identical, .timeout = 300)
{
    seed();
    fixture f;
    open_model(&f);
    char err[256];
    sluice_ctx *c;
    cr_assert_eq(sluice_ctx_new_seq(f.m, &c, err, sizeof err), 0, "%s", err);
    float *ref = malloc((size_t)(STEPS + 1) * f.V * sizeof(float));
    cr_assert(ref);
    enum { MAXN = 200 };
    int32_t held[MAXN], prompt[MAXN];
    for (int rep = 0; rep < 3; rep++) {
        const int n1 = 40 + (int)(rnd() % 100);             /* the slot's last request (prompt + answer) */
        random_tokens(held, n1);
        const int k = 1 + (int)(rnd() % (unsigned)n1), n2 = k + 1 + (int)(rnd() % 60);
        branch(prompt, held, k, n2);                        /* shares k tokens, then differs */
        adopt_case(&f, c, held, n1, prompt, n2, true, NULL, k, ref, "a shared prefix");
        memcpy(prompt, held, (size_t)n1 * sizeof *prompt);  /* the same prompt again: its last token re-evaluated */
        adopt_case(&f, c, held, n1, prompt, n1, true, NULL, n1 - 1, ref, "the same prompt");
        random_tokens(prompt + n1, 30);                     /* the next turn: everything held is kept */
        adopt_case(&f, c, held, n1, prompt, n1 + 30, true, NULL, n1, ref, "the conversation continued");
        adopt_case(&f, c, held, n1, prompt, n1 + 30, true, failing_rewind, 0, ref, "the rewind fails: full evaluation");
        adopt_case(&f, c, held, n1, prompt, n1 + 30, false, NULL, 0, ref, "the cache off");
        branch(prompt, held, 0, n2);
        adopt_case(&f, c, held, n1, prompt, n2, true, NULL, 0, ref, "nothing shared");
    }
    free(ref);
    sluice_ctx_free(c);
    sluice_batch_free(f.b);
    sluice_close(f.m);
}

/* ---- the disk tier ---- */

static void cache_name(char *out, size_t len, const int32_t *t, int n)
{
    snprintf(out, len, "sluice-pcache-%016llx-%d.session",
             (unsigned long long)sl_xxh64(t, (size_t)n * sizeof *t, 0x9c1ce0ull), n);
}

static bool exists_in(const char *dir, const char *name)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat sb;
    return !lstat(p, &sb);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
}

static bool file_is(const char *dir, const char *name, const char *text)
{
    char p[512], buf[256] = "";
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "r");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return !strcmp(buf, text);
}

/* Files, saving, finding by block prefix, loading bit-identical, the size limit (LRU), files of
 * others never deleted (a foreign file with the cache's own prefix included), damaged files. */
Test(serve_pcache, disk_tier, .timeout = 300)
{
    seed();
    fixture f;
    open_model(&f);
    char err[256], dir[] = "/tmp/sluice-pcache-test.XXXXXX";
    cr_assert(mkdtemp(dir));
    static const char foreign[] = "sluice-pcache-0123456789abcdef-300.session", other[] = "notes.txt";
    write_file(dir, foreign, "not ours");
    write_file(dir, other, "not ours either");
    sluice_ctx *c, *c2;
    cr_assert_eq(sluice_ctx_new_seq(f.m, &c, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sluice_ctx_new_seq(f.m, &c2, err, sizeof err), 0, "%s", err);
    float *ref = malloc((size_t)(STEPS + 1) * f.V * sizeof(float));
    enum { NA = 300 };
    int32_t a[NA], b[NA], e[NA], prompt[400];
    random_tokens(a, NA);
    branch(b, a, 0, NA);
    branch(e, a, 0, NA);
    char name_a[96], name_b[96], name_e[96];
    cache_name(name_a, sizeof name_a, a, NA);
    cache_name(name_b, sizeof name_b, b, NA);
    cache_name(name_e, sizeof name_e, e, NA);

    pc_disk *d;
    cr_assert_eq(pc_disk_open(&d, dir, 1ull << 30, err, sizeof err), 0, "%s", err);
    fill(&f, c, a, NA);
    cr_assert_eq(pc_disk_save(d, c, err, sizeof err), 1, "%s", err);
    cr_assert(exists_in(dir, name_a));
    cr_assert_eq(pc_disk_save(d, c, err, sizeof err), 0, "the same tokens again: nothing to write");
    uint64_t one;
    int files;
    pc_disk_usage(d, &one, &files);
    cr_assert(files == 1 && one > 0);
    fill(&f, c, a, PC_BLOCK - 1);
    cr_assert_eq(pc_disk_save(d, c, err, sizeof err), 0, "fewer than a block: nothing to write");

    /* a prompt sharing a's first block and more: found by the block's hash, loaded, its 280 tokens kept */
    int have = -1;
    branch(prompt, a, 280, 340);
    int i = pc_disk_find(d, prompt, 340, &have);
    cr_assert(i >= 0 && have == PC_BLOCK, "found %d, %d tokens", i, have);
    cr_assert_eq(pc_disk_load(d, i, c2, err, sizeof err), 0, "%s", err);
    int nt = 0;
    const int32_t *t = sluice_tokens(c2, &nt);
    cr_assert(nt == NA && !memcmp(t, a, sizeof a), "the loaded context holds a's tokens");
    cr_assert_eq(pc_adopt(c2, prompt, 340, true, NULL), 280);
    reference(&f, prompt, 340, ref);
    finish_and_compare(&f, c2, prompt, 340, 280, 37, ref, "a prompt after a loaded file");
    /* pc_prepare does the same: a slot holding b saves it, then loads a */
    fill(&f, c, b, NA);
    pc_outcome o = pc_prepare(d, c, prompt, 340, true, err, sizeof err);
    cr_assert(o.saved && o.loaded && !o.disk_error && o.kept == 280, "saved %d loaded %d kept %d: %s", o.saved, o.loaded,
              o.kept, err);
    cr_assert(exists_in(dir, name_b));
    finish_and_compare(&f, c, prompt, 340, 280, 64, ref, "pc_prepare from the disk tier");
    /* a prompt sharing less than a block with every file: nothing */
    branch(prompt, a, PC_BLOCK - 1, 340);
    cr_assert_eq(pc_disk_find(d, prompt, 340, &have), -1);
    cr_assert_eq(have, 0);
    pc_disk_free(d);

    /* a new cache over the same directory (a later run): the earlier files are not its own, never
     * deleted.  Room for two files: a third evicts the least recently used. */
    cr_assert_eq(pc_disk_open(&d, dir, one * 5 / 2, err, sizeof err), 0, "%s", err);
    int32_t x[NA], y[NA], z[NA];
    branch(x, a, 0, NA);
    branch(y, a, 0, NA);
    branch(z, a, 0, NA);
    x[1] = 3, y[1] = 4, z[1] = 5;   /* (distinct from each other whatever the random draw) */
    char name_x[96], name_y[96], name_z[96];
    cache_name(name_x, sizeof name_x, x, NA);
    cache_name(name_y, sizeof name_y, y, NA);
    cache_name(name_z, sizeof name_z, z, NA);
    fill(&f, c, a, NA);
    cr_assert_eq(pc_disk_save(d, c, err, sizeof err), 0, "an earlier run's file of these tokens is left alone");
    fill(&f, c, x, NA);
    cr_assert_eq(pc_disk_save(d, c, err, sizeof err), 1, "%s", err);
    fill(&f, c, y, NA);
    cr_assert_eq(pc_disk_save(d, c, err, sizeof err), 1, "%s", err);
    fill(&f, c, x, NA);
    cr_assert_eq(pc_disk_save(d, c, err, sizeof err), 0, "x is cached: only its use is recorded");
    fill(&f, c, z, NA);
    cr_assert_eq(pc_disk_save(d, c, err, sizeof err), 1, "%s", err);
    uint64_t bytes;
    pc_disk_usage(d, &bytes, &files);
    cr_assert(files == 2 && bytes <= one * 5 / 2, "%d files, %llu bytes", files, (unsigned long long)bytes);
    cr_assert(!exists_in(dir, name_y), "the least recently used file is deleted");
    cr_assert(exists_in(dir, name_x) && exists_in(dir, name_z));
    cr_assert(exists_in(dir, name_a) && exists_in(dir, name_b), "an earlier run's files are never deleted");
    cr_assert(file_is(dir, foreign, "not ours") && file_is(dir, other, "not ours either"), "others' files untouched");
    /* a damaged file: the load fails, the context is empty, the file forgotten and deleted */
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name_x);
    cr_assert_eq(truncate(p, 100), 0);
    branch(prompt, x, 290, 320);
    i = pc_disk_find(d, prompt, 320, &have);
    cr_assert(i >= 0 && have == PC_BLOCK);
    fill(&f, c2, e, 10);
    cr_assert_lt(pc_disk_load(d, i, c2, err, sizeof err), 0, "a truncated file loads");
    cr_assert_eq(sluice_n_past(c2), 0);
    cr_assert(!exists_in(dir, name_x));
    cr_assert_eq(pc_disk_find(d, prompt, 320, &have), -1);
    pc_disk_free(d);
    /* a file larger than the whole limit is not kept */
    cr_assert_eq(pc_disk_open(&d, dir, one / 2, err, sizeof err), 0, "%s", err);
    fill(&f, c, e, NA);
    cr_assert_eq(pc_disk_save(d, c, err, sizeof err), 1, "%s", err);
    pc_disk_usage(d, &bytes, &files);
    cr_assert(files == 0 && bytes == 0 && !exists_in(dir, name_e));
    pc_disk_free(d);
    /* a directory that is not there, or not a directory */
    snprintf(p, sizeof p, "%s/missing", dir);
    cr_assert_eq(pc_disk_open(&d, p, 1 << 20, err, sizeof err), -ENOENT);
    snprintf(p, sizeof p, "%s/%s", dir, other);
    cr_assert_eq(pc_disk_open(&d, p, 1 << 20, err, sizeof err), -ENOTDIR);
    cr_assert(strstr(err, "not a directory"), "%s", err);
    /* clean up: only the files this test made */
    const char *mine[] = { name_a, name_b, name_z, foreign, other };
    for (size_t k = 0; k < sizeof mine / sizeof *mine; k++) {
        snprintf(p, sizeof p, "%s/%s", dir, mine[k]);
        unlink(p);
    }
    cr_assert_eq(rmdir(dir), 0, "files left in %s", dir);
    pc_disk_free(d);
    free(ref);
    sluice_ctx_free(c);
    sluice_ctx_free(c2);
    sluice_batch_free(f.b);
    sluice_close(f.m);
}
