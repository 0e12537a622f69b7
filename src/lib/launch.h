/*
 * launch.h — starting a command with the agent injected, and waiting for
 * it the way a shell would. Shared by `strata record` and `strata top`.
 *
 * The profile file is created (header and a REC_SESSION chunk) before the
 * command starts; every profiled process appends its own chunks to it.
 */
#ifndef STRATA_LAUNCH_H
#define STRATA_LAUNCH_H

#include <stdint.h>
#include <sys/types.h>

/* --objects: one allocation sample per this many bytes on average
 * (docs/objects.md). */
#define OBJECTS_DEFAULT_RATE 524288ull

struct launch_opts {
	const char *output;      /* profile path */
	int mode;                /* MODE_CPU / MODE_WALL */
	unsigned rate_hz;
	unsigned max_depth;
	int paused;
	int native;               /* --native: native stacks too */
	int perf_map;             /* --perf-map: the agent writes perf maps and jitdumps of JIT code */
	int jit_lines;            /* --jit-lines: NUMBA_DEBUGINFO=1 in the command's environment */
	/* -e: event names joined with '+' (NULL: sample by CPU time) and the
	 * first event's sampling period; the session record lists the names. */
	const char *events;
	uint64_t event_period;
	uint64_t objects_rate;   /* --objects: mean bytes between allocation samples; 0 = off */
	const char *send_options; /* --send: ",send=DIR,every=MS,queue=N" for the agent, or NULL */
	int no_output;           /* --send without a file: the agent in standby, sending only */
	char **argv;             /* command to run */
	int argc;
};

struct launch {
	pid_t pid;
	char output_abs[4096];
	uint64_t session_stream;
	uint64_t start_mono_ns;
};

/* Creates the profile file (header + session chunk). On failure returns -1
 * with a one-line reason in err. */
int profile_create(const struct launch_opts *o, struct launch *l, char *err, size_t errlen);

/* The agent's options (STRATA_OPTIONS, or what an attach loads it with)
 * for o: mode, rate, depth, native, perf maps, objects, events. */
void launch_agent_options(const struct launch_opts *o, char *opts, size_t n);

/* Forks and execs the command with LD_PRELOAD and the STRATA_* variables
 * set. If exec fails, returns -1 with *exit_code set as a shell would
 * (127: not found, 126: not executable) and err filled. */
int launch_start(const struct launch_opts *o, struct launch *l, int *exit_code, char *err, size_t errlen);

/* Waits for the command, passing SIGTERM/SIGHUP/SIGUSR1/SIGUSR2 on to it
 * (SIGINT and SIGQUIT reach it from the terminal directly). Returns the
 * wait status. */
int launch_wait(struct launch *l);

/* Appends the REC_SESSION_END chunk. */
int profile_finish(struct launch *l, int wait_status);

/* Exits the way the command did: same exit code, or the same signal. */
void exit_like(int wait_status) __attribute__((noreturn));

uint64_t monotonic_ns(void);

#endif
