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

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define SHM_MAGIC 0x53545241544d454dull /* "STRATMEM" */
#define BLOCK_MAGIC 0x626c6b21u /* "blk!" */
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
};

struct tag {
	uint32_t magic;
	uint32_t cls;
	uint64_t next_free;          /* while free */
};

static struct {
	int fd;
	uint8_t *base;
	uint64_t max;
	int (*grow)(uint64_t want); /* without fd: the helper grows the file */
} S = { .fd = -1 };

static struct shm_header *H(void) { return (struct shm_header *)S.base; }

static int memfd(void)
{
	int fd = (int)syscall(SYS_memfd_create, "strata-agent", 1u /* MFD_CLOEXEC */);
	if (fd < 0)
		return -1;
	/* Out of the low numbers a program may close or dup2 onto. */
	int hi = fcntl(fd, F_DUPFD_CLOEXEC, 512);
	if (hi >= 0) {
		close(fd);
		fd = hi;
	}
	return fd;
}

static int init_header(uint64_t max)
{
	if (ftruncate(S.fd, GROW_STEP))
		return -1;
	struct shm_header *h = H();
	memset(h, 0, sizeof(*h));
	h->magic = SHM_MAGIC;
	h->max = max;
	h->size = GROW_STEP;
	h->brk = (sizeof(*h) + 63) & ~63ull;
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&h->lock, &a);
	pthread_mutexattr_destroy(&a);
	return 0;
}

/* A free range of `max` bytes far from where the kernel puts anything by
 * default (the executable, the heap, libraries, stacks), so that a freshly
 * started helper finds it free too. */
static void *map_somewhere(int fd, uint64_t max)
{
	for (int tries = 0; tries < 64; tries++) {
		uint64_t r = 0;
		if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
			r = (uint64_t)getpid() * 0x9E3779B97F4A7C15ull + (uint64_t)tries * 0x1234567ull;
		/* 32 TiB .. 80 TiB, 1 GiB aligned. */
		uint64_t addr = 0x200000000000ull + (r % 0x3000ull) * (1ull << 30);
		void *p = mmap((void *)(uintptr_t)addr, max, PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_NORESERVE | MAP_FIXED_NOREPLACE, fd, 0);
		if (p == MAP_FAILED)
			continue;
		if ((uint64_t)(uintptr_t)p != addr) {
			/* A kernel without MAP_FIXED_NOREPLACE treats it as a hint. */
			munmap(p, max);
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
	S.base = map_somewhere(S.fd, max);
	if (!S.base || init_header(max)) {
		int e = errno;
		if (S.base)
			munmap(S.base, max);
		close(S.fd);
		S.fd = -1;
		S.base = NULL;
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
	 * when the address is unmapped. */
	void *p = mmap(S.base, S.max, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE | MAP_FIXED, fd, 0);
	if (p == MAP_FAILED) {
		close(fd);
		return -1;
	}
	/* The parent held no descriptor for its region once its helper ran
	 * (a fork before that, from the agent's own start, cannot happen). */
	S.fd = fd;
	S.grow = NULL;
	return init_header(S.max);
}

int shm_attach(int fd, uint64_t addr, uint64_t max)
{
	void *p = mmap((void *)(uintptr_t)addr, max, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_NORESERVE | MAP_FIXED_NOREPLACE, fd, 0);
	if (p == MAP_FAILED)
		return -1;
	if ((uint64_t)(uintptr_t)p != addr) {
		munmap(p, max);
		errno = EEXIST;
		return -1;
	}
	S.fd = fd;
	S.base = p;
	S.max = max;
	if (H()->magic != SHM_MAGIC || H()->max != max) {
		munmap(p, max);
		S.base = NULL;
		errno = EINVAL;
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

int shm_grow(uint64_t want)
{
	if (!S.base || S.fd < 0)
		return -1;
	want = (want + GROW_STEP - 1) & ~(uint64_t)(GROW_STEP - 1);
	if (want > S.max)
		want = S.max;
	int rc = 0;
	lock();
	if (want > H()->size) {
		if (ftruncate(S.fd, (off_t)want))
			rc = -1;
		else
			H()->size = want;
	}
	unlock();
	return rc;
}

int shm_adopt_fd(int fd)
{
	struct stat st;
	if (S.fd >= 0 || !S.base || fstat(fd, &st) || (uint64_t)st.st_size != H()->size)
		return -1;
	S.fd = fd;
	return 0;
}

int shm_fd(void) { return S.fd; }
uint64_t shm_addr(void) { return (uint64_t)(uintptr_t)S.base; }
uint64_t shm_max(void) { return S.max; }

int shm_contains(const void *p, size_t n)
{
	uint64_t a = (uint64_t)(uintptr_t)p;
	return S.base && a >= shm_addr() && a - shm_addr() <= S.max && n <= S.max - (a - shm_addr());
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

static unsigned class_of(size_t n)
{
	unsigned c = 0;
	while (c < NCLASSES - 1 && ((uint64_t)1 << (c + MIN_SHIFT)) < n + sizeof(struct tag))
		c++;
	return c;
}

void *shm_alloc(size_t n)
{
	if (!S.base || n > S.max)
		return NULL;
	unsigned c = class_of(n);
	uint64_t bsize = (uint64_t)1 << (c + MIN_SHIFT);
	if (bsize < n + sizeof(struct tag))
		return NULL;
	struct shm_header *h = H();
again:
	lock();
	uint64_t off = h->free[c];
	struct tag *t;
	if (off) {
		t = (struct tag *)(S.base + off);
		h->free[c] = t->next_free;
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
			uint64_t want = (off + bsize + GROW_STEP - 1) & ~(uint64_t)(GROW_STEP - 1);
			if (want > S.max)
				want = S.max;
			if (S.fd < 0) {
				/* The helper holds the descriptor: it grows the
				 * file (taking the lock), then we try again. */
				unlock();
				if (!S.grow || S.grow(want) || h->size < want)
					return NULL;
				goto again;
			}
			if (ftruncate(S.fd, (off_t)want)) {
				unlock();
				return NULL;
			}
			h->size = want;
		}
		h->brk = off + bsize;
		t = (struct tag *)(S.base + off);
	}
	t->magic = BLOCK_MAGIC;
	t->cls = c;
	t->next_free = 0;
	h->used += bsize;
	unlock();
	void *p = t + 1;
	memset(p, 0, bsize - sizeof(*t));
	return p;
}

void shm_free(void *p)
{
	if (!p || !shm_contains(p, 1))
		return;
	struct tag *t = (struct tag *)p - 1;
	if (t->magic != BLOCK_MAGIC || t->cls >= (uint32_t)NCLASSES)
		return;
	struct shm_header *h = H();
	lock();
	t->magic = 0;
	t->next_free = h->free[t->cls];
	h->free[t->cls] = (uint64_t)((uint8_t *)t - S.base);
	h->used -= (uint64_t)1 << (t->cls + MIN_SHIFT);
	unlock();
}

void shm_set_root(void *p) { H()->root = p ? (uint64_t)((uint8_t *)p - S.base) : 0; }

void *shm_root(void) { return S.base && H()->root ? S.base + H()->root : NULL; }

uint64_t shm_used(void) { return S.base ? H()->used : 0; }
