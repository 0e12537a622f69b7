/*
 * fuzz_dwline.c — libFuzzer target for the DWARF .debug_line decoder
 * (src/common/dwline.c), which the helper runs on the line tables of JIT
 * images (Numba with NUMBA_DEBUGINFO=1) for --perf-map's jitdump.
 *
 * Input: u16 length of .debug_line_str, u16 length of .debug_str, those
 * two sections, then .debug_line (the rest). Each section is a heap copy
 * of exactly its size, so a read past any of them is caught. Every row's
 * strings must lie in a section, NUL-terminated there, or be "".
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "common/dwline.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_setup();
	return 0;
}

struct ctx {
	const struct dwline_sections *s;
	long rows;
	int stop_at;
};

static int inside(const char *p, const uint8_t *sec, size_t n)
{
	return sec && (const uint8_t *)p >= sec && (const uint8_t *)p < sec + n &&
	       memchr(p, 0, n - (size_t)((const uint8_t *)p - sec));
}

static void check_str(const struct dwline_sections *s, const char *p)
{
	FUZZ_CHECK(p);
	FUZZ_CHECK(!*p || inside(p, s->line, s->line_len) || inside(p, s->line_str, s->line_str_len) ||
		   inside(p, s->str, s->str_len));
}

static int row(void *arg, const struct dwline_row *r)
{
	struct ctx *c = arg;
	check_str(c->s, r->dir);
	check_str(c->s, r->file);
	c->rows++;
	return c->stop_at && c->rows == c->stop_at;
}

static uint8_t *copy(const uint8_t *p, size_t n)
{
	uint8_t *d = malloc(n ? n : 1);
	if (d && n)
		memcpy(d, p, n);
	return d;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fin in = { data, size };
	size_t nls = fin_u16(&in), ns = fin_u16(&in), nl;
	const uint8_t *ls = fin_take(&in, nls, &nls);
	const uint8_t *st = fin_take(&in, ns, &ns);
	const uint8_t *l = fin_take(&in, in.n, &nl);
	uint8_t *line = copy(l, nl), *line_str = copy(ls, nls), *str = copy(st, ns);
	static struct dwline_tables tables;
	if (line && line_str && str) {
		struct dwline_sections s = { line, nl, nls ? line_str : NULL, nls, ns ? str : NULL, ns };
		char err[128];
		struct ctx c = { &s, 0, 0 };
		long n = dwline_decode(&s, row, &c, &tables, err, sizeof(err));
		FUZZ_CHECK(n >= -1);
		FUZZ_CHECK(n < 0 || n == c.rows);
		/* Stopped by the callback part way, as a caller may. */
		if (c.rows > 1) {
			struct ctx c2 = { &s, 0, (int)(c.rows / 2) };
			dwline_decode(&s, row, &c2, &tables, NULL, 0);
			FUZZ_CHECK(c2.rows == c.rows / 2);
		}
	}
	free(line);
	free(line_str);
	free(str);
	return 0;
}
