/*
 * pyasync.c — asyncio's objects as both builds of the per-version module
 * read them (dicts, coroutines, instance attributes, task fields:
 * pyasync.h), and the signal handler's half of asyncio (docs/async.md):
 * which task the sampled thread is running, with what the handler can
 * tell of it (the task's frame in the walk, its name) in case the task is
 * gone by the time the helper reads it. The reader's half (every task, its
 * chain, its awaiters) is pyasync-read.c.
 *
 * Every load goes through LD() (py-internal.h): plain loads under the fault
 * guard in the handler, checked reads of the target in the reader build.
 */
#include "pyasync.h"

#include <stdlib.h>
#include <string.h>

/* ===== objects ========================================================= */

int async_dict_items(PyObject *d, PyObject **keys, PyObject **vals, int max)
{
	return async_dict_items_from(d, 0, keys, vals, max);
}

Py_ssize_t async_dict_nentries(PyObject *d)
{
	PyDictKeysObject *dk = LD(((PyDictObject *)d)->ma_keys);
	if (!dk)
		return -1;
#if PY_VERSION_HEX < 0x030B0000
	return LD(((st_dictkeys *)dk)->dk_nentries);
#else
	return LD(dk->dk_nentries);
#endif
}

int async_dict_items_from(PyObject *d, Py_ssize_t start, PyObject **keys, PyObject **vals, int max)
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
	for (Py_ssize_t i = start; i < used && i < DICT_SCAN_MAX && n < max; i++) {
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
	for (Py_ssize_t i = start; i < used && i < DICT_SCAN_MAX && n < max; i++) {
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

void *async_gen_frame(PyObject *gen)
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

int async_is_a(PyObject *o, uint64_t base)
{
	if (!o || !base)
		return 0;
	PyTypeObject *tp = TYPE_OF(o);
	/* A base that is not 8-byte aligned is not a type (TYPE_OF checks
	 * the first): reading its tp_base would be a misaligned access. */
	for (int i = 0; tp && ALIGNED8(tp) && i < 8; i++, tp = LD(tp->tp_base))
		if ((uint64_t)(uintptr_t)tp == base)
			return 1;
	return 0;
}

/* Whether dict key k is the one asked for: by address, or (reader, no
 * address known) by its text. */
static int key_is(PyObject *k, uint64_t key, const char *name)
{
	if (key)
		return (uint64_t)(uintptr_t)k == key;
#ifdef STRATA_REMOTE
	return name && async_str_eq(k, name);
#else
	(void)name;
	return 0;
#endif
}

/* The value for key in dict d. */
static PyObject *dict_lookup(PyObject *d, uint64_t key, const char *name)
{
	enum { MAXE = 256 };
	PyObject *k[MAXE], *v[MAXE];
	int n = async_dict_items(d, k, v, MAXE);
	for (int i = 0; i < n; i++)
		if (key_is(k[i], key, name))
			return v[i];
	return NULL;
}

PyObject *async_inst_attr(PyObject *o, uint64_t key, const char *name)
{
	if (!o)
		return NULL;
	PyTypeObject *tp = TYPE_OF(o);
	if (!tp)
		return NULL;
	PyObject *dict = NULL;
#if PY_VERSION_HEX < 0x030B0000
	Py_ssize_t off = LD(tp->tp_dictoffset);
	if (off <= 0)
		return NULL;
	dict = LD(*(PyObject **)((char *)o + off));
	return dict ? dict_lookup(dict, key, name) : NULL;
#else
	unsigned long flags = LD(tp->tp_flags);
	if (!(flags & Py_TPFLAGS_MANAGED_DICT)) {
		Py_ssize_t off = LD(tp->tp_dictoffset);
		if (off <= 0)
			return NULL;
		dict = LD(*(PyObject **)((char *)o + off));
		return dict ? dict_lookup(dict, key, name) : NULL;
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
		return dict_lookup(dict, key, name);
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
		if (key_is(LD(e[i].me_key), key, name))
			return LD(values->values[i]);
	return NULL;
#endif
}

PyObject *async_task_coro(const struct strata_asyncref *a, PyObject *t)
{
	if (async_is_a(t, a->task_type))
		return LD(((st_task *)t)->task_coro);
	if (a->py_task_type && async_is_a(t, a->py_task_type))
		return async_inst_attr(t, a->key_coro, "_coro");
	return NULL;
}

#ifdef STRATA_REMOTE
/* ---- type kinds (reader) ------------------------------------------------ */

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
	{ "functools.partial", K_PARTIAL }, { "type", K_TYPE }, { "NoneType", K_NONE },
};

int async_type_kind(PyTypeObject *tp)
{
	uint64_t a = (uint64_t)(uintptr_t)tp;
	if (!a)
		return K_OTHER;
	for (unsigned i = 0; i < KINDS_CACHE; i++)
		if (RT->kinds.type[i] == a)
			return RT->kinds.kind[i];
	char buf[40] = { 0 };
	const char *nm = LD(tp->tp_name);
	int kind = K_OTHER;
	if (nm && RENV.read(RENV.ctx, buf, (uint64_t)(uintptr_t)nm, sizeof(buf) - 1) == 0) {
		for (size_t i = 0; i < sizeof(kind_names) / sizeof(kind_names[0]); i++)
			if (strcmp(buf, kind_names[i].name) == 0)
				kind = kind_names[i].kind;
	}
	unsigned w = RT->kinds.next++ % KINDS_CACHE;
	RT->kinds.type[w] = a;
	RT->kinds.kind[w] = kind;
	return kind;
}

int async_str_eq(PyObject *s, const char *lit)
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

int async_is_task(const struct strata_asyncref *a, PyObject *o)
{
	return async_is_a(o, a->task_type) || async_is_a(o, a->py_task_type);
}
int async_is_cfuture(const struct strata_asyncref *a, PyObject *o)
{
	return async_is_a(o, a->future_type) || async_is_a(o, a->task_type);
}
int async_is_future(const struct strata_asyncref *a, PyObject *o)
{
	return async_is_cfuture(a, o) || async_is_a(o, a->py_future_type) || async_is_a(o, a->py_task_type);
}

/* A set's keys into out (up to max), weak references followed. */
int async_set_keys(PyObject *set, PyObject **out, int max, uint64_t *pos, int budget)
{
	PySetObject *s = (PySetObject *)set;
	Py_ssize_t mask = LD(s->mask);
	setentry *table = LD(s->table);
	if (mask < 0 || mask > (1 << 26) || !table)
		return -1;
	int n = 0;
	uint64_t i = pos ? *pos : 0;
	for (; i <= (uint64_t)mask && n < max && budget-- > 0; i++) {
		PyObject *k = LD(table[i].key);
		if (!k)
			continue;
		if (KIND(k) == K_WEAKREF) {
			k = LD(((PyWeakReference *)k)->wr_object);
			if (!k || KIND(k) == K_NONE)
				continue;
		}
		out[n++] = k;
	}
	if (pos)
		*pos = i > (uint64_t)mask ? UINT64_MAX : i;
	return n;
}

PyObject *async_dict_get(PyObject *d, const char *name)
{
	return async_dict_get_from(d, 0, name);
}

PyObject *async_dict_get_from(PyObject *d, Py_ssize_t start, const char *name)
{
	enum { MAXE = 4096 };
	static PyObject *k[MAXE], *v[MAXE];
	if (!d || KIND(d) != K_DICT)
		return NULL;
	int n = async_dict_items_from(d, start, k, v, MAXE);
	for (int i = 0; i < n; i++)
		if (async_str_eq(k[i], name))
			return v[i];
	return NULL;
}
#endif /* STRATA_REMOTE */

/* ===== handler: the running task ======================================== */

#ifndef STRATA_REMOTE
/* A task's name, as far as the handler can copy it: a compact ASCII str
 * (create_task(name=...), or Task-N once asked for), or 3.12+'s number
 * (Task-N until someone asks). */
static void hint_name(const struct strata_asyncref *a, PyObject *t, struct strata_taskhint *hint)
{
	PyObject *name = NULL;
	if (async_is_a(t, a->task_type))
		name = LD(((st_task *)t)->task_name);
	else if (a->key_name)
		name = async_inst_attr(t, a->key_name, NULL);
	if (!name)
		return;
	PyTypeObject *tp = TYPE_OF(name);
	if (tp == &PyUnicode_Type) {
		PyASCIIObject *s = (PyASCIIObject *)name;
		Py_ssize_t len = LD(s->length);
		if (!LD(s->state.ascii) || !LD(s->state.compact) || len <= 0)
			return;
		size_t n = (size_t)len < sizeof(hint->name) ? (size_t)len : sizeof(hint->name);
		const char *src = (const char *)(s + 1);
		for (size_t i = 0; i < n; i++)
			hint->name[i] = LD(src[i]);
		hint->len = (uint8_t)n;
	} else if (tp == &PyLong_Type) {
#if PY_VERSION_HEX >= 0x030C0000
		PyLongObject *l = (PyLongObject *)name;
		uintptr_t tag = LD(l->long_value.lv_tag);
		if ((tag >> _PyLong_NON_SIZE_BITS) != 1)
			return;
		unsigned long v = (unsigned long)LD(l->long_value.ob_digit[0]);
		char digits[24];
		int nd = 0;
		do
			digits[nd++] = (char)('0' + v % 10);
		while ((v /= 10) && nd < (int)sizeof(digits));
		memcpy(hint->name, "Task-", 5);
		size_t n = 5;
		while (nd > 0 && n < sizeof(hint->name))
			hint->name[n++] = digits[--nd];
		hint->len = (uint8_t)n;
#endif
	}
}

/* The index, in the walk of ts (py_walk's numbering), of `frame`, -1 if
 * it is not on the chain. */
static int chain_index(void *ts, const void *frame)
{
	return frame ? py_chain_index(ts, frame) : -1;
}

uint64_t py_running_task(void *ts, const struct strata_asyncref *a, struct strata_taskhint *hint)
{
	enum { MAXL = 16 };
	hint->at = -1;
	hint->len = 0;
	if (!ts)
		return 0;
#if PY_VERSION_HEX >= 0x030E0000
	/* 3.14+: _asyncio's _enter_task keeps the running task in the
	 * thread state (offset checked against the module's debug
	 * offsets before tstate_task is set). */
	if (a->tstate_task) {
		PyObject *t = LD(((_PyThreadStateImpl *)ts)->asyncio_running_task);
		if (t) {
			hint->at = chain_index(ts, async_gen_frame(async_task_coro(a, t)));
			hint_name(a, t, hint);
			return (uint64_t)(uintptr_t)t;
		}
	}
#endif
	/* _current_tasks (a dict: loop -> the task it runs): the task whose
	 * coroutine's frame is on ts's chain is the one this thread runs,
	 * of however many loops there are. */
	PyObject *tasks[MAXL];
	PyObject *d = (PyObject *)(uintptr_t)a->current_tasks;
	if (!d)
		return 0;
	int n = async_dict_items(d, NULL, tasks, MAXL);
	for (int i = 0; i < n; i++) {
		PyObject *coro = async_task_coro(a, tasks[i]);
		if (!coro)
			continue;
		int at = chain_index(ts, async_gen_frame(coro));
		if (at < 0)
			continue;
		hint->at = at;
		hint_name(a, tasks[i], hint);
		return (uint64_t)(uintptr_t)tasks[i];
	}
	return 0;
}
#endif
