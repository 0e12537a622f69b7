/*
 * test_merge.c — the merge of Python and native frames (merge.c) on
 * hand-built stacks whose true order is known.
 */
#include <stdio.h>
#include <string.h>

#include "../../src/common/format.h"
#include "../../src/lib/interp.h"
#include "../../src/lib/merge.h"

static int failures, checks;

#define CHECK(c)                                                                  \
	do {                                                                      \
		checks++;                                                         \
		if (!(c)) {                                                       \
			failures++;                                               \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
		}                                                                 \
	} while (0)

/* Renders a merged stack, leaf first, as "P0 N1 ..." */
static void render(char *buf, size_t n, const struct merge_frame *f, uint32_t k)
{
	buf[0] = 0;
	for (uint32_t i = 0; i < k; i++) {
		size_t l = strlen(buf);
		snprintf(buf + l, n - l, "%s%c%u", i ? " " : "", f[i].kind == MERGE_PY ? 'P' : f[i].kind == MERGE_NATIVE ? 'N' : 'S', f[i].index);
	}
}

static void run(const char *name, const uint32_t *py, uint32_t npy, const struct merge_native *nat, uint32_t nn,
		int complete, int keep, const char *want, int want_mismatch)
{
	struct merge_frame out[64];
	struct merge_stats st;
	uint32_t k = merge_stack(py, npy, nat, nn, complete, keep, out, &st);
	char got[512];
	render(got, sizeof(got), out, k);
	checks++;
	if (strcmp(got, want) || st.mismatch != want_mismatch) {
		failures++;
		fprintf(stderr, "%s: got \"%s\" (mismatch %d), want \"%s\" (mismatch %d)\n", name, got, st.mismatch,
			want, want_mismatch);
	}
}

#define E PYF_ENTRY
/* An eval activation; CPython's call machinery (hidden); a CPython
 * function doing a builtin's work (list_sort_impl: shown); other code. */
#define EVAL { 1, 1, 1, 0 }
#define EVAL_INLINED { 1, 1, 1, 1 } /* with code inlined where it called out */
#define INTERP { 0, 1, 1, 0 }
#define WORK { 0, 1, 0, 0 }
#define C { 0, 0, 0, 0 }
#define GCWORK { 0, 1, 0, 0, 1 } /* the garbage collector (gc_collect_main) */

int main(void)
{
	/* Python a -> b (inlined call, one activation) -> C ext f -> libm g.
	 * Native leaf first: g, f, PyObject_Call (interp), eval, main (interp), _start (C). */
	{
		uint32_t py[] = { 0, E };
		struct merge_native nat[] = { C, C, INTERP, EVAL, INTERP, C };
		run("py->c", py, 2, nat, 6, 1, 0, "N0 N1 P0 P1", 0);
		run("py->c keep", py, 2, nat, 6, 1, 1, "N0 N1 N2 P0 P1 N3 N4 N5", 0);
	}
	/* Python x -> C call_back -> Python cb (own activation) -> C leaf.
	 * Python frames leaf first: cb (entry), x (entry). */
	{
		uint32_t py[] = { E, E };
		struct merge_native nat[] = { C, INTERP, EVAL, INTERP, C, INTERP, EVAL, INTERP, C };
		run("callback", py, 2, nat, 9, 1, 0, "N0 P0 N4 P1", 0);
	}
	/* Sample in the eval loop itself: the leaf is the Python frame. */
	{
		uint32_t py[] = { 0, 0, E };
		struct merge_native nat[] = { EVAL, INTERP, C };
		run("in eval", py, 3, nat, 3, 1, 0, "P0 P1 P2", 0);
	}
	/* Unwinding failed after the first C frame: the Python frames go to
	 * the root, no mismatch is claimed. */
	{
		uint32_t py[] = { 0, E };
		struct merge_native nat[] = { C };
		run("failed", py, 2, nat, 1, 0, 0, "N0 P0 P1", 0);
	}
	/* Complete unwinding but an activation was not recognised: the rest
	 * of the Python frames go to the root, and the stack is flagged. */
	{
		uint32_t py[] = { E, E };
		struct merge_native nat[] = { C, EVAL, INTERP, C };
		run("mismatch", py, 2, nat, 4, 1, 0, "N0 P0 N3 P1", 1);
	}
	/* No native stack (not recorded, or an idle sample): Python only. */
	{
		uint32_t py[] = { 0, E };
		run("python only", py, 2, NULL, 0, 0, 0, "P0 P1", 0);
	}
	/* Pre-3.11: every Python frame has its own activation. */
	{
		uint32_t py[] = { E, E, E };
		struct merge_native nat[] = { C, EVAL, INTERP, EVAL, INTERP, EVAL, C };
		run("3.10", py, 3, nat, 7, 1, 0, "N0 P0 P1 P2", 0);
	}
	/* A thread that runs no Python: its native frames are all there is. */
	{
		struct merge_native nat[] = { C, C, C };
		run("native thread", NULL, 0, nat, 3, 1, 0, "N0 N1 N2", 0);
	}
	/* Interpreter start-up, no Python frame yet: malloc called by the
	 * interpreter, called from libc's start code, called by _start. Only
	 * what the interpreter called is shown. */
	{
		struct merge_native nat[] = { C, INTERP, INTERP, C, INTERP };
		run("start-up", NULL, 0, nat, 5, 1, 0, "N0", 0);
		run("start-up keep", NULL, 0, nat, 5, 1, 1, "N0 N1 N2 N3 N4", 0);
		struct merge_native gc[] = { INTERP, INTERP, C, INTERP };
		run("gc at exit", NULL, 0, gc, 4, 1, 0, "", 0);
	}
	/* sorted(key=f) whose key calls C: Python a -> builtin_sorted ->
	 * list_sort_impl (both CPython's work, shown) -> call machinery ->
	 * Python f -> C. Native leaf first: C, machinery, eval (f),
	 * machinery, list_sort_impl, builtin_sorted, machinery, eval (a). */
	{
		uint32_t py[] = { E, E };
		struct merge_native nat[] = { C, INTERP, EVAL, INTERP, WORK, WORK, INTERP, EVAL, INTERP, C };
		run("sorted key", py, 2, nat, 10, 1, 0, "N0 P0 N4 N5 P1", 0);
		run("sorted key keep", py, 2, nat, 10, 1, 1, "N0 N1 P0 N2 N3 N4 N5 N6 P1 N7 N8 N9", 0);
		/* In a stack without Python frames, CPython's own work does
		 * not count as the code the interpreter called. */
		struct merge_native gc[] = { C, WORK, INTERP, C };
		run("no python, work", NULL, 0, gc, 4, 1, 0, "N0", 0);
	}
	/* keep_interpreter: what the eval loop inlined where it called out
	 * (S) ran for the innermost Python frame of the activation: below it. */
	{
		uint32_t py[] = { 0, E };
		struct merge_native nat[] = { C, INTERP, EVAL_INLINED, C };
		run("eval call site keep", py, 2, nat, 4, 1, 1, "N0 N1 S2 P0 P1 N2 N3", 0);
		run("eval call site", py, 2, nat, 4, 1, 0, "N0 P0 P1", 0);
	}
	/* Where the frames the walk did not reach begin. */
	{
		uint32_t py[] = { E, 0, E };
		struct merge_native nat[] = { C, INTERP, EVAL, C };
		struct merge_frame out[16];
		struct merge_stats st;
		uint32_t k = merge_stack(py, 3, nat, 4, 0, 0, out, &st);
		/* C leaf, P0 (its activation), then the C frame, then P1 P2 unplaced. */
		CHECK(k == 5 && st.unplaced == 1 && st.unplaced_at == 3 && out[3].kind == MERGE_PY && out[3].index == 1);
	}
	CHECK(merge_is_eval_name("_PyEval_EvalFrameDefault"));
	CHECK(merge_is_eval_name("_PyEval_EvalFrameDefault.cold"));
	CHECK(!merge_is_eval_name("_PyEval_EvalFrameDefaultX"));
	CHECK(!merge_is_eval_name("PyEval_EvalFrame"));
	CHECK(!merge_is_eval_name(NULL));

	/* The interpreter policy: call machinery hidden, work shown. */
	static const char *const hidden[] = {
		"_PyEval_EvalFrameDefault", "_PyEval_EvalFrameDefault.cold", "PyObject_Vectorcall", "PyObject_Call",
		"_PyObject_MakeTpCall", "_PyFunction_Vectorcall", "method_vectorcall_FASTCALL_KEYWORDS",
		"cfunction_vectorcall_O", "cfunction_call", "slot_tp_call", "slot_nb_add", "wrap_binaryfunc_l",
		"wrapperdescr_call", "property_descr_get", "type_call", "list_vectorcall", "partial_vectorcall",
		"PyNumber_Add", "binary_op1", "_PyArg_UnpackKeywords", "vgetargskeywords", "Py_DECREF",
		"_PyObject_VectorcallTstate.constprop.0", "PyObject_Call.part.0.isra.0", "memcpy@plt",
		"cfunction_enter_call", "method_enter_call", "py_trampoline_evaluator", "PyObject_CallFinalizerFromDealloc",
	};
	static const char *const shown[] = {
		"sre_ucs1_match", "sre_search", "list_sort_impl", "unsafe_long_compare", "builtin_sorted",
		"map_next", "dict_subscript", "insertdict", "unicode_hash", "_PyObject_Malloc", "pymalloc_alloc.constprop.0",
		"gc_collect_main", "collect.constprop.1", "PyObject_Calloc", "_PyObject_Calloc", "PyObject_Callx",
		"slot", "wrap", "PyList_Sort", "long_add", "float_vectorcall_x",
	};
	for (size_t i = 0; i < sizeof(hidden) / sizeof(hidden[0]); i++)
		if (!interp_is_machinery(hidden[i])) {
			failures++;
			fprintf(stderr, "interp: %s is machinery\n", hidden[i]);
		}
	for (size_t i = 0; i < sizeof(shown) / sizeof(shown[0]); i++)
		if (interp_is_machinery(shown[i])) {
			failures++;
			fprintf(stderr, "interp: %s is not machinery\n", shown[i]);
		}
	checks += 2;
	CHECK(interp_is_machinery(NULL));

	/* Where "[gc]" goes (merge_gc_under). Python frames alone: under
	 * the innermost, or the one marked PYF_GC; none: at the root. */
	{
		const uint32_t py[] = { 0, E, E };
		CHECK(merge_gc_under(py, NULL, 3, NULL) == 0);
		const uint32_t marked[] = { E, E | PYF_GC, E };
		CHECK(merge_gc_under(marked, NULL, 3, NULL) == 1);
		CHECK(merge_gc_under(py, NULL, 0, NULL) == 0);
	}
	/* A line's allocation set the collector off (N5 runs P1, the line;
	 * N4 _PyObject_GC_Link; N3 gc_collect_main), which called a
	 * finalizer (N2 hidden slot_tp_finalize, N1 runs P0, __del__) that
	 * is in N0. Merged, leaf first: N0 P0 N3 N4 P1. [gc] goes under P1,
	 * the frame outside the collector; without the collector's names,
	 * under the innermost Python frame (P0); PYF_GC wins over both. */
	{
		const uint32_t py[] = { E, E };
		const struct merge_native nat[] = { WORK, EVAL, INTERP, GCWORK, WORK, EVAL, C };
		struct merge_frame out[32];
		uint32_t k = merge_stack(py, 2, nat, 7, 1, 0, out, NULL);
		char got[128];
		render(got, sizeof(got), out, k);
		CHECK(!strcmp(got, "N0 P0 N3 N4 P1"));
		CHECK(merge_gc_under(py, out, k, nat) == 4);
		const struct merge_native unnamed[] = { WORK, EVAL, INTERP, WORK, WORK, EVAL, C };
		CHECK(merge_gc_under(py, out, k, unnamed) == 1);
		const uint32_t marked[] = { E | PYF_GC, E };
		CHECK(merge_gc_under(marked, out, k, nat) == 1);
		/* The collector at shutdown, no Python frame: at the root. */
		k = merge_stack(py, 0, nat + 2, 5, 1, 0, out, NULL);
		CHECK(merge_gc_under(py, out, k, nat + 2) == k);
	}
	static const char *const gc_names[] = { "gc_collect_main", "collect.constprop.0", "_PyGC_Collect",
						"_Py_RunGC", "gc_collect", "PyGC_Collect", "gc_collect_region" };
	for (size_t i = 0; i < sizeof(gc_names) / sizeof(gc_names[0]); i++)
		CHECK(interp_is_gc(gc_names[i]));
	CHECK(!interp_is_gc("collections_exec") && !interp_is_gc("subtract_refs") && !interp_is_gc(NULL) &&
	      !interp_is_gc("gc_collect@plt") && !interp_is_gc("PyObject_GC_Del"));
	printf("test_merge: %d passed, %d failed\n", checks - failures, failures);
	return failures != 0;
}
