/*
 * link.c — the profiled process's side of link.h: starting strata-agentd
 * and talking to it.
 *
 * The helper must never be a child of the program: a program that waits
 * for any child (waitpid(-1), a forkserver, a shell) would find it. So it
 * is started through an intermediate that exits at once: the calling
 * thread clones the intermediate (CLONE_VM | CLONE_VFORK, exit signal 0:
 * a "clone child" that wait() and SIGCHLD ignore, and which shares our
 * memory, so no page tables are copied), the intermediate clones the
 * helper the same way and exits as soon as the helper has exec'd, and the
 * calling thread reaps the intermediate (__WCLONE) before going on. The
 * helper is then an orphan, adopted by init (or the nearest subreaper).
 * Between the clones and the exec only system calls run, on stacks of
 * their own, with every signal blocked: no handler of the program can run
 * there.
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
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
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
	dev_t dev;     /* ... which the program may have closed (a fork */
	ino_t ino;     /* child before exec closes all): checked before use */
	int pidfd;     /* the helper */
	pid_t pid;
	int up;
} L = { .fd = -1, .pidfd = -1 };

/* Whether L.fd still is our socket: never write into a descriptor the
 * program reused. */
static int link_ok(void)
{
	struct stat st;
	return L.fd >= 0 && L.up && fstat(L.fd, &st) == 0 && st.st_ino == L.ino && st.st_dev == L.dev;
}

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
	char *stack2;    /* top of the helper's stack */
	volatile int err;
	volatile pid_t helper;
};

/* The helper, before its exec: system calls only, no libc state touched
 * (it shares our memory and thread pointer until execve). */
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

/* The intermediate: starts the helper (its exit signal SIGCHLD, for the
 * init that adopts it), waits (VFORK) until it has exec'd, and leaves. */
static int spawn_middle(void *p)
{
	struct spawn_args *a = p;
	long pid = clone(spawn_child, a->stack2, CLONE_VM | CLONE_VFORK | SIGCHLD, a);
	a->helper = pid > 0 ? (pid_t)pid : -1;
	if (pid < 0)
		a->err = errno ? errno : EAGAIN;
	syscall(SYS_exit, 0);
	return 0;
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
		int e = errno;
		if (mem < 0 && e == EACCES && prctl(PR_GET_DUMPABLE) == 0)
			/* The kernel hides a non-dumpable process's memory from
			 * every process of its user, itself through /proc
			 * included: its executable is not readable by the user
			 * it runs as (a program run as another user from a
			 * private directory), or it changed credentials. */
			snprintf(err, errlen, "this process (uid %u) is not dumpable: its executable is not readable by "
				 "the user it runs as, or it changed its credentials, so the agent's helper may not read "
				 "its memory", (unsigned)getuid());
		else
			snprintf(err, errlen, "cannot start the agent's helper: %s: %s",
				 mem < 0 ? "/proc/self/mem" : "/dev/null", strerror(e));
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

	struct spawn_args a = { path, argv, envp, { shm_fd(), sv[1], mem, ctl_fd }, nullfd, NULL, 0, -1 };
	size_t stack_len = 64 * 1024;
	char *stack = mmap(NULL, 2 * stack_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	pid_t mid = -1;
	int saved = errno;
	if (stack != MAP_FAILED) {
		a.stack2 = stack + 2 * stack_len;
		/* Every signal blocked across the clones: no handler of the
		 * program may run in them. The helper unblocks its own. */
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		mid = clone(spawn_middle, stack + stack_len, CLONE_VM | CLONE_VFORK, &a);
		int ce = errno;
		if (mid > 0) {
			while (waitpid(mid, NULL, __WCLONE) < 0 && errno == EINTR)
				;
		}
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		munmap(stack, 2 * stack_len);
		errno = ce;
	}
	int e = errno;
	close(sv[1]);
	close(mem);
	close(nullfd);
	pid_t pid = a.helper;
	if (mid < 0 || pid <= 0 || a.err) {
		snprintf(err, errlen, "cannot start the agent's helper %s: %s", path, strerror(a.err ? a.err : e));
		close(sv[0]);
		errno = saved;
		return -1;
	}
	errno = saved;
	L.fd = sv[0];
	struct stat lst;
	if (fstat(L.fd, &lst) == 0) {
		L.dev = lst.st_dev;
		L.ino = lst.st_ino;
	}
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
	int e = errno;
	if (!link_ok()) {
		errno = e;
		return;
	}
	struct link_msg m = { .type = LINK_POKE };
	ssize_t r = send(L.fd, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL);
	(void)r;
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
	int e = errno;
	if (!link_ok()) {
		L.up = 0;
		errno = e;
		return -1;
	}
	L.up = 0;
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
