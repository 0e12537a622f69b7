/* A C extension for the --native tests: a hot C function called from a
 * known Python line, and a C function that calls back into Python. Built
 * by the tests with -g so that the profile can name ext.c lines. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *burn_c(PyObject *self, PyObject *arg)
{
	long n = PyLong_AsLong(arg);
	volatile double x = 0;
	for (long i = 0; i < n; i++)
		x += (double)i * 0.5; /* HOT */
	return PyFloat_FromDouble(x);
}

__attribute__((noinline)) static int call_into_python(PyObject *fn, long times)
{
	for (long i = 0; i < times; i++) {
		PyObject *r = PyObject_CallObject(fn, NULL); /* CALLBACK */
		if (!r)
			return -1;
		Py_DECREF(r);
	}
	return 0;
}

static PyObject *call_back(PyObject *self, PyObject *args)
{
	PyObject *fn;
	long times;
	if (!PyArg_ParseTuple(args, "Ol", &fn, &times))
		return NULL;
	if (call_into_python(fn, times))
		return NULL;
	Py_RETURN_NONE;
}

/* --objects: n blocks of `size` bytes from CPython's raw allocator, as a
 * C extension makes its buffers; every other one kept until exit. */
static void *kept_blocks[100000];
static long nkept;

__attribute__((noinline)) static PyObject *alloc_c(PyObject *self, PyObject *args)
{
	long n, size;
	if (!PyArg_ParseTuple(args, "ll", &n, &size))
		return NULL;
	for (long i = 0; i < n; i++) {
		void *p = PyMem_RawMalloc((size_t)size); /* ALLOC */
		if (!p)
			return PyErr_NoMemory();
		memset(p, 1, 64);
		if (i % 2 == 0 && nkept < 100000)
			kept_blocks[nkept++] = p;
		else
			PyMem_RawFree(p);
	}
	Py_RETURN_NONE;
}

/* --objects: the same with libc's malloc and free, as C libraries make
 * theirs (strata sees them through the extension's GOT). */
__attribute__((noinline)) static PyObject *alloc_libc(PyObject *self, PyObject *args)
{
	long n, size;
	if (!PyArg_ParseTuple(args, "ll", &n, &size))
		return NULL;
	for (long i = 0; i < n; i++) {
		void *p = malloc((size_t)size); /* LIBC */
		if (!p)
			return PyErr_NoMemory();
		memset(p, 1, 64);
		if (i % 2 == 0 && nkept < 100000)
			kept_blocks[nkept++] = p;
		else
			free(p);
	}
	Py_RETURN_NONE;
}

/* The object domain's malloc and the address this extension calls for
 * malloc (as its GOT holds it now), read with
 * nothing allocated between them: an allocation is where strata's hooks
 * may come out (sampling off), so reading one, allocating, then the other
 * could see a moment the program never runs in. */
static PyObject *hooks_now(PyObject *self, PyObject *unused)
{
	PyMemAllocatorEx a;
	PyMem_GetAllocator(PYMEM_DOMAIN_OBJ, &a);
	void *(*volatile f)(size_t) = malloc;
	void *slot = (void *)f;
	return Py_BuildValue("(NN)", PyLong_FromVoidPtr((void *)a.malloc), PyLong_FromVoidPtr(slot));
}

static PyMethodDef methods[] = {
	{ "burn_c", burn_c, METH_O, "burn CPU in C" },
	{ "call_back", call_back, METH_VARARGS, "call a Python function from C" },
	{ "alloc_c", alloc_c, METH_VARARGS, "allocate with PyMem_RawMalloc" },
	{ "alloc_libc", alloc_libc, METH_VARARGS, "allocate with malloc" },
	{ "hooks_now", hooks_now, METH_NOARGS, "(object domain's malloc, this extension's malloc) at once" },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef mod = { PyModuleDef_HEAD_INIT, "strata_native_ext", NULL, -1, methods };

PyMODINIT_FUNC PyInit_strata_native_ext(void) { return PyModule_Create(&mod); }
