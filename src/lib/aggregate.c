/*
 * aggregate.c — self and total cost per function and per line
 * (profile_aggregate in profile.h).
 *
 * Two passes keep it linear in the samples: first the filtered samples'
 * values are summed per leaf node (one add per sample and event); then
 * each node that received cost walks up to the root once, adding its cost
 * to self (leaf frame) and total (every function and line on the path).
 * A function that appears several times on one path (recursion) is counted
 * once: a stamp per function records the last path that counted it.
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
	free(ap->block);
	free(ap);
}

struct sort_ctx {
	uint32_t e;
	int by_total;
};

static int cmp_u64_desc(uint64_t a, uint64_t b) { return a > b ? -1 : a < b ? 1 : 0; }

static int row_cmp(const void *x, const void *y, void *ctx)
{
	const struct agg_row *a = x, *b = y;
	const struct sort_ctx *s = ctx;
	const uint64_t *ka = s->by_total ? a->total : a->self, *kb = s->by_total ? b->total : b->self;
	const uint64_t *oa = s->by_total ? a->self : a->total, *ob = s->by_total ? b->self : b->total;
	int c = cmp_u64_desc(ka[s->e], kb[s->e]);
	if (!c)
		c = cmp_u64_desc(oa[s->e], ob[s->e]);
	/* Ties in file order, so output is stable. */
	if (!c)
		c = a->func < b->func ? -1 : a->func > b->func;
	if (!c)
		c = a->line < b->line ? -1 : a->line > b->line;
	return c;
}

void agg_sort(struct agg *a, uint32_t e, int by_total)
{
	if (e >= a->nevents)
		e = 0;
	struct sort_ctx s = { e, by_total };
	if (a->nfuncs)
		qsort_r(a->funcs, a->nfuncs, sizeof(*a->funcs), row_cmp, &s);
	if (a->nlines)
		qsort_r(a->lines, a->nlines, sizeof(*a->lines), row_cmp, &s);
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
	uint32_t *fstamp = calloc(p->nfuncs, sizeof(uint32_t)), *lstamp = calloc(in->nfl, sizeof(uint32_t));
	a->totals = calloc(ne, sizeof(uint64_t));
	a->thread_samples = calloc(p->nthreads + 1, sizeof(uint64_t));
	a->thread_idle = calloc(p->nthreads + 1, sizeof(uint64_t));
	if (!node_cost || !node_hit || !thr_ok || !fself || !ftotal || !lself || !ltotal || !fstamp || !lstamp ||
	    !a->totals || !a->thread_samples || !a->thread_idle)
		goto fail;

	/* Pass 1: samples → leaf nodes. */
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
		const uint64_t *v = p->values + i * ne;
		uint64_t *c = node_cost + (size_t)s->node * ne;
		for (uint32_t e = 0; e < ne; e++) {
			c[e] += v[e];
			a->totals[e] += v[e];
		}
		node_hit[s->node] = 1;
		a->thread_samples[s->thread] += v[0];
		if (s->flags & PS_IDLE)
			a->thread_idle[s->thread] += v[0];
		a->nsamples++;
	}

	/* Pass 2: each hit node's path, once. Stamps are node + 1 so that
	 * zero means "never counted". */
	for (uint32_t n = 1; n < p->nnodes; n++) {
		if (!node_hit[n])
			continue;
		const uint64_t *c = node_cost + (size_t)n * ne;
		uint32_t leaf = p->nodes[n].frame;
		uint32_t lf = p->frames[leaf].func, ll = in->frame_fl[leaf];
		for (uint32_t e = 0; e < ne; e++) {
			fself[(size_t)lf * ne + e] += c[e];
			lself[(size_t)ll * ne + e] += c[e];
		}
		for (uint32_t m = n; m != 0 && m != PNONE; m = p->nodes[m].parent) {
			uint32_t fr = p->nodes[m].frame;
			uint32_t fn = p->frames[fr].func, fl = in->frame_fl[fr];
			if (fstamp[fn] != n + 1) {
				fstamp[fn] = n + 1;
				for (uint32_t e = 0; e < ne; e++)
					ftotal[(size_t)fn * ne + e] += c[e];
			}
			if (lstamp[fl] != n + 1) {
				lstamp[fl] = n + 1;
				for (uint32_t e = 0; e < ne; e++)
					ltotal[(size_t)fl * ne + e] += c[e];
			}
		}
	}

	/* Rows: every function and line with a cost (a zero-weight sample
	 * still makes its path appear, so presence is the stamp, not the sum). */
	uint32_t nf = 0, nl = 0;
	for (uint32_t i = 0; i < p->nfuncs; i++)
		nf += fstamp[i] != 0;
	for (uint32_t i = 0; i < in->nfl; i++)
		nl += lstamp[i] != 0;
	a->funcs = calloc(nf ? nf : 1, sizeof(*a->funcs));
	a->lines = calloc(nl ? nl : 1, sizeof(*a->lines));
	ap->block = malloc(((size_t)nf + nl) * 2 * ne * sizeof(uint64_t) + 1);
	if (!a->funcs || !a->lines || !ap->block)
		goto fail;
	uint64_t *blk = ap->block;
	for (uint32_t i = 0; i < p->nfuncs; i++) {
		if (!fstamp[i])
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
		if (!lstamp[i])
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
	free(fstamp);
	free(lstamp);
	return a;
fail:
	free(node_cost);
	free(node_hit);
	free(thr_ok);
	free(fself);
	free(ftotal);
	free(lself);
	free(ltotal);
	free(fstamp);
	free(lstamp);
	agg_free(a);
	return NULL;
}
