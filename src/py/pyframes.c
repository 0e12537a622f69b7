/*
 * pyframes.c — the per-Python-version half of the agent (see pyapi.h):
 * the interpreter's frames and thread states.
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
 *
 * This file holds what runs in the signal handler and everything that
 * needs the per-version frame and thread-state accessors; the rest of the
 * module is beside it (py-internal.h): code objects for the writer
 * (pycode.c), the layout checks (pylayout.c), the entry tables (pyapi.c).
 */
#include "py-internal.h"

#include <pthread.h>
#include <setjmp.h>
#include <string.h>

/* ===== reading interpreter memory ======================================= */

#ifdef STRATA_REMOTE
/* A few recently read blocks of the target: the fields of one struct are
 * read one by one, and each read is a system call. The cache lives for one
 * call into the reader (remote_begin), so nothing stale is ever used.
 * 1 KiB blocks: a read costs about the same whatever its size up to a page
 * (the system call and the page walk dominate), and a coroutine with its
 * frame, a task, a code object's header each fit in one. */
#define RC_BLOCK 1024u
#define RC_WAYS 8
static __thread struct {
	uint64_t addr[RC_WAYS];
	uint8_t data[RC_WAYS][RC_BLOCK];
	unsigned next;
} rc;
__thread jmp_buf remote_fail;

void remote_begin(void)
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
	if (RENV.read(RENV.ctx, rc.data[w], base, RC_BLOCK)) {
		/* A block straddling the end of a mapping: read exactly. */
		rc.addr[w] = UINT64_MAX;
		return NULL;
	}
	rc.addr[w] = base;
	return rc.data[w];
}

/* Copies n bytes of the target at src, or longjmps to remote_fail. */
void remote_load(void *dst, const void *src, size_t n)
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
	if (RENV.read(RENV.ctx, dst, a, n))
		longjmp(remote_fail, 1);
}
#endif

/* ===== version accessors ============================================== */

/*
 * Every version provides (and, for its code object, LINETABLE_FMT,
 * CODE_LINETABLE and CODE_QUALNAME in py-internal.h):
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
#define LASTI_BYTES 1 /* 3.8, 3.9: f_lasti counts bytes */
#else
#define LASTI_BYTES 0 /* 3.10: f_lasti counts code units */
#endif
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

int py_phase(void)
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

/* ===== for pyasync.c ==================================================== */

/* One frame that is not (or not necessarily) on a thread's chain: a
 * suspended coroutine's. 0, or -1 if it runs no code object. */
int py_frame_info(const void *frame, struct strata_pyframe *out)
{
	pyframe_t *f = (pyframe_t *)frame;
	PyCodeObject *co = frame_code(f);
	if (!co || TYPE_OF(co) != T_CODE)
		return -1;
	out->code = (uint64_t)(uintptr_t)co;
	out->lasti = frame_lasti(f, co);
	out->first = (uint16_t)LD(co->co_firstlineno);
	out->flags = 0;
	return 0;
}

/* The code object frame runs (a suspended or finished coroutine's: the
 * interpreter keeps it when it clears the frame), NULL if none. */
void *py_frame_code(const void *frame)
{
	PyCodeObject *co = frame_code((pyframe_t *)frame);
	return co && TYPE_OF(co) == T_CODE ? co : NULL;
}

/* The index `target` has in the walk of ts (walk_frames' numbering: the
 * frames it shows, leaf first), or -1 if it is not on ts's chain. Bounded
 * like the walk. */
int py_chain_index(void *ts, const void *target)
{
	int n = 0, steps = 0;
	for (pyframe_t *f = ts ? first_frame(ts) : NULL; f && steps < 4096; f = frame_prev(f), steps++) {
		if (frame_shim(f))
			continue;
		PyCodeObject *co = frame_code(f);
		if (!co) {
			if (PY_VERSION_HEX >= 0x030D0000)
				continue;
			return -1;
		}
		if (TYPE_OF(co) != T_CODE)
			return -1;
		if (frame_skip(f, co))
			continue;
		if ((const void *)f == target)
			return n;
		n++;
	}
	return -1;
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

int py_ready(void) { return tstate_ready(); }

void *py_current_tstate(void)
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

int py_walk(void *tstate, struct strata_pyframe *out, int max, uint32_t *missing, int *gc)
{
	return walk_frames(tstate, out, max, missing, gc);
}

void *py_find_tstate(unsigned long pthread_id) { return find_thread(pthread_id); }

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
int py_starting_thread_name(char *buf, size_t n)
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
#else /* STRATA_REMOTE */

/* ===== entry points (reading another process) =========================== */

int rp_phase(void)
{
	remote_begin();
	if (setjmp(remote_fail))
		return -1;
	return py_phase();
}

uint64_t rp_find_tstate(unsigned long pthread_id)
{
	remote_begin();
	if (setjmp(remote_fail))
		return UINT64_MAX;
	return (uint64_t)(uintptr_t)find_thread(pthread_id);
}

int rp_walk(uint64_t tstate, struct strata_pyframe *out, int max, uint32_t *missing, int *gc)
{
	remote_begin();
	*missing = 0;
	if (gc)
		*gc = 0;
	if (setjmp(remote_fail))
		return -1;
	return walk_frames((PyThreadState *)(uintptr_t)tstate, out, max, missing, gc);
}

int rp_threads(struct strata_pythread *out, int max)
{
	remote_begin();
	if (setjmp(remote_fail))
		return -1;
	return list_threads(out, max);
}

/* The main interpreter's GIL: where the threads waiting for it sleep (its
 * mutex and condition variables are in it). */
int rp_gil_range(uint64_t *lo, uint64_t *hi)
{
	remote_begin();
	*lo = *hi = 0;
	if (setjmp(remote_fail))
		return -1;
#if PY_VERSION_HEX < 0x030C0000
	struct _gil_runtime_state *g = &RUNTIME->ceval.gil;
#else
	PyInterpreterState *interp = LD(RUNTIME->interpreters.main);
	struct _gil_runtime_state *g = interp ? LD(interp->ceval.gil) : NULL;
#endif
	if (!g)
		return -1;
	*lo = (uint64_t)(uintptr_t)g;
	*hi = *lo + sizeof(*g);
	return 0;
}
#endif
