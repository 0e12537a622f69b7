/*
 * inject.h — loading the agent into a Python process that was started
 * without it (docs/attach.md, "Attaching").
 *
 * On CPython 3.14+ the interpreter's own hook is tried first (rexec.h,
 * PEP 768); where it is not open (turned off, a build without it) or no
 * thread runs bytecode within 2 s, and before 3.14: with ptrace, one thread of the process is borrowed at a safe point (a
 * moment where it holds no lock that loading a library needs: not inside
 * the C library's allocator or the dynamic loader), made to call dlopen()
 * on libstrata-agent.so and then strata_agent_load() (the agent comes up
 * in standby, as `import strata` starts it), and put back exactly as it
 * was: registers, vector registers, errno, and the stack bytes used. The
 * other threads run meanwhile. If no thread reaches a safe point in time,
 * nothing is changed and the reason is given. x86-64 only.
 */
#ifndef STRATA_INJECT_H
#define STRATA_INJECT_H

#include <stddef.h>
#include <sys/types.h>

enum inject_how { INJECT_PTRACE, INJECT_PEP768 };

struct inject_stats {
	int how;           /* enum inject_how: the way the agent got in */
	char not_pep768[256]; /* 3.14+ loaded with ptrace: why not through PEP 768 */
	double wait_ms;    /* waiting for a safe point */
	double call_ms;    /* the borrowed thread's time in dlopen + setup */
	int tries;         /* pauses until a safe point was found */
	pid_t tid;         /* the thread borrowed */
};

/* Loads and starts the agent from agent_dir in process pid with options
 * (strata_agent_load's; NULL: its defaults), waiting at most timeout_ms
 * for a safe point. Returns 0, or -1 with one line in err (the process is
 * then as it was, unless err says otherwise). */
int inject_agent(pid_t pid, const char *agent_dir, const char *options, int timeout_ms, struct inject_stats *st,
		 char *err, size_t errlen);

#endif
