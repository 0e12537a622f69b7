/*
 * pymem.h — CPython's stable allocator API (its pymem.h) as the agent core
 * sees it: declared here because the core is built without Python's
 * headers. Used by objects.c (the allocation hooks) and audit.c (the raw
 * allocator that keeps early audit-hook entries from being freed).
 */
#ifndef STRATA_AGENT_PYMEM_H
#define STRATA_AGENT_PYMEM_H

#include <stddef.h>

/* PyMemAllocatorEx. */
typedef struct {
	void *ctx;
	void *(*malloc)(void *ctx, size_t size);
	void *(*calloc)(void *ctx, size_t nelem, size_t elsize);
	void *(*realloc)(void *ctx, void *ptr, size_t new_size);
	void (*free)(void *ctx, void *ptr);
} pymem_alloc;

/* PyMemAllocatorDomain's PYMEM_DOMAIN_RAW (objects-internal.h's D_RAW). */
#define PYMEM_DOMAIN_RAW 0

/* PyMem_GetAllocator, PyMem_SetAllocator. */
typedef void (*pymem_get_fn)(int domain, pymem_alloc *out);
typedef void (*pymem_set_fn)(int domain, pymem_alloc *in);

#endif
