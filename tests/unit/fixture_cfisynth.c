/*
 * fixture_cfisynth.c — functions whose frames take the shapes compilers
 * give them, for test_cfisynth.c: built with clang (LLVM, as Numba's JIT
 * code is) and gcc at -O2 with unwind tables, whose CFI is the known
 * answer the rules derived from the machine code must match.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

volatile long sink;
long (*volatile fptr)(long);

/* A leaf: no frame at all (or the red zone). */
NOINLINE long leaf(long a, long b) { return a * b + (a >> 3); }

/* Many values live across calls: every callee-saved register pushed. */
NOINLINE long many_saved(long a, long b, long c, long d)
{
	long x = leaf(a, b), y = leaf(b, c), z = leaf(c, d), w = leaf(d, a), v = leaf(a, c), u = leaf(b, d);
	long t = leaf(x, y);
	return x + y + z + w + v + u + t + leaf(z, w) * leaf(v, u);
}

/* A variable-length array: a frame pointer, rsp moved by a register. */
NOINLINE long vla(int n)
{
	long buf[n];
	for (int i = 0; i < n; i++)
		buf[i] = leaf(i, n);
	long s = 0;
	for (int i = 0; i < n; i++)
		s += buf[i];
	return s;
}

/* An over-aligned local: the stack realigned (and rsp, -64). */
NOINLINE long aligned(long a)
{
	_Alignas(64) long buf[16];
	for (int i = 0; i < 16; i++)
		buf[i] = a + i;
	sink = (long)buf;
	return leaf(buf[3], buf[9]);
}

/* A switch dense enough for a jump table. */
NOINLINE long switcher(int k, long a)
{
	switch (k) {
	case 0: return leaf(a, 1);
	case 1: return a + 7;
	case 2: return leaf(a, a) * 3;
	case 3: return a ^ 0x55;
	case 4: return leaf(a, 9) - 1;
	case 5: return a << 4;
	case 6: return many_saved(a, a, 1, 2);
	case 7: return a - 99;
	default: return 0;
	}
}

/* Tail calls, and an early exit before any frame is set up. */
NOINLINE long tail(long a)
{
	if (a < 0)
		return 0;
	if (a & 1)
		return leaf(a, 3);
	return fptr(a);
}

NOINLINE long shrink(long a, long b)
{
	if (a == 0)
		return b;
	long x = leaf(a, b);
	long y = leaf(x, a);
	return x + y + leaf(y, b);
}

/* A call that does not return, on one path. */
NOINLINE long noreturn_path(long a)
{
	if (a == 12345)
		abort();
	return leaf(a, a) + many_saved(a, 1, 2, 3);
}

/* A large frame: probed page by page where stack clash protection is on. */
NOINLINE long big_frame(int k)
{
	char buf[20000];
	memset(buf, k, sizeof(buf));
	sink = (long)buf;
	return buf[k % 100];
}

/* Variable arguments: the register save area. */
NOINLINE long varargs(int n, ...)
{
	va_list ap;
	va_start(ap, n);
	long s = 0;
	for (int i = 0; i < n; i++)
		s += va_arg(ap, long);
	va_end(ap);
	return s;
}

/* A loop around calls, recursion. */
NOINLINE long recurse(long n) { return n <= 1 ? 1 : n * recurse(n - 1) + leaf(n, 2); }

NOINLINE long loop(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++)
		s += leaf(i, s) + (i & 3 ? recurse(i & 7) : 0);
	return s;
}

/* Floating point with values live across calls (spills to aligned slots). */
NOINLINE double fp(double a, double b)
{
	double x = (double)leaf((long)a, 2), y = (double)leaf((long)b, 3);
	return x * a + y * b + (double)leaf((long)(x + y), 1) * a;
}

/* setjmp: a returns-twice call. */
static jmp_buf jb;
NOINLINE long jumper(long a)
{
	if (setjmp(jb))
		return 1;
	return leaf(a, 2);
}

long fixture_entry(long a)
{
	return many_saved(a, 1, 2, 3) + vla((int)(a & 15) + 1) + aligned(a) + switcher((int)a & 7, a) + tail(a) +
	       shrink(a, 2) + noreturn_path(a) + big_frame((int)a) + varargs(3, a, a, a) + loop(a & 31) +
	       (long)fp((double)a, 2.0) + jumper(a);
}
