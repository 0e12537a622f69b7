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
#include "lib/diff.h"
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
	"      --diff BASE        a differential flame graph (html, svg, collapsed):\n"
	"                         FILE's frames coloured by the change of their self\n"
	"                         share from profile BASE (red: more, blue: less);\n"
	"                         collapsed gets BASE's and FILE's counts per stack\n"
	"      --absolute         with --diff: the change in amount (time, or the\n"
	"                         event's count), not in share\n"
	"      --strip-prefix DIR with --diff: remove DIR from the start of source\n"
	"                         paths before matching them (repeatable)\n"
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

int diff_setup(const struct profile *p, const char *path, const char *base_path,
			const struct load_opts *lo, const char *type, const char *event, int absolute,
			const struct diff_match_opts *mo, struct profile **base, struct diff_match **m,
			struct export_diff *d)
{
	if (!(*base = cli_load_profile(base_path, lo, type)))
		return 1;
	const struct profile *cp[2] = { *base, p };
	const char *names[2] = { base_path, path };
	struct diff_check chk;
	char why[512];
	if (diff_check(cp, names, event, absolute, &chk, why, sizeof(why))) {
		errorf("cannot compare: %s", why);
		return 3;
	}
	for (uint32_t i = 0; i < chk.nnotes; i++)
		fprintf(stderr, "strata: note: %s\n", chk.notes[i]);
	if (!(*m = diff_match_build(*base, p, mo))) {
		errorf("out of memory");
		return 1;
	}
	*d = (struct export_diff){ .base = *base, .match = *m, .base_event = chk.event[0],
				   .scale = { chk.scale[0], chk.scale[1] }, .unit = chk.unit, .absolute = absolute,
				   .base_title = (*base)->command };
	return 0;
}

int cmd_convert(int argc, char **argv)
{
	const char *format = NULL, *output = NULL, *event = NULL, *type = NULL, *base_path = NULL;
	const char *strip[64];
	struct diff_match_opts mo = { strip, 0 };
	int absolute = 0;
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
		{ "diff", required_argument, 0, 'D' },
		{ "absolute", no_argument, 0, 'A' },
		{ "strip-prefix", required_argument, 0, 'S' },
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
		case 'D': base_path = optarg; break;
		case 'A': absolute = 1; break;
		case 'S':
			if (mo.nstrip == sizeof(strip) / sizeof(strip[0]) || !*optarg) {
				errorf(*optarg ? "too many --strip-prefix" : "--strip-prefix needs a directory");
				return 2;
			}
			strip[mo.nstrip++] = optarg;
			break;
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
	if ((absolute || mo.nstrip) && !base_path) {
		errorf("%s only goes with --diff BASE", absolute ? "--absolute" : "--strip-prefix");
		return 2;
	}
	if (base_path && !ex->diff) {
		errorf("-f %s has no differential form: --diff works with -f html, svg and collapsed (strata diff "
		       "compares in the terminal)", ex->name);
		return 2;
	}
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
	struct profile *base = NULL;
	struct diff_match *m = NULL;
	struct export_diff d;
	int rc = 0;
	if (base_path)
		rc = diff_setup(p, path, base_path, &lo, type, p->event_names[o.event], absolute, &mo, &base, &m, &d);
	if (!rc) {
		o.diff = base_path ? &d : NULL;
		rc = convert_to(p, ex, output, &o);
	}
	diff_match_free(m);
	profile_free(base);
	profile_free(p);
	return rc;
}
