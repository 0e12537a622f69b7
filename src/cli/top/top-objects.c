/*
 * top-objects.c — what the objects view of `strata top` shows (--objects,
 * the 'o' key): allocations per second by type and the lines (or
 * functions) that make the most, over the last interval and since the
 * start, from the same profile model as every report. No terminal code.
 *
 * The numbers are the estimates allocation sampling gives (each sample
 * stands for the allocations it was drawn from: docs/objects.md), so a
 * type or line allocating less than the sampling rate per interval shows
 * in bursts; the since-start columns settle.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "top.h"

/* The four allocation events follow obj_event in this order (allocs.c). */
enum { AO, AB, LO, LB };

static int window_all, by_bytes;

static int row_cmp(const void *a, const void *b)
{
	const struct top_obj_row *x = a, *y = b;
	/* The chosen measure and window, then the other window, so rows
	 * that are quiet now keep a stable order. */
	double u[2], v[2];
	u[0] = by_bytes ? x->last_bytes : x->last_objects;
	v[0] = by_bytes ? y->last_bytes : y->last_objects;
	u[1] = (double)(by_bytes ? x->all_bytes : x->all_objects);
	v[1] = (double)(by_bytes ? y->all_bytes : y->all_objects);
	for (int k = 0; k < 2; k++) {
		int i = window_all ? 1 - k : k;
		if (u[i] != v[i])
			return u[i] > v[i] ? -1 : 1;
	}
	if (x->type != y->type)
		return x->type < y->type ? -1 : 1;
	if (x->func != y->func)
		return x->func < y->func ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

static void sort_rows(struct top_obj_row *r, uint32_t n, const struct top_settings *s)
{
	window_all = s->window_all;
	by_bytes = s->sort == SORT_TOTAL;
	qsort(r, n, sizeof(*r), row_cmp);
}

/* Types: since the start, then the last interval joined to them. */
static int build_types(const struct profile *p, const struct agg_filter *fa, const struct agg_filter *fl,
		       double per_s, struct top_frame *f)
{
	uint32_t na = 0, nl = 0;
	struct ptype_row *all = profile_types(p, fa, &na);
	struct ptype_row *last = profile_types(p, fl, &nl);
	int rc = -1;
	if ((na && !all) || (nl && !last))
		goto out;
	f->types = calloc((size_t)na + 1, sizeof(*f->types));
	if (!f->types)
		goto out;
	for (uint32_t i = 0; i < na; i++) {
		struct top_obj_row *r = &f->types[f->ntypes++];
		r->type = all[i].type;
		r->all_objects = all[i].alloc_objects;
		r->all_bytes = all[i].alloc_bytes;
		r->live_bytes = all[i].live_bytes;
		for (uint32_t k = 0; k < nl; k++)
			if (last[k].type == r->type) {
				r->last_objects = (double)last[k].alloc_objects * per_s;
				r->last_bytes = (double)last[k].alloc_bytes * per_s;
				break;
			}
	}
	rc = 0;
out:
	free(all);
	free(last);
	return rc;
}

/* Lines (or functions) with their own allocations (self: the innermost
 * frame made them). */
static int build_rows(const struct profile *p, const struct top_settings *s, const struct agg_filter *fa,
		      const struct agg_filter *fl, double per_s, struct top_frame *f)
{
	uint32_t e = p->obj_event;
	struct top_window w;
	int rc = -1;
	if (top_window_build(p, fa, fl, e, s->lines, &w))
		goto out;
	const struct agg *all = w.all, *last = w.last;
	f->orows = calloc((size_t)w.nrows + 1, sizeof(*f->orows));
	if (!f->orows)
		goto out;
	for (uint32_t i = 0; i < w.nrows; i++) {
		const struct agg_row *a = &w.rows[i];
		if (!a->self[e + AO])
			continue; /* allocates nothing itself: a caller */
		struct top_obj_row *r = &f->orows[f->norows++];
		r->func = a->func;
		r->line = a->line;
		r->all_objects = a->self[e + AO];
		r->all_bytes = a->self[e + AB];
		r->live_bytes = a->self[e + LB];
		const struct agg_row *l = top_window_last(&w, a);
		if (l) {
			r->last_objects = (double)l->self[e + AO] * per_s;
			r->last_bytes = (double)l->self[e + AB] * per_s;
		}
	}
	f->total.all_objects = all->totals[e + AO];
	f->total.all_bytes = all->totals[e + AB];
	f->total.live_bytes = all->totals[e + LB];
	f->total.last_objects = (double)last->totals[e + AO] * per_s;
	f->total.last_bytes = (double)last->totals[e + AB] * per_s;
	rc = 0;
out:
	top_window_free(&w);
	return rc;
}

int top_objects_build(const struct profile *p, const struct top_settings *s, uint64_t mark, struct top_frame *f)
{
	top_objects_free(f);
	f->has_objects = p->obj_event != 0;
	if (!f->has_objects)
		return 0;
	struct agg_filter fa = top_filter(p, s, &f->type_missing);
	struct agg_filter fl = fa;
	fl.first_sample = mark;
	double per_s = f->interval_s > 0 ? 1.0 / f->interval_s : 0;
	if (build_types(p, &fa, &fl, per_s, f) || build_rows(p, s, &fa, &fl, per_s, f)) {
		top_objects_free(f);
		return -1;
	}
	sort_rows(f->types, f->ntypes, s);
	sort_rows(f->orows, f->norows, s);
	return 0;
}

void top_objects_free(struct top_frame *f)
{
	free(f->types);
	free(f->orows);
	f->types = f->orows = NULL;
	f->ntypes = f->norows = 0;
	memset(&f->total, 0, sizeof(f->total));
}

void top_next_type(const struct profile *p, struct top_settings *s)
{
	uint32_t n = 0;
	struct ptype_row *rows = profile_types(p, NULL, &n);
	int found = !s->type[0];
	for (uint32_t i = 0; i < n; i++) {
		const char *name = p->types[rows[i].type];
		if (found) {
			snprintf(s->type, sizeof(s->type), "%s", name);
			free(rows);
			return;
		}
		if (!strcmp(name, s->type))
			found = 1;
	}
	free(rows);
	s->type[0] = 0;
}
