/*
 * pyasync-await.c — who awaits an asyncio task, read from outside (reader
 * build only; docs/async.md, "Who awaits a task"). On 3.14+ the
 * interpreter keeps it: a future's awaited_by, kept by Task.__step,
 * gather, wait, wait_for, shield, as_completed and TaskGroup. Before, it
 * is read from the task's done-callbacks, which is how asyncio itself will
 * wake the awaiter: a task's wakeup; a function whose closure, or a
 * functools.partial whose arguments, hold another future, whose own
 * awaiters are looked for in turn; a method of an object whose
 * _parent_task is a task. 3.14+ fall back on the callbacks too, for
 * futures the interpreter does not track.
 */
#include "pyasync.h"

#ifdef STRATA_REMOTE

#include <string.h>

static void add_task(uint64_t *out, int *n, int max, PyObject *t)
{
	for (int j = 0; j < *n; j++)
		if (out[j] == (uint64_t)(uintptr_t)t)
			return;
	if (*n < max)
		out[(*n)++] = (uint64_t)(uintptr_t)t;
}

#if PY_VERSION_HEX >= 0x030E0000
/* 3.14+: the tasks in f's awaited_by (one object, or a set). */
static int awaited_by(const struct strata_asyncref *a, PyObject *f, uint64_t *out, int max)
{
	PyObject *ab;
	int is_set;
	if (async_is_cfuture(a, f)) {
		ab = LD(((st_future *)f)->fut_awaited_by);
		is_set = LD(((st_future *)f)->fut_awaited_by_is_set) != 0;
	} else {
		ab = async_inst_attr(f, a->key_awaited_by, "_Future__asyncio_awaited_by");
		is_set = 1;
	}
	int n = 0;
	if (!ab)
		return 0;
	if (is_set && KIND(ab) == K_SET) {
		PyObject *k[64];
		int m = async_set_keys(ab, k, 64, NULL, 4096);
		for (int i = 0; i < m; i++)
			if (async_is_task(a, k[i]))
				add_task(out, &n, max, k[i]);
	} else if (async_is_task(a, ab)) {
		add_task(out, &n, max, ab);
	}
	return n;
}
#endif

/* Whether o is a functools.partial laid out as st_partial. */
static int partial_ok(PyObject *o)
{
	PyTypeObject *tp = TYPE_OF(o);
	uint64_t t = (uint64_t)(uintptr_t)tp;
	if (!tp)
		return 0; /* not an object (and good is 0 until one is found) */
	if (t == RT->partial_good)
		return 1;
	if (t == RT->partial_bad)
		return 0;
	int ok = LD(tp->tp_basicsize) == (Py_ssize_t)sizeof(st_partial) &&
		 LD(tp->tp_dictoffset) == (Py_ssize_t)offsetof(st_partial, dict) &&
		 LD(tp->tp_weaklistoffset) == (Py_ssize_t)offsetof(st_partial, weakreflist);
	*(ok ? &RT->partial_good : &RT->partial_bad) = t;
	return ok;
}

static int awaiters_of(const struct strata_asyncref *a, PyObject *f, uint64_t *out, int max, int depth);

/* The futures among the objects of tuple tup (a closure's cells'
 * contents, or a partial's arguments) and who awaits them. */
static int via_tuple(const struct strata_asyncref *a, PyObject *f, PyObject *tup, int cells, uint64_t *out, int max,
		     int depth)
{
	if (!tup || KIND(tup) != K_TUPLE)
		return 0;
	int n = 0;
	Py_ssize_t nc = LD(((PyVarObject *)tup)->ob_size);
	for (Py_ssize_t j = 0; j < nc && j < 16 && n < max; j++) {
		PyObject *v = LD(((PyTupleObject *)tup)->ob_item[j]);
		if (cells)
			v = v && KIND(v) == K_CELL ? LD(((PyCellObject *)v)->ob_ref) : NULL;
		if (v && v != f && async_is_future(a, v) && !async_is_task(a, v)) {
			uint64_t more[16];
			int m = awaiters_of(a, v, more, 16, depth + 1);
			for (int i = 0; i < m; i++)
				add_task(out, &n, max, (PyObject *)(uintptr_t)more[i]);
		}
	}
	return n;
}

/* A future's callbacks (callback0, then the list of (callback, context)
 * tuples), up to max into out; for a pure-Python future, `_callbacks`. */
static int future_callbacks(const struct strata_asyncref *a, PyObject *f, PyObject **out, int max)
{
	int n = 0;
	PyObject *list;
	if (async_is_cfuture(a, f)) {
		st_future *cf = (st_future *)f;
		PyObject *cb0 = LD(cf->fut_callback0);
		if (cb0 && n < max)
			out[n++] = cb0;
		list = LD(cf->fut_callbacks);
	} else {
		list = async_inst_attr(f, 0, "_callbacks");
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

/* The tasks a callback of future f wakes: a task's wakeup (the task
 * awaits f), or a function whose closure holds another future (gather's
 * _done_callback: the gathering future; wait's _on_completion: its
 * waiter; shield's _inner_done_callback: the outer future), or a
 * functools.partial whose arguments do (wait_for before 3.12: its waiter),
 * whose own awaiters are looked for in turn, or a method of an object
 * whose _parent_task is a task (TaskGroup._on_task_done). */
static int awaiters_of(const struct strata_asyncref *a, PyObject *f, uint64_t *out, int max, int depth)
{
	enum { MAXCB = 64 };
	int n = 0;
#if PY_VERSION_HEX >= 0x030E0000
	n = awaited_by(a, f, out, max);
	if (n)
		return n;
#endif
	PyObject *cbs[MAXCB];
	int ncb = future_callbacks(a, f, cbs, MAXCB);
	for (int i = 0; i < ncb && n < max; i++) {
		PyObject *cb = cbs[i], *t = NULL;
		int m = 0;
		uint64_t more[16];
		switch (KIND(cb)) {
		case K_WAKEUP:
			t = (PyObject *)LD(((st_wakeup *)cb)->ww_task);
			break;
		case K_CFUNC:
			t = LD(((PyCFunctionObject *)cb)->m_self);
			break;
		case K_METHOD: {
			PyObject *self = LD(((PyMethodObject *)cb)->im_self);
			if (async_is_task(a, self))
				t = self;
			else if (self)
				t = async_inst_attr(self, 0, "_parent_task");
			break;
		}
		case K_FUNC:
			if (depth < 3)
				m = via_tuple(a, f, LD(((PyFunctionObject *)cb)->func_closure), 1, more, 16, depth);
			break;
		case K_PARTIAL:
			if (depth < 3 && partial_ok(cb))
				m = via_tuple(a, f, LD(((st_partial *)cb)->args), 0, more, 16, depth);
			break;
		default:
			break;
		}
		for (int j = 0; j < m; j++)
			add_task(out, &n, max, (PyObject *)(uintptr_t)more[j]);
		if (t && async_is_task(a, t))
			add_task(out, &n, max, t);
	}
	return n;
}

int rp_task_awaiters(const struct strata_asyncref *a, uint64_t task, uint64_t *out, int max)
{
	remote_begin();
	if (setjmp(remote_fail))
		return -1;
	PyObject *t = (PyObject *)(uintptr_t)task;
	if (!async_is_task(a, t))
		return -1;
	return awaiters_of(a, t, out, max, 0);
}

#endif /* STRATA_REMOTE */
