/*
 * pyframes.c — the per-Python-version half of the agent (see pyapi.h).
 *
 * Compiled against each interpreter's own internal headers (Py_BUILD_CORE),
 * twice:
 *   strata-py-X.Y.Z.so        loaded into the profiled process: finds the
 *                             calling thread's PyThreadState, walks its
 *                             frames in the signal handler, hooks code
 *                             object deaths, names threads;
 *   strata-pyreader-X.Y.Z.so  (STRATA_REMOTE) reads another process's
 *                             interpreter: frames of a given thread state,
 *                             code objects, strings, line tables. Used by
 *                             the agent's helper and by `strata stack`.
 * Every load from interpreter memory is written LD(lvalue): a plain load in
 * the first build (the signal handler's fault guard catches a bad pointer),
 * a checked read of the target in the second (a failed read abandons the
 * call). So the logic that understands a version's layout exists once.
 *
 * Version differences are kept to the small accessor section below; the
 * walking and reading logic after it is shared. docs/versions.md has the
 * per-version table.
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <frameobject.h>

#include <internal/pycore_pystate.h>
#if PY_VERSION_HEX >= 0x03090000
/* 3.8 keeps _PyRuntimeState and PyInterpreterState in pycore_pystate.h. */
#include <internal/pycore_runtime.h>
#include <internal/pycore_interp.h>
#endif
#if PY_VERSION_HEX >= 0x030B0000
#include <internal/pycore_code.h>
#include <internal/pycore_frame.h>
#endif
#if PY_VERSION_HEX >= 0x030E0000
/* 3.14 moved _PyInterpreterFrame into pycore_interpframe_structs.h (with
 * pycore_interpframe.h for its helpers and pycore_stackref.h for the
 * tagged references it holds); 3.15 finds the calling thread's state
 * through the GIL and the thread list (pycore_gil.h). */
#include <internal/pycore_interpframe.h>
#include <internal/pycore_gil.h>
#include <internal/pycore_ceval.h>   /* _PY_EVAL_PLEASE_STOP_BIT, Py_SUPPORTS_REMOTE_DEBUG (PEP 768) */
#endif

#include <pthread.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pyapi.h"
#include "common/format.h"
#include "srcqual.h"
#include "pyobjects.h"

/* ===== reading interpreter memory ======================================= */

#ifdef STRATA_REMOTE
static struct strata_remote env;

/* A few recently read blocks of the target: the fields of one struct are
 * read one by one, and each read is a system call. The cache lives for one
 * call into the reader (remote_begin), so nothing stale is ever used. */
#define RC_BLOCK 256u
#define RC_WAYS 8
static struct {
	uint64_t addr[RC_WAYS];
	uint8_t data[RC_WAYS][RC_BLOCK];
	unsigned next;
} rc;
static jmp_buf remote_fail;

static void remote_begin(void)
{
	for (unsigned i = 0; i < RC_WAYS; i++)
		rc.addr[i] = UINT64_MAX;
}

static const uint8_t *rc_block(uint64_t base)
{
	for (unsigned i = 0; i < RC_WAYS; i++)
		if (rc.addr[i] == base)
			return rc.data[i];
	unsigned w = rc.next++ % RC_WAYS;
	if (env.read(env.ctx, rc.data[w], base, RC_BLOCK)) {
		/* A block straddling the end of a mapping: read exactly. */
		rc.addr[w] = UINT64_MAX;
		return NULL;
	}
	rc.addr[w] = base;
	return rc.data[w];
}

/* Copies n bytes of the target at src, or longjmps to remote_fail. */
static void remote_load(void *dst, const void *src, size_t n)
{
	uint64_t a = (uint64_t)(uintptr_t)src;
	uint64_t base = a & ~(uint64_t)(RC_BLOCK - 1);
	if (a + n <= base + RC_BLOCK) {
		const uint8_t *b = rc_block(base);
		if (b) {
			memcpy(dst, b + (a - base), n);
			return;
		}
	}
	if (env.read(env.ctx, dst, a, n))
		longjmp(remote_fail, 1);
}

#define LD(lv) ({ __typeof__(lv) ld_v_; remote_load(&ld_v_, &(lv), sizeof(ld_v_)); ld_v_; })
#define RUNTIME ((_PyRuntimeState *)(uintptr_t)env.syms.runtime)
#define T_CODE ((PyTypeObject *)(uintptr_t)env.syms.code_type)
#define T_FRAME ((PyTypeObject *)(uintptr_t)env.syms.frame_type)
#define T_UNICODE ((PyTypeObject *)(uintptr_t)env.syms.unicode_type)
#define T_BYTES ((PyTypeObject *)(uintptr_t)env.syms.bytes_type)
#else
static const struct strata_core *core;
#define LD(lv) (lv)
#define RUNTIME (&_PyRuntime)
#define T_CODE (&PyCode_Type)
#define T_FRAME (&PyFrame_Type)
#define T_UNICODE (&PyUnicode_Type)
#define T_BYTES (&PyBytes_Type)
#endif
/* An object's type, through LD. */
#define TYPE_OF(o) LD(((PyObject *)(o))->ob_type)

/* ===== version accessors ============================================== */

/*
 * Every version provides:
 *   LINETABLE_FMT        the LT_* id of CODE_LINETABLE's bytes
 *   tss_ready/tss_key    the pthread key CPython binds each thread's
 *                        PyThreadState to (see py_current_tstate; in-process);
 *                        3.15 has no such key and provides instead:
 *   tstate_ready()       whether thread states can be looked up yet
 *   bound_tstate()       (handler) the calling thread's PyThreadState
 *   bound_tstate_gil()   (gil) the same, where the C API may be called
 *   pyframe_t, first_frame, frame_prev
 *   frame_shim(f)        1 for a frame that is not Python code at all (the
 *                        C-stack entry frames of 3.12+): skipped
 *   frame_code(f)        the frame's code object, or NULL if the frame runs
 *                        something else (3.13+: f_executable may be None)
 *   frame_skip(f, co)    1 for a frame still being set up, hidden exactly as
 *                        CPython's own tracebacks and sys._getframe hide it
 *   frame_is_entry(f)    1 if one C-level eval activation starts at f
 *   frame_lasti(f, co)   the current instruction in 2-byte code units, -1
 *                        if none has run yet (same meaning on every version)
 *   interp_threads(i)    head of the interpreter's PyThreadState list
 *   runtime_finalizing() whether Py_FinalizeEx has started
 *   gil_holder()         the PyThreadState of the thread holding the GIL
 *                        (3.12+: of this thread, if it holds the GIL;
 *                        in-process only)
 * Every read of the interpreter's memory goes through LD().
 */

#if PY_VERSION_HEX >= 0x03080000 && PY_VERSION_HEX < 0x030B0000
/* 3.8-3.10: PyFrameObject chain from tstate->frame. Each Python frame is
 * run by its own _PyEval_EvalFrameDefault activation, so every frame is an
 * entry frame. f_lasti is the offset of the current instruction (the one
 * being executed, or the last one started), -1 before the first. */
#if PY_VERSION_HEX < 0x030A0000
#define LINETABLE_FMT LT_LNOTAB
#define CODE_LINETABLE(co) ((co)->co_lnotab)
#define LASTI_BYTES 1 /* 3.8, 3.9: f_lasti counts bytes */
#else
#define LINETABLE_FMT LT_LINETABLE
#define CODE_LINETABLE(co) ((co)->co_linetable)
#define LASTI_BYTES 0 /* 3.10: f_lasti counts code units */
#endif
/* No co_qualname before 3.11: see srcqual.h. */
#define CODE_QUALNAME(co) ((PyObject *)NULL)
typedef PyFrameObject pyframe_t;

#ifndef STRATA_REMOTE
static int tss_ready(void) { return _PyRuntime.gilstate.autoTSSkey._is_initialized; }
static pthread_key_t tss_key(void) { return _PyRuntime.gilstate.autoTSSkey._key; }
#endif

static pyframe_t *first_frame(PyThreadState *ts)
{
	pyframe_t *f = LD(ts->frame);
	/* Frames are heap objects: a type check catches a stale pointer. */
	return f && TYPE_OF(f) == T_FRAME ? f : NULL;
}
static pyframe_t *frame_prev(pyframe_t *f)
{
	pyframe_t *b = LD(f->f_back);
	return b && TYPE_OF(b) == T_FRAME ? b : NULL;
}
static int frame_shim(pyframe_t *f) { return 0; }
static PyCodeObject *frame_code(pyframe_t *f) { return LD(f->f_code); }
static int frame_skip(pyframe_t *f, PyCodeObject *co) { return 0; }
static int frame_is_entry(pyframe_t *f) { return 1; }
static int32_t frame_lasti(pyframe_t *f, PyCodeObject *co)
{
	int l = LD(f->f_lasti);
	if (l < 0)
		return -1;
	Py_ssize_t units = LASTI_BYTES ? l / 2 : l;
	/* The code's length bounds a sane offset. */
	PyObject *bytes = LD(co->co_code);
	if (units * 2 >= LD(((PyVarObject *)bytes)->ob_size))
		return -1;
	return (int32_t)units;
}
static PyThreadState *interp_threads(PyInterpreterState *i) { return LD(i->tstate_head); }
#if PY_VERSION_HEX < 0x03090000
static int runtime_finalizing(void) { return LD(RUNTIME->finalizing) != NULL; }
#else
static int runtime_finalizing(void) { return LD(RUNTIME->_finalizing._value) != 0; }
#endif
#ifndef STRATA_REMOTE
static PyThreadState *gil_holder(void) { return _PyRuntimeState_GetThreadState(&_PyRuntime); }
#endif

#elif PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000
/* 3.11-3.13: _PyInterpreterFrame chain. One eval activation runs many
 * Python frames (calls between Python functions are inlined), so the entry
 * frame, where an activation starts, has to be marked:
 *   3.11: the frame's own is_entry flag;
 *   3.12, 3.13: _PyEval_EvalFrameDefault pushes a shim frame owned by
 *   FRAME_OWNED_BY_CSTACK before the first real frame of the activation;
 *   the frame whose `previous` is a shim is the entry frame. */
#define LINETABLE_FMT LT_LOCATIONS
#define CODE_LINETABLE(co) ((co)->co_linetable)
#define CODE_QUALNAME(co) ((co)->co_qualname)
typedef _PyInterpreterFrame pyframe_t;

#ifndef STRATA_REMOTE
#if PY_VERSION_HEX < 0x030C0000
static int tss_ready(void) { return _PyRuntime.gilstate.autoTSSkey._is_initialized; }
static pthread_key_t tss_key(void) { return _PyRuntime.gilstate.autoTSSkey._key; }
#else
/* 3.12 moved the key out of gilstate into _PyRuntime itself. */
static int tss_ready(void) { return _PyRuntime.autoTSSkey._is_initialized; }
static pthread_key_t tss_key(void) { return _PyRuntime.autoTSSkey._key; }
#endif
#endif

#if PY_VERSION_HEX < 0x030D0000
static pyframe_t *first_frame(PyThreadState *ts)
{
	_PyCFrame *cf = LD(ts->cframe);
	return cf ? LD(cf->current_frame) : NULL;
}
#else
/* 3.13 dropped _PyCFrame: the current frame hangs off the tstate. */
static pyframe_t *first_frame(PyThreadState *ts) { return LD(ts->current_frame); }
#endif
static pyframe_t *frame_prev(pyframe_t *f) { return LD(f->previous); }

#if PY_VERSION_HEX < 0x030C0000
static int frame_shim(pyframe_t *f) { return 0; }
static int frame_is_entry(pyframe_t *f) { return LD(f->is_entry); }
#else
static int frame_shim(pyframe_t *f) { return LD(f->owner) == FRAME_OWNED_BY_CSTACK; }
static int frame_is_entry(pyframe_t *f)
{
	pyframe_t *p = LD(f->previous);
	return p && LD(p->owner) == FRAME_OWNED_BY_CSTACK;
}
#endif

#if PY_VERSION_HEX < 0x030D0000
#define FRAME_IP(f) ((f)->prev_instr)
static PyCodeObject *frame_code(pyframe_t *f) { return LD(f->f_code); }
#else
/* 3.13: instr_ptr is the instruction currently executing (or about to),
 * which is what 3.11/3.12 keep in prev_instr; the interpreter computes a
 * frame's line from it the same way (_PyInterpreterFrame_LASTI). */
#define FRAME_IP(f) ((f)->instr_ptr)
static PyCodeObject *frame_code(pyframe_t *f)
{
	PyObject *x = LD(f->f_executable);
	return x && TYPE_OF(x) == T_CODE ? (PyCodeObject *)x : NULL;
}
#endif
/* CPython's _PyFrame_IsIncomplete: a frame that has not reached its first
 * traceable instruction (still copying free variables, making cells) is
 * not shown. In 3.13 this also hides the __init__ cleanup trampoline
 * (_Py_InitCleanup), whose first traceable instruction is past its end. */
static int frame_skip(pyframe_t *f, PyCodeObject *co)
{
	return LD(f->owner) != FRAME_OWNED_BY_GENERATOR &&
	       LD(FRAME_IP(f)) < _PyCode_CODE(co) + LD(co->_co_firsttraceable);
}
static int32_t frame_lasti(pyframe_t *f, PyCodeObject *co)
{
	intptr_t d = (intptr_t)((char *)LD(FRAME_IP(f)) - (char *)_PyCode_CODE(co));
	d /= (intptr_t)sizeof(_Py_CODEUNIT);
	return d < 0 || d >= LD(co->ob_base.ob_size) ? -1 : (int32_t)d;
}
static PyThreadState *interp_threads(PyInterpreterState *i) { return LD(i->threads.head); }
#if PY_VERSION_HEX < 0x030D0000
static int runtime_finalizing(void) { return LD(RUNTIME->_finalizing._value) != 0; }
#else
static int runtime_finalizing(void) { return LD(RUNTIME->_finalizing) != NULL; }
#endif
#ifndef STRATA_REMOTE
#if PY_VERSION_HEX < 0x030C0000
static PyThreadState *gil_holder(void) { return _PyRuntimeState_GetThreadState(&_PyRuntime); }
#else
/* The calling thread's attached state (3.13 renamed it PyThreadState_GetUnchecked
 * and kept the old name as a macro): attached means holding the GIL. */
static PyThreadState *gil_holder(void) { return _PyThreadState_UncheckedGet(); }
#endif
#endif

#elif PY_VERSION_HEX >= 0x030E0000 && PY_VERSION_HEX < 0x03100000
/* 3.14, 3.15: the _PyInterpreterFrame chain from tstate->current_frame, as
 * on 3.13, with three differences:
 *   - f_executable (and f_funcobj) are _PyStackRef, a tagged pointer: the
 *     low bits say how the reference is counted (Py_TAG_REFCNT, bit 0, on
 *     a deferred or immortal reference; both low bits set, Py_INT_TAG,
 *     on a tagged integer, which f_executable never holds). The object is
 *     the value with Py_TAG_BITS cleared (PyStackRef_AsPyObjectBorrow).
 *   - The frame _PyEval_EvalFrameDefault pushes below the first real frame
 *     of each activation (_PyEntryFrame) is owned by
 *     FRAME_OWNED_BY_INTERPRETER (3). FRAME_OWNED_BY_CSTACK still exists
 *     in 3.14's enum (renumbered to 4) but no frame is given that owner any
 *     more, and 3.15 removed it: CPython's own _PyFrame_IsIncomplete tests
 *     owner >= FRAME_OWNED_BY_INTERPRETER, and so does this walk. 3.15
 *     also ends every thread's chain with a base frame embedded in the
 *     thread state (tstate->base_frame, for remote profilers to know a
 *     walk is complete); it runs no code object and is skipped likewise.
 *   - 3.15 has no pthread key for the thread state (below).
 * The bytecode a frame runs is _PyCode_CODE(co) in builds with a GIL;
 * free-threaded builds give each thread its own copy (co_tlbc), which this
 * module does not read: see strata_py_build_check. */
#define LINETABLE_FMT LT_LOCATIONS
#define CODE_LINETABLE(co) ((co)->co_linetable)
#define CODE_QUALNAME(co) ((co)->co_qualname)
typedef _PyInterpreterFrame pyframe_t;

static pyframe_t *first_frame(PyThreadState *ts) { return LD(ts->current_frame); }
static pyframe_t *frame_prev(pyframe_t *f) { return LD(f->previous); }
static int frame_shim(pyframe_t *f) { return LD(f->owner) >= FRAME_OWNED_BY_INTERPRETER; }
static int frame_is_entry(pyframe_t *f)
{
	pyframe_t *p = LD(f->previous);
	return p && LD(p->owner) >= FRAME_OWNED_BY_INTERPRETER;
}
#define FRAME_IP(f) ((f)->instr_ptr)
static PyCodeObject *frame_code(pyframe_t *f)
{
	uintptr_t bits = LD(f->f_executable.bits);
	if ((bits & Py_INT_TAG) == Py_INT_TAG)
		return NULL; /* a tagged integer: not an object (torn frame) */
	PyObject *x = (PyObject *)(bits & ~(uintptr_t)Py_TAG_BITS);
	return x && TYPE_OF(x) == T_CODE ? (PyCodeObject *)x : NULL;
}
/* _PyFrame_IsIncomplete, as on 3.11-3.13 (the __init__ cleanup trampoline
 * is again hidden by its _co_firsttraceable). */
static int frame_skip(pyframe_t *f, PyCodeObject *co)
{
	return LD(f->owner) != FRAME_OWNED_BY_GENERATOR &&
	       LD(FRAME_IP(f)) < _PyCode_CODE(co) + LD(co->_co_firsttraceable);
}
static int32_t frame_lasti(pyframe_t *f, PyCodeObject *co)
{
	intptr_t d = (intptr_t)((char *)LD(FRAME_IP(f)) - (char *)_PyCode_CODE(co));
	d /= (intptr_t)sizeof(_Py_CODEUNIT);
	return d < 0 || d >= LD(co->ob_base.ob_size) ? -1 : (int32_t)d;
}
static PyThreadState *interp_threads(PyInterpreterState *i) { return LD(i->threads.head); }
static int runtime_finalizing(void) { return LD(RUNTIME->_finalizing) != NULL; }

#ifndef STRATA_REMOTE
static PyThreadState *gil_holder(void) { return PyThreadState_GetUnchecked(); }
#if PY_VERSION_HEX < 0x030F0000
static int tss_ready(void) { return _PyRuntime.autoTSSkey._is_initialized; }
static pthread_key_t tss_key(void) { return _PyRuntime.autoTSSkey._key; }
#else
/* 3.15 dropped _PyRuntime.autoTSSkey: the thread state bound to a thread
 * (the "gilstate" PyGILState_Ensure uses) lives only in a C thread-local
 * of libpython (_Py_tss_gilstate), which is not exported and which a
 * dlopen'ed module could only reach through __tls_get_addr (not safe in a
 * signal handler). A thread state records the thread it belongs to
 * (thread_id, the pthread id), so the handler finds its own there:
 *   - first the GIL's last holder, which is the sampled thread's state
 *     whenever it is running Python. Its holds_gil must be set: take_gil
 *     sets it once the GIL is ours and drop_gil clears it before the GIL
 *     is let go, so a state of this thread that was deleted since
 *     (PyGILState_Release in a C thread) and still is the last holder is
 *     not taken for a live one;
 *   - else every interpreter's thread list: plain loads under the fault
 *     guard, bounded; a state is unlinked before it is freed, and only by
 *     its own thread or at shutdown, so this thread never meets its own
 *     state freed. */
#define TSTATE_SCAN_MAX 10000
static int tstate_ready(void) { return _PyRuntime.interpreters.main != NULL; }
static PyThreadState *bound_tstate(void)
{
	unsigned long me = (unsigned long)pthread_self();
	int steps = 0;
	for (PyInterpreterState *i = _PyRuntime.interpreters.head; i && steps < TSTATE_SCAN_MAX; i = i->next, steps++) {
		struct _gil_runtime_state *gil = i->ceval.gil;
		PyThreadState *h = gil ? gil->last_holder : NULL;
		if (h && h->thread_id == me && h->holds_gil)
			return h;
		for (PyThreadState *ts = interp_threads(i); ts && steps < TSTATE_SCAN_MAX; ts = ts->next, steps++)
			if (ts->thread_id == me)
				return ts;
	}
	return NULL;
}
/* With the GIL context's freedom to call the C API, the bound state is
 * what CPython itself answers (a plain read of _Py_tss_gilstate). */
static PyThreadState *bound_tstate_gil(void) { return PyGILState_GetThisThreadState(); }
#endif
#endif

#else
#error "strata: no frame accessors for this Python version (see src/py/pyframes.c)"
#endif

#if !defined(STRATA_REMOTE) && PY_VERSION_HEX < 0x030F0000
/* 3.8-3.14: the thread state bound to a thread is the value of CPython's
 * pthread key for it (see py_current_tstate). */
static int tstate_ready(void) { return tss_ready(); }
static PyThreadState *bound_tstate(void) { return pthread_getspecific(tss_key()); }
#define bound_tstate_gil bound_tstate
#endif

#include "gcstate.h"

/* ===== frames ========================================================== */

static int py_phase(void)
{
	if (runtime_finalizing())
		return STRATA_PHASE_FINALIZING;
	return LD(RUNTIME->initialized) ? STRATA_PHASE_RUNNING : STRATA_PHASE_UNINITIALIZED;
}

/* Bound on frames counted past the depth cap; walking stops there so a
 * corrupt (cyclic) chain cannot keep the handler busy. */
#define MISSING_COUNT_MAX 100000

/* Walks the frames of ts, leaf first. With gc non-NULL, *gc says whether
 * ts's thread is running the garbage collector (gcstate.h); where the
 * interpreter names the frame the collection started under (3.15+), that
 * frame (or the first one shown outside it) carries PYF_GC. */
static int walk_frames(PyThreadState *ts, struct strata_pyframe *out, int max, uint32_t *missing, int *gc)
{
	int n = 0;
	uint32_t extra = 0;
	*missing = 0;
	if (gc)
		*gc = 0;
	if (!ts)
		return 0;
	pyframe_t *gc_start = NULL;
	int collecting = gc && gc_candidate(ts, &gc_start), met = 0, mark = 0;
	/* Every step counts against the bound, shown or not, so that a
	 * corrupt chain that loops through skipped frames still ends. */
	long steps = (long)max + MISSING_COUNT_MAX;
	for (pyframe_t *f = first_frame(ts); f && steps > 0; f = frame_prev(f), steps--) {
		if (gc_start && f == gc_start)
			met = mark = 1;
		if (frame_shim(f))
			continue;
		PyCodeObject *co = frame_code(f);
		if (!co) {
			/* 3.13: a frame running something other than a code
			 * object has no line to show; the chain goes on. */
			if (PY_VERSION_HEX >= 0x030D0000)
				continue;
			break;
		}
		if (TYPE_OF(co) != T_CODE)
			break; /* torn or stale: stop rather than guess */
		if (frame_skip(f, co))
			continue;
		if (n < max) {
			out[n].code = (uint64_t)(uintptr_t)co;
			out[n].lasti = frame_lasti(f, co);
			out[n].first = (uint16_t)LD(co->co_firstlineno);
			out[n].flags = (frame_is_entry(f) ? PYF_ENTRY : 0) | (mark ? PYF_GC : 0);
			mark = 0;
			n++;
		} else if (++extra >= MISSING_COUNT_MAX) {
			break;
		}
	}
	*missing = extra;
	if (gc_start && !met) {
		/* Another thread's collection (this one holds the GIL while
		 * a finalizer of it has let the GIL go). */
		collecting = 0;
	}
	if (gc)
		*gc = collecting;
	return n;
}

static PyThreadState *find_thread(unsigned long pthread_id)
{
	PyInterpreterState *interp = LD(RUNTIME->interpreters.main);
	if (!interp)
		return NULL;
	int guard = 0;
	for (PyThreadState *ts = interp_threads(interp); ts && guard < 10000; ts = LD(ts->next), guard++)
		if (LD(ts->thread_id) == pthread_id)
			return ts;
	return NULL;
}

#ifdef STRATA_REMOTE
static int list_threads(struct strata_pythread *out, int max)
{
	PyInterpreterState *interp = LD(RUNTIME->interpreters.main);
	if (!interp)
		return 0;
	PyThreadState *holder = gil_owner(interp);
	int n = 0, guard = 0;
	for (PyThreadState *ts = interp_threads(interp); ts && n < max && guard < 10000; ts = LD(ts->next), guard++) {
		out[n].tstate = (uint64_t)(uintptr_t)ts;
		out[n].thread_id = (uint64_t)LD(ts->thread_id);
#if PY_VERSION_HEX >= 0x030B0000
		out[n].native_id = (uint32_t)LD(ts->native_thread_id);
#else
		out[n].native_id = 0;
#endif
		out[n].holds_gil = ts == holder;
		n++;
	}
	return n;
}
#endif

#ifndef STRATA_REMOTE
/* ===== handler context (in-process) ===================================== */

static int py_ready(void) { return tstate_ready(); }

static void *py_current_tstate(void)
{
	if (!tstate_ready())
		return NULL;
	/* CPython binds every thread's PyThreadState to this key when the
	 * thread starts running Python, and it stays bound while the thread
	 * releases the GIL (a thread in a long C call still has its Python
	 * frames). glibc's pthread_getspecific is a plain array load (no
	 * locks, no allocation), so it is safe in a signal handler.
	 * Not used, and why: gilstate.tstate_current (3.8-3.11) is the GIL
	 * holder, not the interrupted thread; 3.12+'s _Py_tss_tstate is not
	 * exported, is NULL while the thread has released the GIL, and a
	 * dlopen'ed module reaches another module's TLS through
	 * __tls_get_addr, which may allocate. 3.15 has no key: see its
	 * bound_tstate(). */
	return bound_tstate();
}

static int py_walk(void *tstate, struct strata_pyframe *out, int max, uint32_t *missing, int *gc)
{
	return walk_frames(tstate, out, max, missing, gc);
}

static void *py_find_tstate(unsigned long pthread_id) { return find_thread(pthread_id); }
#endif

/* ===== code objects ==================================================== */

#define MAX_STR_CHARS 4096
#define MAX_LINETABLE (1u << 20)

/* Code objects are read whole through a reader: the fault-proof one
 * (safe_read in-process, or the target's memory from outside), or, in the
 * deallocation hook, which runs with the GIL on an object that is still
 * alive, directly. */
typedef int (*reader_fn)(void *dst, const void *src, size_t n);

static int rd_safe(void *dst, const void *src, size_t n)
{
#ifdef STRATA_REMOTE
	return env.read(env.ctx, dst, (uint64_t)(uintptr_t)src, n);
#else
	return core->safe_read(dst, (uint64_t)(uintptr_t)src, n);
#endif
}

#ifndef STRATA_REMOTE
static int rd_direct(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
	return 0;
}
#endif

/* Appends the UTF-8 encoding of code point c. */
static size_t utf8_put(char *o, uint32_t c)
{
	if (c < 0x80) {
		o[0] = (char)c;
		return 1;
	}
	if (c < 0x800) {
		o[0] = (char)(0xC0 | c >> 6);
		o[1] = (char)(0x80 | (c & 0x3F));
		return 2;
	}
	if (c < 0x10000) {
		o[0] = (char)(0xE0 | c >> 12);
		o[1] = (char)(0x80 | (c >> 6 & 0x3F));
		o[2] = (char)(0x80 | (c & 0x3F));
		return 3;
	}
	o[0] = (char)(0xF0 | c >> 18);
	o[1] = (char)(0x80 | (c >> 12 & 0x3F));
	o[2] = (char)(0x80 | (c >> 6 & 0x3F));
	o[3] = (char)(0x80 | (c & 0x3F));
	return 4;
}

/* Reads a str object of the target into a new UTF-8 string. */
static char *read_str(reader_fn rd, PyObject *addr)
{
	PyCompactUnicodeObject u;
	PyTypeObject *tp;
	if (!addr || rd(&tp, &addr->ob_type, sizeof(tp)) || tp != T_UNICODE)
		return NULL;
	if (rd(&u, addr, sizeof(u)))
		return NULL;
	Py_ssize_t len = u._base.length;
	if (len < 0 || len > MAX_STR_CHARS)
		return NULL;
	unsigned kind = u._base.state.kind;
	const void *data;
	if (u._base.state.compact)
		data = u._base.state.ascii ? (const char *)addr + sizeof(PyASCIIObject)
					   : (const char *)addr + sizeof(PyCompactUnicodeObject);
	else {
		PyUnicodeObject full;
		if (rd(&full, addr, sizeof(full)))
			return NULL;
		data = full.data.any;
	}
	if (kind != 1 && kind != 2 && kind != 4)
		return NULL;
	size_t bytes = (size_t)len * kind;
	uint8_t *raw = malloc(bytes + 1);
	char *s = malloc((size_t)len * 4 + 1);
	if (!raw || !s || (bytes && rd(raw, data, bytes))) {
		free(raw);
		free(s);
		return NULL;
	}
	size_t o = 0;
	for (Py_ssize_t i = 0; i < len; i++) {
		uint32_t c = kind == 1 ? raw[i] : kind == 2 ? ((uint16_t *)raw)[i] : ((uint32_t *)raw)[i];
		if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
			c = 0xFFFD; /* lone surrogates are not UTF-8 */
		o += utf8_put(s + o, c);
	}
	s[o] = 0;
	free(raw);
	return s;
}

static uint8_t *read_bytes(reader_fn rd, PyObject *addr, size_t *len)
{
	PyBytesObject b;
	PyTypeObject *tp;
	*len = 0;
	if (!addr || rd(&tp, &addr->ob_type, sizeof(tp)) || tp != T_BYTES)
		return NULL;
	if (rd(&b, addr, offsetof(PyBytesObject, ob_sval)))
		return NULL;
	Py_ssize_t n = b.ob_base.ob_size;
	if (n < 0 || (size_t)n > MAX_LINETABLE)
		return NULL;
	uint8_t *p = malloc((size_t)n + 1);
	if (!p || (n && rd(p, (const char *)addr + offsetof(PyBytesObject, ob_sval), (size_t)n))) {
		free(p);
		return NULL;
	}
	*len = (size_t)n;
	return p;
}

static int read_code_with(reader_fn rd, uint64_t addr, struct strata_codeinfo *out)
{
	PyCodeObject co;
	memset(out, 0, sizeof(*out));
	if (rd(&co, (void *)(uintptr_t)addr, sizeof(co)) || ((PyObject *)&co)->ob_type != T_CODE)
		return -1;
	out->firstlineno = co.co_firstlineno > 0 ? (uint32_t)co.co_firstlineno : 0;
	out->flags = (uint32_t)co.co_flags;
	out->filename = read_str(rd, co.co_filename);
	out->name = read_str(rd, co.co_name);
	out->qualname = read_str(rd, CODE_QUALNAME(&co));
	out->linetable = read_bytes(rd, CODE_LINETABLE(&co), &out->linetable_len);
	if (!out->filename || !out->name) {
		free(out->filename);
		free(out->name);
		free(out->qualname);
		free(out->linetable);
		memset(out, 0, sizeof(*out));
		return -1;
	}
	return 0;
}

/* Before 3.11 there is no co_qualname: rebuild it from the source, reading
 * the file if need be (writer) or only if already cached (the deallocation
 * hook, which must not do I/O while it holds the GIL). */
static void fill_qualname(struct strata_codeinfo *ci, int allow_io)
{
	if (PY_VERSION_HEX < 0x030B0000 && !ci->qualname)
		ci->qualname = srcqual_lookup(ci->filename, ci->firstlineno, ci->name, allow_io);
}

static int py_read_code(uint64_t addr, struct strata_codeinfo *out)
{
	int rc = read_code_with(rd_safe, addr, out);
	if (rc == 0)
		fill_qualname(out, 1);
	return rc;
}

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
 * The list: each entry is a member this file reads, and why. Members the
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
/* ===== code object deaths ============================================= */

/* The writer resolves code objects a few milliseconds after they were
 * sampled; module bodies and exec() code are often freed by then. Wrapping
 * the code type's deallocator lets the agent keep what it needs of a
 * sampled code object at the moment it dies. */
static destructor orig_code_dealloc;
static int (*death_wanted)(uint64_t);
static void (*death_cb)(uint64_t, struct strata_codeinfo *);

static void strata_code_dealloc(PyObject *op)
{
	uint64_t addr = (uint64_t)(uintptr_t)op;
	if (death_cb && death_wanted(addr)) {
		struct strata_codeinfo ci;
		/* Before 3.11 the qualified name is rebuilt from the source by
		 * the helper (this runs with the GIL held: no file reads). */
		if (read_code_with(rd_direct, addr, &ci) == 0)
			death_cb(addr, &ci);
	}
	orig_code_dealloc(op);
}

static int py_hook_code_death(int (*wanted)(uint64_t), void (*on_death)(uint64_t, struct strata_codeinfo *))
{
	death_wanted = wanted;
	death_cb = on_death;
	if (!orig_code_dealloc) {
		orig_code_dealloc = PyCode_Type.tp_dealloc;
		PyCode_Type.tp_dealloc = strata_code_dealloc;
	}
	return 0;
}

/* ===== GIL context ==================================================== */

static int str_endswith(PyObject *s, const char *suffix)
{
	const char *u = PyUnicode_AsUTF8(s);
	if (!u)
		return 0;
	size_t a = strlen(u), b = strlen(suffix);
	return a >= b && strcmp(u + a - b, suffix) == 0;
}

/* threading.Thread.start() creates the thread from inside start() with the
 * GIL held: through _thread.start_new_thread on 3.8-3.12 and
 * _thread.start_joinable_thread on 3.13-3.15 (neither releases the GIL around
 * pthread_create), so the innermost Python frame is start() and its `self`
 * is the Thread. Any other pthread_create, possibly from a thread that does
 * not hold the GIL, must not touch the C API: the GIL is checked directly,
 * since PyGILState_Check() answers yes for everyone once subinterpreters
 * exist. */
static int py_starting_thread_name(char *buf, size_t n)
{
	if (!Py_IsInitialized() || !tstate_ready())
		return -1;
	PyThreadState *me = bound_tstate_gil();
	if (!me || gil_holder() != me)
		return -1;
	int rc = -1;
	PyObject *et, *ev, *tb;
	PyErr_Fetch(&et, &ev, &tb);
	PyFrameObject *f = PyEval_GetFrame(); /* borrowed */
	if (f) {
#if PY_VERSION_HEX >= 0x03090000
		PyCodeObject *co = PyFrame_GetCode(f); /* new reference */
#else
		PyCodeObject *co = f->f_code;
		Py_XINCREF(co);
#endif
		if (co && PyUnicode_CompareWithASCIIString(co->co_name, "start") == 0 &&
		    str_endswith(co->co_filename, "threading.py")) {
			PyObject *locals = PyObject_GetAttrString((PyObject *)f, "f_locals");
			PyObject *self = locals ? PyMapping_GetItemString(locals, "self") : NULL;
			PyObject *name = self ? PyObject_GetAttrString(self, "_name") : NULL;
			const char *u = name && PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
			if (u) {
				snprintf(buf, n, "%s", u);
				rc = 0;
			}
			Py_XDECREF(name);
			Py_XDECREF(self);
			Py_XDECREF(locals);
		}
		Py_XDECREF(co);
	}
	PyErr_Clear();
	PyErr_Restore(et, ev, tb);
	return rc;
}

/* Only the C API and attribute lookups: right whatever the layout. */
static int py_api_frame(struct strata_pyframe *out, char *name, size_t n)
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

static void py_symbols(struct strata_pysyms *out)
{
	out->runtime = (uint64_t)(uintptr_t)&_PyRuntime;
	out->code_type = (uint64_t)(uintptr_t)&PyCode_Type;
	out->frame_type = (uint64_t)(uintptr_t)&PyFrame_Type;
	out->unicode_type = (uint64_t)(uintptr_t)&PyUnicode_Type;
	out->bytes_type = (uint64_t)(uintptr_t)&PyBytes_Type;
}

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

/* ===== entry point ==================================================== */

static const struct strata_pyapi api = {
	.api_version = STRATA_PYAPI_VERSION,
	.built_for = PY_VERSION,
	.linetable_fmt = LINETABLE_FMT,
	.ready = py_ready,
	.phase = py_phase,
	.current_tstate = py_current_tstate,
	.walk = py_walk,
	.find_tstate = py_find_tstate,
	.read_code = py_read_code,
	.hook_code_death = py_hook_code_death,
	.starting_thread_name = py_starting_thread_name,
	.symbols = py_symbols,
	.api_frame = py_api_frame,
	.obj_type = pyobj_type,
	.type_name = pyobj_type_name,
};

__attribute__((visibility("default"))) const struct strata_pyapi *strata_pyapi_init(const struct strata_core *c)
{
	core = c;
	return &api;
}
#else /* STRATA_REMOTE */

/* ===== entry points (reading another process) =========================== */

static int rp_phase(void)
{
	remote_begin();
	if (setjmp(remote_fail))
		return -1;
	return py_phase();
}

static uint64_t rp_find_tstate(unsigned long pthread_id)
{
	remote_begin();
	if (setjmp(remote_fail))
		return UINT64_MAX;
	return (uint64_t)(uintptr_t)find_thread(pthread_id);
}

static int rp_walk(uint64_t tstate, struct strata_pyframe *out, int max, uint32_t *missing, int *gc)
{
	remote_begin();
	*missing = 0;
	if (gc)
		*gc = 0;
	if (setjmp(remote_fail))
		return -1;
	return walk_frames((PyThreadState *)(uintptr_t)tstate, out, max, missing, gc);
}

static int rp_threads(struct strata_pythread *out, int max)
{
	remote_begin();
	if (setjmp(remote_fail))
		return -1;
	return list_threads(out, max);
}

static char *rp_qualname(const char *filename, uint32_t firstlineno, const char *name)
{
	if (PY_VERSION_HEX >= 0x030B0000 || !filename || !name)
		return NULL;
	return srcqual_lookup(filename, firstlineno, name, 1);
}

/* As strata_py_build_check, on the target's own table: read from the
 * start of its _PyRuntime, where every 3.13+ interpreter keeps it. */
static int rp_check(const char *exe, char *why, size_t n)
{
#if PY_VERSION_HEX >= 0x030D0000
	_Py_DebugOffsets table;
	uint64_t at = env.syms.runtime + offsetof(_PyRuntimeState, debug_offsets);
	if (env.read(env.ctx, &table, at, sizeof(table))) {
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

static int rp_read(void *ctx, void *dst, uint64_t src, size_t n)
{
	(void)ctx;
	return env.read(env.ctx, dst, src, n);
}

static uint64_t rp_obj_type(uint64_t block, uint64_t size, uint64_t *tag)
{
	return pyobj_type(rp_read, NULL, block, size, tag);
}

static int rp_type_name(uint64_t type, char *buf, size_t n, uint64_t *tag)
{
	return pyobj_type_name(rp_read, NULL, type, buf, n, tag);
}

/* PEP 768: the request's fields, located with the target's own
 * _Py_DebugOffsets (as sys.remote_exec locates them), checked against the
 * layout this reader was built for. */
static int rp_remote_exec(uint64_t tstate, struct strata_rexec *out, char *why, size_t n)
{
	memset(out, 0, sizeof(*out));
#if PY_VERSION_HEX >= 0x030E0000
#if !defined(Py_REMOTE_DEBUG) || !defined(Py_SUPPORTS_REMOTE_DEBUG)
	(void)tstate;
	snprintf(why, n, "this Python was built without remote debugging (PEP 768)");
	return -1;
#else
	_Py_DebugOffsets t;
	uint64_t at = env.syms.runtime + offsetof(_PyRuntimeState, debug_offsets);
	if (env.read(env.ctx, &t, at, sizeof(t)) || memcmp(t.cookie, _Py_Debug_Cookie, sizeof(t.cookie)) != 0) {
		snprintf(why, n, "cannot read the interpreter's debug offsets");
		return -1;
	}
	const struct _debugger_support *d = &t.debugger_support;
	if (d->remote_debugger_support != offsetof(PyThreadState, remote_debugger_support) ||
	    d->eval_breaker != offsetof(PyThreadState, eval_breaker) ||
	    d->debugger_pending_call != offsetof(_PyRemoteDebuggerSupport, debugger_pending_call) ||
	    d->debugger_script_path != offsetof(_PyRemoteDebuggerSupport, debugger_script_path) ||
	    d->debugger_script_path_size != sizeof(((_PyRemoteDebuggerSupport *)0)->debugger_script_path)) {
		snprintf(why, n, "the interpreter's debugger offsets differ from those of the Python %s headers",
			 PY_VERSION);
		return -1;
	}
	uint64_t interp = 0;
	int32_t enabled = 0;
	if (env.read(env.ctx, &interp, env.syms.runtime + t.runtime_state.interpreters_head, sizeof(interp)) ||
	    !interp || env.read(env.ctx, &enabled, interp + d->remote_debugging_enabled, sizeof(enabled))) {
		snprintf(why, n, "cannot read the main interpreter");
		return -1;
	}
	out->enabled = enabled;
	out->pending_call = tstate + d->remote_debugger_support + d->debugger_pending_call;
	out->script_path = tstate + d->remote_debugger_support + d->debugger_script_path;
	out->script_path_size = d->debugger_script_path_size;
	out->eval_breaker = tstate + d->eval_breaker;
	out->stop_bit = _PY_EVAL_PLEASE_STOP_BIT;
	return 0;
#endif
#else
	(void)tstate;
	snprintf(why, n, "sys.remote_exec (PEP 768) came with Python 3.14");
	return -1;
#endif
}

static const struct strata_pyreader reader = {
	.api_version = STRATA_PYAPI_VERSION,
	.built_for = PY_VERSION,
	.linetable_fmt = LINETABLE_FMT,
	.phase = rp_phase,
	.find_tstate = rp_find_tstate,
	.walk = rp_walk,
	.read_code = py_read_code,
	.qualname = rp_qualname,
	.check = rp_check,
	.threads = rp_threads,
	.obj_type = rp_obj_type,
	.type_name = rp_type_name,
	.remote_exec = rp_remote_exec,
};

__attribute__((visibility("default"))) const struct strata_pyreader *strata_pyreader_init(const struct strata_remote *r)
{
	env = *r;
	return &reader;
}
#endif
