/*
 * builtin-send.c — `strata send`: recorded profiles to an OpenTelemetry
 * Collector (OTLP profiles) or as pprof files, and, with --spool, the
 * sender of continuous profiling that `strata record --send` and the
 * agent's helpers start (cli/send/sender.h, docs/send.md).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "cli/send/sender.h"

static const char usage_text[] =
	"usage: strata send --send URL [options] FILE...\n"
	"       strata send --spool DIR [--summary]\n"
	"\n"
	"Sends each recorded profile FILE as one OTLP profiles request to URL (an\n"
	"OpenTelemetry Collector, Grafana Pyroscope, ...), or writes it as a pprof\n"
	"file with --send file:DIR. For sending every few seconds while a program\n"
	"runs, see strata record --send and docs/send.md.\n"
	"\n"
	"With --spool, serves a spool directory of continuous profiling until the\n"
	"processes sending through it end: strata record and the agent start it so;\n"
	"it is not meant to be run by hand.\n"
	"\n"
	"options:\n"
	"  -h, --help           show this help\n"
	"\n";

int cmd_send(int argc, char **argv)
{
	struct send_cfg c;
	send_cfg_init(&c);
	struct option longopts[40];
	unsigned no = 0;
	for (unsigned i = 0; i < send_noptdefs; i++)
		longopts[no++] = (struct option){ send_optdefs[i].name, send_optdefs[i].has_arg ? required_argument : no_argument,
						  0, SEND_OPT_BASE + (int)i };
	longopts[no++] = (struct option){ "spool", required_argument, 0, 'S' };
	longopts[no++] = (struct option){ "summary", no_argument, 0, 'Y' };
	longopts[no++] = (struct option){ "help", no_argument, 0, 'h' };
	longopts[no] = (struct option){ 0, 0, 0, 0 };
	const char *spool = NULL;
	int summary = 0, opt;
	char err[1024];
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (opt >= SEND_OPT_BASE && opt < SEND_OPT_BASE + (int)send_noptdefs) {
			if (send_cfg_option(&c, send_optdefs[opt - SEND_OPT_BASE].name, optarg ? optarg : "", err,
					    sizeof(err))) {
				errorf("%s", err);
				return 2;
			}
			continue;
		}
		switch (opt) {
		case 'S':
			spool = optarg;
			break;
		case 'Y':
			summary = 1;
			break;
		case 'h':
			fputs(usage_text, stdout);
			fputs(send_options_help, stdout);
			return 0;
		default:
			fputs(usage_text, stderr);
			fputs(send_options_help, stderr);
			return 2;
		}
	}
	if (spool)
		return sender_run(spool, summary ? SENDER_SUMMARY : 0);
	if (!c.set) {
		errorf("no --send URL given");
		die_usage(usage_text);
	}
	if (optind >= argc) {
		errorf("no profile given");
		die_usage(usage_text);
	}
	int rc = sender_files(&c, argv + optind, argc - optind);
	send_cfg_free(&c);
	return rc;
}
