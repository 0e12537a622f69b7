/*
 * source.h — reading the profiled program's source files, for the lines
 * `report` quotes and the files `annotate` prints. Each file is read once
 * (regular files of sane size only: a name from a profile may be
 * "<string>", a FIFO or a device) and indexed by line.
 */
#ifndef STRATA_SOURCE_H
#define STRATA_SOURCE_H

#include <stddef.h>
#include <stdint.h>

struct source_cache;

struct source_cache *source_cache_new(void);
void source_cache_free(struct source_cache *c);

/* Number of lines of `path`, or -1 if it cannot be read. */
int64_t source_nlines(struct source_cache *c, const char *path);

/* Line `line` (1-based) of `path`: a pointer into the cached text (not
 * NUL-terminated, without its line break) and its length. Returns 0, or
 * -1 if the file is unreadable or shorter. */
int source_line(struct source_cache *c, const char *path, uint32_t line, const char **text, size_t *len);

#endif
