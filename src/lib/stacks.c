/*
 * stacks.c — turning one REC_STACK into a call-tree node.
 *
 * This is the single place where a recorded stack becomes frames, so that
 * everything a stack can carry is merged here: today the Python frames and
 * the synthetic markers; later the native return addresses (recorded with
 * --native), where each interpreter activation (_PyEval_EvalFrameDefault)
 * is replaced by the Python frames it runs, PYF_ENTRY marking where one
 * activation's frames begin. Native addresses (nnative > 0) are not shown
 * yet: they are ignored here and the Python frames stand alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

uint32_t stack_to_node(struct profile *p, uint32_t st, const struct rec_stack *r)
{
	struct profile_internal *in = p->in;
	/* Root first: at most one marker, then the Python frames root to leaf. */
	if (scratch_reserve(in, r->npy + 1)) {
		in->oom = 1;
		return PNONE;
	}
	uint32_t *fr = in->scratch, n = 0;
	if (r->npy == 0) {
		fr[n++] = profile_marker_frame(p, r->flags & STACK_PY_FAULT      ? "[unreadable frames]"
						  : r->flags & STACK_PY_STARTUP  ? "[interpreter startup]"
						  : r->flags & STACK_PY_SHUTDOWN ? "[interpreter shutdown]"
										 : "[no Python frame]");
	} else {
		if (r->flags & STACK_PY_TRUNCATED) {
			/* The depth cap kept the innermost frames: mark the cut
			 * at the root, so the kept part still lines up by leaf. */
			char name[64];
			snprintf(name, sizeof(name), "[truncated: %u frames]", r->py_missing);
			fr[n++] = profile_marker_frame(p, name);
		} else if (r->flags & STACK_PY_FAULT) {
			/* A partial walk: the outer frames could not be read. */
			fr[n++] = profile_marker_frame(p, "[unreadable frames]");
		}
		for (uint32_t i = r->npy; i-- > 0;)
			fr[n++] = py_frame(p, st, &r->py[i]);
	}
	for (uint32_t i = 0; i < n; i++)
		if (fr[i] == PNONE)
			return PNONE;
	return intern_path(p, fr, n);
}
