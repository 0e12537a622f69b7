/*
 * offcheck.h — does the running interpreter lay out its structures the way
 * the per-version module was compiled to read them?
 *
 * Since 3.13 every CPython starts _PyRuntime with _Py_DebugOffsets: a
 * cookie ("xdebugpy"), its PY_VERSION_HEX, whether it is free-threaded,
 * and the offsets of the struct members out-of-process tools read, as
 * that very interpreter was compiled. The module (pylayout.c) lists, for
 * each member it reads that the table covers, where the table keeps it and
 * the offsetof() it was compiled with; this file compares that list with a
 * copy of the running interpreter's table. It knows nothing of CPython's
 * headers (only the table's stable head: cookie, version, free_threaded),
 * so it is tested on its own (tests/unit/test_offcheck.c).
 */
#ifndef STRATA_OFFCHECK_H
#define STRATA_OFFCHECK_H

#include <stddef.h>
#include <stdint.h>

/* One member the module reads: its name in _Py_DebugOffsets
 * ("thread_state.current_frame"), where the table keeps it (offsetof in
 * _Py_DebugOffsets) and the value the module was compiled with. */
struct offcheck_field {
	const char *name;
	uint32_t at;
	uint64_t compiled;
};

struct offcheck_build {
	uint32_t version_hex;   /* PY_VERSION_HEX of the headers the module was built from */
	int free_threaded;      /* built with Py_GIL_DISABLED */
	const struct offcheck_field *fields;
	size_t nfields;
};

/* Whether a module built as `b` may read the interpreter whose table is
 * `table` (a copy, `len` bytes). exe names the interpreter in the advice
 * (NULL: a placeholder). Returns 0, or -1 with one line for the user in
 * why (without a "strata:" prefix). Checked in order: the cookie, a
 * free-threaded build, another minor version, then every field. */
int offcheck_run(const struct offcheck_build *b, const void *table, size_t len, const char *exe, char *why,
		 size_t n);

/* "3.13.0", "3.15.0a5": a PY_VERSION_HEX as CPython spells it. */
void offcheck_version(uint32_t hex, char *buf, size_t n);

#endif
