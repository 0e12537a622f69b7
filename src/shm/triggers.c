/*
 * triggers.c — what makes a thread take a sample.
 *
 *  - -e EVENT[,EVENT...]: one perf event group per thread. The first event
 *    is the leader: it samples, overflowing every `event_period`
 *    occurrences and signalling the thread that caused them. The others
 *    are counted in the same group, so one read() of the leader
 *    (PERF_FORMAT_GROUP) gives every value at once; the handler stores the
 *    difference from the thread's previous sample.
 *  - CPU mode: a perf_event_open software task-clock event on the thread,
 *    overflowing every period of the thread's own CPU time and signalling
 *    that thread (F_SETOWN_EX). It is hrtimer based, so 1000 Hz is really
 *    1000 Hz. Where perf events are not allowed, a POSIX CPU-time timer
 *    (timer_create on the thread's CPU clock) stands in; its expiries are
 *    rounded to the kernel tick, and the overrun count becomes the
 *    sample's weight so totals stay right.
 *  - wall mode: the helper's sampler (wall.c) drives everything.
 *
 * Who opens and holds them: the task-clock event, the helper (asked by
 * the thread when it registers, threads.c; perf events can be opened on
 * another process's thread, and the overflow signals the thread named by
 * F_SETOWN_EX whoever holds the descriptor), so the program holds no
 * descriptor of ours; it runs freely. -e groups, the thread itself (the
 * handler reads the counts; kept above 511), re-armed one overflow at a
 * time; for a thread found by a scan the helper opens them and the
 * handler takes a copy of the leader. POSIX timers, the thread (a timer
 * cannot be made for another process's thread). The helper turns
 * sampling on and off and changes the rate through its own descriptors,
 * or a moment's copy of the thread's (control.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"
#include "common/format.h"

/* Every event is removed from its thread when the thread execs
 * (remove_on_exec, Linux 5.13+). Without it, an event kept alive by a
 * descriptor we cannot reach any more (the helper's copy, or ours when a
 * fork child closed every descriptor before exec, as subprocess does)
 * could still signal the new program, which has no handler for SIGPROF
 * and would die of it. Older kernels refuse the bit: then it is dropped,
 * and exec paths disable the events explicitly (agent.c, agentd.c). */
static _Atomic int no_remove_on_exec;

/* A descriptor the profiled process keeps (-e events) goes above the
 * numbers programs use (fd_high), before anything (F_SETOWN, a group)
 * names it. */
static long high(long fd) { return fd < 0 ? fd : fd_high((int)fd); }

static long open_attr(struct perf_event_attr *a, pid_t tid, int group)
{
	if (!atomic_load(&no_remove_on_exec)) {
		a->remove_on_exec = 1;
		long fd = syscall(SYS_perf_event_open, a, tid, -1, group, PERF_FLAG_FD_CLOEXEC);
		if (fd >= 0 || errno != EINVAL)
			return high(fd);
		atomic_store(&no_remove_on_exec, 1);
	}
	a->remove_on_exec = 0;
	return high(syscall(SYS_perf_event_open, a, tid, -1, group, PERF_FLAG_FD_CLOEXEC));
}

static long perf_open(struct perf_event_attr *a, pid_t tid) { return open_attr(a, tid, -1); }

static int ev_open(struct perf_event_attr *a, pid_t tid, int group)
{
	long fd = open_attr(a, tid, group);
	return fd < 0 ? -1 : (int)fd;
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
	a->exclude_kernel = agent.cfg.perf_exclude_kernel;
	a->wakeup_events = 1;
}

/* Closes the group's other events, each only if its number is still ours
 * (a program that closed it may have reused the number). */
static void group_close(struct tslot *s)
{
	for (uint32_t i = 1; i < s->ncounters && i < EVENTS_MAX; i++) {
		if (s->counter_fd[i] >= 0 && (!s->ev_id[i] || trigger_is_ours(s, s->counter_fd[i], (int)i)))
			close(s->counter_fd[i]);
		s->counter_fd[i] = -1;
	}
	s->ncounters = 0;
}

#define EV_PAGE 4096u
#define EV_MAP_LEN (2u * EV_PAGE) /* user page + one data page */

static void group_unmap(struct tslot *s)
{
	if (s->ev_map)
		munmap(s->ev_map, EV_MAP_LEN);
	s->ev_map = NULL;
	for (int i = 0; i < EVENTS_MAX; i++) {
		if (s->ev_sib_map[i])
			munmap(s->ev_sib_map[i], EV_PAGE);
		s->ev_sib_map[i] = NULL;
	}
}

/* Maps a thread's own group (see struct tslot): returns 0, or -1 with
 * nothing mapped. */
static int group_map(struct tslot *s)
{
	void *m = mmap(NULL, EV_MAP_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, s->trigger_fd, 0);
	if (m == MAP_FAILED)
		return -1;
	s->ev_map = m;
	for (uint32_t i = 1; i < s->ncounters && i < EVENTS_MAX; i++) {
		void *p = mmap(NULL, EV_PAGE, PROT_READ, MAP_SHARED, s->counter_fd[i], 0);
		if (p == MAP_FAILED) {
			group_unmap(s);
			return -1;
		}
		s->ev_sib_map[i] = p;
	}
	return 0;
}

int trigger_counts(struct tslot *s, uint64_t *vals)
{
	struct perf_event_mmap_page *pg = s->ev_map;
	if (!pg)
		return -1;
	const uint8_t *data = (const uint8_t *)pg + EV_PAGE;
	uint64_t head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = pg->data_tail;
	int found = 0;
	/* Records wrap around the data page; each is copied out whole. The
	 * last sample's counts are the latest (overflows between two
	 * signals coalesce into one handler run). */
	while (tail + sizeof(struct perf_event_header) <= head) {
		uint8_t rec[8 + 8 * (1 + EVENTS_MAX)];
		struct perf_event_header hd;
		for (size_t k = 0; k < sizeof(hd); k++)
			((uint8_t *)&hd)[k] = data[(tail + k) % EV_PAGE];
		if (hd.size < sizeof(hd) || tail + hd.size > head)
			break;
		if (hd.type == PERF_RECORD_SAMPLE && hd.size == 8 + 8 * (1 + s->ncounters) && hd.size <= sizeof(rec)) {
			for (size_t k = 0; k < hd.size; k++)
				rec[k] = data[(tail + k) % EV_PAGE];
			uint64_t nr;
			memcpy(&nr, rec + 8, 8);
			if (nr == s->ncounters) {
				memcpy(vals, rec + 16, 8 * (size_t)nr);
				found = 1;
			}
		}
		tail += hd.size;
	}
	__atomic_store_n(&pg->data_tail, head, __ATOMIC_RELEASE);
	return found ? (int)s->ncounters : 0;
}

int trigger_is_ours(struct tslot *s, int fd, int idx)
{
	uint64_t id = 0;
	/* PERF_EVENT_IOC_ID is a '$' ioctl, perf's own number range: on
	 * any other file it does nothing but fail. */
	return fd >= 0 && idx >= 0 && idx < EVENTS_MAX && s->ev_id[idx] && ioctl(fd, PERF_EVENT_IOC_ID, &id) == 0 &&
	       id == s->ev_id[idx];
}

static uint64_t event_id(int fd)
{
	uint64_t id = 0;
	return ioctl(fd, PERF_EVENT_IOC_ID, &id) == 0 ? id : 0;
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
	/* Each overflow writes the group's counts into the leader's ring,
	 * if it is mapped (group_map). */
	a.sample_type = PERF_SAMPLE_READ;
	int leader = ev_open(&a, tid, -1);
	if (leader < 0) {
		*failed = 0;
		return -1;
	}
	for (uint32_t i = 1; i < ev->n; i++) {
		event_attr(&ev->ev[i], &a, 0, 0, ek);
		int fd = ev_open(&a, tid, leader);
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
	s->ev_id[0] = event_id(leader);
	for (uint32_t i = 1; i < ev->n; i++)
		s->ev_id[i] = event_id(s->counter_fd[i]);
	return 0;
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
		agent.cfg.perf_exclude_kernel = ek;
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

void trigger_fd_enable(int fd, int on, int refresh)
{
	if (fd < 0)
		return;
	if (!on)
		ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
	else if (refresh)
		ioctl(fd, PERF_EVENT_IOC_REFRESH, 1);
	else
		ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
}

void trigger_timer_arm(struct tslot *s, int on)
{
	struct itimerspec its;
	memset(&its, 0, sizeof(its));
	if (on) {
		its.it_interval.tv_sec = (time_t)(agent.cfg.period_ns / 1000000000u);
		its.it_interval.tv_nsec = (long)(agent.cfg.period_ns % 1000000000u);
		its.it_value = its.it_interval;
	}
	timer_settime(s->timer, 0, &its, NULL);
}

int trigger_open_timer(struct tslot *s, pid_t tid)
{
	if (getpid() != agent.pid)
		return -1; /* a timer signals only its own process's threads */
	pid_t self = (pid_t)syscall(SYS_gettid);
	struct sigevent ev;
	memset(&ev, 0, sizeof(ev));
	ev.sigev_notify = SIGEV_THREAD_ID;
	ev.sigev_signo = SIGPROF;
	ev._sigev_un._tid = tid;
	ev.sigev_value.sival_ptr = s;
	/* Another thread's CPU clock, as pthread_getcpuclockid makes it
	 * (the kernel's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)). */
	clockid_t clk = tid != self ? (clockid_t)((~(unsigned)tid) << 3 | 6) : CLOCK_THREAD_CPUTIME_ID;
	if (timer_create(clk, &ev, &s->timer))
		return -1;
	s->has_timer = 1;
	if (atomic_load(&agent.sampling))
		trigger_timer_arm(s, 1);
	return 0;
}

int trigger_open(struct tslot *s, pid_t tid)
{
	/* The calling thread opens events on itself with pid 0 (valid
	 * before its tid is visible anywhere else). */
	pid_t self = (pid_t)syscall(SYS_gettid);
	pid_t target = tid == self && getpid() == agent.pid ? 0 : tid;
	switch (agent.trigger) {
	case TRIGGER_PERF_EVENT: {
		int failed = 0;
		if (group_open(s, target, &failed)) {
			static _Atomic int told;
			if (!atomic_exchange(&told, 1))
				agent_log("cannot open perf event '%s' for thread %d: %s; it is not sampled",
					  agent.cfg.events.ev[failed].name, (int)tid, strerror(errno));
			return -1;
		}
		break;
	}
	case TRIGGER_PERF_TASK_CLOCK: {
		struct perf_event_attr a;
		task_clock_attr(&a);
		long fd = perf_open(&a, target);
		if (fd < 0)
			return -1;
		s->trigger_fd = (int)fd;
		break;
	}
	case TRIGGER_POSIX_CPU_TIMER:
		return trigger_open_timer(s, tid);
	default:
		return 0; /* wall mode: the helper's sampler drives everything */
	}
	if (set_owner(s->trigger_fd, tid)) {
		close(s->trigger_fd);
		s->trigger_fd = -1;
		group_close(s);
		return -1;
	}
	s->sig_fd = s->trigger_fd;
	/* A thread's own -e group is mapped where allowed (see struct
	 * tslot); it then runs freely, like the events the helper opens: the
	 * handler needs no descriptor. Unmapped, the handler re-arms it
	 * after each signal (REFRESH: one overflow at a time). */
	if (target == 0 && agent.trigger == TRIGGER_PERF_EVENT && !getenv("STRATA_EVENTS_NO_MAP"))
		group_map(s);
	if (atomic_load(&agent.sampling))
		trigger_fd_enable(s->trigger_fd, 1, target == 0 && !s->ev_map);
	return 0;
}

void trigger_fd_silence(int fd)
{
	trigger_fd_enable(fd, 0, 0);
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_ASYNC);
}

void trigger_quiet_for_exec(struct tslot *s)
{
	int ours = s->trigger_fd >= 0 && (!s->ev_id[0] || trigger_is_ours(s, s->trigger_fd, 0));
	if (ours)
		trigger_fd_silence(s->trigger_fd);
	/* Its descriptor closed, the group lives by its mapping: gone with
	 * it now, with the exec that ends the stream. Nothing to tell (the
	 * helper's check, writer.c, which looks at unmapped groups, would
	 * call it closed by the program): marked said before the mapping is
	 * forgotten. A failed exec says it after all (agent_resume). */
	void *m = s->ev_map;
	if (m && !ours)
		atomic_store(&s->ev_lost, 2);
	/* Forgotten before unmapped: a handler that runs meanwhile on this
	 * thread must not read a page that is going. */
	void *sib[EVENTS_MAX];
	for (int i = 0; i < EVENTS_MAX; i++) {
		sib[i] = s->ev_sib_map[i];
		s->ev_sib_map[i] = NULL;
	}
	__atomic_store_n(&s->ev_map, NULL, __ATOMIC_SEQ_CST);
	if (m)
		munmap(m, EV_MAP_LEN);
	for (int i = 0; i < EVENTS_MAX; i++)
		if (sib[i])
			munmap(sib[i], EV_PAGE);
}

void trigger_close(struct tslot *s)
{
	group_unmap(s);
	if (s->trigger_fd >= 0 && s->ev_id[0] && !trigger_is_ours(s, s->trigger_fd, 0))
		s->trigger_fd = -1; /* the program's now */
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
}
