/*
 * heatmap.h — `strata annotate FILE -f html -o DIR`: a source heat map, one
 * directory a browser opens offline (DIR/index.html) and a ticket can
 * carry: every source file of the profile with its lines shaded by cost
 * (or, with --diff BASE, by the change of cost), the files and functions
 * ordered by cost, each function's callers and callees one click away.
 * heatmap.c writes it; heatmap.html and heatmap.js are the page.
 */
#ifndef STRATA_HEATMAP_H
#define STRATA_HEATMAP_H

#include <stddef.h>
#include <stdint.h>

#include "export.h"
#include "lib/profile.h"

struct heatmap_opts {
	const char *title;            /* the command line */
	uint32_t event;               /* the event shown */
	const struct agg_filter *filter; /* which samples of the profile (NULL: all) */
	int native;                   /* C/C++ source files too (--native) */
	const struct export_diff *diff; /* --diff BASE, or NULL */
	const char *start_path;       /* open this file first (a linecost path), or NULL */
	uint32_t start_func;          /* or this function, PNONE */
};

/* Writes DIR/index.html and DIR/files/N.js (creating DIR if needed, and
 * removing the files/N.js of an earlier heat map there). 0, or -1 with a
 * one-line reason in err. */
int heatmap_write(const struct profile *p, const struct heatmap_opts *o, const char *dir, char *err,
		  size_t errlen);

#endif
