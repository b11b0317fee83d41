/* tests/util/gguf_craft.c — in-memory GGUF images with every field under the test's control.
 * See gguf_craft.h.  Allocation failures abort: this is test support, not product code. */
#include "gguf_craft.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/types.h"
#include "loader/gguf.h"

/* Data placed beyond this many bytes into the data section is not materialised: a tensor that
 * claims to be huge (the point of an overflow case) gets its info written but no data. */
#define GC_MAX_DATA (64u << 20)

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) { fprintf(stderr, "gguf_craft: out of memory (%zu bytes)\n", n); abort(); }
    return q;
}

static void *xmemdup(const void *p, size_t n)
{
    void *q = xrealloc(NULL, n);
    if (n) memcpy(q, p, n);
    return q;
}

/* splitmix64: small, seedable, good enough to make data that is "not zeros". */
static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t hash_bytes(const void *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
    return h;
}

void gc_init(gc_file *f)
{
    memset(f, 0, sizeof *f);
    f->magic = 0x46554747u;   /* "GGUF" */
    f->version = 3;
    f->n_tensors_disk = GC_AUTO;
    f->n_kv_disk = GC_AUTO;
    f->alignment = 32;
    f->seed = 1;
}

void gc_free(gc_file *f)
{
    for (size_t i = 0; i < f->n_kv; i++) { free(f->kv[i].key); free(f->kv[i].val); }
    for (size_t i = 0; i < f->n_t; i++) { free(f->t[i].name); free(f->t[i].data); }
    free(f->kv);
    free(f->t);
    memset(f, 0, sizeof *f);
}

/* ---- key/values ------------------------------------------------------------------------------- */

gc_kv *gc_kv_raw(gc_file *f, const char *key, size_t key_len, uint32_t type, const void *val, size_t val_len)
{
    if (f->n_kv == f->cap_kv) {
        f->cap_kv = f->cap_kv ? f->cap_kv * 2 : 16;
        f->kv = xrealloc(f->kv, f->cap_kv * sizeof *f->kv);
    }
    gc_kv *e = &f->kv[f->n_kv++];
    e->key = xmemdup(key, key_len);
    e->key_len = key_len;
    e->key_len_disk = GC_AUTO;
    e->type = type;
    e->val = xmemdup(val, val_len);
    e->val_len = val_len;
    return e;
}

void gc_kv_set(gc_kv *e, uint32_t type, const void *val, size_t val_len)
{
    free(e->val);
    e->val = xmemdup(val, val_len);
    e->val_len = val_len;
    if (type != GC_KEEP_TYPE) e->type = type;
}

#define SCALAR(fn, ctype, tid) \
    gc_kv *fn(gc_file *f, const char *key, ctype v) { return gc_kv_raw(f, key, strlen(key), tid, &v, sizeof v); }
SCALAR(gc_kv_u8, uint8_t, SL_GGUF_U8)
SCALAR(gc_kv_i8, int8_t, SL_GGUF_I8)
SCALAR(gc_kv_u16, uint16_t, SL_GGUF_U16)
SCALAR(gc_kv_i16, int16_t, SL_GGUF_I16)
SCALAR(gc_kv_u32, uint32_t, SL_GGUF_U32)
SCALAR(gc_kv_i32, int32_t, SL_GGUF_I32)
SCALAR(gc_kv_f32, float, SL_GGUF_F32)
SCALAR(gc_kv_u64, uint64_t, SL_GGUF_U64)
SCALAR(gc_kv_i64, int64_t, SL_GGUF_I64)
SCALAR(gc_kv_f64, double, SL_GGUF_F64)
#undef SCALAR

gc_kv *gc_kv_bool(gc_file *f, const char *key, bool v)
{
    uint8_t b = v;
    return gc_kv_raw(f, key, strlen(key), SL_GGUF_BOOL, &b, 1);
}

gc_kv *gc_kv_str(gc_file *f, const char *key, const char *s)
{
    uint64_t n = strlen(s);
    unsigned char *buf = xrealloc(NULL, 8 + n);
    memcpy(buf, &n, 8);
    memcpy(buf + 8, s, n);
    gc_kv *e = gc_kv_raw(f, key, strlen(key), SL_GGUF_STRING, buf, 8 + n);
    free(buf);
    return e;
}

gc_kv *gc_kv_arr(gc_file *f, const char *key, uint32_t elem_type, const void *elems, uint64_t n, size_t elem_size)
{
    size_t len = 12 + (size_t)n * elem_size;
    unsigned char *buf = xrealloc(NULL, len);
    memcpy(buf, &elem_type, 4);
    memcpy(buf + 4, &n, 8);
    if (n) memcpy(buf + 12, elems, (size_t)n * elem_size);
    gc_kv *e = gc_kv_raw(f, key, strlen(key), SL_GGUF_ARRAY, buf, len);
    free(buf);
    return e;
}

gc_kv *gc_kv_arr_str(gc_file *f, const char *key, const char *const *s, uint64_t n)
{
    size_t len = 12;
    for (uint64_t i = 0; i < n; i++) len += 8 + strlen(s[i]);
    unsigned char *buf = xrealloc(NULL, len);
    uint32_t et = SL_GGUF_STRING;
    memcpy(buf, &et, 4);
    memcpy(buf + 4, &n, 8);
    size_t at = 12;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t l = strlen(s[i]);
        memcpy(buf + at, &l, 8);
        memcpy(buf + at + 8, s[i], l);
        at += 8 + l;
    }
    gc_kv *e = gc_kv_raw(f, key, strlen(key), SL_GGUF_ARRAY, buf, len);
    free(buf);
    return e;
}

gc_kv *gc_find_kv(gc_file *f, const char *key)
{
    size_t n = strlen(key);
    for (size_t i = 0; i < f->n_kv; i++)
        if (f->kv[i].key_len == n && !memcmp(f->kv[i].key, key, n)) return &f->kv[i];
    return NULL;
}

bool gc_del_kv(gc_file *f, const char *key)
{
    gc_kv *e = gc_find_kv(f, key);
    if (!e) return false;
    free(e->key);
    free(e->val);
    size_t i = (size_t)(e - f->kv);
    memmove(e, e + 1, (f->n_kv - i - 1) * sizeof *e);
    f->n_kv--;
    return true;
}

/* ---- tensors ---------------------------------------------------------------------------------- */

gc_tensor *gc_tensor_add(gc_file *f, const char *name, uint32_t type, uint32_t n_dims, const uint64_t *ne,
                         float center, float scale)
{
    if (f->n_t == f->cap_t) {
        f->cap_t = f->cap_t ? f->cap_t * 2 : 16;
        f->t = xrealloc(f->t, f->cap_t * sizeof *f->t);
    }
    gc_tensor *t = &f->t[f->n_t++];
    memset(t, 0, sizeof *t);
    t->name_len = strlen(name);
    t->name = xmemdup(name, t->name_len);
    t->name_len_disk = GC_AUTO;
    t->n_dims = n_dims;
    t->type = type;
    t->offset = GC_AUTO;
    for (uint32_t d = 0; d < n_dims && d < GC_MAX_DIMS; d++) t->ne[d] = ne[d];

    /* Materialise data only for a sane shape of a known type. */
    const sl_type_info *ti = sl_type_get((int)type);
    if (!ti || n_dims < 1 || n_dims > GC_MAX_DIMS || ne[0] == 0 || ne[0] % (uint64_t)ti->blck) return t;
    uint64_t nelem = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] == 0 || ne[d] > GC_MAX_DATA || nelem > GC_MAX_DATA / ne[d]) return t;
        nelem *= ne[d];
    }
    uint64_t nbytes = nelem / (uint64_t)ti->blck * (uint64_t)ti->bytes;
    if (nbytes > GC_MAX_DATA) return t;
    t->nbytes = nbytes;
    t->data = xrealloc(NULL, (size_t)nbytes);
    uint64_t s = f->seed ^ hash_bytes(name, t->name_len);
    if (ti->quantize) {
        float *x = xrealloc(NULL, (size_t)nelem * sizeof *x);
        for (uint64_t i = 0; i < nelem; i++)
            x[i] = center + scale * (float)((double)(mix(&s) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
        ti->quantize(x, t->data, (int64_t)nelem);
        free(x);
    } else {
        for (uint64_t i = 0; i < nbytes; i++) t->data[i] = (unsigned char)mix(&s);
    }
    return t;
}

gc_tensor *gc_find_tensor(gc_file *f, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < f->n_t; i++)
        if (f->t[i].name_len == n && !memcmp(f->t[i].name, name, n)) return &f->t[i];
    return NULL;
}

bool gc_del_tensor(gc_file *f, const char *name)
{
    gc_tensor *t = gc_find_tensor(f, name);
    if (!t) return false;
    free(t->name);
    free(t->data);
    size_t i = (size_t)(t - f->t);
    memmove(t, t + 1, (f->n_t - i - 1) * sizeof *t);
    f->n_t--;
    return true;
}

void gc_tensor_set_f32(gc_tensor *t, uint64_t i, float v)
{
    if (t->type == SL_TYPE_F32 && t->data && (i + 1) * 4 <= t->nbytes) memcpy(t->data + i * 4, &v, 4);
}

/* ---- serialisation ---------------------------------------------------------------------------- */

typedef struct obuf {
    unsigned char *p;
    size_t len, cap;
    size_t *b;
    size_t nb, capb;
} obuf;

static void put(obuf *o, const void *src, size_t n)
{
    if (o->len + n > o->cap) {
        while (o->len + n > o->cap) o->cap = o->cap ? o->cap * 2 : 4096;
        o->p = xrealloc(o->p, o->cap);
    }
    if (n) memcpy(o->p + o->len, src, n);
    o->len += n;
}

static void mark(obuf *o)
{
    if (o->nb && o->b[o->nb - 1] == o->len) return;
    if (o->nb == o->capb) {
        o->capb = o->capb ? o->capb * 2 : 256;
        o->b = xrealloc(o->b, o->capb * sizeof *o->b);
    }
    o->b[o->nb++] = o->len;
}

static void put_u32(obuf *o, uint32_t v) { mark(o); put(o, &v, 4); }
static void put_u64(obuf *o, uint64_t v) { mark(o); put(o, &v, 8); }

static uint64_t align_up(uint64_t x, uint64_t a) { return a ? (x + a - 1) / a * a : x; }

int gc_build(const gc_file *f, gc_image *img)
{
    obuf o = { 0 };
    put_u32(&o, f->magic);
    put_u32(&o, f->version);
    put_u64(&o, f->n_tensors_disk == GC_AUTO ? f->n_t : f->n_tensors_disk);
    put_u64(&o, f->n_kv_disk == GC_AUTO ? f->n_kv : f->n_kv_disk);
    for (size_t i = 0; i < f->n_kv; i++) {
        const gc_kv *e = &f->kv[i];
        put_u64(&o, e->key_len_disk == GC_AUTO ? e->key_len : e->key_len_disk);
        mark(&o);
        put(&o, e->key, e->key_len);
        put_u32(&o, e->type);
        mark(&o);
        /* mark inside arrays too: element type, count, and each string element's length */
        if (e->type == SL_GGUF_ARRAY && e->val_len >= 12) {
            uint32_t et;
            memcpy(&et, e->val, 4);
            put_u32(&o, et);
            uint64_t n;
            memcpy(&n, e->val + 4, 8);
            put_u64(&o, n);
            size_t at = 12;
            if (et == SL_GGUF_STRING) {
                for (uint64_t k = 0; k < n && at + 8 <= e->val_len; k++) {
                    uint64_t l;
                    memcpy(&l, e->val + at, 8);
                    size_t take = l <= e->val_len - at - 8 ? (size_t)l : e->val_len - at - 8;
                    put_u64(&o, l);
                    mark(&o);
                    put(&o, e->val + at + 8, take);
                    at += 8 + take;
                }
            }
            mark(&o);
            put(&o, e->val + at, e->val_len - at);
        } else {
            put(&o, e->val, e->val_len);
        }
    }
    uint64_t run = 0, data_end = 0;
    uint64_t *offs = xrealloc(NULL, (f->n_t ? f->n_t : 1) * sizeof *offs);
    for (size_t i = 0; i < f->n_t; i++) {
        const gc_tensor *t = &f->t[i];
        put_u64(&o, t->name_len_disk == GC_AUTO ? t->name_len : t->name_len_disk);
        mark(&o);
        put(&o, t->name, t->name_len);
        put_u32(&o, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims && d < GC_MAX_DIMS; d++) put_u64(&o, t->ne[d]);
        put_u32(&o, t->type);
        if (t->offset == GC_AUTO) {
            run = align_up(run, f->alignment);
            offs[i] = run;
            run += t->nbytes;
        } else {
            offs[i] = t->offset;
        }
        put_u64(&o, offs[i]);
        if (t->data && offs[i] <= GC_MAX_DATA && t->nbytes <= GC_MAX_DATA - offs[i] && offs[i] + t->nbytes > data_end)
            data_end = offs[i] + t->nbytes;
    }
    mark(&o);
    size_t data_off = (size_t)align_up(o.len, f->alignment);
    static const unsigned char zero[64];
    while (o.len < data_off) put(&o, zero, data_off - o.len < sizeof zero ? data_off - o.len : sizeof zero);
    mark(&o);
    /* data section: zero-filled, then each tensor's bytes at its offset (overlaps just overwrite) */
    size_t start = o.len;
    for (uint64_t k = 0; k < data_end; k += sizeof zero)
        put(&o, zero, data_end - k < sizeof zero ? (size_t)(data_end - k) : sizeof zero);
    for (size_t i = 0; i < f->n_t; i++) {
        const gc_tensor *t = &f->t[i];
        if (!t->data || offs[i] > GC_MAX_DATA || t->nbytes > GC_MAX_DATA - offs[i]) continue;
        memcpy(o.p + start + offs[i], t->data, t->nbytes);
    }
    /* boundaries of the tensor data, in file order */
    for (size_t i = 0; i < f->n_t; i++)
        if (f->t[i].data && offs[i] < data_end) {
            if (o.nb == o.capb) { o.capb *= 2; o.b = xrealloc(o.b, o.capb * sizeof *o.b); }
            o.b[o.nb++] = start + offs[i];
        }
    free(offs);
    if (o.nb == o.capb) { o.capb *= 2; o.b = xrealloc(o.b, o.capb * sizeof *o.b); }
    o.b[o.nb++] = o.len;
    /* sort + dedupe the boundary list (tensor data marks may be out of order) */
    for (size_t i = 1; i < o.nb; i++)
        for (size_t j = i; j > 0 && o.b[j - 1] > o.b[j]; j--) { size_t x = o.b[j]; o.b[j] = o.b[j - 1]; o.b[j - 1] = x; }
    size_t k = 0;
    for (size_t i = 0; i < o.nb; i++) if (!k || o.b[k - 1] != o.b[i]) o.b[k++] = o.b[i];
    img->p = o.p;
    img->len = o.len;
    img->data_off = data_off;
    img->bounds = o.b;
    img->n_bounds = k;
    return 0;
}

void gc_image_free(gc_image *img)
{
    free(img->p);
    free(img->bounds);
    memset(img, 0, sizeof *img);
}

int gc_write_file(const gc_image *img, size_t len, const char *path)
{
    if (len > img->len) len = img->len;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return -errno;
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, img->p + done, len - done);
        if (w < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            close(fd);
            return -e;
        }
        done += (size_t)w;
    }
    return close(fd) ? -errno : 0;
}

/* ---- a tiny valid llama ----------------------------------------------------------------------- */

/* Vocabulary: <unk> <s> </s>, "▁", a..z, "▁a".."▁z" (no byte tokens: other characters become <unk>,
 * which keeps the files small enough to commit dozens of them). */
#define GC_VOCAB (3 + 1 + 26 + 26)

int gc_llama_vocab_size(void) { return GC_VOCAB; }

static void add_vocab(gc_file *f)
{
    static char texts[GC_VOCAB][8];
    const char *tok[GC_VOCAB];
    float score[GC_VOCAB];
    int32_t type[GC_VOCAB];
    int n = 0;
    const char *spec[3] = { "<unk>", "<s>", "</s>" };
    for (int i = 0; i < 3; i++) { snprintf(texts[n], sizeof texts[n], "%s", spec[i]); score[n] = 0; type[n++] = i ? 3 : 2; }
    snprintf(texts[n], sizeof texts[n], "\xE2\x96\x81"); score[n] = -3; type[n++] = 1;
    for (int c = 0; c < 26; c++) { snprintf(texts[n], sizeof texts[n], "%c", 'a' + c); score[n] = -2 - c * 0.01f; type[n++] = 1; }
    for (int c = 0; c < 26; c++) { snprintf(texts[n], sizeof texts[n], "\xE2\x96\x81%c", 'a' + c); score[n] = -1 - c * 0.01f; type[n++] = 1; }
    for (int i = 0; i < n; i++) tok[i] = texts[i];
    gc_kv_str(f, "tokenizer.ggml.model", "llama");
    gc_kv_arr_str(f, "tokenizer.ggml.tokens", tok, (uint64_t)n);
    gc_kv_arr(f, "tokenizer.ggml.scores", SL_GGUF_F32, score, (uint64_t)n, 4);
    gc_kv_arr(f, "tokenizer.ggml.token_type", SL_GGUF_I32, type, (uint64_t)n, 4);
    gc_kv_u32(f, "tokenizer.ggml.bos_token_id", 1);
    gc_kv_u32(f, "tokenizer.ggml.eos_token_id", 2);
    gc_kv_u32(f, "tokenizer.ggml.unknown_token_id", 0);
    gc_kv_bool(f, "tokenizer.ggml.add_bos_token", true);
    gc_kv_bool(f, "tokenizer.ggml.add_eos_token", false);
}

void gc_llama(gc_file *f, const gc_llama_cfg *cfg_in)
{
    gc_llama_cfg c = *cfg_in;
    if (!c.dim) c.dim = 32;
    if (!c.n_layers) c.n_layers = 1;
    if (!c.n_heads) c.n_heads = 2;
    if (!c.n_kv_heads) c.n_kv_heads = 1;
    if (!c.ffn) c.ffn = 64;
    if (!c.ctx) c.ctx = 64;
    if (!c.seed) c.seed = 1;
    f->seed = c.seed;
    const uint64_t hd = (uint64_t)(c.dim / c.n_heads), kvd = hd * (uint64_t)c.n_kv_heads, dim = (uint64_t)c.dim;
    const uint64_t ffn = (uint64_t)c.ffn, nv = GC_VOCAB;

    gc_kv_str(f, "general.architecture", "llama");
    gc_kv_str(f, "general.name", "craft-llama");
    gc_kv_u32(f, "llama.context_length", (uint32_t)c.ctx);
    gc_kv_u32(f, "llama.embedding_length", (uint32_t)c.dim);
    gc_kv_u32(f, "llama.block_count", (uint32_t)c.n_layers);
    gc_kv_u32(f, "llama.feed_forward_length", (uint32_t)c.ffn);
    gc_kv_u32(f, "llama.rope.dimension_count", (uint32_t)hd);
    gc_kv_u32(f, "llama.attention.head_count", (uint32_t)c.n_heads);
    gc_kv_u32(f, "llama.attention.head_count_kv", (uint32_t)c.n_kv_heads);
    gc_kv_f32(f, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    gc_kv_f32(f, "llama.rope.freq_base", 10000.0f);
    add_vocab(f);

    /* Fan-in scaled uniform weights keep activations O(1); norms are 1 ± 0.1 so a missing norm shows. */
    const float ws = 1.0f / 8.0f;
    gc_tensor_add(f, "token_embd.weight", c.wtype, 2, (uint64_t[]){ dim, nv }, 0, 1.0f);
    char name[64];
    for (int l = 0; l < c.n_layers; l++) {
#define T(suffix, nd, ...) (snprintf(name, sizeof name, "blk.%d." suffix, l), \
        gc_tensor_add(f, name, nd == 1 ? 0 : c.wtype, nd, (uint64_t[]){ __VA_ARGS__ }, nd == 1 ? 1.0f : 0, nd == 1 ? 0.1f : ws))
        T("attn_norm.weight", 1, dim);
        T("attn_q.weight", 2, dim, hd * (uint64_t)c.n_heads);
        T("attn_k.weight", 2, dim, kvd);
        T("attn_v.weight", 2, dim, kvd);
        T("attn_output.weight", 2, hd * (uint64_t)c.n_heads, dim);
        T("ffn_norm.weight", 1, dim);
        T("ffn_gate.weight", 2, dim, ffn);
        T("ffn_up.weight", 2, dim, ffn);
        T("ffn_down.weight", 2, ffn, dim);
#undef T
    }
    gc_tensor_add(f, "output_norm.weight", 0, 1, (uint64_t[]){ dim }, 1.0f, 0.1f);
    gc_tensor_add(f, "output.weight", c.wtype, 2, (uint64_t[]){ dim, nv }, 0, ws);
}
