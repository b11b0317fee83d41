/* runtime/serve/prompt_disk.c — the prompt cache's disk tier (`sluice serve --prompt-cache-dir DIR`).
 *
 * The slots hold as many conversations' KV as there are slots.  When a request takes a slot whose
 * KV it would mostly throw away, the slot's context is first written to DIR as a session file
 * (runtime/api/session.c: tokens, KV rows and logits, zstd, written atomically); a later request
 * whose prompt begins with those tokens loads it back into its slot and evaluates only the rest.
 * A file is found again by the hashes of its token prefix at every PC_BLOCK boundary (XXH64 of
 * tokens [0, k * PC_BLOCK)), so a prompt finds a file sharing only its first blocks; the tokens in
 * the file, not the hash, decide what is kept (pc_adopt compares them), so a collision costs a
 * load, never a wrong answer.  The directory holds at most --prompt-cache-max bytes of these files:
 * the least recently used go first.  Only files this server wrote are ever deleted: each is named
 * sluice-pcache-<hash>-<tokens>.session, is in the index of files written by this process, and is
 * checked to be a regular file before unlink; files of other programs, and of earlier runs, are
 * left alone (and not used).  Memory: a save or load streams ~1 MiB groups of KV rows through
 * zstd (about 3 MiB in all, docs/sessions.md), into the slot's own KV cache.
 */
#include "runtime/serve/serve_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/api/session.h"

#define PC_PREFIX "sluice-pcache-"

typedef struct pc_file {
    char name[64];                /* PC_PREFIX<hash of all its tokens>-<tokens>.session */
    int n_blocks;                 /* hashes of the prefixes at the block boundaries in it */
    uint64_t *hash;               /* hash[i]: of tokens [0, (i + 1) * PC_BLOCK) */
    uint64_t bytes, last_used;
} pc_file;

struct pc_disk {
    char *dir;
    int dir_fd;                   /* unlink and stat relative to it: the directory cannot be swapped */
    uint64_t max_bytes, used, clock;
    pc_file *f;
    int n, cap;
};

/* The hashes of t's prefixes at each block boundary (floor(n / PC_BLOCK) of them) into h. */
static int block_hashes(const int32_t *t, int n, uint64_t *h)
{
    sl_xxh64_state st;
    sl_xxh64_init(&st, 0x9c1ce0ull);
    int nb = n / PC_BLOCK;
    for (int b = 0; b < nb; b++) {
        sl_xxh64_update(&st, t + (size_t)b * PC_BLOCK, PC_BLOCK * sizeof *t);
        h[b] = sl_xxh64_digest(&st);
    }
    return nb;
}

/* Contract: serve_internal.h. */
int pc_disk_open(pc_disk **out, const char *dir, uint64_t max_bytes, char *err, size_t errlen)
{
    *out = NULL;
    struct stat sb;
    if (stat(dir, &sb)) {
        int e = errno;
        snprintf(err, errlen, "--prompt-cache-dir %s: %s", dir, strerror(e));
        return -e;
    }
    if (!S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "--prompt-cache-dir %s: not a directory", dir);
        return -ENOTDIR;
    }
    if (access(dir, W_OK | X_OK)) {
        snprintf(err, errlen, "--prompt-cache-dir %s: not writable (%s)", dir, strerror(errno));
        return -EACCES;
    }
    pc_disk *d = calloc(1, sizeof *d);
    if (!d || !(d->dir = strdup(dir))) {
        free(d);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    d->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d->dir_fd < 0) {
        int e = errno;
        snprintf(err, errlen, "--prompt-cache-dir %s: %s", dir, strerror(e));
        free(d->dir);
        free(d);
        return -e;
    }
    d->max_bytes = max_bytes;
    *out = d;
    return 0;
}

/* Delete file i (one this server wrote: its name has the prefix and it is a regular file) and drop it. */
static void drop(pc_disk *d, int i)
{
    pc_file *f = &d->f[i];
    struct stat sb;
    if (!strncmp(f->name, PC_PREFIX, strlen(PC_PREFIX)) && !fstatat(d->dir_fd, f->name, &sb, AT_SYMLINK_NOFOLLOW) &&
        S_ISREG(sb.st_mode))
        unlinkat(d->dir_fd, f->name, 0);
    d->used -= f->bytes;
    free(f->hash);
    d->f[i] = d->f[--d->n];
}

void pc_disk_free(pc_disk *d)
{
    if (!d) return;
    for (int i = 0; i < d->n; i++) free(d->f[i].hash);   /* the files stay: a later run may not use them */
    free(d->f);
    if (d->dir_fd >= 0) close(d->dir_fd);
    free(d->dir);
    free(d);
}

/* Evict the least recently used files (never `keep`) until the cache fits its limit. */
static void evict(pc_disk *d, int keep)
{
    while (d->used > d->max_bytes) {
        int lru = -1;
        for (int i = 0; i < d->n; i++)
            if (i != keep && (lru < 0 || d->f[i].last_used < d->f[lru].last_used)) lru = i;
        if (lru < 0) break;
        if (keep == d->n - 1) keep = lru;   /* drop() moves the last entry into the freed place */
        drop(d, lru);
    }
}

/* Contract: serve_internal.h. */
int pc_disk_save(pc_disk *d, sluice_ctx *c, char *err, size_t errlen)
{
    int n = 0;
    const int32_t *t = sluice_tokens(c, &n);
    if (n < PC_BLOCK) return 0;
    uint64_t *h = malloc((size_t)(n / PC_BLOCK) * sizeof *h);
    if (!h) { snprintf(err, errlen, "out of memory"); return -ENOMEM; }
    const int nb = block_hashes(t, n, h);
    const uint64_t whole = sl_xxh64(t, (size_t)n * sizeof *t, 0x9c1ce0ull);
    char name[64];
    snprintf(name, sizeof name, PC_PREFIX "%016" PRIx64 "-%d.session", whole, n);
    for (int i = 0; i < d->n; i++)
        if (!strcmp(d->f[i].name, name)) {   /* already there (the same tokens) */
            d->f[i].last_used = ++d->clock;
            free(h);
            return 0;
        }
    if (d->n == d->cap) {
        int nc = d->cap ? 2 * d->cap : 16;
        pc_file *p = realloc(d->f, (size_t)nc * sizeof *p);
        if (!p) { free(h); snprintf(err, errlen, "out of memory"); return -ENOMEM; }
        d->f = p;
        d->cap = nc;
    }
    struct stat sb;
    if (!fstatat(d->dir_fd, name, &sb, AT_SYMLINK_NOFOLLOW)) {   /* not ours (an earlier run's): left as it is */
        free(h);
        return 0;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", d->dir, name);
    sluice_session_stats st;
    int rc = sluice_session_save_flags(c, path, NULL, 0, 0, &st, err, errlen);
    if (rc) { free(h); return rc; }
    pc_file *f = &d->f[d->n++];
    *f = (pc_file){ .n_blocks = nb, .hash = h, .bytes = st.file_bytes, .last_used = ++d->clock };
    snprintf(f->name, sizeof f->name, "%s", name);
    d->used += st.file_bytes;
    evict(d, d->n - 1);
    if (d->used > d->max_bytes) drop(d, d->n - 1);   /* larger than the whole cache: not kept */
    return 1;
}

/* Contract: serve_internal.h. */
int pc_disk_find(pc_disk *d, const int32_t *prompt, int n_prompt, int *tokens)
{
    *tokens = 0;
    if (!d->n || n_prompt < PC_BLOCK) return -1;
    uint64_t *h = malloc((size_t)(n_prompt / PC_BLOCK) * sizeof *h);
    if (!h) return -1;
    const int nb = block_hashes(prompt, n_prompt, h);
    int best = -1, best_k = 0;
    for (int i = 0; i < d->n; i++) {
        const pc_file *f = &d->f[i];
        int k = nb < f->n_blocks ? nb : f->n_blocks;
        while (k > 0 && f->hash[k - 1] != h[k - 1]) k--;   /* the prefix hash: equal at k, equal before it */
        if (k > best_k || (k == best_k && k && f->last_used > d->f[best].last_used)) { best = i; best_k = k; }
    }
    free(h);
    *tokens = best_k * PC_BLOCK;
    return best;
}

/* Contract: serve_internal.h. */
int pc_disk_load(pc_disk *d, int i, sluice_ctx *c, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", d->dir, d->f[i].name);
    int rc = sluice_session_load(c, path, NULL, NULL, NULL, err, errlen);
    if (rc) {   /* gone or damaged: forget it (and delete it, if it is still ours) */
        sluice_reset(c);
        drop(d, i);
        return rc;
    }
    d->f[i].last_used = ++d->clock;
    return 0;
}

/* Contract: serve_internal.h. */
void pc_disk_usage(const pc_disk *d, uint64_t *bytes, int *files)
{
    *bytes = d ? d->used : 0;
    *files = d ? d->n : 0;
}
