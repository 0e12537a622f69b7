/*
 * test_profile.c — the profile model and aggregation on files built with
 * the real encoders, where every answer is known by construction: self
 * and total per function and line, recursion counted once, threads and
 * their names, drops, marker frames, filters, streams, session times,
 * incremental ingestion and extra events.
 */
#include "test.h"

#include <unistd.h>

#include "synth.h"
#include "../../src/lib/profile.h"

/* ---- building ------------------------------------------------------------ */

static void session(struct synth *s, uint32_t mode, uint64_t start, uint32_t nev, char **events)
{
	char *argv[] = { "python3", "app.py" };
	struct rec_session r = { .strata_version = "test", .start_mono_ns = start, .argc = 2, .argv = argv,
				 .mode = mode, .rate_hz = 100, .nevents = nev, .events = events, .hostname = "h" };
	rec_put_session(&s->recs, &r);
	synth_chunk(s, 1, 0);
}

static void session_end(struct synth *s, uint64_t end)
{
	struct rec_session_end r = { .end_mono_ns = end, .status = 3 };
	rec_put_session_end(&s->recs, &r);
	synth_chunk(s, 1, CHUNK_LAST);
}

static void process(struct synth *s, uint32_t pid, uint64_t start, uint32_t flags, const char *cmd)
{
	char *argv[] = { (char *)cmd };
	struct rec_process r = { .pid = pid, .ppid = 1, .start_mono_ns = start, .python_version = "3.11.2",
				 .executable = "/usr/bin/python3", .argc = 1, .argv = argv, .mode = MODE_WALL,
				 .rate_hz = 250, .period_ns = 4000000, .flags = flags };
	rec_put_process(&s->recs, &r);
}

static void thread(struct synth *s, uint32_t tid, uint32_t flags, const char *name)
{
	struct rec_thread r = { .tid = tid, .start_mono_ns = 5, .flags = flags, .name = (char *)name };
	rec_put_thread(&s->recs, &r);
}

/* A code object with a co_lnotab (3.8 format): easy to write by hand. */
static void code(struct synth *s, uint32_t idx, const char *qual, const char *file, uint32_t first,
		 const uint8_t *lnotab, size_t n)
{
	struct rec_code r = { .index = idx, .firstlineno = first, .linetable_fmt = LT_LNOTAB,
			      .filename = (char *)file, .name = (char *)qual, .qualname = (char *)qual,
			      .linetable = (uint8_t *)lnotab, .linetable_len = n };
	rec_put_code(&s->recs, &r);
}

/* Frames are given root first here (easier to read); the record wants
 * them leaf first. Each frame is code index and lasti. */
static void stack(struct synth *s, uint32_t idx, uint32_t flags, uint32_t missing, int n, const int32_t *fr)
{
	struct rec_pyframe py[64];
	for (int i = 0; i < n; i++) {
		py[i].code = (uint32_t)fr[2 * (n - 1 - i)];
		py[i].lasti = fr[2 * (n - 1 - i) + 1];
		py[i].flags = 0;
	}
	struct rec_stack r = { .index = idx, .flags = flags, .npy = (uint32_t)n, .py = py, .py_missing = missing };
	rec_put_stack(&s->recs, &r);
}

static void sample(struct synth *s, uint32_t tid, int64_t dt, uint32_t st, uint32_t weight, uint32_t flags)
{
	struct rec_sample r = { .tid = tid, .dt_ns = dt, .stack = st, .weight = weight, .flags = flags };
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

/* ---- finding rows ------------------------------------------------------------ */

static const struct agg_row *func_row(const struct profile *p, const struct agg *a, const char *name)
{
	for (uint32_t i = 0; i < a->nfuncs; i++)
		if (!strcmp(p->funcs[a->funcs[i].func].name, name))
			return &a->funcs[i];
	return NULL;
}

static const struct agg_row *line_row(const struct profile *p, const struct agg *a, const char *name, uint32_t line)
{
	for (uint32_t i = 0; i < a->nlines; i++)
		if (!strcmp(p->funcs[a->lines[i].func].name, name) && a->lines[i].line == line)
			return &a->lines[i];
	return NULL;
}

#define CHECK_ROW(row, s, t)                                     \
	do {                                                     \
		const struct agg_row *r_ = (row);                \
		if (CHECK(r_ != NULL)) {                         \
			CHECK_U64(r_->self[0], s);               \
			CHECK_U64(r_->total[0], t);              \
		}                                                \
	} while (0)

static uint32_t thread_by_tid(const struct profile *p, uint32_t tid)
{
	for (uint32_t i = 0; i < p->nthreads; i++)
		if (p->threads[i].tid == tid)
			return i;
	return PNONE;
}

/* main (f.py:1): lines 2 (lasti 0-1), 3 (lasti 2+)
 * a    (f.py:10): lines 11 (0-1), 12 (2+)
 * b    (f.py:20): line 22 */
static const uint8_t lt_main[] = { 0, 1, 4, 1 }, lt_a[] = { 0, 1, 4, 1 }, lt_b[] = { 0, 2 };

static void three_codes(struct synth *s)
{
	code(s, 0, "main", "f.py", 1, lt_main, sizeof(lt_main));
	code(s, 1, "Cls.a", "f.py", 10, lt_a, sizeof(lt_a));
	code(s, 2, "outer.<locals>.b", "f.py", 20, lt_b, sizeof(lt_b));
}

/* ---- tests ------------------------------------------------------------ */

static void test_known_stacks(void)
{
	struct synth s;
	synth_init(&s, STRATA_FMT_MAJOR, STRATA_FMT_MINOR);
	session(&s, MODE_CPU, 500, 0, NULL);
	process(&s, 40, 1000, 0, "python3 f.py");
	thread(&s, 40, THREAD_MAIN, "MainThread");
	three_codes(&s);
	static const int32_t s0[] = { 0, 0, 1, 0 }, s1[] = { 0, 0, 1, 2, 2, 5 }, s2[] = { 0, 3 };
	stack(&s, 0, 0, 0, 2, s0);
	stack(&s, 1, 0, 0, 3, s1);
	stack(&s, 2, 0, 0, 1, s2);
	for (int i = 0; i < 3; i++)
		sample(&s, 40, 10, 0, 1, 0);
	synth_chunk(&s, 2, 0); /* the rest in a second chunk */
	sample(&s, 40, 10, 1, 2, 0);
	sample(&s, 40, 10, 1, 2, 0);
	sample(&s, 40, 10, 2, 1, 0);
	synth_chunk(&s, 2, CHUNK_LAST);
	session_end(&s, 100000);
	struct profile *p = load(&s);
	synth_free(&s);
	if (!CHECK(p != NULL))
		return;
	CHECK_EQ(p->nsamples, 6);
	CHECK_U64(p->totals[0], 8);
	CHECK_STR(p->command, "python3 app.py");
	CHECK_EQ(p->mode, MODE_CPU);
	CHECK_EQ(p->rate_hz, 100);
	CHECK_U64(p->start_ns, 500);
	CHECK_U64(p->end_ns, 100000);
	CHECK_EQ(p->exit_status, 3);
	CHECK_EQ(p->truncated, 0);
	CHECK_EQ(p->nwarnings, 0);
	CHECK_STR(p->python_version, "3.11.2");
	/* Times: process start plus the running sum of deltas. */
	CHECK_U64(p->samples[0].time_ns, 1010);
	CHECK_U64(p->samples[5].time_ns, 1060);

	struct agg *a = profile_aggregate(p, NULL, 0);
	if (CHECK(a != NULL)) {
		CHECK_U64(a->totals[0], 8);
		CHECK_EQ(a->nsamples, 6);
		CHECK_EQ(a->nfuncs, 3);
		CHECK_ROW(func_row(p, a, "main"), 1, 8);
		CHECK_ROW(func_row(p, a, "Cls.a"), 3, 7);
		CHECK_ROW(func_row(p, a, "outer.<locals>.b"), 4, 4);
		/* Sorted by self. */
		CHECK_STR(p->funcs[a->funcs[0].func].name, "outer.<locals>.b");
		CHECK_STR(p->funcs[a->funcs[2].func].name, "main");
		CHECK_EQ(p->funcs[a->funcs[0].func].line, 20);
		CHECK_STR(p->funcs[a->funcs[0].func].file, "f.py");
		CHECK_EQ(p->funcs[a->funcs[0].func].kind, PK_PYTHON);
		CHECK_EQ(a->nlines, 5);
		CHECK_ROW(line_row(p, a, "main", 2), 0, 7);
		CHECK_ROW(line_row(p, a, "main", 3), 1, 1);
		CHECK_ROW(line_row(p, a, "Cls.a", 11), 3, 3);
		CHECK_ROW(line_row(p, a, "Cls.a", 12), 0, 4);
		CHECK_ROW(line_row(p, a, "outer.<locals>.b", 22), 4, 4);
		CHECK_EQ(a->lines[0].line, 22);
		CHECK_EQ(a->lines[1].line, 11);
		CHECK_EQ(a->lines[2].line, 3);
		CHECK_EQ(a->lines[3].line, 2); /* zero self: by total */
		/* By total. */
		agg_sort(a, 0, 1);
		CHECK_STR(p->funcs[a->funcs[0].func].name, "main");
		CHECK_STR(p->funcs[a->funcs[1].func].name, "Cls.a");
		CHECK_EQ(a->lines[0].line, 2);
		CHECK_U64(a->thread_samples[0], 8);
		agg_free(a);
	}
	/* The stack of the weight-2 samples, root first. */
	uint32_t fr[8];
	CHECK_EQ(profile_stack(p, p->samples[3].node, fr, 8), 3);
	CHECK_STR(p->funcs[p->frames[fr[0]].func].name, "main");
	CHECK_EQ(p->frames[fr[0]].line, 2);
	CHECK_STR(p->funcs[p->frames[fr[2]].func].name, "outer.<locals>.b");
	CHECK_EQ(p->frames[fr[2]].line, 22);
	/* With less room, the root-most frames are stored. */
	CHECK_EQ(profile_stack(p, p->samples[3].node, fr, 1), 3);
	CHECK_STR(p->funcs[p->frames[fr[0]].func].name, "main");
	/* Same stack, same node; the call tree shares prefixes. */
	CHECK_EQ(p->samples[0].node, p->samples[1].node);
	CHECK_EQ(p->nnodes, 1 + 2 + 2 + 1);
	profile_free(p);
}

/* f → g → f → f: f and its line count once per sample however often they
 * appear; self goes to the leaf only. */
static void test_recursion_counted_once(void)
{
	struct synth s;
	synth_init(&s, STRATA_FMT_MAJOR, STRATA_FMT_MINOR);
	process(&s, 41, 0, 0, "py");
	three_codes(&s);
	/* main, a@12, b, a@12, a@11 (leaf) */
	static const int32_t st[] = { 0, 0, 1, 2, 2, 0, 1, 3, 1, 0 };
	stack(&s, 0, 0, 0, 5, st);
	for (int i = 0; i < 5; i++)
		sample(&s, 41, 1, 0, 1, 0);
	synth_chunk(&s, 2, CHUNK_LAST);
	struct profile *p = load(&s);
	synth_free(&s);
	if (!CHECK(p != NULL))
		return;
	struct agg *a = profile_aggregate(p, NULL, 0);
	CHECK_ROW(func_row(p, a, "Cls.a"), 5, 5);
	CHECK_ROW(func_row(p, a, "outer.<locals>.b"), 0, 5);
	CHECK_ROW(func_row(p, a, "main"), 0, 5);
	CHECK_ROW(line_row(p, a, "Cls.a", 12), 0, 5);
	CHECK_ROW(line_row(p, a, "Cls.a", 11), 5, 5);
	/* No function or line ever exceeds the total. */
	for (uint32_t i = 0; i < a->nfuncs; i++)
		CHECK(a->funcs[i].total[0] <= a->totals[0]);
	for (uint32_t i = 0; i < a->nlines; i++)
		CHECK(a->lines[i].total[0] <= a->totals[0]);
	agg_free(a);
	profile_free(p);
}

static void test_threads(void)
{
	struct synth s;
	synth_init(&s, STRATA_FMT_MAJOR, STRATA_FMT_MINOR);
	process(&s, 50, 0, 0, "py");
	thread(&s, 50, THREAD_MAIN, "MainThread");
	three_codes(&s);
	static const int32_t st[] = { 0, 0 };
	stack(&s, 0, 0, 0, 1, st);
	sample(&s, 50, 1, 0, 1, 0);
	sample(&s, 51, 1, 0, 1, 0); /* before its announcement */
	synth_chunk(&s, 2, 0);
	thread(&s, 51, 0, "worker");
	sample(&s, 51, 1, 0, 3, 0);
	struct rec_thread_name tn = { 51, "renamed" };
	rec_put_thread_name(&s.recs, &tn);
	sample(&s, 52, 1, 0, 1, 0); /* never announced */
	struct rec_thread_end te = { .tid = 51, .end_mono_ns = 777, .samples = 2 };
	rec_put_thread_end(&s.recs, &te);
	synth_chunk(&s, 2, CHUNK_LAST);
	struct profile *p = load(&s);
	synth_free(&s);
	if (!CHECK(p != NULL))
		return;
	CHECK_EQ(p->nthreads, 3);
	uint32_t t50 = thread_by_tid(p, 50), t51 = thread_by_tid(p, 51), t52 = thread_by_tid(p, 52);
	if (CHECK(t50 != PNONE && t51 != PNONE && t52 != PNONE)) {
		CHECK_STR(p->threads[t50].name, "MainThread");
		CHECK(p->threads[t50].main);
		CHECK_STR(p->threads[t51].name, "renamed");
		CHECK(!p->threads[t51].main);
		CHECK_U64(p->threads[t51].end_ns, 777);
		CHECK_STR(p->threads[t52].name, "thread 52");
		CHECK_U64(p->threads[t50].samples, 1);
		CHECK_U64(p->threads[t51].samples, 4);
		CHECK_U64(p->threads[t52].samples, 1);
		CHECK_EQ(p->threads[t52].pid, 50);
		CHECK_EQ(p->threads[t52].process, 0);
	}
	CHECK_U64(p->procs[0].samples, 6);
	profile_free(p);
}

static void test_drops(void)
{
	struct synth s;
	synth_init(&s, STRATA_FMT_MAJOR, STRATA_FMT_MINOR);
	process(&s, 60, 0, 0, "py");
	thread(&s, 60, THREAD_MAIN, "MainThread");
	struct rec_dropped d1 = { 60, 5 }, d2 = { 61, 2 };
	rec_put_dropped(&s.recs, &d1);
	rec_put_dropped(&s.recs, &d2);
	/* The writer's own count includes 3 more it never itemised. */
	struct rec_process_end pe = { .end_mono_ns = 9, .samples = 0, .dropped = 10 };
	rec_put_process_end(&s.recs, &pe);
	synth_chunk(&s, 2, CHUNK_LAST);
	process(&s, 61, 0, 0, "child");
	struct rec_dropped d3 = { 61, 1 };
	rec_put_dropped(&s.recs, &d3);
	synth_chunk(&s, 3, CHUNK_LAST);
	struct profile *p = load(&s);
	synth_free(&s);
	if (!CHECK(p != NULL))
		return;
	CHECK_EQ(p->nprocs, 2);
	CHECK_U64(p->procs[0].dropped, 10);
	CHECK_U64(p->procs[1].dropped, 1);
	CHECK_U64(p->dropped, 11);
	CHECK_U64(p->threads[thread_by_tid(p, 60)].dropped, 5);
	CHECK(p->procs[0].ended);
	CHECK_EQ(p->procs[0].end_reason, END_EXIT);
	/* No samples at all is still a profile. */
	CHECK_EQ(p->nsamples, 0);
	struct agg *a = profile_aggregate(p, NULL, 0);
	CHECK(a && a->nfuncs == 0 && a->totals[0] == 0);
	agg_free(a);
	profile_free(p);
}

static void test_marker_frames(void)
{
	struct synth s;
	synth_init(&s, STRATA_FMT_MAJOR, STRATA_FMT_MINOR);
	process(&s, 70, 0, 0, "py");
	three_codes(&s);
	static const int32_t ma[] = { 0, 0, 1, 0 }, bad[] = { 0, 0, 77, 0 };
	stack(&s, 0, 0, 0, 0, NULL);
	stack(&s, 1, STACK_PY_FAULT, 0, 0, NULL);
	stack(&s, 2, STACK_PY_TRUNCATED, 100, 2, ma);
	stack(&s, 3, STACK_PY_FAULT, 0, 2, ma);
	stack(&s, 4, 0, 0, 2, bad);
	for (uint32_t i = 0; i < 5; i++)
		sample(&s, 70, 1, i, 1, 0);
	sample(&s, 70, 1, 99, 1, 0); /* its stack record was lost */
	synth_chunk(&s, 2, CHUNK_LAST);
	struct profile *p = load(&s);
	synth_free(&s);
	if (!CHECK(p != NULL))
		return;
	CHECK_EQ(p->nsamples, 6);
	static const char *roots[] = { "[no Python frame]", "[unreadable frames]", "[truncated: 100 frames]",
				       "[unreadable frames]", "main", "[unknown stack]" };
	static const uint32_t depth[] = { 1, 1, 3, 3, 2, 1 };
	for (int i = 0; i < 6; i++) {
		uint32_t fr[8];
		CHECK_EQ(profile_stack(p, p->samples[i].node, fr, 8), depth[i]);
		const struct pfunc *f = &p->funcs[p->frames[fr[0]].func];
		CHECK_STR(f->name, roots[i]);
		if (i != 4) {
			CHECK_EQ(f->kind, PK_OTHER);
			CHECK_STR(f->file, "");
		}
	}
	/* The truncated stack keeps its frames under the marker. */
	uint32_t fr[8];
	profile_stack(p, p->samples[2].node, fr, 8);
	CHECK_STR(p->funcs[p->frames[fr[1]].func].name, "main");
	CHECK_STR(p->funcs[p->frames[fr[2]].func].name, "Cls.a");
	/* A frame whose code record was lost. */
	profile_stack(p, p->samples[4].node, fr, 8);
	CHECK_STR(p->funcs[p->frames[fr[1]].func].name, "[unknown code]");
	int w_stack = 0, w_code = 0;
	for (uint32_t i = 0; i < p->nwarnings; i++) {
		w_stack |= strstr(p->warnings[i], "1 sample(s) name a stack") != NULL;
		w_code |= strstr(p->warnings[i], "code object whose record was lost") != NULL;
	}
	CHECK(w_stack);
	CHECK(w_code);
	struct agg *a = profile_aggregate(p, NULL, 0);
	CHECK_ROW(func_row(p, a, "[unreadable frames]"), 1, 2);
	CHECK_ROW(func_row(p, a, "[truncated: 100 frames]"), 0, 1);
	agg_free(a);
	profile_free(p);
}

static void test_filters(void)
{
	struct synth s;
	synth_init(&s, STRATA_FMT_MAJOR, STRATA_FMT_MINOR);
	session(&s, MODE_WALL, 0, 0, NULL);
	process(&s, 80, 1000, 0, "parent");
	thread(&s, 80, THREAD_MAIN, "MainThread");
	thread(&s, 81, 0, "sleeper");
	three_codes(&s);
	static const int32_t sm[] = { 0, 0 }, sa[] = { 0, 0, 1, 0 };
	stack(&s, 0, 0, 0, 1, sm);
	stack(&s, 1, 0, 0, 2, sa);
	sample(&s, 80, 100, 1, 1, 0);          /* t=1100 */
	sample(&s, 81, 100, 0, 1, SAMPLE_IDLE); /* t=1200 */
	sample(&s, 80, 100, 1, 1, 0);          /* t=1300 */
	sample(&s, 81, 100, 0, 1, SAMPLE_IDLE); /* t=1400 */
	synth_chunk(&s, 2, CHUNK_LAST);
	process(&s, 90, 5000, 0, "child");
	thread(&s, 90, THREAD_MAIN, "MainThread");
	code(&s, 0, "child_main", "c.py", 1, NULL, 0);
	stack(&s, 0, 0, 0, 1, sm);
	sample(&s, 90, 10, 0, 5, 0); /* t=5010 */
	synth_chunk(&s, 3, CHUNK_LAST);
	struct profile *p = load(&s);
	synth_free(&s);
	if (!CHECK(p != NULL))
		return;
	CHECK_EQ(p->mode, MODE_WALL);
	CHECK_EQ(p->nprocs, 2);
	CHECK_U64(p->totals[0], 9);
	/* No session end: the last sample ends the session. */
	CHECK_U64(p->end_ns, 5010);

	struct agg_filter f = { .pid = 90 };
	struct agg *a = profile_aggregate(p, &f, 0);
	CHECK_U64(a->totals[0], 5);
	CHECK_EQ(a->nfuncs, 1);
	CHECK_ROW(func_row(p, a, "child_main"), 5, 5);
	agg_free(a);

	f = (struct agg_filter){ .tid = 81 };
	a = profile_aggregate(p, &f, 0);
	CHECK_U64(a->totals[0], 2);
	uint32_t t81 = thread_by_tid(p, 81);
	CHECK_U64(a->thread_samples[t81], 2);
	CHECK_U64(a->thread_idle[t81], 2);
	agg_free(a);

	f = (struct agg_filter){ .exclude_idle = 1 };
	a = profile_aggregate(p, &f, 0);
	CHECK_U64(a->totals[0], 7);
	CHECK_ROW(func_row(p, a, "main"), 0, 2);
	agg_free(a);

	/* Without the filter the idle samples count, and are marked. */
	a = profile_aggregate(p, NULL, 0);
	CHECK_ROW(func_row(p, a, "main"), 2, 4);
	CHECK_U64(a->thread_idle[t81], 2);
	CHECK_U64(a->thread_idle[thread_by_tid(p, 80)], 0);
	agg_free(a);

	f = (struct agg_filter){ .t0 = 1200, .t1 = 1400 };
	a = profile_aggregate(p, &f, 0);
	CHECK_EQ(a->nsamples, 2);
	agg_free(a);

	f = (struct agg_filter){ .first_sample = 3 };
	a = profile_aggregate(p, &f, 0);
	CHECK_EQ(a->nsamples, 2);
	CHECK_U64(a->totals[0], 6);
	agg_free(a);
	profile_free(p);
}

/* Code indices are per stream: a forked child reusing index 0 for another
 * function does not mix with its parent. A stream continued after a failed
 * exec is the same process. Identical functions from different code
 * objects are one function. */
static void test_streams(void)
{
	struct synth s;
	synth_init(&s, STRATA_FMT_MAJOR, STRATA_FMT_MINOR);
	process(&s, 100, 0, 0, "parent");
	code(&s, 0, "parent_fn", "p.py", 1, NULL, 0);
	code(&s, 1, "parent_fn", "p.py", 1, NULL, 0);  /* same function, new code object */
	code(&s, 2, "parent_fn", "p.py", 50, NULL, 0); /* redefined elsewhere: a different one */
	static const int32_t s0[] = { 0, 0 }, s1[] = { 1, 0 }, s2[] = { 2, 0 };
	stack(&s, 0, 0, 0, 1, s0);
	stack(&s, 1, 0, 0, 1, s1);
	stack(&s, 2, 0, 0, 1, s2);
	sample(&s, 100, 1, 0, 1, 0);
	sample(&s, 100, 1, 1, 1, 0);
	sample(&s, 100, 1, 2, 1, 0);
	synth_chunk(&s, 2, 0);
	process(&s, 101, 0, 0, "child");
	code(&s, 0, "child_fn", "c.py", 1, NULL, 0);
	stack(&s, 0, 0, 0, 1, s0);
	sample(&s, 101, 1, 0, 1, 0);
	synth_chunk(&s, 3, CHUNK_LAST);
	struct rec_process_end pe = { .reason = END_EXEC };
	rec_put_process_end(&s.recs, &pe);
	synth_chunk(&s, 2, CHUNK_LAST);
	process(&s, 100, 0, PROC_CONTINUED, "parent");
	code(&s, 0, "after_exec", "p.py", 9, NULL, 0);
	stack(&s, 0, 0, 0, 1, s0);
	sample(&s, 100, 1, 0, 1, 0);
	synth_chunk(&s, 4, CHUNK_LAST);
	struct profile *p = load(&s);
	synth_free(&s);
	if (!CHECK(p != NULL))
		return;
	CHECK_EQ(p->nprocs, 2);
	CHECK_U64(p->procs[0].samples, 4);
	CHECK_U64(p->procs[1].samples, 1);
	struct agg *a = profile_aggregate(p, NULL, 0);
	CHECK_EQ(a->nfuncs, 4);
	CHECK_ROW(func_row(p, a, "child_fn"), 1, 1);
	CHECK_ROW(func_row(p, a, "after_exec"), 1, 1);
	uint64_t parent = 0;
	int nparent = 0;
	for (uint32_t i = 0; i < a->nfuncs; i++)
		if (!strcmp(p->funcs[a->funcs[i].func].name, "parent_fn")) {
			parent += a->funcs[i].self[0];
			nparent++;
		}
	CHECK_EQ(nparent, 2);
	CHECK_U64(parent, 3);
	CHECK_ROW(func_row(p, a, "parent_fn"), 2, 2); /* sorted: the merged one first */
	agg_free(a);
	profile_free(p);
}

static void test_unsupported_process(void)
{
	struct synth s;
	synth_init(&s, STRATA_FMT_MAJOR, STRATA_FMT_MINOR);
	process(&s, 110, 0, PROC_UNSUPPORTED, "python3.14 x.py");
	struct rec_process_end pe = { 0 };
	rec_put_process_end(&s.recs, &pe);
	synth_chunk(&s, 2, CHUNK_LAST);
	process(&s, 111, 0, 0, "python3 ok.py");
	code(&s, 0, "ok", "ok.py", 1, NULL, 0);
	static const int32_t s0[] = { 0, 0 };
	stack(&s, 0, 0, 0, 1, s0);
	sample(&s, 111, 1, 0, 1, 0);
	synth_chunk(&s, 3, CHUNK_LAST);
	struct profile *p = load(&s);
	synth_free(&s);
	if (!CHECK(p != NULL))
		return;
	CHECK_EQ(p->nprocs, 2);
	CHECK(p->procs[0].flags & PROC_UNSUPPORTED);
	CHECK_EQ(p->nsamples, 1);
	int named = 0;
	for (uint32_t i = 0; i < p->nwarnings; i++)
		named |= strstr(p->warnings[i], "process 110") && strstr(p->warnings[i], "not profiled");
	CHECK(named);
	profile_free(p);
}

/* No session record at all (a file written without the CLI): the first
 * profiled process describes the session and sample times bound it. */
static void test_no_session(void)
{
	struct synth s;
	synth_init(&s, STRATA_FMT_MAJOR, STRATA_FMT_MINOR);
	process(&s, 120, 10000, 0, "python3 solo.py");
	code(&s, 0, "f", "solo.py", 1, NULL, 0);
	static const int32_t s0[] = { 0, 0 };
	stack(&s, 0, 0, 0, 1, s0);
	sample(&s, 120, 500, 0, 1, 0);
	sample(&s, 120, 1500, 0, 1, 0);
	sample(&s, 120, -1000, 0, 1, 0); /* out of order across rings */
	synth_chunk(&s, 2, 0);           /* never finished: killed */
	struct profile *p = load(&s);
	synth_free(&s);
	if (!CHECK(p != NULL))
		return;
	CHECK_STR(p->command, "python3 solo.py");
	CHECK_EQ(p->mode, MODE_WALL);
	CHECK_EQ(p->rate_hz, 250);
	CHECK_U64(p->period_ns, 4000000);
	CHECK_U64(p->start_ns, 10500);
	CHECK_U64(p->end_ns, 12000);
	CHECK_U64(p->samples[2].time_ns, 11000);
	CHECK_EQ(p->has_exit_status, 0);
	CHECK(p->truncated);
	CHECK(p->nwarnings >= 1);
	CHECK_CONTAINS(p->warnings[0], "process 120 stopped without finishing");
	profile_free(p);
}

/* Counters recorded with -e become events 1..; aggregation is per event. */
static void test_events(void)
{
	struct synth s;
	synth_init(&s, STRATA_FMT_MAJOR, STRATA_FMT_MINOR);
	char *events[] = { "cycles", "instructions" };
	session(&s, MODE_CPU, 0, 2, events);
	process(&s, 130, 0, 0, "py");
	three_codes(&s);
	static const int32_t sa[] = { 0, 0, 1, 0 }, sb[] = { 0, 0, 2, 0 };
	stack(&s, 0, 0, 0, 2, sa);
	stack(&s, 1, 0, 0, 2, sb);
	struct rec_sample r1 = { .tid = 130, .stack = 0, .weight = 1, .ncounters = 2, .counters = { 1000, 10 } };
	struct rec_sample r2 = { .tid = 130, .stack = 1, .weight = 1, .ncounters = 1, .counters = { 5000 } };
	rec_put_sample(&s.recs, &r1);
	rec_put_sample(&s.recs, &r2);
	synth_chunk(&s, 2, CHUNK_LAST);
	struct profile *p = load(&s);
	synth_free(&s);
	if (!CHECK(p != NULL))
		return;
	CHECK_EQ(p->nevents, 3);
	CHECK_STR(p->event_names[0], "samples");
	CHECK_STR(p->event_names[2], "instructions");
	CHECK_U64(p->totals[1], 6000);
	CHECK_U64(p->totals[2], 10);
	CHECK_U64(profile_value(p, 1, 2), 0);
	/* Sorted by cycles, b (5000) comes before a (1000). */
	struct agg *a = profile_aggregate(p, NULL, 1);
	CHECK_STR(p->funcs[a->funcs[0].func].name, "outer.<locals>.b");
	CHECK_U64(a->funcs[0].self[1], 5000);
	const struct agg_row *m = func_row(p, a, "main");
	CHECK(m && m->total[1] == 6000 && m->total[2] == 10 && m->total[0] == 2);
	agg_free(a);
	profile_free(p);
}

/* A process that samples allocations (--objects) read before the session
 * record that lists the -e events (another stream's chunk came first):
 * the object events follow the session's list, and allocations are counted
 * in them (they were left past the end of the new list; found by
 * fuzz_reader). */
static void test_objects_before_session(void)
{
	struct synth s;
	synth_init(&s, STRATA_FMT_MAJOR, STRATA_FMT_MINOR);
	char *argv[] = { "py" };
	struct rec_process pr = { .pid = 140, .python_version = "3.11.2", .executable = "py", .argc = 1,
				  .argv = argv, .rate_hz = 100, .flags = PROC_OBJECTS, .objects_rate = 1024 };
	rec_put_process(&s.recs, &pr);
	three_codes(&s);
	static const int32_t sa[] = { 0, 0, 1, 0 };
	stack(&s, 0, 0, 0, 2, sa);
	synth_chunk(&s, 2, 0);
	char *events[] = { "cycles" };
	session(&s, MODE_CPU, 0, 1, events);
	struct rec_alloc a = { .tid = 140, .stack = 0, .id = 1, .size = 4096, .domain = ALLOC_OBJ };
	rec_put_alloc(&s.recs, &a);
	a.id = 2;
	rec_put_alloc(&s.recs, &a);
	synth_chunk(&s, 2, CHUNK_LAST);
	struct profile *p = load(&s);
	synth_free(&s);
	if (!CHECK(p != NULL))
		return;
	CHECK_EQ(p->nevents, 6);
	CHECK_STR(p->event_names[1], "cycles");
	CHECK_STR(p->event_names[2], "alloc-objects");
	CHECK_STR(p->event_names[5], "live-bytes");
	CHECK_U64(p->totals[2], 2); /* two blocks of 4 rates' size: about one allocation each */
	CHECK(p->totals[3] >= 8192);
	profile_free(p);
}

/* Ingesting a growing file chunk by chunk gives what loading it whole
 * gives. */
static void test_incremental_ingest(void)
{
	struct synth s;
	synth_init(&s, STRATA_FMT_MAJOR, STRATA_FMT_MINOR);
	session(&s, MODE_CPU, 0, 0, NULL);
	process(&s, 140, 0, 0, "py");
	three_codes(&s);
	static const int32_t sa[] = { 0, 0, 1, 0 }, sb[] = { 0, 0, 2, 0 };
	stack(&s, 0, 0, 0, 2, sa);
	size_t cuts[8];
	int ncuts = 0;
	for (int c = 0; c < 5; c++) {
		for (int i = 0; i < 10; i++)
			sample(&s, 140, 1, 0, 1, 0);
		if (c == 2)
			stack(&s, 1, 0, 0, 2, sb);
		if (c >= 2)
			sample(&s, 140, 1, 1, 1, 0);
		synth_chunk(&s, 2, c == 4 ? CHUNK_LAST : 0);
		cuts[ncuts++] = s.file.len;
	}
	char path[64], err[256];
	CHECK_EQ(write_temp(s.file.data, STRATA_FILE_HDR_SIZE, path), 0);
	struct reader *r = reader_open(path, err, sizeof(err));
	struct profile *p = profile_new(NULL);
	FILE *f = fopen(path, "ab");
	size_t at = STRATA_FILE_HDR_SIZE;
	uint64_t seen = 0;
	for (int c = 0; c < ncuts; c++) {
		/* Each chunk arrives in two writes. */
		size_t mid = at + (cuts[c] - at) / 2;
		fwrite(s.file.data + at, 1, mid - at, f);
		fflush(f);
		CHECK_EQ(profile_ingest(p, r, 0, err, sizeof(err)), 0);
		fwrite(s.file.data + mid, 1, cuts[c] - mid, f);
		fflush(f);
		CHECK_EQ(profile_ingest(p, r, c == ncuts - 1, err, sizeof(err)), 0);
		CHECK(p->nsamples > seen);
		/* The live view aggregates only what is new. */
		struct agg_filter flt = { .first_sample = seen };
		struct agg *a = profile_aggregate(p, &flt, 0);
		CHECK_U64(a->nsamples, p->nsamples - seen);
		agg_free(a);
		seen = p->nsamples;
		at = cuts[c];
	}
	fclose(f);
	CHECK_EQ(p->truncated, 0);
	struct profile *whole = profile_load(path, NULL, err, sizeof(err));
	if (CHECK(whole != NULL)) {
		CHECK_EQ(p->nsamples, whole->nsamples);
		struct agg *a = profile_aggregate(p, NULL, 0), *b = profile_aggregate(whole, NULL, 0);
		CHECK_EQ(a->nfuncs, b->nfuncs);
		for (uint32_t i = 0; i < a->nfuncs && i < b->nfuncs; i++) {
			CHECK_STR(p->funcs[a->funcs[i].func].name, whole->funcs[b->funcs[i].func].name);
			CHECK_U64(a->funcs[i].self[0], b->funcs[i].self[0]);
			CHECK_U64(a->funcs[i].total[0], b->funcs[i].total[0]);
		}
		CHECK_ROW(func_row(p, a, "outer.<locals>.b"), 3, 3);
		agg_free(a);
		agg_free(b);
		profile_free(whole);
	}
	profile_free(p);
	reader_close(r);
	unlink(path);
	synth_free(&s);
}

/* The real fixture: what small.py is known to do. */
static void test_real_file(void)
{
	char err[256];
	struct profile *p = profile_load(SRCDIR "/tests/unit/fixtures/small.strata", NULL, err, sizeof(err));
	if (!CHECK(p != NULL))
		return;
	CHECK_EQ(p->nprocs, 1);
	CHECK_EQ(p->nthreads, 2);
	CHECK_EQ(p->nwarnings, 0);
	CHECK_EQ(p->rate_hz, 200);
	CHECK(p->end_ns > p->start_ns);
	uint32_t worker = PNONE;
	for (uint32_t i = 0; i < p->nthreads; i++)
		if (!strcmp(p->threads[i].name, "worker-1"))
			worker = i;
	CHECK(worker != PNONE);
	struct agg *a = profile_aggregate(p, NULL, 0);
	const struct agg_row *rec = func_row(p, a, "rec");
	if (CHECK(rec != NULL)) {
		/* rec recurses 4-6 deep but counts once; nearly all time is in it. */
		CHECK(rec->total[0] <= a->totals[0]);
		CHECK(rec->total[0] * 10 >= a->totals[0] * 7);
		CHECK_STR(p->funcs[rec->func].file, "/tmp/fixture/small.py");
		CHECK_EQ(p->funcs[rec->func].line, 2);
	}
	/* The loop body lines (5 and 6) are where rec spends its self time. */
	const struct agg_row *l6 = line_row(p, a, "rec", 6), *l5 = line_row(p, a, "rec", 5);
	CHECK(l5 || l6);
	uint64_t loop = (l5 ? l5->self[0] : 0) + (l6 ? l6->self[0] : 0);
	CHECK(rec && loop * 10 >= rec->self[0] * 8);
	agg_free(a);
	profile_free(p);
}

int main(void)
{
	RUN(test_known_stacks);
	RUN(test_recursion_counted_once);
	RUN(test_threads);
	RUN(test_drops);
	RUN(test_marker_frames);
	RUN(test_filters);
	RUN(test_streams);
	RUN(test_unsupported_process);
	RUN(test_no_session);
	RUN(test_events);
	RUN(test_objects_before_session);
	RUN(test_incremental_ingest);
	RUN(test_real_file);
	return test_summary();
}
