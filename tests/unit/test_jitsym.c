/*
 * test_jitsym.c — JIT code symbolized offline: Numba's name demangler
 * (numbaname.c) on names Numba writes, and jitsym.c on a real image that
 * Debian's Numba 0.56 registered through the GDB JIT interface with
 * NUMBA_DEBUGINFO=1 (fixtures/numba_kernel.jit.o, compiled from
 * fixtures/numba_kernel.py: kernel() at lines 6-10, its .text loaded at
 * 0x7fd7610d9000; the addresses below are from `readelf
 * --debug-dump=decodedline` of it, which prints them .text-relative).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "../../src/lib/jitsym.h"
#include "../../src/lib/numbaname.h"

static void check_name(const char *mangled, const char *want, int want_kind)
{
	char buf[512];
	int kind = -9;
	int r = numba_demangle(mangled, buf, sizeof(buf), &kind);
	CHECK_EQ(r, 0);
	CHECK_STR(buf, want);
	CHECK_EQ(kind, want_kind);
}

static void test_demangle(void)
{
	const char *k = "_ZN8__main__6kernelB2v1B54c8tJTC_2fWwKbcFpQAdBTgEQrlo6UyVFGMNAWVBgYHmKUJAA_3d_3dE"
			"5ArrayIdLi1E1C7mutable7alignedE";
	check_name(k, "__main__.kernel(float64[::1])", NUMBA_FUNC);
	char buf[512];
	snprintf(buf, sizeof(buf), "_ZN7cpython%s", k + 3);
	check_name(buf, "__main__.kernel(float64[::1])", NUMBA_CPYTHON_WRAPPER);
	snprintf(buf, sizeof(buf), "cfunc.%s", k);
	check_name(buf, "__main__.kernel(float64[::1])", NUMBA_CFUNC_WRAPPER);
	/* Layouts: F-contiguous 2-d, any layout, read-only. */
	check_name("_ZN8__main__1fB2v1E5ArrayIfLi2E1F7mutable7alignedE", "__main__.f(float32[::1, :])", NUMBA_FUNC);
	check_name("_ZN8__main__1fB2v1E5ArrayIxLi3E1A8readonly7alignedEd", "__main__.f(readonly int64[:, :, :], float64)",
		   NUMBA_FUNC);
	/* Closures: <locals> escaped as _3c/_3e; no arguments: (). */
	check_name("_ZN8__main__4main12_3clocals_3e11late_kernelB2v9B4abcdEv", "__main__.main.<locals>.late_kernel()",
		   NUMBA_FUNC);
	/* Underscores that are no escapes stay, UTF-8 escapes decode. */
	check_name("_ZN3pkg6get_abB2v1Exy", "pkg.get_ab(int64, uint64)", NUMBA_FUNC);
	check_name("_ZN8__main__9caf_c3_a9B2v1Eb", "__main__.caf\xc3\xa9(bool)", NUMBA_FUNC);
	/* Templated types other than arrays keep their parameters. */
	check_name("_ZN5numba2np8arrayobj1gB2v1E5TupleIxxE", "numba.np.arrayobj.g(Tuple(int64, int64))", NUMBA_FUNC);
	/* Unknown argument encodings keep the name alone. */
	check_name("_ZN8__main__1hB2v1EQQQ", "__main__.h", NUMBA_FUNC);
	/* Not Numba's. */
	CHECK(numba_demangle("NRT_decref", buf, sizeof(buf), NULL) < 0);
	CHECK(numba_demangle("_Z", buf, sizeof(buf), NULL) < 0);
	CHECK(numba_demangle("_ZN3fooE", buf, sizeof(buf), NULL) == 0);
	CHECK(numba_demangle("_ZN999999999999999999999fooE", buf, sizeof(buf), NULL) < 0);
	/* A buffer too small fails rather than truncating silently. */
	char tiny[8];
	CHECK(numba_demangle(k, tiny, sizeof(tiny), NULL) < 0);
}

static uint8_t *read_fixture(const char *name, size_t *len)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/tests/unit/fixtures/%s", SRCDIR, name);
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	uint8_t *b = malloc(1 << 20);
	*len = b ? fread(b, 1, 1 << 20, f) : 0;
	fclose(f);
	return b;
}

#define TEXT 0x7fd7610d9000ull

static void test_image(void)
{
	size_t len = 0;
	uint8_t *img = read_fixture("numba_kernel.jit.o", &len);
	CHECK(img != NULL && len > 1000);
	if (!img)
		return;
	struct jit_space *sp = jit_space_new();
	struct rec_jit_image r = { .id = 7, .start = TEXT, .end = TEXT + 0x3e8, .image = img, .image_len = len };
	CHECK_EQ(jit_space_add(sp, &r), 0);
	struct jit_info ji;
	/* 0xa6: the first instruction of line 9 (the loop body). */
	CHECK_EQ(jit_lookup(sp, TEXT + 0xa6, 0, &ji), 1);
	CHECK_STR(ji.name, "__main__.kernel(float64[::1])");
	CHECK_STR(ji.module, "[jit #7]");
	CHECK_U64(ji.func_start, TEXT);
	CHECK_EQ(ji.line, 9);
	CHECK_EQ(ji.func_line, 6);
	CHECK(ji.file && strstr(ji.file, "numba_kernel.py") == NULL && strstr(ji.file, "dump.py"));
	/* As a return address, the call before it is looked up: 0xa6 - 1 is
	 * still line 0 code after line 8's. */
	CHECK_EQ(jit_lookup(sp, TEXT + 0x16 + 1, 1, &ji), 1);
	CHECK_EQ(ji.line, 8);
	/* The CPython wrapper: named, marked, no line of its own. */
	CHECK_EQ(jit_lookup(sp, TEXT + 0x230, 0, &ji), 1);
	CHECK_STR(ji.name, "__main__.kernel(float64[::1]) [cpython wrapper]");
	/* Outside the image, and after it was unloaded. */
	CHECK_EQ(jit_lookup(sp, TEXT + 0x10000, 0, &ji), 0);
	jit_space_unload(sp, 7);
	CHECK_EQ(jit_lookup(sp, TEXT + 0xa6, 0, &ji), 0);
	/* Damaged images: cut short, or not ELF at all, are skipped. */
	for (size_t cut = 0; cut < len; cut += 97) {
		struct rec_jit_image d = r;
		d.image_len = cut;
		CHECK_EQ(jit_space_add(sp, &d), 0);
		jit_lookup(sp, TEXT + 0xa6, 0, &ji);
	}
	memset(img + 0x40, 0xff, 64);
	CHECK_EQ(jit_space_add(sp, &r), 0);
	jit_lookup(sp, TEXT + 0xa6, 0, &ji);
	jit_space_free(sp);
	free(img);
}

/* REC_JIT_IMAGE / REC_JIT_UNLOAD round trip; every truncation fails cleanly. */
static void test_records(void)
{
	uint8_t elf[300];
	for (size_t i = 0; i < sizeof(elf); i++)
		elf[i] = (uint8_t)(i * 7);
	struct rec_jit_image in = { .id = 42, .start = 0x7f0000001000ull, .end = 0x7f0000001400ull,
				    .time_ns = 123456789, .flags = 0, .image = elf, .image_len = sizeof(elf) };
	struct wbuf b;
	wbuf_init(&b);
	rec_put_jit_image(&b, &in);
	struct rec_jit_unload un = { 42, 987654321 };
	rec_put_jit_unload(&b, &un);
	struct rbuf all, body;
	rbuf_init(&all, b.data, b.len);
	uint64_t type;
	CHECK_EQ(rec_next(&all, &type, &body), 1);
	CHECK_U64(type, REC_JIT_IMAGE);
	size_t body_len = rbuf_left(&body);
	const uint8_t *body_start = body.p;
	struct rec_jit_image out;
	CHECK_EQ(rec_get_jit_image(&body, &out), 0);
	CHECK_U64(out.id, 42);
	CHECK_U64(out.start, in.start);
	CHECK_U64(out.end, in.end);
	CHECK_U64(out.time_ns, in.time_ns);
	CHECK(out.image_len == sizeof(elf) && !memcmp(out.image, elf, sizeof(elf)));
	rec_free_jit_image(&out);
	for (size_t cut = 0; cut < body_len; cut++) {
		struct rbuf t;
		rbuf_init(&t, body_start, cut);
		CHECK_EQ(rec_get_jit_image(&t, &out), -1);
	}
	CHECK_EQ(rec_next(&all, &type, &body), 1);
	CHECK_U64(type, REC_JIT_UNLOAD);
	struct rec_jit_unload u2;
	CHECK_EQ(rec_get_jit_unload(&body, &u2), 0);
	CHECK_U64(u2.id, 42);
	CHECK_U64(u2.time_ns, 987654321);
	CHECK_EQ(rec_next(&all, &type, &body), 0);
	wbuf_free(&b);
}

int main(void)
{
	RUN(test_records);
	RUN(test_demangle);
	RUN(test_image);
	return test_summary();
}
