// fixture_native.cc — a shared object with known functions for the
// symbolizer and CFI unit tests: a C function whose line is marked, a C++
// function whose mangled name must be demangled, and a function with a big
// frame (its CFA offset is checked).
#include <cstddef>

extern "C" __attribute__((noinline)) int fixture_leaf(int n)
{
	volatile int x = 0;
	for (int i = 0; i < n; i++)
		x += i; // LEAF_LINE
	return x;
}

namespace strata_fixture {
struct Widget {
	__attribute__((noinline)) int spin(int n);
};
int Widget::spin(int n) { return fixture_leaf(n) + 1; }
} // namespace strata_fixture

extern "C" __attribute__((noinline)) int fixture_bigframe(int n)
{
	volatile char buf[5000];
	for (int i = 0; i < n && i < 5000; i++)
		buf[i] = (char)i;
	strata_fixture::Widget w;
	return w.spin(n) + buf[n % 5000];
}

// Calls into libc through the PLT (the symbolizer names the stub
// getpid@plt) from a local function, which a stripped copy names by its FDE.
#include <unistd.h>
static __attribute__((noinline, noipa)) int fixture_hidden(int n) { return (int)getpid() + n; }
extern "C" __attribute__((noinline)) int fixture_calls_libc(void) { return fixture_hidden(1) + 1; }

// Two static functions inlined into an exported one, the way -O2 inlines
// a hot helper (always_inline, so that this -O1 build does it too): the
// symbolizer reports fixture_inlines at the line calling the middle one,
// then the middle one at the line calling the inner one, then the inner
// one at its loop.
static inline __attribute__((always_inline)) int fixture_inl_inner(int n)
{
	volatile int x = 0;
	for (int i = 0; i < n; i++)
		x += i; // INL_INNER_LINE
	return x;
}

static inline __attribute__((always_inline)) int fixture_inl_mid(int n)
{
	return fixture_inl_inner(n) + 1; // INL_MID_LINE
}

extern "C" __attribute__((noinline)) int fixture_inlines(int n)
{
	return fixture_inl_mid(n) * 2; // INL_OUTER_LINE
}
