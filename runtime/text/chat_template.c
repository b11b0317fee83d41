/* runtime/text/chat_template.c — recognizing and rendering chat templates (see chat_template.h).
 *
 * The formats follow each family's documented prompt format; where a family has variants the
 * marker strings that tell them apart are the ones llama.cpp's llm_chat_detect_template uses (read
 * for the facts only), so a GGUF file is formatted the same way by both runtimes. */
#include "runtime/text/chat_template.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/text/chat_internal.h"
#include "runtime/text/json_text.h"

static const char *const k_names[SL_TMPL_COUNT] = {
    [SL_TMPL_PLAIN] = "plain",           [SL_TMPL_CHATML] = "chatml",
    [SL_TMPL_LLAMA2] = "llama2",         [SL_TMPL_LLAMA2_SYS] = "llama2-sys",
    [SL_TMPL_LLAMA2_SYS_BOS] = "llama2-sys-bos", [SL_TMPL_LLAMA2_SYS_STRIP] = "llama2-sys-strip",
    [SL_TMPL_MISTRAL_V1] = "mistral-v1", [SL_TMPL_MISTRAL_V3] = "mistral-v3",
    [SL_TMPL_MISTRAL_V3_TEKKEN] = "mistral-v3-tekken", [SL_TMPL_MISTRAL_V7] = "mistral-v7",
    [SL_TMPL_LLAMA3] = "llama3",         [SL_TMPL_ZEPHYR] = "zephyr",
    [SL_TMPL_GEMMA] = "gemma",           [SL_TMPL_PHI3] = "phi3",
    [SL_TMPL_PHI4] = "phi4",             [SL_TMPL_HARMONY] = "harmony",
};

const char *sl_chat_template_name(int t) { return t >= 0 && t < SL_TMPL_COUNT ? k_names[t] : "unknown"; }

const char *sl_chat_template_names(void)
{
    return "plain, chatml, llama2, llama2-sys, llama2-sys-bos, llama2-sys-strip, mistral-v1, mistral-v3, "
           "mistral-v3-tekken, mistral-v7, llama3, zephyr, gemma, phi3, phi4, harmony";
}

int sl_chat_template_from_name(const char *name)
{
    for (int t = 0; t < SL_TMPL_COUNT; t++)
        if (!strcmp(name, k_names[t])) return t;
    return SL_TMPL_UNKNOWN;
}

int sl_chat_template_detect(const char *s)
{
    if (!s || !*s) return SL_TMPL_UNKNOWN;
    int byname = sl_chat_template_from_name(s);
    if (byname != SL_TMPL_UNKNOWN) return byname;
#define HAS(x) (strstr(s, x) != NULL)
    /* gpt-oss: harmony's role header and channel markers */
    if (HAS("<|start|>") && HAS("<|message|>") && HAS("<|channel|>")) return SL_TMPL_HARMONY;
    if (HAS("<|im_start|>")) {
        /* Phi-4 (<|im_sep|>) and SmolVLM (<end_of_utterance>) reuse the marker with other formats */
        if (HAS("<|im_sep|>")) return SL_TMPL_PHI4;
        return HAS("<end_of_utterance>") ? SL_TMPL_UNKNOWN : SL_TMPL_CHATML;
    }
    if (!strncmp(s, "mistral", 7) || HAS("[INST]")) {
        if (HAS("[SYSTEM_PROMPT]")) return SL_TMPL_MISTRAL_V7;
        if (HAS("' [INST] ' + system_message") || HAS("[AVAILABLE_TOOLS]")) {
            if (HAS(" [INST]")) return SL_TMPL_MISTRAL_V1;
            if (HAS("\"[INST]\"")) return SL_TMPL_MISTRAL_V3_TEKKEN;
            return SL_TMPL_MISTRAL_V3;
        }
        if (HAS("content.strip()")) return SL_TMPL_LLAMA2_SYS_STRIP;
        if (HAS("bos_token + '[INST]")) return SL_TMPL_LLAMA2_SYS_BOS;
        if (HAS("<<SYS>>")) return SL_TMPL_LLAMA2_SYS;
        return SL_TMPL_LLAMA2;
    }
    if (HAS("<|assistant|>") && HAS("<|end|>")) return SL_TMPL_PHI3;
    if (HAS("<|start_header_id|>") && HAS("<|end_header_id|>")) return SL_TMPL_LLAMA3;
    if (HAS("<start_of_turn>")) return SL_TMPL_GEMMA;
    /* Zephyr: <|user|> turns closed by <|endoftext|> (or eos_token); Phi-3 closes them with <|end|>
     * and ChatGLM starts with [gMASK]: those are other formats. */
    if (HAS("<|user|>") && (HAS("<|endoftext|>") || HAS("eos_token")) && !HAS("<|end|>") && !HAS("[gMASK]"))
        return SL_TMPL_ZEPHYR;
#undef HAS
    return SL_TMPL_UNKNOWN;
}

const char *sl_chat_template_end_token(int t)
{
    switch (t) {
    case SL_TMPL_CHATML: return "<|im_end|>";
    case SL_TMPL_LLAMA3: return "<|eot_id|>";
    case SL_TMPL_GEMMA: return "<end_of_turn>";
    case SL_TMPL_PHI3: return "<|end|>";
    case SL_TMPL_PHI4: return "<|im_end|>";
    case SL_TMPL_ZEPHYR: return "<|endoftext|>";
    case SL_TMPL_HARMONY: return "<|return|>";   /* <|end|> only closes a channel's message */
    default: return NULL;   /* Llama 2 / Mistral end answers with </s>, the EOS token */
    }
}

const char *sl_chat_template_stop_text(int t) { return t == SL_TMPL_PLAIN ? "\nUser:" : NULL; }

/* ---- rendering --------------------------------------------------------------------------------- */

static void put_content(sbuf *b, const char *s, bool trim) { if (trim) put_trim(b, s); else put(b, s); }


static void render_llama2(sbuf *b, int t, const sl_chat_msg *m, int n)
{
    bool sys = t != SL_TMPL_LLAMA2, bos_inside = t == SL_TMPL_LLAMA2_SYS_BOS, strip = t == SL_TMPL_LLAMA2_SYS_STRIP;
    bool inside = true;   /* the first [INST] is written up front; BOS comes from the tokenizer */
    put(b, "[INST] ");
    for (int i = 0; i < n; i++) {
        if (!inside) {
            inside = true;
            put(b, bos_inside ? "<s>[INST] " : "[INST] ");
        }
        if (is_role(m[i].role, "system")) {
            if (sys) { put(b, "<<SYS>>\n"); put_content(b, m[i].content, strip); put(b, "\n<</SYS>>\n\n"); }
            else { put_content(b, m[i].content, strip); put(b, "\n"); }
        } else if (is_role(m[i].role, "user")) {
            put_content(b, m[i].content, strip);
            put(b, " [/INST]");
        } else {
            put_content(b, m[i].content, strip);
            put(b, "</s>");
            inside = false;
        }
    }
}

static void render_mistral(sbuf *b, int t, const sl_chat_msg *m, int n)
{
    const char *lead = t == SL_TMPL_MISTRAL_V1 ? " " : "", *trail = t == SL_TMPL_MISTRAL_V3_TEKKEN ? "" : " ";
    bool inside = false;
    for (int i = 0; i < n; i++) {
        if (!inside) { put(b, lead); put(b, "[INST]"); put(b, trail); inside = true; }
        if (is_role(m[i].role, "system")) { put(b, m[i].content); put(b, "\n\n"); }
        else if (is_role(m[i].role, "user")) { put(b, m[i].content); put(b, lead); put(b, "[/INST]"); }
        else {
            put(b, trail);
            put_content(b, m[i].content, t == SL_TMPL_MISTRAL_V3);
            put(b, "</s>");
            inside = false;
        }
    }
}

/* An assistant turn with a tool call (one: sl_chat_check): its content as an analysis message
 * unless a later assistant turn answers, then the call in the commentary channel.  The tool's name. */
static const char *harmony_call(sbuf *b, const sl_chat_msg *m, int n, int i)
{
    bool later_final = false;
    for (int k = i + 1; k < n; k++) later_final |= is_role(m[k].role, "assistant") && !m[k].n_tool_calls;
    if (m[i].content[0] && !later_final) {
        put(b, "<|start|>assistant<|channel|>analysis<|message|>");
        put(b, m[i].content);
        put(b, "<|end|>");
    }
    const sl_chat_tool_call *c = &m[i].tool_calls[0];
    put(b, "<|start|>assistant to=functions.");
    put(b, c->name);
    put(b, "<|channel|>commentary json<|message|>");
    char *py = sl_json_pyformat(c->arguments, strlen(c->arguments), 0, NULL);
    if (py) put(b, py); else b->oom = true;
    free(py);
    put(b, "<|call|>");
    return c->name;
}

/* gpt-oss's Jinja template (tokenizer.chat_template of its GGUF files, builtin_tools left out),
 * statement by statement; tests/test_chat_template.c and test_chat_tools.c hold strings worked out
 * from it. */
static void render_harmony(sbuf *b, const sl_chat_msg *m, int n, const sl_chat_opts *o)
{
    char today[32] = "";
    const char *date = o->date;
    if (!date) {
        time_t now = time(NULL);
        struct tm tm;
        if (localtime_r(&now, &tm)) strftime(today, sizeof today, "%Y-%m-%d", &tm);
        date = today;
    }
    put(b, "<|start|>system<|message|>");
    put(b, o->model_identity ? o->model_identity : "You are ChatGPT, a large language model trained by OpenAI.");
    put(b, "\nKnowledge cutoff: 2024-06\nCurrent date: ");
    put(b, date);
    put(b, "\n\nReasoning: ");
    put(b, o->reasoning_effort ? o->reasoning_effort : "medium");
    put(b, "\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.");
    if (o->n_tools) put(b, "\nCalls to these tools must go to the commentary channel: 'functions'.");
    put(b, "<|end|>");
    int first = 0;
    bool dev = n > 0 && (is_role(m[0].role, "developer") || is_role(m[0].role, "system")) && m[0].content[0];
    if (n > 0 && (is_role(m[0].role, "developer") || is_role(m[0].role, "system"))) first = 1;
    if (dev || o->n_tools) {
        put(b, "<|start|>developer<|message|>");
        if (dev) { put(b, "# Instructions\n\n"); put(b, m[0].content); put(b, "\n\n"); }
        if (o->n_tools) { put(b, "# Tools\n\n"); sl_render_harmony_tools(b, o); }
        put(b, "<|end|>");
    }
    const char *last_call = NULL;   /* the tool a "tool" message answers: the latest call's */
    for (int i = first; i < n; i++) {
        if (m[i].n_tool_calls) { last_call = harmony_call(b, m, n, i); continue; }
        if (is_role(m[i].role, "tool")) {
            put(b, "<|start|>functions.");
            put(b, last_call ? last_call : "");
            put(b, " to=assistant<|channel|>commentary<|message|>");
            char *q = sl_json_quote(m[i].content, NULL);
            if (q) put(b, q); else b->oom = true;
            free(q);
            put(b, "<|end|>");
        } else if (is_role(m[i].role, "assistant")) {
            last_call = NULL;
            put(b, "<|start|>assistant<|channel|>final<|message|>");
            put(b, m[i].content);
            put(b, i == n - 1 && !o->add_assistant ? "<|return|>" : "<|end|>");
        } else if (is_role(m[i].role, "user")) {
            put(b, "<|start|>user<|message|>");
            put(b, m[i].content);
            put(b, "<|end|>");
        }
    }
    if (o->add_assistant) put(b, "<|start|>assistant");
}

/* Tool calls or tool results in the conversation: the tool form of the template renders them. */
static bool has_tool_turns(const sl_chat_msg *m, int n)
{
    for (int i = 0; i < n; i++)
        if (m[i].n_tool_calls || is_role(m[i].role, "tool")) return true;
    return false;
}

char *sl_chat_render(int t, const sl_chat_msg *m, int n, bool add_ass, size_t *len)
{
    sl_chat_opts o = { .add_assistant = add_ass };
    return sl_chat_render_opts(t, m, n, &o, len);
}

char *sl_chat_render_opts(int t, const sl_chat_msg *m, int n, const sl_chat_opts *opts, size_t *len)
{
    static const sl_chat_opts none = { 0 };
    const sl_chat_opts *o = opts ? opts : &none;
    bool add_ass = o->add_assistant;
    sbuf b = { 0 };
    put(&b, "");
    switch (t) {
    case SL_TMPL_CHATML:   /* Qwen3's template: plain ChatML when there are no tools */
        sl_render_hermes(&b, m, n, o);
        break;
    case SL_TMPL_LLAMA2: case SL_TMPL_LLAMA2_SYS: case SL_TMPL_LLAMA2_SYS_BOS: case SL_TMPL_LLAMA2_SYS_STRIP:
        render_llama2(&b, t, m, n);
        break;
    case SL_TMPL_MISTRAL_V3_TEKKEN:
        if (o->n_tools || has_tool_turns(m, n)) { sl_render_mistral_tools(&b, m, n, o); break; }
        /* fall through */
    case SL_TMPL_MISTRAL_V1: case SL_TMPL_MISTRAL_V3:
        render_mistral(&b, t, m, n);
        break;
    case SL_TMPL_MISTRAL_V7:
        for (int i = 0; i < n; i++) {
            if (is_role(m[i].role, "system")) { put(&b, "[SYSTEM_PROMPT] "); put(&b, m[i].content); put(&b, "[/SYSTEM_PROMPT]"); }
            else if (is_role(m[i].role, "user")) { put(&b, "[INST] "); put(&b, m[i].content); put(&b, "[/INST]"); }
            else { put(&b, " "); put(&b, m[i].content); put(&b, "</s>"); }
        }
        break;
    case SL_TMPL_LLAMA3:
        if (o->n_tools || has_tool_turns(m, n)) { sl_render_llama3_tools(&b, m, n, o); break; }
        for (int i = 0; i < n; i++) {
            put(&b, "<|start_header_id|>"); put(&b, m[i].role); put(&b, "<|end_header_id|>\n\n");
            put_trim(&b, m[i].content); put(&b, "<|eot_id|>");
        }
        if (add_ass) put(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case SL_TMPL_PHI3:
        for (int i = 0; i < n; i++) { put(&b, "<|"); put(&b, m[i].role); put(&b, "|>\n"); put(&b, m[i].content); put(&b, "<|end|>\n"); }
        if (add_ass) put(&b, "<|assistant|>\n");
        break;
    case SL_TMPL_PHI4:
        for (int i = 0; i < n; i++) { put(&b, "<|im_start|>"); put(&b, m[i].role); put(&b, "<|im_sep|>"); put(&b, m[i].content); put(&b, "<|im_end|>"); }
        if (add_ass) put(&b, "<|im_start|>assistant<|im_sep|>");
        break;
    case SL_TMPL_ZEPHYR:
        for (int i = 0; i < n; i++) { put(&b, "<|"); put(&b, m[i].role); put(&b, "|>\n"); put(&b, m[i].content); put(&b, "<|endoftext|>\n"); }
        if (add_ass) put(&b, "<|assistant|>\n");
        break;
    case SL_TMPL_HARMONY:
        render_harmony(&b, m, n, o);
        break;
    case SL_TMPL_GEMMA: {
        /* no system role: the system text opens the next user turn */
        sbuf sys = { 0 };
        for (int i = 0; i < n; i++) {
            if (is_role(m[i].role, "system")) { put_trim(&sys, m[i].content); continue; }
            bool model = is_role(m[i].role, "assistant");
            put(&b, "<start_of_turn>"); put(&b, model ? "model" : m[i].role); put(&b, "\n");
            if (sys.n && !model) { put_n(&b, sys.p, sys.n); put(&b, "\n\n"); sys.n = 0; }
            put_trim(&b, m[i].content); put(&b, "<end_of_turn>\n");
        }
        if (sys.oom) b.oom = true;
        free(sys.p);
        if (add_ass) put(&b, "<start_of_turn>model\n");
        break;
    }
    default:   /* plain */
        for (int i = 0; i < n; i++) {
            if (is_role(m[i].role, "system")) { put(&b, m[i].content); put(&b, "\n\n"); }
            else if (is_role(m[i].role, "user")) { put(&b, "User: "); put(&b, m[i].content); put(&b, "\n"); }
            else { put(&b, "Assistant:"); put(&b, m[i].content); put(&b, "\n"); }
        }
        if (add_ass) put(&b, "Assistant:");
        break;
    }
    if (b.oom) { free(b.p); return NULL; }
    if (len) *len = b.n;
    return b.p;
}
