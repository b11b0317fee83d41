/* runtime/cli/inspect.c — `sluice inspect MODEL` and `sluice tokenize`. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/types.h"
#include "runtime/cli/cli.h"
#include "runtime/engine/model.h"
#include "runtime/text/tokenizer.h"

static double mib(uint64_t b) { return b / 1048576.0; }

/* Totals per tensor type. */
typedef struct type_total { uint64_t bytes; int count; } type_total;

static void print_text(const sl_model *m, const sl_vocab *v, bool tensors)
{
    const sl_config *c = &m->cfg;
    const sl_gguf *g = m->gguf;
    sl_str name = { "", 0 };
    sl_gguf_get_str(g, "general.name", &name);
    printf("model        %s\n", m->path);
    printf("name         %.*s\n", (int)(name.len > 80 ? 80 : name.len), name.ptr);
    printf("format       GGUF v%u, %" PRId64 " tensors, %" PRId64 " metadata keys, alignment %u\n",
           sl_gguf_version(g), sl_gguf_n_tensors(g), sl_gguf_n_kv(g), sl_gguf_alignment(g));
    printf("architecture llama: dim %d, %d blocks, %d heads / %d kv heads (head_dim %d), ffn %d, vocab %d\n",
           c->dim, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim, c->ffn_dim, c->vocab);
    printf("             rope base %g, rope dims %d, rms eps %g, trained context %d, output %s\n",
           c->rope_base, c->rope_dim, c->rms_eps, c->ctx_train, m->tied ? "tied to token_embd" : "output.weight");
    if (v)
        printf("tokenizer    %s (pre-tokenizer %s), %d tokens, bos %d eos %d, %.2f MiB in memory\n",
               sl_vocab_family(v), sl_vocab_pre(v), sl_vocab_n_tokens(v), sl_vocab_bos(v), sl_vocab_eos(v),
               mib(sl_vocab_mem_bytes(v)));
    uint64_t blk = c->n_layers ? sl_layer_bytes(m, 0) : 0, blk_max = 0;
    for (int l = 0; l < c->n_layers; l++) if (sl_layer_bytes(m, l) > blk_max) blk_max = sl_layer_bytes(m, l);
    printf("sizes        block 0 %.2f MiB (largest block %.2f MiB), token_embd %.2f MiB (%.1f KiB per row), "
           "LM head %.2f MiB%s\n", mib(blk), mib(blk_max), mib(m->tok_embd.nbytes), m->tok_embd.row_bytes / 1024.0,
           mib(m->output.nbytes), m->tied ? " (same tensor)" : "");
    printf("             KV cache f16: %.2f MiB per 1024 positions\n",
           mib(2ull * c->n_layers * 1024 * c->n_kv_heads * c->head_dim * 2));
    type_total tt[SL_TYPE_COUNT] = { { 0, 0 } };
    if (tensors) printf("\n%-32s %-6s %-22s %10s\n", "tensor", "type", "shape", "MiB");
    for (int64_t i = 0; i < sl_gguf_n_tensors(g); i++) {
        const sl_gguf_tensor *t = sl_gguf_tensor_at(g, i);
        tt[t->type].bytes += t->nbytes;
        tt[t->type].count++;
        if (!tensors) continue;
        char shape[64];
        int n = snprintf(shape, sizeof shape, "%" PRId64, t->ne[0]);
        for (int d = 1; d < t->n_dims && n < (int)sizeof shape; d++)
            n += snprintf(shape + n, sizeof shape - (size_t)n, " x %" PRId64, t->ne[d]);
        printf("%-32.*s %-6s %-22s %10.3f\n", (int)t->name.len, t->name.ptr, sl_type_name(t->type), shape, mib(t->nbytes));
    }
    printf("\ntotals by type:\n");
    for (int t = 0; t < SL_TYPE_COUNT; t++)
        if (tt[t].count) printf("  %-6s %4d tensors %12.2f MiB\n", sl_type_name(t), tt[t].count, mib(tt[t].bytes));
    printf("  weights %.2f MiB, file %.2f MiB (%" PRIu64 " bytes)\n", mib(m->weight_bytes), mib(sl_gguf_file_size(g)),
           sl_gguf_file_size(g));
}

static void print_json(const sl_model *m, const sl_vocab *v)
{
    const sl_config *c = &m->cfg;
    const sl_gguf *g = m->gguf;
    printf("{\"path\":");
    json_str(stdout, m->path, strlen(m->path));
    printf(",\"gguf_version\":%u,\"file_bytes\":%" PRIu64 ",\"weight_bytes\":%" PRIu64 ",\"arch\":\"llama\","
           "\"dim\":%d,\"n_layers\":%d,\"n_heads\":%d,\"n_kv_heads\":%d,\"head_dim\":%d,\"ffn_dim\":%d,\"vocab\":%d,"
           "\"ctx_train\":%d,\"rope_base\":%g,\"rope_dim\":%d,\"rms_eps\":%g,\"tied_output\":%s",
           sl_gguf_version(g), sl_gguf_file_size(g), m->weight_bytes, c->dim, c->n_layers, c->n_heads, c->n_kv_heads,
           c->head_dim, c->ffn_dim, c->vocab, c->ctx_train, c->rope_base, c->rope_dim, c->rms_eps,
           m->tied ? "true" : "false");
    if (v)
        printf(",\"tokenizer\":{\"family\":\"%s\",\"pre\":\"%s\",\"n_tokens\":%d,\"bos\":%d,\"eos\":%d,\"mem_bytes\":%zu}",
               sl_vocab_family(v), sl_vocab_pre(v), sl_vocab_n_tokens(v), sl_vocab_bos(v), sl_vocab_eos(v),
               sl_vocab_mem_bytes(v));
    printf(",\"block_bytes\":[");
    for (int l = 0; l < c->n_layers; l++) printf("%s%" PRIu64, l ? "," : "", sl_layer_bytes(m, l));
    printf("],\"tensors\":[");
    for (int64_t i = 0; i < sl_gguf_n_tensors(g); i++) {
        const sl_gguf_tensor *t = sl_gguf_tensor_at(g, i);
        printf("%s{\"name\":", i ? "," : "");
        json_str(stdout, t->name.ptr, t->name.len);
        printf(",\"type\":\"%s\",\"shape\":[", sl_type_name(t->type));
        for (int d = 0; d < t->n_dims; d++) printf("%s%" PRId64, d ? "," : "", t->ne[d]);
        printf("],\"offset\":%" PRIu64 ",\"bytes\":%" PRIu64 "}", t->offset, t->nbytes);
    }
    printf("]}\n");
}

int cmd_inspect(int argc, char **argv)
{
    const char *path = NULL;
    bool json = false, tensors = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = true;
        else if (!strcmp(argv[i], "--no-tensors")) tensors = false;
        else if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) { if (!cli_val(argc, argv, &i, &path)) return 2; }
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: sluice inspect [MODEL | -m MODEL] [--json] [--no-tensors]\n");
            return 0;
        } else if (argv[i][0] == '-') { cli_err("inspect: unknown option '%s'", argv[i]); return 2; }
        else path = argv[i];
    }
    if (!path) path = cli_default_model();
    char err[SL_ERRLEN];
    sl_model *m;
    if (sl_model_open(path, &m, err, sizeof err)) { cli_err("%s", err); return 1; }
    sl_vocab *v = NULL;
    if (sl_vocab_load(m->gguf, &v, err, sizeof err)) fprintf(stderr, "sluice: warning: %s\n", err);
    if (json) print_json(m, v);
    else print_text(m, v, tensors);
    sl_vocab_free(v);
    sl_model_free(m);
    return 0;
}

int cmd_tokenize(int argc, char **argv)
{
    const char *path = NULL, *text = NULL;
    bool ids_only = false, special = false, no_bos = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ids")) ids_only = true;
        else if (!strcmp(argv[i], "--special")) special = true;
        else if (!strcmp(argv[i], "--no-bos")) no_bos = true;
        else if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) { if (!cli_val(argc, argv, &i, &path)) return 2; }
        else if (!strcmp(argv[i], "-p") || !strcmp(argv[i], "--prompt")) { if (!cli_val(argc, argv, &i, &text)) return 2; }
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: sluice tokenize [-m MODEL] [--ids] [--special] [--no-bos] TEXT\n"
                   "  MODEL may be any GGUF with tokenizer metadata (a vocab-only file works).\n");
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1]) { cli_err("tokenize: unknown option '%s'", argv[i]); return 2; }
        else text = argv[i];
    }
    if (!text) { cli_err("tokenize: no text given"); return 2; }
    if (!path) path = cli_default_model();
    char err[SL_ERRLEN];
    sl_gguf *g;
    if (sl_gguf_open(path, &g, err, sizeof err)) { cli_err("%s", err); return 1; }
    sl_vocab *v;
    if (sl_vocab_load(g, &v, err, sizeof err)) { cli_err("%s: %s", path, err); sl_gguf_close(g); return 1; }
    size_t len = strlen(text);
    int64_t n = sl_tokenize(v, text, len, !no_bos, special, NULL, 0);
    int32_t *ids = n > 0 ? malloc((size_t)n * sizeof *ids) : NULL;
    if (n < 0 || (n > 0 && !ids)) { cli_err("tokenize failed"); free(ids); sl_vocab_free(v); sl_gguf_close(g); return 1; }
    sl_tokenize(v, text, len, !no_bos, special, ids, n);
    if (ids_only) {
        printf("[");
        for (int64_t i = 0; i < n; i++) printf("%s%d", i ? ", " : "", ids[i]);
        printf("]\n");
    } else {
        for (int64_t i = 0; i < n; i++) {
            size_t tl;
            const char *t = sl_vocab_text(v, ids[i], &tl);
            printf("%6d -> '%.*s'\n", ids[i], (int)tl, t);
        }
    }
    free(ids);
    sl_vocab_free(v);
    sl_gguf_close(g);
    return 0;
}
