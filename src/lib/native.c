/*
 * native.c — native frames (--native) for the profile model: each stream's
 * REC_MODULE records feed an address space of the profile's symbolizer
 * (symbols.c), and each native address a stack names becomes a PK_NATIVE
 * frame, once. stacks.c merges those frames with the Python frames.
 *
 * A native frame is
 *   function  the symbol (demangled), or "object+0xSTART" in a stripped
 *             object (START: where the function's FDE begins, so one
 *             unnamed function is one row, not one row per address);
 *             file and first line from DWARF when the object has them;
 *             module = the object's path
 *   line      the line of the function executing (DWARF; code inlined
 *             into the function counts at the line that called it)
 *   addr      the address in the object's ELF file (what addr2line and
 *             objdump take): the interrupted instruction for the leaf, the
 *             return address for callers. Equal across processes and runs.
 *
 * Symbolizing is the slow part of loading a --native profile (libdwfl,
 * DWARF scopes), so it is cached twice: per stream, absolute address →
 * frame (a stack record repeats the addresses of the last thousand), and
 * in symbols.c per (object, ELF address), shared by every process that
 * mapped the object.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interp.h"
#include "jitsym.h"
#include "numbaname.h"
#include "profile-internal.h"
#include "symbols.h"

static struct symbolizer *symbolizer(struct profile *p)
{
	struct profile_internal *in = p->in;
	if (!in->sym && !(in->sym = sym_new()))
		in->oom = 1;
	return in->sym;
}

static struct sym_space *stream_space(struct profile *p, uint32_t st)
{
	struct pstream *s = &p->in->streams[st];
	if (!s->space) {
		struct symbolizer *sy = symbolizer(p);
		if (sy && !(s->space = sym_space_new(sy)))
			p->in->oom = 1;
	}
	return s->space;
}

static void note_module(struct profile *p, const struct rec_module *m);

void native_on_module(struct profile *p, uint32_t st, struct rbuf *body)
{
	struct rec_module m;
	if (rec_get_module(body, &m)) {
		p->in->bad_bodies++;
		return;
	}
	struct sym_space *sp = stream_space(p, st);
	if (sp && sym_space_add(sp, &m))
		p->in->oom = 1;
	if (!(m.flags & MOD_UNLOADED) && m.path)
		note_module(p, &m);
	rec_free_module(&m);
}

/* The object's build id, for exporters that carry one (OTLP mappings). */
static void note_module(struct profile *p, const struct rec_module *m)
{
	char hex[2 * 64 + 1] = "";
	for (size_t i = 0; i < m->build_id_len && i < 64; i++)
		snprintf(hex + 2 * i, 3, "%02x", m->build_id[i]);
	for (uint32_t i = 0; i < p->nmodules; i++)
		if (!strcmp(p->modules[i].path, m->path) && !strcmp(p->modules[i].build_id, hex))
			return;
	struct pmodule *nm = realloc(p->modules, (p->nmodules + 1) * sizeof(*nm));
	if (!nm) {
		p->in->oom = 1;
		return;
	}
	p->modules = nm;
	char *path = strdup(m->path), *bid = strdup(hex);
	if (!path || !bid) {
		free(path);
		free(bid);
		p->in->oom = 1;
		return;
	}
	p->modules[p->nmodules++] = (struct pmodule){ path, bid };
}

const char *profile_build_id(const struct profile *p, const char *path)
{
	for (uint32_t i = 0; path && i < p->nmodules; i++)
		if (!strcmp(p->modules[i].path, path) && p->modules[i].build_id[0])
			return p->modules[i].build_id;
	return NULL;
}

void native_on_perfmap(struct profile *p, uint32_t st, struct rbuf *body)
{
	struct perfmap_entry *e;
	uint32_t n;
	if (rec_get_perfmap(body, &e, &n)) {
		p->in->bad_bodies++;
		return;
	}
	struct pstream *s = &p->in->streams[st];
	for (uint32_t i = 0; i < n; i++)
		if (perfmap_table_add(&s->pmap, e[i].start, e[i].size, e[i].name))
			p->in->oom = 1;
	perfmap_entries_free(e, n);
}

void native_on_jit(struct profile *p, uint32_t st, uint64_t type, struct rbuf *body)
{
	struct pstream *s = &p->in->streams[st];
	if (!s->jit && !(s->jit = jit_space_new())) {
		p->in->oom = 1;
		return;
	}
	if (type == REC_JIT_IMAGE) {
		struct rec_jit_image r;
		if (rec_get_jit_image(body, &r)) {
			p->in->bad_bodies++;
			return;
		}
		if (jit_space_add(s->jit, &r))
			p->in->oom = 1;
		rec_free_jit_image(&r);
	} else {
		struct rec_jit_unload u;
		if (rec_get_jit_unload(body, &u)) {
			p->in->bad_bodies++;
			return;
		}
		jit_space_unload(s->jit, u.id);
	}
	/* Addresses already symbolized may now be (or no longer be) JIT code. */
	u64map_free(&s->native_map);
	memset(&s->native_map, 0, sizeof(s->native_map));
}


/* The frame of an address in JIT code. With line information (Numba's
 * NUMBA_DEBUGINFO=1) a JIT function reads like a Python function: its
 * @njit source file, first line and the line executing. */
static uint32_t jit_frame(struct profile *p, const struct jit_info *ji, uint64_t addr)
{
	char buf[512];
	const char *name = ji->name;
	if (!name) {
		snprintf(buf, sizeof(buf), "%s+0x%" PRIx64, ji->module, addr);
		name = buf;
	}
	const char *file = ji->func_file ? ji->func_file : ji->file;
	uint32_t line = ji->file && file && !strcmp(ji->file, file) ? ji->line : 0;
	uint32_t func = profile_intern_func(p, PK_JIT, name, file ? file : "", ji->func_file ? ji->func_line : 0,
					    "[jit]");
	return profile_intern_frame(p, func, line, addr);
}

uint32_t native_jit_frame(struct profile *p, uint32_t st, uint64_t addr, int call)
{
	struct pstream *s = &p->in->streams[st];
	struct jit_info ji;
	/* A return address (the thread was in code JIT code called) is kept
	 * as an address inside the call instruction: this frame is the leaf,
	 * and `annotate --asm` counts a leaf frame at the instruction it is in. */
	if (s->jit && jit_lookup(s->jit, addr, call, &ji))
		return jit_frame(p, &ji, call ? addr - 1 : addr);
	/* Its image was lost with a damaged chunk. */
	return profile_intern_frame(p, profile_intern_func(p, PK_JIT, "[unknown jit]", "", 0, "[jit]"), 0, addr);
}

struct jit_space *profile_jit_space(const struct profile *p, uint64_t addr)
{
	struct jit_info ji;
	for (uint32_t i = 0; i < p->in->nstreams; i++)
		if (p->in->streams[i].jit && jit_lookup_any(p->in->streams[i].jit, addr, 0, &ji))
			return p->in->streams[i].jit;
	return NULL;
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');
	return b && b[1] ? b + 1 : path;
}

/* Whether a function of the object at `si` is shown: everything with
 * --keep-interpreter; otherwise all but CPython's call machinery
 * (interp.h), and in the interpreter, all but functions without a name
 * (a stripped python3.11 names only its exported functions: the others
 * cannot be told apart). */
static int native_shown(const struct profile *p, const struct sym_info *si, const char *name)
{
	return p->in->opts.keep_interpreter || !si->interpreter || !interp_is_machinery(name);
}

/* The name, file and line of a native frame, as the model keeps them. The
 * function's file is where DWARF says it is defined; without a definition
 * DIE, the line table's file stands in. A line from another file than the
 * function's (no inline information to map it back) would be read as a
 * line of the function: it is left out. */
static uint32_t native_func(struct profile *p, const char *name, const char *func_file, uint32_t func_line,
			    const char *line_file, uint32_t *line, const char *module)
{
	const char *file = func_file ? func_file : line_file;
	if (!(line_file && file && (line_file == file || !strcmp(line_file, file))))
		*line = 0;
	return profile_intern_func(p, PK_NATIVE, name, file ? file : "", func_file ? func_line : 0, module);
}

/* The frames for one symbolized address: the function, then each function
 * inlined there, outermost first, each inlined into the one before it.
 * Returns the innermost, PNONE when all are hidden or on OOM (in->oom);
 * *depth is the number of frames in the chain. */
static uint32_t make_frames(struct profile *p, const struct sym_info *si, uint64_t addr, int show_function,
			    uint16_t *depth)
{
	char buf[512];
	const char *name = si->name;
	*depth = 0;
	if (!si->module) {
		/* In no recorded mapping: anonymous memory (JIT code), or a
		 * module record lost with a damaged chunk. */
		*depth = 1;
		return profile_intern_frame(p, profile_intern_func(p, PK_NATIVE, "[unknown]", "", 0, NULL), 0, addr);
	}
	uint32_t fr = PNONE;
	if (show_function) {
		if (!name) {
			snprintf(buf, sizeof(buf), "%s+0x%" PRIx64, base_name(si->module),
				 si->func_start ? si->func_start : si->offset);
			name = buf;
		}
		uint32_t line = si->line;
		uint32_t func = native_func(p, name, si->func_file, si->func_line, si->file, &line, si->module);
		fr = profile_intern_frame(p, func, line, si->offset);
		if (fr == PNONE)
			return PNONE;
		++*depth;
	}
	for (uint32_t i = 0; i < si->ninl && !p->in->opts.no_inline; i++) {
		const struct sym_inline *e = &si->inl[i];
		if (!native_shown(p, si, e->name))
			continue;
		uint32_t line = e->line;
		uint32_t func = native_func(p, e->name, e->func_file, e->func_line, e->file, &line, si->module);
		/* Inlined into the nearest frame shown around it, if any. */
		fr = profile_intern_inlined_frame(p, func, line, si->offset, fr);
		if (fr == PNONE)
			return PNONE;
		++*depth;
	}
	return fr;
}

const struct pnative *native_lookup(struct profile *p, uint32_t st, uint64_t addr, int call)
{
	struct profile_internal *in = p->in;
	struct pstream *s = &in->streams[st];
	/* User-space addresses leave bit 63 free for the lookup kind. */
	uint64_t key = (addr & ~(1ull << 63)) | (call ? 1ull << 63 : 0);
	uint32_t i = u64map_get(&s->native_map, key);
	if (i != MAP_NONE)
		return &in->natives[i];
	struct jit_info ji;
	struct pnative nv = { .frame = PNONE, .callsite = PNONE };
	struct sym_info si;
	if (s->jit && jit_lookup(s->jit, addr, call, &ji)) {
		nv.frame = jit_frame(p, &ji, addr);
		if (nv.frame == PNONE)
			return NULL;
		nv.depth = 1;
	} else {
		struct sym_space *sp = stream_space(p, st);
		if (!sp)
			return NULL;
		sym_lookup(sp, addr, call, &si);
		/* Code in no object: generated at run time, perhaps named by
		 * the process's perf map. CPython's -X perf / -X perf_jit
		 * trampolines (one per Python function, calling the eval loop)
		 * are the interpreter's machinery: folded like its other
		 * frames. */
		const struct perfmap_entry *pm =
			si.module ? NULL : perfmap_table_find(&s->pmap, addr - (call ? 1 : 0));
		if (pm)
			si.interpreter = perfmap_is_cpython_trampoline(pm->name);
		nv.eval = (uint8_t)si.eval;
		nv.interpreter = (uint8_t)si.interpreter;
		if (si.interpreter && si.module) {
			nv.gc = (uint8_t)interp_is_gc(si.name);
			for (uint32_t k = 0; k < si.ninl && !nv.gc; k++)
				nv.gc = (uint8_t)interp_is_gc(si.inl[k].name);
		}
		if (pm) {
			/* Named by the perf map (no DWARF, no inlining). */
			if (in->opts.keep_interpreter || !si.interpreter) {
				nv.frame = profile_intern_frame(
					p,
					profile_intern_func(p, PK_JIT, pm->name[0] ? pm->name : "[perf-map]", "", 0,
							    "[perf-map]"),
					0, addr);
				nv.depth = 1;
			}
		} else if (!si.eval) {
			nv.frame = make_frames(p, &si, si.module ? si.offset : addr, native_shown(p, &si, si.name),
					       &nv.depth);
		} else if (in->opts.keep_interpreter) {
			/* An eval activation is a frame of its own, right above
			 * the Python frames it runs (merge.c). The functions
			 * inlined into it where it called out (call_function,
			 * import_name...) ran for the innermost of those: they
			 * are a chain of their own, put below them. */
			struct sym_info fn = si;
			fn.inl = NULL;
			fn.ninl = 0;
			nv.frame = make_frames(p, &fn, si.offset, 1, &nv.depth);
			if (nv.frame != PNONE)
				nv.callsite = make_frames(p, &si, si.offset, 0, &nv.callsite_depth);
		}
		/* Otherwise an eval activation is replaced by its Python
		 * frames, the functions inlined into it included. */
		if (in->oom)
			return NULL;
	}
	if (in->nnatives == in->cap_natives) {
		uint32_t cap = in->cap_natives ? in->cap_natives * 2 : 1024;
		struct pnative *n = realloc(in->natives, (size_t)cap * sizeof(*n));
		if (!n) {
			in->oom = 1;
			return NULL;
		}
		in->natives = n;
		in->cap_natives = cap;
	}
	i = in->nnatives;
	if (u64map_put(&s->native_map, key, i)) {
		in->oom = 1;
		return NULL;
	}
	in->natives[in->nnatives++] = nv;
	return &in->natives[i];
}

void native_free(struct profile *p)
{
	struct profile_internal *in = p->in;
	for (uint32_t i = 0; i < in->nstreams; i++) {
		u64map_free(&in->streams[i].native_map);
		perfmap_table_free(&in->streams[i].pmap);
		jit_space_free(in->streams[i].jit);
	}
	free(in->natives);
	u64map_free(&in->native_stacks);
	sym_free(in->sym);
}
