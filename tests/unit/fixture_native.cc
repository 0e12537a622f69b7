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
