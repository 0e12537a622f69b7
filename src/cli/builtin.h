/*
 * builtin.h — one function per `strata` subcommand (builtin-*.c), in the
 * style of perf and git: main.c dispatches, each builtin parses its own
 * options and returns the process exit status.
 */
#ifndef STRATA_BUILTIN_H
#define STRATA_BUILTIN_H

#include <stdint.h>
#include <stdio.h>

int cmd_record(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_annotate(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_ctl(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_stack(int argc, char **argv);
int cmd_send(int argc, char **argv);
int cmd_diff(int argc, char **argv);

/* Conversion, shared by convert and record -f (builtin-convert.c). */
struct load_opts;
struct exporter;
struct export_opts;
struct profile;
const struct exporter *convert_find(const char *format);
int convert_event(const struct profile *p, const char *name, uint32_t *event);
int convert_to(const struct profile *p, const struct exporter *ex, const char *out_path,
	       const struct export_opts *o);
void convert_usage(FILE *out);
/* --diff BASE of convert and annotate: BASE loaded (with lo and type as
 * the profile p at path), checked against it for `event` (notes said on
 * stderr) and matched (mo: --strip-prefix); fills *d, whose base and match
 * the caller frees. 0, or an exit status after one line saying why (3:
 * the two do not compare). */
struct diff_match;
struct diff_match_opts;
struct export_diff;
int diff_setup(const struct profile *p, const char *path, const char *base_path, const struct load_opts *lo,
	       const char *type, const char *event, int absolute, const struct diff_match_opts *mo,
	       struct profile **base, struct diff_match **m, struct export_diff *d);

/* `strata record -e` (record-events.c): parses and checks the event list
 * on this machine, printing a one-line error; on success fills the agent's
 * '+'-joined list and the sampling period. */
int record_events_setup(const char *list, const char *period_arg, unsigned rate_hz, int rate_given, int mode,
			char *out_events, size_t out_len, uint64_t *period, int *clock);
void record_events_list(FILE *out);

/* Shared helpers (main.c). */
void die_usage(const char *usage) __attribute__((noreturn));
/* A decimal number in [lo, hi] and nothing else (no sign, no blanks):
 * 0, or -1 if `s` is anything else. */
int parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out);
/* Prints "strata: " + message to stderr. */
void errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void warnf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The profile at path for report, annotate and convert, its warnings
 * printed; with type (--type) only the allocations of that type. NULL
 * after a one-line error. */
struct load_opts;
struct profile *cli_load_profile(const char *path, const struct load_opts *lo, const char *type);
/* Directory holding libstrata-agent.so and the per-version modules. */
const char *agent_dir(void);

#endif
