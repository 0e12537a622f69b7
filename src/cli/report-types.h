/*
 * report-types.h — the types table of `strata report` (report-types.c).
 */
#ifndef STRATA_REPORT_TYPES_H
#define STRATA_REPORT_TYPES_H

#include "lib/json.h"
#include "lib/profile.h"

/* Prints the table (nothing when no allocation was recorded); limit rows, 0 = all. */
void report_types_text(const struct profile *p, const struct agg_filter *f, int limit);
/* Writes "types": [{"type", "alloc-objects", "alloc-bytes", "live-objects", "live-bytes"}]. */
void report_types_json(const struct profile *p, const struct agg_filter *f, struct json *j);

#endif
