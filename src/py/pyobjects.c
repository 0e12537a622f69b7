/*
 * pyobjects.c — the per-version knowledge of objects that allocation
 * sampling needs (strata record --objects, docs/objects.md): which object
 * a block returned by PyObject_Malloc holds, and a type's name.
 *
 * The allocator hook sees a block before the object in it is set up; its
 * type is read later, while the block is still allocated (at its free, or
 * by the helper while it lives). Where the object starts in its block
 * depends on the type: GC objects have a PyGC_Head before them, and since
 * 3.11 objects with a managed dict (3.12+: or managed weak references)
 * have two more words in front (_PyType_PreHeaderSize). So each possible
 * offset is tried, and a candidate counts only when the type found there
 * is a type (its own type is `type` or a metaclass derived from it), is
 * ready, and puts its objects at exactly that offset.
 *
 * Everything is read through the caller's reader (in-process: loads under
 * the agent's fault guard; in the helper: the target's memory), so the
 * same code serves both builds.
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#if PY_VERSION_HEX >= 0x03090000
#include <internal/pycore_gc.h>
#endif
#if PY_VERSION_HEX >= 0x030B0000
#include <internal/pycore_object.h>
#endif
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pyobjects.h"

/* The words in front of an object of a type with flags `tp` (a local copy). */
static size_t preheader(PyTypeObject *tp)
{
#if PY_VERSION_HEX >= 0x030B0000
	return _PyType_PreHeaderSize(tp);
#else
	return (tp->tp_flags & Py_TPFLAGS_HAVE_GC) ? sizeof(PyGC_Head) : 0;
#endif
}

/* Whether `addr` is a type object: its type is `type` itself (whose type
 * is itself) or a metaclass, a subclass of type whose type is `type`. */
static int is_type(pyobj_reader rd, void *ctx, uint64_t addr, PyTypeObject *out)
{
	if (!addr || (addr & 7) || rd(ctx, out, addr, sizeof(*out)))
		return 0;
	if (!(out->tp_flags & Py_TPFLAGS_READY) || out->tp_basicsize <= 0 || out->tp_basicsize > (1 << 20))
		return 0;
	uint64_t meta = (uint64_t)(uintptr_t)Py_TYPE((PyObject *)out);
	PyTypeObject m;
	if (!meta || (meta & 7) || rd(ctx, &m, meta, sizeof(m)) || !(m.tp_flags & Py_TPFLAGS_TYPE_SUBCLASS))
		return 0;
	uint64_t mm = (uint64_t)(uintptr_t)Py_TYPE((PyObject *)&m);
	if (mm == meta)
		return 1; /* meta is `type` */
	PyObject mmo;
	return mm && !(mm & 7) && rd(ctx, &mmo, mm, sizeof(mmo)) == 0 && (uint64_t)(uintptr_t)Py_TYPE(&mmo) == mm;
}

/* A type's identity word beside its address (pyobjects.h): a class's
 * qualified-name object, read from its heap type; a static type's
 * tp_name. 0 if unreadable. */
static uint64_t type_tag(pyobj_reader rd, void *ctx, uint64_t addr, const PyTypeObject *tp)
{
	if (!(tp->tp_flags & Py_TPFLAGS_HEAPTYPE))
		return (uint64_t)(uintptr_t)tp->tp_name;
	PyObject *q = NULL;
	if (rd(ctx, &q, addr + offsetof(PyHeapTypeObject, ht_qualname), sizeof(q)))
		return 0;
	return (uint64_t)(uintptr_t)q;
}

uint64_t pyobj_type(pyobj_reader rd, void *ctx, uint64_t block, uint64_t size, uint64_t *tag)
{
	static const size_t offs[] = { 0, sizeof(PyGC_Head), sizeof(PyGC_Head) + 2 * sizeof(PyObject *) };
	for (unsigned i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		size_t off = offs[i];
		if (size < off + sizeof(PyObject))
			break;
		PyObject ob;
		if (rd(ctx, &ob, block + off, sizeof(ob)))
			return 0;
		uint64_t t = (uint64_t)(uintptr_t)Py_TYPE(&ob);
		PyTypeObject tp;
		if (!is_type(rd, ctx, t, &tp) || preheader(&tp) != off)
			continue;
		/* A fixed-size object fills its block (tp_alloc asks for
		 * exactly that); a variable-size one at least its header. */
		uint64_t need = off + (uint64_t)tp.tp_basicsize;
		unsigned long more = Py_TPFLAGS_UNICODE_SUBCLASS; /* compact str: smaller than tp_basicsize */
#ifdef Py_TPFLAGS_INLINE_VALUES
		more |= Py_TPFLAGS_INLINE_VALUES; /* 3.13+: the attribute values follow the object */
		if ((tp.tp_flags & Py_TPFLAGS_INLINE_VALUES) && need > size)
			continue;
#endif
		if (tp.tp_itemsize == 0 && need != size && !(tp.tp_flags & more))
			continue;
		if (tp.tp_itemsize != 0 && need > size + (uint64_t)tp.tp_itemsize)
			continue;
		if (tag)
			*tag = type_tag(rd, ctx, t, &tp);
		return t;
	}
	return 0;
}

/* A str's characters when it is compact and one byte per character
 * (identifiers are); -1 otherwise. */
static int read_ascii(pyobj_reader rd, void *ctx, uint64_t addr, char *buf, size_t n)
{
	PyASCIIObject a;
	if (!addr || rd(ctx, &a, addr, sizeof(a)) || !a.state.compact || !a.state.ascii || a.length <= 0 ||
	    (size_t)a.length >= n)
		return -1;
	if (rd(ctx, buf, addr + sizeof(PyASCIIObject), (size_t)a.length))
		return -1;
	buf[a.length] = 0;
	return 0;
}

int pyobj_type_name(pyobj_reader rd, void *ctx, uint64_t type, char *buf, size_t n, uint64_t *tag)
{
	PyHeapTypeObject ht;
	if (n < 2 || rd(ctx, &ht, type, sizeof(PyTypeObject)))
		return -1;
	if (tag)
		*tag = type_tag(rd, ctx, type, &ht.ht_type);
	char tpname[256];
	size_t i = 0;
	uint64_t nm = (uint64_t)(uintptr_t)ht.ht_type.tp_name;
	/* tp_name, byte by byte up to its NUL (it may end near a page end). */
	for (; nm && i < sizeof(tpname) - 1; i++)
		if (rd(ctx, &tpname[i], nm + i, 1) || !tpname[i])
			break;
	tpname[i] = 0;
	/* A class statement's type: tp_name is its bare name, the qualified
	 * one is ht_qualname. Extension types name their module in tp_name. */
	if ((ht.ht_type.tp_flags & Py_TPFLAGS_HEAPTYPE) && !strchr(tpname, '.') &&
	    rd(ctx, &ht, type, sizeof(ht)) == 0 &&
	    read_ascii(rd, ctx, (uint64_t)(uintptr_t)ht.ht_qualname, buf, n) == 0)
		return 0;
	if (!tpname[0])
		return -1;
	snprintf(buf, n, "%s", tpname);
	return 0;
}
