/*
 * wall.c — the wall-mode sampler, a thread of the helper.
 *
 * It ticks at the rate. A thread of the target that is running (state R in
 * /proc/PID/task/TID/stat) is signalled (rt_tgsigqueueinfo, tagged) and
 * samples itself in its handler, native stack included. A thread that is
 * blocked (sleeping, in I/O, waiting for the GIL) is not disturbed at
 * all: its Python frames are read from here, through the target's memory,
 * and the sample is marked idle, with why it waits (waitwhy.c: the GIL, I/O,
 * select/poll, a sleep, a lock). Blocked system calls therefore never see
 * our signal.
 *
 * A blocked thread cannot change its own stack, so its frames are read
 * once per episode of blocking: as long as its run time and the number of
 * times it was scheduled (/proc/PID/task/TID/schedstat) have not moved,
 * the frames read last time are the frames now.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shm/agent.h"
#include "agentd.h"
#include "remote.h"
#include "tasks.h"
#include "waitwhy.h"
#include "common/format.h"
#include "target.h"

#define WALL_TAG ((void *)&agent.sampler_slot)

struct wall_state {
	pthread_t thread;
	int running;
	_Atomic int stop;
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

static void wall_init(struct wall_state *s)
{
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
}

TARGET_STATE(struct wall_state, wall, wall_init)
#define S (*wall_of(agentd_target))

/* Per-slot cache of a blocked thread's frames (helper memory). */
struct wall_cache {
	uint64_t runtime, pcount;
	uint32_t n, missing;
	uint16_t flags;
	uint8_t wait;
	int valid;
	struct strata_pyframe fr[];
};

/* 1 if the thread is on a CPU or runnable, 0 if blocked, -1 unknown. */
static int thread_running(struct tslot *s)
{
	char buf[512];
	if (s->stat_fd < 0) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)agent.pid, (int)s->tid);
		s->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
		if (s->stat_fd < 0)
			return -1;
	}
	ssize_t n = pread(s->stat_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	char *rp = strrchr(buf, ')'); /* the command name may contain spaces and ')' */
	if (!rp || rp[1] != ' ')
		return -1;
	return rp[2] == 'R';
}

/* Run time (ns) and times scheduled, or -1. */
static int task_sched(struct tslot *s, uint64_t *runtime, uint64_t *pcount)
{
	char path[80], buf[128];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)agent.pid, (int)s->tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	unsigned long long rt, wt, pc;
	if (sscanf(buf, "%llu %llu %llu", &rt, &wt, &pc) != 3)
		return -1;
	*runtime = rt;
	*pcount = pc;
	return 0;
}

static uint8_t phase_flag(void)
{
	switch (agentd_reader->phase()) {
	case STRATA_PHASE_RUNNING:
		return 0;
	case STRATA_PHASE_FINALIZING:
		return STACK_PY_SHUTDOWN;
	case STRATA_PHASE_UNINITIALIZED:
		return STACK_PY_STARTUP;
	default:
		return STACK_PY_FAULT;
	}
}

/* Where glibc keeps a thread's kernel id in its thread descriptor (whose
 * address is the pthread_t): found in our own, the same C library as the
 * target's (it sees the agent's directory: the same filesystem). -1 if
 * not found. */
static long glibc_tid_offset(void)
{
	static long off = -2;
	if (off == -2) {
		pid_t me = (pid_t)syscall(SYS_gettid);
		const char *self = (const char *)pthread_self();
		off = -1;
		for (long o = 0; o < 2048 && off < 0; o += 4)
			if (*(const pid_t *)(self + o) == me)
				off = o;
	}
	return off;
}

/* The thread state of a thread found by a scan (an agent loaded with
 * dlopen): no pthread_t of it was ever recorded, so it is matched by its
 * kernel id, which 3.11+ keep in the thread state and glibc keeps in the
 * thread descriptor a thread state names before that. The pthread_t
 * found is kept: from then on find_tstate is one walk of the list. */
static uint64_t tstate_by_tid(struct tslot *s)
{
	struct strata_pythread t[256];
	int n = agentd_reader->threads ? agentd_reader->threads(t, 256) : -1;
	long off = glibc_tid_offset();
	for (int i = 0; i < n; i++) {
		int32_t tid = (int32_t)t[i].native_id;
		if (!tid && off >= 0 && remote_read(&tid, t[i].thread_id + (uint64_t)off, sizeof(tid)))
			tid = 0;
		if (tid == (int32_t)s->tid) {
			s->pthread = (pthread_t)t[i].thread_id;
			return t[i].tstate;
		}
	}
	return 0;
}

/* An idle sample of blocked thread s into the sampler's ring. Returns 1,
 * taking none, if the thread turned out to be runnable again (it woke
 * after its state was read): the caller signals it, as a running thread. */
static int capture_idle(struct tslot *s)
{
	unsigned depth = agent.cfg.max_depth;
	struct wall_cache *c = s->wall_cache;
	if (!c) {
		c = calloc(1, sizeof(*c) + depth * sizeof(struct strata_pyframe));
		s->wall_cache = c;
	}
	uint64_t rt = 0, pc = 0;
	int have = task_sched(s, &rt, &pc) == 0;
	int same = c && c->valid && have && rt == c->runtime && pc == c->pcount;
	/* A new episode of blocking: why this one (waitwhy.c). A thread
	 * that woke meanwhile, sampled as idle with no reason, was an idle
	 * sample of a thread about to run (up to a third of a GIL-bound
	 * thread's waits under load). */
	uint8_t why = same ? c->wait : wait_why(s->tid);
	if (why == WAIT_WOKE)
		return 1;

	struct ring *ring = &agent.sampler_slot->ring;
	uint32_t max = (uint32_t)(sizeof(struct rsample) + depth * sizeof(struct strata_pyframe));
	uint8_t *p = ring_reserve(ring, max);
	if (!p) {
		atomic_fetch_add_explicit(&s->dropped, 1, memory_order_relaxed);
		return 0;
	}
	struct rsample *h = (struct rsample *)p;
	struct strata_pyframe *fr = (struct strata_pyframe *)(p + sizeof(*h));
	memset(h, 0, sizeof(*h));
	h->time_ns = mono_ns();
	h->tid = (uint32_t)s->tid;
	h->weight = 1;
	h->sample_flags = SAMPLE_IDLE;
	h->wait = why;
	if (same) {
		memcpy(fr, c->fr, c->n * sizeof(*fr));
		h->npy = (uint16_t)c->n;
		h->py_missing = c->missing;
		h->stack_flags = c->flags;
	} else {
		/* The writer reads tasks through the same reader. */
		pthread_mutex_lock(&agentd_reader_lock);
		uint64_t ts = (uint64_t)(uintptr_t)s->tstate;
		if (!ts && s->pthread) {
			ts = agentd_reader->find_tstate((unsigned long)s->pthread);
			if (ts == UINT64_MAX)
				ts = 0;
		}
		if (!ts && s->external)
			ts = tstate_by_tid(s);
		uint32_t missing = 0;
		int gc = 0;
		int n = ts ? agentd_reader->walk(ts, fr, (int)depth, &missing, &gc) : 0;
		uint16_t flags = gc ? STACK_GC : 0;
		if (n < 0) {
			n = 0;
			missing = 0;
			flags |= STACK_PY_FAULT;
		} else if (n == 0) {
			flags |= phase_flag();
		}
		pthread_mutex_unlock(&agentd_reader_lock);
		if (missing)
			flags |= STACK_PY_TRUNCATED;
		h->npy = (uint16_t)n;
		h->py_missing = missing;
		h->stack_flags = flags;
		if (c) {
			memcpy(c->fr, fr, (size_t)n * sizeof(*fr));
			c->n = (uint32_t)n;
			c->missing = missing;
			c->flags = flags;
			c->wait = why;
			c->runtime = rt;
			c->pcount = pc;
			c->valid = have && !(flags & STACK_PY_FAULT);
		}
	}
	for (int i = 0; i < h->npy; i++)
		agent.code_seen[code_seen_slot(fr[i].code)] = 1;
	ring_commit(ring, (uint32_t)(sizeof(*h) + h->npy * sizeof(struct strata_pyframe)));
	atomic_fetch_add_explicit(&s->samples, 1, memory_order_relaxed);
	return 0;
}

static void ts_add_ns(struct timespec *t, uint64_t ns)
{
	ns += (uint64_t)t->tv_nsec;
	t->tv_sec += (time_t)(ns / 1000000000u);
	t->tv_nsec = (long)(ns % 1000000000u);
}

static void *wall_main(void *arg)
{
	target_enter(arg);
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	pid_t me = getpid();
	while (!atomic_load(&S.stop)) {
		ts_add_ns(&next, agent.cfg.period_ns);
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
			;
		if (!atomic_load(&agent.sampling) && !atomic_load(&S.stop)) {
			/* Stopped: no ticks at all until sampling resumes. The
			 * flag is the program's to set (after a failed exec its
			 * agent sets it once this helper is up), and nothing
			 * wakes us then: a bounded wait reads it again every
			 * 50 ms. (An unbounded one left a helper started after
			 * a failed exec waiting for good, now and then: the
			 * continued stream had no samples.) */
			pthread_mutex_lock(&S.lock);
			while (!atomic_load(&agent.sampling) && !atomic_load(&S.stop)) {
				struct timespec dl;
				clock_gettime(CLOCK_REALTIME, &dl);
				ts_add_ns(&dl, 50 * 1000000ull);
				pthread_cond_timedwait(&S.cond, &S.lock, &dl);
			}
			pthread_mutex_unlock(&S.lock);
			clock_gettime(CLOCK_MONOTONIC, &next);
			continue;
		}
		if (!atomic_load(&agent.sampling) || atomic_load(&agent.stopping))
			continue;
		/* An exec the wrapper did not see (the main thread notices it
		 * within 100 ms): a SIGPROF would kill the new program. */
		if (agentd_target_gone())
			continue;
		/* Do not fall behind forever if we were descheduled: skip ahead. */
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - next.tv_sec) * 1000000000LL + (now.tv_nsec - next.tv_nsec) >
		    (long long)agent.cfg.period_ns * 10)
			next = now;
		reg_lock();
		for (struct tslot *s = agent.slots; s; s = s->next) {
			if (atomic_load(&s->exited))
				continue;
			int run = thread_running(s);
			if (run != 0 || capture_idle(s)) {
				/* Counted, not set: a thread waiting for a CPU
				 * takes one signal for all the ticks it waited
				 * (a standard signal is pending at most once), and
				 * its handler weighs that sample by the count. */
				atomic_fetch_add(&s->wall_pending, 1);
				siginfo_t si;
				memset(&si, 0, sizeof(si));
				si.si_signo = SIGPROF;
				si.si_code = SI_QUEUE;
				si.si_pid = me;
				si.si_uid = getuid();
				si.si_value.sival_ptr = WALL_TAG;
				/* Asked again just before the signal: this
				 * thread may have been stopped (SIGSTOP, a
				 * debugger) anywhere in this loop while the
				 * program gave up waiting for us and exec'd
				 * (agent.stopping is set before a wrapped
				 * exec). A SIGPROF sent from where we stood
				 * would kill the new program, which has no
				 * handler for it. */
				if (!atomic_load(&agent.sampling) || atomic_load(&agent.stopping))
					break;
				syscall(SYS_rt_tgsigqueueinfo, agent.pid, s->tid, SIGPROF, &si);
			}
		}
		reg_unlock();
		/* asyncio: where the suspended tasks wait (tasks.c). */
		tasks_wall_tick();
	}
	return NULL;
}

int wall_start(void)
{
	atomic_store(&S.stop, 0);
	if (pthread_create(&S.thread, NULL, wall_main, agentd_target))
		return -1;
	S.running = 1;
	return 0;
}

void wall_wake(void)
{
	pthread_mutex_lock(&S.lock);
	pthread_cond_broadcast(&S.cond);
	pthread_mutex_unlock(&S.lock);
}

void wall_stop(void)
{
	if (!S.running)
		return;
	atomic_store(&S.stop, 1);
	wall_wake();
	pthread_join(S.thread, NULL);
	S.running = 0;
}
