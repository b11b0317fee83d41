/* tests/test_grammar_cli.c — `sluice run --json-schema FILE` and `--json-object` end to end: the
 * printed answer (stdout, after the prompt) parses and validates (grammar_testutil.h), sampled at
 * temperature 1 with several seeds; a schema with an unsupported keyword is refused before the model
 * opens (exit 2, the keyword named); both options at once are bad usage. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "grammar_testutil.h"

#define SLUICE_BIN SL_BINARY_DIR "/sluice"
#define MODEL SL_SHARED_DIR "/models/mini-llama3.Q8_0.gguf"

/* Run cmd; its stdout into out (NUL-terminated), exit status returned. */
static int run(const char *cmd, char *out, size_t cap)
{
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char dir[64];
static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/sluice-grammar-cli.XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}
static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}
TestSuite(grammar_cli, .init = setup, .fini = teardown, .timeout = 300);

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

Test(grammar_cli, json_schema_answers_validate)
{
    const char *schema = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":8},\"n\":"
                         "{\"type\":\"integer\",\"minimum\":1,\"maximum\":9},\"xs\":{\"type\":\"array\",\"items\":"
                         "{\"type\":\"boolean\"},\"maxItems\":2}},\"required\":[\"name\",\"n\"]}";
    char path[128], cmd[512], out[16384];
    snprintf(path, sizeof path, "%s/s.json", dir);
    write_file(path, schema);
    /* stdout holds the answer alone (the prompt is not echoed) */
    for (int seed = 1; seed <= 8; seed++) {
        snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p 'Once upon a time' --json-schema '%s' -n 600 --temp 1 --top-k 0 "
                 "--top-p 1 --min-p 0 --seed %d -q 2>/dev/null", SLUICE_BIN, MODEL, path, seed);
        cr_assert_eq(run(cmd, out, sizeof out), 0, "%s", cmd);
        const char *ans = out;
        size_t n = strlen(ans);
        while (n && ans[n - 1] == '\n') n--;   /* the run's closing newline */
        cr_assert(gt_check(schema, ans, n), "seed %d: invalid: [%.*s]", seed, (int)n, ans);
    }
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p 'Once upon a time' --json-object -n 600 --temp 0 -q 2>/dev/null",
             SLUICE_BIN, MODEL);
    cr_assert_eq(run(cmd, out, sizeof out), 0);
    cr_assert_eq(out[0], '{', "%s", out);
}

Test(grammar_cli, refused_schema_and_usage)
{
    char path[128], cmd[512], out[4096];
    snprintf(path, sizeof path, "%s/bad.json", dir);
    write_file(path, "{\"type\":\"string\",\"pattern\":\"a+\"}");
    snprintf(cmd, sizeof cmd, "'%s' run -m /nonexistent.gguf -p x --json-schema '%s' 2>&1", SLUICE_BIN, path);
    cr_expect_eq(run(cmd, out, sizeof out), 2, "%s", out);
    cr_expect_not_null(strstr(out, "unsupported JSON Schema keyword 'pattern' (supported: "), "%s", out);
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p x --json-schema '%s' --json-object 2>&1", SLUICE_BIN, MODEL, path);
    cr_expect_eq(run(cmd, out, sizeof out), 2, "%s", out);
    cr_expect_not_null(strstr(out, "not both"), "%s", out);
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p x --json-object --ignore-eos 2>&1", SLUICE_BIN, MODEL);
    cr_expect_eq(run(cmd, out, sizeof out), 2, "%s", out);
    cr_expect_not_null(strstr(out, "--ignore-eos with --json-object"), "%s", out);
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p x --json-schema '%s/none.json' 2>&1", SLUICE_BIN, MODEL, dir);
    cr_expect_eq(run(cmd, out, sizeof out), 2, "%s", out);
    cr_expect_not_null(strstr(out, "No such file"), "%s", out);
}
