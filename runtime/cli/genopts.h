/* runtime/cli/genopts.h — the options `sluice run`, `sluice chat` and `sluice bench` share: model,
 * context, sampling, memory budget, streaming, sessions; and their translation into sluice_params. */
#ifndef SL_CLI_GENOPTS_H
#define SL_CLI_GENOPTS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "include/sluice.h"
#include "runtime/cli/options.h"

#define GEN_MAX_REVERSE 8   /* -r given more often is refused */

typedef struct gen_opts {
    const char *model;
    long n_predict;          /* -1: until end of generation or a full context */
    long n_ctx, n_batch, threads;   /* n_ctx 0: the default context (see gen_default_ctx) */
    int kv_type;             /* enum sluice_kv; AUTO unless --kv */
    sluice_sampler_params sp;
    bool seed_given;         /* --seed N (not -1): the run repeats; otherwise sp.seed is random */
    bool stream, stream_head, no_direct;
    int io;                  /* enum sluice_io */
    uint64_t chunk;          /* 0: tensor unit */
    long prefetch, head_rows;
    const char *budget, *spill_dir, *session;
    bool session_overwrite;  /* --session-overwrite: replace a session file of another model/KV type */
    double disk_bw, compute_bw;
    bool stats, quiet, special;
    const char *reverse[GEN_MAX_REVERSE];   /* -r TEXT: stop when the output ends with TEXT */
    int n_reverse;
    int draft;               /* enum sluice_draft */
    long draft_max;          /* 0: the library's default */
    bool draft_fixed;
    const char *lookup;      /* --lookup FILE */
    const char *draft_model; /* -md FILE */
    bool expert_prefetch;    /* --expert-prefetch */
} gen_opts;

/* The shared rows' ids: a command that takes only some of them (sluice serve) writes its own rows
 * with these ids, and gen_opt_apply consumes them all the same. */
enum {
    GEN_MODEL = 1000, GEN_PREDICT, GEN_CTX, GEN_BATCH, GEN_THREADS, GEN_TEMP, GEN_TOP_K, GEN_TOP_P, GEN_MIN_P,
    GEN_REPEAT, GEN_SEED, GEN_REVERSE, GEN_IGNORE_EOS, GEN_SESSION, GEN_SESSION_OVERWRITE, GEN_BUDGET, GEN_KV,
    GEN_SPILL, GEN_DISK_BW, GEN_COMPUTE_BW, GEN_STREAM, GEN_STREAM_HEAD, GEN_IO, GEN_UNIT, GEN_PREFETCH,
    GEN_HEAD_CHUNK, GEN_NO_DIRECT, GEN_STATS, GEN_SPECIAL, GEN_QUIET, GEN_DRAFT, GEN_DRAFT_MAX, GEN_DRAFT_FIXED,
    GEN_LOOKUP, GEN_DRAFT_MODEL,
    GEN_EXPERT_PREFETCH,
};

/* The shared rows (ids GEN_*), for the commands' table lists. */
extern const cli_opt gen_opt_table[];
extern const cli_opt gen_mem_table[];

void gen_opts_default(gen_opts *o, long n_predict);
/* If row op (found by cli_find) is a shared option, consume its value: 1; not a shared option: 0;
 * a bad value: -1 (the error is printed). */
int  gen_opt_apply(int argc, char **argv, int *i, const cli_opt *op, gen_opts *o);
/* Checks across options, once all are parsed.  false after printing an error. */
bool gen_opts_check(gen_opts *o);
/* Fill p from o (log and progress callbacks are the caller's).  false after printing an error. */
bool gen_opts_params(const gen_opts *o, sluice_params *p);
/* When -c was not given: the model's trained context, halved until its plan for the budget is as
 * fast as the plan at the library default (min(trained, 4096)): the KV cache in memory at the same
 * precision, no weight pushed out to the stream.  0: leave it to the library. */
int  gen_default_ctx(const gen_opts *o);
/* After opening: an explicit --kv the plan did not count on is an error when it does not fit the
 * budget, and a printed note when the library had to change it.  false after printing the error. */
bool gen_check_kv(const gen_opts *o, const sluice_model *M, const sluice_ctx *C);
/* --lookup FILE: tokenize it and give it to the context's drafter.  Token count (0 without
 * --lookup), or -1 after printing why. */
int  gen_load_lookup(const gen_opts *o, sluice_model *M, sluice_ctx *C);
/* -r: does text[0..n) end with one of the reverse prompts? */
bool gen_reverse_hit(const gen_opts *o, const char *text, size_t n);

#endif
