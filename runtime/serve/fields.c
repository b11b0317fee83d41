/* runtime/serve/fields.c — which request fields exist: every field of a request is honoured (parsed
 * and checked in oai.c), accepted only with the value that asks for nothing (OpenAI's default,
 * e.g. "echo": false, "tools": []), or refused with a 400 naming it.  A client that asked for JSON
 * output, tool calls or an echo must learn that it will not get them, not receive prose as if it
 * had; a misspelled field must not silently fall back to the default either.
 */
#include "runtime/serve/serve_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

enum { BOTH = 3, COMPL = 1, CHAT = 2 };

typedef struct field {
    const char *name;
    int where;                    /* BOTH, COMPL, CHAT */
    const char *neutral;          /* NULL: honoured; else the JSON values ('|'-separated) accepted as asking nothing */
    const char *why;              /* what is not supported (for the 400) */
} field;

static const field fields[] = {
    /* honoured (oai.c) */
    { "model", BOTH, NULL, NULL }, { "prompt", COMPL, NULL, NULL }, { "messages", CHAT, NULL, NULL },
    { "stream", BOTH, NULL, NULL }, { "stream_options", BOTH, NULL, NULL }, { "max_tokens", BOTH, NULL, NULL },
    { "max_completion_tokens", BOTH, NULL, NULL }, { "temperature", BOTH, NULL, NULL }, { "top_p", BOTH, NULL, NULL },
    { "top_k", BOTH, NULL, NULL }, { "min_p", BOTH, NULL, NULL }, { "repeat_penalty", BOTH, NULL, NULL },
    { "seed", BOTH, NULL, NULL }, { "stop", BOTH, NULL, NULL }, { "n", BOTH, NULL, NULL },
    { "presence_penalty", BOTH, NULL, NULL }, { "frequency_penalty", BOTH, NULL, NULL },
    { "return_tokens", BOTH, NULL, NULL }, { "logprobs", BOTH, NULL, NULL }, { "top_logprobs", CHAT, NULL, NULL },
    { "user", BOTH, NULL, NULL },   /* an end-user id for the operator's logs: nothing to do with the output */
    { "reasoning_effort", CHAT, NULL, NULL },   /* harmony (gpt-oss) renders it; refused for other templates (oai.c) */
    { "response_format", CHAT, NULL, NULL },    /* text, json_object, json_schema: constrained decoding (response_format.c) */
    /* accepted only when they ask for nothing */
    { "echo", COMPL, "false", "the prompt is not echoed back" },
    { "suffix", COMPL, "\"\"", "text after the completion (insertion) is not supported" },
    { "best_of", COMPL, "1", "only one candidate is generated" },
    { "logit_bias", BOTH, "{}", "logit biases are not supported" },
    { "tools", CHAT, NULL, NULL }, { "tool_choice", CHAT, NULL, NULL },   /* tools.c */
    { "parallel_tool_calls", CHAT, NULL, NULL },
    { "functions", CHAT, "[]", "the deprecated functions API is not supported: send tools" },
    { "function_call", CHAT, "\"none\"|\"auto\"", "the deprecated functions API is not supported: send tool_choice" },
    { "store", CHAT, "false", "completions are not stored" },
    { "metadata", CHAT, "{}", "completions are not stored (metadata goes with \"store\")" },
    { "modalities", CHAT, "[\"text\"]", "only text is generated" },
    { "audio", CHAT, NULL, "only text is generated" },
    { "prediction", CHAT, NULL, "predicted outputs are not supported" },
    { "service_tier", CHAT, "\"auto\"|\"default\"", "there is one service tier" },
    { "web_search_options", CHAT, NULL, "web search is not supported" },
};

/* v is null or one of the neutral values. */
static bool neutral(json_t *v, const char *values)
{
    if (json_is_null(v)) return true;
    for (const char *p = values; p && *p;) {
        size_t n = strcspn(p, "|");
        json_t *d = json_loadb(p, n, JSON_DECODE_ANY, NULL);
        bool eq = d && json_equal(d, v);
        json_decref(d);
        if (eq) return true;
        p += n;
        if (*p == '|') p++;
    }
    return false;
}

int oai_check_fields(json_t *o, int kind, char *msg, size_t msglen)
{
    const int here = kind == JOB_CHAT ? CHAT : COMPL;
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        const field *f = NULL;
        for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
            if (!strcmp(fields[i].name, key)) { f = &fields[i]; break; }
        if (!f || !(f->where & here)) {
            snprintf(msg, msglen, "unknown field '%.64s' for %s (see the README's list of request fields)", key,
                     kind == JOB_CHAT ? "/v1/chat/completions" : "/v1/completions");
            return 400;
        }
        if (f->why && !neutral(v, f->neutral)) {
            snprintf(msg, msglen, "'%s' is not supported by this server: %s%s%s", key, f->why,
                     f->neutral ? "; accepted only as " : "", f->neutral ? f->neutral : "");
            return 400;
        }
    }
    return 0;
}
