/*
 * jitdump-map.c — where a process's jitdump lives, and (in the profiled
 * process) creating it and mapping it executable: `perf inject --jit`
 * finds a jitdump only through such a mapping recorded for the pid in its
 * name, so the profiled process itself must make it. The helper then
 * appends the records (jitdump.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "jitdump.h"
#include "common/fdio.h"
#include "common/jitdump-enc.h"

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

int jitdump_path(char *out, size_t n, pid_t pid)
{
	char dir[PATH_MAX - 32]; /* room for "/jit-PID.dump" */
	const char *d = getenv("STRATA_JITDUMP_DIR");
	const char *home = getenv("HOME");
	if (d && *d)
		snprintf(dir, sizeof(dir), "%s", d);
	else if (home && *home)
		snprintf(dir, sizeof(dir), "%s/.debug/jit", home);
	else
		snprintf(dir, sizeof(dir), "/tmp");
	if (mkdirs(dir))
		return -1;
	snprintf(out, n, "%s/jit-%d.dump", dir, (int)pid);
	return 0;
}

void jitdump_map(void)
{
	char path[PATH_MAX];
	if (jitdump_path(path, sizeof(path), getpid())) {
		agent_log("--perf-map: cannot create the jitdump directory: %s", strerror(errno));
		return;
	}
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		agent_log("--perf-map: cannot create %s: %s", path, strerror(errno));
		return;
	}
	struct wbuf b;
	wbuf_init(&b);
	jd_header(&b, (uint32_t)getpid(), mono_ns());
	int bad = b.oom || fd_write_all(fd, b.data, b.len);
	wbuf_free(&b);
	if (bad) {
		agent_log("--perf-map: cannot write %s", path);
		close(fd);
		return;
	}
	/* Kept for the life of the process: perf records this mapping. */
	void *m = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED)
		agent_log("--perf-map: cannot map %s: %s; perf inject will not find it", path, strerror(errno));
	close(fd);
}
