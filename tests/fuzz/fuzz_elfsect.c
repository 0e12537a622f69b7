/*
 * fuzz_elfsect.c — libFuzzer target for the ELF files strata reads by
 * path: every object mapped in a profiled process (the helper builds its
 * unwind tables from them), the interpreter `strata stack` and the attach
 * look symbols up in, the module files a profile names.
 *  - src/common/elfsect.c: a section by name, its bytes, a symbol's
 *    value (.dynsym, then .symtab), with plain pread (the helper does not
 *    link libelf);
 *  - what the helper does next with them: the .eh_frame / .debug_frame
 *    compiled into a table (src/common/cfi.c), the places a stripped
 *    LLVM's JIT descriptor can be (src/agentd/jit-find.c);
 *  - the CLI's symbolizer (src/lib/symbols*.c, over libdwfl) with a
 *    mapping of the file, looked up at each symbol and FDE it declares.
 *
 * Input: the file. It is a memory file, named by its /proc/self/fd path.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "common/cfi.h"
#include "common/elfsect.h"
#include "lib/symbols.h"

#include "../../src/agentd/jit-find.c"

static int fd = -1;
static char path[64];

/* jit-find.c's verification reads the target's memory; not called. */
int remote_read(void *dst, uint64_t addr, size_t n)
{
	(void)dst;
	(void)addr;
	(void)n;
	return -1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_setup();
	fd = fuzz_memfd();
	fuzz_fd_path(path, sizeof(path), fd);
	return 0;
}

/* A section found is inside the file, and reads. */
static uint8_t *section(const char *name, size_t size, struct elf_section *s)
{
	if (elf_find_section(path, name, s))
		return NULL;
	FUZZ_CHECK(s->offset <= size && s->size <= size - s->offset);
	uint8_t *d = elf_read_section(path, s);
	FUZZ_CHECK(d);
	return d;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_memfd_set(fd, data, size);

	/* The helper's unwind tables (unwind-build.c): .eh_frame, else
	 * .debug_frame, at the section's link-time address. */
	struct elf_section s;
	uint64_t lookups[16];
	uint32_t nl = 0;
	int dbg = 0;
	uint8_t *d = section(".eh_frame", size, &s);
	if (!d) {
		d = section(".debug_frame", size, &s);
		dbg = 1;
	}
	if (d) {
		struct cfi_source src = { d, (size_t)s.size, s.addr, 0 };
		struct cfi_table t;
		uint32_t bad;
		if (cfi_build_section(&t, &src, dbg, &bad) == CFI_OK) {
			for (uint32_t i = 0; i < t.nfdes && nl < 8; i++)
				lookups[nl++] = t.base + t.fde_pc[i];
			cfi_table_free(&t);
		}
		free(d);
	}
	d = section(".note.gnu.build-id", size, &s);
	free(d);

	static const char *const syms[] = { "__jit_debug_descriptor", "_PyRuntime", "Py_Version", "dlopen", "main" };
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		uint64_t sz = 0, v = elf_symbol(path, syms[i], &sz);
		if (v && nl < 16)
			lookups[nl++] = v;
	}
	uint64_t cand[JIT_DESC_MAX_CANDIDATES];
	int nc = jit_desc_candidates(path, cand, JIT_DESC_MAX_CANDIDATES);
	FUZZ_CHECK(nc >= -1 && nc <= JIT_DESC_MAX_CANDIDATES);

	/* The CLI: the file mapped at its own addresses (bias 0). */
	struct symbolizer *sy = sym_new();
	if (!sy)
		return 0;
	struct sym_space *sp = sym_space_new(sy);
	struct rec_module m = { .start = 0, .end = UINT64_MAX / 2, .path = path };
	if (sp && sym_space_add(sp, &m) == 0) {
		for (uint32_t i = 0; i < nl; i++) {
			struct sym_info si;
			sym_lookup(sp, lookups[i], 0, &si);
			sym_lookup(sp, lookups[i] + 1, 1, &si);
		}
	}
	sym_free(sy);
	return 0;
}
