/*
 * annotate-asm.c — `strata annotate --asm`: the machine code of each JIT
 * line, with the samples of each instruction.
 *
 * Per-instruction counts come from the model's JIT frames, whose address is
 * the run-time address: the innermost JIT frame of each sample is counted
 * at its address (the interrupted instruction), or, when JIT code had
 * called out (libm, Numba's runtime), at the call instruction before its
 * return address. The code is disassembled with capstone from the image
 * the process registered (jitsym.c), a whole function at a time, and each
 * instruction is filed under its DWARF line; a line then lists all its
 * instructions, sampled or not, in address order.
 */
#include "annotate-asm.h"

#include <capstone/capstone.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/jitsym.h"

struct hit {
	uint64_t addr; /* an instruction address, or a return address + (1 << 63) */
	uint64_t n;
};

struct insn {
	uint64_t addr;
	uint16_t size;
	char text[200];
	const char *file; /* the jit space's string */
	uint32_t line;
	uint64_t samples;
};

struct jasm {
	struct hit *hits;
	size_t nhits;
	struct insn *insns;
	size_t ninsns, cap;
	uint64_t (*done)[2]; /* functions disassembled: [start, end) */
	size_t ndone;
};

static int cmp_hit(const void *a, const void *b)
{
	const struct hit *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int cmp_insn(const void *a, const void *b)
{
	const struct insn *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

#define RET_BIT (1ull << 63)

/* Samples at [lo, hi): interrupted there, or returning to hi (a call). */
static uint64_t samples_in(const struct jasm *a, uint64_t lo, uint64_t hi)
{
	uint64_t n = 0;
	for (size_t i = 0; i < a->nhits; i++) {
		uint64_t ad = a->hits[i].addr & ~RET_BIT;
		if (a->hits[i].addr & RET_BIT ? ad == hi : (ad >= lo && ad < hi))
			n += a->hits[i].n;
	}
	return n;
}

static void disassemble(struct jasm *a, const struct profile *p, uint64_t addr)
{
	for (size_t i = 0; i < a->ndone; i++)
		if (addr >= a->done[i][0] && addr < a->done[i][1])
			return;
	struct jit_space *sp = profile_jit_space(p, addr);
	struct jit_info ji;
	const uint8_t *code;
	uint64_t start, len;
	if (!sp || !jit_lookup_any(sp, addr, 0, &ji) || !ji.name || jit_image_bytes(sp, addr, &code, &start, &len))
		return;
	uint64_t fs = ji.func_start, fe = ji.func_end;
	if (fs < start || fe > start + len || fe <= fs)
		return;
	uint64_t (*d)[2] = realloc(a->done, (a->ndone + 1) * sizeof(*d));
	if (!d)
		return;
	a->done = d;
	a->done[a->ndone][0] = fs;
	a->done[a->ndone][1] = fe;
	a->ndone++;
	csh h;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &h) != CS_ERR_OK)
		return;
	cs_insn *ins = NULL;
	size_t n = cs_disasm(h, code + (fs - start), (size_t)(fe - fs), fs, 0, &ins);
	if (n && a->ninsns + n > a->cap) {
		size_t cap = a->ninsns + n + 256;
		struct insn *ni = realloc(a->insns, cap * sizeof(*ni));
		if (!ni) {
			cs_free(ins, n);
			cs_close(&h);
			return;
		}
		a->insns = ni;
		a->cap = cap;
	}
	for (size_t k = 0; k < n && a->ninsns < a->cap; k++) {
		struct insn *o = &a->insns[a->ninsns++];
		o->addr = ins[k].address;
		o->size = ins[k].size;
		snprintf(o->text, sizeof(o->text), "%s %s", ins[k].mnemonic, ins[k].op_str);
		struct jit_info li;
		jit_lookup_any(sp, o->addr, 0, &li);
		o->file = li.file;
		o->line = li.line;
		o->samples = samples_in(a, o->addr, o->addr + o->size);
	}
	if (n)
		cs_free(ins, n);
	cs_close(&h);
}

struct jasm *jasm_build(const struct profile *p, const struct agg_filter *f)
{
	struct jasm *a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	size_t cap = 0;
	uint32_t fr[4096];
	for (uint64_t i = f ? f->first_sample : 0; i < p->nsamples; i++) {
		const struct psample *s = &p->samples[i];
		const struct pthread_info *t = &p->threads[s->thread];
		if (f && ((f->pid && t->pid != f->pid) || (f->tid && t->tid != f->tid) ||
			  (f->t0 && s->time_ns < f->t0) || (f->t1 && s->time_ns >= f->t1) ||
			  (f->exclude_idle && (s->flags & PS_IDLE))))
			continue;
		uint32_t n = profile_stack(p, s->node, fr, 4096);
		if (n > 4096)
			n = 4096;
		/* The innermost JIT frame: the leaf, or a caller of native code. */
		for (uint32_t k = n; k-- > 0;) {
			const struct pframe *pf = &p->frames[fr[k]];
			if (p->funcs[pf->func].kind != PK_JIT || !pf->addr)
				continue;
			uint64_t key = pf->addr | (k + 1 < n ? RET_BIT : 0);
			if (a->nhits == cap) {
				cap = cap ? cap * 2 : 1024;
				struct hit *nh = realloc(a->hits, cap * sizeof(*nh));
				if (!nh) {
					jasm_free(a);
					return NULL;
				}
				a->hits = nh;
			}
			a->hits[a->nhits++] = (struct hit){ key, profile_value(p, i, 0) };
			break;
		}
	}
	/* Merge equal addresses. */
	qsort(a->hits, a->nhits, sizeof(*a->hits), cmp_hit);
	size_t m = 0;
	for (size_t i = 0; i < a->nhits; i++) {
		if (m && a->hits[m - 1].addr == a->hits[i].addr)
			a->hits[m - 1].n += a->hits[i].n;
		else
			a->hits[m++] = a->hits[i];
	}
	a->nhits = m;
	for (size_t i = 0; i < a->nhits; i++)
		disassemble(a, p, (a->hits[i].addr & ~RET_BIT) - (a->hits[i].addr & RET_BIT ? 1 : 0));
	qsort(a->insns, a->ninsns, sizeof(*a->insns), cmp_insn);
	return a;
}

int jasm_print_line(const struct jasm *a, const char *file, uint32_t line, uint64_t all, int indent)
{
	int printed = 0;
	if (!a || !file)
		return 0;
	for (size_t i = 0; i < a->ninsns; i++) {
		const struct insn *o = &a->insns[i];
		if (o->line != line || !o->file || strcmp(o->file, file))
			continue;
		if (o->samples)
			printf("%*s%6.1f%% %6" PRIu64 "  0x%" PRIx64 ":  %s\n", indent, "",
			       all ? 100.0 * (double)o->samples / (double)all : 0.0, o->samples, o->addr, o->text);
		else
			printf("%*s%7s %6s  0x%" PRIx64 ":  %s\n", indent, "", "", "", o->addr, o->text);
		printed++;
	}
	return printed;
}

uint64_t jasm_sampled(const struct jasm *a)
{
	uint64_t n = 0;
	for (size_t i = 0; a && i < a->ninsns; i++)
		n += a->insns[i].samples;
	return n;
}

void jasm_free(struct jasm *a)
{
	if (!a)
		return;
	free(a->hits);
	free(a->insns);
	free(a->done);
	free(a);
}
