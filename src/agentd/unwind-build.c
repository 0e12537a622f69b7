/*
 * unwind-build.c — the helper's side of --native: the target's loaded
 * objects, their unwind tables, and the snapshots the signal handler
 * reads (unwind-tables.h), all in the shared region.
 *
 * Every writer pass (10 ms) the helper checks a fingerprint of the
 * target's link map (remote.h); when objects were loaded or unloaded, or
 * the handler met code in none of them, it rescans and publishes a new
 * immutable snapshot by a pointer swap. It also writes one REC_MODULE per
 * executable mapping.
 *
 * Unwind tables are built lazily. Until an object has one, the handler
 * reads the one FDE it needs in place, about 1 us per frame against 50 ns
 * in a table; building a table costs about 1 us per FDE. So an object's
 * table is built once a quarter as many frames have been read in place as
 * it has FDEs (at least 8): an object the program keeps running in pays a
 * quarter of its build cost in place first, one it only passes through
 * while importing is never built. The table is built from a copy of the
 * object's .eh_frame_hdr/.eh_frame read out of the target's memory (an
 * object unloaded meanwhile makes the copy fail), compiled with cfi.c and
 * moved into the shared region. A process that loads NumPy maps ~35
 * objects, most of which (OpenBLAS: 45 ms to compile) a program never
 * spends time in, or only while importing.
 *
 * Retiring a snapshot: each slot has a hazard pointer that the handler
 * sets to the snapshot it is about to use (and re-checks that it is still
 * current); the helper frees a replaced snapshot only once no slot holds
 * it.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shm/agent.h"
#include "cfi-synth.h"
#include "remote.h"
#include "shm/shm.h"
#include "shm/unwind.h"
#include "shm/unwind-tables.h"
#include "common/cfi.h"
#include "common/elfsect.h"
#include "common/format.h"
#include "target.h"

struct unwind_state {
	struct usnap *retired;
	/* A previous helper's snapshot (after a failed exec): its object
	 * list lives in that helper's memory, gone; it is replaced, never
	 * freed (its shared blocks stay readable for handlers still in it). */
	struct usnap *inherited;
	struct uobj *objs;
	uint64_t gen;               /* remote_objects_gen() at the last scan */
	int scanned;
	uint64_t vdso;
	uint64_t table_bytes;
	uint64_t scan_ns;           /* time spent scanning and building tables */
	unsigned compiled;          /* tables built */
	int debug;                  /* STRATA_DEBUG_NATIVE: log what tables cost */
};

TARGET_STATE(struct unwind_state, unwind, NULL)
#define U (*unwind_of(agentd_target))

/* A table built in the helper's heap, moved into the shared region where
 * the handler reads it. */
static int table_to_shm(struct cfi_table *t)
{
	size_t np = (size_t)t->nrows * sizeof(*t->pc), nr = (size_t)t->nrows * sizeof(*t->rule);
	size_t nu = (size_t)t->nrules * sizeof(*t->rules), nf = (size_t)t->nfdes * sizeof(*t->fde_pc);
	uint32_t *pc = shm_alloc(np ? np : 1), *rule = shm_alloc(nr ? nr : 1), *fde = shm_alloc(nf ? nf : 1);
	struct cfi_rules *rules = shm_alloc(nu ? nu : 1);
	if (!pc || !rule || !fde || !rules) {
		shm_free(pc);
		shm_free(rule);
		shm_free(fde);
		shm_free(rules);
		cfi_table_free(t);
		return -1;
	}
	memcpy(pc, t->pc, np);
	memcpy(rule, t->rule, nr);
	memcpy(rules, t->rules, nu);
	memcpy(fde, t->fde_pc, nf);
	struct cfi_table keep = *t;
	cfi_table_free(t); /* the heap arrays; it clears the header too */
	*t = keep;
	t->pc = pc;
	t->rule = rule;
	t->rules = rules;
	t->fde_pc = fde;
	return 0;
}

static void table_free_shm(struct cfi_table *t)
{
	shm_free(t->pc);
	shm_free(t->rule);
	shm_free(t->rules);
	shm_free(t->fde_pc);
	memset(t, 0, sizeof(*t));
}

/* ---- building tables --------------------------------------------------------- */

/* A copy of [addr, addr + len) of the target, or NULL if unreadable. */
static uint8_t *copy_mem(uint64_t addr, size_t len)
{
	uint8_t *b = malloc(len ? len : 1);
	if (!b)
		return NULL;
	if (len && remote_read(b, addr, len)) {
		free(b);
		return NULL;
	}
	return b;
}

#define seginfo rseg
#define objinfo robj

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
	if (rc != CFI_OK) {
		cfi_table_free(&o->cfi);
		return -1;
	}
	return table_to_shm(&o->cfi);
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
	if (rc != CFI_OK) {
		cfi_table_free(&o->cfi);
		return -1;
	}
	return table_to_shm(&o->cfi);
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

static int is_vdso(const struct objinfo *oi) { return oi->is_vdso; }

/* CPU time of the calling helper thread: what building tables costs (wall
 * time would count the writer waiting for a core). */
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
	} else if (!shm_pending()) {
		/* (Pending: the program maps the room asked for at its next
		 * sample, under RLIMIT_AS; built on a later pass.) */
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
	table_free_shm(&o->cfi);
	o->has_cfi = 0;
}

static struct uobj *obj_new(const struct objinfo *oi)
{
	struct uobj *o = shm_alloc(sizeof(*o));
	if (!o)
		return NULL;
	o->bias = oi->bias;
	if (is_vdso(oi)) {
		o->flags |= MOD_VDSO;
		o->path = strdup("[vdso]");
	} else if (oi->is_main) {
		o->flags |= MOD_MAIN;
		o->path = strdup(oi->path);
	} else {
		o->path = strdup(oi->path);
	}
	if (!o->path) {
		shm_free(o);
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
	table_free_shm(&o->cfi);
	free(o->path);
	free(o->image);
	shm_free(o);
}

/* ---- scanning ---------------------------------------------------------------- */

/* The object a link map entry is, if we know it already: same load bias
 * and same name (the executable and the vDSO by their kind). */
static struct uobj *find_obj(const struct objinfo *oi)
{
	uint32_t kind = is_vdso(oi) ? MOD_VDSO : oi->is_main ? MOD_MAIN : 0;
	for (struct uobj *o = U.objs; o; o = o->next) {
		if (o->gone || o->jit || o->bias != oi->bias || (o->flags & (MOD_MAIN | MOD_VDSO)) != kind)
			continue;
		if (kind || !strcmp(o->path, oi->path))
			return o;
	}
	return NULL;
}

static int scan_cb(const struct robj *oi, void *data)
{
	int *changed = data;
	struct uobj *o = find_obj(oi);
	if (o) {
		o->present = 1;
		return 0;
	}
	o = obj_new(oi);
	if (!o)
		return 0;
	o->present = 1;
	o->next = U.objs;
	U.objs = o;
	*changed = 1;
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
	struct usnap *s = shm_alloc(sizeof(*s) + nent * sizeof(struct uent));
	if (!s)
		return NULL;
	s->objs = calloc(nobj ? nobj : 1, sizeof(*s->objs));
	if (!s->objs) {
		shm_free(s);
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
	shm_free(s);
}

/* Frees retired snapshots no handler holds, then unloaded objects no
 * snapshot points at. */
static void reclaim(void)
{
	struct usnap **pp = &U.retired;
	reg_lock();
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
	reg_unlock();
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
		struct usnap *old = atomic_exchange(&agent.unwind_cur, sn);
		if (old && old == U.inherited) {
			U.inherited = NULL;
		} else if (old) {
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
 * next pass. force: rescan even if the link map looks unchanged. */
static int poll_objects(struct wbuf *recs, int reclaim_ok, int force)
{
	int changed = 0;
	int miss = atomic_exchange(&agent.unwind_miss, 0);
	uint64_t gen = remote_objects_gen();
	if (!U.scanned || force || miss || (gen && gen != U.gen)) {
		uint64_t t0 = thread_cpu_ns();
		for (struct uobj *o = U.objs; o; o = o->next)
			o->present = 0;
		int sc = 0;
		if (remote_objects(scan_cb, &sc) == 0) {
			changed = sc;
			for (struct uobj *o = U.objs; o; o = o->next)
				if (!o->gone && !o->present && !o->jit) {
					o->gone = 1;
					changed = 1;
					if (o->announced && recs)
						put_module(recs, o, 1);
				}
			U.gen = gen;
			U.scanned = 1;
		} else {
			for (struct uobj *o = U.objs; o; o = o->next)
				o->present = 1;
		}
		U.scan_ns += thread_cpu_ns() - t0;
	}
	/* Tables for the objects samples keep meeting. An object unloaded
	 * while its table was built could leave a table of whatever took its
	 * place: if the link map changed meanwhile, the new tables are dropped
	 * and built again after the next scan. */
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
			/* Any unload meanwhile, wherever in the list. */
			if (remote_objects_gen_full() != U.gen) {
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
	return poll_objects(recs, 1, 0);
}

int unwind_cover(const uint64_t *addrs, uint32_t n, struct wbuf *recs)
{
	/* The helper owns the snapshots: reading the current one needs no
	 * hazard pointer here. */
	const struct usnap *sn = atomic_load_explicit(&agent.unwind_cur, memory_order_acquire);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t pc = i ? addrs[i] - 1 : addrs[i];
		if (!sn || !usnap_find(sn, pc)) {
			poll_objects(recs, 0, 1);
			return 1;
		}
	}
	return 0;
}

int unwind_in_object(uint64_t pc)
{
	const struct usnap *sn = atomic_load_explicit(&agent.unwind_cur, memory_order_acquire);
	return sn && usnap_find(sn, pc);
}

void unwind_stream_reset(void)
{
	for (struct uobj *o = U.objs; o; o = o->next)
		o->announced = 0;
}

int unwind_init(void)
{
	U.vdso = agent.vdso;
	U.inherited = atomic_load(&agent.unwind_cur);
	U.debug = getenv("STRATA_DEBUG_NATIVE") != NULL;
	return unwind_poll(NULL) < 0 ? -1 : 0;
}

/* The functions of a JIT image that its .eh_frame (table fdes, NULL if
 * none) has no entry for, with rules derived from their machine code
 * (cfi-synth.h), read from where they run. Numba's are all of its
 * functions that LLVM found cannot throw: without debug information
 * (--jit-lines) it writes no CFI for them. */
static void jit_synth(uint64_t id, const uint64_t (*ranges)[2], uint32_t nranges, const uint64_t (*funcs)[2],
		      uint32_t nfuncs, const struct cfi_table *fdes, struct cfi_fnrows **out, uint32_t *nout)
{
	*out = NULL;
	*nout = 0;
	struct cfisynth_func *want = malloc((nfuncs ? nfuncs : 1) * sizeof(*want));
	if (!want)
		return;
	uint64_t t0 = mono_ns();
	struct cfisynth_stats sum = { 0 };
	for (uint32_t r = 0; r < nranges; r++) {
		uint32_t n = 0;
		for (uint32_t i = 0; i < nfuncs; i++)
			if (funcs[i][0] >= ranges[r][0] && funcs[i][1] <= ranges[r][1] &&
			    !(fdes && cfi_lookup(fdes, funcs[i][0])))
				want[n++] = (struct cfisynth_func){ funcs[i][0], funcs[i][1] };
		size_t len = (size_t)(ranges[r][1] - ranges[r][0]);
		uint8_t *code = n && len <= (64u << 20) ? copy_mem(ranges[r][0], len) : NULL;
		struct cfi_fnrows *rows = NULL;
		uint32_t nrows = 0;
		struct cfisynth_stats st;
		if (!code || cfisynth_build(code, ranges[r][0], len, want, n, &rows, &nrows, &st)) {
			free(code);
			continue;
		}
		free(code);
		struct cfi_fnrows *all = realloc(*out, (*nout + nrows + 1) * sizeof(*all));
		if (!all) {
			cfisynth_free(rows, nrows);
			continue;
		}
		memcpy(all + *nout, rows, nrows * sizeof(*rows));
		*out = all;
		*nout += nrows;
		free(rows); /* the entries' arrays moved to *out */
		sum.funcs += st.funcs;
		sum.done += st.done;
		sum.insns += st.insns;
		for (int k = 0; k < CFISYNTH_NWHY; k++)
			sum.why[k] += st.why[k];
	}
	free(want);
	if (U.debug && sum.funcs)
		agent_log("native: JIT image %llu: %u functions without CFI, rules derived for %u (%u instructions) "
			  "in %.2f ms; refused: %u insn, %u join, %u ret, %u target, %u noreturn, %u entry",
			  (unsigned long long)id, sum.funcs, sum.done, sum.insns, (double)(mono_ns() - t0) / 1e6,
			  sum.why[CFISYNTH_INSN], sum.why[CFISYNTH_JOIN], sum.why[CFISYNTH_RET], sum.why[CFISYNTH_TARGET],
			  sum.why[CFISYNTH_NORETURN], sum.why[CFISYNTH_ENTRY]);
}

/* JIT code: its table is built at once, from the loaded (relocated)
 * .eh_frame that the in-memory image's section header points at, and for
 * functions it has no entry for, from their code; JIT functions are few
 * and small, and a sample in one is likely. */
void unwind_jit_add(uint64_t id, const uint64_t (*ranges)[2], uint32_t nranges, uint64_t eh, uint64_t eh_len,
		    const uint64_t (*funcs)[2], uint32_t nfuncs)
{
	if (!nranges || eh_len > (16u << 20))
		return;
	struct uobj *o = shm_alloc(sizeof(*o));
	if (!o)
		return;
	uint8_t *buf = eh && eh_len ? copy_mem(eh, (size_t)eh_len) : NULL;
	struct cfi_source src = { buf, (size_t)eh_len, eh, 0 };
	struct cfi_table fdes;
	int have_fdes = buf && cfi_build_section(&fdes, &src, 0, NULL) == CFI_OK;
	struct cfi_fnrows *syn = NULL;
	uint32_t nsyn = 0;
	jit_synth(id, ranges, nranges, funcs, nfuncs, have_fdes ? &fdes : NULL, &syn, &nsyn);
	if (have_fdes)
		cfi_table_free(&fdes);
	uint32_t bad = 0;
	int r = cfi_build_with(&o->cfi, buf ? &src : NULL, 0, syn, nsyn, &bad);
	free(buf);
	cfisynth_free(syn, nsyn);
	if (r != CFI_OK || table_to_shm(&o->cfi)) {
		cfi_table_free(&o->cfi);
		shm_free(o);
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
