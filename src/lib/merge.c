/*
 * merge.c — see merge.h.
 */
#include "merge.h"

#include <string.h>

#include "common/format.h"

int merge_is_eval_name(const char *name)
{
	static const char eval[] = "_PyEval_EvalFrameDefault";
	size_t n = sizeof(eval) - 1;
	/* gcc names split-off parts NAME.cold, NAME.part.N, NAME.isra.N... */
	return name && !strncmp(name, eval, n) && (name[n] == 0 || name[n] == '.');
}

uint32_t merge_stack(const uint32_t *pyflags, uint32_t npy, const struct merge_native *nat, uint32_t nnative,
		     int native_complete, int keep_interpreter, struct merge_frame *out, struct merge_stats *st)
{
	struct merge_stats s = { 0 };
	uint32_t n = 0;
	/* Chunks: [start, end) runs of Python frames, leaf first, each ending
	 * with an entry frame (or the last frame). */
	uint32_t next_py = 0;
	for (uint32_t i = 0; i < npy; i++)
		if ((pyflags[i] & PYF_ENTRY) || i + 1 == npy)
			s.chunks++;
	if (nnative == 0) {
		for (uint32_t i = 0; i < npy; i++)
			out[n++] = (struct merge_frame){ MERGE_PY, i };
		if (st)
			*st = s;
		return n;
	}
	if (npy == 0 && !keep_interpreter) {
		/* No Python frame (interpreter start-up or shutdown, or a
		 * thread that runs no Python): what matters is the code the
		 * interpreter called last, if any; everything from the
		 * innermost interpreter frame out is the runtime itself. */
		for (uint32_t k = 0; k < nnative && !nat[k].interpreter; k++)
			out[n++] = (struct merge_frame){ MERGE_NATIVE, k };
		if (st)
			*st = s;
		return n;
	}
	uint32_t last_py_out = UINT32_MAX; /* position in out after the outermost Python frame placed */
	for (uint32_t k = 0; k < nnative; k++) {
		if (nat[k].eval) {
			s.evals++;
			if (keep_interpreter && nat[k].callsite)
				out[n++] = (struct merge_frame){ MERGE_CALLSITE, k };
			if (next_py < npy) {
				while (next_py < npy) {
					uint32_t f = next_py++;
					out[n++] = (struct merge_frame){ MERGE_PY, f };
					if (pyflags[f] & PYF_ENTRY)
						break;
				}
				last_py_out = n;
			}
			if (keep_interpreter)
				out[n++] = (struct merge_frame){ MERGE_NATIVE, k };
			continue;
		}
		if (nat[k].hidden && !keep_interpreter)
			continue;
		out[n++] = (struct merge_frame){ MERGE_NATIVE, k };
	}
	if (next_py < npy) {
		/* Activations the native stack does not show (it was cut short,
		 * or an eval part could not be recognised): the remaining
		 * Python frames are outer frames, so they go at the root. */
		for (uint32_t i = next_py; i < npy; i++)
			if ((pyflags[i] & PYF_ENTRY) || i + 1 == npy)
				s.unplaced++;
		if (native_complete)
			s.mismatch = 1;
		s.unplaced_at = n;
		for (; next_py < npy; next_py++)
			out[n++] = (struct merge_frame){ MERGE_PY, next_py };
		last_py_out = n;
	}
	/* Below the outermost Python frame is the runtime starting up
	 * (_start, Py_RunMain, a thread's clone): not the program's code. */
	if (!keep_interpreter && last_py_out != UINT32_MAX)
		n = last_py_out;
	if (st)
		*st = s;
	return n;
}

uint32_t merge_gc_under(const uint32_t *pyflags, const struct merge_frame *out, uint32_t m,
			const struct merge_native *nat)
{
#define IS_PY(k) (!out || out[k].kind == MERGE_PY)
#define PY_INDEX(k) (out ? out[k].index : (k))
	for (uint32_t k = 0; k < m; k++)
		if (IS_PY(k) && (pyflags[PY_INDEX(k)] & PYF_GC))
			return k;
	if (out && nat) {
		uint32_t outside = m; /* the Python frame nearest the root side */
		for (uint32_t k = m; k-- > 0;) {
			if (out[k].kind == MERGE_PY)
				outside = k;
			else if (out[k].kind == MERGE_NATIVE && nat[out[k].index].gc)
				return outside;
		}
	}
	for (uint32_t k = 0; k < m; k++)
		if (IS_PY(k))
			return k;
	return m;
#undef IS_PY
#undef PY_INDEX
}
