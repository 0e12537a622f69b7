/*
 * link.h — the profiled process and its helper process, strata-agentd.
 *
 * The profiled process starts the helper (link_spawn) as a "clone child"
 * whose exit sends no signal: wait(), waitpid(-1) and SIGCHLD never see
 * it, so a program that reaps its children, or waits for none to be left,
 * behaves as without the agent. The helper runs in a session of its own
 * (terminal signals and kill(0, ...) do not reach it), in /, with none of
 * the program's descriptors: a pipe the program closes reads EOF at the
 * other end as it would without the agent.
 *
 * It inherits, at fixed numbers: the shared region (shm.h), a
 * /proc/self/mem descriptor opened by the profiled process (the helper
 * reads and writes the target's memory with it, with the target's own
 * permission), and the control socket the profiled process bound and
 * listens on (so a client's SO_PEERCRED names the profiled process). The
 * profiled process closes its own copies once the helper runs: while the
 * program runs, the agent holds no descriptor in it (docs/agent.md).
 *
 * Requests, target -> helper, are bits in the shared state (agent.h:
 * link_seq, link_req, link_done), futex words on the shared mapping: POKE
 * (wake the writer now; from the signal handler too), TRIGGERS (open the
 * perf events of threads that asked for one), GROW (extend the region:
 * only the helper holds its descriptor), FINISH (end the stream now, for
 * exit, _exit or exec: the helper drains the rings, writes the end and
 * publishes the ticket). The helper also finishes on its own when the
 * target dies (its pidfd) or execs without saying so (its /proc/PID/mem
 * descriptor reads nothing once the old address space is gone), so a
 * killed process still leaves a complete profile.
 */
#ifndef STRATA_LINK_H
#define STRATA_LINK_H

#include <stddef.h>
#include <stdint.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum link_req {
	LINK_REQ_POKE = 1,
	LINK_REQ_TRIGGERS = 2,
	LINK_REQ_GROW = 4,
	LINK_REQ_FINISH = 8,
};

/* Futexes on the shared mapping: not FUTEX_PRIVATE_FLAG, the two
 * processes wait and wake on the same memfd page. Async-signal-safe. */
static inline long link_futex_wait(_Atomic uint32_t *w, uint32_t v, const struct timespec *rel)
{
	return syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, v, rel, NULL, 0);
}

static inline void link_futex_wake(_Atomic uint32_t *w, int n)
{
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, n, NULL, NULL, 0);
}

/* Descriptor numbers in the helper. */
#define AGENTD_FD_SHM 3
#define AGENTD_FD_MEM 4
#define AGENTD_FD_CTL 5

#define AGENTD_NAME "strata-agentd"

/* ---- the profiled process ---- */

/* Starts the helper for this process (the control socket ctl_fd, or -1).
 * Returns 0, or -1 with a one-line reason in err. */
int link_spawn(int ctl_fd, char *err, size_t errlen);
/* Async-signal-safe: wakes the helper's writer. */
void link_poke(void);
/* Async-signal-safe: asks the helper to end the stream (reason) and waits
 * for its answer, at most timeout_ms. Returns 0 when answered. */
int link_finish(int reason, int timeout_ms);
/* Asks the helper to open the perf events of the threads that want one
 * (tslot.helper_trigger), and waits for it (bounded). */
int link_triggers(void);
/* shm.c's grower once the region's descriptor is the helper's alone: asks
 * the helper to extend the region to `want` bytes, and waits. */
int link_grow(uint64_t want);
/* In a fork child: the parent's link is the parent's. */
void link_forget(void);
/* Whether a helper was started and has not been told to finish. */
int link_up(void);

#endif
