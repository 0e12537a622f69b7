/*
 * perfmap.h — Linux perf maps (/tmp/perf-PID.map: one "START SIZE name"
 * line per piece of run-time generated code, hex numbers) as the profile
 * carries them: the agent copies the lines of its process's map (and the
 * code-load records of a /tmp/jit-PID.dump that CPython 3.13's -X perf_jit
 * writes) into REC_PERFMAP records, and the CLI names addresses in
 * anonymous executable memory from them.
 *
 * This module owns the line parser, the REC_PERFMAP body, and the lookup
 * table the CLI keeps per process. No allocation on the agent's signal
 * path: the agent uses the parser and encoder from its writer thread only.
 */
#ifndef STRATA_PERFMAP_H
#define STRATA_PERFMAP_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"

/* Bounds that keep a damaged or hostile map from driving allocations. */
#define PERFMAP_NAME_MAX 1024       /* longer names are cut */
#define PERFMAP_REC_MAX 4096        /* entries per REC_PERFMAP record */

struct perfmap_entry {
	uint64_t start, size;
	char *name;
};

/* Parses one line (without its newline): "START SIZE name", START and SIZE
 * hex with an optional 0x. On success returns 0 and points *name into the
 * line (*namelen bytes, possibly empty); -1 if the line is malformed. */
int perfmap_parse_line(const char *line, size_t len, uint64_t *start, uint64_t *size, const char **name,
		       size_t *namelen);

/* REC_PERFMAP body: varint n, then n times (varint start, varint size,
 * string name). Appends one whole record to `b`. */
void rec_put_perfmap(struct wbuf *b, const struct perfmap_entry *e, uint32_t n);
/* Decodes a body into a new array (*e, *n), freed with perfmap_entries_free.
 * Returns 0 or -1 (malformed; nothing allocated). */
int rec_get_perfmap(struct rbuf *b, struct perfmap_entry **e, uint32_t *n);
void perfmap_entries_free(struct perfmap_entry *e, uint32_t n);

/* The CLI's table for one process: entries in the order they arrived; a
 * lookup prefers the newest entry that covers the address (code freed and
 * its memory reused by another function). */
struct perfmap_table {
	struct perfmap_entry *e;    /* sorted by start once `sorted` */
	uint32_t *seq;              /* arrival order of e[i] */
	uint32_t n, cap;
	uint64_t max_size;          /* the largest entry: how far back a lookup looks */
	int sorted;
};

/* Copies `name`. Returns 0, or -1 on OOM. */
int perfmap_table_add(struct perfmap_table *t, uint64_t start, uint64_t size, const char *name);
/* The entry covering addr, or NULL. */
const struct perfmap_entry *perfmap_table_find(struct perfmap_table *t, uint64_t addr);
void perfmap_table_free(struct perfmap_table *t);

/* Whether a perf-map name is one of CPython's own trampolines (-X perf,
 * -X perf_jit): "py::QUALNAME:FILENAME". */
int perfmap_is_cpython_trampoline(const char *name);

#endif
