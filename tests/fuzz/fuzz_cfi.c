/*
 * fuzz_cfi.c — libFuzzer target for DWARF call frame information
 * (src/common/cfi.c, cfi-eval.c): the table compiler the helper and the
 * CLI run on every object's .eh_frame / .debug_frame, and cfi_eval_hdr(),
 * which the agent's signal handler runs on live memory where no table is
 * built yet.
 *
 * Input: one byte of mode, then
 *   mode 0  an .eh_frame section: compiled whole; its FDE ranges listed;
 *           then an .eh_frame_hdr search table is made for it here (as
 *           the linker makes one) and the section is compiled through it
 *           and evaluated in place at the start, middle and end of each
 *           FDE: where FDEs do not overlap, cfi_eval_hdr() must give the
 *           very rules of the table (cfi.h promises it);
 *   mode 1  a .debug_frame section: compiled whole, ranges, lookups;
 *   mode 2  memory as the handler sees it: u32 offset of the
 *           .eh_frame_hdr in it, u64 pc, then the bytes: compiled through
 *           the header and evaluated at that pc and at every row found.
 * Every table is checked for the order its lookups rely on.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "common/cfi.h"
#include "common/cfi-internal.h"

#define VADDR 0x40000000ull /* where the section is in the code's address space */
#define MAX_FDES 64         /* FDEs whose rules are compared */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_setup();
	return 0;
}

/* The ascending order cfi_lookup's binary searches need. */
static void check_table(const struct cfi_table *t)
{
	for (uint32_t i = 0; i < t->nrows; i++) {
		FUZZ_CHECK(i == 0 || t->pc[i - 1] < t->pc[i]);
		FUZZ_CHECK(t->rule[i] == CFI_NO_RULE || t->rule[i] < t->nrules);
	}
	for (uint32_t i = 1; i < t->nfdes; i++)
		FUZZ_CHECK(t->fde_pc[i - 1] <= t->fde_pc[i]);
	FUZZ_CHECK(t->base <= t->end);
}

/* cfi_lookup and cfi_rule_at agree, at pc. */
static const struct cfi_rules *lookup(const struct cfi_table *t, uint64_t pc)
{
	const struct cfi_rules *r = cfi_lookup(t, pc);
	int start;
	uint32_t k = cfi_rule_at(t, pc, &start);
	FUZZ_CHECK(r ? k == (uint32_t)(r - t->rules) : k == CFI_NO_RULE || pc < t->base || pc >= t->end);
	return r;
}

struct fde {
	uint64_t start, end, off;
};

static int fde_cmp(const void *a, const void *b)
{
	const struct fde *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* The FDEs of an .eh_frame as its .eh_frame_hdr would list them: start
 * and offset, sorted. Read with cfi-eval.c's own entry readers (what is
 * fuzzed is the compiler and the evaluator, not this listing). */
static uint32_t list_fdes(const struct cfi_source *s, struct fde *out, uint32_t max)
{
	uint32_t n = 0;
	size_t off = 0;
	struct entry e;
	while (n < max && read_entry(s, off, &e) == 1) {
		off = (size_t)(e.end - s->data);
		if (e.id == 0 || e.id > e.id_off)
			continue;
		struct entry ce;
		struct cie ci;
		if (read_entry(s, e.id_off - (size_t)e.id, &ce) != 1 || ce.id != 0 || parse_cie(s, &ce, 0, &ci))
			continue;
		struct cur c = { e.body, e.end, 0 };
		uint64_t start = rd_enc(&c, s, ci.fde_enc, 0, 0);
		uint64_t range = rd_enc(&c, s, ci.fde_enc, 0, 1);
		if (c.err || !range || start + range < start)
			continue;
		out[n++] = (struct fde){ start, start + range, e.off };
	}
	qsort(out, n, sizeof(*out), fde_cmp);
	return n;
}

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

/* Mode 0: the section, then a search table over it, in one buffer as
 * they are in memory (.eh_frame_hdr's table entries datarel sdata4, as
 * GNU ld writes them). */
static void eh_frame(const uint8_t *d, size_t n)
{
	struct cfi_source s = { d, n, VADDR, 0 };
	struct cfi_table whole;
	uint32_t bad;
	if (cfi_build_section(&whole, &s, 0, &bad) == CFI_OK) {
		check_table(&whole);
		cfi_table_free(&whole);
	}

	static struct fde f[MAX_FDES];
	uint32_t nf = list_fdes(&s, f, MAX_FDES);
	size_t hoff = (n + 3) & ~(size_t)3;
	uint64_t hdr = VADDR + hoff;
	/* Only what sdata4 can express relative to the header. */
	uint32_t keep = 0;
	for (uint32_t i = 0; i < nf; i++) {
		int64_t rel = (int64_t)(f[i].start - hdr);
		if (rel >= INT32_MIN && rel <= INT32_MAX)
			f[keep++] = f[i];
	}
	nf = keep;
	size_t len = hoff + 12 + (size_t)nf * 8;
	uint8_t *m = calloc(1, len);
	if (!m)
		return;
	memcpy(m, d, n);
	uint8_t *h = m + hoff;
	h[0] = 1;
	h[1] = PE_pcrel | PE_sdata4;
	h[2] = PE_udata4;
	h[3] = PE_datarel | PE_sdata4;
	put32(h + 4, (uint32_t)(int32_t)(VADDR - (hdr + 4)));
	put32(h + 8, nf);
	for (uint32_t i = 0; i < nf; i++) {
		put32(h + 12 + i * 8, (uint32_t)(int32_t)(f[i].start - hdr));
		put32(h + 16 + i * 8, (uint32_t)(int32_t)(VADDR + f[i].off - hdr));
	}
	struct cfi_source mem = { m, len, VADDR, 0 };
	uint64_t count;
	FUZZ_CHECK(cfi_hdr_count(&mem, hdr, &count) == 0 && count == nf);

	struct cfi_table t;
	int rc = cfi_build_eh_frame_hdr(&t, &mem, hdr, &bad), built = rc == CFI_OK;
	if (built)
		check_table(&t);
	/* Overlapping FDEs resolve differently by design (the table: the
	 * later one wins; the handler: the last one starting before pc); and
	 * a table is refused for FDEs more than 4 GiB apart, where the
	 * handler still evaluates each. */
	int by_design = !built && rc != CFI_E_EMPTY;
	for (uint32_t i = 1; i < nf; i++)
		by_design |= f[i].start < f[i - 1].end;
	for (uint32_t i = 0; i < nf; i++) {
		uint64_t pcs[3] = { f[i].start, f[i].start + (f[i].end - f[i].start) / 2, f[i].end - 1 };
		for (int k = 0; k < 3; k++) {
			struct cfi_rules r;
			int ok = cfi_eval_hdr(&mem, hdr, pcs[k], &r) == 0;
			const struct cfi_rules *tr = built ? lookup(&t, pcs[k]) : NULL;
			if (by_design)
				continue;
			FUZZ_CHECK(ok == (tr != NULL));
			if (ok)
				FUZZ_CHECK(!memcmp(&r, tr, sizeof(r)));
		}
	}
	if (built)
		cfi_table_free(&t);
	free(m);
}

/* Modes 0 and 1: the section whole, and a lookup in each FDE it has. */
static void section(const uint8_t *d, size_t n, int debug_frame)
{
	struct cfi_source s = { d, n, VADDR, 0 };
	struct cfi_table t;
	uint32_t bad;
	int built = cfi_build_section(&t, &s, debug_frame, &bad) == CFI_OK;
	if (built)
		check_table(&t);
	uint64_t(*r)[2];
	uint32_t nr;
	if (cfi_fde_ranges(&s, debug_frame, &r, &nr) == CFI_OK) {
		for (uint32_t i = 0; i < nr; i++) {
			FUZZ_CHECK(r[i][0] < r[i][1]);
			FUZZ_CHECK(i == 0 || r[i - 1][0] <= r[i][0]);
			if (built && i < MAX_FDES) {
				lookup(&t, r[i][0]);
				lookup(&t, r[i][1] - 1);
			}
		}
		free(r);
	}
	if (built)
		cfi_table_free(&t);
}

/* Mode 2: live memory holding an .eh_frame_hdr somewhere. */
static void memory(struct fin *in)
{
	uint32_t hoff = fin_u32(in);
	uint64_t pc = fin_u64(in);
	size_t n;
	const uint8_t *d = fin_take(in, in->n, &n);
	struct cfi_source s = { d, n, VADDR, 0 };
	uint64_t hdr = VADDR + hoff, count;
	cfi_hdr_count(&s, hdr, &count);
	struct cfi_rules r;
	cfi_eval_hdr(&s, hdr, pc, &r);
	struct cfi_table t;
	uint32_t bad;
	if (cfi_build_eh_frame_hdr(&t, &s, hdr, &bad) == CFI_OK) {
		check_table(&t);
		for (uint32_t i = 0; i < t.nrows && i < MAX_FDES; i++) {
			cfi_eval_hdr(&s, hdr, t.base + t.pc[i], &r);
			lookup(&t, t.base + t.pc[i]);
		}
		cfi_table_free(&t);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fin in = { data, size };
	uint8_t mode = fin_u8(&in) % 3;
	if (mode == 2) {
		memory(&in);
		return 0;
	}
	/* A copy of exactly the section's size: a read past it is caught. */
	uint8_t *d = malloc(in.n ? in.n : 1);
	if (!d)
		return 0;
	memcpy(d, in.p, in.n);
	section(d, in.n, mode == 1);
	if (mode == 0)
		eh_frame(d, in.n);
	free(d);
	return 0;
}
