/* tests/test_ring.c — sliding-window layers keep a ring of window + slack KV rows
 * (runtime/engine/kvcache.h): the logits must be bit-identical to a cache that keeps every
 * position, on every model of ../shared with sliding-window layers — micro-gemma2 (window 32 on
 * even layers), micro-phi3 (64, every layer), micro-gemma3 (24, 5 of 6 layers), micro-gpt-oss (32,
 * even layers) — F16 and Q8_0 files.
 *
 * The token sequence is the golden p5_long prompt (110 ids) and its 32 golden steps, extended to
 * 250 positions with the full cache's own greedy tokens, so every window is crossed several times
 * and a ring of window + 7 rows wraps 3-8 times.  Each run is compared with memcmp against the
 * full cache (ring_slack < 0) fed the same tokens: prompt in one batch, then one token per pass.
 * Covered: prompt chunks (batches of 7 into a ring of window + 7), f16 / q8_0 / spilled caches, a
 * session saved mid-run and loaded into a ring of another size or a full cache (and back), drafted
 * passes whose rejected tokens are rolled back (the speculative verifier's pattern), a rewind
 * beyond the slack refused with a reason while one within it works, a batch span too long for the
 * ring refused, and speculative decoding through include/sluice.h (greedy tokens identical to a
 * full-cache run without drafts).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "include/sluice.h"
#include "runtime/api/session.h"
#include "runtime/engine/forward.h"
#include "runtime/engine/kvcache.h"
#include "runtime/engine/model.h"
#include "util/golden.h"
#include "util/spec_gen.h"

#define N_CTX 256
#define N_SEQ 250   /* positions evaluated: the prompt, the golden steps, then the full cache's greedy tokens */

typedef struct seq_ref {
    int32_t tok[N_SEQ];
    int n_prompt;
    int V;
    float *rows;    /* (N_SEQ - n_prompt + 1, V): the logits after token n_prompt - 1 + i */
} seq_ref;

typedef struct tmodel {
    sl_model *m;
    sl_pool *pool;
} tmodel;

static const char *const models[] = { "micro-gemma2", "micro-phi3", "micro-gemma3", "micro-gpt-oss" };
static const char *const types[] = { "F16", "Q8_0" };

static tmodel open_model(const char *name, const char *type)
{
    char err[256];
    tmodel t;
    cr_assert_eq(sl_model_open(shared_path("models/%s.%s.gguf", name, type), &t.m, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sl_model_load_resident(t.m, err, sizeof err), 0, "%s", err);
    t.pool = sl_pool_create(2);
    return t;
}

static void close_model(tmodel *t)
{
    sl_pool_free(t->pool);
    sl_model_free(t->m);
}

static sl_ctx *mk_ctx(tmodel *t, int n_batch, int slack, int kv_type, const char *spill, int n_logits)
{
    char err[256];
    sl_ctx *c;
    sl_ctx_params p = { .n_ctx = N_CTX, .n_batch = n_batch, .kv_type = kv_type, .kv_spill_dir = spill,
                        .n_logits = n_logits, .ring_slack = slack };
    cr_assert_eq(sl_ctx_create(t->m, &p, t->pool, &c, err, sizeof err), 0, "%s", err);
    return c;
}

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[b]) b = i;
    return b;
}

static size_t row_off(const seq_ref *r, int pos) { return (size_t)(pos - (r->n_prompt - 1)) * (size_t)r->V; }

/* The full cache's run: the reference logits, and the tokens past the golden steps. */
static void full_run(tmodel *t, const char *name, const char *type, int kv_type, seq_ref *r)
{
    golden_run g;
    cr_assert_eq(golden_read_txt(shared_path("golden/%s/%s.p5_long.txt", name, type), &g), 0);
    r->n_prompt = g.n_prompt;
    r->V = t->m->cfg.vocab;
    memcpy(r->tok, g.prompt, (size_t)g.n_prompt * sizeof *g.prompt);
    r->rows = malloc((size_t)(N_SEQ - g.n_prompt + 1) * (size_t)r->V * sizeof(float));
    sl_ctx *c = mk_ctx(t, 512, -1, kv_type, NULL, 0);
    cr_assert_eq(sl_eval(c, r->tok, r->n_prompt), 0, "%s", c->err);
    for (int pos = r->n_prompt - 1;; pos++) {
        memcpy(r->rows + row_off(r, pos), c->logits, (size_t)r->V * sizeof(float));
        if (pos + 1 == N_SEQ) break;
        int s = pos + 1 - r->n_prompt;
        r->tok[pos + 1] = s < g.n_steps ? g.steps[s].token : argmax(c->logits, r->V);
        cr_assert_eq(sl_eval(c, &r->tok[pos + 1], 1), 0, "%s", c->err);
    }
    sl_ctx_free(c);
}

/* Feed r's tokens [c->n_past, N_SEQ) one per pass and compare every row with the reference. */
static void continue_and_compare(sl_ctx *c, const seq_ref *r, const char *what, bool check_current)
{
    if (check_current && c->n_past >= r->n_prompt)
        cr_assert_eq(memcmp(c->logits + (size_t)(c->n_logits - 1) * r->V, r->rows + row_off(r, c->n_past - 1),
                            (size_t)r->V * 4), 0, "%s: logits after position %d differ from the full cache", what,
                     c->n_past - 1);
    while (c->n_past < N_SEQ) {
        int pos = c->n_past;
        cr_assert_eq(sl_eval(c, &r->tok[pos], 1), 0, "%s: %s", what, c->err);
        if (pos >= r->n_prompt - 1)
            cr_assert_eq(memcmp(c->logits, r->rows + row_off(r, pos), (size_t)r->V * 4), 0,
                         "%s: logits after position %d differ from the full cache", what, pos);
    }
}

/* The ring really is one: every window layer keeps fewer rows than the context, full ones all. */
static void assert_rings(const tmodel *t, sl_ctx *c, int slack)
{
    int rings = 0;
    for (int l = 0; l < t->m->cfg.n_layers; l++) {
        int w = t->m->layers[l].window;
        cr_assert_eq(sl_kv_rows(c->kv, l), w ? w + slack : N_CTX, "layer %d window %d", l, w);
        rings += w > 0;
    }
    cr_assert_gt(rings, 0, "the model has sliding-window layers");
}

Test(ring, bit_identical_to_the_full_cache)
{
    for (size_t mi = 0; mi < sizeof models / sizeof *models; mi++)
        for (int ti = 0; ti < 2; ti++)
            for (int kv = 0; kv < 2; kv++) {
                const int kv_type = kv ? SL_KV_Q8_0 : SL_KV_F16;
                tmodel t = open_model(models[mi], types[ti]);
                seq_ref r;
                full_run(&t, models[mi], types[ti], kv_type, &r);
                char what[160];
                /* batches of 7 into the smallest slack they allow (6) + 1 */
                for (int spill = 0; spill < 2; spill++) {
                    snprintf(what, sizeof what, "%s.%s kv %s%s", models[mi], types[ti], kv ? "q8_0" : "f16",
                             spill ? " spilled" : "");
                    sl_ctx *c = mk_ctx(&t, 7, 7, kv_type, spill ? "/tmp" : NULL, 0);
                    assert_rings(&t, c, 7);
                    if (!spill) cr_assert_lt(sl_kv_mem_bytes(c->kv), sl_kv_bytes_for(&t.m->cfg, NULL, N_CTX, kv_type, false));
                    cr_assert_eq(sl_eval(c, r.tok, r.n_prompt), 0, "%s: %s", what, c->err);
                    continue_and_compare(c, &r, what, true);
                    sl_ctx_free(c);
                }
                free(r.rows);
                close_model(&t);
            }
}

/* Drafted passes: the next token and 3 drafts in one pass (logits of each), the drafts right up to
 * a changing point, then a rollback to the last accepted one — the verifier's pattern, within the
 * slack (batch 4 + 4); resident and spilled. */
Test(ring, rejected_drafts_roll_back)
{
    for (size_t mi = 0; mi < sizeof models / sizeof *models; mi++) {
        tmodel t = open_model(models[mi], "F16");
        seq_ref r;
        full_run(&t, models[mi], "F16", SL_KV_F16, &r);
        for (int spill = 0; spill < 2; spill++) {
            sl_ctx *c = mk_ctx(&t, 4, 8, SL_KV_F16, spill ? "/tmp" : NULL, 4);
            cr_assert_eq(sl_eval(c, r.tok, r.n_prompt), 0, "%s", c->err);
            unsigned rng = 12345;
            int passes = 0;
            while (c->n_past < N_SEQ - 4) {
                const int base = c->n_past;
                int32_t pass[4];
                rng = rng * 1103515245u + 12345u;
                const int wrong = (int)((rng >> 16) % 4);   /* 0: every draft right; else draft `wrong` is not */
                for (int i = 0; i < 4; i++) pass[i] = r.tok[base + i];
                if (wrong) pass[wrong] = (pass[wrong] + 7) % r.V;
                cr_assert_eq(sl_eval(c, pass, 4), 0, "%s: %s", models[mi], c->err);
                const int keep = wrong ? wrong : 4;   /* tokens of the pass kept */
                for (int i = 0; i < keep; i++)
                    cr_assert_eq(memcmp(c->logits + (size_t)i * r.V, r.rows + row_off(&r, base + i), (size_t)r.V * 4), 0,
                                 "%s: drafted pass at %d, row %d", models[mi], base, i);
                cr_assert_eq(sl_ctx_rewind(c, base + keep), 0, "%s: %s", models[mi], c->err);
                passes++;
            }
            cr_assert_gt(passes, 30);
            sl_ctx_free(c);
        }
        free(r.rows);
        close_model(&t);
    }
}

Test(ring, rewind_beyond_the_slack_fails_cleanly)
{
    tmodel t = open_model("micro-gemma3", "F16");
    seq_ref r;
    full_run(&t, "micro-gemma3", "F16", SL_KV_F16, &r);
    sl_ctx *c = mk_ctx(&t, 7, 7, SL_KV_F16, NULL, 0);
    cr_assert_eq(sl_eval(c, r.tok, 200), 0, "%s", c->err);
    /* the ring (24 + 7 rows) holds positions 169..199: position 180 needs 157..179 */
    cr_assert_eq(sl_ctx_rewind(c, 180), -EINVAL);
    cr_assert(strstr(c->err, "cannot go back to position 180") && strstr(c->err, "ring of 31 rows"), "%s", c->err);
    cr_assert_eq(c->n_past, 200, "a refused rewind changes nothing");
    cr_assert_eq(sl_ctx_rewind(c, 300), -EINVAL);
    /* within the slack (7 + 1 positions back from the furthest evaluated): works, same logits */
    cr_assert_eq(sl_ctx_rewind(c, 192), 0, "%s", c->err);
    cr_assert_eq(sl_ctx_rewind(c, 191), -EINVAL, "one further is lost: %s", c->err);
    continue_and_compare(c, &r, "after a rewind of 8", false);
    /* a pass longer than the ring allows (slack + 1) is refused before it stores anything */
    sl_ctx_reset(c);
    cr_assert_eq(sl_eval(c, r.tok, 150), 0, "%s", c->err);
    sl_ctx *work;
    char err[256];
    sl_ctx_params wp = { .n_ctx = N_CTX, .n_batch = 16, .n_logits = 16, .no_kv = true };
    cr_assert_eq(sl_ctx_create(t.m, &wp, t.pool, &work, err, sizeof err), 0, "%s", err);
    sl_seq_span sp = { .seq = c, .tokens = r.tok + 150, .n = 9 };
    cr_assert_eq(sl_eval_seqs(work, &sp, 1), -EINVAL);
    cr_assert(strstr(work->err, "at most 8 positions per pass"), "%s", work->err);
    cr_assert_eq(c->n_past, 150);
    sp.n = 8;
    cr_assert_eq(sl_eval_seqs(work, &sp, 1), 0, "%s", work->err);
    cr_assert_eq(memcmp(work->logits, r.rows + row_off(&r, 157), (size_t)r.V * 4), 0, "a span of 8 in a ring of window + 7");
    /* after a reset everything works again from 0 */
    sl_ctx_reset(c);
    cr_assert_eq(sl_eval(c, r.tok, r.n_prompt), 0, "%s", c->err);
    continue_and_compare(c, &r, "after a reset", true);
    sl_ctx_free(work);
    sl_ctx_free(c);
    free(r.rows);
    close_model(&t);
}

/* Save mid-run (past several wraps), load into a ring of another size, a full cache and back. */
Test(ring, session_reload_mid_run)
{
    for (size_t mi = 0; mi < sizeof models / sizeof *models; mi++) {
        tmodel t = open_model(models[mi], "Q8_0");
        seq_ref r;
        full_run(&t, models[mi], "Q8_0", SL_KV_F16, &r);
        char path[] = "/tmp/sl_ring_sessXXXXXX";
        int fd = mkstemp(path);
        cr_assert_geq(fd, 0);
        close(fd);
        const int slacks[][2] = { { 7, 20 }, { 7, -1 }, { -1, 7 }, { 20, 7 } };   /* saved with, loaded into */
        for (int k = 0; k < 4; k++) {
            char what[160], err[256];
            snprintf(what, sizeof what, "%s session slack %d -> %d", models[mi], slacks[k][0], slacks[k][1]);
            sl_ctx *a = mk_ctx(&t, 7, slacks[k][0], SL_KV_F16, k == 3 ? "/tmp" : NULL, 0);
            cr_assert_eq(sl_eval(a, r.tok, 180), 0, "%s", a->err);
            sl_session_opts o = sl_session_default_opts();
            o.overwrite = true;
            cr_assert_eq(sl_session_save(path, a, 77, r.tok, 180, a->logits, NULL, 0, &o, NULL, err, sizeof err), 0, "%s: %s",
                         what, err);
            sl_ctx_free(a);
            sl_ctx *b = mk_ctx(&t, 7, slacks[k][1], SL_KV_F16, k == 1 ? "/tmp" : NULL, 0);
            int32_t *toks;
            int n;
            bool has;
            cr_assert_eq(sl_session_load(path, b, 77, &toks, &n, b->logits, &has, NULL, NULL, NULL, err, sizeof err), 0,
                         "%s: %s", what, err);
            cr_assert(n == 180 && has && !memcmp(toks, r.tok, 180 * sizeof *toks));
            free(toks);
            b->n_logits = 1;
            continue_and_compare(b, &r, what, true);
            sl_ctx_free(b);
        }
        unlink(path);
        free(r.rows);
        close_model(&t);
    }
}

/* Through include/sluice.h: a batch of 4 (ring slack 4 + draft_max 8 = 12) with n-gram drafts
 * verified in one pass each, against the full cache (batch 256: window + slack >= the context)
 * without drafts: the same greedy tokens, over 100 generated tokens. */
Test(ring, speculative_decoding_through_the_api)
{
    for (size_t mi = 0; mi < sizeof models / sizeof *models; mi++) {
        golden_run g;
        cr_assert_eq(golden_read_txt(shared_path("golden/%s/F16.p5_long.txt", models[mi]), &g), 0);
        const char *path = shared_path("models/%s.F16.gguf", models[mi]);
        char model[1024];
        snprintf(model, sizeof model, "%s", path);
        sluice_params p;
        sluice_params_default(&p);
        p.n_threads = 2;
        p.n_ctx = N_CTX;
        p.planner = SLUICE_PLANNER_OFF;
        p.draft_max = 8;
        p.n_batch = 256;
        p.draft = SLUICE_DRAFT_OFF;
        spec_out ref, got;
        spec_generate_greedy(model, &p, g.prompt, g.n_prompt, NULL, 0, 100, &ref);
        /* the lookup: the continuation with every 4th token changed (drafts right and wrong) */
        int32_t look[256];
        int nl = 0;
        for (int i = 0; i < g.n_prompt; i++) look[nl++] = g.prompt[i];
        for (int i = 0; i < ref.n; i++) look[nl++] = i % 4 == 3 ? (ref.ids[i] + 1) % 100 : ref.ids[i];
        p.n_batch = 4;
        p.draft = SLUICE_DRAFT_NGRAM;
        p.draft_fixed = true;
        spec_generate_greedy(model, &p, g.prompt, g.n_prompt, look, nl, 100, &got);
        cr_assert_gt(got.st.n_drafted, 50, "%s: drafts were verified", models[mi]);
        cr_assert_lt(got.st.n_accepted, got.st.n_drafted, "%s: some were rejected", models[mi]);
        char what[128];
        snprintf(what, sizeof what, "%s: ring + drafts vs full cache", models[mi]);
        spec_same_tokens(&ref, &got, what);
    }
}

/* sluice_rewind beyond the ring fails with the reason; sluice_prefill falls back to evaluating
 * from the start, with the full cache's logits. */
Test(ring, api_rewind_and_prefill)
{
    golden_run g;
    cr_assert_eq(golden_read_txt(shared_path("golden/micro-gemma3/F16.p5_long.txt"), &g), 0);
    char model[1024], err[512];
    snprintf(model, sizeof model, "%s", shared_path("models/micro-gemma3.F16.gguf"));
    sluice_params p;
    sluice_params_default(&p);
    p.n_threads = 2;
    p.n_ctx = N_CTX;
    p.planner = SLUICE_PLANNER_OFF;
    p.n_batch = 4;
    p.draft_max = 2;   /* slack 6: rings of 30 */
    sluice_model *m;
    sluice_ctx *c, *full;
    cr_assert_eq(sluice_open(model, &p, &m, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sluice_ctx_new(m, &c, err, sizeof err), 0, "%s", err);
    p.n_batch = 256;   /* slack 258: no rings */
    sluice_model *mf;
    cr_assert_eq(sluice_open(model, &p, &mf, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sluice_ctx_new(mf, &full, err, sizeof err), 0, "%s", err);
    sluice_model_info mi;
    sluice_model_get_info(m, &mi);
    const int V = mi.n_vocab;
    cr_assert_eq(sluice_eval(c, g.prompt, g.n_prompt), 0, "%s", sluice_ctx_error(c));
    cr_assert_eq(sluice_rewind(c, 60), -EINVAL);
    cr_assert(strstr(sluice_ctx_error(c), "cannot go back"), "%s", sluice_ctx_error(c));
    cr_assert_eq(sluice_n_past(c), g.n_prompt);
    cr_assert_eq(sluice_rewind(c, g.n_prompt - 7), 0, "%s", sluice_ctx_error(c));
    /* prefill of the prompt's first 100 tokens + others: the common prefix is lost, so from 0 */
    int32_t other[120];
    memcpy(other, g.prompt, 100 * sizeof *other);
    for (int i = 100; i < 120; i++) other[i] = (g.prompt[i - 100] + 3) % V;
    cr_assert_eq(sluice_prefill(c, other, 120), 120, "%s", sluice_ctx_error(c));
    cr_assert_eq(sluice_eval(full, other, 120), 0, "%s", sluice_ctx_error(full));
    cr_assert_eq(memcmp(sluice_logits(c), sluice_logits(full), (size_t)V * 4), 0);
    sluice_ctx_free(c);
    sluice_ctx_free(full);
    sluice_close(m);
    sluice_close(mf);
}

/* A version-1 session (written before rings: every layer's rows from position 0) still loads, into
 * a ring too.  Made from a version-2 file of a full cache (all starts 0) by dropping the starts
 * section and rewriting the header as version 1 wrote it (raw codec: the payload is the logical
 * bytes). */
Test(ring, version_1_session_loads_into_a_ring)
{
    tmodel t = open_model("micro-gemma3", "F16");
    seq_ref r;
    full_run(&t, "micro-gemma3", "F16", SL_KV_F16, &r);
    char path[] = "/tmp/sl_ring_v1XXXXXX", err[256];
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    sl_ctx *a = mk_ctx(&t, 512, -1, SL_KV_F16, NULL, 0);
    cr_assert_eq(sl_eval(a, r.tok, 170), 0, "%s", a->err);
    sl_session_opts o = { SL_SESS_RAW, 0, true };
    cr_assert_eq(sl_session_save(path, a, 5, r.tok, 170, a->logits, NULL, 0, &o, NULL, err, sizeof err), 0, "%s", err);
    sl_ctx_free(a);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    unsigned char *b = malloc((size_t)size);
    cr_assert_eq(fread(b, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    sl_sess_hdr h;
    memcpy(&h, b, sizeof h);
    cr_assert_eq(h.version, 2u);
    const size_t L = h.n_layers, at = sizeof h + (size_t)h.n_tokens * 4 + (size_t)h.n_vocab * 4;   /* the starts */
    for (size_t l = 0; l < L; l++) cr_assert_eq(b[at + 4 * l], 0, "a full cache saves every layer from 0");
    memmove(b + at, b + at + 4 * L, (size_t)size - at - 4 * L);
    size -= (long)(4 * L);
    h.version = 1;
    h.kv_rows = 0;
    h.raw_bytes -= 4 * L;
    h.payload_bytes -= 4 * L;
    h.payload_hash = sl_xxh64(b + sizeof h, (size_t)size - sizeof h, 0);
    h.header_hash = sl_xxh64(&h, offsetof(sl_sess_hdr, header_hash), 0);
    memcpy(b, &h, sizeof h);
    f = fopen(path, "wb");
    cr_assert_eq(fwrite(b, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    free(b);
    sl_ctx *c = mk_ctx(&t, 7, 7, SL_KV_F16, NULL, 0);
    int32_t *toks;
    int n;
    bool has;
    cr_assert_eq(sl_session_load(path, c, 5, &toks, &n, c->logits, &has, NULL, NULL, NULL, err, sizeof err), 0, "%s", err);
    free(toks);
    c->n_logits = 1;   /* the loaded logits are row 0 (as sluice_session_load sets it) */
    cr_assert_eq(sl_kv_lo(c->kv, 0), 170 - 31, "the ring keeps the last 31 rows of layer 0");
    continue_and_compare(c, &r, "version-1 session into a ring", true);
    sl_ctx_free(c);
    unlink(path);
    free(r.rows);
    close_model(&t);
}

/* `sluice plan` shows KV by block kind, and a context of the planned model holds what the plan
 * counts (micro-gemma3 at -c 4096, batch 512 + draft_max 8: 2 full blocks of 4096 positions, 10 rings
 * of 544; kv_dim 2 x 64 in f16 = 256 bytes a row, K and V). */
Test(ring, plan_shows_kv_by_block_kind)
{
    char cmd[1024], out[8192];
    snprintf(cmd, sizeof cmd, "'%s/sluice' plan -m '%s' -c 4096 --ram-budget 1G --disk-bw 1.8 --compute-bw 4 -t 2 2>&1",
             SL_BINARY_DIR, shared_path("models/micro-gemma3.F16.gguf"));
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = 0;
    cr_assert_eq(pclose(f), 0, "%s", out);
    cr_assert(strstr(out, "2 full-attention blocks x 4096 positions, 10 sliding-window blocks x a ring of 544 (window 24 + 520); "
                          "24.00 MiB if every block kept the whole context"), "%s", out);
    const uint64_t kv = (2ull * 4096 + 10ull * 544) * 2 * 256;
    char line[64];
    snprintf(line, sizeof line, "%-34s %12.2f", "KV cache f16", kv / 1048576.0);   /* plan_print.c's table */
    cr_assert(strstr(out, line), "'%s' in\n%s", line, out);
    sluice_params p;
    sluice_params_default(&p);
    p.n_threads = 2;
    p.n_ctx = 4096;
    p.ram_budget = 1ull << 30;
    p.planner = SLUICE_PLANNER_ON;
    p.disk_bw = 1.8;   /* GB/s */
    p.compute_bw = 4;
    char err[512], model[1024];
    snprintf(model, sizeof model, "%s", shared_path("models/micro-gemma3.F16.gguf"));
    sluice_model *m;
    sluice_ctx *c;
    cr_assert_eq(sluice_open(model, &p, &m, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sluice_ctx_new(m, &c, err, sizeof err), 0, "%s", err);
    sluice_stats st;
    sluice_get_stats(m, c, &st);
    cr_assert_eq(st.kv_bytes, kv, "the context holds %llu bytes of KV", (unsigned long long)st.kv_bytes);
    sluice_ctx_free(c);
    sluice_close(m);
}
