/*
 * handoff.c — a signal sent to the process goes to the thread it would
 * reach without the profiler.
 *
 * A process-directed signal (kill PID, an interval timer's SIGALRM, a
 * child's SIGCHLD) waits in the process's shared queue; the kernel picks
 * a thread to wake for it (complete_signal): the thread it was sent to,
 * the thread-group leader for most of them, when that thread does not
 * block it. The woken thread takes it when it next runs. But any thread
 * that recomputes its pending state meanwhile (rt_sigreturn,
 * rt_sigprocmask) and does not block the signal takes it first. Our
 * SIGPROF handler ends in rt_sigreturn, and it runs on busy threads, a
 * thousand times a second: a signal that came during a sample, or in the
 * instant before it, was taken by the sampled thread as it returned, and
 * the main thread, woken, found nothing and went back to its pause(),
 * sleep(), select() or read(). CPython runs Python handlers in the main
 * thread only, and only a signal that lands there cuts its blocking call
 * short: a SIGALRM timeout then came seconds late, a pause() never
 * returned (issue 27). Without the profiler a computing thread never
 * enters the kernel's signal path, so the thread the kernel chose gets it.
 *
 * So before a sampled thread returns with a program signal pending that
 * it would take, it asks whether the signal is its own: one sent to it
 * (tgkill, a fault, its own SIGPIPE) is; one sent to the process is left
 * to the leader when the leader can take it (it does not block it, is
 * not stopped, not a zombie): the thread waits, bounded, for the leader
 * to take it. Async-signal-safe (raw system calls, a stack buffer), and
 * all of it off the sample's common path: the caller found a pending
 * signal with one rt_sigpending first.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shm/agent.h"

/* How long a thread waits for the leader to take a signal before it takes
 * it itself: the leader's wake-up on a loaded machine (it is runnable at
 * once; a busy CPU delays it by a few time slices), with room. */
#define HANDOFF_MAX_NS (50u * 1000000u)
/* The first part of the wait yields the CPU (the leader may be queued on
 * this one); then short sleeps, doubling. */
#define HANDOFF_SPIN_NS (200u * 1000u)
#define HANDOFF_SLEEP_MIN_NS (50u * 1000u)
#define HANDOFF_SLEEP_MAX_NS (2u * 1000000u)
/* How long a thread passing a signal on waits to learn the mask the leader
 * returns to from our handler (leader_takes). */
#define HANDOFF_LEADER_MAX_NS (20u * 1000000u)

struct tstatus {
	char state;              /* 'R', 'S', 'D', 'T', 't', 'Z', 'X', ... */
	uint64_t sigpnd, shdpnd, sigblk;
	unsigned found;          /* bits: 1 state, 2 SigPnd, 4 ShdPnd, 8 SigBlk */
};

static uint64_t hex64(const char *p, const char *end)
{
	uint64_t v = 0;
	for (; p < end; p++) {
		char c = *p;
		unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
			   : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
			   : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 16u;
		if (d == 16)
			break;
		v = v << 4 | d;
	}
	return v;
}

static int starts(const char *line, size_t n, const char *key, size_t kn)
{
	if (n < kn)
		return 0;
	for (size_t i = 0; i < kn; i++)
		if (line[i] != key[i])
			return 0;
	return 1;
}

static void status_line(const char *line, size_t n, struct tstatus *st)
{
#define KEY(k) starts(line, n, k, sizeof(k) - 1)
	if (KEY("State:\t") && n > 7) {
		st->state = line[7];
		st->found |= 1;
	} else if (KEY("SigPnd:\t")) {
		st->sigpnd = hex64(line + 8, line + n);
		st->found |= 2;
	} else if (KEY("ShdPnd:\t")) {
		st->shdpnd = hex64(line + 8, line + n);
		st->found |= 4;
	} else if (KEY("SigBlk:\t")) {
		st->sigblk = hex64(line + 8, line + n);
		st->found |= 8;
	}
#undef KEY
}

/* Reads a thread's /proc status: a stream of lines of any length (Groups
 * can be long), of which only the start of each is kept. Returns 0 when
 * the fields wanted were all found. */
static int status_read(const char *path, struct tstatus *st, unsigned want)
{
	st->found = 0;
	int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char buf[1024], line[48];
	size_t ll = 0;
	for (;;) {
		long r = syscall(SYS_read, fd, buf, sizeof(buf));
		if (r <= 0)
			break;
		for (long i = 0; i < r; i++) {
			if (buf[i] == '\n') {
				status_line(line, ll, st);
				ll = 0;
			} else if (ll < sizeof(line)) {
				line[ll++] = buf[i];
			}
		}
		if ((st->found & want) == want)
			break;
	}
	syscall(SYS_close, fd);
	return (st->found & want) == want ? 0 : -1;
}

/* "/proc/self/task/<tid>/status" */
static void task_status_path(char *out, pid_t tid)
{
	static const char head[] = "/proc/self/task/", tail[] = "/status";
	char digits[16];
	int nd = 0;
	unsigned v = (unsigned)tid;
	do {
		digits[nd++] = (char)('0' + v % 10);
		v /= 10;
	} while (v && nd < (int)sizeof(digits));
	char *p = out;
	for (const char *h = head; *h; h++)
		*p++ = *h;
	while (nd)
		*p++ = digits[--nd];
	for (const char *t = tail; *t; t++)
		*p++ = *t;
	*p = 0;
}

static uint64_t pending_word(void)
{
	sigset_t p;
	if (sigpending(&p) != 0)
		return 0;
	return (uint64_t)p.__val[0];
}

/* Counts a wait of `waited` ns (for `strata ctl PID status`). */
static void wait_account(uint64_t waited, int timed_out)
{
	atomic_fetch_add_explicit(&agent.handoff_waits, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&agent.handoff_ns, waited, memory_order_relaxed);
	if (timed_out)
		atomic_fetch_add_explicit(&agent.handoff_timeouts, 1, memory_order_relaxed);
	uint64_t max = atomic_load_explicit(&agent.handoff_max_ns, memory_order_relaxed);
	while (waited > max &&
	       !atomic_compare_exchange_weak_explicit(&agent.handoff_max_ns, &max, waited, memory_order_relaxed,
						      memory_order_relaxed))
		;
}

/* One step of a bounded wait that began at t0: yields the CPU first (the
 * leader may be queued on this one), then sleeps, doubling from *sleep_ns.
 * Returns the time waited so far. */
static uint64_t wait_step(uint64_t t0, uint64_t *sleep_ns)
{
	uint64_t waited = mono_ns() - t0;
	if (waited < HANDOFF_SPIN_NS) {
		syscall(SYS_sched_yield);
	} else {
		struct timespec ts = { 0, (long)*sleep_ns };
		syscall(SYS_nanosleep, &ts, NULL);
		if (*sleep_ns < HANDOFF_SLEEP_MAX_NS)
			*sleep_ns *= 2;
	}
	return mono_ns() - t0;
}

/* Waits until none of `sigs` is pending any more, or the bound passes.
 * Returns those still pending. Every signal but the synchronous ones is
 * blocked in our handler, so rt_sigpending shows them. */
static uint64_t wait_taken(uint64_t sigs)
{
	uint64_t t0 = mono_ns(), waited, sleep_ns = HANDOFF_SLEEP_MIN_NS, left;
	do {
		waited = wait_step(t0, &sleep_ns);
		left = pending_word() & sigs;
	} while (left && waited < HANDOFF_MAX_NS);
	wait_account(waited, left != 0);
	return left;
}

/* Whether the leader (tid pid) could take the signals `sigs` now: it
 * does not block them, and is neither gone (a zombie while other threads
 * run) nor stopped. Returns those it could take; all of them if its
 * state cannot be read. */
static uint64_t leader_takes(pid_t pid, uint64_t sigs)
{
	/* Every signal a mask can hold, blocked: what our handler's mask reads
	 * as (and what a thread blocking them all itself has). */
	const uint64_t unblockable = (1ull << (SIGKILL - 1)) | (1ull << (SIGSTOP - 1)) | (1ull << (SIGSEGV - 1)) |
				     (1ull << (SIGBUS - 1)) | (1ull << (SIGILL - 1)) | (1ull << (SIGFPE - 1)) |
				     (1ull << (SIGTRAP - 1)) | (1ull << (SIGSYS - 1)) | (1ull << 31) | (1ull << 32);
	char path[64];
	task_status_path(path, pid);
	struct tslot *ls = slot_by_tid(pid);
	uint64_t t0 = 0, sleep_ns = HANDOFF_SLEEP_MIN_NS, waited = 0, takes;
	for (;;) {
		struct tstatus lead;
		if (status_read(path, &lead, 1 | 8) != 0) {
			takes = sigs;
			break;
		}
		if (lead.state == 'Z' || lead.state == 'X' || lead.state == 'T' || lead.state == 't') {
			takes = 0;
			break;
		}
		/* In our handler it blocks everything for a moment: what
		 * counts is the mask of the code it returns to, which the
		 * handler keeps in its slot (as the wall sampler's signal can
		 * find it entering a blocking call, which is restarted
		 * after). */
		if (ls && ls->in_prof) {
			takes = sigs & ~ls->prof_mask;
			break;
		}
		if (!ls || (lead.sigblk | unblockable) != ~0ull) {
			takes = sigs & ~lead.sigblk;
			break;
		}
		/* Everything blocked, but not in our handler as far as its
		 * slot says: between the handler's end and its rt_sigreturn
		 * (the slot's mask is the one it returns to), or between the
		 * kernel's delivery of a sample and the handler's first store
		 * (the slot's mask is the last sample's: a stale one that
		 * blocks the signal, taken in the program's handler for it,
		 * made the thread that got the signal run the handler itself
		 * and left the leader's read() blocked). Either lasts a few
		 * instructions, unless the leader is preempted there: when the
		 * slot's mask blocks a signal, look again until the leader is
		 * in the handler or out of it, within a bound. A leader that
		 * blocks everything itself has that in its slot's mask. */
		uint64_t held = ls->prof_mask;
		if (!(sigs & held) || (held | unblockable) == ~0ull || waited >= HANDOFF_LEADER_MAX_NS) {
			takes = sigs & ~held;
			break;
		}
		if (!t0)
			t0 = mono_ns();
		waited = wait_step(t0, &sleep_ns);
	}
	if (t0)
		wait_account(waited, waited >= HANDOFF_LEADER_MAX_NS);
	return takes;
}

uint64_t handoff_settle(uint64_t sigs)
{
	if (!sigs)
		return 0;
	/* The leader is the kernel's first choice: what it has pending
	 * (shared or its own) is its to take. */
	pid_t pid = (pid_t)syscall(SYS_getpid), tid = (pid_t)syscall(SYS_gettid);
	if (tid == pid)
		return sigs;
	/* Those sent to this thread (tgkill, pthread_kill, a fault) are its
	 * own; those sent to the process may be another's. A failed read (no
	 * descriptor left) takes every one for the process's. */
	uint64_t others = sigs;
	struct tstatus me;
	if (status_read("/proc/thread-self/status", &me, 2 | 4) == 0)
		others &= me.shdpnd & ~me.sigpnd;
	/* One the leader blocks was not meant for it: the kernel woke
	 * another thread, or none. (In our handler itself the leader blocks
	 * everything for a moment: leader_takes looks at the mask it
	 * returns to.) */
	if (others)
		others = leader_takes(pid, others);
	if (!others)
		return sigs;
	return (sigs & ~others) | wait_taken(others);
}

/*
 * Passing a signal on. The end of a sample is not the only moment our
 * sampling puts a thread in the kernel's signal path: when a sample
 * signal is delivered, the kernel takes every other signal still pending
 * for the process into account, and when our handler's mask blocks one
 * sent to the process it wakes the next thread in the thread list that
 * can take it (retarget_shared_pending), in case this thread had been the
 * one chosen for it. With several busy threads, that is another busy
 * thread, which takes it before the main thread, woken for it when it
 * came, gets to run. Nothing can stop that beforehand, so the program's
 * handlers are behind on_program (signals.c), which asks here whether
 * the signal it got was sent to the process, and if so, and if the leader
 * can take it, sends it to the leader instead.
 *
 * Only the thread itself may queue a signal with the kernel's codes
 * (SI_USER, SI_KERNEL, CLD_*), so the leader gets it as SI_QUEUE, from
 * us, naming a copy of the original siginfo here, which on_program hands
 * to the program's handler in its place.
 */

/* Whether a signal this thread got was sent to the process, as far as
 * its siginfo tells. Not: the faults; what the kernel sends a thread of
 * its own (a write to a closed pipe or past the file size limit, SIGIO
 * and SIGURG to an F_SETOWN_EX thread, the CPU-time signals, which go to
 * the thread that was running); tgkill (SI_TKILL); and what may go either
 * way (sigqueue or a thread's rt_tgsigqueueinfo, POSIX timers, SIGIO):
 * those stay where they landed. Yes: kill() (SI_USER), the kernel's own
 * (SI_KERNEL: interval timers, the terminal), a child's SIGCHLD. */
static int sent_to_process(int sig, const siginfo_t *si)
{
	switch (sig) {
	case SIGSEGV: case SIGBUS: case SIGILL: case SIGFPE: case SIGTRAP: case SIGSYS:
	case SIGPIPE: case SIGXFSZ: case SIGIO: case SIGURG: case SIGVTALRM: case SIGXCPU: case SIGPROF:
		return 0;
	}
	if (si->si_code == SI_USER || si->si_code == SI_KERNEL)
		return 1;
	return sig == SIGCHLD && si->si_code > 0;
}

/* The original siginfo of a signal passed on, one per signal number (a
 * signal below SIGRTMIN is pending at most once per thread anyway), under
 * a sequence count: odd while written. */
static struct {
	_Atomic uint32_t seq;
	siginfo_t si;
} passed[32];

int handoff_reroute(int sig, const siginfo_t *si)
{
	/* Real-time signals queue, each in its order: left where they land. */
	if (!si || sig <= 0 || sig >= 32 || !agent.active || !sent_to_process(sig, si))
		return 0;
	pid_t pid = (pid_t)syscall(SYS_getpid), tid = (pid_t)syscall(SYS_gettid);
	if (tid == pid || !leader_takes(pid, 1ull << (sig - 1)))
		return 0;
	uint32_t q = atomic_load_explicit(&passed[sig].seq, memory_order_relaxed);
	atomic_store_explicit(&passed[sig].seq, q | 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	passed[sig].si = *si;
	atomic_store_explicit(&passed[sig].seq, (q | 1) + 1, memory_order_release);
	siginfo_t to;
	for (size_t i = 0; i < sizeof(to); i++)
		((volatile char *)&to)[i] = 0;
	to.si_signo = sig;
	to.si_code = SI_QUEUE;
	to.si_pid = pid;
	to.si_uid = (uid_t)syscall(SYS_getuid);
	to.si_value.sival_ptr = &passed[sig];
	if (syscall(SYS_rt_tgsigqueueinfo, pid, pid, sig, &to) != 0)
		return 0;
	atomic_fetch_add_explicit(&agent.handoff_reroutes, 1, memory_order_relaxed);
	return 1;
}

siginfo_t *handoff_original(int sig, siginfo_t *si, siginfo_t *buf)
{
	if (!si || sig <= 0 || sig >= 32 || si->si_code != SI_QUEUE || si->si_value.sival_ptr != (void *)&passed[sig] ||
	    si->si_pid != (pid_t)syscall(SYS_getpid))
		return si;
	for (int tries = 0; tries < 100; tries++) {
		uint32_t q = atomic_load_explicit(&passed[sig].seq, memory_order_acquire);
		if (q & 1)
			continue;
		*buf = passed[sig].si;
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&passed[sig].seq, memory_order_relaxed) == q)
			return buf;
	}
	return si;
}
