/*
 * ctlsock.c — the profiled process's control socket (docs/control.md).
 *
 * The profiled process itself binds and listens on
 * $XDG_RUNTIME_DIR/strata/PID.sock (or /tmp/strata-UID/PID.sock), so that
 * a client's SO_PEERCRED names the process it asked for; the helper
 * inherits the listening socket and serves it (control.c). The same
 * commands are open to code in the process (the Python module) through
 * strata_agent_command(), which connects to that socket like any client.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "shm/agent.h"
#include "ctlsock.h"
#include "common/ctlproto.h"

static struct {
	int lfd;
	char dir[256];
	char path[108];
} C = { .lfd = -1 };

int ctlsock_open(char *err, size_t errlen)
{
	if (getenv("STRATA_NO_CONTROL"))
		return -1;
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	if (ctl_sock_dir(C.dir, sizeof(C.dir), xdg, geteuid()) ||
	    ctl_sock_path(C.path, sizeof(C.path), C.dir, getpid())) {
		snprintf(err, errlen, "control socket path too long");
		C.path[0] = 0;
		return -1;
	}
	if (ctl_prepare_dir(C.dir)) {
		snprintf(err, errlen, "%s: %s", C.dir, strerror(errno));
		C.path[0] = 0;
		return -1;
	}
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		C.path[0] = 0;
		return -1;
	}
	/* Bound and listening under a name of its own, then renamed over
	 * PID.sock (replacing a socket of an earlier process with this pid,
	 * or of this process before an exec): a client never finds the path
	 * before it listens, and takes a refused connection for a stale
	 * socket (ctlclient.c removes those). */
	char tmp[sizeof(C.path)];
	struct sockaddr_un sa;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	int w = snprintf(tmp, sizeof(tmp), "%s/.%d.new", C.dir, (int)getpid());
	if (w <= 0 || (size_t)w >= sizeof(tmp) || (size_t)w >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "control socket path too long");
		close(s);
		C.path[0] = 0;
		return -1;
	}
	memcpy(sa.sun_path, tmp, (size_t)w + 1);
	unlink(tmp);
	if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) != 0 || chmod(tmp, 0600) != 0 || listen(s, 8) != 0 ||
	    rename(tmp, C.path) != 0) {
		snprintf(err, errlen, "%s: %s", C.path, strerror(errno));
		close(s);
		unlink(tmp);
		C.path[0] = 0;
		return -1;
	}
	/* Out of the low descriptor numbers a program may close or dup2 onto. */
	C.lfd = fd_high(s);
	s = C.lfd;
	return s;
}

const char *ctlsock_path(void) { return C.path; }

void ctlsock_forget(void)
{
	/* A fork child: the listening socket is the parent's. */
	if (C.lfd >= 0)
		close(C.lfd);
	C.lfd = -1;
	C.path[0] = 0;
}

void ctlsock_close(void)
{
	/* The helper serves it; ours is only a copy. */
	if (C.lfd >= 0)
		close(C.lfd);
	C.lfd = -1;
}

/* In-process entry (the Python module, through ctypes): the same commands
 * as the socket, through it. `fd` stays the caller's. Returns 0 if the
 * reply is "ok". */
AGENT_EXPORT int strata_agent_command(const char *req, int fd, char *reply, size_t n)
{
	if (!reply || n < 2)
		return -1;
	reply[0] = 0;
	if (!req) {
		snprintf(reply, n, "error: no request");
		return -1;
	}
	if (!agent.active) {
		/* The Python module loads the agent on this answer. */
		snprintf(reply, n, "error: the agent is not active in this process");
		return -1;
	}
	if (!C.path[0]) {
		snprintf(reply, n, "error: the agent has no control channel in this process");
		return -1;
	}
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0) {
		snprintf(reply, n, "error: socket: %s", strerror(errno));
		return -1;
	}
	struct sockaddr_un sa;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, C.path, strlen(C.path) + 1);
	struct timeval tv = { 30, 0 };
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	int rc = -1;
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		snprintf(reply, n, "error: the agent's helper does not answer (%s)", strerror(errno));
	} else if (ctl_send(s, req, strlen(req), fd) != 0) {
		snprintf(reply, n, "error: cannot send the request: %s", strerror(errno));
	} else {
		int rfd = -1;
		long r = ctl_recv(s, reply, n, &rfd);
		if (rfd >= 0)
			close(rfd);
		if (r < 0)
			snprintf(reply, n, "error: no reply from the agent's helper (%s)", strerror(errno));
		else
			rc = strncmp(reply, "ok", 2) == 0 ? 0 : -1;
	}
	close(s);
	return rc;
}
