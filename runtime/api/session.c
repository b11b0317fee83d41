/* runtime/api/session.c — session files: XXH64, the model fingerprint, the codec, save and load.
 * The file format is described in runtime/api/session.h; the measurements behind the default codec in
 * docs/sessions.md. */
#include "runtime/api/session.h"
#include "runtime/api/session_path.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "loader/errmsg.h"
#include "loader/fileio.h"
#include "loader/gguf.h"
#include "runtime/engine/kvcache.h"
#include "kernels/clock.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "session files are little-endian and read by memcpy: a big-endian port must byte-swap here"
#endif

#define CHUNK_TARGET (1u << 20)      /* bytes of KV rows per shuffle/hash group when saving */
#define MAX_CHUNK    (64u << 20)     /* refuse files whose groups would need more than this */


/* ---- XXH64 ------------------------------------------------------------------------------------
 * Implemented from the xxHash specification (doc/xxhash_spec.md): 4 lanes over 32-byte stripes,
 * a merge of the lanes, the tail in 8/4/1-byte steps, and the final avalanche.  Checked in
 * tests/test_session.c against the published empty-input value and against the low 32 bits that
 * zstd stores as a frame's content checksum. */

#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull
#define P4 0x85EBCA77C2B2AE63ull
#define P5 0x27D4EB2F165667C5ull

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static inline uint64_t rd64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint32_t rd32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t xround(uint64_t acc, uint64_t in) { return rotl64(acc + in * P2, 31) * P1; }
static inline uint64_t xmerge(uint64_t h, uint64_t v) { return (h ^ xround(0, v)) * P1 + P4; }

static void xstripe(uint64_t *v, const unsigned char *p)
{
    v[0] = xround(v[0], rd64(p));
    v[1] = xround(v[1], rd64(p + 8));
    v[2] = xround(v[2], rd64(p + 16));
    v[3] = xround(v[3], rd64(p + 24));
}

void sl_xxh64_init(sl_xxh64_state *s, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    s->seed = seed;
    s->v[0] = seed + P1 + P2;
    s->v[1] = seed + P2;
    s->v[2] = seed;
    s->v[3] = seed - P1;
}

void sl_xxh64_update(sl_xxh64_state *s, const void *data, size_t n)
{
    const unsigned char *p = data;
    s->total += n;
    if (s->nbuf + n < 32) {
        if (n) memcpy(s->buf + s->nbuf, p, n);
        s->nbuf += (unsigned)n;
        return;
    }
    if (s->nbuf) {
        size_t take = 32 - s->nbuf;
        memcpy(s->buf + s->nbuf, p, take);
        xstripe(s->v, s->buf);
        p += take;
        n -= take;
        s->nbuf = 0;
    }
    for (; n >= 32; p += 32, n -= 32) xstripe(s->v, p);
    if (n) memcpy(s->buf, p, n);
    s->nbuf = (unsigned)n;
}

uint64_t sl_xxh64_digest(const sl_xxh64_state *s)
{
    uint64_t h;
    if (s->total >= 32) {
        h = rotl64(s->v[0], 1) + rotl64(s->v[1], 7) + rotl64(s->v[2], 12) + rotl64(s->v[3], 18);
        for (int i = 0; i < 4; i++) h = xmerge(h, s->v[i]);
    } else {
        h = s->seed + P5;
    }
    h += s->total;
    const unsigned char *p = s->buf;
    size_t n = s->nbuf;
    for (; n >= 8; p += 8, n -= 8) h = rotl64(h ^ xround(0, rd64(p)), 27) * P1 + P4;
    if (n >= 4) { h = rotl64(h ^ (uint64_t)rd32(p) * P1, 23) * P2 + P3; p += 4; n -= 4; }
    for (; n; p++, n--) h = rotl64(h ^ (uint64_t)*p * P5, 11) * P1;
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}

uint64_t sl_xxh64(const void *p, size_t n, uint64_t seed)
{
    sl_xxh64_state s;
    sl_xxh64_init(&s, seed);
    sl_xxh64_update(&s, p, n);
    return sl_xxh64_digest(&s);
}

/* ---- plain I/O --------------------------------------------------------------------------------- */

/* Write all of p[0..n) at the file position: EINTR retried, short writes continued.  0 or -errno. */
static int write_all(int fd, const void *p, size_t n)
{
    const unsigned char *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return w < 0 ? -errno : -EIO;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Read up to n bytes at the file position, finishing short reads; returns the count (less than n only
 * at end of file) or -errno. */
static ssize_t read_full(int fd, void *p, size_t n)
{
    unsigned char *b = p;
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, b + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -errno;
        if (r == 0) break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

/* ---- fingerprint ------------------------------------------------------------------------------- */

int sl_model_fingerprint(const sl_model *m, uint64_t *fp, char *err, size_t errlen)
{
    uint64_t fsize = sl_gguf_file_size(m->gguf), doff = sl_gguf_data_offset(m->gguf);
    char pb[SL_PATH_BRIEF];
    int fd = sl_open_regular(m->path, 0, NULL);
    if (fd < 0) {
        snprintf(err, errlen, "session: cannot open %s to fingerprint it: %s", sl_path_brief(m->path, pb),
                 fd == -EINVAL ? "not a regular file any more" : strerror(-fd));
        return fd;
    }
    enum { BUF = 1 << 20, SAMPLE = 64 << 10 };
    unsigned char *buf = malloc(BUF);
    if (!buf) { close(fd); return -ENOMEM; }
    sl_xxh64_state s;
    sl_xxh64_init(&s, 0);
    sl_xxh64_update(&s, &fsize, sizeof fsize);
    int rc = 0;
    for (uint64_t at = 0; at < doff && !rc; at += BUF) {
        size_t n = doff - at < BUF ? (size_t)(doff - at) : BUF;
        if (!(rc = sl_pread_full(fd, buf, n, at))) sl_xxh64_update(&s, buf, n);
    }
    uint64_t dlen = fsize > doff ? fsize - doff : 0, sl = dlen < SAMPLE ? dlen : SAMPLE;
    uint64_t where[3] = { doff, doff + (dlen - sl) / 2, fsize - sl };
    for (int i = 0; i < 3 && !rc && sl; i++)
        if (!(rc = sl_pread_full(fd, buf, (size_t)sl, where[i]))) sl_xxh64_update(&s, buf, (size_t)sl);
    if (rc) snprintf(err, errlen, "session: reading %s to fingerprint it: %s", m->path, strerror(-rc));
    free(buf);
    close(fd);
    *fp = sl_xxh64_digest(&s);
    return rc;
}

/* ---- codec ------------------------------------------------------------------------------------ */

sl_session_opts sl_session_default_opts(void) { return (sl_session_opts){ SL_SESS_ZSTD, 1, false }; }

/* Byte-plane shuffle of n bytes made of es-byte elements: plane b holds byte b of every element. */
static void shuffle(unsigned char *dst, const unsigned char *src, size_t n, int es)
{
    size_t ne = n / (size_t)es;
    for (size_t i = 0; i < ne; i++)
        for (int b = 0; b < es; b++) dst[(size_t)b * ne + i] = src[i * (size_t)es + (size_t)b];
}

static void unshuffle(unsigned char *dst, const unsigned char *src, size_t n, int es)
{
    size_t ne = n / (size_t)es;
    for (int b = 0; b < es; b++)
        for (size_t i = 0; i < ne; i++) dst[i * (size_t)es + (size_t)b] = src[(size_t)b * ne + i];
}

static int grow(unsigned char **buf, size_t *cap, size_t n)
{
    if (*cap >= n) return 0;
    unsigned char *nb = realloc(*buf, n);
    if (!nb) return -ENOMEM;
    *buf = nb;
    *cap = n;
    return 0;
}

/* The element size a section is shuffled with (1: not shuffled). */
static int kv_elem(int kv_type) { return kv_type == SL_KV_F16 ? 2 : kv_type == SL_KV_F32 ? 4 : 1; }

typedef struct wsink {
    int fd, codec;
    ZSTD_CCtx *z;
    unsigned char *out, *shuf;
    size_t out_cap, shuf_cap;
    sl_xxh64_state h;
    uint64_t raw, written;
} wsink;

/* Feed one section (or group) of logical bytes through hash, shuffle and compressor to the file. */
static int sink_put(wsink *w, const void *p, size_t n, int es)
{
    sl_xxh64_update(&w->h, p, n);
    w->raw += n;
    const void *src = p;
    if (w->codec == SL_SESS_ZSTD_SHUFFLE && es > 1 && n % (size_t)es == 0) {
        if (grow(&w->shuf, &w->shuf_cap, n)) return -ENOMEM;
        shuffle(w->shuf, p, n, es);
        src = w->shuf;
    }
    if (w->codec == SL_SESS_RAW) {
        w->written += n;
        return write_all(w->fd, src, n);
    }
    ZSTD_inBuffer in = { src, n, 0 };
    while (in.pos < in.size) {
        ZSTD_outBuffer o = { w->out, w->out_cap, 0 };
        size_t r = ZSTD_compressStream2(w->z, &o, &in, ZSTD_e_continue);
        if (ZSTD_isError(r)) return -EPROTO;
        int rc = write_all(w->fd, w->out, o.pos);
        if (rc) return rc;
        w->written += o.pos;
    }
    return 0;
}

static int sink_end(wsink *w)
{
    if (w->codec == SL_SESS_RAW) return 0;
    for (;;) {
        ZSTD_inBuffer in = { NULL, 0, 0 };
        ZSTD_outBuffer o = { w->out, w->out_cap, 0 };
        size_t r = ZSTD_compressStream2(w->z, &o, &in, ZSTD_e_end);
        if (ZSTD_isError(r)) return -EPROTO;
        int rc = write_all(w->fd, w->out, o.pos);
        if (rc) return rc;
        w->written += o.pos;
        if (r == 0) return 0;
    }
}

typedef struct rsrc {
    int fd, codec;
    ZSTD_DCtx *z;
    unsigned char *in, *shuf;
    size_t in_cap, shuf_cap;
    ZSTD_inBuffer zin;
    uint64_t left;            /* payload bytes not yet read from the file */
    size_t last_ret;          /* last ZSTD_decompressStream result: 0 = a frame just ended */
    sl_xxh64_state h;
    const char *why;          /* what went wrong (static text) */
} rsrc;

/* Produce the next n logical bytes into dst (undoing shuffle and compression).  0 or -errno with
 * r->why set. */
static int src_get(rsrc *r, void *dst, size_t n, int es)
{
    bool shuf = r->codec == SL_SESS_ZSTD_SHUFFLE && es > 1 && n % (size_t)es == 0;
    unsigned char *target = dst;
    if (shuf) {
        if (grow(&r->shuf, &r->shuf_cap, n)) return -ENOMEM;
        target = r->shuf;
    }
    if (r->codec == SL_SESS_RAW) {
        if (n > r->left) { r->why = "the payload ends early (truncated)"; return -EINVAL; }
        ssize_t got = read_full(r->fd, target, n);
        if (got < 0) { r->why = "read error"; return (int)got; }
        if ((size_t)got != n) { r->why = "the file ends early (truncated)"; return -EINVAL; }
        r->left -= n;
    } else {
        ZSTD_outBuffer o = { target, n, 0 };
        while (o.pos < n) {
            if (r->zin.pos == r->zin.size) {
                if (!r->left) { r->why = "the compressed payload ends early (truncated or corrupt)"; return -EINVAL; }
                size_t want = r->left < r->in_cap ? (size_t)r->left : r->in_cap;
                ssize_t got = read_full(r->fd, r->in, want);
                if (got < 0) { r->why = "read error"; return (int)got; }
                if ((size_t)got != want) { r->why = "the file ends early (truncated)"; return -EINVAL; }
                r->left -= want;
                r->zin = (ZSTD_inBuffer){ r->in, want, 0 };
            }
            size_t before = o.pos, ipos = r->zin.pos;
            r->last_ret = ZSTD_decompressStream(r->z, &o, &r->zin);
            if (ZSTD_isError(r->last_ret)) { r->why = "the compressed payload is corrupt"; return -EINVAL; }
            if (r->last_ret == 0 && o.pos < n) { r->why = "the compressed payload ends early (corrupt)"; return -EINVAL; }
            if (o.pos == before && r->zin.pos == ipos && r->zin.pos < r->zin.size) {
                r->why = "the compressed payload is corrupt (no progress)";
                return -EINVAL;
            }
        }
    }
    if (shuf) unshuffle(dst, r->shuf, n, es);
    sl_xxh64_update(&r->h, dst, n);
    return 0;
}

/* ---- save ------------------------------------------------------------------------------------- */

int sl_session_save(const char *path, sl_ctx *c, uint64_t model_fp, const int32_t *toks, int n, const float *logits,
                    const void *extra, size_t extra_len, const sl_session_opts *o, sl_session_info *info,
                    char *err, size_t errlen)
{
    uint64_t t0 = sl_now_ns();
    sl_session_opts def = sl_session_default_opts();
    if (!o) o = &def;
    const sl_config *cf = &c->m->cfg;
    if (n != c->n_past || n < 0 || (n && !toks) || extra_len > SL_SESS_MAX_EXTRA ||
        (o->codec != SL_SESS_RAW && o->codec != SL_SESS_ZSTD && o->codec != SL_SESS_ZSTD_SHUFFLE)) {
        snprintf(err, errlen, "session: bad arguments (%d tokens for %d positions, codec %d)", n, c->n_past, o->codec);
        return -EINVAL;
    }
    size_t row = sl_kv_row_bytes(c->kv);
    uint32_t chunk_rows = row >= CHUNK_TARGET ? 1 : (uint32_t)(CHUNK_TARGET / row);
    /* each layer from its lowest intact position (a sliding-window ring keeps only its last rows) */
    uint32_t *starts = calloc((size_t)cf->n_layers, sizeof *starts);
    if (!starts) { snprintf(err, errlen, "session: out of memory"); return -ENOMEM; }
    uint64_t kv_rows = 0;
    for (int l = 0; l < cf->n_layers; l++) {
        int lo = sl_kv_lo(c->kv, l);
        starts[l] = (uint32_t)(lo < n ? lo : n);
        kv_rows += (uint64_t)n - starts[l];
    }
    if (kv_rows > UINT32_MAX) {
        free(starts);
        snprintf(err, errlen, "session: %" PRIu64 " KV rows do not fit the format", kv_rows);
        return -EINVAL;
    }
    sl_sess_hdr h = { .version = SL_SESS_VERSION, .header_bytes = sizeof h, .model_fp = model_fp,
                      .n_layers = (uint32_t)cf->n_layers, .kv_dim = (uint32_t)(cf->n_kv_heads * cf->head_dim),
                      .kv_type = (uint32_t)sl_kv_type(c->kv), .row_bytes = (uint32_t)row, .n_ctx = (uint32_t)c->n_ctx,
                      .n_tokens = (uint32_t)n, .n_vocab = (uint32_t)cf->vocab, .has_logits = logits != NULL,
                      .codec = (uint32_t)o->codec, .level = (uint32_t)o->level, .extra_bytes = extra_len,
                      .chunk_rows = chunk_rows, .kv_rows = (uint32_t)kv_rows };
    memcpy(h.magic, SL_SESS_MAGIC, 8);

    char why[256] = "", pb[SL_PATH_BRIEF];
    sl_sess_target target;
    sl_sess_tmp tmp = { .fd = -1 };
    wsink w = { .codec = o->codec, .fd = -1 };
    sl_xxh64_init(&w.h, 0);
    unsigned char *rows = NULL;
    int rc = sl_sess_target_check(path, &h, o->overwrite, &target, why, sizeof why);
    if (rc) goto refused;
    const char *stage = "creating the file";
    w.fd = sl_sess_temp_open(path, &tmp);
    if (w.fd < 0) { rc = w.fd; goto fail; }
    stage = "allocating buffers";
    if (o->codec != SL_SESS_RAW) {
        w.z = ZSTD_createCCtx();
        w.out_cap = ZSTD_CStreamOutSize();
        w.out = malloc(w.out_cap);
        if (!w.z || !w.out) { rc = -ENOMEM; goto fail; }
        ZSTD_CCtx_setParameter(w.z, ZSTD_c_compressionLevel, o->level);
    }
    rows = malloc((size_t)chunk_rows * row);
    if (!rows) { rc = -ENOMEM; goto fail; }

    stage = "writing";
    unsigned char zero[sizeof h] = { 0 };
    if ((rc = write_all(w.fd, zero, sizeof zero))) goto fail;   /* the header is written last */
    if ((rc = sink_put(&w, toks, (size_t)n * sizeof *toks, 4))) goto fail;
    if (logits && (rc = sink_put(&w, logits, (size_t)cf->vocab * sizeof *logits, 4))) goto fail;
    if (extra_len && (rc = sink_put(&w, extra, extra_len, 1))) goto fail;
    if ((rc = sink_put(&w, starts, (size_t)cf->n_layers * sizeof *starts, 4))) goto fail;
    for (int l = 0; l < cf->n_layers; l++)
        for (int which = 0; which < 2; which++)
            for (int r0 = (int)starts[l]; r0 < n; r0 += (int)chunk_rows) {
                int nr = n - r0 < (int)chunk_rows ? n - r0 : (int)chunk_rows;
                if ((rc = sl_kv_export_rows(c->kv, l, which, r0, nr, rows))) { stage = sl_kv_errmsg(c->kv); goto fail; }
                if ((rc = sink_put(&w, rows, (size_t)nr * row, kv_elem(h.kv_type)))) goto fail;
            }
    if ((rc = sink_end(&w))) goto fail;
    h.raw_bytes = w.raw;
    h.payload_bytes = w.written;
    h.payload_hash = sl_xxh64_digest(&w.h);
    h.header_hash = sl_xxh64(&h, offsetof(sl_sess_hdr, header_hash), 0);
    if (pwrite(w.fd, &h, sizeof h, 0) != (ssize_t)sizeof h) { rc = errno ? -errno : -EIO; goto fail; }
    stage = "syncing";
    if (fsync(w.fd)) { rc = -errno; goto fail; }
    if ((rc = sl_sess_publish(&tmp, path, &target, why, sizeof why))) goto refused;
    sl_sess_temp_close(&tmp);
    ZSTD_freeCCtx(w.z);
    free(w.out);
    free(w.shuf);
    free(rows);
    free(starts);
    if (info)
        *info = (sl_session_info){ n, (int)h.kv_type, o->codec, h.raw_bytes, sizeof h + h.payload_bytes, sl_now_ns() - t0 };
    return 0;
fail:
    snprintf(why, sizeof why, "%s: %s", stage, rc == -EPROTO ? "zstd compression failed" : strerror(-rc));
refused:
    snprintf(err, errlen, "session %s: %s", sl_path_brief(path, pb), why);
    sl_sess_temp_close(&tmp);
    ZSTD_freeCCtx(w.z);
    free(w.out);
    free(w.shuf);
    free(rows);
    free(starts);
    return rc;
}

/* ---- load ------------------------------------------------------------------------------------- */

static const char *kv_name(uint32_t t) { return t == SL_KV_F16 ? "f16" : t == SL_KV_F32 ? "f32" : t == SL_KV_Q8_0 ? "q8_0" : "unknown"; }

/* A loaded session must not bring NaN or Inf into the context: the first forward pass would then
 * blame the model's weights.  Checked on the logical bytes as they are restored. */
static bool finite_f32(const float *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(p[i])) return false;
    return true;
}

/* f16 and the f16 scale of each q8_0 block: all exponent bits set means Inf or NaN. */
static bool rows_finite(const unsigned char *p, size_t n, uint32_t kv_type)
{
    if (kv_type == SL_KV_F32) {
        for (size_t i = 0; i + 4 <= n; i += 4) {
            float f;
            memcpy(&f, p + i, 4);
            if (!isfinite(f)) return false;
        }
        return true;
    }
    size_t step = kv_type == SL_KV_F16 ? 2 : 34;   /* q8_0: one f16 scale + 32 int8 per block */
    for (size_t i = 0; i + 2 <= n; i += step) {
        uint16_t v;
        memcpy(&v, p + i, 2);
        if ((v & 0x7c00) == 0x7c00) return false;
    }
    return true;
}

/* Every header check that can be made before reading the payload.  0, or -EINVAL/-ENOSPC with err. */
static int check_header(const sl_sess_hdr *h, uint64_t fsize, const sl_ctx *c, uint64_t model_fp, char *err, size_t errlen)
{
    const sl_config *cf = &c->m->cfg;
    if (memcmp(h->magic, SL_SESS_MAGIC, 8)) { snprintf(err, errlen, "not a sluice session file"); return -EINVAL; }
    if (h->version < 1 || h->version > SL_SESS_VERSION) {
        snprintf(err, errlen, "session format version %u; this sluice reads versions 1 to %u", h->version, SL_SESS_VERSION);
        return -EINVAL;
    }
    if (h->header_bytes != sizeof *h || h->header_hash != sl_xxh64(h, offsetof(sl_sess_hdr, header_hash), 0)) {
        snprintf(err, errlen, "the session header is corrupt (checksum mismatch)");
        return -EINVAL;
    }
    if (h->model_fp != model_fp || h->n_layers != (uint32_t)cf->n_layers || h->n_vocab != (uint32_t)cf->vocab ||
        h->kv_dim != (uint32_t)(cf->n_kv_heads * cf->head_dim)) {
        snprintf(err, errlen, "the session was saved with a different model (fingerprint %016" PRIx64 ", this model %016" PRIx64 ")",
                 h->model_fp, model_fp);
        return -EINVAL;
    }
    if (h->kv_type != (uint32_t)sl_kv_type(c->kv) || h->row_bytes != sl_kv_row_bytes(c->kv)) {
        snprintf(err, errlen, "the session holds a %s KV cache; this run uses %s", kv_name(h->kv_type),
                 kv_name((uint32_t)sl_kv_type(c->kv)));
        return -EINVAL;
    }
    if (h->codec > SL_SESS_ZSTD_SHUFFLE || h->has_logits > 1 || h->extra_bytes > SL_SESS_MAX_EXTRA ||
        h->chunk_rows == 0 || (uint64_t)h->chunk_rows * h->row_bytes > MAX_CHUNK) {
        snprintf(err, errlen, "the session header has invalid fields");
        return -EINVAL;
    }
    /* version 1: every layer's rows [0, n); 2: the per-layer starts, then kv_rows rows per array */
    const uint64_t kv_rows = h->version == 1 ? (uint64_t)h->n_layers * h->n_tokens : h->kv_rows;
    if ((h->version == 1 && h->kv_rows) || kv_rows > (uint64_t)h->n_layers * h->n_tokens) {
        snprintf(err, errlen, "the session header has invalid fields");
        return -EINVAL;
    }
    uint64_t want = (uint64_t)h->n_tokens * 4 + (h->has_logits ? (uint64_t)h->n_vocab * 4 : 0) + h->extra_bytes +
                    (h->version >= 2 ? 4 * (uint64_t)h->n_layers : 0) + 2 * kv_rows * h->row_bytes;
    if (h->raw_bytes != want) { snprintf(err, errlen, "the session header's sizes disagree"); return -EINVAL; }
    if (fsize != sizeof *h + h->payload_bytes) {
        snprintf(err, errlen, "the session file has %" PRIu64 " bytes, its header says %" PRIu64 " (%s)", fsize,
                 (uint64_t)sizeof *h + h->payload_bytes, fsize < sizeof *h + h->payload_bytes ? "truncated" : "trailing data");
        return -EINVAL;
    }
    if (h->codec == SL_SESS_RAW && h->payload_bytes != h->raw_bytes) {
        snprintf(err, errlen, "the session header's sizes disagree");
        return -EINVAL;
    }
    if (h->n_tokens > (uint32_t)c->n_ctx) {
        snprintf(err, errlen, "the session holds %u tokens, more than this context of %d", h->n_tokens, c->n_ctx);
        return -ENOSPC;
    }
    return 0;
}

/* The per-layer starts of a session: they add up to the header's rows, and each layer keeps every
 * position the next one attends to (a full-attention layer all of them, a sliding-window layer its
 * window before position n).  0, or -EINVAL with *why. */
static int check_starts(const sl_sess_hdr *h, const uint32_t *starts, const sl_ctx *c, const char **why, char *msg,
                        size_t msglen)
{
    uint64_t sum = 0;
    const int n = (int)h->n_tokens;
    for (uint32_t l = 0; l < h->n_layers; l++) {
        if (starts[l] > h->n_tokens) { *why = "a layer's first saved position is past its end (corrupt)"; return -EINVAL; }
        sum += h->n_tokens - starts[l];
        const int w = sl_kv_window(c->kv, (int)l), need = w > 0 && n - w + 1 > 0 ? n - w + 1 : 0;
        if ((int)starts[l] > need) {
            snprintf(msg, msglen, "layer %u keeps positions from %u on, but its next position needs them from %d on "
                     "(corrupt)", l, starts[l], need);
            *why = msg;
            return -EINVAL;
        }
    }
    if (h->version >= 2 && sum != h->kv_rows) { *why = "the layers' saved rows disagree with the header (corrupt)"; return -EINVAL; }
    return 0;
}

int sl_session_load(const char *path, sl_ctx *c, uint64_t model_fp, int32_t **toks_out, int *n_out, float *logits_out,
                    bool *has_logits, void **extra_out, size_t *extra_len, sl_session_info *info, char *err, size_t errlen)
{
    uint64_t t0 = sl_now_ns();
    char why[200] = "", pb[SL_PATH_BRIEF];
    rsrc r = { .fd = -1 };
    int32_t *toks = NULL;
    float *logits = NULL;
    unsigned char *extra = NULL, *rows = NULL;
    uint32_t *starts = NULL;
    char swhy[160];
    bool touched = false;
    int rc;
    sl_sess_hdr h;
    struct stat st;

    r.fd = sl_open_regular(path, 0, &st);
    if (r.fd < 0) {
        rc = r.fd;
        if (rc == -EINVAL) snprintf(why, sizeof why, "it is %s, not a session file", sl_file_kind(st.st_mode));
        else snprintf(why, sizeof why, "%s", strerror(-rc));
        goto fail;
    }
    ssize_t got = read_full(r.fd, &h, sizeof h);
    if (got < 0) { rc = (int)got; snprintf(why, sizeof why, "%s", strerror(-rc)); goto fail; }
    if ((size_t)got < sizeof h) {
        rc = -EINVAL;
        snprintf(why, sizeof why, got >= 8 && !memcmp(&h, SL_SESS_MAGIC, 8) ? "the file ends inside the header (truncated)"
                                                                              : "not a sluice session file");
        goto fail;
    }
    if ((rc = check_header(&h, (uint64_t)st.st_size, c, model_fp, why, sizeof why))) goto fail;

    const int n = (int)h.n_tokens;
    r.codec = (int)h.codec;
    r.left = h.payload_bytes;
    sl_xxh64_init(&r.h, 0);
    if (r.codec != SL_SESS_RAW) {
        r.z = ZSTD_createDCtx();
        r.in_cap = ZSTD_DStreamInSize();
        r.in = malloc(r.in_cap);
        if (!r.z || !r.in) { rc = -ENOMEM; goto nomem; }
    }
    toks = malloc((size_t)(n ? n : 1) * sizeof *toks);
    logits = h.has_logits ? malloc((size_t)h.n_vocab * sizeof *logits) : NULL;
    extra = h.extra_bytes ? malloc(h.extra_bytes) : NULL;
    rows = malloc((size_t)h.chunk_rows * h.row_bytes);
    if (!toks || (h.has_logits && !logits) || (h.extra_bytes && !extra) || !rows) { rc = -ENOMEM; goto nomem; }

    if ((rc = src_get(&r, toks, (size_t)n * 4, 4))) goto bad;
    for (int i = 0; i < n; i++)
        if (toks[i] < 0 || toks[i] >= (int32_t)h.n_vocab) { rc = -EINVAL; r.why = "a token id is out of range (corrupt)"; goto bad; }
    if (logits && (rc = src_get(&r, logits, (size_t)h.n_vocab * 4, 4))) goto bad;
    if (logits && !finite_f32(logits, h.n_vocab)) { rc = -EINVAL; r.why = "its logits hold NaN or Inf (corrupt)"; goto bad; }
    if (extra && (rc = src_get(&r, extra, h.extra_bytes, 1))) goto bad;
    if (!(starts = calloc(h.n_layers, sizeof *starts))) { rc = -ENOMEM; goto nomem; }
    if (h.version >= 2 && (rc = src_get(&r, starts, (size_t)h.n_layers * 4, 4))) goto bad;
    if ((rc = check_starts(&h, starts, c, &r.why, swhy, sizeof swhy))) goto bad;
    /* From here on the cache is overwritten: any failure must leave the context empty. */
    touched = true;
    sl_ctx_reset(c);
    for (int l = 0; l < (int)h.n_layers; l++) {
        sl_kv_import_floor(c->kv, l, (int)starts[l]);
        for (int which = 0; which < 2; which++)
            for (int r0 = (int)starts[l]; r0 < n; r0 += (int)h.chunk_rows) {
                int nr = n - r0 < (int)h.chunk_rows ? n - r0 : (int)h.chunk_rows;
                if ((rc = src_get(&r, rows, (size_t)nr * h.row_bytes, kv_elem(h.kv_type)))) goto bad;
                if (!rows_finite(rows, (size_t)nr * h.row_bytes, h.kv_type)) {
                    rc = -EINVAL;
                    r.why = "its KV cache holds NaN or Inf (corrupt, or saved from a run that diverged)";
                    goto bad;
                }
                if ((rc = sl_kv_import_rows(c->kv, l, which, r0, nr, rows))) { r.why = sl_kv_errmsg(c->kv); goto bad; }
            }
    }
    if (r.codec == SL_SESS_RAW ? r.left != 0 : (r.left != 0 || r.zin.pos != r.zin.size || r.last_ret != 0)) {
        rc = -EINVAL;
        r.why = "the payload has data after its end (corrupt)";
        goto bad;
    }
    if (sl_xxh64_digest(&r.h) != h.payload_hash) {
        rc = -EINVAL;
        r.why = "the payload checksum does not match (corrupt)";
        goto bad;
    }
    c->n_past = n;
    if (logits_out && logits) memcpy(logits_out, logits, (size_t)h.n_vocab * sizeof *logits);
    if (has_logits) *has_logits = logits != NULL;
    if (extra_out) { *extra_out = extra; extra = NULL; }
    if (extra_len) *extra_len = extra_out ? h.extra_bytes : 0;
    *toks_out = toks;
    *n_out = n;
    if (info)
        *info = (sl_session_info){ n, (int)h.kv_type, (int)h.codec, h.raw_bytes, (uint64_t)st.st_size, sl_now_ns() - t0 };
    close(r.fd);
    ZSTD_freeDCtx(r.z);
    free(r.in);
    free(r.shuf);
    free(logits);
    free(extra);
    free(rows);
    free(starts);
    return 0;
nomem:
    snprintf(why, sizeof why, "out of memory");
    goto fail;
bad:
    snprintf(why, sizeof why, "%s", r.why ? r.why : strerror(-rc));
fail:
    snprintf(err, errlen, "session %s: %s", sl_path_brief(path, pb), why);
    if (touched) sl_ctx_reset(c);
    if (r.fd >= 0) close(r.fd);
    ZSTD_freeDCtx(r.z);
    free(r.in);
    free(r.shuf);
    free(toks);
    free(logits);
    free(extra);
    free(rows);
    free(starts);
    return rc;
}
