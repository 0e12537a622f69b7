/*
 * test_export.c — every exporter on synthetic profiles whose answer is
 * known: an empty profile, a deep recursion with awkward names and three
 * events, and (for the exporters that only read the model's public
 * fields) a model with native and JIT frames. Checks what each format must
 * preserve (totals, one count per sample, names on one line) and that a
 * failing write is reported. Run under ASan/UBSan by `make asan`, which is
 * the main point: the consumers themselves are exercised by
 * tests/func/test_export_text.py.
 */
#include "test.h"

#include <zlib.h>

#include "synth.h"
#include "synthmodel.h"
#include "../../src/export/export.h"
#include "../../src/export/labels.h"
#include "../../src/lib/profile.h"

/* ---- profiles from .strata files ------------------------------------------------ */

#define DEEP 1500

/* A profile of one process: `deep` samples of a recursion DEEP frames deep
 * through two functions with awkward names, plus `flat` samples of a
 * one-frame stack; counters "cycles" and "cache-misses". */
static struct profile *load_synthetic(uint32_t deep, uint32_t flat)
{
	struct synth s;
	synth_init(&s, STRATA_FMT_MAJOR, STRATA_FMT_MINOR);
	char *argv[] = { "python3", "odd\nname.py" };
	char *ev[] = { "cycles", "cache-misses" };
	struct rec_session se = { .strata_version = "test", .start_mono_ns = 1, .argc = 2, .argv = argv,
				  .rate_hz = 1000, .nevents = 2, .events = ev, .hostname = "h" };
	rec_put_session(&s.recs, &se);
	synth_chunk(&s, 1, 0);
	struct rec_process pr = { .pid = 7, .ppid = 1, .start_mono_ns = 2, .python_version = "3.11.2",
				  .executable = "/usr/bin/python3.11", .argc = 2, .argv = argv, .rate_hz = 1000,
				  .period_ns = 1000000, .nevents = 2, .events = ev };
	rec_put_process(&s.recs, &pr);
	struct rec_thread th = { .tid = 7, .flags = THREAD_MAIN, .name = "Main\nThread;1" };
	rec_put_thread(&s.recs, &th);
	uint8_t lt[3 * 4];
	for (int i = 0; i < 4; i++) {
		lt[3 * i] = 0x80 | 11 << 3;
		lt[3 * i + 1] = 4;
		lt[3 * i + 2] = 20;
	}
	const char *names[] = { "a;b\nc 12", "(1) x\t\xc3\xa4 <lambda>", "flat 42" };
	const char *files[] = { "/tmp/odd\ndir/f;1.py", "(2)/x y.py", "" };
	for (uint32_t i = 0; i < 3; i++) {
		struct rec_code c = { .index = i, .firstlineno = 10 * (i + 1), .linetable_fmt = LT_LOCATIONS,
				      .filename = (char *)files[i], .name = (char *)names[i],
				      .qualname = (char *)names[i], .linetable = lt, .linetable_len = sizeof(lt) };
		rec_put_code(&s.recs, &c);
	}
	static struct rec_pyframe py[DEEP];
	for (uint32_t d = 0; d < DEEP; d++)
		py[d] = (struct rec_pyframe){ d % 2, (int32_t)(d % 3), d == DEEP - 1 ? PYF_ENTRY : 0 };
	struct rec_stack st0 = { .index = 0, .npy = DEEP, .py = py };
	rec_put_stack(&s.recs, &st0);
	struct rec_pyframe one = { 2, 1, PYF_ENTRY };
	struct rec_stack st1 = { .index = 1, .npy = 1, .py = &one };
	rec_put_stack(&s.recs, &st1);
	for (uint32_t i = 0; i < deep + flat; i++) {
		struct rec_sample smp = { .tid = 7, .dt_ns = 1000000, .stack = i < deep ? 0 : 1, .weight = 1 + i % 2,
					  .ncounters = 2, .counters = { 100 + i, i % 7 } };
		rec_put_sample(&s.recs, &smp);
	}
	synth_chunk(&s, 2, CHUNK_LAST);
	char path[64];
	struct profile *p = NULL;
	if (synth_write(&s, path) == 0) {
		char err[256];
		p = profile_load(path, NULL, err, sizeof(err));
		if (!p)
			fprintf(stderr, "load: %s\n", err);
		unlink(path);
	}
	synth_free(&s);
	return p;
}

/* ---- running an exporter ---------------------------------------------------------- */

struct output {
	char *data;
	size_t len;
	int rc;
	char err[256];
};

static void run_exporter(const struct exporter *ex, const struct profile *p, uint32_t event, struct output *o)
{
	memset(o, 0, sizeof(*o));
	FILE *f = open_memstream(&o->data, &o->len);
	struct export_opts opts = { .title = p->command, .source = "test", .event = event };
	o->rc = ex->fn(p, f, &opts, o->err, sizeof(o->err));
	fclose(f);
}

static uint64_t line_value(const char *text, const char *key, uint32_t col)
{
	const char *s = strstr(text, key);
	if (!s)
		return UINT64_MAX;
	s += strlen(key);
	uint64_t v = 0;
	for (uint32_t c = 0; c <= col; c++)
		v = strtoull(s, (char **)&s, 10);
	return v;
}

/* What every format must hold, checked from its own text or bytes. */
static void check_output(const char *name, const struct profile *p, uint32_t event, const struct output *o)
{
	if (!strcmp(name, "callgrind")) {
		for (uint32_t e = 0; e < p->nevents; e++) {
			CHECK_U64(line_value(o->data, "\nsummary:", e), p->totals[e]);
			CHECK_U64(line_value(o->data, "\ntotals:", e), p->totals[e]);
		}
		/* Names stay on their line: every line is a header, a spec, a
		 * cost line, a comment or empty. */
		const char *s = o->data;
		while (s && *s) {
			const char *nl = strchr(s, '\n');
			size_t n = nl ? (size_t)(nl - s) : strlen(s);
			int ok = n == 0 || *s == '#' || (*s >= '0' && *s <= '9') || memchr(s, '=', n) || memchr(s, ':', n);
			if (!CHECK(ok))
				fprintf(stderr, "    line: %.*s\n", (int)n, s);
			s = nl ? nl + 1 : NULL;
		}
	} else if (!strcmp(name, "collapsed")) {
		uint64_t sum = 0;
		for (const char *s = o->data; s && *s;) {
			const char *nl = strchr(s, '\n');
			if (!CHECK(nl))
				break;
			const char *sp = nl;
			while (sp > s && sp[-1] != ' ')
				sp--;
			sum += strtoull(sp, NULL, 10);
			/* No frame ends in " NUMBER" (a second count column to
			 * flame graph tools). */
			const char *q = sp - 1;
			while (q > s && q[-1] >= '0' && q[-1] <= '9')
				q--;
			CHECK(!(q < sp - 1 && q > s && (q[-1] == ' ' || q[-1] == '\t')));
			s = nl + 1;
		}
		CHECK_U64(sum, p->totals[event]);
	} else if (!strcmp(name, "pprof")) {
		CHECK(o->len > 2 && (uint8_t)o->data[0] == 0x1f && (uint8_t)o->data[1] == 0x8b);
		/* The gzip stream is whole. */
		z_stream z = { 0 };
		CHECK_EQ(inflateInit2(&z, 15 + 16), Z_OK);
		z.next_in = (Bytef *)o->data;
		z.avail_in = (uInt)o->len;
		uint8_t buf[65536];
		int r;
		do {
			z.next_out = buf;
			z.avail_out = sizeof(buf);
			r = inflate(&z, Z_NO_FLUSH);
		} while (r == Z_OK);
		CHECK_EQ(r, Z_STREAM_END);
		CHECK_EQ(z.avail_in, 0);
		/* The first encoded string is the table's entry 0: "" (field 6,
		 * length 0). */
		inflateEnd(&z);
	}
}

static void test_loaded_profiles(void)
{
	struct profile *profiles[] = { load_synthetic(0, 0), load_synthetic(40, 10), load_synthetic(3, 0) };
	for (size_t k = 0; k < sizeof(profiles) / sizeof(profiles[0]); k++) {
		struct profile *p = profiles[k];
		if (!CHECK(p))
			continue;
		CHECK_EQ(p->nevents, 3);
		for (size_t i = 0; exporters[i]; i++) {
			for (uint32_t e = 0; e < p->nevents; e++) {
				struct output o;
				run_exporter(exporters[i], p, e, &o);
				/* A format may refuse an event other than samples,
				 * with a reason (gecko does). */
				if (e == 0 || !o.rc)
					CHECK_EQ(o.rc, 0);
				else
					CHECK(o.err[0] != 0);
				if (o.rc && e == 0)
					fprintf(stderr, "    %s: %s\n", exporters[i]->name, o.err);
				else if (!o.rc)
					check_output(exporters[i]->name, p, e, &o);
				free(o.data);
			}
		}
		profile_free(p);
	}
}

/* Names with a newline come out on one line. */
static void test_callgrind_names(void)
{
	struct profile *p = load_synthetic(4, 4);
	if (!CHECK(p))
		return;
	struct output o;
	run_exporter(exporter_find("callgrind"), p, 0, &o);
	CHECK_EQ(o.rc, 0);
	CHECK_CONTAINS(o.data, " a;b c 12\n");
	CHECK_CONTAINS(o.data, "fl=(");
	CHECK_CONTAINS(o.data, "/tmp/odd dir/f;1.py\n");
	CHECK_CONTAINS(o.data, "\nevents: samples cycles cache_misses\n");
	free(o.data);
	profile_free(p);
}

/* The in-memory model with native frames, for the exporters that read
 * only the public model. */
static void test_native_model(void)
{
	static struct smodel m;
	const uint32_t nf = sizeof(sm_native_funcs) / sizeof(sm_native_funcs[0]);
	const uint32_t ns = sizeof(sm_native_stacks) / sizeof(sm_native_stacks[0]);
	if (!CHECK(smodel_build(&m, sm_native_funcs, nf, sm_native_stacks, ns, sm_native_events) == 0))
		return;
	const char *mine[] = { "callgrind", "collapsed", "pprof" };
	for (size_t i = 0; i < 3; i++) {
		const struct exporter *ex = exporter_find(mine[i]);
		if (!CHECK(ex))
			continue;
		for (uint32_t e = 0; e < SM_NEV; e++) {
			struct output o;
			run_exporter(ex, &m.p, e, &o);
			CHECK_EQ(o.rc, 0);
			if (!o.rc)
				check_output(mine[i], &m.p, e, &o);
			free(o.data);
		}
	}
	smodel_free(&m);
}

/* A write that fails is reported: by the exporter, or on the stream. */
static void test_write_error(void)
{
	struct profile *p = load_synthetic(200, 50);
	FILE *probe = fopen("/dev/full", "w");
	if (!CHECK(p) || !probe) {
		if (p)
			profile_free(p);
		return;
	}
	fclose(probe);
	for (size_t i = 0; exporters[i]; i++) {
		FILE *f = fopen("/dev/full", "w");
		struct export_opts opts = { .source = "test" };
		char err[256];
		int rc = exporters[i]->fn(p, f, &opts, err, sizeof(err));
		int failed = rc != 0 || ferror(f);
		failed |= fclose(f) != 0;
		if (!CHECK(failed))
			fprintf(stderr, "    %s: write error not seen\n", exporters[i]->name);
	}
	profile_free(p);
}

/* A cut label never ends in half a UTF-8 character. */
static void test_label_cut(void)
{
	static struct smodel m;
	struct sfunc f[] = { { "\xc3\xa4\xc3\xa4\xc3\xa4\xe2\x82\xac\xf0\x9f\x90\x8d", "", NULL, 0, PK_OTHER } };
	struct sstack st[] = { { 1, { 0 }, { 0 }, { 0 }, 0, 1, { 1, 0, 0 } } };
	if (!CHECK(smodel_build(&m, f, 1, st, 1, sm_native_events) == 0))
		return;
	size_t full = strlen(f[0].name);
	for (size_t n = 1; n <= full + 1; n++) {
		char buf[32];
		memset(buf, 'x', sizeof(buf));
		size_t len = frame_label(&m.p, 0, 0, buf, n);
		CHECK(len < n && buf[len] == 0);
		/* What is kept is a prefix made of whole characters. */
		CHECK(strncmp(buf, f[0].name, len) == 0);
		CHECK(len == full || len == 0 || ((unsigned char)f[0].name[len] & 0xc0) != 0x80);
	}
	smodel_free(&m);
}

static void test_registry(void)
{
	CHECK(exporter_find("callgrind"));
	CHECK(exporter_find("collapsed"));
	CHECK(exporter_find("pprof"));
	CHECK(!exporter_find("kcachegrind"));
	CHECK(!exporter_find(""));
	CHECK_CONTAINS(exporter_names(), "callgrind");
	CHECK_CONTAINS(exporter_names(), "pprof");
	for (size_t i = 0; exporters[i]; i++)
		CHECK(exporter_find(exporters[i]->name) == exporters[i]);
}

int main(void)
{
	RUN(test_registry);
	RUN(test_label_cut);
	RUN(test_loaded_profiles);
	RUN(test_callgrind_names);
	RUN(test_native_model);
	RUN(test_write_error);
	return test_summary();
}
