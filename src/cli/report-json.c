/*
 * report-json.c — `strata report --json`: the whole report as one JSON
 * object, every row and every event, for programs; see report.h. Apart
 * from the tables (report-text.c) because it shares none of their layout,
 * only the selection in builtin-report.c.
 */
#include <stdlib.h>

#include "lib/json.h"
#include "lib/profile.h"
#include "lib/ratios.h"
#include "report-tasks.h"
#include "report-types.h"
#include "report.h"

/* ---- JSON -------------------------------------------------------------- */

/* "events": {name: {self, total}} and "ratios": {key: value} of one row:
 * `self` and `total` of the row stay the sample counts. */
static void json_row_events(const struct profile *p, const struct agg_row *r, const struct ratio *rt, uint32_t nr,
			    struct json *j)
{
	if (p->nevents < 2)
		return;
	json_key(j, "events");
	json_object_begin(j);
	for (uint32_t e = 1; e < p->nevents; e++) {
		json_key(j, p->event_names[e]);
		json_object_begin(j);
		json_key(j, "self");
		json_uint(j, r->self[e]);
		json_key(j, "total");
		json_uint(j, r->total[e]);
		json_object_end(j);
	}
	json_object_end(j);
	if (!nr)
		return;
	json_key(j, "ratios");
	json_object_begin(j);
	for (uint32_t i = 0; i < nr; i++) {
		double v = ratio_value(&rt[i], r->self);
		json_key(j, rt[i].key);
		if (v < 0)
			json_null(j);
		else
			json_double(j, v);
	}
	json_object_end(j);
}

void report_json(const struct profile *p, const struct agg *a, const struct report_opts *o, struct json *j)
{
	int wall = p->mode == MODE_WALL;
	json_object_begin(j);
	json_key(j, "samples");
	json_uint(j, a->totals[0]);
	json_key(j, "duration_s");
	json_double(j, duration_s(p));
	json_key(j, "mode");
	json_string(j, wall ? "wall" : "cpu");
	json_key(j, "rate_hz");
	json_uint(j, p->rate_hz);
	json_key(j, "dropped");
	json_uint(j, p->dropped);
	json_key(j, "python_version");
	json_string(j, p->python_version ? p->python_version : "");
	json_key(j, "command");
	json_string(j, p->command ? p->command : "");
	json_key(j, "strata_version");
	json_string(j, p->strata_version ? p->strata_version : "");
	json_key(j, "exit_status");
	if (p->has_exit_status)
		json_int(j, p->exit_status);
	else
		json_null(j);
	json_key(j, "truncated");
	json_bool(j, p->truncated);
	json_key(j, "total_samples");
	json_uint(j, p->totals[0]);
	/* The events recorded with -e (the first drove sampling), their
	 * totals over the samples shown, and the ratios derived from them. */
	json_key(j, "events");
	json_array_begin(j);
	for (uint32_t e = 1; e < p->nevents; e++) {
		const struct pevent_info *in = &p->event_info[e];
		json_object_begin(j);
		json_key(j, "name");
		json_string(j, p->event_names[e]);
		json_key(j, "total");
		json_uint(j, a->totals[e]);
		json_key(j, "sampling");
		json_bool(j, e == 1);
		json_key(j, "period");
		if (in->known && in->period)
			json_uint(j, in->period);
		else
			json_null(j);
		json_key(j, "unit");
		json_string(j, in->flags & EVD_CLOCK ? "ns" : "count");
		json_key(j, "user_only");
		json_bool(j, (in->flags & EVD_USER_ONLY) != 0);
		json_object_end(j);
	}
	json_array_end(j);
	struct ratio rt[RATIOS_MAX];
	uint32_t nr = profile_ratios(p, rt);
	json_key(j, "ratios");
	json_array_begin(j);
	for (uint32_t i = 0; i < nr; i++) {
		json_object_begin(j);
		json_key(j, "name");
		json_string(j, rt[i].key);
		json_key(j, "numerator");
		json_string(j, p->event_names[rt[i].num]);
		json_key(j, "denominator");
		json_string(j, p->event_names[rt[i].den]);
		json_key(j, "value");
		double v = ratio_value(&rt[i], a->totals);
		if (v < 0)
			json_null(j);
		else
			json_double(j, v);
		json_object_end(j);
	}
	json_array_end(j);
	json_key(j, "filter");
	json_object_begin(j);
	json_key(j, "pid");
	if (o->pid)
		json_uint(j, o->pid);
	else
		json_null(j);
	json_key(j, "tid");
	if (o->tid)
		json_uint(j, o->tid);
	else
		json_null(j);
	json_key(j, "no_idle");
	json_bool(j, o->no_idle);
	json_object_end(j);
	json_key(j, "native");
	if (p->native.samples) {
		json_object_begin(j);
		json_key(j, "samples");
		json_uint(j, p->native.samples);
		json_key(j, "failed");
		json_uint(j, p->native.failed);
		json_key(j, "truncated");
		json_uint(j, p->native.truncated);
		json_key(j, "mismatch");
		json_uint(j, p->native.mismatch);
		json_key(j, "keep_interpreter");
		json_bool(j, o->keep_interpreter);
		json_key(j, "inline");
		json_bool(j, !o->no_inline);
		json_object_end(j);
	} else {
		json_null(j);
	}
	json_key(j, "warnings");
	json_array_begin(j);
	for (uint32_t i = 0; i < p->nwarnings; i++)
		json_string(j, p->warnings[i]);
	json_array_end(j);

	json_key(j, "processes");
	json_array_begin(j);
	for (uint32_t i = 0; i < p->nprocs; i++) {
		if (!proc_selected(p, i, o))
			continue;
		const struct pprocess *pr = &p->procs[i];
		json_object_begin(j);
		json_key(j, "pid");
		json_uint(j, pr->pid);
		json_key(j, "ppid");
		json_uint(j, pr->ppid);
		json_key(j, "command");
		json_string(j, pr->command ? pr->command : "");
		json_key(j, "python_version");
		json_string(j, pr->python_version ? pr->python_version : "");
		json_key(j, "samples");
		json_uint(j, proc_samples(p, a, i));
		json_key(j, "threads");
		json_uint(j, proc_threads(p, i));
		json_key(j, "dropped");
		json_uint(j, pr->dropped);
		json_key(j, "finished");
		json_bool(j, pr->ended);
		json_object_end(j);
	}
	json_array_end(j);

	uint32_t n;
	uint32_t *ids = selected_threads(p, a, o, &n);
	json_key(j, "threads");
	json_array_begin(j);
	for (uint32_t i = 0; ids && i < n; i++) {
		const struct pthread_info *t = &p->threads[ids[i]];
		json_object_begin(j);
		json_key(j, "pid");
		json_uint(j, t->pid);
		json_key(j, "tid");
		json_uint(j, t->tid);
		json_key(j, "name");
		json_string(j, t->name);
		json_key(j, "samples");
		json_uint(j, a->thread_samples[ids[i]]);
		if (wall) {
			json_key(j, "idle");
			json_uint(j, a->thread_idle[ids[i]]);
		}
		json_key(j, "dropped");
		json_uint(j, t->dropped);
		json_key(j, "main");
		json_bool(j, t->main);
		json_object_end(j);
	}
	json_array_end(j);
	free(ids);

	if (p->obj_event) {
		struct agg_filter f = { .pid = o->pid, .tid = o->tid };
		report_types_json(p, &f, j);
	}
	if (p->ntasks) {
		struct agg_filter f = { .pid = o->pid, .tid = o->tid };
		report_tasks_json(p, &f, j);
	}

	uint32_t rows = a->nfuncs;
	if (o->limit && rows > (uint32_t)o->limit)
		rows = (uint32_t)o->limit;
	json_key(j, "functions");
	json_array_begin(j);
	for (uint32_t i = 0; i < rows; i++) {
		const struct agg_row *r = &a->funcs[i];
		const struct pfunc *f = &p->funcs[r->func];
		json_object_begin(j);
		json_key(j, "name");
		json_string(j, f->name);
		json_key(j, "file");
		json_string(j, f->file);
		json_key(j, "line");
		json_uint(j, f->line);
		json_key(j, "kind");
		json_string(j, pkind_name(f->kind));
		json_key(j, "module");
		if (f->module)
			json_string(j, f->module);
		else
			json_null(j);
		json_key(j, "self");
		json_uint(j, r->self[0]);
		json_key(j, "total");
		json_uint(j, r->total[0]);
		json_row_events(p, r, rt, nr, j);
		json_object_end(j);
	}
	json_array_end(j);

	rows = a->nlines;
	if (o->limit && rows > (uint32_t)o->limit)
		rows = (uint32_t)o->limit;
	json_key(j, "lines");
	json_array_begin(j);
	for (uint32_t i = 0; i < rows; i++) {
		const struct agg_row *r = &a->lines[i];
		const struct pfunc *f = &p->funcs[r->func];
		json_object_begin(j);
		json_key(j, "file");
		json_string(j, f->file);
		json_key(j, "line");
		json_uint(j, r->line);
		json_key(j, "function");
		json_string(j, f->name);
		json_key(j, "kind");
		json_string(j, pkind_name(f->kind));
		json_key(j, "module");
		if (f->module)
			json_string(j, f->module);
		else
			json_null(j);
		json_key(j, "self");
		json_uint(j, r->self[0]);
		json_key(j, "total");
		json_uint(j, r->total[0]);
		json_row_events(p, r, rt, nr, j);
		json_object_end(j);
	}
	json_array_end(j);
	json_object_end(j);
}
