/*
 * main.c — the `strata` command: dispatches to one builtin per subcommand.
 * Nothing else lives here (the helpers the builtins share are helpers.c's):
 * the fuzz targets link every other file of the CLI.
 */
#include <stdio.h>
#include <string.h>

#include "builtin.h"

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

