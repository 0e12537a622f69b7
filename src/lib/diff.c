/*
 * diff.c — comparing two profiles (diff.h): whether they measure the same
 * thing, each one's cost per key, the rows of what changed, and BASE's
 * cost laid on NEW's call tree for differential flame graphs. Keys come
 * from diff-match.c.
 *
 * Totals count a key once per sample, as report does: a depth-first walk
 * of the call tree keeps how often each key is on the current path, so a
 * node is the outermost occurrence of its key when that count is zero on
 * entry; a subtree's cost then goes to the key at its outermost node only.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "intern.h"

/* ---- what a profile measures -------------------------------------------------- */

/* The event that drives sampling: the first -e event, or NULL for the
 * CPU-time or wall-clock timer of the mode. Allocation events (--objects)
 * come after the -e events and never drive the timer. */
static const char *sampling_event(const struct profile *p)
{
	if (p->nevents > 1 && (!p->obj_event || p->obj_event > 1))
		return p->event_names[1];
	return NULL;
}

static int is_alloc_event(const struct profile *p, uint32_t e)
{
	return p->obj_event && e >= p->obj_event && e < p->obj_event + 4;
}

static const char *mode_name(const struct profile *p) { return p->mode == MODE_WALL ? "wall" : "cpu"; }

/* One unit of event e in the unit diff_check names; 0 when unknown. */
static double unit_scale(const struct profile *p, uint32_t e, const char **unit)
{
	if (e == 0) {
		const char *se = sampling_event(p);
		if (!se) {
			*unit = "ns";
			return (double)p->period_ns;
		}
		const struct pevent_info *in = &p->event_info[1];
		*unit = in->known && (in->flags & EVD_CLOCK) ? "ns" : se;
		return in->known ? (double)in->period : 0.0;
	}
	if (is_alloc_event(p, e)) {
		*unit = strstr(p->event_names[e], "bytes") ? "bytes" : "objects";
		return 1.0;
	}
	*unit = p->event_info[e].known && (p->event_info[e].flags & EVD_CLOCK) ? "ns" : p->event_names[e];
	return 1.0;
}

static void note(struct diff_check *c, const char *fmt, const char *a, const char *b, const char *x,
		 const char *y)
{
	if (c->nnotes < DIFF_NOTES_MAX)
		snprintf(c->notes[c->nnotes++], sizeof(c->notes[0]), fmt, a, b, x, y);
}

static uint32_t find_event(const struct profile *p, const char *name)
{
	for (uint32_t e = 0; e < p->nevents; e++)
		if (!strcmp(p->event_names[e], name))
			return e;
	return PNONE;
}

static void fmt_period(const struct profile *p, char *buf, size_t n)
{
	const char *se = sampling_event(p);
	if (!se)
		snprintf(buf, n, "%u Hz", p->rate_hz);
	else if (p->event_info[1].known)
		snprintf(buf, n, "every %llu %s", (unsigned long long)p->event_info[1].period,
			 p->event_info[1].flags & EVD_CLOCK ? "ns" : se);
	else
		snprintf(buf, n, "every ? %s", se);
}

int diff_check(const struct profile *const p[2], const char *const names[2], const char *event, int absolute,
	       struct diff_check *c, char *why, size_t whylen)
{
	memset(c, 0, sizeof(*c));
	const char *b = names[0], *n = names[1];
	if (p[0]->mode != p[1]->mode) {
		snprintf(why, whylen,
			 "%s was recorded in %s mode and %s in %s mode: %s time and %s time do not compare; "
			 "record both with the same --mode",
			 b, mode_name(p[0]), n, mode_name(p[1]), p[0]->mode == MODE_WALL ? "wall-clock" : "CPU",
			 p[1]->mode == MODE_WALL ? "wall-clock" : "CPU");
		return -1;
	}
	const char *s0 = sampling_event(p[0]), *s1 = sampling_event(p[1]);
	if ((s0 != NULL) != (s1 != NULL) || (s0 && strcmp(s0, s1))) {
		const char *timer = p[0]->mode == MODE_WALL ? "the wall-clock timer" : "the CPU-time timer";
		snprintf(why, whylen, "%s samples on %s and %s on %s: their samples count different things; "
			 "record both with the same -e", b, s0 ? s0 : timer, n, s1 ? s1 : timer);
		return -1;
	}
	if (s0) {
		const struct pevent_info *i0 = &p[0]->event_info[1], *i1 = &p[1]->event_info[1];
		if (i0->known && i1->known && (i0->type != i1->type || i0->config != i1->config)) {
			snprintf(why, whylen, "%s and %s both sample on '%s' but it is not the same event there "
				 "(perf type/config differ)", b, n, s0);
			return -1;
		}
	}
	const char *ev = event ? event : "samples";
	for (int s = 0; s < 2; s++) {
		c->event[s] = find_event(p[s], ev);
		if (c->event[s] == PNONE) {
			const struct profile *q = p[s];
			if (!strncmp(ev, "alloc-", 6) || !strncmp(ev, "live-", 5))
				snprintf(why, whylen, "%s has no event '%s': it was recorded without --objects", names[s], ev);
			else
				snprintf(why, whylen, "%s has no event '%s' (its events: %s%s%s)", names[s], ev, "samples",
					 q->nevents > 1 ? ", " : "", q->nevents > 1 ? q->event_names[1] : "");
			return -1;
		}
	}
	const char *u0, *u1;
	c->scale[0] = unit_scale(p[0], c->event[0], &u0);
	c->scale[1] = unit_scale(p[1], c->event[1], &u1);
	if (strcmp(u0, u1)) {
		snprintf(why, whylen, "'%s' is counted in %s in %s but in %s in %s", ev, u0, b, u1, n);
		return -1;
	}
	c->unit = u0;
	uint32_t e0 = c->event[0], e1 = c->event[1];
	if (e0 && !is_alloc_event(p[0], e0)) {
		const struct pevent_info *i0 = &p[0]->event_info[e0], *i1 = &p[1]->event_info[e1];
		if (i0->known && i1->known && (i0->type != i1->type || i0->config != i1->config)) {
			snprintf(why, whylen, "'%s' is not the same event in %s and %s (perf type/config differ)", ev, b, n);
			return -1;
		}
		if (i0->known && i1->known && (i0->flags & EVD_USER_ONLY) != (i1->flags & EVD_USER_ONLY))
			note(c, "'%s' was counted in user space only in %s (kernel.perf_event_paranoid): "
				"its kernel part is missing there",
			     ev, (i0->flags & EVD_USER_ONLY) ? b : n, "", "");
	}
	if (absolute && (c->scale[0] <= 0 || c->scale[1] <= 0)) {
		snprintf(why, whylen, "--absolute: the sampling period of %s is not recorded, so its samples have no unit",
			 c->scale[0] <= 0 ? b : n);
		return -1;
	}
	/* What differs but compares, said once each. */
	char r0[64], r1[64];
	fmt_period(p[0], r0, sizeof(r0));
	fmt_period(p[1], r1, sizeof(r1));
	if (e0 == 0 && strcmp(r0, r1))
		note(c,
		     absolute ? "sampling periods differ (%s in %s, %s in %s): samples are converted to time (samples x period)"
			      : "sampling periods differ (%s in %s, %s in %s): shares do not depend on it",
		     r0, b, r1, n);
	if (!is_alloc_event(p[0], e0) && (p[0]->obj_event != 0) != (p[1]->obj_event != 0))
		note(c, "only %s was recorded with --objects, whose allocation hooks add their own cost to its time%s%s%s",
		     p[0]->obj_event ? b : n, "", "", "");
	return 0;
}

/* ---- costs per key ------------------------------------------------------------ */

void diff_costs_free(struct diff_costs *c)
{
	free(c->self);
	free(c->total);
	free(c->rep);
	memset(c, 0, sizeof(*c));
}

static char *task_frame_name(const char *task)
{
	size_t n = strlen(task) + 8;
	char *s = malloc(n + 1);
	if (s)
		snprintf(s, n + 1, "[task %s]", task);
	return s;
}

static int thread_passes(const struct profile *p, uint32_t t, const struct diff_filter *f)
{
	const struct pthread_info *ti = &p->threads[t];
	if (p->procs[ti->process].flags & PROC_UNSUPPORTED)
		return 0;
	if ((f->pid && ti->pid != f->pid) || (f->tid && ti->tid != f->tid))
		return 0;
	return !f->thread || (ti->name && !strcmp(ti->name, f->thread));
}

int diff_filter_check(const struct profile *p, const struct diff_filter *f, char *why, size_t whylen)
{
	if (f->pid || f->tid || f->thread) {
		uint32_t t;
		for (t = 0; t < p->nthreads && !thread_passes(p, t, f); t++)
			;
		if (t == p->nthreads) {
			if (f->tid)
				snprintf(why, whylen, "no thread %u%s%s", f->tid, f->pid ? " in that process" : "", "");
			else if (f->thread)
				snprintf(why, whylen, "no thread named '%s'%s", f->thread, f->pid ? " in that process" : "");
			else
				snprintf(why, whylen, "no process %u", f->pid);
			return -1;
		}
	}
	if (f->task) {
		char *name = task_frame_name(f->task);
		if (!name) {
			snprintf(why, whylen, "out of memory");
			return -1;
		}
		uint32_t fu;
		for (fu = 0; fu < p->nfuncs; fu++)
			if (p->funcs[fu].kind == PK_OTHER && !strcmp(p->funcs[fu].name, name))
				break;
		free(name);
		if (fu == p->nfuncs) {
			snprintf(why, whylen, "no asyncio task '%s' (no '[task %s]' frame: recorded without task frames?)",
				 f->task, f->task);
			return -1;
		}
	}
	return 0;
}

/* Per node: its key (PNONE for the root and for frames without one). */
static uint32_t node_key(const struct profile *p, const struct diff_match *m, int side, enum diff_by by, uint32_t n)
{
	if (n == 0)
		return PNONE;
	uint32_t fr = p->nodes[n].frame;
	switch (by) {
	case DIFF_BY_LINE: return diff_line_key(m, side, fr);
	case DIFF_BY_FILE: return diff_file_key(m, side, p->frames[fr].func);
	default: return diff_func_key(m, side, p->frames[fr].func);
	}
}

/* Children of every node, as a CSR list. */
static int children(const struct profile *p, uint32_t **start, uint32_t **child)
{
	uint32_t nn = p->nnodes;
	*start = calloc((size_t)nn + 2, sizeof(uint32_t));
	*child = malloc(((size_t)nn + 1) * sizeof(uint32_t));
	uint32_t *fill = malloc(((size_t)nn + 1) * sizeof(uint32_t));
	if (!*start || !*child || !fill) {
		free(fill);
		return -1;
	}
	for (uint32_t n = 1; n < nn; n++)
		(*start)[p->nodes[n].parent + 1]++;
	for (uint32_t n = 0; n < nn; n++)
		(*start)[n + 1] += (*start)[n];
	memcpy(fill, *start, (size_t)nn * sizeof(uint32_t));
	for (uint32_t n = 1; n < nn; n++)
		(*child)[fill[p->nodes[n].parent]++] = n;
	free(fill);
	return 0;
}

int diff_costs_build(const struct profile *p, const struct diff_match *m, int side, enum diff_by by,
		     const struct diff_filter *f, struct diff_costs *out)
{
	const uint32_t nk = diff_nkeys(m), nn = p->nnodes;
	memset(out, 0, sizeof(*out));
	out->self = calloc((size_t)nk + 1, sizeof(uint64_t));
	out->total = calloc((size_t)nk + 1, sizeof(uint64_t));
	out->rep = malloc(((size_t)nk + 1) * sizeof(uint32_t));
	uint64_t *cost = calloc((size_t)nn + 1, sizeof(uint64_t));
	uint32_t *key = malloc(((size_t)nn + 1) * sizeof(uint32_t)), *onpath = calloc((size_t)nk + 1, sizeof(uint32_t));
	uint8_t *first = calloc((size_t)nn + 1, 1), *thr = malloc((size_t)p->nthreads + 1);
	uint8_t *in_task = f->task ? calloc((size_t)nn + 1, 1) : NULL;
	uint32_t *cstart = NULL, *child = NULL, *stk = malloc(((size_t)nn + 1) * 4 * sizeof(uint32_t));
	char *tname = f->task ? task_frame_name(f->task) : NULL;
	int rc = -1;
	if (!out->self || !out->total || !out->rep || !cost || !key || !onpath || !first || !thr || !stk ||
	    (f->task && (!in_task || !tname)) || children(p, &cstart, &child))
		goto done;
	for (uint32_t k = 0; k < nk; k++)
		out->rep[k] = PNONE;
	for (uint32_t t = 0; t < p->nthreads; t++)
		thr[t] = (uint8_t)thread_passes(p, t, f);
	for (uint32_t n = 0; n < nn; n++) {
		key[n] = node_key(p, m, side, by, n);
		if (in_task && n) {
			const struct pfunc *fn = &p->funcs[p->frames[p->nodes[n].frame].func];
			in_task[n] = in_task[p->nodes[n].parent] || (fn->kind == PK_OTHER && !strcmp(fn->name, tname));
		}
	}
	/* Samples onto their leaves. */
	for (uint64_t i = 0; i < p->nsamples; i++) {
		const struct psample *s = &p->samples[i];
		if (s->thread >= p->nthreads || !thr[s->thread] || s->node >= nn)
			continue;
		if ((f->exclude_idle && (s->flags & PS_IDLE)) || (in_task && !in_task[s->node]))
			continue;
		uint64_t v = profile_value(p, i, f->event);
		cost[s->node] += v;
		out->all += v;
		out->nsamples++;
	}
	/* Outermost occurrences, depth first: the stack holds (node,
	 * exiting) pairs, an exit pushed under the node's children. */
	uint32_t sp = 0;
	stk[sp++] = 0;
	stk[sp++] = 0;
	while (sp) {
		uint32_t exiting = stk[--sp], n = stk[--sp];
		uint32_t k = key[n];
		if (exiting) {
			if (k != PNONE)
				onpath[k]--;
			continue;
		}
		if (k != PNONE) {
			first[n] = onpath[k] == 0;
			onpath[k]++;
		}
		stk[sp++] = n;
		stk[sp++] = 1;
		for (uint32_t c = cstart[n]; c < cstart[n + 1]; c++) {
			stk[sp++] = child[c];
			stk[sp++] = 0;
		}
	}
	/* Self: each node's own cost, at its key. */
	for (uint32_t n = 1; n < nn; n++) {
		uint32_t k = key[n];
		if (k == PNONE)
			continue;
		out->self[k] += cost[n];
		if (out->rep[k] == PNONE)
			out->rep[k] = by == DIFF_BY_LINE ? p->nodes[n].frame : p->frames[p->nodes[n].frame].func;
	}
	/* Total: subtree costs (children first: a child's index is above its
	 * parent's) at the outermost occurrence of each key. */
	for (uint32_t n = nn; n-- > 1;) {
		uint32_t k = key[n];
		if (k != PNONE && first[n])
			out->total[k] += cost[n];
		cost[p->nodes[n].parent] += cost[n];
	}
	rc = 0;
done:
	free(cost);
	free(key);
	free(onpath);
	free(first);
	free(thr);
	free(in_task);
	free(cstart);
	free(child);
	free(stk);
	free(tname);
	if (rc)
		diff_costs_free(out);
	return rc;
}

/* ---- rows ------------------------------------------------------------------------- */

void diff_result_free(struct diff_result *r)
{
	if (!r)
		return;
	free(r->rows);
	free(r);
}

static int row_cmp(const void *x, const void *y)
{
	const struct diff_row *a = x, *b = y;
	if (a->delta != b->delta)
		return a->delta > b->delta ? -1 : 1;
	uint64_t sa = a->self[0] + a->self[1], sb = b->self[0] + b->self[1];
	if (sa != sb)
		return sa > sb ? -1 : 1;
	return a->key < b->key ? -1 : a->key > b->key;
}

struct diff_result *diff_compare(const struct profile *const p[2], const struct diff_match *m,
				 const struct diff_check *c, const struct diff_query *q)
{
	struct diff_result *r = calloc(1, sizeof(*r));
	struct diff_costs dc[2] = { { 0 } };
	if (!r)
		return NULL;
	for (int s = 0; s < 2; s++) {
		struct diff_filter f = q->f[s];
		f.event = c->event[s];
		if (diff_costs_build(p[s], m, s, q->by, &f, &dc[s]))
			goto fail;
		r->all[s] = dc[s].all;
		r->nsamples[s] = dc[s].nsamples;
		r->all_value[s] = q->absolute ? (double)dc[s].all * c->scale[s] : 1.0;
	}
	uint32_t nk = diff_nkeys(m), n = 0;
	for (uint32_t k = 0; k < nk; k++)
		n += dc[0].total[k] || dc[1].total[k] || dc[0].self[k] || dc[1].self[k];
	r->rows = calloc((size_t)n + 1, sizeof(*r->rows));
	if (!r->rows)
		goto fail;
	for (uint32_t k = 0; k < nk; k++) {
		if (!(dc[0].total[k] || dc[1].total[k] || dc[0].self[k] || dc[1].self[k]))
			continue;
		struct diff_row *w = &r->rows[r->nrows++];
		w->key = k;
		for (int s = 0; s < 2; s++) {
			w->rep[s] = dc[s].rep[k];
			w->self[s] = dc[s].self[k];
			w->total[s] = dc[s].total[k];
			double v = (double)(q->by_total ? w->total[s] : w->self[s]);
			if (q->absolute)
				w->value[s] = v * c->scale[s];
			else
				w->value[s] = dc[s].all ? v / (double)dc[s].all : 0.0;
		}
		w->delta = w->value[1] - w->value[0];
		w->points = q->absolute ? (r->all_value[0] > 0 ? 100.0 * w->delta / r->all_value[0] : 0.0)
					: 100.0 * w->delta;
		w->status = !w->total[0] && !w->self[0] ? DIFF_NEW_ONLY
			    : !w->total[1] && !w->self[1] ? DIFF_VANISHED : DIFF_CHANGED;
		w->ratio = w->value[0] > 0 ? w->value[1] / w->value[0] : w->value[1] > 0 ? INFINITY : 1.0;
	}
	qsort(r->rows, r->nrows, sizeof(*r->rows), row_cmp);
	diff_costs_free(&dc[0]);
	diff_costs_free(&dc[1]);
	return r;
fail:
	diff_costs_free(&dc[0]);
	diff_costs_free(&dc[1]);
	diff_result_free(r);
	return NULL;
}

/* ---- BASE on NEW's tree --------------------------------------------------------- */

int diff_tree_map(const struct profile *base, const struct profile *new_, const struct diff_match *m,
		  uint32_t base_event, int exclude_idle, int by_func, uint64_t *base_self, uint64_t *unmatched)
{
	struct u64map edges = { 0 };
	uint32_t *to = malloc(((size_t)base->nnodes + 1) * sizeof(uint32_t));
	int rc = -1;
	memset(base_self, 0, (size_t)new_->nnodes * sizeof(*base_self));
	*unmatched = 0;
	if (!to)
		goto done;
	/* NEW's edges: (parent, key) -> child; the first node wins when
	 * two share both (native frames differing only by address). */
	for (uint32_t n = 1; n < new_->nnodes; n++) {
		uint32_t fr = new_->nodes[n].frame;
		uint32_t k = by_func ? diff_func_key(m, DIFF_NEW, new_->frames[fr].func) : diff_line_key(m, DIFF_NEW, fr);
		uint64_t e = (uint64_t)new_->nodes[n].parent << 32 | k;
		if (u64map_get(&edges, e) == MAP_NONE && u64map_put(&edges, e, n))
			goto done;
	}
	to[0] = 0;
	for (uint32_t n = 1; n < base->nnodes; n++) {
		uint32_t par = to[base->nodes[n].parent];
		if (par == PNONE) {
			to[n] = PNONE;
			continue;
		}
		uint32_t fr = base->nodes[n].frame;
		uint32_t k = by_func ? diff_func_key(m, DIFF_BASE, base->frames[fr].func) : diff_line_key(m, DIFF_BASE, fr);
		uint32_t v = u64map_get(&edges, (uint64_t)par << 32 | k);
		to[n] = v == MAP_NONE ? PNONE : v;
	}
	for (uint64_t i = 0; i < base->nsamples; i++) {
		const struct psample *s = &base->samples[i];
		if ((exclude_idle && (s->flags & PS_IDLE)) || s->node >= base->nnodes)
			continue;
		uint64_t v = profile_value(base, i, base_event);
		if (to[s->node] != PNONE && to[s->node] != 0)
			base_self[to[s->node]] += v;
		else
			*unmatched += v;
	}
	rc = 0;
done:
	u64map_free(&edges);
	free(to);
	return rc;
}
