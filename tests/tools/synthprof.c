/*
 * synthprof.c — synthetic profiles with known answers for the export tests
 * (tests/func/test_export_text.py), and the expected answer itself.
 *
 *   synthprof events OUT.strata SOURCE.py
 *       writes a .strata file with the real format encoders: two extra
 *       events (-e style counters "cycles" and "cache-misses"), two
 *       threads, a 3:1 split, direct recursion, mutual recursion and a
 *       sample without Python frames; code objects live in SOURCE.py (the
 *       caller writes a file with enough lines for annotation)
 *   synthprof native FORMAT OUT
 *       builds a profile model in memory with native, JIT and marker
 *       frames (Python -> C -> Python too), two processes, two events,
 *       and exports it with the FORMAT exporter to OUT. Native frames are
 *       not yet produced by the loader (issue 4 adds them to the model),
 *       so the model is filled directly, through its public fields only:
 *       this checks that the exporters handle what the model will hold.
 *
 * Both print the expected answer as JSON on stdout, computed here by a
 * plain walk over the stacks (independent of the model's aggregation and
 * of the exporters):
 *
 *   {"events": [...], "totals": [...],
 *    "functions": [{"name", "file", "module", "kind", "self": [...], "total": [...]}],
 *    "lines": [{"function", "file", "line", "self": [...], "total": [...]}]}
 *
 * where total counts a function (or line) once per sample.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/synth.h"
#include "../../src/export/export.h"
#include "../../src/lib/profile.h"

#define NEV 3
#define MAXF 16
#define MAXD 16

/* A function of the synthetic program. */
struct sfunc {
	const char *name, *file, *module;
	uint32_t line;
	int kind;
};

/* A stack, root first: function indices, lines, addresses. */
struct sstack {
	uint32_t depth;
	uint32_t func[MAXD];
	uint32_t line[MAXD];
	uint64_t addr[MAXD];
	uint32_t thread;        /* index into the thread table */
	uint32_t count;         /* samples of this stack */
	uint64_t ev[NEV];       /* per sample: weight, then counters */
};

/* ---- the expected answer ----------------------------------------------------- */

static void json_str(const char *s)
{
	putchar('"');
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		if (*c == '"' || *c == '\\')
			printf("\\%c", *c);
		else if (*c < 0x20)
			printf("\\u%04x", *c);
		else
			putchar(*c);
	}
	putchar('"');
}

static void json_vec(const uint64_t *v)
{
	putchar('[');
	for (int e = 0; e < NEV; e++)
		printf("%s%llu", e ? ", " : "", (unsigned long long)v[e]);
	putchar(']');
}

static void expected(const char *const *events, const struct sfunc *f, uint32_t nf, const struct sstack *st,
		     uint32_t ns)
{
	uint64_t fself[MAXF][NEV] = { { 0 } }, ftotal[MAXF][NEV] = { { 0 } }, totals[NEV] = { 0 };
	/* Lines: (func, line) pairs seen, at most MAXF * MAXD. */
	struct { uint32_t func, line; uint64_t self[NEV], total[NEV]; } lines[MAXF * MAXD];
	uint32_t nl = 0;
	int present[MAXF];
	memset(lines, 0, sizeof(lines));
	for (uint32_t s = 0; s < ns; s++) {
		const struct sstack *k = &st[s];
		uint64_t w[NEV];
		for (int e = 0; e < NEV; e++) {
			w[e] = k->ev[e] * k->count;
			totals[e] += w[e];
		}
		memset(present, 0, sizeof(present));
		int lseen[MAXF * MAXD] = { 0 };
		for (uint32_t d = 0; d < k->depth; d++) {
			uint32_t fn = k->func[d], l;
			for (l = 0; l < nl && !(lines[l].func == fn && lines[l].line == k->line[d]); l++)
				;
			if (l == nl) {
				lines[nl].func = fn;
				lines[nl++].line = k->line[d];
			}
			for (int e = 0; e < NEV; e++) {
				if (!present[fn])
					ftotal[fn][e] += w[e];
				if (!lseen[l])
					lines[l].total[e] += w[e];
				if (d == k->depth - 1) {
					fself[fn][e] += w[e];
					lines[l].self[e] += w[e];
				}
			}
			present[fn] = 1;
			lseen[l] = 1;
		}
	}
	printf("{\"events\": [");
	for (int e = 0; e < NEV; e++) {
		printf("%s", e ? ", " : "");
		json_str(events[e]);
	}
	printf("], \"totals\": ");
	json_vec(totals);
	printf(", \"functions\": [");
	for (uint32_t i = 0; i < nf; i++) {
		printf("%s{\"name\": ", i ? ", " : "");
		json_str(f[i].name);
		printf(", \"file\": ");
		json_str(f[i].file);
		printf(", \"module\": ");
		json_str(f[i].module ? f[i].module : "");
		printf(", \"kind\": ");
		json_str(pkind_name(f[i].kind));
		printf(", \"self\": ");
		json_vec(fself[i]);
		printf(", \"total\": ");
		json_vec(ftotal[i]);
		printf("}");
	}
	printf("], \"lines\": [");
	for (uint32_t l = 0; l < nl; l++) {
		printf("%s{\"function\": ", l ? ", " : "");
		json_str(f[lines[l].func].name);
		printf(", \"file\": ");
		json_str(f[lines[l].func].file);
		printf(", \"line\": %u, \"self\": ", lines[l].line);
		json_vec(lines[l].self);
		printf(", \"total\": ");
		json_vec(lines[l].total);
		printf("}");
	}
	printf("]}\n");
}

/* ---- events: a .strata file --------------------------------------------------- */

#define CODE_UNITS 8

static int write_events(const char *out, const char *source)
{
	/* Code unit k of a function is on line firstline + 1 + k (the 3.11
	 * location table below advances one line per unit). */
	struct sfunc f[] = {
		{ "<module>", source, NULL, 1, PK_PYTHON }, { "main", source, NULL, 10, PK_PYTHON },
		{ "heavy", source, NULL, 20, PK_PYTHON },   { "light", source, NULL, 30, PK_PYTHON },
		{ "rec", source, NULL, 40, PK_PYTHON },     { "ping", source, NULL, 50, PK_PYTHON },
		{ "pong", source, NULL, 60, PK_PYTHON },    { "[no Python frame]", "", NULL, 0, PK_OTHER },
	};
	const uint32_t nf = 7; /* Python functions (code objects) */
#define L(fn, k) f[fn].line + 1 + (k)
	struct sstack st[] = {
		/* heavy: 3x light in samples and cycles, 1x in cache misses */
		{ 3, { 0, 1, 2 }, { L(0, 1), L(1, 1), L(2, 2) }, { 0 }, 0, 300, { 1, 1000, 10 } },
		{ 3, { 0, 1, 3 }, { L(0, 1), L(1, 2), L(3, 2) }, { 0 }, 0, 100, { 1, 1000, 30 } },
		/* direct recursion */
		{ 5, { 0, 1, 4, 4, 4 }, { L(0, 1), L(1, 3), L(4, 1), L(4, 1), L(4, 2) }, { 0 }, 1, 40, { 1, 500, 5 } },
		/* mutual recursion */
		{ 5, { 0, 1, 5, 6, 5 }, { L(0, 1), L(1, 4), L(5, 1), L(6, 1), L(5, 2) }, { 0 }, 1, 20, { 1, 200, 50 } },
		/* no Python frame */
		{ 1, { 7 }, { 0 }, { 0 }, 0, 5, { 1, 0, 0 } },
	};
#undef L
	const uint32_t ns = sizeof(st) / sizeof(st[0]);
	const char *events[NEV] = { "samples", "cycles", "cache-misses" };

	struct synth s;
	synth_init(&s, STRATA_FMT_MAJOR, STRATA_FMT_MINOR);
	char *argv[] = { "python3", (char *)source };
	char *ev[] = { "cycles", "cache-misses" };
	struct rec_session se = { .strata_version = "synthprof", .start_realtime_ns = 1700000000000000000ull,
				  .start_mono_ns = 1000, .argc = 2, .argv = argv, .rate_hz = 1000,
				  .nevents = 2, .events = ev, .hostname = "synth" };
	rec_put_session(&s.recs, &se);
	synth_chunk(&s, 1, 0);
	struct rec_process pr = { .pid = 4000, .ppid = 1, .start_mono_ns = 2000, .python_version = "3.11.2",
				  .executable = "/usr/bin/python3.11", .argc = 2, .argv = argv, .rate_hz = 1000,
				  .period_ns = 1000000, .trigger = TRIGGER_PERF_EVENT, .nevents = 2, .events = ev };
	rec_put_process(&s.recs, &pr);
	struct rec_thread th0 = { .tid = 4000, .flags = THREAD_MAIN, .name = "MainThread" };
	struct rec_thread th1 = { .tid = 4001, .name = "worker" };
	rec_put_thread(&s.recs, &th0);
	rec_put_thread(&s.recs, &th1);
	uint8_t lt[3 * CODE_UNITS];
	for (int i = 0; i < CODE_UNITS; i++) {
		lt[3 * i] = 0x80 | 11 << 3; /* one code unit, one line further */
		lt[3 * i + 1] = 4;
		lt[3 * i + 2] = 20;
	}
	for (uint32_t i = 0; i < nf; i++) {
		struct rec_code c = { .index = i, .firstlineno = f[i].line, .linetable_fmt = LT_LOCATIONS,
				      .filename = (char *)source, .name = (char *)f[i].name,
				      .qualname = (char *)f[i].name, .linetable = lt, .linetable_len = sizeof(lt) };
		rec_put_code(&s.recs, &c);
	}
	for (uint32_t i = 0; i < ns; i++) {
		struct rec_pyframe py[MAXD];
		uint32_t npy = 0;
		if (st[i].func[0] < nf) {
			npy = st[i].depth;
			for (uint32_t d = 0; d < npy; d++) {
				uint32_t fn = st[i].func[d];
				/* stored leaf first */
				py[npy - 1 - d] = (struct rec_pyframe){ fn, (int32_t)(st[i].line[d] - f[fn].line - 1),
									d == 0 ? PYF_ENTRY : 0 };
			}
		}
		struct rec_stack rs = { .index = i, .npy = npy, .py = py };
		rec_put_stack(&s.recs, &rs);
	}
	/* Samples interleaved, so that consecutive samples switch stacks. */
	uint32_t left[16];
	for (uint32_t i = 0; i < ns; i++)
		left[i] = st[i].count;
	for (int more = 1; more;) {
		more = 0;
		for (uint32_t i = 0; i < ns; i++) {
			if (!left[i])
				continue;
			left[i]--;
			more = 1;
			struct rec_sample smp = { .tid = 4000 + st[i].thread, .dt_ns = 1000000, .stack = i,
						  .weight = (uint32_t)st[i].ev[0], .ncounters = 2,
						  .counters = { st[i].ev[1], st[i].ev[2] } };
			rec_put_sample(&s.recs, &smp);
		}
	}
	struct rec_process_end pe = { .end_mono_ns = 2000 + 500 * 1000000ull, .samples = 465 };
	rec_put_process_end(&s.recs, &pe);
	synth_chunk(&s, 2, CHUNK_LAST);
	struct rec_session_end sen = { .end_mono_ns = 3000 + 500 * 1000000ull };
	rec_put_session_end(&s.recs, &sen);
	synth_chunk(&s, 1, CHUNK_LAST);
	FILE *fp = fopen(out, "wb");
	if (!fp || fwrite(s.file.data, 1, s.file.len, fp) != s.file.len || fclose(fp)) {
		perror(out);
		return 1;
	}
	synth_free(&s);
	expected(events, f, sizeof(f) / sizeof(f[0]), st, ns);
	return 0;
}

/* ---- native: a model built in memory -------------------------------------------- */

#define NUMPY "/usr/lib/python3/dist-packages/numpy/core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so"
#define LIBBLAS "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3"
#define LIBC "/usr/lib/x86_64-linux-gnu/libc.so.6"
#define JITMOD "[jit] numba module 0x7f0000001000"

static int write_native(const char *format, const char *out)
{
	const struct exporter *ex = exporter_find(format);
	if (!ex) {
		fprintf(stderr, "synthprof: unknown format %s\n", format);
		return 2;
	}
	struct sfunc f[] = {
		{ "<module>", "/srv/app/main.py", NULL, 1, PK_PYTHON },
		{ "compute", "/srv/app/main.py", NULL, 10, PK_PYTHON },
		{ "array_dot", "", NUMPY, 0, PK_NATIVE },
		{ "cblas_dgemm", "blas/dgemm.c", LIBBLAS, 100, PK_NATIVE },
		{ "__memmove_avx_unaligned_erms", "", LIBC, 0, PK_NATIVE },
		{ "jitted_kernel", "/srv/app/main.py", JITMOD, 20, PK_JIT },
		{ "[no Python frame]", "", NULL, 0, PK_OTHER },
		{ "visit", "/srv/app/main.py", NULL, 30, PK_PYTHON },
		{ "qsort_r", "", LIBC, 0, PK_NATIVE },
		{ "std::vector<int>::push_back(int const&)", "", NUMPY, 0, PK_NATIVE },
	};
	const uint32_t nf = sizeof(f) / sizeof(f[0]);
	struct sstack st[] = {
		/* Python -> C -> BLAS */
		{ 4, { 0, 1, 2, 3 }, { 5, 12, 0, 105 }, { 0, 0, 0x7f1000001000, 0x7f2000002000 }, 0, 40, { 1, 4000, 7 } },
		{ 4, { 0, 1, 2, 4 }, { 5, 13, 0, 0 }, { 0, 0, 0x7f1000001010, 0x7f3000003000 }, 0, 20, { 1, 900, 40 } },
		/* JIT code attributed to its Python line */
		{ 2, { 0, 5 }, { 6, 22 }, { 0, 0x7f4000000100 }, 1, 10, { 2, 2000, 1 } },
		{ 1, { 6 }, { 0 }, { 0 }, 1, 2, { 1, 50, 0 } },
		/* Python -> C -> Python -> C -> Python: a callback recursion */
		{ 6, { 0, 7, 8, 7, 8, 7 }, { 7, 31, 0, 32, 0, 33 }, { 0, 0, 0x7f3000003100, 0, 0x7f3000003100, 0 }, 0, 8,
		  { 1, 800, 2 } },
		/* a demangled C++ name */
		{ 4, { 0, 1, 2, 9 }, { 5, 14, 0, 0 }, { 0, 0, 0x7f1000001020, 0x7f1000005000 }, 1, 6, { 1, 600, 3 } },
	};
	const uint32_t ns = sizeof(st) / sizeof(st[0]);
	const char *events[NEV] = { "samples", "instructions", "L1-dcache-load-misses" };

	struct profile p = { 0 };
	struct pprocess procs[2] = {
		{ .pid = 100, .ppid = 1, .command = "/usr/bin/python3.11 /srv/app/main.py", .executable = "/usr/bin/python3.11",
		  .python_version = "3.11.2", .flags = PROC_NATIVE },
		{ .pid = 101, .ppid = 100, .command = "/usr/bin/python3.11 -c worker", .executable = "/usr/bin/python3.11",
		  .python_version = "3.11.2", .flags = PROC_NATIVE },
	};
	struct pthread_info threads[2] = {
		{ .pid = 100, .tid = 100, .process = 0, .name = "MainThread", .main = 1 },
		{ .pid = 101, .tid = 105, .process = 1, .name = "worker thread" },
	};
	struct pfunc funcs[MAXF];
	struct pframe frames[MAXF * MAXD];
	struct pnode nodes[MAXF * MAXD];
	uint32_t nframes = 0, nnodes = 1;
	struct psample *samples = calloc(200, sizeof(*samples));
	uint64_t *values = calloc(200 * NEV, sizeof(*values));
	uint64_t totals[NEV] = { 0 };
	if (!samples || !values)
		return 1;
	for (uint32_t i = 0; i < nf; i++)
		funcs[i] = (struct pfunc){ f[i].name, f[i].file, f[i].line, (uint8_t)f[i].kind, f[i].module };
	nodes[0] = (struct pnode){ PNONE, PNONE, 0 };
	uint64_t nsamples = 0, t = 1000;
	for (uint32_t i = 0; i < ns; i++) {
		uint32_t node = 0;
		for (uint32_t d = 0; d < st[i].depth; d++) {
			uint32_t fr;
			for (fr = 0; fr < nframes; fr++)
				if (frames[fr].func == st[i].func[d] && frames[fr].line == st[i].line[d] &&
				    frames[fr].addr == st[i].addr[d])
					break;
			if (fr == nframes)
				frames[nframes++] = (struct pframe){ st[i].func[d], st[i].line[d], st[i].addr[d] };
			uint32_t n;
			for (n = 1; n < nnodes; n++)
				if (nodes[n].parent == node && nodes[n].frame == fr)
					break;
			if (n == nnodes)
				nodes[nnodes++] = (struct pnode){ node, fr, d + 1 };
			node = n;
		}
		for (uint32_t k = 0; k < st[i].count; k++) {
			samples[nsamples] = (struct psample){ node, st[i].thread, t += 1000000, 0 };
			for (int e = 0; e < NEV; e++) {
				values[nsamples * NEV + e] = st[i].ev[e];
				totals[e] += st[i].ev[e];
			}
			threads[st[i].thread].samples += st[i].ev[0];
			procs[threads[st[i].thread].process].samples += st[i].ev[0];
			nsamples++;
		}
	}
	p.command = "/usr/bin/python3.11 /srv/app/main.py";
	p.strata_version = "synthprof";
	p.hostname = "synth";
	p.python_version = "3.11.2";
	p.mode = MODE_CPU;
	p.rate_hz = 1000;
	p.period_ns = 1000000;
	p.start_realtime_ns = 1700000000000000000ull;
	p.start_ns = 1000;
	p.end_ns = t + 1000;
	p.nevents = NEV;
	p.event_names = (char **)events;
	p.totals = totals;
	p.funcs = funcs;
	p.nfuncs = nf;
	p.frames = frames;
	p.nframes = nframes;
	p.nodes = nodes;
	p.nnodes = nnodes;
	p.samples = samples;
	p.nsamples = nsamples;
	p.values = values;
	p.threads = threads;
	p.nthreads = 2;
	p.procs = procs;
	p.nprocs = 2;
	FILE *fp = fopen(out, "wb");
	if (!fp) {
		perror(out);
		return 1;
	}
	struct export_opts o = { .title = p.command, .source = "synthetic" };
	char err[256] = "";
	int rc = ex->fn(&p, fp, &o, err, sizeof(err));
	if (fclose(fp) || rc) {
		fprintf(stderr, "synthprof: %s: %s\n", format, err);
		return 1;
	}
	free(samples);
	free(values);
	expected(events, f, nf, st, ns);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "events"))
		return write_events(argv[2], argv[3]);
	if (argc == 4 && !strcmp(argv[1], "native"))
		return write_native(argv[2], argv[3]);
	fprintf(stderr, "usage: synthprof events OUT.strata SOURCE.py\n"
			"       synthprof native FORMAT OUT\n");
	return 2;
}
