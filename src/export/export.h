/*
 * export.h — the exporter interface: every output format is one function
 * that reads the in-memory profile model (src/lib/profile.h) and writes one
 * file. Exporters never read the .strata file themselves.
 *
 * One exporter per file (src/export/callgrind.c, speedscope.c, ...), listed
 * in the registry (registry.c) that `strata convert` and `strata record -f`
 * share.
 */
#ifndef STRATA_EXPORT_H
#define STRATA_EXPORT_H

#include <stdio.h>

#include "lib/diff.h"
#include "lib/profile.h"

/* convert --diff BASE: the profile the one converted is compared with,
 * for the formats that draw a difference (exporter.diff). */
struct export_diff {
	const struct profile *base;
	const struct diff_match *match;
	uint32_t base_event;     /* the shown event's index in base */
	double scale[2];         /* one unit of the event in `unit`, BASE's and the converted one's */
	const char *unit;
	int absolute;            /* colour by the change in amount, not in share */
	const char *base_title;
};

struct export_opts {
	const char *title;       /* e.g. the command line; for formats with a title */
	const char *source;      /* path of the .strata file being converted */
	uint32_t event;          /* event to show where a format has one value (default 0: samples) */
	int exclude_idle;        /* leave idle (wall-mode) samples out */
	const struct export_diff *diff; /* NULL: not a comparison */
};

/* Writes `p` to `out`. Returns 0, or -1 with a one-line reason in err. */
typedef int (*export_fn)(const struct profile *p, FILE *out, const struct export_opts *o, char *err,
			 size_t errlen);

struct exporter {
	const char *name;        /* -f NAME */
	const char *extension;   /* default file extension, e.g. ".callgrind" */
	const char *help;        /* one line: what opens it */
	int binary;              /* output is binary (refuse a terminal) */
	export_fn fn;
	int diff;                /* draws convert --diff (o->diff) */
};

/* NULL-terminated list, in the order `--help` shows them. */
extern const struct exporter *const exporters[];
const struct exporter *exporter_find(const char *name);
/* "callgrind, collapsed, ..." for error messages. */
const char *exporter_names(void);

#endif
