/* tests/test_grammar.c — the JSON grammar and the JSON Schema subset (runtime/text/grammar.h):
 * texts each keyword accepts and rejects (written out by hand), every refused keyword, the bounds
 * that make every answer end, and random walks through the automaton — each byte drawn among the
 * bytes the state allows — that must never reach a state with nothing allowed and must always
 * end in JSON an independent validator (grammar_testutil.h) accepts. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_testutil.h"
#include "runtime/text/grammar.h"

static sl_grammar *compile3(const char *schema, const char *prefix, const char *suffix)
{
    sl_grammar *g = NULL;
    char err[256] = "";
    int rc = sl_grammar_compile(schema, schema ? strlen(schema) : 0, prefix, suffix, &g, err, sizeof err);
    cr_assert_eq(rc, 0, "compile %s: %s", schema ? schema : "(null)", err);
    return g;
}
static sl_grammar *compile(const char *schema) { return compile3(schema, NULL, NULL); }

static void expect(const char *schema, const char *const *good, const char *const *badt)
{
    sl_grammar *g = compile(schema);
    for (int i = 0; good && good[i]; i++)
        cr_expect(sl_grammar_accepts(g, good[i], strlen(good[i])), "%s should accept %s", schema, good[i]);
    for (int i = 0; badt && badt[i]; i++)
        cr_expect(!sl_grammar_accepts(g, badt[i], strlen(badt[i])), "%s should reject %s", schema, badt[i]);
    sl_grammar_free(g);
}
#define L(...) (const char *const[]){ __VA_ARGS__, NULL }

Test(grammar, any_object)
{
    sl_grammar *g = compile(NULL);
    const char *good[] = { "{}", "{\"a\":1}", "{ \"a\" : [1, 2.5e3, \"x\", true, false, null, {\"b\":{}}] }",
                           "{\"\\u00e9\\n\":\"\\ud83d\\ude00\"}", "{\"a\":-0.5}", "{\n  \"k\": \"v\"\n}", NULL };
    const char *badt[] = { "[]", "1", "\"s\"", "{", "{\"a\"}", "{\"a\":1,}", "{,}", " {}", "{} ", "{\"a\":01}",
                           "{\"a\":1.}", "{\"a\":.5}", "{\"a\":tru}", "{\"a\":\"\\x\"}", "{\"a\":\"\x01\"}",
                           "{\"a\":\"\\udc00\"}", "{\"a\":\"\\ud800x\"}", "{\"a\":\"\xc0\xaf\"}", "{\"a\":\"\xed\xa0\x80\"}",
                           "{\"a\":\"\\u0000\"}", "{\"a\":\"\xf4\x90\x80\x80\"}", NULL };
    for (int i = 0; good[i]; i++) cr_expect(sl_grammar_accepts(g, good[i], strlen(good[i])), "accept %s", good[i]);
    for (int i = 0; badt[i]; i++) cr_expect(!sl_grammar_accepts(g, badt[i], strlen(badt[i])), "reject %s", badt[i]);
    sl_grammar_free(g);
}

Test(grammar, object_properties_in_order)
{
    const char *s = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"},"
                    "\"c\":{\"type\":\"boolean\"}},\"required\":[\"b\"]}";
    expect(s, L("{\"b\":\"x\"}", "{\"a\":1,\"b\":\"\"}", "{\"b\":\"x\",\"c\":true}", "{\"a\":-3,\"b\":\"y\",\"c\":false}"),
           L("{}", "{\"a\":1}", "{\"b\":\"x\",\"a\":1}", "{\"b\":1}", "{\"b\":\"x\",\"d\":1}", "{\"c\":true,\"b\":\"x\"}",
             "{\"b\":\"x\",\"b\":\"y\"}", "{\"b\":\"x\",}"));
    /* additionalProperties false: the same; absent and false allow only the named keys */
    expect("{\"properties\":{\"k\":{}},\"additionalProperties\":false}", L("{}", "{\"k\":[1,{}]}"), L("{\"j\":1}"));
    /* an object without properties: a map (additionalProperties true / absent / a schema) */
    expect("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}", L("{}", "{\"x\":1,\"y\":2}"),
           L("{\"x\":\"1\"}"));
    expect("{\"type\":\"object\",\"additionalProperties\":false}", L("{}"), L("{\"x\":1}"));
    /* keys that are prefixes of each other, and keys that need escaping */
    expect("{\"properties\":{\"a\":{\"const\":1},\"ab\":{\"const\":2},\"q\\\"\\n\":{\"const\":3}}}",
           L("{\"a\":1}", "{\"ab\":2}", "{\"a\":1,\"ab\":2}", "{\"q\\\"\\n\":3}"), L("{\"ab\":1}", "{\"a\":2}"));
}

Test(grammar, arrays)
{
    expect("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":3}",
           L("[1]", "[1,2,3]", "[ 1 , 2 ]"), L("[]", "[1,2,3,4]", "[\"a\"]", "[1,]", "[,1]"));
    expect("{\"type\":\"array\",\"maxItems\":0}", L("[]", "[ ]"), L("[1]"));
    expect("{\"type\":\"array\"}", L("[]", "[1,\"a\",[],{}]"), L("[1"));
}

Test(grammar, strings)
{
    expect("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}",
           L("\"ab\"", "\"abc\"", "\"\\u00e9\\n\"", "\"\xc3\xa9\xc3\xa9\"", "\"\\ud83d\\ude00a\"", "\"\xf0\x9f\x98\x80\xf0\x9f\x98\x80\""),
           L("\"a\"", "\"abcd\"", "\"\xc3\xa9\"", "\"\\ud83d\\ude00\"", "\"\xc3\"", "\"a\nb\""));
}

Test(grammar, integers_and_numbers)
{
    expect("{\"type\":\"integer\",\"minimum\":-5,\"maximum\":120}",
           L("-5", "0", "7", "99", "120", "-1"), L("-6", "121", "1000", "00", "-0", "1.5", "1e2", "+1", "12a"));
    expect("{\"type\":\"integer\",\"minimum\":100}", L("100", "1234567890123456"), L("99", "-100", "12345678901234567"));
    expect("{\"type\":\"integer\",\"maximum\":-10}", L("-10", "-9999999999999999"), L("-9", "0", "10"));
    expect("{\"type\":\"number\"}", L("0", "-0", "-0.5", "1.25", "1e5", "2E-3", "1.5e+10", "1234567890123456.1234567890123456"),
           L("01", "1.", ".5", "1e", "1e1234", "12345678901234567", "0.12345678901234567", "--1", "NaN"));
    expect("{\"type\":\"number\",\"minimum\":0.5,\"maximum\":10}",
           L("1", "9.75", "10", "5.5"), L("0", "0.7", "10.5", "11", "-1", "1e1", "9.99e0"));
    expect("{\"type\":\"number\",\"minimum\":-3,\"maximum\":-1}", L("-3", "-2.5", "-1"), L("-0.5", "-3.5", "0"));
}

Test(grammar, enum_const_anyof_types)
{
    expect("{\"enum\":[\"red\",\"green\",1,12,null,{\"a\":[1]}]}", L("\"red\"", "\"green\"", "1", "12", "null", "{\"a\":[1]}"),
           L("\"blue\"", "2", "123", "\"re\"", "{\"a\": [1]}"));
    expect("{\"const\":\"x\"}", L("\"x\""), L("\"y\"", "\"xx\""));
    expect("{\"type\":\"string\",\"enum\":[\"a\",1]}", L("\"a\""), L("1"));
    expect("{\"type\":[\"string\",\"null\"],\"maxLength\":2}", L("\"ab\"", "null"), L("\"abc\"", "1"));
    expect("{\"type\":\"boolean\"}", L("true", "false"), L("null", "1"));
    expect("{\"anyOf\":[{\"type\":\"integer\",\"maximum\":5},{\"type\":\"string\",\"maxLength\":1}]}",
           L("5", "-7", "\"a\""), L("6", "\"ab\"", "true"));
    /* alternatives that agree on a prefix stay alive together until the bytes tell them apart */
    expect("{\"anyOf\":[{\"properties\":{\"name\":{\"const\":\"f\"},\"arguments\":{\"type\":\"integer\"}},"
           "\"required\":[\"name\",\"arguments\"]},{\"properties\":{\"name\":{\"const\":\"g\"},\"arguments\":"
           "{\"type\":\"string\"}},\"required\":[\"name\",\"arguments\"]}]}",
           L("{\"name\":\"f\",\"arguments\":3}", "{\"name\":\"g\",\"arguments\":\"3\"}"),
           L("{\"name\":\"f\",\"arguments\":\"3\"}", "{\"name\":\"g\",\"arguments\":3}", "{\"name\":\"h\",\"arguments\":3}"));
}

Test(grammar, refs_and_recursion)
{
    const char *tree = "{\"$ref\":\"#/$defs/node\",\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":"
                       "{\"type\":\"integer\"},\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"},"
                       "\"maxItems\":2}},\"required\":[\"v\"]}}}";
    expect(tree, L("{\"v\":1}", "{\"v\":1,\"kids\":[{\"v\":2},{\"v\":3,\"kids\":[]}]}"),
           L("{\"kids\":[]}", "{\"v\":1,\"kids\":[{}]}"));
    expect("{\"definitions\":{\"s\":{\"type\":\"string\"}},\"properties\":{\"x\":{\"$ref\":\"#/definitions/s\"}}}",
           L("{\"x\":\"a\"}", "{}"), L("{\"x\":1}"));
    sl_grammar *g = compile(tree);
    cr_expect_eq(sl_grammar_max_bytes(g), -1, "a recursive schema is unbounded");
    sl_grammar_free(g);
}

Test(grammar, prefix_and_suffix)
{
    sl_grammar *g = compile3("{\"properties\":{\"name\":{\"const\":\"f\"}},\"required\":[\"name\"]}", "<tool_call>\n",
                             "\n</tool_call>");
    const char *ok = "<tool_call>\n{\"name\":\"f\"}\n</tool_call>";
    cr_expect(sl_grammar_accepts(g, ok, strlen(ok)));
    cr_expect(!sl_grammar_accepts(g, ok, strlen(ok) - 1), "the suffix must be complete");
    cr_expect(!sl_grammar_accepts(g, ok + 1, strlen(ok) - 1), "the prefix must be complete");
    sl_gstate *s = sl_gstate_new(g);
    cr_assert(sl_gstate_feed(s, ok, strlen(ok)));
    cr_expect(sl_gstate_complete(s));
    cr_expect(!sl_gstate_feed(s, " ", 1), "nothing after the suffix");
    sl_gstate_free(s);
    sl_grammar_free(g);
}

Test(grammar, refused_keywords)
{
    static const char *const refused[] = { "pattern", "format", "oneOf", "allOf", "not", "if", "then", "else",
        "patternProperties", "propertyNames", "minProperties", "maxProperties", "dependentRequired", "uniqueItems",
        "contains", "prefixItems", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "unevaluatedProperties",
        "contentEncoding", "$anchor", "$dynamicRef", NULL };
    for (int i = 0; refused[i]; i++) {
        char schema[128], err[512] = "", want[128];
        snprintf(schema, sizeof schema, "{\"type\":\"object\",\"properties\":{\"a\":{\"%s\":1}}}", refused[i]);
        sl_grammar *g = NULL;
        cr_expect_eq(sl_grammar_compile(schema, strlen(schema), NULL, NULL, &g, err, sizeof err), -EINVAL, "%s", schema);
        snprintf(want, sizeof want, "unsupported JSON Schema keyword '%s' (supported: type,", refused[i]);
        cr_expect(strstr(err, want), "%s: %s", refused[i], err);
        cr_expect_null(g);
    }
    static const char *const bad[][2] = {
        { "{\"type\":\"object\",\"properties\":{\"a\":{}},\"additionalProperties\":true}", "'additionalProperties' other than false" },
        { "{\"items\":[{}]}", "'items' as an array" },
        { "{\"$ref\":\"#/$defs/x\"}", "names no definition" },
        { "{\"$ref\":\"http://x/y\"}", "is not supported (supported: #/$defs/NAME" },
        { "{\"type\":\"string\",\"minLength\":3,\"maxLength\":2}", "minLength > maxLength" },
        { "{\"type\":\"integer\",\"minimum\":2.2,\"maximum\":2.8}", "no integer in [minimum, maximum]" },
        { "{\"type\":\"strin\"}", "unknown type 'strin'" },
        { "{\"required\":[\"a\"],\"properties\":{\"b\":{}}}", "required property 'a' is not in 'properties'" },
        { "{\"anyOf\":[]}", "'anyOf' must be a non-empty array" },
        { "{\"type\":\"string\",\"anyOf\":[{}]}", "'type' beside 'anyOf'" },
        { "{\"enum\":[1],\"minimum\":0}", "'minimum' beside 'enum'" },
        { "{\"type\":\"string\",\"enum\":[1]}", "no value satisfies 'enum'" },
        { "false", "no value satisfies it" },
        { "[1]", "a schema must be an object or a boolean" },
        { "{\"minItems\":-1}", "'minItems' must be a non-negative integer" },
        { "{\"type\":\"object\"", "invalid JSON at byte" },
        { "{\"a\":1} x", "invalid JSON at byte 8: text after the value" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char err[512] = "";
        sl_grammar *g = NULL;
        cr_expect_eq(sl_grammar_compile(bad[i][0], strlen(bad[i][0]), NULL, NULL, &g, err, sizeof err), -EINVAL, "%s", bad[i][0]);
        cr_expect(strstr(err, bad[i][1]), "%s: got '%s', want '%s'", bad[i][0], err, bad[i][1]);
    }
    /* annotations are accepted and change nothing */
    expect("{\"title\":\"t\",\"description\":\"d\",\"$schema\":\"x\",\"default\":1,\"examples\":[1],\"type\":\"integer\"}",
           L("1"), L("\"1\""));
}

Test(grammar, bounds_make_answers_end)
{
    char text[64];
    /* whitespace: at most SL_GRAMMAR_WS_MAX bytes per gap */
    snprintf(text, sizeof text, "{%*s}", SL_GRAMMAR_WS_MAX, "");
    expect(NULL, L(text), NULL);
    snprintf(text, sizeof text, "{%*s}", SL_GRAMMAR_WS_MAX + 1, "");
    expect(NULL, NULL, L(text));
    /* digits */
    expect("{\"type\":\"integer\"}", L("9999999999999999", "-9999999999999999"), L("10000000000000000"));
    expect("{\"type\":\"number\"}", L("1.1234567890123456", "1e999"), L("1.12345678901234567", "1e1000"));
    /* with maxLength / maxItems everywhere the whole answer is bounded, and the bound holds */
    sl_grammar *g = compile("{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"maxLength\":4},"
                            "\"a\":{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"maxItems\":2}},\"required\":[\"s\",\"a\"]}");
    int64_t mb = sl_grammar_max_bytes(g);
    cr_expect_gt(mb, 40);
    cr_expect_lt(mb, 400);
    sl_grammar_free(g);
    g = compile("{\"type\":\"string\"}");
    cr_expect_eq(sl_grammar_max_bytes(g), -1);
    sl_grammar_free(g);
}

/* ---- random walks ---- */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A walk: each byte uniform among the allowed ones, ending (when complete) with probability 1/4
 * per step.  Returns the length; 0 if it hit the cap. */
static size_t walk(const sl_grammar *g, uint64_t *rng, char *out, size_t cap)
{
    sl_gstate *s = sl_gstate_new(g), *t = sl_gstate_new(g);
    size_t n = 0;
    for (;;) {
        bool complete = sl_gstate_complete(s);
        uint8_t ok[256];
        int k = 0;
        for (int c = 0; c < 256; c++)   /* one step each (g_state_step: what sl_gstate_feed does per byte) */
            if (g_state_step(s, t, (uint8_t)c)) ok[k++] = (uint8_t)c;
        cr_assert(k > 0 || complete, "a dead end after %zu bytes: %.*s", n, (int)n, out);
        if (complete && (k == 0 || rng_next(rng) % 4 == 0)) break;
        if (n + 1 >= cap) { n = 0; break; }
        out[n] = (char)ok[rng_next(rng) % (uint64_t)k];
        cr_assert(sl_gstate_feed(s, out + n, 1));
        n++;
    }
    sl_gstate_free(s);
    sl_gstate_free(t);
    return n;
}

Test(grammar, random_walks_validate, .timeout = 300)
{
    static const char *const schemas[] = {
        NULL,
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":6},\"age\":{\"type\":\"integer\","
        "\"minimum\":0,\"maximum\":150},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\",3]},\"maxItems\":3},"
        "\"ok\":{\"type\":\"boolean\"},\"x\":{\"type\":\"number\",\"minimum\":-2.5,\"maximum\":7}},\"required\":[\"name\",\"tags\"]}",
        "{\"anyOf\":[{\"type\":\"array\",\"items\":{\"type\":[\"integer\",\"null\"]},\"minItems\":2,\"maxItems\":4},"
        "{\"type\":\"string\",\"minLength\":3,\"maxLength\":5},{\"const\":{\"k\":[1,2]}}]}",
        "{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\",\"minimum\":10,\"maximum\":12},"
        "\"c\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/n\"},\"maxItems\":1}},\"required\":[\"v\"]}},\"$ref\":\"#/$defs/n\"}",
        "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\",\"maxLength\":2}}",
        "{\"type\":\"array\",\"items\":{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]},\"maxItems\":6}",
    };
    uint64_t rng = 42;
    char buf[8192];
    for (size_t i = 0; i < sizeof schemas / sizeof *schemas; i++) {
        sl_grammar *g = compile(schemas[i]);
        int64_t mb = sl_grammar_max_bytes(g);
        int done = 0;
        for (int r = 0; r < 200; r++) {
            size_t n = walk(g, &rng, buf, sizeof buf);
            if (!n) continue;   /* an unbounded string ran past the cap */
            done++;
            cr_expect(gt_check(schemas[i], buf, n), "schema %zu: invalid: %.*s", i, (int)n, buf);
            if (mb >= 0) cr_expect_leq((int64_t)n, mb, "longer than sl_grammar_max_bytes");
        }
        cr_expect_gt(done, 100, "schema %zu: %d walks ended", i, done);
        sl_grammar_free(g);
    }
}

Test(grammar, unsatisfiable_parts_are_never_entered)
{
    char err[256] = "";
    sl_grammar *g = NULL;
    const char *loop = "{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}";
    cr_expect_eq(sl_grammar_compile(loop, strlen(loop), NULL, NULL, &g, err, sizeof err), -EINVAL);
    cr_expect(strstr(err, "no value satisfies the schema"), "%s", err);
    const char *req = "{\"$defs\":{\"a\":{\"properties\":{\"x\":{\"$ref\":\"#/$defs/a\"}},\"required\":[\"x\"]}},\"$ref\":\"#/$defs/a\"}";
    cr_expect_eq(sl_grammar_compile(req, strlen(req), NULL, NULL, &g, err, sizeof err), -EINVAL, "an object that must contain itself");
    /* an optional property or alternative that nothing satisfies is simply never offered */
    expect("{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}},\"properties\":{\"x\":{\"$ref\":\"#/$defs/a\"},\"y\":{\"type\":\"integer\"}}}",
           L("{}", "{\"y\":1}"), L("{\"x\":1}"));
    expect("{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}},\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/a\"}}", L("[]"), L("[1]"));
    sl_grammar *g2 = compile("{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}},\"properties\":{\"y\":{\"type\":\"integer\"},\"x\":{\"$ref\":\"#/$defs/a\"}}}");
    sl_gstate *s = sl_gstate_new(g2);
    cr_assert(sl_gstate_feed(s, "{\"y\":1", 6));
    cr_expect(!sl_gstate_feed(s, ",", 1), "no comma where no key can follow");
    sl_gstate_free(s);
    sl_grammar_free(g2);
}

Test(grammar, tool_call_wrapped)
{
    /* the shape the tool-call code builds: one alternative per tool, between literal tags */
    const char *tools = "{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"get_weather\"},\"arguments\":"
                        "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}},"
                        "\"required\":[\"name\",\"arguments\"],\"additionalProperties\":false},{\"type\":\"object\",\"properties\":"
                        "{\"name\":{\"const\":\"get_time\"},\"arguments\":{\"type\":\"object\",\"properties\":{}}},"
                        "\"required\":[\"name\",\"arguments\"],\"additionalProperties\":false}]}";
    sl_grammar *g = compile3(tools, "<tool_call>\n", "\n</tool_call>");
    static const char *const good[] = {
        "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>", NULL };
    static const char *const badt[] = {
        "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{}}\n</tool_call>",
        "<tool_call>\n{\"name\":\"get_time\",\"arguments\":{\"city\":\"x\"}}\n</tool_call>",
        "<tool_call>\n{\"name\":\"other\",\"arguments\":{}}\n</tool_call>",
        "{\"name\":\"get_time\",\"arguments\":{}}", NULL };
    for (int i = 0; good[i]; i++) cr_expect(sl_grammar_accepts(g, good[i], strlen(good[i])), "%s", good[i]);
    for (int i = 0; badt[i]; i++) cr_expect(!sl_grammar_accepts(g, badt[i], strlen(badt[i])), "%s", badt[i]);
    sl_grammar_free(g);
}

/* Mutated schemas (bytes flipped, inserted, cut): each either compiles or is refused with a message;
 * a compiled one never leads a walk into a dead end (every state reached can be completed) and its
 * complete texts are JSON.  Run under ASan/UBSan too: the compiler and automaton take hostile input
 * (a server's request body). */
Test(grammar, mutated_schemas, .timeout = 300)
{
    static const char *const base[] = {
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":3},\"maxItems\":2},"
        "\"b\":{\"enum\":[1,\"x\",null]},\"c\":{\"anyOf\":[{\"type\":\"string\",\"maxLength\":2},{\"const\":true}]}},\"required\":[\"a\"]}",
        "{\"$defs\":{\"n\":{\"properties\":{\"k\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/n\"},\"maxItems\":1}}}},"
        "\"$ref\":\"#/$defs/n\"}",
        "{\"type\":[\"number\",\"string\",\"null\"],\"minimum\":-1.5,\"maximum\":2,\"minLength\":1,\"maxLength\":3}",
    };
    static const char ins[] = "{}[]\",:0-9aeE.\\ ";
    uint64_t rng = 99;
    int compiled = 0, refused = 0;
    char buf[1024], text[512];
    for (int it = 0; it < 3000; it++) {
        const char *b = base[it % 3];
        size_t n = strlen(b);
        memcpy(buf, b, n);
        for (int m = rng_next(&rng) % 4 ? 1 : 2; m > 0; m--) {
            size_t at = rng_next(&rng) % n;
            switch (rng_next(&rng) % 5) {
            case 3: { /* swap two bytes (keeps the JSON more often) */
                size_t at2 = rng_next(&rng) % n;
                char t = buf[at]; buf[at] = buf[at2]; buf[at2] = t;
                break;
            }
            case 4: if (buf[at] >= '0' && buf[at] <= '9') buf[at] = (char)('0' + rng_next(&rng) % 10); break;
            case 0: buf[at] = ins[rng_next(&rng) % (sizeof ins - 1)]; break;
            case 1: if (n < sizeof buf - 1) { memmove(buf + at + 1, buf + at, n - at); buf[at] = ins[rng_next(&rng) % (sizeof ins - 1)]; n++; } break;
            default: n = at + 1; break;
            }
        }
        sl_grammar *g = NULL;
        char err[256] = "";
        int rc = sl_grammar_compile(buf, n, NULL, NULL, &g, err, sizeof err);
        if (rc) { cr_assert_eq(rc, -EINVAL); cr_assert_gt(strlen(err), 10); refused++; continue; }
        compiled++;
        size_t len = walk(g, &rng, text, sizeof text);
        if (len) {
            jv *v = NULL;
            cr_assert_eq(jv_parse(text, len, &v, err, sizeof err), 0, "schema %.*s gave non-JSON %.*s", (int)n, buf, (int)len, text);
            jv_free(v);
        }
        sl_grammar_free(g);
    }
    printf("mutated schemas: %d compiled, %d refused\n", compiled, refused);
    cr_expect_gt(compiled, 100);
    cr_expect_gt(refused, 100);
}
