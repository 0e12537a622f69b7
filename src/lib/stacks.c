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
 * at the line its instruction offset maps to. */
static uint32_t py_frame(struct profile *p, uint32_t st, const struct rec_pyframe *f)
{
	struct profile_internal *in = p->in;
	uint32_t c = u64map_get(&in->code_map, (uint64_t)st << 32 | f->code);
	if (c == MAP_NONE) {
		/* Its REC_CODE was in a chunk that was lost. */
		in->unknown_codes++;
		return profile_marker_frame(p, "[unknown code]");
	}
	const struct pcode *pc = &in->codes[c];
	int32_t line = linetable_line(&pc->lt, f->lasti);
	return profile_intern_frame(p, pc->func, line > 0 ? (uint32_t)line : 0, 0);
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
		fr[n++] = profile_marker_frame(p, r->flags & STACK_PY_FAULT ? "[unreadable frames]"
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
	uint32_t node = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (fr[i] == PNONE)
			return PNONE;
		node = profile_intern_node(p, node, fr[i]);
		if (node == PNONE)
			return PNONE;
	}
	return node;
}
