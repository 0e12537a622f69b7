/*
 * pyasync.h — what the asyncio files of the per-version module share
 * (docs/async.md): the layouts of _asyncio's tasks and futures, which are
 * in no installed header, and the object readers that pyasync.c defines
 * for both builds (the handler's running task, in pyasync.c itself, and
 * the reader's tasks, awaiters and lists, in pyasync-read.c).
 *
 * Each layout written out here is checked on the running interpreter
 * before anything is read through it (pyasync-read.c, asyncio_find):
 *   - 3.8-3.13: sizeof, the dict offset and the weak-reference offset of
 *     the structs against tp_basicsize, tp_dictoffset and
 *     tp_weaklistoffset of the _asyncio.Task and _asyncio.Future types
 *     the running _asyncio built;
 *   - 3.14+: the same, and every offset the _asyncio module publishes for
 *     debuggers (_Py_AsyncioModuleDebugOffsets, its .AsyncioDebug
 *     section): the task's size, name, coroutine, awaited-by set and list
 *     node, the thread state's running task and task list;
 *   - 3.8-3.10's dict keys: on sys.modules, every key of which must read
 *     as a str.
 */
#ifndef STRATA_PYASYNC_H
#define STRATA_PYASYNC_H

#include "py-internal.h"

#if PY_VERSION_HEX >= 0x030B0000
#include <internal/pycore_dict.h>
#include <internal/pycore_object.h>
#endif
#if PY_VERSION_HEX >= 0x030E0000
#include <internal/pycore_llist.h>
#include <internal/pycore_tstate.h>
#endif

/* ===== _asyncio's task and future (Modules/_asynciomodule.c) ============ */

/*
 * FutureObj and TaskObj as each release lays them out (fields in order;
 * the comments say what a version added). The 3.8-3.13 offsets were also
 * read off live objects of 3.8.18, 3.9.18, 3.10.13, 3.11.2, 3.11.7,
 * 3.12.1 and 3.13.0 (docs/async.md); 3.14 and 3.15 publish theirs.
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
#elif PY_VERSION_HEX < 0x030E0000
/* 3.13: the dict and weak references are managed by the interpreter
 * (Py_TPFLAGS_MANAGED_DICT, MANAGED_WEAKREF), the flags are bit fields
 * shared with the task's. */
#define ST_FUT_FIELDS                                                                                 \
	PyObject_HEAD PyObject *fut_loop, *fut_callback0, *fut_context0, *fut_callbacks, *fut_exception, \
		*fut_exception_tb, *fut_result, *fut_source_tb, *fut_cancel_msg, *fut_cancelled_exc;     \
	int fut_state;
#else
/* 3.14, 3.15: who awaits the future (one object, or a set), and two
 * flags kept for external profilers (is it a task; is awaited_by a set). */
#define ST_FUT_FIELDS                                                                                 \
	PyObject_HEAD PyObject *fut_loop, *fut_callback0, *fut_context0, *fut_callbacks, *fut_exception, \
		*fut_exception_tb, *fut_result, *fut_source_tb, *fut_cancel_msg, *fut_cancelled_exc,     \
		*fut_awaited_by;                                                                         \
	int fut_state;                                                                                   \
	char fut_is_task, fut_awaited_by_is_set;
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
#if PY_VERSION_HEX >= 0x030E0000
	/* 3.14: every C task is on its thread's list (tstate->asyncio_tasks_head). */
	struct llist_node task_node;
#endif
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

/* functools.partial (Modules/_functoolsmodule.c, the same on 3.8-3.15):
 * wait_for before 3.12 wakes its waiter through one. Checked against the
 * type's tp_basicsize and offsets before its args are read. */
typedef struct {
	PyObject_HEAD PyObject *fn, *args, *kw, *dict, *weakreflist;
	void *vectorcall;
} st_partial;

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

/* 3.14+: _Py_AsyncioModuleDebugOffsets, what _asyncio publishes in its
 * .AsyncioDebug section for debuggers (offsets in the task object, the
 * interpreter state and the thread state, each after the struct's size). */
struct st_asyncio_debug {
	struct {
		uint64_t size, task_name, task_awaited_by, task_is_task, task_awaited_by_is_set, task_coro, task_node;
	} task;
	struct {
		uint64_t size, tasks_head;
	} interp;
	struct {
		uint64_t size, running_loop, running_task, tasks_head;
	} thread;
};

/* ===== 3.8-3.10's dict keys (Objects/dict-common.h) ===================== */

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

/* ===== objects (pyasync.c; every load through LD) ======================= */

/* Up to max live entries of dict d into keys/vals (either may be NULL).
 * Returns how many, -1 if d does not read as a dict. */
int async_dict_items(PyObject *d, PyObject **keys, PyObject **vals, int max);
/* The same, from the entry at index `start` of its entries table on (a
 * dict appends new entries there: from the count it had, what was added
 * since, until it is resized). */
int async_dict_items_from(PyObject *d, Py_ssize_t start, PyObject **keys, PyObject **vals, int max);
/* How many entries d's entries table has used (live and deleted); -1. */
Py_ssize_t async_dict_nentries(PyObject *d);
/* The coroutine's (or generator's) frame, NULL once it finished. */
void *async_gen_frame(PyObject *gen);
/* Whether o's type is `base` or derives from it (a few levels). */
int async_is_a(PyObject *o, uint64_t base);
/* Attribute of an instance of a Python class, from its __dict__ (or,
 * 3.11+, the values the interpreter keeps in or before the object), or
 * NULL: the key whose address is `key`, or (reader build, key 0) whose
 * text is `name`. Slots and properties are not looked at. */
PyObject *async_inst_attr(PyObject *o, uint64_t key, const char *name);
/* The task's coroutine (a C task's field, a pure-Python one's _coro). */
PyObject *async_task_coro(const struct strata_asyncref *a, PyObject *t);

#ifdef STRATA_REMOTE
/* Type kinds (reader): told by name, as no type's address is given. */
enum tkind {
	K_OTHER = 0, K_DICT, K_STR, K_INT, K_TUPLE, K_LIST, K_SET, K_CORO, K_GEN, K_FUNC, K_METHOD, K_CFUNC,
	K_CELL, K_WEAKREF, K_MODULE, K_FUTITER, K_WAKEUP, K_PARTIAL, K_TYPE, K_NONE,
};
int async_type_kind(PyTypeObject *tp);
#define KIND(o) async_type_kind(TYPE_OF(o))
/* Whether str object s equals the ASCII literal lit. */
int async_str_eq(PyObject *s, const char *lit);
/* The value of key `name` (a str) in dict d, or NULL. */
PyObject *async_dict_get(PyObject *d, const char *name);
/* The same among the entries from index `start` on. */
PyObject *async_dict_get_from(PyObject *d, Py_ssize_t start, const char *name);
/* Whether o is a task (C or pure-Python), a C future (or task), any future. */
int async_is_task(const struct strata_asyncref *a, PyObject *o);
int async_is_cfuture(const struct strata_asyncref *a, PyObject *o);
int async_is_future(const struct strata_asyncref *a, PyObject *o);
/* Up to max keys of set `set` into out, weak references followed to what
 * they refer to, from table index *pos (pos NULL: from the start), looking
 * at no more than `budget` entries; *pos is left where to go on
 * (UINT64_MAX past the end). How many, -1 if set does not read as one. */
int async_set_keys(PyObject *set, PyObject **out, int max, uint64_t *pos, int budget);
#endif

#endif
