/*
 * cfi-synth.c — see cfi-synth.h. Runs in the helper (strata-agentd),
 * never in the profiled process: it allocates and uses capstone.
 *
 * Per function: decode it (capstone, with operand details), classify each
 * instruction by what it does to rsp, rbp and the callee-saved registers,
 * then propagate a state (where the CFA is, where each callee-saved
 * register's caller value is) from the entry along every path, to a fixed
 * point. The rows are the state before each instruction reached.
 *
 * capstone is loaded with dlopen on first use, not linked: its 77,000
 * relocations cost every helper about a millisecond at start, and only a
 * profile with --native of JIT code without CFI needs it. It is reached
 * through libstrata-capstone.so beside the agent, a library with nothing
 * in it but its dependency on the capstone strata was built with: in the
 * wheel that dependency is auditwheel's vendored copy (renamed, so no
 * dlopen by soname finds it), and dlsym through the handle searches it.
 * The soname itself is the fallback (the unit tests, a tree without it).
 */
#include "cfi-synth.h"

#include <capstone/capstone.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The capstone functions used, from the library of the major version
 * built against (cs_insn and cs_x86 are that version's layout). */
#define CS_STR2(x) #x
#define CS_STR(x) CS_STR2(x)
static struct {
	cs_err (*open)(cs_arch, cs_mode, csh *);
	cs_err (*option)(csh, cs_opt_type, size_t);
	cs_insn *(*insn_alloc)(csh);
	bool (*disasm_iter)(csh, const uint8_t **, size_t *, uint64_t *, cs_insn *);
	bool (*insn_group)(csh, const cs_insn *, unsigned int);
	cs_err (*regs_access)(csh, const cs_insn *, cs_regs, uint8_t *, cs_regs, uint8_t *);
	void (*insn_free)(cs_insn *, size_t);
	cs_err (*close)(csh *);
	int ok;
} CS;
static pthread_once_t cs_once = PTHREAD_ONCE_INIT;
static char cs_dir[4096];

void cfisynth_set_libdir(const char *dir)
{
	snprintf(cs_dir, sizeof(cs_dir), "%s", dir ? dir : "");
}

static void cs_load(void)
{
	void *l = NULL;
	if (cs_dir[0]) {
		char path[sizeof(cs_dir) + 32];
		snprintf(path, sizeof(path), "%s/libstrata-capstone.so", cs_dir);
		l = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	}
	if (!l)
		l = dlopen("libcapstone.so." CS_STR(CS_API_MAJOR), RTLD_NOW | RTLD_LOCAL);
	if (!l)
		return;
	*(void **)&CS.open = dlsym(l, "cs_open");
	*(void **)&CS.option = dlsym(l, "cs_option");
	*(void **)&CS.insn_alloc = dlsym(l, "cs_malloc");
	*(void **)&CS.disasm_iter = dlsym(l, "cs_disasm_iter");
	*(void **)&CS.insn_group = dlsym(l, "cs_insn_group");
	*(void **)&CS.regs_access = dlsym(l, "cs_regs_access");
	*(void **)&CS.insn_free = dlsym(l, "cs_free");
	*(void **)&CS.close = dlsym(l, "cs_close");
	CS.ok = CS.open && CS.option && CS.insn_alloc && CS.disasm_iter && CS.insn_group && CS.regs_access && CS.insn_free &&
		CS.close;
}

/* The callee-saved registers of the SysV x86-64 ABI, by DWARF number. */
#define NSAVED 6
static const uint8_t saved_dw[NSAVED] = { DW_RBX, DW_RBP, 12, 13, 14, 15 };
#define S_RBP 1

enum { R_SAME = 0, R_SAVED, R_LOST };

struct state {
	uint8_t fp;        /* the CFA is rbp + fp_off (else rsp + off) */
	uint8_t off_known; /* off = CFA - rsp is known (always, unless fp) */
	int32_t off, fp_off;
	uint8_t rk[NSAVED];  /* R_*: where the caller's value is */
	int16_t ro[NSAVED];  /* R_SAVED: at CFA + ro */
};

enum kind {
	K_OTHER = 0,
	K_PUSH,         /* reg: saved index or -1 */
	K_POP,          /* reg: saved index, -1, or -2 for rsp */
	K_RSP_ADD,      /* imm: how far rsp moves up (add rsp, n / lea rsp, [rsp + n]) */
	K_RSP_FROM_RBP, /* rsp = rbp + imm (mov rsp, rbp / lea rsp, [rbp + n]) */
	K_RBP_FROM_RSP, /* mov rbp, rsp */
	K_RSP_OTHER,    /* any other write to rsp (and rsp, -32; sub rsp, reg) */
	K_LEAVE,
	K_RET,
	K_JMP,          /* imm: target */
	K_JMP_IND,
	K_JCC,          /* imm: target */
	K_CALL,
	K_STOP,         /* hlt, ud2, int3: no way on */
	K_BAD,          /* something this cannot follow */
};

struct ins {
	uint64_t addr;
	int64_t imm;
	uint16_t size;
	uint8_t kind;
	int8_t reg;
	uint8_t clob;      /* callee-saved registers it writes (bit per saved index) */
};

static int saved_index(unsigned r)
{
	switch (r) {
	case X86_REG_RBX: case X86_REG_EBX: case X86_REG_BX: case X86_REG_BL: case X86_REG_BH: return 0;
	case X86_REG_RBP: case X86_REG_EBP: case X86_REG_BP: case X86_REG_BPL: return 1;
	case X86_REG_R12: case X86_REG_R12D: case X86_REG_R12W: case X86_REG_R12B: return 2;
	case X86_REG_R13: case X86_REG_R13D: case X86_REG_R13W: case X86_REG_R13B: return 3;
	case X86_REG_R14: case X86_REG_R14D: case X86_REG_R14W: case X86_REG_R14B: return 4;
	case X86_REG_R15: case X86_REG_R15D: case X86_REG_R15W: case X86_REG_R15B: return 5;
	default: return -1;
	}
}

static int is_rsp(unsigned r) { return r == X86_REG_RSP || r == X86_REG_ESP || r == X86_REG_SP || r == X86_REG_SPL; }

/* What instruction i does, in the terms the propagation needs. */
static void classify(csh h, const cs_insn *i, struct ins *o)
{
	const cs_x86 *x = &i->detail->x86;
	const cs_x86_op *a = x->op_count > 0 ? &x->operands[0] : NULL, *b = x->op_count > 1 ? &x->operands[1] : NULL;
	o->addr = i->address;
	o->size = i->size;
	o->kind = K_OTHER;
	o->reg = -1;
	o->imm = 0;
	o->clob = 0;
	int areg = a && a->type == X86_OP_REG, breg = b && b->type == X86_OP_REG;
	switch (i->id) {
	case X86_INS_PUSH:
		o->kind = a && a->size == 8 ? K_PUSH : K_BAD;
		if (areg)
			o->reg = (int8_t)saved_index(a->reg);
		return;
	case X86_INS_POP:
		o->kind = areg && a->size == 8 ? K_POP : K_BAD;
		if (areg)
			o->reg = (int8_t)(is_rsp(a->reg) ? -2 : saved_index(a->reg));
		return;
	case X86_INS_ADD:
	case X86_INS_SUB:
		if (areg && is_rsp(a->reg)) {
			if (b && b->type == X86_OP_IMM && a->reg == X86_REG_RSP) {
				o->kind = K_RSP_ADD;
				o->imm = i->id == X86_INS_ADD ? b->imm : -b->imm;
			} else {
				o->kind = K_RSP_OTHER;
			}
			return;
		}
		break;
	case X86_INS_LEA:
		if (areg && is_rsp(a->reg)) {
			o->kind = K_RSP_OTHER;
			if (a->reg == X86_REG_RSP && b && b->type == X86_OP_MEM && b->mem.index == X86_REG_INVALID &&
			    b->mem.segment == X86_REG_INVALID) {
				if (b->mem.base == X86_REG_RSP)
					o->kind = K_RSP_ADD;
				else if (b->mem.base == X86_REG_RBP)
					o->kind = K_RSP_FROM_RBP;
				o->imm = b->mem.disp;
			}
			return;
		}
		break;
	case X86_INS_MOV:
		if (areg && breg && a->reg == X86_REG_RSP && b->reg == X86_REG_RBP) {
			o->kind = K_RSP_FROM_RBP;
			return;
		}
		if (areg && breg && a->reg == X86_REG_RBP && b->reg == X86_REG_RSP) {
			o->kind = K_RBP_FROM_RSP;
			return;
		}
		break;
	case X86_INS_LEAVE:
		o->kind = K_LEAVE;
		return;
	case X86_INS_RET:
		o->kind = x->op_count ? K_BAD : K_RET;
		return;
	case X86_INS_JMP:
		if (a && a->type == X86_OP_IMM) {
			o->kind = K_JMP;
			o->imm = a->imm;
		} else {
			o->kind = K_JMP_IND;
		}
		return;
	case X86_INS_CALL:
		o->kind = K_CALL; /* rsp and the callee-saved registers are as before once it returns */
		return;
	case X86_INS_HLT:
	case X86_INS_UD2:
	case X86_INS_INT3:
		o->kind = K_STOP;
		return;
	default:
		break;
	}
	if (CS.insn_group(h, i, CS_GRP_RET) || CS.insn_group(h, i, CS_GRP_IRET) || CS.insn_group(h, i, CS_GRP_INT)) {
		o->kind = K_BAD; /* retf, iret, syscalls through int */
		return;
	}
	if (CS.insn_group(h, i, CS_GRP_JUMP)) {
		if (a && a->type == X86_OP_IMM) {
			o->kind = K_JCC;
			o->imm = a->imm;
		} else {
			o->kind = K_BAD; /* ljmp and the like */
		}
		return;
	}
	cs_regs rd, wr;
	uint8_t nrd = 0, nwr = 0;
	if (CS.regs_access(h, i, rd, &nrd, wr, &nwr) != CS_ERR_OK) {
		o->kind = K_BAD;
		return;
	}
	for (uint8_t k = 0; k < nwr; k++) {
		if (is_rsp(wr[k]))
			o->kind = K_RSP_OTHER;
		int s = saved_index(wr[k]);
		if (s >= 0)
			o->clob |= (uint8_t)(1u << s);
	}
}

/* How far a function can move its stack pointer: further (only bytes
 * that are not real code do) is not followed, and the height stays far
 * from int32's limits. */
#define STACK_SPAN (1 << 28)

/* off - imm as the new height, or -1 past STACK_SPAN. */
static int height(int32_t off, int64_t imm, int32_t *out)
{
	if (imm < -STACK_SPAN || imm > STACK_SPAN || off - imm < -STACK_SPAN || off - imm > STACK_SPAN)
		return -1;
	*out = (int32_t)(off - imm);
	return 0;
}

/* The state after `in`, from s. Returns 0, or -1 if it cannot be followed. */
static int step(const struct ins *in, struct state *s)
{
	switch (in->kind) {
	case K_PUSH:
		if (s->off_known)
			s->off += 8;
		if (in->reg >= 0 && s->rk[in->reg] == R_SAME) {
			/* The caller's value, saved; where, if the height is known. */
			if (s->off_known && s->off <= 32768) {
				s->rk[in->reg] = R_SAVED;
				s->ro[in->reg] = (int16_t)-s->off;
			} else {
				s->rk[in->reg] = R_LOST;
			}
		}
		return 0;
	case K_POP: {
		if (in->reg == -2)
			return -1;
		int slot = s->off_known ? -s->off : 1; /* CFA offset of the popped word */
		if (s->off_known)
			s->off -= 8;
		if (in->reg == S_RBP && s->fp) {
			/* The frame pointer goes: the CFA is rsp-based again. */
			if (!s->off_known)
				return -1;
			s->fp = 0;
		}
		if (in->reg >= 0)
			s->rk[in->reg] = s->rk[in->reg] == R_SAVED && s->ro[in->reg] == slot ? R_SAME : R_LOST;
		break;
	}
	case K_RSP_ADD:
		if (s->off_known) {
			if (height(s->off, in->imm, &s->off))
				return -1;
		} else if (!s->fp) {
			return -1;
		}
		break;
	case K_RSP_FROM_RBP:
		if (!s->fp || height(s->fp_off, in->imm, &s->off))
			return -1;
		s->off_known = 1;
		break;
	case K_RBP_FROM_RSP:
		if (!s->off_known)
			return -1;
		if (s->rk[S_RBP] == R_SAME)
			s->rk[S_RBP] = R_LOST;
		s->fp = 1;
		s->fp_off = s->off;
		return 0;
	case K_RSP_OTHER:
		if (!s->fp)
			return -1;
		s->off_known = 0;
		break;
	case K_LEAVE: {
		if (!s->fp)
			return -1;
		s->off = s->fp_off - 8;
		s->off_known = 1;
		s->fp = 0;
		int slot = -s->fp_off;
		s->rk[S_RBP] = s->rk[S_RBP] == R_SAVED && s->ro[S_RBP] == slot ? R_SAME : R_LOST;
		return 0;
	}
	case K_BAD:
		return -1;
	default:
		break;
	}
	if (in->clob & (1u << S_RBP) && s->fp)
		return -1; /* the register the CFA is computed from, overwritten */
	for (int k = 0; k < NSAVED; k++)
		if ((in->clob & (1u << k)) && s->rk[k] == R_SAME)
			s->rk[k] = R_LOST;
	if (s->off_known && s->off < 8)
		return -1; /* below the return address: not a frame */
	return 0;
}

static int stack_equal(const struct state *a, const struct state *b)
{
	if (a->fp != b->fp || a->off_known != b->off_known)
		return 0;
	if (a->off_known && a->off != b->off)
		return 0;
	return !a->fp || a->fp_off == b->fp_off;
}

/* Joins b into a: the stack must agree; a register whose caller value
 * two paths keep in different places is lost. Returns -1 on a stack
 * conflict, 1 if a changed, 0 if not. */
static int join(struct state *a, const struct state *b)
{
	if (!stack_equal(a, b))
		return -1;
	int changed = 0;
	for (int k = 0; k < NSAVED; k++)
		if (a->rk[k] != R_LOST && (a->rk[k] != b->rk[k] || (a->rk[k] == R_SAVED && a->ro[k] != b->ro[k]))) {
			a->rk[k] = R_LOST;
			changed = 1;
		}
	return changed;
}

static int entry_like(const struct state *s) { return !s->fp && s->off_known && s->off == 8; }

static void to_rules(const struct state *s, struct cfi_rules *r)
{
	memset(r, 0, sizeof(*r));
	r->cfa.kind = CFA_REG;
	r->cfa.reg = s->fp ? DW_RBP : DW_RSP;
	r->cfa.off = s->fp ? s->fp_off : s->off;
	r->r[DW_RA] = (struct cfi_reg){ REG_AT_CFA, 0, -8 };
	for (int k = 0; k < NSAVED; k++)
		r->r[saved_dw[k]] = s->rk[k] == R_SAVED ? (struct cfi_reg){ REG_AT_CFA, 0, s->ro[k] }
				  : s->rk[k] == R_LOST ? (struct cfi_reg){ REG_UNDEF, 0, 0 }
						       : (struct cfi_reg){ REG_SAME, 0, 0 };
}

static long find_ins(const struct ins *v, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo].addr == addr ? (long)lo : -1;
}

/* Jumps that leave a function: the target, and whether the frame was at
 * entry height (a tail call) or not (a split-off part of this function). */
struct exit_jump {
	uint64_t target;
	uint32_t from;  /* the function jumping */
	int entry_like;
};

struct work {
	struct exit_jump *exits;
	size_t nexits, capexits;
	uint32_t func;  /* the function being followed */
	int why;        /* CFISYNTH_*: why it was refused */
	int returns;    /* it returned (or tail-called) on some path */
	int oom;
};

static void add_exit(struct work *w, uint64_t target, int entry)
{
	if (entry)
		w->returns = 1;
	if (w->nexits == w->capexits) {
		size_t cap = w->capexits ? w->capexits * 2 : 64;
		struct exit_jump *n = realloc(w->exits, cap * sizeof(*n));
		if (!n) {
			w->oom = 1;
			return;
		}
		w->exits = n;
		w->capexits = cap;
	}
	w->exits[w->nexits++] = (struct exit_jump){ target, w->func, entry };
}

/* Decodes [s, e) of code (at base) into *out, one small entry per
 * instruction (capstone's own, with details, are ~1.5 KB each: decoded
 * one at a time). Returns how many, 0 if none, -1 on out of memory. */
static long decode(csh h, cs_insn *insn, const uint8_t *code, uint64_t base, uint64_t s, uint64_t e,
		   struct ins **out)
{
	const uint8_t *p = code + (s - base);
	size_t left = (size_t)(e - s), cap = 0, n = 0;
	uint64_t addr = s;
	struct ins *v = NULL;
	while (left && CS.disasm_iter(h, &p, &left, &addr, insn)) {
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			struct ins *nv = realloc(v, cap * sizeof(*nv));
			if (!nv) {
				free(v);
				return -1;
			}
			v = nv;
		}
		classify(h, insn, &v[n++]);
	}
	*out = v;
	return (long)n;
}

/* Propagates from the entry of one decoded function. Returns 0 with
 * at[]/seen[] filled, or -1 to refuse it. */
static int propagate(const struct ins *v, size_t n, uint64_t start, uint64_t end, struct state *at, uint8_t *seen,
		     struct work *w)
{
	size_t *stack = malloc((n + 1) * sizeof(*stack));
	uint8_t *queued = calloc(n + 1, 1);
	if (!stack || !queued) {
		free(stack);
		free(queued);
		w->oom = 1;
		return -1;
	}
	size_t sp = 0;
	memset(&at[0], 0, sizeof(at[0]));
	at[0].off = 8;
	at[0].off_known = 1;
	seen[0] = 1;
	stack[sp++] = 0;
	queued[0] = 1;
	int rc = 0;
	/* Each instruction's state only moves down a finite lattice (a
	 * register to lost), so this ends; the bound is a safeguard. */
	size_t budget = 64 * (n + 16);
	while (sp && rc == 0) {
		if (!budget--) {
			w->why = CFISYNTH_JOIN;
			rc = -1;
			break;
		}
		size_t i = stack[--sp];
		queued[i] = 0;
		const struct ins *in = &v[i];
		struct state s = at[i];
		if (step(in, &s)) {
			w->why = CFISYNTH_INSN;
			rc = -1;
			break;
		}
		long succ[2] = { -1, -1 };
		int nsucc = 0;
		uint64_t next = in->addr + in->size;
		switch (in->kind) {
		case K_RET:
			/* The return address must be where the call left it. */
			if (!entry_like(&s)) {
				w->why = CFISYNTH_RET;
				rc = -1;
			}
			w->returns = 1;
			continue;
		case K_STOP:
		case K_JMP_IND:
			continue;
		case K_JMP:
		case K_JCC:
			if ((uint64_t)in->imm >= start && (uint64_t)in->imm < end) {
				succ[nsucc] = find_ins(v, n, (uint64_t)in->imm);
				if (succ[nsucc] < 0) {
					w->why = CFISYNTH_TARGET; /* into the middle of an instruction */
					rc = -1;
					break;
				}
				nsucc++;
			} else {
				add_exit(w, (uint64_t)in->imm, entry_like(&s));
			}
			if (in->kind == K_JMP)
				break;
			/* A conditional jump also goes on. */
			__attribute__((fallthrough));
		default:
			if (next >= end || i + 1 >= n) {
				/* Off the end of the function: into whatever follows,
				 * unless it ends with a call (to a function that does
				 * not return: abort, an error raiser). */
				if (in->kind != K_CALL)
					add_exit(w, next, entry_like(&s));
				break;
			}
			succ[nsucc++] = (long)(i + 1);
			break;
		}
		if (rc)
			break;
		for (int k = 0; k < nsucc; k++) {
			size_t j = (size_t)succ[k];
			int changed = 1;
			if (!seen[j]) {
				at[j] = s;
				seen[j] = 1;
			} else {
				changed = join(&at[j], &s);
				if (changed < 0) {
					w->why = CFISYNTH_JOIN;
					rc = -1;
					break;
				}
			}
			if (changed && !queued[j]) {
				queued[j] = 1;
				stack[sp++] = j;
			}
		}
	}
	free(stack);
	free(queued);
	/* Code that never returns nor tail-calls on any path was perhaps not
	 * entered by a call (a cold part ending in abort()): its entry state
	 * is unknown. */
	if (!rc && !w->returns) {
		w->why = CFISYNTH_NORETURN;
		rc = -1;
	}
	return rc;
}

struct fnresult {
	struct cfi_fnrows rows;
	uint32_t insns;
	int ok;
};

/* The rows of one function from its propagated states: one per
 * instruction reached, an unsupported rule (the walk stops) at each run
 * of instructions no path reached. */
static int emit(const struct ins *v, size_t n, const struct state *at, const uint8_t *seen, uint64_t start,
		uint64_t end, struct cfi_fnrows *out, uint32_t *ninsns)
{
	out->pc = malloc((n ? n : 1) * sizeof(*out->pc));
	out->rules = malloc((n ? n : 1) * sizeof(*out->rules));
	if (!out->pc || !out->rules)
		return -1;
	out->start = start;
	out->end = end;
	out->n = 0;
	for (size_t i = 0; i < n; i++) {
		struct cfi_rules r;
		if (seen[i]) {
			to_rules(&at[i], &r);
			++*ninsns;
		} else {
			memset(&r, 0, sizeof(r));
			r.cfa.kind = CFA_UNSUPPORTED;
		}
		if (out->n && !memcmp(&out->rules[out->n - 1], &r, sizeof(r)))
			continue;
		out->pc[out->n] = v[i].addr;
		out->rules[out->n] = r;
		out->n++;
	}
	return 0;
}

void cfisynth_free(struct cfi_fnrows *rows, uint32_t n)
{
	for (uint32_t i = 0; rows && i < n; i++) {
		free(rows[i].pc);
		free(rows[i].rules);
	}
	free(rows);
}

static int func_containing(const struct cfisynth_func *f, uint32_t n, uint64_t a, int *at_start)
{
	uint32_t lo = 0, hi = n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (f[mid].start <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || a >= f[lo - 1].end)
		return -1;
	*at_start = f[lo - 1].start == a;
	return (int)(lo - 1);
}

int cfisynth_build(const uint8_t *code, uint64_t base, size_t len, const struct cfisynth_func *funcs, uint32_t n,
		   struct cfi_fnrows **out, uint32_t *nout, struct cfisynth_stats *st)
{
	*out = NULL;
	*nout = 0;
	memset(st, 0, sizeof(*st));
	pthread_once(&cs_once, cs_load);
	csh h;
	if (!CS.ok || CS.open(CS_ARCH_X86, CS_MODE_64, &h) != CS_ERR_OK)
		return -1;
	CS.option(h, CS_OPT_DETAIL, CS_OPT_ON);
	cs_insn *insn = CS.insn_alloc(h);
	struct fnresult *res = calloc(n ? n : 1, sizeof(*res));
	struct work w = { 0 };
	int rc = res && insn ? 0 : -1;
	for (uint32_t f = 0; f < n && rc == 0; f++) {
		uint64_t s = funcs[f].start, e = funcs[f].end;
		if (s < base || e > base + len || e <= s)
			continue;
		st->funcs++;
		struct ins *v = NULL;
		long got = decode(h, insn, code, base, s, e, &v);
		size_t count = got > 0 ? (size_t)got : 0;
		struct state *at = count ? malloc(count * sizeof(*at)) : NULL;
		uint8_t *seen = count ? calloc(count, 1) : NULL;
		if (got < 0 || (count && (!at || !seen))) {
			rc = -1;
		} else if (count) {
			/* Bytes the disassembler stopped at are the function's
			 * new end: nothing past them is known. */
			uint64_t dend = v[count - 1].addr + v[count - 1].size;
			w.func = f;
			w.returns = 0;
			if (propagate(v, count, s, dend, at, seen, &w) == 0 && !w.oom) {
				if (emit(v, count, at, seen, s, e, &res[f].rows, &res[f].insns))
					rc = -1;
				else
					res[f].ok = 1;
			} else {
				st->refused++;
				st->why[w.why]++;
			}
		}
		if (w.oom)
			rc = -1;
		free(v);
		free(at);
		free(seen);
	}
	/* A function entered by a jump into its middle, or at its start from
	 * a frame not at entry height (a part split off another function):
	 * its entry state is not a call's, so its rows would be wrong. */
	for (size_t k = 0; rc == 0 && k < w.nexits; k++) {
		int at_start = 0;
		int g = func_containing(funcs, n, w.exits[k].target, &at_start);
		if (g < 0)
			continue;
		/* Into another function's middle: neither is a whole function
		 * entered by calls (a hot part and its cold part). */
		int both = !at_start;
		int drop[2] = { !(at_start && w.exits[k].entry_like) ? g : -1, both ? (int)w.exits[k].from : -1 };
		for (int d = 0; d < 2; d++)
			if (drop[d] >= 0 && res[drop[d]].ok) {
				free(res[drop[d]].rows.pc);
				free(res[drop[d]].rows.rules);
				memset(&res[drop[d]], 0, sizeof(res[drop[d]]));
				st->refused++;
				st->why[CFISYNTH_ENTRY]++;
			}
	}
	free(w.exits);
	if (insn)
		CS.insn_free(insn, 1);
	CS.close(&h);
	if (rc) {
		for (uint32_t f = 0; res && f < n; f++) {
			free(res[f].rows.pc);
			free(res[f].rows.rules);
		}
		free(res);
		return -1;
	}
	struct cfi_fnrows *o = malloc((n ? n : 1) * sizeof(*o));
	if (!o) {
		for (uint32_t f = 0; f < n; f++) {
			free(res[f].rows.pc);
			free(res[f].rows.rules);
		}
		free(res);
		return -1;
	}
	uint32_t k = 0;
	for (uint32_t f = 0; f < n; f++)
		if (res[f].ok) {
			o[k++] = res[f].rows;
			st->insns += res[f].insns;
		}
	free(res);
	st->done = k;
	*out = o;
	*nout = k;
	return 0;
}
