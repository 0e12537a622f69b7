/*
 * jitsym.c — names and lines of JIT code, from the in-memory ELF images a
 * process registered through the GDB JIT interface (REC_JIT_IMAGE); see
 * jitsym.h.
 *
 * An image is a relocatable object (ET_REL) whose section headers hold the
 * run-time addresses of its loaded sections. So a function symbol's
 * address is its section's sh_addr plus st_value. The debug sections (with
 * NUMBA_DEBUGINFO=1: .debug_info, .debug_line) are not relocated in the
 * image: their addresses are offsets against section symbols, resolved by
 * .rela.debug_* entries. We apply those relocations to a copy, against the
 * sections' run-time addresses, and hand the result to libdw, whose line
 * table then speaks in run-time addresses directly.
 */
#include "jitsym.h"

#include <elf.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numbaname.h"

struct jfunc {
	uint64_t start, end;
	char *name;         /* readable */
	int kind;           /* enum numba_kind, or -1: not a Numba name */
};

struct jimage {
	uint64_t id;
	uint64_t start, end;
	uint64_t (*ranges)[2];
	uint32_t nranges;
	int live;
	uint8_t *elf;       /* relocated copy, owned */
	size_t len;
	Elf64_Ehdr eh;      /* its header as checked when added (the copy's
	                     * own is not read again: see relocate_debug) */
	Elf *e;
	Dwarf *dw;
	struct jfunc *funcs;
	uint32_t nfuncs;
	char label[32];     /* "[jit #N]" */
	const char *main_file; /* source of the image's first compile unit, NULL if none */
};

struct jit_space {
	struct jimage **imgs;
	uint32_t n, cap;
	char **strs;        /* strings handed out (file names) */
	uint32_t nstrs, capstrs;
};

static const char *line_path(struct jit_space *sp, const struct jimage *g, Dwarf_Die *cu, const char *file);

struct jit_space *jit_space_new(void)
{
	return calloc(1, sizeof(struct jit_space));
}

static void image_free(struct jimage *g)
{
	if (g->dw)
		dwarf_end(g->dw);
	if (g->e)
		elf_end(g->e);
	for (uint32_t i = 0; i < g->nfuncs; i++)
		free(g->funcs[i].name);
	free(g->funcs);
	free(g->ranges);
	free(g->elf);
	free(g);
}

void jit_space_free(struct jit_space *sp)
{
	if (!sp)
		return;
	for (uint32_t i = 0; i < sp->n; i++)
		image_free(sp->imgs[i]);
	free(sp->imgs);
	for (uint32_t i = 0; i < sp->nstrs; i++)
		free(sp->strs[i]);
	free(sp->strs);
	free(sp);
}

static int shdr_at(const uint8_t *e, size_t len, const Elf64_Ehdr *eh, uint32_t i, Elf64_Shdr *s)
{
	if (i >= eh->e_shnum)
		return -1;
	memcpy(s, e + eh->e_shoff + (size_t)i * sizeof(*s), sizeof(*s));
	(void)len;
	return 0;
}

/* Applies the relocations of every non-loaded (debug) section in place,
 * against the loaded sections' run-time addresses. */
static void relocate_debug(uint8_t *e, size_t len, const Elf64_Ehdr *eh)
{
	/* A section a relocation may write to must not overlap the ELF
	 * header or the section headers (only a hostile image has one that
	 * does): they stay as they were checked. */
	uint64_t sh_lo = eh->e_shoff, sh_hi = eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr);
	for (uint32_t i = 0; i < eh->e_shnum; i++) {
		Elf64_Shdr rs, ts, ss;
		shdr_at(e, len, eh, i, &rs);
		if (rs.sh_type != SHT_RELA || rs.sh_entsize != sizeof(Elf64_Rela) || rs.sh_offset > len ||
		    rs.sh_size > len - rs.sh_offset)
			continue;
		if (shdr_at(e, len, eh, rs.sh_info, &ts) || (ts.sh_flags & SHF_ALLOC) || ts.sh_offset > len ||
		    ts.sh_size > len - ts.sh_offset || ts.sh_offset < sizeof(Elf64_Ehdr) ||
		    (ts.sh_offset < sh_hi && ts.sh_offset + ts.sh_size > sh_lo))
			continue;
		if (shdr_at(e, len, eh, rs.sh_link, &ss) || ss.sh_type != SHT_SYMTAB || ss.sh_offset > len ||
		    ss.sh_size > len - ss.sh_offset)
			continue;
		size_t nsym = ss.sh_size / sizeof(Elf64_Sym);
		for (size_t k = 0; k < rs.sh_size / sizeof(Elf64_Rela); k++) {
			Elf64_Rela r;
			memcpy(&r, e + rs.sh_offset + k * sizeof(r), sizeof(r));
			uint32_t si = (uint32_t)ELF64_R_SYM(r.r_info), type = (uint32_t)ELF64_R_TYPE(r.r_info);
			if (si >= nsym)
				continue;
			Elf64_Sym sym;
			memcpy(&sym, e + ss.sh_offset + si * sizeof(sym), sizeof(sym));
			uint64_t base = 0;
			Elf64_Shdr sec;
			if (sym.st_shndx != SHN_UNDEF && sym.st_shndx < SHN_LORESERVE &&
			    !shdr_at(e, len, eh, sym.st_shndx, &sec))
				base = sec.sh_addr;
			uint64_t v = base + sym.st_value + (uint64_t)r.r_addend;
			size_t w = type == R_X86_64_64 ? 8 : (type == R_X86_64_32 || type == R_X86_64_32S) ? 4 : 0;
			if (!w || r.r_offset > ts.sh_size || w > ts.sh_size - r.r_offset)
				continue;
			uint8_t *dst = e + ts.sh_offset + r.r_offset;
			if (w == 8) {
				memcpy(dst, &v, 8);
			} else {
				uint32_t v32 = (uint32_t)v;
				memcpy(dst, &v32, 4);
			}
		}
	}
}

static int cmp_func(const void *a, const void *b)
{
	const struct jfunc *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

static void read_symbols(struct jimage *g, const Elf64_Ehdr *eh)
{
	for (uint32_t i = 0; i < eh->e_shnum; i++) {
		Elf64_Shdr ss, strs;
		shdr_at(g->elf, g->len, eh, i, &ss);
		if (ss.sh_type != SHT_SYMTAB || ss.sh_offset > g->len || ss.sh_size > g->len - ss.sh_offset ||
		    shdr_at(g->elf, g->len, eh, ss.sh_link, &strs) || strs.sh_offset > g->len ||
		    strs.sh_size > g->len - strs.sh_offset)
			continue;
		size_t nsym = ss.sh_size / sizeof(Elf64_Sym);
		if (!nsym)
			continue; /* realloc(p, 0) would free the array and return NULL */
		struct jfunc *f = realloc(g->funcs, (g->nfuncs + nsym) * sizeof(*f));
		if (!f)
			return;
		g->funcs = f;
		for (size_t k = 0; k < nsym; k++) {
			Elf64_Sym sym;
			memcpy(&sym, g->elf + ss.sh_offset + k * sizeof(sym), sizeof(sym));
			Elf64_Shdr sec;
			if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF ||
			    sym.st_shndx >= SHN_LORESERVE || shdr_at(g->elf, g->len, eh, sym.st_shndx, &sec) ||
			    !sec.sh_addr || sym.st_name >= strs.sh_size)
				continue;
			const char *raw = (const char *)g->elf + strs.sh_offset + sym.st_name;
			size_t rl = strnlen(raw, strs.sh_size - sym.st_name);
			if (rl == strs.sh_size - sym.st_name)
				continue;
			char buf[1024];
			int kind = -1;
			const char *name = raw;
			if (numba_demangle(raw, buf, sizeof(buf), &kind) == 0) {
				if (kind == NUMBA_CPYTHON_WRAPPER)
					strncat(buf, " [cpython wrapper]", sizeof(buf) - strlen(buf) - 1);
				else if (kind == NUMBA_CFUNC_WRAPPER)
					strncat(buf, " [cfunc wrapper]", sizeof(buf) - strlen(buf) - 1);
				else if (kind == NUMBA_GUFUNC_WRAPPER)
					strncat(buf, " [gufunc wrapper]", sizeof(buf) - strlen(buf) - 1);
				name = buf;
			} else {
				kind = -1;
			}
			struct jfunc *j = &g->funcs[g->nfuncs];
			j->start = sec.sh_addr + sym.st_value;
			j->end = j->start + (sym.st_size ? sym.st_size : 1);
			j->kind = kind;
			j->name = strdup(name);
			if (j->name)
				g->nfuncs++;
		}
	}
	if (g->nfuncs) /* an image without a symbol table has no array */
		qsort(g->funcs, g->nfuncs, sizeof(*g->funcs), cmp_func);
}

int jit_space_add(struct jit_space *sp, const struct rec_jit_image *r)
{
	if (r->image_len < sizeof(Elf64_Ehdr) || memcmp(r->image, ELFMAG, SELFMAG) || r->image[EI_CLASS] != ELFCLASS64)
		return 0; /* not an image we can read: its samples stay unnamed */
	Elf64_Ehdr eh;
	memcpy(&eh, r->image, sizeof(eh));
	if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff > r->image_len ||
	    (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr) > r->image_len - eh.e_shoff)
		return 0;
	struct jimage *g = calloc(1, sizeof(*g));
	if (!g)
		return -1;
	g->id = r->id;
	g->start = r->start;
	g->end = r->end;
	g->live = 1;
	g->len = r->image_len;
	g->eh = eh;
	g->elf = malloc(r->image_len);
	g->ranges = calloc(eh.e_shnum ? eh.e_shnum : 1, sizeof(g->ranges[0]));
	if (!g->elf || !g->ranges) {
		image_free(g);
		return -1;
	}
	memcpy(g->elf, r->image, r->image_len);
	snprintf(g->label, sizeof(g->label), "[jit #%" PRIu64 "]", r->id);
	for (uint32_t i = 0; i < eh.e_shnum; i++) {
		Elf64_Shdr s;
		shdr_at(g->elf, g->len, &eh, i, &s);
		if ((s.sh_flags & SHF_ALLOC) && (s.sh_flags & SHF_EXECINSTR) && s.sh_addr && s.sh_size) {
			g->ranges[g->nranges][0] = s.sh_addr;
			g->ranges[g->nranges][1] = s.sh_addr + s.sh_size;
			g->nranges++;
		}
	}
	read_symbols(g, &eh);
	relocate_debug(g->elf, g->len, &eh);
	elf_version(EV_CURRENT);
	g->e = elf_memory((char *)g->elf, g->len);
	if (g->e)
		g->dw = dwarf_begin_elf(g->e, DWARF_C_READ, NULL);
	Dwarf_Off next;
	size_t hs;
	Dwarf_Die cu;
	if (g->dw && dwarf_nextcu(g->dw, 0, &next, &hs, NULL, NULL, NULL) == 0 && dwarf_offdie(g->dw, hs, &cu)) {
		const char *name = dwarf_diename(&cu);
		if (name && name[0] != '<')
			g->main_file = line_path(sp, NULL, &cu, name);
	}
	if (sp->n == sp->cap) {
		uint32_t cap = sp->cap ? sp->cap * 2 : 16;
		struct jimage **n = realloc(sp->imgs, cap * sizeof(*n));
		if (!n) {
			image_free(g);
			return -1;
		}
		sp->imgs = n;
		sp->cap = cap;
	}
	sp->imgs[sp->n++] = g;
	return 0;
}

void jit_space_unload(struct jit_space *sp, uint64_t id)
{
	for (uint32_t i = 0; i < sp->n; i++)
		if (sp->imgs[i]->id == id)
			sp->imgs[i]->live = 0;
}

static struct jimage *find_image(const struct jit_space *sp, uint64_t pc, int dead_too)
{
	/* Newest first: an address reused after an unload belongs to the
	 * image registered last. */
	for (uint32_t i = sp->n; i-- > 0;) {
		struct jimage *g = sp->imgs[i];
		if (!g->live && !dead_too)
			continue;
		for (uint32_t k = 0; k < g->nranges; k++)
			if (pc >= g->ranges[k][0] && pc < g->ranges[k][1])
				return g;
	}
	return NULL;
}

static const char *keep_str(struct jit_space *sp, const char *s)
{
	for (uint32_t i = 0; i < sp->nstrs; i++)
		if (!strcmp(sp->strs[i], s))
			return sp->strs[i];
	if (sp->nstrs == sp->capstrs) {
		uint32_t cap = sp->capstrs ? sp->capstrs * 2 : 16;
		char **n = realloc(sp->strs, cap * sizeof(*n));
		if (!n)
			return NULL;
		sp->strs = n;
		sp->capstrs = cap;
	}
	char *c = strdup(s);
	if (!c)
		return NULL;
	sp->strs[sp->nstrs++] = c;
	return c;
}

/* The source path of a DWARF line, absolute when the CU says where it was
 * compiled (Numba records the @njit function's file name and directory). */
/* The source file of generated code in image g: its own first compile
 * unit's, or, when g holds only generated code (a parfor gufunc compiled
 * on its own, whose address the parent function calls), that of an image
 * which also links a function of g (the parent's). */
static const char *origin_file(const struct jit_space *sp, const struct jimage *g)
{
	if (g->main_file)
		return g->main_file;
	for (uint32_t k = 0; k < g->nfuncs; k++) {
		if (g->funcs[k].kind != NUMBA_FUNC)
			continue;
		for (uint32_t i = sp->n; i-- > 0;) {
			const struct jimage *o = sp->imgs[i];
			if (o == g || !o->main_file)
				continue;
			for (uint32_t j = 0; j < o->nfuncs; j++)
				if (!strcmp(o->funcs[j].name, g->funcs[k].name))
					return o->main_file;
		}
	}
	return NULL;
}

static const char *line_path(struct jit_space *sp, const struct jimage *g, Dwarf_Die *cu, const char *file)
{
	if (!file)
		return NULL;
	/* Code Numba generates from source text of its own (a parfor
	 * gufunc: the body of a prange loop, whose lines are the @njit
	 * function's) says "<string>"; it is linked into the image of the
	 * function it came from, whose compile unit comes first. */
	const char *base = strrchr(file, '/');
	base = base ? base + 1 : file;
	if (base[0] == '<') {
		const char *mf = g ? origin_file(sp, g) : NULL;
		return mf ? mf : keep_str(sp, base);
	}
	if (file[0] == '/')
		return keep_str(sp, file);
	Dwarf_Attribute a;
	const char *dir = dwarf_formstring(dwarf_attr(cu, DW_AT_comp_dir, &a));
	if (!dir || !*dir)
		return keep_str(sp, file);
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s/%s", dir, file);
	return keep_str(sp, buf);
}

/* The compile unit covering pc. LLVM writes no .debug_aranges, which
 * dwarf_addrdie relies on; an image has one CU or a few. */
static int find_cu(Dwarf *dw, uint64_t pc, Dwarf_Die *out)
{
	Dwarf_Off off = 0, next;
	size_t hs;
	while (dwarf_nextcu(dw, off, &next, &hs, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu;
		if (dwarf_offdie(dw, off + hs, &cu)) {
			Dwarf_Addr base, lo, hi;
			ptrdiff_t o = 0;
			while ((o = dwarf_ranges(&cu, o, &base, &lo, &hi)) > 0)
				if (pc >= lo && pc < hi) {
					*out = cu;
					return 0;
				}
		}
		off = next;
	}
	return -1;
}

static int lookup(struct jit_space *sp, uint64_t addr, int call, struct jit_info *out, int dead_too)
{
	memset(out, 0, sizeof(*out));
	uint64_t pc = call ? addr - 1 : addr;
	struct jimage *g = sp ? find_image(sp, pc, dead_too) : NULL;
	if (!g)
		return 0;
	out->module = g->label;
	out->image = g->id;
	uint32_t lo = 0, hi = g->nfuncs;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (g->funcs[mid].start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo > 0 && pc < g->funcs[lo - 1].end) {
		out->name = g->funcs[lo - 1].name;
		out->func_start = g->funcs[lo - 1].start;
		out->func_end = g->funcs[lo - 1].end;
		out->numba_kind = g->funcs[lo - 1].kind;
	}
	if (!g->dw)
		return 1;
	Dwarf_Die cu;
	if (find_cu(g->dw, pc, &cu))
		return 1;
	Dwarf_Line *l = dwarf_getsrc_die(&cu, pc);
	int line = 0;
	if (l && dwarf_lineno(l, &line) == 0 && line > 0) {
		out->file = line_path(sp, g, &cu, dwarf_linesrc(l, NULL, NULL));
		out->line = (uint32_t)line;
	}
	/* Where the function starts: its subprogram's declaration. */
	Dwarf_Die *scopes = NULL;
	int ns = dwarf_getscopes(&cu, pc, &scopes);
	for (int i = 0; i < ns; i++) {
		if (dwarf_tag(&scopes[i]) != DW_TAG_subprogram)
			continue;
		int dl = 0;
		if (dwarf_decl_line(&scopes[i], &dl) == 0 && dl > 0) {
			out->func_line = (uint32_t)dl;
			out->func_file = line_path(sp, g, &cu, dwarf_decl_file(&scopes[i]));
		}
		break;
	}
	free(scopes);
	if (!out->func_file)
		out->func_file = out->file;
	return 1;
}

int jit_lookup(struct jit_space *sp, uint64_t addr, int call, struct jit_info *out)
{
	return lookup(sp, addr, call, out, 0);
}

int jit_lookup_any(struct jit_space *sp, uint64_t addr, int call, struct jit_info *out)
{
	return lookup(sp, addr, call, out, 1);
}

int jit_image_bytes(const struct jit_space *sp, uint64_t addr, const uint8_t **code, uint64_t *start, uint64_t *len)
{
	struct jimage *g = sp ? find_image(sp, addr, 1) : NULL;
	if (!g)
		return -1;
	for (uint32_t i = 0; i < g->eh.e_shnum; i++) {
		Elf64_Shdr s;
		shdr_at(g->elf, g->len, &g->eh, i, &s);
		if ((s.sh_flags & SHF_EXECINSTR) && s.sh_addr <= addr && addr < s.sh_addr + s.sh_size &&
		    s.sh_type == SHT_PROGBITS && s.sh_offset <= g->len && s.sh_size <= g->len - s.sh_offset) {
			*code = g->elf + s.sh_offset;
			*start = s.sh_addr;
			*len = s.sh_size;
			return 0;
		}
	}
	return -1;
}
