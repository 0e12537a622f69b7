/*
 * threads.c — the thread registry and the interposed pthread_create().
 *
 * Every thread that can run Python code is created through pthread_create,
 * so wrapping its start routine is how the agent learns about threads the
 * moment they start: the trampoline registers the new thread (a slot with
 * its own ring and trigger) before running the real start routine, and a
 * pthread key destructor unregisters it when the thread ends. The agent's
 * own threads (writer, sampler) are created with the real function and are
 * never sampled.
 *
 * A thread started by threading.Thread.start() is named right here: the
 * creating thread holds the GIL inside start(), so the per-version module
 * can read the Thread's name through the C API before the thread exists.
 *
 * An agent loaded with dlopen (the Python module in a process started
 * without it) interposes nothing: threads that already run, and threads
 * started later, never pass through the wrapper. Then (agent.by_tid) the
 * writer scans /proc/self/task, registers each thread it finds by tid (its
 * trigger aimed at that tid), retires those that are gone, and the signal
 * handler finds a thread's slot in a lock-free tid table.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"
#include "../common/format.h"

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

/* ---- tid table (by-tid mode) -------------------------------------------- */

/* Open addressing on the tid. The handler compares the tid stored in the
 * entry, never a slot's memory, so it cannot touch a freed slot; a removed
 * entry keeps tid TID_GONE so probe chains stay intact. Writers hold
 * agent.reg_lock. */
#define TIDTAB_SIZE 8192
#define TID_GONE (-1)
static struct {
	_Atomic pid_t tid;
	_Atomic(struct tslot *) slot;
} tidtab[TIDTAB_SIZE];

static uint32_t tid_hash(pid_t tid) { return ((uint32_t)tid * 2654435761u) & (TIDTAB_SIZE - 1); }

struct tslot *slot_by_tid(pid_t tid)
{
	uint32_t h = tid_hash(tid);
	for (uint32_t i = 0; i < TIDTAB_SIZE; i++) {
		uint32_t j = (h + i) & (TIDTAB_SIZE - 1);
		pid_t t = atomic_load_explicit(&tidtab[j].tid, memory_order_acquire);
		if (t == 0)
			return NULL;
		if (t == tid) {
			struct tslot *s = atomic_load_explicit(&tidtab[j].slot, memory_order_acquire);
			if (s)
				return s;
		}
	}
	return NULL;
}

static int tidtab_add(struct tslot *s)
{
	uint32_t h = tid_hash(s->tid);
	for (uint32_t i = 0; i < TIDTAB_SIZE; i++) {
		uint32_t j = (h + i) & (TIDTAB_SIZE - 1);
		pid_t t = atomic_load(&tidtab[j].tid);
		if (t == 0 || t == TID_GONE) {
			atomic_store_explicit(&tidtab[j].slot, s, memory_order_release);
			atomic_store_explicit(&tidtab[j].tid, s->tid, memory_order_release);
			return 0;
		}
	}
	return -1;
}

static void tidtab_del(struct tslot *s)
{
	uint32_t h = tid_hash(s->tid);
	for (uint32_t i = 0; i < TIDTAB_SIZE; i++) {
		uint32_t j = (h + i) & (TIDTAB_SIZE - 1);
		pid_t t = atomic_load(&tidtab[j].tid);
		if (t == 0)
			return;
		if (t == s->tid && atomic_load(&tidtab[j].slot) == s) {
			atomic_store_explicit(&tidtab[j].slot, NULL, memory_order_release);
			atomic_store_explicit(&tidtab[j].tid, TID_GONE, memory_order_release);
			return;
		}
	}
}

static void resolve(void)
{
	if (!real_create)
		real_create = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))dlsym(
			RTLD_NEXT, "pthread_create");
}

/* An agent thread records its tid before real_thread_create returns, so
 * a scan (by-tid mode) never takes it for the program's, and forgets it
 * when it ends, since the tid may be reused. */
struct own_boot {
	void *(*fn)(void *);
	void *arg;
	sem_t ready;
};

static void *own_trampoline(void *p)
{
	struct own_boot *b = p;
	void *(*fn)(void *) = b->fn;
	void *arg = b->arg;
	pid_t tid = (pid_t)syscall(SYS_gettid);
	int slot = -1;
	for (int i = 0; i < AGENT_MAX_OWN && slot < 0; i++) {
		pid_t zero = 0;
		if (atomic_compare_exchange_strong(&agent.own_tids[i], &zero, tid))
			slot = i;
	}
	sem_post(&b->ready); /* b is gone after this */
	void *r = fn(arg);
	if (slot >= 0)
		atomic_store(&agent.own_tids[slot], 0);
	return r;
}

int real_thread_create(pthread_t *t, void *(*fn)(void *), void *arg)
{
	resolve();
	struct own_boot b = { fn, arg };
	if (sem_init(&b.ready, 0, 0))
		return -1;
	/* Agent threads block every signal they do not need from birth. */
	sigset_t all, old;
	sigfillset(&all);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = real_create(t, NULL, own_trampoline, &b);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc == 0)
		while (sem_wait(&b.ready) && errno == EINTR)
			;
	sem_destroy(&b.ready);
	return rc;
}

struct tslot *thread_register(const char *name, int is_main)
{
	pthread_once(&key_once, make_key);
	struct tslot *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	if (ring_init(&s->ring, agent.cfg.ring_size)) {
		free(s);
		return NULL;
	}
	s->tid = (pid_t)syscall(SYS_gettid);
	s->pthread = pthread_self();
	s->start_ns = mono_ns();
	s->trigger_fd = -1;
	for (int i = 0; i < EVENTS_MAX; i++)
		s->counter_fd[i] = -1;
	s->stat_fd = -1;
	if (name && *name)
		snprintf(s->name, sizeof(s->name), "%s", name);
	else if (is_main)
		snprintf(s->name, sizeof(s->name), "MainThread");
	(void)is_main;
	/* The handler must know the slot before anyone can signal this
	 * thread for it: TLS first, then the registry (the wall sampler
	 * signals threads it finds there), then the trigger. */
	pthread_setspecific(slot_key, s);
	__atomic_store_n(&tls_slot, s, __ATOMIC_SEQ_CST);
	pthread_mutex_lock(&agent.reg_lock);
	s->next = agent.slots;
	agent.slots = s;
	if (agent.by_tid)
		tidtab_add(s);
	pthread_mutex_unlock(&agent.reg_lock);
	trigger_start(s);
	return s;
}

void thread_unregister(struct tslot *s)
{
	/* Order matters: once tls_slot is NULL the handler ignores any signal
	 * still in flight, then the trigger goes, then the writer may free. */
	__atomic_store_n(&tls_slot, NULL, __ATOMIC_SEQ_CST);
	pthread_setspecific(slot_key, NULL);
	if (agent.by_tid) {
		pthread_mutex_lock(&agent.reg_lock);
		tidtab_del(s);
		pthread_mutex_unlock(&agent.reg_lock);
	}
	trigger_stop(s);
	s->end_ns = mono_ns();
	atomic_store(&s->exited, 1);
	writer_poke();
}

void slot_free(struct tslot *s)
{
	ring_free(&s->ring);
	free(s);
}

/* starttime (field 22 of /proc/self/task/TID/stat), or 0. */
static unsigned long long task_starttime(pid_t tid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *p = strrchr(buf, ')'); /* the name may hold spaces and ')' */
	if (!p)
		return 0;
	/* After ")": field 3 (state) ... field 22 (starttime). */
	int field = 2;
	for (; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	return strtoull(p, NULL, 10);
}

static int is_own_thread(pid_t tid)
{
	for (int i = 0; i < AGENT_MAX_OWN; i++)
		if (atomic_load(&agent.own_tids[i]) == tid)
			return 1;
	return 0;
}

/* Registers thread `tid` from another thread. Caller holds no lock. */
static struct tslot *register_external(pid_t tid, unsigned long long start, uint32_t gen)
{
	struct tslot *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	if (ring_init(&s->ring, agent.cfg.ring_size)) {
		free(s);
		return NULL;
	}
	s->tid = tid;
	s->external = 1;
	s->proc_start = start;
	s->scan_gen = gen;
	s->start_ns = mono_ns();
	s->trigger_fd = -1;
	s->stat_fd = -1;
	if (tid == agent.pid) {
		snprintf(s->name, sizeof(s->name), "MainThread");
	} else {
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/task/%d/comm", (int)tid);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			ssize_t n = read(fd, s->name, sizeof(s->name) - 1);
			close(fd);
			if (n > 0 && s->name[n - 1] == '\n')
				n--;
			s->name[n > 0 ? n : 0] = 0;
		}
	}
	pthread_mutex_lock(&agent.reg_lock);
	if (tidtab_add(s)) {
		pthread_mutex_unlock(&agent.reg_lock);
		slot_free(s);
		return NULL;
	}
	s->next = agent.slots;
	agent.slots = s;
	pthread_mutex_unlock(&agent.reg_lock);
	trigger_start(s);
	return s;
}

/* A scanned thread that is gone: its trigger goes first, then the writer
 * retires the slot like any ended thread's. Caller holds reg_lock. */
static void retire_external(struct tslot *s)
{
	tidtab_del(s);
	trigger_stop(s);
	s->end_ns = mono_ns();
	atomic_store(&s->exited, 1);
}

void threads_scan(void)
{
	static uint32_t gen;
	gen++;
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		pid_t tid = (pid_t)strtol(e->d_name, NULL, 10);
		if (tid <= 0 || is_own_thread(tid))
			continue;
		unsigned long long st = task_starttime(tid);
		struct tslot *s = slot_by_tid(tid);
		if (s && (!s->external || s->proc_start == st)) {
			s->scan_gen = gen;
			continue;
		}
		if (s) {
			/* The tid was reused: the old thread is gone. Retired
			 * before the new one gets a slot, so the table never
			 * holds two slots for one tid. */
			pthread_mutex_lock(&agent.reg_lock);
			retire_external(s);
			pthread_mutex_unlock(&agent.reg_lock);
		}
		if (st && register_external(tid, st, gen) == NULL)
			break;
	}
	closedir(d);
	/* Threads found earlier and gone now. */
	pthread_mutex_lock(&agent.reg_lock);
	for (struct tslot *s = agent.slots; s; s = s->next)
		if (s->external && s->scan_gen != gen && !atomic_load(&s->exited))
			retire_external(s);
	pthread_mutex_unlock(&agent.reg_lock);
	/* Nothing interposes sigaction either: keep SIGPROF ours. */
	signals_retake_prof();
}

struct tslot *thread_register_self(const char *name)
{
	pid_t tid = (pid_t)syscall(SYS_gettid);
	struct tslot *s = tls_slot ? tls_slot : slot_by_tid(tid);
	if (s) {
		/* Found by a scan already: a better name, if not yet written. */
		if (name && *name && !s->announced)
			snprintf(s->name, sizeof(s->name), "%s", name);
		if (!tls_slot)
			tls_slot = s;
		return s;
	}
	return thread_register(name, tid == agent.pid);
}

/* In the child of fork() only the forking thread exists. Its slot is kept
 * (with an empty ring and a fresh trigger); every other slot is dropped. */
void threads_after_fork_child(void)
{
	struct tslot *me = tls_slot;
	struct tslot *s = agent.slots;
	agent.slots = NULL;
	if (agent.by_tid)
		memset(tidtab, 0, sizeof(tidtab)); /* the parent's threads */
	while (s) {
		struct tslot *next = s->next;
		if (s != me) {
			/* The parent's descriptors were inherited; close our copies. */
			trigger_forget(s);
			slot_free(s);
		}
		s = next;
	}
	if (!me)
		return;
	trigger_forget(me);
	me->has_timer = 0; /* POSIX timers are not inherited by fork */
	me->tid = (pid_t)syscall(SYS_gettid);
	me->start_ns = mono_ns();
	atomic_store(&me->ring.head, 0);
	atomic_store(&me->ring.tail, 0);
	atomic_store(&me->samples, 0);
	atomic_store(&me->dropped, 0);
	me->announced = 0;
	me->reported_dropped = 0;
	me->tstate = NULL;
	me->next = NULL;
	agent.slots = me;
	if (agent.by_tid) {
		me->proc_start = task_starttime(me->tid);
		tidtab_add(me);
	}
	trigger_start(me);
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
	b->named = agent.py->starting_thread_name(b->name, sizeof(b->name)) == 0;
	int rc = real_create(t, attr, trampoline, b);
	if (rc)
		free(b);
	return rc;
}
