/* tests/test_serve_webui_files.c — the web page's files as compiled in (cmake/embed.cmake) and the plan
 * JSON of GET /v1/plan (runtime/serve/webui.c).  The page itself is tested in a browser by
 * tests/serve/webui.mjs (ctest test_serve_webui).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/sluice.h"
#include "runtime/serve/webui.h"

#define WEBUI_DIR SL_SOURCE_DIR "/runtime/serve/webui"
#define STORIES SL_SOURCE_DIR "/models/stories260K.gguf"

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    cr_assert(b);
    cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    b[n] = 0;
    *len = (size_t)n;
    return b;
}

/* Every file of runtime/serve/webui/ is compiled in, byte for byte, with a Content-Type. */
Test(webui, every_file_embedded_byte_for_byte)
{
    DIR *d = opendir(WEBUI_DIR);
    cr_assert(d);
    int n_files = 0;
    size_t total = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[1024], url[300];
        snprintf(path, sizeof path, "%s/%s", WEBUI_DIR, e->d_name);
        snprintf(url, sizeof url, "/%s", e->d_name);
        const char *type = NULL;
        const sl_embedded_file *f = webui_file(url, &type);
        cr_assert(f, "%s is in runtime/serve/webui but not compiled in", e->d_name);
        size_t len;
        char *want = read_all(path, &len);
        cr_assert_eq(f->len, len, "%s: %zu bytes compiled in, %zu in the file", e->d_name, f->len, len);
        cr_assert(!memcmp(f->data, want, len), "%s: the compiled-in bytes differ from the file's", e->d_name);
        cr_assert_eq(f->data[len], 0, "%s: no terminating 0", e->d_name);
        cr_assert(strncmp(type, "application/octet-stream", 24), "%s: no Content-Type for it", e->d_name);
        free(want);
        n_files++;
        total += len;
    }
    closedir(d);
    cr_assert_eq(n_files, sl_webui_n_files, "%d files in the folder, %d compiled in", n_files, sl_webui_n_files);
    cr_assert_eq(total, webui_total_bytes());
    cr_assert_lt(total, 60 * 1024, "the page is %zu bytes: the goal is under 60 KB", total);
}

Test(webui, urls)
{
    const char *type = NULL;
    const sl_embedded_file *root = webui_file("/", &type);
    cr_assert(root && root == webui_file("/index.html", NULL));
    cr_assert_str_eq(type, "text/html; charset=utf-8");
    cr_assert(webui_file("/app.js", &type));
    cr_assert_str_eq(type, "text/javascript; charset=utf-8");
    cr_assert(webui_file("/style.css", &type));
    cr_assert_str_eq(type, "text/css; charset=utf-8");
    /* nothing else: no path walking, no prefix matches, no other spelling */
    const char *no[] = { "", "/../CMakeLists.txt", "/app.js/", "/app", "//app.js", "/APP.JS", "/index.htm", "/v1/plan",
                         "app.js", "/webui/app.js" };
    for (size_t i = 0; i < sizeof no / sizeof *no; i++) cr_assert_null(webui_file(no[i], NULL), "'%s' was served", no[i]);
    cr_assert_null(webui_file(NULL, NULL));
}

/* GET /v1/plan's body is sluice_plan_print's JSON for the served model, whole. */
Test(webui, plan_json_is_sluice_plan_print)
{
    sluice_params p;
    sluice_params_default(&p);
    p.ram_budget = 9u << 20;
    p.n_ctx = 1024;
    p.n_threads = 1;
    p.disk_bw = 1.8;
    p.compute_bw = 2.0;
    sluice_model *m = NULL;
    char err[256];
    cr_assert_eq(sluice_open(STORIES, &p, &m, err, sizeof err), 0, "%s", err);
    size_t len = 0;
    char *got = webui_plan_json(m, &len);
    cr_assert(got && len > 0);
    cr_assert_eq(strlen(got), len);
    char *want = NULL;
    size_t wlen = 0;
    FILE *f = open_memstream(&want, &wlen);
    sluice_plan_print(m, f, true);
    fclose(f);
    cr_assert_str_eq(got, want);
    cr_assert(strstr(got, "\"budget\":9437184,"), "not the plan of this model: %s", got);
    cr_assert(strstr(got, "\"mode\":\"streaming\""), "a 9 MiB budget at -c 1024 streams: %s", got);
    free(got);
    free(want);
    sluice_close(m);
}
