/*
 * symbols-dwarf.c — what DWARF says about the code at an address; see
 * symbols.h. The function (DW_TAG_subprogram) that contains it and where
 * that is declared, and the functions inlined there
 * (DW_TAG_inlined_subroutine), each at its own line, found in one descent
 * of the compile unit's DIE tree. It reads only libdw's DIEs, which is why
 * it is apart from symbols.c (objects, address spaces, the lookup that
 * puts ELF symbols, the line table and these together) and symbols-elf.c.
 */
#include "symbols-internal.h"

#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <stdlib.h>
#include <string.h>

/* The file name of DWARF file index `idx` of the CU `cu`, or NULL. */
static const char *cu_file(Dwarf_Die *cu, Dwarf_Word idx)
{
	Dwarf_Files *files;
	size_t n;
	if (dwarf_getsrcfiles(cu, &files, &n) != 0 || idx >= n)
		return NULL;
	return dwarf_filesrc(files, idx, NULL, NULL);
}

/* The name DWARF gives a subprogram or an inlined instance of one (through
 * its abstract origin): the linkage name demangled, else the plain name. */
static const char *die_name(struct symbolizer *s, Dwarf_Die *d)
{
	Dwarf_Attribute at;
	const char *nm = dwarf_formstring(dwarf_attr_integrate(d, DW_AT_linkage_name, &at));
	nm = nm ? demangle(s, nm) : dwarf_diename(d);
	return nm && *nm ? nm : NULL;
}

/* Where an inlined instance was called from: the line in the code around
 * it. DW_AT_call_file indexes the line table of the CU holding the
 * instance. Returns 0 if DWARF does not say. */
static int call_site(Dwarf_Die *inl, const char **file, uint32_t *line)
{
	Dwarf_Attribute at;
	Dwarf_Word cf, cl;
	Dwarf_Die cu;
	if (dwarf_formudata(dwarf_attr(inl, DW_AT_call_file, &at), &cf) != 0 ||
	    dwarf_formudata(dwarf_attr(inl, DW_AT_call_line, &at), &cl) != 0 || cl == 0 || cl > UINT32_MAX ||
	    !dwarf_diecu(inl, &cu, NULL, NULL))
		return 0;
	const char *f = cu_file(&cu, cf);
	if (!f)
		return 0;
	*file = f;
	*line = (uint32_t)cl;
	return 1;
}

/* Room for inlined chains, kept until sym_free. */
static struct sym_inline *inl_alloc(struct symbolizer *s, uint32_t n)
{
	struct inl_block *b = s->inl;
	if (!b || b->cap - b->n < n) {
		uint32_t cap = n > 1024 ? n : 1024;
		b = malloc(sizeof(*b) + (size_t)cap * sizeof(b->v[0]));
		if (!b)
			return NULL;
		b->n = 0;
		b->cap = cap;
		b->next = s->inl;
		s->inl = b;
	}
	struct sym_inline *v = &b->v[b->n];
	b->n += n;
	return v;
}

/* Inlining deeper than this keeps its innermost levels' place in the
 * function (the line it called) but not the levels themselves. */
#define MAX_INLINE 64

/* The concrete scopes around pc, found in one descent from the CU: at
 * each level only the child whose code ranges hold pc is entered (C++
 * namespaces and classes, which hold no code of their own, are looked
 * into). Fills *sub with the subprogram and inl[] with the inlined
 * instances, innermost first; returns 1 if a subprogram was found.
 * libdw's dwarf_getscopes finds the innermost instance too, but the code
 * an instance is inlined into takes a dwarf_getscopes_die per level,
 * each a walk of the whole CU from its start: in a big CU (CPython's
 * ceval.c) that was most of the time `report` spent on a native profile
 * (bench/inline.py). */
static int scope_path(Dwarf_Die *cu, Dwarf_Addr pc, Dwarf_Die *sub, Dwarf_Die *inl, uint32_t *ninl, int *deep)
{
	Dwarf_Die path[MAX_INLINE + 1];
	uint32_t n = 0;
	int have_sub = 0;
	Dwarf_Die parent = *cu, child;
	for (int guard = 0; guard < 4096; guard++) {
		if (dwarf_child(&parent, &child) != 0)
			break;
		int entered = 0;
		do {
			int tag = dwarf_tag(&child);
			switch (tag) {
			case DW_TAG_subprogram:
			case DW_TAG_inlined_subroutine:
			case DW_TAG_lexical_block:
				if (dwarf_haspc(&child, pc) != 1)
					continue;
				if (tag == DW_TAG_subprogram) {
					/* A function nested in another (a
					 * GNU C nested function) is the one
					 * running: start the chain over. */
					*sub = child;
					have_sub = 1;
					n = 0;
				} else if (tag == DW_TAG_inlined_subroutine && have_sub) {
					if (n < MAX_INLINE + 1)
						path[n++] = child;
					else
						*deep = 1;
				}
				entered = 1;
				break;
			case DW_TAG_namespace:
			case DW_TAG_class_type:
			case DW_TAG_structure_type:
			case DW_TAG_union_type:
			case DW_TAG_module:
				if (have_sub || !dwarf_haschildren(&child))
					continue;
				/* Look inside; come back to the siblings
				 * after, if pc is not there. */
				{
					Dwarf_Die s2;
					uint32_t n2 = 0;
					int deep2 = 0;
					Dwarf_Die inl2[MAX_INLINE];
					if (scope_path(&child, pc, &s2, inl2, &n2, &deep2)) {
						*sub = s2;
						memcpy(inl, inl2, n2 * sizeof(*inl));
						*ninl = n2;
						*deep = deep2;
						return 1;
					}
				}
				continue;
			default:
				continue;
			}
			if (entered)
				break;
		} while (dwarf_siblingof(&child, &child) == 0);
		if (!entered)
			break;
		parent = child;
	}
	if (!have_sub)
		return 0;
	if (n > MAX_INLINE) {
		n = MAX_INLINE;
		*deep = 1;
	}
	/* path[] is outermost first; inl[] is innermost first. */
	for (uint32_t i = 0; i < n; i++)
		inl[i] = path[n - 1 - i];
	*ninl = n;
	return 1;
}

/* From DWARF: the function (DW_TAG_subprogram) that contains `a`, where it
 * is declared, its name when no ELF symbol gave one, and the functions
 * inlined at `a` (DW_TAG_inlined_subroutine), outermost first, each with
 * the line executing in it. The function's own line is the call site of
 * the outermost inlined function, so that out->file/line always point
 * into the function reported, not into a header it inlined. */
void func_scope(struct symbolizer *s, struct symfile *f, uint64_t a, struct sym_info *out)
{
	Dwarf_Addr bias = 0;
	Dwarf_Die *cu = dwfl_module_addrdie(f->mod, a, &bias);
	if (!cu)
		return;
	/* dwarf_getscopes stops at the innermost inlined instance (its chain
	 * goes on through the abstract instance); the code it is inlined
	 * into is found by asking for the scopes around that DIE itself, as
	 * many times as inlining is nested. */
	Dwarf_Die inl[MAX_INLINE]; /* innermost first */
	uint32_t ninl = 0;
	Dwarf_Die sub;
	int have_sub = 0, deep = 0;
	const char *call_file = NULL; /* the outermost call site seen */
	uint32_t call_line = 0;
	Dwarf_Die *scopes = NULL;
	int n = 0;
	if (scope_path(cu, a - bias, &sub, inl, &ninl, &deep)) {
		have_sub = 1;
		for (uint32_t i = 0; i < ninl; i++)
			if (!call_site(&inl[i], &call_file, &call_line)) {
				call_file = NULL;
				call_line = 0;
			}
	} else {
		/* Not found by the descent (code in a DIE it does not look
		 * into): libdw's own search. */
		n = dwarf_getscopes(cu, a - bias, &scopes);
	}
	while (n > 0) {
		int i = 0, tag = 0;
		for (; i < n; i++) {
			tag = dwarf_tag(&scopes[i]);
			if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine)
				break;
		}
		if (i == n)
			break;
		if (tag == DW_TAG_subprogram) {
			sub = scopes[i];
			have_sub = 1;
			break;
		}
		if (ninl < MAX_INLINE)
			inl[ninl++] = scopes[i];
		else
			deep = 1;
		if (!call_site(&scopes[i], &call_file, &call_line)) {
			call_file = NULL;
			call_line = 0;
		}
		Dwarf_Die here = scopes[i], *outer = NULL;
		int m = dwarf_getscopes_die(&here, &outer);
		free(scopes);
		scopes = outer;
		/* outer[0] is the inlined instance itself. */
		if (m <= 1) {
			n = 0;
			break;
		}
		n = m - 1;
		memmove(scopes, scopes + 1, (size_t)n * sizeof(*scopes));
	}
	free(scopes);
	if (ninl && !deep) {
		/* The line table's line is the innermost level's; each level's
		 * call site is a line of the level around it. */
		const char *file = out->file;
		uint32_t line = out->line;
		struct sym_inline *v = inl_alloc(s, ninl);
		uint32_t k = ninl;
		for (uint32_t i = 0; v && i < ninl; i++) {
			/* inl[i]: its line is (file, line); where it was
			 * called from is the line of inl[i + 1]. */
			const char *nm = die_name(s, &inl[i]);
			if (nm) {
				struct sym_inline *e = &v[--k];
				int dl = 0;
				e->name = nm;
				e->func_file = dwarf_decl_file(&inl[i]);
				e->func_line = e->func_file && dwarf_decl_line(&inl[i], &dl) == 0 && dl > 0 ? (uint32_t)dl : 0;
				e->file = file;
				e->line = line;
			}
			if (!call_site(&inl[i], &file, &line)) {
				file = NULL;
				line = 0;
			}
		}
		/* Unnamed levels (no abstract origin to name them) are left
		 * out: what they run is shown in the level around them. */
		if (v && k < ninl) {
			out->inl = v + k;
			out->ninl = ninl - k;
		}
	}
	if (ninl) {
		out->file = call_file;
		out->line = call_line;
	}
	if (have_sub) {
		int dl = 0;
		out->func_file = dwarf_decl_file(&sub);
		if (out->func_file && dwarf_decl_line(&sub, &dl) == 0 && dl > 0)
			out->func_line = (uint32_t)dl;
		if (!out->name) {
			const char *nm = die_name(s, &sub);
			if (nm) {
				out->name = nm;
				Dwarf_Addr lo = 0;
				if (dwarf_lowpc(&sub, &lo) == 0 && lo + bias <= a) {
					out->func_start = lo + bias;
					out->sym_offset = a - out->func_start;
				}
			}
		}
	}
}
