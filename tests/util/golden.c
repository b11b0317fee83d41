/* tests/util/golden.c — parse llref output files. */
#include "util/golden.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *shared_path(const char *fmt, ...)
{
    static char buf[1024];
    char rel[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof rel, fmt, ap);
    va_end(ap);
    snprintf(buf, sizeof buf, "%s/%s", SL_SHARED_DIR, rel);
    return buf;
}

int file_exists(const char *path) { return access(path, R_OK) == 0; }

/* Skip a C-escaped quoted piece: p points at the opening quote; returns the char after the close. */
static const char *skip_quoted(const char *p)
{
    if (*p != '"') return p;
    for (p++; *p && *p != '"'; p++)
        if (*p == '\\' && p[1]) p++;
    return *p ? p + 1 : p;
}

int golden_read_txt(const char *path, golden_run *r)
{
    FILE *f = fopen(path, "r");
    if (!f) { fprintf(stderr, "golden: cannot open %s\n", path); return -1; }
    memset(r, 0, sizeof *r);
    char line[8192];
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "# llref gen:", 12)) {
            const char *v = strstr(line, "n_vocab=");
            if (v) r->n_vocab = atoi(v + 8);
        } else if (!strncmp(line, "# prompt_tokens", 15)) {
            char *p = strchr(line, ':');
            if (!p) continue;
            p++;
            char *end;
            for (long v; (v = strtol(p, &end, 10)), end != p; p = end) {
                if (r->n_prompt < 256) r->prompt[r->n_prompt++] = (int32_t)v;
            }
        } else if (line[0] >= '0' && line[0] <= '9') {
            if (r->n_steps >= 128) break;
            golden_step *s = &r->steps[r->n_steps];
            char *p = line, *end;
            strtol(p, &end, 10);                 /* step index */
            p = end;
            s->token = (int32_t)strtol(p, &end, 10);
            p = end;
            while (*p == '\t' || *p == ' ') p++;
            p = (char *)skip_quoted(p);
            for (int k = 0; k < 5; k++) {
                s->top_id[k] = (int32_t)strtol(p, &end, 10);
                if (*end != ':') break;
                p = end + 1;
                s->top_logit[k] = strtof(p, &end);
                p = end;
            }
            r->n_steps++;
        }
    }
    fclose(f);
    if (r->n_prompt == 0 || r->n_steps == 0) { fprintf(stderr, "golden: %s: no prompt or steps\n", path); return -1; }
    return 0;
}

long golden_read_f32(const char *path, float **out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f) / 4;
    fseek(f, 0, SEEK_SET);
    float *buf = malloc((size_t)(n ? n : 1) * 4);
    if (!buf || fread(buf, 4, (size_t)n, f) != (size_t)n) { free(buf); fclose(f); return -1; }
    fclose(f);
    *out = buf;
    return n;
}
