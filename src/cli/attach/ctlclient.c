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

#include "common/ctlproto.h"

#include "cli/builtin.h"

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

/* The effective uid of process pid (the Uid: line of /proc/PID/status):
 * the one its agent names and owns its socket directory with. 0 and the
 * uid in *uid, or -1. */
static int target_uid(pid_t pid, uid_t *uid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	int rc = -1;
	unsigned ruid, euid;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Uid: %u %u", &ruid, &euid) == 2) {
			*uid = (uid_t)euid;
			rc = 0;
			break;
		}
	fclose(f);
	return rc;
}

int ctl_find(pid_t pid, char *out, size_t n, char *err, size_t errlen)
{
	struct stat st;
	uid_t uid;
	if (pid <= 0 || target_uid(pid, &uid) != 0) {
		snprintf(err, errlen, "no process %d", (int)pid);
		return -1;
	}
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
			 "process %d has no strata agent%s: load one with 'strata ctl %d load' (or strata record --pid %d), "
			 "or start the program with: %s COMMAND (or strata record --paused -- COMMAND)",
			 (int)pid, m < 0 ? " (it has no strata control channel)" : "", (int)pid, (int)pid, ctl_howto());
	return -1;
}

const char *ctl_value(const char *reply, const char *key, char *out, size_t n)
{
	if (!ctl_get(reply, key, out, n) && n)
		out[0] = 0;
	return out;
}

/*
 * Trust, before anything is sent. A request can carry a descriptor for a
 * file of ours, and a reply is believed, so whoever listens at the path
 * must be the target's agent and nobody else. Others could plant a
 * directory at /tmp/strata-UID before the agent makes it, or a socket in
 * a directory they can write; the agent refuses to use such a directory,
 * and so do we. The listener's credentials settle the rest: SO_PEERCRED
 * names the process that called listen(), and the agent does that in the
 * target process itself.
 *
 * `want` is the uid that must own everything: ours, or for root (who may
 * reach any user's process) the target's.
 */
#define REFUSE "refusing to talk to process %d through it; remove it and restart the target"

static int check_path(pid_t pid, const char *path, uid_t want, char *err, size_t errlen)
{
	char dir[108];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir) {
		snprintf(err, errlen, "%s: the control socket of process %d is not in a directory of its own", path,
			 (int)pid);
		return -1;
	}
	*slash = 0;
	struct stat st;
	if (lstat(dir, &st) != 0) {
		snprintf(err, errlen, "cannot check %s: %s", dir, strerror(errno));
		return -1;
	}
	if (S_ISLNK(st.st_mode)) {
		snprintf(err, errlen, "%s is a symbolic link, not the agent's directory: " REFUSE, dir, (int)pid);
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s is not a directory: " REFUSE, dir, (int)pid);
		return -1;
	}
	if (st.st_uid != want) {
		snprintf(err, errlen, "%s belongs to uid %u, not uid %u: " REFUSE, dir, (unsigned)st.st_uid,
			 (unsigned)want, (int)pid);
		return -1;
	}
	if (st.st_mode & 022) {
		snprintf(err, errlen, "%s is writable by %s (mode %04o): " REFUSE, dir,
			 (st.st_mode & 002) ? "others" : "its group", (unsigned)(st.st_mode & 07777), (int)pid);
		return -1;
	}
	if (lstat(path, &st) != 0) {
		snprintf(err, errlen, "cannot check %s: %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(err, errlen, "%s is not a socket: " REFUSE, path, (int)pid);
		return -1;
	}
	if (st.st_uid != want) {
		snprintf(err, errlen, "%s belongs to uid %u, not uid %u: " REFUSE, path, (unsigned)st.st_uid,
			 (unsigned)want, (int)pid);
		return -1;
	}
	return 0;
}

static int check_peer(int s, pid_t pid, const char *path, uid_t want, char *err, size_t errlen)
{
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0) {
		snprintf(err, errlen, "cannot tell who listens on %s (%s): refusing to talk to process %d through it",
			 path, strerror(errno), (int)pid);
		return -1;
	}
	if (cr.pid != pid || cr.uid != want) {
		snprintf(err, errlen,
			 "%s is served by process %d (uid %u), not process %d (uid %u): refusing to send it anything; "
			 "remove it and restart the target",
			 path, (int)cr.pid, (unsigned)cr.uid, (int)pid, (unsigned)want);
		return -1;
	}
	return 0;
}

int ctl_call(pid_t pid, const char *req, int fd, char *reply, size_t n, int timeout_ms, char *err, size_t errlen)
{
	char path[108];
	if (ctl_find(pid, path, sizeof(path), err, errlen))
		return -1;
	uid_t want = geteuid();
	if (want == 0 && target_uid(pid, &want) != 0) {
		snprintf(err, errlen, "no process %d", (int)pid);
		return -1;
	}
	if (check_path(pid, path, want, err, errlen))
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
	if (check_peer(s, pid, path, want, err, errlen)) {
		close(s);
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
