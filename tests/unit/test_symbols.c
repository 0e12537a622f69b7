/*
 * test_symbols.c — the offline symbolizer (symbols.c) on the fixture
 * object built with -g: function names (C and demangled C++), file:line
 * of a marked source line, module+offset where there is no symbol,
 * mappings that were unloaded; and on Debian's stripped interpreters
 * (12's python3.11, sid's 3.14 and 3.15 where the tests run in the sid
 * root), that the eval loop's unnamed part is recognised.
 *
 * usage: test_symbols FIXTURE.so   (the source is found beside this file)
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/common/elfsect.h"
#include "../../src/lib/symbols.h"

static int failures, checks;

#define CHECK(c, ...)                                                         \
	do {                                                                  \
		checks++;                                                     \
		if (!(c)) {                                                   \
			failures++;                                           \
			fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);       \
			fprintf(stderr, __VA_ARGS__);                         \
			fputc('\n', stderr);                                  \
		}                                                             \
	} while (0)

static struct rec_module mod;
static char modpath[4096];

static int find_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	if (!info->dlpi_name || !strstr(info->dlpi_name, "fixture_native.so"))
		return 0;
	snprintf(modpath, sizeof(modpath), "%s", info->dlpi_name);
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		if (p->p_type == PT_LOAD && (p->p_flags & PF_X)) {
			mod.start = info->dlpi_addr + p->p_vaddr;
			mod.end = mod.start + p->p_memsz;
			mod.offset = p->p_offset;
		}
	}
	mod.bias = info->dlpi_addr;
	mod.path = modpath;
	return 1;
}

static int source_line(const char *src, const char *marker)
{
	FILE *f = fopen(src, "r");
	char line[512];
	int n = 0;
	while (f && fgets(line, sizeof(line), f)) {
		n++;
		if (strstr(line, marker)) {
			fclose(f);
			return n;
		}
	}
	if (f)
		fclose(f);
	return -1;
}

static void fixture(const char *so, const char *src)
{
	void *h = dlopen(so, RTLD_NOW);
	CHECK(h, "dlopen: %s", dlerror());
	if (!h)
		return;
	dl_iterate_phdr(find_cb, NULL);
	CHECK(mod.end > mod.start, "no executable segment");
	struct symbolizer *s = sym_new();
	struct sym_space *sp = sym_space_new(s);
	CHECK(sym_space_add(sp, &mod) == 0, "add");

	struct sym_info si;
	uint64_t leaf = (uint64_t)(uintptr_t)dlsym(h, "fixture_leaf");
	sym_lookup(sp, leaf, 0, &si);
	CHECK(si.name && !strcmp(si.name, "fixture_leaf"), "leaf name %s", si.name ? si.name : "(null)");
	CHECK(si.module && strstr(si.module, "fixture_native.so"), "module %s", si.module ? si.module : "(null)");
	CHECK(si.offset == leaf - mod.bias, "offset");
	CHECK(!si.interpreter && !si.eval, "not the interpreter");

	/* Somewhere in fixture_leaf is the marked loop line. */
	int want = source_line(src, "LEAF_LINE"), seen = 0;
	for (uint64_t a = leaf; a < leaf + 64; a++) {
		sym_lookup(sp, a, 0, &si);
		if (si.name && !strcmp(si.name, "fixture_leaf") && si.file && strstr(si.file, "fixture_native.cc") &&
		    (int)si.line == want)
			seen = 1;
	}
	CHECK(want > 0 && seen, "no address of fixture_leaf maps to fixture_native.cc:%d", want);

	/* A return address is looked up at the call before it. */
	sym_lookup(sp, leaf, 1, &si);
	CHECK(!si.name || strcmp(si.name, "fixture_leaf") != 0 || si.sym_offset == 0,
	      "a return address at a function's start belongs to what precedes it");

	uint64_t spin = (uint64_t)(uintptr_t)dlsym(h, "_ZN14strata_fixture6Widget4spinEi");
	sym_lookup(sp, spin + 1, 0, &si);
	CHECK(si.name && !strcmp(si.name, "strata_fixture::Widget::spin(int)"), "demangled: %s",
	      si.name ? si.name : "(null)");
	CHECK(si.sym_offset == 1, "sym_offset %lu", (unsigned long)si.sym_offset);

	/* Functions inlined into fixture_inlines: the chain, outermost
	 * first, each at its own line; the function itself at the line that
	 * called the outer one. */
	uint64_t inl = (uint64_t)(uintptr_t)dlsym(h, "fixture_inlines");
	int l_outer = source_line(src, "INL_OUTER_LINE"), l_mid = source_line(src, "INL_MID_LINE"),
	    l_inner = source_line(src, "INL_INNER_LINE"), d_mid = source_line(src, "int fixture_inl_mid(int n)"),
	    d_inner = source_line(src, "int fixture_inl_inner(int n)");
	int chains = 0, in_loop = 0;
	for (uint64_t a = inl; a < inl + 48; a++) {
		sym_lookup(sp, a, 0, &si);
		if (!si.name || strcmp(si.name, "fixture_inlines") || si.ninl != 2)
			continue;
		chains++;
		CHECK(si.line == (uint32_t)l_outer && si.file && strstr(si.file, "fixture_native.cc"),
		      "function line %u, want %d", si.line, l_outer);
		CHECK(!strcmp(si.inl[0].name, "fixture_inl_mid") && si.inl[0].line == (uint32_t)l_mid &&
			      si.inl[0].func_line == (uint32_t)d_mid && si.inl[0].func_file &&
			      strstr(si.inl[0].func_file, "fixture_native.cc"),
		      "outer inlined: %s:%u (defined at %u)", si.inl[0].name, si.inl[0].line, si.inl[0].func_line);
		CHECK(!strcmp(si.inl[1].name, "fixture_inl_inner") && si.inl[1].func_line == (uint32_t)d_inner &&
			      si.inl[1].file && strstr(si.inl[1].file, "fixture_native.cc"),
		      "inner inlined: %s (defined at %u)", si.inl[1].name, si.inl[1].func_line);
		if (si.inl[1].line == (uint32_t)l_inner)
			in_loop++;
	}
	CHECK(l_outer > 0 && l_mid > 0 && l_inner > 0 && chains > 0 && in_loop > 0,
	      "no address of fixture_inlines shows the inlined chain (%d, %d in the loop)", chains, in_loop);
	/* The same address again comes from the memo, chain included. */
	if (in_loop) {
		for (uint64_t a = inl; a < inl + 48; a++) {
			sym_lookup(sp, a, 0, &si);
			if (si.ninl == 2 && si.inl[1].line == (uint32_t)l_inner) {
				struct sym_info again;
				sym_lookup(sp, a, 0, &again);
				CHECK(again.ninl == 2 && again.inl == si.inl, "memoised chain");
				break;
			}
		}
	}
	/* A function without inlined code has no chain. */
	sym_lookup(sp, leaf, 0, &si);
	CHECK(si.ninl == 0 && !si.inl, "fixture_leaf has %u inlined", si.ninl);

	/* Outside every mapping: nothing, not a guess. */
	sym_lookup(sp, mod.end + 0x100000, 0, &si);
	CHECK(!si.module && !si.name, "unmapped address named");

	/* An unloaded mapping no longer answers once a new object took it. */
	struct rec_module other = mod;
	other.path = "/nonexistent/other.so";
	other.build_id = NULL;
	other.build_id_len = 0;
	struct rec_module gone = mod;
	gone.flags = MOD_UNLOADED;
	sym_space_add(sp, &gone);
	sym_space_add(sp, &other);
	sym_lookup(sp, leaf, 0, &si);
	CHECK(si.module && !strcmp(si.module, "/nonexistent/other.so") && !si.name && si.offset == leaf - mod.bias,
	      "after unload: %s %s", si.module ? si.module : "(null)", si.name ? si.name : "(null)");

	/* A recorded build id that the file no longer has: not trusted. */
	struct sym_space *sp2 = sym_space_new(s);
	struct rec_module wrong = mod;
	uint8_t bogus[20] = { 1, 2, 3 };
	wrong.build_id = bogus;
	wrong.build_id_len = sizeof(bogus);
	sym_space_add(sp2, &wrong);
	sym_lookup(sp2, leaf, 0, &si);
	CHECK(si.module && !si.name, "a rebuilt file was trusted");

	/* A path from the profile that is not a regular file (a FIFO no one
	 * writes to) is not read: no name, and no hang. */
	char fifo[] = "/tmp/strata-test-fifo-XXXXXX";
	int tfd = mkstemp(fifo);
	if (tfd >= 0) {
		close(tfd);
		unlink(fifo);
		CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
		struct sym_space *sp3 = sym_space_new(s);
		struct rec_module ff = mod;
		ff.path = fifo;
		ff.build_id = NULL;
		ff.build_id_len = 0;
		sym_space_add(sp3, &ff);
		sym_lookup(sp3, leaf, 0, &si);
		CHECK(si.module && !si.name, "a FIFO was read as an object");
		unlink(fifo);
	}
	sym_free(s);
}

/* The eval loop of a stripped interpreter: the exported
 * _PyEval_EvalFrameDefault and its one unnamed part, found by following
 * its jumps (find_eval). Debian's 3.11 has a 7.5 KB .cold part beside a
 * 61 KB named one; sid's 3.14.10 and 3.15.2 (PGO: most of the loop was
 * not run in training) an 82-84 KB unnamed part beside a named one of
 * about 1 KB. `big_cold`: the unnamed part is the larger. */
static void interpreter(const char *py, int big_cold)
{
	struct elf_section text;
	if (access(py, R_OK) || elf_find_section(py, ".text", &text)) {
		printf("test_symbols: %s absent, eval detection not checked\n", py);
		return;
	}
	struct symbolizer *s = sym_new();
	struct sym_space *sp = sym_space_new(s);
	/* Debian's python is not PIE: file addresses are run-time addresses. */
	struct rec_module m = { .start = text.addr, .end = text.addr + text.size, .path = (char *)py };
	sym_space_add(sp, &m);
	uint64_t hot = 0, cold = 0, cold_lo = 0, cold_hi = 0;
	struct sym_info si;
	for (uint64_t a = text.addr; a < text.addr + text.size; a += 16) {
		sym_lookup(sp, a, 0, &si);
		if (!si.eval)
			continue;
		if (si.name && !strcmp(si.name, "_PyEval_EvalFrameDefault")) {
			hot++;
		} else {
			CHECK(si.name && !strcmp(si.name, "_PyEval_EvalFrameDefault.cold"), "%s: unnamed part named %s", py,
			      si.name ? si.name : "(none)");
			cold++;
			if (!cold_lo)
				cold_lo = a;
			cold_hi = a;
		}
	}
	CHECK(hot > (big_cold ? 50 : 1000), "%s: named part: %lu", py, (unsigned long)hot);
	/* The unnamed part is one range. */
	CHECK(cold > 0 && (cold_hi - cold_lo) / 16 + 1 == cold, "%s: unnamed part: %lu in %#lx-%#lx", py,
	      (unsigned long)cold, (unsigned long)cold_lo, (unsigned long)cold_hi);
	CHECK(big_cold ? cold > 4 * 1024 : cold < hot, "%s: unnamed part %lu x16 bytes, named %lu", py, (unsigned long)cold,
	      (unsigned long)hot);
	printf("test_symbols: %s: eval loop %lu x16 bytes named, %lu unnamed at %#lx-%#lx\n", py, (unsigned long)hot,
	       (unsigned long)cold, (unsigned long)cold_lo, (unsigned long)cold_hi);
	sym_free(s);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test_symbols FIXTURE.so\n");
		return 2;
	}
	fixture(argv[1], "tests/unit/fixture_native.cc");
	CHECK(sym_is_interpreter_path("/usr/bin/python3.11") && sym_is_interpreter_path("/x/libpython3.12.so.1.0") &&
		      !sym_is_interpreter_path("/usr/bin/python3.11-config") && !sym_is_interpreter_path("/x/libc.so.6"),
	      "interpreter paths");
	/* Debian 12's, and the sid root's (scripts/sidroot.sh) where the
	 * tests run there. */
	interpreter("/usr/bin/python3.11", 0);
	interpreter("/usr/bin/python3.14", 1);
	interpreter("/usr/bin/python3.15", 1);
	printf("test_symbols: %d passed, %d failed\n", checks - failures, failures);
	return failures != 0;
}
