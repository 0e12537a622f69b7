/*
 * test_perfmap.c — perf maps on the CLI side: the line parser (every kind
 * of malformed line), REC_PERFMAP encoding and its decoder on truncated and
 * hostile bodies, and the lookup table (newest entry wins where code was
 * freed and its memory reused; bounded look-back).
 */
#include "test.h"

#include "../../src/common/format.h"
#include "../../src/common/perfmap.h"

static int parse(const char *line, uint64_t *start, uint64_t *size, char *name, size_t cap)
{
	const char *n;
	size_t nl;
	int rc = perfmap_parse_line(line, strlen(line), start, size, &n, &nl);
	if (rc == 0)
		snprintf(name, cap, "%.*s", (int)nl, n);
	return rc;
}

static void test_parse(void)
{
	uint64_t s, z;
	char name[256];
	CHECK_EQ(parse("7f51854c0000 b py::_find_and_load:<frozen importlib._bootstrap>", &s, &z, name, sizeof(name)),
		 0);
	CHECK_EQ(s, 0x7f51854c0000ull);
	CHECK_EQ(z, 0xb);
	CHECK_STR(name, "py::_find_and_load:<frozen importlib._bootstrap>");
	/* 0x prefixes, a name with spaces, a CR, an empty name */
	CHECK_EQ(parse("0x1000 0X20 void Foo::bar(int, char)\r", &s, &z, name, sizeof(name)), 0);
	CHECK_EQ(s, 0x1000);
	CHECK_EQ(z, 0x20);
	CHECK_STR(name, "void Foo::bar(int, char)");
	CHECK_EQ(parse("7f51854c002c b ", &s, &z, name, sizeof(name)), 0);
	CHECK_STR(name, "");
	CHECK_EQ(parse("1000 10", &s, &z, name, sizeof(name)), 0);
	CHECK_STR(name, "");
	/* malformed */
	CHECK_EQ(parse("", &s, &z, name, sizeof(name)), -1);
	CHECK_EQ(parse("xyz 10 f", &s, &z, name, sizeof(name)), -1);
	CHECK_EQ(parse("1000", &s, &z, name, sizeof(name)), -1);
	CHECK_EQ(parse("1000 zz f", &s, &z, name, sizeof(name)), -1);
	CHECK_EQ(parse("1000 0 f", &s, &z, name, sizeof(name)), -1);          /* empty */
	CHECK_EQ(parse("1000g 10 f", &s, &z, name, sizeof(name)), -1);
	CHECK_EQ(parse("11112222333344445 10 f", &s, &z, name, sizeof(name)), -1); /* 17 digits */
	CHECK_EQ(parse("ffffffffffffffff 10 f", &s, &z, name, sizeof(name)), -1);  /* wraps */
	/* a very long name is cut */
	char big[3000];
	memset(big, 'a', sizeof(big));
	memcpy(big, "10 10 ", 6);
	big[sizeof(big) - 1] = 0;
	const char *n;
	size_t nl;
	CHECK_EQ(perfmap_parse_line(big, strlen(big), &s, &z, &n, &nl), 0);
	CHECK_EQ(nl, PERFMAP_NAME_MAX);
}

static void test_record(void)
{
	struct perfmap_entry in[3] = { { 0x1000, 0x10, "a" }, { 0x7fff00000000ull, 0xb, "py::f:x.py" }, { 5, 1, "" } };
	struct wbuf b;
	wbuf_init(&b);
	rec_put_perfmap(&b, in, 3);
	CHECK(!b.oom);
	struct rbuf r, body;
	rbuf_init(&r, b.data, b.len);
	uint64_t type;
	CHECK_EQ(rec_next(&r, &type, &body), 1);
	CHECK_EQ(type, REC_PERFMAP);
	CHECK(rec_type_known(type));
	struct perfmap_entry *e;
	uint32_t n;
	struct rbuf copy = body;
	CHECK_EQ(rec_get_perfmap(&copy, &e, &n), 0);
	CHECK_EQ(n, 3);
	if (n == 3) {
		CHECK_EQ(e[1].start, 0x7fff00000000ull);
		CHECK_EQ(e[1].size, 0xb);
		CHECK_STR(e[1].name, "py::f:x.py");
		CHECK_STR(e[2].name, "");
	}
	perfmap_entries_free(e, n);
	/* Every truncation of the body fails cleanly (ASan checks the rest). */
	size_t blen = (size_t)(body.end - body.p);
	for (size_t cut = 0; cut < blen; cut++) {
		struct rbuf t;
		rbuf_init(&t, body.p, cut);
		e = (void *)1;
		CHECK_EQ(rec_get_perfmap(&t, &e, &n), -1);
		CHECK(e == NULL);
	}
	/* A count far beyond the bytes present allocates nothing. */
	uint8_t huge[] = { 0xff, 0xff, 0xff, 0x0f, 1, 1, 0 };
	struct rbuf h;
	rbuf_init(&h, huge, sizeof(huge));
	CHECK_EQ(rec_get_perfmap(&h, &e, &n), -1);
	/* A wrapping range is refused. */
	struct wbuf w;
	wbuf_init(&w);
	wbuf_uv(&w, 1);
	wbuf_uv(&w, UINT64_MAX - 2);
	wbuf_uv(&w, 16);
	wbuf_str(&w, "x");
	rbuf_init(&h, w.data, w.len);
	CHECK_EQ(rec_get_perfmap(&h, &e, &n), -1);
	wbuf_free(&w);
	wbuf_free(&b);
}

static void test_table(void)
{
	struct perfmap_table t = { 0 };
	CHECK(perfmap_table_find(&t, 0x1000) == NULL);
	/* Contiguous trampolines, added out of order. */
	for (int i = 9; i >= 0; i--) {
		char nm[32];
		snprintf(nm, sizeof(nm), "py::f%d:x.py", i);
		CHECK_EQ(perfmap_table_add(&t, 0x1000 + 0xb * (uint64_t)i, 0xb, nm), 0);
	}
	const struct perfmap_entry *e = perfmap_table_find(&t, 0x1000 + 0xb * 3 + 5);
	CHECK(e && !strcmp(e->name, "py::f3:x.py"));
	e = perfmap_table_find(&t, 0x1000);
	CHECK(e && !strcmp(e->name, "py::f0:x.py"));
	CHECK(perfmap_table_find(&t, 0xfff) == NULL);
	CHECK(perfmap_table_find(&t, 0x1000 + 0xb * 10) == NULL);
	/* Memory reused: a later entry over f3..f4 wins there; f5 stays. */
	CHECK_EQ(perfmap_table_add(&t, 0x1000 + 0xb * 3, 0x16, "jitted"), 0);
	e = perfmap_table_find(&t, 0x1000 + 0xb * 4 + 1);
	CHECK(e && !strcmp(e->name, "jitted"));
	e = perfmap_table_find(&t, 0x1000 + 0xb * 5);
	CHECK(e && !strcmp(e->name, "py::f5:x.py"));
	/* A big entry far back still covers what nothing else does. */
	CHECK_EQ(perfmap_table_add(&t, 0x100000, 0x10000, "big"), 0);
	CHECK_EQ(perfmap_table_add(&t, 0x100010, 0x10, "small"), 0);
	e = perfmap_table_find(&t, 0x108000);
	CHECK(e && !strcmp(e->name, "big"));
	e = perfmap_table_find(&t, 0x100011);
	CHECK(e && !strcmp(e->name, "small"));
	/* Empty and wrapping entries cover nothing and are not stored. */
	uint32_t n = t.n;
	CHECK_EQ(perfmap_table_add(&t, 0x5000, 0, "empty"), 0);
	CHECK_EQ(perfmap_table_add(&t, UINT64_MAX - 1, 8, "wrap"), 0);
	CHECK_EQ(t.n, n);
	/* Appending in address order keeps the table sorted (no re-sort per
	 * batch), and lookups still see the new entries. */
	CHECK(perfmap_table_find(&t, 0x100011) != NULL);
	CHECK(t.sorted);
	CHECK_EQ(perfmap_table_add(&t, 0x200000, 0x10, "later"), 0);
	CHECK(t.sorted);
	e = perfmap_table_find(&t, 0x200004);
	CHECK(e && !strcmp(e->name, "later"));
	CHECK_EQ(perfmap_table_add(&t, 0x1500, 0x10, "earlier"), 0);
	CHECK(!t.sorted);
	e = perfmap_table_find(&t, 0x1504);
	CHECK(e && !strcmp(e->name, "earlier"));
	CHECK(perfmap_is_cpython_trampoline("py::f:x.py"));
	CHECK(!perfmap_is_cpython_trampoline("jitted"));
	perfmap_table_free(&t);
}

int main(void)
{
	RUN(test_parse);
	RUN(test_record);
	RUN(test_table);
	return test_summary();
}
