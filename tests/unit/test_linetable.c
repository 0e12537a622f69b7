/*
 * test_linetable.c — line tables of every interpreter, offset by offset.
 *
 * fixtures/linetables.txt holds real tables dumped by gen_linetables.py with
 * the line CPython itself reports for each instruction offset; every one of
 * them must decode to exactly that line. Hand-made tables cover the
 * boundaries the fixtures cannot (offsets past the end, not-started
 * frames), and random bytes must never read out of bounds.
 */
#include "test.h"

#include "../../src/common/format.h"
#include "../../src/lib/linetable.h"

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Features the fixtures must keep covering, counted while checking. */
struct coverage {
	int tables[4];
	int no_line_offsets[4];
	int long_form;       /* 3.11+ entries with code 14 */
	int no_location;     /* 3.11+ entries with code 15 */
	int big_line_jump;   /* 3.8–3.10 pairs with a saturated line delta */
	int neg_line;        /* negative line deltas */
	int big_first;       /* co_firstlineno past 65535 */
};

static void scan_coverage(struct coverage *c, int fmt, const uint8_t *t, size_t n, long first)
{
	c->tables[fmt]++;
	if (first > 65535)
		c->big_first++;
	if (fmt == LT_LOCATIONS) {
		for (size_t i = 0; i < n; i++) {
			if (!(t[i] & 0x80))
				continue;
			int code = (t[i] >> 3) & 15;
			c->long_form += code == 14;
			c->no_location += code == 15;
			/* Negative deltas are odd svarints of code 13/14. */
			if ((code == 13 || code == 14) && i + 1 < n && (t[i + 1] & 1))
				c->neg_line++;
		}
	} else {
		for (size_t i = 0; i + 1 < n; i += 2) {
			int8_t d = (int8_t)t[i + 1];
			c->big_line_jump += d == 127 || (fmt == LT_LINETABLE && d == -127);
			c->neg_line += d < 0 && d != -128;
		}
	}
}

static void test_fixtures(void)
{
	const char *path = SRCDIR "/tests/unit/fixtures/linetables.txt";
	FILE *f = fopen(path, "r");
	if (!CHECK(f != NULL)) {
		fprintf(stderr, "    cannot open %s\n", path);
		return;
	}
	char *line = NULL, *lines = NULL;
	size_t cap = 0, lcap = 0;
	struct coverage cov = { 0 };
	int codes = 0, offsets = 0, mismatches = 0;
	while (getline(&line, &cap, f) > 0) {
		if (strncmp(line, "code ", 5) != 0)
			continue;
		char ver[32], name[512], hex[1 << 16];
		int fmt;
		long first;
		hex[0] = 0;
		/* Tables longer than the buffer are not in the fixtures. */
		if (!CHECK(sscanf(line, "code %31s %d %511s %ld %65535s", ver, &fmt, name, &first, hex) == 5))
			break;
		size_t hl = strcmp(hex, "-") ? strlen(hex) : 0;
		uint8_t *tab = malloc(hl / 2 + 1);
		for (size_t i = 0; i + 1 < hl + 1 && i < hl; i += 2)
			tab[i / 2] = (uint8_t)(hexval(hex[i]) << 4 | hexval(hex[i + 1]));
		scan_coverage(&cov, fmt, tab, hl / 2, first);

		if (!CHECK(getline(&lines, &lcap, f) > 0 && strncmp(lines, "lines ", 6) == 0)) {
			free(tab);
			break;
		}
		struct linetable lt;
		CHECK_EQ(linetable_decode(&lt, fmt, tab, hl / 2, (uint32_t)first), 0);
		char *p = lines + 6, *end;
		long n = strtol(p, &end, 10);
		p = end;
		for (long i = 0; i < n; i++) {
			while (*p == ' ')
				p++;
			long want;
			if (*p == '-') {
				want = -1;
				p++;
				cov.no_line_offsets[fmt]++;
			} else {
				want = strtol(p, &end, 10);
				p = end;
			}
			int32_t got = linetable_line(&lt, (int32_t)i);
			offsets++;
			if (got != want) {
				if (mismatches++ < 20)
					fprintf(stderr, "    python %s %s (fmt %d): offset %ld: line %d, expected %ld\n",
						ver, name, fmt, i, got, want);
			}
		}
		/* Not started yet: the first line, whatever the format. */
		CHECK_EQ(linetable_line(&lt, -1), first);
		codes++;
		linetable_free(&lt);
		free(tab);
	}
	free(line);
	free(lines);
	fclose(f);
	CHECK_EQ(mismatches, 0);
	CHECK(codes > 100);
	fprintf(stderr, "    %d code objects, %d offsets checked\n", codes, offsets);
	/* The fixtures must exercise every format and the awkward entries. */
	CHECK(cov.tables[LT_LNOTAB] > 0);
	CHECK(cov.tables[LT_LINETABLE] > 0);
	CHECK(cov.tables[LT_LOCATIONS] > 0);
	CHECK(cov.long_form > 0);
	CHECK(cov.no_location > 0);
	CHECK(cov.no_line_offsets[LT_LINETABLE] + cov.no_line_offsets[LT_LOCATIONS] > 0);
	CHECK(cov.big_line_jump > 0);
	CHECK(cov.neg_line > 0);
	CHECK(cov.big_first > 0);
}

/* 3.8/3.9: pairs (0, +2) (6, +1) (4, -1): lines 12@0, 13@6, 12@10 and the
 * last line for anything past the table, as PyCode_Addr2Line does. */
static void test_lnotab_by_hand(void)
{
	const uint8_t t[] = { 0, 2, 6, 1, 4, 0xff };
	struct linetable lt;
	CHECK_EQ(linetable_decode(&lt, LT_LNOTAB, t, sizeof(t), 10), 0);
	CHECK_EQ(linetable_line(&lt, 0), 12);
	CHECK_EQ(linetable_line(&lt, 2), 12);
	CHECK_EQ(linetable_line(&lt, 3), 13);
	CHECK_EQ(linetable_line(&lt, 4), 13);
	CHECK_EQ(linetable_line(&lt, 5), 12);
	CHECK_EQ(linetable_line(&lt, 1000), 12);
	CHECK_EQ(linetable_line(&lt, -1), 10);
	linetable_free(&lt);
	/* An empty co_lnotab: everything is on the first line. */
	CHECK_EQ(linetable_decode(&lt, LT_LNOTAB, NULL, 0, 7), 0);
	CHECK_EQ(linetable_line(&lt, 0), 7);
	CHECK_EQ(linetable_line(&lt, 50), 7);
	linetable_free(&lt);
}

/* 3.10: (4, +1) (2, -128) (0, +5) (6, 0) → 11@0-3, none@4-5, 16@6-11. */
static void test_linetable_by_hand(void)
{
	const uint8_t t[] = { 4, 1, 2, 0x80, 0, 5, 6, 0 };
	struct linetable lt;
	CHECK_EQ(linetable_decode(&lt, LT_LINETABLE, t, sizeof(t), 10), 0);
	CHECK_EQ(linetable_line(&lt, 0), 11);
	CHECK_EQ(linetable_line(&lt, 1), 11);
	CHECK_EQ(linetable_line(&lt, 2), -1);
	CHECK_EQ(linetable_line(&lt, 3), 16);
	CHECK_EQ(linetable_line(&lt, 5), 16);
	CHECK_EQ(linetable_line(&lt, 6), -1); /* past the end */
	CHECK_EQ(linetable_line(&lt, -1), 10);
	linetable_free(&lt);
}

/* 3.11: short form (code 0, 2 units), one-line+1 (code 11, 1 unit), long
 * form with delta -1 and a 3-byte tail (code 14, 3 units), no location
 * (code 15, 1 unit), no-columns with a two-byte varint delta +100. */
static void test_locations_by_hand(void)
{
	const uint8_t t[] = {
		0x80 | 0 << 3 | 1, 0x05,                   /* line 10, units 0-1 */
		0x80 | 11 << 3 | 0, 4, 9,                  /* line 11, unit 2 */
		0x80 | 14 << 3 | 2, 0x03, 0x00, 0x05, 0x09, /* line 10, units 3-5 */
		0x80 | 15 << 3 | 0,                        /* no line, unit 6 */
		0x80 | 13 << 3 | 0, 0x40 | (200 & 63), 200 >> 6, /* +100: line 110, unit 7 */
	};
	struct linetable lt;
	CHECK_EQ(linetable_decode(&lt, LT_LOCATIONS, t, sizeof(t), 10), 0);
	CHECK_EQ(linetable_line(&lt, 0), 10);
	CHECK_EQ(linetable_line(&lt, 1), 10);
	CHECK_EQ(linetable_line(&lt, 2), 11);
	CHECK_EQ(linetable_line(&lt, 3), 10);
	CHECK_EQ(linetable_line(&lt, 5), 10);
	CHECK_EQ(linetable_line(&lt, 6), -1);
	CHECK_EQ(linetable_line(&lt, 7), 110);
	CHECK_EQ(linetable_line(&lt, 8), -1);
	CHECK_EQ(linetable_line(&lt, -1), 10);
	linetable_free(&lt);
	/* No table at all (a code object the agent could not read). */
	CHECK_EQ(linetable_decode(&lt, LT_NONE, NULL, 0, 5), 0);
	CHECK_EQ(linetable_line(&lt, 3), -1);
	CHECK_EQ(linetable_line(&lt, -1), 5);
	linetable_free(&lt);
}

/* Garbage in any format decodes to something without reading out of
 * bounds (ASan watches) and lookups stay sane. */
static void test_random_tables(void)
{
	uint32_t seed = 12345;
	for (int iter = 0; iter < 3000; iter++) {
		size_t n = (size_t)(iter % 97);
		uint8_t *t = malloc(n ? n : 1);
		for (size_t i = 0; i < n; i++) {
			seed = seed * 1103515245u + 12345u;
			t[i] = (uint8_t)(seed >> 16);
		}
		int fmt = iter % 5;
		struct linetable lt;
		CHECK_EQ(linetable_decode(&lt, fmt, t, n, (uint32_t)(seed % 100000)), 0);
		for (uint32_t i = 1; i < lt.n; i++)
			if (lt.r[i].start <= lt.r[i - 1].start)
				CHECK(!"ranges not strictly increasing");
		for (int32_t off = -1; off < (int32_t)n * 8; off++) {
			int32_t l = linetable_line(&lt, off);
			if (l < -1)
				CHECK(!"line below -1");
		}
		CHECK(linetable_line(&lt, INT32_MAX) >= -1);
		linetable_free(&lt);
		free(t);
	}
}

int main(void)
{
	RUN(test_fixtures);
	RUN(test_lnotab_by_hand);
	RUN(test_linetable_by_hand);
	RUN(test_locations_by_hand);
	RUN(test_random_tables);
	return test_summary();
}
