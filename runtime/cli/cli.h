/* runtime/cli/cli.h — shared pieces of the sluice command-line program. */
#ifndef SL_CLI_H
#define SL_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

int cmd_run(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_plan(int argc, char **argv);

struct sl_model;
struct sl_plan_model;
struct sl_plan_req;
struct sl_plan;
/* Make a plan for --ram-budget (NULL or "auto": derive from MemAvailable / cgroup).  disk_gbs and
 * compute_gbs (GB/s) <= 0 are measured (sl_plan_rates).  0, or -1 after printing the error
 * (infeasible budgets print the minimum and what dominates it). */
int cli_plan_for(const struct sl_model *m, size_t vocab_bytes, const char *budget_arg, int n_ctx, int n_batch,
                 int threads, double disk_gbs, double compute_gbs, int io, struct sl_plan_model *pm,
                 struct sl_plan_req *req, struct sl_plan *plan);

/* One clear line on stderr, prefixed "sluice: ". */
void cli_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parse helpers: on a malformed value print an error naming the flag and return false. */
bool cli_int(const char *flag, const char *s, long lo, long hi, long *out);
bool cli_float(const char *flag, const char *s, double lo, double hi, double *out);
/* "96M", "1.5G", "2GiB", "4096" (bytes); K/M/G/T are binary (1024) multiples. */
bool cli_size(const char *flag, const char *s, uint64_t *out);
/* Fetch the value of a flag that takes one: advances *i; false (with a message) when missing. */
bool cli_val(int argc, char **argv, int *i, const char **out);

/* The bundled model used when -m is not given. */
const char *cli_default_model(void);

/* Write s[0..n) as a JSON string literal (with quotes). */
void json_str(FILE *f, const char *s, size_t n);

/* Peak resident set size (VmHWM) and current RSS of this process, in bytes (0 if unknown). */
uint64_t peak_rss_bytes(void);

#endif
