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
int cmd_chat(int argc, char **argv);
int cmd_bench(int argc, char **argv);

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

/* Write s[0..n) as a JSON string literal (with quotes); bytes outside complete UTF-8 characters as \u00XX. */
void json_str(FILE *f, const char *s, size_t n);
/* s[0..n) is valid UTF-8. */
bool cli_utf8_valid(const char *s, size_t n);
/* s[0..n) with control bytes and invalid UTF-8 as \xNN (text from a model file, for a terminal). */
void cli_print_escaped(FILE *f, const char *s, size_t n);
/* Make sure descriptors 0-2 are open (on /dev/null), so that no file the run opens becomes one. */
void cli_std_fds(void);

/* llama.cpp's name for a general.file_type number ("Q4_K - Medium"), or NULL. */
const char *cli_file_type_name(uint32_t ft);

/* Peak resident set size (VmHWM) and current RSS of this process, in bytes (0 if unknown). */
uint64_t peak_rss_bytes(void);

#endif
