/*
 * tasks.c — asyncio in the helper (docs/async.md): finding where the
 * target keeps its tasks, turning a sample taken in a task into the task's
 * logical stack, and naming tasks in the stream.
 *
 * The handler records which task its thread was running, where that
 * task's coroutine frame is in the walk, and its name (the wall sampler
 * does the same for a waiting task's sample); the await chain above it is
 * resolved here, a few milliseconds later, through the reader
 * (pyasync-read.c): the task's awaiters (the task it will wake, gather's,
 * wait's or shield's future and whoever awaits that, the TaskGroup's
 * parent task; 3.14+ keep this in the futures themselves), the frames of
 * each awaiter's suspended coroutine chain, and so on to the outermost
 * task. An awaiter is suspended as long as the task it awaits runs, so
 * what is read is what held at the sample. Chains are kept for one pass
 * of the writer, and a chain shares its awaiters' (a server's request
 * tasks all under one main task cost one read of it per pass).
 *
 * A task that has ended by then has let its awaiters go: its chain is the
 * one last resolved while it lived (kept across passes, a few thousand
 * tasks' worth), or none if it never was. A task whose address now holds
 * another task (its coroutine's code differs from the sampled frame's)
 * keeps the name and place the sample recorded, without awaiters.
 *
 * The stack written (STACK, format 1.2) keeps the thread's frames as
 * sampled, so that --native still pairs them with the native stack, and
 * appends the awaiters' frames (PYF_AWAITER), with task boundaries and
 * where the event loop's own frames start.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shm/agent.h"
#include "agentd.h"
#include "remote.h"
#include "common/elfsect.h"
#include "common/format.h"
#include "tasks.h"
#include "target.h"

pthread_mutex_t agentd_reader_lock = PTHREAD_MUTEX_INITIALIZER;

#define CHAIN_FRAMES 1024
#define CHAIN_TASKS 64

/* A task's chain as resolved in this pass. */
struct chain {
	uint64_t task;
	int state;             /* 0 being resolved, 1 done */
	int have_self;         /* self/nself/code/index were read */
	int done;              /* its coroutine has finished */
	uint32_t index;        /* the task's TASK index */
	uint32_t flags;        /* TASKF_OTHERS */
	uint64_t code, loop;   /* its coroutine's code object, first line; its loop */
	uint16_t first;
	uint32_t nself;        /* its own coroutine chain's frames, leaf first */
	struct strata_pyframe *self;
	uint32_t nanc;         /* awaiters' frames, leaf first */
	struct strata_pyframe *anc;
	uint32_t nb;           /* awaiters' boundaries, `at` relative to anc */
	struct rec_task_frame *b;
};

struct tasks_state {
	_Atomic int state;    /* 0 looking, 1 found, -1 given up */
	uint64_t last_try;
	uint64_t debug;       /* 3.14+: the _asyncio debug offsets (UINT64_MAX: none) */
	/* task names interned in this stream, and an index by address */
	struct tname {
		uint64_t addr;
		char *name;
		uint32_t index;
	} *names;
	uint32_t nnames, capnames, next_index;
	uint32_t *hash;       /* open addressing: 1 + position in names, 0 empty */
	uint32_t hmask;
	/* chains resolved in this pass */
	struct chain **chains;
	uint32_t nchains, capchains;
	struct strata_pyframe *fr;
	/* the last chain of awaiters resolved for a task, across passes */
	struct kept {
		uint64_t task, code;
		uint16_t first;
		uint32_t nanc, nb, flags;
		struct strata_pyframe *anc;
		struct rec_task_frame *b;
	} *kept;
};

TARGET_STATE(struct tasks_state, tasks, NULL)
#define T (*tasks_of(agentd_target))

#define KEPT 4096

/* ---- finding asyncio ----------------------------------------------------- */

static int find_debug(const struct robj *o, void *data)
{
	struct elf_section s;
	if (o->is_vdso || !o->path[0])
		return 0;
	/* _Py_AsyncioModuleDebugOffsets: 13 words (pyasync.h). */
	if (elf_find_section(o->path, ".AsyncioDebug", &s) == 0 && s.size >= 13 * 8) {
		*(uint64_t *)data = o->bias + s.addr;
		return 1;
	}
	return 0;
}

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
	int rc = agentd_reader->asyncio_find(T.debug, &a, why, sizeof(why));
	if (rc == 2 && !T.debug) {
		/* 3.14+: where the _asyncio module (an extension, or built
		 * into the interpreter) publishes its offsets. */
		uint64_t at = 0;
		remote_objects(find_debug, &at);
		T.debug = at ? at : UINT64_MAX;
		rc = agentd_reader->asyncio_find(T.debug, &a, why, sizeof(why));
	}
	pthread_mutex_unlock(&agentd_reader_lock);
	if (rc == 1 || rc == 2)
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

/* ---- task names ------------------------------------------------------------ */

static uint32_t hash_addr(uint64_t a) { return (uint32_t)((a >> 4) * 0x9E3779B97F4A7C15ull >> 32); }

static int names_rehash(uint32_t want)
{
	uint32_t size = 64;
	while (size < want * 2)
		size *= 2;
	uint32_t *h = calloc(size, sizeof(*h));
	if (!h)
		return -1;
	free(T.hash);
	T.hash = h;
	T.hmask = size - 1;
	for (uint32_t i = 0; i < T.nnames; i++) {
		uint32_t k = hash_addr(T.names[i].addr) & T.hmask;
		while (T.hash[k])
			k = (k + 1) & T.hmask;
		T.hash[k] = i + 1;
	}
	return 0;
}

/* The TASK index of task addr named `name`, writing the record the first
 * time this stream sees the pair. */
static uint32_t tasks_index(uint64_t addr, const char *name, struct wbuf *recs)
{
	if (T.hash) {
		for (uint32_t k = hash_addr(addr) & T.hmask; T.hash[k]; k = (k + 1) & T.hmask) {
			struct tname *t = &T.names[T.hash[k] - 1];
			if (t->addr == addr && strcmp(t->name, name) == 0)
				return t->index;
		}
	}
	/* Bounded: tasks of a long-running server come and go by the
	 * million; forgetting the older half only costs a repeated record. */
	if (T.nnames >= 65536) {
		uint32_t half = T.nnames / 2;
		for (uint32_t i = 0; i < half; i++)
			free(T.names[i].name);
		memmove(T.names, T.names + half, (T.nnames - half) * sizeof(*T.names));
		T.nnames -= half;
		if (names_rehash(T.capnames))
			return UINT32_MAX;
	}
	if (T.nnames == T.capnames) {
		uint32_t cap = T.capnames ? T.capnames * 2 : 64;
		struct tname *n = realloc(T.names, cap * sizeof(*n));
		if (!n)
			return UINT32_MAX;
		T.names = n;
		T.capnames = cap;
		if (names_rehash(cap))
			return UINT32_MAX;
	}
	struct tname *t = &T.names[T.nnames];
	t->name = strdup(name);
	if (!t->name)
		return UINT32_MAX;
	t->addr = addr;
	t->index = T.next_index++;
	uint32_t k = hash_addr(addr) & T.hmask;
	while (T.hash[k])
		k = (k + 1) & T.hmask;
	T.hash[k] = ++T.nnames;
	struct rec_task r = { .index = t->index, .addr = addr, .name = t->name };
	rec_put_task(recs, &r);
	return t->index;
}

/* ---- chains ------------------------------------------------------------------ */

static void chain_free(struct chain *c)
{
	free(c->self);
	free(c->anc);
	free(c->b);
	free(c);
}

void tasks_pass_end(void)
{
	for (uint32_t i = 0; i < T.nchains; i++)
		chain_free(T.chains[i]);
	T.nchains = 0;
}

void tasks_stream_reset(void)
{
	tasks_pass_end();
	for (uint32_t i = 0; T.kept && i < KEPT; i++) {
		free(T.kept[i].anc);
		free(T.kept[i].b);
	}
	free(T.kept);
	T.kept = NULL;
	for (uint32_t i = 0; i < T.nnames; i++)
		free(T.names[i].name);
	T.nnames = 0;
	T.next_index = 0;
	if (T.hash)
		memset(T.hash, 0, (T.hmask + 1) * sizeof(*T.hash));
}

static struct chain *chain_find(uint64_t t)
{
	for (uint32_t i = T.nchains; i-- > 0;)
		if (T.chains[i]->task == t)
			return T.chains[i];
	return NULL;
}

static struct chain *chain_new(uint64_t t)
{
	if (T.nchains == T.capchains) {
		uint32_t cap = T.capchains ? T.capchains * 2 : 16;
		struct chain **n = realloc(T.chains, cap * sizeof(*n));
		if (!n)
			return NULL;
		T.chains = n;
		T.capchains = cap;
	}
	struct chain *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->task = t;
	T.chains[T.nchains++] = c;
	return c;
}

/* Reads task t itself into c: its name, its coroutine chain, its code. */
static void read_self(struct chain *c, struct wbuf *recs)
{
	const struct strata_asyncref *a = &agent.async_ref;
	struct strata_taskinfo info;
	c->have_self = 1;
	int n = agentd_reader->task_read(a, c->task, 1, &info, T.fr, CHAIN_FRAMES);
	if (n < 0 || !info.code)
		return;
	c->code = info.code;
	c->first = info.first;
	c->loop = info.loop;
	c->done = info.done;
	c->index = tasks_index(c->task, info.name, recs);
	if (c->index == UINT32_MAX || n == 0)
		return;
	c->self = malloc((size_t)n * sizeof(*c->self));
	if (!c->self)
		return;
	memcpy(c->self, T.fr, (size_t)n * sizeof(*c->self));
	c->nself = (uint32_t)n;
}

static struct kept *kept_slot(uint64_t task)
{
	if (!T.kept && !(T.kept = calloc(KEPT, sizeof(*T.kept))))
		return NULL;
	return &T.kept[(uint32_t)((task >> 4) * 0x9E3779B97F4A7C15ull >> 32) % KEPT];
}

/* Keeps a live task's chain of awaiters. */
static void kept_store(struct chain *c)
{
	struct kept *k = c->code && !c->done && c->nanc ? kept_slot(c->task) : NULL;
	if (!k)
		return;
	free(k->anc);
	free(k->b);
	k->anc = malloc(c->nanc * sizeof(*k->anc));
	k->b = malloc(c->nb * sizeof(*k->b));
	if (!k->anc || !k->b) {
		k->task = 0;
		return;
	}
	memcpy(k->anc, c->anc, c->nanc * sizeof(*k->anc));
	memcpy(k->b, c->b, c->nb * sizeof(*k->b));
	k->task = c->task;
	k->code = c->code;
	k->first = c->first;
	k->nanc = c->nanc;
	k->nb = c->nb;
	k->flags = c->flags;
}

/* An ended (or freed) task's chain of awaiters, as last kept while it
 * lived, if its coroutine ran the code of frame f. */
static void kept_restore(struct chain *c, const struct strata_pyframe *f)
{
	struct kept *k = kept_slot(c->task);
	if (!k || k->task != c->task || k->code != f->code || k->first != f->first || c->nanc)
		return;
	c->anc = malloc(k->nanc * sizeof(*c->anc));
	c->b = malloc(k->nb * sizeof(*c->b));
	if (!c->anc || !c->b)
		return;
	memcpy(c->anc, k->anc, k->nanc * sizeof(*c->anc));
	memcpy(c->b, k->b, k->nb * sizeof(*c->b));
	c->nanc = k->nanc;
	c->nb = k->nb;
	c->flags = k->flags;
	c->code = k->code;
	c->first = k->first;
	c->done = 1;
}

/* The chain of task t: with self (its own frames, name and code: what an
 * awaiter's chain needs), and the chain of its awaiters. The reader lock
 * is held. */
static struct chain *chain_of(uint64_t t, int self, int depth, struct wbuf *recs)
{
	struct chain *c = chain_find(t);
	if (c && c->state == 0)
		return NULL; /* t awaits itself (a cycle): stop here */
	if (!c) {
		c = chain_new(t);
		if (!c)
			return NULL;
		uint64_t aw[16];
		int na = depth < CHAIN_TASKS ? agentd_reader->task_awaiters(&agent.async_ref, t, aw, 16) : 0;
		if (na > 1)
			c->flags |= TASKF_OTHERS;
		struct chain *p = na > 0 ? chain_of(aw[0], 1, depth + 1, recs) : NULL;
		if (p && p->nself && p->index != UINT32_MAX && p->nself + p->nanc <= CHAIN_FRAMES &&
		    (c->anc = malloc((p->nself + p->nanc) * sizeof(*c->anc))) &&
		    (c->b = malloc((1 + p->nb) * sizeof(*c->b)))) {
			/* Its awaiter's own frames, then the awaiter's awaiters'. */
			memcpy(c->anc, p->self, p->nself * sizeof(*c->anc));
			for (uint32_t i = 0; i < p->nself; i++)
				c->anc[i].flags = PYF_AWAITER;
			if (p->nanc) /* p->anc is NULL when it has none */
				memcpy(c->anc + p->nself, p->anc, p->nanc * sizeof(*c->anc));
			c->b[0] = (struct rec_task_frame){ .at = p->nself - 1, .task = p->index, .flags = p->flags };
			for (uint32_t i = 0; i < p->nb; i++) {
				c->b[1 + i] = p->b[i];
				c->b[1 + i].at += p->nself;
			}
			c->nanc = p->nself + p->nanc;
			c->nb = 1 + p->nb;
		}
		c->state = 1;
	}
	if (self && !c->have_self) {
		read_self(c, recs);
		if (depth == 0)
			kept_store(c);
	}
	return c;
}

static int tstack_room(struct tstack *out, uint32_t npy, uint32_t nb)
{
	if (out->cap >= npy && out->capb >= nb)
		return 0;
	uint32_t cap = npy + 64, capb = nb + 8;
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
	return f && b ? 0 : -1;
}

int tasks_logical(const struct rsample *h, const struct strata_pyframe *py, const char *name, unsigned nlen,
		  struct tstack *out, struct wbuf *recs)
{
	if (T.state != 1 || !h->task || !h->npy)
		return -1;
	int waiting = (h->sample_flags & SAMPLE_TASK_WAITING) != 0;
	if (!T.fr && !(T.fr = malloc(CHAIN_FRAMES * sizeof(*T.fr))))
		return -1;
	/* Where the task's coroutine frame is: recorded by the handler
	 * (task_at), else the outermost frame with the chain's code. */
	int split = h->task_at && h->task_at <= h->npy ? h->task_at - 1 : -1;
	pthread_mutex_lock(&agentd_reader_lock);
	/* A waiting sample names its task and holds its frames already:
	 * only the awaiters are read. */
	struct chain *c = chain_of(h->task, !(waiting && nlen), 0, recs);
	pthread_mutex_unlock(&agentd_reader_lock);
	if (!c)
		return -1;
	if (split < 0 && c->code)
		for (int i = h->npy; i-- > 0 && split < 0;)
			if (py[i].code == c->code && py[i].first == c->first)
				split = i;
	if (split < 0)
		return -1;
	/* A task that ended, or is gone: the chain it had (a waiting
	 * sample's task is read for that only when its chain is empty and
	 * one was kept for it). */
	struct kept *k = !c->nanc && !c->have_self ? kept_slot(c->task) : NULL;
	if (k && k->task == c->task) {
		pthread_mutex_lock(&agentd_reader_lock);
		read_self(c, recs);
		pthread_mutex_unlock(&agentd_reader_lock);
	}
	if (c->have_self && (c->done || !c->code) && !c->nanc)
		kept_restore(c, &py[split]);
	/* The chain is this task's if its coroutine runs the code sampled
	 * at the split; else the task ended and its address holds another
	 * one now: the sample's own name, no awaiters. */
	int same = c->have_self ? c->code && py[split].code == c->code && py[split].first == c->first : 1;
	uint32_t index = UINT32_MAX;
	if (nlen) {
		char buf[64];
		memcpy(buf, name, nlen < sizeof(buf) ? nlen : sizeof(buf) - 1);
		buf[nlen < sizeof(buf) ? nlen : sizeof(buf) - 1] = 0;
		for (char *s = buf; *s; s++)
			if ((unsigned char)*s < 0x20)
				*s = '?';
		index = tasks_index(h->task, buf, recs);
	} else if (same && c->have_self) {
		index = c->index;
	}
	if (index == UINT32_MAX)
		return -1;
	if (!same || !c->nanc) {
		if (tstack_room(out, h->npy, 1))
			return -1;
		memcpy(out->py, py, h->npy * sizeof(*py));
		out->npy = h->npy;
		out->tasks[0] = (struct rec_task_frame){ .at = (uint32_t)split, .task = index, .flags = same ? c->flags : 0 };
		out->ntasks = 1;
	} else {
		uint32_t npy = h->npy + c->nanc;
		if (tstack_room(out, npy, c->nb + 1))
			return -1;
		memcpy(out->py, py, h->npy * sizeof(*py));
		memcpy(out->py + h->npy, c->anc, c->nanc * sizeof(*py));
		out->npy = npy;
		out->tasks[0] = (struct rec_task_frame){ .at = (uint32_t)split, .task = index, .flags = c->flags };
		for (uint32_t i = 0; i < c->nb; i++) {
			out->tasks[1 + i] = c->b[i];
			out->tasks[1 + i].at += h->npy;
		}
		out->ntasks = 1 + c->nb;
	}
	out->loop_at = !waiting && (uint32_t)split + 1 < h->npy ? (uint32_t)split + 1 : 0;
	if (!waiting && same && c->loop)
		tasks_loop_seen(c->loop, (pid_t)h->tid);
	return 0;
}
