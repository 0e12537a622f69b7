/*
 * registry.c — the output formats strata knows, in the order --help lists
 * them. Adding a format: write src/export/NAME.c with an export_fn, declare
 * it here and add one line to the table.
 */
#include <stdio.h>
#include <string.h>

#include "export.h"

int export_collapsed(const struct profile *, FILE *, const struct export_opts *, char *, size_t);
int export_callgrind(const struct profile *, FILE *, const struct export_opts *, char *, size_t);
int export_pprof(const struct profile *, FILE *, const struct export_opts *, char *, size_t);
int export_otlp(const struct profile *, FILE *, const struct export_opts *, char *, size_t);

static const struct exporter collapsed = {
	"collapsed", ".folded", "folded stacks for flamegraph.pl, inferno, speedscope", 0, export_collapsed, 1,
};

static const struct exporter callgrind = {
	"callgrind", ".callgrind", "KCachegrind, QCachegrind, callgrind_annotate", 0, export_callgrind,
};

static const struct exporter pprof = {
	"pprof", ".pb.gz", "go tool pprof, Pyroscope, Parca (gzipped profile.proto)", 1, export_pprof,
};

static const struct exporter otlp = {
	"otlp", ".otlp", "an OTLP profiles request (protobuf), as strata send posts it", 1, export_otlp,
};

/* Web and flame graph formats: each file defines its exporter. */
extern const struct exporter speedscope_exporter, chrome_exporter, gecko_exporter, html_exporter, svg_exporter;

const struct exporter *const exporters[] = {
	&callgrind,
	&pprof,
	&otlp,
	&collapsed,
	&speedscope_exporter, &chrome_exporter, &gecko_exporter, &html_exporter, &svg_exporter,
	NULL,
};

const struct exporter *exporter_find(const char *name)
{
	for (size_t i = 0; exporters[i]; i++)
		if (!strcmp(exporters[i]->name, name))
			return exporters[i];
	return NULL;
}

const char *exporter_names(void)
{
	static char buf[512];
	if (!buf[0]) {
		size_t o = 0;
		for (size_t i = 0; exporters[i] && o < sizeof(buf); i++)
			o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%s", i ? ", " : "", exporters[i]->name);
	}
	return buf;
}
