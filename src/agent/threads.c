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
 */
#include <dlfcn.h>
#include <pthread.h>
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

static void resolve(void)
{
	if (!real_create)
		real_create = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))dlsym(
			RTLD_NEXT, "pthread_create");
}

int real_thread_create(pthread_t *t, void *(*fn)(void *), void *arg)
{
	resolve();
	/* Agent threads block every signal they do not need from birth. */
	sigset_t all, old;
	sigfillset(&all);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = real_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
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

/* In the child of fork() only the forking thread exists. Its slot is kept
 * (with an empty ring and a fresh trigger); every other slot is dropped. */
void threads_after_fork_child(void)
{
	struct tslot *me = tls_slot;
	struct tslot *s = agent.slots;
	agent.slots = NULL;
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
