/*
 * pyframes.c — the per-Python-version half of the agent (see pyapi.h).
 *
 * Compiled once per interpreter against that interpreter's own internal
 * headers (Py_BUILD_CORE), producing strata-py-X.Y.Z.so. It owns everything
 * that depends on CPython's struct layouts: finding the calling thread's
 * PyThreadState, walking its frame chain, reading code objects, strings
 * and line tables, and naming threads started by threading.Thread.
 *
 * Version differences are kept to the small accessor section below; the
 * walking and reading logic above it is shared.
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <frameobject.h>

#if PY_VERSION_HEX >= 0x030B0000
#include <internal/pycore_frame.h>
#endif
#include <internal/pycore_pystate.h>
#include <internal/pycore_runtime.h>
#include <internal/pycore_interp.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../pyapi.h"
#include "../../common/format.h"

static const struct strata_core *core;

/* Bound on frames counted past the depth cap; walking stops there so a
 * corrupt (cyclic) chain cannot keep the handler busy. */
#define MISSING_COUNT_MAX 100000

/* ===== version accessors ============================================== */

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
/* 3.11: _PyInterpreterFrame chain from tstate->cframe->current_frame. */
#define LINETABLE_FMT LT_LOCATIONS
typedef _PyInterpreterFrame pyframe_t;

static int tss_ready(void) { return _PyRuntime.gilstate.autoTSSkey._is_initialized; }
static pthread_key_t tss_key(void) { return _PyRuntime.gilstate.autoTSSkey._key; }

static pyframe_t *first_frame(PyThreadState *ts)
{
	_PyCFrame *cf = ts->cframe;
	return cf ? cf->current_frame : NULL;
}
static pyframe_t *frame_prev(pyframe_t *f) { return f->previous; }
static PyCodeObject *frame_code(pyframe_t *f) { return f->f_code; }
/* A frame still being set up (before its first traceable instruction) is
 * skipped, as CPython's own tracebacks do. */
static int frame_skip(pyframe_t *f, PyCodeObject *co)
{
	return f->owner != FRAME_OWNED_BY_GENERATOR &&
	       f->prev_instr < _PyCode_CODE(co) + co->_co_firsttraceable;
}
static int frame_is_entry(pyframe_t *f) { return f->is_entry; }
static int32_t frame_lasti(pyframe_t *f, PyCodeObject *co)
{
	intptr_t d = (intptr_t)((char *)f->prev_instr - (char *)_PyCode_CODE(co));
	return d < 0 ? -1 : (int32_t)(d / (intptr_t)sizeof(_Py_CODEUNIT));
}
static PyThreadState *interp_threads(PyInterpreterState *i) { return i->threads.head; }
#define CODE_LINETABLE(co) ((co)->co_linetable)
#define CODE_QUALNAME(co) ((co)->co_qualname)

#else
#error "strata: this Python version has no frame accessors yet (see src/agent/py/pyframes.c)"
#endif

/* ===== handler context ================================================ */

static int py_ready(void) { return tss_ready(); }

static void *py_current_tstate(void)
{
	if (!tss_ready())
		return NULL;
	/* glibc's pthread_getspecific is a plain array load (no locks), so
	 * it is safe in a signal handler in practice. */
	return pthread_getspecific(tss_key());
}

static int py_walk(void *tstate, struct strata_pyframe *out, int max, uint32_t *missing)
{
	PyThreadState *ts = tstate;
	int n = 0;
	uint32_t extra = 0;
	*missing = 0;
	if (!ts)
		return 0;
	pyframe_t *f = first_frame(ts);
	while (f) {
		PyCodeObject *co = frame_code(f);
		if (!co || Py_TYPE(co) != &PyCode_Type)
			break; /* torn or stale: stop rather than guess */
		if (!frame_skip(f, co)) {
			if (n < max) {
				out[n].code = (uint64_t)(uintptr_t)co;
				out[n].lasti = frame_lasti(f, co);
				out[n].first = (uint16_t)co->co_firstlineno;
				out[n].flags = frame_is_entry(f) ? PYF_ENTRY : 0;
				n++;
			} else if (++extra >= MISSING_COUNT_MAX) {
				break;
			}
		}
		f = frame_prev(f);
	}
	*missing = extra;
	return n;
}

static void *py_find_tstate(unsigned long pthread_id)
{
	PyInterpreterState *interp = _PyRuntime.interpreters.main;
	if (!interp)
		return NULL;
	int guard = 0;
	for (PyThreadState *ts = interp_threads(interp); ts && guard < 10000; ts = ts->next, guard++)
		if (ts->thread_id == pthread_id)
			return ts;
	return NULL;
}

/* ===== writer context ================================================= */

#define MAX_STR_CHARS 4096
#define MAX_LINETABLE (1u << 20)

/* Memory is read through a reader: the writer thread uses the core's
 * fault-proof safe_read; the deallocation hook, which runs with the GIL on
 * an object that is still alive, reads directly. */
typedef int (*reader_fn)(void *dst, const void *src, size_t n);

static int rd_safe(void *dst, const void *src, size_t n)
{
	return core->safe_read(dst, (uint64_t)(uintptr_t)src, n);
}

static int rd_direct(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
	return 0;
}

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
	if (!addr || rd(&tp, &addr->ob_type, sizeof(tp)) || tp != &PyUnicode_Type)
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
	if (!addr || rd(&tp, &addr->ob_type, sizeof(tp)) || tp != &PyBytes_Type)
		return NULL;
	if (rd(&b, addr, offsetof(PyBytesObject, ob_sval)))
		return NULL;
	Py_ssize_t n = Py_SIZE(&b);
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
	if (rd(&co, (void *)(uintptr_t)addr, sizeof(co)) || Py_TYPE(&co) != &PyCode_Type)
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

static int py_read_code(uint64_t addr, struct strata_codeinfo *out)
{
	return read_code_with(rd_safe, addr, out);
}

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

static int py_starting_thread_name(char *buf, size_t n)
{
	if (!Py_IsInitialized() || !PyGILState_Check())
		return -1;
	int rc = -1;
	PyObject *et, *ev, *tb;
	PyErr_Fetch(&et, &ev, &tb);
	PyFrameObject *f = PyEval_GetFrame(); /* borrowed */
	if (f) {
		PyCodeObject *co = PyFrame_GetCode(f); /* new reference */
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

/* ===== entry point ==================================================== */

static const struct strata_pyapi api = {
	.api_version = STRATA_PYAPI_VERSION,
	.built_for = PY_VERSION,
	.linetable_fmt = LINETABLE_FMT,
	.ready = py_ready,
	.current_tstate = py_current_tstate,
	.walk = py_walk,
	.find_tstate = py_find_tstate,
	.read_code = py_read_code,
	.hook_code_death = py_hook_code_death,
	.starting_thread_name = py_starting_thread_name,
};

__attribute__((visibility("default"))) const struct strata_pyapi *strata_pyapi_init(const struct strata_core *c)
{
	core = c;
	return &api;
}
