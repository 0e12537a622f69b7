/*
 * unwind.c — --native: the unwinding the signal handler does.
 *
 * The interrupted registers come from the ucontext; each step is two
 * binary searches (object, then row) in the helper's current snapshot
 * (unwind-tables.h, built by unwind-build.c) and the application of at
 * most 17 register rules. An object whose table is not built yet has its
 * one FDE read in place (cfi_eval_hdr: a binary search of .eh_frame_hdr
 * and one call frame program, no allocation); the helper builds the table
 * once the object has earned it. Code in an object the snapshot does not
 * have yet (loaded since the helper's last scan, or before its first) is
 * found with glibc's _dl_find_object, which is async-signal-safe, and
 * read in place too: no sample fails for want of a table.
 *
 * Stack words are read with plain loads under the capture's fault guard,
 * the CFA must grow at every step, and depth is capped: nothing can loop,
 * lock or allocate.
 *
 * The snapshot in use is published in the slot's hazard pointer (and
 * re-checked to still be current), so the helper never frees it under us.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "shm/agent.h"
#include "shm/link.h"
#include "shm/unwind.h"
#include "shm/unwind-tables.h"
#include "common/cfi.h"
#include "common/elfsect.h"
#include "common/format.h"
#include "common/pytramp.h"

/* glibc >= 2.35's _dl_find_object, looked up at start so the handler
 * never goes through lazy PLT binding; NULL before 2.35. */
static int (*find_object)(void *, struct dl_find_object *);

void unwind_handler_init(void)
{
	*(void **)&find_object = dlsym(RTLD_DEFAULT, "_dl_find_object");
}

static const struct uent *find_ent(const struct usnap *s, uint64_t pc) { return s ? usnap_find(s, pc) : NULL; }

/* Registers in DWARF numbering, from the ucontext's gregs. */
static const int greg_of_dwarf[CFI_NREGS] = {
	REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI, REG_RBP, REG_RSP,
	REG_R8, REG_R9, REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP,
};

/* Callee-saved registers (SysV x86-64): the only ones whose "same value"
 * rule still holds in the caller after a call. */
#define CALLEE_SAVED ((1u << DW_RBX) | (1u << DW_RBP) | (1u << 12) | (1u << 13) | (1u << 14) | (1u << 15))

/* A word at any address: a rule computed from a stack that is not what
 * the CFI expected may point anywhere, and x86-64 reads it unaligned. */
typedef uint64_t __attribute__((aligned(1))) u64_any;

static inline uint64_t load(uint64_t addr)
{
	/* Under the capture's fault guard: an unmapped address longjmps out. */
	return *(volatile const u64_any *)(uintptr_t)addr;
}

/* Reads target bytes for pytramp_at, under the capture's fault guard;
 * refuses what crosses a page (a trampoline never does: pytramp.h), so
 * that no read near an arena's start can touch an unmapped page. */
static int tramp_read(void *ctx, uint64_t addr, uint8_t *buf, unsigned n)
{
	(void)ctx;
	if (!n || (addr >> 12) != ((addr + n - 1) >> 12))
		return -1;
	for (unsigned i = 0; i < n; i++)
		buf[i] = *(volatile const uint8_t *)(uintptr_t)(addr + i);
	return 0;
}

/* CPython 3.12+'s perf trampolines (-X perf, -X perf_jit: pytramp.h),
 * copied into anonymous memory with no unwind information. A return
 * address just past the trampoline's call, in no object, is one: its
 * frame is 16 bytes with the return address on top (and the caller's
 * %rbp under it, 3.14+), every other register untouched. Recognized by
 * its bytes, so stacks under -X perf reach past the first Python call;
 * the CLI folds the frame into the Python frame. */
static const struct cfi_rules *cpython_trampoline(uint64_t ra, struct cfi_rules *out)
{
	const struct pytramp_shape *t = pytramp_at(ra, tramp_read, NULL);
	if (!t)
		return NULL;
	memset(out, 0, sizeof(*out)); /* REG_SAME everywhere */
	out->cfa.kind = CFA_REG;
	out->cfa.reg = DW_RSP;
	out->cfa.off = PYTRAMP_CFA_OFF;
	out->r[DW_RA].kind = REG_AT_CFA;
	out->r[DW_RA].off = -8;
	if (t->saves_bp) {
		out->r[DW_RBP].kind = REG_AT_CFA;
		out->r[DW_RBP].off = -16;
	}
	return out;
}

/* The interrupted pc is in no object and has no unwind information: code
 * generated at run time (a JIT that writes only a perf map). Two shapes
 * are common and checkable: a frameless leaf (the return address on top
 * of the stack) and a frame-pointer frame (push %rbp; mov %rsp,%rbp). A
 * guess counts only if the return address it yields lies in a known
 * object; else the stack stops here as before. */
static const struct cfi_rules *anon_leaf(const struct usnap *snap, const uint64_t *r, uint32_t valid,
					 struct cfi_rules *out)
{
	memset(out, 0, sizeof(*out));
	out->cfa.kind = CFA_REG;
	out->r[DW_RA].kind = REG_AT_CFA;
	out->r[DW_RA].off = -8;
	if ((valid & (1u << DW_RSP)) && find_ent(snap, load(r[DW_RSP]) - 1)) {
		out->cfa.reg = DW_RSP;
		out->cfa.off = 8;
		return out;
	}
	uint64_t bp = r[DW_RBP];
	if ((valid & (1u << DW_RBP)) && bp > r[DW_RSP] && bp - r[DW_RSP] < (1u << 20) && !(bp & 7) &&
	    find_ent(snap, load(bp + 8) - 1)) {
		out->cfa.reg = DW_RBP;
		out->cfa.off = 16;
		out->r[DW_RBP].kind = REG_AT_CFA;
		out->r[DW_RBP].off = -16;
		return out;
	}
	return NULL;
}

int unwind_capture(struct tslot *s, const void *ucv, uint64_t *out, int max, uint8_t *flags)
{
	struct usnap *snap;
	/* Publish what we use before using it; retry if it was replaced in
	 * between, so the writer never frees a snapshot we hold. */
	do {
		snap = atomic_load_explicit(&agent.unwind_cur, memory_order_acquire);
		atomic_store_explicit(&s->unwind_hazard, snap, memory_order_seq_cst);
	} while (snap != atomic_load_explicit(&agent.unwind_cur, memory_order_seq_cst));
	/* No snapshot yet (the helper is starting): every object is read in
	 * place through the loader. */
	if (max <= 0) {
		atomic_store_explicit(&s->unwind_hazard, NULL, memory_order_release);
		*flags |= STACK_NATIVE_FAILED;
		return 0;
	}
	const ucontext_t *uc = ucv;
	uint64_t r[CFI_NREGS], nr[CFI_NREGS];
	uint32_t valid = (1u << CFI_NREGS) - 1, nvalid;
	for (int i = 0; i < CFI_NREGS; i++)
		r[i] = (uint64_t)uc->uc_mcontext.gregs[greg_of_dwarf[i]];

	int n = 0;
	int exact = 1; /* the pc is where execution is, not a return address */
	struct cfi_rules inplace;
	out[n++] = r[DW_RA];
	s->native_progress = n;
	for (;;) {
		uint64_t pc = r[DW_RA];
		uint64_t lpc = exact ? pc : pc - 1; /* a call may be the last instruction of its function */
		const struct uent *e = find_ent(snap, lpc);
		const struct cfi_rules *ru = NULL;
		if (e && e->t) {
			ru = cfi_lookup(e->t, lpc);
		} else if (e) {
			/* Not built yet: read its FDE in place, and once the
			 * object has earned it, have the writer build it. */
			struct cfi_source src = { (const uint8_t *)(uintptr_t)e->o->hdr_seg, e->o->hdr_seglen,
						  e->o->hdr_seg, 0 };
			if (cfi_eval_hdr(&src, e->o->hdr, lpc, &inplace) == 0)
				ru = &inplace;
			if (atomic_fetch_add_explicit(&e->o->hits, 1, memory_order_relaxed) + 1 == e->o->compile_at)
				link_poke();
		} else {
			/* Code in no object of the snapshot: most likely one
			 * loaded since the helper's last scan. Wake it now
			 * rather than in 10 ms, and meanwhile ask the loader. */
			if (snap && !atomic_exchange_explicit(&agent.unwind_miss, 1, memory_order_relaxed))
				link_poke();
			struct dl_find_object fo;
			if (find_object && find_object((void *)(uintptr_t)lpc, &fo) == 0 && fo.dlfo_eh_frame) {
				uint64_t lo = (uint64_t)(uintptr_t)fo.dlfo_map_start;
				struct cfi_source src = { (const uint8_t *)fo.dlfo_map_start,
							  (size_t)((uint64_t)(uintptr_t)fo.dlfo_map_end - lo), lo, 0 };
				if (cfi_eval_hdr(&src, (uint64_t)(uintptr_t)fo.dlfo_eh_frame, lpc, &inplace) == 0)
					ru = &inplace;
			}
		}
		if (!ru && !e)
			ru = exact ? (n == 1 && snap ? anon_leaf(snap, r, valid, &inplace) : NULL)
				   : cpython_trampoline(pc, &inplace);
		if (!ru) {
			*flags |= STACK_NATIVE_FAILED;
			break;
		}
		uint64_t cfa;
		switch (ru->cfa.kind) {
		case CFA_REG:
			if (!(valid & (1u << ru->cfa.reg)))
				goto failed;
			cfa = r[ru->cfa.reg] + (uint64_t)(int64_t)ru->cfa.off;
			break;
		case CFA_DEREF:
			if (!(valid & (1u << ru->cfa.reg)))
				goto failed;
			cfa = load(r[ru->cfa.reg] + (uint64_t)(int64_t)ru->cfa.off);
			break;
		case CFA_PLT:
			cfa = r[DW_RSP] + 8 + ((r[DW_RA] & 15) >= (uint64_t)ru->cfa.off ? 8 : 0);
			break;
		default:
			goto failed;
		}
		nvalid = 0;
		for (int i = 0; i < CFI_NREGS; i++) {
			const struct cfi_reg *g = &ru->r[i];
			switch (g->kind) {
			case REG_SAME:
				/* Other registers are clobbered by the call, unless
				 * this is a signal frame, which restores them all by
				 * explicit rules. */
				if ((CALLEE_SAVED & (1u << i)) && (valid & (1u << i))) {
					nr[i] = r[i];
					nvalid |= 1u << i;
				}
				break;
			case REG_AT_CFA:
				nr[i] = load(cfa + (uint64_t)(int64_t)g->off);
				nvalid |= 1u << i;
				break;
			case REG_VAL_CFA:
				nr[i] = cfa + (uint64_t)(int64_t)g->off;
				nvalid |= 1u << i;
				break;
			case REG_AT_REG:
				if (valid & (1u << g->reg)) {
					nr[i] = load(r[g->reg] + (uint64_t)(int64_t)g->off);
					nvalid |= 1u << i;
				}
				break;
			case REG_IN_REG:
				if (valid & (1u << g->reg)) {
					nr[i] = r[g->reg];
					nvalid |= 1u << i;
				}
				break;
			default:
				break;
			}
		}
		if (ru->r[DW_RA].kind == REG_UNDEF)
			break; /* the outermost frame (_start, a thread's clone) */
		if (!(nvalid & (1u << DW_RA)))
			goto failed;
		if (!(nvalid & (1u << DW_RSP)) || ru->r[DW_RSP].kind == REG_SAME) {
			nr[DW_RSP] = cfa;
			nvalid |= 1u << DW_RSP;
		}
		/* The stack only grows one way: a caller's frame is above its
		 * callee's. A signal frame may switch stacks (sigaltstack). */
		if (!ru->cfa.signal_frame && nr[DW_RSP] <= r[DW_RSP])
			goto failed;
		if (nr[DW_RA] == 0)
			break; /* some runtimes end the chain with a null return address */
		exact = ru->cfa.signal_frame;
		memcpy(r, nr, sizeof(r));
		valid = nvalid;
		if (n >= max) {
			*flags |= STACK_NATIVE_TRUNCATED;
			break;
		}
		out[n++] = r[DW_RA];
		s->native_progress = n;
		continue;
	failed:
		*flags |= STACK_NATIVE_FAILED;
		break;
	}
	atomic_store_explicit(&s->unwind_hazard, NULL, memory_order_release);
	return n;
}

