/* runtime/cli/genopts.h — the options `sluice run` and `sluice chat` share: model, context,
 * sampling, memory budget, streaming, sessions; and their translation into sluice_params. */
#ifndef SL_CLI_GENOPTS_H
#define SL_CLI_GENOPTS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "include/sluice.h"

typedef struct gen_opts {
    const char *model;
    long n_predict, n_ctx, n_batch, threads;
    int kv_type;             /* enum sluice_kv; AUTO unless --kv */
    sluice_sampler_params sp;
    bool stream, stream_head, no_direct;
    int io;                  /* enum sluice_io */
    uint64_t chunk;          /* 0: tensor unit */
    long prefetch, head_rows;
    const char *budget, *spill_dir, *session;
    double disk_bw, compute_bw;
    bool stats, quiet, special;
    bool session_overwrite;  /* --session-overwrite: replace a session of another model or KV type */
} gen_opts;

void gen_opts_default(gen_opts *o, long n_predict);
/* If argv[*i] is a shared option, consume it (and its value): 1; not a shared option: 0; a bad
 * value: -1 (the error is printed). */
int  gen_opt_parse(int argc, char **argv, int *i, gen_opts *o);
/* Fill p from o (log and progress callbacks are the caller's).  false after printing an error. */
bool gen_opts_params(const gen_opts *o, sluice_params *p);
/* The help lines of the shared options. */
void gen_opts_usage(FILE *f);

#endif
