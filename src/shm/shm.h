/*
 * shm.h — the memory the agent shares with its helper process.
 *
 * The profiled process keeps no thread of its own: the writer, the control
 * channel, the wall-mode sampler and the unwind-table builder run in a
 * helper process, strata-agentd (see agentd.c). What both sides use lives
 * in one memfd that is mapped at the same address in both, so a pointer
 * into it means the same thing on either side: the agent's state, the
 * threads' slots and sample rings, the unwind tables and JIT ranges the
 * signal handler reads.
 *
 * The mapping is reserved once at its maximum size (MAP_NORESERVE); the
 * file grows with ftruncate as allocations need it, so only pages in use
 * cost memory. The profiled process gives up its descriptor once the
 * helper has one (shm_close_fd); from then on it asks the helper to grow
 * the file (link.h, GROW). Allocation is by size class (powers of two from 64 bytes)
 * with a free list per class and a bump pointer, under a process-shared
 * robust mutex: either process may die holding it. Never called from a
 * signal handler.
 */
#ifndef STRATA_SHM_H
#define STRATA_SHM_H

#include <stddef.h>
#include <stdint.h>

/* Default reservation: slots and rings of ~2000 threads, plus tables. */
#define SHM_DEFAULT_MAX (1ull << 30)

/* The profiled process: a new region (memfd, close-on-exec) at a free
 * address. Returns 0, or -1 with errno. */
int shm_create(uint64_t max);

/* The child of fork(): the parent's region is shared with the parent and
 * must not be touched again; a fresh, empty one takes its place at the
 * same address. Async-signal-safe (system calls only). Returns 0 or -1. */
int shm_replace(void);

/* The helper: maps the region of descriptor fd at addr. Returns 0 or -1. */
int shm_attach(int fd, uint64_t addr, uint64_t max);

/* The profiled process, once the helper holds the region: closes our
 * descriptor; allocations that need the file grown call grow(want)
 * (outside the lock), which returns 0 once the helper has grown it. */
void shm_close_fd(int (*grow)(uint64_t want));
/* The profiled process: fd is the region again (a copy of the helper's,
 * for the next helper after a failed exec). 0, or -1 if it is not. */
int shm_adopt_fd(int fd);
/* The helper: grows the file to at least `want` bytes (at most the
 * reservation), if it is smaller. */
int shm_grow(uint64_t want);

/* The region's descriptor (-1 in the profiled process once the helper
 * holds it), address and reserved size. */
int shm_fd(void);
uint64_t shm_addr(void);
uint64_t shm_max(void);
int shm_contains(const void *p, size_t n);

/* Zeroed memory in the region, or NULL when it is full. */
void *shm_alloc(size_t n);
void shm_free(void *p);

/* A pointer both processes know: where the agent's state is. */
void shm_set_root(void *p);
void *shm_root(void);

/* Bytes in use (allocated and not freed), for status and tests. */
uint64_t shm_used(void);

#endif
