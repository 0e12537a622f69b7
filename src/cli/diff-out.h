/*
 * diff-out.h — the pieces of `strata diff` (builtin-diff.c): its options
 * and what both outputs get, the terminal table and the JSON
 * (diff-out.c).
 */
#ifndef STRATA_DIFF_OUT_H
#define STRATA_DIFF_OUT_H

#include <stdint.h>

#include "lib/diff.h"
#include "lib/profile.h"

struct diff_cli {
	const char *path[2];
	const struct profile *p[2];
	const struct diff_match *m;
	const struct diff_check *c;
	const struct diff_query *q;
	const struct diff_result *r;
	const char *event;        /* --event, or "samples" */
	int limit;                /* rows shown, 0 = all */
	int fail_set;             /* --fail-above given */
	double fail_above;        /* in points */
	uint32_t nfailed;         /* rows above it */
};

/* The rows shown: the `limit` largest changes either way, in the result's
 * order (largest increase first). *n of them; malloc'ed, NULL if OOM. */
uint32_t *diff_shown_rows(const struct diff_cli *d, uint32_t *n);

/* The table, to stdout. */
void diff_text(const struct diff_cli *d);
/* The one JSON object, to stdout; 0 or -1 if it could not be written. */
int diff_json(const struct diff_cli *d);

#endif
