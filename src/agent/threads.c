/*
 * threads.c — registering the profiled process's threads, and the
 * interposed pthread_create().
 *
 * Every thread that can run Python code is created through pthread_create,
 * so wrapping its start routine is how the agent learns about threads the
 * moment they start: the trampoline registers the new thread (a slot with
 * its own ring and trigger) before running the real start routine, and a
 * pthread key destructor unregisters it when the thread ends. The agent has
 * no thread of its own in this process.
 *
 * A thread started by threading.Thread.start() is named right here: the
 * creating thread holds the GIL inside start(), so the per-version module
 * can read the Thread's name through the C API before the thread exists.
 *
 * An agent loaded with dlopen (the Python module, or an attach) interposes
 * nothing: the threads running at load are registered here from
 * /proc/self/task (threads_register_existing), later ones by the helper's
 * scan (scan.c) or by the Python module's thread hook.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/procstat.h"
#include "shm/agent.h"
#include "shm/link.h"
#include "shm/shm.h"
#include "common/format.h"

TLS_IE __thread struct tslot *tls_slot;

static int (*real_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
static pthread_key_t slot_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void on_thread_exit(void *p)
{
	struct tslot *s = p;
	if (s && s == tls_slot)
		thread_unregister(s);
}

static void make_key(void) { pthread_key_create(&slot_key, on_thread_exit); }

static void resolve(void)
{
	if (!real_create)
		real_create = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))dlsym(
			RTLD_NEXT, "pthread_create");
}

/* The helper could not open the thread's event: most often its own
 * descriptor limit (it holds one per thread, and the hard RLIMIT_NOFILE
 * it inherits may be low). A POSIX CPU timer on the thread is no
 * descriptor; its expiries are rounded to the kernel tick, and weighted
 * so totals stay right. */
static void timer_instead(struct tslot *s, pid_t tid)
{
	int why = s->trigger_failed;
	int ok = trigger_open_timer(s, tid) == 0;
	static _Atomic int told;
	if (atomic_exchange(&told, 1))
		return;
	char lim[64];
	fd_limit_note(lim, sizeof(lim), why);
	if (ok)
		agent_note(NOTE_LIMITED, (uint32_t)tid, "the helper could not open a perf event for thread %d (%s%s): "
			   "it and later such threads are sampled by POSIX CPU timers (rounded to the kernel tick)",
			   (int)tid, strerror(why), lim);
	else
		agent_note(NOTE_STOPPED, (uint32_t)tid, "thread %d is not sampled: the helper could not open its perf "
			   "event (%s%s), nor could a CPU timer be made", (int)tid, strerror(why), lim);
}

/* A thread goes unsampled because the helper held the thread list (or
 * the region's allocator) past the bound (lock_bounded): said once. Once
 * the list is had again, the next thread is sampled. */
static void stalled_note(pid_t tid)
{
	static _Atomic int told;
	if (atomic_exchange(&told, 1))
		return;
	agent_note(NOTE_STOPPED, (uint32_t)tid, "thread %d and any started while the helper (pid %d) holds the "
		   "agent's thread list are not sampled: it did not let go within %lld s (stopped or starved)",
		   (int)tid, (int)atomic_load(&agent.helper_pid), REG_WAIT_NS / 1000000000);
}

/* Registers thread tid (the caller, unless external) in a new slot. */
static struct tslot *register_tid(pid_t tid, const char *name, int external, unsigned long long start)
{
	struct tslot *s = slot_new(tid, name);
	if (!s) {
		if (shm_stalled()) {
			stalled_note(tid);
			return NULL;
		}
		static _Atomic int told;
		if (!atomic_exchange(&told, 1))
			agent_log("the agent's shared memory is full: thread %d and later ones are not sampled", (int)tid);
		return NULL;
	}
	s->external = external;
	s->proc_start = start;
	if (!external) {
		s->pthread = pthread_self();
		/* The handler must know the slot before anyone can signal this
		 * thread for it: TLS first, then the registry (the wall
		 * sampler signals threads it finds there), then the trigger. */
		pthread_once(&key_once, make_key);
		pthread_setspecific(slot_key, s);
		__atomic_store_n(&tls_slot, s, __ATOMIC_SEQ_CST);
	}
	struct tslot *o = slot_link(s, 1);
	if (!o) {
		if (!external) {
			pthread_setspecific(slot_key, NULL);
			__atomic_store_n(&tls_slot, NULL, __ATOMIC_SEQ_CST);
		}
		slot_free(s);
		stalled_note(tid);
		return NULL;
	}
	if (o != s) {
		/* The helper's scan registered this tid since it was looked
		 * up (a dlopen'ed agent): that slot is the thread's, and it
		 * gets the name. */
		if (!external) {
			pthread_setspecific(slot_key, NULL);
			__atomic_store_n(&tls_slot, o, __ATOMIC_SEQ_CST);
		}
		slot_free(s);
		if (name && *name && reg_lock_bounded() == 0) {
			thread_set_name(o, name);
			reg_unlock();
		}
		return o;
	}
	if (agent.trigger == TRIGGER_PERF_TASK_CLOCK) {
		/* The helper opens the event and holds it: the program keeps
		 * every descriptor number it would have without strata. The
		 * thread waits (bounded) so it is sampled from its start. */
		atomic_store(&s->helper_trigger, 1);
		link_triggers();
		if (s->trigger_failed && s->helper_fd < 0)
			timer_instead(s, tid);
	} else {
		trigger_open(s, tid);
	}
	return s;
}

struct tslot *thread_register(const char *name, int is_main)
{
	return register_tid((pid_t)syscall(SYS_gettid), name && *name ? name : is_main ? "MainThread" : NULL, 0, 0);
}

void thread_unregister(struct tslot *s)
{
	/* Order matters: once tls_slot is NULL the handler ignores any signal
	 * still in flight, then the trigger goes, then the writer may free. */
	__atomic_store_n(&tls_slot, NULL, __ATOMIC_SEQ_CST);
	pthread_setspecific(slot_key, NULL);
	if (slot_in_tidtab(s)) {
		/* Without the list (a stopped helper holds it) the entry is
		 * removed all the same: only this thread removes it, and an
		 * adder only takes a free entry. The writer removes it too
		 * before it frees the slot, and a new thread of this tid
		 * before it is added (slot_link). */
		int locked = reg_lock_bounded() == 0;
		tidtab_del(s);
		if (locked)
			reg_unlock();
	}
	trigger_close(s);
	s->end_ns = mono_ns();
	atomic_store(&s->exited, 1);
	link_poke();
}

/* starttime (field 22 of /proc/self/task/TID/stat), or 0. */
static unsigned long long task_starttime(pid_t tid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	const char *rp = procstat_read(path, buf, sizeof(buf));
	const char *f = rp ? procstat_field(rp, 22) : NULL;
	return f ? strtoull(f, NULL, 10) : 0;
}

void threads_register_existing(void)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return;
	pid_t me = (pid_t)syscall(SYS_gettid);
	struct dirent *e;
	while ((e = readdir(d))) {
		pid_t tid = (pid_t)strtol(e->d_name, NULL, 10);
		if (tid <= 0 || slot_by_tid(tid))
			continue;
		char name[64] = "";
		if (tid == agent.pid) {
			snprintf(name, sizeof(name), "MainThread");
		} else {
			char path[64];
			snprintf(path, sizeof(path), "/proc/self/task/%d/comm", (int)tid);
			int fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd >= 0) {
				ssize_t n = read(fd, name, sizeof(name) - 1);
				close(fd);
				if (n > 0 && name[n - 1] == '\n')
					n--;
				name[n > 0 ? n : 0] = 0;
			}
		}
		if (tid == me) {
			struct tslot *s = register_tid(tid, name, 0, 0);
			if (s)
				s->proc_start = task_starttime(tid);
		} else {
			register_tid(tid, name, 1, task_starttime(tid));
		}
	}
	closedir(d);
}

/* Caller holds reg_lock (the writer announces under it). A thread already
 * announced under another name gets a REC_THREAD_NAME from the writer. */
void thread_set_name(struct tslot *s, const char *name)
{
	if (!strncmp(s->name, name, sizeof(s->name) - 1))
		return;
	snprintf(s->name, sizeof(s->name), "%s", name);
	if (s->announced)
		atomic_store(&s->name_dirty, 1);
}

struct tslot *thread_register_self(const char *name)
{
	pid_t tid = (pid_t)syscall(SYS_gettid);
	struct tslot *s = tls_slot ? tls_slot : slot_by_tid(tid);
	if (s) {
		/* Found by a scan already: a better name than its comm. */
		if (name && *name && reg_lock_bounded() == 0) {
			thread_set_name(s, name);
			reg_unlock();
		}
		if (!tls_slot)
			tls_slot = s;
		return s;
	}
	return thread_register(name, tid == agent.pid);
}

/* ---- interposed pthread_create ------------------------------------------ */

struct boot {
	void *(*fn)(void *);
	void *arg;
	char name[64];
	int named;
};

static void *trampoline(void *p)
{
	struct boot b = *(struct boot *)p;
	free(p);
	if (agent.active && !atomic_load(&agent.stopping))
		thread_register(b.named ? b.name : NULL, 0);
	return b.fn(b.arg);
}

AGENT_EXPORT int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	resolve();
	if (!agent.active || atomic_load(&agent.stopping))
		return real_create(t, attr, fn, arg);
	struct boot *b = malloc(sizeof(*b));
	if (!b)
		return real_create(t, attr, fn, arg);
	b->fn = fn;
	b->arg = arg;
	/* Not with a module that is still to be checked (pymodule.c). */
	b->named = atomic_load(&agent.layout) == LAYOUT_OK &&
		   agent_py->starting_thread_name(b->name, sizeof(b->name)) == 0;
	int rc = real_create(t, attr, trampoline, b);
	if (rc)
		free(b);
	return rc;
}
