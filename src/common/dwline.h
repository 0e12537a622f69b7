/*
 * dwline.h — a small, bounded decoder of DWARF .debug_line (versions 2 to
 * 5) for the agent, which must not link libdw into the profiled process:
 * --perf-map turns the line tables of JIT images (Numba with
 * NUMBA_DEBUGINFO=1) into jitdump JIT_CODE_DEBUG_INFO records.
 *
 * Every read is bounds-checked against the section; loops are bounded by
 * the input's size and by explicit caps, so a corrupt or hostile image
 * yields an error, never a crash or a runaway. No allocation.
 */
#ifndef STRATA_DWLINE_H
#define STRATA_DWLINE_H

#include <stddef.h>
#include <stdint.h>

struct dwline_sections {
	const uint8_t *line;      /* .debug_line, relocated (addresses final) */
	size_t line_len;
	const uint8_t *line_str;  /* .debug_line_str (DWARF 5 DW_FORM_line_strp), may be NULL */
	size_t line_str_len;
	const uint8_t *str;       /* .debug_str (DW_FORM_strp), may be NULL */
	size_t str_len;
};

/* One row of a line-number matrix. `dir` and `file` point into the
 * sections (NUL-terminated inside them) or are "" when unknown; `dir` is
 * "" when the file name is absolute or has no directory. end_sequence
 * rows mark the first address after a sequence. */
struct dwline_row {
	uint64_t addr;
	uint32_t line;
	int end_sequence;
	const char *dir, *file;
};

/* Called for every row in order; return nonzero to stop. */
typedef int (*dwline_fn)(void *ctx, const struct dwline_row *row);

/* The file and directory tables of the unit being decoded: scratch the
 * caller provides (about 14 KiB; the agent keeps one per listener, not on
 * a thread's stack or in TLS). */
#define DWLINE_MAX_DIRS 256
#define DWLINE_MAX_FILES 1024
struct dwline_tables {
	const char *dir[DWLINE_MAX_DIRS];
	uint32_t ndir;
	const char *file[DWLINE_MAX_FILES];
	uint32_t fdir[DWLINE_MAX_FILES];
	uint32_t nfile;
};

/* Decodes every unit of the section. Returns the number of rows emitted
 * (>= 0), or -1 if the data is malformed (rows emitted before the error
 * stand; err says what was wrong). */
long dwline_decode(const struct dwline_sections *s, dwline_fn fn, void *ctx, struct dwline_tables *scratch,
		   char *err, size_t errlen);

#endif
