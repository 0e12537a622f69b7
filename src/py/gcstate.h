/*
 * gcstate.h — whether a thread is running CPython's cyclic garbage
 * collector, read from the interpreter's own GC state. Included by
 * pyframes.c after its version accessors (it uses LD(), RUNTIME and
 * pyframe_t from there), so it is compiled into both builds: the agent
 * module (signal handler, plain loads under the fault guard) and the
 * reader (checked reads of another process).
 *
 * What CPython keeps, on every version 3.8-3.15 (default builds):
 *   gcstate->collecting   set for the whole of a collection, callbacks,
 *                         finalizers (__del__) and weakref callbacks it
 *                         runs included; one per interpreter (3.9+), one
 *                         for the runtime (3.8: _PyRuntime.gc);
 *   gcstate->frame        3.15+: tstate->current_frame of the thread that
 *                         started the collection, at its start (NULL when
 *                         no Python frame ran), so a profiler can place
 *                         the collection under the frame that triggered it.
 * The flag says that a collection runs, not which thread runs it. The
 * collector holds the GIL throughout (it drops it only inside a finalizer
 * that releases it), so the thread collecting is the GIL's holder:
 *   3.8-3.11  _PyRuntime.gilstate.tstate_current (cleared before the GIL
 *             is dropped);
 *   3.12+     the interpreter's GIL: locked, and last_holder.
 * 3.15 identifies it exactly: the thread whose frame chain holds
 * gcstate->frame (see walk_frames).
 */
#ifndef STRATA_GCSTATE_H
#define STRATA_GCSTATE_H

/* The thread state holding the GIL of interp, or NULL. */
static PyThreadState *gil_owner(PyInterpreterState *interp)
{
#if PY_VERSION_HEX < 0x030C0000
	(void)interp;
	return (PyThreadState *)(uintptr_t)LD(RUNTIME->gilstate.tstate_current._value);
#elif PY_VERSION_HEX < 0x030D0000
	struct _gil_runtime_state *g = LD(interp->ceval.gil);
	return g && LD(g->locked._value) ? (PyThreadState *)(uintptr_t)LD(g->last_holder._value) : NULL;
#else
	struct _gil_runtime_state *g = LD(interp->ceval.gil);
	return g && LD(g->locked) ? LD(g->last_holder) : NULL;
#endif
}

#if PY_VERSION_HEX < 0x03090000
#define GC_STATE(interp) (&RUNTIME->gc)
#else
#define GC_STATE(interp) (&(interp)->gc)
#endif

/* Whether a collection may be running in the thread of ts:
 *   0   no (no collection runs, or another thread holds the GIL);
 *   1   yes; *start is the frame the collection started under (3.15+,
 *       when one ran), which the caller must meet in ts's chain for the
 *       answer to stand, else NULL (ts holds the GIL: it is the
 *       collector). */
static int gc_candidate(PyThreadState *ts, pyframe_t **start)
{
	*start = NULL;
	PyInterpreterState *interp = LD(ts->interp);
	if (!interp || !LD(GC_STATE(interp)->collecting))
		return 0;
#if PY_VERSION_HEX >= 0x030F0000
	*start = LD(GC_STATE(interp)->frame);
	if (*start)
		return 1;
#endif
	return gil_owner(interp) == ts;
}

#endif
