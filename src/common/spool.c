/*
 * spool.c — see spool.h.
 */
#include "spool.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int spool_window_path(char *out, size_t n, const char *dir, uint64_t t_ns, pid_t pid, int tmp)
{
	int w = snprintf(out, n, tmp ? "%s/.w-%020" PRIu64 "-%d.tmp" : "%s/w-%020" PRIu64 "-%d.strata", dir, t_ns,
			 (int)pid);
	return w > 0 && (size_t)w < n ? 0 : -1;
}

int spool_window_parse(const char *name, uint64_t *t_ns, pid_t *pid)
{
	if (strncmp(name, "w-", 2) != 0 || strlen(name) < 2 + 20 + 2 + 7)
		return 0;
	char *end;
	errno = 0;
	unsigned long long t = strtoull(name + 2, &end, 10);
	if (errno || end != name + 22 || *end != '-')
		return 0;
	long p = strtol(end + 1, &end, 10);
	if (p <= 0 || strcmp(end, ".strata") != 0)
		return 0;
	*t_ns = t;
	*pid = (pid_t)p;
	return 1;
}

int spool_make(char *out, size_t n, const char *base, pid_t pid)
{
	int w = snprintf(out, n, "%s/send-%d-XXXXXX", base, (int)pid);
	if (w <= 0 || (size_t)w >= n) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return mkdtemp(out) ? 0 : -1;
}

static int lock_file(const char *dir, const char *name, int op)
{
	char p[1024];
	if (snprintf(p, sizeof(p), "%s/%s", dir, name) >= (int)sizeof(p))
		return -1;
	int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -1;
	if (flock(fd, op | LOCK_NB) != 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int spool_hold_writer(const char *dir) { return lock_file(dir, SPOOL_WRITERS, LOCK_SH); }

int spool_has_writers(const char *dir)
{
	int fd = lock_file(dir, SPOOL_WRITERS, LOCK_EX);
	if (fd < 0)
		return errno == EWOULDBLOCK;
	close(fd);
	return 0;
}

int spool_take_sender(const char *dir) { return lock_file(dir, SPOOL_SENDER, LOCK_EX); }

int spool_sender_alive(const char *dir)
{
	int fd = lock_file(dir, SPOOL_SENDER, LOCK_SH);
	if (fd < 0)
		return errno == EWOULDBLOCK;
	close(fd);
	return 0;
}

int spool_kv_get(const char *path, const char *key, char *out, size_t n)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	char line[8192];
	size_t kl = strlen(key);
	int found = -1;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (!strncmp(line, key, kl) && line[kl] == '=') {
			snprintf(out, n, "%s", line + kl + 1);
			found = 0;
		}
	}
	fclose(f);
	return found;
}
