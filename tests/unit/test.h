/*
 * test.h — the unit tests' whole framework: checks that report the file,
 * line and both values on failure and keep going, and a runner that counts
 * failures. Each test_*.c is its own program:
 *
 *	static void test_x(void) { CHECK_EQ(1 + 1, 2); }
 *	int main(void) { RUN(test_x); return test_summary(); }
 *
 * SRCDIR (set by unit.mk) locates fixtures whatever the working directory.
 */
#ifndef STRATA_TEST_H
#define STRATA_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SRCDIR
#define SRCDIR "."
#endif

static int t_failures, t_checks, t_tests;
static const char *t_current = "";

static inline int t_report(int ok, const char *file, int line, const char *what)
{
	t_checks++;
	if (!ok) {
		t_failures++;
		fprintf(stderr, "%s:%d: %s: check failed: %s\n", file, line, t_current, what);
	}
	return ok;
}

#define CHECK(c) t_report(!!(c), __FILE__, __LINE__, #c)

#define CHECK_EQ(a, b)                                                                          \
	do {                                                                                    \
		long long a_ = (long long)(a), b_ = (long long)(b);                             \
		if (!t_report(a_ == b_, __FILE__, __LINE__, #a " == " #b))                      \
			fprintf(stderr, "    %lld != %lld\n", a_, b_);                              \
	} while (0)

#define CHECK_U64(a, b)                                                                         \
	do {                                                                                    \
		uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                                \
		if (!t_report(a_ == b_, __FILE__, __LINE__, #a " == " #b))                      \
			fprintf(stderr, "    %" PRIu64 " != %" PRIu64 "\n", a_, b_);                \
	} while (0)

#define CHECK_STR(a, b)                                                                         \
	do {                                                                                    \
		const char *a_ = (a), *b_ = (b);                                                \
		if (!t_report(a_ && b_ && strcmp(a_, b_) == 0, __FILE__, __LINE__, #a " == " #b)) \
			fprintf(stderr, "    \"%s\" != \"%s\"\n", a_ ? a_ : "(null)", b_ ? b_ : "(null)"); \
	} while (0)

/* Substring check, for messages. */
#define CHECK_CONTAINS(hay, needle)                                                             \
	do {                                                                                    \
		const char *h_ = (hay), *n_ = (needle);                                         \
		if (!t_report(h_ && strstr(h_, n_) != NULL, __FILE__, __LINE__, #hay " contains " #needle)) \
			fprintf(stderr, "    \"%s\" lacks \"%s\"\n", h_ ? h_ : "(null)", n_);    \
	} while (0)

#define RUN(fn)                                                                                 \
	do {                                                                                    \
		int before_ = t_failures;                                                       \
		t_current = #fn;                                                                \
		t_tests++;                                                                      \
		fn();                                                                           \
		if (t_failures != before_)                                                      \
			fprintf(stderr, "FAIL %s\n", #fn);                                      \
	} while (0)

static inline int test_summary(void)
{
	fprintf(stderr, "%s: %d tests, %d checks, %d failed\n", t_failures ? "FAIL" : "ok", t_tests,
		t_checks, t_failures);
	return t_failures ? 1 : 0;
}

#endif
