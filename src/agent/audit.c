/*
 * audit.c — strata's audit hooks (objects.c's, which put the allocator
 * hooks in once the interpreter runs; pymodule.c's, which checks a module
 * built for another patch release), and what a hook added before
 * Py_Initialize needs at the end.
 *
 * PySys_AddAuditHook may be called before Py_Initialize, and a preloaded
 * agent does. CPython allocates each hook's list entry with
 * PyMem_RawMalloc when it is added, and frees the list with PyMem_RawFree
 * when it finalizes (_PySys_ClearAuditHooks). Before Py_Initialize the raw
 * allocator is libc's malloc; a program run with the debug allocator
 * hooks (`-X dev`, PYTHONMALLOC=debug or malloc_debug, PYTHONDEVMODE, a
 * debug build) frees through the debug hooks, which find no header of
 * theirs on such an entry and abort the process at exit
 * ("_PyMem_DebugRawFree: bad ID").
 *
 * So at the event CPython raises just before it frees the list
 * (cpython._PySys_ClearAuditHooks), when the raw allocator is no longer
 * the one strata's early entries came from, a raw allocator goes on top
 * that passes every call to the one below, except the free of one of
 * those entries, which it skips: they stay allocated (24 bytes each) as
 * the process ends. Nothing of CPython's is written, and no layout is
 * assumed but the entry's { next, hook, data } (every CPython 3.8-3.15).
 */
#include "audit.h"
#include "pymem.h"

#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#define MAX_EARLY 4
static struct {
	audit_hook_fn fn;
	void *data;
} early[MAX_EARLY];
static int nearly;
static pymem_alloc early_raw; /* the raw allocator they came from */
static pymem_alloc below;     /* what the guard passes calls to */
static pymem_get_fn get_allocator;
static pymem_set_fn set_allocator;

int audit_add(audit_hook_fn fn, void *data)
{
	int (*add)(audit_hook_fn, void *) = (int (*)(audit_hook_fn, void *))dlsym(RTLD_DEFAULT, "PySys_AddAuditHook");
	int (*initialized)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsInitialized");
	*(void **)&get_allocator = dlsym(RTLD_DEFAULT, "PyMem_GetAllocator");
	*(void **)&set_allocator = dlsym(RTLD_DEFAULT, "PyMem_SetAllocator");
	if (!add)
		return -1;
	if (initialized && !initialized() && get_allocator && set_allocator && nearly < MAX_EARLY) {
		if (!nearly)
			get_allocator(PYMEM_DOMAIN_RAW, &early_raw);
		early[nearly].fn = fn;
		early[nearly].data = data;
		nearly++;
	}
	return add(fn, data) == 0 ? 0 : -1;
}

/* An entry strata added early: { next, hook, data }. */
static int early_entry(void *p)
{
	void **e = p;
	for (int i = 0; p && i < nearly; i++)
		if (e[1] == (void *)early[i].fn && e[2] == early[i].data)
			return 1;
	return 0;
}

static void *g_malloc(void *ctx, size_t n)
{
	(void)ctx;
	return below.malloc(below.ctx, n);
}

static void *g_calloc(void *ctx, size_t k, size_t n)
{
	(void)ctx;
	return below.calloc(below.ctx, k, n);
}

static void *g_realloc(void *ctx, void *p, size_t n)
{
	(void)ctx;
	return below.realloc(below.ctx, p, n);
}

static void g_free(void *ctx, void *p)
{
	(void)ctx;
	if (!early_entry(p))
		below.free(below.ctx, p);
}

/* With the GIL, at the clear. */
static void guard_early(void)
{
	static int done;
	pymem_alloc now;
	get_allocator(PYMEM_DOMAIN_RAW, &now);
	if (done || (now.free == early_raw.free && now.ctx == early_raw.ctx))
		return; /* the allocator they came from frees them */
	done = 1;
	below = now;
	pymem_alloc guard = { NULL, g_malloc, g_calloc, g_realloc, g_free };
	set_allocator(PYMEM_DOMAIN_RAW, &guard);
}

void audit_event(const char *event)
{
	if (nearly && event[0] == 'c' && !strcmp(event, "cpython._PySys_ClearAuditHooks"))
		guard_early();
}
