/*
 * top-data.c — what one screen of `strata top` shows, from the profile
 * model: two aggregations (the last interval, through agg_filter's
 * first_sample, and everything since the start) joined row by row.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "top.h"
#include "export/labels.h"

static double pct(uint64_t v, uint64_t total) { return total ? 100.0 * (double)v / (double)total : 0.0; }

static uint64_t row_key(const struct agg_row *r) { return (uint64_t)r->func << 32 | r->line; }

static int key_cmp(const void *a, const void *b)
{
	uint64_t x = row_key(a), y = row_key(b);
	return x < y ? -1 : x > y;
}

int top_window_build(const struct profile *p, const struct agg_filter *fa, const struct agg_filter *fl, uint32_t ev,
		     int lines, struct top_window *w)
{
	memset(w, 0, sizeof(*w));
	w->all = profile_aggregate(p, fa, ev);
	w->last = profile_aggregate(p, fl, ev);
	if (!w->all || !w->last)
		goto fail;
	w->rows = lines ? w->all->lines : w->all->funcs;
	w->nrows = lines ? w->all->nlines : w->all->nfuncs;
	w->nlrows = lines ? w->last->nlines : w->last->nfuncs;
	w->lrows = malloc(((size_t)w->nlrows + 1) * sizeof(*w->lrows));
	if (!w->lrows)
		goto fail;
	memcpy(w->lrows, lines ? w->last->lines : w->last->funcs, (size_t)w->nlrows * sizeof(*w->lrows));
	qsort(w->lrows, w->nlrows, sizeof(*w->lrows), key_cmp);
	return 0;
fail:
	top_window_free(w);
	return -1;
}

const struct agg_row *top_window_last(const struct top_window *w, const struct agg_row *a)
{
	return bsearch(a, w->lrows, w->nlrows, sizeof(*w->lrows), key_cmp);
}

void top_window_free(struct top_window *w)
{
	free(w->lrows);
	agg_free(w->all);
	agg_free(w->last);
	memset(w, 0, sizeof(*w));
}

struct sort_ctx {
	int key; /* 0..3: last self, last total, all self, all total */
};

static double sort_val(const struct top_row *r, int key)
{
	switch (key) {
	case 0: return r->last_self;
	case 1: return r->last_total;
	case 2: return r->all_self;
	default: return r->all_total;
	}
}

static int row_cmp(const void *a, const void *b, void *ctx)
{
	const struct top_row *x = a, *y = b;
	int k = ((const struct sort_ctx *)ctx)->key;
	/* The chosen column, then the same measure over the other window,
	 * then since start, so rows that are quiet now keep a stable order. */
	int keys[4] = { k, k ^ 2, 2, 3 };
	for (int i = 0; i < 4; i++) {
		double u = sort_val(x, keys[i]), v = sort_val(y, keys[i]);
		if (u != v)
			return u > v ? -1 : 1;
	}
	if (x->func != y->func)
		return x->func < y->func ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

/* The header's sample counts when the rows are of one type's
 * allocations: every sample the thread and process filters keep. */
static void count_samples(const struct profile *p, const struct top_settings *s, uint64_t mark, struct top_frame *f)
{
	f->samples_all = f->samples_last = 0;
	for (uint64_t i = 0; i < p->nsamples; i++) {
		const struct pthread_info *t = &p->threads[p->samples[i].thread];
		if ((s->pid && t->pid != s->pid) || (s->tid && t->tid != s->tid))
			continue;
		uint64_t v = profile_value(p, i, 0);
		f->samples_all += v;
		if (i >= mark)
			f->samples_last += v;
	}
}

struct agg_filter top_filter(const struct profile *p, const struct top_settings *s, int *missing)
{
	struct agg_filter fa = { .pid = s->pid, .tid = s->tid };
	*missing = 0;
	if (s->type[0]) {
		fa.type = UINT32_MAX; /* nothing, until the type is recorded */
		for (uint32_t t = 0; t < p->ntypes; t++)
			if (!strcmp(p->types[t], s->type))
				fa.type = t + 1;
		*missing = fa.type == UINT32_MAX;
	}
	if (s->task[0]) {
		uint32_t t = profile_task_find(p, s->task);
		fa.task = t == PNONE ? UINT32_MAX : t + 1;
	}
	return fa;
}

void top_next_task(const struct profile *p, struct top_settings *s)
{
	uint32_t n = 0;
	struct ptask_row *rows = profile_tasks(p, NULL, &n);
	int found = !s->task[0];
	for (uint32_t i = 0; i < n; i++) {
		const char *name = p->tasks[rows[i].task];
		if (found) {
			snprintf(s->task, sizeof(s->task), "%s", name);
			free(rows);
			return;
		}
		if (!strcmp(name, s->task))
			found = 1;
	}
	free(rows);
	s->task[0] = 0;
}

int top_frame_build(const struct profile *p, const struct top_settings *s, uint64_t mark, uint64_t dropped_mark,
		    double interval_s, double elapsed_s, struct top_frame *f)
{
	memset(f, 0, sizeof(*f));
	uint32_t ev = s->event < p->nevents ? s->event : 0;
	int missing;
	struct agg_filter fa = top_filter(p, s, &missing);
	/* One type's allocations carry no time samples: their bytes. */
	if (s->type[0] && !ev && p->obj_event)
		ev = p->obj_event + 1;
	f->event = ev;
	struct agg_filter fl = fa;
	fl.first_sample = mark;
	struct top_window w;
	int rc = -1;
	if (top_window_build(p, &fa, &fl, ev, s->lines, &w))
		goto out;
	const struct agg *all = w.all, *last = w.last;
	f->rows = calloc((size_t)w.nrows + 1, sizeof(*f->rows));
	if (!f->rows)
		goto out;
	/* Every row of the interval is a row since start. */
	for (uint32_t i = 0; i < w.nrows; i++) {
		const struct agg_row *a = &w.rows[i];
		struct top_row *r = &f->rows[f->nrows++];
		r->func = a->func;
		r->line = a->line;
		r->all_self = pct(a->self[ev], all->totals[ev]);
		r->all_total = pct(a->total[ev], all->totals[ev]);
		const struct agg_row *l = top_window_last(&w, a);
		if (l) {
			r->last_self = pct(l->self[ev], last->totals[ev]);
			r->last_total = pct(l->total[ev], last->totals[ev]);
		}
	}
	struct sort_ctx ctx = { (s->window_all ? 2 : 0) + (s->sort == SORT_TOTAL) };
	qsort_r(f->rows, f->nrows, sizeof(*f->rows), row_cmp, &ctx);

	f->interval_s = interval_s;
	if (s->objects && top_objects_build(p, s, mark, f))
		goto out;
	f->samples_all = all->totals[0];
	f->samples_last = last->totals[0];
	if (fa.type)
		count_samples(p, s, mark, f);
	f->elapsed_s = elapsed_s;
	f->rate = interval_s > 0 ? (double)f->samples_last / interval_s : 0;
	f->dropped = p->dropped;
	f->dropped_last = p->dropped > dropped_mark ? p->dropped - dropped_mark : 0;
	for (uint32_t i = 0; i < p->nprocs; i++)
		if (!(p->procs[i].flags & PROC_UNSUPPORTED) && (!s->pid || p->procs[i].pid == s->pid))
			f->procs++;
	for (uint32_t i = 0; i < p->nthreads; i++)
		if ((!s->pid || p->threads[i].pid == s->pid) && (!s->tid || p->threads[i].tid == s->tid))
			f->threads++;
	rc = 0;
out:
	if (rc)
		top_frame_free(f);
	top_window_free(&w);
	return rc;
}

void top_frame_free(struct top_frame *f)
{
	free(f->rows);
	f->rows = NULL;
	f->nrows = 0;
	top_objects_free(f);
}

void top_row_text(const struct profile *p, const struct top_settings *s, const struct top_row *r, char *name,
		  size_t nn, char *loc, size_t ln)
{
	const struct pfunc *fn = &p->funcs[r->func];
	snprintf(name, nn, "%s", fn->name);
	const char *file = fn->file && *fn->file ? path_base(fn->file) : NULL;
	uint32_t line = s->lines ? r->line : fn->line;
	if (file && line)
		snprintf(loc, ln, "%s:%u", file, line);
	else if (file)
		snprintf(loc, ln, "%s", file);
	else if (fn->module)
		snprintf(loc, ln, "%s", path_base(fn->module));
	else
		snprintf(loc, ln, "%s", "");
}

void top_filter_text(const struct profile *p, const struct top_settings *s, char *thr, size_t tn, char *proc,
		     size_t pn)
{
	snprintf(thr, tn, "all");
	snprintf(proc, pn, "all");
	for (uint32_t i = 0; s->tid && i < p->nthreads; i++)
		if (p->threads[i].tid == s->tid && (!s->pid || p->threads[i].pid == s->pid)) {
			snprintf(thr, tn, "%s (%u)", p->threads[i].name ? p->threads[i].name : "?", s->tid);
			break;
		}
	for (uint32_t i = 0; s->pid && i < p->nprocs; i++)
		if (p->procs[i].pid == s->pid) {
			snprintf(proc, pn, "%u", s->pid);
			break;
		}
}

void top_next_thread(const struct profile *p, struct top_settings *s)
{
	int found = !s->tid;
	for (uint32_t i = 0; i < p->nthreads; i++) {
		const struct pthread_info *t = &p->threads[i];
		if (s->pid && t->pid != s->pid)
			continue;
		if (found) {
			s->tid = t->tid;
			return;
		}
		if (t->tid == s->tid)
			found = 1;
	}
	s->tid = 0;
}

void top_next_process(const struct profile *p, struct top_settings *s)
{
	int found = !s->pid;
	s->tid = 0;
	for (uint32_t i = 0; i < p->nprocs; i++) {
		const struct pprocess *pr = &p->procs[i];
		if (pr->flags & PROC_UNSUPPORTED)
			continue;
		if (found) {
			/* The same pid twice (an exec) is one entry. */
			if (pr->pid != s->pid) {
				s->pid = pr->pid;
				return;
			}
			continue;
		}
		if (pr->pid == s->pid)
			found = 1;
	}
	s->pid = 0;
}
