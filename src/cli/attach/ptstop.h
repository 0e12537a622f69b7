/*
 * ptstop.h — holding every thread of a process still for a moment, and
 * letting it go exactly as it was.
 *
 * Threads are seized (PTRACE_SEIZE: no signal is sent, nothing the
 * process can see but the time) and stopped with PTRACE_INTERRUPT. A
 * signal that arrives for a thread while we hold it is reported to us
 * (a signal-delivery stop) and given back to it when it is let go, so no
 * signal is lost or changed; a process stopped by job control (SIGSTOP,
 * Ctrl-Z) while held stays stopped. Threads created while the process is
 * being stopped are found by reading /proc/PID/task again until no new
 * one appears. A thread that does not stop within the time allowed (in
 * uninterruptible sleep: disk, NFS) is left running and marked; one that
 * is runnable (waiting for a CPU on a loaded machine) is waited for longer.
 */
#ifndef STRATA_PTSTOP_H
#define STRATA_PTSTOP_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

struct ptthread {
	pid_t tid;
	int seized;
	int stopped;             /* in a ptrace stop now */
	int gone;                /* exited meanwhile */
	int pending_sig;         /* a signal it was about to take: given back on release */
	int group_stop;          /* stopped by job control */
	int have_regs;
	struct user_regs_struct regs;
};

struct ptstop {
	pid_t pid;
	struct ptthread *t;
	int n, cap;
	uint64_t stop_ns, release_ns; /* CLOCK_MONOTONIC: first interrupt, last release */
};

/* Seizes and stops every thread of pid, waiting at most timeout_ms for each
 * one. Returns 0 (some threads may be marked not stopped), or -1 with err
 * (ptrace refused, the process is gone). On -1 nothing is left held. */
int ptstop_all(struct ptstop *s, pid_t pid, int timeout_ms, char *err, size_t errlen);

/* Reads the registers of every stopped thread into t[i].regs. */
void ptstop_regs(struct ptstop *s);

/* Lets every held thread go (PTRACE_DETACH), giving back pending signals.
 * The registers are not written. */
void ptstop_release(struct ptstop *s);

/* Lets one thread go (as ptstop_release). */
void ptstop_release_one(struct ptthread *t);

/* Waits for thread t's next stop, at most timeout_ms; the stop's status
 * in *status. 0, or -1 (timeout, or the thread is gone). */
int ptstop_wait(struct ptthread *t, int timeout_ms, int *status);

struct ptthread *ptstop_find(struct ptstop *s, pid_t tid);

uint64_t ptstop_now_ns(void);

#endif
