/*
 * writer.c — the helper's writer thread.
 *
 * In strata-agentd, not in the profiled process. One thread serves every
 * target of the helper (target.h), each at its own pace: every few
 * milliseconds while it samples, it drains each of its threads' rings (in
 * the shared region), turns code-object addresses into REC_CODE records
 * (reading the target's objects through its /proc/PID/mem, so a code
 * object freed in the meantime cannot crash us), interns stacks so a
 * repeated stack costs a few bytes, and appends a
 * compressed chunk to the output every flush interval. Appends use
 * O_APPEND and one write() per chunk, so several processes share one file
 * safely. The stream is ended when the target exits, _exits or execs (it
 * asks, link.h), and when it dies: the rings outlive it, so a killed
 * process loses nothing it sampled.
 *
 * A stream stays silent until it has a sample or ends normally: the child of
 * a fork that immediately execs another program writes nothing.
 *
 * The output can change while the process runs (control.c): an agent in
 * standby has none, and `attach` hands it one, which starts a new stream
 * there (and, for the Python module, a session of its own); `detach` ends
 * that stream and closes the output. Without an output the writer only
 * retires ended threads, and while sampling is off it sleeps until poked.
 *
 * This file has the thread, its pass over the rings and the stream's
 * start and end; a sample's stack and code objects are written by
 * writer-stacks.c, the output (chunks, session, attach and detach) is
 * writer-output.c's, allocation records writer-objects.c's; writer.h is
 * what they share.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

#include "common/procstat.h"
#include "shm/agent.h"
#include "agentd.h"
#include "shm/objects.h"
#include "shm/shm.h"
#include "perfread.h"
#include "shm/unwind.h"
#include "common/format.h"
#include "tasks.h"
#include "writer.h"

/* ---- writer state ------------------------------------------------------- */

#define MAX_PENDING_BYTES (1u << 20)

static void writer_state_init(struct writer *w)
{
	pthread_mutex_init(&w->lock, NULL);
	w->fd = -1;
	w->nap_ms = 10;
}

/* The writer thread: one for the helper, making each target's passes in
 * turn, at each one's pace. */
#define WRITER_TARGETS_MAX AGENTD_TARGETS_MAX
static struct {
	pthread_mutex_t lock;     /* the list, the thread's start and stop */
	struct target *t[WRITER_TARGETS_MAX];
	unsigned n;
	int fdw[2];               /* self-pipe: a target was poked, or added */
	pthread_t thread;
	int running;
	_Atomic int stop;
	uint64_t round;           /* rounds begun (each on a copy of the list) */
	int in_round;
} WT = { .lock = PTHREAD_MUTEX_INITIALIZER, .fdw = { -1, -1 } };

int writer_slot;
TARGET_REGISTER(writer_slot, struct writer, writer_state_init)

/* A target freed (its stream long ended): its tables and buffers go. */
static void writer_state_fini(struct writer *w)
{
	ctab_free(&w->codes);
	itab_free(&w->stacks);
	wbuf_free(&w->recs);
	wbuf_free(&w->chunk);
	wbuf_free(&w->key);
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
}

/* There is an output (else standby: records are dropped). In the shared
 * state: the target's deallocation hook asks too. */
/* A process whose module was refused after the start (pymodule.c) has
 * none, whatever the order it and this helper set things in. */
int writer_has_output(void)
{
	return atomic_load_explicit(&agent.has_output, memory_order_relaxed) &&
	       atomic_load_explicit(&agent.layout, memory_order_relaxed) != LAYOUT_BAD;
}

void writer_set_busy(void) { atomic_store(&agent.writer_idle, 0); }

static void wake_thread(void)
{
	if (WT.fdw[1] >= 0) {
		char c = 0;
		ssize_t r = write(WT.fdw[1], &c, 1);
		(void)r;
	}
}

void writer_poke(void)
{
	atomic_store(&W.poked, 1);
	wake_thread();
}

/* ---- records -------------------------------------------------------------- */

/* argv from /proc/PID/cmdline (NUL-separated) into cmd; returns argc. */
uint32_t read_cmdline(char *cmd, size_t cmdlen, char **argv, uint32_t max)
{
	uint32_t argc = 0;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)agent.pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t len = 0;
	if (fd >= 0) {
		len = read(fd, cmd, cmdlen - 1);
		close(fd);
	}
	if (len > 0) {
		cmd[len] = 0;
		for (ssize_t i = 0; i < len && argc < max; i += (ssize_t)strlen(cmd + i) + 1)
			argv[argc++] = cmd + i;
	}
	return argc;
}

/* The target's parent: field 4 of /proc/PID/stat. */
static pid_t target_ppid(void)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)agent.pid);
	const char *rp = procstat_read(path, buf, sizeof(buf));
	const char *f = rp ? procstat_field(rp, 4) : NULL;
	return f ? (pid_t)atoi(f) : 0;
}

void put_process(uint32_t flags)
{
	char exe[4096], link[64];
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)agent.pid);
	ssize_t n = readlink(link, exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = 0;
	char *argv[256];
	char cmd[16384];
	uint32_t argc = read_cmdline(cmd, sizeof(cmd), argv, 256);
	struct rec_process p = {
		.pid = (uint32_t)agent.pid,
		.ppid = (uint32_t)target_ppid(),
		.start_mono_ns = agent.start_ns,
		.python_version = agent.python_version,
		.executable = exe,
		.argc = argc,
		.argv = argv,
		.mode = (uint32_t)agent.cfg.mode,
		.rate_hz = agent.cfg.rate_hz,
		.trigger = (uint32_t)agent.trigger,
		.period_ns = agent.cfg.period_ns,
		.flags = flags | (agent.cfg.objects ? PROC_OBJECTS : 0),
		.objects_rate = agent.cfg.objects ? agent.cfg.objects_rate : 0,
	};
	const struct event_list *ev = &agent.cfg.events;
	char *names[EVENTS_MAX];
	if (agent.trigger == TRIGGER_PERF_EVENT) {
		for (uint32_t i = 0; i < ev->n; i++)
			names[i] = (char *)ev->ev[i].name;
		p.nevents = ev->n;
		p.events = names;
		/* period_ns is a time: only a clock's period is one. */
		p.period_ns = ev->ev[0].flags & EVS_CLOCK ? agent.cfg.event_period : 0;
		p.rate_hz = p.period_ns ? (uint32_t)(1000000000ull / p.period_ns) : 0;
	}
	rec_put_process(&W.recs, &p);
	for (uint32_t i = 0; i < p.nevents; i++) {
		struct rec_event_desc d = {
			.index = i,
			.name = names[i],
			.type = ev->ev[i].type,
			.config = ev->ev[i].config,
			.period = i == 0 ? agent.cfg.event_period : 0,
			.flags = (i == 0 ? EVD_SAMPLING : 0) | (agent.cfg.event_exclude_kernel ? EVD_USER_ONLY : 0) |
				 (ev->ev[i].flags & EVS_CLOCK ? EVD_CLOCK : 0),
		};
		rec_put_event_desc(&W.recs, &d);
	}
}

static void announce(struct tslot *s)
{
	if (!s->announced) {
		struct rec_thread t = {
			.tid = (uint32_t)s->tid,
			.start_mono_ns = s->start_ns,
			.flags = s->tid == agent.pid ? THREAD_MAIN : 0,
			.name = s->name,
		};
		rec_put_thread(&W.recs, &t);
		s->announced = 1;
		atomic_store(&s->name_dirty, 0);
	} else if (atomic_exchange(&s->name_dirty, 0)) {
		struct rec_thread_name n = { .tid = (uint32_t)s->tid, .name = s->name };
		rec_put_thread_name(&W.recs, &n);
	}
}

static void put_sample(const struct rsample *h)
{
	const uint8_t *p = (const uint8_t *)(h + 1);
	const uint64_t *counters = (const uint64_t *)p;
	p += h->ncounters * sizeof(uint64_t);
	const struct strata_pyframe *py = (const struct strata_pyframe *)p;
	p += h->npy * sizeof(struct strata_pyframe);
	const uint64_t *native = (const uint64_t *)p;
	p += h->nnative * sizeof(uint64_t);
	const char *task_name = (const char *)p;

	/* A thread running an asyncio task: its logical stack (tasks.c). */
	static __thread struct tstack ts; /* the writer's thread, or the link's finishing a target */
	int logical = h->task && tasks_logical(h, py, task_name, h->task_name_len, &ts, &W.recs) == 0;
	uint32_t stack = logical ? stack_index(h, ts.py, ts.npy, native, &ts) : stack_index(h, py, h->npy, native, NULL);
	if (stack == UINT32_MAX) {
		W.dropped++;
		return;
	}
	if (h->sample_flags & RS_ALLOC) {
		wobj_put_alloc(&W.recs, h, stack, (int64_t)(h->time_ns - W.last_time));
		W.last_time = h->time_ns;
		W.any_samples = 1;
		return;
	}
	struct rec_sample s = {
		.tid = h->tid,
		.dt_ns = (int64_t)(h->time_ns - W.last_time),
		.stack = stack,
		.weight = h->weight,
		.flags = h->sample_flags,
		.ncounters = h->ncounters,
		.wait = h->wait,
	};
	for (uint32_t i = 0; i < h->ncounters && i < STRATA_MAX_COUNTERS; i++)
		s.counters[i] = counters[i];
	W.last_time = h->time_ns;
	rec_put_sample(&W.recs, &s);
	W.samples++;
	W.any_samples = 1;
}

static void drain_ring(struct ring *r)
{
	uint32_t len;
	const void *rec;
	int keep = writer_has_output();
	while ((rec = ring_peek(r, &len))) {
		W.drained++;
		if (keep && len >= sizeof(struct rsample))
			put_sample(rec);
		ring_release(r);
		if (W.recs.len > MAX_PENDING_BYTES)
			flush_chunk(0);
	}
}

static void report_drops(struct tslot *s)
{
	uint64_t d = atomic_load(&s->dropped);
	if (!writer_has_output()) {
		s->reported_dropped = d; /* nobody to report them to */
		return;
	}
	if (d > s->reported_dropped) {
		struct rec_dropped rd = { .tid = (uint32_t)s->tid, .count = d - s->reported_dropped };
		rec_put_dropped(&W.recs, &rd);
		W.dropped += rd.count;
		s->reported_dropped = d;
	}
}

/* -e groups the kernel would not map (struct tslot) live only through
 * the thread's descriptors: a program that closes them (a daemon) ends
 * the thread's sampling, silently but for this. Twice a second, each
 * such thread's leader number is looked at from outside; a number that
 * is no perf event any more is said once, with the time. A mapped group
 * outlives a close, but not an exec: its mapping goes before one
 * (trigger_quiet_for_exec), and an exec that then fails leaves the
 * thread unsampled (ev_lost 3), said the same way. Caller holds
 * reg_lock. */
static void check_unmapped_events(struct tslot *s, uint64_t now)
{
	int lost = atomic_load(&s->ev_lost);
	if (!s->ncounters || s->ev_map || s->external || s->trigger_fd < 0 || atomic_load(&s->exited) || lost == 2)
		return;
	(void)now;
	if (lost == 3) {
		atomic_store(&s->ev_lost, 2);
		agent_note(NOTE_STOPPED, (uint32_t)s->tid, "thread %d stopped being sampled: the program had closed "
			   "descriptor %d, its -e event group, which lived on by a mapping that strata drops "
			   "before an exec; the exec failed", (int)s->tid, s->trigger_fd);
		return;
	}
	char path[64], link[64];
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)agent.pid, s->trigger_fd);
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	int gone = n <= 0 || (link[n] = 0, strcmp(link, "anon_inode:[perf_event]") != 0);
	if (!gone && lost != 1)
		return;
	atomic_store(&s->ev_lost, 2);
	agent_note(NOTE_STOPPED, (uint32_t)s->tid, "thread %d stopped being sampled: the program closed or replaced "
		   "descriptor %d, the -e event group strata opened for it (the kernel refused to map the group, "
		   "which would have kept it: a locked-memory limit, perf_event_mlock_kb)", (int)s->tid, s->trigger_fd);
}

/* What the agent could not do (agent.h notes), and the region's growth
 * that failed, into the stream once each. */
static void put_notes(void)
{
	if (!writer_has_output())
		return;
	for (int i = 0; i < NOTES_MAX; i++) {
		struct agent_note *n = &agent.notes.e[i];
		if (atomic_load(&n->state) != 2)
			continue;
		struct rec_note r = { .tid = n->tid, .time_ns = n->time_ns, .kind = n->kind, .text = n->text };
		rec_put_note(&W.recs, &r);
		atomic_store(&n->state, 3);
	}
	uint64_t wanted = 0;
	int e = shm_limited(&wanted);
	if (e && !W.limit_noted) {
		W.limit_noted = 1;
		char lim[96];
		shm_limit_note(lim, sizeof(lim), e);
		char text[400];
		snprintf(text, sizeof(text), "the agent's shared memory could not grow to %llu MB (%s%s): threads that "
			 "start later sample into smaller rings or not at all, and native unwind tables may be missing",
			 (unsigned long long)(wanted >> 20), strerror(e), lim);
		struct rec_note r = { .time_ns = mono_ns(), .kind = NOTE_LIMITED, .text = text };
		rec_put_note(&W.recs, &r);
	}
}

/* Drains every ring and retires exited threads, waiting for the
 * process's thread list at most bound_ms (0: as long as it takes);
 * returns -1, having drained nothing, when it was not had. Caller holds
 * W.lock. */
static int drain(int bound_ms)
{
	if (bound_ms) {
		/* One process's list held (a stopped thread of it) must not
		 * hold up the passes of the others the writer serves. */
		if (reg_lock_for(bound_ms))
			return -1;
		/* Let go: what follows takes it (a moment's race with a
		 * holder that comes back is waited out as before). */
		reg_unlock();
	}
	/* New native objects are announced before the samples that may
	 * point into them. */
	if (agent.cfg.native)
		unwind_poll(&W.recs);
	/* So are perf-map names of code generated since (CPython 3.12's
	 * -X perf trampolines, other JITs). */
	perfread_poll(&W.recs);
	/* JIT images, likewise, before the samples in their code. */
	jit_poll(writer_has_output() ? &W.recs : NULL);
	tasks_poll();
	W.dying = deaths_take();
	for (struct death *d = W.dying; d; d = d->next) {
		struct centry *e = ctab_find(&W.codes, d->addr, (uint16_t)d->info.firstlineno);
		if (e && !e->dies_at)
			e->dies_at = d->t;
	}
	int keep = writer_has_output();
	uint64_t now = mono_ns();
	int evcheck = agent.trigger == TRIGGER_PERF_EVENT && now - W.last_evcheck >= 500 * 1000000ull;
	if (evcheck)
		W.last_evcheck = now;
	reg_lock();
	for (struct tslot *s = agent.slots; s && keep; s = s->next) {
		announce(s);
		if (evcheck)
			check_unmapped_events(s, now);
	}
	if (agent.sampler_slot)
		drain_ring(&agent.sampler_slot->ring);
	struct tslot **pp = &agent.slots;
	while (*pp) {
		struct tslot *s = *pp;
		int exited = atomic_load(&s->exited);
		drain_ring(&s->ring);
		report_drops(s);
		if (exited) {
			struct rec_thread_end te = {
				.tid = (uint32_t)s->tid,
				.end_mono_ns = s->end_ns,
				.samples = atomic_load(&s->samples),
				.dropped = atomic_load(&s->dropped),
			};
			if (keep && s->announced)
				rec_put_thread_end(&W.recs, &te);
			atomic_fetch_add(&agent.retired_samples, te.samples);
			atomic_fetch_add(&agent.retired_dropped, te.dropped);
			if (agent.by_tid)
				scan_note_ended(s);
			*pp = s->next;
			/* An exit that could not have the list left its
			 * entry (thread_unregister): none may name a freed
			 * slot. */
			if (slot_in_tidtab(s))
				tidtab_del(s);
			helper_slot_release(s);
			slot_free(s);
			continue;
		}
		pp = &s->next;
	}
	reg_unlock();
	put_notes();
	if (keep && agent.cfg.objects)
		wobj_scan(&W.recs, 0);
	/* Every sample taken before these deaths was in a ring and is now
	 * written: forget the dead. */
	ctab_drop_dead(&W.codes);
	tasks_pass_end();
	deaths_free(W.dying);
	W.dying = NULL;
	if (!keep)
		wbuf_reset(&W.recs);
	return 0;
}

void drain_all(void) { drain(0); }

/* Writes the stream's last records. Caller holds W.lock, rings drained. */
void finish_stream(int reason)
{
	if (!writer_has_output()) {
		wbuf_reset(&W.recs);
		return;
	}
	/* A process with no samples is only worth a record when it exited
	 * normally (a short script) or was attached to; the child of a fork
	 * that execs or _exits before sampling anything leaves no trace. */
	if (agent.cfg.objects)
		wobj_scan(&W.recs, 1);
	if (W.any_samples || reason == END_EXIT || W.attached) {
		struct rec_process_end e = {
			.end_mono_ns = mono_ns(),
			.reason = (uint32_t)reason,
			.samples = W.samples,
			.dropped = W.dropped,
		};
		rec_put_process_end(&W.recs, &e);
		flush_chunk(CHUNK_LAST);
	}
	wbuf_reset(&W.recs);
	/* After an exec the new image may carry on in this output. */
	if (W.own_session && reason != END_EXEC && !W.failed)
		write_session_end();
}

/* When the current target's next pass is due: UINT64_MAX while it is
 * idle (sampling off: until poked) or finished. */
static uint64_t next_due(void) { return W.idle || W.finished ? UINT64_MAX : W.due; }

/* One pass over the current target's rings, if it is due (or poked);
 * returns when the next one is (next_due). */
static uint64_t target_pass(uint64_t now)
{
	int poked = atomic_exchange(&W.poked, 0);
	if (!poked && (W.idle || now < W.due))
		return next_due();
	if (poked)
		W.nap_ms = 10;
	/* A module of another patch release not checked yet
	 * (pymodule.c): the samples wait in the rings. */
	if (atomic_load(&agent.layout) == LAYOUT_PENDING) {
		W.idle = 0;
		W.due = now + (uint64_t)W.nap_ms * 1000000u;
		return next_due();
	}
	long nap_max = agent.cfg.flush_ms > 10 ? agent.cfg.flush_ms : 10;
	pthread_mutex_lock(&W.lock);
	if (W.finished) {
		pthread_mutex_unlock(&W.lock);
		return UINT64_MAX;
	}
	uint64_t drained = W.drained;
	if (drain(20)) {
		W.due = now + 10 * 1000000u;
		pthread_mutex_unlock(&W.lock);
		return next_due();
	}
	/* While passes find samples, one every 10 ms; after each pass that
	 * found none (a program blocked, or waiting for a CPU: the workers
	 * of a pool on a busy machine), twice as long, up to the flush
	 * period; a poke (a ring that fills, a thread that ends) brings
	 * it back to 10 ms. A ring holds seconds of samples. */
	W.nap_ms = W.drained != drained ? 10 : W.nap_ms * 2 > nap_max ? nap_max : W.nap_ms * 2;
	int on = atomic_load(&agent.sampling);
	now = mono_ns();
	/* Continuous profiling: the window is over (send.c). */
	if (send_window_due(now))
		writer_window_cut();
	if (W.any_samples &&
	    (W.recs.len >= MAX_PENDING_BYTES / 4 ||
	     now - W.last_flush >= (uint64_t)agent.cfg.flush_ms * 1000000u || (!on && W.recs.len)))
		flush_chunk(0);
	/* With sampling off there is nothing to drain: no pass until
	 * poked (sampling turned on, a thread ended, the process exits),
	 * so a stopped agent costs no wakeups. Sampling may have come back
	 * on since `on` was read: then the poke that said so comes after. */
	W.idle = !on;
	W.due = now + (uint64_t)W.nap_ms * 1000000u;
	atomic_store(&agent.writer_idle, W.idle && !atomic_load(&agent.sampling));
	pthread_mutex_unlock(&W.lock);
	/* Threads that predate a dlopen'ed agent, or were started
	 * without the pthread_create wrapper, are found by a scan. */
	if (agent.by_tid && on && now - W.last_scan >= 100 * 1000000ull) {
		W.last_scan = now;
		threads_scan();
	}
	return next_due();
}

static void *writer_main(void *arg)
{
	(void)arg;
	struct target *list[WRITER_TARGETS_MAX];
	while (!atomic_load(&WT.stop)) {
		pthread_mutex_lock(&WT.lock);
		unsigned n = WT.n;
		memcpy(list, WT.t, n * sizeof(list[0]));
		WT.round++;
		WT.in_round = 1;
		pthread_mutex_unlock(&WT.lock);
		uint64_t now = mono_ns(), next = UINT64_MAX;
		for (unsigned i = 0; i < n; i++) {
			target_enter(list[i]);
			uint64_t due = target_pass(now);
			if (due < next)
				next = due;
		}
		pthread_mutex_lock(&WT.lock);
		WT.in_round = 0;
		pthread_mutex_unlock(&WT.lock);
		/* Sleep until the nearest target's next pass, for good when
		 * every target is idle; a poke (writer_poke: the flag, then
		 * the pipe) ends the sleep at once, even one that came during
		 * the passes. */
		fd_set rf;
		FD_ZERO(&rf);
		FD_SET(WT.fdw[0], &rf);
		now = mono_ns();
		uint64_t wait = next == UINT64_MAX || next <= now ? 0 : next - now;
		struct timeval tv = { (time_t)(wait / 1000000000u), (suseconds_t)(wait % 1000000000u / 1000) };
		if (select(WT.fdw[0] + 1, &rf, NULL, NULL, next == UINT64_MAX ? NULL : &tv) > 0) {
			char buf[64];
			while (read(WT.fdw[0], buf, sizeof(buf)) > 0)
				;
		}
	}
	return NULL;
}

void state_reset(void)
{
	wbuf_reset(&W.recs);
	ctab_free(&W.codes);
	itab_free(&W.stacks);
	W.next_code = W.next_stack = 0;
	W.seq = 0;
	W.any_samples = 0;
	W.samples = W.dropped = 0;
	W.last_time = agent.start_ns;
	W.last_flush = mono_ns();
	W.failed = 0;
	if (agent.cfg.native)
		unwind_stream_reset();
	perfread_stream_reset();
	jit_stream_reset();
	tasks_stream_reset();
	wobj_reset();
}

/* The current target joins the writer thread's list (the thread starts
 * with the first). */
static int start_thread(void)
{
	target_on_free(writer_slot, (void (*)(void *))writer_state_fini);
	int rc = 0;
	pthread_mutex_lock(&WT.lock);
	if (WT.n >= WRITER_TARGETS_MAX) {
		errno = EMFILE;
		rc = -1;
	} else if (!WT.running) {
		if ((WT.fdw[0] < 0 && pipe2(WT.fdw, O_CLOEXEC | O_NONBLOCK)) ||
		    (atomic_store(&WT.stop, 0), pthread_create(&WT.thread, NULL, writer_main, NULL)))
			rc = -1;
		else
			WT.running = 1;
	}
	if (!rc) {
		W.due = mono_ns() + (uint64_t)W.nap_ms * 1000000u;
		WT.t[WT.n++] = agentd_target;
		W.serving = 1;
	}
	pthread_mutex_unlock(&WT.lock);
	wake_thread();
	return rc;
}

/* The current target leaves the list; the thread ends with the last. */
static void stop_serving(void)
{
	pthread_t join;
	int last = 0;
	pthread_mutex_lock(&WT.lock);
	for (unsigned i = 0; i < WT.n; i++)
		if (WT.t[i] == agentd_target) {
			WT.t[i] = WT.t[--WT.n];
			break;
		}
	W.serving = 0;
	if (WT.n == 0 && WT.running) {
		atomic_store(&WT.stop, 1);
		join = WT.thread;
		WT.running = 0;
		last = 1;
	}
	pthread_mutex_unlock(&WT.lock);
	if (last) {
		wake_thread();
		if (!pthread_equal(join, pthread_self()))
			pthread_join(join, NULL);
	}
}

int writer_start(void)
{
	if (W.fd < 0 && open_output())
		return -1;
	state_reset();
	atomic_store(&agent.has_output, 1);
	send_window_open();
	put_process(agent.stream_flags);
	return start_thread();
}

int writer_start_standby(void)
{
	state_reset();
	/* No file, but windows to send (STRATA_SEND, record --send without
	 * -o): the stream is written all the same. */
	atomic_store(&agent.has_output, send_active());
	if (send_active()) {
		send_window_open();
		put_process(agent.stream_flags);
	}
	return start_thread();
}

uint64_t writer_round(void)
{
	pthread_mutex_lock(&WT.lock);
	uint64_t r = WT.round;
	pthread_mutex_unlock(&WT.lock);
	return r;
}

int writer_past(uint64_t r)
{
	pthread_mutex_lock(&WT.lock);
	int past = !WT.running || !WT.in_round || WT.round > r;
	pthread_mutex_unlock(&WT.lock);
	return past;
}

void writer_finish(int reason)
{
	if (W.serving)
		stop_serving();
	int expected = LAYOUT_PENDING;
	if (atomic_compare_exchange_strong(&agent.layout, &expected, LAYOUT_BAD)) {
		/* It ended before its module could be checked on a live
		 * frame: what was sampled is not written (pymodule.c). */
		atomic_store(&agent.has_output, 0);
		char exe[4096], path[64];
		snprintf(path, sizeof(path), "/proc/%d/exe", (int)agent.pid);
		ssize_t el = readlink(path, exe, sizeof(exe) - 1);
		exe[el > 0 ? el : 0] = 0;
		agent_log("the agent module for Python %s was not checked against Python %s before process %d "
			  "ended (no Python code ran with the GIL); it was not profiled. Build a module for this "
			  "interpreter with: make PYTHONS=%s",
			  agent.module_version, agent.python_version, (int)agent.pid, exe);
		if (!agent.standby && !W.attached)
			agent_note_unsupported(agent.cfg.output, agent.pid, target_ppid(), agent.python_version, exe, 1);
	}
	pthread_mutex_lock(&W.lock);
	/* The thread may still hold this target from its list's copy: it
	 * makes no pass once the stream is ended. */
	W.finished = 1;
	drain_all();
	finish_stream(reason);
	send_window_close(W.any_samples);
	/* The helper may serve the tree's other processes long after: the
	 * file is not held for this one. */
	if (W.fd >= 0)
		close(W.fd);
	W.fd = -1;
	pthread_mutex_unlock(&W.lock);
	send_finish();
}
