/* runtime/cli/inspect.c — `sluice inspect MODEL` and `sluice tokenize`.
 *
 * inspect reads any well-formed GGUF, also one sluice cannot run (another architecture, a weight
 * type without kernels, a vocabulary-only file): it shows what is in it, then one line saying why
 * sluice cannot run it.  Strings from the file are printed with control bytes escaped. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/types.h"
#include "runtime/cli/cli.h"
#include "runtime/cli/options.h"
#include "runtime/engine/model.h"
#include "runtime/text/tokenizer.h"

static double mib(uint64_t b) { return b / 1048576.0; }

/* A name from the file, escaped, left-aligned in a column of `width`. */
static void print_name_col(sl_str name, int width)
{
    char buf[512];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    if (!f) return;
    cli_print_escaped(f, name.ptr, name.len > 200 ? 200 : name.len);
    long n = ftell(f);
    fclose(f);
    if (n < 0) n = 0;
    if (n >= (long)sizeof buf) n = sizeof buf - 1;
    buf[n] = 0;
    printf("%-*s", width, buf);
}

/* Totals per tensor type. */
typedef struct type_total { uint64_t bytes; int count; } type_total;

/* What inspect found: the file, and the model when sluice can run it. */
typedef struct inspected {
    const char *path;
    sl_gguf *g;
    sl_model *m;          /* NULL: sluice cannot run the file (why in err) */
    sl_vocab *v;          /* NULL: no (usable) tokenizer metadata */
    char err[SL_ERRLEN];
    bool tensors, kv, json;
} inspected;

static void str_or(const sl_gguf *g, const char *key, sl_str *out) { if (!sl_gguf_get_str(g, key, out)) *out = (sl_str){ "", 0 }; }

static void print_file_type(const sl_gguf *g, bool json)
{
    uint32_t ft;
    if (!sl_gguf_get_u32(g, "general.file_type", &ft)) return;
    const char *n = cli_file_type_name(ft);
    if (json) { printf(",\"file_type\":"); if (n) json_str(stdout, n, strlen(n)); else printf("\"%u\"", ft); }
    else if (n) printf("file type    %s\n", n);
    else printf("file type    %u (a number sluice has no name for)\n", ft);
}

/* Parameters of the model (every tensor's elements) and those one token uses: all of them but the
 * routed experts its router does not pick (expert_count - expert_used_count per MoE block). */
static void count_params(const sl_model *m, double *total, double *active)
{
    const sl_gguf *g = m->gguf;
    *total = 0;
    for (int64_t i = 0; i < sl_gguf_n_tensors(g); i++) {
        const sl_gguf_tensor *t = sl_gguf_tensor_at(g, i);
        *total += (double)t->ne[0] * (double)t->ne[1] * (double)t->ne[2] * (double)t->ne[3];
    }
    *active = *total;
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int k = 0; m->layers[l].moe && k < SL_EXPERT_MATS; k++) {
            const sl_weight *w = sl_expert_weight(&m->layers[l], 0, k);
            *active -= (double)(m->cfg.n_expert - m->cfg.n_expert_used) * (double)w->cols * (double)w->rows;
        }
}

/* The routed experts of a MoE model: how many, how wide, what one costs and what a token reads. */
static void print_experts_text(const sl_model *m)
{
    const sl_config *c = &m->cfg;
    if (!c->n_expert) return;
    double total, active;
    count_params(m, &total, &active);
    const uint64_t one = sl_layer_expert_bytes(m, 0);
    printf("experts      %d per block, %d used per token, expert FFN %d", c->n_expert, c->n_expert_used, c->expert_ffn);
    if (sl_weight_present(&m->layers[0].mat[SL_MAT_SH_GATE])) printf(", shared expert FFN %d", c->shexp_ffn);
    printf("\n             %.2f MiB per expert (block 0), %.2f MiB of experts per block; a token reads %.2f MiB of "
           "them per block\n", mib(one), mib((uint64_t)c->n_expert * one), mib((uint64_t)c->n_expert_used * one));
    printf("             parameters %.3g, active per token %.3g (%.1f%%)\n", total, active, 100 * active / total);
}

/* The hyperparameters and sizes of a model sluice can run. */
static void print_model_text(const sl_model *m)
{
    const sl_config *c = &m->cfg;
    printf("             dim %d, %d blocks, %d heads / %d kv heads (head_dim %d), ffn %d, vocab %d\n",
           c->dim, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim, c->ffn_dim, c->vocab);
    printf("             rope base %g, rope dims %d, rms eps %g, trained context %d, output %s\n",
           c->rope_base, c->rope_dim, c->rms_eps, c->ctx_train, m->tied ? "tied to token_embd" : "output.weight");
    char features[320];
    sl_arch_features(m, features, sizeof features);
    printf("             %s\n", features);
    uint64_t blk = c->n_layers ? sl_layer_bytes(m, 0) : 0, blk_max = 0;
    for (int l = 0; l < c->n_layers; l++) if (sl_layer_bytes(m, l) > blk_max) blk_max = sl_layer_bytes(m, l);
    printf("sizes        block 0 %.2f MiB (largest block %.2f MiB), token_embd %.2f MiB (%.1f KiB per row), "
           "LM head %.2f MiB%s\n", mib(blk), mib(blk_max), mib(m->tok_embd.nbytes), m->tok_embd.row_bytes / 1024.0,
           mib(m->output.nbytes), m->tied ? " (same tensor)" : "");
    printf("             KV cache f16: %.2f MiB per 1024 positions\n",
           mib(2ull * c->n_layers * 1024 * c->n_kv_heads * c->head_dim * 2));
    print_experts_text(m);
}

/* Every metadata key and its value (arrays summarised), escaped. */
static void print_kv_text(const sl_gguf *g)
{
    printf("\nmetadata (%" PRId64 " keys):\n", sl_gguf_n_kv(g));
    for (int64_t i = 0; i < sl_gguf_n_kv(g); i++) {
        char val[256];
        sl_gguf_kv_format(g, i, val, sizeof val);
        fputs("  ", stdout);
        print_name_col(sl_gguf_key(g, i), 40);
        fputs(" = ", stdout);
        cli_print_escaped(stdout, val, strlen(val));
        fputc('\n', stdout);
    }
}

static void print_tensors_text(const sl_gguf *g, bool tensors)
{
    type_total tt[SL_TYPE_COUNT] = { { 0, 0 } };
    uint64_t total = 0;
    if (tensors && sl_gguf_n_tensors(g)) printf("\n%-32s %-6s %-22s %10s\n", "tensor", "type", "shape", "MiB");
    for (int64_t i = 0; i < sl_gguf_n_tensors(g); i++) {
        const sl_gguf_tensor *t = sl_gguf_tensor_at(g, i);
        tt[t->type].bytes += t->nbytes;
        tt[t->type].count++;
        total += t->nbytes;
        if (!tensors) continue;
        char shape[64];
        int n = snprintf(shape, sizeof shape, "%" PRId64, t->ne[0]);
        for (int d = 1; d < t->n_dims && n < (int)sizeof shape; d++)
            n += snprintf(shape + n, sizeof shape - (size_t)n, " x %" PRId64, t->ne[d]);
        print_name_col(t->name, 32);
        printf(" %-6s %-22s %10.3f\n", sl_type_name(t->type), shape, mib(t->nbytes));
    }
    printf("\ntotals by type:\n");
    for (int t = 0; t < SL_TYPE_COUNT; t++)
        if (tt[t].count) printf("  %-6s %4d tensors %12.2f MiB\n", sl_type_name(t), tt[t].count, mib(tt[t].bytes));
    printf("  tensors %.2f MiB, file %.2f MiB (%" PRIu64 " bytes)\n", mib(total), mib(sl_gguf_file_size(g)),
           sl_gguf_file_size(g));
}

static void print_text(const inspected *in)
{
    const sl_gguf *g = in->g;
    sl_str name, arch, tmpl;
    str_or(g, "general.name", &name);
    str_or(g, "general.architecture", &arch);
    printf("model        %s\n", in->path);
    fputs("name         ", stdout);
    cli_print_escaped(stdout, name.ptr, name.len > 80 ? 80 : name.len);
    printf("\nformat       GGUF v%u, %" PRId64 " tensors, %" PRId64 " metadata keys, alignment %u\n",
           sl_gguf_version(g), sl_gguf_n_tensors(g), sl_gguf_n_kv(g), sl_gguf_alignment(g));
    fputs("architecture ", stdout);
    cli_print_escaped(stdout, arch.len ? arch.ptr : "(none)", arch.len ? (arch.len > 40 ? 40 : arch.len) : 6);
    fputc('\n', stdout);
    print_file_type(g, false);
    if (in->m) print_model_text(in->m);
    if (in->v)
        printf("tokenizer    %s (pre-tokenizer %s), %d tokens, bos %d eos %d, %.2f MiB in memory\n",
               sl_vocab_family(in->v), sl_vocab_pre(in->v), sl_vocab_n_tokens(in->v), sl_vocab_bos(in->v),
               sl_vocab_eos(in->v), mib(sl_vocab_mem_bytes(in->v)));
    if (sl_gguf_get_str(g, "tokenizer.chat_template", &tmpl)) {
        const char *nl = memchr(tmpl.ptr, '\n', tmpl.len);   /* metadata strings are not NUL-terminated */
        size_t first = nl ? (size_t)(nl - tmpl.ptr) : tmpl.len;
        printf("chat template %" PRIu64 " bytes: ", tmpl.len);
        cli_print_escaped(stdout, tmpl.ptr, first > 100 ? 100 : first);
        printf("%s\n", first < tmpl.len || first > 100 ? " ... (--json or --kv show it whole)" : "");
    }
    print_tensors_text(g, in->tensors);
    if (in->kv) print_kv_text(g);
    if (!in->m) printf("\nsluice cannot run this file: %s\n", in->err);
}

static void print_kv_json(const sl_gguf *g)
{
    printf(",\"metadata\":{");
    for (int64_t i = 0; i < sl_gguf_n_kv(g); i++) {
        sl_str k = sl_gguf_key(g, i), sv;
        char val[256];
        printf("%s", i ? "," : "");
        json_str(stdout, k.ptr, k.len);
        fputc(':', stdout);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)(k.len < 255 ? k.len : 255), k.ptr);
        if (sl_gguf_kv_type(g, i) == SL_GGUF_STRING && sl_gguf_get_str(g, key, &sv)) json_str(stdout, sv.ptr, sv.len);
        else { sl_gguf_kv_format(g, i, val, sizeof val); json_str(stdout, val, strlen(val)); }
    }
    printf("}");
}

static void print_json(const inspected *in)
{
    const sl_gguf *g = in->g;
    const sl_model *m = in->m;
    sl_str arch, name, tmpl;
    str_or(g, "general.architecture", &arch);
    str_or(g, "general.name", &name);
    printf("{\"path\":");
    json_str(stdout, in->path, strlen(in->path));
    printf(",\"gguf_version\":%u,\"file_bytes\":%" PRIu64 ",\"n_tensors\":%" PRId64 ",\"n_kv\":%" PRId64 ",\"arch\":",
           sl_gguf_version(g), sl_gguf_file_size(g), sl_gguf_n_tensors(g), sl_gguf_n_kv(g));
    json_str(stdout, arch.ptr, arch.len);
    printf(",\"name\":");
    json_str(stdout, name.ptr, name.len);
    print_file_type(g, true);
    printf(",\"runnable\":%s", m ? "true" : "false");
    if (!m) { printf(",\"why_not\":"); json_str(stdout, in->err, strlen(in->err)); }
    if (m) {
        const sl_config *c = &m->cfg;
        printf(",\"weight_bytes\":%" PRIu64 ",\"dim\":%d,\"n_layers\":%d,\"n_heads\":%d,\"n_kv_heads\":%d,\"head_dim\":%d,"
               "\"ffn_dim\":%d,\"vocab\":%d,\"ctx_train\":%d,\"rope_base\":%g,\"rope_dim\":%d,\"rms_eps\":%g,"
               "\"tied_output\":%s,\"block_bytes\":[", m->weight_bytes, c->dim, c->n_layers, c->n_heads, c->n_kv_heads,
               c->head_dim, c->ffn_dim, c->vocab, c->ctx_train, c->rope_base, c->rope_dim, c->rms_eps,
               m->tied ? "true" : "false");
        for (int l = 0; l < c->n_layers; l++) printf("%s%" PRIu64, l ? "," : "", sl_layer_bytes(m, l));
        printf("]");
        if (c->n_expert) {
            double total, active;
            count_params(m, &total, &active);
            printf(",\"experts\":{\"count\":%d,\"used\":%d,\"ffn\":%d,\"shared_ffn\":%d,\"bytes_per_expert\":%" PRIu64
                   ",\"params\":%.0f,\"active_params\":%.0f}", c->n_expert, c->n_expert_used, c->expert_ffn,
                   sl_weight_present(&m->layers[0].mat[SL_MAT_SH_GATE]) ? c->shexp_ffn : 0, sl_layer_expert_bytes(m, 0),
                   total, active);
        }
    }
    if (in->v)
        printf(",\"tokenizer\":{\"family\":\"%s\",\"pre\":\"%s\",\"n_tokens\":%d,\"bos\":%d,\"eos\":%d,\"mem_bytes\":%zu}",
               sl_vocab_family(in->v), sl_vocab_pre(in->v), sl_vocab_n_tokens(in->v), sl_vocab_bos(in->v),
               sl_vocab_eos(in->v), sl_vocab_mem_bytes(in->v));
    if (sl_gguf_get_str(g, "tokenizer.chat_template", &tmpl)) { printf(",\"chat_template\":"); json_str(stdout, tmpl.ptr, tmpl.len); }
    if (in->kv) print_kv_json(g);
    if (in->tensors) {
        printf(",\"tensors\":[");
        for (int64_t i = 0; i < sl_gguf_n_tensors(g); i++) {
            const sl_gguf_tensor *t = sl_gguf_tensor_at(g, i);
            printf("%s{\"name\":", i ? "," : "");
            json_str(stdout, t->name.ptr, t->name.len);
            printf(",\"type\":\"%s\",\"shape\":[", sl_type_name(t->type));
            for (int d = 0; d < t->n_dims; d++) printf("%s%" PRId64, d ? "," : "", t->ne[d]);
            printf("],\"offset\":%" PRIu64 ",\"bytes\":%" PRIu64 "}", t->offset, t->nbytes);
        }
        printf("]");
    }
    printf("}\n");
}

enum { INSPECT_MODEL = 1, INSPECT_JSON, INSPECT_NO_TENSORS, INSPECT_KV };

static const cli_opt inspect_table[] = {
    { INSPECT_MODEL, "-m|--model", "FILE", "the GGUF file (or give it as the argument)" },
    { INSPECT_JSON, "--json", NULL, "one JSON object (the chat template whole)" },
    { INSPECT_NO_TENSORS, "--no-tensors", NULL, "leave out the tensor table (also in JSON)" },
    { INSPECT_KV, "--kv", NULL, "every metadata key and its value" },
    { 0, NULL, NULL, NULL },
};
static const cli_opt *const inspect_tables[] = { inspect_table, cli_meta_table, NULL };
const cli_cmd cli_cmd_inspect = {
    "inspect", "show what is in a GGUF file: metadata, hyperparameters, tensors, sizes",
    "sluice inspect [MODEL | -m MODEL] [--json] [--no-tensors] [--kv]", inspect_tables,
    "Works on any well-formed GGUF, also architectures and types sluice cannot run and vocabulary-only\n"
    "files; the last line then says why sluice cannot run it.\n"
};

/* Keys must be UTF-8 (GGUF says so; run refuses them too). */
static bool keys_utf8(const sl_gguf *g, char *err, size_t errlen)
{
    for (int64_t i = 0; i < sl_gguf_n_kv(g); i++) {
        sl_str k = sl_gguf_key(g, i);
        if (!cli_utf8_valid(k.ptr, k.len)) {
            snprintf(err, errlen, "metadata key %" PRId64 " is not valid UTF-8 (GGUF keys are UTF-8)", i);
            return false;
        }
    }
    return true;
}

static int inspect_parse(int argc, char **argv, inspected *in)
{
    in->tensors = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || !a[1]) {
            if (in->path) { cli_err("inspect: one file at a time (got '%s' and '%s')", in->path, a); return -1; }
            in->path = a;
            continue;
        }
        const cli_opt *op = cli_find(inspect_tables, a);
        if (!op) { cli_unknown(&cli_cmd_inspect, a); return -1; }
        if (cli_meta(&cli_cmd_inspect, op)) return 1;
        switch (op->id) {
        case INSPECT_MODEL:
            if (in->path) { cli_err("inspect: one file at a time"); return -1; }
            if (!cli_val(argc, argv, &i, &in->path)) return -1;
            break;
        case INSPECT_NO_TENSORS: in->tensors = false; break;
        case INSPECT_KV: in->kv = true; break;
        case INSPECT_JSON: in->json = true; break;
        default: break;
        }
    }
    return 0;
}

int cmd_inspect(int argc, char **argv)
{
    inspected in = { 0 };
    int pr = inspect_parse(argc, argv, &in);
    if (pr) return pr > 0 ? 0 : 2;
    if (!in.path) in.path = cli_default_model();
    char err[SL_ERRLEN];
    if (sl_gguf_open(in.path, &in.g, err, sizeof err)) { cli_err("%s", err); return 1; }
    if (!keys_utf8(in.g, err, sizeof err)) { cli_err("%s: %s", in.path, err); sl_gguf_close(in.g); return 1; }
    if (sl_vocab_load(in.g, &in.v, err, sizeof err)) {
        in.v = NULL;
        cli_err("warning: no usable tokenizer: %s", err);
    }
    if (sl_gguf_n_tensors(in.g) == 0) snprintf(in.err, sizeof in.err, "vocabulary-only file (no weights)");
    else if (sl_model_open(in.path, &in.m, in.err, sizeof in.err)) in.m = NULL;
    if (in.json) print_json(&in);
    else print_text(&in);
    sl_vocab_free(in.v);
    sl_model_free(in.m);
    sl_gguf_close(in.g);
    return 0;
}

enum { TOK_IDS = 1, TOK_SPECIAL, TOK_NO_BOS, TOK_MODEL, TOK_PROMPT };

static const cli_opt tokenize_table[] = {
    { TOK_MODEL, "-m|--model", "FILE", "any GGUF with tokenizer metadata (a vocabulary-only file works)" },
    { TOK_PROMPT, "-p|--prompt", "TEXT", "the text (or give it as the argument)" },
    { TOK_IDS, "--ids", NULL, "print only the ids, as a JSON array" },
    { TOK_SPECIAL, "--special", NULL, "recognise special-token texts" },
    { TOK_NO_BOS, "--no-bos", NULL, "do not add the BOS token" },
    { 0, NULL, NULL, NULL },
};
static const cli_opt *const tokenize_tables[] = { tokenize_table, cli_meta_table, NULL };
const cli_cmd cli_cmd_tokenize = { "tokenize", "print the token ids of a text",
                                   "sluice tokenize [-m MODEL] [--ids] [--special] [--no-bos] TEXT", tokenize_tables,
                                   NULL };

int cmd_tokenize(int argc, char **argv)
{
    const char *path = NULL, *text = NULL;
    bool ids_only = false, special = false, no_bos = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || !a[1]) { text = a; continue; }
        const cli_opt *op = cli_find(tokenize_tables, a);
        if (!op) { cli_unknown(&cli_cmd_tokenize, a); return 2; }
        if (cli_meta(&cli_cmd_tokenize, op)) return 0;
        if (op->id == TOK_IDS) ids_only = true;
        else if (op->id == TOK_SPECIAL) special = true;
        else if (op->id == TOK_NO_BOS) no_bos = true;
        else if (!cli_val(argc, argv, &i, op->id == TOK_MODEL ? &path : &text)) return 2;
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
            printf("%6d -> '", ids[i]);
            cli_print_escaped(stdout, t, tl);   /* token texts come from the file */
            printf("'\n");
        }
    }
    free(ids);
    sl_vocab_free(v);
    sl_gguf_close(g);
    return 0;
}
