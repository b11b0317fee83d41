/* runtime/cli/common.c — argument parsing, default model lookup, JSON, process stats. */
#include "runtime/cli/cli.h"

#include "loader/pagecache.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

/* Messages quote strings from the model file (keys, tensor names, tokenizer names): control bytes
 * are escaped so a hostile file cannot write terminal escape sequences through an error line. */
void cli_err(const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fputs("sluice: ", stderr);
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
        if (*p < 0x20 || *p == 0x7f) fprintf(stderr, "\\x%02x", *p);
        else fputc(*p, stderr);
    }
    fputc('\n', stderr);
}

bool cli_val(int argc, char **argv, int *i, const char **out)
{
    if (*i + 1 >= argc) {
        cli_err("option %s needs a value", argv[*i]);
        return false;
    }
    *out = argv[++*i];
    return true;
}

bool cli_int(const char *flag, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        cli_err("%s: '%s' is not an integer in [%ld, %ld]", flag, s, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

bool cli_float(const char *flag, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi) {
        cli_err("%s: '%s' is not a number in [%g, %g]", flag, s, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

bool cli_size(const char *flag, const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v >= 0)) goto bad;
    double mul = 1;
    if (*end) {
        char u = (char)toupper((unsigned char)*end);
        const char *rest = end + 1;
        if (u == 'K') mul = 1024.0;
        else if (u == 'M') mul = 1024.0 * 1024;
        else if (u == 'G') mul = 1024.0 * 1024 * 1024;
        else if (u == 'T') mul = 1024.0 * 1024 * 1024 * 1024;
        else if (u == 'B' && !*rest) rest = end + 1;
        else goto bad;
        if (*rest && strcasecmp(rest, "iB") && strcasecmp(rest, "B")) goto bad;
    }
    v *= mul;
    if (v > 1e18) goto bad;
    *out = (uint64_t)v;
    return true;
bad:
    cli_err("%s: '%s' is not a size (examples: 96M, 1.5G, 2GiB, 1048576)", flag, s);
    return false;
}

/* The bundled model: $SLUICE_MODEL, then <exe>/../models, <exe>/../share/sluice, the source tree. */
const char *cli_default_model(void)
{
    static char path[PATH_MAX];
    const char *env = getenv("SLUICE_MODEL");
    if (env && *env) return env;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        const char *cands[] = { "/../models/stories260K.gguf", "/../share/sluice/stories260K.gguf",
                                "/models/stories260K.gguf" };
        for (size_t i = 0; i < sizeof cands / sizeof *cands; i++) {
            snprintf(path, sizeof path, "%s%s", exe, cands[i]);
            if (access(path, R_OK) == 0) return path;
        }
    }
#ifdef SL_SOURCE_DIR
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", SL_SOURCE_DIR);
    if (access(path, R_OK) == 0) return path;
#endif
    return "models/stories260K.gguf";
}

void json_str(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        switch (ch) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (ch < 0x20 || ch == 0x7f) fprintf(f, "\\u%04x", ch);
            else fputc(ch, f);
        }
    }
    fputc('"', f);
}

uint64_t peak_rss_bytes(void) { return sl_peak_rss(); }

