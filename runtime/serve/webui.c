/* runtime/serve/webui.c — what `sluice serve` answers for its web page: the page's files (compiled in
 * from runtime/serve/webui/ by cmake/embed.cmake) and the plan as JSON for GET /v1/plan.  The routing,
 * the headers and the API key are http.c's.
 */
#include "runtime/serve/webui.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Content-Type by the file's extension (the page has only these kinds). */
static const char *type_of(const char *path)
{
    static const struct { const char *ext, *type; } types[] = {
        { ".html", "text/html; charset=utf-8" }, { ".js", "text/javascript; charset=utf-8" },
        { ".css", "text/css; charset=utf-8" }, { ".svg", "image/svg+xml" },
    };
    const char *dot = strrchr(path, '.');
    for (size_t i = 0; dot && i < sizeof types / sizeof *types; i++)
        if (!strcmp(dot, types[i].ext)) return types[i].type;
    return "application/octet-stream";
}

const sl_embedded_file *webui_file(const char *url, const char **type)
{
    if (!url) return NULL;
    if (!strcmp(url, "/")) url = "/index.html";
    for (int i = 0; i < sl_webui_n_files; i++)
        if (!strcmp(url, sl_webui_files[i].path)) {
            if (type) *type = type_of(url);
            return &sl_webui_files[i];
        }
    return NULL;
}

size_t webui_total_bytes(void)
{
    size_t n = 0;
    for (int i = 0; i < sl_webui_n_files; i++) n += sl_webui_files[i].len;
    return n;
}

char *webui_plan_json(const sluice_model *M, size_t *len)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return NULL;
    sluice_plan_print(M, f, true);   /* the one serializer `sluice plan --json` uses */
    if (fclose(f)) { free(buf); return NULL; }
    *len = n;
    return buf;
}
