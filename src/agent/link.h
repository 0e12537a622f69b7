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
 * It inherits, at fixed numbers: the shared region (shm.h), one end of a
 * socket pair (messages below), a /proc/self/mem descriptor opened by the
 * profiled process (the helper reads and writes the target's memory with
 * it, with the target's own permission), and the control socket the
 * profiled process bound and listens on (so a client's SO_PEERCRED names
 * the profiled process).
 *
 * Messages, target -> helper: POKE (wake the writer now; from the signal
 * handler too), FINISH (end the stream now, for exit, _exit or exec: the
 * helper drains the rings, writes the end and answers ACK). The helper also finishes on its own when the target dies
 * or execs without saying so, so a killed process still leaves a complete
 * profile.
 */
#ifndef STRATA_LINK_H
#define STRATA_LINK_H

#include <stddef.h>
#include <stdint.h>

enum link_type {
	LINK_POKE = 1,
	LINK_FINISH = 3, /* arg = enum process_end_reason */
	LINK_ACK = 4,
};

struct link_msg {
	uint32_t type;
	uint32_t arg;
	uint64_t a;
};

/* Descriptor numbers in the helper. */
#define AGENTD_FD_SHM 3
#define AGENTD_FD_LINK 4
#define AGENTD_FD_MEM 5
#define AGENTD_FD_CTL 6

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
/* The helper's process, as a pidfd (for pidfd_getfd), or -1. */
int link_helper_pidfd(void);
/* In a fork child: the parent's link is the parent's. */
void link_forget(void);
/* Whether a helper was started and has not been told to finish. */
int link_up(void);

#endif
