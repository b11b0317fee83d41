/* bench/bench_tokenizer.c — vocabulary load time/memory and tokenize/detokenize throughput.
 *
 * Usage: bench_tokenizer [vocab.gguf ...]
 * Default: the Llama 3 (BPE, 128k) and Llama 2 (SPM, 32k) vocabularies from ../shared/vocab.
 * Text: ~1 MB of generated English-like text (words, punctuation, digits, whitespace runs),
 * the same for every vocabulary; each measurement is the best of 3 runs, in thread CPU time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loader/gguf.h"
#include "runtime/text/tokenizer.h"

/* CPU time of this thread: the machine is shared, and wall time would measure the neighbours. */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rs = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void)
{
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (uint32_t)(rs >> 17);
}

/* English-like text: frequent words, capitalised sentence starts, punctuation, numbers, newlines. */
static size_t gen_text(char *buf, size_t cap)
{
    static const char *const w[] = { "the", "of", "and", "to", "in", "a", "is", "that", "for", "it",
        "as", "was", "with", "be", "by", "on", "not", "he", "I", "this", "are", "or", "his", "from",
        "at", "which", "but", "have", "an", "had", "they", "you", "were", "their", "one", "all", "we",
        "can", "her", "has", "there", "been", "if", "more", "when", "will", "would", "who", "so", "no",
        "little", "girl", "named", "Lily", "park", "happy", "together", "suddenly", "beautiful",
        "understanding", "information", "government", "development", "don't", "it's", "they'll" };
    size_t n = 0;
    int sentence = 0;
    while (n + 64 < cap) {
        const char *x = w[rnd() % (sizeof w / sizeof w[0])];
        size_t l = strlen(x);
        memcpy(buf + n, x, l);
        if (sentence == 0 && buf[n] >= 'a' && buf[n] <= 'z') buf[n] -= 32;
        n += l;
        sentence++;
        unsigned k = rnd() % 100;
        if (k < 6) { n += (size_t)sprintf(buf + n, " %u", rnd() % 2025); }
        if (sentence > 8 && k < 15) {
            const char *end = k < 10 ? ". " : k < 12 ? "! " : k < 13 ? "? " : ".\n\n";
            memcpy(buf + n, end, strlen(end));
            n += strlen(end);
            sentence = 0;
        } else if (k < 22) {
            memcpy(buf + n, ", ", 2);
            n += 2;
        } else buf[n++] = ' ';
    }
    return n;
}

static int bench(const char *path, const char *text, size_t n)
{
    char err[256];
    sl_gguf *g = NULL;
    if (sl_gguf_open(path, &g, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
    double best_load = 1e9;
    sl_vocab *v = NULL;
    for (int r = 0; r < 3; r++) {
        sl_vocab_free(v);
        double t0 = now();
        if (sl_vocab_load(g, &v, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
        double t = now() - t0;
        if (t < best_load) best_load = t;
    }
    int32_t *ids = malloc(sizeof(int32_t) * (n + 16));
    char *back = malloc(2 * n + 16);
    double best_tok = 1e9, best_detok = 1e9;
    int64_t nt = 0, nd = 0;
    for (int r = 0; r < 3; r++) {
        double t0 = now();
        nt = sl_tokenize(v, text, n, false, false, ids, (int64_t)n + 16);
        double t1 = now();
        nd = sl_detokenize(v, ids, nt, back, 2 * n + 16);
        double t2 = now();
        if (t1 - t0 < best_tok) best_tok = t1 - t0;
        if (t2 - t1 < best_detok) best_detok = t2 - t1;
    }
    printf("%-48s %-5s n_tokens=%-6d load %7.1f ms  heap %6.2f MB | tokenize %.2f MB in %.3f s = %6.2f MB/s "
           "(%lld ids) | detokenize %.1f MB/s (%s)\n",
           strrchr(path, '/') ? strrchr(path, '/') + 1 : path, sl_vocab_family(v), sl_vocab_n_tokens(v),
           1e3 * best_load, sl_vocab_mem_bytes(v) / 1e6, n / 1e6, best_tok, n / 1e6 / best_tok,
           (long long)nt, n / 1e6 / best_detok,
           (nd == (int64_t)n && memcmp(back, text, n) == 0) ? "round trip exact" : "round trip differs");
    free(ids);
    free(back);
    sl_vocab_free(v);
    sl_gguf_close(g);
    return 0;
}

/* ../shared next to the source tree: bench targets get no compile definitions, but __FILE__ is
 * the absolute path CMake compiled (".../bench/bench_tokenizer.c"). */
static void shared_path(char *out, size_t cap, const char *rel)
{
    const char *f = __FILE__;
    const char *cut = strstr(f, "bench/bench_tokenizer.c");
    int dl = cut ? (int)(cut - f) : 0;
    snprintf(out, cap, "%.*s../shared/%s", dl, f, rel);
}

int main(int argc, char **argv)
{
    size_t cap = 1u << 20;
    char *text = malloc(cap);
    size_t n = gen_text(text, cap);
    int rc = 0;
    if (argc > 1) {
        for (int i = 1; i < argc; i++) rc |= bench(argv[i], text, n);
    } else {
        char p[1024];
        shared_path(p, sizeof p, "vocab/ggml-vocab-llama-bpe.rebuilt.gguf");
        rc |= bench(p, text, n);
        shared_path(p, sizeof p, "vocab/ggml-vocab-llama-spm.gguf");
        rc |= bench(p, text, n);
    }
    free(text);
    return rc;
}
