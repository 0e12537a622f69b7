/*
 * tasks.c — asyncio in the helper (docs/async.md): finding where the
 * target keeps its tasks, turning a sample of a thread that runs a task
 * into the task's logical stack, and naming tasks in the stream.
 *
 * The handler records only which task its thread was running (the agent
 * compares each running task's coroutine frame with the thread's chain);
 * the await chain above it is resolved here, a few milliseconds later,
 * through the reader (pyasync.c): the task's awaiters (the task whose
 * wakeup it will call, gather's future, the TaskGroup's parent task), the
 * frames of each awaiter's suspended coroutine chain, and so on to the
 * outermost task. An awaiter is suspended as long as the task it awaits
 * runs, so what is read is what held at the sample. Resolved chains are
 * kept for one pass of the writer.
 *
 * The stack written (REC_STACK, format 1.2) keeps the thread's frames as
 * sampled, so that --native still pairs them with the native stack, and
 * appends the awaiters' frames (PYF_AWAITER), with task boundaries and
 * where the event loop's own frames start.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shm/agent.h"
#include "agentd.h"
#include "common/format.h"
#include "tasks.h"

pthread_mutex_t agentd_reader_lock = PTHREAD_MUTEX_INITIALIZER;

static struct {
	_Atomic int state;    /* 0 looking, 1 found, -1 given up */
	_Atomic pid_t loop_tid; /* the thread last seen running a task */
	uint64_t last_try;
	/* task names interned in this stream */
	struct tname {
		uint64_t addr;
		char *name;
		uint32_t index;
	} *names;
	uint32_t nnames, capnames, next_index;
	/* chains resolved in this pass */
	struct chain {
		uint64_t task;
		int ok;
		uint32_t index;        /* the task's REC_TASK index */
		uint32_t flags;        /* TASKF_OTHERS */
		uint64_t code;         /* its coroutine's code object, first line */
		uint16_t first;
		uint32_t nanc;         /* awaiters' frames, leaf first */
		struct strata_pyframe *anc;
		uint32_t nb;           /* awaiters' boundaries, `at` relative to anc */
		struct rec_task_frame *b;
	} *chains;
	uint32_t nchains, capchains;
} T;

#define CHAIN_FRAMES 1024
#define CHAIN_TASKS 64

void tasks_poll(void)
{
	if (T.state || !agentd_reader->asyncio_find)
		return;
	uint64_t now = mono_ns();
	if (now - T.last_try < 100 * 1000000ull)
		return;
	T.last_try = now;
	struct strata_asyncref a;
	char why[512] = "";
	pthread_mutex_lock(&agentd_reader_lock);
	int rc = agentd_reader->asyncio_find(&a, why, sizeof(why));
	pthread_mutex_unlock(&agentd_reader_lock);
	if (rc == 1)
		return;
	if (rc < 0) {
		T.state = -1;
		if (why[0])
			agent_log("%s", why);
		return;
	}
	agent.async_ref = a;
	atomic_store_explicit(&agent.async_ready, 1, memory_order_release);
	T.state = 1;
}

int tasks_ready(void) { return T.state == 1; }

/* The REC_TASK index of task addr named `name`, writing the record the
 * first time this stream sees the pair. */
uint32_t tasks_index(uint64_t addr, const char *name, struct wbuf *recs)
{
	for (uint32_t i = T.nnames; i-- > 0;)
		if (T.names[i].addr == addr && strcmp(T.names[i].name, name) == 0)
			return T.names[i].index;
	if (T.nnames == T.capnames) {
		uint32_t cap = T.capnames ? T.capnames * 2 : 64;
		struct tname *n = realloc(T.names, cap * sizeof(*n));
		if (!n)
			return UINT32_MAX;
		T.names = n;
		T.capnames = cap;
	}
	struct tname *t = &T.names[T.nnames];
	t->name = strdup(name);
	if (!t->name)
		return UINT32_MAX;
	t->addr = addr;
	t->index = T.next_index++;
	T.nnames++;
	struct rec_task r = { .index = t->index, .addr = addr, .name = t->name };
	rec_put_task(recs, &r);
	/* Bounded: tasks of a long-running server come and go by the
	 * million; forgetting old ones only costs a repeated record. */
	if (T.nnames > 65536) {
		for (uint32_t i = 0; i < T.nnames / 2; i++)
			free(T.names[i].name);
		memmove(T.names, T.names + T.nnames / 2, (T.nnames - T.nnames / 2) * sizeof(*T.names));
		T.nnames -= T.nnames / 2;
	}
	return t->index;
}

void tasks_pass_end(void)
{
	for (uint32_t i = 0; i < T.nchains; i++) {
		free(T.chains[i].anc);
		free(T.chains[i].b);
	}
	T.nchains = 0;
}

void tasks_stream_reset(void)
{
	tasks_pass_end();
	for (uint32_t i = 0; i < T.nnames; i++)
		free(T.names[i].name);
	T.nnames = 0;
	T.next_index = 0;
}

/* Reads task t's awaiters, their frames and theirs, into c. The reader
 * lock is held. */
static void resolve(struct chain *c, uint64_t t, struct wbuf *recs)
{
	const struct strata_asyncref *a = &agent.async_ref;
	struct strata_taskinfo info;
	struct strata_pyframe *fr = malloc(CHAIN_FRAMES * sizeof(*fr));
	c->anc = malloc(CHAIN_FRAMES * sizeof(*c->anc));
	c->b = malloc(CHAIN_TASKS * sizeof(*c->b));
	if (!fr || !c->anc || !c->b)
		goto out;
	int n = agentd_reader->task_read(a, t, &info, fr, CHAIN_FRAMES);
	if (n <= 0)
		goto out;
	(void)info.running;
	/* The running coroutine's own frame: the outermost of its chain. */
	c->code = fr[n - 1].code;
	c->first = fr[n - 1].first;
	c->index = tasks_index(t, info.name, recs);
	if (c->index == UINT32_MAX)
		goto out;
	c->ok = 1;
	uint64_t seen[CHAIN_TASKS];
	uint32_t nseen = 0;
	seen[nseen++] = t;
	uint32_t *flags = &c->flags;
	for (uint64_t cur = t; nseen < CHAIN_TASKS;) {
		uint64_t aw[16];
		int na = agentd_reader->task_awaiters(a, cur, aw, 16);
		if (na <= 0)
			break;
		if (na > 1)
			*flags |= TASKF_OTHERS;
		uint64_t p = aw[0];
		int loop = 0;
		for (uint32_t i = 0; i < nseen; i++)
			loop |= seen[i] == p;
		if (loop)
			break;
		seen[nseen++] = p;
		int m = agentd_reader->task_read(a, p, &info, fr, CHAIN_FRAMES);
		if (m <= 0 || c->nanc + (uint32_t)m > CHAIN_FRAMES)
			break;
		uint32_t ix = tasks_index(p, info.name, recs);
		if (ix == UINT32_MAX)
			break;
		memcpy(c->anc + c->nanc, fr, (size_t)m * sizeof(*fr));
		for (int i = 0; i < m; i++)
			c->anc[c->nanc + i].flags = PYF_AWAITER;
		c->b[c->nb] = (struct rec_task_frame){ .at = c->nanc + (uint32_t)m - 1, .task = ix, .flags = 0 };
		flags = &c->b[c->nb].flags;
		c->nb++;
		c->nanc += (uint32_t)m;
		cur = p;
	}
out:
	free(fr);
}

int tasks_logical(const struct rsample *h, const struct strata_pyframe *py, struct tstack *out, struct wbuf *recs)
{
	if (T.state != 1 || !h->task || !h->npy)
		return -1;
	if (!(h->sample_flags & SAMPLE_TASK_WAITING))
		atomic_store_explicit(&T.loop_tid, (pid_t)h->tid, memory_order_relaxed);
	struct chain *c = NULL;
	for (uint32_t i = 0; i < T.nchains && !c; i++)
		if (T.chains[i].task == h->task)
			c = &T.chains[i];
	if (!c) {
		if (T.nchains == T.capchains) {
			uint32_t cap = T.capchains ? T.capchains * 2 : 16;
			struct chain *n = realloc(T.chains, cap * sizeof(*n));
			if (!n)
				return -1;
			T.chains = n;
			T.capchains = cap;
		}
		c = &T.chains[T.nchains++];
		memset(c, 0, sizeof(*c));
		c->task = h->task;
		pthread_mutex_lock(&agentd_reader_lock);
		resolve(c, h->task, recs);
		pthread_mutex_unlock(&agentd_reader_lock);
	}
	if (!c->ok)
		return -1;
	/* The task's coroutine frame on the thread: the outermost with its
	 * code (a recursive coroutine awaits itself further in). */
	int split = -1;
	for (int i = h->npy; i-- > 0 && split < 0;)
		if (py[i].code == c->code && py[i].first == c->first)
			split = i;
	if (split < 0)
		return -1;
	uint32_t npy = h->npy + c->nanc;
	if (out->cap < npy || out->capb < c->nb + 1) {
		uint32_t cap = npy + 64, capb = c->nb + 8;
		struct strata_pyframe *f = realloc(out->py, cap * sizeof(*f));
		if (f) {
			out->py = f;
			out->cap = cap;
		}
		struct rec_task_frame *b = realloc(out->tasks, capb * sizeof(*b));
		if (b) {
			out->tasks = b;
			out->capb = capb;
		}
		if (!f || !b)
			return -1;
	}
	memcpy(out->py, py, h->npy * sizeof(*py));
	memcpy(out->py + h->npy, c->anc, c->nanc * sizeof(*py));
	out->npy = npy;
	out->tasks[0] = (struct rec_task_frame){ .at = (uint32_t)split, .task = c->index, .flags = c->flags };
	for (uint32_t i = 0; i < c->nb; i++) {
		out->tasks[1 + i] = c->b[i];
		out->tasks[1 + i].at += h->npy;
	}
	out->ntasks = 1 + c->nb;
	out->loop_at = (uint32_t)split + 1 < h->npy ? (uint32_t)split + 1 : 0;
	return 0;
}

/* ---- wall mode: where the suspended tasks wait ---------------------------- */

/* The list of tasks is read anew every WALL_REFRESH_NS (reading every
 * task's entry is the costly part with thousands of tasks); each tick
 * reads at most WALL_PER_TICK of them, in turn, and a sample stands for
 * as many ticks as it takes to come round to the task again (its weight),
 * so a task's share of waiting samples is its share of time. */
#define WALL_REFRESH_NS (200 * 1000000ull)
#define WALL_PER_TICK 64
#define WALL_MAX_TASKS 100000

static struct {
	uint64_t *list;
	int n;
	uint64_t refreshed;
	unsigned next;
	struct strata_pyframe *fr;
} WT;

void tasks_wall_tick(void)
{
	if (atomic_load(&T.state) != 1 || !agent.sampler_slot)
		return;
	const struct strata_asyncref *a = &agent.async_ref;
	uint64_t now = mono_ns();
	unsigned depth = agent.cfg.max_depth;
	if (!WT.list) {
		WT.list = malloc(WALL_MAX_TASKS * sizeof(*WT.list));
		WT.fr = malloc(depth * sizeof(*WT.fr));
		if (!WT.list || !WT.fr)
			return;
	}
	if (now - WT.refreshed >= WALL_REFRESH_NS) {
		pthread_mutex_lock(&agentd_reader_lock);
		int n = agentd_reader->tasks(a, WT.list, WALL_MAX_TASKS);
		pthread_mutex_unlock(&agentd_reader_lock);
		WT.n = n > 0 ? n : 0;
		WT.refreshed = now;
	}
	if (!WT.n)
		return;
	int k = WT.n < WALL_PER_TICK ? WT.n : WALL_PER_TICK;
	uint32_t weight = (uint32_t)((WT.n + k - 1) / k);
	pid_t tid = atomic_load_explicit(&T.loop_tid, memory_order_relaxed);
	if (!tid)
		tid = agent.pid;
	struct ring *ring = &agent.sampler_slot->ring;
	for (int i = 0; i < k; i++) {
		uint64_t t = WT.list[WT.next++ % (unsigned)WT.n];
		struct strata_taskinfo info;
		pthread_mutex_lock(&agentd_reader_lock);
		int m = agentd_reader->task_read(a, t, &info, WT.fr, (int)depth);
		pthread_mutex_unlock(&agentd_reader_lock);
		if (m <= 0 || info.running)
			continue;
		uint32_t len = (uint32_t)(sizeof(struct rsample) + (size_t)m * sizeof(struct strata_pyframe));
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
		memcpy(h + 1, WT.fr, (size_t)m * sizeof(struct strata_pyframe));
		for (int j = 0; j < m; j++)
			agent.code_seen[code_seen_slot(WT.fr[j].code)] = 1;
		ring_commit(ring, len);
	}
}
