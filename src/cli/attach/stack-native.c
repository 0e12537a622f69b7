/*
 * stack-native.c — see stack-native.h.
 */
#include "stack-native.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cfi.h"
#include "common/elfsect.h"
#include "common/format.h"
#include "lib/interp.h"
#include "lib/merge.h"
#include "lib/symbols.h"

#define MAX_MODS 1024

struct nmod {
	uint64_t start, end, off, bias;
	char path[4096];
	char file[4400];
	int tried;
	int have;
	int wanted;             /* a walk needed it while compiling was deferred */
	struct cfi_table t;
};

struct stack_native {
	struct pyproc *p;
	struct nmod *m;
	int n;
	struct symbolizer *sy;
	struct sym_space *sp;
	char first_path[4096];  /* while reading the maps: the object of the last mapping, */
	uint64_t first_start, first_off; /* and where its first mapping starts */
	int defer;              /* walks do not compile tables: they mark them wanted */
	const uint8_t *stk;     /* a copy of stack memory reads are served from (stack_native_set_stack) */
	uint64_t stk_lo;
	size_t stk_n;
};

static const struct cfi_table *mod_cfi(struct nmod *m);

/* The GNU build id of an ELF file (its .note.gnu.build-id), by which the
 * symbolizer finds its separate debug file; 0 if none. */
static size_t file_build_id(const char *file, uint8_t *out, size_t max)
{
	struct elf_section s;
	if (elf_find_section(file, ".note.gnu.build-id", &s) || s.size < 16 || s.size > 4096)
		return 0;
	uint8_t *n = elf_read_section(file, &s);
	size_t got = 0;
	if (n) {
		uint32_t namesz, descsz, type;
		memcpy(&namesz, n, 4);
		memcpy(&descsz, n + 4, 4);
		memcpy(&type, n + 8, 4);
		size_t desc = 12 + ((namesz + 3u) & ~3u);
		if (type == 3 /* NT_GNU_BUILD_ID */ && namesz == 4 && !memcmp(n + 12, "GNU", 4) && descsz <= max &&
		    desc + descsz <= s.size) {
			memcpy(out, n + desc, descsz);
			got = descsz;
		}
		free(n);
	}
	return got;
}

static int add_map(const struct pmap *pm, void *data)
{
	struct stack_native *sn = data;
	if (strcmp(pm->path, sn->first_path)) {
		snprintf(sn->first_path, sizeof(sn->first_path), "%s", pm->path);
		sn->first_start = pm->start;
		sn->first_off = pm->off;
	}
	if (pm->perms[2] != 'x' || pm->path[0] != '/' || sn->n >= MAX_MODS)
		return 0;
	struct nmod *m = &sn->m[sn->n];
	memset(m, 0, sizeof(*m));
	m->start = pm->start;
	m->end = pm->end;
	m->off = pm->off;
	snprintf(m->path, sizeof(m->path), "%s", pm->path);
	/* The bias from the object's first mapping (file offset 0), as
	 * pyproc_object finds it, without reading the maps again. */
	char f2[4400];
	uint64_t bias;
	if (pyproc_object_at(sn->p->pid, pm->path, sn->first_start, sn->first_off, f2, sizeof(f2), &bias))
		return 0;
	m->bias = bias;
	snprintf(m->file, sizeof(m->file), "%s", f2);
	uint8_t bid[64];
	size_t bl = file_build_id(m->file, bid, sizeof(bid));
	struct rec_module rm = { .start = m->start, .end = m->end, .offset = m->off, .bias = bias, .path = m->path,
				 .build_id = bl ? bid : NULL, .build_id_len = bl };
	sym_space_add(sn->sp, &rm);
	sn->n++;
	return 0;
}

struct stack_native *stack_native_new(struct pyproc *p) { return stack_native_open(p, 1); }

struct stack_native *stack_native_open(struct pyproc *p, int precompile)
{
	struct stack_native *sn = calloc(1, sizeof(*sn));
	if (!sn)
		return NULL;
	sn->p = p;
	sn->m = calloc(MAX_MODS, sizeof(*sn->m));
	sn->sy = sym_new();
	sn->sp = sn->sy ? sym_space_new(sn->sy) : NULL;
	if (!sn->m || !sn->sp) {
		stack_native_free(sn);
		return NULL;
	}
	pyproc_maps(p->pid, add_map, sn);
	/* Compiled now, before the process is paused, not during the pause. */
	for (int i = 0; precompile && i < sn->n; i++)
		mod_cfi(&sn->m[i]);
	return sn;
}

void stack_native_free(struct stack_native *sn)
{
	if (!sn)
		return;
	for (int i = 0; sn->m && i < sn->n; i++)
		if (sn->m[i].have)
			cfi_table_free(&sn->m[i].t);
	free(sn->m);
	if (sn->sy)
		sym_free(sn->sy);
	free(sn);
}

static struct nmod *mod_at(struct stack_native *sn, uint64_t pc)
{
	for (int i = 0; i < sn->n; i++)
		if (pc >= sn->m[i].start && pc < sn->m[i].end)
			return &sn->m[i];
	return NULL;
}

/* The object's .eh_frame, compiled once (at the addresses it runs at). */
static const struct cfi_table *mod_cfi(struct nmod *m)
{
	if (!m->tried) {
		m->tried = 1;
		struct elf_section s;
		if (elf_find_section(m->file, ".eh_frame", &s) == 0) {
			uint8_t *d = elf_read_section(m->file, &s);
			if (d) {
				struct cfi_source src = { d, (size_t)s.size, s.addr + m->bias, 0 };
				m->have = cfi_build_section(&m->t, &src, 0, NULL) == CFI_OK;
				free(d);
			}
		}
	}
	return m->have ? &m->t : NULL;
}

void stack_native_compile(struct stack_native *sn, const char *path)
{
	for (int i = 0; i < sn->n; i++)
		if (!strcmp(sn->m[i].path, path))
			mod_cfi(&sn->m[i]);
}

void stack_native_defer(struct stack_native *sn, int defer) { sn->defer = defer; }

int stack_native_compile_wanted(struct stack_native *sn)
{
	int k = 0;
	for (int i = 0; i < sn->n; i++)
		if (sn->m[i].wanted) {
			sn->m[i].wanted = 0;
			mod_cfi(&sn->m[i]);
			k++;
		}
	return k;
}

static int rd64(struct stack_native *sn, uint64_t a, uint64_t *v)
{
	if (sn->stk && a >= sn->stk_lo && a - sn->stk_lo <= sn->stk_n - 8 && sn->stk_n >= 8) {
		memcpy(v, sn->stk + (a - sn->stk_lo), 8);
		return 0;
	}
	return pyproc_read(sn->p, v, a, 8);
}

void stack_native_set_stack(struct stack_native *sn, uint64_t lo, const void *buf, size_t n)
{
	sn->stk = buf;
	sn->stk_lo = lo;
	sn->stk_n = buf ? n : 0;
}

int stack_native_walk(struct stack_native *sn, const struct user_regs_struct *r, struct snstep *out, int max,
		      int *stop)
{
	uint64_t reg[CFI_NREGS];
	memset(reg, 0, sizeof(reg));
	reg[DW_RAX] = r->rax;
	reg[DW_RDX] = r->rdx;
	reg[DW_RCX] = r->rcx;
	reg[DW_RBX] = r->rbx;
	reg[DW_RSI] = r->rsi;
	reg[DW_RDI] = r->rdi;
	reg[DW_RBP] = r->rbp;
	reg[DW_RSP] = r->rsp;
	reg[8] = r->r8;
	reg[9] = r->r9;
	reg[10] = r->r10;
	reg[11] = r->r11;
	reg[12] = r->r12;
	reg[13] = r->r13;
	reg[14] = r->r14;
	reg[15] = r->r15;
	reg[DW_RA] = r->rip;
	*stop = SN_MAX;
	int n = 0, exact = 1; /* the first pc (and one after a signal frame) is not a return address */
	while (n < max) {
		uint64_t pc = reg[DW_RA];
		if (!pc) {
			*stop = SN_COMPLETE;
			break;
		}
		out[n].pc = pc;
		out[n].sp = reg[DW_RSP];
		out[n].exact = exact;
		n++;
		struct nmod *m = mod_at(sn, pc);
		if (m && !m->tried && sn->defer)
			m->wanted = 1;
		const struct cfi_table *t = m && (m->tried || !sn->defer) ? mod_cfi(m) : NULL;
		const struct cfi_rules *ru = t ? cfi_lookup(t, exact ? pc : pc - 1) : NULL;
		if (!ru) {
			*stop = m && m->wanted ? SN_DEFERRED : SN_NO_CFI;
			break;
		}
		uint64_t cfa;
		*stop = SN_UNREADABLE;
		switch (ru->cfa.kind) {
		case CFA_REG:
			cfa = reg[ru->cfa.reg] + (uint64_t)(int64_t)ru->cfa.off;
			break;
		case CFA_DEREF:
			if (rd64(sn, reg[ru->cfa.reg] + (uint64_t)(int64_t)ru->cfa.off, &cfa))
				return n;
			break;
		case CFA_PLT:
			cfa = reg[DW_RSP] + 8 + ((pc & 15) >= (uint64_t)ru->cfa.off ? 8 : 0);
			break;
		default:
			*stop = SN_UNSUPPORTED;
			return n;
		}
		uint64_t nreg[CFI_NREGS];
		memcpy(nreg, reg, sizeof(reg));
		for (int i = 0; i < CFI_NREGS; i++) {
			const struct cfi_reg *c = &ru->r[i];
			switch (c->kind) {
			case REG_SAME:
				break;
			case REG_UNDEF:
				nreg[i] = 0;
				break;
			case REG_AT_CFA:
				if (rd64(sn, cfa + (uint64_t)(int64_t)c->off, &nreg[i]))
					return n;
				break;
			case REG_VAL_CFA:
				nreg[i] = cfa + (uint64_t)(int64_t)c->off;
				break;
			case REG_AT_REG:
				if (rd64(sn, reg[c->reg] + (uint64_t)(int64_t)c->off, &nreg[i]))
					return n;
				break;
			case REG_IN_REG:
				nreg[i] = reg[c->reg];
				break;
			default:
				if (i == DW_RA) {
					*stop = SN_UNSUPPORTED;
					return n;
				}
				nreg[i] = 0;
			}
		}
		*stop = SN_MAX;
		if (ru->r[DW_RA].kind == REG_UNDEF) {
			*stop = SN_COMPLETE;
			break;
		}
		nreg[DW_RSP] = cfa;
		exact = ru->cfa.signal_frame;
		if (nreg[DW_RSP] <= reg[DW_RSP] && !exact) {
			*stop = SN_NOT_OUTWARD; /* a bad rule or a corrupt stack */
			break;
		}
		memcpy(reg, nreg, sizeof(reg));
	}
	return n;
}

int stack_native_unwind(struct stack_native *sn, const struct user_regs_struct *r, uint64_t *pcs, int max,
			int *complete)
{
	struct snstep *st = max > 0 ? malloc((size_t)max * sizeof(*st)) : NULL;
	int stop = SN_MAX, n = st ? stack_native_walk(sn, r, st, max, &stop) : 0;
	for (int i = 0; i < n; i++)
		pcs[i] = st[i].pc;
	free(st);
	*complete = stop == SN_COMPLETE;
	return n;
}

void stack_native_name(struct stack_native *sn, uint64_t pc, int call, const char **name, const char **module)
{
	struct sym_info si;
	memset(&si, 0, sizeof(si));
	sym_lookup(sn->sp, pc, call, &si);
	*name = si.name;
	*module = si.module;
}

int stack_native_merge(struct stack_native *sn, const uint64_t *pcs, int npcs, int complete,
		       const struct strata_pyframe *py, int npy, struct snframe *out)
{
	struct merge_native *mn = calloc((size_t)npcs + 1, sizeof(*mn));
	struct sym_info *si = calloc((size_t)npcs + 1, sizeof(*si));
	uint32_t *pyflags = calloc((size_t)npy + 1, sizeof(*pyflags));
	struct merge_frame *mf = calloc((size_t)npy + 2 * (size_t)npcs + 1, sizeof(*mf));
	int k = 0;
	if (!mn || !si || !pyflags || !mf)
		goto done;
	for (int i = 0; i < npcs; i++) {
		sym_lookup(sn->sp, pcs[i], i > 0, &si[i]);
		mn[i].eval = si[i].eval;
		mn[i].interpreter = si[i].interpreter;
		mn[i].hidden = si[i].eval || (si[i].interpreter && (!si[i].name || interp_is_machinery(si[i].name)));
	}
	for (int i = 0; i < npy; i++)
		pyflags[i] = py[i].flags;
	uint32_t m = merge_stack(pyflags, (uint32_t)npy, mn, (uint32_t)npcs, complete, 0, mf, NULL);
	for (uint32_t i = 0; i < m; i++) {
		struct snframe *f = &out[k++];
		memset(f, 0, sizeof(*f));
		if (mf[i].kind == MERGE_PY) {
			f->python = 1;
			f->py_index = (int)mf[i].index;
		} else {
			const struct sym_info *s = &si[mf[i].index];
			f->name = s->name;
			f->module = s->module;
			f->file = s->file;
			f->line = s->line;
			f->pc = pcs[mf[i].index];
			f->offset = s->offset;
		}
	}
done:
	free(mn);
	free(si);
	free(pyflags);
	free(mf);
	return k;
}
