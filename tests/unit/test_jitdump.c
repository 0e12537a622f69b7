/*
 * test_jitdump.c — the pieces of `strata record --perf-map` that run in
 * the agent, on real inputs:
 *   - dwline.c against binutils' readelf --debug-dump=decodedline on
 *     objects gcc compiles here (line table versions 3, 4, 5, and 2 made
 *     by patching a version-3 header, whose layout is the same), and on a
 *     Numba JIT image saved by gen_jitimage.py (fixtures/numba-kern*.o);
 *   - jitelf.c: the image's functions at their run-time addresses, its
 *     .debug_line relocated against them;
 *   - jitdump-enc.c: the jitdump written for the image, parsed back
 *     (header, JIT_CODE_DEBUG_INFO before each JIT_CODE_LOAD, lines 19-23
 *     of gen_jitimage.py for kern, the code bytes);
 *   - robustness: every single-byte corruption and every truncation of
 *     the image goes through the whole pipeline without a fault (run under
 *     ASan by `make asan`).
 */
#include "test.h"

#include <unistd.h>

#include "../../src/common/dwline.h"
#include "../../src/common/jitdump-enc.h"
#include "../../src/common/jitelf.h"

#define FIX SRCDIR "/tests/unit/fixtures/"

static uint8_t *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *p = malloc(len > 0 ? (size_t)len : 1);
	if (p && fread(p, 1, (size_t)len, f) != (size_t)len) {
		free(p);
		p = NULL;
	}
	fclose(f);
	*n = (size_t)len;
	return p;
}

struct pair {
	uint64_t addr;
	uint32_t line;
};

struct pairs {
	struct pair p[4096];
	size_t n;
	char file[256], dir[512];
};

static int collect(void *ctx, const struct dwline_row *r)
{
	struct pairs *ps = ctx;
	if (!r->end_sequence && ps->n < 4096)
		ps->p[ps->n++] = (struct pair){ r->addr, r->line };
	snprintf(ps->file, sizeof(ps->file), "%s", r->file);
	snprintf(ps->dir, sizeof(ps->dir), "%s", r->dir);
	return 0;
}

/* readelf's rows: "NAME  LINE  0xADDR ..." (end of sequence: "NAME - 0xADDR"). */
static size_t readelf_rows(const char *obj, struct pair *out, size_t max)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "readelf --debug-dump=decodedline '%s' 2>/dev/null", obj);
	FILE *f = popen(cmd, "r");
	if (!f)
		return 0;
	char line[1024];
	size_t n = 0;
	while (fgets(line, sizeof(line), f)) {
		char name[512], ln[32], addr[64];
		if (sscanf(line, "%511s %31s %63s", name, ln, addr) != 3 || (strncmp(addr, "0x", 2) && strcmp(addr, "0")))
			continue;
		char *end;
		unsigned long l = strtoul(ln, &end, 10);
		if (*end || n >= max)
			continue;
		out[n++] = (struct pair){ strtoull(addr, NULL, 16), (uint32_t)l };
	}
	pclose(f);
	return n;
}

/* Decodes the relocated .debug_line of an image file. */
static long decode_file(const uint8_t *img, size_t n, struct pairs *ps, uint64_t *text_addr)
{
	struct jitelf e;
	if (jitelf_open(&e, img, n))
		return -2;
	size_t llen;
	uint8_t *line = jitelf_relocated(&e, ".debug_line", &llen);
	if (!line)
		return -3;
	struct dwline_sections s = { .line = line, .line_len = llen };
	const uint8_t *d;
	size_t dn;
	if (!jitelf_section(&e, ".debug_line_str", &d, &dn, NULL)) {
		s.line_str = d;
		s.line_str_len = dn;
	}
	if (!jitelf_section(&e, ".debug_str", &d, &dn, NULL)) {
		s.str = d;
		s.str_len = dn;
	}
	uint32_t ti;
	if (text_addr && !jitelf_section(&e, ".text", &d, &dn, &ti))
		*text_addr = e.sh[ti].sh_addr;
	static struct dwline_tables tables;
	char err[128];
	ps->n = 0;
	long r = dwline_decode(&s, collect, ps, &tables, err, sizeof(err));
	if (r < 0)
		fprintf(stderr, "%s\n", err);
	free(line);
	return r;
}

static void check_same_rows(const char *what, const struct pairs *mine, uint64_t bias, const struct pair *ref,
			    size_t nref)
{
	t_current = what;
	CHECK(nref > 5);
	CHECK_EQ(mine->n, nref);
	size_t bad = 0;
	for (size_t i = 0; i < nref && i < mine->n; i++)
		if (mine->p[i].addr - bias != ref[i].addr || mine->p[i].line != ref[i].line)
			bad++;
	CHECK_EQ(bad, 0);
}

static void test_gcc_versions(void)
{
	char dir[] = "/tmp/strata-dwline-XXXXXX";
	if (!mkdtemp(dir)) {
		CHECK(!"mkdtemp");
		return;
	}
	static struct pair ref[4096];
	static struct pairs mine;
	for (int v = 3; v <= 5; v++) {
		char obj[256], cmd[1024];
		snprintf(obj, sizeof(obj), "%s/f%d.o", dir, v);
		snprintf(cmd, sizeof(cmd), "cd %s && cp " FIX "dwline_src.c f.c && gcc -gdwarf-%d -O1 -c f.c -o '%s'", dir,
			 v, obj);
		if (system(cmd) != 0) {
			CHECK(!"gcc failed");
			continue;
		}
		size_t nref = readelf_rows(obj, ref, 4096);
		size_t n;
		uint8_t *img = slurp(obj, &n);
		CHECK(img != NULL);
		if (!img)
			continue;
		CHECK(decode_file(img, n, &mine, NULL) > 0);
		char what[32];
		snprintf(what, sizeof(what), "gcc dwarf-%d", v);
		check_same_rows(what, &mine, 0, ref, nref);
		CHECK_STR(mine.file, "f.c");
		if (v == 5)
			CHECK_STR(mine.dir, dir); /* DW_FORM_line_strp, the compilation directory */
		if (v == 3) {
			/* Version 2 has version 3's layout: same rows. */
			struct jitelf e;
			const uint8_t *d;
			size_t dn;
			CHECK_EQ(jitelf_open(&e, img, n), 0);
			CHECK_EQ(jitelf_section(&e, ".debug_line", &d, &dn, NULL), 0);
			CHECK_EQ(d[4], 3);
			((uint8_t *)d)[4] = 2;
			static struct pairs v2;
			CHECK(decode_file(img, n, &v2, NULL) > 0);
			check_same_rows("dwarf-2 (patched)", &v2, 0, ref, nref);
		}
		free(img);
		unlink(obj);
	}
	char src[64];
	snprintf(src, sizeof(src), "%s/f.c", dir);
	unlink(src);
	rmdir(dir);
}

static void test_numba_lines(void)
{
	size_t n;
	uint8_t *img = slurp(FIX "numba-kern-debuginfo.o", &n);
	CHECK(img != NULL);
	if (!img)
		return;
	static struct pair ref[4096];
	static struct pairs mine;
	size_t nref = readelf_rows(FIX "numba-kern-debuginfo.o", ref, 4096);
	uint64_t text = 0;
	CHECK(decode_file(img, n, &mine, &text) > 0);
	/* Relocated: the rows are at the run-time address of .text. */
	CHECK(text != 0);
	check_same_rows("numba", &mine, text, ref, nref);
	CHECK_STR(mine.file, "gen_jitimage.py");
	int seen[32] = { 0 };
	for (size_t i = 0; i < mine.n; i++)
		if (mine.p[i].line < 32)
			seen[mine.p[i].line] = 1;
	CHECK(seen[19] && seen[21] && seen[22] && seen[23]);
	free(img);
}

struct fnames {
	char names[16][256];
	uint64_t addr[16], size[16];
	int n;
};

static int fn_collect(void *ctx, const char *name, uint64_t addr, uint64_t size)
{
	struct fnames *f = ctx;
	if (f->n < 16) {
		snprintf(f->names[f->n], 256, "%s", name);
		f->addr[f->n] = addr;
		f->size[f->n++] = size;
	}
	return 0;
}

static void test_numba_functions(void)
{
	size_t n;
	uint8_t *img = slurp(FIX "numba-kern.o", &n);
	CHECK(img != NULL);
	if (!img)
		return;
	struct jitelf e;
	CHECK_EQ(jitelf_open(&e, img, n), 0);
	struct fnames f = { 0 };
	CHECK(jitelf_functions(&e, fn_collect, &f) >= 2);
	const uint8_t *d;
	size_t dn;
	uint32_t ti = 0;
	CHECK_EQ(jitelf_section(&e, ".text", &d, &dn, &ti), 0);
	int kern = -1;
	for (int i = 0; i < f.n; i++) {
		if (strstr(f.names[i], "8__main__4kern") && strncmp(f.names[i], "cfunc.", 6) && kern < 0)
			kern = i;
		/* Every function lies in .text at its run-time address. */
		CHECK(f.addr[i] >= e.sh[ti].sh_addr && f.addr[i] + f.size[i] <= e.sh[ti].sh_addr + dn);
	}
	CHECK(kern >= 0);
	CHECK(!jitelf_relocated(&e, ".debug_line", &dn)); /* no debug info in this one */
	free(img);
}

/* Parses a jitdump back; checks the structure. */
struct dumpinfo {
	int loads, infos, info_before_load, kern_lines[32];
	uint64_t last_index;
	int index_ok;
	int code_ok;
	char first_file[256];
};

static void parse_dump(const uint8_t *p, size_t n, const struct jitelf *e, struct dumpinfo *di)
{
	memset(di, 0, sizeof(*di));
	di->index_ok = di->code_ok = 1;
	CHECK(n >= JITDUMP_HDR_SIZE);
	CHECK_EQ(le32_at(p), JITDUMP_MAGIC);
	CHECK_EQ(le32_at(p + 4), 1);
	CHECK_EQ(le32_at(p + 8), JITDUMP_HDR_SIZE);
	CHECK_EQ(le32_at(p + 12), 62); /* EM_X86_64 */
	CHECK_EQ(le32_at(p + 20), 4242);
	size_t off = JITDUMP_HDR_SIZE;
	uint64_t pending_info = 0;
	int have_info = 0;
	while (off + 16 <= n) {
		uint32_t id = le32_at(p + off), total = le32_at(p + off + 4);
		CHECK(total >= 16 && off + total <= n && total % 8 == 0);
		if (total < 16 || off + total > n)
			break;
		const uint8_t *b = p + off + 16;
		if (id == JIT_CODE_DEBUG_INFO) {
			di->infos++;
			pending_info = le64_at(b);
			have_info = 1;
			uint64_t cnt = le64_at(b + 8);
			const uint8_t *q = b + 16;
			for (uint64_t k = 0; k < cnt && q < p + off + total; k++) {
				uint32_t line = le32_at(q + 8);
				const char *file = (const char *)q + 16;
				if (!di->first_file[0])
					snprintf(di->first_file, sizeof(di->first_file), "%s", file);
				if (line < 32)
					di->kern_lines[line]++;
				q += 16 + strlen(file) + 1;
			}
		} else if (id == JIT_CODE_LOAD) {
			uint64_t addr = le64_at(b + 16), size = le64_at(b + 24), idx = le64_at(b + 32);
			if (di->loads && idx != di->last_index + 1)
				di->index_ok = 0;
			di->last_index = idx;
			if (have_info && pending_info == addr)
				di->info_before_load++;
			have_info = 0;
			const char *name = (const char *)b + 40;
			const uint8_t *code = (const uint8_t *)name + strlen(name) + 1;
			uint8_t want[4096];
			if (size <= sizeof(want) && jd_read_from_image((void *)e, addr, want, size) == 0)
				di->code_ok &= !memcmp(code, want, size);
			else
				di->code_ok = 0;
			di->loads++;
		}
		off += total;
	}
	CHECK_EQ(off, n);
}

static void test_jitdump_numba(void)
{
	size_t n;
	uint8_t *img = slurp(FIX "numba-kern-debuginfo.o", &n);
	CHECK(img != NULL);
	if (!img)
		return;
	struct jitelf e;
	CHECK_EQ(jitelf_open(&e, img, n), 0);
	struct wbuf b;
	wbuf_init(&b);
	jd_header(&b, 4242, 1000);
	uint64_t index = 7;
	struct jd_image_stats st;
	CHECK_EQ(jd_image(&b, img, n, 4242, 4243, 2000, &index, NULL, NULL, NULL, NULL, &st), 0);
	CHECK(st.functions >= 2);
	CHECK(st.with_lines >= 1);
	CHECK(!st.lines_error);
	struct dumpinfo di;
	parse_dump(b.data, b.len, &e, &di);
	CHECK_EQ(di.loads, st.functions);
	CHECK_EQ(di.infos, st.with_lines);
	/* An image the JIT did not align: read from a copy, same records. */
	uint8_t *odd = malloc(n + 1);
	memcpy(odd + 1, img, n);
	struct wbuf b2;
	wbuf_init(&b2);
	jd_header(&b2, 4242, 1000);
	uint64_t index2 = 7;
	CHECK_EQ(jd_image(&b2, odd + 1, n, 4242, 4243, 2000, &index2, NULL, NULL, NULL, NULL, NULL), 0);
	CHECK_EQ(b2.len, b.len);
	CHECK(b2.len == b.len && !memcmp(b2.data, b.data, b.len));
	wbuf_free(&b2);
	free(odd);
	CHECK_EQ(di.info_before_load, di.infos);
	CHECK(di.index_ok);
	CHECK(di.code_ok);
	CHECK_EQ(di.last_index, 7 + st.functions - 1);
	CHECK_EQ(index, 7 + st.functions);
	CHECK(di.kern_lines[21] && di.kern_lines[22] && di.kern_lines[23]);
	CHECK(strstr(di.first_file, "gen_jitimage.py") != NULL);
	wbuf_free(&b);

	/* Without debug info: loads only. */
	size_t n2;
	uint8_t *img2 = slurp(FIX "numba-kern.o", &n2);
	CHECK(img2 != NULL);
	if (img2) {
		struct jitelf e2;
		CHECK_EQ(jitelf_open(&e2, img2, n2), 0);
		wbuf_init(&b);
		jd_header(&b, 4242, 1000);
		CHECK_EQ(jd_image(&b, img2, n2, 4242, 4243, 2000, &index, NULL, NULL, NULL, NULL, &st), 0);
		CHECK(st.functions >= 2);
		CHECK_EQ(st.with_lines, 0);
		parse_dump(b.data, b.len, &e2, &di);
		CHECK_EQ(di.infos, 0);
		CHECK(di.code_ok);
		wbuf_free(&b);
		free(img2);
	}
	free(img);
}

/* Every single-byte corruption (three values) and every truncation:
 * whatever comes out, nothing is read outside the image. */
static void test_corrupt_images(void)
{
	size_t n;
	uint8_t *orig = slurp(FIX "numba-kern-debuginfo.o", &n);
	CHECK(orig != NULL);
	if (!orig)
		return;
	uint8_t *img = malloc(n);
	static const uint8_t vals[] = { 0x00, 0xff, 0x80 };
	unsigned ok = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < sizeof(vals); k++) {
			memcpy(img, orig, n);
			img[i] ^= vals[k] ? vals[k] : 0x01;
			struct wbuf b;
			wbuf_init(&b);
			uint64_t index = 0;
			/* Reading code from the image itself: bounded by it. */
			ok += jd_image(&b, img, n, 1, 1, 1, &index, NULL, NULL, NULL, NULL, NULL) == 0;
			wbuf_free(&b);
		}
	for (size_t cut = 0; cut < n; cut += 7) {
		uint8_t *t = malloc(cut ? cut : 1);
		memcpy(t, orig, cut);
		struct wbuf b;
		wbuf_init(&b);
		uint64_t index = 0;
		jd_image(&b, t, cut, 1, 1, 1, &index, NULL, NULL, NULL, NULL, NULL);
		wbuf_free(&b);
		free(t);
	}
	/* Most corruptions leave a readable image (they hit code or names). */
	CHECK(ok > n);
	/* Garbage line programs: random bytes as a .debug_line. */
	static struct dwline_tables tables;
	uint32_t seed = 12345;
	uint8_t junk[512];
	for (int round = 0; round < 2000; round++) {
		for (size_t i = 0; i < sizeof(junk); i++) {
			seed = seed * 1103515245u + 12345u;
			junk[i] = (uint8_t)(seed >> 16);
		}
		/* A plausible header start so the program runs sometimes. */
		put_le32(junk, sizeof(junk) - 4 - (round % 64));
		junk[4] = (uint8_t)(2 + round % 4);
		junk[5] = 0;
		struct dwline_sections s = { .line = junk, .line_len = sizeof(junk), .line_str = junk, .line_str_len = 64 };
		dwline_decode(&s, NULL, NULL, &tables, NULL, 0);
	}
	free(img);
	free(orig);
}

int main(void)
{
	RUN(test_gcc_versions);
	RUN(test_numba_lines);
	RUN(test_numba_functions);
	RUN(test_jitdump_numba);
	RUN(test_corrupt_images);
	return test_summary();
}
