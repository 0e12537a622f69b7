/*
 * sampler.c — what makes a sample happen, and the capture itself.
 *
 * Triggers, per thread:
 *  - -e EVENT[,EVENT...]: one perf event group per thread. The first event
 *    is the leader: it samples, overflowing every `event_period`
 *    occurrences and signalling the thread that caused them, exactly like
 *    the task-clock trigger below. The others are counted in the same
 *    group, so one read() of the leader (PERF_FORMAT_GROUP) gives every
 *    value at once; the handler stores the difference from the thread's
 *    previous sample, so each sample carries what happened since the last.
 *  - CPU mode: a perf_event_open software task-clock event on the thread,
 *    overflowing every period of the thread's own CPU time and signalling
 *    that thread (F_SETOWN_EX). It is hrtimer based, so 1000 Hz is really
 *    1000 Hz. Where perf events are not allowed, a POSIX CPU-time timer
 *    (timer_create on CLOCK_THREAD_CPUTIME_ID) stands in; its expiries are
 *    rounded to the kernel tick, and the overrun count becomes the sample's
 *    weight so totals stay right.
 *  - wall mode: one sampler thread ticks at the rate. A thread that is
 *    running is signalled and samples itself; a thread that is blocked
 *    (sleeping, in I/O, waiting for the GIL) is not disturbed at all: the
 *    sampler reads its Python frames from the outside and marks the sample
 *    idle. Blocked system calls therefore never see our signal.
 *
 * The capture (capture()) is async-signal-safe: it reserves space in the
 * thread's ring, walks the Python frames through the per-version module
 * under the fault guard, and commits.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"
#include "unwind.h"
#include "../common/format.h"

static int perf_exclude_kernel; /* set when the kernel only allows user-space counting */

static long perf_open(struct perf_event_attr *a, pid_t tid)
{
	return syscall(SYS_perf_event_open, a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static void task_clock_attr(struct perf_event_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = PERF_TYPE_SOFTWARE;
	a->config = PERF_COUNT_SW_TASK_CLOCK;
	a->sample_period = agent.cfg.period_ns;
	a->disabled = 1;
	a->exclude_hv = 1;
	a->exclude_kernel = perf_exclude_kernel;
	a->wakeup_events = 1;
}

/* Opens the -e event group on thread `tid` into the slot's descriptors:
 * the leader samples and signals, the others only count. Returns 0, or -1
 * with errno of the event that failed and *failed set to its index. */
static int group_open(struct tslot *s, pid_t tid, int *failed)
{
	const struct event_list *ev = &agent.cfg.events;
	struct perf_event_attr a;
	int ek = agent.cfg.event_exclude_kernel;
	event_attr(&ev->ev[0], &a, agent.cfg.event_period, 1, ek);
	int leader = event_open(&a, tid, -1);
	if (leader < 0) {
		*failed = 0;
		return -1;
	}
	for (uint32_t i = 1; i < ev->n; i++) {
		event_attr(&ev->ev[i], &a, 0, 0, ek);
		int fd = event_open(&a, tid, leader);
		if (fd < 0) {
			int e = errno;
			for (uint32_t k = 1; k < i; k++) {
				close(s->counter_fd[k]);
				s->counter_fd[k] = -1;
			}
			close(leader);
			*failed = (int)i;
			errno = e;
			return -1;
		}
		s->counter_fd[i] = fd;
	}
	s->trigger_fd = leader;
	s->ncounters = ev->n;
	memset(s->counter_prev, 0, sizeof(s->counter_prev));
	return 0;
}

static void group_close(struct tslot *s)
{
	for (uint32_t i = 1; i < s->ncounters && i < EVENTS_MAX; i++) {
		if (s->counter_fd[i] >= 0)
			close(s->counter_fd[i]);
		s->counter_fd[i] = -1;
	}
	s->ncounters = 0;
}

/* Picks the -e trigger: the group must open on this thread, with kernel
 * counting if allowed, else user space only (unless an event happens only
 * in the kernel). The CLI checked all this before starting the command;
 * failing here means the process runs under other rules (another user). */
static int pick_event_trigger(void)
{
	int need_kernel = 0;
	for (uint32_t i = 0; i < agent.cfg.events.n; i++)
		need_kernel |= (agent.cfg.events.ev[i].flags & EVS_KERNEL) != 0;
	struct tslot probe;
	memset(&probe, 0, sizeof(probe));
	for (uint32_t i = 0; i < EVENTS_MAX; i++)
		probe.counter_fd[i] = -1;
	int failed = 0, err = 0;
	for (int ek = 0; ek <= (need_kernel ? 0 : 1); ek++) {
		agent.cfg.event_exclude_kernel = ek;
		if (group_open(&probe, 0, &failed) == 0) {
			close(probe.trigger_fd);
			group_close(&probe);
			return TRIGGER_PERF_EVENT;
		}
		if (!err)
			err = errno;
		if (errno != EACCES && errno != EPERM)
			break;
	}
	agent_log("cannot open perf event '%s' in process %d: %s; this process is not profiled",
		  agent.cfg.events.ev[failed].name, (int)getpid(), strerror(err));
	return -1;
}

int sampler_pick_trigger(void)
{
	if (agent.cfg.mode == MODE_WALL)
		return TRIGGER_WALL_SAMPLER;
	if (agent.cfg.events.n)
		return pick_event_trigger();
	if (getenv("STRATA_NO_PERF_EVENTS"))
		return TRIGGER_POSIX_CPU_TIMER;
	struct perf_event_attr a;
	for (int ek = 0; ek <= 1; ek++) {
		perf_exclude_kernel = ek;
		task_clock_attr(&a);
		long fd = perf_open(&a, 0);
		if (fd >= 0) {
			close((int)fd);
			return TRIGGER_PERF_TASK_CLOCK;
		}
	}
	return TRIGGER_POSIX_CPU_TIMER;
}

static int set_owner(int fd, pid_t tid)
{
	struct f_owner_ex own = { F_OWNER_TID, tid };
	return fcntl(fd, F_SETFL, O_ASYNC) || fcntl(fd, F_SETSIG, SIGPROF) || fcntl(fd, F_SETOWN_EX, &own) ? -1 : 0;
}

int trigger_start(struct tslot *s)
{
	switch (agent.trigger) {
	case TRIGGER_PERF_EVENT: {
		int failed = 0;
		if (group_open(s, s->external ? s->tid : 0, &failed)) {
			static _Atomic int told;
			if (!atomic_exchange(&told, 1))
				agent_log("cannot open perf event '%s' for thread %d: %s; it is not sampled",
					  agent.cfg.events.ev[failed].name, (int)s->tid, strerror(errno));
			return -1;
		}
		if (set_owner(s->trigger_fd, s->tid)) {
			close(s->trigger_fd);
			s->trigger_fd = -1;
			group_close(s);
			return -1;
		}
		if (atomic_load(&agent.sampling))
			ioctl(s->trigger_fd, PERF_EVENT_IOC_REFRESH, 1);
		return 0;
	}
	case TRIGGER_PERF_TASK_CLOCK: {
		struct perf_event_attr a;
		task_clock_attr(&a);
		/* A thread registered from outside (by tid) is measured from
		 * here; every other thread registers itself. */
		long fd = perf_open(&a, s->external ? s->tid : 0);
		if (fd < 0)
			return -1;
		if (set_owner((int)fd, s->tid)) {
			close((int)fd);
			return -1;
		}
		s->trigger_fd = (int)fd;
		if (atomic_load(&agent.sampling))
			ioctl(s->trigger_fd, PERF_EVENT_IOC_REFRESH, 1);
		return 0;
	}
	case TRIGGER_POSIX_CPU_TIMER: {
		struct sigevent ev;
		memset(&ev, 0, sizeof(ev));
		ev.sigev_notify = SIGEV_THREAD_ID;
		ev.sigev_signo = SIGPROF;
		ev._sigev_un._tid = s->tid;
		ev.sigev_value.sival_ptr = s;
		/* Another thread's CPU clock, as pthread_getcpuclockid makes
		 * it (the kernel's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)). */
		clockid_t clk = s->external ? (clockid_t)((~(unsigned)s->tid) << 3 | 6) : CLOCK_THREAD_CPUTIME_ID;
		if (timer_create(clk, &ev, &s->timer))
			return -1;
		s->has_timer = 1;
		if (atomic_load(&agent.sampling)) {
			struct itimerspec its;
			its.it_interval.tv_sec = (time_t)(agent.cfg.period_ns / 1000000000u);
			its.it_interval.tv_nsec = (long)(agent.cfg.period_ns % 1000000000u);
			its.it_value = its.it_interval;
			timer_settime(s->timer, 0, &its, NULL);
		}
		return 0;
	}
	default:
		return 0; /* wall mode: the sampler thread drives everything */
	}
}

void trigger_stop(struct tslot *s)
{
	if (s->trigger_fd >= 0) {
		ioctl(s->trigger_fd, PERF_EVENT_IOC_DISABLE, 0);
		close(s->trigger_fd);
		s->trigger_fd = -1;
	}
	group_close(s);
	if (s->has_timer) {
		timer_delete(s->timer);
		s->has_timer = 0;
	}
	if (s->stat_fd >= 0) {
		close(s->stat_fd);
		s->stat_fd = -1;
	}
}

void trigger_forget(struct tslot *s)
{
	if (s->trigger_fd >= 0)
		close(s->trigger_fd);
	s->trigger_fd = -1;
	group_close(s);
	if (s->stat_fd >= 0)
		close(s->stat_fd);
	s->stat_fd = -1;
}

static void trigger_enable(struct tslot *s, int on)
{
	if (s->trigger_fd >= 0)
		ioctl(s->trigger_fd, on ? PERF_EVENT_IOC_REFRESH : PERF_EVENT_IOC_DISABLE, on ? 1 : 0);
	if (s->has_timer) {
		struct itimerspec its;
		memset(&its, 0, sizeof(its));
		if (on) {
			its.it_interval.tv_sec = (time_t)(agent.cfg.period_ns / 1000000000u);
			its.it_interval.tv_nsec = (long)(agent.cfg.period_ns % 1000000000u);
			its.it_value = its.it_interval;
		}
		timer_settime(s->timer, 0, &its, NULL);
	}
}

static pthread_mutex_t wall_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wall_cond = PTHREAD_COND_INITIALIZER;

void triggers_set_enabled(int on)
{
	if (on)
		writer_set_busy();
	atomic_store(&agent.sampling, on);
	pthread_mutex_lock(&agent.reg_lock);
	for (struct tslot *s = agent.slots; s; s = s->next)
		if (!atomic_load(&s->exited))
			trigger_enable(s, on);
	pthread_mutex_unlock(&agent.reg_lock);
	if (on) {
		/* Both sleep while sampling is off. */
		writer_poke();
		pthread_mutex_lock(&wall_lock);
		pthread_cond_broadcast(&wall_cond);
		pthread_mutex_unlock(&wall_lock);
	}
}

int triggers_set_rate(unsigned hz)
{
	if (hz < 1 || hz > 100000)
		return -1;
	/* An event-driven agent samples every -c occurrences, not at a rate. */
	if (agent.trigger == TRIGGER_PERF_EVENT)
		return hz == agent.cfg.rate_hz ? 0 : -1;
	if (hz == agent.cfg.rate_hz)
		return 0;
	agent.cfg.rate_hz = hz;
	agent.cfg.period_ns = 1000000000ull / hz;
	uint64_t period = agent.cfg.period_ns;
	pthread_mutex_lock(&agent.reg_lock);
	for (struct tslot *s = agent.slots; s; s = s->next)
		if (s->trigger_fd >= 0)
			ioctl(s->trigger_fd, PERF_EVENT_IOC_PERIOD, &period);
	pthread_mutex_unlock(&agent.reg_lock);
	return 0;
}

/* ---- capture ---------------------------------------------------------- */

/* Names a sample without Python frames: the interpreter starting or
 * shutting down. "Uninitialized" after the interpreter has been seen
 * running means it has finished finalizing. */
static int seen_running;

static uint8_t phase_flag(void)
{
	switch (agent.py->phase()) {
	case STRATA_PHASE_RUNNING:
		seen_running = 1;
		return 0;
	case STRATA_PHASE_FINALIZING:
		return STACK_PY_SHUTDOWN;
	default:
		return seen_running ? STACK_PY_SHUTDOWN : STACK_PY_STARTUP;
	}
}

/* Captures one sample of the thread whose PyThreadState is `tstate` (or the
 * calling thread's when tstate is NULL and `self` is set) into `ring`. The
 * guard state lives in `g`, the slot of the thread doing the reading. */
static void capture(struct tslot *g, struct ring *ring, pid_t tid, void *tstate, int self, const void *uc,
		    uint32_t weight, uint8_t sample_flags, const uint64_t *counters, uint32_t ncounters,
		    _Atomic uint64_t *dropped, _Atomic uint64_t *count)
{
	unsigned depth = agent.cfg.max_depth;
	/* Native stacks only for a thread sampling itself: the registers come
	 * from its own interrupted context. */
	/* Without --native, a thread in JIT code still records where: the
	 * JIT function is the leaf of its Python caller's stack. */
	const int jit = !agent.cfg.native && self && uc && jit_active();
	const unsigned ndepth = agent.cfg.native && self && uc ? agent.cfg.native_depth : jit ? 1 : 0;
	uint32_t cbytes = ncounters * (uint32_t)sizeof(uint64_t);
	uint32_t max = (uint32_t)(sizeof(struct rsample) + cbytes + depth * sizeof(struct strata_pyframe) + ndepth * 8u);
	uint8_t *p = ring_reserve(ring, max);
	if (!p) {
		atomic_fetch_add_explicit(dropped, 1, memory_order_relaxed);
		return;
	}
	struct rsample *h = (struct rsample *)p;
	struct strata_pyframe *fr = (struct strata_pyframe *)(p + sizeof(*h) + cbytes);
	memset(h, 0, sizeof(*h));
	h->ncounters = (uint8_t)ncounters;
	if (ncounters)
		memcpy(p + sizeof(*h), counters, cbytes);
	h->time_ns = mono_ns();
	h->tid = (uint32_t)tid;
	h->weight = weight ? weight : 1;
	h->sample_flags = sample_flags;

	volatile int n = 0;
	uint32_t missing = 0;
	/* Loaded with dlopen, nothing stops the program from replacing our
	 * SIGSEGV handler (faulthandler.enable()); a guarded read must never
	 * fault into someone else's handler. */
	if (agent.by_tid && signals_guard_check()) {
		h->stack_flags |= STACK_PY_FAULT;
		ring_commit(ring, (uint32_t)sizeof(*h));
		atomic_fetch_add_explicit(count, 1, memory_order_relaxed);
		return;
	}
	if (sigsetjmp(g->guard_jb, 0) == 0) {
		g->guard_on = 1;
		if (agent.py->ready()) {
			void *ts = self ? agent.py->current_tstate() : tstate;
			if (self && ts)
				g->tstate = ts;
			if (ts)
				n = agent.py->walk(ts, fr, (int)depth, &missing);
		}
		g->guard_on = 0;
	} else {
		/* The walk touched unmapped memory: keep the sample (its time
		 * is real) without Python frames, and say so. */
		n = 0;
		missing = 0;
		h->stack_flags |= STACK_PY_FAULT;
	}
	for (int i = 0; i < n; i++)
		code_seen[code_seen_slot(fr[i].code)] = 1;
	if (n == 0 && !(h->stack_flags & STACK_PY_FAULT))
		h->stack_flags |= phase_flag();
	h->npy = (uint16_t)n;
	h->py_missing = missing;
	if (missing)
		h->stack_flags |= STACK_PY_TRUNCATED;
	volatile int nn = 0;
	if (ndepth) {
		uint64_t *nat = (uint64_t *)(fr + n);
		volatile uint8_t nflags = 0;
		if (sigsetjmp(g->guard_jb, 0) == 0) {
			g->guard_on = 1;
			uint8_t f = 0;
			nn = jit ? jit_leaf_capture(uc, nat, &f) : unwind_capture(g, uc, nat, (int)ndepth, &f);
			nflags = f;
			g->guard_on = 0;
		} else {
			/* A stack word was unreadable: keep the frames found so
			 * far (unwind_capture stores as it goes). */
			atomic_store_explicit(&g->unwind_hazard, NULL, memory_order_release);
			nflags = jit ? 0 : STACK_NATIVE_FAILED;
			nn = jit ? 0 : g->native_progress;
		}
		h->stack_flags |= nflags;
		h->nnative = (uint16_t)nn;
	}
	ring_commit(ring, (uint32_t)(sizeof(*h) + cbytes + (uint32_t)n * sizeof(struct strata_pyframe) + (uint32_t)nn * 8u));
	atomic_fetch_add_explicit(count, 1, memory_order_relaxed);
}

/* The -e group's counts since this thread's previous sample, from one
 * read() of the leader. Returns the number of values, 0 if the read failed
 * (the sample then carries no counts rather than wrong ones).
 * Async-signal-safe: read() and arithmetic. */
static uint32_t read_counters(struct tslot *s, uint64_t *out)
{
	uint64_t buf[1 + EVENTS_MAX];
	ssize_t r = read(s->trigger_fd, buf, sizeof(buf));
	if (r < (ssize_t)sizeof(uint64_t) || buf[0] != s->ncounters ||
	    (size_t)r < (1 + s->ncounters) * sizeof(uint64_t))
		return 0;
	for (uint32_t i = 0; i < s->ncounters; i++) {
		out[i] = buf[1 + i] - s->counter_prev[i];
		s->counter_prev[i] = buf[1 + i];
	}
	return s->ncounters;
}

/* Tags the wall sampler's SIGPROFs (sent with rt_tgsigqueueinfo), so the
 * handler tells them from anyone else's without looking at thread state. */
#define WALL_TAG ((void *)&agent.sampler_slot)

int sample_signal_dispatch(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	int saved_errno = errno;
	struct tslot *s = tls_slot;
	int ours = 0;
	uint32_t weight = 1;
	if (!s && agent.by_tid) {
		/* A thread registered by a scan learns its slot here, once:
		 * the fault guard finds it through tls_slot from now on. */
		s = slot_by_tid((pid_t)syscall(SYS_gettid));
		if (s)
			tls_slot = s;
	}

	if (si->si_code == POLL_IN || si->si_code == POLL_HUP) {
		ours = s ? si->si_fd == s->trigger_fd
			 : agent.trigger == TRIGGER_PERF_TASK_CLOCK || agent.trigger == TRIGGER_PERF_EVENT;
	} else if (si->si_code == SI_TIMER) {
		ours = s ? si->si_value.sival_ptr == (void *)s : agent.trigger == TRIGGER_POSIX_CPU_TIMER;
		weight = 1u + (uint32_t)(si->si_overrun > 0 ? si->si_overrun : 0);
	} else if (si->si_code == SI_QUEUE && si->si_pid == agent.pid && si->si_value.sival_ptr == WALL_TAG) {
		/* The wall sampler's signal is ours even when it reaches a
		 * thread that is not (or no longer) registered: tls_slot is
		 * NULL for a moment at both ends of a thread's life while
		 * the sampler may still (or already) list it. Chaining it
		 * would kill the process with SIGPROF's default action. */
		ours = 1;
		if (s && !atomic_exchange(&s->wall_pending, 0))
			s = NULL;
	}
	if (!ours || !s) {
		errno = saved_errno;
		return ours;
	}
	if (!s->in_handler) {
		s->in_handler = 1;
		if (atomic_load_explicit(&agent.sampling, memory_order_relaxed) &&
		    !atomic_load_explicit(&agent.stopping, memory_order_relaxed)) {
			uint64_t cnt[EVENTS_MAX];
			uint32_t nc = s->ncounters ? read_counters(s, cnt) : 0;
			capture(s, &s->ring, s->tid, NULL, 1, uc, weight, 0, cnt, nc, &s->dropped, &s->samples);
		}
		s->in_handler = 0;
	}
	if (s->trigger_fd >= 0 && atomic_load_explicit(&agent.sampling, memory_order_relaxed))
		ioctl(s->trigger_fd, PERF_EVENT_IOC_REFRESH, 1);
	errno = saved_errno;
	return 1;
}

/* ---- wall mode sampler thread ------------------------------------------- */

static _Atomic int sampler_stop_flag;

/* 1 if the thread is on a CPU or runnable, 0 if blocked, -1 unknown. */
static int thread_running(struct tslot *s)
{
	char buf[512];
	if (s->stat_fd < 0) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)s->tid);
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

/* The PyThreadState of a thread that has never sampled itself. */
static void *guarded_find_tstate(struct tslot *me, pthread_t thread)
{
	void *volatile ts = NULL;
	if (sigsetjmp(me->guard_jb, 0) == 0) {
		me->guard_on = 1;
		ts = agent.py->ready() ? agent.py->find_tstate((unsigned long)thread) : NULL;
		me->guard_on = 0;
	}
	return ts;
}

static void *sampler_main(void *arg)
{
	(void)arg;
	sigset_t all;
	sigfillset(&all);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	pthread_sigmask(SIG_SETMASK, &all, NULL);
	struct tslot *me = agent.sampler_slot;
	tls_slot = me; /* for the fault guard */
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	while (!atomic_load(&sampler_stop_flag)) {
		uint64_t ns = (uint64_t)next.tv_nsec + agent.cfg.period_ns;
		next.tv_sec += (time_t)(ns / 1000000000u);
		next.tv_nsec = (long)(ns % 1000000000u);
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
			;
		if (!atomic_load(&agent.sampling) && !atomic_load(&sampler_stop_flag)) {
			/* Stopped: no ticks at all until sampling resumes. */
			pthread_mutex_lock(&wall_lock);
			while (!atomic_load(&agent.sampling) && !atomic_load(&sampler_stop_flag))
				pthread_cond_wait(&wall_cond, &wall_lock);
			pthread_mutex_unlock(&wall_lock);
			clock_gettime(CLOCK_MONOTONIC, &next);
			continue;
		}
		if (!atomic_load(&agent.sampling) || atomic_load(&agent.stopping))
			continue;
		/* Do not fall behind forever if we were descheduled: skip ahead. */
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - next.tv_sec) * 1000000000LL + (now.tv_nsec - next.tv_nsec) >
		    (long long)agent.cfg.period_ns * 10)
			next = now;
		pthread_mutex_lock(&agent.reg_lock);
		for (struct tslot *s = agent.slots; s; s = s->next) {
			if (atomic_load(&s->exited))
				continue;
			int run = thread_running(s);
			if (run != 0) {
				atomic_store(&s->wall_pending, 1);
				siginfo_t si;
				memset(&si, 0, sizeof(si));
				si.si_signo = SIGPROF;
				si.si_code = SI_QUEUE;
				si.si_pid = agent.pid;
				si.si_uid = getuid();
				si.si_value.sival_ptr = WALL_TAG;
				syscall(SYS_rt_tgsigqueueinfo, agent.pid, s->tid, SIGPROF, &si);
			} else {
				if (!s->tstate)
					s->tstate = guarded_find_tstate(me, s->pthread);
				capture(me, &me->ring, s->tid, s->tstate, 0, NULL, 1, SAMPLE_IDLE, NULL, 0, &s->dropped,
					&s->samples);
			}
		}
		pthread_mutex_unlock(&agent.reg_lock);
	}
	return NULL;
}

int sampler_start(void)
{
	if (agent.cfg.mode != MODE_WALL)
		return 0;
	/* No sampler runs now; a fork child may have inherited these held. */
	pthread_mutex_init(&wall_lock, NULL);
	pthread_cond_init(&wall_cond, NULL);
	atomic_store(&sampler_stop_flag, 0);
	if (real_thread_create(&agent.sampler, sampler_main, NULL))
		return -1;
	agent.sampler_running = 1;
	return 0;
}

void sampler_stop(void)
{
	if (!agent.sampler_running)
		return;
	atomic_store(&sampler_stop_flag, 1);
	pthread_mutex_lock(&wall_lock);
	pthread_cond_broadcast(&wall_cond);
	pthread_mutex_unlock(&wall_lock);
	pthread_join(agent.sampler, NULL);
	agent.sampler_running = 0;
}
