/*
 * test_shm.c — the shared region (shm.c) as a process tree uses it: the
 * blocks of an ended process go back and no one else's do
 * (shm_free_owned), and a fork child takes a descriptor for the region
 * (shm_adopt_fd) while another process of the tree grows it. That last
 * one lost fork children to helpers of their own under a pool's start:
 * a file caught between its truncation and the size published after it
 * was taken for another file.
 */
#include <errno.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"
#include "../../src/shm/agent.h"
#include "../../src/shm/shm.h"

/* What shm.c and shm/util.c take from the agent: the calling process's
 * state (a block's owner when it is in the region). */
static struct agent_state outside;
struct agent_state *agentp = &outside;

void agent_log(const char *fmt, ...)
{
	(void)fmt;
}

/* Mapped whole (no RLIMIT_AS here), as a tree's region is; pages cost
 * only when written. */
#define MAX (16ull << 30)

static int holds(const void *p, size_t n, int v)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < n; i++)
		if (c[i] != (unsigned char)v)
			return 0;
	return 1;
}

/* Two processes' states in one region, each with blocks of several
 * classes (a thread's slot, a ring, a table): freeing the first's gives
 * back its blocks and its state, leaves the second's as they were, and
 * the next allocations reuse what went back instead of growing. */
static void test_free_owned(void)
{
	struct agent_state *a = shm_alloc(4096), *b = shm_alloc(4096);
	CHECK(a != NULL && b != NULL);
	if (!a || !b)
		return;
	shm_set_owner(a, a);
	shm_set_owner(b, b);
	size_t sizes[] = { 100, 5000, 70000, 1u << 20 };
	void *pa[4], *pb[4];
	for (int i = 0; i < 4; i++) {
		agentp = a;
		pa[i] = shm_alloc(sizes[i]);
		agentp = b;
		pb[i] = shm_alloc(sizes[i]);
		CHECK(pa[i] && pb[i]);
		if (!pa[i] || !pb[i])
			return;
		memset(pa[i], 0xa0 + i, sizes[i]);
		memset(pb[i], 0xb0 + i, sizes[i]);
	}
	agentp = &outside;
	uint64_t used = shm_used();
	uint64_t freed = shm_free_owned(a);
	/* Each block is the power of two above its size and tag. */
	uint64_t want = 8192;
	for (int i = 0; i < 4; i++) {
		uint64_t c = 64;
		while (c < sizes[i] + 16)
			c <<= 1;
		want += c;
	}
	CHECK_U64(freed, want);
	CHECK_U64(shm_used(), used - want);
	for (int i = 0; i < 4; i++)
		CHECK(holds(pb[i], sizes[i], 0xb0 + i));
	/* Nothing of a's is left to free. */
	CHECK_U64(shm_free_owned(a), 0);
	/* The same sizes again come from what went back. */
	agentp = b;
	for (int i = 3; i >= 0; i--) {
		void *p = shm_alloc(sizes[i]);
		CHECK(p == pa[i]);
		CHECK(p && holds(p, sizes[i], 0));
	}
	agentp = &outside;
	CHECK_U64(shm_free_owned(b), used - 8192);
	CHECK_U64(shm_used(), 0);
}

/* A descriptor of something else is refused: a pipe, a file smaller
 * than the region. */
static void test_adopt_refuses(void)
{
	int keep = dup(shm_fd());
	shm_close_fd(NULL);
	int p[2];
	CHECK_EQ(pipe(p), 0);
	CHECK_EQ(shm_adopt_fd(p[0]), -1);
	close(p[0]);
	close(p[1]);
	int small = (int)syscall(SYS_memfd_create, "small", 1u);
	CHECK(small >= 0);
	CHECK_EQ(ftruncate(small, 4096), 0);
	CHECK_EQ(shm_adopt_fd(small), -1);
	close(small);
	CHECK_EQ(shm_adopt_fd(keep), 0);
	CHECK_EQ(shm_fd(), keep);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Another process of the tree grows the file step by step (8192 steps
 * to the largest size); meanwhile this process takes a descriptor for
 * the region again and again, as a joining fork child does from its
 * helper's. Every take succeeds. */
static void test_adopt_while_growing(void)
{
	int spare = dup(shm_fd());
	CHECK(spare >= 0);
	_Atomic int *stop = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(stop != MAP_FAILED);
	if (spare < 0 || stop == MAP_FAILED)
		return;
	atomic_store(stop, 0);
	pid_t kid = fork();
	if (kid == 0) {
		uint64_t size = 4u << 20;
		while (!atomic_load(stop)) {
			size += 2u << 20;
			if (size > MAX)
				_exit(0);
			if (shm_grow(size))
				_exit(1);
		}
		_exit(0);
	}
	CHECK(kid > 0);
	shm_close_fd(NULL);
	int ok = 0, refused = 0;
	int64_t end = now_ms() + 2000;
	while (now_ms() < end) {
		int status;
		if (waitpid(kid, &status, WNOHANG) == kid) {
			CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
			kid = -1;
			break;
		}
		int fd = dup(spare);
		if (shm_adopt_fd(fd) == 0) {
			ok++;
			shm_close_fd(NULL);
		} else {
			refused++;
			close(fd);
		}
	}
	atomic_store(stop, 1);
	if (kid > 0)
		waitpid(kid, NULL, 0);
	CHECK(ok > 100);
	CHECK_EQ(refused, 0);
	if (refused)
		fprintf(stderr, "    %d of %d takes refused\n", refused, ok + refused);
	CHECK_EQ(shm_adopt_fd(spare), 0);
	munmap((void *)stop, 4096);
}

int main(void)
{
	if (shm_create(MAX)) {
		fprintf(stderr, "cannot make a region: %s\n", strerror(errno));
		return 1;
	}
	RUN(test_free_owned);
	RUN(test_adopt_refuses);
	RUN(test_adopt_while_growing);
	shm_destroy();
	return test_summary();
}
