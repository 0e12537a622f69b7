/*
 * pyasync.c — asyncio's tasks, per CPython version (docs/async.md): which
 * task a thread is running (in the signal handler), and, read from outside
 * by the helper and `strata stack`, every task, its name, the chain of
 * coroutines it is suspended in and the tasks that await it.
 *
 * What a version's headers give is compiled in, as everywhere in src/py:
 * dicts (3.11+), coroutines and their frames, functions, cells, methods,
 * weak references, sets. Two layouts are in no header and are written out
 * here, each checked on the running interpreter before anything is read
 * through it (asyncio_find):
 *   - the C tasks and futures of Modules/_asynciomodule.c (TaskObj,
 *     FutureObj, the FutureIter and the 3.8-3.11 TaskWakeupMethWrapper):
 *     compared with the type objects the module made, whose tp_basicsize,
 *     tp_dictoffset and tp_weaklistoffset are what that very build compiled
 *     (sizeof and offsetof of the same structs);
 *   - 3.8-3.10's dict keys (Objects/dict-common.h): checked on a live dict,
 *     sys.modules, every key of which must read as a str.
 * 3.14 and later keep the running task in the thread state and publish the
 * task layout in the _asyncio module's own debug section: not read yet (the
 * tasks of those versions are not shown; docs/async.md).
 *
 * Every load goes through LD() (py-internal.h): plain loads under the fault
 * guard in the handler, checked reads of the target in the reader build.
 */
#include "py-internal.h"

#include <stdlib.h>
#include <string.h>

#if PY_VERSION_HEX < 0x030E0000
#define ASYNC_SUPPORTED 1
#else
#define ASYNC_SUPPORTED 0
#endif

#if ASYNC_SUPPORTED && PY_VERSION_HEX >= 0x030B0000
#include <internal/pycore_dict.h>
#include <internal/pycore_object.h>
#endif

/* ===== layouts not in any header ======================================== */

#if ASYNC_SUPPORTED
/*
 * Modules/_asynciomodule.c's FutureObj and TaskObj, as each release lays
 * them out (fields in order; the comments say what a version added). The
 * offsets were also read off live objects of 3.8.18, 3.9.18, 3.10.13,
 * 3.11.2, 3.11.7, 3.12.1 and 3.13.0 (docs/async.md); at run time
 * asyncio_find compares sizeof and the dict and weakref offsets with the
 * types the running _asyncio built.
 */
#if PY_VERSION_HEX < 0x03090000
#define ST_FUT_FIELDS                                                                                 \
	PyObject_HEAD PyObject *fut_loop, *fut_callback0, *fut_context0, *fut_callbacks, *fut_exception, \
		*fut_result, *fut_source_tb;                                                             \
	int fut_state, fut_log_tb, fut_blocking;                                                         \
	PyObject *dict, *fut_weakreflist;
#elif PY_VERSION_HEX < 0x030A0000
/* 3.9: the cancel message, and the exception state saved on cancelling. */
#define ST_FUT_FIELDS                                                                                 \
	PyObject_HEAD PyObject *fut_loop, *fut_callback0, *fut_context0, *fut_callbacks, *fut_exception, \
		*fut_result, *fut_source_tb, *fut_cancel_msg;                                            \
	int fut_state, fut_log_tb, fut_blocking;                                                         \
	PyObject *dict, *fut_weakreflist;                                                                \
	_PyErr_StackItem fut_cancelled_exc_state;
#elif PY_VERSION_HEX < 0x030B0000
/* 3.10: the exception's traceback kept apart. */
#define ST_FUT_FIELDS                                                                                 \
	PyObject_HEAD PyObject *fut_loop, *fut_callback0, *fut_context0, *fut_callbacks, *fut_exception, \
		*fut_exception_tb, *fut_result, *fut_source_tb, *fut_cancel_msg;                         \
	int fut_state, fut_log_tb, fut_blocking;                                                         \
	PyObject *dict, *fut_weakreflist;                                                                \
	_PyErr_StackItem fut_cancelled_exc_state;
#elif PY_VERSION_HEX < 0x030D0000
/* 3.11, 3.12: the cancelled exception is one object. */
#define ST_FUT_FIELDS                                                                                 \
	PyObject_HEAD PyObject *fut_loop, *fut_callback0, *fut_context0, *fut_callbacks, *fut_exception, \
		*fut_exception_tb, *fut_result, *fut_source_tb, *fut_cancel_msg;                         \
	int fut_state, fut_log_tb, fut_blocking;                                                         \
	PyObject *dict, *fut_weakreflist;                                                                \
	PyObject *fut_cancelled_exc;
#else
/* 3.13: the dict and weak references are managed by the interpreter
 * (Py_TPFLAGS_MANAGED_DICT, MANAGED_WEAKREF), the flags are bit fields
 * shared with the task's. */
#define ST_FUT_FIELDS                                                                                 \
	PyObject_HEAD PyObject *fut_loop, *fut_callback0, *fut_context0, *fut_callbacks, *fut_exception, \
		*fut_exception_tb, *fut_result, *fut_source_tb, *fut_cancel_msg, *fut_cancelled_exc;     \
	int fut_state;
#endif

typedef struct {
	ST_FUT_FIELDS
#if PY_VERSION_HEX >= 0x030D0000
	unsigned fut_log_tb : 1;
	unsigned fut_blocking : 1;
#endif
} st_future;

typedef struct {
	ST_FUT_FIELDS
#if PY_VERSION_HEX < 0x030B0000
	PyObject *task_fut_waiter, *task_coro, *task_name, *task_context;
	int task_must_cancel, task_log_destroy_pending;
#elif PY_VERSION_HEX < 0x030D0000
	PyObject *task_fut_waiter, *task_coro, *task_name, *task_context;
	int task_must_cancel, task_log_destroy_pending, task_num_cancels_requested;
#else
	unsigned fut_log_tb : 1;
	unsigned fut_blocking : 1;
	unsigned task_must_cancel : 1;
	unsigned task_log_destroy_pending : 1;
	int task_num_cancels_requested;
	PyObject *task_fut_waiter, *task_coro, *task_name, *task_context;
#endif
} st_task;

/* What `await future` iterates (futureiterobject), and, before 3.12, the
 * callback a task adds to what it awaits (TaskWakeupMethWrapper; 3.12+
 * use a builtin method whose m_self is the task). */
typedef struct {
	PyObject_HEAD st_future *future;
} st_futureiter;
typedef struct {
	PyObject_HEAD st_task *ww_task;
} st_wakeup;

#if PY_VERSION_HEX < 0x030D0000
#define ST_DICTOFF(T) ((Py_ssize_t)offsetof(T, dict))
#define ST_WEAKOFF(T) ((Py_ssize_t)offsetof(T, fut_weakreflist))
#else
/* Managed by the interpreter: tp_dictoffset -1, weak references before
 * the object. */
#define ST_DICTOFF(T) ((Py_ssize_t)-1)
#define ST_WEAKOFF(T) ((Py_ssize_t)MANAGED_WEAKREF_OFFSET)
#endif

/* fut_state's first value (STATE_PENDING). */
#define ST_PENDING 0
#endif

#if ASYNC_SUPPORTED
/* 3.8-3.10's dict keys (Objects/dict-common.h; 3.11+ have them in
 * internal/pycore_dict.h). Checked on sys.modules (find_module). */
#if PY_VERSION_HEX < 0x030B0000
typedef struct {
	Py_ssize_t dk_refcnt, dk_size;
	void *dk_lookup;
	Py_ssize_t dk_usable, dk_nentries;
	char dk_indices[];
} st_dictkeys;
typedef struct {
	Py_hash_t me_hash;
	PyObject *me_key, *me_value;
} st_dictentry;
#endif

#define DICT_SCAN_MAX 65536 /* entries looked at in one dict */

/* ===== objects ========================================================= */

/* Up to max live entries of dict d into keys/vals (either may be NULL).
 * Returns how many, -1 if d does not read as a dict. */
static int dict_items(PyObject *d, PyObject **keys, PyObject **vals, int max)
{
	PyDictObject *dict = (PyDictObject *)d;
	PyDictKeysObject *dk = LD(dict->ma_keys);
	if (!dk)
		return -1;
	int n = 0;
#if PY_VERSION_HEX < 0x030B0000
	st_dictkeys *k = (st_dictkeys *)dk;
	Py_ssize_t size = LD(k->dk_size), used = LD(k->dk_nentries);
	if (size <= 0 || size > (1 << 24) || (size & (size - 1)) || used < 0 || used > size)
		return -1;
	size_t ix = size <= 0xff ? 1 : size <= 0xffff ? 2 : 4;
	st_dictentry *e = (st_dictentry *)(k->dk_indices + (size_t)size * ix);
	PyObject **values = LD(dict->ma_values);
	for (Py_ssize_t i = 0; i < used && i < DICT_SCAN_MAX && n < max; i++) {
		PyObject *key = LD(e[i].me_key);
		PyObject *val = values ? LD(values[i]) : LD(e[i].me_value);
		if (!key || !val)
			continue;
		if (keys)
			keys[n] = key;
		if (vals)
			vals[n] = val;
		n++;
	}
#else
	uint8_t log2 = LD(dk->dk_log2_size), log2ix = LD(dk->dk_log2_index_bytes), kind = LD(dk->dk_kind);
	Py_ssize_t used = LD(dk->dk_nentries);
	if (log2 > 30 || log2ix > 33 || used < 0 || used > ((Py_ssize_t)1 << log2))
		return -1;
	char *ent = dk->dk_indices + ((size_t)1 << log2ix);
	PyDictValues *values = LD(dict->ma_values);
	for (Py_ssize_t i = 0; i < used && i < DICT_SCAN_MAX && n < max; i++) {
		PyObject *key, *val;
		if (kind == DICT_KEYS_GENERAL) {
			PyDictKeyEntry *e = (PyDictKeyEntry *)ent + i;
			key = LD(e->me_key);
			val = LD(e->me_value);
		} else {
			PyDictUnicodeEntry *e = (PyDictUnicodeEntry *)ent + i;
			key = LD(e->me_key);
			val = LD(e->me_value);
		}
		if (values)
			val = LD(values->values[i]);
		if (!key || !val)
			continue;
		if (keys)
			keys[n] = key;
		if (vals)
			vals[n] = val;
		n++;
	}
#endif
	return n;
}

/* The coroutine's (or generator's) frame, NULL once it finished. */
static void *gen_frame(PyObject *gen)
{
	PyGenObject *g = (PyGenObject *)gen;
#if PY_VERSION_HEX < 0x030B0000
	return LD(g->gi_frame);
#else
	if (LD(g->gi_frame_state) >= FRAME_CLEARED)
		return NULL;
	return (void *)&g->gi_iframe;
#endif
}

#ifdef STRATA_REMOTE
/* ---- type kinds (reader): told by name, as no type's address is given */

enum tkind {
	K_OTHER = 0, K_DICT, K_STR, K_INT, K_TUPLE, K_LIST, K_SET, K_CORO, K_GEN, K_FUNC, K_METHOD, K_CFUNC,
	K_CELL, K_WEAKREF, K_MODULE, K_FUTITER, K_WAKEUP,
};

static const struct {
	const char *name;
	int kind;
} kind_names[] = {
	{ "dict", K_DICT }, { "str", K_STR }, { "int", K_INT }, { "tuple", K_TUPLE }, { "list", K_LIST },
	{ "set", K_SET }, { "coroutine", K_CORO }, { "generator", K_GEN }, { "function", K_FUNC },
	{ "method", K_METHOD }, { "builtin_function_or_method", K_CFUNC }, { "cell", K_CELL },
	{ "weakref", K_WEAKREF }, { "weakref.ReferenceType", K_WEAKREF }, { "module", K_MODULE },
	{ "_asyncio.FutureIter", K_FUTITER }, { "FutureIter", K_FUTITER },
	{ "TaskWakeupMethWrapper", K_WAKEUP }, { "_asyncio.TaskWakeupMethWrapper", K_WAKEUP },
};

#define KCACHE 64
static struct {
	uint64_t type[KCACHE];
	int kind[KCACHE];
	unsigned next;
} kc;

static int type_kind(PyTypeObject *tp)
{
	uint64_t a = (uint64_t)(uintptr_t)tp;
	if (!a)
		return K_OTHER;
	for (unsigned i = 0; i < KCACHE; i++)
		if (kc.type[i] == a)
			return kc.kind[i];
	char buf[40] = { 0 };
	const char *nm = LD(tp->tp_name);
	int kind = K_OTHER;
	if (nm && env.read(env.ctx, buf, (uint64_t)(uintptr_t)nm, sizeof(buf) - 1) == 0) {
		for (size_t i = 0; i < sizeof(kind_names) / sizeof(kind_names[0]); i++)
			if (strcmp(buf, kind_names[i].name) == 0)
				kind = kind_names[i].kind;
	}
	unsigned w = kc.next++ % KCACHE;
	kc.type[w] = a;
	kc.kind[w] = kind;
	return kind;
}
#define KIND(o) type_kind(TYPE_OF(o))

/* Whether o's type is `base` or derives from it (a few levels). */
static int is_a(PyObject *o, uint64_t base)
{
	if (!o || !base)
		return 0;
	PyTypeObject *tp = TYPE_OF(o);
	for (int i = 0; tp && i < 8; i++, tp = LD(tp->tp_base))
		if ((uint64_t)(uintptr_t)tp == base)
			return 1;
	return 0;
}

/* Whether str object s equals the ASCII literal lit. */
static int str_eq(PyObject *s, const char *lit)
{
	if (KIND(s) != K_STR)
		return 0;
	PyASCIIObject a;
	size_t n = strlen(lit);
	remote_load(&a, s, sizeof(a));
	if ((size_t)a.length != n || !a.state.ascii || !a.state.compact)
		return 0;
	char buf[64];
	if (n >= sizeof(buf))
		return 0;
	remote_load(buf, (char *)s + sizeof(PyASCIIObject), n);
	return memcmp(buf, lit, n) == 0;
}

/* The value of key `name` (a str) in dict d, or NULL. */
static PyObject *dict_get(PyObject *d, const char *name)
{
	enum { MAXE = 4096 };
	static PyObject *k[MAXE], *v[MAXE];
	if (!d || KIND(d) != K_DICT)
		return NULL;
	int n = dict_items(d, k, v, MAXE);
	for (int i = 0; i < n; i++)
		if (str_eq(k[i], name))
			return v[i];
	return NULL;
}

/* The module named `name` in sys.modules, or NULL. */
static PyObject *sys_module(const char *name)
{
	PyInterpreterState *interp = LD(RUNTIME->interpreters.main);
	if (!interp)
		return NULL;
#if PY_VERSION_HEX < 0x030C0000
	PyObject *mods = LD(interp->modules);
#else
	PyObject *mods = LD(interp->imports.modules);
#endif
	PyObject *m = dict_get(mods, name);
	return m && KIND(m) == K_MODULE ? m : NULL;
}

/* A module's globals: md_dict, the first member of PyModuleObject (in
 * internal/pycore_moduleobject.h from 3.10; the same before). */
static PyObject *module_dict(PyObject *m)
{
	return LD(((PyObject **)m)[2]);
}

/* Attribute `name` of an instance of a Python class, from its __dict__
 * (or, 3.11+, the values the interpreter keeps in or before the object),
 * or NULL. Slots and properties are not looked at. */
static PyObject *inst_attr(PyObject *o, const char *name)
{
	PyTypeObject *tp = TYPE_OF(o);
	PyObject *dict = NULL;
#if PY_VERSION_HEX < 0x030B0000
	Py_ssize_t off = LD(tp->tp_dictoffset);
	if (off <= 0)
		return NULL;
	dict = LD(*(PyObject **)((char *)o + off));
	return dict ? dict_get(dict, name) : NULL;
#else
	unsigned long flags = LD(tp->tp_flags);
	if (!(flags & Py_TPFLAGS_MANAGED_DICT)) {
		Py_ssize_t off = LD(tp->tp_dictoffset);
		if (off <= 0)
			return NULL;
		dict = LD(*(PyObject **)((char *)o + off));
		return dict ? dict_get(dict, name) : NULL;
	}
	PyDictValues *values = NULL;
#if PY_VERSION_HEX < 0x030C0000
	dict = LD(((PyObject **)o)[-3]);
	values = LD(((PyDictValues **)o)[-4]);
#elif PY_VERSION_HEX < 0x030D0000
	char *dorv = LD(((char **)o)[-3]);
	if ((uintptr_t)dorv & 1)
		values = (PyDictValues *)(dorv + 1);
	else
		dict = (PyObject *)dorv;
#else
	dict = (PyObject *)LD(((PyManagedDictPointer *)((char *)o + MANAGED_DICT_OFFSET))->dict);
	if (!dict && (flags & Py_TPFLAGS_INLINE_VALUES)) {
		values = (PyDictValues *)((char *)o + LD(tp->tp_basicsize));
		if (!LD(values->valid))
			values = NULL;
	}
#endif
	if (dict)
		return dict_get(dict, name);
	if (!values)
		return NULL;
	/* Split keys: the class's shared keys, value i of key entry i. */
	PyDictKeysObject *dk = LD(((PyHeapTypeObject *)tp)->ht_cached_keys);
	if (!dk)
		return NULL;
	uint8_t log2ix = LD(dk->dk_log2_index_bytes);
	Py_ssize_t used = LD(dk->dk_nentries);
	if (log2ix > 33 || used < 0 || used > 1024)
		return NULL;
	PyDictUnicodeEntry *e = (PyDictUnicodeEntry *)(dk->dk_indices + ((size_t)1 << log2ix));
	for (Py_ssize_t i = 0; i < used; i++)
		if (str_eq(LD(e[i].me_key), name))
			return LD(values->values[i]);
	return NULL;
#endif
}
#endif /* STRATA_REMOTE */
#endif /* ASYNC_SUPPORTED */

/* ===== handler: the running task ======================================== */

#if ASYNC_SUPPORTED && !defined(STRATA_REMOTE)
/* The task in a->current_tasks (a dict: loop -> the task it runs) whose
 * coroutine's frame is on ts's chain: the one this thread runs, of
 * however many loops there are. Handler context: plain loads under the
 * fault guard, bounded. */
static uint64_t running_in(void *ts, const struct strata_asyncref *a)
{
	enum { MAXL = 16 };
	PyObject *tasks[MAXL];
	PyObject *d = (PyObject *)(uintptr_t)a->current_tasks;
	if (!d || !ts)
		return 0;
	int n = dict_items(d, NULL, tasks, MAXL);
	for (int i = 0; i < n; i++) {
		PyObject *coro;
		if ((uint64_t)(uintptr_t)TYPE_OF(tasks[i]) == a->task_type)
			coro = LD(((st_task *)tasks[i])->task_coro);
		else
			continue; /* a pure-Python task: the reader resolves those */
		if (!coro)
			continue;
		void *f = gen_frame(coro);
		if (f && py_chain_has(ts, f))
			return (uint64_t)(uintptr_t)tasks[i];
	}
	return 0;
}
#endif

#ifndef STRATA_REMOTE
uint64_t py_running_task(void *tstate, const struct strata_asyncref *a)
{
#if ASYNC_SUPPORTED
	return running_in(tstate, a);
#else
	(void)tstate;
	(void)a;
	return 0;
#endif
}
#else /* STRATA_REMOTE */

/* ===== reader: finding asyncio ========================================== */

#if ASYNC_SUPPORTED
static int type_check(PyObject *tp, const char *what, size_t size, Py_ssize_t dictoff, Py_ssize_t weakoff,
		      char *why, size_t n)
{
	PyTypeObject *t = (PyTypeObject *)tp;
	Py_ssize_t bs = LD(t->tp_basicsize), d = LD(t->tp_dictoffset), w = LD(t->tp_weaklistoffset);
	int ok = (size_t)bs == size && w == weakoff && d == dictoff;
	if (!ok)
		snprintf(why, n, "_asyncio.%s of Python %s is laid out otherwise than the agent module reads it "
			 "(size %zd, dict at %zd, weak references at %zd; the module: %zu, %zd, %zd): tasks are not shown",
			 what, PY_VERSION, bs, d, w, size, dictoff, weakoff);
	return ok ? 0 : -1;
}
#endif

#if ASYNC_SUPPORTED
/* 3.8-3.10: whether sys.modules reads as a dict of str keys. */
static int dict_layout_ok(PyObject *mods)
{
	enum { MAXE = 64 };
	PyObject *k[MAXE];
	int n = dict_items(mods, k, NULL, MAXE);
	if (n <= 0)
		return 0;
	for (int i = 0; i < n; i++)
		if (KIND(k[i]) != K_STR)
			return 0;
	return 1;
}
#endif

static int rp_asyncio_find_(struct strata_asyncref *out, char *why, size_t n)
{
	memset(out, 0, sizeof(*out));
#if !ASYNC_SUPPORTED
	/* Not read yet (docs/async.md): nothing to say to the program. */
	(void)why;
	(void)n;
	return -1;
#else
	PyInterpreterState *interp = LD(RUNTIME->interpreters.main);
	if (!interp)
		return 1;
#if PY_VERSION_HEX < 0x030C0000
	PyObject *mods = LD(interp->modules);
#else
	PyObject *mods = LD(interp->imports.modules);
#endif
	if (!mods)
		return 1;
	/* Empty while the interpreter starts, cleared while it ends, being
	 * filled in a child just forked: asked again later, quietly (a
	 * program without asyncio must see nothing of this). */
	if (KIND(mods) != K_DICT || !dict_layout_ok(mods))
		return 1;
	PyObject *tm = sys_module("asyncio.tasks");
	if (!tm)
		return 1; /* asyncio not imported (yet) */
	PyObject *g = module_dict(tm);
	PyObject *cur = dict_get(g, "_current_tasks");
	PyObject *task = dict_get(g, "Task");
	PyObject *fut = NULL;
	PyObject *fm = sys_module("asyncio.futures");
	if (fm)
		fut = dict_get(module_dict(fm), "Future");
	if (!cur || KIND(cur) != K_DICT || !task || !fut) {
		/* asyncio.tasks is being imported: not all of it is there. */
		return 1;
	}
	PyObject *cm = sys_module("_asyncio");
	PyObject *ctask = cm ? dict_get(module_dict(cm), "Task") : NULL;
	PyObject *cfut = cm ? dict_get(module_dict(cm), "Future") : NULL;
	if (ctask && ctask == task) {
		if (type_check(ctask, "Task", sizeof(st_task), ST_DICTOFF(st_task), ST_WEAKOFF(st_task), why, n) ||
		    !cfut || type_check(cfut, "Future", sizeof(st_future), ST_DICTOFF(st_future), ST_WEAKOFF(st_future), why, n))
			return -1;
		out->task_type = (uint64_t)(uintptr_t)ctask;
		out->future_type = (uint64_t)(uintptr_t)cfut;
	} else {
		/* Pure-Python tasks (no _asyncio, or asyncio.Task replaced):
		 * their fields are instance attributes. */
		out->py_task_type = (uint64_t)(uintptr_t)task;
		out->future_type = (uint64_t)(uintptr_t)fut;
		out->task_type = ctask ? (uint64_t)(uintptr_t)ctask : 0;
	}
	out->current_tasks = (uint64_t)(uintptr_t)cur;
	/* Every task, for the waiting ones: a WeakSet (3.8-3.11 _all_tasks;
	 * 3.12+ _scheduled_tasks, with eagerly started ones in a set). */
	PyObject *all = dict_get(g, "_scheduled_tasks");
	if (!all)
		all = dict_get(g, "_all_tasks");
	out->all_tasks = (uint64_t)(uintptr_t)all;
	out->eager_tasks = (uint64_t)(uintptr_t)dict_get(g, "_eager_tasks");
	return 0;
#endif
}

int rp_asyncio_find(struct strata_asyncref *out, char *why, size_t n)
{
	remote_begin();
	if (setjmp(remote_fail))
		return 1; /* unreadable now (being set up): try again later */
	return rp_asyncio_find_(out, why, n);
}

#if ASYNC_SUPPORTED
/* ===== reader: one task =============================================== */

static int is_task(const struct strata_asyncref *a, PyObject *o)
{
	return is_a(o, a->task_type) || is_a(o, a->py_task_type);
}
static int is_future(const struct strata_asyncref *a, PyObject *o)
{
	return is_a(o, a->future_type) || is_a(o, a->task_type);
}

/* A C task's fields, or a pure-Python one's attributes. */
static PyObject *task_field(const struct strata_asyncref *a, PyObject *t, int which)
{
	if (is_a(t, a->task_type)) {
		st_task *ct = (st_task *)t;
		switch (which) {
		case 0: return LD(ct->task_coro);
		case 1: return LD(ct->task_name);
		case 2: return LD(ct->task_fut_waiter);
		}
		return NULL;
	}
	static const char *const names[] = { "_coro", "_name", "_fut_waiter" };
	return inst_attr(t, names[which]);
}

/* A future's callbacks (callback0, then the list of (callback, context)
 * tuples), up to max into out; for a pure-Python future, `_callbacks`. */
static int future_callbacks(const struct strata_asyncref *a, PyObject *f, PyObject **out, int max)
{
	int n = 0;
	PyObject *list;
	if (is_a(f, a->future_type) || is_a(f, a->task_type)) {
		st_future *cf = (st_future *)f;
		PyObject *cb0 = LD(cf->fut_callback0);
		if (cb0 && n < max)
			out[n++] = cb0;
		list = LD(cf->fut_callbacks);
	} else {
		list = inst_attr(f, "_callbacks");
	}
	if (!list || KIND(list) != K_LIST)
		return n;
	PyListObject *l = (PyListObject *)list;
	Py_ssize_t size = LD(l->ob_base.ob_size);
	PyObject **items = LD(l->ob_item);
	for (Py_ssize_t i = 0; i < size && i < 256 && n < max; i++) {
		PyObject *it = LD(items[i]);
		/* C futures keep (callback, context) pairs; Python ones too. */
		if (it && KIND(it) == K_TUPLE && LD(((PyVarObject *)it)->ob_size) >= 1)
			it = LD(((PyTupleObject *)it)->ob_item[0]);
		if (it)
			out[n++] = it;
	}
	return n;
}

/* The object a suspended coroutine or generator is awaiting (the top of
 * its frame's stack while it is suspended in `await`), or NULL. */
static PyObject *gen_awaiting(PyObject *gen)
{
	PyGenObject *g = (PyGenObject *)gen;
	PyObject *yf = NULL;
#if PY_VERSION_HEX < 0x030A0000
	PyFrameObject *f = LD(g->gi_frame);
	PyObject **top = f ? LD(f->f_stacktop) : NULL;
	if (top && top > LD(f->f_valuestack))
		yf = LD(top[-1]);
#elif PY_VERSION_HEX < 0x030B0000
	PyFrameObject *f = LD(g->gi_frame);
	if (f && LD(f->f_state) == FRAME_SUSPENDED) {
		int depth = LD(f->f_stackdepth);
		PyObject **vs = LD(f->f_valuestack);
		if (depth > 0 && depth < 4096)
			yf = LD(vs[depth - 1]);
	}
#else
	int8_t st = LD(g->gi_frame_state);
#if PY_VERSION_HEX < 0x030D0000
	int suspended = st == FRAME_SUSPENDED;
#else
	int suspended = st == FRAME_SUSPENDED_YIELD_FROM;
#endif
	if (suspended) {
		_PyInterpreterFrame *f = (_PyInterpreterFrame *)&g->gi_iframe;
		int top = LD(f->stacktop);
		if (top > 0 && top < 65536)
			yf = LD(f->localsplus[top - 1]);
	}
#endif
	return yf;
}

/* Whether a coroutine is executing now (on some thread's stack). */
static int gen_running(PyObject *gen)
{
	PyGenObject *g = (PyGenObject *)gen;
#if PY_VERSION_HEX < 0x030A0000
	return LD(g->gi_running) != 0;
#elif PY_VERSION_HEX < 0x030B0000
	PyFrameObject *f = LD(g->gi_frame);
	return f && LD(f->f_state) == FRAME_EXECUTING;
#else
	return LD(g->gi_frame_state) == FRAME_EXECUTING;
#endif
}

/* A frame's first local (`self` of a method). */
static PyObject *frame_local0(void *frame)
{
#if PY_VERSION_HEX < 0x030B0000
	return LD(((PyFrameObject *)frame)->f_localsplus[0]);
#else
	return LD(((_PyInterpreterFrame *)frame)->localsplus[0]);
#endif
}

#define CHAIN_MAX 256

/* Reads task t: its name into info, its coroutine chain's frames into
 * fr (leaf first: the innermost coroutine, where it is suspended or
 * running, first), and what it awaits at the bottom of the chain. */
static int task_read_(const struct strata_asyncref *a, PyObject *t, struct strata_taskinfo *info,
		      struct strata_pyframe *fr, int max)
{
	memset(info, 0, sizeof(*info));
	if (!is_task(a, t))
		return -1;
	PyObject *name = task_field(a, t, 1);
	if (name && KIND(name) == K_STR) {
		char *s = py_read_strobj((uint64_t)(uintptr_t)name);
		if (s) {
			snprintf(info->name, sizeof(info->name), "%s", s);
			free(s);
		}
	} else if (name && KIND(name) == K_INT) {
		/* 3.12+ name a task by its number until asked (Task-N). */
		PyLongObject *l = (PyLongObject *)name;
#if PY_VERSION_HEX < 0x030C0000
		Py_ssize_t size = LD(l->ob_base.ob_size);
		unsigned long v = size == 1 ? (unsigned long)LD(l->ob_digit[0]) : 0;
#else
		uintptr_t tag = LD(l->long_value.lv_tag);
		unsigned long v = (tag >> _PyLong_NON_SIZE_BITS) == 1 ? (unsigned long)LD(l->long_value.ob_digit[0]) : 0;
#endif
		snprintf(info->name, sizeof(info->name), "Task-%lu", v);
	}
	if (!info->name[0])
		snprintf(info->name, sizeof(info->name), "Task@%llx", (unsigned long long)(uintptr_t)t);
	PyObject *coro = task_field(a, t, 0);
	info->coro = (uint64_t)(uintptr_t)coro;
	info->running = coro && gen_running(coro);
	info->waiter = (uint64_t)(uintptr_t)task_field(a, t, 2);
	/* The chain, outermost first, kept leaf first in fr. */
	struct strata_pyframe chain[CHAIN_MAX];
	int n = 0;
	PyObject *o = coro;
	for (int depth = 0; o && depth < CHAIN_MAX; depth++) {
		int k = KIND(o);
		if (k != K_CORO && k != K_GEN)
			break;
		void *f = gen_frame(o);
		if (!f || py_frame_info(f, &chain[n]))
			break;
		n++;
		PyObject *next = gen_awaiting(o);
		if (!next)
			break;
		int nk = KIND(next);
		if (nk == K_GEN || nk == K_CORO) {
			/* A pure-Python future's __await__ is a generator
			 * whose self is the future. */
			void *nf = gen_frame(next);
			PyObject *self = nf ? frame_local0(nf) : NULL;
			if (self && is_future(a, self) && !is_task(a, self) && KIND(next) == K_GEN) {
				info->awaits = (uint64_t)(uintptr_t)self;
				break;
			}
			if (self && is_task(a, self) && KIND(next) == K_GEN) {
				info->awaits = (uint64_t)(uintptr_t)self;
				break;
			}
			o = next;
			continue;
		}
		if (nk == K_FUTITER) {
			info->awaits = (uint64_t)(uintptr_t)LD(((st_futureiter *)next)->future);
		} else if (is_future(a, next)) {
			info->awaits = (uint64_t)(uintptr_t)next;
		}
		break;
	}
	if (!info->awaits)
		info->awaits = info->waiter;
	if (info->awaits && is_task(a, (PyObject *)(uintptr_t)info->awaits))
		info->awaits_task = 1;
	int k = 0;
	for (int i = n; i-- > 0 && k < max;)
		fr[k++] = chain[i];
	info->nframes = (uint32_t)n;
	return k;
}

int rp_task_read(const struct strata_asyncref *a, uint64_t task, struct strata_taskinfo *info,
		 struct strata_pyframe *fr, int max)
{
	remote_begin();
	if (setjmp(remote_fail))
		return -1;
	return task_read_(a, (PyObject *)(uintptr_t)task, info, fr, max);
}

/* ===== reader: who awaits a task ======================================== */

/* The tasks a callback of future f wakes: a task's wakeup (the task
 * awaits f), or a function whose closure holds another future (gather's
 * _done_callback: the gathering future, whose own callbacks are looked
 * at in turn), or a method of an object whose _parent_task is a task
 * (TaskGroup._on_task_done). */
static int awaiters_of(const struct strata_asyncref *a, PyObject *f, uint64_t *out, int max, int depth)
{
	enum { MAXCB = 64 };
	PyObject *cbs[MAXCB];
	int ncb = future_callbacks(a, f, cbs, MAXCB), n = 0;
	for (int i = 0; i < ncb && n < max; i++) {
		PyObject *cb = cbs[i], *t = NULL;
		switch (KIND(cb)) {
		case K_WAKEUP:
			t = (PyObject *)LD(((st_wakeup *)cb)->ww_task);
			break;
		case K_CFUNC:
			t = LD(((PyCFunctionObject *)cb)->m_self);
			break;
		case K_METHOD: {
			PyObject *self = LD(((PyMethodObject *)cb)->im_self);
			if (is_task(a, self))
				t = self;
			else if (self)
				t = inst_attr(self, "_parent_task");
			break;
		}
		case K_FUNC: {
			if (depth >= 3)
				break;
			PyObject *cl = LD(((PyFunctionObject *)cb)->func_closure);
			if (!cl || KIND(cl) != K_TUPLE)
				break;
			Py_ssize_t nc = LD(((PyVarObject *)cl)->ob_size);
			for (Py_ssize_t j = 0; j < nc && j < 16 && n < max; j++) {
				PyObject *cell = LD(((PyTupleObject *)cl)->ob_item[j]);
				PyObject *v = cell && KIND(cell) == K_CELL ? LD(((PyCellObject *)cell)->ob_ref) : NULL;
				if (v && v != f && is_future(a, v) && !is_task(a, v))
					n += awaiters_of(a, v, out + n, max - n, depth + 1);
			}
			break;
		}
		default:
			break;
		}
		if (t && is_task(a, t)) {
			int dup = 0;
			for (int j = 0; j < n; j++)
				dup |= out[j] == (uint64_t)(uintptr_t)t;
			if (!dup)
				out[n++] = (uint64_t)(uintptr_t)t;
		}
	}
	return n;
}

int rp_task_awaiters(const struct strata_asyncref *a, uint64_t task, uint64_t *out, int max)
{
	remote_begin();
	if (setjmp(remote_fail))
		return -1;
	PyObject *t = (PyObject *)(uintptr_t)task;
	if (!is_task(a, t))
		return -1;
	return awaiters_of(a, t, out, max, 0);
}

/* ===== reader: every task =============================================== */

/* Adds the pending tasks among a set's keys (weak references to them for
 * a WeakSet's `data`, the tasks themselves for 3.12's eager set). */
static int set_tasks(const struct strata_asyncref *a, PyObject *set, uint64_t *out, int n, int max)
{
	if (!set || KIND(set) != K_SET)
		return n;
	PySetObject *s = (PySetObject *)set;
	Py_ssize_t mask = LD(s->mask);
	setentry *table = LD(s->table);
	if (mask < 0 || mask > (1 << 26))
		return n;
	for (Py_ssize_t i = 0; i <= mask && n < max; i++) {
		PyObject *k = LD(table[i].key);
		if (!k)
			continue;
		if (KIND(k) == K_WEAKREF)
			k = LD(((PyWeakReference *)k)->wr_object);
		if (!k || !is_task(a, k))
			continue;
		if (is_a(k, a->task_type) && LD(((st_task *)k)->fut_state) != ST_PENDING)
			continue;
		out[n++] = (uint64_t)(uintptr_t)k;
	}
	return n;
}

int rp_tasks(const struct strata_asyncref *a, uint64_t *out, int max)
{
	remote_begin();
	if (setjmp(remote_fail))
		return -1;
	int n = 0;
	PyObject *all = (PyObject *)(uintptr_t)a->all_tasks;
	if (all)
		n = set_tasks(a, inst_attr(all, "data"), out, n, max);
	if (a->eager_tasks)
		n = set_tasks(a, (PyObject *)(uintptr_t)a->eager_tasks, out, n, max);
	return n;
}

#else /* !ASYNC_SUPPORTED */
int rp_task_read(const struct strata_asyncref *a, uint64_t task, struct strata_taskinfo *info,
		 struct strata_pyframe *fr, int max)
{
	(void)a, (void)task, (void)info, (void)fr, (void)max;
	return -1;
}
int rp_task_awaiters(const struct strata_asyncref *a, uint64_t task, uint64_t *out, int max)
{
	(void)a, (void)task, (void)out, (void)max;
	return -1;
}
int rp_tasks(const struct strata_asyncref *a, uint64_t *out, int max)
{
	(void)a, (void)out, (void)max;
	return -1;
}
#endif
#endif /* STRATA_REMOTE */
