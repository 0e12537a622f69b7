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
 * cache directory; /tmp without a HOME). `perf inject` finds it by an
 * executable mapping of it made by the profiled process itself: the
 * profiled process creates it and maps it when it starts (jitdump-map.c),
 * and the helper, which discovers the images, appends the records here.
 * Timestamps are CLOCK_MONOTONIC, which `perf record -k 1` also uses.
 *
 * Runs in the helper thread that finds an image (the listener); a mutex
 * orders writers.
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

#include "shm/agent.h"
#include "agentd.h"
#include "jit.h"
#include "shm/jitdump.h"
#include "perfread.h"
#include "remote.h"
#include "common/jitdump-enc.h"
#include "common/fdio.h"
#include "target.h"


struct jitdump_state {
	pthread_mutex_t lock;
	pid_t pid;           /* the process the files belong to */
	int dump_fd, map_fd;
	uint64_t code_index;
	int failed;
	char dump_path[PATH_MAX];
};

static void jitdump_init(struct jitdump_state *s)
{
	pthread_mutex_init(&s->lock, NULL);
	s->dump_fd = s->map_fd = -1;
}

TARGET_STATE(struct jitdump_state, jitdump, jitdump_init)
#define J (*jitdump_of(agentd_target))

/* Opens the target's files on first use: the jitdump it created, and the
 * perf map. */
static int open_files(void)
{
	pid_t pid = agent.pid;
	if (J.pid == pid)
		return J.failed ? -1 : 0;
	J.pid = pid;
	J.failed = 1;
	J.code_index = 0;
	if (jitdump_path(J.dump_path, sizeof(J.dump_path), pid)) {
		agent_log("--perf-map: no directory for the jitdump of process %d", (int)pid);
		return -1;
	}
	J.dump_fd = open(J.dump_path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
	if (J.dump_fd < 0) {
		agent_log("--perf-map: cannot open %s: %s", J.dump_path, strerror(errno));
		return -1;
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
	return remote_read(dst, addr, n);
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
		/* The records name a thread of the target: its main one. */
		uint32_t tid = (uint32_t)J.pid;
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

void jitdump_start(void)
{
	if (jit_add_listener(on_image))
		agent_log("--perf-map: too many JIT listeners");
}
