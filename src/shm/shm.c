/*
 * shm.c — see shm.h.
 *
 * Layout of the region: the header, then blocks. Each block starts with a
 * 16-byte tag (its size class and a magic word, so a double free or a
 * stray pointer is refused rather than corrupting a list); the caller gets
 * the bytes after the tag. Offsets, not pointers, link the free lists, but
 * since the region sits at the same address everywhere either would do.
 */
#include "shm.h"
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define SHM_MAGIC 0x53545241544d454dull /* "STRATMEM" */
#define BLOCK_MAGIC 0x626c6b21u /* "blk!" */
#define FREE_MAGIC 0x66726565u  /* "free" */
#define MIN_SHIFT 6
#define NCLASSES 34 /* 64 B .. 512 GiB */
#define GROW_STEP (2u << 20)

struct shm_header {
	uint64_t magic;
	uint64_t max;
	uint64_t size;               /* bytes in the file */
	uint64_t brk;                /* offset of the first never-used byte */
	uint64_t used;
	uint64_t free[NCLASSES];     /* offset of the first free block, 0 = none */
	uint64_t root;               /* offset of the agent's state */
	pthread_mutex_t lock;
	/* Address space (shm.h): whether both map the largest size from the
	 * start (no RLIMIT_AS), else what the profiled process has mapped
	 * and what the helper asked it to. The file never outgrows either
	 * process's mapping. */
	uint32_t full;
	_Atomic uint64_t target_mapped;
	_Atomic uint64_t want;
	/* The first failure to grow for want of address space or memory. */
	_Atomic int limit_errno;
	_Atomic uint64_t limit_wanted;
	/* Rung by every process of the tree that posts a link request
	 * (link.h); where the tree's helper listens for fork children. */
	_Atomic uint32_t doorbell;
	_Atomic int32_t tree_helper;
	_Atomic uint64_t tree_key;
};

/* Where blocks begin: after the header, on a 64-byte boundary. */
#define FIRST_BLOCK ((sizeof(struct shm_header) + 63) & ~63ull)

struct tag {
	uint32_t magic;              /* BLOCK_MAGIC in use, FREE_MAGIC free */
	uint32_t cls;
	uint64_t next_free;          /* while free; in use: the owner's offset */
};

static struct {
	int fd;
	uint8_t *base;
	uint64_t max;
	_Atomic uint64_t mapped;     /* this process's mapping, from base */
	_Atomic int resizing;        /* a thread of ours is in mremap */
	_Atomic uint64_t refused;    /* a size the kernel would not map: not asked again */
	int target;                  /* the profiled process (not the helper) */
	int (*grow)(uint64_t want); /* without fd: the helper grows the file */
} S = { .fd = -1 };

static struct shm_header *H(void) { return (struct shm_header *)S.base; }

static uint64_t round_step(uint64_t n)
{
	n = (n + GROW_STEP - 1) & ~(uint64_t)(GROW_STEP - 1);
	return n > S.max ? S.max : n;
}

/* Whether this process has a finite address-space limit. */
static int as_limited(void)
{
	struct rlimit rl;
	return getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY;
}

static int memfd(void)
{
	int fd = (int)syscall(SYS_memfd_create, "strata-agent", 1u /* MFD_CLOEXEC */);
	if (fd < 0)
		return -1;
	/* Out of the low numbers a program may close or dup2 onto. */
	return fd_high(fd);
}

static void note_limit(int err, uint64_t wanted)
{
	if (!S.base || (err != ENOMEM && err != EAGAIN))
		return;
	int zero = 0;
	if (atomic_compare_exchange_strong(&H()->limit_errno, &zero, err))
		atomic_store(&H()->limit_wanted, wanted);
}

/* Extends this process's mapping in place to `want` bytes (mremap without
 * MREMAP_MAYMOVE: pointers stay valid). Async-signal-safe. Returns 0, -1
 * if the kernel refused (errno), -2 if another thread of ours is at it
 * (a signal handler must not wait for it; others try again). */
static int map_to(uint64_t want)
{
	if (want > S.max)
		want = S.max;
	if (atomic_load_explicit(&S.mapped, memory_order_acquire) >= want)
		return 0;
	if (atomic_exchange(&S.resizing, 1))
		return -2;
	int rc = 0;
	uint64_t cur = atomic_load(&S.mapped);
	if (cur < want) {
		void *p = (void *)syscall(SYS_mremap, S.base, (size_t)cur, (size_t)want, 0);
		if (p == MAP_FAILED) {
			note_limit(errno, want);
			atomic_store(&S.refused, want);
			rc = -1;
		} else {
			atomic_store_explicit(&S.mapped, want, memory_order_release);
			if (S.target)
				atomic_store(&H()->target_mapped, want);
		}
	}
	atomic_store(&S.resizing, 0);
	return rc;
}

/* map_to for callers that may wait a little (never a signal handler). */
static int map_to_wait(uint64_t want)
{
	for (int i = 0; i < 10000; i++) {
		int rc = map_to(want);
		if (rc != -2)
			return rc;
		sched_yield();
	}
	errno = EBUSY;
	return -1;
}

static int init_header(uint64_t max, uint64_t mapped, int full)
{
	if (ftruncate(S.fd, GROW_STEP))
		return -1;
	struct shm_header *h = H();
	memset(h, 0, sizeof(*h));
	h->magic = SHM_MAGIC;
	h->max = max;
	h->size = GROW_STEP;
	h->brk = FIRST_BLOCK;
	h->full = (uint32_t)full;
	atomic_store(&h->target_mapped, mapped);
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&h->lock, &a);
	pthread_mutexattr_destroy(&a);
	return 0;
}

/* A free range far from where the kernel puts anything by default (the
 * executable, the heap, libraries, stacks), so that a freshly started
 * helper finds it free too, and the range after it stays free for the
 * mapping to grow into: `len` bytes are mapped now, `max` may be later. */
static void *map_somewhere(int fd, uint64_t len)
{
	for (int tries = 0; tries < 64; tries++) {
		uint64_t r = 0;
		if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
			r = (uint64_t)getpid() * 0x9E3779B97F4A7C15ull + (uint64_t)tries * 0x1234567ull;
		/* 32 TiB .. 80 TiB, 1 GiB aligned. */
		uint64_t addr = 0x200000000000ull + (r % 0x3000ull) * (1ull << 30);
		void *p = mmap((void *)(uintptr_t)addr, len, PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_NORESERVE | MAP_FIXED_NOREPLACE, fd, 0);
		if (p == MAP_FAILED) {
			if (errno == ENOMEM)
				return NULL; /* the address space is full: another address will not help */
			continue;
		}
		if ((uint64_t)(uintptr_t)p != addr) {
			/* A kernel without MAP_FIXED_NOREPLACE treats it as a hint. */
			munmap(p, len);
			continue;
		}
		return p;
	}
	return NULL;
}

int shm_create(uint64_t max)
{
	S.fd = memfd();
	if (S.fd < 0)
		return -1;
	S.max = max;
	S.target = 1;
	/* Without RLIMIT_AS the largest size is mapped at once and never
	 * grows (nothing to lose); under one, only what is in use. */
	int full = !as_limited();
	uint64_t len = full ? max : GROW_STEP;
	S.base = map_somewhere(S.fd, len);
	atomic_store(&S.mapped, S.base ? len : 0);
	if (!S.base || init_header(max, len, full)) {
		int e = errno;
		if (S.base)
			munmap(S.base, len);
		close(S.fd);
		S.fd = -1;
		S.base = NULL;
		atomic_store(&S.mapped, 0);
		errno = e ? e : ENOMEM;
		return -1;
	}
	return 0;
}

int shm_replace(void)
{
	if (!S.base)
		return -1;
	int fd = memfd();
	if (fd < 0)
		return -1;
	/* MAP_FIXED replaces the parent's mapping in one step: no moment
	 * when the address is unmapped. Under RLIMIT_AS the child starts
	 * small again, and what the parent had mapped beyond goes. */
	int full = H()->full != 0;
	uint64_t len = full ? S.max : GROW_STEP;
	void *p = mmap(S.base, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE | MAP_FIXED, fd, 0);
	if (p == MAP_FAILED) {
		close(fd);
		return -1;
	}
	uint64_t had = atomic_load(&S.mapped);
	if (had > len)
		munmap(S.base + len, had - len);
	atomic_store(&S.mapped, len);
	atomic_store(&S.resizing, 0);
	atomic_store(&S.refused, 0);
	/* The parent held no descriptor for its region once its helper ran
	 * (a fork before that, from the agent's own start, cannot happen). */
	S.fd = fd;
	S.grow = NULL;
	return init_header(S.max, len, full);
}

void shm_destroy(void)
{
	if (S.base)
		munmap(S.base, atomic_load(&S.mapped));
	if (S.fd >= 0)
		close(S.fd);
	S.fd = -1;
	S.base = NULL;
	atomic_store(&S.mapped, 0);
}

int shm_attach(int fd, uint64_t addr, uint64_t max)
{
	struct stat st;
	if (fstat(fd, &st) || (uint64_t)st.st_size < sizeof(struct shm_header)) {
		errno = EINVAL;
		return -1;
	}
	uint64_t len = (uint64_t)st.st_size;
	void *p = mmap((void *)(uintptr_t)addr, len, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_NORESERVE | MAP_FIXED_NOREPLACE, fd, 0);
	if (p == MAP_FAILED)
		return -1;
	if ((uint64_t)(uintptr_t)p != addr) {
		munmap(p, len);
		errno = EEXIST;
		return -1;
	}
	S.fd = fd;
	S.base = p;
	S.max = max;
	S.target = 0;
	atomic_store(&S.mapped, len);
	if (H()->magic != SHM_MAGIC || H()->max != max) {
		munmap(p, len);
		S.base = NULL;
		errno = EINVAL;
		return -1;
	}
	/* As the profiled process does: all at once, or what is in use. */
	if (map_to_wait(H()->full ? max : H()->size)) {
		munmap(p, atomic_load(&S.mapped));
		S.base = NULL;
		return -1;
	}
	return 0;
}

void shm_close_fd(int (*grow)(uint64_t want))
{
	if (S.fd >= 0)
		close(S.fd);
	S.fd = -1;
	S.grow = grow;
}

static void lock(void);
static void unlock(void);
static int lock_alloc(void);

/* Grows the file to `want` (rounded, at most the largest size), under the
 * lock. The profiled process maps first; the helper only grows to what
 * the profiled process has mapped, and maps it itself before the file
 * says it is there. */
static int grow_locked(uint64_t want)
{
	want = round_step(want);
	if (want <= H()->size)
		return 0;
	if (S.target ? map_to_wait(want) : (atomic_load(&H()->target_mapped) < want || map_to_wait(want)))
		return -1;
	if (ftruncate(S.fd, (off_t)want)) {
		note_limit(errno, want);
		return -1;
	}
	__atomic_store_n(&H()->size, want, __ATOMIC_RELEASE);
	return 0;
}

int shm_grow(uint64_t want)
{
	if (!S.base || S.fd < 0)
		return -1;
	lock();
	int rc = grow_locked(want);
	unlock();
	return rc;
}

int shm_sync(void)
{
	if (!S.base)
		return -1;
	if (S.target) {
		uint64_t w = atomic_load_explicit(&H()->want, memory_order_acquire);
		if (w <= atomic_load_explicit(&S.mapped, memory_order_relaxed))
			return 0;
		/* Refused once (RLIMIT_AS): not a failed system call in every
		 * signal handler from then on. */
		uint64_t r = atomic_load_explicit(&S.refused, memory_order_relaxed);
		if (r && w >= r)
			return -1;
		return map_to(w) == 0 ? 0 : -1;
	}
	uint64_t sz = __atomic_load_n(&H()->size, __ATOMIC_ACQUIRE);
	return map_to(sz) == 0 ? 0 : -1;
}

void shm_want(uint64_t bytes)
{
	if (!S.base || S.target)
		return;
	/* A little ahead, so the next few tables or threads fit without
	 * asking again. */
	bytes = round_step(bytes + bytes / 4);
	uint64_t cur = atomic_load(&H()->want);
	while (cur < bytes && !atomic_compare_exchange_weak(&H()->want, &cur, bytes))
		;
}

int shm_pending(void)
{
	return S.base && !S.target && !atomic_load(&H()->limit_errno) &&
	       atomic_load(&H()->want) > atomic_load(&H()->target_mapped);
}

int shm_adopt_fd(int fd)
{
	if (S.fd >= 0 || !S.base)
		return -1;
	/* Another process of the tree may be growing the file: it
	 * truncates, then publishes the size, and the file never shrinks.
	 * Read before the file's, the size published is never more than
	 * the file's; the file may be larger for a moment. */
	uint64_t size = __atomic_load_n(&H()->size, __ATOMIC_ACQUIRE);
	struct stat st;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < size || (uint64_t)st.st_size > S.max)
		return -1;
	S.fd = fd;
	return 0;
}

int shm_fd(void) { return S.fd; }
uint64_t shm_addr(void) { return (uint64_t)(uintptr_t)S.base; }
uint64_t shm_max(void) { return S.max; }

int shm_contains(const void *p, size_t n)
{
	uint64_t a = (uint64_t)(uintptr_t)p, m = atomic_load(&S.mapped);
	return S.base && a >= shm_addr() && a - shm_addr() <= m && n <= m - (a - shm_addr());
}

int shm_limited(uint64_t *wanted)
{
	if (!S.base)
		return 0;
	int e = atomic_load(&H()->limit_errno);
	if (wanted)
		*wanted = atomic_load(&H()->limit_wanted);
	return e;
}

int shm_limit_note(char *buf, size_t n, int err)
{
	struct rlimit rl;
	if (!n)
		return 0;
	buf[0] = 0;
	if (err != ENOMEM || getrlimit(RLIMIT_AS, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	return snprintf(buf, n, ": RLIMIT_AS is %llu MB", (unsigned long long)(rl.rlim_cur >> 20));
}

static void lock(void)
{
	if (pthread_mutex_lock(&H()->lock) == EOWNERDEAD)
		/* The other process died holding it: its half-done change
		 * leaks a block at worst, the lists themselves are updated
		 * in one store each. */
		pthread_mutex_consistent(&H()->lock);
}

static void unlock(void) { pthread_mutex_unlock(&H()->lock); }

/* The profiled process never waits on the helper without a bound (a
 * stopped helper holding the lock must not hang the program's thread
 * starts): lock_bounded (agent.h), 0 when held. The helper waits. */
static _Atomic int lock_stalled;

static int lock_alloc(void)
{
	if (S.target)
		return lock_bounded(&H()->lock, &lock_stalled);
	lock();
	return 0;
}

int shm_stalled(void) { return atomic_load(&lock_stalled); }

static unsigned class_of(size_t n)
{
	unsigned c = 0;
	while (c < NCLASSES - 1 && ((uint64_t)1 << (c + MIN_SHIFT)) < n + sizeof(struct tag))
		c++;
	return c;
}

/* The process a block is allocated for (the owner stamped in its tag):
 * the calling thread's agent state, when it is in the region (in the
 * helper, the target the thread works for). */
static uint64_t owner_now(void)
{
	struct agent_state *a = agentp;
	return a && shm_contains(a, 1) ? (uint64_t)((uint8_t *)a - S.base) : 0;
}

static void *alloc(size_t n, int zeroed)
{
	if (!S.base || n > S.max)
		return NULL;
	unsigned c = class_of(n);
	uint64_t bsize = (uint64_t)1 << (c + MIN_SHIFT);
	if (bsize < n + sizeof(struct tag))
		return NULL;
	struct shm_header *h = H();
again:
	if (lock_alloc())
		return NULL;
	uint64_t off = h->free[c];
	struct tag *t;
	int reused = 0;
	if (off) {
		t = (struct tag *)(S.base + off);
		h->free[c] = t->next_free;
		reused = 1;
	} else {
		/* Blocks of 4 KiB and more start on a page, so a ring's pages
		 * are its own. */
		uint64_t align = bsize >= 4096 ? 4096 : 64;
		uint64_t start = (h->brk + sizeof(struct tag) + align - 1) & ~(align - 1);
		off = start - sizeof(struct tag);
		if (off + bsize > S.max) {
			unlock();
			return NULL;
		}
		if (off + bsize > h->size) {
			uint64_t want = round_step(off + bsize);
			if (S.target && S.fd < 0) {
				/* Our mapping first (the program never meets
				 * memory it has not mapped), then the helper,
				 * which holds the descriptor, grows the file
				 * (taking the lock); then we try again. */
				unlock();
				if (map_to_wait(want) || !S.grow || S.grow(want) ||
				    __atomic_load_n(&h->size, __ATOMIC_ACQUIRE) < want)
					return NULL;
				goto again;
			}
			if (!S.target && atomic_load(&h->target_mapped) < want) {
				/* The helper: the profiled process maps it
				 * first, the next time agent code runs there;
				 * the caller tries again later. */
				unlock();
				shm_want(want);
				return NULL;
			}
			if (grow_locked(want)) {
				unlock();
				return NULL;
			}
		}
		h->brk = off + bsize;
		t = (struct tag *)(S.base + off);
	}
	t->magic = BLOCK_MAGIC;
	t->cls = c;
	t->next_free = owner_now();
	h->used += bsize;
	unlock();
	void *p = t + 1;
	/* A block past the old break has never been written: the file's
	 * pages read as zeros until first touched, and touching them all
	 * here (a thread's ring is megabytes) would cost every process,
	 * however short, a page fault per page at its start. */
	if (reused && zeroed)
		memset(p, 0, bsize - sizeof(*t));
	return p;
}

void *shm_alloc(size_t n) { return alloc(n, 1); }

void *shm_alloc_dirty(size_t n) { return alloc(n, 0); }

/* Puts a block on its class's free list; returns its size. Lock held. */
static uint64_t push_free(struct tag *t)
{
	struct shm_header *h = H();
	t->magic = FREE_MAGIC;
	t->next_free = h->free[t->cls];
	h->free[t->cls] = (uint64_t)((uint8_t *)t - S.base);
	uint64_t bsize = (uint64_t)1 << (t->cls + MIN_SHIFT);
	h->used -= bsize;
	return bsize;
}

void shm_free(void *p)
{
	if (!p || !shm_contains(p, 1))
		return;
	struct tag *t = (struct tag *)p - 1;
	if (t->magic != BLOCK_MAGIC || t->cls >= (uint32_t)NCLASSES)
		return;
	if (lock_alloc())
		return; /* the block is lost, not the program's time */
	push_free(t);
	unlock();
}

void shm_set_owner(void *p, const void *owner)
{
	if (!p || !shm_contains(p, 1) || !shm_contains(owner, 1))
		return;
	struct tag *t = (struct tag *)p - 1;
	if (t->magic == BLOCK_MAGIC)
		t->next_free = (uint64_t)((const uint8_t *)owner - S.base);
}

/* The block after the bytes up to `pos` (its tag's offset), 0 past the
 * last: one of 64 bytes and more starts on the next 64-byte boundary,
 * one of 4 KiB and more on the next page (alloc), and the gap before it
 * was never written. */
static uint64_t next_block(uint64_t pos, uint64_t brk)
{
	uint64_t aligns[2] = { 64, 4096 };
	for (int i = 0; i < 2; i++) {
		uint64_t off = ((pos + sizeof(struct tag) + aligns[i] - 1) & ~(aligns[i] - 1)) - sizeof(struct tag);
		if (off + sizeof(struct tag) > brk)
			return 0;
		struct tag *t = (struct tag *)(S.base + off);
		if ((t->magic == BLOCK_MAGIC || t->magic == FREE_MAGIC) && t->cls < (uint32_t)NCLASSES &&
		    (i == 1 || t->cls + MIN_SHIFT < 12))
			return off;
	}
	return 0;
}

uint64_t shm_free_owned(const void *owner)
{
	if (!S.base || !shm_contains(owner, 1))
		return 0;
	struct shm_header *h = H();
	uint64_t me = (uint64_t)((const uint8_t *)owner - S.base), freed = 0;
	if (lock_alloc())
		return 0;
	uint64_t brk = h->brk, pos = FIRST_BLOCK;
	while (pos < brk) {
		uint64_t off = next_block(pos, brk);
		if (!off)
			break;
		struct tag *t = (struct tag *)(S.base + off);
		uint64_t bsize = (uint64_t)1 << (t->cls + MIN_SHIFT);
		if (t->magic == BLOCK_MAGIC && (t->next_free == me || off + sizeof(*t) == me))
			freed += push_free(t);
		pos = off + bsize;
	}
	unlock();
	return freed;
}

_Atomic uint32_t *shm_doorbell(void) { return S.base ? &H()->doorbell : NULL; }

void shm_set_tree(int32_t helper, uint64_t key)
{
	if (!S.base)
		return;
	atomic_store(&H()->tree_key, key);
	atomic_store(&H()->tree_helper, helper);
}

int32_t shm_tree(uint64_t *key)
{
	if (!S.base)
		return 0;
	*key = atomic_load(&H()->tree_key);
	return atomic_load(&H()->tree_helper);
}

int shm_full_map(void) { return S.base && H()->full; }

void shm_set_root(void *p) { H()->root = p ? (uint64_t)((uint8_t *)p - S.base) : 0; }

void *shm_root(void) { return S.base && H()->root ? S.base + H()->root : NULL; }

uint64_t shm_used(void) { return S.base ? H()->used : 0; }

uint64_t shm_mapped(void) { return S.base ? atomic_load(&H()->target_mapped) : 0; }
