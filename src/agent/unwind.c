/*
 * unwind.c — native stacks (--native): the map of loaded objects, their
 * unwind tables, and the unwinding the signal handler does with them.
 *
 * Outside the handler (agent start, then every writer pass) the writer
 * notices objects that appear or go away (dl_iterate_phdr's adds/subs
 * counters; no dlopen interposition, which would change the caller that
 * glibc resolves $ORIGIN and RPATH against) and publishes an immutable
 * snapshot of them by a pointer swap. It also writes one REC_MODULE per
 * executable mapping.
 *
 * Unwind tables are built lazily. Until an object has one, the handler
 * reads the one FDE it needs in place (cfi_eval_hdr: a binary search of
 * .eh_frame_hdr and one call frame program, no allocation), about 1 us per
 * frame against 50 ns in a table; building a table costs about 1 us per
 * FDE. So an object's table is built once a quarter as many frames have
 * been read in place as it has FDEs (at least 8): an object the program
 * keeps running in pays a quarter of its build cost in place first, one it
 * only passes through while importing is never built. The table is built
 * by copying the object's .eh_frame_hdr/.eh_frame out of memory
 * with process_vm_readv (an object unloaded meanwhile makes the copy fail
 * instead of faulting) and compiling it with cfi.c. A process that loads
 * NumPy maps ~35 objects, most of which (OpenBLAS: 45 ms to compile) a
 * program never spends time in, or only while importing. Code in an
 * object loaded since the last scan is found with glibc's _dl_find_object,
 * which is async-signal-safe, and read in place too: no sample fails for
 * want of a table.
 *
 * In the handler (unwind_capture), the interrupted registers come from
 * the ucontext; each step is two binary searches (object, then row) and
 * the application of at most 17 register rules. Stack words are read with
 * plain loads under the capture's fault guard, the CFA must grow at every
 * step, and depth is capped: nothing can loop, lock or allocate.
 *
 * Retiring a snapshot: each thread's slot has a hazard pointer that the
 * handler sets to the snapshot it is about to use (and re-checks that it is
 * still current); the writer frees a replaced snapshot only once no slot
 * holds it.
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

#include "agent.h"
#include "unwind.h"
#include "../common/cfi.h"
#include "../common/elfsect.h"
#include "../common/format.h"

/* ---- objects and snapshots ----------------------------------------------- */

#define MAX_SEGS 4

struct uobj {
	struct uobj *next;
	uint64_t bias;
	char *path;
	uint32_t flags;             /* MOD_* */
	uint8_t build_id[64];
	size_t build_id_len;
	uint8_t *image;             /* vDSO copy */
	size_t image_len;
	uint32_t nseg;
	uint64_t seg_start[MAX_SEGS], seg_end[MAX_SEGS], seg_off[MAX_SEGS];
	/* Its .eh_frame_hdr and the segment holding it (with the FDEs): what
	 * the handler reads in place until the table is built. 0 if none. */
	uint64_t hdr, hdr_seg, hdr_seglen;
	_Atomic uint32_t hits;      /* frames unwound through it without a table */
	uint32_t compile_at;        /* ... before its table is built */
	int compile_failed;
	struct cfi_table cfi;
	int has_cfi;                /* cfi is built */
	int present;                /* seen by the last scan */
	int announced;              /* REC_MODULE written in the current stream */
	int gone;                   /* unloaded: free when no snapshot uses it */
	int jit;                    /* JIT code (jit.c): no module record, not found by scans */
	uint64_t jit_id;
	unsigned refs;              /* snapshots that point at it */
};

struct uent {
	uint64_t start, end;
	const struct cfi_table *t;  /* NULL: not built yet, read o's FDEs in place */
	struct uobj *o;
};

struct usnap {
	struct usnap *next_retired;
	uint32_t n;
	struct uobj **objs;         /* for reference counting */
	uint32_t nobjs;
	struct uent e[];            /* sorted by start, disjoint */
};

static struct {
	_Atomic(struct usnap *) cur;
	struct usnap *retired;
	struct uobj *objs;
	unsigned long long adds, subs;
	int scanned;
	uint64_t vdso;
	uint64_t table_bytes;
	_Atomic int miss;           /* the handler met code outside every table */
	uint64_t scan_ns;           /* time spent scanning and building tables */
	unsigned compiled;          /* tables built */
	/* glibc >= 2.35, looked up at start so the handler never goes
	 * through lazy PLT binding; NULL before 2.35. */
	int (*find_object)(void *, struct dl_find_object *);
	int debug;                  /* STRATA_DEBUG_NATIVE: log what tables cost */
} U;

/* ---- the handler side ----------------------------------------------------- */

static const struct uent *find_ent(const struct usnap *s, uint64_t pc)
{
	uint32_t lo = 0, hi = s->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (s->e[mid].start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || pc >= s->e[lo - 1].end)
		return NULL;
	return &s->e[lo - 1];
}

/* Registers in DWARF numbering, from the ucontext's gregs. */
static const int greg_of_dwarf[CFI_NREGS] = {
	REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI, REG_RBP, REG_RSP,
	REG_R8, REG_R9, REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP,
};

/* Callee-saved registers (SysV x86-64): the only ones whose "same value"
 * rule still holds in the caller after a call. */
#define CALLEE_SAVED ((1u << DW_RBX) | (1u << DW_RBP) | (1u << 12) | (1u << 13) | (1u << 14) | (1u << 15))

static inline uint64_t load(uint64_t addr)
{
	/* Under the capture's fault guard: an unmapped address longjmps out. */
	return *(volatile const uint64_t *)(uintptr_t)addr;
}

/* CPython 3.12+'s perf trampolines (-X perf, -X perf_jit; Python/
 * asm_trampoline.S, copied once per code object into anonymous memory
 * with no unwind information): `sub $8,%rsp; call *%rcx; add $8,%rsp;
 * ret`. A return address just past that call, in no object, is one: its
 * frame is 16 bytes with the return address on top, every other register
 * untouched. Recognized by its bytes, so stacks under -X perf reach past
 * the first Python call; the CLI folds the frame into the Python frame. */
static const struct cfi_rules *cpython_trampoline(uint64_t ra, struct cfi_rules *out)
{
	/* Bytes ra-6 .. ra+5: 48 83 ec 08 ff d1 | 48 83 c4 08 c3 */
	if (load(ra - 6) != 0x8348d1ff08ec8348ull || load(ra - 3) != 0xc308c48348d1ff08ull)
		return NULL;
	memset(out, 0, sizeof(*out)); /* REG_SAME everywhere */
	out->cfa.kind = CFA_REG;
	out->cfa.reg = DW_RSP;
	out->cfa.off = 16;
	out->r[DW_RA].kind = REG_AT_CFA;
	out->r[DW_RA].off = -8;
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
		snap = atomic_load_explicit(&U.cur, memory_order_acquire);
		atomic_store_explicit(&s->unwind_hazard, snap, memory_order_seq_cst);
	} while (snap != atomic_load_explicit(&U.cur, memory_order_seq_cst));
	if (!snap || max <= 0) {
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
				writer_poke();
		} else {
			/* Code in no object of the snapshot: most likely one
			 * loaded since the writer's last scan. Wake it now
			 * rather than in 10 ms, and meanwhile ask the loader. */
			if (!atomic_exchange_explicit(&U.miss, 1, memory_order_relaxed))
				writer_poke();
			struct dl_find_object fo;
			if (U.find_object && U.find_object((void *)(uintptr_t)lpc, &fo) == 0 && fo.dlfo_eh_frame) {
				uint64_t lo = (uint64_t)(uintptr_t)fo.dlfo_map_start;
				struct cfi_source src = { (const uint8_t *)fo.dlfo_map_start,
							  (size_t)((uint64_t)(uintptr_t)fo.dlfo_map_end - lo), lo, 0 };
				if (cfi_eval_hdr(&src, (uint64_t)(uintptr_t)fo.dlfo_eh_frame, lpc, &inplace) == 0)
					ru = &inplace;
			}
		}
		if (!ru && !e)
			ru = exact ? (n == 1 ? anon_leaf(snap, r, valid, &inplace) : NULL)
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

/* ---- building tables (writer) ---------------------------------------------- */

/* A copy of [addr, addr + len) of this process, or NULL if unreadable. */
static uint8_t *copy_mem(uint64_t addr, size_t len)
{
	uint8_t *b = malloc(len ? len : 1);
	if (!b)
		return NULL;
	if (len && agent_safe_read(b, addr, len)) {
		free(b);
		return NULL;
	}
	return b;
}

struct seginfo {
	uint64_t vaddr, memsz, filesz, off;
	uint32_t type, flags;
};

struct objinfo {
	char name[4096];
	uint64_t bias;
	uint32_t nph;
	struct seginfo ph[64];
	const void *phdr_addr;
};

/* Where the object's .eh_frame_hdr is, and the segment that holds it
 * (.eh_frame is in the same read-only segment). */
static void find_hdr(struct uobj *o, const struct objinfo *oi)
{
	uint64_t hdr = 0;
	for (uint32_t i = 0; i < oi->nph; i++)
		if (oi->ph[i].type == PT_GNU_EH_FRAME)
			hdr = oi->bias + oi->ph[i].vaddr;
	for (uint32_t i = 0; hdr && i < oi->nph; i++) {
		const struct seginfo *p = &oi->ph[i];
		uint64_t lo = oi->bias + p->vaddr;
		if (p->type != PT_LOAD || hdr < lo || hdr >= lo + p->filesz)
			continue;
		o->hdr = hdr;
		o->hdr_seg = lo;
		o->hdr_seglen = p->filesz;
		uint8_t *h = copy_mem(hdr, 32 <= lo + p->filesz - hdr ? 32 : lo + p->filesz - hdr);
		uint64_t count = 0;
		if (h) {
			struct cfi_source src = { h, 32 <= lo + p->filesz - hdr ? 32 : lo + p->filesz - hdr, hdr, 0 };
			if (cfi_hdr_count(&src, hdr, &count))
				count = 0;
			free(h);
		}
		/* ncompile=N overrides the rule (0: build at load). */
		count /= 4;
		o->compile_at = agent.cfg.native_compile_fixed ? agent.cfg.native_compile
				: count < 8 ? 8 : count > UINT32_MAX ? UINT32_MAX : (uint32_t)count;
		return;
	}
}

static int compile_from_memory(struct uobj *o)
{
	if (!o->hdr)
		return -1;
	uint8_t *copy = copy_mem(o->hdr_seg, o->hdr_seglen);
	if (!copy)
		return -1;
	struct cfi_source src = { copy, o->hdr_seglen, o->hdr_seg, 0 };
	int rc = cfi_build_eh_frame_hdr(&o->cfi, &src, o->hdr, NULL);
	free(copy);
	return rc == CFI_OK ? 0 : -1;
}

/* For objects without an .eh_frame_hdr: the .eh_frame or .debug_frame
 * section of the file. */
static int compile_from_file(struct uobj *o)
{
	if (o->flags & MOD_VDSO)
		return -1;
	struct elf_section sec;
	int debug = 0;
	if (elf_find_section(o->path, ".eh_frame", &sec) != 0) {
		if (elf_find_section(o->path, ".debug_frame", &sec) != 0)
			return -1;
		debug = 1;
	}
	uint8_t *data = elf_read_section(o->path, &sec);
	if (!data)
		return -1;
	/* .eh_frame's pc-relative pointers resolve against where the section
	 * is loaded; .debug_frame holds link-time addresses. */
	struct cfi_source src = { data, sec.size, debug ? sec.addr : sec.addr + o->bias, debug ? o->bias : 0 };
	int rc = cfi_build_section(&o->cfi, &src, debug, NULL);
	free(data);
	return rc == CFI_OK ? 0 : -1;
}

static void read_build_id(struct uobj *o, const struct objinfo *oi)
{
	for (uint32_t i = 0; i < oi->nph; i++) {
		const struct seginfo *p = &oi->ph[i];
		if (p->type != PT_NOTE || p->memsz > 65536)
			continue;
		uint8_t *n = copy_mem(oi->bias + p->vaddr, p->memsz);
		if (!n)
			continue;
		size_t off = 0;
		while (off + 12 <= p->memsz) {
			uint32_t namesz, descsz, type;
			memcpy(&namesz, n + off, 4);
			memcpy(&descsz, n + off + 4, 4);
			memcpy(&type, n + off + 8, 4);
			size_t name_off = off + 12, desc_off = name_off + ((namesz + 3u) & ~3u);
			size_t next = desc_off + ((descsz + 3u) & ~3u);
			if (next > p->memsz || next <= off)
				break;
			if (type == NT_GNU_BUILD_ID && namesz == 4 && !memcmp(n + name_off, "GNU", 4) &&
			    descsz <= sizeof(o->build_id)) {
				memcpy(o->build_id, n + desc_off, descsz);
				o->build_id_len = descsz;
				free(n);
				return;
			}
			off = next;
		}
		free(n);
	}
}

static int is_vdso(const struct objinfo *oi)
{
	/* The vDSO's program headers are inside its image, at e_phoff. */
	return U.vdso && (uint64_t)(uintptr_t)oi->phdr_addr == U.vdso + ((const ElfW(Ehdr) *)(uintptr_t)U.vdso)->e_phoff;
}

/* CPU time of the writer thread: what building tables costs the process
 * (wall time would count the writer waiting for a core). */
static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void compile(struct uobj *o)
{
	if (o->has_cfi || o->compile_failed)
		return;
	uint64_t t0 = thread_cpu_ns();
	o->has_cfi = compile_from_memory(o) == 0 || compile_from_file(o) == 0;
	if (o->has_cfi) {
		U.table_bytes += cfi_table_bytes(&o->cfi);
		U.compiled++;
	} else {
		o->compile_failed = 1;
	}
	if (U.debug)
		agent_log("native: %s: %s after %u frames, %u rows, %zu KiB, %.1f ms CPU", o->path,
			  o->has_cfi ? "table built" : "no usable CFI", atomic_load(&o->hits), o->cfi.nrows,
			  cfi_table_bytes(&o->cfi) >> 10, (thread_cpu_ns() - t0) / 1e6);
}

/* Drops a table no snapshot uses yet (built in this pass). */
static void uncompile(struct uobj *o)
{
	U.table_bytes -= cfi_table_bytes(&o->cfi);
	U.compiled--;
	cfi_table_free(&o->cfi);
	o->has_cfi = 0;
}

static struct uobj *obj_new(const struct objinfo *oi)
{
	struct uobj *o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	o->bias = oi->bias;
	if (is_vdso(oi)) {
		o->flags |= MOD_VDSO;
		o->path = strdup("[vdso]");
	} else if (!oi->name[0]) {
		char exe[4096];
		ssize_t l = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		exe[l > 0 ? l : 0] = 0;
		o->flags |= MOD_MAIN;
		o->path = strdup(exe);
	} else {
		o->path = strdup(oi->name);
	}
	if (!o->path) {
		free(o);
		return NULL;
	}
	for (uint32_t i = 0; i < oi->nph && o->nseg < MAX_SEGS; i++) {
		const struct seginfo *p = &oi->ph[i];
		if (p->type != PT_LOAD || !(p->flags & PF_X) || !p->memsz)
			continue;
		o->seg_start[o->nseg] = oi->bias + p->vaddr;
		o->seg_end[o->nseg] = oi->bias + p->vaddr + p->memsz;
		o->seg_off[o->nseg] = p->off;
		o->nseg++;
	}
	read_build_id(o, oi);
	if (o->flags & MOD_VDSO) {
		/* The vDSO has no file: keep its image so the CLI can name its
		 * functions. It is the span of its loadable segments. */
		uint64_t hi = 0;
		for (uint32_t i = 0; i < oi->nph; i++)
			if (oi->ph[i].type == PT_LOAD && oi->ph[i].vaddr + oi->ph[i].filesz > hi)
				hi = oi->ph[i].vaddr + oi->ph[i].filesz;
		if (hi && hi <= (1u << 20) && (o->image = copy_mem(U.vdso, hi)))
			o->image_len = hi;
	}
	find_hdr(o, oi);
	/* Without an .eh_frame_hdr the handler cannot read FDEs in place:
	 * such an object (rare: linked without --eh-frame-hdr) gets its
	 * table now, from the file. */
	if (!o->hdr || !o->compile_at)
		compile(o);
	if (!o->has_cfi && !o->hdr)
		o->flags |= MOD_NO_CFI;
	return o;
}

static void obj_free(struct uobj *o)
{
	if (o->has_cfi) {
		U.table_bytes -= cfi_table_bytes(&o->cfi);
		U.compiled--;
	}
	cfi_table_free(&o->cfi);
	free(o->path);
	free(o->image);
	free(o);
}

/* ---- scanning ---------------------------------------------------------------- */

struct scan {
	struct objinfo *oi;
	int changed;
};

static int count_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	unsigned long long *c = data;
	if (size < offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs))
		return -1;
	c[0] = info->dlpi_adds;
	c[1] = info->dlpi_subs;
	return 1; /* the counters are the same in every entry */
}

/* The object an entry of dl_iterate_phdr is, if we know it already: same
 * load bias and same name (the executable has an empty name, the vDSO is
 * told by where its program headers are). */
static struct uobj *find_obj(const struct objinfo *oi)
{
	uint32_t kind = is_vdso(oi) ? MOD_VDSO : !oi->name[0] ? MOD_MAIN : 0;
	for (struct uobj *o = U.objs; o; o = o->next) {
		if (o->gone || o->jit || o->bias != oi->bias || (o->flags & (MOD_MAIN | MOD_VDSO)) != kind)
			continue;
		if (kind || !strcmp(o->path, oi->name))
			return o;
	}
	return NULL;
}

static int scan_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	struct scan *sc = data;
	struct objinfo *oi = sc->oi;
	snprintf(oi->name, sizeof(oi->name), "%s", info->dlpi_name ? info->dlpi_name : "");
	oi->bias = info->dlpi_addr;
	oi->phdr_addr = info->dlpi_phdr;
	oi->nph = 0;
	for (int i = 0; i < info->dlpi_phnum && oi->nph < 64; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		oi->ph[oi->nph++] = (struct seginfo){ p->p_vaddr, p->p_memsz, p->p_filesz, p->p_offset, p->p_type,
						      p->p_flags };
	}
	struct uobj *o = find_obj(oi);
	if (o) {
		o->present = 1;
		return 0;
	}
	/* New: build it here, under the loader's lock, so it cannot be
	 * unloaded half-read. The copy goes through process_vm_readv anyway. */
	o = obj_new(oi);
	if (!o)
		return 0;
	o->present = 1;
	o->next = U.objs;
	U.objs = o;
	sc->changed = 1;
	return 0;
}

static int ent_cmp(const void *a, const void *b)
{
	const struct uent *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

static struct usnap *snap_build(void)
{
	uint32_t nent = 0, nobj = 0;
	for (struct uobj *o = U.objs; o; o = o->next)
		if (!o->gone) {
			nobj++;
			if (o->has_cfi || o->hdr)
				nent += o->nseg;
		}
	struct usnap *s = calloc(1, sizeof(*s) + nent * sizeof(struct uent));
	if (!s)
		return NULL;
	s->objs = calloc(nobj ? nobj : 1, sizeof(*s->objs));
	if (!s->objs) {
		free(s);
		return NULL;
	}
	for (struct uobj *o = U.objs; o; o = o->next) {
		if (o->gone)
			continue;
		s->objs[s->nobjs++] = o;
		o->refs++;
		if (!o->has_cfi && !o->hdr)
			continue;
		for (uint32_t i = 0; i < o->nseg; i++)
			s->e[s->n++] = (struct uent){ o->seg_start[i], o->seg_end[i], o->has_cfi ? &o->cfi : NULL, o };
	}
	qsort(s->e, s->n, sizeof(s->e[0]), ent_cmp);
	return s;
}

static void snap_free(struct usnap *s)
{
	for (uint32_t i = 0; i < s->nobjs; i++)
		s->objs[i]->refs--;
	free(s->objs);
	free(s);
}

/* Frees retired snapshots no handler holds, then unloaded objects no
 * snapshot points at. */
static void reclaim(void)
{
	struct usnap **pp = &U.retired;
	pthread_mutex_lock(&agent.reg_lock);
	while (*pp) {
		struct usnap *s = *pp;
		int held = 0;
		for (struct tslot *t = agent.slots; t && !held; t = t->next)
			held = atomic_load(&t->unwind_hazard) == s;
		if (held) {
			pp = &s->next_retired;
			continue;
		}
		*pp = s->next_retired;
		snap_free(s);
	}
	pthread_mutex_unlock(&agent.reg_lock);
	struct uobj **op = &U.objs;
	while (*op) {
		struct uobj *o = *op;
		if (o->gone && !o->refs) {
			*op = o->next;
			obj_free(o);
		} else {
			op = &o->next;
		}
	}
}

static void snap_publish(void)
{
	struct usnap *sn = snap_build();
	if (sn) {
		struct usnap *old = atomic_exchange(&U.cur, sn);
		if (old) {
			old->next_retired = U.retired;
			U.retired = old;
		}
	}
}

static void put_module(struct wbuf *recs, struct uobj *o, int unloaded)
{
	for (uint32_t i = 0; i < o->nseg; i++) {
		struct rec_module m = {
			.start = o->seg_start[i],
			.end = o->seg_end[i],
			.offset = o->seg_off[i],
			.bias = o->bias,
			.flags = o->flags | (unloaded ? MOD_UNLOADED : 0),
			.path = o->path,
			.build_id = o->build_id,
			.build_id_len = o->build_id_len,
			.image = unloaded ? NULL : o->image,
			.image_len = unloaded ? 0 : o->image_len,
		};
		rec_put_module(recs, &m);
	}
}

static unsigned count_objs(void)
{
	unsigned n = 0;
	for (struct uobj *o = U.objs; o; o = o->next)
		n += !o->gone;
	return n;
}

/* reclaim_ok: the caller does not hold agent.reg_lock (reclaim takes it).
 * unwind_cover runs under it, from drain_all: it leaves freeing to the
 * next pass. */
static int poll_objects(struct wbuf *recs, int reclaim_ok)
{
	unsigned long long c[2] = { 0, 0 };
	dl_iterate_phdr(count_cb, c);
	int changed = 0;
	atomic_store(&U.miss, 0);
	if (!U.scanned || c[0] != U.adds || c[1] != U.subs) {
		uint64_t t0 = thread_cpu_ns();
		struct objinfo *oi = malloc(sizeof(*oi));
		if (!oi)
			return -1;
		for (struct uobj *o = U.objs; o; o = o->next)
			o->present = 0;
		struct scan sc = { oi, 0 };
		dl_iterate_phdr(scan_cb, &sc);
		free(oi);
		changed = sc.changed;
		for (struct uobj *o = U.objs; o; o = o->next)
			if (!o->gone && !o->present && !o->jit) {
				o->gone = 1;
				changed = 1;
				if (o->announced && recs)
					put_module(recs, o, 1);
			}
		U.adds = c[0];
		U.subs = c[1];
		U.scanned = 1;
		U.scan_ns += thread_cpu_ns() - t0;
	}
	/* Tables for the objects samples keep meeting. This runs outside the
	 * loader's lock (building OpenBLAS's table takes 60 ms, too long to
	 * hold up dlopen in other threads), so an object unloaded meanwhile
	 * could leave a table of whatever took its place: if anything was
	 * unloaded while building, the new tables are dropped and built
	 * again after the next scan. */
	{
		uint64_t t0 = thread_cpu_ns();
		struct uobj *built[64];
		unsigned nbuilt = 0;
		for (struct uobj *o = U.objs; o && nbuilt < 64; o = o->next)
			if (!o->gone && !o->has_cfi && !o->compile_failed && o->hdr &&
			    atomic_load_explicit(&o->hits, memory_order_relaxed) >= o->compile_at) {
				compile(o);
				if (o->has_cfi)
					built[nbuilt++] = o;
			}
		if (nbuilt) {
			dl_iterate_phdr(count_cb, c);
			if (c[1] != U.subs) {
				for (unsigned i = 0; i < nbuilt; i++)
					uncompile(built[i]);
				U.scanned = 0; /* rescan at the next pass */
			} else {
				changed = 1;
			}
			U.scan_ns += thread_cpu_ns() - t0;
		}
	}
	if (changed) {
		if (U.debug)
			agent_log("native: %u objects, %u tables (%llu KiB), %.1f ms CPU scanning and building so far",
				  count_objs(), U.compiled, (unsigned long long)(U.table_bytes >> 10), U.scan_ns / 1e6);
		snap_publish();
	}
	if (recs)
		for (struct uobj *o = U.objs; o; o = o->next)
			if (!o->gone && !o->announced && !o->jit) {
				put_module(recs, o, 0);
				o->announced = 1;
			}
	if (U.retired && reclaim_ok)
		reclaim();
	return changed;
}

int unwind_poll(struct wbuf *recs)
{
	return poll_objects(recs, 1);
}

void unwind_cover(const uint64_t *addrs, uint32_t n, struct wbuf *recs)
{
	/* The writer owns the snapshots: reading the current one needs no
	 * hazard pointer here. */
	const struct usnap *sn = atomic_load_explicit(&U.cur, memory_order_acquire);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t pc = i ? addrs[i] - 1 : addrs[i];
		if (!sn || !find_ent(sn, pc)) {
			poll_objects(recs, 0);
			return;
		}
	}
}

int unwind_in_object(uint64_t pc)
{
	const struct usnap *sn = atomic_load_explicit(&U.cur, memory_order_acquire);
	return sn && find_ent(sn, pc);
}

void unwind_stream_reset(void)
{
	for (struct uobj *o = U.objs; o; o = o->next)
		o->announced = 0;
}

int unwind_init(void)
{
	U.vdso = getauxval(AT_SYSINFO_EHDR);
	U.debug = getenv("STRATA_DEBUG_NATIVE") != NULL;
	*(void **)&U.find_object = dlsym(RTLD_DEFAULT, "_dl_find_object");
	return unwind_poll(NULL) < 0 ? -1 : 0;
}

/* JIT code: its table is built at once from the loaded (relocated)
 * .eh_frame that the in-memory image's section header points at; JIT
 * functions are few and small, and a sample in one is likely. */
void unwind_jit_add(uint64_t id, const uint64_t (*ranges)[2], uint32_t nranges, uint64_t eh, uint64_t eh_len)
{
	if (!nranges || !eh || !eh_len || eh_len > (16u << 20))
		return;
	struct uobj *o = calloc(1, sizeof(*o));
	uint8_t *buf = o ? copy_mem(eh, (size_t)eh_len) : NULL;
	if (!buf) {
		free(o);
		return;
	}
	struct cfi_source src = { buf, (size_t)eh_len, eh, 0 };
	uint32_t bad = 0;
	int r = cfi_build_section(&o->cfi, &src, 0, &bad);
	free(buf);
	if (r != CFI_OK) {
		cfi_table_free(&o->cfi);
		free(o);
		return;
	}
	o->has_cfi = 1;
	U.table_bytes += cfi_table_bytes(&o->cfi);
	U.compiled++;
	o->jit = 1;
	o->jit_id = id;
	for (uint32_t i = 0; i < nranges && o->nseg < MAX_SEGS; i++) {
		o->seg_start[o->nseg] = ranges[i][0];
		o->seg_end[o->nseg] = ranges[i][1];
		o->nseg++;
	}
	o->present = 1;
	o->next = U.objs;
	U.objs = o;
	snap_publish();
}

void unwind_jit_remove(uint64_t id)
{
	for (struct uobj *o = U.objs; o; o = o->next)
		if (o->jit && !o->gone && o->jit_id == id) {
			o->gone = 1;
			snap_publish();
			reclaim();
			return;
		}
}

uint64_t unwind_table_bytes(void) { return U.table_bytes; }
