/*
 * fuzz_jitelf.c — libFuzzer target for the in-memory ELF images JITs
 * register (Numba's LLVM through the GDB JIT interface), read by three
 * parties:
 *  - the helper's reader (src/common/jitelf.c): sections, function
 *    symbols, .debug_line with its relocations applied;
 *  - --perf-map's jitdump encoder (src/common/jitdump-enc.c), which runs
 *    all of the above and the line-table decoder on the same image;
 *  - the CLI's offline symbolizer (src/lib/jitsym.c, over libelf/libdw),
 *    which names the code of REC_JIT_IMAGE records in a .strata file.
 *
 * Input: the image, as it is (a heap copy, 8-aligned as the JIT's). The
 * addresses looked up are the functions the image itself declares.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "common/jitdump-enc.h"
#include "common/jitelf.h"
#include "lib/jitsym.h"

#define MAX_FUNCS 64

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_setup();
	return 0;
}

struct funcs {
	uint64_t addr[MAX_FUNCS];
	uint32_t n;
};

static int one(void *ctx, const char *name, uint64_t addr, uint64_t size)
{
	struct funcs *f = ctx;
	FUZZ_CHECK(name && size);
	(void)strlen(name);
	if (f->n < MAX_FUNCS)
		f->addr[f->n++] = addr;
	return 0;
}

/* A function's name, to the jitdump encoder's perf-map callback. */
static void named(void *ctx, const char *name, uint64_t addr, uint64_t size)
{
	(void)ctx;
	(void)addr;
	(void)size;
	(void)strlen(name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jitelf e;
	struct funcs f = { .n = 0 };
	if (jitelf_open(&e, data, size) == 0) {
		const uint8_t *d;
		size_t n;
		static const char *const names[] = { ".text", ".eh_frame", ".debug_line", ".debug_str", ".symtab" };
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (jitelf_section(&e, names[i], &d, &n, NULL) == 0)
				FUZZ_CHECK(d >= data && n <= size && (size_t)(d - data) <= size - n);
		jitelf_functions(&e, one, &f);
		uint8_t *line = jitelf_relocated(&e, ".debug_line", &n);
		free(line);
	}

	/* The jitdump encoder, code read from the image's own sections. */
	struct wbuf b;
	wbuf_init(&b);
	uint64_t code_index = 0;
	struct jd_image_stats st;
	jd_image(&b, data, size, 1, 1, 0, &code_index, NULL, NULL, named, NULL, &st);
	FUZZ_CHECK(st.functions == code_index);
	wbuf_free(&b);

	/* The CLI's symbolizer, at each function the image declares and
	 * just before and after it. */
	struct jit_space *sp = jit_space_new();
	if (!sp)
		return 0;
	struct rec_jit_image r = { .id = 1, .start = 0, .end = UINT64_MAX, .image = (uint8_t *)data, .image_len = size };
	if (jit_space_add(sp, &r) == 0) {
		struct jit_info ji;
		for (uint32_t i = 0; i < f.n; i++) {
			jit_lookup(sp, f.addr[i], 0, &ji);
			jit_lookup(sp, f.addr[i] + 1, 1, &ji);
			jit_lookup_any(sp, f.addr[i] - 1, 0, &ji);
			const uint8_t *code;
			uint64_t start, len;
			/* The code it hands out is readable (ASan checks). */
			if (jit_image_bytes(sp, f.addr[i], &code, &start, &len) == 0 && len) {
				FUZZ_CHECK(len <= size);
				volatile uint8_t first = code[0], last = code[len - 1];
				(void)first;
				(void)last;
			}
		}
	}
	jit_space_free(sp);
	return 0;
}
