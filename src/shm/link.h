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
 * link_seq, link_req, link_done; link_grown answers GROW on its own),
 * futex words on the shared mapping, and a ring of the region's doorbell
 * (shm_doorbell: the helper may serve a tree of processes): POKE
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

/* Rings the region's doorbell (shm_doorbell), which the helper serving
 * the region's processes waits on: after a link request, a join, or to
 * wake its main thread. Async-signal-safe. */
static inline void link_ring(_Atomic uint32_t *bell, int n)
{
	if (!bell)
		return;
	__atomic_fetch_add((uint32_t *)bell, 1, __ATOMIC_SEQ_CST);
	link_futex_wake(bell, n);
}

/* Descriptor numbers in the helper. */
#define AGENTD_FD_SHM 3
#define AGENTD_FD_MEM 4
#define AGENTD_FD_CTL 5

#define AGENTD_NAME "strata-agentd"

/* ---- a fork child joining its tree's helper ----
 *
 * A fork child stays in its parent's region (where the region is mapped
 * whole: no RLIMIT_AS) with a state of its own, and is served by the
 * helper already serving the tree: the helper listens on an abstract
 * unix socket named by its pid and a random key (shm_tree), the child
 * connects and sends a struct link_join with, as SCM_RIGHTS, its own
 * /proc/self/mem and its control socket (if it has one); the helper
 * checks the sender (SO_PEERCRED) against the state named, starts
 * serving it and answers with an int: 0, or an errno (the reason is then
 * in the state's helper_why). A child that cannot connect starts a
 * region and a helper of its own. */
#define LINK_JOIN_MAGIC 0x6a6f696eu /* "join" */

struct link_join {
	uint32_t magic;
	int32_t pid;
	uint64_t state;     /* the child's agent state: its offset in the region */
	uint32_t has_ctl;   /* the second descriptor is its control socket */
	uint32_t pad;
};

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

/* The tree socket's address; returns its length for bind/connect. */
static inline socklen_t link_tree_addr(struct sockaddr_un *a, int32_t helper, uint64_t key)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "strata-tree-%d-%016llx", (int)helper,
			 (unsigned long long)key);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

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
/* In a fork child whose state is in its parent's region: joins the
 * tree's helper. 0: served (or refused by the helper, which said why in
 * helper_why; link_up() tells); -1: no helper to join (err says why),
 * the child makes a region and a helper of its own. */
int link_join(int ctl_fd, char *err, size_t errlen);
/* In a fork child, before it joins: the region's descriptor, taken from
 * the tree's helper (read access to a process of our own user), so the
 * child can grow the region until the helper serves it. 0, or -1. */
int link_tree_region(void);
/* Whether a helper was started and has not been told to finish. */
int link_up(void);

#endif
