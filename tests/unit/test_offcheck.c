/*
 * test_offcheck.c — the comparison of a module's compiled offsets with an
 * interpreter's _Py_DebugOffsets (src/py/offcheck.c), on made-up
 * tables: the head CPython fixes (cookie, version, free_threaded) and a
 * few 8-byte fields after it.
 */
#include <stdint.h>
#include <string.h>

#include "test.h"
#include "../../src/py/offcheck.h"

#define V3130 0x030D00F0u /* 3.13.0 final */
#define V3135 0x030D05F0u
#define V3140 0x030E00F0u

struct table {
	char cookie[8];
	uint64_t version, free_threaded;
	uint64_t a, b, c;
};

static const struct offcheck_field FIELDS[] = {
	{ "thread_state.current_frame", offsetof(struct table, a), 216 },
	{ "code_object.size", offsetof(struct table, b), 200 },
	{ "pyobject.ob_type", offsetof(struct table, c), 8 },
};

static struct table good(uint32_t version)
{
	struct table t;
	memset(&t, 0, sizeof(t));
	memcpy(t.cookie, "xdebugpy", 8);
	t.version = version;
	t.a = 216;
	t.b = 200;
	t.c = 8;
	return t;
}

static const struct offcheck_build BUILD = { V3130, 0, FIELDS, 3 };

static void test_same_layout(void)
{
	char why[512] = "";
	struct table t = good(V3130);
	CHECK_EQ(offcheck_run(&BUILD, &t, sizeof(t), "/usr/bin/python3.13", why, sizeof(why)), 0);
	CHECK_STR(why, "");
	/* Another patch release with the same layout is fine. */
	t = good(V3135);
	CHECK_EQ(offcheck_run(&BUILD, &t, sizeof(t), "/usr/bin/python3.13", why, sizeof(why)), 0);
}

static void test_field_differs(void)
{
	char why[512] = "";
	struct table t = good(V3135);
	t.a = 224;
	CHECK_EQ(offcheck_run(&BUILD, &t, sizeof(t), "/opt/py/bin/python3.13", why, sizeof(why)), -1);
	CHECK_STR(why, "Python 3.13.5 does not lay out its structures as the agent module for Python 3.13.0 "
		       "reads them: thread_state.current_frame is 224 in the interpreter, 216 in the module; "
		       "this process is not profiled. Build a module for this interpreter with: "
		       "make PYTHONS=/opt/py/bin/python3.13");
	/* The first difference is named, in the list's order. */
	t = good(V3130);
	t.b = 208;
	t.c = 16;
	CHECK_EQ(offcheck_run(&BUILD, &t, sizeof(t), NULL, why, sizeof(why)), -1);
	CHECK_CONTAINS(why, "code_object.size is 208 in the interpreter, 200 in the module");
	CHECK_CONTAINS(why, "make PYTHONS=/path/to/python");
}

static void test_short_table(void)
{
	char why[512] = "";
	struct table t = good(V3130);
	CHECK_EQ(offcheck_run(&BUILD, &t, offsetof(struct table, c), "/p", why, sizeof(why)), -1);
	CHECK_CONTAINS(why, "pyobject.ob_type is missing in the interpreter, 8 in the module");
	CHECK_EQ(offcheck_run(&BUILD, &t, 16, "/p", why, sizeof(why)), -1);
	CHECK_CONTAINS(why, "debug offsets");
	CHECK_EQ(offcheck_run(&BUILD, NULL, 0, "/p", why, sizeof(why)), -1);
}

static void test_cookie(void)
{
	char why[512] = "";
	struct table t = good(V3130);
	memcpy(t.cookie, "xdebugpz", 8);
	CHECK_EQ(offcheck_run(&BUILD, &t, sizeof(t), "/usr/bin/python3.13", why, sizeof(why)), -1);
	CHECK_STR(why, "the interpreter does not start _PyRuntime with CPython's debug offsets (cookie "
		       "\"xdebugpy\"), so the agent module for Python 3.13.0 cannot check that it reads this "
		       "interpreter right; this process is not profiled. Build one with: "
		       "make PYTHONS=/usr/bin/python3.13");
}

static void test_free_threaded_and_minor(void)
{
	char why[512] = "";
	struct table t = good(V3130);
	t.free_threaded = 1;
	CHECK_EQ(offcheck_run(&BUILD, &t, sizeof(t), "/p", why, sizeof(why)), -1);
	CHECK_STR(why, "Python 3.13.0 is a free-threaded build (Py_GIL_DISABLED), which strata does not "
		       "support; this process is not profiled");
	struct offcheck_build ft = BUILD;
	ft.free_threaded = 1;
	t.free_threaded = 0;
	CHECK_EQ(offcheck_run(&ft, &t, sizeof(t), "/p", why, sizeof(why)), -1);
	CHECK_CONTAINS(why, "free-threaded");
	t = good(V3140);
	CHECK_EQ(offcheck_run(&BUILD, &t, sizeof(t), "/p", why, sizeof(why)), -1);
	CHECK_STR(why, "the agent module for Python 3.13.0 was loaded into Python 3.14.0; this process is "
		       "not profiled");
}

static void test_version_spelling(void)
{
	char v[32];
	offcheck_version(0x030D00F0u, v, sizeof(v));
	CHECK_STR(v, "3.13.0");
	offcheck_version(0x030F00A5u, v, sizeof(v));
	CHECK_STR(v, "3.15.0a5");
	offcheck_version(0x030E00C1u, v, sizeof(v));
	CHECK_STR(v, "3.14.0rc1");
	offcheck_version(0x030E0AF0u, v, sizeof(v));
	CHECK_STR(v, "3.14.10");
}

int main(void)
{
	RUN(test_same_layout);
	RUN(test_field_differs);
	RUN(test_short_table);
	RUN(test_cookie);
	RUN(test_free_threaded_and_minor);
	RUN(test_version_spelling);
	return test_summary();
}
