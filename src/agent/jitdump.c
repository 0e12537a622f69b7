/*
 * jitdump.c — `strata record --perf-map`: for every JIT image the agent
 * discovers (jit.h), one line per function in /tmp/perf-PID.map (what
 * `perf report` reads for code in anonymous memory) and, in a jitdump file
 * jit-PID.dump, a JIT_CODE_LOAD record per function preceded by its
 * JIT_CODE_DEBUG_INFO line table (from the image's .debug_line, present
 * when NUMBA_DEBUGINFO=1): what `perf inject --jit` turns into per-function
 * ELF files with lines, so that `perf report --sort sym,srcline` shows
 * Numba functions and their Python lines.
 *
 * The jitdump goes to $STRATA_JITDUMP_DIR, else ~/.debug/jit (perf's own
 * cache directory; /tmp without a HOME). The file is mapped PROT_EXEC once:
 * that mmap, recorded by `perf record`, is how `perf inject` finds it.
 * Timestamps are CLOCK_MONOTONIC, which `perf record -k 1` also uses.
 *
 * Runs in the thread that registers an image (the listener), never in the
 * signal handler; a mutex orders writers. A fork child writes files of
 * its own pid from its first new image on.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"
#include "jit.h"
#include "jitdump.h"
#include "perfread.h"
#include "../common/jitdump-enc.h"
#include "../common/fdio.h"

/* JIT discovery (jit.c) may not be part of this build. */
#pragma weak jit_add_listener

static struct {
	pthread_mutex_t lock;
	pid_t pid;           /* the process the files belong to */
	int dump_fd, map_fd;
	void *mapping;
	uint64_t code_index;
	int failed;
	char dump_path[PATH_MAX];
} J = { .lock = PTHREAD_MUTEX_INITIALIZER, .dump_fd = -1, .map_fd = -1 };

static int mkdirs(char *path)
{
	for (char *s = path + 1; *s; s++)
		if (*s == '/') {
			*s = 0;
			int r = mkdir(path, 0700);
			*s = '/';
			if (r && errno != EEXIST)
				return -1;
		}
	return mkdir(path, 0700) && errno != EEXIST ? -1 : 0;
}

static void close_files(void)
{
	if (J.mapping)
		munmap(J.mapping, (size_t)sysconf(_SC_PAGESIZE));
	J.mapping = NULL;
	if (J.dump_fd >= 0)
		close(J.dump_fd);
	if (J.map_fd >= 0)
		close(J.map_fd);
	J.dump_fd = J.map_fd = -1;
}

/* Opens this process's files on first use (and again in a fork child). */
static int open_files(void)
{
	pid_t pid = getpid();
	if (J.pid == pid)
		return J.failed ? -1 : 0;
	if (J.pid) {
		/* A fork child: the descriptors are the parent's files. */
		close_files();
	}
	J.pid = pid;
	J.failed = 1;
	J.code_index = 0;
	char dir[PATH_MAX - 32]; /* room for "/jit-PID.dump" */
	const char *d = getenv("STRATA_JITDUMP_DIR");
	const char *home = getenv("HOME");
	if (d && *d)
		snprintf(dir, sizeof(dir), "%s", d);
	else if (home && *home)
		snprintf(dir, sizeof(dir), "%s/.debug/jit", home);
	else
		snprintf(dir, sizeof(dir), "/tmp");
	if (mkdirs(dir)) {
		agent_log("--perf-map: cannot create %s: %s", dir, strerror(errno));
		return -1;
	}
	snprintf(J.dump_path, sizeof(J.dump_path), "%s/jit-%d.dump", dir, (int)pid);
	J.dump_fd = open(J.dump_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (J.dump_fd < 0) {
		agent_log("--perf-map: cannot create %s: %s", J.dump_path, strerror(errno));
		return -1;
	}
	struct wbuf b;
	wbuf_init(&b);
	jd_header(&b, (uint32_t)pid, mono_ns());
	int bad = b.oom || fd_write_all(J.dump_fd, b.data, b.len);
	wbuf_free(&b);
	if (bad) {
		agent_log("--perf-map: cannot write %s", J.dump_path);
		close_files();
		return -1;
	}
	/* perf finds the dump by this executable mapping of it. */
	J.mapping = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_EXEC, MAP_PRIVATE, J.dump_fd, 0);
	if (J.mapping == MAP_FAILED) {
		J.mapping = NULL;
		agent_log("--perf-map: cannot map %s: %s; perf inject will not find it", J.dump_path, strerror(errno));
	}
	char map[64];
	snprintf(map, sizeof(map), "/tmp/perf-%d.map", (int)pid);
	J.map_fd = open(map, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (J.map_fd < 0)
		agent_log("--perf-map: cannot open %s: %s", map, strerror(errno));
	J.failed = 0;
	return 0;
}

static int read_code(void *ctx, uint64_t addr, void *dst, size_t n)
{
	(void)ctx;
	return agent_safe_read(dst, addr, n);
}

static void map_line(void *ctx, const char *name, uint64_t addr, uint64_t size)
{
	(void)ctx;
	if (J.map_fd < 0)
		return;
	char line[1200];
	int n = snprintf(line, sizeof(line), "%llx %llx %.1024s\n", (unsigned long long)addr,
			 (unsigned long long)size, name);
	if (n <= 0 || n >= (int)sizeof(line))
		return;
	perfread_note_own(addr);
	/* One write per line: O_APPEND keeps lines whole next to CPython's. */
	if (fd_write_all(J.map_fd, line, (size_t)n))
		agent_log("--perf-map: writing /tmp/perf-%d.map failed", (int)J.pid);
}

static void on_image(const struct jit_image *img, int registered)
{
	/* perf has no record for code going away: an unregistered image
	 * keeps its entries (its address range may be reused; perf then
	 * sees the newer load). */
	if (!registered || !img || !img->elf || !img->size)
		return;
	pthread_mutex_lock(&J.lock);
	if (open_files() == 0) {
		struct wbuf b;
		wbuf_init(&b);
		struct jd_image_stats st;
		uint32_t tid = (uint32_t)syscall(SYS_gettid);
		if (jd_image(&b, img->elf, img->size, (uint32_t)J.pid, tid, mono_ns(), &J.code_index, read_code, NULL,
			     map_line, NULL, &st) == 0 && !b.oom && b.len) {
			if (fd_write_all(J.dump_fd, b.data, b.len))
				agent_log("--perf-map: writing %s failed: %s", J.dump_path, strerror(errno));
		}
		if (st.lines_error)
			agent_log("--perf-map: JIT image %llu has a malformed .debug_line; its lines are left out",
				  (unsigned long long)img->id);
		wbuf_free(&b);
	}
	pthread_mutex_unlock(&J.lock);
}

int jitdump_start(void)
{
	if (!jit_add_listener) {
		agent_log("--perf-map: JIT discovery is not available in this build; "
			  "no perf map or jitdump is written for JIT code");
		return -1;
	}
	if (jit_add_listener(on_image)) {
		agent_log("--perf-map: too many JIT listeners");
		return -1;
	}
	return 0;
}
