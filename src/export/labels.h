/*
 * labels.h — how exporters name a frame, so every format says the same
 * thing for the same frame.
 *
 *   Python / JIT   "qualname (file:line)"      line of the frame (call site)
 *   native         "symbol (file.c:line)" or "symbol (module)", or for a
 *                  function without a symbol "module+0xSTART" alone
 *   synthetic      the marker itself, e.g. "[no Python frame]"
 */
#ifndef STRATA_LABELS_H
#define STRATA_LABELS_H

#include <stddef.h>

#include "lib/profile.h"

enum label_flags {
	LABEL_NO_LINE = 1 << 0,  /* function-level: "qualname (file)" for every line */
	LABEL_BASENAME = 1 << 1, /* file basename instead of its full path */
};

/* Writes the label of frame `f` into buf (always NUL-terminated; long labels
 * are cut). Returns the length written. */
size_t frame_label(const struct profile *p, uint32_t f, int flags, char *buf, size_t n);

/* The file basename of a path ("" stays ""). */
const char *path_base(const char *path);

/* The object Python code runs in, for formats that name one (callgrind's
 * ob=, pprof's mappings): the profiled processes' executable when they all
 * ran the same one, else "python". */
const char *python_object(const struct profile *p);

#endif
