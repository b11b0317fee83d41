/* runtime/cli/common.c — argument parsing, default model lookup, JSON, process stats. */
#include "runtime/cli/cli.h"

#include "loader/pagecache.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
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

/* Length of the complete, valid UTF-8 sequence at s[0..n) (1-4), or 0 when there is none. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    size_t len = s[0] < 0x80 ? 1 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : s[0] >= 0xe0 && s[0] < 0xf0 ? 3
               : s[0] >= 0xf0 && s[0] < 0xf5 ? 4 : 0;
    if (!len || len > n) return 0;
    for (size_t i = 1; i < len; i++) if ((s[i] & 0xc0) != 0x80) return 0;
    if (len == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0))) return 0;   /* overlong, surrogate */
    if (len == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))) return 0;   /* overlong, > U+10FFFF */
    return len;
}

bool cli_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0, l; i < n; i += l)
        if (!(l = utf8_seq(p + i, n - i))) return false;
    return true;
}

/* Bytes that are not part of a complete UTF-8 character (a token may end inside one) are written as
 * \u00XX, so the output is valid JSON whatever the model produces. */
void json_str(FILE *f, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned char ch = p[i];
        size_t l = ch >= 0x80 ? utf8_seq(p + i, n - i) : 1;
        if (ch >= 0x80 && l) { fwrite(p + i, 1, l, f); i += l; continue; }
        switch (ch) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (ch < 0x20 || ch >= 0x7f) fprintf(f, "\\u%04x", ch);
            else fputc(ch, f);
        }
        i++;
    }
    fputc('"', f);
}

void cli_print_escaped(FILE *f, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t l = p[i] >= 0x80 ? utf8_seq(p + i, n - i) : 1;
        if (p[i] >= 0x80 && l) { fwrite(p + i, 1, l, f); i += l; continue; }
        if (p[i] < 0x20 || p[i] >= 0x7f) fprintf(f, "\\x%02x", p[i]);
        else fputc(p[i], f);
        i++;
    }
}

void cli_std_fds(void)
{
    /* stdin reads nothing; stdout and stderr are opened read-only, so a write to them fails (and is
     * reported) instead of vanishing */
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        int nfd = open("/dev/null", O_RDONLY);
        if (nfd < 0) _exit(127);   /* nothing sane can run without descriptors 0-2 */
        if (nfd != fd) { dup2(nfd, fd); close(nfd); }
    }
}

uint64_t peak_rss_bytes(void) { return sl_peak_rss(); }


/* llama.cpp's general.file_type numbers and the names it prints for them. */
const char *cli_file_type_name(uint32_t ft)
{
    static const struct { uint32_t id; const char *name; } names[] = {
        { 0, "all F32" }, { 1, "F16" }, { 2, "Q4_0" }, { 3, "Q4_1" }, { 7, "Q8_0" }, { 8, "Q5_0" }, { 9, "Q5_1" },
        { 10, "Q2_K - Medium" }, { 11, "Q3_K - Small" }, { 12, "Q3_K - Medium" }, { 13, "Q3_K - Large" },
        { 14, "Q4_K - Small" }, { 15, "Q4_K - Medium" }, { 16, "Q5_K - Small" }, { 17, "Q5_K - Medium" },
        { 18, "Q6_K" }, { 19, "IQ2_XXS - 2.0625 bpw" }, { 20, "IQ2_XS - 2.3125 bpw" }, { 21, "Q2_K - Small" },
        { 22, "IQ3_XS - 3.3 bpw" }, { 23, "IQ3_XXS - 3.0625 bpw" }, { 24, "IQ1_S - 1.5625 bpw" },
        { 25, "IQ4_NL - 4.5 bpw" }, { 26, "IQ3_S - 3.4375 bpw" }, { 27, "IQ3_S mix - 3.66 bpw" },
        { 28, "IQ2_S - 2.5 bpw" }, { 29, "IQ2_M - 2.7 bpw" }, { 30, "IQ4_XS - 4.25 bpw" }, { 31, "IQ1_M - 1.75 bpw" },
        { 32, "BF16" }, { 36, "TQ1_0 - 1.69 bpw ternary" }, { 37, "TQ2_0 - 2.06 bpw ternary" }, { 38, "MXFP4 MoE" },
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) if (names[i].id == ft) return names[i].name;
    return NULL;
}

