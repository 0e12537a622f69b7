/*
 * test_export_web.c — the web exporters (speedscope, chrome, gecko, html,
 * svg) on a hand-built profile model with what real recordings do not all
 * have yet: native, JIT, synthetic and idle frames, sample weights above 1,
 * a second event, two processes, three threads, and hostile names (quotes,
 * "</script>", ';', a control character, invalid UTF-8, a library path with
 * a parenthesis).
 *
 * Checked here: every exporter succeeds and is deterministic, escapes what
 * it must, keeps the right counts (B/E balanced, weights, idle frames),
 * refuses what it cannot carry, and copes with an empty profile; compared
 * with itself (convert --diff), nothing changed in html, svg or collapsed.
 * Given a
 * directory argument it also writes the outputs there (synthetic.FORMAT):
 * tests/func/test_export_web.py hands them to the real consumers.
 */
#include "test.h"

#include "../../src/export/export.h"

static const char *event_names[] = { "samples", "cycles" };

static struct pfunc funcs[] = {
	{ "<module>", "/src/app.py", 1, PK_PYTHON, NULL },
	{ "compute", "/src/app.py", 10, PK_PYTHON, NULL },
	{ "dgemm_kernel", "", 0, PK_NATIVE, "/usr/lib/x86_64-linux-gnu/libblas.so.3" },
	{ "jit_loop", "/src/app.py", 20, PK_JIT, "numba_jit_0" },
	{ "[no Python frame]", "", 0, PK_OTHER, NULL },
	{ "odd </script> \"q\" ;name\x01 \xff end", "/src/we ird;dir/\xc3\xbc.py", 5, PK_PYTHON, NULL },
	{ "ns::Foo<int>::bar(int) const", "", 0, PK_NATIVE, "/opt/lib/lib(paren).so" },
};

static struct pframe frames[] = {
	{ 0, 3, 0, PNONE }, { 1, 12, 0, PNONE }, { 1, 13, 0, PNONE }, { 2, 0, 0x7f0000001234, PNONE },
	{ 3, 22, 0x7e0000000100, PNONE }, { 4, 0, 0, PNONE }, { 5, 7, 0, PNONE }, { 6, 0, 0x7f0000002000, PNONE },
};

static struct pnode nodes[] = {
	{ PNONE, PNONE, 0 }, /* 0 root */
	{ 0, 0, 1 },         /* 1 <module>:3 */
	{ 1, 1, 2 },         /* 2 compute:12 */
	{ 1, 2, 2 },         /* 3 compute:13 */
	{ 2, 3, 3 },         /* 4 dgemm_kernel */
	{ 3, 4, 3 },         /* 5 jit_loop:22 */
	{ 0, 5, 1 },         /* 6 [no Python frame] */
	{ 1, 6, 2 },         /* 7 odd name */
	{ 4, 7, 4 },         /* 8 Foo::bar under dgemm */
	{ 1, 3, 2 },         /* 9 dgemm_kernel right under <module> */
};

#define MS 1000000ull
/* node, thread, time, flags; weight and cycles in values[] */
static struct psample samples[] = {
	{ 4, 0, 11 * MS, 0 }, { 4, 0, 12 * MS, 0 }, { 4, 0, 13 * MS, 0 }, { 5, 0, 14 * MS, 0 },
	{ 5, 0, 15 * MS, 0 }, { 2, 0, 17 * MS, 0 }, { 8, 0, 18 * MS, 0 }, { 7, 0, 19 * MS, 0 },
	{ 6, 1, 11 * MS, 0 }, { 2, 1, 12 * MS, PS_IDLE }, { 2, 1, 13 * MS, PS_IDLE }, { 3, 1, 14 * MS, 0 },
	/* Two samples at one instant, the second a stack three frames away. */
	{ 5, 2, 21 * MS, 0 }, { 5, 2, 22 * MS, 0 }, { 8, 2, 22 * MS, 0 }, { 5, 2, 23 * MS, 0 },
	/* Out of order in the file (exporters sort a thread's samples); after
	 * node 8, dgemm closes deep in one stack and opens at the root of the
	 * next. */
	{ 9, 0, 18 * MS + MS / 2, 0 },
};
#define NSAMPLES (sizeof(samples) / sizeof(samples[0]))
static uint64_t values[NSAMPLES * 2];
static uint64_t totals[2];

static struct pthread_info threads[] = {
	{ .pid = 100, .tid = 100, .process = 0, .name = "MainThread", .start_ns = 10 * MS, .main = 1 },
	{ .pid = 100, .tid = 101, .process = 0, .name = "io-thread", .start_ns = 10 * MS },
	{ .pid = 200, .tid = 200, .process = 1, .name = "MainThread", .start_ns = 20 * MS, .main = 1 },
};
static struct pprocess procs[] = {
	{ .pid = 100, .command = "/usr/bin/python3 app.py --fast", .start_ns = 10 * MS },
	{ .pid = 200, .ppid = 100, .command = "python3 worker.py", .start_ns = 20 * MS },
};

static void build(struct profile *p)
{
	memset(p, 0, sizeof(*p));
	for (size_t i = 0; i < NSAMPLES; i++) {
		values[2 * i] = i == 5 ? 2 : 1;   /* one sample of weight 2 */
		values[2 * i + 1] = 1000 * (i + 1);
		totals[0] += values[2 * i];
		totals[1] += values[2 * i + 1];
	}
	p->command = "python3 app.py --fast";
	p->mode = 1; /* wall */
	p->rate_hz = 1000;
	p->period_ns = MS;
	p->start_realtime_ns = 1700000000000000000ull;
	p->start_ns = 10 * MS;
	p->end_ns = 30 * MS;
	p->nevents = 2;
	p->event_names = (char **)event_names;
	p->totals = totals;
	p->funcs = funcs;
	p->nfuncs = sizeof(funcs) / sizeof(funcs[0]);
	p->frames = frames;
	p->nframes = sizeof(frames) / sizeof(frames[0]);
	p->nodes = nodes;
	p->nnodes = sizeof(nodes) / sizeof(nodes[0]);
	p->samples = samples;
	p->nsamples = NSAMPLES;
	p->values = values;
	p->threads = threads;
	p->nthreads = 3;
	p->procs = procs;
	p->nprocs = 2;
}

static struct profile P;

/* Runs format fmt into a malloc'd string; NULL (and err) if it failed. */
static char *run(const struct profile *p, const char *fmt, const struct export_opts *o, char *err, size_t *len)
{
	const struct exporter *ex = exporter_find(fmt);
	if (!CHECK(ex != NULL))
		return NULL;
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	err[0] = 0;
	int rc = ex->fn(p, f, o, err, 256);
	fclose(f);
	if (len)
		*len = n;
	if (rc) {
		free(buf);
		return NULL;
	}
	return buf;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *s = hay; (s = strstr(s, needle)); s += strlen(needle))
		n++;
	return n;
}

static const char *web[] = { "speedscope", "chrome", "gecko", "html", "svg" };

static void test_all_succeed_deterministic(void)
{
	struct export_opts o = { .title = "app \"run\" </script>" };
	char err[256];
	for (size_t i = 0; i < sizeof(web) / sizeof(web[0]); i++) {
		t_current = web[i];
		size_t n1, n2;
		char *a = run(&P, web[i], &o, err, &n1), *b = run(&P, web[i], &o, err, &n2);
		CHECK(a != NULL && b != NULL);
		if (a && b) {
			CHECK(n1 > 100);
			CHECK(n1 == n2 && memcmp(a, b, n1) == 0);
			/* Invalid UTF-8 in a name is replaced, never copied. */
			CHECK(strstr(a, "\xff") == NULL);
			CHECK(strstr(a, "\xEF\xBF\xBD") != NULL);
			CHECK(strchr(a, '\x01') == NULL);
		}
		free(a);
		free(b);
	}
	t_current = "";
}

static void test_speedscope(void)
{
	char err[256];
	struct export_opts o = { 0 };
	char *s = run(&P, "speedscope", &o, err, NULL);
	if (!CHECK(s))
		return;
	CHECK(strstr(s, "\"$schema\":\"https://www.speedscope.app/file-format-schema.json\""));
	CHECK_EQ(count(s, "\"type\":\"sampled\""), 3);
	CHECK_EQ(count(s, "\"unit\":\"nanoseconds\""), 3);
	/* Thread 0: samples 4,4,4 merge into one of 3 ms; the weight-2 sample is 2 ms. */
	CHECK(strstr(s, "\"weights\":[3000000,2000000,2000000,1000000,1000000,1000000]"));
	CHECK(strstr(s, "\"name\":\"dgemm_kernel (libblas.so.3)\",\"file\":\"/usr/lib/x86_64-linux-gnu/libblas.so.3\""));
	CHECK(strstr(s, "python3 worker.py (pid 200) \xC2\xB7 MainThread (tid 200)"));
	free(s);
	/* Another event: raw counts, no time unit. */
	o.event = 1;
	s = run(&P, "speedscope", &o, err, NULL);
	if (CHECK(s)) {
		CHECK_EQ(count(s, "\"unit\":\"none\""), 3);
		CHECK(strstr(s, "\"weights\":[6000,9000,6000,7000,17000,8000]")); /* 1+2+3, 4+5, ... */
	}
	free(s);
	/* Idle samples left out on request. */
	o.event = 0;
	o.exclude_idle = 1;
	s = run(&P, "speedscope", &o, err, NULL);
	if (CHECK(s))
		CHECK(strstr(s, "\"endValue\":2000000,")); /* io-thread: 4 samples, 2 idle */
	free(s);
}

static void test_chrome(void)
{
	char err[256];
	struct export_opts o = { 0 };
	char *s = run(&P, "chrome", &o, err, NULL);
	if (!CHECK(s))
		return;
	CHECK_EQ(count(s, "\"ph\":\"B\""), count(s, "\"ph\":\"E\""));
	CHECK_EQ(count(s, "\"name\":\"process_name\""), 2);
	CHECK_EQ(count(s, "\"name\":\"thread_name\""), 3);
	CHECK(strstr(s, "\"args\":{\"name\":\"python3 app.py\"}"));
	/* The first sample spans the period before it: 11 ms - 1 ms, from the
	 * session start at 10 ms: ts 0. Three samples of node 4: one event
	 * from 0 to 3 ms (13 ms - 10 ms). */
	CHECK(strstr(s, "{\"ph\":\"B\",\"pid\":100,\"tid\":100,\"ts\":0,\"name\":\"<module> (app.py:3)\",\"cat\":\"python\"}"));
	CHECK(strstr(s, "{\"ph\":\"E\",\"pid\":100,\"tid\":100,\"ts\":3000,\"name\":\"dgemm_kernel (libblas.so.3)\"}"));
	CHECK(strstr(s, "\"cat\":\"native\""));
	CHECK(strstr(s, "\"cat\":\"jit\""));
	free(s);
}

static void test_gecko(void)
{
	char err[256];
	struct export_opts o = { 0 };
	char *s = run(&P, "gecko", &o, err, NULL);
	if (!CHECK(s))
		return;
	CHECK(strstr(s, "\"dgemm_kernel (in libblas.so.3)\""));
	CHECK(strstr(s, "\"ns::Foo<int>::bar(int) const (in lib(paren].so)\""));
	CHECK(strstr(s, "\"compute (/src/app.py:10)\""));
	CHECK(strstr(s, "\"jit_loop (/src/app.py:20)\""));
	CHECK(strstr(s, "{\"name\":\"JIT\",\"color\":\"green\""));
	CHECK_EQ(count(s, "\"[idle]\""), 1);      /* only io-thread has idle samples */
	CHECK_EQ(count(s, "\"processName\":\"python3 app.py (pid 100)\""), 2);
	/* Rows ending in ",0]": 18 frame rows (7 + 4 + "[idle]" + 6), 18
	 * sample rows (17 records, one of weight 2 written twice) and each
	 * thread's first stack, [null,0]. */
	CHECK_EQ(count(s, ",0]"), 18 + 18 + 3);
	free(s);
	o.event = 1;
	s = run(&P, "gecko", &o, err, NULL);
	CHECK(s == NULL);
	CHECK_CONTAINS(err, "samples only");
	free(s);
}

static void test_html(void)
{
	char err[256];
	struct export_opts o = { .title = "t </script><script>alert(1)</script>" };
	char *s = run(&P, "html", &o, err, NULL);
	if (!CHECK(s))
		return;
	/* The data's script and the viewer's: no other "</script>" survives. */
	CHECK_EQ(count(s, "</script>"), 2);
	CHECK(strstr(s, "\\u003c/script>"));
	CHECK(strstr(s, "<!DOCTYPE html>") == s);
	CHECK(strstr(s, "window.strataFlame"));
	CHECK(!strstr(s, "http://") && !strstr(s, "https://"));
	CHECK(strstr(s, "\"procs\":[[\"python3 app.py (pid 100)\",100,\"python3 app.py\"],[\"python3 worker.py (pid 200)\",200,\"python3 worker.py\"]]"));
	free(s);
}

static void test_svg(void)
{
	char err[256];
	struct export_opts o = { .title = "a & b <c>" };
	char *s = run(&P, "svg", &o, err, NULL);
	if (!CHECK(s))
		return;
	CHECK(strstr(s, "a &amp; b &lt;c&gt;"));
	CHECK(strstr(s, "odd &lt;/script&gt; &quot;q&quot; ;name"));
	/* One box per node with cost: 9 (no empty nodes here). */
	CHECK_EQ(count(s, "<g><title>"), 9);
	CHECK(strstr(s, "dgemm_kernel (libblas.so.3)\n/usr/lib/x86_64-linux-gnu/libblas.so.3\nnative, 5 samples, 27.78%"));
	free(s);
}

static void test_empty(void)
{
	struct profile e = P;
	e.nsamples = 0;
	struct export_opts o = { 0 };
	char err[256];
	for (size_t i = 0; i < sizeof(web) / sizeof(web[0]); i++) {
		t_current = web[i];
		char *s = run(&e, web[i], &o, err, NULL);
		CHECK(s != NULL);
		free(s);
	}
	t_current = "";
}

/* The model against itself: every frame matches, nothing changed. */
static void test_diff_self(void)
{
	char err[256];
	struct diff_match *m = diff_match_build(&P, &P, NULL);
	if (!CHECK(m != NULL))
		return;
	struct export_diff d = { .base = &P, .match = m, .scale = { 1, 1 }, .unit = "ns", .base_title = "same" };
	struct export_opts o = { .title = "t", .diff = &d };
	char *s = run(&P, "collapsed", &o, err, NULL);
	if (CHECK(s)) {
		/* "stack N N" on every line. */
		size_t lines = 0, equal = 0;
		for (char *l = s; *l; lines++) {
			char *nl = strchr(l, '\n');
			if (!nl)
				break;
			*nl = 0;
			char *b = strrchr(l, ' ');
			*b = 0;
			char *a = strrchr(l, ' ');
			equal += a && !strcmp(a + 1, b + 1);
			l = nl + 1;
		}
		CHECK(lines > 5);
		CHECK_EQ(equal, lines);
		free(s);
	}
	s = run(&P, "svg", &o, err, NULL);
	if (CHECK(s)) {
		CHECK_EQ(count(s, "fill=\"rgb(226,226,220)\""), count(s, "<g><title>"));
		CHECK(strstr(s, "Differential flame graph: t against same"));
		free(s);
	}
	s = run(&P, "html", &o, err, NULL);
	if (CHECK(s)) {
		CHECK(strstr(s, "\"bfuncs\":[]"));
		CHECK(strstr(s, "\"diff\":{\"absolute\":false,\"title\":\"same\""));
		free(s);
	}
	/* Formats without a differential form say so (convert refuses them). */
	CHECK(!exporter_find("speedscope")->diff && exporter_find("html")->diff);
	diff_match_free(m);
}

static void write_all(const char *dir)
{
	struct export_opts o = { .title = "synthetic </script> profile" };
	for (size_t i = 0; i < sizeof(web) / sizeof(web[0]); i++) {
		char path[512], err[256];
		snprintf(path, sizeof(path), "%s/synthetic.%s", dir, web[i]);
		FILE *f = fopen(path, "w");
		if (!CHECK(f != NULL))
			continue;
		CHECK_EQ(exporter_find(web[i])->fn(&P, f, &o, err, sizeof(err)), 0);
		fclose(f);
	}
}

int main(int argc, char **argv)
{
	build(&P);
	RUN(test_all_succeed_deterministic);
	RUN(test_speedscope);
	RUN(test_chrome);
	RUN(test_gecko);
	RUN(test_html);
	RUN(test_svg);
	RUN(test_empty);
	RUN(test_diff_self);
	if (argc > 1)
		write_all(argv[1]);
	return test_summary();
}
