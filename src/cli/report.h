/*
 * report.h — the pieces of `strata report` (builtin-report.c): its options,
 * the selection both outputs share (builtin-report.c), the terminal tables
 * (report-text.c) and the JSON (report-json.c).
 */
#ifndef STRATA_REPORT_H
#define STRATA_REPORT_H

#include <stdint.h>

#include "lib/json.h"
#include "lib/profile.h"

struct report_opts {
	int json;
	uint32_t event;     /* --event: the event rows are ordered by (0 = samples) */
	const char *event_name;
	int limit;          /* 0 = all */
	int by_total;
	int no_idle;
	int keep_interpreter;
	int no_inline;
	uint32_t pid, tid;
	const char *path;
	const char *type;   /* --type */
	const char *task;   /* --task */
};

/* ---- selection (builtin-report.c) -------------------------------------- */

int proc_selected(const struct profile *p, uint32_t i, const struct report_opts *o);
/* Filtered samples per process, from the per-thread sums. */
uint64_t proc_samples(const struct profile *p, const struct agg *a, uint32_t proc);
uint32_t proc_threads(const struct profile *p, uint32_t proc);
/* The selected threads in the order shown (most samples first), *n of
 * them; malloc'ed, NULL if out of memory. */
uint32_t *selected_threads(const struct profile *p, const struct agg *a, const struct report_opts *o, uint32_t *n);
uint32_t count_procs(const struct profile *p, const struct report_opts *o);
double duration_s(const struct profile *p);

/* ---- output ------------------------------------------------------------- */

/* The tables, to stdout (report-text.c). */
void report_text(const struct profile *p, const struct agg *a, const struct report_opts *o);
/* The one JSON object (report-json.c). */
void report_json(const struct profile *p, const struct agg *a, const struct report_opts *o, struct json *j);

#endif
