/*
 * symbols-internal.h — the symbolizer's state behind symbols.h (struct
 * symbolizer, and a struct symfile per object), shared by the files that
 * implement it: symbols.c (objects, address spaces, the lookup),
 * symbols-elf.c (what an object's ELF file says) and symbols-dwarf.c (what
 * DWARF says at an address). Nothing else includes it.
 */
#ifndef STRATA_SYMBOLS_INTERNAL_H
#define STRATA_SYMBOLS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <elfutils/debuginfod.h>
#include <elfutils/libdwfl.h>

#include "symbols.h"

struct symfile {
	struct symfile *next;
	char *path;
	/* The file whose sections (.eh_frame, .text) are read directly: the
	 * object at `path`, the same build found by build id, or NULL when
	 * only a debug file is there (its copies of them are empty). */
	const char *elf_path;
	char *found_path;       /* elf_path when it is not `path` (owned) */
	uint8_t build_id[64];
	size_t build_id_len;
	uint8_t *image;
	size_t image_len;
	int opened, ok;
	int interpreter;
	Dwfl *dwfl;
	Dwfl_Module *mod;
	struct memo *memo;
	uint32_t memo_cap, memo_n;
	/* Where the eval loop's code is, in file addresses (interpreter only). */
	uint64_t (*eval)[2];
	uint32_t neval;
	/* PLT stubs, named NAME@plt (no symbol table names them). */
	struct plt_stub *plt;
	uint32_t nplt;
	int plt_done;
	/* Function symbols sorted by address: libdwfl's own address lookup
	 * scans every symbol, which is too slow for a profile's many
	 * distinct addresses (python3.11: 100 us a lookup). */
	struct fsym *syms;
	uint32_t nsyms;
	int syms_done;
	/* FDE ranges, for the bounds of functions without a symbol. */
	uint64_t (*fdes)[2];
	uint32_t nfdes;
	int fdes_done;
};

struct fsym {
	uint64_t lo, hi;
	const char *name;
	uint32_t rank;   /* 0 global, 1 weak, 2 local: the name preferred for an address */
};

struct plt_stub {
	uint64_t lo, hi;
	const char *name;
};

/* Chains of inlined functions (sym_info.inl), packed in blocks. */
struct inl_block {
	struct inl_block *next;
	uint32_t n, cap;
	struct sym_inline v[];
};

/* debuginfod's client library, loaded on first use when DEBUGINFOD_URLS
 * is set (dlopen, as libdw does: strata runs where it is not installed). */
struct dbgd {
	int tried;
	void *so;
	__typeof__(debuginfod_begin) *begin;
	__typeof__(debuginfod_end) *end;
	__typeof__(debuginfod_find_executable) *find_executable;
	__typeof__(debuginfod_find_debuginfo) *find_debuginfo;
	debuginfod_client *client;
};

struct symbolizer {
	struct symfile *files;
	struct inl_block *inl;
	/* libdwfl's callbacks and debug file path: ":.debug:" (next to the
	 * object, its .debug/), STRATA_DEBUG_DIRS, "/usr/lib/debug". */
	Dwfl_Callbacks cb;
	char *debuginfo_path;
	struct dbgd dbgd;
	struct sym_space *spaces;
	struct strnode *strings; /* demangled and unversioned names */
	struct strnode **strtab; /* the same, hashed, so each is kept once */
	uint32_t strtab_cap, nstrings;
};

/* symbols.c: one copy of each name, kept until sym_free (NULL on OOM);
 * and a symbol's name as its function's: without a symbol version, C++
 * names demangled (the strings made interned). */
const char *intern_str(struct symbolizer *s, const char *str);
const char *demangle(struct symbolizer *s, const char *name);

/* symbols-elf.c: finds the eval loop's parts of an interpreter (f->eval)
 * when it is opened; and at ELF address `a` of an open object, the PLT
 * stub, the function symbol (NULL if none) and the start of the FDE (0 if
 * none). */
void find_eval(struct symfile *f);
const struct plt_stub *plt_stub(struct symbolizer *s, struct symfile *f, uint64_t a);
const struct fsym *find_sym(struct symfile *f, uint64_t a);
uint64_t fde_start(struct symfile *f, uint64_t a);

/* symbols-dwarf.c: fills `out` from DWARF with the function containing
 * `a`, where it is declared, and the functions inlined at `a`. */
void func_scope(struct symbolizer *s, struct symfile *f, uint64_t a, struct sym_info *out);

#endif
