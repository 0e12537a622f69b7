/*
 * jitdump.h — `strata record --perf-map`: the agent tells Linux perf about
 * JIT code. The profiled process creates and maps the jitdump
 * (jitdump-map.c); the helper writes the records (jitdump.c).
 */
#ifndef STRATA_AGENT_JITDUMP_H
#define STRATA_AGENT_JITDUMP_H

#include <stddef.h>
#include <sys/types.h>

/* Where process pid's jitdump is: $STRATA_JITDUMP_DIR, else ~/.debug/jit,
 * else /tmp (the directory is created). Returns 0 or -1. */
int jitdump_path(char *out, size_t n, pid_t pid);

/* The profiled process: creates its jitdump with the header and maps it
 * executable, which is how perf inject finds it. Says on stderr when it
 * cannot. */
void jitdump_map(void);

#endif
