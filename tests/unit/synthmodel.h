/*
 * synthmodel.h — profile models built directly in memory, for exporter
 * tests (tests/unit/test_export.c) and the export test tool
 * (tests/tools/synthprof.c).
 *
 * The loader does not produce native frames yet (issue 4 merges them into
 * the model), so a model holding native, JIT and marker frames is filled
 * here through the public fields of struct profile only (p->in is NULL:
 * nothing that needs the loader's state, such as profile_aggregate, may
 * be called on it). Stacks are given root first with their function,
 * line and address per frame; the builder interns frames and call-tree
 * nodes the way the model does (a child's index above its parent's).
 */
#ifndef STRATA_SYNTHMODEL_H
#define STRATA_SYNTHMODEL_H

#include <stdlib.h>
#include <string.h>

#include "../../src/lib/profile.h"

#define SM_NEV 3   /* events: samples and two counters */
#define SM_MAXF 16
#define SM_MAXD 16

/* A function of the synthetic program. */
struct sfunc {
	const char *name, *file, *module;
	uint32_t line;
	int kind;
};

/* A stack, root first. */
struct sstack {
	uint32_t depth;
	uint32_t func[SM_MAXD];
	uint32_t line[SM_MAXD];
	uint64_t addr[SM_MAXD];
	uint32_t thread;        /* index into the model's two threads */
	uint32_t count;         /* samples of this stack */
	uint64_t ev[SM_NEV];    /* per sample: weight, then counters */
	uint32_t inlined;       /* bit d: frame d is a function inlined into frame d - 1
	                         * (same address) */
};

#define SM_NUMPY "/usr/lib/python3/dist-packages/numpy/core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so"
#define SM_LIBBLAS "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3"
#define SM_LIBC "/usr/lib/x86_64-linux-gnu/libc.so.6"
#define SM_JIT "[jit] numba module 0x7f0000001000"

/* The native program: Python calling C (NumPy, BLAS, libc), JIT code,
 * a marker, Python -> C -> Python callbacks, a demangled C++ name; two
 * processes of one thread each. */
static const struct sfunc sm_native_funcs[] = {
	{ "<module>", "/srv/app/main.py", NULL, 1, PK_PYTHON },
	{ "compute", "/srv/app/main.py", NULL, 10, PK_PYTHON },
	{ "array_dot", "", SM_NUMPY, 0, PK_NATIVE },
	{ "cblas_dgemm", "blas/dgemm.c", SM_LIBBLAS, 100, PK_NATIVE },
	{ "__memmove_avx_unaligned_erms", "", SM_LIBC, 0, PK_NATIVE },
	{ "jitted_kernel", "/srv/app/main.py", SM_JIT, 20, PK_JIT },
	{ "[no Python frame]", "", NULL, 0, PK_OTHER },
	{ "visit", "/srv/app/main.py", NULL, 30, PK_PYTHON },
	{ "qsort_r", "", SM_LIBC, 0, PK_NATIVE },
	{ "std::vector<int>::push_back(int const&)", "", SM_NUMPY, 0, PK_NATIVE },
	{ "PyArray_MatrixProduct2", "numpy/multiarraymodule.c", SM_NUMPY, 900, PK_NATIVE },
	{ "DOUBLE_dot", "numpy/arraytypes.c", SM_NUMPY, 48, PK_NATIVE },
	{ "dot_inner", "numpy/arraytypes.c", SM_NUMPY, 58, PK_NATIVE },
};

static const struct sstack sm_native_stacks[] = {
	/* Python -> C -> BLAS */
	{ 4, { 0, 1, 2, 3 }, { 5, 12, 0, 105 }, { 0, 0, 0x7f1000001000, 0x7f2000002000 }, 0, 40, { 1, 4000, 7 } },
	{ 4, { 0, 1, 2, 4 }, { 5, 13, 0, 0 }, { 0, 0, 0x7f1000001010, 0x7f3000003000 }, 0, 20, { 1, 900, 40 } },
	/* JIT code attributed to its Python line; weight 2 */
	{ 2, { 0, 5 }, { 6, 22 }, { 0, 0x7f4000000100 }, 1, 10, { 2, 2000, 1 } },
	{ 1, { 6 }, { 0 }, { 0 }, 1, 2, { 1, 50, 0 } },
	/* Python -> C -> Python -> C -> Python: a callback recursion */
	{ 6, { 0, 7, 8, 7, 8, 7 }, { 7, 31, 0, 32, 0, 33 }, { 0, 0, 0x7f3000003100, 0, 0x7f3000003100, 0 }, 0, 8,
	  { 1, 800, 2 } },
	/* a demangled C++ name */
	{ 4, { 0, 1, 2, 9 }, { 5, 14, 0, 0 }, { 0, 0, 0x7f1000001020, 0x7f1000005000 }, 1, 6, { 1, 600, 3 } },
	/* functions inlined into a C function (DWARF): two levels at the
	 * leaf, and one level calling out to BLAS */
	{ 5, { 0, 1, 10, 11, 12 }, { 5, 15, 910, 52, 60 }, { 0, 0, 0x7f1000001040, 0x7f1000001040, 0x7f1000001040 },
	  0, 5, { 1, 500, 9 }, 1u << 3 | 1u << 4 },
	{ 5, { 0, 1, 10, 11, 3 }, { 5, 15, 910, 53, 101 }, { 0, 0, 0x7f1000001050, 0x7f1000001050, 0x7f2000002010 },
	  1, 3, { 1, 300, 4 }, 1u << 3 },
};

static const char *const sm_native_events[SM_NEV] = { "samples", "instructions", "L1-dcache-load-misses" };

struct smodel {
	struct profile p;
	struct pfunc funcs[SM_MAXF];
	struct pframe frames[SM_MAXF * SM_MAXD];
	struct pnode nodes[SM_MAXF * SM_MAXD];
	struct pthread_info threads[2];
	struct pprocess procs[2];
	uint64_t totals[SM_NEV];
	struct psample *samples;
	uint64_t *values;
};

/* Builds the model of `ns` stacks over `nf` functions. Returns 0 or -1. */
static inline int smodel_build(struct smodel *m, const struct sfunc *f, uint32_t nf, const struct sstack *st,
			       uint32_t ns, const char *const *events)
{
	memset(m, 0, sizeof(*m));
	uint64_t n = 0;
	for (uint32_t i = 0; i < ns; i++)
		n += st[i].count;
	m->samples = calloc(n + 1, sizeof(*m->samples));
	m->values = calloc((n + 1) * SM_NEV, sizeof(*m->values));
	if (!m->samples || !m->values || nf > SM_MAXF)
		return -1;
	m->procs[0] = (struct pprocess){ .pid = 100, .ppid = 1, .command = "/usr/bin/python3.11 /srv/app/main.py",
					 .executable = "/usr/bin/python3.11", .python_version = "3.11.2",
					 .flags = PROC_NATIVE };
	m->procs[1] = (struct pprocess){ .pid = 101, .ppid = 100, .command = "/usr/bin/python3.11 -c worker",
					 .executable = "/usr/bin/python3.11", .python_version = "3.11.2",
					 .flags = PROC_NATIVE };
	m->threads[0] = (struct pthread_info){ .pid = 100, .tid = 100, .process = 0, .name = "MainThread", .main = 1 };
	m->threads[1] = (struct pthread_info){ .pid = 101, .tid = 105, .process = 1, .name = "worker thread" };
	for (uint32_t i = 0; i < nf; i++)
		m->funcs[i] = (struct pfunc){ f[i].name, f[i].file, f[i].line, (uint8_t)f[i].kind, f[i].module };
	m->nodes[0] = (struct pnode){ PNONE, PNONE, 0 };
	uint32_t nframes = 0, nnodes = 1;
	uint64_t t = 1000;
	struct profile *p = &m->p;
	for (uint32_t i = 0; i < ns; i++) {
		uint32_t node = 0, prev = PNONE;
		for (uint32_t d = 0; d < st[i].depth; d++) {
			uint32_t fr, k, into = (st[i].inlined >> d & 1) ? prev : PNONE;
			for (fr = 0; fr < nframes; fr++)
				if (m->frames[fr].func == st[i].func[d] && m->frames[fr].line == st[i].line[d] &&
				    m->frames[fr].addr == st[i].addr[d] && m->frames[fr].inlined_into == into)
					break;
			if (fr == nframes)
				m->frames[nframes++] = (struct pframe){ st[i].func[d], st[i].line[d], st[i].addr[d], into };
			prev = fr;
			for (k = 1; k < nnodes; k++)
				if (m->nodes[k].parent == node && m->nodes[k].frame == fr)
					break;
			if (k == nnodes)
				m->nodes[nnodes++] = (struct pnode){ node, fr, d + 1 };
			node = k;
		}
		for (uint32_t c = 0; c < st[i].count; c++) {
			m->samples[p->nsamples] = (struct psample){ node, st[i].thread, t += 1000000, 0 };
			for (int e = 0; e < SM_NEV; e++) {
				m->values[p->nsamples * SM_NEV + e] = st[i].ev[e];
				m->totals[e] += st[i].ev[e];
			}
			m->threads[st[i].thread].samples += st[i].ev[0];
			m->procs[m->threads[st[i].thread].process].samples += st[i].ev[0];
			p->nsamples++;
		}
	}
	p->command = "/usr/bin/python3.11 /srv/app/main.py";
	p->strata_version = "synthetic";
	p->hostname = "synth";
	p->python_version = "3.11.2";
	p->mode = MODE_CPU;
	p->rate_hz = 1000;
	p->period_ns = 1000000;
	p->start_realtime_ns = 1700000000000000000ull;
	p->start_ns = 1000;
	p->end_ns = t + 1000;
	p->nevents = SM_NEV;
	p->event_names = (char **)events;
	p->totals = m->totals;
	p->funcs = m->funcs;
	p->nfuncs = nf;
	p->frames = m->frames;
	p->nframes = nframes;
	p->nodes = m->nodes;
	p->nnodes = nnodes;
	p->samples = m->samples;
	p->values = m->values;
	p->threads = m->threads;
	p->nthreads = 2;
	p->procs = m->procs;
	p->nprocs = 2;
	return 0;
}

static inline void smodel_free(struct smodel *m)
{
	free(m->samples);
	free(m->values);
}

#endif
