/*
 * report-tasks.h — the asyncio tasks table of `strata report`
 * (report-tasks.c; docs/async.md).
 */
#ifndef STRATA_REPORT_TASKS_H
#define STRATA_REPORT_TASKS_H

#include "lib/json.h"
#include "lib/profile.h"

/* Prints the table (nothing when no task was recorded); limit rows, 0 = all. */
void report_tasks_text(const struct profile *p, const struct agg_filter *f, int limit);
/* Writes "tasks": [{"task", "running", "waiting", "top-wait": {"function", "file", "line", "samples"}}]. */
void report_tasks_json(const struct profile *p, const struct agg_filter *f, struct json *j);

#endif
