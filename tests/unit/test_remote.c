/*
 * test_remote.c — the helper's reads of a target's memory (remote.c)
 * against a real other process: a fork child that changes its memory when
 * told to. Checks the page cache's rules: a copy serves only reads of
 * samples taken before it was read (remote_cache_from), reads across a
 * page boundary, a read the cache cannot serve (the page after a
 * mapping's end) falls back to a direct one, and a new target (the
 * helper's remote_init after an exec) drops every copy. And the loaded
 * objects' fingerprint (remote_objects_gen) on a link map built in the
 * child: a load (appended) is seen at once, an unload in the middle of
 * the list by the full walk at once and by the per-pass check within
 * its 100 ms.
 */
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include "test.h"
#include "../../src/agentd/remote.h"
#include "../../src/agentd/target.h"
#include "../../src/shm/agent.h"

#include <stdarg.h>

/* What remote.c and shm/util.c take from the helper. */
static struct agent_state none;
struct agent_state *agentp = &none;

void agent_log(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

#define PAGE 4096

/* The child's memory: `pages` mapped pages, then one unmapped. */
static char *area;
static int to_child[2], from_child[2];
static pid_t child;

/* Tells the child to write `v` at offset `off` of the area (a byte, or
 * with child_write64 a word); waits for it. */
static void child_cmd(size_t off, uint64_t v, uint64_t width)
{
	uint64_t cmd[3] = { off, v, width };
	CHECK(write(to_child[1], cmd, sizeof(cmd)) == (ssize_t)sizeof(cmd));
	char ok;
	CHECK(read(from_child[0], &ok, 1) == 1);
}

static void child_write(size_t off, char v) { child_cmd(off, (uint64_t)(unsigned char)v, 1); }
static void child_write64(size_t off, uint64_t v) { child_cmd(off, v, 8); }

/* The child as a new target: a /proc/PID/mem of its own, as the helper
 * gets one for each image. */
static void open_target(void)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)child);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	CHECK(fd >= 0);
	remote_init(child, fd);
}

static void start_child(void)
{
	area = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(area != MAP_FAILED);
	munmap(area + 2 * PAGE, PAGE); /* two pages, then a hole */
	for (int i = 0; i < 2 * PAGE; i++)
		area[i] = (char)('a' + i % 26);
	CHECK(pipe(to_child) == 0 && pipe(from_child) == 0);
	child = fork();
	if (child == 0) {
		close(to_child[1]);
		close(from_child[0]);
		uint64_t cmd[3];
		while (read(to_child[0], cmd, sizeof(cmd)) == (ssize_t)sizeof(cmd)) {
			if (cmd[2] == 8)
				memcpy(area + cmd[0], &cmd[1], 8);
			else
				area[cmd[0]] = (char)cmd[1];
			if (write(from_child[1], "k", 1) != 1)
				break;
		}
		_exit(0);
	}
	close(to_child[0]);
	close(from_child[1]);
	open_target();
}

static void test_direct(void)
{
	char b[8] = { 0 };
	CHECK(remote_read(b, (uint64_t)(uintptr_t)area, 3) == 0);
	CHECK(!memcmp(b, "abc", 3));
	child_write(0, 'X');
	CHECK(remote_read(b, (uint64_t)(uintptr_t)area, 1) == 0);
	CHECK_EQ(b[0], 'X');
	CHECK(remote_read(b, (uint64_t)(uintptr_t)(area + 2 * PAGE), 1) == -1);
}

static void test_cache_serves_older_samples_only(void)
{
	uint64_t at = (uint64_t)(uintptr_t)(area + 100);
	char b = 0;
	uint64_t t0 = mono_ns();
	remote_cache_from(t0);
	CHECK(remote_read(&b, at, 1) == 0);
	CHECK_EQ(b, area[100]);
	child_write(100, 'Q');
	/* A sample taken before the copy: the copy serves it. */
	CHECK(remote_read(&b, at, 1) == 0);
	CHECK_EQ(b, area[100]);
	/* A sample taken after it (the change came before): read again. */
	remote_cache_from(mono_ns());
	CHECK(remote_read(&b, at, 1) == 0);
	CHECK_EQ(b, 'Q');
	/* Off: every read is direct. */
	remote_cache_from(0);
	child_write(100, 'R');
	CHECK(remote_read(&b, at, 1) == 0);
	CHECK_EQ(b, 'R');
}

static void test_cache_across_pages_and_at_the_end(void)
{
	remote_cache_from(mono_ns());
	char b[16];
	/* Across the boundary between the two pages. */
	CHECK(remote_read(b, (uint64_t)(uintptr_t)(area + PAGE - 4), 8) == 0);
	CHECK(!memcmp(b, area + PAGE - 4, 8));
	/* The last bytes before the hole: the second page is whole, served. */
	CHECK(remote_read(b, (uint64_t)(uintptr_t)(area + 2 * PAGE - 8), 8) == 0);
	CHECK(!memcmp(b, area + 2 * PAGE - 8, 8));
	/* Into the hole: unreadable, cached or not. */
	CHECK(remote_read(b, (uint64_t)(uintptr_t)(area + 2 * PAGE - 4), 8) == -1);
	CHECK(remote_read(b, (uint64_t)(uintptr_t)(area + 2 * PAGE), 1) == -1);
	/* Larger than a page: direct. */
	static char big[PAGE + 16];
	CHECK(remote_read(big, (uint64_t)(uintptr_t)area + 8, PAGE + 16) == 0);
	remote_cache_from(0);
}

static void test_new_target_drops_the_copies(void)
{
	uint64_t at = (uint64_t)(uintptr_t)(area + 200);
	char b = 0;
	uint64_t t0 = mono_ns();
	remote_cache_from(t0);
	CHECK(remote_read(&b, at, 1) == 0);
	child_write(200, 'Z');
	open_target();
	/* Same sample time, but the copies were of the previous target. */
	CHECK(remote_read(&b, at, 1) == 0);
	CHECK_EQ(b, 'Z');
	remote_cache_from(0);
}

/* Two targets read in turn by one thread (a fork child and this process:
 * the same addresses, different bytes): each read is of its own target's
 * memory, never a copy cached from the other's. */
static void test_targets_keep_their_own_copies(void)
{
	struct target *was = agentd_target, *a = target_new(child), *b = target_new(getpid());
	CHECK(a != NULL && b != NULL);
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)child);
	int fda = open(path, O_RDWR | O_CLOEXEC), fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	CHECK(fda >= 0 && fd >= 0);
	agentd_target = a;
	remote_init(child, fda);
	agentd_target = b;
	remote_init(getpid(), fd);
	child_write(300, 'C');
	area[300] = 'P';
	uint64_t at = (uint64_t)(uintptr_t)(area + 300);
	char c = 0;
	remote_cache_from(mono_ns());
	for (int round = 0; round < 2; round++) {
		agentd_target = a;
		CHECK(remote_read(&c, at, 1) == 0);
		CHECK_EQ(c, 'C');
		agentd_target = b;
		CHECK(remote_read(&c, at, 1) == 0);
		CHECK_EQ(c, 'P');
	}
	remote_cache_from(0);
	agentd_target = was;
	close(fda);
	close(fd);
	target_free(a);
	target_free(b);
}

/* A link map in the area's second page: r_debug at LM, then entries of
 * glibc's public head (l_addr, l_name, l_ld, l_next, l_prev) every 64
 * bytes. */
#define LM (PAGE + 0)
#define ENT(i) (PAGE + 64 + 64 * (size_t)(i))
static uint64_t at_area(size_t off) { return (uint64_t)(uintptr_t)(area + off); }

static void link_entry(size_t i, uint64_t next, uint64_t prev)
{
	child_write64(ENT(i) + 0, 0x1000 * (i + 1));  /* l_addr */
	child_write64(ENT(i) + 16, 0x100 * (i + 1));  /* l_ld */
	child_write64(ENT(i) + 24, next);
	child_write64(ENT(i) + 32, prev);
}

static void test_objects_gen(void)
{
	/* version 1, then r_map: three entries. */
	child_write64(LM, 1);
	child_write64(LM + 8, at_area(ENT(0)));
	link_entry(0, at_area(ENT(1)), 0);
	link_entry(1, at_area(ENT(2)), at_area(ENT(0)));
	link_entry(2, 0, at_area(ENT(1)));
	agent.r_debug = at_area(LM);
	uint64_t g0 = remote_objects_gen();
	CHECK(g0 != 0);
	CHECK_U64(remote_objects_gen(), g0);
	CHECK_U64(remote_objects_gen_full(), g0);
	/* A load: a fourth entry appended. */
	link_entry(3, 0, at_area(ENT(2)));
	child_write64(ENT(2) + 24, at_area(ENT(3)));
	uint64_t g1 = remote_objects_gen();
	CHECK(g1 != 0 && g1 != g0);
	CHECK_U64(remote_objects_gen_full(), g1);
	/* An unload in the middle (entry 1): the full walk sees it at once;
	 * the per-pass check, whose ends did not change, within 100 ms. */
	child_write64(ENT(0) + 24, at_area(ENT(2)));
	child_write64(ENT(2) + 32, at_area(ENT(0)));
	uint64_t g2 = remote_objects_gen_full();
	CHECK(g2 != 0 && g2 != g1);
	uint64_t until = mono_ns() + 2000000000ull, seen = 0;
	while (mono_ns() < until && (seen = remote_objects_gen()) != g2)
		usleep(5000);
	CHECK_U64(seen, g2);
	/* The last entry unloaded: seen at once. */
	child_write64(ENT(2) + 24, 0);
	uint64_t g3 = remote_objects_gen();
	CHECK(g3 != 0 && g3 != g2);
	CHECK_U64(g3, remote_objects_gen_full());
	/* Unreadable: 0. */
	child_write64(LM + 8, at_area(2 * PAGE));
	CHECK_U64(remote_objects_gen(), 0);
	CHECK_U64(remote_objects_gen_full(), 0);
	agent.r_debug = 0;
}

int main(void)
{
	agentd_target = target_new(getpid());
	CHECK(agentd_target != NULL);
	start_child();
	RUN(test_direct);
	RUN(test_cache_serves_older_samples_only);
	RUN(test_cache_across_pages_and_at_the_end);
	RUN(test_new_target_drops_the_copies);
	RUN(test_targets_keep_their_own_copies);
	RUN(test_objects_gen);
	close(to_child[1]);
	int st;
	waitpid(child, &st, 0);
	return test_summary();
}
