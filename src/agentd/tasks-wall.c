/*
 * tasks-wall.c — wall mode's samples of the suspended asyncio tasks
 * (docs/async.md), taken by the helper's wall sampler each tick: a task's
 * sample is its await chain down to where it waits, marked
 * SAMPLE_TASK_WAITING, named (the name rides in the sample, so a task that
 * ends before the writer drains it keeps its task frame), and attributed
 * to the thread that runs the task's event loop.
 *
 * Cost: the tasks are read in turn, a slice per tick, from where the last
 * tick stopped (the reader's cursor over the interpreter's own lists):
 * nothing reads the whole list again and again. A task's sample stands
 * for as many ticks as it takes to come round to it again (its weight),
 * so a task's share of waiting samples is its share of time however many
 * tasks there are. A task's name is read the first time the sampler meets
 * it (by address and coroutine), not at every sample.
 *
 * Which thread: the one whose thread state names the loop as its running
 * loop (3.14+), else the thread asyncio's loop records in _thread_id, else
 * the one the writer last saw running a task of that loop, else the one
 * last seen running any task unless it runs another loop (loop_tid).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shm/agent.h"
#include "agentd.h"
#include "tasks.h"
#include "target.h"

#define WALL_PER_TICK 64
#define NAME_CACHE (1u << 16)
#define LOOPS 16
#define ASK_KNOWN_NS 1000000000ull  /* re-ask a loop's thread after an answer */
#define ASK_FIRST_NS 10000000ull    /* and first after no answer, doubling */

/* A task's name, as read the first time it was sampled. */
struct tname_c {
	uint64_t task, coro;
	uint8_t len;
	char name[47];
};

struct tasks_wall_state {
	struct strata_taskcursor cur;
	uint64_t batch[WALL_PER_TICK];
	struct strata_pyframe *fr;
	/* ticks and tasks of the round under way and of the last full one */
	uint32_t ticks, tasks, last_ticks;
	struct tname_c *names;   /* NAME_CACHE entries, by task address */
	uint32_t nnames;
	/* event loops and the threads that run them */
	pthread_mutex_t lock;
	struct loopmap {
		uint64_t loop;
		pid_t tid;         /* seen by the writer */
		pid_t owner;       /* told by the interpreter */
		uint64_t asked;    /* when the interpreter was asked */
		uint64_t backoff;  /* and how long until it is asked again */
	} loops[LOOPS];
	unsigned nloops;
	pid_t last_tid;
};

static void tasks_wall_init(struct tasks_wall_state *s)
{
	pthread_mutex_init(&s->lock, NULL);
}

TARGET_STATE(struct tasks_wall_state, tasks_wall, tasks_wall_init)
#define WT (*tasks_wall_of(agentd_target))

static struct loopmap *loop_slot(uint64_t loop)
{
	for (unsigned i = 0; i < WT.nloops; i++)
		if (WT.loops[i].loop == loop)
			return &WT.loops[i];
	struct loopmap *m = &WT.loops[WT.nloops < LOOPS ? WT.nloops++ : (unsigned)(loop >> 4) % LOOPS];
	memset(m, 0, sizeof(*m));
	m->loop = loop;
	return m;
}

void tasks_loop_seen(uint64_t loop, pid_t tid)
{
	pthread_mutex_lock(&WT.lock);
	loop_slot(loop)->tid = tid;
	WT.last_tid = tid;
	pthread_mutex_unlock(&WT.lock);
}

/* The kernel id of the thread whose pthread_t is pt, 0 if not known. */
static pid_t tid_of_pthread(uint64_t pt)
{
	pid_t tid = 0;
	reg_lock();
	for (struct tslot *s = agent.slots; s && !tid; s = s->next)
		if (!atomic_load(&s->exited) && (uint64_t)s->pthread == pt)
			tid = s->tid;
	reg_unlock();
	return tid;
}

/* Whether thread tid is known to run a loop other than `loop` (told by the
 * interpreter or seen by the writer). Under WT.lock. */
static int runs_other_loop(pid_t tid, uint64_t loop)
{
	for (unsigned i = 0; i < WT.nloops; i++)
		if (WT.loops[i].loop != loop && (WT.loops[i].owner == tid || WT.loops[i].tid == tid))
			return 1;
	return 0;
}

/* The thread a waiting task of `loop` is attributed to, 0 if none can be
 * told (the sample is then not taken). Takes the reader lock, then the
 * slots' (never both: the writer holds the slots' lock while it takes the
 * reader's).
 *
 * The interpreter is asked again a second after it answered; after it
 * could not answer (a loop that has tasks but is not running yet:
 * asyncio.run creates the main task before run_forever sets _thread_id;
 * or a loop that keeps its thread where strata does not read it, uvloop's
 * before 3.14), again after 10 ms, doubling up to a second. A task whose
 * loop's thread is known neither way goes to the thread last seen running
 * any task (the main thread before any was seen), unless that thread is
 * known to run another loop: a loop that is not running yet has no thread
 * its tasks wait in. A task whose loop was not read has no other loop to
 * be told from: it goes to that thread. */
static pid_t loop_tid(uint64_t loop, uint64_t now)
{
	pthread_mutex_lock(&WT.lock);
	struct loopmap *m = loop ? loop_slot(loop) : NULL;
	int ask = m && now - m->asked >= m->backoff;
	if (ask)
		m->asked = now;
	pthread_mutex_unlock(&WT.lock);
	if (ask) {
		uint64_t pt = 0;
		uint32_t tid = 0;
		pid_t owner = 0;
		pthread_mutex_lock(&agentd_reader_lock);
		int rc = agentd_reader->loop_thread(&agent.async_ref, loop, &pt, &tid);
		pthread_mutex_unlock(&agentd_reader_lock);
		if (rc == 0)
			owner = tid ? (pid_t)tid : tid_of_pthread(pt);
		pthread_mutex_lock(&WT.lock);
		m = loop_slot(loop);
		m->owner = owner;
		m->asked = now;
		if (owner)
			m->backoff = ASK_KNOWN_NS;
		else
			m->backoff = m->backoff < ASK_FIRST_NS ? ASK_FIRST_NS
				: m->backoff * 2 > ASK_KNOWN_NS ? ASK_KNOWN_NS : m->backoff * 2;
		pthread_mutex_unlock(&WT.lock);
	}
	pthread_mutex_lock(&WT.lock);
	pid_t tid = 0;
	if (loop) {
		m = loop_slot(loop);
		tid = m->owner ? m->owner : m->tid;
	}
	if (!tid) {
		tid = WT.last_tid ? WT.last_tid : agent.pid;
		if (loop && runs_other_loop(tid, loop))
			tid = 0;
	}
	pthread_mutex_unlock(&WT.lock);
	return tid;
}

static struct tname_c *name_slot(uint64_t task)
{
	return &WT.names[(uint32_t)((task >> 4) * 0x9E3779B97F4A7C15ull >> 32) & (NAME_CACHE - 1)];
}

void tasks_wall_tick(void)
{
	if (!tasks_ready() || !agent.sampler_slot || !agentd_reader->tasks_next)
		return;
	const struct strata_asyncref *a = &agent.async_ref;
	unsigned depth = agent.cfg.max_depth;
	if (!WT.fr) {
		WT.fr = malloc(depth * sizeof(*WT.fr));
		WT.names = calloc(NAME_CACHE, sizeof(*WT.names));
		if (!WT.fr || !WT.names)
			return;
	}
	uint64_t now = mono_ns();
	int wrapped = 0;
	pthread_mutex_lock(&agentd_reader_lock);
	if (!WT.last_ticks) {
		/* The first round: count the tasks once (addresses only), for
		 * the weight of the samples taken before a round completes. */
		struct strata_taskcursor c = { 0 };
		uint32_t total = 0;
		for (int i = 0; i < 100000 / WALL_PER_TICK && !wrapped; i++) {
			int m = agentd_reader->tasks_next(a, &c, WT.batch, WALL_PER_TICK, &wrapped);
			if (m < 0)
				break;
			total += (uint32_t)m;
		}
		WT.last_ticks = total > WALL_PER_TICK ? (total + WALL_PER_TICK - 1) / WALL_PER_TICK : 1;
		wrapped = 0;
	}
	int n = agentd_reader->tasks_next(a, &WT.cur, WT.batch, WALL_PER_TICK, &wrapped);
	pthread_mutex_unlock(&agentd_reader_lock);
	WT.ticks++;
	if (n > 0)
		WT.tasks += (uint32_t)n;
	uint32_t weight = WT.last_ticks ? WT.last_ticks : 1;
	if (wrapped) {
		WT.last_ticks = WT.ticks;
		WT.ticks = WT.tasks = 0;
	}
	struct ring *ring = &agent.sampler_slot->ring;
	for (int i = 0; i < n; i++) {
		uint64_t t = WT.batch[i];
		struct strata_taskinfo info;
		struct tname_c *nc = name_slot(t);
		pthread_mutex_lock(&agentd_reader_lock);
		int m = agentd_reader->task_read(a, t, 0, &info, WT.fr, (int)depth);
		if (m > 0 && !info.running && (nc->task != t || nc->coro != info.coro)) {
			/* A task met for the first time: its name. */
			struct strata_taskinfo named;
			struct strata_pyframe one;
			nc->task = 0;
			if (agentd_reader->task_read(a, t, 1, &named, &one, 1) >= 0 && named.coro == info.coro) {
				size_t l = strlen(named.name);
				nc->len = (uint8_t)(l < sizeof(nc->name) ? l : sizeof(nc->name));
				memcpy(nc->name, named.name, nc->len);
				nc->task = t;
				nc->coro = info.coro;
			}
		}
		pthread_mutex_unlock(&agentd_reader_lock);
		if (m <= 0 || info.running || nc->task != t)
			continue;
		pid_t tid = loop_tid(info.loop, now);
		if (!tid)
			continue;
		uint32_t len = (uint32_t)(sizeof(struct rsample) + (size_t)m * sizeof(struct strata_pyframe) + nc->len);
		uint8_t *p = ring_reserve(ring, len);
		if (!p)
			return;
		struct rsample *h = (struct rsample *)p;
		memset(h, 0, sizeof(*h));
		h->time_ns = mono_ns();
		h->tid = (uint32_t)tid;
		h->weight = weight;
		h->sample_flags = SAMPLE_TASK_WAITING;
		h->npy = (uint16_t)m;
		h->task = t;
		h->task_at = (uint16_t)m; /* the outermost frame: its coroutine */
		h->task_name_len = nc->len;
		memcpy(h + 1, WT.fr, (size_t)m * sizeof(struct strata_pyframe));
		memcpy(p + sizeof(*h) + (size_t)m * sizeof(struct strata_pyframe), nc->name, nc->len);
		for (int j = 0; j < m; j++)
			agent.code_seen[code_seen_slot(WT.fr[j].code)] = 1;
		ring_commit(ring, len);
	}
}
