/*
 * pyproc.h — a running process seen from outside, without loading anything
 * into it: who may read it, its memory (/proc/PID/mem), its mapped objects
 * and their symbols, and the CPython in it (version, runtime, types) with
 * the matching strata-pyreader-X.Y.Z.so loaded in the CLI. Shared by
 * `strata stack` and by attaching to a process started without strata
 * (inject.c).
 */
#ifndef STRATA_PYPROC_H
#define STRATA_PYPROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "py/pyapi.h"

struct pyproc {
	pid_t pid;
	int mem;                /* /proc/PID/mem (read-write where allowed) */
	char exe[4096];         /* the executable, as the process sees it */
	char pyobj[4096];       /* the object that holds _PyRuntime: libpython or the executable */
	char pyfile[4400];      /* the same, openable from here (through /proc/PID/root) */
	uint64_t pybias;        /* its load bias */
	char version[32];       /* "3.11.2"; "3.8" where only the minor could be told */
	struct strata_pysyms syms;
	char reader_path[4400];
	const struct strata_pyreader *reader;
};

/* Checks that pid exists and that we may read it (its user, Yama's
 * ptrace_scope), and opens its memory. Returns 0, or -1 with one line in
 * err saying the cause and what to do. */
int pyproc_open(struct pyproc *p, pid_t pid, char *err, size_t errlen);
void pyproc_close(struct pyproc *p);

/* A process caught just after its exec runs its dynamic loader for a
 * moment before the loader has mapped its libraries (libpython, the C
 * library). Waits, up to timeout_ms, until a dynamically linked process
 * has its C library mapped (the loader maps libpython before it); adds
 * the time waited to *waited_ms. Returns 0, or -1 with err when the
 * loader was still at it when the time ran out. A static executable is
 * never waited for. */
int pyproc_wait_loaded(struct pyproc *p, int timeout_ms, double *waited_ms, char *err, size_t errlen);

/* Finds the CPython in the process (version, _PyRuntime and core types)
 * and loads the reader built for that version from agent_dir. Returns 0,
 * or -1 with err (not Python, unsupported version, no reader build and the
 * make command that builds it). */
int pyproc_python(struct pyproc *p, const char *agent_dir, char *err, size_t errlen);

int pyproc_read(struct pyproc *p, void *dst, uint64_t addr, size_t n);
int pyproc_write(struct pyproc *p, uint64_t addr, const void *src, size_t n);

/* For struct strata_remote.read: ctx is the struct pyproc. */
int pyproc_read_cb(void *ctx, void *dst, uint64_t addr, size_t n);

/* One mapping of /proc/PID/maps. */
struct pmap {
	uint64_t start, end, off;
	char perms[5];
	char path[4096];
};

/* Calls fn for each mapping; stops early when fn returns non-zero.
 * Returns 0, or -1 if the maps could not be read. */
int pyproc_maps(pid_t pid, int (*fn)(const struct pmap *m, void *data), void *data);

/* The first mapped object whose path ends with `suffix` (a name like
 * "/libc.so.6", or a prefix test when suffix ends with '*': "/libpython3*").
 * Fills path (as the target names it), file (the same file, openable from
 * here: through /proc/PID/root) and the load bias; 0, or -1 if none. */
int pyproc_object(pid_t pid, const char *suffix, char *path, size_t n, char *file, size_t fn, uint64_t *bias);

/* The same for the object at `path` whose first mapping (as the maps list
 * it) starts at `start` with file offset `off`: no new read of the maps. */
int pyproc_object_at(pid_t pid, const char *path, uint64_t start, uint64_t off, char *file, size_t fn,
		     uint64_t *bias);

/* Where section `name` of a mapped object is in the process (the first
 * object that has one): its address and size; 0, or -1 if none. */
int pyproc_section(pid_t pid, const char *name, uint64_t *addr, uint64_t *size);

/* The text of one line ("Uid:", "State:") of /proc/PID/status after the
 * key, or "" . */
const char *proc_status_field(pid_t pid, const char *key, char *out, size_t n);

#endif
