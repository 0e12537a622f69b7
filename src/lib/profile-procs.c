/*
 * profile-procs.c — what a recording says ran, for the profile model; see
 * profile.h. The session (command, mode, rate, times, exit status), its
 * events and their descriptions, the processes (a placeholder for a stream
 * whose REC_PROCESS was lost; one process for the two streams of an image
 * that carried on after a failed exec) and their threads, with names,
 * times and drop counts. Samples point into these tables (stream_proc,
 * thread_get), but nothing here touches functions, frames or the call
 * tree: that is why it is apart from profile.c, which dispatches the
 * records and builds the rest.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile-internal.h"

/* ---- processes, threads ----------------------------------------------- */

static char *join_argv(uint32_t argc, char **argv)
{
	size_t n = 1;
	for (uint32_t i = 0; i < argc; i++)
		n += strlen(argv[i]) + 1;
	char *s = malloc(n), *o = s;
	if (!s)
		return NULL;
	for (uint32_t i = 0; i < argc; i++) {
		if (i)
			*o++ = ' ';
		size_t l = strlen(argv[i]);
		memcpy(o, argv[i], l);
		o += l;
	}
	*o = 0;
	return s;
}

static uint32_t new_proc(struct profile *p, uint32_t pid)
{
	struct profile_internal *in = p->in;
	if (grow(&p->procs, &in->cap_procs, (uint64_t)p->nprocs + 1, sizeof(*p->procs))) {
		in->oom = 1;
		return PNONE;
	}
	struct pprocess *pr = &p->procs[p->nprocs];
	memset(pr, 0, sizeof(*pr));
	pr->pid = pid;
	return p->nprocs++;
}

/* The process of stream st. A stream whose REC_PROCESS was lost (a damaged
 * first chunk) still has samples worth keeping: it gets a placeholder
 * process, its pid from the reader when known. */
uint32_t stream_proc(struct profile *p, uint32_t st, const struct reader_stream *rs)
{
	struct profile_internal *in = p->in;
	struct pstream *s = &in->streams[st];
	if (s->proc != PNONE)
		return s->proc;
	uint32_t pr = new_proc(p, rs ? rs->pid : 0);
	if (pr == PNONE)
		return PNONE;
	in->orphan_records++;
	/* Without its start time, count from the session start. */
	p->procs[pr].start_ns = p->start_ns;
	s->clock = p->start_ns;
	s->proc = pr;
	return pr;
}

static int set_str(char **dst, const char *src)
{
	char *c = strdup(src ? src : "");
	if (!c)
		return -1;
	free(*dst);
	*dst = c;
	return 0;
}

uint32_t thread_get(struct profile *p, uint32_t proc, uint32_t tid)
{
	struct profile_internal *in = p->in;
	uint64_t key = (uint64_t)proc << 32 | tid;
	uint32_t t = u64map_get(&in->thread_map, key);
	if (t != MAP_NONE)
		return t;
	if (grow(&p->threads, &in->cap_threads, (uint64_t)p->nthreads + 1, sizeof(*p->threads)))
		goto oom;
	t = p->nthreads;
	struct pthread_info *ti = &p->threads[t];
	memset(ti, 0, sizeof(*ti));
	ti->pid = p->procs[proc].pid;
	ti->tid = tid;
	ti->process = proc;
	/* A thread seen before (or without) its REC_THREAD is named by id
	 * until its announcement arrives. */
	char name[32];
	snprintf(name, sizeof(name), "thread %u", tid);
	if (set_str(&ti->name, name))
		goto oom;
	if (u64map_put(&in->thread_map, key, t)) {
		free(ti->name);
		goto oom;
	}
	p->nthreads++;
	return t;
oom:
	in->oom = 1;
	return PNONE;
}

/* ---- events ----------------------------------------------------------- */

/* Event 0 is the sample weight; names after it come from the session (or
 * the first process). They are fixed once the first sample is stored. */
int set_events(struct profile *p, uint32_t n, char **names)
{
	if (p->in->events_fixed)
		return 0;
	if (n > STRATA_MAX_COUNTERS)
		n = STRATA_MAX_COUNTERS;
	char **ev = calloc(n + 1, sizeof(*ev));
	uint64_t *tot = calloc(n + 1, sizeof(*tot));
	struct pevent_info *info = calloc(n + 1, sizeof(*info));
	if (!ev || !tot || !info)
		goto oom;
	ev[0] = strdup("samples");
	if (!ev[0])
		goto oom;
	for (uint32_t i = 0; i < n; i++)
		if (!(ev[i + 1] = strdup(names[i])))
			goto oom;
	for (uint32_t i = 0; i < p->nevents; i++)
		free(p->event_names[i]);
	free(p->event_names);
	free(p->totals);
	free(p->event_info);
	p->event_names = ev;
	p->totals = tot;
	p->event_info = info;
	p->nevents = n + 1;
	return 0;
oom:
	if (ev)
		for (uint32_t i = 0; i <= n; i++)
			free(ev[i]);
	free(ev);
	free(tot);
	free(info);
	p->in->oom = 1;
	return -1;
}

/* The first description of each event wins: every process of a recording
 * opens the same events, and a process that had to count in user space
 * only says so in its own record. */
void on_event_desc(struct profile *p, struct rbuf *body)
{
	struct rec_event_desc d;
	if (rec_get_event_desc(body, &d)) {
		p->in->bad_bodies++;
		return;
	}
	uint32_t e = d.index + 1;
	if (d.index < p->nevents - 1 && !strcmp(p->event_names[e], d.name)) {
		struct pevent_info *in = &p->event_info[e];
		if (!in->known) {
			*in = (struct pevent_info){ .known = 1, .type = d.type, .config = d.config, .period = d.period,
						    .flags = d.flags };
		} else {
			in->flags |= d.flags & EVD_USER_ONLY;
		}
	}
	rec_free_event_desc(&d);
}

/* ---- records ---------------------------------------------------------- */

void on_session(struct profile *p, struct rbuf *body)
{
	struct profile_internal *in = p->in;
	struct rec_session s;
	if (rec_get_session(body, &s)) {
		in->bad_bodies++;
		return;
	}
	char *cmd = join_argv(s.argc, s.argv);
	if (!cmd || set_str(&p->strata_version, s.strata_version) || set_str(&p->hostname, s.hostname)) {
		free(cmd);
		in->oom = 1;
		rec_free_session(&s);
		return;
	}
	free(p->command);
	p->command = cmd;
	p->mode = s.mode == MODE_WALL ? MODE_WALL : MODE_CPU;
	p->rate_hz = s.rate_hz;
	p->period_ns = s.rate_hz ? 1000000000ull / s.rate_hz : 0;
	p->start_realtime_ns = s.start_realtime_ns;
	p->start_ns = s.start_mono_ns;
	in->have_session = 1;
	set_events(p, s.nevents, s.events);
	rec_free_session(&s);
}

void on_session_end(struct profile *p, struct rbuf *body)
{
	struct rec_session_end e;
	if (rec_get_session_end(body, &e)) {
		p->in->bad_bodies++;
		return;
	}
	p->end_ns = e.end_mono_ns;
	p->has_exit_status = 1;
	p->exit_status = e.status;
	p->in->have_session_end = 1;
}

void on_process(struct profile *p, uint32_t st, struct rbuf *body)
{
	struct profile_internal *in = p->in;
	struct rec_process r;
	if (rec_get_process(body, &r)) {
		in->bad_bodies++;
		return;
	}
	struct pstream *s = &in->streams[st];
	uint32_t pr = s->proc;
	if (pr == PNONE && (r.flags & PROC_CONTINUED)) {
		/* The same process image carrying on after a failed exec:
		 * one process, two streams. */
		for (uint32_t i = p->nprocs; i-- > 0;)
			if (p->procs[i].pid == r.pid && !(p->procs[i].flags & PROC_UNSUPPORTED)) {
				pr = i;
				break;
			}
		if (pr != PNONE) {
			s->proc = pr;
			s->clock = r.start_mono_ns;
			p->procs[pr].ended = 0;
			/* Its allocations are sampled at the same rate. */
			if ((r.flags & PROC_OBJECTS) && !(p->procs[pr].flags & PROC_UNSUPPORTED))
				objects_on_process(p, st, r.objects_rate);
			rec_free_process(&r);
			return;
		}
	}
	if (pr == PNONE && (pr = new_proc(p, r.pid)) == PNONE) {
		rec_free_process(&r);
		return;
	}
	if (in->orphan_records && s->proc == pr)
		in->orphan_records--; /* the placeholder is identified after all */
	s->proc = pr;
	s->clock = r.start_mono_ns;
	struct pprocess *pp = &p->procs[pr];
	pp->pid = r.pid;
	pp->ppid = r.ppid;
	pp->flags = r.flags & ~(uint32_t)PROC_CONTINUED;
	pp->start_ns = r.start_mono_ns;
	char *cmd = join_argv(r.argc, r.argv);
	if (!cmd || set_str(&pp->executable, r.executable) || set_str(&pp->python_version, r.python_version)) {
		free(cmd);
		in->oom = 1;
		rec_free_process(&r);
		return;
	}
	free(pp->command);
	pp->command = cmd;
	/* Threads created for this process before its record keep their pid. */
	for (uint32_t i = 0; i < p->nthreads; i++)
		if (p->threads[i].process == pr)
			p->threads[i].pid = r.pid;
	if (!(r.flags & PROC_UNSUPPORTED)) {
		if (!p->python_version && set_str(&p->python_version, r.python_version))
			in->oom = 1;
		if (!in->have_session) {
			/* No session record (a file written without the CLI, or
			 * its chunk was lost): the first process describes it. */
			p->mode = r.mode == MODE_WALL ? MODE_WALL : MODE_CPU;
			p->rate_hz = r.rate_hz;
			if (!p->command && set_str(&p->command, cmd))
				in->oom = 1;
			set_events(p, r.nevents, r.events);
		}
		if (r.period_ns)
			p->period_ns = r.period_ns;
		if (r.flags & PROC_OBJECTS)
			objects_on_process(p, st, r.objects_rate);
	}
	rec_free_process(&r);
}

void on_process_end(struct profile *p, uint32_t st, const struct reader_stream *rs, struct rbuf *body)
{
	struct profile_internal *in = p->in;
	struct rec_process_end e;
	if (rec_get_process_end(body, &e)) {
		in->bad_bodies++;
		return;
	}
	uint32_t pr = stream_proc(p, st, rs);
	if (pr == PNONE)
		return;
	struct pprocess *pp = &p->procs[pr];
	pp->ended = 1;
	pp->end_reason = (int)e.reason;
	pp->end_ns = e.end_mono_ns;
	/* The writer also counts samples it could not encode; those are in
	 * the end record but in no REC_DROPPED. */
	struct pstream *s = &in->streams[st];
	if (e.dropped > s->drops) {
		pp->dropped += e.dropped - s->drops;
		s->drops = e.dropped;
	}
}

void on_thread(struct profile *p, uint32_t st, const struct reader_stream *rs, uint64_t type,
	       struct rbuf *body)
{
	struct profile_internal *in = p->in;
	uint32_t pr = stream_proc(p, st, rs);
	if (pr == PNONE)
		return;
	if (type == REC_THREAD) {
		struct rec_thread r;
		if (rec_get_thread(body, &r)) {
			in->bad_bodies++;
			return;
		}
		uint32_t t = thread_get(p, pr, r.tid);
		if (t != PNONE) {
			struct pthread_info *ti = &p->threads[t];
			ti->start_ns = r.start_mono_ns;
			ti->main = !!(r.flags & THREAD_MAIN);
			if (r.name && *r.name && set_str(&ti->name, r.name))
				in->oom = 1;
		}
		rec_free_thread(&r);
	} else if (type == REC_THREAD_NAME) {
		struct rec_thread_name r;
		if (rec_get_thread_name(body, &r)) {
			in->bad_bodies++;
			return;
		}
		uint32_t t = thread_get(p, pr, r.tid);
		if (t != PNONE && set_str(&p->threads[t].name, r.name))
			in->oom = 1;
		rec_free_thread_name(&r);
	} else {
		struct rec_thread_end r;
		if (rec_get_thread_end(body, &r)) {
			in->bad_bodies++;
			return;
		}
		uint32_t t = thread_get(p, pr, r.tid);
		if (t != PNONE) {
			struct pthread_info *ti = &p->threads[t];
			ti->end_ns = r.end_mono_ns;
			/* Normally equal to the sum of its REC_DROPPED. */
			if (r.dropped > ti->dropped) {
				p->procs[pr].dropped += r.dropped - ti->dropped;
				in->streams[st].drops += r.dropped - ti->dropped;
				ti->dropped = r.dropped;
			}
		}
	}
}

void on_dropped(struct profile *p, uint32_t st, const struct reader_stream *rs, struct rbuf *body)
{
	struct profile_internal *in = p->in;
	struct rec_dropped r;
	if (rec_get_dropped(body, &r)) {
		in->bad_bodies++;
		return;
	}
	uint32_t pr = stream_proc(p, st, rs);
	uint32_t t = pr == PNONE ? PNONE : thread_get(p, pr, r.tid);
	if (t == PNONE)
		return;
	p->threads[t].dropped += r.count;
	p->procs[pr].dropped += r.count;
	in->streams[st].drops += r.count;
}
