/* runtime/serve/sched.c — the scheduler: n_parallel slots, one forward pass at a time.
 *
 * Each pass carries, for every slot that is decoding, its next token followed by the tokens drafted
 * after it (speculative decoding, docs/speculative.md: n-grams of the slot's own context, as many
 * as the adaptive draft length says, the batch room left for the other slots and the request's
 * max_tokens allow), and then chunks of the prompts of slots still prefilling, up to the batch's
 * n_batch tokens (continuous batching: a request admitted now is in the very next pass).  A request
 * goes to the free slot whose KV cache (what its last request left there) shares the longest prefix
 * with its prompt, and only the rest of the prompt is evaluated (the prompt cache, prompt_cache.c;
 * with --prompt-cache-dir also session files, prompt_disk.c).  After the
 * pass each slot whose prompt is done takes the drafts its own sampler accepts plus one token
 * (sluice_batch_verify: greedy, the tokens of one-token decoding), and reports them one at a time:
 * the text released to the job (whole UTF-8 characters, nothing that could still turn out to be the
 * start of a stop string) wakes the job's suspended connection, and a stop string, an end token or
 * max_tokens ends the job at that token, whatever else the pass accepted.  The model is only ever touched by this thread; the server mutex is
 * dropped around the pass, which is where the time goes.
 */
#include "runtime/serve/serve_internal.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/clock.h"

typedef struct slot {
    sluice_ctx *c;
    sluice_sampler *smp;
    job *j;                       /* NULL: free */
    int fed;                      /* prompt tokens in the context (kept by the prompt cache, or evaluated) */
    int32_t next;                 /* the sampled token the next pass evaluates */
    int span;                     /* index in the current batch, -1: not in it */
    bool decoding;                /* the span is next + drafts (else a prompt chunk) */
    int n_draft;                  /* drafts in that span */
    int span_n;                   /* tokens in that span */
    char pend[8];                 /* bytes of an incomplete UTF-8 character */
    size_t pend_len;
    char *raw;                    /* all clean text generated (the stop-string search runs over it) */
    size_t raw_len, raw_cap, released;
    uint64_t last_used;           /* when it was last given a request (sched.n_started then) */
    bool prep;                    /* given a request: the prompt cache's work is due (prepare) */
} slot;

typedef struct sched sched;
struct sched {
    sluice_batch *b;
    slot *slots;
    int n, rr;                    /* slots; where the next prompt chunk search starts */
    struct MHD_Connection **wake; /* connections to resume after the lock is dropped */
    int n_wake;
    uint64_t t_stats_ns;          /* when the stream figures of /metrics were last read */
    uint64_t n_started;           /* requests given a slot so far (the slots' LRU clock) */
    pc_slot_view *views;          /* scratch for the slot choice (prompt_cache.c) */
    pc_disk *disk;                /* the prompt cache's disk tier (NULL: none); the scheduler thread's */
};

/* ---- text -------------------------------------------------------------------------------------- */

/* Contract: serve_internal.h. */
size_t utf8_clean(const char *in, size_t n, char *out, size_t *used)
{
    const unsigned char *s = (const unsigned char *)in;
    size_t i = 0, o = 0;
    while (i < n) {
        unsigned char c = s[i];
        int need = c < 0x80 ? 0 : c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2 : c >= 0xF0 && c <= 0xF4 ? 3 : -1;
        if (need < 0) { memcpy(out + o, "\xEF\xBF\xBD", 3); o += 3; i++; continue; }
        size_t k = 1;
        bool ok = true;
        for (; k <= (size_t)need && i + k < n; k++) {
            unsigned char d = s[i + k];
            bool lo_ok = (d & 0xC0) == 0x80;
            if (k == 1 && c == 0xE0 && d < 0xA0) lo_ok = false;   /* overlong */
            if (k == 1 && c == 0xED && d > 0x9F) lo_ok = false;   /* surrogate */
            if (k == 1 && c == 0xF0 && d < 0x90) lo_ok = false;
            if (k == 1 && c == 0xF4 && d > 0x8F) lo_ok = false;
            if (!lo_ok) { ok = false; break; }
        }
        if (!ok) { memcpy(out + o, "\xEF\xBF\xBD", 3); o += 3; i++; continue; }
        if (k <= (size_t)need) break;   /* incomplete at the end: wait for more bytes */
        memcpy(out + o, s + i, (size_t)need + 1);
        o += (size_t)need + 1;
        i += (size_t)need + 1;
    }
    *used = i;
    return o;
}

static bool grow(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap) return true;
    size_t nc = *cap ? *cap : 256;
    while (nc < need) nc *= 2;
    char *p = realloc(*buf, nc);
    if (!p) return false;
    *buf = p;
    *cap = nc;
    return true;
}

/* ---- jobs -------------------------------------------------------------------------------------- */

job *job_new(void)
{
    job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->refs = 1;
    j->end_tok = -1;
    j->top_n = -1;
    return j;
}

void job_unref_locked(sl_server *s, job *j)
{
    if (--j->refs > 0) return;
    free(j->prompt);
    for (int i = 0; i < j->n_stop; i++) free(j->stop[i]);
    free(j->text);
    free(j->out_toks);
    free(j->sse);
    free(j->lp);
    free(j->schema);
    free(j->gprefix);
    free(j->gsuffix);
    tools_free_job(j);
    free(j);
    s->open_jobs--;
    pthread_cond_broadcast(&s->cv);
}

void job_unref(sl_server *s, job *j)
{
    pthread_mutex_lock(&s->mu);
    job_unref_locked(s, j);
    pthread_mutex_unlock(&s->mu);
}

/* The job's connection waits for it: resume it once the lock is dropped. */
static void wake(sl_server *s, job *j)
{
    if (!j->suspended || j->gone) return;
    j->suspended = false;
    s->sch->wake[s->sch->n_wake++] = j->conn;
}

/* Release raw[released..upto) of the slot's text to its job. */
static void release(sl_server *s, slot *sl, size_t upto)
{
    job *j = sl->j;
    size_t n = upto - sl->released;
    if (!n) return;
    if (!grow(&j->text, &j->text_cap, j->text_len + n + 1)) return;   /* out of memory: the text stays held */
    memcpy(j->text + j->text_len, sl->raw + sl->released, n);
    j->text_len += n;
    j->text[j->text_len] = 0;
    sl->released = upto;
    wake(s, j);
}

static void finish(sl_server *s, slot *sl, int why, const char *err)
{
    job *j = sl->j;
    if (sl->pend_len && grow(&sl->raw, &sl->raw_cap, sl->raw_len + 4)) {   /* a character cut short: U+FFFD */
        memcpy(sl->raw + sl->raw_len, "\xEF\xBF\xBD", 3);
        sl->raw_len += 3;
        sl->pend_len = 0;
    }
    release(s, sl, sl->raw_len);   /* what was held back as a possible stop-string start */
    j->finish = why;
    if (err) snprintf(j->err, sizeof j->err, "%s", err);
    j->state = JOB_DONE;
    j->t_done_ns = sl_now_ns();
    s->met.requests[why == FINISH_CANCELLED ? 3 : why == FINISH_ERROR ? 4 : 0]++;
    wake(s, j);
    j->suspended = false;
    job_unref_locked(s, j);
    sl->j = NULL;
    s->active--;
}

/* Append a token's text; cut at a stop string (true: one was found). */
static bool add_text(sl_server *s, slot *sl, const char *piece, size_t n)
{
    char tmp[sizeof sl->pend + 512], clean[3 * sizeof tmp];
    if (n > 512) n = 512;
    memcpy(tmp, sl->pend, sl->pend_len);
    memcpy(tmp + sl->pend_len, piece, n);
    size_t tn = sl->pend_len + n, used;
    size_t cn = utf8_clean(tmp, tn, clean, &used);
    sl->pend_len = tn - used;
    if (sl->pend_len > sizeof sl->pend) {   /* cannot happen: at most 3 bytes are held */
        sl->pend_len = 0;
    }
    memcpy(sl->pend, tmp + used, sl->pend_len);
    if (!grow(&sl->raw, &sl->raw_cap, sl->raw_len + cn + 1)) return false;
    size_t old = sl->raw_len;
    memcpy(sl->raw + sl->raw_len, clean, cn);
    sl->raw_len += cn;
    job *j = sl->j;
    size_t cut = SIZE_MAX, hold = 0;
    for (int i = 0; i < j->n_stop; i++) {
        size_t L = strlen(j->stop[i]);
        size_t from = old >= L ? old - L + 1 : 0;
        for (size_t p = from; p + L <= sl->raw_len; p++)
            if (!memcmp(sl->raw + p, j->stop[i], L)) { if (p < cut) cut = p; break; }
        for (size_t k = L - 1; k > hold; k--)   /* the text ends with the first k bytes of the stop string */
            if (k <= sl->raw_len && !memcmp(sl->raw + sl->raw_len - k, j->stop[i], k)) { hold = k; break; }
    }
    if (cut != SIZE_MAX) {
        sl->raw_len = cut;
        release(s, sl, cut);
        return true;
    }
    release(s, sl, sl->raw_len - hold);
    return false;
}

/* Report token id, generated when the context held n_past tokens (one-token decoding's count):
 * true when the job ended at it (the slot is then free). */
static bool emit(sl_server *s, slot *sl, int32_t id, int n_past)
{
    job *j = sl->j;
    if (!j->t_first_ns) j->t_first_ns = sl_now_ns();
    s->met.completion_tokens++;
    if (j->n_out == j->out_cap) {
        int nc = j->out_cap ? 2 * j->out_cap : 64;
        int32_t *p = realloc(j->out_toks, (size_t)nc * sizeof *p);
        if (!p) { finish(s, sl, FINISH_ERROR, "out of memory"); return true; }
        j->out_toks = p;
        j->out_cap = nc;
    }
    j->out_toks[j->n_out++] = id;
    if (sluice_token_is_eog(s->M, id) || id == j->end_tok) { finish(s, sl, FINISH_STOP, NULL); return true; }
    char piece[512];
    int pl = sluice_token_piece(s->M, id, false, piece, sizeof piece);
    if (pl > (int)sizeof piece) pl = sizeof piece;
    if (pl > 0 && add_text(s, sl, piece, (size_t)pl)) { finish(s, sl, FINISH_STOP, NULL); return true; }
    if (j->n_out >= j->max_tokens || n_past >= s->n_ctx) { finish(s, sl, FINISH_LENGTH, NULL); return true; }
    return false;
}

/* After a pass in which the slot's prompt is complete: take the accepted drafts and the next token,
 * report them in order until the job ends, keep the last as the next pass's token. */
static void step(sl_server *s, slot *sl)
{
    job *j = sl->j;
    int32_t out[SERVE_MAX_DRAFT + 1];
    int n = sluice_batch_verify(s->sch->b, sl->span, sl->smp, out);
    if (n < 0) { finish(s, sl, FINISH_ERROR, sluice_batch_error(s->sch->b)); return; }
    if (sl->decoding) {
        j->passes++;
        j->drafted += sl->n_draft;
        s->met.seq_passes++;
        s->met.drafted += (uint64_t)sl->n_draft;
    }
    /* out[i] is what one-token decoding samples with n_past - (n - 1) + i tokens in the context */
    const int past0 = sluice_n_past(sl->c) - (n - 1);
    for (int i = 0; i < n; i++) {
        if (i < n - 1) {   /* an accepted draft, reported now (the job may end at it) */
            j->accepted++;
            s->met.accepted++;
        }
        /* a drafting span keeps every row (out[i] came from row i); a prompt's last chunk, its last */
        const float *row = sluice_batch_logits(s->sch->b, sl->span, sl->decoding ? i : sl->span_n - 1);
        if (!lp_record(s, j, row, out[i], sl->raw_len)) { finish(s, sl, FINISH_ERROR, "logprobs: out of memory"); return; }
        if (emit(s, sl, out[i], past0 + i)) return;
    }
    sl->next = out[n - 1];
}

/* The slot takes job j; what its KV cache keeps of j's prompt is decided by prepare() before the
 * next pass. */
static void start(sl_server *s, slot *sl, job *j)
{
    sl->last_used = ++s->sch->n_started;
    sl->prep = true;
    sluice_sampler_free(sl->smp);
    sl->smp = sluice_sampler_new(s->M, &j->sp);
    sl->j = j;
    sl->fed = 0;
    sl->pend_len = 0;
    sl->raw_len = sl->released = 0;
    s->active++;
    j->state = JOB_RUNNING;
    char gerr[SLUICE_ERRLEN];
    if (!sl->smp) finish(s, sl, FINISH_ERROR, "out of memory");
    else if (j->grammar && sluice_sampler_set_grammar(sl->smp, j->schema, j->gprefix, j->gsuffix, gerr, sizeof gerr))
        finish(s, sl, FINISH_ERROR, gerr);   /* checked at parse time: only out of memory gets here */
}

int sched_submit(sl_server *s, job *j)
{
    pthread_mutex_lock(&s->mu);
    int rc = 0;
    if (s->stopping) rc = -ESHUTDOWN;
    else if (s->q_len >= s->o.queue_max + (s->o.n_parallel - s->active)) rc = -EBUSY;
    else {
        j->state = JOB_QUEUED;
        j->t_queued_ns = sl_now_ns();
        j->refs++;
        s->queue[(s->q_head + s->q_len++) % (s->o.queue_max + s->o.n_parallel)] = j;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static bool cancelled(const sl_server *s, const job *j) { return j->gone || j->client_left || s->cancel_all; }

/* Under mu: a queued job ends without having run. */
static void drop_queued(sl_server *s, job *j)
{
    j->state = JOB_DONE;
    j->finish = FINISH_CANCELLED;
    s->met.requests[3]++;
    wake(s, j);
    job_unref_locked(s, j);
}

/* Under mu: cancel what must be, admit what can be.  Returns the active slot count. */
static int admit(sl_server *s)
{
    sched *sc = s->sch;
    for (int i = 0; i < sc->n; i++)
        if (sc->slots[i].j && cancelled(s, sc->slots[i].j)) finish(s, &sc->slots[i], FINISH_CANCELLED, NULL);
    const int qcap = s->o.queue_max + s->o.n_parallel;
    /* queued requests whose clients left give their places up now, not when they reach a slot */
    int kept = 0;
    for (int k = 0; k < s->q_len; k++) {
        job *j = s->queue[(s->q_head + k) % qcap];
        if (cancelled(s, j)) drop_queued(s, j);
        else s->queue[(s->q_head + kept++) % qcap] = j;
    }
    s->q_len = kept;
    while (s->q_len && s->active < sc->n) {
        job *j = s->queue[s->q_head];
        s->q_head = (s->q_head + 1) % qcap;
        s->q_len--;
        for (int i = 0; i < sc->n; i++) {
            slot *sl = &sc->slots[i];
            sc->views[i] = (pc_slot_view){ .busy = sl->j != NULL, .last_used = sl->last_used };
            sc->views[i].toks = sluice_tokens(sl->c, &sc->views[i].n_toks);
        }
        int i = pc_pick(sc->views, sc->n, j->prompt, j->n_prompt, !s->o.no_prompt_cache);
        if (i >= 0) start(s, &sc->slots[i], j);
    }
    return s->active;
}

/* Under mu: the next pass's spans.  Decoding slots first (their next token and drafts, leaving a
 * token for each decoding slot after them and, while a prompt waits, half the batch for prompt
 * chunks: drafts must not hold a new request's first token back), then prompt chunks. */
static void fill_batch(sl_server *s)
{
    sched *sc = s->sch;
    sluice_batch_clear(sc->b);
    int room = s->n_batch, n_dec = 0, reserve = 0;
    for (int i = 0; i < sc->n; i++) {
        slot *sl = &sc->slots[i];
        sl->span = -1;
        sl->decoding = false;
        sl->n_draft = 0;
        if (sl->j && sl->fed >= sl->j->n_prompt) n_dec++;
        else if (sl->j) reserve = s->n_batch / 2;
    }
    for (int k = 0; k < sc->n; k++) {   /* (rotating: a batch smaller than the slots serves each in turn) */
        slot *sl = &sc->slots[(sc->rr + k) % sc->n];
        if (!sl->j || sl->fed < sl->j->n_prompt) continue;
        n_dec--;
        if (room < 1) continue;
        int k_max = room - 1 - n_dec - reserve;
        int left = sl->j->max_tokens - sl->j->n_out - 1;   /* the pass yields the accepted drafts + 1 */
        if (k_max > left) k_max = left;
        if (k_max > SERVE_MAX_DRAFT) k_max = SERVE_MAX_DRAFT;
        sl->span = sluice_batch_add_draft(sc->b, sl->c, sl->next, k_max > 0 ? k_max : 0, &sl->n_draft);
        if (sl->span < 0) continue;
        sl->span_n = 1 + sl->n_draft;
        sl->decoding = true;
        room -= 1 + sl->n_draft;
    }
    for (int k = 0; k < sc->n && room > 0; k++) {
        slot *sl = &sc->slots[(sc->rr + k) % sc->n];
        if (!sl->j || sl->fed >= sl->j->n_prompt) continue;
        int n = sl->j->n_prompt - sl->fed < room ? sl->j->n_prompt - sl->fed : room;
        sl->span = sluice_batch_add(sc->b, sl->c, sl->j->prompt + sl->fed, n, false);
        if (sl->span < 0) continue;
        sl->span_n = n;
        sl->fed += n;
        room -= n;
        if (sl->fed == sl->j->n_prompt) s->met.prompt_tokens += (uint64_t)(sl->j->n_prompt - sl->j->n_cached);
    }
    sc->rr = (sc->rr + 1) % sc->n;
}

/* Under mu, dropped meanwhile: the prompt cache's work for the slots just given a request — each
 * keeps what its KV cache (or a file of the disk tier, loaded into it) shares with its prompt, and
 * evaluates the rest in the passes to come.  The disk tier's saves and loads take time: the HTTP
 * side must not wait on the lock for them.  Only this thread touches the slots' contexts, and a job
 * cancelled meanwhile is finished by the next admit(). */
static void prepare(sl_server *s)
{
    sched *sc = s->sch;
    bool any = false;
    for (int i = 0; i < sc->n; i++) any |= sc->slots[i].prep && sc->slots[i].j;
    if (!any) return;
    const bool cache = !s->o.no_prompt_cache;
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < sc->n; i++) {
        slot *sl = &sc->slots[i];
        if (!sl->prep || !sl->j) continue;
        char err[SLUICE_ERRLEN] = "";
        pc_outcome o = pc_prepare(sc->disk, sl->c, sl->j->prompt, sl->j->n_prompt, cache, err, sizeof err);
        if (o.disk_error) fprintf(stderr, "sluice serve: prompt cache: %s (the request evaluates its prompt)\n", err);
        pthread_mutex_lock(&s->mu);
        sl->prep = false;
        sl->j->n_cached = sl->fed = o.kept;
        if (cache) {
            if (o.kept) s->met.pc_hits++;
            else s->met.pc_misses++;
        }
        s->met.prompt_cached += (uint64_t)o.kept;
        s->met.pc_saves += o.saved;
        s->met.pc_loads += o.loaded;
        s->met.pc_disk_errors += o.disk_error;
        uint64_t bytes;
        int files;
        pc_disk_usage(sc->disk, &bytes, &files);
        s->met.pc_disk_bytes = bytes;
        s->met.pc_disk_files = (uint64_t)files;
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_lock(&s->mu);
}

static void flush_wakes(sl_server *s)
{
    sched *sc = s->sch;
    int n = sc->n_wake;
    sc->n_wake = 0;
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < n; i++) MHD_resume_connection(sc->wake[i]);
    pthread_mutex_lock(&s->mu);
}

static void *sched_main(void *arg)
{
    sl_server *s = arg;
    sched *sc = s->sch;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        int active = admit(s);
        flush_wakes(s);
        if (!active && s->sched_exit && !s->q_len) break;
        if (!active) {
            if (!s->q_len) pthread_cond_wait(&s->cv, &s->mu);
            continue;
        }
        prepare(s);
        fill_batch(s);
        int nt = sluice_batch_n_tokens(sc->b);
        pthread_mutex_unlock(&s->mu);
        int rc = nt ? sluice_batch_eval(sc->b) : 0;
        pthread_mutex_lock(&s->mu);
        s->met.passes++;
        s->met.pass_tokens += (uint64_t)nt;
        if (sl_now_ns() - sc->t_stats_ns > 100000000ull) {   /* (the figures read /proc: not every pass) */
            sluice_stats st;
            sluice_get_stats(s->M, NULL, &st);
            s->met.stream_bytes = st.stream_bytes_read;
            s->met.expert_bytes = st.stream_expert_bytes;
            s->met.expert_hits = st.expert_hits;
            s->met.expert_misses = st.expert_misses;
            s->met.prefetch_units = st.expert_prefetch_units;
            s->met.prefetch_used = st.expert_prefetch_used;
            s->met.prefetch_bytes = st.expert_prefetch_bytes;
            s->met.prefetch_wasted = st.expert_prefetch_wasted;
            s->met.prefetch_failed = st.expert_prefetch_failed;
            sc->t_stats_ns = sl_now_ns();
        }
        for (int i = 0; i < sc->n; i++) {
            slot *sl = &sc->slots[i];
            if (!sl->j || sl->span < 0) continue;
            if (rc) finish(s, sl, rc == -ECANCELED ? FINISH_CANCELLED : FINISH_ERROR, sluice_batch_error(sc->b));
            else if (sl->fed == sl->j->n_prompt) step(s, sl);
        }
        if (rc == -ECANCELED && !s->cancel_all) sluice_batch_uncancel(sc->b);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int sched_start(sl_server *s, char *err, size_t errlen)
{
    sched *sc = calloc(1, sizeof *sc);
    if (!sc) { snprintf(err, errlen, "out of memory"); return -ENOMEM; }
    s->sch = sc;
    sc->n = s->o.n_parallel;
    sc->slots = calloc((size_t)sc->n, sizeof *sc->slots);
    sc->wake = calloc((size_t)(sc->n + s->o.queue_max + s->o.n_parallel) + 1, sizeof *sc->wake);
    sc->views = calloc((size_t)sc->n, sizeof *sc->views);
    s->queue = calloc((size_t)(s->o.queue_max + s->o.n_parallel), sizeof *s->queue);
    if (!sc->slots || !sc->wake || !sc->views || !s->queue) { snprintf(err, errlen, "out of memory"); return -ENOMEM; }
    int rc = sluice_batch_new(s->M, 0, sc->n, 0, &sc->b, err, errlen);
    if (rc) return rc;
    if (s->o.prompt_cache_dir && !s->o.no_prompt_cache &&
        (rc = pc_disk_open(&sc->disk, s->o.prompt_cache_dir, s->o.prompt_cache_max, err, errlen)))
        return rc;
    for (int i = 0; i < sc->n; i++)
        if ((rc = sluice_ctx_new_seq(s->M, &sc->slots[i].c, err, errlen))) return rc;
    sluice_stats st;
    sluice_get_stats(s->M, sc->slots[0].c, &st);
    s->draft_max = st.draft_max;
    if ((rc = pthread_create(&s->sched, NULL, sched_main, s))) {
        snprintf(err, errlen, "cannot start the scheduler thread: %s", strerror(rc));
        return -rc;
    }
    s->sched_started = true;
    return 0;
}

void sched_stop(sl_server *s)
{
    sched *sc = s->sch;
    if (!sc) return;
    pthread_mutex_lock(&s->mu);
    s->cancel_all = s->sched_exit = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (sc->b) sluice_batch_cancel(sc->b);
    if (s->sched_started) pthread_join(s->sched, NULL);
    s->sched_started = false;
    for (int i = 0; i < sc->n; i++) {
        sluice_ctx_free(sc->slots[i].c);
        sluice_sampler_free(sc->slots[i].smp);
        free(sc->slots[i].raw);
    }
    sluice_batch_free(sc->b);
    pc_disk_free(sc->disk);
    free(sc->slots);
    free(sc->wake);
    free(sc->views);
    free(sc);
    s->sch = NULL;
}
