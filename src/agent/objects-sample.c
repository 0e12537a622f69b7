/*
 * objects-sample.c — the sample point of allocation sampling (--objects);
 * see objects-internal.h.
 *
 * In the profiled process (libstrata-agent.so), called by the allocator
 * hooks (objects.c) when a thread's count of bytes runs out: it draws the
 * next interval (byte-based Poisson sampling), captures the stack into
 * the thread's ring as the sampling signal does (sampler.c), and enters
 * the block into the shared table of sampled blocks and its counting
 * filter (shm/objects.h). Apart from objects.c, whose hooks run on every
 * allocation and free: this is the slow path an allocation takes once in
 * objects_rate bytes. A sampled block's free stays with the hooks: every
 * free hook calls it, specialised for them in their file.
 */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "shm/agent.h"
#include "shm/link.h"
#include "shm/objects.h"
#include "common/format.h"
#include "objects-internal.h"

/* ---- sampling ---- */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1Dull;
}

/* Bytes to the next sample point: exponential with mean objects_rate. */
static int64_t next_interval(void)
{
	if (!ot.rng) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ot.rng = ((uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull) ^ (uint64_t)syscall(SYS_gettid) ^ 1;
	}
	double u = ((double)(rng_next(&ot.rng) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
	double v = -log(u) * (double)agent.cfg.objects_rate;
	return v < 1 ? 1 : v > 1e15 ? (int64_t)1e15 : (int64_t)v;
}

/* The registers of this point, for --native: the unwinder starts here
 * (sampler.c drops the agent's own frames). */
static inline __attribute__((always_inline)) void here(ucontext_t *uc)
{
	uint64_t r[9];
	__asm__ volatile("lea 0(%%rip), %%rax\n\t"
			 "mov %%rax, 0(%0)\n\t"
			 "mov %%rsp, 8(%0)\n\t"
			 "mov %%rbp, 16(%0)\n\t"
			 "mov %%rbx, 24(%0)\n\t"
			 "mov %%r12, 32(%0)\n\t"
			 "mov %%r13, 40(%0)\n\t"
			 "mov %%r14, 48(%0)\n\t"
			 "mov %%r15, 56(%0)\n\t"
			 :
			 : "r"(r)
			 : "rax", "memory");
	memset(uc, 0, sizeof(*uc));
	greg_t *g = uc->uc_mcontext.gregs;
	g[REG_RIP] = (greg_t)r[0];
	g[REG_RSP] = (greg_t)r[1];
	g[REG_RBP] = (greg_t)r[2];
	g[REG_RBX] = (greg_t)r[3];
	g[REG_R12] = (greg_t)r[4];
	g[REG_R13] = (greg_t)r[5];
	g[REG_R14] = (greg_t)r[6];
	g[REG_R15] = (greg_t)r[7];
}

/* A sampled block in a filter cell, and one gone. A cell's bit is set
 * while its count is not zero: set after an increment; cleared by the
 * decrement to zero, which then looks again and sets it back if an
 * increment came in between (these are rare: samples and their frees). */
static void filter_add(struct objtab *t, uint32_t f)
{
	atomic_fetch_add(&t->filter[f], 1);
	atomic_fetch_or(&t->filter_bits[f >> 3], (uint8_t)(1u << (f & 7)));
}

void filter_remove(struct objtab *t, uint32_t f)
{
	if (atomic_fetch_sub(&t->filter[f], 1) != 1)
		return;
	atomic_fetch_and(&t->filter_bits[f >> 3], (uint8_t)~(1u << (f & 7)));
	if (atomic_load(&t->filter[f]))
		atomic_fetch_or(&t->filter_bits[f >> 3], (uint8_t)(1u << (f & 7)));
}

/* Enters a sampled block; its slot, or UINT32_MAX if the window is full. */
static uint32_t table_insert(struct objtab *t, uint64_t addr, uint64_t id, uint64_t size, int domain)
{
	uint32_t f = objfilter_slot(addr);
	if (atomic_load_explicit(&t->filter[f], memory_order_relaxed) >= 250)
		return UINT32_MAX;
	uint32_t h = objtab_home(addr);
	for (uint32_t i = 0; i < OBJTAB_WINDOW; i++) {
		uint32_t k = (h + i) & (OBJTAB_SIZE - 1);
		struct objent *e = &t->e[k];
		uint32_t exp = OBJ_EMPTY;
		if (atomic_load_explicit(&e->state, memory_order_relaxed) != OBJ_EMPTY ||
		    !atomic_compare_exchange_strong(&e->state, &exp, OBJ_CLAIMED))
			continue;
		atomic_fetch_or(&t->used[k / 64], 1ull << (k % 64));
		e->addr = addr;
		e->id = id;
		e->size = size;
		e->domain = (uint8_t)domain;
		e->written = 0;
		e->type_written = 0;
		e->scans = 0;
		e->free_ns = 0;
		atomic_store_explicit(&e->type, OBJTYPE_UNKNOWN, memory_order_relaxed);
		filter_add(t, f);
		atomic_store_explicit(&e->state, OBJ_LIVE, memory_order_release);
		return k;
	}
	return UINT32_MAX;
}

/* Takes a slot back whose sample never reached the ring. */
static void table_release(struct objtab *t, uint32_t k)
{
	struct objent *e = &t->e[k];
	filter_remove(t, objfilter_slot(e->addr));
	atomic_fetch_and(&t->used[k / 64], ~(1ull << (k % 64)));
	atomic_store_explicit(&e->state, OBJ_EMPTY, memory_order_release);
}

/* The thread's ring is full: its writer is behind (a loaded machine, or
 * a C loop allocating faster than it drains). A sample point is no
 * signal handler, so rather than lose the sample it pokes the writer and
 * waits for it to drain, up to ROOM_WAIT_NS. A writer that made no room
 * in that time is taken as stalled (stopped, gone, or blocked on a lock
 * this thread holds): the thread's sample points do not wait again until
 * the writer has drained some of its ring, so a writer that is gone costs
 * each thread one wait. The bound is long because the writer announces
 * new native objects before it drains (--native: their unwind tables,
 * built in the writer's pass); under make check's load a 20 ms bound,
 * with a second of no waiting after, lost thousands of samples while it
 * built them. 1: try again. */
#define ROOM_WAIT_NS (1000 * 1000000ull)

static int wait_for_room(struct ring *r)
{
	uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
	if (ot.stalled && tail == ot.stalled_tail)
		return 0;
	ot.stalled = 0;
	int e = errno;
	uint64_t end = mono_ns() + ROOM_WAIT_NS;
	link_poke();
	int moved = 0;
	while (!moved && mono_ns() < end) {
		struct timespec ts = { 0, 200000 };
		nanosleep(&ts, NULL);
		moved = atomic_load_explicit(&r->tail, memory_order_acquire) != tail;
	}
	if (!moved) {
		ot.stalled = 1;
		ot.stalled_tail = tail;
	}
	errno = e;
	return moved;
}

void __attribute__((noinline)) take_sample(int domain, void *p, size_t n)
{
	ot.left = next_interval();
	struct tslot *s = tls_slot;
	struct objtab *t = agent.objtab;
	if (!t || !agent.active)
		return;
	if (atomic_load_explicit(&agent.stopping, memory_order_relaxed))
		return; /* exiting: muted, left in (the runtime may be gone) */
	if (!atomic_load_explicit(&agent.sampling, memory_order_relaxed)) {
		/* Sampling is off: the hooks go (with the GIL, which OBJ and
		 * MEM callers hold). */
		if ((domain == D_MEM || domain == D_OBJ) && agent_py->phase() == STRATA_PHASE_RUNNING &&
		    !still_awaiting())
			remove_hooks();
		return;
	}
	if (atomic_load_explicit(&awaiting, memory_order_relaxed))
		atomic_store_explicit(&awaiting, 0, memory_order_relaxed);
	/* A fork child before its agent took over: the region is still
	 * the parent's. The recording of allocations ends where the
	 * interpreter starts finalizing (what is live then is live). */
	if (getpid() != agent.pid || agent_py->phase() != STRATA_PHASE_RUNNING)
		return;
	if (!s && agent.by_tid && (s = slot_by_tid((pid_t)syscall(SYS_gettid))))
		tls_slot = s; /* registered by a scan, before its first signal */
	if (!s || s->in_handler || atomic_load_explicit(&s->exited, memory_order_relaxed)) {
		atomic_fetch_add_explicit(&t->lost, 1, memory_order_relaxed);
		return;
	}
	ot.busy = 1;
	s->in_handler = 1; /* the sampling signal waits: we use the guard */
	uint64_t id = atomic_fetch_add_explicit(&t->next_id, 1, memory_order_relaxed) + 1;
	uint32_t k = table_insert(t, (uint64_t)(uintptr_t)p, id, n, domain);
	uint64_t w[AW_N] = { id, n, (uint64_t)domain | (k == UINT32_MAX ? (uint64_t)ALLOC_UNTRACKED << 8 : 0),
			     k };
	if (k == UINT32_MAX)
		atomic_fetch_add_explicit(&t->untracked, 1, memory_order_relaxed);
	ucontext_t uc;
	if (agent.cfg.native)
		here(&uc);
	int rc;
	while ((rc = sample_alloc_capture(s, agent.cfg.native ? &uc : NULL, w)) != 0 && wait_for_room(&s->ring))
		;
	if (rc != 0) {
		if (k != UINT32_MAX)
			table_release(t, k);
		atomic_fetch_add_explicit(&t->lost, 1, memory_order_relaxed);
	}
	s->in_handler = 0;
	ot.busy = 0;
}
