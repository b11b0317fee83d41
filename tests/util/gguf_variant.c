/* tests/util/gguf_variant.c — see gguf_variant.h. */
#include "util/gguf_variant.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/types.h"
#include "loader/gguf.h"
#include "loader/gguf_write.h"

static int put_key(sl_gguf_writer *w, const gv_key *k)
{
    switch (k->type) {
    case SL_GGUF_U32: return sl_gguf_writer_kv_u32(w, k->key, k->u32);
    case SL_GGUF_F32: return sl_gguf_writer_kv_f32(w, k->key, k->f32);
    case SL_GGUF_STRING: return sl_gguf_writer_kv_str(w, k->key, k->str);
    default: return -EINVAL;
    }
}

/* Copy the source's tensor data, tensor by tensor, through one buffer. */
static int copy_data(sl_gguf_writer *w, const sl_gguf *g, int fd)
{
    enum { BUF = 1 << 20 };
    char *buf = malloc(BUF);
    if (!buf) return -ENOMEM;
    int rc = 0;
    for (int64_t t = 0; t < sl_gguf_n_tensors(g) && !rc; t++) {
        const sl_gguf_tensor *ti = sl_gguf_tensor_at(g, t);
        for (uint64_t done = 0; done < ti->nbytes && !rc;) {
            size_t n = ti->nbytes - done < BUF ? (size_t)(ti->nbytes - done) : BUF;
            ssize_t r = pread(fd, buf, n, (off_t)(ti->offset + done));
            if (r <= 0) { rc = r < 0 ? -errno : -EIO; break; }
            rc = sl_gguf_writer_write(w, buf, (size_t)r);
            done += (uint64_t)r;
        }
    }
    free(buf);
    return rc;
}

int gv_write(const char *src, const char *dst, const gv_key *set, int n_set, const gv_tensor *add, int n_add,
             char *err, size_t errlen)
{
    sl_gguf *g;
    int rc = sl_gguf_open(src, &g, err, errlen);
    if (rc) return rc;
    int fd = open(src, O_RDONLY | O_CLOEXEC);
    sl_gguf_writer *w = NULL;
    if (fd < 0) { rc = -errno; snprintf(err, errlen, "%s: %s", src, strerror(errno)); goto out; }
    if ((rc = sl_gguf_writer_open(&w, dst, sl_gguf_alignment(g), 0, err, errlen))) goto out;
    bool *replaced = calloc((size_t)n_set + 1, sizeof *replaced);
    if (!replaced) { rc = -ENOMEM; goto out; }
    for (int64_t i = 0; i < sl_gguf_n_kv(g) && !rc; i++) {
        sl_str k = sl_gguf_key(g, i);
        int s = 0;
        while (s < n_set && !sl_str_eq(k, set[s].key)) s++;
        if (s < n_set) { rc = put_key(w, &set[s]); replaced[s] = true; }
        else rc = sl_gguf_writer_copy_kv(w, g, i);
    }
    for (int s = 0; s < n_set && !rc; s++)
        if (!replaced[s]) rc = put_key(w, &set[s]);
    free(replaced);
    for (int64_t t = 0; t < sl_gguf_n_tensors(g) && !rc; t++) {
        const sl_gguf_tensor *ti = sl_gguf_tensor_at(g, t);
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)ti->name.len, ti->name.ptr);
        rc = sl_gguf_writer_add_tensor(w, name, ti->type, ti->n_dims, ti->ne, NULL);
    }
    for (int a = 0; a < n_add && !rc; a++) rc = sl_gguf_writer_add_tensor(w, add[a].name, SL_TYPE_F32, 1, &add[a].n, NULL);
    if (!rc) rc = copy_data(w, g, fd);
    for (int a = 0; a < n_add && !rc; a++) rc = sl_gguf_writer_write(w, add[a].data, (size_t)add[a].n * sizeof(float));
    if (rc) {
        snprintf(err, errlen, "%s: %s", dst, sl_gguf_writer_error(w)[0] ? sl_gguf_writer_error(w) : strerror(-rc));
        sl_gguf_writer_abort(w);
    } else {
        rc = sl_gguf_writer_finish(w, err, errlen);
    }
    w = NULL;
out:
    if (w) sl_gguf_writer_abort(w);
    if (fd >= 0) close(fd);
    sl_gguf_close(g);
    return rc;
}

int gv_phi3_longrope(const char *src, const char *dst, char *err, size_t errlen)
{
    float shortf[GV_LONGROPE_PAIRS], longf[GV_LONGROPE_PAIRS];
    for (int i = 0; i < GV_LONGROPE_PAIRS; i++) {
        shortf[i] = 1.0f + 0.05f * (float)i;
        longf[i] = 1.0f + 1.5f * (float)i;
    }
    const gv_key set[] = {
        { "phi3.context_length", SL_GGUF_U32, 131072, 0, NULL },
        { "phi3.rope.scaling.original_context_length", SL_GGUF_U32, 4096, 0, NULL },
        { "phi3.attention.sliding_window", SL_GGUF_U32, 262144, 0, NULL },
        { "phi3.rope.scaling.type", SL_GGUF_STRING, 0, 0, "longrope" },
        { "phi3.rope.scaling.attn_factor", SL_GGUF_F32, 0, 1.1902380714238083f, NULL },   /* sqrt(1 + ln 32 / ln 4096) */
    };
    const gv_tensor add[] = { { "rope_factors_long.weight", longf, GV_LONGROPE_PAIRS },
                              { "rope_factors_short.weight", shortf, GV_LONGROPE_PAIRS } };
    return gv_write(src, dst, set, sizeof set / sizeof *set, add, 2, err, errlen);
}
