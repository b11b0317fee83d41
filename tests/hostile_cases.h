/* tests/hostile_cases.h — the hostile GGUF cases: how each is built and what sluice must say.
 *
 * Every case starts from a valid tiny llama (gc_llama, Q8_0 matrices) and breaks one thing.
 * `level` says which layer must refuse it:
 *   H_GGUF   sl_gguf_open/sl_gguf_parse fail (and so does everything above them);
 *   H_MODEL  the GGUF is well formed, sl_model_open fails;
 *   H_VOCAB  the model opens, sl_vocab_load fails (`inspect` warns and exits 0, `run` exits 1);
 *   H_RUN    everything loads; generation must stop with an error (`run` exits 1);
 *   H_NONFINITE  NaN/Inf weights: refused when the model is opened (where the values are read at load,
 *            e.g. norm vectors) or when generation meets them (non-finite logits); either way `run`
 *            exits 1 with the keyword, and nothing is printed as if it were text;
 *   H_OK     accepted (a decision: the case is legal or handled the way llama.cpp handles it).
 * `kw` must appear in the one-line message (case-sensitive).
 * Included by tests/test_hostile.c only (the table is static).
 */
#ifndef SL_TESTS_HOSTILE_CASES_H
#define SL_TESTS_HOSTILE_CASES_H

#include <errno.h>
#include <math.h>
#include <string.h>

#include "kernels/types.h"
#include "loader/gguf.h"
#include "util/gguf_craft.h"

enum { H_GGUF, H_MODEL, H_VOCAB, H_RUN, H_NONFINITE, H_OK };

typedef struct hcase {
    const char *name;                        /* tests/hostile/<name>.gguf */
    const char *what;                        /* one line for the README */
    void (*build)(gc_file *f);
    size_t (*cut)(const gc_image *img);      /* NULL: whole image; else keep this many bytes */
    int level;
    int err;                                 /* expected return (negative errno); 0 for H_RUN/H_OK */
    const char *kw;                          /* keyword of the message (NULL for H_OK) */
    const char *pending;                     /* non-NULL: the fix in another module this case awaits;
                                                checked only by the hostile_pending tests until then */
} hcase;

static void base(gc_file *f)
{
    gc_init(f);
    gc_llama(f, &(gc_llama_cfg){ .wtype = SL_TYPE_Q8_0 });
}

static void set_str(gc_kv *e, const char *s)
{
    uint64_t n = strlen(s);
    unsigned char buf[256];
    memcpy(buf, &n, 8);
    memcpy(buf + 8, s, n);
    gc_kv_set(e, SL_GGUF_STRING, buf, 8 + n);
}

static void set_u32(gc_kv *e, uint32_t v) { gc_kv_set(e, SL_GGUF_U32, &v, 4); }
static void set_f32(gc_kv *e, float v) { gc_kv_set(e, SL_GGUF_F32, &v, 4); }
static gc_kv *K(gc_file *f, const char *key) { return gc_find_kv(f, key); }
static gc_tensor *T(gc_file *f, const char *name) { return gc_find_tensor(f, name); }

/* ---- header ---- */
static void b_valid(gc_file *f) { base(f); }
static void b_valid_f32(gc_file *f) { gc_init(f); gc_llama(f, &(gc_llama_cfg){ .wtype = SL_TYPE_F32, .seed = 7 }); }
static void b_valid_align64(gc_file *f) { base(f); f->alignment = 64; gc_kv_u32(f, "general.alignment", 64); }
static void b_valid_v2(gc_file *f) { base(f); f->version = 2; }
static void b_bad_magic(gc_file *f) { base(f); f->magic = 0x47554747u; }
static void b_version1(gc_file *f) { base(f); f->version = 1; }
static void b_version4(gc_file *f) { base(f); f->version = 4; }
static void b_big_endian(gc_file *f) { base(f); f->version = 0x03000000u; }
static void b_ggjt_magic(gc_file *f) { base(f); f->magic = 0x67676a74u; }
static void b_huge_kv_count(gc_file *f) { base(f); f->n_kv_disk = 1ull << 62; }
static void b_huge_tensor_count(gc_file *f) { base(f); f->n_tensors_disk = 1ull << 40; }
static void b_kv_count_plus_one(gc_file *f) { base(f); f->n_kv_disk = f->n_kv + 1; }
static void b_tensor_count_plus_one(gc_file *f) { base(f); f->n_tensors_disk = f->n_t + 1; }
/* ---- key/values ---- */
static void b_key_len_past_eof(gc_file *f) { base(f); K(f, "general.name")->key_len_disk = 1ull << 40; }
static void b_key_len_max(gc_file *f) { base(f); K(f, "general.name")->key_len_disk = UINT64_MAX - 1; }
static void b_str_len_past_eof(gc_file *f)
{
    base(f);
    gc_kv *e = K(f, "general.name");
    uint64_t n = 1ull << 40;
    memcpy(e->val, &n, 8);
}
static void b_empty_key(gc_file *f) { base(f); gc_kv_u32(f, "", 1); }
static void b_unknown_kv_type(gc_file *f) { base(f); gc_kv_raw(f, "x.unknown", 9, 13, "\0\0\0\0", 4); }
static void b_unknown_kv_type_max(gc_file *f) { base(f); gc_kv_raw(f, "x.unknown", 9, 0xffffffffu, "\0\0\0\0", 4); }
static void b_nested_array(gc_file *f)
{
    base(f);
    /* array of 1 array of 2 u32 */
    unsigned char v[] = { SL_GGUF_ARRAY, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
                          SL_GGUF_U32, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0 };
    gc_kv_raw(f, "x.nested", 8, SL_GGUF_ARRAY, v, sizeof v);
}
static void b_array_unknown_elem(gc_file *f) { base(f); gc_kv_arr(f, "x.arr", 77, "abcd", 1, 4); }
static void b_array_count_past_eof(gc_file *f)
{
    base(f);
    gc_kv *e = K(f, "tokenizer.ggml.scores");
    uint64_t n = 1ull << 61;
    memcpy(e->val + 4, &n, 8);
}
static void b_str_array_count_past_eof(gc_file *f)
{
    base(f);
    gc_kv *e = K(f, "tokenizer.ggml.tokens");
    uint64_t n = 1ull << 50;
    memcpy(e->val + 4, &n, 8);
}
static void b_str_array_elem_past_eof(gc_file *f)
{
    base(f);
    gc_kv *e = K(f, "tokenizer.ggml.tokens");
    uint64_t n = 1ull << 35;
    memcpy(e->val + 12, &n, 8);   /* first element's length */
}
static void b_duplicate_key(gc_file *f) { base(f); gc_kv_u32(f, "llama.block_count", 1); }
static void b_non_utf8_key(gc_file *f) { base(f); gc_kv_raw(f, "x.\xff\xfe\xc0\x80", 6, SL_GGUF_U32, "\1\0\0\0", 4); }
static void b_ctrl_key(gc_file *f) { base(f); gc_kv_raw(f, "x.\n\x1b[2J\0", 8, SL_GGUF_U32, "\1\0\0\0", 4); }
static void b_dup_ctrl_key(gc_file *f)
{
    base(f);
    gc_kv_raw(f, "x.\n\x1b[2J", 7, SL_GGUF_U32, "\1\0\0\0", 4);
    gc_kv_raw(f, "x.\n\x1b[2J", 7, SL_GGUF_U32, "\1\0\0\0", 4);
}
/* ---- alignment ---- */
static void b_align_zero(gc_file *f) { base(f); gc_kv_u32(f, "general.alignment", 0); }
static void b_align_npot(gc_file *f) { base(f); gc_kv_u32(f, "general.alignment", 48); }
static void b_align_huge(gc_file *f) { base(f); gc_kv_u32(f, "general.alignment", 1u << 24); }
static void b_align_string(gc_file *f) { base(f); gc_kv_str(f, "general.alignment", "32"); }
static void b_align_u64(gc_file *f) { base(f); gc_kv_u64(f, "general.alignment", 32); }
/* ---- tensor infos ---- */
static void b_too_many_dims(gc_file *f) { base(f); gc_tensor *t = T(f, "output_norm.weight"); t->n_dims = 5; t->ne[1] = t->ne[2] = t->ne[3] = t->ne[4] = 1; }
static void b_zero_n_dims(gc_file *f) { base(f); T(f, "output_norm.weight")->n_dims = 0; }
static void b_huge_n_dims(gc_file *f) { base(f); T(f, "output_norm.weight")->n_dims = 0x80000000u; }
static void b_zero_dim(gc_file *f) { base(f); T(f, "blk.0.attn_q.weight")->ne[1] = 0; }
static void b_dims_product_overflow(gc_file *f)
{
    base(f);
    gc_tensor *t = T(f, "blk.0.attn_q.weight");
    t->ne[0] = 1ull << 32; t->ne[1] = 1ull << 32;
}
static void b_dim_over_int64(gc_file *f) { base(f); T(f, "blk.0.attn_q.weight")->ne[1] = 1ull << 63; }
static void b_nbytes_overflow(gc_file *f)
{
    base(f);   /* 2^62 F32 elements: the element count fits int64, the byte size (2^64) does not */
    gc_tensor *t = T(f, "output_norm.weight");
    t->ne[0] = 1ull << 62;
}
static void b_nbytes_past_eof(gc_file *f) { base(f); T(f, "token_embd.weight")->ne[1] = 1u << 20; }
static void b_offset_past_eof(gc_file *f) { base(f); T(f, "blk.0.ffn_up.weight")->offset = 1ull << 40; }
static void b_offset_max(gc_file *f) { base(f); T(f, "blk.0.ffn_up.weight")->offset = UINT64_MAX - 31; }
static void b_offset_misaligned(gc_file *f) { base(f); T(f, "blk.0.ffn_up.weight")->offset = 16; }
static void b_overlap(gc_file *f) { base(f); T(f, "blk.0.ffn_up.weight")->offset = 0; }
static void b_dup_tensor(gc_file *f) { base(f); gc_tensor_add(f, "blk.0.attn_q.weight", 0, 1, (uint64_t[]){ 32 }, 0, 1); }
static void b_dup_ctrl_tensor(gc_file *f)
{
    base(f);
    gc_tensor_add(f, "evil\n\x1b[31mname", 0, 1, (uint64_t[]){ 32 }, 0, 1);
    gc_tensor_add(f, "evil\n\x1b[31mname", 0, 1, (uint64_t[]){ 32 }, 0, 1);
}
static void b_unknown_tensor_type(gc_file *f) { base(f); T(f, "blk.0.attn_k.weight")->type = 99; }
static void b_removed_tensor_type(gc_file *f) { base(f); T(f, "blk.0.attn_k.weight")->type = 4; }
static void b_negative_tensor_type(gc_file *f) { base(f); T(f, "blk.0.attn_k.weight")->type = 0xfffffff0u; }
static void b_row_not_block_multiple(gc_file *f) { base(f); T(f, "blk.0.attn_k.weight")->ne[0] = 48; }
static void b_empty_tensor_name(gc_file *f) { base(f); gc_tensor_add(f, "", 0, 1, (uint64_t[]){ 32 }, 0, 1); }
static void b_long_tensor_name(gc_file *f)
{
    base(f);
    char n[301];
    memset(n, 'a', 300);
    n[300] = 0;
    gc_tensor_add(f, n, 0, 1, (uint64_t[]){ 32 }, 0, 1);
}
static void b_tensor_name_past_eof(gc_file *f) { base(f); T(f, "output.weight")->name_len_disk = 1ull << 33; }
/* ---- truncation at structural boundaries ---- */
static size_t cut_empty(const gc_image *i) { (void)i; return 0; }
static size_t cut_in_magic(const gc_image *i) { (void)i; return 3; }
static size_t cut_in_header(const gc_image *i) { (void)i; return 20; }
static size_t cut_after_header(const gc_image *i) { (void)i; return 24; }
static size_t cut_in_kv(const gc_image *i) { return i->bounds[i->n_bounds / 4]; }
static size_t cut_in_tensor_info(const gc_image *i) { return i->data_off - 40; }
static size_t cut_at_data(const gc_image *i) { return i->data_off; }
static size_t cut_in_data(const gc_image *i) { return i->len - 1; }
/* ---- llama model ---- */
static void b_missing_arch(gc_file *f) { base(f); gc_del_kv(f, "general.architecture"); }
static void b_wrong_arch(gc_file *f) { base(f); set_str(K(f, "general.architecture"), "gpt2"); }
static void b_missing_embd_len(gc_file *f) { base(f); gc_del_kv(f, "llama.embedding_length"); }
static void b_missing_block_count(gc_file *f) { base(f); gc_del_kv(f, "llama.block_count"); }
static void b_missing_heads(gc_file *f) { base(f); gc_del_kv(f, "llama.attention.head_count"); }
static void b_missing_ffn(gc_file *f) { base(f); gc_del_kv(f, "llama.feed_forward_length"); }
static void b_embd_len_string(gc_file *f) { base(f); set_str(K(f, "llama.embedding_length"), "32"); }
static void b_embd_len_huge(gc_file *f) { base(f); set_u32(K(f, "llama.embedding_length"), 0x80000000u); }
static void b_heads_zero(gc_file *f) { base(f); set_u32(K(f, "llama.attention.head_count"), 0); }
static void b_heads_not_divisor(gc_file *f) { base(f); set_u32(K(f, "llama.attention.head_count"), 3); }
static void b_kv_heads_not_divisor(gc_file *f) { base(f); set_u32(K(f, "llama.attention.head_count_kv"), 3); }
static void b_block_count_high(gc_file *f) { base(f); set_u32(K(f, "llama.block_count"), 1000); }
static void b_rms_eps_nan(gc_file *f) { base(f); set_f32(K(f, "llama.attention.layer_norm_rms_epsilon"), NAN); }
static void b_rope_base_negative(gc_file *f) { base(f); set_f32(K(f, "llama.rope.freq_base"), -1.0f); }
static void b_missing_tensor(gc_file *f) { base(f); gc_del_tensor(f, "blk.0.ffn_down.weight"); }
static void b_missing_embd(gc_file *f) { base(f); gc_del_tensor(f, "token_embd.weight"); }
static void b_wrong_shape(gc_file *f) { base(f); T(f, "blk.0.attn_q.weight")->ne[1] = 16; }
static void b_3d_tensor(gc_file *f)
{
    base(f);   /* same element count, folded into 3 dims */
    gc_tensor *t = T(f, "blk.0.attn_q.weight");
    t->n_dims = 3; t->ne[1] = 16; t->ne[2] = 2;
}
static void b_unsupported_tq2_0(gc_file *f)
{
    gc_init(f);   /* ffn 256 so that ffn_down's rows are one 256-element block long */
    gc_llama(f, &(gc_llama_cfg){ .wtype = SL_TYPE_Q8_0, .ffn = 256 });
    gc_tensor *t = T(f, "blk.0.ffn_down.weight");
    free(t->data);
    t->data = NULL;
    t->type = SL_TYPE_TQ2_0;   /* a known ggml type sluice has no kernels for */
    t->nbytes = 32 * 66;       /* 32 rows of one TQ2_0 block */
    t->data = calloc(1, t->nbytes);
    for (size_t i = 0; i < t->nbytes; i++) t->data[i] = (unsigned char)(i * 131 + 7);
}
static void b_vocab_rows_mismatch(gc_file *f)
{
    base(f);   /* both tables lose a row: a valid model, but the vocabulary has one token more */
    T(f, "token_embd.weight")->ne[1] -= 1;
    T(f, "output.weight")->ne[1] -= 1;
}
/* ---- hyperparameters and tensors llama.cpp reads (issue 20 item 4) ---- */
static void b_rope_base_inf(gc_file *f) { base(f); set_f32(K(f, "llama.rope.freq_base"), INFINITY); }
static void b_rope_factor_no_type(gc_file *f) { base(f); gc_kv_f32(f, "llama.rope.scaling.factor", 4.0f); }
static void b_rope_scale_linear_legacy(gc_file *f) { base(f); gc_kv_f32(f, "llama.rope.scale_linear", 2.0f); }
static void b_rope_factor_zero(gc_file *f) { base(f); gc_kv_f32(f, "llama.rope.scaling.factor", 0.0f); }
static void b_rope_factor_negative(gc_file *f) { base(f); gc_kv_f32(f, "llama.rope.scaling.factor", -2.0f); }
static void b_rope_factor_nan(gc_file *f) { base(f); gc_kv_f32(f, "llama.rope.scaling.factor", NAN); }
static void b_rope_factor_string(gc_file *f) { base(f); gc_kv_str(f, "llama.rope.scaling.factor", "4"); }
static void b_rope_type_u32(gc_file *f) { base(f); gc_kv_u32(f, "llama.rope.scaling.type", 1); }
static void b_rope_type_yarn(gc_file *f)
{
    base(f);
    gc_kv_str(f, "llama.rope.scaling.type", "yarn");
    gc_kv_f32(f, "llama.rope.scaling.factor", 4.0f);
}
static void b_rope_dims_short(gc_file *f) { base(f); set_u32(K(f, "llama.rope.dimension_count"), 8); }
static void b_expert_count(gc_file *f) { base(f); gc_kv_u32(f, "llama.expert_count", 8); }
static void b_expert_used_zero(gc_file *f) { b_expert_count(f); gc_kv_u32(f, "llama.expert_used_count", 0); }
static void b_expert_used_over(gc_file *f) { b_expert_count(f); gc_kv_u32(f, "llama.expert_used_count", 9); }
static void b_expert_no_router(gc_file *f) { b_expert_count(f); gc_kv_u32(f, "llama.expert_used_count", 2); }
static void b_extra_block(gc_file *f)
{
    base(f);   /* block 1's attention norm in a file whose block_count is 1 */
    gc_tensor_add(f, "blk.1.attn_norm.weight", 0, 1, (uint64_t[]){ 32 }, 1.0f, 0.1f);
}
static void b_unused_bias(gc_file *f) { base(f); gc_tensor_add(f, "blk.0.attn_q.bias", 0, 1, (uint64_t[]){ 32 }, 0, 0.5f); }
static void b_rope_freqs_zero(gc_file *f)
{
    base(f);   /* head_dim 16: 8 factors, one of them 0 (a division by zero in every angle it scales) */
    gc_tensor *t = gc_tensor_add(f, "rope_freqs.weight", 0, 1, (uint64_t[]){ 8 }, 1.0f, 0.0f);
    gc_tensor_set_f32(t, 5, 0.0f);
}
static void b_rope_freqs_short(gc_file *f) { base(f); gc_tensor_add(f, "rope_freqs.weight", 0, 1, (uint64_t[]){ 7 }, 1.0f, 0.0f); }
/* ---- tokenizer ---- */
static void b_tok_missing_tokens(gc_file *f) { base(f); gc_del_kv(f, "tokenizer.ggml.tokens"); }
static void b_tok_missing_model(gc_file *f) { base(f); gc_del_kv(f, "tokenizer.ggml.model"); }
static void b_tok_unknown_model(gc_file *f) { base(f); set_str(K(f, "tokenizer.ggml.model"), "bert"); }
static void b_tok_ctrl_model(gc_file *f) { base(f); set_str(K(f, "tokenizer.ggml.model"), "x\n\x1b[2J"); }
static void b_tok_scores_short(gc_file *f)
{
    base(f);
    gc_del_kv(f, "tokenizer.ggml.scores");
    float s[8] = { 0 };
    gc_kv_arr(f, "tokenizer.ggml.scores", SL_GGUF_F32, s, 8, 4);
}
static void b_tok_scores_strings(gc_file *f)
{
    base(f);
    gc_del_kv(f, "tokenizer.ggml.scores");
    const char *s[1] = { "0.5" };
    gc_kv_arr_str(f, "tokenizer.ggml.scores", s, 1);
}
static void b_tok_types_float(gc_file *f)
{
    base(f);
    gc_del_kv(f, "tokenizer.ggml.token_type");
    float s[56] = { 0 };
    gc_kv_arr(f, "tokenizer.ggml.token_type", SL_GGUF_F32, s, 56, 4);
}
static void b_tok_bos_out_of_range(gc_file *f) { base(f); set_u32(K(f, "tokenizer.ggml.bos_token_id"), 100000); }
static void b_tok_eos_out_of_range(gc_file *f) { base(f); set_u32(K(f, "tokenizer.ggml.eos_token_id"), 0xffffffffu); }
/* ---- non-finite weights ---- */
static void b_nan_output_norm(gc_file *f) { base(f); gc_tensor_set_f32(T(f, "output_norm.weight"), 3, NAN); }
static void b_inf_attn_norm(gc_file *f) { base(f); gc_tensor_set_f32(T(f, "blk.0.attn_norm.weight"), 0, INFINITY); }
static void b_nan_embd_f32(gc_file *f)
{
    b_valid_f32(f);   /* every row of the F32 embedding gets a NaN, whatever the prompt's tokens */
    for (uint64_t r = 0; r < (uint64_t)gc_llama_vocab_size(); r++)
        gc_tensor_set_f32(T(f, "token_embd.weight"), r * 32 + 5, NAN);
}

#define E(n) (-(n))
static const hcase g_cases[] = {
    { "valid",               "baseline: the unmodified tiny llama (Q8_0 matrices)", b_valid, NULL, H_OK, 0, NULL, NULL },
    { "valid_f32",           "baseline with F32 matrices", b_valid_f32, NULL, H_OK, 0, NULL, NULL },
    { "valid_align64",       "general.alignment = 64 with data laid out on 64", b_valid_align64, NULL, H_OK, 0, NULL, NULL },
    { "valid_v2",            "GGUF version 2 header (same layout as v3)", b_valid_v2, NULL, H_OK, 0, NULL, NULL },
    { "bad_magic",           "magic 'GGUG'", b_bad_magic, NULL, H_GGUF, E(EINVAL), "not a GGUF file", NULL },
    { "version1",            "GGUF version 1 (32-bit counts, unsupported)", b_version1, NULL, H_GGUF, E(EINVAL), "unsupported GGUF version", NULL },
    { "version4",            "GGUF version 4", b_version4, NULL, H_GGUF, E(EINVAL), "unsupported GGUF version", NULL },
    { "big_endian",          "version field 0x03000000 (a big-endian GGUF)", b_big_endian, NULL, H_GGUF, E(EINVAL), "big-endian", NULL },
    { "ggjt_magic",          "llama.cpp's pre-GGUF 'ggjt' magic", b_ggjt_magic, NULL, H_GGUF, E(EINVAL), "GGJT", NULL },
    { "trunc_empty",         "empty file", b_valid, cut_empty, H_GGUF, E(EINVAL), "truncated", NULL },
    { "trunc_in_magic",      "3 bytes", b_valid, cut_in_magic, H_GGUF, E(EINVAL), "truncated", NULL },
    { "trunc_in_header",     "cut inside the metadata count", b_valid, cut_in_header, H_GGUF, E(EINVAL), "truncated", NULL },
    { "trunc_after_header",  "header only, counts say more follows", b_valid, cut_after_header, H_GGUF, E(EINVAL), "truncated", NULL },
    { "trunc_in_kv",         "cut inside the key/value section", b_valid, cut_in_kv, H_GGUF, E(EINVAL), "truncated", NULL },
    { "trunc_in_tensor_info","cut inside the last tensor info", b_valid, cut_in_tensor_info, H_GGUF, E(EINVAL), "truncated", NULL },
    { "trunc_at_data",       "cut where the tensor data starts", b_valid, cut_at_data, H_GGUF, E(EINVAL), "past the end of the file", NULL },
    { "trunc_in_data",       "last byte of the last tensor missing", b_valid, cut_in_data, H_GGUF, E(EINVAL), "past the end of the file", NULL },
    { "huge_kv_count",       "metadata count 2^62", b_huge_kv_count, NULL, H_GGUF, E(EINVAL), "metadata count", NULL },
    { "huge_tensor_count",   "tensor count 2^40", b_huge_tensor_count, NULL, H_GGUF, E(EINVAL), "tensor count", NULL },
    { "kv_count_plus_one",   "metadata count one too high (tensor infos read as key/values)", b_kv_count_plus_one, NULL, H_GGUF, E(EINVAL), "past the end of the file", NULL },
    { "tensor_count_plus_one","tensor count one too high (padding + data read as a tensor info)", b_tensor_count_plus_one, NULL, H_GGUF, E(EINVAL), "tensor", NULL },
    { "key_len_past_eof",    "a key's length prefix is 2^40", b_key_len_past_eof, NULL, H_GGUF, E(EINVAL), "past the end of the file", NULL },
    { "key_len_max",         "a key's length prefix is 2^64-2 (position + length wraps)", b_key_len_max, NULL, H_GGUF, E(EINVAL), "past the end of the file", NULL },
    { "str_len_past_eof",    "a string value's length is 2^40", b_str_len_past_eof, NULL, H_GGUF, E(EINVAL), "past the end of the file", NULL },
    { "empty_key",           "a key of length 0", b_empty_key, NULL, H_GGUF, E(EINVAL), "empty key", NULL },
    { "unknown_kv_type",     "value type 13", b_unknown_kv_type, NULL, H_GGUF, E(EINVAL), "unknown value type", NULL },
    { "unknown_kv_type_max", "value type 0xffffffff", b_unknown_kv_type_max, NULL, H_GGUF, E(EINVAL), "unknown value type", NULL },
    { "nested_array",        "array of arrays", b_nested_array, NULL, H_GGUF, E(EINVAL), "nested array", NULL },
    { "array_unknown_elem",  "array element type 77", b_array_unknown_elem, NULL, H_GGUF, E(EINVAL), "unsupported array element type", NULL },
    { "array_count_past_eof","scores array count 2^61", b_array_count_past_eof, NULL, H_GGUF, E(EINVAL), "past the end of the file", NULL },
    { "str_array_count_past_eof","tokens array count 2^50", b_str_array_count_past_eof, NULL, H_GGUF, E(EINVAL), "past the end of the file", NULL },
    { "str_array_elem_past_eof","first token's length 2^35", b_str_array_elem_past_eof, NULL, H_GGUF, E(EINVAL), "past the end of the file", NULL },
    { "duplicate_key",       "llama.block_count twice", b_duplicate_key, NULL, H_GGUF, E(EINVAL), "duplicate metadata key", NULL },
    { "non_utf8_key",        "a key with bytes ff fe c0 80 (accepted: keys are compared as bytes)", b_non_utf8_key, NULL, H_OK, 0, NULL, NULL },
    { "ctrl_key",            "a key with a newline, an escape sequence and a NUL (accepted)", b_ctrl_key, NULL, H_OK, 0, NULL, NULL },
    { "dup_ctrl_key",        "the same control-character key twice: the message stays one line", b_dup_ctrl_key, NULL, H_GGUF, E(EINVAL), "duplicate metadata key", NULL },
    { "align_zero",          "general.alignment = 0", b_align_zero, NULL, H_GGUF, E(EINVAL), "power of two", NULL },
    { "align_npot",          "general.alignment = 48", b_align_npot, NULL, H_GGUF, E(EINVAL), "power of two", NULL },
    { "align_huge",          "general.alignment = 2^24", b_align_huge, NULL, H_GGUF, E(EINVAL), "power of two", NULL },
    { "align_string",        "general.alignment is a string", b_align_string, NULL, H_GGUF, E(EINVAL), "must be u32", NULL },
    { "align_u64",           "general.alignment is a u64 (the spec says u32)", b_align_u64, NULL, H_GGUF, E(EINVAL), "must be u32", NULL },
    { "too_many_dims",       "a tensor with 5 dimensions", b_too_many_dims, NULL, H_GGUF, E(EINVAL), "dimensions", NULL },
    { "zero_n_dims",         "a tensor with 0 dimensions", b_zero_n_dims, NULL, H_GGUF, E(EINVAL), "dimensions", NULL },
    { "huge_n_dims",         "a tensor with 2^31 dimensions", b_huge_n_dims, NULL, H_GGUF, E(EINVAL), "dimensions", NULL },
    { "zero_dim",            "a dimension of 0", b_zero_dim, NULL, H_GGUF, E(EINVAL), "is zero", NULL },
    { "dims_product_overflow","dims 2^32 x 2^32 (element count overflows int64)", b_dims_product_overflow, NULL, H_GGUF, E(EINVAL), "overflows", NULL },
    { "dim_over_int64",      "a dimension of 2^63", b_dim_over_int64, NULL, H_GGUF, E(EINVAL), "overflows", NULL },
    { "nbytes_overflow",     "2^62 F32 elements (byte size overflows u64)", b_nbytes_overflow, NULL, H_GGUF, E(EINVAL), "overflows", NULL },
    { "nbytes_past_eof",     "token_embd with 2^20 rows (data past the end)", b_nbytes_past_eof, NULL, H_GGUF, E(EINVAL), "past the end of the file", NULL },
    { "offset_past_eof",     "a data offset of 2^40", b_offset_past_eof, NULL, H_GGUF, E(EINVAL), "past the end of the file", NULL },
    { "offset_max",          "a data offset of 2^64-32 (offset + size wraps)", b_offset_max, NULL, H_GGUF, E(EINVAL), "past the end of the file", NULL },
    { "offset_misaligned",   "a data offset of 16 (alignment 32)", b_offset_misaligned, NULL, H_GGUF, E(EINVAL), "alignment", NULL },
    { "overlap",             "two tensors at data offset 0", b_overlap, NULL, H_GGUF, E(EINVAL), "overlap", NULL },
    { "dup_tensor",          "blk.0.attn_q.weight twice", b_dup_tensor, NULL, H_GGUF, E(EINVAL), "duplicate tensor name", NULL },
    { "dup_ctrl_tensor",     "a tensor name with a newline and an escape sequence, twice", b_dup_ctrl_tensor, NULL, H_GGUF, E(EINVAL), "duplicate tensor name", NULL },
    { "unknown_tensor_type", "ggml type 99", b_unknown_tensor_type, NULL, H_GGUF, E(EINVAL), "unknown ggml type", NULL },
    { "removed_tensor_type", "ggml type 4 (Q4_2, removed from ggml)", b_removed_tensor_type, NULL, H_GGUF, E(EINVAL), "unknown ggml type", NULL },
    { "negative_tensor_type","ggml type 0xfffffff0", b_negative_tensor_type, NULL, H_GGUF, E(EINVAL), "unknown ggml type", NULL },
    { "row_not_block_multiple","Q8_0 row of 48 elements", b_row_not_block_multiple, NULL, H_GGUF, E(EINVAL), "block size", NULL },
    { "empty_tensor_name",   "a tensor named ''", b_empty_tensor_name, NULL, H_GGUF, E(EINVAL), "name length", NULL },
    { "long_tensor_name",    "a 300-byte tensor name", b_long_tensor_name, NULL, H_GGUF, E(EINVAL), "name length", NULL },
    { "tensor_name_past_eof","a tensor name length of 2^33", b_tensor_name_past_eof, NULL, H_GGUF, E(EINVAL), "past the end of the file", NULL },
    { "missing_arch",        "no general.architecture", b_missing_arch, NULL, H_MODEL, E(EINVAL), "general.architecture", NULL },
    { "wrong_arch",          "general.architecture = gpt2", b_wrong_arch, NULL, H_MODEL, E(ENOTSUP), "not supported", NULL },
    { "missing_embd_len",    "no llama.embedding_length", b_missing_embd_len, NULL, H_MODEL, E(EINVAL), "embedding_length", NULL },
    { "missing_block_count", "no llama.block_count", b_missing_block_count, NULL, H_MODEL, E(EINVAL), "block_count", NULL },
    { "missing_heads",       "no llama.attention.head_count", b_missing_heads, NULL, H_MODEL, E(EINVAL), "head_count", NULL },
    { "missing_ffn",         "no llama.feed_forward_length", b_missing_ffn, NULL, H_MODEL, E(EINVAL), "feed_forward_length", NULL },
    { "embd_len_string",     "llama.embedding_length is a string", b_embd_len_string, NULL, H_MODEL, E(EINVAL), "wrong type", NULL },
    { "embd_len_huge",       "llama.embedding_length = 2^31", b_embd_len_huge, NULL, H_MODEL, E(EINVAL), "out of range", NULL },
    { "heads_zero",          "head_count = 0", b_heads_zero, NULL, H_MODEL, E(EINVAL), "out of range", NULL },
    { "heads_not_divisor",   "head_count 3 does not divide dim 32", b_heads_not_divisor, NULL, H_MODEL, E(EINVAL), "multiple", NULL },
    { "kv_heads_not_divisor","head_count_kv 3 does not divide head_count 2", b_kv_heads_not_divisor, NULL, H_MODEL, E(EINVAL), "multiple", NULL },
    { "block_count_high",    "block_count 1000 with one block of tensors", b_block_count_high, NULL, H_MODEL, E(EINVAL), "missing", NULL },
    { "rms_eps_nan",         "rms epsilon NaN", b_rms_eps_nan, NULL, H_MODEL, E(EINVAL), "out of range", NULL },
    { "rope_base_negative",  "rope freq_base -1", b_rope_base_negative, NULL, H_MODEL, E(EINVAL), "out of range", NULL },
    { "missing_tensor",      "no blk.0.ffn_down.weight", b_missing_tensor, NULL, H_MODEL, E(EINVAL), "missing", NULL },
    { "missing_embd",        "no token_embd.weight", b_missing_embd, NULL, H_MODEL, E(EINVAL), "token_embd.weight", NULL },
    { "wrong_shape",         "attn_q is 32 x 16, not 32 x 32", b_wrong_shape, NULL, H_MODEL, E(EINVAL), "shape", NULL },
    { "tensor_3d",           "attn_q folded to 32 x 16 x 2", b_3d_tensor, NULL, H_MODEL, E(EINVAL), "shape", NULL },
    { "unsupported_tq2_0",   "ffn_down stored as TQ2_0", b_unsupported_tq2_0, NULL, H_MODEL, E(ENOTSUP), "not support", NULL },
    { "rope_base_inf",       "rope freq_base +Inf", b_rope_base_inf, NULL, H_MODEL, E(EINVAL), "out of range", NULL },
    { "rope_factor_no_type", "rope.scaling.factor 4 without rope.scaling.type (linear, as llama.cpp reads it)", b_rope_factor_no_type, NULL, H_OK, 0, NULL, NULL },
    { "rope_scale_linear_legacy","legacy rope.scale_linear 2 (linear)", b_rope_scale_linear_legacy, NULL, H_OK, 0, NULL, NULL },
    { "rope_factor_zero",    "rope.scaling.factor 0", b_rope_factor_zero, NULL, H_MODEL, E(EINVAL), "must be > 0", NULL },
    { "rope_factor_negative","rope.scaling.factor -2", b_rope_factor_negative, NULL, H_MODEL, E(EINVAL), "must be > 0", NULL },
    { "rope_factor_nan",     "rope.scaling.factor NaN", b_rope_factor_nan, NULL, H_MODEL, E(EINVAL), "not a finite number", NULL },
    { "rope_factor_string",  "rope.scaling.factor is a string", b_rope_factor_string, NULL, H_MODEL, E(EINVAL), "must be a float", NULL },
    { "rope_type_u32",       "rope.scaling.type is a u32", b_rope_type_u32, NULL, H_MODEL, E(EINVAL), "must be a string", NULL },
    { "rope_type_yarn",      "rope.scaling.type yarn (not implemented)", b_rope_type_yarn, NULL, H_MODEL, E(ENOTSUP), "supported: none, linear", NULL },
    { "rope_dims_short",     "rope.dimension_count 8 with head_dim 16 (llama rotates whole heads)", b_rope_dims_short, NULL, H_MODEL, E(EINVAL), "differs from the head size", NULL },
    { "expert_count",        "llama.expert_count 8 (a mixture of experts) without expert_used_count", b_expert_count, NULL, H_MODEL, E(EINVAL), "expert_used_count", NULL },
    { "expert_used_zero",    "llama.expert_count 8, expert_used_count 0", b_expert_used_zero, NULL, H_MODEL, E(EINVAL), "expert_used_count = 0", NULL },
    { "expert_used_over",    "llama.expert_count 8, expert_used_count 9", b_expert_used_over, NULL, H_MODEL, E(EINVAL), "must be in [1, expert_count = 8]", NULL },
    { "expert_no_router",    "a llama with 8 experts of 2 that holds a dense FFN and no router or expert stacks", b_expert_no_router, NULL, H_MODEL, E(EINVAL), "ffn_gate_inp.weight is missing", NULL },
    { "extra_block",         "a blk.1 tensor with block_count 1", b_extra_block, NULL, H_MODEL, E(ENOTSUP), "block_count is 1", NULL },
    { "unused_tensor",       "blk.0.attn_q.bias in a llama file (a tensor nothing uses)", b_unused_bias, NULL, H_MODEL, E(ENOTSUP), "not part of a llama model", NULL },
    { "rope_freqs_zero",     "rope_freqs.weight with a 0 factor", b_rope_freqs_zero, NULL, H_MODEL, E(EINVAL), "rope factors must be finite and > 0", NULL },
    { "rope_freqs_short",    "rope_freqs.weight of 7 factors for 8 rotated pairs", b_rope_freqs_short, NULL, H_MODEL, E(EINVAL), "shape", NULL },
    { "vocab_rows_mismatch", "embedding/output have one row fewer than the vocabulary", b_vocab_rows_mismatch, NULL, H_RUN, 0, "vocabulary has", NULL },
    { "tok_missing_tokens",  "no tokenizer.ggml.tokens", b_tok_missing_tokens, NULL, H_VOCAB, E(EINVAL), "tokenizer.ggml.tokens", NULL },
    { "tok_missing_model",   "no tokenizer.ggml.model", b_tok_missing_model, NULL, H_VOCAB, E(EINVAL), "tokenizer.ggml.model", NULL },
    { "tok_unknown_model",   "tokenizer.ggml.model = bert", b_tok_unknown_model, NULL, H_VOCAB, E(ENOTSUP), "bert", NULL },
    { "tok_ctrl_model",      "tokenizer.ggml.model is a newline and an escape sequence (fuzzer find)", b_tok_ctrl_model, NULL, H_VOCAB, E(ENOTSUP), "unsupported tokenizer model", NULL },
    { "tok_scores_short",    "8 scores for 56 tokens", b_tok_scores_short, NULL, H_VOCAB, E(EINVAL), "scores", NULL },
    { "tok_scores_strings",  "scores is a string array", b_tok_scores_strings, NULL, H_VOCAB, E(EINVAL), "scores", NULL },
    { "tok_types_float",     "token_type is a float array", b_tok_types_float, NULL, H_VOCAB, E(EINVAL), "token_type", NULL },
    { "tok_bos_out_of_range","bos id 100000 (ignored as llama.cpp does: the default <s> stays)", b_tok_bos_out_of_range, NULL, H_OK, 0, NULL, NULL },
    { "tok_eos_out_of_range","eos id 2^32-1 (ignored as llama.cpp does)", b_tok_eos_out_of_range, NULL, H_OK, 0, NULL, NULL },
    { "nan_output_norm",     "a NaN in output_norm.weight", b_nan_output_norm, NULL, H_NONFINITE, 0, "non-finite", NULL },
    { "inf_attn_norm",       "+Inf in blk.0.attn_norm.weight", b_inf_attn_norm, NULL, H_NONFINITE, 0, "non-finite", NULL },
    { "nan_embd",            "a NaN in every row of an F32 token_embd", b_nan_embd_f32, NULL, H_NONFINITE, 0, "non-finite", NULL },
};
#undef E
#define N_CASES (sizeof g_cases / sizeof g_cases[0])

#endif
