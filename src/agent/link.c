/*
 * link.c — the profiled process's side of link.h: starting strata-agentd
 * and talking to it.
 *
 * The helper is started with clone(CLONE_VM | CLONE_VFORK) and exit
 * signal 0: like vfork, the calling thread waits until the child has
 * exec'd, and the child runs only system calls in between (on a stack of
 * its own, every signal blocked, so no handler of the program can run in
 * it). With exit signal 0 it is a "clone child": invisible to wait() and
 * waitpid(-1) unless __WALL or __WCLONE is asked for, and its end raises
 * no SIGCHLD. When the profiled process ends first, the helper is
 * reparented like any orphan and reaped there.
 */
#include "link.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "shm.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

static struct {
	int fd;        /* our end of the socket pair */
	int pidfd;     /* the helper */
	pid_t pid;
	int up;
} L = { .fd = -1, .pidfd = -1 };

extern char **environ;

static int high_fd(int fd)
{
	if (fd < 0 || fd >= 512)
		return fd;
	int hi = fcntl(fd, F_DUPFD_CLOEXEC, 512);
	if (hi < 0)
		return fd;
	close(fd);
	return hi;
}

struct spawn_args {
	const char *path;
	char **argv;
	char **envp;
	int src[4];      /* shm, link, mem, ctl: moved to 3..6 */
	int nullfd;
	volatile int err;
};

/* The clone child: system calls only, no libc state touched (it shares
 * the parent's memory and thread pointer until execve). */
static int spawn_child(void *p)
{
	struct spawn_args *a = p;
	for (int i = 0; i < 3; i++)
		syscall(SYS_dup2, a->nullfd, i);
	for (int i = 0; i < 4; i++)
		if (a->src[i] >= 0)
			syscall(SYS_dup2, a->src[i], 3 + i);
		else
			syscall(SYS_close, 3 + i);
	if (syscall(SYS_close_range, 7u, ~0u, 0u) != 0)
		for (long fd = 7; fd < 65536; fd++)
			syscall(SYS_close, fd);
	syscall(SYS_setsid);
	syscall(SYS_chdir, "/");
	syscall(SYS_execve, a->path, a->argv, a->envp);
	a->err = errno ? errno : ENOEXEC;
	syscall(SYS_exit, 127);
	return 127;
}

/* The variables the helper needs from the program's environment (never
 * LD_PRELOAD: the agent has nothing to do in the helper). */
static const char *const pass_env[] = {
	"HOME", "TMPDIR", "XDG_RUNTIME_DIR", "LD_LIBRARY_PATH", "PATH", "STRATA_JITDUMP_DIR",
	"STRATA_DEBUG_NATIVE", "STRATA_DEBUG_AGENTD", NULL,
};

int link_spawn(int ctl_fd, char *err, size_t errlen)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s", agent.agent_dir, AGENTD_NAME);
	if (access(path, X_OK)) {
		snprintf(err, errlen, "cannot start the agent's helper %s: %s", path, strerror(errno));
		return -1;
	}
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) {
		snprintf(err, errlen, "cannot start the agent's helper: socketpair: %s", strerror(errno));
		return -1;
	}
	sv[0] = high_fd(sv[0]);
	sv[1] = high_fd(sv[1]);
	int mem = high_fd(open("/proc/self/mem", O_RDWR | O_CLOEXEC));
	if (mem < 0)
		mem = high_fd(open("/proc/self/mem", O_RDONLY | O_CLOEXEC));
	int nullfd = high_fd(open("/dev/null", O_RDWR | O_CLOEXEC));
	if (mem < 0 || nullfd < 0) {
		snprintf(err, errlen, "cannot start the agent's helper: %s: %s", mem < 0 ? "/proc/self/mem" : "/dev/null",
			 strerror(errno));
		close(sv[0]);
		close(sv[1]);
		if (mem >= 0)
			close(mem);
		if (nullfd >= 0)
			close(nullfd);
		return -1;
	}

	char pidbuf[32], addrbuf[32], maxbuf[32];
	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)getpid());
	snprintf(addrbuf, sizeof(addrbuf), "0x%llx", (unsigned long long)shm_addr());
	snprintf(maxbuf, sizeof(maxbuf), "%llu", (unsigned long long)shm_max());
	char *argv[] = { (char *)AGENTD_NAME, pidbuf, addrbuf, maxbuf, NULL };
	char *envp[16];
	int ne = 0;
	for (char **e = environ; e && *e && ne < 15; e++)
		for (int k = 0; pass_env[k]; k++) {
			size_t l = strlen(pass_env[k]);
			if (!strncmp(*e, pass_env[k], l) && (*e)[l] == '=') {
				envp[ne++] = *e;
				break;
			}
		}
	envp[ne] = NULL;

	struct spawn_args a = { path, argv, envp, { shm_fd(), sv[1], mem, ctl_fd }, nullfd, 0 };
	size_t stack_len = 64 * 1024;
	void *stack = mmap(NULL, stack_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	pid_t pid = -1;
	int saved = errno;
	if (stack != MAP_FAILED) {
		/* Every signal blocked across the clone: no handler of the
		 * program may run in the child. The helper unblocks its own. */
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		pid = clone(spawn_child, (char *)stack + stack_len, CLONE_VM | CLONE_VFORK, &a);
		int ce = errno;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		munmap(stack, stack_len);
		errno = ce;
	}
	int e = errno;
	close(sv[1]);
	close(mem);
	close(nullfd);
	if (pid < 0 || a.err) {
		if (pid > 0)
			waitpid(pid, NULL, __WCLONE);
		snprintf(err, errlen, "cannot start the agent's helper %s: %s", path, strerror(a.err ? a.err : e));
		close(sv[0]);
		errno = saved;
		return -1;
	}
	errno = saved;
	L.fd = sv[0];
	L.pid = pid;
	L.pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	L.pidfd = high_fd(L.pidfd);
	if (L.pidfd >= 0)
		fcntl(L.pidfd, F_SETFD, FD_CLOEXEC);
	L.up = 1;
	atomic_store(&agent.helper_pid, pid);
	return 0;
}

void link_poke(void)
{
	if (L.fd < 0 || !L.up)
		return;
	int e = errno;
	struct link_msg m = { .type = LINK_POKE };
	ssize_t r = send(L.fd, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL);
	(void)r;
	errno = e;
}

void link_send_fds(void *slot, const int *fds, int nfds)
{
	if (L.fd < 0 || !L.up || nfds <= 0 || nfds > EVENTS_MAX)
		return;
	int e = errno;
	struct link_msg m = { .type = LINK_FDS, .arg = (uint32_t)nfds, .a = (uint64_t)(uintptr_t)slot };
	struct iovec iov = { &m, sizeof(m) };
	union {
		char buf[CMSG_SPACE(sizeof(int) * EVENTS_MAX)];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof(u));
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			     .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	ssize_t r;
	do
		r = sendmsg(L.fd, &mh, MSG_NOSIGNAL);
	while (r < 0 && errno == EINTR);
	errno = e;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int link_finish(int reason, int timeout_ms)
{
	if (L.fd < 0 || !L.up)
		return -1;
	L.up = 0;
	int e = errno;
	struct link_msg m = { .type = LINK_FINISH, .arg = (uint32_t)reason };
	int64_t end = now_ms() + timeout_ms;
	int rc = -1;
	ssize_t r;
	do
		r = send(L.fd, &m, sizeof(m), MSG_NOSIGNAL);
	while (r < 0 && errno == EINTR);
	while (r == (ssize_t)sizeof(m)) {
		int64_t left = end - now_ms();
		if (left <= 0)
			break;
		struct pollfd pf = { L.fd, POLLIN, 0 };
		int pr = poll(&pf, 1, (int)left);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0)
			break;
		struct link_msg in;
		ssize_t n = recv(L.fd, &in, sizeof(in), MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n != (ssize_t)sizeof(in))
			break; /* the helper is gone */
		if (in.type == LINK_ACK) {
			rc = 0;
			break;
		}
	}
	errno = e;
	return rc;
}

int link_helper_pidfd(void) { return L.pidfd; }

int link_up(void) { return L.up; }

void link_forget(void)
{
	/* Ours are copies of the parent's: closing them leaves the parent's
	 * link alone. */
	if (L.fd >= 0)
		close(L.fd);
	if (L.pidfd >= 0)
		close(L.pidfd);
	L.fd = L.pidfd = -1;
	L.pid = 0;
	L.up = 0;
}
