/*
 * cfi-internal.h — what the two halves of the CFI compiler share: the
 * bounded cursor every read goes through, CIE and FDE records, and the
 * state of a call frame program being run. cfi-eval.c reads records and
 * runs programs without allocating; cfi.c compiles the rows they give into
 * the tables of cfi.h. Nothing else includes it.
 */
#ifndef STRATA_CFI_INTERNAL_H
#define STRATA_CFI_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "cfi.h"

/* ---- bounded cursor ----------------------------------------------------- */

struct cur {
	const uint8_t *p, *end;
	int err;
};

static inline int need(struct cur *c, size_t n)
{
	if (c->err || (size_t)(c->end - c->p) < n) {
		c->err = 1;
		c->p = c->end;
		return 0;
	}
	return 1;
}

static inline uint64_t rd_u(struct cur *c, int n)
{
	if (!need(c, (size_t)n))
		return 0;
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v |= (uint64_t)c->p[i] << (8 * i);
	c->p += n;
	return v;
}

static inline uint64_t rd_uleb(struct cur *c)
{
	uint64_t v = 0;
	for (int shift = 0; need(c, 1); shift += 7) {
		uint8_t b = *c->p++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	return 0;
}

static inline int64_t rd_sleb(struct cur *c)
{
	uint64_t v = 0;
	int shift = 0;
	while (need(c, 1)) {
		uint8_t b = *c->p++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80)) {
			if (shift < 64 && (b & 0x40))
				v |= ~0ull << shift;
			return (int64_t)v;
		}
	}
	return 0;
}

/* ---- pointer encodings (.eh_frame) --------------------------------------- */

enum {
	PE_absptr = 0x00, PE_uleb128 = 0x01, PE_udata2 = 0x02, PE_udata4 = 0x03, PE_udata8 = 0x04,
	PE_sleb128 = 0x09, PE_sdata2 = 0x0a, PE_sdata4 = 0x0b, PE_sdata8 = 0x0c,
	PE_pcrel = 0x10, PE_datarel = 0x30, PE_indirect = 0x80, PE_omit = 0xff,
};

/* Reads a pointer in encoding `enc` (cfi-eval.c). `datarel` is the base of
 * datarel pointers (the .eh_frame_hdr); with `range` set only the value is
 * read (an FDE's address range uses the format but not the application). */
uint64_t rd_enc(struct cur *c, const struct cfi_source *s, uint8_t enc, uint64_t datarel, int range);

/* ---- CIE and FDE programs (cfi-eval.c) ----------------------------------- */

struct cie {
	uint64_t code_align;
	int64_t data_align;
	uint32_t ra_reg;
	uint8_t fde_enc;
	uint8_t addr_size;
	uint8_t has_z;
	uint8_t signal;
	const uint8_t *insns, *insns_end;
};

#define STATE_STACK 16

/* The table being built (cfi.c); NULL in eval mode. */
struct builder;

struct exec {
	struct builder *b;
	const struct cfi_source *s;
	const struct cie *cie;
	struct cfi_rules init;     /* after the CIE's initial instructions */
	struct cfi_rules st;
	struct cfi_rules stack[STATE_STACK];
	int depth;
	uint64_t loc, end;
	uint32_t last_rule;
	int emit;                  /* 0 while running the CIE's instructions */
	int eval;                  /* cfi_eval_hdr: no table, stop at `target` */
	int stop;
	uint64_t target;
};

/* Moves the program's location to `to`: in eval mode stops once the row
 * that covers the target is reached, else emits the row that ends there. */
void advance(struct exec *x, uint64_t to);
/* Runs a call frame program. Returns 0, or -1 if it is malformed. */
int run(struct exec *x, const uint8_t *p, const uint8_t *end);
/* The row from x->loc to `to` in the current state, into x->b (cfi.c):
 * called by advance() only when building, never in eval mode. */
void emit_span(struct exec *x, uint64_t to);

/* ---- entries (cfi-eval.c) ------------------------------------------------ */

/* One CIE or FDE: its id field and the body after it. */
struct entry {
	size_t off;          /* offset of the entry in the source */
	size_t id_off;       /* offset of its id / CIE pointer field */
	uint64_t id;
	int is64;
	const uint8_t *body, *end;
};

/* Reads the entry at `off`. Returns 1, 0 at a terminator or the end, -1 if
 * malformed. */
int read_entry(const struct cfi_source *s, size_t off, struct entry *e);
/* Parses the CIE entry e. Returns 0, or -1 if it is malformed or not one
 * this table can use. */
int parse_cie(const struct cfi_source *s, const struct entry *e, int debug_frame, struct cie *ci);

#endif
