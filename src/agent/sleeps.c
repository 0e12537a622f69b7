/*
 * sleeps.c — interposed blocking calls that a signal handler always cuts
 * short.
 *
 * SA_RESTART makes the kernel restart most system calls our SIGPROF
 * handler interrupts, but not these (signal(7)): nanosleep and
 * clock_nanosleep, select/pselect, poll/ppoll, epoll_wait/epoll_pwait,
 * sigsuspend and pause fail with EINTR whenever a handler runs, whatever
 * its flags. A sample signal can land in one of them: the perf task-clock
 * overflows in the kernel on the way into the call, or in wall mode the
 * sampler sees a thread running an instant before it blocks. The program
 * would then see an EINTR it never sees without the profiler (Python
 * retries some of these, C code rarely does).
 *
 * So a sampled thread holds SIGPROF while it is inside one of them: the
 * wrappers add it to the blocked set for the duration of the call (the
 * variants that take a signal mask get it added to a copy), and a pending
 * sample is taken as soon as the call returns. A blocked thread takes no
 * CPU time and wall mode reads blocked threads from outside, so nothing is
 * lost. The cost is two rt_sigprocmask calls per wrapped call, and only in
 * threads the agent samples.
 *
 * Writes are the other case. A blocking write() to a pipe, a socket or a
 * terminal that has moved some bytes and is then interrupted returns the
 * short count, SA_RESTART or not; without the profiler nothing interrupts
 * it and it moves everything. Python's unbuffered streams (python -u,
 * PYTHONUNBUFFERED, as in most containers) hand a whole bytes object to
 * one write() and lose the rest if it comes back short (CPython's own
 * test_subprocess.test_communicate_pipe_buf did under strata). So write()
 * and writev() of more than PIPE_BUF bytes hold SIGPROF too; smaller ones
 * to a pipe are atomic (all or nothing, restarted) and are passed
 * straight through, as are all writes of threads the agent does not
 * sample.
 *
 * An application that handles SIGPROF itself (its own ITIMER_PROF
 * profiler, or one CPython's test_signal left installed) may be waiting
 * for it in one of these calls: then nothing is held. A pause() or a
 * sigsuspend() that a sample of ours cut short, with no handler of the
 * program run in the thread meanwhile, is then made again: without us
 * it would still be waiting (a pause() for a SIGALRM returned early:
 * test_signal's test_itimer_real in wall mode). The timed calls are left
 * as they are: they would have to be made again with the time left, and
 * the callers that matter (CPython's, PEP 475) retry them themselves.
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/uio.h>
#include <limits.h>
#include <time.h>
#include <unistd.h>

#include "shm/agent.h"

/* The next definitions, looked up when the library loads: several of
 * these are async-signal-safe and a program may call them from its own
 * signal handler, where dlsym must not run. A call before the constructor
 * ran (from another library's constructor) looks up then. */
static __typeof__(nanosleep) *real_nanosleep;
static __typeof__(clock_nanosleep) *real_clock_nanosleep;
static __typeof__(usleep) *real_usleep;
static __typeof__(sleep) *real_sleep;
static __typeof__(select) *real_select;
static __typeof__(pselect) *real_pselect;
static __typeof__(poll) *real_poll;
static __typeof__(ppoll) *real_ppoll;
static __typeof__(epoll_wait) *real_epoll_wait;
static __typeof__(epoll_pwait) *real_epoll_pwait;
static __typeof__(sigsuspend) *real_sigsuspend;
static __typeof__(pause) *real_pause;
static __typeof__(write) *real_write;
static __typeof__(writev) *real_writev;

#define LOOKUP(name)                                                                   \
	if (!real_##name)                                                              \
		real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

#define REAL(name)                                                                     \
	LOOKUP(name);                                                                  \
	if (!real_##name) {                                                            \
		errno = ENOSYS;                                                        \
		return -1;                                                             \
	}

__attribute__((constructor)) static void resolve_sleeps(void)
{
	LOOKUP(nanosleep);
	LOOKUP(clock_nanosleep);
	LOOKUP(usleep);
	LOOKUP(sleep);
	LOOKUP(select);
	LOOKUP(pselect);
	LOOKUP(poll);
	LOOKUP(ppoll);
	LOOKUP(epoll_wait);
	LOOKUP(epoll_pwait);
	LOOKUP(sigsuspend);
	LOOKUP(pause);
	LOOKUP(write);
	LOOKUP(writev);
}

/* Whether this thread is sampled: then it holds SIGPROF across the call. */
static int hold(sigset_t *old)
{
	if (!tls_slot || !agent.active || signals_app_handles(SIGPROF))
		return 0;
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGPROF);
	return pthread_sigmask(SIG_BLOCK, &s, old) == 0;
}

static void release(int held, const sigset_t *old)
{
	if (!held)
		return;
	int e = errno;
	pthread_sigmask(SIG_SETMASK, old, NULL);
	errno = e;
}

/* A caller's mask with SIGPROF added, for the calls that install one. */
static const sigset_t *with_prof(const sigset_t *mask, sigset_t *copy)
{
	if (!mask || !tls_slot || !agent.active || signals_app_handles(SIGPROF))
		return mask;
	*copy = *mask;
	sigaddset(copy, SIGPROF);
	return copy;
}

#define HELD(call)                        \
	do {                              \
		sigset_t old;             \
		int held = hold(&old);    \
		__typeof__(call) held_ret = call; \
		release(held, &old);      \
		return held_ret;          \
	} while (0)

AGENT_EXPORT int nanosleep(const struct timespec *req, struct timespec *rem)
{
	REAL(nanosleep);
	HELD(real_nanosleep(req, rem));
}

AGENT_EXPORT int clock_nanosleep(clockid_t clk, int flags, const struct timespec *req, struct timespec *rem)
{
	/* Returns the error number instead of setting errno. */
	LOOKUP(clock_nanosleep);
	if (!real_clock_nanosleep)
		return ENOSYS;
	HELD(real_clock_nanosleep(clk, flags, req, rem));
}

AGENT_EXPORT int usleep(useconds_t usec)
{
	REAL(usleep);
	HELD(real_usleep(usec));
}

AGENT_EXPORT unsigned int sleep(unsigned int seconds)
{
	LOOKUP(sleep);
	if (!real_sleep)
		return seconds;
	HELD(real_sleep(seconds));
}

AGENT_EXPORT int select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
	REAL(select);
	HELD(real_select(n, r, w, e, tv));
}

AGENT_EXPORT int pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *ts, const sigset_t *mask)
{
	REAL(pselect);
	sigset_t copy;
	if (mask)
		return real_pselect(n, r, w, e, ts, with_prof(mask, &copy));
	HELD(real_pselect(n, r, w, e, ts, mask));
}

AGENT_EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	REAL(poll);
	HELD(real_poll(fds, n, timeout));
}

AGENT_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
	REAL(ppoll);
	sigset_t copy;
	if (mask)
		return real_ppoll(fds, n, ts, with_prof(mask, &copy));
	HELD(real_ppoll(fds, n, ts, mask));
}

AGENT_EXPORT int epoll_wait(int fd, struct epoll_event *ev, int max, int timeout)
{
	REAL(epoll_wait);
	HELD(real_epoll_wait(fd, ev, max, timeout));
}

AGENT_EXPORT int epoll_pwait(int fd, struct epoll_event *ev, int max, int timeout, const sigset_t *mask)
{
	REAL(epoll_pwait);
	sigset_t copy;
	if (mask)
		return real_epoll_pwait(fd, ev, max, timeout, with_prof(mask, &copy));
	HELD(real_epoll_pwait(fd, ev, max, timeout, mask));
}

/* Whether a call that failed with EINTR was cut short by samples of ours
 * alone, since the counts `app` and `ours` were read: the program's
 * handlers ran none in this thread, ours did. */
static int ours_only(int r, uint32_t app, uint32_t ours)
{
	struct tslot *s = tls_slot;
	return r == -1 && errno == EINTR && s && s->sig_app == app && s->sig_ours != ours;
}

/* Returns call's result, the call made again while ours_only says so. */
#define RETRIED(call)                                                          \
	do {                                                                   \
		int r_;                                                        \
		uint32_t app_, ours_;                                          \
		do {                                                           \
			app_ = tls_slot ? tls_slot->sig_app : 0;               \
			ours_ = tls_slot ? tls_slot->sig_ours : 0;             \
			r_ = call;                                             \
		} while (ours_only(r_, app_, ours_));                          \
		return r_;                                                     \
	} while (0)

AGENT_EXPORT int sigsuspend(const sigset_t *mask)
{
	REAL(sigsuspend);
	sigset_t copy;
	const sigset_t *m = with_prof(mask, &copy);
	if (m != mask)
		return real_sigsuspend(m);
	RETRIED(real_sigsuspend(mask));
}

AGENT_EXPORT int pause(void)
{
	REAL(pause);
	sigset_t old;
	if (hold(&old)) {
		int r = real_pause();
		release(1, &old);
		return r;
	}
	RETRIED(real_pause());
}

AGENT_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	REAL(write);
	if (n <= PIPE_BUF)
		return real_write(fd, buf, n);
	HELD(real_write(fd, buf, n));
}

AGENT_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	REAL(writev);
	size_t n = 0;
	for (int i = 0; i < iovcnt && n <= PIPE_BUF; i++)
		n += iov[i].iov_len;
	if (n <= PIPE_BUF)
		return real_writev(fd, iov, iovcnt);
	HELD(real_writev(fd, iov, iovcnt));
}
