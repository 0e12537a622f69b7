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
 * The file grows with ftruncate as allocations need it, so only pages in
 * use cost memory. Address space is another matter: a mapping counts
 * against RLIMIT_AS whether its pages are used or not (MAP_NORESERVE
 * included). Where the process has no such limit, the mapping is made
 * once at its largest size (SHM_DEFAULT_MAX), and growing is only the
 * file's. Under a limit, each process maps only what the file holds and
 * extends its mapping in place (mremap without moving: the address is
 * picked far from everything else, so the range after it stays free) as
 * the file grows, so the region costs the program the address space of
 * what is in use, not a reservation. The profiled process maps first and
 * the helper follows, so the program never meets a pointer it has not
 * mapped: memory the helper wants (unwind tables, threads found by a
 * scan) is asked of the program (shm_want), which maps it the next time
 * agent code runs in it (shm_sync: a signal handler, a thread starting).
 *
 * A fork child stays in the region with a state of its own where the
 * region is mapped whole (link.h: joining the tree's helper); each block
 * carries the state it was allocated for, and an ended process's blocks
 * go back at once (shm_free_owned).
 *
 * The profiled process gives up its descriptor once the helper has one
 * (shm_close_fd); from then on it asks the helper to grow the file
 * (link.h, GROW). Allocation is by size class (powers of two from 64
 * bytes) with a free list per class and a bump pointer, under a
 * process-shared robust mutex: either process may die holding it. Never
 * called from a signal handler (shm_sync is, and is async-signal-safe).
 */
#ifndef STRATA_SHM_H
#define STRATA_SHM_H

#include <stddef.h>
#include <stdint.h>

/* Largest size: slots and rings of ~8000 threads, plus tables, for a
 * process and the fork children that stay in its region (~5 MB each, a
 * pool's workers: the tree stops taking children in at three quarters).
 * Mapped at once where RLIMIT_AS is unlimited (it costs nothing there:
 * pages are used only as written). */
#define SHM_DEFAULT_MAX (4ull << 30)

/* The profiled process: a new region (memfd, close-on-exec) at a free
 * address, growing to at most `max`. Returns 0, or -1 with errno. */
int shm_create(uint64_t max);

/* The child of fork(): the parent's region is shared with the parent and
 * must not be touched again; a fresh, empty one takes its place at the
 * same address. Async-signal-safe (system calls only). Returns 0 or -1. */
int shm_replace(void);

/* The profiled process, after a failed start: unmaps the region and
 * closes its descriptor. */
void shm_destroy(void);

/* The helper: maps the region of descriptor fd at addr. Returns 0 or -1. */
int shm_attach(int fd, uint64_t addr, uint64_t max);

/* The profiled process, once the helper holds the region: closes our
 * descriptor; allocations that need the file grown call grow(want)
 * (outside the lock), which returns 0 once the helper has grown it. */
void shm_close_fd(int (*grow)(uint64_t want));
/* The profiled process: fd is the region again (a copy of the helper's,
 * for the next helper after a failed exec, or a joining fork child's
 * until its helper serves it). 0, or -1 if it is not (not a regular
 * file, smaller than the region or larger than its largest size); a
 * file another process is growing is the region all the same. */
int shm_adopt_fd(int fd);
/* The helper: grows the file to at least `want` bytes (at most the
 * largest size), if it is smaller; never past what the profiled process
 * has mapped (the caller asks for that first: shm_want). */
int shm_grow(uint64_t want);

/* Both: maps what the other side made usable (the profiled process: what
 * the helper asked for; the helper: the file's size). Async-signal-safe;
 * cheap when there is nothing to do. Returns 0, or -1 if this process
 * cannot map it (RLIMIT_AS; the cause is kept for shm_limited). */
int shm_sync(void);
/* The helper: asks the profiled process to map at least `bytes`. */
void shm_want(uint64_t bytes);
/* The helper: whether an allocation failed only because the profiled
 * process has not mapped what was asked yet (try again later), rather
 * than for want of room. */
int shm_pending(void);

/* The region's descriptor (-1 in the profiled process once the helper
 * holds it), address and largest size. */
int shm_fd(void);
uint64_t shm_addr(void);
uint64_t shm_max(void);
/* Whether [p, p+n) is in the part of the region this process has mapped. */
int shm_contains(const void *p, size_t n);

/* Zeroed memory in the region, or NULL when it is full or cannot grow
 * (or, in the profiled process, its lock could not be had: shm_stalled). */
void *shm_alloc(size_t n);
/* The same, but a block that was used and freed before keeps what was
 * written in it (a never-used block reads as zeros all the same): for
 * memory nothing reads before writing it, a ring's. */
void *shm_alloc_dirty(size_t n);
void shm_free(void *p);
/* In the profiled process: whether the last allocation or free gave up
 * waiting for the region's lock (a stopped helper holds it); it then
 * does not wait again until the lock is had. */
int shm_stalled(void);

/* Every block carries its owner: the agent state of the process it was
 * allocated for (the calling thread's `agentp` when that is in the
 * region). shm_set_owner restamps a block (a state is its own owner);
 * shm_free_owned frees every block of owner, and owner's own, once that
 * process's stream is written (a tree of processes shares one region:
 * an ended worker's rings go back). Returns the bytes freed. */
void shm_set_owner(void *p, const void *owner);
uint64_t shm_free_owned(const void *owner);

/* The futex word every process of a tree rings after posting a link
 * request (link.h), which the tree's helper waits on. */
_Atomic uint32_t *shm_doorbell(void);
/* Where the tree's helper takes fork children (its pid and the key of
 * its socket's name: link.h); 0 when none does. */
void shm_set_tree(int32_t helper, uint64_t key);
int32_t shm_tree(uint64_t *key);
/* Whether the region is mapped at its largest size everywhere (no
 * RLIMIT_AS): only then may a fork child stay in it. */
int shm_full_map(void);

/* A pointer both processes know: where the agent's state is. */
void shm_set_root(void *p);
void *shm_root(void);

/* Bytes in use (allocated and not freed), for status and tests; bytes
 * mapped by the profiled process (its address space). */
uint64_t shm_used(void);
uint64_t shm_mapped(void);

/* Whether growing failed for want of address space or memory, and why:
 * the errno of the first failure (0: never), and the size that was
 * wanted. Both processes see it. */
int shm_limited(uint64_t *wanted);
/* After a failure with err: ": RLIMIT_AS is N MB" into buf when the
 * process has such a limit and err is ENOMEM, else "". Returns the
 * length written. */
int shm_limit_note(char *buf, size_t n, int err);

#endif
