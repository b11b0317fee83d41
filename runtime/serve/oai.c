/* runtime/serve/oai.c — the OpenAI wire format: request bodies in, response bodies and SSE events out.
 *
 * Parsing is jansson's (strict JSON, UTF-8 checked); every field is type- and range-checked and a
 * bad one is named in the 400 message.  Accepted: model, prompt (string or token ids) / messages
 * (role + string content, or content parts of type "text"), stream, stream_options.include_usage,
 * max_tokens (max_completion_tokens), temperature, top_p, top_k, min_p, repeat_penalty, seed, stop
 * (string or up to 4), n (1 only), presence/frequency_penalty (0 only), return_tokens (sluice: the
 * generated token ids in the choice), logprobs (completions: 0..5 alternatives; chat: true, with
 * top_logprobs 0..20), user, tools / tool_choice / parallel_tool_calls (tools.c).  Every other field
 * is neutral or refused with a 400 naming it (fields.c); a message holds role and content, and the
 * tool fields tools.c reads.
 */
#include "runtime/serve/serve_internal.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/clock.h"
#include "runtime/text/chat_template.h"

#define BAD(...) do { snprintf(msg, msglen, __VA_ARGS__); return 400; } while (0)

const char *oai_finish_name(int f)
{
    switch (f) {
    case FINISH_STOP: return "stop";
    case FINISH_LENGTH: return "length";
    default: return NULL;   /* cancelled and failed requests have no finish_reason of OpenAI's: none is sent */
    }
}

/* A number field in [lo, hi]: 0 absent, 1 set, 400 wrong. */
static int get_num(json_t *o, const char *k, double lo, double hi, double *out, char *msg, size_t msglen)
{
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) BAD("'%s' must be a number", k);
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi)) BAD("'%s' must be between %g and %g (got %g)", k, lo, hi, d);
    *out = d;
    return 1;
}

static int get_int(json_t *o, const char *k, long long lo, long long hi, long long *out, char *msg, size_t msglen)
{
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_integer(v)) BAD("'%s' must be an integer", k);
    long long d = json_integer_value(v);
    if (d < lo || d > hi) BAD("'%s' must be between %lld and %lld (got %lld)", k, lo, hi, d);
    *out = d;
    return 1;
}

static int get_bool(json_t *o, const char *k, bool *out, char *msg, size_t msglen)
{
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) BAD("'%s' must be true or false", k);
    *out = json_is_true(v);
    return 1;
}

static int add_stop(job *j, const char *t, size_t n, char *msg, size_t msglen)
{
    if (!n) return 0;   /* an empty stop string would stop at once: OpenAI ignores it too */
    if (n > SERVE_MAX_STOP_LEN) BAD("a stop string may have at most %d bytes", SERVE_MAX_STOP_LEN);
    if (j->n_stop >= SERVE_MAX_STOP) BAD("at most %d stop strings", SERVE_MAX_STOP);
    if (!(j->stop[j->n_stop] = strndup(t, n))) BAD("out of memory");
    j->n_stop++;
    return 0;
}

/* logprobs: completions "logprobs": N alternatives (0..5); chat "logprobs": true and
 * "top_logprobs": N (0..20).  j->kind is already set. */
static int parse_logprobs(json_t *o, job *j, char *msg, size_t msglen)
{
    int r;
    long long ll;
    bool on = false;
    if (j->kind == JOB_COMPLETION) {
        if ((r = get_int(o, "logprobs", 0, 5, &ll, msg, msglen)) > 1) return r;
        if (r == 1) j->top_n = (int)ll;
        return 0;
    }
    if ((r = get_bool(o, "logprobs", &on, msg, msglen)) > 1) return r;
    if ((r = get_int(o, "top_logprobs", 0, LP_MAX_TOP, &ll, msg, msglen)) > 1) return r;
    if (r == 1 && !on) BAD("'top_logprobs' needs \"logprobs\": true");
    if (on) j->top_n = r == 1 ? (int)ll : 0;
    return 0;
}

/* Sampling, limits and stop strings shared by both endpoints. */
static int parse_common(sl_server *s, json_t *o, job *j, char *msg, size_t msglen)
{
    int r;
    double d;
    long long ll;
    j->sp = s->o.sampling;
    static uint64_t seed_counter;
    j->sp.seed = sl_now_ns() ^ (__atomic_add_fetch(&seed_counter, 1, __ATOMIC_RELAXED) * 0x9E3779B97F4A7C15ull);
    json_t *m = json_object_get(o, "model");
    if (m && !json_is_string(m) && !json_is_null(m)) BAD("'model' must be a string");
    if ((r = get_bool(o, "stream", &j->stream, msg, msglen)) > 1) return r;
    json_t *so = json_object_get(o, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so)) BAD("'stream_options' must be an object");
        if ((r = get_bool(so, "include_usage", &j->include_usage, msg, msglen)) > 1) return r;
        const char *key;
        json_t *v;
        json_object_foreach(so, key, v)
            if (strcmp(key, "include_usage") && !json_is_null(v))
                BAD("'stream_options'.%.32s is not supported (only include_usage)", key);
    }
    if ((r = get_bool(o, "return_tokens", &j->return_tokens, msg, msglen)) > 1) return r;
    j->max_tokens = s->o.default_max_tokens;
    json_t *mct = json_object_get(o, "max_completion_tokens"), *mtk = json_object_get(o, "max_tokens");
    if (mct && mtk && !json_is_null(mct) && !json_is_null(mtk))
        BAD("'max_tokens' and 'max_completion_tokens' both given: give one (they mean the same)");
    const char *mt = mct && !json_is_null(mct) ? "max_completion_tokens" : "max_tokens";
    if ((r = get_int(o, mt, LLONG_MIN, LLONG_MAX, &ll, msg, msglen)) > 1) return r;
    if (r == 1) {
        if (ll < 1 || ll > s->o.max_tokens)
            BAD("'%s' is %lld; it must be at least 1 and at most %d (this server's --max-tokens)", mt, ll, s->o.max_tokens);
        j->max_tokens = (int)ll;
    }
    if ((r = get_num(o, "temperature", 0, 100, &d, msg, msglen)) > 1) return r;
    if (r == 1) j->sp.temp = (float)d;
    if ((r = get_num(o, "top_p", 0, 1, &d, msg, msglen)) > 1) return r;
    if (r == 1) j->sp.top_p = (float)d;
    if ((r = get_num(o, "min_p", 0, 1, &d, msg, msglen)) > 1) return r;
    if (r == 1) j->sp.min_p = (float)d;
    if ((r = get_num(o, "repeat_penalty", 0.01, 100, &d, msg, msglen)) > 1) return r;
    if (r == 1) j->sp.repeat_penalty = (float)d;
    if ((r = get_int(o, "top_k", 0, 1 << 30, &ll, msg, msglen)) > 1) return r;
    if (r == 1) j->sp.top_k = (int)ll;
    if ((r = get_int(o, "seed", 0, INT64_MAX, &ll, msg, msglen)) > 1) return r;
    if (r == 1) j->sp.seed = (uint64_t)ll;
    if ((r = get_int(o, "n", 1, 1, &ll, msg, msglen)) > 1) return r;
    if ((r = parse_logprobs(o, j, msg, msglen)) > 1) return r;
    const char *pen[] = { "presence_penalty", "frequency_penalty" };
    for (int i = 0; i < 2; i++) {
        if ((r = get_num(o, pen[i], -2, 2, &d, msg, msglen)) > 1) return r;
        if (r == 1 && d != 0) BAD("'%s' is not supported (only 0); use repeat_penalty", pen[i]);
    }
    json_t *st = json_object_get(o, "stop");
    if (json_is_string(st)) {
        if ((r = add_stop(j, json_string_value(st), json_string_length(st), msg, msglen))) return r;
    } else if (json_is_array(st)) {
        if (json_array_size(st) > SERVE_MAX_STOP) BAD("'stop' may hold at most %d strings", SERVE_MAX_STOP);
        size_t i;
        json_t *e;
        json_array_foreach(st, i, e) {
            if (!json_is_string(e)) BAD("'stop' must be a string or an array of strings");
            if ((r = add_stop(j, json_string_value(e), json_string_length(e), msg, msglen))) return r;
        }
    } else if (st && !json_is_null(st)) {
        BAD("'stop' must be a string or an array of strings");
    } else {   /* none given: the server's (sluice serve -r) */
        for (int i = 0; i < s->o.n_default_stop; i++)
            if ((r = add_stop(j, s->o.default_stop[i], strlen(s->o.default_stop[i]), msg, msglen))) return r;
    }
    return 0;
}

static int tokenize(sl_server *s, const char *text, size_t n, int flags, job *j, char *msg, size_t msglen)
{
    int nt = sluice_tokenize(s->M, text, (ptrdiff_t)n, flags, NULL, 0);
    if (nt < 0) BAD("the prompt cannot be tokenized: %s", strerror(-nt));
    if (nt == 0) BAD("the prompt is empty");
    int lim = s->o.max_prompt_tokens;
    if (nt > lim)
        BAD("the prompt has %d tokens; this server takes at most %d (context %d)", nt, lim, s->n_ctx);
    if (!(j->prompt = malloc((size_t)nt * sizeof *j->prompt))) BAD("out of memory");
    sluice_tokenize(s->M, text, (ptrdiff_t)n, flags, j->prompt, nt);
    j->n_prompt = nt;
    return 0;
}

static int parse_prompt(sl_server *s, json_t *o, job *j, char *msg, size_t msglen)
{
    json_t *p = json_object_get(o, "prompt");
    if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0))) p = json_array_get(p, 0);
    if (json_is_string(p))
        return tokenize(s, json_string_value(p), json_string_length(p), SLUICE_TOK_ADD_SPECIAL, j, msg, msglen);
    if (json_is_array(p) && json_is_string(json_array_get(p, 0)))
        BAD("'prompt' as a list of %zu strings (a completion for each) is not supported: send one request per prompt, "
            "or one string", json_array_size(p));
    if (!json_is_array(p) || !json_array_size(p)) BAD("'prompt' must be a non-empty string or an array of token ids");
    size_t n = json_array_size(p), i;
    if (n > (size_t)s->o.max_prompt_tokens)
        BAD("the prompt has %zu tokens; this server takes at most %d (context %d)", n, s->o.max_prompt_tokens, s->n_ctx);
    if (!(j->prompt = malloc(n * sizeof *j->prompt))) BAD("out of memory");
    json_t *e;
    json_array_foreach(p, i, e) {
        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) >= s->n_vocab)
            BAD("'prompt'[%zu] is not a token id in [0, %d)", i, s->n_vocab);
        j->prompt[i] = (int32_t)json_integer_value(e);
    }
    j->n_prompt = (int)n;
    return 0;
}

/* A message's content: a string, or an array of parts whose "text" parts are joined. */
static char *content_text(json_t *c, size_t idx, char *msg, size_t msglen)
{
    if (json_is_string(c)) return strndup(json_string_value(c), json_string_length(c));
    if (!json_is_array(c)) { snprintf(msg, msglen, "'messages'[%zu].content must be a string or an array of parts", idx); return NULL; }
    size_t len = 0, i;
    json_t *part;
    json_array_foreach(c, i, part) {
        json_t *t = json_object_get(part, "type"), *tx = json_object_get(part, "text");
        if (!json_is_string(t) || strcmp(json_string_value(t), "text") || !json_is_string(tx) || json_object_size(part) > 2) {
            snprintf(msg, msglen, "'messages'[%zu].content[%zu]: only parts {\"type\":\"text\",\"text\":...} are supported", idx, i);
            return NULL;
        }
        len += json_string_length(tx);
    }
    char *out = malloc(len + 1), *w = out;
    if (!out) { snprintf(msg, msglen, "out of memory"); return NULL; }
    json_array_foreach(c, i, part) {
        json_t *tx = json_object_get(part, "text");
        memcpy(w, json_string_value(tx), json_string_length(tx));
        w += json_string_length(tx);
    }
    *w = 0;
    return out;
}

static int parse_messages(sl_server *s, json_t *o, job *j, char *msg, size_t msglen)
{
    json_t *ms = json_object_get(o, "messages");
    if (!json_is_array(ms) || !json_array_size(ms)) BAD("'messages' must be a non-empty array");
    size_t n = json_array_size(ms), i;
    if (n > 4096) BAD("at most 4096 messages");
    sl_chat_msg *cm = calloc(n, sizeof *cm);
    if (!cm) BAD("out of memory");
    int rc = 0;
    json_t *e;
    json_array_foreach(ms, i, e) {
        json_t *role = json_object_get(e, "role");
        if (!json_is_object(e) || !json_is_string(role)) {
            snprintf(msg, msglen, "'messages'[%zu] must be an object with a string 'role'", i);
            rc = 400;
            break;
        }
        const char *r = json_string_value(role);
        if (!strcmp(r, "developer")) r = "system";
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "tool")) {
            snprintf(msg, msglen, "'messages'[%zu].role '%.32s' is not supported (system, developer, user, assistant, "
                     "tool)", i, r);
            rc = 400;
            break;
        }
        cm[i].role = r;
        if ((rc = tools_parse_message(e, i, &cm[i], msg, msglen))) break;
        json_t *c = json_object_get(e, "content");
        if (cm[i].n_tool_calls && (!c || json_is_null(c))) c = json_string("");   /* a message of calls only */
        else json_incref(c);
        cm[i].content = content_text(c, i, msg, msglen);
        json_decref(c);
        if (!cm[i].content) { rc = 400; break; }
    }
    json_t *effort = json_object_get(o, "reasoning_effort");
    const char *eff = json_is_string(effort) ? json_string_value(effort) : NULL;
    if (!rc && effort && !json_is_null(effort)) {
        if (s->tmpl != SL_TMPL_HARMONY)
            snprintf(msg, msglen, "'reasoning_effort' is not supported for this model (its chat template, %s, has no "
                     "reasoning levels; gpt-oss's harmony has)", sl_chat_template_name(s->tmpl)), rc = 400;
        else if (!eff || (strcmp(eff, "low") && strcmp(eff, "medium") && strcmp(eff, "high")))
            snprintf(msg, msglen, "'reasoning_effort' must be \"low\", \"medium\" or \"high\""), rc = 400;
    }
    chat_tools ct = { 0 };
    if (!rc) rc = tools_parse_request(s, o, j, &ct, msg, msglen);
    sl_chat_opts co = { .add_assistant = true, .reasoning_effort = eff, .tools = (const char *const *)ct.tools,
                        .n_tools = ct.n };
    if (!rc && sl_chat_check(s->tmpl, cm, (int)n, &co, msg, msglen)) rc = 400;
    if (!rc) {
        size_t tl;
        char *text = sl_chat_render_opts(s->tmpl, cm, (int)n, &co, &tl);
        if (!text) { snprintf(msg, msglen, "out of memory"); rc = 500; }
        else rc = tokenize(s, text, tl, SLUICE_TOK_ADD_SPECIAL | SLUICE_TOK_PARSE_SPECIAL, j, msg, msglen);
        free(text);
    }
    tools_free_request(&ct);
    for (size_t k = 0; k < n; k++) { free((char *)cm[k].content); tools_free_message(&cm[k]); }
    free(cm);
    if (rc) return rc;
    const char *stop = sl_chat_template_stop_text(s->tmpl);
    if (stop && j->n_stop <= SERVE_MAX_STOP) j->stop[j->n_stop++] = strdup(stop);
    j->end_tok = s->tmpl_end_tok;
    j->harmony = s->tmpl == SL_TMPL_HARMONY;
    sl_harmony_init(&j->hm);
    return 0;
}

int oai_parse_request(sl_server *s, int kind, const char *body, size_t len, job *j, char *msg, size_t msglen)
{
    json_error_t je;
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!o) BAD("invalid JSON at line %d column %d: %s", je.line, je.column, je.text);
    int rc = 0;
    j->kind = kind;
    if (!json_is_object(o)) { snprintf(msg, msglen, "the request body must be a JSON object"); rc = 400; }
    if (!rc) rc = oai_check_fields(o, kind, msg, msglen);
    if (!rc) rc = parse_common(s, o, j, msg, msglen);
    if (!rc && kind == JOB_CHAT) rc = oai_response_format(o, j, msg, msglen);
    if (!rc) rc = kind == JOB_CHAT ? parse_messages(s, o, j, msg, msglen) : parse_prompt(s, o, j, msg, msglen);
    if (!rc && j->n_prompt >= s->n_ctx)
        snprintf(msg, msglen, "the prompt has %d tokens; the context holds %d", j->n_prompt, s->n_ctx), rc = 400;
    json_decref(o);
    j->kind = kind;
    return rc;
}

/* ---- responses ---------------------------------------------------------------------------------- */

static char *dump(json_t *o, size_t *len)
{
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (s && len) *len = strlen(s);
    return s;
}

static json_t *usage(const job *j)
{
    return json_pack("{s:i,s:i,s:i,s:{s:i}}", "prompt_tokens", j->n_prompt, "completion_tokens", j->n_out, "total_tokens",
                     j->n_prompt + j->n_out, "prompt_tokens_details", "cached_tokens", j->n_cached);
}

/* The request's decoding figures, as `sluice run --stats-json` names them. */
static json_t *timings(const job *j)
{
    return json_pack("{s:i,s:i,s:i,s:f}", "passes", j->passes, "drafted", j->drafted, "accepted", j->accepted,
                     "tokens_per_pass", j->passes ? (double)j->n_out / j->passes : 0.0);
}

static json_t *head(sl_server *s, const job *j, const char *object)
{
    return json_pack("{s:s,s:s,s:I,s:s}", "id", j->id, "object", object, "created", (json_int_t)j->created, "model",
                     s->o.model_name);
}

char *oai_response(sl_server *s, const job *j, size_t *len)
{
    json_t *o = head(s, j, j->kind == JOB_CHAT ? "chat.completion" : "text_completion");
    json_t *text = json_stringn(j->text ? j->text : "", j->text_len);
    char *reasoning = NULL, *content = NULL;
    if (j->harmony && !sl_harmony_split(j->text ? j->text : "", j->text_len, &reasoning, &content)) {
        json_decref(text);   /* the final channel is the answer, the analysis its reasoning */
        text = json_string(content);
    }
    json_t *ch = j->kind == JOB_CHAT
                     ? json_pack("{s:i,s:{s:s,s:o},s:n,s:s?}", "index", 0, "message", "role", "assistant", "content", text,
                                 "logprobs", "finish_reason", oai_finish_name(j->finish))
                     : json_pack("{s:i,s:o,s:n,s:s?}", "index", 0, "text", text, "logprobs", "finish_reason",
                                 oai_finish_name(j->finish));
    if (j->return_tokens) {
        json_t *a = json_array();
        for (int i = 0; i < j->n_out; i++) json_array_append_new(a, json_integer(j->out_toks[i]));
        json_object_set_new(ch, "tokens", a);
    }
    if (j->top_n >= 0) json_object_set_new(ch, "logprobs", lp_json(s, j, 0, lp_ready(j, 0)));
    if (reasoning && *reasoning)
        json_object_set_new(json_object_get(ch, "message"), "reasoning_content", json_string(reasoning));
    if (j->kind == JOB_CHAT && j->outparse) tools_fill_choice(s, j, ch);
    free(reasoning);
    free(content);
    json_object_set_new(o, "choices", json_pack("[o]", ch));
    json_object_set_new(o, "usage", usage(j));
    json_object_set_new(o, "timings", timings(j));
    return dump(o, len);
}

/* "data: {json}\n\n" */
static char *event(json_t *o, size_t *len)
{
    size_t n;
    char *js = dump(o, &n);
    if (!js) return NULL;
    char *e = malloc(n + 9);
    if (e) {
        memcpy(e, "data: ", 6);
        memcpy(e + 6, js, n);
        memcpy(e + 6 + n, "\n\n", 3);
        *len = n + 8;
    }
    free(js);
    return e;
}

json_t *oai_chunk_head(sl_server *s, const job *j) { return head(s, j, "chat.completion.chunk"); }
char *oai_event(json_t *o, size_t *len) { return event(o, len); }

typedef struct hm_out { char *buf[2]; size_t len[2], cap[2]; bool oom; } hm_out;   /* 0 reasoning, 1 content */

static void hm_collect(void *user, int channel, const char *header, const char *text, size_t len)
{
    (void)header;
    hm_out *h = user;
    const int k = channel == SL_HARMONY_ANALYSIS ? 0 : channel == SL_HARMONY_FINAL ? 1 : -1;
    if (k < 0 || !len) return;   /* commentary (tool preambles) has no place in a plain answer */
    if (h->len[k] + len + 1 > h->cap[k]) {
        size_t nc = (h->len[k] + len + 1) * 2;
        char *nb = realloc(h->buf[k], nc);
        if (!nb) { h->oom = true; return; }
        h->buf[k] = nb;
        h->cap[k] = nc;
    }
    memcpy(h->buf[k] + h->len[k], text, len);
    h->len[k] += len;
}

char *oai_sse_harmony(sl_server *s, job *j, const char *text, size_t n, bool finish, int lp_from, int lp_to, size_t *len)
{
    hm_out h = { 0 };
    if (n) sl_harmony_feed(&j->hm, text, n, hm_collect, &h);
    if (finish) sl_harmony_finish(&j->hm, hm_collect, &h);
    char *e = NULL;
    *len = 0;
    if (!h.oom && (h.len[0] || h.len[1] || lp_to > lp_from)) {
        json_t *o = head(s, j, "chat.completion.chunk"), *delta = json_object();
        if (h.len[0]) json_object_set_new(delta, "reasoning_content", json_stringn(h.buf[0], h.len[0]));
        if (h.len[1]) json_object_set_new(delta, "content", json_stringn(h.buf[1], h.len[1]));
        json_t *ch = json_pack("{s:i,s:o,s:n,s:n}", "index", 0, "delta", delta, "logprobs", "finish_reason");
        if (j->top_n >= 0 && lp_to > lp_from) json_object_set_new(ch, "logprobs", lp_json(s, j, lp_from, lp_to));
        json_object_set_new(o, "choices", json_pack("[o]", ch));
        e = event(o, len);
    }
    free(h.buf[0]);
    free(h.buf[1]);
    return e;
}

char *oai_sse_chunk(sl_server *s, const job *j, const char *text, size_t n, int lp_from, int lp_to, bool role, int finish,
                    size_t *len)
{
    json_t *o = head(s, j, j->kind == JOB_CHAT ? "chat.completion.chunk" : "text_completion");
    json_t *ch;
    if (j->kind == JOB_CHAT) {
        json_t *delta = json_object();
        if (role) json_object_set_new(delta, "role", json_string("assistant"));
        if (n || role) json_object_set_new(delta, "content", json_stringn(text, n));
        const char *fin = finish && j->n_calls ? "tool_calls" : oai_finish_name(finish);
        ch = json_pack("{s:i,s:o,s:n,s:s?}", "index", 0, "delta", delta, "logprobs", "finish_reason", fin);
    } else {
        ch = json_pack("{s:i,s:s%,s:n,s:s?}", "index", 0, "text", text, n, "logprobs", "finish_reason", oai_finish_name(finish));
    }
    if (j->top_n >= 0 && !role && !finish) json_object_set_new(ch, "logprobs", lp_json(s, j, lp_from, lp_to));
    if (finish && j->return_tokens) {
        json_t *a = json_array();
        for (int i = 0; i < j->n_out; i++) json_array_append_new(a, json_integer(j->out_toks[i]));
        json_object_set_new(ch, "tokens", a);
    }
    json_object_set_new(o, "choices", json_pack("[o]", ch));
    return event(o, len);
}

char *oai_sse_error(const job *j, size_t *len)
{
    return event(json_pack("{s:{s:s,s:s,s:i}}", "error", "message", j->err[0] ? j->err : "generation failed", "type",
                           "server_error", "code", 500), len);
}

char *oai_sse_usage(sl_server *s, const job *j, size_t *len)
{
    json_t *o = head(s, j, j->kind == JOB_CHAT ? "chat.completion.chunk" : "text_completion");
    json_object_set_new(o, "choices", json_array());
    json_object_set_new(o, "usage", usage(j));
    json_object_set_new(o, "timings", timings(j));
    return event(o, len);
}

char *oai_models_body(const sl_server *s, size_t *len)
{
    return dump(json_pack("{s:s,s:[{s:s,s:s,s:i,s:s,s:i}]}", "object", "list", "data", "id", s->o.model_name, "object",
                          "model", "created", 0, "owned_by", "sluice", "context_length", s->n_ctx), len);
}

char *oai_error_body(int status, const char *m, size_t *len)
{
    const char *type = status == 401 ? "authentication_error" : status == 404 ? "not_found_error"
                       : status == 503 ? "unavailable_error" : status >= 500 ? "server_error" : "invalid_request_error";
    json_t *o = json_pack("{s:{s:s,s:s,s:i}}", "error", "message", m, "type", type, "code", status);
    if (!o) o = json_pack("{s:{s:s,s:s,s:i}}", "error", "message", "(message not valid UTF-8)", "type", type, "code", status);
    return dump(o, len);
}
