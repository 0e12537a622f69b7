/*
 * test_cfi.c — the CFI compiler (cfi.c) against elfutils' own reading of
 * the same call frame information, on the fixture and on real system
 * objects (the interpreter, libc, libm): at every row of our table the CFA
 * rule and the rules of the return address and every callee-saved
 * register must be what libdw says. Then the in-memory path (the
 * .eh_frame_hdr of a loaded object, as the agent reads it) must give the
 * same table as the file.
 *
 * usage: test_cfi FIXTURE.so
 */
#include <dlfcn.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <libelf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/common/cfi.h"
#include "../../src/common/elfsect.h"

static int failures, checks;

#define CHECK(c, ...)                                                         \
	do {                                                                  \
		checks++;                                                     \
		if (!(c)) {                                                   \
			if (failures++ < 20) {                                \
				fprintf(stderr, "%s:%d: ", __FILE__, __LINE__); \
				fprintf(stderr, __VA_ARGS__);                 \
				fputc('\n', stderr);                          \
			}                                                     \
		}                                                             \
	} while (0)

static int load_file_table(const char *path, struct cfi_table *t)
{
	struct elf_section s;
	if (elf_find_section(path, ".eh_frame", &s))
		return -1;
	uint8_t *d = elf_read_section(path, &s);
	if (!d)
		return -1;
	struct cfi_source src = { d, s.size, s.addr, 0 };
	uint32_t bad = 0;
	int rc = cfi_build_section(t, &src, 0, &bad);
	free(d);
	CHECK(rc == CFI_OK, "%s: build failed (%d)", path, rc);
	CHECK(bad == 0, "%s: %u malformed entries", path, bad);
	return rc == CFI_OK ? 0 : -1;
}

/* Our rule for one register against libdw's location expression. */
static int same_reg(const struct cfi_reg *r, int regno, Dwarf_Frame *fr)
{
	Dwarf_Op mem[3], *ops;
	size_t nops;
	if (dwarf_frame_register(fr, regno, mem, &ops, &nops) != 0)
		return r->kind == REG_UNSUPPORTED;
	switch (r->kind) {
	case REG_SAME:
		/* libdw: same value, or (unmentioned, non-callee-saved) undefined. */
		return nops == 0;
	case REG_UNDEF:
		return nops == 0 && ops != NULL;
	case REG_AT_CFA:
		if (r->off == 0)
			return nops == 1 && ops[0].atom == DW_OP_call_frame_cfa;
		return nops == 2 && ops[0].atom == DW_OP_call_frame_cfa && ops[1].atom == DW_OP_plus_uconst &&
		       (int64_t)ops[1].number == r->off;
	case REG_AT_REG:
		/* DW_CFA_expression: libdw may put the CFA push the DWARF
		 * spec implies in front of the expression. */
		return nops >= 1 && ops[nops - 1].atom == DW_OP_breg0 + r->reg && (int64_t)ops[nops - 1].number == r->off;
	default:
		return 1; /* rare forms: not compared */
	}
}

static void compare_with_libdw(const char *path)
{
	struct cfi_table t;
	if (load_file_table(path, &t))
		return;
	CHECK(t.nunsupported * 100 <= t.nrows, "%s: %u of %u rows unsupported", path, t.nunsupported, t.nrows);
	int fd = open(path, O_RDONLY);
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	Dwarf_CFI *cfi = elf ? dwarf_getcfi_elf(elf) : NULL;
	CHECK(cfi != NULL, "%s: libdw has no CFI", path);
	uint32_t compared = 0;
	static const int regs[] = { DW_RA, DW_RBX, DW_RBP, 12, 13, 14, 15 };
	for (uint32_t i = 0; cfi && i < t.nrows; i++) {
		if (t.rule[i] == CFI_NO_RULE)
			continue;
		uint64_t pc = t.base + t.pc[i];
		const struct cfi_rules *ru = cfi_lookup(&t, pc);
		Dwarf_Frame *fr = NULL;
		if (dwarf_cfi_addrframe(cfi, pc, &fr) != 0) {
			CHECK(0, "%s: libdw has no frame at %#lx where we have one", path, (unsigned long)pc);
			continue;
		}
		Dwarf_Op *ops;
		size_t nops;
		if (dwarf_frame_cfa(fr, &ops, &nops) == 0 && ru->cfa.kind == CFA_REG) {
			/* libdw writes DW_CFA_def_cfa as DW_OP_bregx reg, off. */
			int same = nops == 1 && ((ops[0].atom == DW_OP_breg0 + ru->cfa.reg &&
						  (int64_t)ops[0].number == ru->cfa.off) ||
						 (ops[0].atom == DW_OP_bregx && ops[0].number == ru->cfa.reg &&
						  (int64_t)ops[0].number2 == ru->cfa.off));
			CHECK(same,
			      "%s: CFA at %#lx: ours r%u%+d, libdw op %#x %ld", path, (unsigned long)pc, ru->cfa.reg,
			      ru->cfa.off, nops ? ops[0].atom : 0, nops ? (long)ops[0].number : 0);
		}
		for (size_t k = 0; k < sizeof(regs) / sizeof(regs[0]); k++)
			CHECK(same_reg(&ru->r[regs[k]], regs[k], fr), "%s: r%d at %#lx: ours kind %u off %d", path,
			      regs[k], (unsigned long)pc, ru->r[regs[k]].kind, ru->r[regs[k]].off);
		free(fr);
		compared++;
	}
	CHECK(compared > 10, "%s: only %u rows compared", path, compared);
	printf("test_cfi: %s: %u FDEs, %u rows, %u rule sets, %u rows compared with libdw\n", path, t.nfdes,
	       t.nrows, t.nrules, compared);
	if (cfi)
		dwarf_cfi_end(cfi);
	if (elf)
		elf_end(elf);
	close(fd);
	cfi_table_free(&t);
}

struct found {
	const char *name;
	uint64_t bias, hdr, seg, seglen;
};

static int find_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	struct found *f = data;
	if (!info->dlpi_name || !strstr(info->dlpi_name, f->name))
		return 0;
	f->bias = info->dlpi_addr;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_GNU_EH_FRAME)
			f->hdr = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		if (p->p_type == PT_LOAD && f->hdr >= info->dlpi_addr + p->p_vaddr &&
		    f->hdr < info->dlpi_addr + p->p_vaddr + p->p_filesz) {
			f->seg = info->dlpi_addr + p->p_vaddr;
			f->seglen = p->p_filesz;
		}
	}
	return 1;
}

static void memory_matches_file(const char *path)
{
	void *h = dlopen(path, RTLD_NOW);
	CHECK(h != NULL, "dlopen %s: %s", path, dlerror());
	if (!h)
		return;
	const char *base = strrchr(path, '/');
	struct found f = { base ? base + 1 : path, 0, 0, 0, 0 };
	dl_iterate_phdr(find_cb, &f);
	CHECK(f.hdr && f.seglen, "%s: no .eh_frame_hdr in memory", path);
	struct cfi_table mem, file;
	struct cfi_source src = { (const uint8_t *)(uintptr_t)f.seg, f.seglen, f.seg, 0 };
	int rc = cfi_build_eh_frame_hdr(&mem, &src, f.hdr, NULL);
	CHECK(rc == CFI_OK, "%s: in-memory build failed (%d)", path, rc);
	if (rc == CFI_OK && load_file_table(path, &file) == 0) {
		CHECK(mem.nrows == file.nrows && mem.nrules == file.nrules && mem.nfdes == file.nfdes,
		      "memory %u rows/%u rules, file %u/%u", mem.nrows, mem.nrules, file.nrows, file.nrules);
		for (uint32_t i = 0; i < file.nrows; i++) {
			uint64_t pc = file.base + file.pc[i];
			const struct cfi_rules *a = cfi_lookup(&file, pc), *b = cfi_lookup(&mem, pc + f.bias);
			CHECK((!a && !b) || (a && b && !memcmp(a, b, sizeof(*a))), "rules differ at %#lx",
			      (unsigned long)pc);
		}
		/* The big frame's body has a CFA more than 5000 bytes up. */
		void *big = dlsym(h, "fixture_bigframe");
		int seen = 0;
		for (uint64_t a = (uint64_t)(uintptr_t)big; big && a < (uint64_t)(uintptr_t)big + 64; a++) {
			const struct cfi_rules *r = cfi_lookup(&mem, a);
			if (r && r->cfa.kind == CFA_REG && r->cfa.reg == DW_RSP && r->cfa.off > 5000)
				seen = 1;
		}
		CHECK(seen, "no big-frame CFA in fixture_bigframe");
		/* Outside every FDE there is no rule. */
		CHECK(cfi_lookup(&mem, mem.base - 1) == NULL && cfi_lookup(&mem, mem.end) == NULL, "rule outside");
		cfi_table_free(&file);
	}
	if (rc == CFI_OK)
		cfi_table_free(&mem);
}

/* The in-place evaluation the handler falls back on (cfi_eval_hdr) must
 * give, at every row and between rows, the rules of the compiled table. */
static void eval_matches_table(const char *name)
{
	struct found f = { name, 0, 0, 0, 0 };
	dl_iterate_phdr(find_cb, &f);
	if (!f.hdr || !f.seglen) {
		printf("test_cfi: %s not loaded, in-place evaluation not checked on it\n", name);
		return;
	}
	struct cfi_table t;
	struct cfi_source src = { (const uint8_t *)(uintptr_t)f.seg, f.seglen, f.seg, 0 };
	if (cfi_build_eh_frame_hdr(&t, &src, f.hdr, NULL) != CFI_OK) {
		CHECK(0, "%s: in-memory build failed", name);
		return;
	}
	uint32_t n = 0;
	for (uint32_t i = 0; i < t.nrows; i++) {
		uint64_t lo = t.base + t.pc[i], hi = i + 1 < t.nrows ? t.base + t.pc[i + 1] : t.end;
		uint64_t probe[3] = { lo, lo + (hi - lo) / 2, hi - 1 };
		for (int k = 0; k < 3; k++) {
			const struct cfi_rules *want = cfi_lookup(&t, probe[k]);
			struct cfi_rules got;
			int rc = cfi_eval_hdr(&src, f.hdr, probe[k], &got);
			CHECK(want ? rc == 0 && !memcmp(want, &got, sizeof(got)) : rc != 0,
			      "%s: in-place rules differ from the table at %#lx", name, (unsigned long)(probe[k] - f.bias));
			n++;
		}
	}
	CHECK(cfi_eval_hdr(&src, f.hdr, t.base - 1, &(struct cfi_rules){ 0 }) != 0, "%s: rule before the first FDE",
	      name);
	printf("test_cfi: %s: %u addresses evaluated in place\n", name, n);
	cfi_table_free(&t);
}

static void garbage_is_harmless(void)
{
	/* Random bytes and cut-off sections: never a crash, never a table
	 * that claims rows it did not read. */
	uint8_t buf[4096];
	unsigned seed = 12345;
	for (int round = 0; round < 200; round++) {
		for (size_t i = 0; i < sizeof(buf); i++) {
			seed = seed * 1103515245u + 12345u;
			buf[i] = (uint8_t)(seed >> 16);
		}
		struct cfi_table t;
		struct cfi_source src = { buf, (size_t)(seed % sizeof(buf)), 0x1000, 0 };
		if (cfi_build_section(&t, &src, round & 1, NULL) == CFI_OK)
			cfi_table_free(&t);
		if (cfi_build_eh_frame_hdr(&t, &src, 0x1000 + (seed % 64), NULL) == CFI_OK)
			cfi_table_free(&t);
		struct cfi_rules r;
		cfi_eval_hdr(&src, 0x1000 + (seed % 64), 0x1000 + (seed % 8192), &r);
	}
	checks++;
}

/* ---- hand-made records: what the fuzzer found (tests/fuzz/fuzz_cfi.c) ---- */

struct sec {
	uint8_t b[256];
	size_t n;
};

static void put(struct sec *s, const void *p, size_t n)
{
	memcpy(s->b + s->n, p, n);
	s->n += n;
}

static void put32(struct sec *s, uint32_t v)
{
	put(s, &v, 4);
}

/* A CIE at offset 0: "zR", code 1, data -8, return address r16, FDE
 * pointers udata4 (absolute), CFA = rsp + 8, return address at CFA - 8. */
static void cie(struct sec *s)
{
	static const uint8_t body[] = { 0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x03, 0x0c, 7, 8, 0x90, 1 };
	put32(s, sizeof(body));
	put(s, body, sizeof(body));
}

/* An FDE for [start, start + range) running `prog`. */
static void fde(struct sec *s, uint32_t start, uint32_t range, const uint8_t *prog, size_t n)
{
	put32(s, (uint32_t)(4 + 4 + 4 + 1 + n));
	put32(s, (uint32_t)s->n); /* back to the CIE at 0 */
	put32(s, start);
	put32(s, range);
	put(s, "", 1); /* no augmentation data */
	put(s, prog, n);
}

/* An exact heap copy, so a read past the section is caught under ASan. */
static uint8_t *exact(const struct sec *s)
{
	uint8_t *d = malloc(s->n);
	memcpy(d, s->b, s->n);
	return d;
}

static void hostile_records(void)
{
	/* An FDE whose program goes bad part way (an opcode DWARF does not
	 * have): its rows stand up to the bad instruction, and nothing
	 * after it (the last rule used to run on to the next FDE's rows). */
	struct sec s = { .n = 0 };
	cie(&s);
	static const uint8_t bad_late[] = { 0x44, 0x0e, 16, 0x44, 0x3f, 0x44 };
	fde(&s, 0x2000, 32, bad_late, sizeof(bad_late));
	size_t fde_off = s.n;
	static const uint8_t good[] = { 0x41, 0x0e, 16 };
	fde(&s, 0x3000, 16, good, sizeof(good));
	put32(&s, 0);
	uint8_t *d = exact(&s);
	struct cfi_source src = { d, s.n, 0x1000, 0 };
	struct cfi_table t;
	uint32_t bad = 0;
	CHECK(cfi_build_section(&t, &src, 0, &bad) == CFI_OK && bad == 1, "partly bad FDE: table not built");
	const struct cfi_rules *r = cfi_lookup(&t, 0x2002);
	CHECK(r && r->cfa.kind == CFA_REG && r->cfa.off == 8, "partly bad FDE: rule before its first advance");
	r = cfi_lookup(&t, 0x2006);
	CHECK(r && r->cfa.off == 16, "partly bad FDE: rule before the bad instruction");
	CHECK(!cfi_lookup(&t, 0x2008) && !cfi_lookup(&t, 0x201f), "partly bad FDE: a rule past the bad instruction");
	r = cfi_lookup(&t, 0x3001);
	CHECK(r && r->cfa.off == 16, "the FDE after a partly bad one");
	cfi_table_free(&t);

	/* The same through an .eh_frame_hdr (udata4 absolute entries), as
	 * the signal handler evaluates it: the same answers. */
	struct sec m = s;
	size_t hdr_off = m.n;
	static const uint8_t hdr[] = { 1, 0xff, 0x03, 0x03 };
	put(&m, hdr, sizeof(hdr));
	put32(&m, 2);
	put32(&m, 0x2000);
	put32(&m, (uint32_t)(0x1000 + 22)); /* the first FDE, after the 22-byte CIE */
	put32(&m, 0x3000);
	put32(&m, (uint32_t)(0x1000 + fde_off));
	free(d);
	d = exact(&m);
	struct cfi_source mem = { d, m.n, 0x1000, 0 };
	uint64_t h = 0x1000 + hdr_off;
	struct cfi_rules er;
	CHECK(cfi_eval_hdr(&mem, h, 0x2006, &er) == 0 && er.cfa.off == 16, "in place: rule before the bad instruction");
	CHECK(cfi_eval_hdr(&mem, h, 0x2008, &er) != 0, "in place: a rule past the bad instruction");
	CHECK(cfi_eval_hdr(&mem, h, 0x3001, &er) == 0 && er.cfa.off == 16, "in place: the FDE after a bad one");

	free(d);

	/* An entry shorter than its own id field, last in the section: its
	 * body would start past its end, and reading it ran off the
	 * section (ASan sees it under make asan). Through the header, as
	 * the handler reads it, and as a whole section. */
	struct sec e = { .n = 0 };
	put(&e, hdr, sizeof(hdr));
	put32(&e, 1);
	put32(&e, 0x2000);
	put32(&e, 0x1000 + 16 + 22);
	cie(&e);
	put32(&e, 1);
	put32(&e, (uint32_t)(e.n - 16)); /* the CIE, 16 bytes in */
	d = exact(&e);
	mem = (struct cfi_source){ d, e.n, 0x1000, 0 };
	CHECK(cfi_eval_hdr(&mem, 0x1000, 0x2000, &er) != 0, "an entry shorter than its id is refused");
	if (cfi_build_eh_frame_hdr(&t, &mem, 0x1000, &bad) == CFI_OK)
		cfi_table_free(&t);
	src = (struct cfi_source){ d + 16, e.n - 16, 0x1010, 0 };
	if (cfi_build_section(&t, &src, 0, &bad) == CFI_OK)
		cfi_table_free(&t);
	free(d);

	/* An offset times the data alignment factor past int64: an
	 * unsupported rule, not an overflow (UBSan checks under make asan). */
	struct sec o = { .n = 0 };
	cie(&o);
	static const uint8_t huge[] = { 0x05, 3, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40,
					0x11, 6, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40,
					0x2f, 12, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20 };
	fde(&o, 0x2000, 16, huge, sizeof(huge));
	d = exact(&o);
	src = (struct cfi_source){ d, o.n, 0x1000, 0 };
	CHECK(cfi_build_section(&t, &src, 0, NULL) == CFI_OK, "huge offsets: table not built");
	r = cfi_lookup(&t, 0x2000);
	CHECK(r && r->r[DW_RBX].kind == REG_UNSUPPORTED && r->r[DW_RBP].kind == REG_UNSUPPORTED &&
		      r->r[12].kind == REG_UNSUPPORTED && r->cfa.off == 8,
	      "huge offsets: not unsupported rules");
	cfi_table_free(&t);
	free(d);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test_cfi FIXTURE.so\n");
		return 2;
	}
	elf_version(EV_CURRENT);
	compare_with_libdw(argv[1]);
	const char *sys[] = { "/usr/bin/python3.11", "/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libm.so.6" };
	for (size_t i = 0; i < sizeof(sys) / sizeof(sys[0]); i++)
		if (access(sys[i], R_OK) == 0)
			compare_with_libdw(sys[i]);
	memory_matches_file(argv[1]);
	eval_matches_table("fixture_native.so");
	eval_matches_table("libc.so.6");
	eval_matches_table("libm.so.6");
	eval_matches_table("libdw.so");
	garbage_is_harmless();
	hostile_records();
	printf("test_cfi: %d passed, %d failed\n", checks - failures, failures);
	return failures != 0;
}
