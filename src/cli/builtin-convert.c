/*
 * builtin-convert.c — `strata convert FILE -f FORMAT [-o OUT]`: load the
 * profile model once and hand it to one exporter. convert_to() is shared
 * with `strata record -f`.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "builtin.h"
#include "export/export.h"
#include "lib/profile.h"

static const char usage_text[] =
	"usage: strata convert FILE -f FORMAT [-o OUT] [options]\n"
	"\n"
	"Converts a .strata profile for another tool. Without -o, text formats go\n"
	"to standard output.\n"
	"\n"
	"options:\n"
	"  -f, --format FORMAT    output format (see below)\n"
	"  -o, --output OUT       output file (default: standard output)\n"
	"  -e, --event NAME       event to show in formats with a single value\n"
	"                         (default: samples); formats with several value\n"
	"                         columns (callgrind, pprof) carry every event\n"
	"      --type NAME        --objects: only allocations of type NAME (dict, Foo,\n"
	"                         [PyMem_Malloc], ...: see strata report's types\n"
	"                         table); single-value formats then show alloc-bytes\n"
	"      --no-idle          leave out samples of blocked threads (wall mode)\n"
	"      --keep-interpreter keep CPython's own frames in native stacks\n"
	"      --no-inline        native stacks: no frames for inlined functions\n"
	"                         (their time goes to the function they are in)\n"
	"  -h, --help             show this help\n"
	"\n"
	"formats:\n";

void convert_usage(FILE *out)
{
	fputs(usage_text, out);
	for (size_t i = 0; exporters[i]; i++)
		fprintf(out, "  %-12s %s\n", exporters[i]->name, exporters[i]->help);
}

int convert_event(const struct profile *p, const char *name, uint32_t *event)
{
	*event = 0;
	if (!name)
		return 0;
	for (uint32_t e = 0; e < p->nevents; e++)
		if (!strcmp(p->event_names[e], name)) {
			*event = e;
			return 0;
		}
	errorf("the profile has no event '%s'", name);
	return -1;
}

int convert_to(const struct profile *p, const struct exporter *ex, const char *out_path,
	       const struct export_opts *o)
{
	FILE *out = stdout;
	/* A failed conversion removes what it wrote, but only from a regular
	 * file: -o may name a device or a pipe. */
	int regular = 0;
	if (out_path && strcmp(out_path, "-") != 0) {
		out = fopen(out_path, ex->binary ? "wb" : "w");
		if (!out) {
			errorf("cannot write %s: %s", out_path, strerror(errno));
			return 1;
		}
		struct stat sb;
		regular = fstat(fileno(out), &sb) == 0 && S_ISREG(sb.st_mode);
	} else if (ex->binary && isatty(STDOUT_FILENO)) {
		errorf("%s output is binary: give -o FILE or redirect standard output", ex->name);
		return 2;
	}
	char err[512] = "";
	errno = 0;
	int rc = ex->fn(p, out, o, err, sizeof(err));
	int werr = ferror(out), saved = errno;
	if (out != stdout) {
		if (fclose(out) != 0 && !werr) {
			werr = 1;
			saved = errno;
		}
	} else if (fflush(out) != 0 && !werr) {
		werr = 1;
		saved = errno;
	}
	const char *where = out != stdout ? out_path : "standard output";
	if (werr) {
		/* A write error shows as the exporter's failure too: name the
		 * cause. */
		errorf("cannot write %s: %s", where, saved ? strerror(saved) : "write error");
	} else if (rc) {
		errorf("%s: %s", ex->name, err[0] ? err : "conversion failed");
	}
	if (rc || werr) {
		if (regular)
			unlink(out_path);
		return 1;
	}
	return 0;
}

const struct exporter *convert_find(const char *format)
{
	const struct exporter *ex = exporter_find(format);
	if (!ex)
		errorf("unknown format '%s'; known formats: %s", format, exporter_names());
	return ex;
}

int cmd_convert(int argc, char **argv)
{
	const char *format = NULL, *output = NULL, *event = NULL, *type = NULL;
	struct export_opts o = { 0 };
	struct load_opts lo = { 0 };
	static const struct option longopts[] = {
		{ "format", required_argument, 0, 'f' },
		{ "output", required_argument, 0, 'o' },
		{ "event", required_argument, 0, 'e' },
		{ "no-idle", no_argument, 0, 'I' },
		{ "keep-interpreter", no_argument, 0, 'K' },
		{ "no-inline", no_argument, 0, 'N' },
		{ "type", required_argument, 0, 'T' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "f:o:e:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'f': format = optarg; break;
		case 'o': output = optarg; break;
		case 'e': event = optarg; break;
		case 'I': o.exclude_idle = 1; break;
		case 'K': lo.keep_interpreter = 1; break;
		case 'N': lo.no_inline = 1; break;
		case 'T': type = optarg; break;
		case 'h': convert_usage(stdout); return 0;
		default: convert_usage(stderr); return 2;
		}
	}
	if (optind != argc - 1 || !format) {
		errorf(!format ? "no format given (-f FORMAT)" : "expected one profile file");
		convert_usage(stderr);
		return 2;
	}
	const struct exporter *ex = convert_find(format);
	if (!ex)
		return 2;
	const char *path = argv[optind];
	struct profile *p = cli_load_profile(path, &lo, type);
	if (!p)
		return 1;
	if (!p->nsamples)
		warnf("%s: the profile holds no samples: the %s output is empty", path, ex->name);
	o.title = p->command;
	o.source = path;
	if (convert_event(p, event, &o.event)) {
		profile_free(p);
		return 2;
	}
	/* Allocations carry no time samples: one-value formats show their
	 * bytes. */
	if (type && !event)
		o.event = p->obj_event + 1;
	int rc = convert_to(p, ex, output, &o);
	profile_free(p);
	return rc;
}
