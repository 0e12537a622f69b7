/*
 * allocs.c — allocation samples (strata record --objects) in the profile
 * model: the four object events, the types allocated, and frees.
 *
 * An allocation sample stands for every allocation the sampling did not
 * pick. Sampling is by bytes (a Poisson process with mean `rate` bytes
 * between sample points), so a block of `size` bytes is sampled with
 * probability P = 1 - exp(-size / rate), and the unbiased estimate of
 * what one sample stands for is 1/P allocations and size/P bytes (the
 * estimator of pprof and tcmalloc). Those go into alloc-objects and
 * alloc-bytes; live-objects and live-bytes hold the same until the
 * block's REC_FREE is read, then 0. docs/objects.md says how accurate
 * this is.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile-internal.h"

static const char *const obj_events[] = { "alloc-objects", "alloc-bytes", "live-objects", "live-bytes" };
enum { EV_AO, EV_AB, EV_LO, EV_LB, EV_N };

/* Appends the object events after the others, re-laying out values
 * already stored. */
static int add_events(struct profile *p)
{
	uint32_t old = p->nevents, n = old + EV_N;
	char **names = realloc(p->event_names, n * sizeof(*names));
	if (!names)
		return -1;
	p->event_names = names;
	uint64_t *tot = realloc(p->totals, n * sizeof(*tot));
	if (!tot)
		return -1;
	p->totals = tot;
	struct pevent_info *info = realloc(p->event_info, n * sizeof(*info));
	if (!info)
		return -1;
	p->event_info = info;
	if (p->nsamples) {
		uint64_t *v = calloc(p->nsamples, n * sizeof(uint64_t));
		if (!v)
			return -1;
		for (uint64_t i = 0; i < p->nsamples; i++)
			memcpy(v + i * n, p->values + i * old, old * sizeof(uint64_t));
		free(p->values);
		p->values = v;
		p->in->cap_values = (uint32_t)p->nsamples;
	} else {
		free(p->values);
		p->values = NULL;
		p->in->cap_values = 0;
	}
	for (uint32_t e = 0; e < EV_N; e++) {
		names[old + e] = strdup(obj_events[e]);
		if (!names[old + e])
			return -1;
		tot[old + e] = 0;
		memset(&info[old + e], 0, sizeof(info[0]));
		p->nevents = old + e + 1;
	}
	p->obj_event = old;
	return 0;
}

void objects_on_process(struct profile *p, uint32_t st, uint64_t rate)
{
	p->in->streams[st].objects_rate = rate;
	if (!p->obj_event) {
		for (uint32_t d = 0; d < ALLOC_NDOMAINS; d++)
			p->in->domain_type[d] = PNONE;
		if (add_events(p))
			p->in->oom = 1;
	}
}

static uint32_t type_by_name(struct profile *p, const char *name)
{
	for (uint32_t i = 0; i < p->ntypes; i++)
		if (!strcmp(p->types[i], name))
			return i;
	if (p->ntypes == p->in->cap_types) {
		uint32_t c = p->in->cap_types ? p->in->cap_types * 2 : 64;
		char **t = realloc(p->types, c * sizeof(*t));
		if (!t)
			return PNONE;
		p->types = t;
		p->in->cap_types = c;
	}
	if (!(p->types[p->ntypes] = strdup(name)))
		return PNONE;
	return p->ntypes++;
}

static uint32_t domain_type(struct profile *p, uint32_t domain)
{
	if (domain >= ALLOC_NDOMAINS)
		domain = ALLOC_RAW;
	uint32_t *t = &p->in->domain_type[domain];
	if (*t == PNONE)
		*t = type_by_name(p, alloc_domain_name(domain));
	return *t;
}

/* An allocation's key: its id within its process. A process's stream
 * that starts over (continuous profiling cuts one per window; a failed
 * exec carries on in a new one) keeps the agent's ids, and a block
 * allocated in one stream may be freed in the next. */
static uint64_t alloc_key(uint32_t st, uint32_t pr, uint64_t id)
{
	uint64_t who = pr != PNONE ? pr : (1u << 23) | st;
	return who << 40 | (id & ((1ull << 40) - 1));
}

/* Moves sample i's live values out (freed). */
static void unlive(struct profile *p, uint64_t i)
{
	uint64_t *v = p->values + i * p->nevents + p->obj_event;
	p->totals[p->obj_event + EV_LO] -= v[EV_LO];
	p->totals[p->obj_event + EV_LB] -= v[EV_LB];
	v[EV_LO] = v[EV_LB] = 0;
}

static void on_alloc(struct profile *p, uint32_t st, uint32_t pr, struct rbuf *body)
{
	struct profile_internal *in = p->in;
	struct rec_alloc a;
	if (rec_get_alloc(body, &a)) {
		in->bad_bodies++;
		return;
	}
	struct pstream *s = &in->streams[st];
	s->clock += (uint64_t)a.dt_ns;
	if (pr == PNONE || (p->procs[pr].flags & PROC_UNSUPPORTED) || !p->obj_event || !s->objects_rate)
		return;
	uint64_t i = profile_append_sample(p, st, pr, a.tid, a.stack, s->clock, PS_ALLOC);
	if (i == UINT64_MAX)
		return;
	uint32_t ty = a.type ? u64map_get(&in->type_map, (uint64_t)st << 32 | a.type) : MAP_NONE;
	p->samples[i].type = ty != MAP_NONE ? ty : domain_type(p, a.domain);
	/* The Poisson estimate: 1/P allocations of `size` bytes. */
	double prob = -expm1(-(double)a.size / (double)s->objects_rate);
	double objs = prob > 0 ? 1.0 / prob : 1.0;
	uint64_t *v = p->values + i * p->nevents + p->obj_event;
	/* Whole objects per sample, the fractions carried over in the
	 * stream (error diffusion), so that sums stay unbiased: a block of
	 * about the rate's size stands for 1.58 allocations, not 2. */
	double before = s->objects_acc;
	s->objects_acc += objs;
	v[EV_AO] = (uint64_t)(floor(s->objects_acc) - floor(before));
	v[EV_AB] = (uint64_t)llround(objs * (double)a.size);
	int live = !(a.flags & ALLOC_UNTRACKED);
	uint64_t key = alloc_key(st, pr, a.id);
	if (live && u64map_get(&in->early_free, key) != MAP_NONE)
		live = 0;
	v[EV_LO] = live ? v[EV_AO] : 0;
	v[EV_LB] = live ? v[EV_AB] : 0;
	for (uint32_t e = 0; e < EV_N; e++)
		p->totals[p->obj_event + e] += v[e];
	if (i < MAP_NONE && u64map_put(&in->alloc_map, key, (uint32_t)i))
		in->oom = 1;
}

void objects_on_record(struct profile *p, uint32_t st, uint32_t pr, uint64_t type, struct rbuf *body)
{
	struct profile_internal *in = p->in;
	switch (type) {
	case REC_OBJ_TYPE: {
		struct rec_obj_type t;
		if (rec_get_obj_type(body, &t)) {
			in->bad_bodies++;
			return;
		}
		uint32_t g = type_by_name(p, t.name[0] ? t.name : "[unnamed type]");
		free(t.name);
		if (g == PNONE || u64map_put(&in->type_map, (uint64_t)st << 32 | t.index, g))
			in->oom = 1;
		return;
	}
	case REC_ALLOC:
		on_alloc(p, st, pr, body);
		return;
	case REC_ALLOC_TYPE: {
		struct rec_alloc_type a;
		if (rec_get_alloc_type(body, &a)) {
			in->bad_bodies++;
			return;
		}
		uint32_t i = u64map_get(&in->alloc_map, alloc_key(st, pr, a.id));
		uint32_t g = u64map_get(&in->type_map, (uint64_t)st << 32 | a.type);
		if (i != MAP_NONE && g != MAP_NONE && i < p->nsamples)
			p->samples[i].type = g;
		return;
	}
	case REC_FREE: {
		struct rec_free f;
		if (rec_get_free(body, &f)) {
			in->bad_bodies++;
			return;
		}
		uint64_t key = alloc_key(st, pr, f.id);
		uint32_t i = u64map_get(&in->alloc_map, key);
		if (i != MAP_NONE && i < p->nsamples)
			unlive(p, i);
		else if (u64map_put(&in->early_free, key, 1))
			in->oom = 1;
		return;
	}
	}
}

void objects_free(struct profile *p)
{
	for (uint32_t i = 0; i < p->ntypes; i++)
		free(p->types[i]);
	free(p->types);
	u64map_free(&p->in->type_map);
	u64map_free(&p->in->alloc_map);
	u64map_free(&p->in->early_free);
}

/* ---- what the reports ask ---- */

static int keep(const struct profile *p, const struct agg_filter *f, uint64_t i)
{
	const struct psample *s = &p->samples[i];
	if (!(s->flags & PS_ALLOC) || s->type >= p->ntypes)
		return 0;
	if (!f)
		return 1;
	if (i < f->first_sample || (f->type && s->type != f->type - 1))
		return 0;
	const struct pthread_info *t = &p->threads[s->thread];
	if ((f->pid && t->pid != f->pid) || (f->tid && t->tid != f->tid))
		return 0;
	return !((f->t0 && s->time_ns < f->t0) || (f->t1 && s->time_ns >= f->t1));
}

static int by_bytes(const void *a, const void *b)
{
	const struct ptype_row *x = a, *y = b;
	if (x->alloc_bytes != y->alloc_bytes)
		return x->alloc_bytes < y->alloc_bytes ? 1 : -1;
	return x->type < y->type ? -1 : x->type > y->type;
}

struct ptype_row *profile_types(const struct profile *p, const struct agg_filter *f, uint32_t *n)
{
	*n = 0;
	if (!p->obj_event || !p->ntypes)
		return NULL;
	struct ptype_row *rows = calloc(p->ntypes, sizeof(*rows));
	if (!rows)
		return NULL;
	for (uint32_t t = 0; t < p->ntypes; t++)
		rows[t].type = t;
	for (uint64_t i = 0; i < p->nsamples; i++) {
		if (!keep(p, f, i))
			continue;
		const uint64_t *v = p->values + i * p->nevents + p->obj_event;
		struct ptype_row *r = &rows[p->samples[i].type];
		r->alloc_objects += v[EV_AO];
		r->alloc_bytes += v[EV_AB];
		r->live_objects += v[EV_LO];
		r->live_bytes += v[EV_LB];
	}
	uint32_t k = 0;
	for (uint32_t t = 0; t < p->ntypes; t++)
		if (rows[t].alloc_objects)
			rows[k++] = rows[t];
	qsort(rows, k, sizeof(*rows), by_bytes);
	*n = k;
	if (!k) {
		free(rows);
		return NULL;
	}
	return rows;
}

int profile_filter_type(struct profile *p, const char *name, char *err, size_t errlen)
{
	uint32_t want = PNONE;
	for (uint32_t t = 0; t < p->ntypes; t++)
		if (!strcmp(p->types[t], name))
			want = t;
	if (want == PNONE) {
		int o = snprintf(err, errlen, "no allocation of type '%s' was recorded", name);
		if (!p->obj_event)
			snprintf(err + o, errlen - (size_t)o, " (the profile has no allocation samples: record with --objects)");
		else
			for (uint32_t t = 0; t < p->ntypes && t < 12 && (size_t)o < errlen; t++)
				o += snprintf(err + o, errlen - (size_t)o, "%s%s", t ? ", " : "; types: ", p->types[t]);
		return -1;
	}
	uint64_t k = 0;
	for (uint32_t e = 0; e < p->nevents; e++)
		p->totals[e] = 0;
	for (uint64_t i = 0; i < p->nsamples; i++) {
		const struct psample *s = &p->samples[i];
		if (!(s->flags & PS_ALLOC) || s->type != want)
			continue;
		p->samples[k] = *s;
		memmove(p->values + k * p->nevents, p->values + i * p->nevents, p->nevents * sizeof(uint64_t));
		for (uint32_t e = 0; e < p->nevents; e++)
			p->totals[e] += p->values[k * p->nevents + e];
		k++;
	}
	p->nsamples = k;
	/* The allocation map would name moved samples: no record follows. */
	u64map_free(&p->in->alloc_map);
	return 0;
}
