/*
 * merge.h — one sample's Python frames and native frames merged into the
 * stack that really ran.
 *
 * Each activation of CPython's eval loop (_PyEval_EvalFrameDefault, and
 * its .cold parts) is replaced by the Python frames it was running: on
 * 3.11+ one activation runs the frames from the innermost one up to and
 * including the next frame marked PYF_ENTRY (entered from C); before 3.11
 * every frame is an entry frame. Python -> C -> Python -> C stacks thus
 * interleave in their true order. CPython's call machinery (interp.h) and
 * the native frames outside the outermost Python frame (_start, thread
 * start-up) are hidden unless keep_interpreter is set; CPython's other
 * functions (the regex engine, list sort...) are shown where they ran. In
 * a stack without Python frames, everything from the innermost interpreter
 * frame out is hidden too (start-up and shutdown show only the code the
 * interpreter was calling).
 *
 * The merge is pure: callers say which native frames are eval activations,
 * which belong to the interpreter and which are hidden (symbols.c and
 * interp.c know), so it is tested without any file.
 */
#ifndef STRATA_MERGE_H
#define STRATA_MERGE_H

#include <stdint.h>

struct merge_native {
	int eval;         /* an activation of the eval loop */
	int interpreter;  /* CPython's own code (eval included) */
	int hidden;       /* shown only with keep_interpreter: CPython's call
	                   * machinery (interp.h), every eval activation */
	int callsite;     /* an eval activation with code inlined where it called
	                   * out: with keep_interpreter, that code is placed under
	                   * the activation's Python frames (MERGE_CALLSITE) */
	int gc;           /* one of the garbage collector's entry functions
	                   * (interp.h): only merge_gc_under reads it */
};

enum merge_kind { MERGE_PY = 0, MERGE_NATIVE = 1, MERGE_CALLSITE = 2 };

struct merge_frame {
	uint8_t kind;     /* enum merge_kind */
	uint32_t index;   /* into the Python or the native input array (both
	                   * native kinds) */
};

struct merge_stats {
	uint32_t evals;       /* eval activations in the native stack */
	uint32_t chunks;      /* runs of Python frames (one per activation) */
	uint32_t unplaced;    /* chunks with no activation left: put at the root */
	uint32_t unplaced_at; /* where in out the first of those frames is (when unplaced > 0) */
	int mismatch;         /* chunks and activations disagree though unwinding completed */
};

/* Merges leaf-first inputs into out (room for npy + 2 * nnative frames),
 * leaf first. `pyflags[i]` holds the PYF_* flags of Python frame i;
 * `native_complete` says the native stack reached its outermost frame.
 * With nnative == 0 the Python frames are returned as they are. Returns
 * the number of frames stored. */
uint32_t merge_stack(const uint32_t *pyflags, uint32_t npy, const struct merge_native *nat, uint32_t nnative,
		     int native_complete, int keep_interpreter, struct merge_frame *out, struct merge_stats *st);

/* A sample taken while the garbage collector ran (STACK_GC) gets a "[gc]"
 * frame directly under the Python frame the collection started under:
 *  1. the frame marked PYF_GC, where the interpreter says which (3.15+);
 *  2. else the Python frame just outside the outermost native frame of the
 *     collector (nat[].gc), where the collector's functions have names
 *     (right even when a finalizer's Python frames run inside it);
 *  3. else the innermost Python frame.
 * out[0..m) is merge_stack's result; NULL means the Python frames alone,
 * leaf first (m == npy, no native frames). Returns the position in out of
 * that Python frame, or m when the stack has no Python frame ([gc] then
 * goes at the root). */
uint32_t merge_gc_under(const uint32_t *pyflags, const struct merge_frame *out, uint32_t m,
			const struct merge_native *nat);

/* Whether a function name is the eval loop or one of its split-off parts. */
int merge_is_eval_name(const char *name);

#endif
