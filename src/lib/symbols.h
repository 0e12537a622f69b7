/*
 * symbols.h — names native addresses offline: which object an address of a
 * profiled process was in (from its REC_MODULE records), and in that object
 * the function (.symtab, .dynsym, MiniDebugInfo, or a separate debug file
 * found by build id or debuglink under /usr/lib/debug), the source file and
 * line when DWARF line information exists, the functions inlined at the
 * address (DWARF inlined subroutines, each at its own line), C++ names
 * demangled. Built on elfutils libdwfl.
 *
 * One `symbolizer` serves a whole profile: objects are opened once per
 * (path, build id) however many processes mapped them; each process (a
 * stream of the file) has its own address space of mappings.
 */
#ifndef STRATA_SYMBOLS_H
#define STRATA_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>

#include "common/format.h"

struct symbolizer;
struct sym_space;

struct symbolizer *sym_new(void);
void sym_free(struct symbolizer *s);

/* The address space of one process (one stream). Owned by the symbolizer. */
struct sym_space *sym_space_new(struct symbolizer *s);

/* Adds (or, with MOD_UNLOADED, retires) one mapping of `sp`. Mappings are
 * added in record order; a lookup prefers the newest live mapping that
 * covers the address. Returns 0, or -1 on OOM. */
int sym_space_add(struct sym_space *sp, const struct rec_module *m);

/* One function inlined at an address (a DWARF DW_TAG_inlined_subroutine):
 * the function, and the line executing in it. */
struct sym_inline {
	const char *name;      /* demangled; never NULL (unnamed ones are left out) */
	const char *func_file; /* where it is defined (DWARF), NULL if unknown */
	uint32_t func_line;    /* its first line, 0 if unknown */
	const char *file;      /* the line executing in it: the call site of the */
	uint32_t line;         /* next inlined level, or for the innermost the line
	                        * table's line; NULL/0 if unknown */
};

struct sym_info {
	const char *module;   /* object path ("[vdso]" ...), NULL if no mapping covers the address */
	uint64_t offset;      /* address relative to the object's load bias (its ELF address) */
	const char *name;     /* function name, demangled; NULL if unknown */
	uint64_t sym_offset;  /* address - function start, when name is set */
	uint64_t func_start;  /* ELF address where the function starts (from its symbol, DWARF,
	                       * or, in a stripped object, its FDE); 0 if unknown */
	const char *file;     /* source file, NULL if unknown */
	uint32_t line;        /* 0 if unknown. Code inlined into the function is given the
	                       * function's own line that called it (DWARF call site), so
	                       * file:line is always inside the function named */
	const struct sym_inline *inl; /* the functions inlined at the address, outermost
	                       * first: inl[0] is inlined into the function named, at
	                       * `line`; inl[i + 1] into inl[i], at inl[i].line */
	uint32_t ninl;
	const char *func_file;/* where the function is defined (DWARF), NULL if unknown */
	uint32_t func_line;   /* its first line, 0 if unknown */
	int interpreter;      /* the object is CPython itself (python executable or libpython) */
	int eval;             /* the address is in CPython's eval loop, one of its .cold parts included */
};

/* Symbolizes `addr`. `call` says it is a return address, so the call
 * instruction before it is what is looked up (the return address may be
 * past the end of a function that ends in a call). Strings stay valid
 * until sym_free. Always fills *out (unknown parts NULL/0). */
void sym_lookup(struct sym_space *sp, uint64_t addr, int call, struct sym_info *out);

/* Whether `path` names CPython itself: python3.11, libpython3.11.so.1.0... */
int sym_is_interpreter_path(const char *path);

#endif
