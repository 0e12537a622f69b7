/*
 * test_cfisynth.c — unwind rules derived from machine code (cfi-synth.c)
 * against the compilers' own CFI for the same code, at every address.
 *
 * Objects: the fixture (fixture_cfisynth.c) built by clang, as Numba's
 * JIT code is, and by gcc, at -O2 with unwind tables; Numba JIT images
 * saved by gen_jitimage.py with debug information on (so LLVM wrote CFI
 * for every function; their relocations are applied here as the JIT's
 * loader did); and Debian's python3.11 and libm (gcc, LTO), function
 * bounds from their FDEs. For each function the derivation gives rules
 * for, they must agree with the FDE's wherever both speak: the same CFA,
 * the return address at CFA - 8, and every callee-saved register said to
 * be saved at the same place (the derivation may say less: a register
 * lost, or unchanged where the FDE already names its slot). Functions it
 * refuses are counted, and enough of each object must be covered for the
 * check to mean something.
 *
 * usage: test_cfisynth FIXTURE_DIR   (holding clang.so and gcc.so)
 */
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/agentd/cfi-synth.h"
#include "../../src/common/cfi.h"

static int failures, checks;

#define CHECK(c, ...)                                                         \
	do {                                                                  \
		checks++;                                                     \
		if (!(c)) {                                                   \
			if (failures++ < 30) {                                \
				fprintf(stderr, "%s:%d: ", __FILE__, __LINE__); \
				fprintf(stderr, __VA_ARGS__);                 \
				fputc('\n', stderr);                         \
			}                                                     \
		}                                                             \
	} while (0)

static uint8_t *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = malloc(len > 0 ? (size_t)len : 1);
	if (b && fread(b, 1, (size_t)len, f) != (size_t)len) {
		free(b);
		b = NULL;
	}
	fclose(f);
	*n = (size_t)len;
	return b;
}

struct elf {
	uint8_t *d;
	size_t n;
	Elf64_Ehdr eh;
	Elf64_Shdr *sh;
	const char *names;
};

static int elf_open(struct elf *e, const char *path)
{
	memset(e, 0, sizeof(*e));
	e->d = slurp(path, &e->n);
	if (!e->d || e->n < sizeof(Elf64_Ehdr))
		return -1;
	memcpy(&e->eh, e->d, sizeof(e->eh));
	if (e->eh.e_shoff + (uint64_t)e->eh.e_shnum * sizeof(Elf64_Shdr) > e->n)
		return -1;
	e->sh = (Elf64_Shdr *)(e->d + e->eh.e_shoff);
	e->names = (const char *)e->d + e->sh[e->eh.e_shstrndx].sh_offset;
	return 0;
}

static int sect(const struct elf *e, const char *name)
{
	for (int i = 0; i < e->eh.e_shnum; i++)
		if (!strcmp(e->names + e->sh[i].sh_name, name))
			return i;
	return -1;
}

/* A JIT image is a relocatable object whose sections the JIT placed at
 * sh_addr: apply the relocations of section `target` the way it did
 * (symbols without a section resolve far away: calls out of the image). */
static void relocate(struct elf *e, int target)
{
	for (int i = 0; i < e->eh.e_shnum; i++) {
		Elf64_Shdr *r = &e->sh[i];
		if (r->sh_type != SHT_RELA || (int)r->sh_info != target)
			continue;
		Elf64_Shdr *sym = &e->sh[r->sh_link], *t = &e->sh[target];
		for (uint64_t k = 0; k < r->sh_size / sizeof(Elf64_Rela); k++) {
			Elf64_Rela rel;
			memcpy(&rel, e->d + r->sh_offset + k * sizeof(rel), sizeof(rel));
			Elf64_Sym s;
			memcpy(&s, e->d + sym->sh_offset + ELF64_R_SYM(rel.r_info) * sizeof(s), sizeof(s));
			uint64_t S = s.st_shndx && s.st_shndx < e->eh.e_shnum ? e->sh[s.st_shndx].sh_addr + s.st_value
									   : 0x100000000ull;
			uint64_t P = t->sh_addr + rel.r_offset;
			uint8_t *at = e->d + t->sh_offset + rel.r_offset;
			uint32_t type = ELF64_R_TYPE(rel.r_info);
			if (type == R_X86_64_PC32 || type == R_X86_64_PLT32) {
				int32_t v = (int32_t)(S + (uint64_t)rel.r_addend - P);
				memcpy(at, &v, 4);
			} else if (type == R_X86_64_PC64) {
				uint64_t v = S + (uint64_t)rel.r_addend - P;
				memcpy(at, &v, 8);
			} else if (type == R_X86_64_64) {
				uint64_t v = S + (uint64_t)rel.r_addend;
				memcpy(at, &v, 8);
			}
		}
	}
}

static int func_cmp(const void *a, const void *b)
{
	const struct cfisynth_func *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* Function bounds from the symbol table (ET_REL: section address plus
 * value), sorted and made disjoint. */
static uint32_t symtab_funcs(const struct elf *e, struct cfisynth_func **out)
{
	int st = sect(e, ".symtab");
	*out = NULL;
	if (st < 0)
		return 0;
	Elf64_Shdr *s = &e->sh[st];
	size_t n = s->sh_size / sizeof(Elf64_Sym);
	struct cfisynth_func *f = calloc(n + 1, sizeof(*f));
	uint32_t k = 0;
	for (size_t i = 0; i < n; i++) {
		Elf64_Sym y;
		memcpy(&y, e->d + s->sh_offset + i * sizeof(y), sizeof(y));
		if (ELF64_ST_TYPE(y.st_info) != STT_FUNC || !y.st_size || !y.st_shndx || y.st_shndx >= e->eh.e_shnum)
			continue;
		uint64_t a = e->eh.e_type == ET_REL ? e->sh[y.st_shndx].sh_addr + y.st_value : y.st_value;
		f[k++] = (struct cfisynth_func){ a, a + y.st_size };
	}
	qsort(f, k, sizeof(*f), func_cmp);
	uint32_t m = 0;
	for (uint32_t i = 0; i < k; i++)
		if (!m || f[i].start >= f[m - 1].end)
			f[m++] = f[i];
	*out = f;
	return m;
}

struct tally {
	uint64_t addrs, lost, quieter;
};

/* Compares the derived rules with the FDE table at every address they cover. */
static void compare(const char *what, const struct cfi_table *t, const struct cfi_fnrows *r, struct tally *ty)
{
	static const int saved[] = { DW_RBX, DW_RBP, 12, 13, 14, 15 };
	for (uint32_t k = 0; k < r->n; k++) {
		const struct cfi_rules *s = &r->rules[k];
		if (s->cfa.kind == CFA_UNSUPPORTED)
			continue;
		uint64_t to = k + 1 < r->n ? r->pc[k + 1] : r->end;
		for (uint64_t a = r->pc[k]; a < to; a++) {
			const struct cfi_rules *f = cfi_lookup(t, a);
			if (!f)
				continue; /* the FDE does not cover it (padding) */
			ty->addrs++;
			CHECK(f->cfa.kind == CFA_REG && f->cfa.reg == s->cfa.reg && f->cfa.off == s->cfa.off,
			      "%s: 0x%llx: CFA r%u%+d derived, r%u%+d (kind %u) in the FDE", what, (unsigned long long)a,
			      s->cfa.reg, s->cfa.off, f->cfa.reg, f->cfa.off, f->cfa.kind);
			CHECK(f->r[DW_RA].kind == REG_AT_CFA && f->r[DW_RA].off == -8, "%s: 0x%llx: return address", what,
			      (unsigned long long)a);
			for (int i = 0; i < 6; i++) {
				const struct cfi_reg *x = &s->r[saved[i]], *y = &f->r[saved[i]];
				if (x->kind == REG_UNDEF) {
					ty->lost += y->kind != REG_UNDEF;
				} else if (x->kind == REG_AT_CFA) {
					CHECK((y->kind == REG_AT_CFA && y->off == x->off) || y->kind == REG_SAME,
					      "%s: 0x%llx: r%d saved at CFA%+d derived, FDE kind %u off %d", what,
					      (unsigned long long)a, saved[i], x->off, y->kind, y->off);
				} else if (y->kind == REG_AT_CFA) {
					ty->quieter++; /* unchanged, and still in its slot */
				}
			}
		}
	}
}

/* Derives and compares over one object; returns the share of functions
 * given rules. */
static double check_object(const char *what, struct elf *e, int use_symtab, double want_share)
{
	int ts = sect(e, ".text"), es = sect(e, ".eh_frame");
	if (ts < 0 || es < 0) {
		CHECK(0, "%s: no .text or .eh_frame", what);
		return 0;
	}
	if (e->eh.e_type == ET_REL) {
		relocate(e, es);
		relocate(e, ts);
	}
	Elf64_Shdr *tx = &e->sh[ts], *eh = &e->sh[es];
	struct cfi_table t;
	struct cfi_source src = { e->d + eh->sh_offset, eh->sh_size, eh->sh_addr, 0 };
	uint32_t bad = 0;
	if (cfi_build_section(&t, &src, 0, &bad) != CFI_OK) {
		CHECK(0, "%s: .eh_frame does not build", what);
		return 0;
	}
	struct cfisynth_func *funcs = NULL;
	uint32_t nf = 0;
	if (use_symtab) {
		nf = symtab_funcs(e, &funcs);
	} else {
		uint64_t(*ranges)[2] = NULL;
		if (cfi_fde_ranges(&src, 0, &ranges, &nf) == CFI_OK) {
			funcs = calloc(nf + 1, sizeof(*funcs));
			uint32_t m = 0;
			for (uint32_t i = 0; i < nf; i++)
				if (!m || ranges[i][0] >= funcs[m - 1].end)
					funcs[m++] = (struct cfisynth_func){ ranges[i][0], ranges[i][1] };
			nf = m;
		}
		free(ranges);
	}
	struct cfi_fnrows *rows = NULL;
	uint32_t nrows = 0;
	struct cfisynth_stats st;
	int rc = cfisynth_build(e->d + tx->sh_offset, tx->sh_addr, tx->sh_size, funcs, nf, &rows, &nrows, &st);
	CHECK(rc == 0, "%s: cfisynth_build failed", what);
	struct tally ty = { 0 };
	for (uint32_t i = 0; i < nrows; i++)
		compare(what, &t, &rows[i], &ty);
	double share = st.funcs ? (double)st.done / st.funcs : 0;
	printf("test_cfisynth: %s: %u functions, rules for %u (%.0f%%), %u refused (insn %u, join %u, ret %u, "
	       "target %u, noreturn %u, entry %u); %llu addresses compared, %llu register rules lost, %llu left to "
	       "the register\n",
	       what, st.funcs, st.done, 100 * share, st.refused, st.why[CFISYNTH_INSN], st.why[CFISYNTH_JOIN],
	       st.why[CFISYNTH_RET], st.why[CFISYNTH_TARGET], st.why[CFISYNTH_NORETURN], st.why[CFISYNTH_ENTRY],
	       (unsigned long long)ty.addrs, (unsigned long long)ty.lost, (unsigned long long)ty.quieter);
	CHECK(share >= want_share, "%s: rules for %.0f%% of the functions, want %.0f%%", what, 100 * share,
	      100 * want_share);
	CHECK(ty.addrs > 0, "%s: nothing compared", what);
	cfisynth_free(rows, nrows);
	free(funcs);
	cfi_table_free(&t);
	return share;
}

static void run(const char *path, const char *what, int use_symtab, double want, int system)
{
	struct elf e;
	if (elf_open(&e, path)) {
		/* The system's objects are Debian 12's; elsewhere, not there. */
		if (system)
			printf("test_cfisynth: %s: %s not here, skipped\n", what, path);
		else
			CHECK(0, "%s: cannot read %s", what, path);
		free(e.d);
		return;
	}
	check_object(what, &e, use_symtab, want);
	free(e.d);
}

/* A function the derivation must refuse: it leaves with the stack not
 * where it found it (push, then ret). Hand-assembled. */
static void refuses_bad_code(void)
{
	static const uint8_t code[] = {
		0x53,                   /* push rbx */
		0xc3,                   /* ret: rsp is not back */
		0x48, 0x83, 0xec, 0x18, /* sub rsp, 24 */
		0x48, 0x83, 0xc4, 0x18, /* add rsp, 24 */
		0xc3,                   /* ret */
	};
	struct cfisynth_func f[2] = { { 0x1000, 0x1002 }, { 0x1002, 0x100b } };
	struct cfi_fnrows *rows = NULL;
	uint32_t n = 0;
	struct cfisynth_stats st;
	CHECK(cfisynth_build(code, 0x1000, sizeof(code), f, 2, &rows, &n, &st) == 0, "build");
	CHECK(n == 1 && rows[0].start == 0x1002 && st.refused == 1, "refused %u, kept %u", st.refused, n);
	if (n == 1) {
		/* sub rsp, 24 at 0x1002: CFA rsp+8; then rsp+32; then rsp+8 at the ret. */
		CHECK(rows[0].n == 3 && rows[0].pc[1] == 0x1006 && rows[0].rules[1].cfa.off == 32 &&
			      rows[0].pc[2] == 0x100a && rows[0].rules[2].cfa.off == 8,
		      "rows of the good function");
	}
	cfisynth_free(rows, n);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test_cfisynth FIXTURE_DIR\n");
		return 2;
	}
	char p[4096];
	refuses_bad_code();
	snprintf(p, sizeof(p), "%s/clang.so", argv[1]);
	run(p, "clang -O2", 1, 0.9, 0);
	snprintf(p, sizeof(p), "%s/gcc.so", argv[1]);
	run(p, "gcc -O2", 1, 0.7, 0);
	run(SRCDIR "/tests/unit/fixtures/numba-kern-debuginfo.o", "numba image (debuginfo)", 1, 0.99, 0);
	run(SRCDIR "/tests/unit/fixtures/numba_kernel.jit.o", "numba image", 1, 0.99, 0);
	/* gcc with LTO and hot/cold splitting: each function and its cold
	 * part jump into each other's middle, so both are refused (about
	 * half); what is kept must be right. */
	run("/usr/bin/python3.11", "Debian python3.11", 0, 0.35, 1);
	run("/lib/x86_64-linux-gnu/libm.so.6", "libm", 0, 0.9, 1);
	printf("test_cfisynth: %d passed, %d failed\n", checks - failures, failures);
	return failures != 0;
}
