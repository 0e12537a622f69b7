/*
 * stacks.c — turning one REC_STACK into a call-tree node.
 *
 * This is the single place where a recorded stack becomes frames, so that
 * everything a stack can carry is merged here: the Python frames, the
 * synthetic markers ("[gc]" under the Python frame whose allocation set
 * the garbage collector off, merge_gc_under), and the native addresses
 * recorded with --native,
 * symbolized by native.c and merged with the Python frames by merge.c
 * (each interpreter activation, _PyEval_EvalFrameDefault, replaced by the
 * Python frames it runs; CPython's other frames hidden unless
 * load_opts.keep_interpreter).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "merge.h"
#include "profile-internal.h"

static int scratch_reserve(struct profile_internal *in, uint32_t n)
{
	if (n <= in->cap_scratch)
		return 0;
	uint32_t cap = in->cap_scratch ? in->cap_scratch : 64;
	while (cap < n)
		cap *= 2;
	uint32_t *s = realloc(in->scratch, (size_t)cap * sizeof(*s));
	if (!s)
		return -1;
	in->scratch = s;
	in->cap_scratch = cap;
	return 0;
}

/* The frame of Python frame `f` of stream `st`: its code object's function
 * at the line its instruction offset maps to. Memoised per (code object,
 * offset): stacks repeat the same few instructions endlessly. */
static uint32_t py_frame(struct profile *p, uint32_t st, const struct rec_pyframe *f)
{
	struct profile_internal *in = p->in;
	uint32_t c = u64map_get(&in->code_map, (uint64_t)st << 32 | f->code);
	if (c == MAP_NONE) {
		/* Its REC_CODE was in a chunk that was lost. */
		in->unknown_codes++;
		return profile_marker_frame(p, "[unknown code]");
	}
	uint64_t key = (uint64_t)c << 32 | (uint32_t)f->lasti;
	uint32_t fr = u64map_get(&in->pyframe_map, key);
	if (fr != MAP_NONE)
		return fr;
	const struct pcode *pc = &in->codes[c];
	int32_t line = linetable_line(&pc->lt, f->lasti);
	/* A few instructions have no line (3.11+: the clean-up at the end of
	 * an except block): CPython says f_lineno is None there. The sample
	 * is real, so it goes to the function's own line, not to "line 0". */
	if (line <= 0)
		line = (int32_t)p->funcs[pc->func].line;
	fr = profile_intern_frame(p, pc->func, line > 0 ? (uint32_t)line : 0, 0);
	if (fr != PNONE && u64map_put(&in->pyframe_map, key, fr))
		in->oom = 1;
	return fr;
}

static int stamps_reserve(uint32_t **arr, uint32_t *cap, uint32_t n)
{
	if (n <= *cap)
		return 0;
	uint32_t c = *cap ? *cap : 256;
	while (c < n)
		c *= 2;
	uint32_t *a = realloc(*arr, (size_t)c * sizeof(*a));
	if (!a)
		return -1;
	memset(a + *cap, 0, (size_t)(c - *cap) * sizeof(*a));
	*arr = a;
	*cap = c;
	return 0;
}

/* Interns the path fr[0..n) (root first) and returns its leaf node. Each
 * new node learns whether its function and line occur above it on the
 * path, using a stamp per function and line-row key for this path. */
static uint32_t intern_path(struct profile *p, const uint32_t *fr, uint32_t n)
{
	struct profile_internal *in = p->in;
	if (stamps_reserve(&in->func_stamp, &in->cap_func_stamp, p->nfuncs) ||
	    stamps_reserve(&in->fl_stamp, &in->cap_fl_stamp, in->nfl)) {
		in->oom = 1;
		return PNONE;
	}
	if (++in->stamp == 0) {
		/* Wrapped: old stamps could collide with new ones. */
		memset(in->func_stamp, 0, (size_t)in->cap_func_stamp * sizeof(uint32_t));
		memset(in->fl_stamp, 0, (size_t)in->cap_fl_stamp * sizeof(uint32_t));
		in->stamp = 1;
	}
	uint32_t node = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t func = p->frames[fr[i]].func, fl = in->frame_fl[fr[i]];
		uint8_t first = 0;
		if (in->func_stamp[func] != in->stamp) {
			in->func_stamp[func] = in->stamp;
			first |= NODE_FIRST_FUNC;
		}
		if (in->fl_stamp[fl] != in->stamp) {
			in->fl_stamp[fl] = in->stamp;
			first |= NODE_FIRST_LINE;
		}
		node = profile_intern_node(p, node, fr[i], first);
		if (node == PNONE)
			return PNONE;
	}
	return node;
}

/* Root markers: at most one, for what is missing at the root. */
static uint32_t root_marker(struct profile *p, const struct rec_stack *r)
{
	if (r->npy == 0)
		return profile_marker_frame(p, r->flags & STACK_PY_FAULT      ? "[unreadable frames]"
					       : r->flags & STACK_PY_STARTUP  ? "[interpreter startup]"
					       : r->flags & STACK_PY_SHUTDOWN ? "[interpreter shutdown]"
									      : "[no Python frame]");
	if (r->flags & STACK_PY_TRUNCATED) {
		/* The depth cap kept the innermost frames: mark the cut at
		 * the root, so the kept part still lines up by leaf. */
		char name[64];
		snprintf(name, sizeof(name), "[truncated: %u frames]", r->py_missing);
		return profile_marker_frame(p, name);
	}
	if (r->flags & STACK_PY_FAULT) /* a partial walk: the outer frames could not be read */
		return profile_marker_frame(p, "[unreadable frames]");
	return PNONE;
}

static void *merge_reserve(struct profile_internal *in, size_t n)
{
	if (n > in->cap_merge_scratch) {
		size_t cap = in->cap_merge_scratch ? in->cap_merge_scratch : 4096;
		while (cap < n)
			cap *= 2;
		void *b = realloc(in->merge_scratch, cap);
		if (!b)
			return NULL;
		in->merge_scratch = b;
		in->cap_merge_scratch = cap;
	}
	return in->merge_scratch;
}

static uint32_t gc_frame(struct profile *p) { return profile_marker_frame(p, PROFILE_GC); }

/* The root-first frames of a stack with native addresses, in in->scratch:
 * the Python and native frames merged in the order they ran. Where the
 * native walk stopped early, the Python frames it could not reach sit at
 * the root above a "[native stack incomplete]" marker (what ran between
 * them is unknown). Returns the number of frames, or UINT32_MAX on OOM. */
static uint32_t native_path(struct profile *p, uint32_t st, const struct rec_stack *r, uint32_t *nflags)
{
	struct profile_internal *in = p->in;
	uint32_t npy = r->npy, nn = r->nnative;
	/* asyncio: the awaiters' frames (after the thread's) are not on
	 * the native stack; they go in above the running task's frames. */
	while (r->ntasks && npy > 0 && (r->py[npy - 1].flags & PYF_AWAITER))
		npy--;
	uint32_t xat = r->ntasks ? r->tasks[0].at : UINT32_MAX;
	size_t a1 = (size_t)(npy + 2 * (size_t)nn) * sizeof(struct merge_frame);
	size_t a2 = (size_t)nn * sizeof(struct merge_native);
	size_t a3 = (size_t)nn * sizeof(uint32_t), a4 = (size_t)npy * sizeof(uint32_t);
	uint8_t *b = merge_reserve(in, a1 + a2 + 2 * a3 + a4 + 16);
	if (!b)
		return UINT32_MAX;
	struct merge_frame *mf = (struct merge_frame *)b;
	struct merge_native *mn = (struct merge_native *)(b + a1);
	uint32_t *nframe = (uint32_t *)(b + a1 + a2), *ncall = (uint32_t *)(b + a1 + a2 + a3);
	uint32_t *pyflags = (uint32_t *)(b + a1 + a2 + 2 * a3);
	uint64_t nframes = 0; /* native frames, those of inlined functions included */
	for (uint32_t i = 0; i < nn; i++) {
		/* Every address but the interrupted one is a return address. */
		const struct pnative *nv = native_lookup(p, st, r->native[i], i > 0);
		if (!nv)
			return UINT32_MAX;
		mn[i] = (struct merge_native){ .eval = nv->eval, .interpreter = nv->interpreter,
					       .hidden = nv->frame == PNONE, .callsite = nv->callsite != PNONE,
					       .gc = nv->gc };
		nframe[i] = nv->frame;
		ncall[i] = nv->callsite;
		nframes += nv->depth + nv->callsite_depth;
	}
	if (nframes + r->npy + 3 * (uint64_t)r->ntasks + 3 > UINT32_MAX ||
	    scratch_reserve(in, (uint32_t)(nframes + r->npy + 3 * r->ntasks + 3)))
		return UINT32_MAX;
	for (uint32_t i = 0; i < npy; i++)
		pyflags[i] = r->py[i].flags;
	int complete = !(r->flags & (STACK_NATIVE_FAILED | STACK_NATIVE_TRUNCATED));
	struct merge_stats ms;
	uint32_t m = merge_stack(pyflags, npy, mn, nn, complete, in->opts.keep_interpreter, mf, &ms);
	if (ms.mismatch)
		*nflags |= NSTACK_MISMATCH;
	/* Leaf-first out[cut..m) are the Python frames placed at the root
	 * because the native walk did not reach their activations. */
	uint32_t cut = !complete && ms.unplaced ? ms.unplaced_at : m;
	uint32_t *fr = in->scratch, n = 0;
	uint32_t mk = root_marker(p, r);
	if (mk != PNONE)
		fr[n++] = mk;
	/* [gc] goes under mf[gc_at], or at the root (gc_at == m). */
	uint32_t gc_at = r->flags & STACK_GC ? merge_gc_under(pyflags, mf, m, mn) : UINT32_MAX;
	if (gc_at == m)
		fr[n++] = gc_frame(p);
	for (uint32_t k = m; k-- > 0;) {
		if (mf[k].kind == MERGE_PY) {
			uint32_t ix = mf[k].index;
			if (ix == xat)
				n += tasks_awaiters_path(p, st, r, fr + n, py_frame);
			else if (ix > xat && !in->opts.keep_interpreter && r->loop_at && ix >= r->loop_at)
				continue; /* the event loop's own frames */
			fr[n++] = py_frame(p, st, &r->py[ix]);
		} else if ((mf[k].kind == MERGE_NATIVE ? nframe : ncall)[mf[k].index] != PNONE) {
			/* The function, then what is inlined in it, outermost
			 * first: the chain is linked from the innermost. */
			uint32_t f = (mf[k].kind == MERGE_NATIVE ? nframe : ncall)[mf[k].index], d = 0;
			for (uint32_t g = f; g != PNONE; g = p->frames[g].inlined_into)
				d++;
			n += d;
			for (uint32_t g = f, j = n; g != PNONE; g = p->frames[g].inlined_into)
				fr[--j] = g;
		}
		if (k == gc_at)
			fr[n++] = gc_frame(p);
		if (k == cut && cut > 0)
			fr[n++] = profile_marker_frame(p, "[native stack incomplete]");
	}
	return n;
}

/* A stack recorded without --native whose thread was in JIT code: the
 * Python frames, then the JIT function (called, through the dispatcher,
 * by the leaf Python frame's line). */
static uint32_t jit_leaf_path(struct profile *p, uint32_t st, const struct rec_stack *r)
{
	struct profile_internal *in = p->in;
	if (scratch_reserve(in, r->npy + r->nnative + 2))
		return UINT32_MAX;
	uint32_t *fr = in->scratch, n = 0;
	uint32_t mk = root_marker(p, r);
	if (mk != PNONE)
		fr[n++] = mk;
	for (uint32_t i = r->npy; i-- > 0;)
		fr[n++] = py_frame(p, st, &r->py[i]);
	for (uint32_t i = r->nnative; i-- > 0;) {
		int call = i > 0 || (r->flags & STACK_JIT_RETURN);
		fr[n++] = native_jit_frame(p, st, r->native[i], call);
	}
	/* The collector ran from code the JIT code called. */
	if (r->flags & STACK_GC)
		fr[n++] = gc_frame(p);
	return n;
}

uint32_t stack_to_node(struct profile *p, uint32_t st, const struct rec_stack *r)
{
	struct profile_internal *in = p->in;
	uint32_t *fr, n = 0;
	uint32_t nflags = 0;
	if (r->nnative && (r->flags & STACK_JIT_LEAF)) {
		n = jit_leaf_path(p, st, r);
		if (n == UINT32_MAX) {
			in->oom = 1;
			return PNONE;
		}
		fr = in->scratch;
		for (uint32_t i = 0; i < n; i++)
			if (fr[i] == PNONE)
				return PNONE;
		return intern_path(p, fr, n);
	}
	if (r->nnative || (r->flags & (STACK_NATIVE_FAILED | STACK_NATIVE_TRUNCATED))) {
		nflags = NSTACK_NATIVE;
		if (r->flags & STACK_NATIVE_FAILED)
			nflags |= NSTACK_FAILED;
		if (r->flags & STACK_NATIVE_TRUNCATED)
			nflags |= NSTACK_TRUNCATED;
	}
	if (r->nnative) {
		n = native_path(p, st, r, &nflags);
		if (n == UINT32_MAX) {
			in->oom = 1;
			return PNONE;
		}
		fr = in->scratch;
	} else {
		/* Root first: at most one marker, then the Python frames root
		 * to leaf, [gc] under the one the collection started under. */
		if (scratch_reserve(in, r->npy + 3 * r->ntasks + 3)) {
			in->oom = 1;
			return PNONE;
		}
		fr = in->scratch;
		uint32_t mk = root_marker(p, r);
		if (mk != PNONE)
			fr[n++] = mk;
		uint32_t gc_at = UINT32_MAX;
		if (r->ntasks) {
			/* asyncio: the logical stack (tasks.c); [gc] at the leaf. */
			n += tasks_path(p, st, r, fr + n, py_frame);
			if (r->flags & STACK_GC)
				fr[n++] = gc_frame(p);
			goto path;
		}
		if (r->flags & STACK_GC) {
			uint32_t *pyflags = merge_reserve(in, (size_t)r->npy * sizeof(uint32_t) + 16);
			if (!pyflags) {
				in->oom = 1;
				return PNONE;
			}
			for (uint32_t i = 0; i < r->npy; i++)
				pyflags[i] = r->py[i].flags;
			gc_at = merge_gc_under(pyflags, NULL, r->npy, NULL);
			if (gc_at == r->npy)
				fr[n++] = gc_frame(p);
		}
		for (uint32_t i = r->npy; i-- > 0;) {
			fr[n++] = py_frame(p, st, &r->py[i]);
			if (i == gc_at)
				fr[n++] = gc_frame(p);
		}
	}
path:
	if (nflags && u64map_put(&in->native_stacks, (uint64_t)st << 32 | r->index, nflags)) {
		in->oom = 1;
		return PNONE;
	}
	for (uint32_t i = 0; i < n; i++)
		if (fr[i] == PNONE)
			return PNONE;
	return intern_path(p, fr, n);
}
