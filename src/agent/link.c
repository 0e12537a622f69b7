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
#include "shm/link.h"

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

#include "shm/agent.h"
#include "shm/shm.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

static struct {
	pid_t pid;     /* the helper */
	int up;
} L;

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
	int src[3];      /* shm, mem, ctl: moved to 3..5 */
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
	for (int i = 0; i < 3; i++)
		if (a->src[i] >= 0)
			syscall(SYS_dup2, a->src[i], 3 + i);
		else
			syscall(SYS_close, 3 + i);
	if (syscall(SYS_close_range, 6u, ~0u, 0u) != 0)
		for (long fd = 6; fd < 65536; fd++)
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
 * LD_PRELOAD: the agent has nothing to do in the helper). A name ending
 * in '*' is a prefix: the continuous-profiling settings (STRATA_SEND,
 * STRATA_SEND_*: docs/send.md) go to the sender the helper starts. */
static const char *const pass_env[] = {
	"HOME", "TMPDIR", "XDG_RUNTIME_DIR", "LD_LIBRARY_PATH", "PATH", "STRATA_JITDUMP_DIR",
	"STRATA_DEBUG_NATIVE", "STRATA_DEBUG_AGENTD", "STRATA_CLI", "STRATA_SEND*",
	"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy",
	"SSL_CERT_FILE", "SSL_CERT_DIR", NULL,
};

int link_spawn(int ctl_fd, char *err, size_t errlen)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s", agent.agent_dir, AGENTD_NAME);
	if (access(path, X_OK)) {
		snprintf(err, errlen, "cannot start the agent's helper %s: %s", path, strerror(errno));
		return -1;
	}
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
	char *envp[64];
	int ne = 0;
	for (char **e = environ; e && *e && ne < 63; e++)
		for (int k = 0; pass_env[k]; k++) {
			size_t l = strlen(pass_env[k]);
			int prefix = pass_env[k][l - 1] == '*';
			if (prefix)
				l--;
			if (!strncmp(*e, pass_env[k], l) && (prefix ? strchr(*e, '=') != NULL : (*e)[l] == '=')) {
				envp[ne++] = *e;
				break;
			}
		}
	envp[ne] = NULL;

	/* A new helper starts with no request pending (after a failed exec
	 * the last one may have left without serving everything). */
	atomic_store(&agent.link_req, 0);
	atomic_store(&agent.link_done, atomic_load(&agent.link_seq));
	atomic_store(&agent.link_grow, 0);
	atomic_store(&agent.link_gone, 0);
	struct spawn_args a = { path, argv, envp, { shm_fd(), mem, ctl_fd }, nullfd, NULL, 0, -1 };
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
	close(mem);
	close(nullfd);
	pid_t pid = a.helper;
	if (mid < 0 || pid <= 0 || a.err) {
		snprintf(err, errlen, "cannot start the agent's helper %s: %s", path, strerror(a.err ? a.err : e));
		errno = saved;
		return -1;
	}
	errno = saved;
	L.pid = pid;
	L.up = 1;
	atomic_store(&agent.helper_pid, pid);
	/* The helper has the region now: it alone holds a descriptor for
	 * it, and grows it when asked (shm.c). */
	shm_close_fd(link_grow);
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Posts the request bits and wakes the helper; returns the ticket the
 * helper publishes in link_done once it has served them.
 * Async-signal-safe. */
static uint32_t post(uint32_t bits)
{
	atomic_fetch_or(&agent.link_req, bits);
	uint32_t t = atomic_fetch_add(&agent.link_seq, 1) + 1;
	link_futex_wake(&agent.link_seq, 1);
	return t;
}

/* Waits until the helper served ticket t, at most timeout_ms. A helper
 * that is gone (it crashed, or was killed) takes the link down: nothing
 * waits for it again. Async-signal-safe. */
static int wait_done(uint32_t t, int timeout_ms)
{
	int64_t end = now_ms() + timeout_ms;
	for (;;) {
		uint32_t d = atomic_load(&agent.link_done);
		if ((int32_t)(d - t) >= 0)
			return 0;
		if (atomic_load(&agent.link_gone) == L.pid) {
			L.up = 0;
			return -1;
		}
		int64_t left = end - now_ms();
		if (left <= 0 || (kill(L.pid, 0) != 0 && errno == ESRCH)) {
			L.up = 0;
			return -1;
		}
		if (left > 100)
			left = 100;
		struct timespec ts = { (time_t)(left / 1000), (long)(left % 1000) * 1000000L };
		link_futex_wait(&agent.link_done, d, &ts);
	}
}

void link_poke(void)
{
	if (!L.up)
		return;
	int e = errno;
	post(LINK_REQ_POKE);
	errno = e;
}

int link_grow(uint64_t want)
{
	if (!L.up)
		return -1;
	int e = errno;
	uint64_t cur = atomic_load(&agent.link_grow);
	while (cur < want && !atomic_compare_exchange_weak(&agent.link_grow, &cur, want))
		;
	int rc = wait_done(post(LINK_REQ_GROW), 5000);
	errno = e;
	return rc;
}

int link_triggers(void)
{
	if (!L.up)
		return -1;
	int e = errno;
	int rc = wait_done(post(LINK_REQ_TRIGGERS), 5000);
	errno = e;
	return rc;
}

/* Before an exec: a descriptor for the region again, from the helper's
 * (/proc/PID/fd: read access to our own helper is enough, no ptrace
 * attach), close-on-exec and above 511. The exec closes it; if the exec
 * fails, the next helper is handed it (agent_resume). Async-signal-safe
 * (exec may be called from a handler): no snprintf. */
static void keep_region(void)
{
	char path[64] = "/proc/";
	size_t n = strlen(path);
	char digits[16];
	int nd = 0;
	for (unsigned v = (unsigned)L.pid; v && nd < 15; v /= 10)
		digits[nd++] = (char)('0' + v % 10);
	while (nd)
		path[n++] = digits[--nd];
	path[n++] = '/';
	path[n++] = 'f';
	path[n++] = 'd';
	path[n++] = '/';
	path[n++] = (char)('0' + AGENTD_FD_SHM);
	path[n] = 0;
	int fd = high_fd(open(path, O_RDWR | O_CLOEXEC));
	if (fd >= 0 && shm_adopt_fd(fd))
		close(fd);
}

int link_finish(int reason, int timeout_ms)
{
	if (!L.up)
		return -1;
	int e = errno;
	if (reason == END_EXEC && shm_fd() < 0)
		keep_region();
	atomic_store(&agent.link_reason, (uint32_t)reason);
	int rc = wait_done(post(LINK_REQ_FINISH), timeout_ms);
	L.up = 0;
	errno = e;
	return rc;
}

int link_up(void) { return L.up; }

void link_forget(void)
{
	/* The parent's helper is the parent's; nothing of it is held here. */
	L.pid = 0;
	L.up = 0;
}
