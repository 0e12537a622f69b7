/*
 * pyobjects.h — objects in allocated blocks, and type names, for
 * allocation sampling (pyobjects.c). Compiled per Python version.
 */
#ifndef STRATA_PYOBJECTS_H
#define STRATA_PYOBJECTS_H

#include <stddef.h>
#include <stdint.h>

/* Copies n bytes at src into dst: 0, or -1 if unreadable. */
typedef int (*pyobj_reader)(void *ctx, void *dst, uint64_t src, size_t n);

/* The type of the object held by a PyObject_Malloc block of `size` bytes
 * at `block`, or 0 if it holds none (yet) that can be told. *tag gets the
 * type's identity word (pyobj_type_name). */
uint64_t pyobj_type(pyobj_reader rd, void *ctx, uint64_t block, uint64_t size, uint64_t *tag);
/* The name of type `type` ("dict", "numpy.ndarray", "Outer.Inner"): 0, or
 * -1. *tag gets its identity word: with the address, it tells a class
 * from another created later at the same address once the first is freed
 * (a class's qualified-name object; a static type's tp_name). */
int pyobj_type_name(pyobj_reader rd, void *ctx, uint64_t type, char *buf, size_t n, uint64_t *tag);

#endif
