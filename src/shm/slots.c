/*
 * slots.c — the registry of sampled threads, in the shared region.
 *
 * A slot (struct tslot) and its ring are allocated in the shared region by
 * whoever registers the thread: the thread itself in the profiled process,
 * or the helper's scan for threads that predate a dlopen'ed agent. The
 * list is changed under agent.reg_lock, a process-shared robust mutex that
 * neither side ever takes in a signal handler. Threads the pthread_create
 * wrapper never saw, and the leader, are also in a tid table: open
 * addressing on the tid, where the handler compares the tid stored in the
 * entry, never a slot's memory, so it cannot touch a freed slot; a
 * removed entry keeps tid TID_GONE so probe chains stay intact.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "shm.h"

#define TID_GONE (-1)

void reg_lock(void)
{
	/* Room the helper asked the profiled process to map (shm.h). */
	shm_sync();
	if (pthread_mutex_lock(&agent.reg_lock) == EOWNERDEAD)
		/* The other process died holding it: list edits are single
		 * pointer stores, the list is consistent. */
		pthread_mutex_consistent(&agent.reg_lock);
}

void reg_unlock(void) { pthread_mutex_unlock(&agent.reg_lock); }

int reg_lock_for(int ms)
{
	shm_sync();
	int rc = pthread_mutex_trylock(&agent.reg_lock);
	if (rc == EBUSY) {
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		t.tv_nsec += (long)(ms % 1000) * 1000000L;
		t.tv_sec += ms / 1000 + t.tv_nsec / 1000000000L;
		t.tv_nsec %= 1000000000L;
		do
			rc = pthread_mutex_clocklock(&agent.reg_lock, CLOCK_MONOTONIC, &t);
		while (rc == EINTR);
	}
	if (rc == EOWNERDEAD) {
		pthread_mutex_consistent(&agent.reg_lock);
		rc = 0;
	}
	return rc ? -1 : 0;
}

/* Per process (a fork child inherits it, with the holder). */
static _Atomic int reg_stalled;

int reg_lock_bounded(void)
{
	shm_sync();
	return lock_bounded(&agent.reg_lock, &reg_stalled);
}

struct tslot *slot_new(pid_t tid, const char *name)
{
	struct tslot *s = shm_alloc(sizeof(*s));
	if (!s)
		return NULL;
	/* Where the region cannot grow (RLIMIT_AS), a smaller ring still
	 * samples the thread: what does not fit between two passes of the
	 * writer is dropped, and counted. Not in the helper while the
	 * program has yet to map the room asked for: it tries again. */
	uint32_t size = agent.cfg.ring_size, least = agent.cfg.ring_size / 8 < 16384 ? 16384 : agent.cfg.ring_size / 8;
	while (ring_init(&s->ring, size)) {
		if (size / 2 < least || shm_pending()) {
			shm_free(s);
			return NULL;
		}
		size /= 2;
	}
	if (size < agent.cfg.ring_size && !atomic_exchange(&agent.small_rings, 1)) {
		uint64_t wanted = 0;
		char lim[96];
		shm_limit_note(lim, sizeof(lim), shm_limited(&wanted));
		agent_note(NOTE_LIMITED, (uint32_t)tid, "the agent's shared memory cannot grow%s: thread %d and later "
			   "ones sample into rings of %u KB instead of %u KB (samples that do not fit are dropped, "
			   "and counted)", lim, (int)tid, size >> 10, agent.cfg.ring_size >> 10);
	}
	s->tid = tid;
	s->start_ns = mono_ns();
	s->trigger_fd = -1;
	s->sig_fd = -1;
	s->helper_fd = -1;
	for (int i = 0; i < EVENTS_MAX; i++)
		s->counter_fd[i] = s->helper_counter_fd[i] = -1;
	s->stat_fd = -1;
	if (name && *name)
		snprintf(s->name, sizeof(s->name), "%s", name);
	return s;
}

static uint32_t tid_hash(pid_t tid) { return ((uint32_t)tid * 2654435761u) & (TIDTAB_SIZE - 1); }

struct tslot *slot_by_tid(pid_t tid)
{
	uint32_t h = tid_hash(tid);
	for (uint32_t i = 0; i < TIDTAB_SIZE; i++) {
		uint32_t j = (h + i) & (TIDTAB_SIZE - 1);
		pid_t t = atomic_load_explicit(&agent.tidtab[j].tid, memory_order_acquire);
		if (t == 0)
			return NULL;
		if (t == tid) {
			struct tslot *s = atomic_load_explicit(&agent.tidtab[j].slot, memory_order_acquire);
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
		pid_t t = atomic_load(&agent.tidtab[j].tid);
		if (t == 0 || t == TID_GONE) {
			atomic_store_explicit(&agent.tidtab[j].slot, s, memory_order_release);
			atomic_store_explicit(&agent.tidtab[j].tid, s->tid, memory_order_release);
			return 0;
		}
	}
	return -1;
}

void tidtab_del(struct tslot *s)
{
	uint32_t h = tid_hash(s->tid);
	for (uint32_t i = 0; i < TIDTAB_SIZE; i++) {
		uint32_t j = (h + i) & (TIDTAB_SIZE - 1);
		pid_t t = atomic_load(&agent.tidtab[j].tid);
		if (t == 0)
			return;
		if (t == s->tid && atomic_load(&agent.tidtab[j].slot) == s) {
			atomic_store_explicit(&agent.tidtab[j].slot, NULL, memory_order_release);
			atomic_store_explicit(&agent.tidtab[j].tid, TID_GONE, memory_order_release);
			return;
		}
	}
}

/* Whether a slot is looked up by its tid: every one with a dlopen'ed agent
 * (threads that predate it are found by a scan); with a preloaded one,
 * the leader's only, which a thread passing a signal on asks for the mask
 * the leader returns to from our handler (handoff.c). */
int slot_in_tidtab(const struct tslot *s)
{
	return agent.by_tid || s->tid == agent.pid;
}

/* With a dlopen'ed agent two parties register threads: the helper's scan
 * of /proc and the thread itself (the Python module's thread hook). Each
 * looks the tid up first, but both can miss and link a slot: the check is
 * repeated here under the lock, so a tid never has two slots (the second
 * took the samples under one name, the first kept the other). */
struct tslot *slot_link(struct tslot *s, int bounded)
{
	if (!bounded)
		reg_lock();
	else if (reg_lock_bounded())
		return NULL;
	if (agent.by_tid) {
		struct tslot *o = slot_by_tid(s->tid);
		if (o && !atomic_load(&o->exited)) {
			reg_unlock();
			return o;
		}
		/* An ended thread of this tid whose entry its exit could not
		 * remove (thread_unregister): gone before the new one is
		 * added, so a lookup never finds the old slot. */
		if (o)
			tidtab_del(o);
	}
	s->next = agent.slots;
	agent.slots = s;
	if (slot_in_tidtab(s))
		tidtab_add(s);
	reg_unlock();
	return s;
}

void slot_free(struct tslot *s)
{
	ring_free(&s->ring);
	shm_free(s);
}
