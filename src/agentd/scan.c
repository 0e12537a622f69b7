/*
 * scan.c — threads of a target whose agent was loaded with dlopen (the
 * Python module, an attach): nothing interposes pthread_create there, so
 * the helper's writer scans /proc/PID/task every 100 ms, registers each
 * thread it does not know (a slot made here, its perf events opened here
 * on the target's thread and signalling it), and retires those that are
 * gone. The handler finds such a slot by tid (slots.c); with -e counters
 * it takes a copy of the group leader at its first sample (sampler.c). A POSIX-timer trigger
 * cannot be made for another process's thread: with perf events
 * unavailable, only threads running at load (registered by the target
 * itself) and threads the Python module's thread hook registers are
 * sampled.
 *
 * A thread that registered itself and has run its end hook can still be
 * listed for a while (Python's thread hook runs before the thread's own
 * teardown). Its slot is gone from the tid table by then, and the writer
 * may already have freed it: the scan must not take it for a new thread,
 * or its samples would go to a second announcement under its comm. The
 * writer notes each such thread it retires (scan_note_ended), with the
 * start time a scan saw it with, and the scan skips what is noted.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/procstat.h"
#include "shm/agent.h"
#include "agentd.h"
#include "target.h"

/* starttime (field 22 of /proc/PID/task/TID/stat), or 0. */
static unsigned long long task_starttime(pid_t tid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)agent.pid, (int)tid);
	const char *rp = procstat_read(path, buf, sizeof(buf));
	const char *f = rp ? procstat_field(rp, 22) : NULL;
	return f ? strtoull(f, NULL, 10) : 0;
}

/* Self-registered threads retired while the scan runs, until a scan no
 * longer lists them. Guarded by reg_lock. `start` 0: retired before any
 * scan saw it; the first scan that lists the tid fills it in. */
#define ENDED_MAX 256
struct scan_state {
	struct {
		pid_t tid;
		unsigned long long start;
		uint32_t gen;
	} ended[ENDED_MAX];
	unsigned ended_next;
	_Atomic uint32_t now; /* the current (or last) scan's number */
};

TARGET_STATE(struct scan_state, scan, NULL)
#define SC (*scan_of(agentd_target))

void scan_note_ended(const struct tslot *s)
{
	if (s->external)
		return;
	unsigned i = SC.ended_next++ % ENDED_MAX;
	SC.ended[i].tid = s->tid;
	SC.ended[i].start = s->proc_start;
	SC.ended[i].gen = atomic_load(&SC.now);
}

/* Whether tid, started at st, is a self-registered thread that has ended
 * (noted above, or its slot not yet retired). Caller holds reg_lock. */
static int ended_self(pid_t tid, unsigned long long st, uint32_t gen)
{
	for (unsigned i = 0; i < ENDED_MAX; i++)
		if (SC.ended[i].tid == tid && (!SC.ended[i].start || SC.ended[i].start == st)) {
			SC.ended[i].start = st;
			SC.ended[i].gen = gen;
			return 1;
		}
	for (struct tslot *s = agent.slots; s; s = s->next)
		if (s->tid == tid && !s->external && atomic_load(&s->exited) && (!s->proc_start || s->proc_start == st))
			return 1;
	return 0;
}

static void register_external(pid_t tid, unsigned long long start, uint32_t gen)
{
	char name[64] = "";
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)agent.pid, (int)tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, name, sizeof(name) - 1);
		close(fd);
		if (n > 0 && name[n - 1] == '\n')
			n--;
		name[n > 0 ? n : 0] = 0;
	}
	struct tslot *s = slot_new(tid, tid == agent.pid ? "MainThread" : name);
	if (!s)
		return;
	s->external = 1;
	s->proc_start = start;
	s->scan_gen = gen;
	struct tslot *o = slot_link(s, 0);
	if (o != s) {
		/* The thread registered itself since it was looked up. */
		slot_free(s);
		o->scan_gen = gen;
		return;
	}
	/* Opened here: these are our descriptors (the overflow signal
	 * names ours, sig_fd). With -e the target's handler takes a copy of
	 * the leader to read counts. */
	if (trigger_open(s, tid) == 0 && s->trigger_fd >= 0) {
		s->helper_fd = s->trigger_fd;
		for (int i = 1; i < EVENTS_MAX; i++) {
			s->helper_counter_fd[i] = s->counter_fd[i];
			s->counter_fd[i] = -1;
		}
		s->trigger_fd = -1;
	}
}

/* Lets go of the events of threads that took their copies (-e): the
 * profiled process alone keeps them alive from then on. */
static void drop_taken(void)
{
	for (struct tslot *s = agent.slots; s; s = s->next)
		if (s->helper_fd >= 0 && atomic_load(&s->fd_taken)) {
			close(s->helper_fd);
			s->helper_fd = -1;
			for (int i = 0; i < EVENTS_MAX; i++)
				if (s->helper_counter_fd[i] >= 0) {
					close(s->helper_counter_fd[i]);
					s->helper_counter_fd[i] = -1;
				}
		}
}

/* A scanned thread that is gone: its trigger goes first, then the writer
 * retires the slot like any ended thread's. Caller holds reg_lock. */
static void retire_external(struct tslot *s)
{
	tidtab_del(s);
	if (s->helper_fd >= 0)
		trigger_fd_enable(s->helper_fd, 0, 0);
	s->end_ns = mono_ns();
	atomic_store(&s->exited, 1);
}

void threads_scan(void)
{
	uint32_t gen = atomic_fetch_add(&SC.now, 1) + 1;
	/* After an exec the threads listed are the new program's. */
	if (agentd_target_gone())
		return;
	char dir[64];
	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)agent.pid);
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		pid_t tid = (pid_t)strtol(e->d_name, NULL, 10);
		if (tid <= 0)
			continue;
		unsigned long long st = task_starttime(tid);
		struct tslot *s = slot_by_tid(tid);
		if (s && (!s->external || s->proc_start == st)) {
			s->scan_gen = gen;
			if (!s->external && !s->proc_start)
				s->proc_start = st;
			continue;
		}
		if (s) {
			/* The tid was reused: the old thread is gone. Retired
			 * before the new one gets a slot, so the table never
			 * holds two slots for one tid. */
			reg_lock();
			retire_external(s);
			reg_unlock();
		}
		if (!st)
			continue;
		reg_lock();
		int skip = !s && ended_self(tid, st, gen);
		reg_unlock();
		if (!skip)
			register_external(tid, st, gen);
	}
	closedir(d);
	/* Threads found earlier and gone now; ended threads noted before this
	 * scan and no longer listed are forgotten (their tid may come back). */
	reg_lock();
	for (unsigned i = 0; i < ENDED_MAX; i++)
		if (SC.ended[i].tid && SC.ended[i].gen != gen)
			SC.ended[i].tid = 0;
	drop_taken();
	for (struct tslot *s = agent.slots; s; s = s->next)
		if (s->external && s->scan_gen != gen && !atomic_load(&s->exited))
			retire_external(s);
	reg_unlock();
}
