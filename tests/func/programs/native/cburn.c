/* A C extension built the way wheels are (-O2), with -g: its hot static
 * functions are inlined into the exported one, two levels deep, so the
 * machine code of churn() holds churn_mid() and churn_inner() and no symbol
 * names them. The tests check with readelf that they really are inlined
 * (DW_TAG_inlined_subroutine, no out-of-line copy), then that the profile
 * shows churn -> churn_mid -> churn_inner, each at its own line.
 *
 * Lines the tests look up are marked in comments. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static double churn_inner(long n, double scale)
{
	double s = 0;
	for (long i = 0; i < n; i++)
		s += (double)(i % 7) * scale; /* INNER_LOOP */
	return s;
}

static double churn_mid(long n)
{
	double t = churn_inner(n, 0.5); /* CALL_INNER */
	return t + 1.0;
}

static PyObject *churn(PyObject *self, PyObject *arg)
{
	long n = PyLong_AsLong(arg);
	if (n == -1 && PyErr_Occurred())
		return NULL;
	double r = churn_mid(n); /* CALL_MID */
	return PyFloat_FromDouble(r);
}

static PyMethodDef methods[] = {
	{ "churn", churn, METH_O, "burn CPU in two inlined static functions" },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef mod = { PyModuleDef_HEAD_INIT, "strata_cburn", NULL, -1, methods };

PyMODINIT_FUNC PyInit_strata_cburn(void) { return PyModule_Create(&mod); }
