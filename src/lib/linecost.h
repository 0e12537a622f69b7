/*
 * linecost.h — cost per source line, per file: the data behind
 * `strata annotate`, kept apart from how it is printed.
 *
 * Every frame of a sampled stack whose function is of a selected kind
 * (Python code; JIT code mapped to Python lines) and has a file and line
 * contributes to that (file, line):
 *   self   the samples (and event counts) whose innermost such frame is
 *          at the line;
 *   total  the samples with the line anywhere on the stack, counted once
 *          per sample even when the line appears in several frames
 *          (recursion, or a lambda called from its own line).
 * A file's total is, likewise, the samples with the file anywhere on the
 * stack. Frames of other kinds (native code, markers) are skipped, so a
 * sample that ends in C code called from line 12 is self cost of line 12:
 * what that line cost, as `annotate` means it.
 *   gc     the part of self that ran in CPython's garbage collector: the
 *          samples with a "[gc]" frame below the line's frame and no
 *          other Python line between (a finalizer's own lines are theirs).
 */
#ifndef STRATA_LINECOST_H
#define STRATA_LINECOST_H

#include <stdint.h>

#include "profile.h"

struct lc_line {
	uint32_t line;
	uint64_t *self, *total;  /* one per event */
	uint64_t *gc;            /* one per event: of self, in the collector */
	uint32_t func;           /* the function most of its samples ran in */
};

struct lc_file {
	const char *path;        /* the profile's string */
	uint64_t *self, *total;  /* one per event */
	uint64_t *gc;            /* one per event: of self, in the collector */
	struct lc_line *lines;   /* sorted by line number */
	uint32_t nlines;
};

struct linecost {
	uint32_t nevents;
	uint64_t *totals;        /* over the filtered samples */
	uint64_t *gc;            /* of totals, in the collector ("[gc]" anywhere) */
	struct lc_file *files;   /* by total samples, most first */
	uint32_t nfiles;
};

/* kinds: a mask of (1 << PK_*), e.g. 1 << PK_PYTHON | 1 << PK_JIT. NULL on
 * out of memory. */
struct linecost *linecost_build(const struct profile *p, const struct agg_filter *f, uint32_t kinds);
void linecost_free(struct linecost *lc);

/* The line entry of `line` in `file`, or NULL if it has no cost. */
const struct lc_line *linecost_line(const struct lc_file *file, uint32_t line);

#endif
