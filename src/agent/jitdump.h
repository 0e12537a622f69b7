/*
 * jitdump.h — `strata record --perf-map`: the agent tells Linux perf about
 * JIT code (see jitdump.c).
 */
#ifndef STRATA_AGENT_JITDUMP_H
#define STRATA_AGENT_JITDUMP_H

/* Registers the JIT listener (agent start-up). Returns 0, or -1 when this
 * build has no JIT discovery (said once on stderr). */
int jitdump_start(void);

#endif
