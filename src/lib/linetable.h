/*
 * linetable.h — instruction offset → source line, for CPython's three line
 * table formats (enum linetable_fmt in format.h):
 *
 *   LT_LNOTAB     3.8, 3.9   co_lnotab: (byte delta, signed line delta) pairs
 *   LT_LINETABLE  3.10       co_linetable (PEP 626): (byte delta, line delta)
 *                            pairs, -128 = no line
 *   LT_LOCATIONS  3.11–3.13  co_linetable location table (PEP 657): entries
 *                            of 1–8 code units with short, one-line,
 *                            no-column, long and no-location forms
 *
 * A table is decoded once into sorted, contiguous ranges; a lookup is a
 * binary search. Decoding never trusts the bytes (they come from a file):
 * any input yields some table, never an out-of-bounds read.
 */
#ifndef STRATA_LINETABLE_H
#define STRATA_LINETABLE_H

#include <stddef.h>
#include <stdint.h>

struct lt_range {
	uint32_t start;  /* byte offset of the first instruction in the range */
	int32_t line;    /* -1: no line (compiler-generated code) */
};

struct linetable {
	struct lt_range *r; /* sorted by start, strictly increasing */
	uint32_t n;
	uint32_t end;       /* byte offset just past the last range */
	int32_t firstline;
	int fmt;
};

/* Decodes `tab` (len bytes) of format `fmt` for a code object whose
 * co_firstlineno is `firstline`. Returns 0, or -1 on allocation failure
 * (lt is then empty but valid). An unknown format yields an empty table. */
int linetable_decode(struct linetable *lt, int fmt, const uint8_t *tab, size_t len, uint32_t firstline);
void linetable_free(struct linetable *lt);

/* The line executing at instruction offset `lasti`, in 2-byte code units as
 * the agent records it; -1 (not started yet) gives the first line, as
 * CPython's PyCode_Addr2Line does. Returns -1 when the instruction has no
 * line or the offset is outside the table. */
int32_t linetable_line(const struct linetable *lt, int32_t lasti);

#endif
