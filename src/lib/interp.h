/*
 * interp.h — which of CPython's own functions a profile shows (--native,
 * without --keep-interpreter): the one place that lists them, and why.
 *
 * A Python user reads a stack as Python lines and the C code that did the
 * work under them. CPython's call machinery (the eval loop, which the
 * Python frames replace; vectorcall and PyObject_Call*; the method,
 * builtin-function, slot and descriptor wrappers; frame set-up; the
 * abstract-object dispatch that only picks a type's slot) does none of
 * that work: it is hidden, and its few instructions count as self time of
 * the nearest frame shown. Every other CPython function is shown: the
 * regex engine, list sort, dict, str and int operations, obmalloc, the GC,
 * a builtin's own code (builtin_sorted, map_next).
 */
#ifndef STRATA_INTERP_H
#define STRATA_INTERP_H

/* Whether `name` (a symbol of the interpreter: the python executable or
 * libpython; gcc's .cold/.part.N/.isra.N/.constprop.N suffixes and @plt
 * allowed) is CPython's call machinery. NULL (a function with no name: it
 * cannot be told apart) counts as machinery. */
int interp_is_machinery(const char *name);

/* Whether `name` (as above) is one of the garbage collector's entry
 * functions: in a sample taken while the collector ran (STACK_GC), the
 * outermost such frame marks where the collection began, and the "[gc]"
 * frame goes under the Python frame outside it (merge_gc_under). These
 * are shown like the rest of CPython's work. */
int interp_is_gc(const char *name);

#endif
