/*
 * pyasync-read.c — asyncio read from outside (reader build only; used by
 * the helper and by `strata stack`; docs/async.md): where the target keeps
 * its tasks (checking every layout pyasync.h writes out), one task (its
 * name, loop, the chain of coroutines it is suspended in and what it
 * awaits at the bottom), every pending task in turn, and the thread that
 * runs a loop.
 *
 * Who awaits a task is pyasync-await.c; the objects both read, pyasync.c.
 */
#include "pyasync.h"

#ifdef STRATA_REMOTE

#include <stdlib.h>
#include <string.h>

/* ===== finding asyncio ================================================== */

/* The module named `name` in sys.modules, or NULL. */
/* Module `name` in sys.modules, looked for among its entries from index
 * `from` on. */
static PyObject *sys_module_from(const char *name, Py_ssize_t from)
{
	PyInterpreterState *interp = LD(RUNTIME->interpreters.main);
	if (!interp)
		return NULL;
#if PY_VERSION_HEX < 0x030C0000
	PyObject *mods = LD(interp->modules);
#else
	PyObject *mods = LD(interp->imports.modules);
#endif
	PyObject *m = async_dict_get_from(mods, from, name);
	return m && KIND(m) == K_MODULE ? m : NULL;
}

static PyObject *sys_module(const char *name) { return sys_module_from(name, 0); }

/* A module's globals: md_dict, the first member of PyModuleObject (in
 * internal/pycore_moduleobject.h from 3.10; the same before). */
static PyObject *module_dict(PyObject *m) { return LD(((PyObject **)m)[2]); }

static int type_check(PyObject *tp, const char *what, size_t size, Py_ssize_t dictoff, Py_ssize_t weakoff,
		      char *why, size_t n)
{
	PyTypeObject *t = (PyTypeObject *)tp;
	Py_ssize_t bs = LD(t->tp_basicsize), d = LD(t->tp_dictoffset), w = LD(t->tp_weaklistoffset);
	int ok = (size_t)bs == size && w == weakoff && d == dictoff;
	if (!ok && why)
		snprintf(why, n, "_asyncio.%s of Python %s is laid out otherwise than the agent module reads it "
			 "(size %zd, dict at %zd, weak references at %zd; the module: %zu, %zd, %zd): tasks are not shown",
			 what, PY_VERSION, bs, d, w, size, dictoff, weakoff);
	return ok ? 0 : -1;
}

/* 3.8-3.10: whether sys.modules reads as a dict of str keys. */
static int dict_layout_ok(PyObject *mods)
{
	enum { MAXE = 64 };
	PyObject *k[MAXE];
	int n = async_dict_items(mods, k, NULL, MAXE);
	if (n <= 0)
		return 0;
	for (int i = 0; i < n; i++)
		if (KIND(k[i]) != K_STR)
			return 0;
	return 1;
}

/* The str object among function fn's code's co_names that reads `name`:
 * the interned key under which the function's STORE_ATTR puts the
 * attribute, hence the key of every instance's dict. 0 if none. */
static uint64_t name_key(PyObject *fn, const char *name)
{
	if (!fn || KIND(fn) != K_FUNC)
		return 0;
	PyCodeObject *co = (PyCodeObject *)LD(((PyFunctionObject *)fn)->func_code);
	if (!co || TYPE_OF(co) != T_CODE)
		return 0;
	PyObject *names = LD(co->co_names);
	if (!names || KIND(names) != K_TUPLE)
		return 0;
	Py_ssize_t nn = LD(((PyVarObject *)names)->ob_size);
	for (Py_ssize_t i = 0; i < nn && i < 512; i++) {
		PyObject *s = LD(((PyTupleObject *)names)->ob_item[i]);
		if (s && async_str_eq(s, name))
			return (uint64_t)(uintptr_t)s;
	}
	return 0;
}

/* A class's own attribute (its tp_dict). */
static PyObject *class_attr(PyObject *type, const char *name)
{
	if (!type)
		return NULL;
	return async_dict_get(LD(((PyTypeObject *)type)->tp_dict), name);
}

/* The set object a WeakSet keeps its references in (WeakSet.data). */
static PyObject *weakset_data(PyObject *ws)
{
	PyObject *d = ws ? async_inst_attr(ws, 0, "data") : NULL;
	return d && KIND(d) == K_SET ? d : NULL;
}

#if PY_VERSION_HEX >= 0x030E0000
/* 3.14+: the module's debug offsets, against what this module reads. */
static int debug_check(uint64_t at, char *why, size_t n)
{
	struct st_asyncio_debug d;
	if (RENV.read(RENV.ctx, &d, at, sizeof(d))) {
		snprintf(why, n, "the _asyncio debug offsets of Python %s are unreadable: tasks are not shown", PY_VERSION);
		return -1;
	}
	const struct {
		const char *what;
		uint64_t got, want;
	} f[] = {
		{ "task size", d.task.size, sizeof(st_task) },
		{ "task name", d.task.task_name, offsetof(st_task, task_name) },
		{ "task awaited_by", d.task.task_awaited_by, offsetof(st_task, fut_awaited_by) },
		{ "task is_task", d.task.task_is_task, offsetof(st_task, fut_is_task) },
		{ "task awaited_by_is_set", d.task.task_awaited_by_is_set, offsetof(st_task, fut_awaited_by_is_set) },
		{ "task coro", d.task.task_coro, offsetof(st_task, task_coro) },
		{ "task node", d.task.task_node, offsetof(st_task, task_node) },
		{ "interpreter tasks", d.interp.tasks_head, offsetof(PyInterpreterState, asyncio_tasks_head) },
		{ "thread running loop", d.thread.running_loop, offsetof(_PyThreadStateImpl, asyncio_running_loop) },
		{ "thread running task", d.thread.running_task, offsetof(_PyThreadStateImpl, asyncio_running_task) },
		{ "thread tasks", d.thread.tasks_head, offsetof(_PyThreadStateImpl, asyncio_tasks_head) },
	};
	/* The thread state's size is not compared: the interpreter's build
	 * may end it with fields (its JIT's, statistics) that its headers
	 * show only under that build's own defines; what is read lies
	 * before them, at the offsets compared. */
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (f[i].got != f[i].want) {
			snprintf(why, n, "the _asyncio module of this Python publishes another layout than the Python %s "
				 "headers the agent module was built from (%s: %llu, the module reads %llu): tasks are "
				 "not shown", PY_VERSION, f[i].what, (unsigned long long)f[i].got,
				 (unsigned long long)f[i].want);
			return -1;
		}
	return 0;
}
#endif

static int asyncio_find_(uint64_t debug, struct strata_asyncref *out, char *why, size_t n)
{
	memset(out, 0, sizeof(*out));
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
	/* Where the last search of sys.modules for asyncio.tasks stopped,
	 * not finding it: the same keys table (no resize since), so only the
	 * entries added since are looked at (a dict appends them), and none
	 * when none were added. Reading every module's name every 100 ms was
	 * most of the helper's time, for the whole run of a program without
	 * asyncio (1455 modules loaded), and through a program's imports. */
	PyDictKeysObject *keys = LD(((PyDictObject *)mods)->ma_keys);
	Py_ssize_t nent = async_dict_nentries(mods);
	Py_ssize_t from = 0;
	uint64_t m = (uint64_t)(uintptr_t)mods, k = (uint64_t)(uintptr_t)keys;
	if (RT->absent.mods == m && RT->absent.keys == k && nent >= RT->absent.searched) {
		if (nent == RT->absent.searched)
			return 1;
		from = (Py_ssize_t)RT->absent.searched;
	}
	PyObject *tm = sys_module_from("asyncio.tasks", from);
	if (!tm) {
		RT->absent.mods = nent >= 0 ? m : 0;
		RT->absent.keys = k;
		RT->absent.searched = nent;
		return 1; /* asyncio not imported (yet) */
	}
	RT->absent.mods = 0;
	PyObject *g = module_dict(tm);
	PyObject *cur = async_dict_get(g, "_current_tasks");
	PyObject *task = async_dict_get(g, "Task");
	PyObject *pytask = async_dict_get(g, "_PyTask");
	PyObject *fm = sys_module("asyncio.futures");
	PyObject *fg = fm ? module_dict(fm) : NULL;
	PyObject *fut = fg ? async_dict_get(fg, "Future") : NULL;
	PyObject *pyfut = fg ? async_dict_get(fg, "_PyFuture") : NULL;
	if (!cur || KIND(cur) != K_DICT || !task || !fut) {
		/* asyncio.tasks is being imported: not all of it is there. */
		return 1;
	}
	PyObject *cm = sys_module("_asyncio");
	PyObject *ctask = cm ? async_dict_get(module_dict(cm), "Task") : NULL;
	PyObject *cfut = cm ? async_dict_get(module_dict(cm), "Future") : NULL;
	if (ctask && ctask == task) {
		if (type_check(ctask, "Task", sizeof(st_task), ST_DICTOFF(st_task), ST_WEAKOFF(st_task), why, n) ||
		    !cfut || type_check(cfut, "Future", sizeof(st_future), ST_DICTOFF(st_future), ST_WEAKOFF(st_future), why, n))
			return -1;
#if PY_VERSION_HEX >= 0x030E0000
		if (!debug)
			return 2;
		if (debug == UINT64_MAX) {
			snprintf(why, n, "the _asyncio module of this Python %s has no debug offsets (.AsyncioDebug "
				 "section): tasks are not shown", PY_VERSION);
			return -1;
		}
		if (debug_check(debug, why, n))
			return -1;
		out->debug = debug;
		out->tstate_task = 1;
#else
		(void)debug;
#endif
		out->task_type = (uint64_t)(uintptr_t)ctask;
		out->future_type = (uint64_t)(uintptr_t)cfut;
	}
	/* The pure-Python classes (all tasks when _asyncio is missing; any
	 * task a task factory makes from _PyTask otherwise): their fields
	 * are instance attributes, found by their interned names. */
	if (pytask && KIND(pytask) == K_TYPE && pytask != ctask) {
		out->py_task_type = (uint64_t)(uintptr_t)pytask;
		PyObject *init = class_attr(pytask, "__init__");
		out->key_coro = name_key(init, "_coro");
		out->key_name = name_key(init, "_name");
		out->key_loop = name_key(class_attr(pyfut, "__init__"), "_loop");
	}
	if (pyfut && KIND(pyfut) == K_TYPE && pyfut != cfut)
		out->py_future_type = (uint64_t)(uintptr_t)pyfut;
#if PY_VERSION_HEX >= 0x030E0000
	out->key_awaited_by = name_key(fg ? async_dict_get(fg, "_py_future_add_to_awaited_by") : NULL,
				       "_Future__asyncio_awaited_by");
#endif
	out->current_tasks = (uint64_t)(uintptr_t)cur;
	/* Every task, for the waiting ones: a WeakSet (3.8-3.11 _all_tasks;
	 * 3.12+ _scheduled_tasks, with eagerly started ones in a set; 3.14+
	 * the tasks that are not C tasks, which are on the threads' lists). */
	PyObject *all = async_dict_get(g, "_scheduled_tasks");
	if (!all)
		all = async_dict_get(g, "_all_tasks");
	out->all_tasks = (uint64_t)(uintptr_t)weakset_data(all);
	PyObject *eager = async_dict_get(g, "_eager_tasks");
	out->eager_tasks = eager && KIND(eager) == K_SET ? (uint64_t)(uintptr_t)eager : 0;
	return 0;
}

int rp_asyncio_find(uint64_t debug, struct strata_asyncref *out, char *why, size_t n)
{
	remote_begin();
	if (setjmp(remote_fail))
		return 1; /* unreadable now (being set up): try again later */
	return asyncio_find_(debug, out, why, n);
}

/* ===== one task ========================================================= */

enum { F_NAME, F_WAITER, F_LOOP };

/* A C task's fields, or a pure-Python one's attributes. */
static PyObject *task_field(const struct strata_asyncref *a, PyObject *t, int which)
{
	if (async_is_a(t, a->task_type)) {
		st_task *ct = (st_task *)t;
		switch (which) {
		case F_NAME: return LD(ct->task_name);
		case F_WAITER: return LD(ct->task_fut_waiter);
		case F_LOOP: return LD(ct->fut_loop);
		}
		return NULL;
	}
	switch (which) {
	case F_NAME: return async_inst_attr(t, a->key_name, "_name");
	case F_WAITER: return async_inst_attr(t, 0, "_fut_waiter");
	case F_LOOP: return async_inst_attr(t, a->key_loop, "_loop");
	}
	return NULL;
}

/* An int object's value (non-negative, up to 64 bits); 0 and -1 if it is
 * not one. */
static int long_value(PyObject *o, uint64_t *out)
{
	if (!o || KIND(o) != K_INT)
		return -1;
	PyLongObject *l = (PyLongObject *)o;
#if PY_VERSION_HEX < 0x030C0000
	Py_ssize_t nd = LD(l->ob_base.ob_size);
	digit *d = l->ob_digit;
#else
	uintptr_t tag = LD(l->long_value.lv_tag);
	if ((tag & 3) == 2)
		return -1; /* negative */
	Py_ssize_t nd = (Py_ssize_t)(tag >> _PyLong_NON_SIZE_BITS);
	digit *d = l->long_value.ob_digit;
#endif
	if (nd < 0 || nd > 3)
		return -1;
	uint64_t v = 0;
	for (Py_ssize_t i = nd; i-- > 0;)
		v = v << PyLong_SHIFT | LD(d[i]);
	*out = v;
	return 0;
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
#elif PY_VERSION_HEX < 0x030E0000
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
#else
	/* 3.14+: the frame's stack pointer (into the frame, which lives in
	 * the generator), its entries tagged references. */
	int8_t st = LD(g->gi_frame_state);
#if PY_VERSION_HEX < 0x030F0000
	int suspended = st == FRAME_SUSPENDED_YIELD_FROM;
#else
	int suspended = st == FRAME_SUSPENDED_YIELD_FROM || st == FRAME_SUSPENDED_YIELD_FROM_LOCKED;
#endif
	if (suspended) {
		_PyInterpreterFrame *f = (_PyInterpreterFrame *)&g->gi_iframe;
		_PyStackRef *sp = LD(f->stackpointer);
		ptrdiff_t depth = sp - f->localsplus;
		if (depth > 0 && depth < 65536) {
			uintptr_t bits = LD(sp[-1].bits);
#if PY_VERSION_HEX >= 0x030F0000
			/* 3.15 suspends with the receiver under a null
			 * reference (read off live coroutines: cr_await is
			 * the second entry from the top). */
			if (!(bits & ~(uintptr_t)Py_TAG_BITS) && depth > 1)
				bits = LD(sp[-2].bits);
#endif
			if ((bits & Py_INT_TAG) != Py_INT_TAG)
				yf = (PyObject *)(bits & ~(uintptr_t)Py_TAG_BITS);
		}
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

/* A coroutine's code object, also once it finished (3.11+ clear the frame
 * but keep its code; 3.8-3.10 keep gi_code). */
static PyObject *gen_code(PyObject *gen)
{
#if PY_VERSION_HEX < 0x030B0000
	PyObject *co = LD(((PyGenObject *)gen)->gi_code);
	return co && TYPE_OF(co) == T_CODE ? co : NULL;
#else
	return (PyObject *)py_frame_code((void *)&((PyGenObject *)gen)->gi_iframe);
#endif
}

/* A frame's first local (`self` of a method). */
static PyObject *frame_local0(void *frame)
{
#if PY_VERSION_HEX < 0x030B0000
	return LD(((PyFrameObject *)frame)->f_localsplus[0]);
#elif PY_VERSION_HEX < 0x030E0000
	return LD(((_PyInterpreterFrame *)frame)->localsplus[0]);
#else
	uintptr_t bits = LD(((_PyInterpreterFrame *)frame)->localsplus[0].bits);
	return (bits & Py_INT_TAG) == Py_INT_TAG ? NULL : (PyObject *)(bits & ~(uintptr_t)Py_TAG_BITS);
#endif
}

static void read_name(const struct strata_asyncref *a, PyObject *t, struct strata_taskinfo *info)
{
	PyObject *name = task_field(a, t, F_NAME);
	uint64_t v;
	if (name && KIND(name) == K_STR) {
		char *s = py_read_strobj((uint64_t)(uintptr_t)name);
		if (s) {
			snprintf(info->name, sizeof(info->name), "%s", s);
			free(s);
		}
	} else if (long_value(name, &v) == 0) {
		/* 3.12+ name a task by its number until asked (Task-N). */
		snprintf(info->name, sizeof(info->name), "Task-%llu", (unsigned long long)v);
	}
	if (!info->name[0])
		snprintf(info->name, sizeof(info->name), "Task@%llx", (unsigned long long)(uintptr_t)t);
}

#define CHAIN_MAX 256

/* Reads task t: its name (if asked) into info, its coroutine chain's
 * frames into fr (leaf first: the innermost coroutine, where it is
 * suspended or running, first), and what it awaits at the bottom of the
 * chain. */
static int task_read_(const struct strata_asyncref *a, PyObject *t, int name, struct strata_taskinfo *info,
		      struct strata_pyframe *fr, int max)
{
	memset(info, 0, sizeof(*info));
	if (!async_is_task(a, t))
		return -1;
	if (name)
		read_name(a, t, info);
	PyObject *coro = async_task_coro(a, t);
	info->coro = (uint64_t)(uintptr_t)coro;
	info->loop = (uint64_t)(uintptr_t)task_field(a, t, F_LOOP);
	if (!coro)
		return -1;
	PyObject *code = KIND(coro) == K_CORO || KIND(coro) == K_GEN ? gen_code(coro) : NULL;
	if (code) {
		info->code = (uint64_t)(uintptr_t)code;
		info->first = (uint16_t)LD(((PyCodeObject *)code)->co_firstlineno);
	}
	info->running = gen_running(coro);
	info->done = async_gen_frame(coro) == NULL;
	info->waiter = (uint64_t)(uintptr_t)task_field(a, t, F_WAITER);
	/* The chain, outermost first, kept leaf first in fr. */
	struct strata_pyframe chain[CHAIN_MAX];
	int n = 0;
	PyObject *o = coro;
	for (int depth = 0; o && depth < CHAIN_MAX; depth++) {
		int k = KIND(o);
		if (k != K_CORO && k != K_GEN)
			break;
		void *f = async_gen_frame(o);
		if (!f || py_frame_info(f, &chain[n]))
			break;
		n++;
		PyObject *next = gen_awaiting(o);
		if (!next)
			break;
		int nk = KIND(next);
		if (nk == K_GEN || nk == K_CORO) {
			/* A pure-Python future's __await__ is a generator
			 * whose self is the future (or task). */
			void *nf = async_gen_frame(next);
			PyObject *self = nf && nk == K_GEN ? frame_local0(nf) : NULL;
			if (self && async_is_future(a, self)) {
				info->awaits = (uint64_t)(uintptr_t)self;
				break;
			}
			o = next;
			continue;
		}
		if (nk == K_FUTITER)
			info->awaits = (uint64_t)(uintptr_t)LD(((st_futureiter *)next)->future);
		else if (async_is_future(a, next))
			info->awaits = (uint64_t)(uintptr_t)next;
		break;
	}
	if (!info->awaits)
		info->awaits = info->waiter;
	if (info->awaits && async_is_task(a, (PyObject *)(uintptr_t)info->awaits))
		info->awaits_task = 1;
	int k = 0;
	for (int i = n; i-- > 0 && k < max;)
		fr[k++] = chain[i];
	info->nframes = (uint32_t)n;
	return k;
}

int rp_task_read(const struct strata_asyncref *a, uint64_t task, int name, struct strata_taskinfo *info,
		 struct strata_pyframe *fr, int max)
{
	remote_begin();
	if (setjmp(remote_fail))
		return -1;
	return task_read_(a, (PyObject *)(uintptr_t)task, name, info, fr, max);
}

/* ===== every task, in turn =============================================== */

/* Whether task t is still pending (a C task's state; a pure-Python one's
 * coroutine not finished). */
static int pending(const struct strata_asyncref *a, PyObject *t)
{
	if (async_is_a(t, a->task_type))
		return LD(((st_task *)t)->fut_state) == ST_PENDING;
	if (!async_is_a(t, a->py_task_type))
		return 0;
	PyObject *coro = async_task_coro(a, t);
	return coro && async_gen_frame(coro) != NULL;
}

/* The lists tasks_next goes through, in order. */
enum {
#if PY_VERSION_HEX >= 0x030E0000
	SRC_THREADS,   /* each thread state's list of C tasks */
	SRC_INTERP,    /* the interpreter's: C tasks of threads that ended */
#endif
	SRC_ALL,       /* the WeakSet of the other tasks */
	SRC_EAGER,     /* 3.12+: eagerly started tasks */
	SRC_END,
};

#if PY_VERSION_HEX >= 0x030E0000
/* Whether thread state ts is (still) in the main interpreter's list. */
static int thread_live(PyInterpreterState *interp, PyThreadState *ts)
{
	int guard = 0;
	for (PyThreadState *t = LD(interp->threads.head); t && guard < 10000; t = LD(t->next), guard++)
		if (t == ts)
			return 1;
	return 0;
}

/* From list head `head` (a struct llist_node in a thread or interpreter
 * state), the C tasks after node c->pos (0: from the first), up to max
 * into out; c->pos is left at the last one taken, 0 once the list ended. */
static int list_tasks(const struct strata_asyncref *a, struct llist_node *head, struct strata_taskcursor *c,
		      uint64_t *out, int max, int *budget)
{
	int n = 0;
	struct llist_node *node = (struct llist_node *)(uintptr_t)c->pos;
	if (node) {
		/* The last task taken may have been freed since: go on from
		 * it only if it is still linked where it was. */
		st_task *t = (st_task *)((char *)node - offsetof(st_task, task_node));
		struct llist_node *next = async_is_a((PyObject *)t, a->task_type) ? LD(node->next) : NULL;
		node = next && LD(next->prev) == node ? next : LD(head->next);
	} else {
		node = LD(head->next);
	}
	for (; node && node != head && n < max && (*budget)-- > 0; node = LD(node->next)) {
		PyObject *t = (PyObject *)((char *)node - offsetof(st_task, task_node));
		c->pos = (uint64_t)(uintptr_t)node;
		if (async_is_a(t, a->task_type) && pending(a, t))
			out[n++] = (uint64_t)(uintptr_t)t;
	}
	if (!node || node == head)
		c->pos = 0;
	return n;
}
#endif

static int tasks_next_(const struct strata_asyncref *a, struct strata_taskcursor *c, uint64_t *out, int max,
		       int *wrapped)
{
	int n = 0, budget = max * 8 + 1024, rounds = 0;
	*wrapped = 0;
#if PY_VERSION_HEX >= 0x030E0000
	PyInterpreterState *interp = LD(RUNTIME->interpreters.main);
#endif
	while (n < max && budget > 0) {
		switch (c->source) {
#if PY_VERSION_HEX >= 0x030E0000
		case SRC_THREADS: {
			if (!a->tstate_task || !interp) {
				c->source = SRC_INTERP;
				continue;
			}
			PyThreadState *ts = (PyThreadState *)(uintptr_t)c->list;
			if (!ts || !thread_live(interp, ts)) {
				ts = LD(interp->threads.head);
				c->pos = 0;
			}
			if (!ts) {
				c->source = SRC_INTERP;
				c->list = c->pos = 0;
				continue;
			}
			c->list = (uint64_t)(uintptr_t)ts;
			n += list_tasks(a, &((_PyThreadStateImpl *)ts)->asyncio_tasks_head, c, out + n, max - n, &budget);
			if (!c->pos) {
				/* This thread's list ended: the next thread's. */
				PyThreadState *next = LD(ts->next);
				c->list = (uint64_t)(uintptr_t)next;
				if (!next)
					c->source = SRC_INTERP;
			}
			break;
		}
		case SRC_INTERP:
			if (a->tstate_task && interp)
				n += list_tasks(a, &interp->asyncio_tasks_head, c, out + n, max - n, &budget);
			else
				c->pos = 0;
			if (!c->pos) {
				c->source = SRC_ALL;
				c->list = 0;
			}
			break;
#endif
		case SRC_ALL:
		case SRC_EAGER: {
			PyObject *set = (PyObject *)(uintptr_t)(c->source == SRC_ALL ? a->all_tasks : a->eager_tasks);
			if (set && KIND(set) == K_SET) {
				PyObject *k[64];
				int want = max - n < 64 ? max - n : 64;
				int m = async_set_keys(set, k, want, &c->pos, budget);
				budget -= m > 0 ? m : 1;
				for (int i = 0; i < m; i++)
					if (async_is_task(a, k[i]) && pending(a, k[i]))
						out[n++] = (uint64_t)(uintptr_t)k[i];
				if (m < 0)
					c->pos = UINT64_MAX;
			} else {
				c->pos = UINT64_MAX;
			}
			if (c->pos == UINT64_MAX) {
				c->pos = 0;
				c->source++;
			}
			break;
		}
		default:
			/* A round is complete: start again from the first list. */
			memset(c, 0, sizeof(*c));
			*wrapped = 1;
			if (++rounds > 1 || n)
				return n;
			break;
		}
	}
	return n;
}

int rp_tasks_next(const struct strata_asyncref *a, struct strata_taskcursor *c, uint64_t *out, int max, int *wrapped)
{
	remote_begin();
	*wrapped = 0;
	if (setjmp(remote_fail)) {
		/* Something went away under the cursor: start the round over. */
		memset(c, 0, sizeof(*c));
		return -1;
	}
	return tasks_next_(a, c, out, max, wrapped);
}

/* ===== the thread of a loop ============================================== */

static int loop_thread_(const struct strata_asyncref *a, PyObject *loop, uint64_t *pthread_id, uint32_t *tid)
{
	*pthread_id = 0;
	*tid = 0;
	if (!loop)
		return -1;
#if PY_VERSION_HEX >= 0x030E0000
	/* 3.14+: each thread state names the loop it runs. */
	PyInterpreterState *interp = LD(RUNTIME->interpreters.main);
	int guard = 0;
	if (a->tstate_task && interp)
		for (PyThreadState *ts = LD(interp->threads.head); ts && guard < 10000; ts = LD(ts->next), guard++)
			if (LD(((_PyThreadStateImpl *)ts)->asyncio_running_loop) == loop) {
				*pthread_id = (uint64_t)LD(ts->thread_id);
				*tid = (uint32_t)LD(ts->native_thread_id);
				return 0;
			}
#else
	(void)a;
#endif
	/* asyncio's own loops note the thread that runs them (run_forever
	 * sets _thread_id to threading.get_ident()). */
	uint64_t v;
	if (long_value(async_inst_attr(loop, 0, "_thread_id"), &v) == 0 && v) {
		*pthread_id = v;
		return 0;
	}
	return -1;
}

int rp_loop_thread(const struct strata_asyncref *a, uint64_t loop, uint64_t *pthread_id, uint32_t *tid)
{
	remote_begin();
	if (setjmp(remote_fail))
		return -1;
	return loop_thread_(a, (PyObject *)(uintptr_t)loop, pthread_id, tid);
}

#endif /* STRATA_REMOTE */
