/*
 * test_diff.c — comparing two profiles (src/lib/diff.c, diff-match.c) on
 * models built in memory, where every answer is known by construction:
 * files paired across checkouts and Python versions, ambiguity left alone
 * or settled by the directory rewrite, --strip-prefix, keys of native,
 * JIT and marker frames, a function that moved lines, what is refused as
 * incomparable and what is normalized, shares, amounts and ratios, totals
 * once per sample, filters, and BASE's cost laid on NEW's call tree.
 */
#include "test.h"

#include <math.h>

#include "../../src/lib/diff.h"

/* ---- a model in memory ----------------------------------------------------- */

#define MAXN 256

struct model {
	struct profile p;
	struct pfunc funcs[MAXN];
	struct pframe frames[MAXN];
	struct pnode nodes[MAXN];
	struct psample samples[MAXN];
	uint64_t values[MAXN * 2];
	struct pthread_info threads[2];
	struct pprocess procs[1];
	char *names[2];
	uint64_t totals[2];
	struct pevent_info info[2];
};

static void model_init(struct model *m, int mode, uint64_t period_ns)
{
	memset(m, 0, sizeof(*m));
	struct profile *p = &m->p;
	p->mode = mode;
	p->rate_hz = period_ns ? (unsigned)(1000000000ull / period_ns) : 0;
	p->period_ns = period_ns;
	p->funcs = m->funcs;
	p->frames = m->frames;
	p->nodes = m->nodes;
	p->nnodes = 1;
	m->nodes[0] = (struct pnode){ PNONE, PNONE, 0 };
	p->samples = m->samples;
	p->values = m->values;
	p->threads = m->threads;
	p->nthreads = 2;
	m->threads[0] = (struct pthread_info){ .pid = 10, .tid = 10, .process = 0, .name = "MainThread", .main = 1 };
	m->threads[1] = (struct pthread_info){ .pid = 10, .tid = 11, .process = 0, .name = "worker" };
	p->procs = m->procs;
	p->nprocs = 1;
	m->procs[0].pid = 10;
	m->names[0] = "samples";
	p->event_names = m->names;
	p->nevents = 1;
	p->totals = m->totals;
	p->event_info = m->info;
}

static uint32_t fn(struct model *m, int kind, const char *name, const char *file, uint32_t line, const char *module)
{
	struct profile *p = &m->p;
	p->funcs[p->nfuncs] = (struct pfunc){ name, file, line, (uint8_t)kind, module };
	return p->nfuncs++;
}

static uint32_t fr(struct model *m, uint32_t func, uint32_t line)
{
	struct profile *p = &m->p;
	for (uint32_t i = 0; i < p->nframes; i++)
		if (p->frames[i].func == func && p->frames[i].line == line)
			return i;
	p->frames[p->nframes] = (struct pframe){ func, line, 0, PNONE };
	return p->nframes++;
}

/* `count` samples of weight 1 on the stack of frames fr[0] (root) ..
 * fr[n-1], in thread t. */
static void smp(struct model *m, uint32_t t, uint32_t count, int n, const uint32_t *frs)
{
	struct profile *p = &m->p;
	uint32_t node = 0;
	for (int d = 0; d < n; d++) {
		uint32_t c;
		for (c = 1; c < p->nnodes; c++)
			if (p->nodes[c].parent == node && p->nodes[c].frame == frs[d])
				break;
		if (c == p->nnodes) {
			p->nodes[c] = (struct pnode){ node, frs[d], (uint32_t)d + 1 };
			p->nnodes++;
		}
		node = c;
	}
	for (uint32_t i = 0; i < count; i++) {
		p->samples[p->nsamples] = (struct psample){ node, t, 0, 0, PNONE };
		p->values[p->nsamples * p->nevents] = 1;
		p->totals[0]++;
		p->nsamples++;
	}
}

/* ---- matching ----------------------------------------------------------------- */

/* Two checkouts at different depths, and the standard library of two
 * Python versions: every file pairs with its counterpart. */
static void test_checkouts(void)
{
	static struct model b, n;
	model_init(&b, MODE_CPU, 1000000);
	model_init(&n, MODE_CPU, 1000000);
	const char *bf[] = { "/home/ann/proj/app.py", "/home/ann/proj/pkg/__init__.py", "/home/ann/proj/pkg/util.py",
			     "/home/ann/proj/other/__init__.py", "/usr/lib/python3.11/json/__init__.py" };
	const char *nf[] = { "/tmp/ci/build/src/proj/app.py", "/tmp/ci/build/src/proj/pkg/__init__.py",
			     "/tmp/ci/build/src/proj/pkg/util.py", "/tmp/ci/build/src/proj/other/__init__.py",
			     "/usr/lib/python3.12/json/__init__.py" };
	uint32_t bfn[5], nfn[5];
	for (int i = 0; i < 5; i++) {
		bfn[i] = fn(&b, PK_PYTHON, "work", bf[i], 10, NULL);
		nfn[i] = fn(&n, PK_PYTHON, "work", nf[i], 10, NULL);
	}
	struct diff_match *m = diff_match_build(&b.p, &n.p, NULL);
	if (!CHECK(m != NULL))
		return;
	for (int i = 0; i < 5; i++) {
		CHECK_EQ(diff_func_key(m, DIFF_BASE, bfn[i]), diff_func_key(m, DIFF_NEW, nfn[i]));
		CHECK_EQ(diff_file_key(m, DIFF_BASE, bfn[i]), diff_file_key(m, DIFF_NEW, nfn[i]));
		CHECK_STR(diff_key_path(m, DIFF_NEW, diff_file_key(m, DIFF_BASE, bfn[i])), nf[i]);
	}
	/* Different files stay different. */
	CHECK(diff_func_key(m, DIFF_BASE, bfn[1]) != diff_func_key(m, DIFF_NEW, nfn[3]));
	struct diff_file_stats st;
	diff_file_stats(m, &st);
	CHECK_EQ(st.moved, 5);
	CHECK_EQ(st.same, 0);
	CHECK_EQ(st.new_only + st.base_only, 0);
	CHECK_EQ(diff_path_key(m, DIFF_NEW, nf[2]), diff_path_key(m, DIFF_BASE, bf[2]));
	CHECK_EQ(diff_path_key(m, DIFF_NEW, "/nowhere.py"), PNONE);
	diff_match_free(m);
}

/* Two __init__.py with one trailing component in common with NEW's: not
 * guessed from the name, but paired by the rewrite main.py shows. */
static void test_ambiguous_and_rewrite(void)
{
	static struct model b, n;
	model_init(&b, MODE_CPU, 1000000);
	model_init(&n, MODE_CPU, 1000000);
	uint32_t b_init = fn(&b, PK_PYTHON, "<module>", "/r1/__init__.py", 1, NULL);
	fn(&b, PK_PYTHON, "main", "/r1/main.py", 1, NULL);
	uint32_t b_sub = fn(&b, PK_PYTHON, "<module>", "/r1/sub/__init__.py", 1, NULL);
	uint32_t n_init = fn(&n, PK_PYTHON, "<module>", "/r2/__init__.py", 1, NULL);
	fn(&n, PK_PYTHON, "main", "/r2/main.py", 1, NULL);
	struct diff_match *m = diff_match_build(&b.p, &n.p, NULL);
	if (!CHECK(m != NULL))
		return;
	CHECK_EQ(diff_func_key(m, DIFF_BASE, b_init), diff_func_key(m, DIFF_NEW, n_init));
	CHECK(diff_func_key(m, DIFF_BASE, b_sub) != diff_func_key(m, DIFF_NEW, n_init));
	struct diff_file_stats st;
	diff_file_stats(m, &st);
	CHECK_EQ(st.moved, 2);
	CHECK_EQ(st.base_only, 1);
	diff_match_free(m);

	/* Without a rewrite to settle it, an ambiguous file stays unpaired. */
	static struct model b2, n2;
	model_init(&b2, MODE_CPU, 1000000);
	model_init(&n2, MODE_CPU, 1000000);
	uint32_t x1 = fn(&b2, PK_PYTHON, "f", "/b1/x.py", 1, NULL);
	uint32_t x2 = fn(&b2, PK_PYTHON, "f", "/b2/x.py", 1, NULL);
	uint32_t y = fn(&n2, PK_PYTHON, "f", "/n1/x.py", 1, NULL);
	m = diff_match_build(&b2.p, &n2.p, NULL);
	if (CHECK(m != NULL)) {
		CHECK(diff_func_key(m, DIFF_NEW, y) != diff_func_key(m, DIFF_BASE, x1));
		CHECK(diff_func_key(m, DIFF_NEW, y) != diff_func_key(m, DIFF_BASE, x2));
		diff_match_free(m);
	}
	/* --strip-prefix says what the heuristic cannot see; a prefix strips
	 * whole directories only. */
	const char *strip[] = { "/b1/", "/n1", "/b" };
	struct diff_match_opts o = { strip, 3 };
	m = diff_match_build(&b2.p, &n2.p, &o);
	if (CHECK(m != NULL)) {
		CHECK_EQ(diff_func_key(m, DIFF_NEW, y), diff_func_key(m, DIFF_BASE, x1));
		CHECK(diff_func_key(m, DIFF_NEW, y) != diff_func_key(m, DIFF_BASE, x2));
		diff_match_free(m);
	}
}

/* Native code by object name and symbol, JIT code by name, markers by
 * text; a Python function that moved keeps its key, its lines do not. */
static void test_kinds(void)
{
	static struct model b, n;
	model_init(&b, MODE_CPU, 1000000);
	model_init(&n, MODE_CPU, 1000000);
	uint32_t b_nat = fn(&b, PK_NATIVE, "cblas_dgemm", "", 0, "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3");
	uint32_t n_nat = fn(&n, PK_NATIVE, "cblas_dgemm", "", 0, "/opt/venv/lib/libblas.so.3");
	uint32_t n_nat2 = fn(&n, PK_NATIVE, "cblas_dgemm", "", 0, "/opt/venv/lib/libopenblas.so.0");
	uint32_t b_jit = fn(&b, PK_JIT, "__main__.kernel(float64[::1], int64)", "/a/app.py", 5, "[jit]");
	uint32_t n_jit = fn(&n, PK_JIT, "__main__.kernel(float64[::1], int64)", "/b/app.py", 7, "[jit]");
	uint32_t b_gc = fn(&b, PK_OTHER, "[gc]", "", 0, NULL);
	uint32_t n_gc = fn(&n, PK_OTHER, "[gc]", "", 0, NULL);
	uint32_t b_f = fn(&b, PK_PYTHON, "Cls.method", "/a/app.py", 20, NULL);
	uint32_t n_f = fn(&n, PK_PYTHON, "Cls.method", "/b/app.py", 24, NULL);
	uint32_t n_g = fn(&n, PK_PYTHON, "Cls.other", "/b/app.py", 40, NULL);
	uint32_t bl = fr(&b, b_f, 22), nl_same = fr(&n, n_f, 22), nl_moved = fr(&n, n_f, 26);
	fr(&b, b_nat, 0);
	uint32_t nfr = fr(&n, n_nat, 0);
	struct diff_match *m = diff_match_build(&b.p, &n.p, NULL);
	if (!CHECK(m != NULL))
		return;
	CHECK_EQ(diff_func_key(m, DIFF_BASE, b_nat), diff_func_key(m, DIFF_NEW, n_nat));
	CHECK(diff_func_key(m, DIFF_BASE, b_nat) != diff_func_key(m, DIFF_NEW, n_nat2));
	CHECK_EQ(diff_file_key(m, DIFF_BASE, b_nat), diff_file_key(m, DIFF_NEW, n_nat));
	CHECK_EQ(diff_func_key(m, DIFF_BASE, b_jit), diff_func_key(m, DIFF_NEW, n_jit));
	CHECK_EQ(diff_func_key(m, DIFF_BASE, b_gc), diff_func_key(m, DIFF_NEW, n_gc));
	CHECK_EQ(diff_file_key(m, DIFF_BASE, b_gc), PNONE);
	CHECK_EQ(diff_func_key(m, DIFF_BASE, b_f), diff_func_key(m, DIFF_NEW, n_f));
	CHECK(diff_func_key(m, DIFF_BASE, b_f) != diff_func_key(m, DIFF_NEW, n_g));
	CHECK_EQ(diff_line_key(m, DIFF_BASE, bl), diff_line_key(m, DIFF_NEW, nl_same));
	CHECK(diff_line_key(m, DIFF_BASE, bl) != diff_line_key(m, DIFF_NEW, nl_moved));
	CHECK_EQ(diff_frame_in_new(m, bl), nl_same);
	CHECK_EQ(diff_func_in_new(m, b_nat), n_nat);
	CHECK_EQ(diff_frame_in_new(m, 1), nfr);
	diff_match_free(m);
}

/* ---- compatibility ---------------------------------------------------------------- */

static void test_check(void)
{
	static struct model b, n;
	const char *names[2] = { "base.strata", "new.strata" };
	struct diff_check c;
	char why[512];
	model_init(&b, MODE_CPU, 1000000);
	model_init(&n, MODE_WALL, 1000000);
	const struct profile *p[2] = { &b.p, &n.p };
	CHECK_EQ(diff_check(p, names, NULL, 0, &c, why, sizeof(why)), -1);
	CHECK_CONTAINS(why, "cpu mode");
	CHECK_CONTAINS(why, "wall mode");
	CHECK(!strchr(why, '\n'));

	/* Rates differ: compared, and said. */
	model_init(&n, MODE_CPU, 4000000);
	CHECK_EQ(diff_check(p, names, NULL, 1, &c, why, sizeof(why)), 0);
	CHECK_EQ(c.nnotes, 1);
	CHECK_CONTAINS(c.notes[0], "1000 Hz");
	CHECK_CONTAINS(c.notes[0], "250 Hz");
	CHECK_STR(c.unit, "ns");
	CHECK(c.scale[0] == 1e6 && c.scale[1] == 4e6);

	/* -e cycles against the CPU-time timer, and cycles against page-faults. */
	char *ev_b[] = { "samples", "cycles" }, *ev_n[] = { "samples", "page-faults" };
	b.p.event_names = ev_b;
	b.p.nevents = 2;
	b.info[1] = (struct pevent_info){ 1, 0, 0, 1000000, EVD_SAMPLING };
	CHECK_EQ(diff_check(p, names, NULL, 0, &c, why, sizeof(why)), -1);
	CHECK_CONTAINS(why, "cycles");
	CHECK_CONTAINS(why, "CPU-time timer");
	n.p.event_names = ev_n;
	n.p.nevents = 2;
	n.info[1] = (struct pevent_info){ 1, 1, 2, 10, EVD_SAMPLING };
	CHECK_EQ(diff_check(p, names, NULL, 0, &c, why, sizeof(why)), -1);
	CHECK_CONTAINS(why, "page-faults");
	/* Same event, other period: samples in cycles. */
	n.p.event_names = ev_b;
	n.info[1] = (struct pevent_info){ 1, 0, 0, 2000000, EVD_SAMPLING };
	CHECK_EQ(diff_check(p, names, NULL, 1, &c, why, sizeof(why)), 0);
	CHECK_STR(c.unit, "cycles");
	CHECK(c.scale[1] == 2e6);
	CHECK_EQ(diff_check(p, names, "cycles", 0, &c, why, sizeof(why)), 0);
	CHECK_EQ(c.event[0], 1);
	/* An event one of them lacks; allocations without --objects. */
	CHECK_EQ(diff_check(p, names, "instructions", 0, &c, why, sizeof(why)), -1);
	CHECK_CONTAINS(why, "no event 'instructions'");
	CHECK_EQ(diff_check(p, names, "alloc-bytes", 0, &c, why, sizeof(why)), -1);
	CHECK_CONTAINS(why, "without --objects");
	/* --absolute needs the periods. */
	n.info[1].known = 0;
	CHECK_EQ(diff_check(p, names, NULL, 1, &c, why, sizeof(why)), -1);
	CHECK_CONTAINS(why, "new.strata");
}

/* ---- costs and rows ------------------------------------------------------------------- */

/* base: main -> f (10 samples), main -> g (10), main -> f -> f (recursion, 5)
 * new:  main -> f (30), main -> g (10), main -> h (10), worker thread: g (10),
 *       periods: 1 ms in base, 2 ms in new */
static void build_pair(struct model *b, struct model *n)
{
	model_init(b, MODE_CPU, 1000000);
	model_init(n, MODE_CPU, 2000000);
	uint32_t bm = fn(b, PK_PYTHON, "main", "/a/app.py", 1, NULL), bf = fn(b, PK_PYTHON, "f", "/a/app.py", 10, NULL);
	uint32_t bg = fn(b, PK_PYTHON, "g", "/a/app.py", 20, NULL);
	uint32_t nm = fn(n, PK_PYTHON, "main", "/b/app.py", 1, NULL), nf = fn(n, PK_PYTHON, "f", "/b/app.py", 12, NULL);
	uint32_t ng = fn(n, PK_PYTHON, "g", "/b/app.py", 22, NULL), nh = fn(n, PK_PYTHON, "h", "/b/app.py", 30, NULL);
	uint32_t s1[] = { fr(b, bm, 2), fr(b, bf, 11) }, s2[] = { fr(b, bm, 3), fr(b, bg, 21) };
	uint32_t s3[] = { fr(b, bm, 2), fr(b, bf, 11), fr(b, bf, 11) };
	smp(b, 0, 10, 2, s1);
	smp(b, 0, 10, 2, s2);
	smp(b, 0, 5, 3, s3);
	uint32_t t1[] = { fr(n, nm, 2), fr(n, nf, 11) }, t2[] = { fr(n, nm, 3), fr(n, ng, 21) };
	uint32_t t3[] = { fr(n, nm, 4), fr(n, nh, 31) }, t4[] = { fr(n, ng, 21) };
	smp(n, 0, 30, 2, t1);
	smp(n, 0, 10, 2, t2);
	smp(n, 0, 10, 2, t3);
	smp(n, 1, 10, 1, t4);
}

static const struct diff_row *row(const struct profile *const p[2], const struct diff_result *r, const char *name)
{
	for (uint32_t i = 0; i < r->nrows; i++) {
		int s = r->rows[i].rep[1] != PNONE ? 1 : 0;
		if (!strcmp(p[s]->funcs[r->rows[i].rep[s]].name, name))
			return &r->rows[i];
	}
	return NULL;
}

#define NEAR(a, b) (fabs((double)(a) - (double)(b)) < 1e-9)

static void test_compare(void)
{
	static struct model b, n;
	build_pair(&b, &n);
	const struct profile *p[2] = { &b.p, &n.p };
	const char *names[2] = { "b", "n" };
	struct diff_check c;
	char why[256];
	if (!CHECK(diff_check(p, names, NULL, 0, &c, why, sizeof(why)) == 0))
		return;
	struct diff_match *m = diff_match_build(&b.p, &n.p, NULL);
	struct diff_query q = { .by = DIFF_BY_FUNCTION };
	struct diff_result *r = m ? diff_compare(p, m, &c, &q) : NULL;
	if (!CHECK(r != NULL))
		return;
	CHECK_U64(r->all[0], 25);
	CHECK_U64(r->all[1], 60);
	const struct diff_row *f = row(p, r, "f"), *g = row(p, r, "g"), *h = row(p, r, "h"), *mn = row(p, r, "main");
	if (CHECK(f && g && h && mn)) {
		/* f moved from line 10 to 12 and still is f. */
		CHECK_EQ(f->status, DIFF_CHANGED);
		CHECK_U64(f->self[0], 15);
		CHECK_U64(f->total[0], 15); /* the recursion counts once */
		CHECK_U64(f->self[1], 30);
		CHECK(NEAR(f->value[0], 0.6) && NEAR(f->value[1], 0.5));
		CHECK(NEAR(f->points, -10.0));
		CHECK(NEAR(g->value[1], 20.0 / 60));
		CHECK_EQ(h->status, DIFF_NEW_ONLY);
		CHECK(isinf(h->ratio));
		CHECK_U64(mn->total[0], 25);
		CHECK_U64(mn->self[0], 0);
		/* Largest increase first. */
		CHECK(r->rows[0].delta >= r->rows[1].delta);
		CHECK(r->rows[0].key == h->key);
	}
	diff_result_free(r);

	/* Amounts: samples times each one's period. */
	q.absolute = 1;
	r = diff_compare(p, m, &c, &q);
	if (CHECK(r != NULL) && CHECK((f = row(p, r, "f")) != NULL)) {
		CHECK(NEAR(f->value[0], 15e6) && NEAR(f->value[1], 60e6));
		CHECK(NEAR(f->ratio, 4.0));
		CHECK(NEAR(f->points, 100.0 * 45e6 / 25e6));
		CHECK(NEAR(r->all_value[1], 120e6));
	}
	diff_result_free(r);

	/* One thread, by name; lines; files. */
	q.absolute = 0;
	q.f[0].thread = q.f[1].thread = "worker";
	r = diff_compare(p, m, &c, &q);
	if (CHECK(r != NULL)) {
		CHECK_U64(r->all[0], 0);
		CHECK_U64(r->all[1], 10);
		CHECK_EQ(r->nrows, 1);
	}
	diff_result_free(r);
	q.f[0].thread = q.f[1].thread = NULL;
	q.by = DIFF_BY_LINE;
	r = diff_compare(p, m, &c, &q);
	if (CHECK(r != NULL)) {
		uint32_t lines = 0;
		for (uint32_t i = 0; i < r->nrows; i++)
			lines += r->rows[i].status == DIFF_CHANGED;
		CHECK_EQ(lines, 4); /* main:2, main:3, f:11, g:21 */
	}
	diff_result_free(r);
	q.by = DIFF_BY_FILE;
	r = diff_compare(p, m, &c, &q);
	if (CHECK(r != NULL) && CHECK(r->nrows == 1)) {
		CHECK_U64(r->rows[0].self[0], 25);
		CHECK_U64(r->rows[0].total[1], 60);
	}
	diff_result_free(r);
	diff_match_free(m);

	/* Filters that name nothing are errors. */
	struct diff_filter bad = { .tid = 99 }, task = { .task = "fetch" };
	CHECK_EQ(diff_filter_check(&n.p, &bad, why, sizeof(why)), -1);
	CHECK_CONTAINS(why, "99");
	CHECK_EQ(diff_filter_check(&n.p, &task, why, sizeof(why)), -1);
	CHECK_CONTAINS(why, "[task fetch]");
}

/* Tasks: only samples under a "[task NAME]" frame count. */
static void test_task_filter(void)
{
	static struct model b, n;
	build_pair(&b, &n);
	uint32_t tk = fn(&n, PK_OTHER, "[task fetch]", "", 0, NULL), nf = fn(&n, PK_PYTHON, "f", "/b/app.py", 12, NULL);
	uint32_t s[] = { fr(&n, tk, 0), fr(&n, nf, 11) };
	smp(&n, 0, 7, 2, s);
	struct diff_match *m = diff_match_build(&b.p, &n.p, NULL);
	struct diff_filter f = { .task = "fetch" };
	char why[256];
	CHECK_EQ(diff_filter_check(&n.p, &f, why, sizeof(why)), 0);
	struct diff_costs dc;
	if (CHECK(m && diff_costs_build(&n.p, m, DIFF_NEW, DIFF_BY_FUNCTION, &f, &dc) == 0)) {
		CHECK_U64(dc.all, 7);
		CHECK_U64(dc.self[diff_func_key(m, DIFF_NEW, nf)], 7);
		diff_costs_free(&dc);
	}
	diff_match_free(m);
}

/* BASE's self cost lands on NEW's nodes of the same path. */
static void test_tree_map(void)
{
	static struct model b, n;
	build_pair(&b, &n);
	struct diff_match *m = diff_match_build(&b.p, &n.p, NULL);
	uint64_t bs[MAXN], unmatched;
	if (!CHECK(m != NULL) || !CHECK(diff_tree_map(&b.p, &n.p, m, 0, 0, 0, bs, &unmatched) == 0))
		return;
	/* main:2 -> f:11 is NEW's node 2; the recursive f -> f exists only in BASE. */
	uint32_t nf = n.p.samples[0].node;
	CHECK_U64(bs[nf], 10);
	CHECK_U64(unmatched, 5);
	uint64_t sum = unmatched;
	for (uint32_t i = 0; i < n.p.nnodes; i++)
		sum += bs[i];
	CHECK_U64(sum, 25);
	diff_match_free(m);
}

int main(void)
{
	RUN(test_checkouts);
	RUN(test_ambiguous_and_rewrite);
	RUN(test_kinds);
	RUN(test_check);
	RUN(test_compare);
	RUN(test_task_filter);
	RUN(test_tree_map);
	return test_summary();
}
