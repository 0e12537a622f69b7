/*
 * ctlclient.c — see ctlclient.h.
 */
#include "ctlclient.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../common/ctlproto.h"

#include "builtin.h"

const char *ctl_howto(void)
{
	static char buf[4200];
	const char *d = agent_dir();
	snprintf(buf, sizeof(buf), "LD_PRELOAD=%s/libstrata-agent.so STRATA_AGENT=1", d ? d : "/usr/local/lib/strata");
	return buf;
}

/* XDG_RUNTIME_DIR from the process's environment at exec: what the agent
 * saw when it made its socket. Empty if unset or unreadable. */
static void target_xdg(pid_t pid, char *out, size_t n)
{
	out[0] = 0;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	static char env[1 << 16];
	ssize_t len = read(fd, env, sizeof(env) - 1);
	close(fd);
	if (len <= 0)
		return;
	env[len] = 0;
	for (ssize_t i = 0; i < len; i += (ssize_t)strlen(env + i) + 1)
		if (strncmp(env + i, "XDG_RUNTIME_DIR=", 16) == 0) {
			snprintf(out, n, "%s", env + i + 16);
			return;
		}
}

/* 1 if libstrata-agent.so is mapped in pid, 0 if not, -1 if unknown. */
static int agent_mapped(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	char line[4352];
	int found = 0;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, "/libstrata-agent.so") != NULL;
	fclose(f);
	return found;
}

int ctl_find(pid_t pid, char *out, size_t n, char *err, size_t errlen)
{
	char proc[64];
	struct stat st;
	snprintf(proc, sizeof(proc), "/proc/%d", (int)pid);
	if (pid <= 0 || stat(proc, &st) != 0) {
		snprintf(err, errlen, "no process %d", (int)pid);
		return -1;
	}
	uid_t uid = st.st_uid;
	char xdg[4096], dir[4352], cand[2][108];
	target_xdg(pid, xdg, sizeof(xdg));
	int nc = 0;
	if (ctl_sock_dir(dir, sizeof(dir), xdg, uid) == 0 && ctl_sock_path(cand[nc], sizeof(cand[nc]), dir, pid) == 0)
		nc++;
	/* The fallback, in case the environment could not be read. */
	if (ctl_sock_dir(dir, sizeof(dir), NULL, uid) == 0 && ctl_sock_path(cand[nc], sizeof(cand[nc]), dir, pid) == 0 &&
	    (nc == 0 || strcmp(cand[0], cand[nc]) != 0))
		nc++;
	int denied = 0;
	for (int i = 0; i < nc; i++) {
		if (lstat(cand[i], &st) == 0 && S_ISSOCK(st.st_mode)) {
			snprintf(out, n, "%s", cand[i]);
			return 0;
		}
		if (errno == EACCES)
			denied = 1;
	}
	if (denied || (uid != geteuid() && agent_mapped(pid) < 0)) {
		snprintf(err, errlen, "permission denied: process %d belongs to uid %u; only that user can control it",
			 (int)pid, (unsigned)uid);
		return -1;
	}
	int m = agent_mapped(pid);
	if (m == 1)
		snprintf(err, errlen,
			 "process %d has the strata agent loaded but no control channel: it is not a Python process, "
			 "or was started without STRATA_AGENT=1 or strata record",
			 (int)pid);
	else
		snprintf(err, errlen,
			 "process %d was not started with the strata agent%s; start it with: %s COMMAND "
			 "(or strata record --paused -- COMMAND)",
			 (int)pid, m < 0 ? " (it has no strata control channel)" : "", ctl_howto());
	return -1;
}

const char *ctl_value(const char *reply, const char *key, char *out, size_t n)
{
	if (!ctl_get(reply, key, out, n) && n)
		out[0] = 0;
	return out;
}

int ctl_call(pid_t pid, const char *req, int fd, char *reply, size_t n, int timeout_ms, char *err, size_t errlen)
{
	char path[108];
	if (ctl_find(pid, path, sizeof(path), err, errlen))
		return -1;
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	struct sockaddr_un sa;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int e = errno;
		close(s);
		if (e == ECONNREFUSED) {
			/* Nobody listens: the agent that made it is gone
			 * (killed, or the pid was reused). */
			unlink(path);
			snprintf(err, errlen,
				 "process %d has no running strata agent (removed its stale control socket %s); start it with: %s COMMAND",
				 (int)pid, path, ctl_howto());
		} else if (e == EACCES || e == EPERM) {
			snprintf(err, errlen, "permission denied: cannot connect to %s (process %d belongs to another user)", path,
				 (int)pid);
		} else {
			snprintf(err, errlen, "cannot connect to %s: %s", path, strerror(e));
		}
		return -1;
	}
	if (ctl_send(s, req, strlen(req), fd)) {
		snprintf(err, errlen, "cannot send to process %d: %s", (int)pid, strerror(errno));
		close(s);
		return -1;
	}
	struct pollfd pf = { s, POLLIN, 0 };
	int r;
	do
		r = poll(&pf, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	if (r <= 0) {
		snprintf(err, errlen, "process %d did not answer within %d ms", (int)pid, timeout_ms);
		close(s);
		return -1;
	}
	int rfd;
	long got = ctl_recv(s, reply, n, &rfd);
	int e = errno;
	close(s);
	if (rfd >= 0)
		close(rfd);
	if (got <= 0) {
		snprintf(err, errlen, "no answer from process %d%s%s", (int)pid, got < 0 ? ": " : " (it closed the connection)",
			 got < 0 ? strerror(e) : "");
		return -1;
	}
	if (strncmp(reply, "ok", 2) == 0)
		return 0;
	const char *m = strncmp(reply, "error: ", 7) == 0 ? reply + 7 : reply;
	snprintf(err, errlen, "process %d: %.*s", (int)pid, (int)strcspn(m, "\n"), m);
	return 1;
}
