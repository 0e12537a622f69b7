/*
 * pylayout.c — whether this module reads the running interpreter right:
 * the members it reads, compared with the interpreter's own table of its
 * layout (3.13+, with offcheck.c), in this process (strata_py_build_check)
 * or in the reader's target; and, before 3.13, CPython's own answer for
 * the innermost frame, which the core compares a walk with (pymodule.c).
 * See py-internal.h.
 *
 * Separate from pyframes.c because it reads no frame: it names the
 * members the module reads (pyframes.c, pycode.c, gcstate.h) and checks
 * them once, before any other entry is used.
 */
#include "py-internal.h"

#include <string.h>
#include <unistd.h>

/* ===== layout check ==================================================== */

/*
 * The module is chosen by version number, and an interpreter with that
 * number may still lay out its structures otherwise: a free-threaded build
 * (3.13t-3.15t), a patch release that changed a layout within its minor
 * version (3.14.5 changed PyThreadState), a build with other configure
 * options (--with-pydebug, --with-trace-refs). From 3.13 on the running
 * interpreter publishes its own layout in _PyRuntime.debug_offsets (the
 * first member of _PyRuntimeState, for out-of-process tools); the module
 * compares every member it reads that the table covers with the offsetof()
 * it was compiled with, and refuses on any difference (offcheck.c).
 *
 * The list: each entry is a member the module reads, and why. Members the
 * module reads that CPython does not publish (_PyRuntime.interpreters.main,
 * .initialized, .autoTSSkey; co_flags, _co_firsttraceable; the frame's
 * f_back of 3.8-3.10) have no entry: they sit in the same structs as
 * published ones, whose neighbours are checked.
 */
#if PY_VERSION_HEX >= 0x030D0000
#include "offcheck.h"

#define OFFCHECK(sect, field, value) \
	{ #sect "." #field, (uint32_t)offsetof(_Py_DebugOffsets, sect.field), (uint64_t)(value) }

static const struct offcheck_field layout_fields[] = {
	/* runtime_finalizing(): the phase of samples without frames */
	OFFCHECK(runtime_state, finalizing, offsetof(_PyRuntimeState, _finalizing)),
	/* find_thread() (wall mode, the helper), 3.15's bound_tstate() */
	OFFCHECK(interpreter_state, threads_head, offsetof(PyInterpreterState, threads.head)),
	OFFCHECK(thread_state, next, offsetof(PyThreadState, next)),
	OFFCHECK(thread_state, thread_id, offsetof(PyThreadState, thread_id)),
	/* gc_candidate(), and 3.15's bound_tstate(): the GIL's holder
	 * (interp->ceval.gil points at interp->_gil in builds with a GIL, so
	 * locked and last_holder are checked where the table has them) */
	OFFCHECK(interpreter_state, ceval_gil, offsetof(PyInterpreterState, ceval.gil)),
	OFFCHECK(interpreter_state, gil_runtime_state, offsetof(PyInterpreterState, _gil)),
	OFFCHECK(interpreter_state, gil_runtime_state_locked, offsetof(PyInterpreterState, _gil.locked)),
	OFFCHECK(interpreter_state, gil_runtime_state_holder, offsetof(PyInterpreterState, _gil.last_holder)),
	/* gc_candidate(): the thread's interpreter, its collector's state */
	OFFCHECK(thread_state, interp, offsetof(PyThreadState, interp)),
	OFFCHECK(interpreter_state, gc, offsetof(PyInterpreterState, gc)),
	OFFCHECK(gc, collecting, offsetof(struct _gc_runtime_state, collecting)),
#if PY_VERSION_HEX >= 0x030F0000
	OFFCHECK(gc, frame, offsetof(struct _gc_runtime_state, frame)),
	/* 3.15's bound_tstate(): every interpreter, and holds_gil */
	OFFCHECK(runtime_state, interpreters_head, offsetof(_PyRuntimeState, interpreters.head)),
	OFFCHECK(interpreter_state, next, offsetof(PyInterpreterState, next)),
	OFFCHECK(thread_state, holds_gil, offsetof(PyThreadState, holds_gil)),
#endif
	/* walk_frames(): the chain, each frame's code object, its
	 * instruction and owner (shims, entry frames, generators) */
	OFFCHECK(thread_state, current_frame, offsetof(PyThreadState, current_frame)),
	OFFCHECK(interpreter_frame, previous, offsetof(_PyInterpreterFrame, previous)),
	OFFCHECK(interpreter_frame, executable, offsetof(_PyInterpreterFrame, f_executable)),
	OFFCHECK(interpreter_frame, instr_ptr, offsetof(_PyInterpreterFrame, instr_ptr)),
	OFFCHECK(interpreter_frame, owner, offsetof(_PyInterpreterFrame, owner)),
	/* TYPE_OF(): every type check */
	OFFCHECK(pyobject, ob_type, offsetof(PyObject, ob_type)),
	/* read_code_with(): copies sizeof(PyCodeObject) and reads these;
	 * _PyCode_CODE (co_code_adaptive) is where frame_lasti() and
	 * frame_skip() count instructions from */
	OFFCHECK(code_object, size, sizeof(PyCodeObject)),
	OFFCHECK(code_object, filename, offsetof(PyCodeObject, co_filename)),
	OFFCHECK(code_object, name, offsetof(PyCodeObject, co_name)),
	OFFCHECK(code_object, qualname, offsetof(PyCodeObject, co_qualname)),
	OFFCHECK(code_object, linetable, offsetof(PyCodeObject, co_linetable)),
	OFFCHECK(code_object, firstlineno, offsetof(PyCodeObject, co_firstlineno)),
	OFFCHECK(code_object, co_code_adaptive, offsetof(PyCodeObject, co_code_adaptive)),
	/* read_bytes(): the line table (ob_size is PyVarObject's, as the
	 * code object's own length frame_lasti() bounds by) */
	OFFCHECK(bytes_object, ob_size, offsetof(PyBytesObject, ob_base.ob_size)),
	OFFCHECK(bytes_object, ob_sval, offsetof(PyBytesObject, ob_sval)),
	/* read_str(): length and kind, the data after PyASCIIObject (ASCII)
	 * or PyCompactUnicodeObject, the whole PyUnicodeObject otherwise */
	OFFCHECK(unicode_object, size, sizeof(PyUnicodeObject)),
	OFFCHECK(unicode_object, state, offsetof(PyUnicodeObject, _base._base.state)),
	OFFCHECK(unicode_object, length, offsetof(PyUnicodeObject, _base._base.length)),
	OFFCHECK(unicode_object, asciiobject_size, sizeof(PyASCIIObject)),
#if PY_VERSION_HEX >= 0x030F0000
	OFFCHECK(unicode_object, compactunicodeobject_size, sizeof(PyCompactUnicodeObject)),
#endif
};

/* Compares the running interpreter's table (a copy) with the list. */
static int layout_check(const _Py_DebugOffsets *table, const char *exe, char *why, size_t n)
{
#ifdef Py_GIL_DISABLED
	const int built_ft = 1;
#else
	const int built_ft = 0;
#endif
	struct offcheck_build b = {
		.version_hex = PY_VERSION_HEX,
		.free_threaded = built_ft,
		.fields = layout_fields,
		.nfields = sizeof(layout_fields) / sizeof(layout_fields[0]),
	};
	return offcheck_run(&b, table, table ? sizeof(*table) : 0, exe, why, n);
}
#endif

#ifndef STRATA_REMOTE
/* ===== build check ==================================================== */

/*
 * strata_py_build_check — whether this module can read the running
 * interpreter (see "layout check" above). Returns 0 if so, else -1 with one
 * line for the user in `why` (without a "strata:" prefix). Called by the
 * core right after loading the module, before any other entry; it reads
 * only static data of the interpreter (_PyRuntime's initializer), so it
 * runs before Py_Initialize. Before 3.13 there is no table: the core checks
 * a module of another patch release on live frames instead (pymodule.c).
 */
__attribute__((visibility("default"))) int strata_py_build_check(char *why, size_t n)
{
#if PY_VERSION_HEX >= 0x030D0000
	char exe[4096];
	ssize_t el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[el > 0 ? el : 0] = 0;
	return layout_check(&_PyRuntime.debug_offsets, exe, why, n);
#else
	(void)why;
	(void)n;
	return 0;
#endif
}

/* ===== CPython's own frame (the check before 3.13) ===================== */

/* Only the C API and attribute lookups: right whatever the layout. */
int py_api_frame(struct strata_pyframe *out, char *name, size_t n)
{
	PyFrameObject *f = PyEval_GetFrame(); /* borrowed */
	if (!f)
		return -1;
	int rc = -1;
	PyObject *et, *ev, *tb;
	PyErr_Fetch(&et, &ev, &tb);
	PyObject *co = PyObject_GetAttrString((PyObject *)f, "f_code");
	PyObject *lasti = PyObject_GetAttrString((PyObject *)f, "f_lasti");
	PyObject *first = co ? PyObject_GetAttrString(co, "co_firstlineno") : NULL;
	PyObject *nm = co ? PyObject_GetAttrString(co, "co_name") : NULL;
	const char *u = nm && PyUnicode_Check(nm) ? PyUnicode_AsUTF8(nm) : NULL;
	if (co && lasti && first && u) {
		/* f_lasti counts bytes on every version (-1: none yet). */
		long l = PyLong_AsLong(lasti);
		out->code = (uint64_t)(uintptr_t)co; /* the frame keeps it alive */
		out->lasti = l < 0 ? -1 : (int32_t)(l / 2);
		out->first = (uint16_t)PyLong_AsLong(first);
		out->flags = 0;
		snprintf(name, n, "%s", u);
		rc = 0;
	}
	Py_XDECREF(nm);
	Py_XDECREF(first);
	Py_XDECREF(lasti);
	Py_XDECREF(co);
	PyErr_Clear();
	PyErr_Restore(et, ev, tb);
	return rc;
}
#else /* STRATA_REMOTE */

/* As strata_py_build_check, on the target's own table: read from the
 * start of its _PyRuntime, where every 3.13+ interpreter keeps it. */
int rp_check(const char *exe, char *why, size_t n)
{
#if PY_VERSION_HEX >= 0x030D0000
	_Py_DebugOffsets table;
	uint64_t at = RENV.syms.runtime + offsetof(_PyRuntimeState, debug_offsets);
	if (RENV.read(RENV.ctx, &table, at, sizeof(table))) {
		snprintf(why, n, "cannot read the interpreter's _PyRuntime at 0x%llx to check its layout; "
			 "this process is not profiled", (unsigned long long)at);
		return -1;
	}
	return layout_check(&table, exe, why, n);
#else
	(void)exe;
	(void)why;
	(void)n;
	return 0;
#endif
}
#endif
