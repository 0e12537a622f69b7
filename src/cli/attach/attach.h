/*
 * attach.h — recording a process that is already running, through its
 * agent's control channel: shared by `strata record --pid` and
 * `strata top --pid`.
 *
 * The CLI creates the profile (file header and a session naming the
 * process's command line), hands the agent a descriptor for it, and the
 * agent streams the process into it from then on; at the end the agent is
 * detached (its stream ended, sampling off, the process running on) and
 * the session closed. An agent that already records somewhere (started by
 * `strata record`) can instead be borrowed: its own output is read, and its
 * sampling state restored at the end.
 */
#ifndef STRATA_ATTACH_H
#define STRATA_ATTACH_H

#include <sys/types.h>

#include "lib/launch.h"

/* What the caller asks of the agent. Its sampling settings (mode,
 * native stacks, events, depth, perf maps, allocations) are fixed when the agent
 * starts: an attach that loads it loads it with these; an agent already
 * running with other settings is refused (when `fixed`). */
struct attach_want {
	const char *options;   /* the agent's options (launch_agent_options); NULL: its defaults */
	int fixed;             /* the settings below were asked for */
	int mode;              /* MODE_CPU / MODE_WALL */
	int native, perf_map;
	unsigned max_depth;
	const char *events;    /* '+'-joined names; NULL or "": sampling by time */
	int jit_lines;         /* the process must have NUMBA_DEBUGINFO set (Numba's line tables) */
	unsigned long long objects; /* --objects: its rate in bytes; 0: allocations not sampled */
	const char *send;      /* --send: the attach also sends, these request lines (send=DIR, every=, queue=) */
};

/* The settings of o asked of the agent: its options string (written into
 * opts, which must outlive w) and the fields compared with a running
 * agent's, `fixed` when the caller gave any of them. */
void attach_want_from(struct attach_want *w, const struct launch_opts *o, int fixed, char *opts, size_t n);

struct attach {
	pid_t pid;
	int ours;               /* we handed over the output (else borrowed) */
	int borrowed_sampling;  /* borrowed: sampling was on before us */
	struct launch l;        /* ours: the profile we created */
	char output[4096];      /* the file the samples go to */
	char python[64];
	char mode[8];
	unsigned rate;
	char ctl_dir[128];      /* where its control socket is (and its fork children's) */
};

/* Attaches to pid. path: the profile to create (ours). rate: 0 keeps the
 * agent's. borrow: if the agent already has an output, use it rather than
 * failing. want: NULL, or the settings asked for. Returns 0, or -1 with a
 * one-line reason in err. */
int attach_start(struct attach *a, pid_t pid, const char *path, unsigned rate, int paused, int borrow,
		 const struct attach_want *want, char *err, size_t errlen);

/* Makes sure process pid has a running agent with a control channel:
 * one started with it, or one loaded now (inject.h) into a Python process
 * started without it, with options (NULL: the agent's defaults); says so
 * on stderr unless quiet. Returns 0, or -1 with a one-line reason in err. */
int attach_ensure_agent(pid_t pid, int quiet, const char *options, char *err, size_t errlen);

/* Sampling on or off in the attached process. */
int attach_sampling(struct attach *a, int on, char *err, size_t errlen);

/* Ends the attach: detaches (ours) or restores the sampling state
 * (borrowed); a process that died meanwhile is not an error. Closes our
 * session. Returns 0 or -1 (err filled). */
int attach_end(struct attach *a, char *err, size_t errlen);

/* A process that exists and is not a zombie. */
int attach_alive(pid_t pid);

/* Whether process pid's agent helper (strata-agentd) is still running:
 * it ends pid's stream after pid has gone. */
int agent_helper_alive(pid_t pid);

/* The processes whose helpers hold `path` open (they go on writing to
 * it): up to max pids into pids. Returns how many were found. A daemon
 * the command started is still running when the command ends, and its
 * stream may not be in the file yet (it appears with its first samples). */
int agent_helpers_writing(const char *path, pid_t *pids, int max);

/* Whether a helper whose process is gone still holds `path` open: it is
 * writing the end of that process's stream (which may not be in the
 * file yet at all, for a process killed a moment after it started). */
int agent_helpers_finishing(const char *path);

#endif
