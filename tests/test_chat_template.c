/* tests/test_chat_template.c — chat templates: recognition and exact rendering.
 *
 * Two sets of reference strings:
 *  - a two-turn conversation (system, user, assistant, user + the answer header), written out by
 *    hand from each family's documented prompt format (the Llama 2 blog post's [INST]/<<SYS>>,
 *    Meta's Llama 3 header ids, ChatML, Zephyr, Mistral's v1/v3/v3-tekken/v7 tokenization notes,
 *    Gemma's turn markers).  The answer " Hi there " carries spaces on purpose: which families trim
 *    it is part of their format;
 *  - the three-turn conversation of llama.cpp's tests/test-chat-template.cpp with the outputs that
 *    test expects from llama_chat_apply_template (test data, quoted as strings), so a GGUF file gets
 *    the same prompt from sluice as from llama.cpp.
 * Rendering is string-exact: there is no tolerance.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loader/gguf.h"
#include "runtime/text/chat_template.h"

static const sl_chat_msg two_turns[] = {
    { .role = "system", .content = "You are a helpful assistant" },
    { .role = "user", .content = "Hello" },
    { .role = "assistant", .content = " Hi there " },
    { .role = "user", .content = "Who are you" },
};

typedef struct ref { const char *name; const char *want; } ref;

static const ref two_turn_refs[] = {
    { "chatml", "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
                "<|im_start|>assistant\n Hi there <|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n"
                "<|im_start|>assistant\n" },
    { "llama2", "[INST] You are a helpful assistant\nHello [/INST] Hi there </s>[INST] Who are you [/INST]" },
    { "llama2-sys", "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST] Hi there </s>"
                    "[INST] Who are you [/INST]" },
    { "llama2-sys-bos", "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST] Hi there </s>"
                        "<s>[INST] Who are you [/INST]" },
    { "llama2-sys-strip", "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>"
                          "[INST] Who are you [/INST]" },
    { "mistral-v1", " [INST] You are a helpful assistant\n\nHello [/INST]  Hi there </s> [INST] Who are you [/INST]" },
    { "mistral-v3", "[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>[INST] Who are you[/INST]" },
    { "mistral-v3-tekken", "[INST]You are a helpful assistant\n\nHello[/INST] Hi there </s>[INST]Who are you[/INST]" },
    { "mistral-v7", "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST]  Hi there </s>"
                    "[INST] Who are you[/INST]" },
    { "llama3", "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n" },
    { "zephyr", "<|system|>\nYou are a helpful assistant<|endoftext|>\n<|user|>\nHello<|endoftext|>\n"
                "<|assistant|>\n Hi there <|endoftext|>\n<|user|>\nWho are you<|endoftext|>\n<|assistant|>\n" },
    { "gemma", "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n"
               "<start_of_turn>model\nHi there<end_of_turn>\n<start_of_turn>user\nWho are you<end_of_turn>\n"
               "<start_of_turn>model\n" },
    { "plain", "You are a helpful assistant\n\nUser: Hello\nAssistant: Hi there \nUser: Who are you\nAssistant:" },
    { "phi3", "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\n Hi there <|end|>\n"
              "<|user|>\nWho are you<|end|>\n<|assistant|>\n" },
    { "phi4", "<|im_start|>system<|im_sep|>You are a helpful assistant<|im_end|><|im_start|>user<|im_sep|>Hello<|im_end|>"
              "<|im_start|>assistant<|im_sep|> Hi there <|im_end|><|im_start|>user<|im_sep|>Who are you<|im_end|>"
              "<|im_start|>assistant<|im_sep|>" },
    /* gpt-oss's template (worked out by hand from its Jinja source, see harmony_* below); the date is
     * today's, filled in by expect_render */
    { "harmony", "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
                 "Knowledge cutoff: 2024-06\nCurrent date: YYYY-MM-DD\n\nReasoning: medium\n\n"
                 "# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>"
                 "<|start|>developer<|message|># Instructions\n\nYou are a helpful assistant\n\n<|end|>"
                 "<|start|>user<|message|>Hello<|end|><|start|>assistant<|channel|>final<|message|> Hi there <|end|>"
                 "<|start|>user<|message|>Who are you<|end|><|start|>assistant" },
};

/* want with "YYYY-MM-DD" replaced by today's local date (the harmony template's strftime_now). */
static char *with_today(const char *want)
{
    char *w = strdup(want), *p = strstr(w, "YYYY-MM-DD");
    if (p) {
        char d[16];
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        strftime(d, sizeof d, "%Y-%m-%d", &tm);
        memcpy(p, d, 10);
    }
    return w;
}

static void expect_render(const char *name, const sl_chat_msg *m, int n, const char *want)
{
    int t = sl_chat_template_from_name(name);
    cr_assert_neq(t, SL_TMPL_UNKNOWN, "template %s is not known", name);
    cr_expect_str_eq(sl_chat_template_name(t), name);
    size_t len = 0;
    char *got = sl_chat_render(t, m, n, true, &len);
    cr_assert_not_null(got);
    cr_expect_eq(len, strlen(got), "%s: length", name);
    char *w = with_today(want);
    cr_expect_str_eq(got, w, "%s renders\n[%s]\nwant\n[%s]", name, got, w);
    free(w);
    free(got);
}

Test(chat_template, two_turns_every_family)
{
    size_t n = sizeof two_turn_refs / sizeof *two_turn_refs;
    cr_assert_eq(n, SL_TMPL_COUNT, "a template has no reference string");
    for (size_t i = 0; i < n; i++) expect_render(two_turn_refs[i].name, two_turns, 4, two_turn_refs[i].want);
}

/* llama.cpp's test conversation and expected outputs (tests/test-chat-template.cpp). */
static const sl_chat_msg llamacpp_conv[] = {
    { .role = "system", .content = "You are a helpful assistant" },
    { .role = "user", .content = "Hello" },
    { .role = "assistant", .content = "Hi there" },
    { .role = "user", .content = "Who are you" },
    { .role = "assistant", .content = "   I am an assistant   " },
    { .role = "user", .content = "Another question" },
};

static const ref llamacpp_refs[] = {
    { "chatml", "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
                "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n"
                "<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n"
                "<|im_start|>assistant\n" },
    { "llama2", "[INST] You are a helpful assistant\nHello [/INST]Hi there</s>[INST] Who are you [/INST]   I am an "
                "assistant   </s>[INST] Another question [/INST]" },
    { "llama2-sys-bos", "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s><s>[INST] "
                        "Who are you [/INST]   I am an assistant   </s><s>[INST] Another question [/INST]" },
    { "llama2-sys-strip", "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] "
                          "Who are you [/INST]I am an assistant</s>[INST] Another question [/INST]" },
    { "gemma", "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n<start_of_turn>model\nHi "
               "there<end_of_turn>\n<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\nI am an "
               "assistant<end_of_turn>\n<start_of_turn>user\nAnother question<end_of_turn>\n<start_of_turn>model\n" },
    { "llama3", "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|><|start_header_id|>"
                "user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHi there"
                "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|><|start_header_id|>"
                "assistant<|end_header_id|>\n\nI am an assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
                "Another question<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n" },
    { "mistral-v1", " [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are you [/INST]    I "
                    "am an assistant   </s> [INST] Another question [/INST]" },
    { "mistral-v3", "[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>[INST] Who are you[/INST] I am an "
                    "assistant</s>[INST] Another question[/INST]" },
    { "mistral-v3-tekken", "[INST]You are a helpful assistant\n\nHello[/INST]Hi there</s>[INST]Who are you[/INST]   I "
                           "am an assistant   </s>[INST]Another question[/INST]" },
    { "mistral-v7", "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST] Hi there</s>[INST] "
                    "Who are you[/INST]    I am an assistant   </s>[INST] Another question[/INST]" },
    { "phi3", "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n"
              "<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   <|end|>\n<|user|>\nAnother question"
              "<|end|>\n<|assistant|>\n" },
    { "phi4", "<|im_start|>system<|im_sep|>You are a helpful assistant<|im_end|><|im_start|>user<|im_sep|>Hello<|im_end|>"
              "<|im_start|>assistant<|im_sep|>Hi there<|im_end|><|im_start|>user<|im_sep|>Who are you<|im_end|>"
              "<|im_start|>assistant<|im_sep|>   I am an assistant   <|im_end|><|im_start|>user<|im_sep|>Another question"
              "<|im_end|><|im_start|>assistant<|im_sep|>" },
};

Test(chat_template, llama_cpp_reference_outputs)
{
    for (size_t i = 0; i < sizeof llamacpp_refs / sizeof *llamacpp_refs; i++)
        expect_render(llamacpp_refs[i].name, llamacpp_conv, 6, llamacpp_refs[i].want);
}

/* Without the answer header, and a conversation without a system message. */
Test(chat_template, no_generation_prompt_and_no_system)
{
    size_t len;
    char *s = sl_chat_render(SL_TMPL_CHATML, two_turns + 1, 2, false, &len);
    cr_expect_str_eq(s, "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n Hi there <|im_end|>\n");
    free(s);
    s = sl_chat_render(SL_TMPL_LLAMA3, two_turns + 1, 1, true, &len);
    cr_expect_str_eq(s, "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
                        "<|start_header_id|>assistant<|end_header_id|>\n\n");
    free(s);
    s = sl_chat_render(SL_TMPL_GEMMA, two_turns + 1, 1, true, &len);
    cr_expect_str_eq(s, "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n");
    free(s);
    s = sl_chat_render(SL_TMPL_PLAIN, two_turns + 1, 1, true, &len);
    cr_expect_str_eq(s, "User: Hello\nAssistant:");
    free(s);
    s = sl_chat_render(SL_TMPL_CHATML, NULL, 0, false, &len);
    cr_expect_str_eq(s, "");
    cr_expect_eq(len, 0u);
    free(s);
}

/* Recognition from tokenizer.chat_template texts (abridged to the parts that matter; each is the
 * shape the family's published template has). */
Test(chat_template, detect)
{
    struct { const char *text; int want; } cases[] = {
        { "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>'"
          " + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}", SL_TMPL_CHATML },
        { "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] "
          "+ ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token }}{% endif %}{% endfor %}",
          SL_TMPL_LLAMA2 },
        { "{% if messages[0]['role'] == 'system' %}{{ '[INST] <<SYS>>\\n' + messages[0]['content'] + '\\n<</SYS>>\\n\\n' }}"
          "{% endif %}{{ '[INST] ' + message['content'] + ' [/INST]' }}", SL_TMPL_LLAMA2_SYS },
        { "{{- bos_token + '[INST] ' + messages[idx]['content'] + ' [/INST]' -}}{{- '[INST] <<SYS>>\\n' -}}",
          SL_TMPL_LLAMA2_SYS_BOS },
        { "{{ '[INST] ' + content.strip() + ' [/INST]' }}{{ '<<SYS>>\\n' + content.strip() + '\\n<</SYS>>\\n\\n' }}",
          SL_TMPL_LLAMA2_SYS_STRIP },
        { "{{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}", SL_TMPL_MISTRAL_V1 },
        { "{{- \"[AVAILABLE_TOOLS] [\" }}{{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}", SL_TMPL_MISTRAL_V3 },
        { "{{- \"[AVAILABLE_TOOLS][\" }}{{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}", SL_TMPL_MISTRAL_V3_TEKKEN },
        { "{{ '[SYSTEM_PROMPT] ' + message['content'] + '[/SYSTEM_PROMPT]' }}{{ '[INST] ' + message['content'] + '[/INST]' }}",
          SL_TMPL_MISTRAL_V7 },
        { "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}",
          SL_TMPL_LLAMA3 },
        { "{% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + eos_token }}"
          "{% elif message['role'] == 'assistant' %}{{ '<|assistant|>\\n' + message['content'] + eos_token }}{% endif %}"
          "{% endfor %}", SL_TMPL_ZEPHYR },
        { "{{ '<|user|>\\n' + message['content'] + '<|endoftext|>\\n' }}", SL_TMPL_ZEPHYR },
        { "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}", SL_TMPL_GEMMA },
        /* names are accepted as templates too (llama.cpp's --chat-template convention) */
        { "llama3", SL_TMPL_LLAMA3 },
        { "gemma", SL_TMPL_GEMMA },
        { "{{'<|user|>' + '\\n' + message['content'] + '<|end|>' + '\\n' + '<|assistant|>' + '\\n'}}", SL_TMPL_PHI3 },
        { "{{'<|im_start|>system<|im_sep|>' + message['content'] + '<|im_end|>'}}", SL_TMPL_PHI4 },
        /* other families must not be mistaken for a supported one */
        { "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<end_of_utterance>\\n'}}", SL_TMPL_UNKNOWN },
        { "{{ 'Human: ' + message['content'] + '\\n\\nAssistant: ' + eos_token }}", SL_TMPL_UNKNOWN },
        { "", SL_TMPL_UNKNOWN },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        cr_expect_eq(sl_chat_template_detect(cases[i].text), cases[i].want, "case %zu: got %s want %s: %s", i,
                     sl_chat_template_name(sl_chat_template_detect(cases[i].text)), sl_chat_template_name(cases[i].want),
                     cases[i].text);
    cr_expect_eq(sl_chat_template_detect(NULL), SL_TMPL_UNKNOWN);
    cr_expect_eq(sl_chat_template_from_name("nope"), SL_TMPL_UNKNOWN);
}

Test(chat_template, stop_markers)
{
    cr_expect_str_eq(sl_chat_template_end_token(SL_TMPL_CHATML), "<|im_end|>");
    cr_expect_str_eq(sl_chat_template_end_token(SL_TMPL_LLAMA3), "<|eot_id|>");
    cr_expect_str_eq(sl_chat_template_end_token(SL_TMPL_GEMMA), "<end_of_turn>");
    cr_expect_str_eq(sl_chat_template_end_token(SL_TMPL_ZEPHYR), "<|endoftext|>");
    cr_expect_str_eq(sl_chat_template_end_token(SL_TMPL_PHI3), "<|end|>");
    cr_expect_str_eq(sl_chat_template_end_token(SL_TMPL_PHI4), "<|im_end|>");
    cr_expect_null(sl_chat_template_end_token(SL_TMPL_LLAMA2));
    cr_expect_str_eq(sl_chat_template_stop_text(SL_TMPL_PLAIN), "\nUser:");
    cr_expect_null(sl_chat_template_stop_text(SL_TMPL_CHATML));
    /* the list in help texts names every template */
    for (int t = 0; t < SL_TMPL_COUNT; t++)
        cr_expect(strstr(sl_chat_template_names(), sl_chat_template_name(t)), "%s missing from the list", sl_chat_template_name(t));
}

/* The Qwen tokenizer's own template (../shared vocab/ggml-vocab-qwen2.rebuilt.gguf: Qwen3's
 * tokenizer_config.json template, tool calls and <think> blocks around ChatML turns) is ChatML. */
Test(chat_template, qwen_vocab_template_is_chatml)
{
    char err[256];
    sl_gguf *g;
    cr_assert_eq(sl_gguf_open(SL_SHARED_DIR "/vocab/ggml-vocab-qwen2.rebuilt.gguf", &g, err, sizeof err), 0, "%s", err);
    sl_str t;
    cr_assert(sl_gguf_get_str(g, "tokenizer.chat_template", &t));
    char *s = strndup(t.ptr, t.len);
    cr_expect_eq(sl_chat_template_detect(s), SL_TMPL_CHATML);
    free(s);
    sl_gguf_close(g);
}

/* ---- harmony (gpt-oss) ----------------------------------------------------------------------------
 * Expected strings worked out by hand from gpt-oss's Jinja template (the tokenizer.chat_template of
 * ../shared/vocab/ggml-vocab-gpt-oss.gguf, llama.cpp's models/templates/openai-gpt-oss-120b.jinja):
 * build_system_message() writes model_identity + "\n", "Knowledge cutoff: 2024-06\n", "Current date: "
 * + strftime_now("%Y-%m-%d") + "\n\n", "Reasoning: " + reasoning_effort + "\n\n", then (no builtin
 * tools, no tools) "# Valid channels: analysis, commentary, final. Channel must be included for every
 * message."; every {%- / -%} trims the template's own newlines, so nothing else appears.  A first
 * system/developer message becomes "<|start|>developer<|message|># Instructions\n\n" + content +
 * "\n\n<|end|>" (only when non-empty); later ones fall through the loop's role tests and vanish.
 * Assistant turns render their final channel, ending in <|end|>, or <|return|> for a last turn
 * without add_generation_prompt; the generation prompt is "<|start|>assistant". */

#define HSYS(effort) "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n" \
    "Knowledge cutoff: 2024-06\nCurrent date: 2025-08-05\n\nReasoning: " effort "\n\n" \
    "# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>"

static void expect_harmony(const sl_chat_msg *m, int n, const sl_chat_opts *o, const char *want)
{
    size_t len = 0;
    char *got = sl_chat_render_opts(SL_TMPL_HARMONY, m, n, o, &len);
    cr_assert_not_null(got);
    cr_expect_eq(len, strlen(got));
    cr_expect_str_eq(got, want, "harmony renders\n[%s]\nwant\n[%s]", got, want);
    free(got);
}

Test(chat_template, harmony_conversations)
{
    sl_chat_opts o = { .add_assistant = true, .date = "2025-08-05" };
    /* a user turn alone: the system message the template builds, the user, the generation prompt */
    const sl_chat_msg one[] = { { .role = "user", .content = "What is 2+2?" } };
    expect_harmony(one, 1, &o, HSYS("medium") "<|start|>user<|message|>What is 2+2?<|end|><|start|>assistant");

    /* developer message, low effort, a previous answer (final channel only), two user turns */
    const sl_chat_msg dev[] = { { .role = "developer", .content = "Answer in French." }, { .role = "user", .content = "Hi" }, { .role = "assistant", .content = "Bonjour !" },
                                { .role = "user", .content = "Thanks\nbye" } };
    o.reasoning_effort = "low";
    expect_harmony(dev, 4, &o, HSYS("low") "<|start|>developer<|message|># Instructions\n\nAnswer in French.\n\n<|end|>"
                   "<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>final<|message|>Bonjour !<|end|>"
                   "<|start|>user<|message|>Thanks\nbye<|end|><|start|>assistant");

    /* no generation prompt and an assistant turn last: it ends in <|return|> (training format) */
    sl_chat_opts t = { .add_assistant = false, .reasoning_effort = "high", .date = "2025-08-05" };
    expect_harmony(dev, 3, &t, HSYS("high") "<|start|>developer<|message|># Instructions\n\nAnswer in French.\n\n<|end|>"
                   "<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>final<|message|>Bonjour !<|return|>");

    /* an empty system message writes no developer message; a later system message is dropped; the
     * model identity is an option */
    const sl_chat_msg odd[] = { { .role = "system", .content = "" }, { .role = "user", .content = "a" }, { .role = "system", .content = "ignored" }, { .role = "user", .content = "b" } };
    sl_chat_opts id = { .add_assistant = true, .model_identity = "You are a test.", .date = "2025-08-05" };
    expect_harmony(odd, 4, &id, "<|start|>system<|message|>You are a test.\nKnowledge cutoff: 2024-06\n"
                   "Current date: 2025-08-05\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. "
                   "Channel must be included for every message.<|end|><|start|>user<|message|>a<|end|>"
                   "<|start|>user<|message|>b<|end|><|start|>assistant");

    /* sl_chat_render: the defaults and today's date */
    char *s = sl_chat_render(SL_TMPL_HARMONY, one, 1, true, NULL);
    char *w = with_today(HSYS("medium") "<|start|>user<|message|>What is 2+2?<|end|><|start|>assistant");
    char *p = strstr(w, "2025-08-05"), *q = strstr(s, "Current date: ");
    cr_assert(p && q);
    memcpy(p, q + 14, 10);   /* HSYS fixes the date: take the rendered one, checked for shape below */
    cr_expect_str_eq(s, w);
    cr_expect(q[18] == '-' && q[21] == '-' && q[24] == '\n', "date shape: %.12s", q + 14);
    free(w);
    free(s);
}

/* gpt-oss's own template (in ../shared's gpt-oss vocab) is recognized as harmony. */
Test(chat_template, gpt_oss_vocab_template_is_harmony)
{
    char err[256];
    sl_gguf *g;
    cr_assert_eq(sl_gguf_open(SL_SHARED_DIR "/vocab/ggml-vocab-gpt-oss.gguf", &g, err, sizeof err), 0, "%s", err);
    sl_str t;
    cr_assert(sl_gguf_get_str(g, "tokenizer.chat_template", &t));
    char *s = strndup(t.ptr, t.len);
    cr_expect_eq(sl_chat_template_detect(s), SL_TMPL_HARMONY);
    cr_expect_eq(sl_chat_template_detect("harmony"), SL_TMPL_HARMONY);
    cr_expect_str_eq(sl_chat_template_end_token(SL_TMPL_HARMONY), "<|return|>");
    free(s);
    sl_gguf_close(g);
}
