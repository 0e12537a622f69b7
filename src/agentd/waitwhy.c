/*
 * waitwhy.c — why a blocked thread waits (wall mode; format 1.4 SAMPLE
 * wait, docs/async.md "Why a thread is idle"): the system call it sleeps
 * in, from /proc/PID/task/TID/syscall, and for a futex whether it is the
 * interpreter's GIL (its address inside the GIL state, where the mutex
 * and condition variables a thread waiting for the GIL sleeps on live).
 *
 * The file needs the same permission as ptrace (a process's own user, no
 * Yama restriction between the helper and the program); where it cannot
 * be read the reason is left unknown and the sample has no reason frame.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shm/agent.h"
#include "agentd.h"
#include "tasks.h"
#include "waitwhy.h"
#include "common/format.h"
#include "target.h"

struct waitwhy_state {
	uint64_t gil_lo, gil_hi; /* the GIL state, once the reader found it */
	int denied;              /* the syscall file cannot be read: stop trying */
};

TARGET_STATE(struct waitwhy_state, waitwhy, NULL)
#define G (*waitwhy_of(agentd_target))

/* The interpreter's GIL state, looked for at each futex wait until found.
 * Before it exists (3.12+ create it with the main interpreter) no thread
 * can wait for it, so a futex then is rightly some other lock. It is not
 * put off: a lookup that failed during start-up and was not tried again
 * for a second called every wait for the GIL in that second a lock (a
 * third of a 3 s run, under load, on 3.14 and 3.15). The cost is a few
 * remote reads per blocking episode in a futex, and only until found. */
static void gil_find(void)
{
	if (G.gil_lo || !agentd_reader->gil_range)
		return;
	uint64_t lo = 0, hi = 0;
	pthread_mutex_lock(&agentd_reader_lock);
	int rc = agentd_reader->gil_range(&lo, &hi);
	pthread_mutex_unlock(&agentd_reader_lock);
	if (rc == 0 && lo && hi > lo && hi - lo < 65536) {
		G.gil_lo = lo;
		G.gil_hi = hi;
	}
}

static int is_one_of(long nr, const long *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (list[i] == nr)
			return 1;
	return 0;
}
#define ONE_OF(nr, list) is_one_of(nr, list, sizeof(list) / sizeof(list[0]))

static const long io_calls[] = {
	SYS_read, SYS_write, SYS_readv, SYS_writev, SYS_pread64, SYS_pwrite64, SYS_preadv, SYS_pwritev,
	SYS_preadv2, SYS_pwritev2, SYS_recvfrom, SYS_recvmsg, SYS_recvmmsg, SYS_sendto, SYS_sendmsg,
	SYS_sendmmsg, SYS_accept, SYS_accept4, SYS_connect, SYS_fsync, SYS_fdatasync, SYS_sync_file_range,
	SYS_sendfile, SYS_splice, SYS_tee, SYS_openat, SYS_io_getevents, SYS_io_pgetevents, SYS_io_uring_enter,
#ifdef SYS_open
	SYS_open,
#endif
};
static const long poll_calls[] = {
	SYS_pselect6, SYS_ppoll, SYS_epoll_pwait,
#ifdef SYS_select
	SYS_select,
#endif
#ifdef SYS_poll
	SYS_poll,
#endif
#ifdef SYS_epoll_wait
	SYS_epoll_wait,
#endif
#ifdef SYS_epoll_pwait2
	SYS_epoll_pwait2,
#endif
};
static const long sleep_calls[] = { SYS_nanosleep, SYS_clock_nanosleep };
static const long lock_calls[] = {
	SYS_flock, SYS_semop, SYS_semtimedop,
#ifdef SYS_futex_waitv
	SYS_futex_waitv,
#endif
};
static const long child_calls[] = { SYS_wait4, SYS_waitid };
static const long signal_calls[] = {
	SYS_rt_sigsuspend, SYS_rt_sigtimedwait,
#ifdef SYS_pause
	SYS_pause,
#endif
};

/* The reason for system call nr with arguments a. */
static uint8_t classify(long nr, const unsigned long long *a)
{
	if (nr == SYS_futex) {
		gil_find();
		return G.gil_lo && a[0] >= G.gil_lo && a[0] < G.gil_hi ? WAITR_GIL : WAITR_LOCK;
	}
	/* Python before 3.11 sleeps in select() on no file at all;
	 * poll() on none is a sleep too. */
#ifdef SYS_select
	if (nr == SYS_select && a[0] == 0)
		return WAITR_SLEEP;
#endif
#ifdef SYS_poll
	if (nr == SYS_poll && a[1] == 0)
		return WAITR_SLEEP;
#endif
	if ((nr == SYS_pselect6 && a[0] == 0) || (nr == SYS_ppoll && a[1] == 0))
		return WAITR_SLEEP;
	if (ONE_OF(nr, sleep_calls))
		return WAITR_SLEEP;
	if (ONE_OF(nr, poll_calls))
		return WAITR_POLL;
	if (ONE_OF(nr, io_calls))
		return WAITR_IO;
	if (ONE_OF(nr, lock_calls))
		return WAITR_LOCK;
	if (ONE_OF(nr, child_calls))
		return WAITR_CHILD;
	if (ONE_OF(nr, signal_calls))
		return WAITR_SIGNAL;
	return WAITR_SYSCALL;
}

uint8_t wait_why(pid_t tid)
{
	if (G.denied)
		return WAITR_UNKNOWN;
	char path[80], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)agent.pid, (int)tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		/* Not permitted (Yama, another user): the same for every
		 * thread, so not asked again. A thread that ended: ENOENT. */
		if (errno == EACCES || errno == EPERM)
			G.denied = 1;
		return WAITR_UNKNOWN;
	}
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return WAITR_UNKNOWN;
	buf[n] = 0;
	if (!strncmp(buf, "running", 7))
		return WAIT_WOKE; /* it woke up since its state was read */
	long nr;
	unsigned long long a[6] = { 0 };
	int got = sscanf(buf, "%ld %llx %llx %llx %llx %llx %llx", &nr, &a[0], &a[1], &a[2], &a[3], &a[4], &a[5]);
	if (got < 1)
		return WAITR_UNKNOWN;
	if (nr < 0)
		return WAITR_NOSYSCALL;
	return classify(nr, a);
}
