/* runtime/serve/response_format.c — OpenAI's response_format on /v1/chat/completions:
 *   {"type": "text"}                       nothing to do;
 *   {"type": "json_object"}                the answer is one JSON object;
 *   {"type": "json_schema", "json_schema": {"name": ..., "schema": {...}, "strict": ..., "description": ...}}
 *                                          the answer is valid against the schema.
 * Both are enforced by constrained decoding (sluice_sampler_set_json_schema): tokens that would
 * leave the JSON or the schema are never sampled, streaming or not.  The schema is checked here, so
 * a keyword the grammar cannot enforce is a 400 naming it before anything runs.  "strict" may be
 * true or false: the answer is always held to the schema (false asks for less than that).  The
 * server's --ignore-eos does not apply to such a request: a constrained answer ends where its value
 * does (end of generation is then the only token the grammar allows). */
#include "runtime/serve/serve_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAD(...) do { snprintf(msg, msglen, __VA_ARGS__); return 400; } while (0)

/* Every key of o is one of the names (NULL-terminated), or a 400 naming it. */
static int only_keys(json_t *o, const char *where, const char *const *names, const char *supported, char *msg,
                     size_t msglen)
{
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        bool known = false;
        for (int i = 0; names[i] && !known; i++) known = !strcmp(key, names[i]);
        if (!known) BAD("'%s.%.64s' is not supported (supported: %s)", where, key, supported);
    }
    return 0;
}

static int parse_json_schema(json_t *js, job *j, char *msg, size_t msglen)
{
    static const char *const keys[] = { "name", "schema", "strict", "description", NULL };
    if (!json_is_object(js)) BAD("'response_format.json_schema' must be an object with 'name' and 'schema'");
    int rc = only_keys(js, "response_format.json_schema", keys, "name, schema, strict, description", msg, msglen);
    if (rc) return rc;
    json_t *name = json_object_get(js, "name"), *schema = json_object_get(js, "schema");
    json_t *strict = json_object_get(js, "strict"), *desc = json_object_get(js, "description");
    if (!json_is_string(name) || !json_string_length(name))
        BAD("'response_format.json_schema.name' must be a non-empty string");
    if (strict && !json_is_boolean(strict) && !json_is_null(strict))
        BAD("'response_format.json_schema.strict' must be true or false");
    if (desc && !json_is_string(desc) && !json_is_null(desc))
        BAD("'response_format.json_schema.description' must be a string");
    if (!schema || json_is_null(schema))
        BAD("'response_format.json_schema' needs 'schema' (a JSON Schema object); for any JSON object use "
            "{\"type\": \"json_object\"}");
    if (!json_is_object(schema) && !json_is_boolean(schema))
        BAD("'response_format.json_schema.schema' must be a JSON Schema (an object)");
    char *text = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!text) BAD("out of memory");
    char err[SLUICE_ERRLEN];
    if (sluice_json_schema_check(text, err, sizeof err)) {
        free(text);
        BAD("'response_format.json_schema.schema': %s", err);
    }
    j->schema = text;
    j->grammar = true;
    j->sp.ignore_eog = false;
    return 0;
}

int oai_response_format(json_t *o, job *j, char *msg, size_t msglen)
{
    json_t *rf = json_object_get(o, "response_format");
    if (!rf || json_is_null(rf)) return 0;
    if (!json_is_object(rf)) BAD("'response_format' must be an object such as {\"type\": \"json_object\"}");
    json_t *type = json_object_get(rf, "type");
    const char *t = json_is_string(type) ? json_string_value(type) : NULL;
    if (!t) BAD("'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"");
    static const char *const only_type[] = { "type", NULL }, *const with_schema[] = { "type", "json_schema", NULL };
    if (!strcmp(t, "text") || !strcmp(t, "json_object")) {
        int rc = only_keys(rf, "response_format", only_type, "type", msg, msglen);
        if (rc) return rc;
        j->grammar = !strcmp(t, "json_object");
        if (j->grammar) j->sp.ignore_eog = false;
        return 0;
    }
    if (strcmp(t, "json_schema"))
        BAD("'response_format.type' \"%.32s\" is not supported (supported: text, json_object, json_schema)", t);
    int rc = only_keys(rf, "response_format", with_schema, "type, json_schema", msg, msglen);
    return rc ? rc : parse_json_schema(json_object_get(rf, "json_schema"), j, msg, msglen);
}
