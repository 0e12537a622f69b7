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
 *       frames (Python -> C -> Python too), two processes, two events
 *       (tests/unit/synthmodel.h: the loader does not produce native
 *       frames yet), and exports it with the FORMAT exporter to OUT
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
#include "../unit/synthmodel.h"
#include "../../src/export/export.h"

#define NEV SM_NEV
#define MAXF SM_MAXF
#define MAXD SM_MAXD

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

/* ---- native: a model built in memory ----------------------------------------- */

static int write_native(const char *format, const char *out)
{
	const struct exporter *ex = exporter_find(format);
	if (!ex) {
		fprintf(stderr, "synthprof: unknown format %s\n", format);
		return 2;
	}
	const uint32_t nf = sizeof(sm_native_funcs) / sizeof(sm_native_funcs[0]);
	const uint32_t ns = sizeof(sm_native_stacks) / sizeof(sm_native_stacks[0]);
	static struct smodel m;
	if (smodel_build(&m, sm_native_funcs, nf, sm_native_stacks, ns, sm_native_events))
		return 1;
	FILE *fp = fopen(out, "wb");
	if (!fp) {
		perror(out);
		return 1;
	}
	struct export_opts o = { .title = m.p.command, .source = "synthetic" };
	char err[256] = "";
	int rc = ex->fn(&m.p, fp, &o, err, sizeof(err));
	if (fclose(fp) || rc) {
		fprintf(stderr, "synthprof: %s: %s\n", format, err);
		return 1;
	}
	smodel_free(&m);
	expected(sm_native_events, sm_native_funcs, nf, sm_native_stacks, ns);
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
