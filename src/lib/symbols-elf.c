/*
 * symbols-elf.c — what an object's ELF file says about its functions;
 * see symbols.h. Its function symbols sorted by address (.symtab,
 * .dynsym, MiniDebugInfo, through libdwfl), its PLT stubs named from
 * .rela.plt, the FDE bounds of functions without a symbol, and in a
 * stripped interpreter the parts of CPython's eval loop. Each is read once
 * per object, on first use, from its sections (and the eval loop's code,
 * disassembled); nothing here reads DWARF or knows about processes, which
 * is why it is apart from symbols.c (objects, address spaces, the lookup)
 * and symbols-dwarf.c.
 */
#include "symbols-internal.h"
#include "merge.h"
#include "common/cfi.h"
#include "common/elfsect.h"

#include <capstone/capstone.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>

static void add_eval(struct symfile *f, uint64_t lo, uint64_t hi)
{
	uint64_t(*n)[2] = realloc(f->eval, (f->neval + 1) * sizeof(*n));
	if (!n)
		return;
	f->eval = n;
	f->eval[f->neval][0] = lo;
	f->eval[f->neval][1] = hi;
	f->neval++;
}

/* The target of a direct jump (jmp or jcc, rel8 or rel32) decoded at
 * address a, or 0 if the instruction is none. */
static uint64_t jump_target(const uint8_t *p, size_t len, uint64_t a)
{
	size_t i = 0;
	while (i < len && (p[i] == 0x2e || p[i] == 0x3e || p[i] == 0xf2)) /* branch hints, bnd */
		i++;
	uint64_t next = a + len;
	int32_t rel;
	if (len - i == 5 && p[i] == 0xe9) {
		memcpy(&rel, p + i + 1, 4);
	} else if (len - i == 6 && p[i] == 0x0f && (p[i + 1] & 0xf0) == 0x80) {
		memcpy(&rel, p + i + 2, 4);
	} else if (len - i == 2 && (p[i] == 0xeb || (p[i] & 0xf0) == 0x70)) {
		rel = (int8_t)p[i + 1];
	} else {
		return 0;
	}
	return next + (uint64_t)(int64_t)rel;
}

static int same_cfa(const struct cfi_rules *a, const struct cfi_rules *b)
{
	return a->cfa.kind == b->cfa.kind && a->cfa.reg == b->cfa.reg && a->cfa.off == b->cfa.off;
}

#define MAX_EVAL_PARTS 32

/* Finds the eval loop in CPython: its symbols, and when the object has no
 * .symtab (Debian strips it; only the exported _PyEval_EvalFrameDefault is
 * in .dynsym), its unnamed parts. gcc moves blocks of a function into
 * another FDE (`NAME.cold`: the unlikely paths, or with profile feedback
 * whatever the training run did not execute, which in Debian's 3.14 and
 * 3.15 is most of the loop's body, 82-84 KB beside a named part of about
 * 1 KB). Such a part is entered only by jumps from its own function, with
 * the function's frame live, so it is found by following the code, not
 * by how its frame looks (the registers its first CFI row says are saved
 * differ from build to build): every direct jump of a known part whose
 * target lies outside the known parts leads into a part of the eval loop
 * when the FDE it lands in does not start as a function does (CFA rsp+8:
 * a jump to a function's entry is a tail call) and the CFA rule at the
 * jump and at its target are the same (the jump carries the frame over
 * unchanged). Parts found are followed the same way. Checked on Debian's
 * 3.11 (one .cold part of 7.5 KB), 3.14.10 and 3.15.2 (tests/unit/test_symbols.c). */
void find_eval(struct symfile *f)
{
	int nsyms = dwfl_module_getsymtab(f->mod);
	uint64_t hot_lo = 0, hot_hi = 0;
	int named_parts = 0;
	for (int i = 0; i < nsyms; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		const char *name = dwfl_module_getsym_info(f->mod, i, &sym, &addr, NULL, NULL, NULL);
		if (!merge_is_eval_name(name) || GELF_ST_TYPE(sym.st_info) != STT_FUNC || !sym.st_size)
			continue;
		add_eval(f, addr, addr + sym.st_size);
		if (name[strlen("_PyEval_EvalFrameDefault")])
			named_parts = 1;
		else
			hot_lo = addr, hot_hi = addr + sym.st_size;
	}
	if (named_parts || !hot_hi || !f->elf_path)
		return;
	struct elf_section sec, tsec;
	if (elf_find_section(f->elf_path, ".eh_frame", &sec) ||
	    elf_find_section(f->elf_path, ".text", &tsec) || hot_lo < tsec.addr || hot_hi > tsec.addr + tsec.size)
		return;
	uint8_t *data = elf_read_section(f->elf_path, &sec);
	if (!data)
		return;
	struct cfi_table t;
	struct cfi_source src = { data, sec.size, sec.addr, 0 };
	uint64_t(*fdes)[2] = NULL;
	uint32_t nfdes = 0;
	int rc = cfi_build_section(&t, &src, 0, NULL);
	if (rc == CFI_OK && cfi_fde_ranges(&src, 0, &fdes, &nfdes) != CFI_OK) {
		cfi_table_free(&t);
		rc = CFI_E_FORMAT;
	}
	free(data);
	if (rc != CFI_OK)
		return;
	uint8_t *text = elf_read_section(f->elf_path, &tsec);
	csh h;
	cs_insn *ins = NULL;
	if (!text || cs_open(CS_ARCH_X86, CS_MODE_64, &h) != CS_ERR_OK) {
		free(text);
		free(fdes);
		cfi_table_free(&t);
		return;
	}
	ins = cs_malloc(h);
	uint64_t parts[MAX_EVAL_PARTS][2] = { { hot_lo, hot_hi } };
	uint32_t nparts = 1;
	for (uint32_t k = 0; k < nparts && ins; k++) {
		const uint8_t *code = text + (parts[k][0] - tsec.addr);
		size_t size = parts[k][1] - parts[k][0];
		uint64_t a = parts[k][0];
		while (size) {
			if (!cs_disasm_iter(h, &code, &size, &a, ins)) {
				code++, size--, a++; /* not code: resynchronise */
				continue;
			}
			uint64_t to = jump_target(ins->bytes, ins->size, ins->address);
			if (!to)
				continue;
			int known = 0;
			for (uint32_t j = 0; j < nparts && !known; j++)
				known = to >= parts[j][0] && to < parts[j][1];
			if (known || nparts == MAX_EVAL_PARTS)
				continue;
			/* The FDE it lands in. */
			uint32_t lo = 0, hi = nfdes;
			while (lo < hi) {
				uint32_t mid = lo + (hi - lo) / 2;
				if (fdes[mid][0] <= to)
					lo = mid + 1;
				else
					hi = mid;
			}
			if (!lo || to >= fdes[lo - 1][1])
				continue;
			uint64_t plo = fdes[lo - 1][0], phi = fdes[lo - 1][1];
			uint32_t r0 = cfi_rule_at(&t, plo, NULL), rs = cfi_rule_at(&t, ins->address, NULL),
				 rt = cfi_rule_at(&t, to, NULL);
			if (r0 == CFI_NO_RULE || rs == CFI_NO_RULE || rt == CFI_NO_RULE)
				continue;
			const struct cfi_rules *first = &t.rules[r0];
			if (first->cfa.kind == CFA_REG && first->cfa.reg == DW_RSP && first->cfa.off == 8)
				continue; /* a function's entry: a tail call */
			if (!same_cfa(&t.rules[rs], &t.rules[rt]) || plo < tsec.addr || phi > tsec.addr + tsec.size)
				continue;
			parts[nparts][0] = plo;
			parts[nparts][1] = phi;
			nparts++;
			add_eval(f, plo, phi);
		}
	}
	cs_free(ins, 1);
	cs_close(&h);
	free(text);
	free(fdes);
	cfi_table_free(&t);
}

/* The PLT stubs of x86-64 lazy binding: in .plt, 16-byte entries after
 * the 16-byte PLT0, entry i+1 jumping through relocation i of .rela.plt;
 * with IBT, .plt.sec holds the stubs called, entry i for relocation i. */
static void load_plt(struct symbolizer *s, struct symfile *f)
{
	f->plt_done = 1;
	if (!f->elf_path && !f->image_len)
		return; /* a debug file: its .plt and .rela.plt are empty copies */
	GElf_Addr bias = 0;
	Elf *elf = dwfl_module_getelf(f->mod, &bias);
	size_t shstrndx;
	if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0)
		return;
	GElf_Shdr plt = { 0 }, plt_sec = { 0 }, rela = { 0 };
	Elf_Scn *rela_scn = NULL;
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			continue;
		const char *nm = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!nm)
			continue;
		if (!strcmp(nm, ".plt"))
			plt = sh;
		else if (!strcmp(nm, ".plt.sec"))
			plt_sec = sh;
		else if (!strcmp(nm, ".rela.plt") && sh.sh_type == SHT_RELA)
			rela = sh, rela_scn = scn;
	}
	if (!rela_scn || !plt.sh_size || !rela.sh_entsize)
		return;
	Elf_Scn *dynsym = elf_getscn(elf, rela.sh_link);
	GElf_Shdr dsh;
	Elf_Data *rd = elf_getdata(rela_scn, NULL), *sd = dynsym ? elf_getdata(dynsym, NULL) : NULL;
	if (!rd || !sd || !gelf_getshdr(dynsym, &dsh))
		return;
	size_t n = rela.sh_size / rela.sh_entsize;
	uint64_t base = plt_sec.sh_size ? plt_sec.sh_addr : plt.sh_addr + 16;
	uint64_t limit = plt_sec.sh_size ? plt_sec.sh_addr + plt_sec.sh_size : plt.sh_addr + plt.sh_size;
	if (n > (limit - base) / 16)
		n = (limit - base) / 16;
	f->plt = calloc(n ? n : 1, sizeof(*f->plt));
	if (!f->plt)
		return;
	for (size_t i = 0; i < n; i++) {
		GElf_Rela r;
		GElf_Sym sym;
		if (!gelf_getrela(rd, (int)i, &r) || !gelf_getsym(sd, (int)GELF_R_SYM(r.r_info), &sym))
			continue;
		const char *nm = elf_strptr(elf, dsh.sh_link, sym.st_name);
		char buf[512];
		if (!nm || !*nm || snprintf(buf, sizeof(buf), "%s@plt", nm) >= (int)sizeof(buf))
			continue;
		/* Versions in .dynsym are elsewhere: the name is plain. */
		const char *in = intern_str(s, buf);
		if (in)
			f->plt[f->nplt++] = (struct plt_stub){ base + 16 * i + bias, base + 16 * (i + 1) + bias, in };
	}
}

const struct plt_stub *plt_stub(struct symbolizer *s, struct symfile *f, uint64_t a)
{
	if (!f->plt_done)
		load_plt(s, f);
	uint32_t lo = 0, hi = f->nplt;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (f->plt[mid].hi <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < f->nplt && f->plt[lo].lo <= a ? &f->plt[lo] : NULL;
}

static int fsym_cmp(const void *x, const void *y)
{
	const struct fsym *a = x, *b = y;
	if (a->lo != b->lo)
		return a->lo < b->lo ? -1 : 1;
	return a->rank < b->rank ? -1 : a->rank > b->rank;
}

static void load_syms(struct symfile *f)
{
	f->syms_done = 1;
	int n = dwfl_module_getsymtab(f->mod);
	if (n <= 0 || !(f->syms = malloc((size_t)n * sizeof(*f->syms))))
		return;
	uint32_t k = 0;
	for (int i = 0; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		Elf *elf = NULL;
		Dwarf_Addr bias = 0;
		const char *name = dwfl_module_getsym_info(f->mod, i, &sym, &addr, &shndx, &elf, &bias);
		int type = GELF_ST_TYPE(sym.st_info), bind = GELF_ST_BIND(sym.st_info);
		if (!name || !*name || !addr || shndx == SHN_UNDEF || (type != STT_FUNC && type != STT_GNU_IFUNC))
			continue;
		uint64_t hi = addr + sym.st_size;
		if (!sym.st_size) {
			/* No size (_init, hand-written assembly): it may run to
			 * the next symbol, never past the end of its section
			 * (.init is followed by the PLT). Marked by hi < lo
			 * until the next symbol is known. */
			GElf_Shdr sh;
			Elf_Scn *scn = elf && shndx < SHN_LORESERVE ? elf_getscn(elf, shndx) : NULL;
			hi = scn && gelf_getshdr(scn, &sh) && sh.sh_addr + bias + sh.sh_size > addr
				     ? sh.sh_addr + bias + sh.sh_size : addr + 1;
			hi = ~hi;
		}
		f->syms[k++] = (struct fsym){ addr, hi, name, bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2 };
	}
	qsort(f->syms, k, sizeof(*f->syms), fsym_cmp);
	for (uint32_t i = 0; i < k; i++)
		if (f->syms[i].hi < f->syms[i].lo) {
			uint64_t end = ~f->syms[i].hi;
			uint32_t j = i + 1;
			while (j < k && f->syms[j].lo == f->syms[i].lo)
				j++;
			f->syms[i].hi = j < k && f->syms[j].lo < end ? f->syms[j].lo : end;
		}
	f->nsyms = k;
}

/* The symbol containing `a`: of those that do, the one starting last, and
 * of several there the global one (aliases: memcpy, __memcpy...). */
const struct fsym *find_sym(struct symfile *f, uint64_t a)
{
	if (!f->syms_done)
		load_syms(f);
	uint32_t lo = 0, hi = f->nsyms;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (f->syms[mid].lo <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	const struct fsym *best = NULL;
	/* Walk back over the symbols starting at or before a; nested
	 * symbols are rare, so a few steps suffice. */
	for (uint32_t i = lo, steps = 0; i-- > 0 && steps < 32; steps++) {
		const struct fsym *c = &f->syms[i];
		if (best && c->lo < best->lo)
			break;
		if (a < c->hi && (!best || c->rank <= best->rank))
			best = c;
	}
	return best;
}

/* Where the function containing `a` starts, from the unwind information:
 * a stripped object still has one FDE per function, so its unnamed
 * functions keep apart (as object+0xSTART) instead of one name per
 * address. 0 if no FDE covers `a`. */
uint64_t fde_start(struct symfile *f, uint64_t a)
{
	if (!f->fdes_done) {
		f->fdes_done = 1;
		struct elf_section sec;
		int debug = 0;
		if (!f->elf_path)
			return 0; /* the vDSO names all its functions; a debug file has its symbols */
		if (elf_find_section(f->elf_path, ".eh_frame", &sec) != 0) {
			if (elf_find_section(f->elf_path, ".debug_frame", &sec) != 0)
				return 0;
			debug = 1;
		}
		uint8_t *data = elf_read_section(f->elf_path, &sec);
		if (!data)
			return 0;
		struct cfi_source src = { data, sec.size, sec.addr, 0 };
		if (cfi_fde_ranges(&src, debug, &f->fdes, &f->nfdes) != CFI_OK)
			f->nfdes = 0;
		free(data);
	}
	uint32_t lo = 0, hi = f->nfdes;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (f->fdes[mid][0] <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && a < f->fdes[lo - 1][1] ? f->fdes[lo - 1][0] : 0;
}
