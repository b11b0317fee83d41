/* tests/test_serve_harmony.c — gpt-oss answers through the server's OpenAI shapes: a harmony job's
 * generated text (markers and all, as the tokenizer prints them) becomes `content` (final channel)
 * and `reasoning_content` (analysis channel), in the whole answer and in the stream — and the stream's
 * deltas add up to the same two texts wherever the scheduler cut the generated text.  No model here
 * writes the harmony format (random weights), so the job is filled by hand; the parser itself is
 * tests/test_harmony.c. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/serve/serve_internal.h"
#include "runtime/text/chat_template.h"

static const char generated[] =
    "<|channel|>analysis<|message|>The user wants 2+2. Easy.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.";

static void fake_job(sl_server *s, job *j, const char *text)
{
    memset(s, 0, sizeof *s);
    memset(j, 0, sizeof *j);
    static char name[] = "gpt-oss";
    s->o.model_name = name;
    s->tmpl = SL_TMPL_HARMONY;
    j->kind = JOB_CHAT;
    j->harmony = true;
    j->top_n = -1;
    snprintf(j->id, sizeof j->id, "chatcmpl-test");
    j->text = strdup(text);
    j->text_len = strlen(text);
    sl_harmony_init(&j->hm);
}

Test(serve_harmony, whole_answer_splits_channels)
{
    sl_server s;
    job j;
    fake_job(&s, &j, generated);
    size_t len;
    char *body = oai_response(&s, &j, &len);
    cr_assert_not_null(body);
    json_t *o = json_loadb(body, len, 0, NULL);
    cr_assert_not_null(o, "%s", body);
    json_t *msg = json_object_get(json_array_get(json_object_get(o, "choices"), 0), "message");
    cr_assert_str_eq(json_string_value(json_object_get(msg, "content")), "2 + 2 = 4.", "%s", body);
    cr_assert_str_eq(json_string_value(json_object_get(msg, "reasoning_content")), "The user wants 2+2. Easy.", "%s", body);
    json_decref(o);
    free(body);
    free(j.text);
}

/* SSE events -> the concatenated reasoning_content and content deltas. */
static void add_deltas(const char *ev, size_t len, char *reasoning, char *content)
{
    cr_assert(len > 8 && !memcmp(ev, "data: ", 6), "not an SSE event");
    json_t *o = json_loadb(ev + 6, len - 8, 0, NULL);
    cr_assert_not_null(o);
    json_t *d = json_object_get(json_array_get(json_object_get(o, "choices"), 0), "delta");
    json_t *r = json_object_get(d, "reasoning_content"), *c = json_object_get(d, "content");
    if (r) strcat(reasoning, json_string_value(r));
    if (c) strcat(content, json_string_value(c));
    json_decref(o);
}

Test(serve_harmony, stream_deltas_add_up_wherever_cut)
{
    const size_t n = strlen(generated);
    for (size_t step = 1; step <= n; step += step < 8 ? 1 : 7) {
        sl_server s;
        job j;
        fake_job(&s, &j, generated);
        char reasoning[256] = "", content[256] = "";
        for (size_t at = 0; at < n; at += step) {
            size_t k = n - at < step ? n - at : step, len;
            char *ev = oai_sse_harmony(&s, &j, generated + at, k, false, 0, 0, &len);
            if (ev) add_deltas(ev, len, reasoning, content);
            cr_assert(ev || !len);
            free(ev);
        }
        size_t len;
        char *ev = oai_sse_harmony(&s, &j, "", 0, true, 0, 0, &len);   /* the end: held bytes */
        if (ev) add_deltas(ev, len, reasoning, content);
        free(ev);
        cr_assert_str_eq(reasoning, "The user wants 2+2. Easy.", "cut every %zu bytes", step);
        cr_assert_str_eq(content, "2 + 2 = 4.", "cut every %zu bytes", step);
        free(j.text);
    }
}

/* A model that ignores the format (no markers): everything is the answer, no reasoning. */
Test(serve_harmony, unformatted_output_is_the_answer)
{
    sl_server s;
    job j;
    fake_job(&s, &j, "just text < not a marker");
    size_t len;
    char *body = oai_response(&s, &j, &len);
    json_t *o = json_loadb(body, len, 0, NULL);
    json_t *msg = json_object_get(json_array_get(json_object_get(o, "choices"), 0), "message");
    cr_assert_str_eq(json_string_value(json_object_get(msg, "content")), "just text < not a marker");
    cr_assert_null(json_object_get(msg, "reasoning_content"));
    json_decref(o);
    free(body);
    free(j.text);
}
