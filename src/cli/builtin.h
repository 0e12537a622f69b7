/*
 * builtin.h — one function per `strata` subcommand (builtin-*.c), in the
 * style of perf and git: main.c dispatches, each builtin parses its own
 * options and returns the process exit status.
 */
#ifndef STRATA_BUILTIN_H
#define STRATA_BUILTIN_H

int cmd_record(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_dump(int argc, char **argv);

/* Shared helpers (main.c). */
void die_usage(const char *usage) __attribute__((noreturn));
/* Prints "strata: " + message to stderr. */
void errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void warnf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Directory holding libstrata-agent.so and the per-version modules. */
const char *agent_dir(void);

#endif
