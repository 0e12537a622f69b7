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
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
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

static int high_fd(int fd) { return fd_high(fd); }

struct spawn_args {
	const char *path;
	char **argv;
	char **envp;
	int src[3];      /* shm, mem, ctl: moved to 3..5 */
	long nofile;     /* RLIMIT_NOFILE, for a kernel without close_range */
	char *stack2;    /* top of the helper's stack */
	volatile int err;
	volatile pid_t helper;
};

/* Closes [lo, hi] in the helper's table (its own: no CLONE_FILES). */
static void close_span(const struct spawn_args *a, long lo, long hi)
{
	if (lo > hi)
		return;
	if (syscall(SYS_close_range, (unsigned)lo, (unsigned)(hi > 0x7fffffffL ? ~0u : (unsigned long)hi), 0u) == 0)
		return;
	for (long fd = lo; fd <= hi && fd < a->nofile; fd++)
		syscall(SYS_close, fd);
}

/* The helper, before its exec: system calls only, no libc state touched
 * (it shares our memory and thread pointer until execve).
 *
 * Its descriptor table is a copy of the program's, which may be full up
 * to RLIMIT_NOFILE, and our three may sit anywhere, 0..5 included (a
 * daemon that closed its standard descriptors before forking). So: close
 * everything but ours; move those below 6 above 5 (dup2 onto their own
 * number would keep close-on-exec set, and onto another of ours would
 * clobber it); then /dev/null on 0..2, ours on 3..5, and nothing else. */
static int spawn_child(void *p)
{
	struct spawn_args *a = p;
	long prev = -1;
	for (;;) {
		long next = 0x7fffffffL + 1L;
		for (int i = 0; i < 3; i++)
			if (a->src[i] > prev && a->src[i] < next)
				next = a->src[i];
		close_span(a, prev + 1, next - 1);
		if (next > 0x7fffffffL)
			break;
		prev = next;
	}
	int tmp[3];
	for (int i = 0; i < 3; i++)
		tmp[i] = a->src[i] < 0 ? -1 : a->src[i] >= 6 ? a->src[i] : (int)syscall(SYS_fcntl, a->src[i], F_DUPFD, 6);
	for (int i = 0; i < 3; i++)
		if (a->src[i] >= 0 && a->src[i] < 6)
			syscall(SYS_close, a->src[i]);
	long nul = syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDWR);
	if (nul >= 0 && nul != 0) {
		syscall(SYS_dup2, nul, 0);
		syscall(SYS_close, nul);
	}
	syscall(SYS_dup2, 0, 1);
	syscall(SYS_dup2, 0, 2);
	for (int i = 0; i < 3; i++) {
		if (a->src[i] >= 0 && tmp[i] < 0) {
			/* A table with no room above 5: RLIMIT_NOFILE under 9. */
			a->err = EMFILE;
			syscall(SYS_exit, 127);
		}
		if (tmp[i] >= 0)
			syscall(SYS_dup2, tmp[i], 3 + i);
		else
			syscall(SYS_close, 3 + i);
	}
	close_span(a, 6, 0x7fffffffL + 1L);
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

/* Reads a small file's first number; "max" (no limit) gives -1, a
 * missing file -2. System calls only. */
static long read_num(const char *path)
{
	char b[32];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -2;
	ssize_t n = read(fd, b, sizeof(b) - 1);
	close(fd);
	if (n <= 0)
		return -2;
	b[n] = 0;
	if (!strncmp(b, "max", 3))
		return -1;
	return strtol(b, NULL, 10);
}

/* The tasks (processes and threads) the process's cgroups still allow:
 * the least of pids.max less pids.current over its pids cgroup and the
 * ancestors (cgroup v1's pids hierarchy, or v2), or -1 when none limits
 * them; *limit is that cgroup's pids.max. */
static long pids_room(long *limit)
{
	char buf[2048];
	int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	const char *base = NULL, *rel = NULL;
	for (char *line = buf; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (c1 && c2) {
			*c2 = 0;
			const char *ctrl = c1 + 1;
			size_t cl = strlen(ctrl);
			const char *p = strstr(ctrl, "pids");
			if (p && (p == ctrl || p[-1] == ',') && (p[4] == 0 || p[4] == ',')) {
				base = "/sys/fs/cgroup/pids";
				rel = c2 + 1;
				break;
			}
			if (cl == 0 && line[0] == '0' && c1 == line + 1) {
				base = "/sys/fs/cgroup";
				rel = c2 + 1;
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	if (!base)
		return -1;
	char dir[1200], path[1300];
	snprintf(dir, sizeof(dir), "%s%s", base, rel);
	long room = -1;
	for (;;) {
		snprintf(path, sizeof(path), "%s/pids.max", dir);
		long max = read_num(path);
		snprintf(path, sizeof(path), "%s/pids.current", dir);
		long cur = max >= 0 ? read_num(path) : -2;
		if (max >= 0 && cur >= 0 && (room < 0 || max - cur < room)) {
			room = max - cur < 0 ? 0 : max - cur;
			*limit = max;
		}
		char *slash = strrchr(dir, '/');
		if (!slash || (size_t)(slash - dir) < strlen(base))
			break;
		*slash = 0;
	}
	return room;
}

/* The tasks a helper takes (itself and its writer; wall mode's sampler;
 * the intermediate process, for a moment). */
#define HELPER_TASKS 4

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

/* Opens /proc/self/mem for the helper: read-write, else read-only.
 * -1 with err set. */
static int open_mem(char *err, size_t errlen)
{
	int mem = high_fd(open("/proc/self/mem", O_RDWR | O_CLOEXEC));
	if (mem < 0 && errno != EMFILE)
		mem = high_fd(open("/proc/self/mem", O_RDONLY | O_CLOEXEC));
	if (mem < 0) {
		int e = errno;
		char lim[64];
		fd_limit_note(lim, sizeof(lim), e);
		if (e == EACCES && prctl(PR_GET_DUMPABLE) == 0)
			/* The kernel hides a non-dumpable process's memory from
			 * every process of its user, itself through /proc
			 * included: its executable is not readable by the user
			 * it runs as (a program run as another user from a
			 * private directory), or it changed credentials. */
			snprintf(err, errlen, "this process (uid %u) is not dumpable: its executable is not readable by "
				 "the user it runs as, or it changed its credentials, so the agent's helper may not read "
				 "its memory", (unsigned)getuid());
		else
			snprintf(err, errlen, "cannot start the agent's helper: /proc/self/mem: %s%s", strerror(e), lim);
		errno = e;
	}
	return mem;
}

/* A new helper (or the tree's) starts with no request of ours pending
 * (after a failed exec the last one may have left without serving
 * everything). */
static void link_reset(void)
{
	atomic_store(&agent.link_req, 0);
	atomic_store(&agent.link_done, atomic_load(&agent.link_seq));
	atomic_store(&agent.link_grown, atomic_load(&agent.link_seq));
	atomic_store(&agent.link_grow, 0);
	atomic_store(&agent.link_gone, 0);
}

int link_spawn(int ctl_fd, char *err, size_t errlen)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s", agent.agent_dir, AGENTD_NAME);
	if (access(path, X_OK)) {
		snprintf(err, errlen, "cannot start the agent's helper %s: %s", path, strerror(errno));
		return -1;
	}
	/* Under a cgroup's pids.max, a helper's tasks are taken from the
	 * program's: none is started that would leave the program less
	 * than a quarter of the limit (and 8 tasks). The program goes on
	 * unprofiled, and the profile says why. */
	long limit = 0, room = pids_room(&limit);
	long keep = limit / 4 > 8 ? limit / 4 : 8;
	if (room >= 0 && room < HELPER_TASKS + keep) {
		snprintf(err, errlen, "not starting the agent's helper: the cgroup's pids.max is %ld and %ld tasks are "
			 "left; the helper would take %d of what the program may need (strata leaves it at least %ld)",
			 limit, room, HELPER_TASKS, keep);
		return -1;
	}
	int mem = open_mem(err, errlen);
	if (mem < 0)
		return -1;

	char pidbuf[32], addrbuf[32], maxbuf[32], statebuf[32];
	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)getpid());
	snprintf(addrbuf, sizeof(addrbuf), "0x%llx", (unsigned long long)shm_addr());
	snprintf(maxbuf, sizeof(maxbuf), "%llu", (unsigned long long)shm_max());
	/* Our state in the region (which may be a tree's: not its root). */
	snprintf(statebuf, sizeof(statebuf), "0x%llx", (unsigned long long)((uintptr_t)agentp - shm_addr()));
	char *argv[] = { (char *)AGENTD_NAME, pidbuf, addrbuf, maxbuf, statebuf, NULL };
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

	link_reset();
	struct rlimit nf = { 65536, 65536 };
	getrlimit(RLIMIT_NOFILE, &nf);
	struct spawn_args a = { path, argv, envp, { shm_fd(), mem, ctl_fd },
				nf.rlim_cur > 65536 ? 65536 : (long)nf.rlim_cur, NULL, 0, -1 };
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
	pid_t pid = a.helper;
	if (mid < 0 || pid <= 0 || a.err) {
		int why = a.err ? a.err : e;
		char lim[96];
		fd_limit_note(lim, sizeof(lim), why);
		if (why == EAGAIN && !lim[0]) {
			/* clone() refused a new process: RLIMIT_NPROC or the
			 * cgroup's pids.max. */
			struct rlimit np;
			if (getrlimit(RLIMIT_NPROC, &np) == 0 && np.rlim_cur != RLIM_INFINITY)
				snprintf(lim, sizeof(lim), " (RLIMIT_NPROC is %llu, or the cgroup's pids.max)",
					 (unsigned long long)np.rlim_cur);
			else
				snprintf(lim, sizeof(lim), " (the cgroup's pids.max, or RLIMIT_NPROC)");
		}
		snprintf(err, errlen, "cannot start the agent's helper %s: %s%s", path, strerror(why), lim);
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

int link_tree_region(void)
{
	uint64_t key;
	pid_t helper = shm_tree(&key);
	if (helper <= 0 || shm_fd() >= 0)
		return -1;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)helper, AGENTD_FD_SHM);
	/* Checked against the region (its size), while the tree's other
	 * processes may be growing it. */
	int fd = high_fd(open(path, O_RDWR | O_CLOEXEC));
	if (fd < 0)
		return -1;
	if (shm_adopt_fd(fd) == 0)
		return 0;
	close(fd);
	return -1;
}

int link_join(int ctl_fd, char *err, size_t errlen)
{
	uint64_t key = 0;
	pid_t helper = shm_tree(&key);
	if (helper <= 0) {
		snprintf(err, errlen, "no helper serves the tree");
		return -1;
	}
	int so = high_fd(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
	if (so < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	struct sockaddr_un a;
	socklen_t al = link_tree_addr(&a, helper, key);
	if (connect(so, (struct sockaddr *)&a, al)) {
		snprintf(err, errlen, "the tree's helper %d: %s", (int)helper, strerror(errno));
		close(so);
		return -1;
	}
	int mem = open_mem(err, errlen);
	if (mem < 0) {
		close(so);
		return -1;
	}
	link_reset();
	struct link_join m = { LINK_JOIN_MAGIC, (int32_t)getpid(), (uint64_t)((uintptr_t)agentp - shm_addr()),
			       ctl_fd >= 0, 0 };
	int fds[2] = { mem, ctl_fd };
	int nfds = ctl_fd >= 0 ? 2 : 1;
	char cbuf[CMSG_SPACE(2 * sizeof(int))];
	memset(cbuf, 0, sizeof(cbuf));
	struct iovec iov = { &m, sizeof(m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			     .msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int)) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, (size_t)nfds * sizeof(int));
	/* The helper takes it at its next look: ring. */
	ssize_t w = sendmsg(so, &mh, MSG_NOSIGNAL);
	close(mem);
	link_ring(shm_doorbell(), 1);
	int32_t status = -1;
	ssize_t r = -1;
	if (w == (ssize_t)sizeof(m)) {
		/* Its answer comes once it serves us (a moment, more under
		 * load for --native's tables); bounded, as every wait on the
		 * helper is: a stopped helper leaves us to start our own. */
		struct pollfd pf = { so, POLLIN, 0 };
		int pr;
		do
			pr = poll(&pf, 1, 5000);
		while (pr < 0 && errno == EINTR);
		if (pr > 0)
			r = recv(so, &status, sizeof(status), 0);
	}
	close(so);
	if (r != (ssize_t)sizeof(status) || status == ECONNREFUSED) {
		snprintf(err, errlen, "the tree's helper %d did not take this process", (int)helper);
		return -1;
	}
	L.pid = helper;
	L.up = status == 0;
	if (L.up)
		atomic_store(&agent.helper_pid, helper);
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
	/* The helper may serve a tree of processes: it waits on the
	 * region's doorbell, then looks at each one's link_seq. */
	link_ring(shm_doorbell(), 1);
	return t;
}

/* Waits until the helper served ticket t, at most timeout_ms. A helper
 * that is gone (it crashed, or was killed) takes the link down: nothing
 * waits for it again. Async-signal-safe. */
static int wait_word(_Atomic uint32_t *word, uint32_t t, int timeout_ms)
{
	int64_t end = now_ms() + timeout_ms;
	for (;;) {
		uint32_t d = atomic_load(word);
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
		link_futex_wait(word, d, &ts);
	}
}

static int wait_done(uint32_t t, int timeout_ms) { return wait_word(&agent.link_done, t, timeout_ms); }

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
	int rc = wait_word(&agent.link_grown, post(LINK_REQ_GROW), 5000);
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
