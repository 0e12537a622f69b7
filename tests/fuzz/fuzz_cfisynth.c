/*
 * fuzz_cfisynth.c — libFuzzer target for the unwind rules the helper
 * derives from JIT machine code that has no CFI (src/agentd/cfi-synth.c,
 * included here): the code comes out of the profiled process (Numba's
 * functions), and the derivation follows every path through it, so any
 * bytes must give rules or a refusal, never a crash or a runaway. The
 * rules are then compiled into a table as the helper does
 * (cfi_build_with), and must be ordered and inside their function.
 *
 * Input: u8 number of functions (1..8), then per function u16 start and
 * u16 length (offsets into the code), then the code, at BASE. Seeds: the
 * .text of Numba's images and of a C fixture, with their functions.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#include "../../src/agentd/cfi-synth.c"

#define BASE 0x7f0000001000ull

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_setup();
	return 0;
}

static int func_cmp(const void *a, const void *b)
{
	const struct cfisynth_func *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fin in = { data, size };
	uint32_t n = fin_u8(&in) % 8 + 1;
	struct cfisynth_func f[8];
	for (uint32_t i = 0; i < n; i++) {
		uint64_t start = fin_u16(&in), len = fin_u16(&in);
		f[i] = (struct cfisynth_func){ BASE + start, BASE + start + (len ? len : 1) };
	}
	/* Sorted and disjoint, as the callers give them. */
	qsort(f, n, sizeof(f[0]), func_cmp);
	uint32_t k = 0;
	for (uint32_t i = 0; i < n; i++)
		if (!k || f[i].start >= f[k - 1].end)
			f[k++] = f[i];
	n = k;
	size_t len;
	const uint8_t *code = fin_take(&in, in.n, &len);

	struct cfi_fnrows *rows;
	uint32_t nrows;
	struct cfisynth_stats st;
	if (cfisynth_build(code, BASE, len, f, n, &rows, &nrows, &st))
		return 0;
	FUZZ_CHECK(st.done + st.refused <= st.funcs && nrows <= n);
	for (uint32_t i = 0; i < nrows; i++) {
		const struct cfi_fnrows *r = &rows[i];
		FUZZ_CHECK(r->start < r->end && r->start >= BASE && r->end <= BASE + len);
		for (uint32_t j = 0; j < r->n; j++) {
			FUZZ_CHECK(r->pc[j] >= r->start && r->pc[j] < r->end);
			FUZZ_CHECK(j == 0 || r->pc[j - 1] < r->pc[j]);
		}
	}
	struct cfi_table t;
	if (cfi_build_with(&t, NULL, 0, rows, nrows, NULL) == CFI_OK) {
		for (uint32_t i = 0; i < nrows; i++)
			for (uint32_t j = 0; j < rows[i].n; j++)
				FUZZ_CHECK(cfi_lookup(&t, rows[i].pc[j]) != NULL);
		cfi_table_free(&t);
	}
	cfisynth_free(rows, nrows);
	return 0;
}
