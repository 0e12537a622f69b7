/*
 * procstat.h — reading /proc/PID/stat and /proc/PID/task/TID/stat, whose
 * second field (the command name, in parentheses) may hold spaces and ')':
 * every field after it is found from the last ')'. Used by the agent, its
 * helper and the CLI. Only open, read and close: callable where the agent
 * may not allocate.
 */
#ifndef STRATA_PROCSTAT_H
#define STRATA_PROCSTAT_H

#include <stddef.h>

/* Reads the stat file at path into buf (n bytes, NUL-terminated) and
 * returns the last ')' in it, from which procstat_field counts; NULL if
 * the file cannot be read. */
char *procstat_read(const char *path, char *buf, size_t n);

/* Field `field` (numbered as in proc(5): 3 is the state, 4 the parent's
 * pid, 22 the start time, 52 the exit code), counted from `rp` as returned
 * by procstat_read; NULL past the end. */
const char *procstat_field(const char *rp, int field);

#endif
