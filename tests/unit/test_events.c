/*
 * test_events.c — events end to end on the CLI side, with answers known by
 * construction: parsing `-e` lists (names, aliases, raw codes, every kind
 * of malformed list), REC_EVENT_DESC encoding, the model keeping event
 * descriptions and per-event values, derived ratios, and the per-line
 * costs `strata annotate` prints (self to the innermost Python frame,
 * total once per sample per line and per file).
 */
#include "test.h"

#include <linux/perf_event.h>
#include <unistd.h>

#include "synth.h"
#include "../../src/common/events.h"
#include "../../src/lib/linecost.h"
#include "../../src/lib/profile.h"
#include "../../src/lib/ratios.h"

/* ---- parsing ------------------------------------------------------------ */

static void test_parse_names(void)
{
	struct event_list l;
	char err[256];
	CHECK_EQ(events_parse("cycles,instructions,page-faults", ',', &l, err, sizeof(err)), 0);
	CHECK_EQ(l.n, 3);
	CHECK_STR(l.ev[0].name, "cycles");
	CHECK_EQ(l.ev[0].type, PERF_TYPE_HARDWARE);
	CHECK_EQ(l.ev[2].type, PERF_TYPE_SOFTWARE);
	CHECK_U64(l.ev[2].config, PERF_COUNT_SW_PAGE_FAULTS);
	/* perf's aliases give the canonical name. */
	CHECK_EQ(events_parse("cs+faults+branches+cpu-cycles+migrations", '+', &l, err, sizeof(err)), 0);
	CHECK_STR(l.ev[0].name, "context-switches");
	CHECK_STR(l.ev[1].name, "page-faults");
	CHECK_STR(l.ev[2].name, "branch-instructions");
	CHECK_STR(l.ev[3].name, "cycles");
	CHECK_STR(l.ev[4].name, "cpu-migrations");
	CHECK(l.ev[0].flags & EVS_KERNEL);
	/* Raw codes: hexadecimal, lower-cased. */
	CHECK_EQ(events_parse("r01C2", ',', &l, err, sizeof(err)), 0);
	CHECK_STR(l.ev[0].name, "r01c2");
	CHECK_EQ(l.ev[0].type, PERF_TYPE_RAW);
	CHECK_U64(l.ev[0].config, 0x1c2);
	CHECK_EQ(l.ev[0].cls, EVC_RAW);
	/* Formatting back. */
	CHECK_EQ(events_parse("cpu-clock,page-faults", ',', &l, err, sizeof(err)), 0);
	char out[128];
	events_format(&l, '+', out, sizeof(out));
	CHECK_STR(out, "cpu-clock+page-faults");
}

static void test_parse_errors(void)
{
	struct event_list l;
	char err[256];
	static const struct {
		const char *list, *msg;
	} bad[] = {
		{ "", "empty event list" },
		{ "cycles,", "empty event name" },
		{ ",cycles", "empty event name" },
		{ "cycles,,instructions", "empty event name" },
		{ "cylces", "unknown event 'cylces'" },
		{ "cycles:u", "modifiers" },
		{ "r", "unknown event 'r'" },
		{ "rxyz", "unknown event 'rxyz'" },
		{ "r12345678901234567", "unknown event" },
		{ "cycles,cpu-cycles", "listed twice" },
		{ "page-faults,faults", "listed twice" },
		{ "cycles,instructions,cache-references,cache-misses,branch-instructions,branch-misses,cpu-clock,"
		  "task-clock,page-faults",
		  "too many events" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		CHECK_EQ(events_parse(bad[i].list, ',', &l, err, sizeof(err)), -1);
		CHECK_CONTAINS(err, bad[i].msg);
	}
	CHECK_EQ(events_parse(NULL, ',', &l, err, sizeof(err)), -1);
}

static void test_periods(void)
{
	struct event_spec e;
	char err[128];
	CHECK_EQ(event_lookup("cpu-clock", &e, err, sizeof(err)), 0);
	CHECK_U64(event_default_period(&e, 1000), 1000000);
	CHECK_U64(event_default_period(&e, 250), 4000000);
	CHECK_EQ(event_lookup("page-faults", &e, err, sizeof(err)), 0);
	CHECK_U64(event_default_period(&e, 1000), 100);
	CHECK_U64(event_min_period(&e), 1);
	CHECK_EQ(event_lookup("context-switches", &e, err, sizeof(err)), 0);
	CHECK_U64(event_min_period(&e), 2);
	CHECK(event_default_period(&e, 1000) >= event_min_period(&e));
	CHECK_EQ(event_lookup("r1234", &e, err, sizeof(err)), 0);
	CHECK(event_default_period(&e, 1000) > 0);
	/* Every named event has a period (or is a clock). */
	size_t n;
	const struct event_info *t = event_table(&n);
	CHECK(n >= 13);
	for (size_t i = 0; i < n; i++)
		CHECK((t[i].flags & EVS_CLOCK) ? t[i].default_period == 0 : t[i].default_period > 0);
}

static void test_attr(void)
{
	struct event_spec e;
	char err[128];
	struct perf_event_attr a;
	CHECK_EQ(event_lookup("page-faults", &e, err, sizeof(err)), 0);
	event_attr(&e, &a, 50, 1, 1);
	CHECK_EQ(a.type, PERF_TYPE_SOFTWARE);
	CHECK_U64(a.sample_period, 50);
	CHECK_EQ(a.disabled, 1);
	CHECK_EQ(a.exclude_kernel, 1);
	CHECK_U64(a.read_format, PERF_FORMAT_GROUP);
	event_attr(&e, &a, 0, 0, 0);
	CHECK_EQ(a.disabled, 0); /* a member counts whenever its leader does */
	CHECK_U64(a.sample_period, 0);
	CHECK_EQ(a.exclude_kernel, 0);
}

/* ---- format --------------------------------------------------------------- */

static void test_event_desc_roundtrip(void)
{
	struct wbuf b;
	wbuf_init(&b);
	struct rec_event_desc d = { .index = 2, .name = "cache-misses", .type = PERF_TYPE_HARDWARE,
				    .config = PERF_COUNT_HW_CACHE_MISSES, .period = 0, .flags = EVD_USER_ONLY };
	rec_put_event_desc(&b, &d);
	struct rbuf in;
	rbuf_init(&in, b.data, b.len);
	uint64_t type;
	struct rbuf body;
	CHECK_EQ(rec_next(&in, &type, &body), 1);
	CHECK_U64(type, REC_EVENT_DESC);
	CHECK(rec_type_known(type));
	CHECK_STR(rec_type_name(type), "event-desc");
	struct rec_event_desc o;
	CHECK_EQ(rec_get_event_desc(&body, &o), 0);
	CHECK_EQ(o.index, 2);
	CHECK_STR(o.name, "cache-misses");
	CHECK_U64(o.config, PERF_COUNT_HW_CACHE_MISSES);
	CHECK_EQ(o.flags, EVD_USER_ONLY);
	rec_free_event_desc(&o);
	/* Truncated bodies are rejected, never read past. */
	for (size_t cut = 0; cut + 1 < b.len - 2; cut++) {
		struct rbuf t;
		rbuf_init(&t, b.data + 2, cut);
		CHECK_EQ(rec_get_event_desc(&t, &o), -1);
	}
	wbuf_free(&b);
	/* JIT images and perf maps are decoded. */
	CHECK(rec_type_known(REC_JIT_IMAGE));
	CHECK(rec_type_known(REC_JIT_UNLOAD));
	CHECK(rec_type_known(REC_PERFMAP));
	CHECK(rec_type_known(REC_MODULE));
	CHECK(!rec_type_known(0));
	CHECK(!rec_type_known(REC_TYPE_MAX_KNOWN + 1));
}

/* ---- the model ------------------------------------------------------------ */

static void session(struct synth *s, uint32_t nev, char **events)
{
	char *argv[] = { "python3", "a.py" };
	struct rec_session r = { .strata_version = "test", .argc = 2, .argv = argv, .mode = MODE_CPU,
				 .rate_hz = 0, .nevents = nev, .events = events, .hostname = "h" };
	rec_put_session(&s->recs, &r);
	synth_chunk(s, 1, 0);
}

static void process(struct synth *s, uint32_t pid, uint32_t nev, char **events)
{
	char *argv[] = { "python3" };
	struct rec_process r = { .pid = pid, .ppid = 1, .python_version = "3.11.2", .executable = "/usr/bin/python3",
				 .argc = 1, .argv = argv, .trigger = TRIGGER_PERF_EVENT, .nevents = nev,
				 .events = events };
	rec_put_process(&s->recs, &r);
}

/* lnotab (3.8): instruction k (code units) is at line first + k. */
static void code(struct synth *s, uint32_t idx, const char *qual, const char *file, uint32_t first)
{
	static const uint8_t lnotab[] = { 2, 1, 2, 1, 2, 1 };
	struct rec_code r = { .index = idx, .firstlineno = first, .linetable_fmt = LT_LNOTAB,
			      .filename = (char *)file, .name = (char *)qual, .qualname = (char *)qual,
			      .linetable = (uint8_t *)lnotab, .linetable_len = sizeof(lnotab) };
	rec_put_code(&s->recs, &r);
}

/* Frames root first: code index and line offset from its first line. */
static void stack(struct synth *s, uint32_t idx, int n, const int32_t *fr)
{
	struct rec_pyframe py[16];
	for (int i = 0; i < n; i++)
		py[i] = (struct rec_pyframe){ .code = (uint32_t)fr[2 * (n - 1 - i)], .lasti = fr[2 * (n - 1 - i) + 1] };
	struct rec_stack r = { .index = idx, .npy = (uint32_t)n, .py = py };
	rec_put_stack(&s->recs, &r);
}

static void sample(struct synth *s, uint32_t st, uint32_t w, uint64_t c0, uint64_t c1)
{
	struct rec_sample r = { .tid = 7, .stack = st, .weight = w, .ncounters = 2, .counters = { c0, c1 } };
	rec_put_sample(&s->recs, &r);
}

static struct profile *load(struct synth *s)
{
	char path[64], err[256];
	if (synth_write(s, path))
		return NULL;
	struct profile *p = profile_load(path, NULL, err, sizeof(err));
	if (!p)
		fprintf(stderr, "    load failed: %s\n", err);
	unlink(path);
	return p;
}

/*
 * a.py: main (line 1..), f (10..), a lambda on f's line 11; b.py: g (5).
 *   S0  main:2 > f:11 > <lambda>:11      weight 3   cycles 300  instructions 600
 *   S1  main:2 > f:12                    weight 2   cycles 200  instructions 100
 *   S2  main:2 > f:11 > f:12 (recursion) weight 1   cycles 100  instructions 100
 *   S3  main:3 > g:5 (b.py)              weight 4   cycles 400  instructions 800
 *   S4  no Python frame                  weight 1   cycles 10   instructions 0
 */
static struct profile *fixture(void)
{
	struct synth s;
	synth_init(&s, STRATA_FMT_MAJOR, STRATA_FMT_MINOR);
	char *events[] = { "cycles", "instructions" };
	session(&s, 2, events);
	process(&s, 7, 2, events);
	struct rec_event_desc d0 = { .index = 0, .name = "cycles", .type = PERF_TYPE_HARDWARE, .period = 100,
				     .flags = EVD_SAMPLING };
	struct rec_event_desc d1 = { .index = 1, .name = "instructions", .type = PERF_TYPE_HARDWARE,
				     .config = PERF_COUNT_HW_INSTRUCTIONS, .flags = EVD_USER_ONLY };
	struct rec_event_desc bogus = { .index = 5, .name = "cycles" }; /* no such index: ignored */
	rec_put_event_desc(&s.recs, &d0);
	rec_put_event_desc(&s.recs, &d1);
	rec_put_event_desc(&s.recs, &bogus);
	code(&s, 0, "main", "/src/a.py", 1);
	code(&s, 1, "f", "/src/a.py", 10);
	code(&s, 2, "f.<locals>.<lambda>", "/src/a.py", 11);
	code(&s, 3, "g", "/src/b.py", 5);
	static const int32_t s0[] = { 0, 1, 1, 1, 2, 0 }, s1[] = { 0, 1, 1, 2 }, s2[] = { 0, 1, 1, 1, 1, 2 },
			     s3[] = { 0, 2, 3, 0 };
	stack(&s, 0, 3, s0);
	stack(&s, 1, 2, s1);
	stack(&s, 2, 3, s2);
	stack(&s, 3, 2, s3);
	stack(&s, 4, 0, NULL);
	sample(&s, 0, 3, 300, 600);
	sample(&s, 1, 2, 200, 100);
	sample(&s, 2, 1, 100, 100);
	sample(&s, 3, 4, 400, 800);
	sample(&s, 4, 1, 10, 0);
	synth_chunk(&s, 2, CHUNK_LAST);
	struct profile *p = load(&s);
	synth_free(&s);
	return p;
}

static void test_model_events(void)
{
	struct profile *p = fixture();
	if (!CHECK(p != NULL))
		return;
	CHECK_EQ(p->nevents, 3);
	CHECK_STR(p->event_names[1], "cycles");
	CHECK(p->event_info[1].known);
	CHECK(p->event_info[1].flags & EVD_SAMPLING);
	CHECK_U64(p->event_info[1].period, 100);
	CHECK(p->event_info[2].flags & EVD_USER_ONLY);
	CHECK(!p->event_info[0].known);
	CHECK_U64(p->totals[0], 11);
	CHECK_U64(p->totals[1], 1010);
	CHECK_U64(p->totals[2], 1600);
	CHECK_EQ(p->nwarnings, 0);

	struct ratio r[RATIOS_MAX];
	CHECK_EQ(profile_ratios(p, r), 1);
	CHECK_STR(r[0].label, "IPC");
	uint64_t v[3] = { 1, 200, 300 };
	CHECK(ratio_value(&r[0], v) == 1.5);
	v[1] = 0;
	CHECK(ratio_value(&r[0], v) < 0);
	profile_free(p);
}

static const struct lc_file *file_of(const struct linecost *lc, const char *path)
{
	for (uint32_t i = 0; i < lc->nfiles; i++)
		if (!strcmp(lc->files[i].path, path))
			return &lc->files[i];
	return NULL;
}

static void check_line(const struct lc_file *f, uint32_t line, uint64_t self, uint64_t total, uint64_t self_cyc,
		       uint64_t total_ins)
{
	const struct lc_line *l = f ? linecost_line(f, line) : NULL;
	if (!CHECK(l != NULL)) {
		fprintf(stderr, "    line %u missing\n", line);
		return;
	}
	CHECK_U64(l->self[0], self);
	CHECK_U64(l->total[0], total);
	CHECK_U64(l->self[1], self_cyc);
	CHECK_U64(l->total[2], total_ins);
}

static void test_linecost(void)
{
	struct profile *p = fixture();
	if (!CHECK(p != NULL))
		return;
	struct linecost *lc = linecost_build(p, NULL, 1u << PK_PYTHON);
	if (!CHECK(lc != NULL)) {
		profile_free(p);
		return;
	}
	CHECK_U64(lc->totals[0], 11);
	CHECK_EQ(lc->nfiles, 2);
	/* a.py is on 10 of the 11 samples: listed first. */
	CHECK_STR(lc->files[0].path, "/src/a.py");
	const struct lc_file *a = file_of(lc, "/src/a.py"), *b = file_of(lc, "/src/b.py");
	CHECK(a && b);
	if (a && b) {
		CHECK_U64(a->self[0], 6);
		CHECK_U64(a->total[0], 10);
		CHECK_U64(a->total[1], 1000);
		CHECK_U64(b->self[0], 4);
		CHECK_U64(b->total[0], 4);
		CHECK_EQ(a->nlines, 4);
		/* main's call lines: all cost is below them. */
		check_line(a, 2, 0, 6, 0, 800);
		check_line(a, 3, 0, 4, 0, 800);
		/* Line 11 runs in f and in the lambda on one stack (S0):
		 * once per sample; S2 passes through it too. */
		check_line(a, 11, 3, 4, 300, 700);
		/* Line 12: S1 and S2's inner f. */
		check_line(a, 12, 3, 3, 300, 200);
		check_line(b, 5, 4, 4, 400, 800);
		CHECK(linecost_line(a, 1) == NULL);
		CHECK(linecost_line(a, 13) == NULL);
		/* Lines sorted. */
		for (uint32_t i = 1; i < a->nlines; i++)
			CHECK(a->lines[i - 1].line < a->lines[i].line);
	}
	linecost_free(lc);

	/* Filters apply: a thread that does not exist leaves nothing. */
	struct agg_filter f = { .tid = 99 };
	lc = linecost_build(p, &f, 1u << PK_PYTHON);
	if (CHECK(lc != NULL)) {
		CHECK_EQ(lc->nfiles, 0);
		CHECK_U64(lc->totals[0], 0);
	}
	linecost_free(lc);
	/* No kind selected: no lines, totals still counted. */
	lc = linecost_build(p, NULL, 1u << PK_JIT);
	if (CHECK(lc != NULL)) {
		CHECK_EQ(lc->nfiles, 0);
		CHECK_U64(lc->totals[1], 1010);
	}
	linecost_free(lc);
	profile_free(p);
}

int main(void)
{
	RUN(test_parse_names);
	RUN(test_parse_errors);
	RUN(test_periods);
	RUN(test_attr);
	RUN(test_event_desc_roundtrip);
	RUN(test_model_events);
	RUN(test_linecost);
	return test_summary();
}
