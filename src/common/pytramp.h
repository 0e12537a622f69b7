/*
 * pytramp.h — CPython's perf trampolines (3.12+, -X perf and -X perf_jit)
 * recognised by their bytes, on x86-64.
 *
 * Python/asm_trampoline.S is copied once per code object into anonymous
 * memory that has no unwind information; the trampoline calls the eval
 * loop through %rcx. Its shape changed between releases, and builds with
 * Intel CET (-fcf-protection, Debian's) start it with endbr64:
 *
 *   3.12, 3.13   sub $8,%rsp; call *%rcx; add $8,%rsp; ret
 *   3.14, 3.15   push %rbp; mov %rsp,%rbp; call *%rcx; pop %rbp; ret
 *
 * (checked against pyenv's 3.12/3.13 and Debian sid's 3.14.10/3.15.2,
 * whose _Py_trampoline_func_start..._end hold the second shape after an
 * endbr64). Both frames are 16 bytes above the return address of the
 * call, with the caller's return address on top; the second also saves
 * %rbp under it. Used by the agent's unwinder (a return address in no
 * object) and by the helper's perf-map reader (to name the trampolines
 * CPython did not write a perf-map line for).
 */
#ifndef STRATA_PYTRAMP_H
#define STRATA_PYTRAMP_H

#include <stdint.h>

struct pytramp_shape {
	uint8_t len;      /* bytes of the trampoline */
	uint8_t ra;       /* offset of the return address of its call */
	uint8_t saves_bp; /* push %rbp: the caller's %rbp at CFA-16 */
	uint8_t bytes[15];
};

/* With endbr64 first: a CET trampoline's tail also matches the shape
 * without it, which would put its start 4 bytes late. */
static const struct pytramp_shape PYTRAMP_SHAPES[] = {
	{ 15, 10, 0, { 0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x83, 0xec, 0x08, 0xff, 0xd1, 0x48, 0x83, 0xc4, 0x08, 0xc3 } },
	{ 11, 6, 0, { 0x48, 0x83, 0xec, 0x08, 0xff, 0xd1, 0x48, 0x83, 0xc4, 0x08, 0xc3 } },
	{ 12, 10, 1, { 0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5, 0xff, 0xd1, 0x5d, 0xc3 } },
	{ 8, 6, 1, { 0x55, 0x48, 0x89, 0xe5, 0xff, 0xd1, 0x5d, 0xc3 } },
};
#define PYTRAMP_NSHAPES (sizeof(PYTRAMP_SHAPES) / sizeof(PYTRAMP_SHAPES[0]))
#define PYTRAMP_CFA_OFF 16

/*
 * The shape of the trampoline whose call returns to `ra`, or NULL.
 * read(ctx, addr, buf, n) copies n bytes of the target at addr (0 on
 * success); only the bytes of each candidate shape are read. CPython
 * copies trampolines into 16-byte-aligned slots of page-aligned arenas,
 * so no trampoline spans two pages: a reader that cannot survive a fault
 * may refuse (return non-zero for) a read that crosses a page boundary,
 * which the first slot of an arena would otherwise make for the longer
 * shapes.
 */
static inline const struct pytramp_shape *pytramp_at(uint64_t ra,
						     int (*read)(void *ctx, uint64_t addr, uint8_t *buf, unsigned n),
						     void *ctx)
{
	for (unsigned i = 0; i < PYTRAMP_NSHAPES; i++) {
		const struct pytramp_shape *s = &PYTRAMP_SHAPES[i];
		uint8_t b[sizeof(s->bytes)];
		/* The call and what follows it first: they tell the shapes apart. */
		if (read(ctx, ra - 2, b, (unsigned)(s->len - s->ra + 2)))
			continue;
		unsigned k;
		for (k = 0; k < (unsigned)(s->len - s->ra + 2); k++)
			if (b[k] != s->bytes[s->ra - 2 + k])
				break;
		if (k < (unsigned)(s->len - s->ra + 2))
			continue;
		if (read(ctx, ra - s->ra, b, s->ra))
			continue;
		for (k = 0; k < s->ra; k++)
			if (b[k] != s->bytes[k])
				break;
		if (k == s->ra)
			return s;
	}
	return NULL;
}

#endif
