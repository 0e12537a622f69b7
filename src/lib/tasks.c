/*
 * tasks.c — asyncio tasks in the model (docs/async.md): the REC_TASK
 * names, the logical stack of a sample taken in a task (the awaiting
 * tasks' frames at the root, a "[task NAME]" frame where the chain
 * crosses into a task, the event loop's own frames hidden unless
 * load_opts.keep_interpreter), and the tasks table report shows.
 *
 * A stack with task boundaries (format 1.2) lists, leaf first, the
 * thread's frames (the running task's, then from loop_at on the loop's)
 * and after them the frames of the suspended tasks awaiting it
 * (PYF_AWAITER), innermost task first.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile-internal.h"

static uint32_t task_intern(struct profile *p, const char *name)
{
	struct profile_internal *in = p->in;
	const char *s = strpool_str(&in->strs, name);
	if (!s)
		return PNONE;
	uint32_t t = u64map_get(&in->stack_task, (uint64_t)(uintptr_t)s | 1ull << 63);
	if (t != MAP_NONE)
		return t;
	if (grow(&p->tasks, &in->cap_tasks, p->ntasks + 1, sizeof(*p->tasks)))
		return PNONE;
	p->tasks[p->ntasks] = (char *)s;
	/* Names share the stack map, keyed apart by bit 63 (a stream
	 * index never reaches it). */
	if (u64map_put(&in->stack_task, (uint64_t)(uintptr_t)s | 1ull << 63, p->ntasks))
		return PNONE;
	return p->ntasks++;
}

void tasks_on_record(struct profile *p, uint32_t st, struct rbuf *body)
{
	struct profile_internal *in = p->in;
	struct rec_task r;
	if (rec_get_task(body, &r)) {
		in->bad_bodies++;
		return;
	}
	uint32_t t = task_intern(p, r.name);
	if (t == PNONE || u64map_put(&in->task_map, (uint64_t)st << 32 | r.index, t))
		in->oom = 1;
	free(r.name);
}

uint32_t tasks_lookup(struct profile *p, uint32_t st, uint32_t task)
{
	uint32_t t = u64map_get(&p->in->task_map, (uint64_t)st << 32 | task);
	return t == MAP_NONE ? PNONE : t;
}

uint32_t profile_task_find(const struct profile *p, const char *name)
{
	for (uint32_t i = 0; i < p->ntasks; i++)
		if (strcmp(p->tasks[i], name) == 0)
			return i;
	return PNONE;
}

int profile_filter_task(struct profile *p, const char *name, char *err, size_t errlen)
{
	uint32_t want = profile_task_find(p, name);
	if (want == PNONE) {
		int o = snprintf(err, errlen, "no asyncio task named '%s' was recorded", name);
		if (!p->ntasks)
			snprintf(err + o, errlen - (size_t)o, " (the profile has no task frames: docs/async.md)");
		else
			for (uint32_t t = 0; t < p->ntasks && t < 12 && (size_t)o < errlen; t++)
				o += snprintf(err + o, errlen - (size_t)o, "%s%s", t ? ", " : "; tasks: ", p->tasks[t]);
		return -1;
	}
	uint64_t k = 0;
	for (uint32_t e = 0; e < p->nevents; e++)
		p->totals[e] = 0;
	for (uint64_t i = 0; i < p->nsamples; i++) {
		const struct psample *s = &p->samples[i];
		if (s->task != want)
			continue;
		p->samples[k] = *s;
		memmove(p->values + k * p->nevents, p->values + i * p->nevents, p->nevents * sizeof(uint64_t));
		for (uint32_t e = 0; e < p->nevents; e++)
			p->totals[e] += p->values[k * p->nevents + e];
		k++;
	}
	p->nsamples = k;
	/* The allocation map would name moved samples. */
	u64map_free(&p->in->alloc_map);
	return 0;
}

uint32_t tasks_marker(struct profile *p, uint32_t st, const struct rec_task_frame *b, uint32_t *fr)
{
	uint32_t n = 0, t = tasks_lookup(p, st, b->task);
	if (b->flags & TASKF_OTHERS)
		fr[n++] = profile_marker_frame(p, "[one of several awaiters]");
	char name[256];
	snprintf(name, sizeof(name), "[task %s]", t == PNONE ? "?" : p->tasks[t]);
	fr[n++] = profile_marker_frame(p, name);
	return n;
}

/* Leaf-first py[nphys..) are the awaiters' frames. */
static uint32_t phys_frames(const struct rec_stack *r)
{
	uint32_t nphys = r->npy;
	while (nphys > 0 && (r->py[nphys - 1].flags & PYF_AWAITER))
		nphys--;
	return nphys;
}

uint32_t tasks_awaiters_path(struct profile *p, uint32_t st, const struct rec_stack *r, uint32_t *fr,
			     uint32_t (*pyf)(struct profile *, uint32_t, const struct rec_pyframe *))
{
	uint32_t nphys = phys_frames(r), n = 0;
	/* The awaiting tasks, outermost first, each under its marker. */
	for (uint32_t k = r->ntasks; k-- > 1;) {
		uint32_t lo = k == 1 ? nphys : r->tasks[k - 1].at + 1;
		n += tasks_marker(p, st, &r->tasks[k], fr + n);
		for (uint32_t i = r->tasks[k].at + 1; i-- > lo;)
			fr[n++] = pyf(p, st, &r->py[i]);
	}
	n += tasks_marker(p, st, &r->tasks[0], fr + n);
	return n;
}

uint32_t tasks_path(struct profile *p, uint32_t st, const struct rec_stack *r, uint32_t *fr,
		    uint32_t (*pyf)(struct profile *, uint32_t, const struct rec_pyframe *))
{
	uint32_t nphys = phys_frames(r), n = 0, xat = r->tasks[0].at;
	/* The loop's frames, at the root, when asked for. */
	if (p->in->opts.keep_interpreter && r->loop_at)
		for (uint32_t i = nphys; i-- > r->loop_at;)
			fr[n++] = pyf(p, st, &r->py[i]);
	n += tasks_awaiters_path(p, st, r, fr + n, pyf);
	for (uint32_t i = xat + 1; i-- > 0;)
		fr[n++] = pyf(p, st, &r->py[i]);
	return n;
}

static int busiest_first(const void *a, const void *b)
{
	const struct ptask_row *x = a, *y = b;
	uint64_t u = x->running + x->waiting, v = y->running + y->waiting;
	return u < v ? 1 : u > v ? -1 : x->task < y->task ? -1 : x->task > y->task;
}

struct ptask_row *profile_tasks(const struct profile *p, const struct agg_filter *f, uint32_t *n)
{
	*n = 0;
	if (!p->ntasks)
		return NULL;
	struct ptask_row *rows = calloc(p->ntasks, sizeof(*rows));
	/* Waits per (task, leaf frame): the most frequent is the row's. */
	struct u64map waits = { 0 };
	uint64_t *wcount = NULL;
	uint32_t nw = 0, capw = 0;
	if (!rows)
		return NULL;
	for (uint32_t i = 0; i < p->ntasks; i++) {
		rows[i].task = i;
		rows[i].top_wait = PNONE;
	}
	for (uint64_t i = 0; i < p->nsamples; i++) {
		const struct psample *s = &p->samples[i];
		if (s->task == PNONE || (s->flags & PS_ALLOC))
			continue;
		if (f) {
			const struct pthread_info *th = &p->threads[s->thread];
			if ((f->pid && th->pid != f->pid) || (f->tid && th->tid != f->tid) ||
			    (f->t0 && s->time_ns < f->t0) || (f->t1 && s->time_ns > f->t1) ||
			    (f->task && s->task != f->task - 1) || i < f->first_sample)
				continue;
		}
		uint64_t w = profile_value(p, i, 0);
		struct ptask_row *r = &rows[s->task];
		if (!(s->flags & PS_WAITING)) {
			r->running += w;
			continue;
		}
		r->waiting += w;
		uint32_t leaf = p->nodes[s->node].frame;
		uint64_t key = (uint64_t)s->task << 32 | leaf;
		uint32_t k = u64map_get(&waits, key);
		if (k == MAP_NONE) {
			if (nw == capw) {
				uint32_t cap = capw ? capw * 2 : 64;
				uint64_t *c = realloc(wcount, cap * sizeof(*c));
				if (!c)
					continue;
				wcount = c;
				capw = cap;
			}
			if (u64map_put(&waits, key, nw))
				continue;
			k = nw;
			wcount[nw++] = 0;
		}
		wcount[k] += w;
		if (wcount[k] > r->top_wait_samples) {
			r->top_wait_samples = wcount[k];
			r->top_wait = leaf;
		}
	}
	u64map_free(&waits);
	free(wcount);
	uint32_t m = 0;
	for (uint32_t i = 0; i < p->ntasks; i++)
		if (rows[i].running || rows[i].waiting)
			rows[m++] = rows[i];
	qsort(rows, m, sizeof(*rows), busiest_first);
	*n = m;
	return rows;
}

void tasks_free(struct profile *p)
{
	struct profile_internal *in = p->in;
	u64map_free(&in->task_map);
	u64map_free(&in->stack_task);
	free(p->tasks);
	p->tasks = NULL;
}
