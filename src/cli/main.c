/*
 * main.c — the `strata` command: dispatches to one builtin per subcommand
 * and holds the few helpers they share (messages, locating the agent,
 * loading a profile).
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builtin.h"
#include "lib/profile.h"

#ifndef STRATA_VERSION
#define STRATA_VERSION "dev"
#endif

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *help;
} commands[] = {
	{ "record", cmd_record, "run a command and record a profile of every Python process it starts" },
	{ "report", cmd_report, "show the hottest functions and lines of a recorded profile" },
	{ "annotate", cmd_annotate, "show the Python source with the cost of every line" },
	{ "diff", cmd_diff, "compare two profiles: what got slower, by function, line or file" },
	{ "convert", cmd_convert, "convert a profile for another tool (KCachegrind, speedscope, ...)" },
	{ "dump", cmd_dump, "list the records of a .strata file (for debugging strata itself)" },
	{ "top", cmd_top, "live view of a running program's hottest functions and lines" },
	{ "stack", cmd_stack, "print every thread's Python stack of a running process, now (a stuck process)" },
	{ "send", cmd_send, "send recorded profiles to an OpenTelemetry Collector (OTLP) or as pprof files" },
	{ "ctl", cmd_ctl, "turn sampling on and off in a running process, ask its state, dump it" },
};

static void usage(FILE *out)
{
	fprintf(out, "usage: strata <command> [options]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].help);
	fprintf(out, "\nRun 'strata <command> --help' for the options of a command.\n");
}

void errorf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("strata: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

struct profile *cli_load_profile(const char *path, const struct load_opts *lo, const char *type)
{
	char err[512];
	struct profile *p = profile_load(path, lo, err, sizeof(err));
	if (!p) {
		errorf("%s: %s", path, err);
		return NULL;
	}
	for (uint32_t i = 0; i < p->nwarnings; i++)
		warnf("%s: %s", path, p->warnings[i]);
	if (type && profile_filter_type(p, type, err, sizeof(err))) {
		errorf("%s: %s", path, err);
		profile_free(p);
		return NULL;
	}
	return p;
}

void warnf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("strata: warning: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

void die_usage(const char *u)
{
	fputs(u, stderr);
	exit(2);
}

const char *agent_dir(void)
{
	static char dir[PATH_MAX];
	if (dir[0])
		return dir;
	const char *env = getenv("STRATA_AGENT_DIR");
	if (env && *env) {
		snprintf(dir, sizeof(dir), "%s", env);
		return dir;
	}
	char exe[PATH_MAX - 32];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return NULL;
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = 0;
	/* bin/strata next to lib/strata/ — the same in the build tree and
	 * in an installed prefix. */
	snprintf(dir, sizeof(dir), "%s/../lib/strata", exe);
	char real[PATH_MAX];
	if (realpath(dir, real))
		snprintf(dir, sizeof(dir), "%s", real);
	return dir;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
		printf("strata %s\n", STRATA_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(cmd, commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	errorf("'%s' is not a strata command; see 'strata --help'", cmd);
	return 2;
}

int parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
	char *end;
	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (*end || errno || v < lo || v > hi)
		return -1;
	*out = (uint32_t)v;
	return 0;
}
