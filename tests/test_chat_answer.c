/* tests/test_chat_answer.c — what `sluice chat` prints of an answer and what it keeps
 * (runtime/cli/chat_answer.c, compiled into this test): gpt-oss's harmony channels split into the
 * answer (stdout) and the reasoning (stderr, only on request), plain templates cut at their stop
 * text, the same whatever the generated text's pieces are. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cli/chat_answer.h"

typedef struct run_out { char *out, *err, *msg; size_t nout, nerr; bool stopped; } run_out;

/* Feed `text` in pieces of `piece` bytes (the last one shorter), or cut once at `cut` when piece is 0. */
static run_out feed(const char *text, size_t piece, size_t cut, bool harmony, bool show, const char *stop_text)
{
    run_out r = { 0 };
    chat_answer a = { .harmony = harmony, .show_reasoning = show, .stop_text = stop_text };
    a.out = open_memstream(&r.out, &r.nout);
    a.err = open_memstream(&r.err, &r.nerr);
    cr_assert(a.out && a.err);
    chat_answer_begin(&a);
    size_t n = strlen(text), i = 0;
    while (i < n && !r.stopped) {
        size_t k = piece ? piece : (i == 0 ? cut : n - i);
        if (k > n - i) k = n - i;
        r.stopped = chat_answer_add(&a, text + i, k);
        i += k;
    }
    chat_answer_end(&a);
    cr_assert(!a.oom);
    r.msg = strdup(a.msg);
    chat_answer_free(&a);
    fclose(a.out);
    fclose(a.err);
    return r;
}

static void run_free(run_out *r) { free(r->out); free(r->err); free(r->msg); }

/* What gpt-oss writes after "<|start|>assistant" (<|return|> ends generation and prints nothing). */
static const char HARMONY[] = "<|channel|>analysis<|message|>The user wants 2+2. Easy.<|end|>"
                              "<|start|>assistant<|channel|>final<|message|> It is 4.";

Test(chat_answer, harmony_shows_the_final_channel_and_keeps_it)
{
    size_t n = strlen(HARMONY);
    for (size_t cut = 1; cut < n; cut++) {
        run_out r = feed(HARMONY, 0, cut, true, false, NULL);
        cr_expect_str_eq(r.out, "It is 4.", "cut at %zu: printed '%s'", cut, r.out);
        cr_expect_str_eq(r.err, "", "cut at %zu: reasoning printed unasked: '%s'", cut, r.err);
        cr_expect_str_eq(r.msg, " It is 4.", "cut at %zu: kept '%s'", cut, r.msg);
        cr_expect(!r.stopped);
        run_free(&r);
    }
    run_out r = feed(HARMONY, 1, 0, true, false, NULL);   /* byte by byte */
    cr_expect_str_eq(r.out, "It is 4.");
    run_free(&r);
}

Test(chat_answer, harmony_reasoning_on_request_goes_to_stderr_before_the_answer)
{
    for (size_t piece = 1; piece <= 7; piece++) {
        run_out r = feed(HARMONY, piece, 0, true, true, NULL);
        cr_expect_str_eq(r.err, "reasoning: The user wants 2+2. Easy.\n", "pieces of %zu: '%s'", piece, r.err);
        cr_expect_str_eq(r.out, "It is 4.");
        cr_expect_str_eq(r.msg, " It is 4.", "the analysis must not be kept: '%s'", r.msg);
        run_free(&r);
    }
}

Test(chat_answer, harmony_without_markers_is_the_answer)
{
    run_out r = feed(" just words, no channels", 3, 0, true, true, NULL);
    cr_expect_str_eq(r.out, "just words, no channels");
    cr_expect_str_eq(r.err, "");
    cr_expect_str_eq(r.msg, " just words, no channels");
    run_free(&r);
}

Test(chat_answer, plain_template_cut_at_its_stop_text_wherever_it_is_split)
{
    const char *text = " Hello there.\nUser: and now I speak for the user";
    size_t n = strlen(text);
    for (size_t cut = 1; cut < n; cut++) {
        run_out r = feed(text, 0, cut, false, false, "\nUser:");
        cr_expect_str_eq(r.out, "Hello there.", "cut at %zu: '%s'", cut, r.out);
        cr_expect_str_eq(r.msg, " Hello there.", "cut at %zu: kept '%s'", cut, r.msg);
        cr_expect(r.stopped, "cut at %zu: the stop text did not end the answer", cut);
        run_free(&r);
    }
    /* a tail that only looks like the start of the stop text is printed at the end */
    run_out r = feed(" Bye.\nUs", 1, 0, false, false, "\nUser:");
    cr_expect_str_eq(r.out, "Bye.\nUs");
    cr_expect(!r.stopped);
    run_free(&r);
}
