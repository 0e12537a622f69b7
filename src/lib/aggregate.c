/*
 * aggregate.c — self and total cost per function and per line
 * (profile_aggregate in profile.h).
 *
 * Linear in samples plus nodes, with no per-sample path walk:
 *  1. the filtered samples' values are summed on their leaf nodes;
 *  2. self: each hit node adds its own cost to its function and line;
 *  3. total: nodes are visited children first (a child's index is always
 *     above its parent's), each adding its subtree cost to its parent.
 *     A node that is the outermost occurrence of its function on its path
 *     (flagged when the node was created, see stacks.c) adds its subtree
 *     cost to the function's total. Every sample whose path contains the
 *     function lies under exactly one such node, so recursion counts once
 *     per sample. Lines work the same way.
 */
#include <stdlib.h>
#include <string.h>

#include "profile-internal.h"

/* struct agg plus the storage behind its row pointers. */
struct agg_priv {
	struct agg a;
	uint64_t *block;
};

void agg_free(struct agg *a)
{
	if (!a)
		return;
	struct agg_priv *ap = (struct agg_priv *)a;
	free(a->totals);
	free(a->funcs);
	free(a->lines);
	free(a->thread_samples);
	free(a->thread_idle);
	free(a->thread_wait);
	free(a->thread_tasks);
	free(ap->block);
	free(ap);
}

/* Rows are sorted through a flat key array: comparing keys in place is
 * several times faster than chasing each row's cost pointers. */
struct sort_key {
	uint64_t k1, k2;
	uint32_t func, line, idx;
};

static int key_cmp(const void *x, const void *y)
{
	const struct sort_key *a = x, *b = y;
	if (a->k1 != b->k1)
		return a->k1 > b->k1 ? -1 : 1;
	if (a->k2 != b->k2)
		return a->k2 > b->k2 ? -1 : 1;
	/* Ties in file order, so output is stable. */
	if (a->func != b->func)
		return a->func < b->func ? -1 : 1;
	return a->line < b->line ? -1 : a->line > b->line;
}

static void sort_rows(struct agg_row *rows, uint32_t n, uint32_t e, int by_total)
{
	if (n < 2)
		return;
	struct sort_key *k = malloc((size_t)n * sizeof(*k));
	struct agg_row *tmp = malloc((size_t)n * sizeof(*tmp));
	if (!k || !tmp) {
		/* Out of memory: leave the order as it is. */
		free(k);
		free(tmp);
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct agg_row *r = &rows[i];
		k[i] = (struct sort_key){ by_total ? r->total[e] : r->self[e], by_total ? r->self[e] : r->total[e],
					  r->func, r->line, i };
	}
	qsort(k, n, sizeof(*k), key_cmp);
	for (uint32_t i = 0; i < n; i++)
		tmp[i] = rows[k[i].idx];
	memcpy(rows, tmp, (size_t)n * sizeof(*rows));
	free(k);
	free(tmp);
}

void agg_sort(struct agg *a, uint32_t e, int by_total)
{
	if (e >= a->nevents)
		e = 0;
	sort_rows(a->funcs, a->nfuncs, e, by_total);
	sort_rows(a->lines, a->nlines, e, by_total);
}

/* Whether thread t passes the pid/tid filter. */
static int thread_ok(const struct profile *p, uint32_t t, const struct agg_filter *f)
{
	if (f->pid && p->threads[t].pid != f->pid)
		return 0;
	if (f->tid && p->threads[t].tid != f->tid)
		return 0;
	return 1;
}

struct agg *profile_aggregate(const struct profile *p, const struct agg_filter *f, uint32_t sort_event)
{
	static const struct agg_filter none;
	if (!f)
		f = &none;
	const struct profile_internal *in = p->in;
	const uint32_t ne = p->nevents;
	struct agg_priv *ap = calloc(1, sizeof(*ap));
	if (!ap)
		return NULL;
	struct agg *a = &ap->a;
	a->nevents = ne;
	uint64_t *node_cost = calloc((size_t)p->nnodes * ne, sizeof(uint64_t));
	uint8_t *node_hit = calloc(p->nnodes, 1), *thr_ok = malloc(p->nthreads + 1);
	uint64_t *fself = calloc((size_t)p->nfuncs * ne, sizeof(uint64_t));
	uint64_t *ftotal = calloc((size_t)p->nfuncs * ne, sizeof(uint64_t));
	uint64_t *lself = calloc((size_t)in->nfl * ne, sizeof(uint64_t));
	uint64_t *ltotal = calloc((size_t)in->nfl * ne, sizeof(uint64_t));
	/* Presence, not cost, decides which rows exist: a zero-weight sample
	 * still puts its functions in the table. */
	uint8_t *fseen = calloc(p->nfuncs + 1, 1), *lseen = calloc(in->nfl + 1, 1);
	a->totals = calloc(ne, sizeof(uint64_t));
	a->thread_samples = calloc(p->nthreads + 1, sizeof(uint64_t));
	a->thread_idle = calloc(p->nthreads + 1, sizeof(uint64_t));
	a->thread_wait = calloc((size_t)(p->nthreads + 1) * (WAITR_MAX_KNOWN + 1), sizeof(uint64_t));
	a->thread_tasks = calloc(p->nthreads + 1, sizeof(uint64_t));
	if (!node_cost || !node_hit || !thr_ok || !fself || !ftotal || !lself || !ltotal || !fseen || !lseen ||
	    !a->totals || !a->thread_samples || !a->thread_idle || !a->thread_wait || !a->thread_tasks)
		goto fail;

	/* 1: samples → leaf nodes. */
	for (uint32_t t = 0; t < p->nthreads; t++)
		thr_ok[t] = (uint8_t)thread_ok(p, t, f);
	for (uint64_t i = f->first_sample; i < p->nsamples; i++) {
		const struct psample *s = &p->samples[i];
		if (!thr_ok[s->thread])
			continue;
		if ((f->t0 && s->time_ns < f->t0) || (f->t1 && s->time_ns >= f->t1))
			continue;
		if (f->exclude_idle && (s->flags & PS_IDLE))
			continue;
		if (f->type && (!(s->flags & PS_ALLOC) || s->type != f->type - 1))
			continue;
		if (f->task && s->task != f->task - 1)
			continue;
		const uint64_t *v = p->values + i * ne;
		uint64_t *c = node_cost + (size_t)s->node * ne;
		for (uint32_t e = 0; e < ne; e++) {
			c[e] += v[e];
			a->totals[e] += v[e];
		}
		node_hit[s->node] = 1;
		a->thread_samples[s->thread] += v[0];
		if (s->flags & PS_WAITING)
			a->thread_tasks[s->thread] += v[0];
		if (s->flags & PS_IDLE) {
			a->thread_idle[s->thread] += v[0];
			a->thread_wait[(size_t)s->thread * (WAITR_MAX_KNOWN + 1) + (s->wait <= WAITR_MAX_KNOWN ? s->wait : 0)] +=
				v[0];
		}
		a->nsamples++;
	}

	/* 2: self, from each hit node's own cost. */
	for (uint32_t n = 1; n < p->nnodes; n++) {
		if (!node_hit[n])
			continue;
		const uint64_t *c = node_cost + (size_t)n * ne;
		uint32_t fn = in->node_func[n], fl = in->node_fl[n];
		for (uint32_t e = 0; e < ne; e++) {
			fself[(size_t)fn * ne + e] += c[e];
			lself[(size_t)fl * ne + e] += c[e];
		}
	}

	/* 3: total, children before parents; node_cost becomes subtree cost
	 * and node_hit "subtree hit". */
	for (uint32_t n = p->nnodes; n-- > 1;) {
		if (!node_hit[n])
			continue;
		const uint64_t *c = node_cost + (size_t)n * ne;
		uint32_t fn = in->node_func[n], fl = in->node_fl[n], par = p->nodes[n].parent;
		uint8_t first = in->node_first[n];
		if (first & NODE_FIRST_FUNC) {
			fseen[fn] = 1;
			for (uint32_t e = 0; e < ne; e++)
				ftotal[(size_t)fn * ne + e] += c[e];
		}
		if (first & NODE_FIRST_LINE) {
			lseen[fl] = 1;
			for (uint32_t e = 0; e < ne; e++)
				ltotal[(size_t)fl * ne + e] += c[e];
		}
		if (par != 0) {
			uint64_t *pc = node_cost + (size_t)par * ne;
			for (uint32_t e = 0; e < ne; e++)
				pc[e] += c[e];
			node_hit[par] = 1;
		}
	}

	/* Rows: every function and line on a filtered sample's path. */
	uint32_t nf = 0, nl = 0;
	for (uint32_t i = 0; i < p->nfuncs; i++)
		nf += fseen[i];
	for (uint32_t i = 0; i < in->nfl; i++)
		nl += lseen[i];
	a->funcs = calloc(nf ? nf : 1, sizeof(*a->funcs));
	a->lines = calloc(nl ? nl : 1, sizeof(*a->lines));
	ap->block = malloc(((size_t)nf + nl) * 2 * ne * sizeof(uint64_t) + 1);
	if (!a->funcs || !a->lines || !ap->block)
		goto fail;
	uint64_t *blk = ap->block;
	for (uint32_t i = 0; i < p->nfuncs; i++) {
		if (!fseen[i])
			continue;
		struct agg_row *r = &a->funcs[a->nfuncs++];
		r->func = i;
		r->line = 0;
		r->self = blk;
		memcpy(blk, fself + (size_t)i * ne, ne * sizeof(uint64_t));
		blk += ne;
		r->total = blk;
		memcpy(blk, ftotal + (size_t)i * ne, ne * sizeof(uint64_t));
		blk += ne;
	}
	for (uint32_t i = 0; i < in->nfl; i++) {
		if (!lseen[i])
			continue;
		struct agg_row *r = &a->lines[a->nlines++];
		r->func = in->fl_func[i];
		r->line = in->fl_line[i];
		r->self = blk;
		memcpy(blk, lself + (size_t)i * ne, ne * sizeof(uint64_t));
		blk += ne;
		r->total = blk;
		memcpy(blk, ltotal + (size_t)i * ne, ne * sizeof(uint64_t));
		blk += ne;
	}
	agg_sort(a, sort_event, 0);
	free(node_cost);
	free(node_hit);
	free(thr_ok);
	free(fself);
	free(ftotal);
	free(lself);
	free(ltotal);
	free(fseen);
	free(lseen);
	return a;
fail:
	free(node_cost);
	free(node_hit);
	free(thr_ok);
	free(fself);
	free(ftotal);
	free(lself);
	free(ltotal);
	free(fseen);
	free(lseen);
	agg_free(a);
	return NULL;
}
