/* runtime/serve/webui.h — the web page of `sluice serve` (GET /): its files, compiled into the binary
 * (runtime/serve/webui/ turned into byte arrays by cmake/embed.cmake), and the plan as JSON
 * (GET /v1/plan) that the page draws.
 */
#ifndef SL_SERVE_WEBUI_H
#define SL_SERVE_WEBUI_H

#include <stddef.h>

#include "include/sluice.h"

typedef struct sl_embedded_file {
    const char *path;             /* "/index.html", "/app.js", ... (relative to runtime/serve/webui) */
    const unsigned char *data;    /* the bytes, then a 0 the length leaves out */
    size_t len;
} sl_embedded_file;

/* The generated table (cmake/embed.cmake). */
extern const sl_embedded_file sl_webui_files[];
extern const int sl_webui_n_files;

/* The page file a URL names ("/" is /index.html), with its Content-Type in *type; NULL: not a page file. */
const sl_embedded_file *webui_file(const char *url, const char **type);

/* Bytes of every page file together (what a browser loads for the page). */
size_t webui_total_bytes(void);

/* The model's plan as one JSON object, the very text `sluice plan --json` prints (sluice_plan_print),
 * malloc'd with its length in *len; NULL when out of memory. */
char *webui_plan_json(const sluice_model *M, size_t *len);

#endif
