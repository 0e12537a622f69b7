/*
 * remote.h — the helper's view of the profiled process: its memory and its
 * loaded objects.
 *
 * Memory is read (and the few words the helper updates, written) through
 * a /proc/PID/mem descriptor that the profiled process opened itself and
 * handed over, so no ptrace permission is needed beyond the target's own,
 * and an unmapped address is an error, never a fault. After the target
 * execs, the descriptor still refers to the old address space: reads
 * fail instead of reading the new program.
 *
 * Loaded objects come from the target's dynamic linker list (_r_debug's
 * link_map chain, a stable part of glibc's ABI), their program headers
 * from the files (the vDSO's from memory).
 */
#ifndef STRATA_REMOTE_H
#define STRATA_REMOTE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

int remote_init(pid_t pid, int mem_fd);
pid_t remote_pid(void);

/* Copies n bytes at the target's addr; 0, or -1 if unreadable. */
int remote_read(void *dst, uint64_t addr, size_t n);
int remote_write(uint64_t addr, const void *src, size_t n);
/* A NUL-terminated string of at most n-1 bytes at addr; 0 or -1. */
int remote_read_str(char *dst, uint64_t addr, size_t n);
/* For struct strata_remote.read. */
int remote_read_cb(void *ctx, void *dst, uint64_t addr, size_t n);

/* Page cache for the calling thread's reads of what does not change
 * while it is in use (the code objects a sample names, their strings and
 * line tables). remote_cache_from(t) turns it on: remote_read then serves
 * what fits in a page or two from copies of whole pages read at or after
 * t (CLOCK_MONOTONIC ns: the time a sample was taken, so a copy is never
 * older than the sample it serves), reading a page once where it read
 * each field before. remote_cache_from(0) turns it off. Never for
 * anything read to see it change (a seqlock, a list that grows). */
void remote_cache_from(uint64_t t_ns);

struct rseg {
	uint64_t vaddr, memsz, filesz, off;
	uint32_t type, flags;
};

struct robj {
	char name[4096];     /* "" for the executable (path then holds it) */
	char path[4096];     /* the file, or "[vdso]" */
	uint64_t bias;
	uint64_t ld;         /* link_map.l_ld: identifies an instance */
	int is_main, is_vdso;
	uint32_t nph;
	struct rseg ph[64];
};

/* Calls fn for every object loaded in the target, in link order. Returns
 * 0, or -1 if the list could not be read (the caller keeps what it had). */
int remote_objects(int (*fn)(const struct robj *o, void *data), void *data);

/* A fingerprint of the loaded objects (each one's bias, dynamic section
 * and entry): differs when objects were loaded or unloaded. 0 if
 * unreadable. remote_objects_gen_full walks the whole list (one read per
 * object); remote_objects_gen, called every writer pass, does that at
 * most every 100 ms per thread and otherwise only checks the list's ends
 * (three reads: a dlopen appends, so a load is seen at once, and so is
 * the last entry's unload; an unload in the middle of the list, within
 * 100 ms). With 165 objects loaded, the walk every pass was most of the
 * helper's CPU time. */
uint64_t remote_objects_gen(void);
uint64_t remote_objects_gen_full(void);

#endif
