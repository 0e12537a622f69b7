/*
 * objects-internal.h — what objects.c (the allocator hooks, the frees of
 * sampled blocks, and when the hooks go in and out) and objects-sample.c
 * (the sample point) share, in the profiled process. Nothing else
 * includes it; --objects between the process and the helper is
 * shm/objects.h.
 */
#ifndef STRATA_OBJECTS_INTERNAL_H
#define STRATA_OBJECTS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "shm/agent.h"
#include "common/format.h"

struct objtab;

/* The hooks' domains: CPython's three (pymem.h), and libc's. */
enum { D_RAW = 0, D_MEM = 1, D_OBJ = 2, D_N = 3, D_LIBC = 3 /* libc's, from other objects */ };
_Static_assert((int)D_LIBC == (int)ALLOC_MALLOC && (int)D_RAW == (int)ALLOC_RAW && (int)D_MEM == (int)ALLOC_MEM && (int)D_OBJ == (int)ALLOC_OBJ,
	       "hook domains are the file's allocation domains");

/* The calling thread's state (objects.c). */
struct otls {
	int64_t left;          /* bytes until the next sample point */
	uint64_t rng;
	int depth;             /* inside a hooked OBJ/MEM call */
	int busy;              /* taking a sample */
	int stalled;           /* its ring stayed full: no waiting until... */
	uint64_t stalled_tail; /* ...the writer has drained it past this */
};
extern TLS_IE __thread struct otls ot;

/* objects.c */
/* Loaded for an attach: the load time, while the hooks wait muted for
 * sampling to start; and whether they still may. */
extern _Atomic uint64_t awaiting;
int still_awaiting(void);
/* With the GIL: takes the hooks out (or leaves all in, muted). */
void remove_hooks(void);

/* objects-sample.c */
/* A sample point: block p (n bytes of `domain`) is sampled, its stack
 * captured and the block entered into the table; or, sampling being off,
 * the hooks go. */
void __attribute__((noinline)) take_sample(int domain, void *p, size_t n);
/* A sampled block in filter cell f is gone. */
void filter_remove(struct objtab *t, uint32_t f);

#endif
