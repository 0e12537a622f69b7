/*
 * numbaname.h — demangling Numba's function names (numbaname.c):
 * `_ZN8__main__6kernelB2v1B..E5ArrayIdLi1E1C7mutable7alignedE` becomes
 * `__main__.kernel(float64[::1])`.
 */
#ifndef STRATA_NUMBANAME_H
#define STRATA_NUMBANAME_H

#include <stddef.h>

enum numba_kind {
	NUMBA_FUNC = 0,            /* the compiled function itself */
	NUMBA_CPYTHON_WRAPPER = 1, /* `_ZN7cpython...`: boxes and unboxes for the dispatcher */
	NUMBA_CFUNC_WRAPPER = 2,   /* `cfunc._Z...`: the C-callable entry */
	NUMBA_GUFUNC_WRAPPER = 3,  /* `__gufunc__._Z...`: a gufunc's loop (parallel=True workers) */
};

/* Writes the readable name of `sym` into buf (module.function(types)), and
 * which kind of function it is into *kind. Returns 0, or -1 when sym is
 * not a Numba-mangled name (buf then holds nothing useful). */
int numba_demangle(const char *sym, char *buf, size_t n, int *kind);

#endif
