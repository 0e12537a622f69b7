/*
 * genprof.c — writes a large synthetic .strata profile with the real
 * encoders, and times loading + aggregating one (make bench-load).
 *
 *   genprof -n SAMPLES -o FILE [--stacks N] [--funcs N] [--threads N] [--seed N] [--random]
 *                               [--locality N] [--native [--leaf-lib LIB]]
 *   genprof --time FILE [--keep-interpreter]
 *
 * The profile looks like the agent's output: one process, several threads,
 * code objects with 3.11 location tables, interned stacks 5–60 frames deep
 * chosen with a skewed distribution (a few hot stacks, a long tail), chunks
 * of about 256 KB. Stacks are walks down a fixed call graph (each function
 * calls a few others, each from its own call site), so they share
 * prefixes as real ones do. Adversarial variants: --random picks every
 * frame (function and offset) at random, so no two stacks share a prefix;
 * --stacks 0 makes every sample a new stack.
 *
 * By default every sample draws its stack independently, which no program
 * does: a thread's consecutive samples mostly repeat its stack. Timeline
 * formats (chrome) pay per stack change, so --locality N keeps each
 * thread's stack for runs of about N samples (a new draw with probability
 * 1/N per sample).
 *
 * --native adds native stacks as --native records them, pointing into the
 * real python3.11 and libc of this machine (so loading it symbolizes them
 * with their debug information): an eval-loop activation and two frames of
 * call machinery per Python frame, and half the leaves in one of 5,000 libc
 * addresses.
 *
 * --leaf-lib LIB (with --native) puts every sample's leaf in LIB instead,
 * at one of 5,000 addresses of its code: with an -O2/-O3 library built
 * with -g (pyenv's libpython), most leaves are inside inlined functions,
 * which is what the inline expansion bench (bench/inline.py) measures.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "synth.h"
#include "../../src/common/elfsect.h"
#include "../../src/lib/profile.h"
#include "../../src/lib/symbols.h"

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint64_t hash_mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define CODE_UNITS 200

/* A 3.11 location table: one entry per code unit, each a line further. */
static void make_linetable(uint8_t *t)
{
	for (int i = 0; i < CODE_UNITS; i++) {
		t[3 * i] = 0x80 | 11 << 3;
		t[3 * i + 1] = 4;
		t[3 * i + 2] = 20;
	}
}

static int random_frames;
static unsigned locality; /* mean run of a thread's stack, 0 = independent */

/* --native: where the addresses point. */
#define PY_EXE "/usr/bin/python3.11"
#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"
#define LIBC_BASE 0x7f3000000000ull
static int native;
static char *leaf_lib = LIBC; /* --leaf-lib */
static int leaf_always;
static struct elf_section py_text, libc_text;
static uint64_t py_eval;

/* _PyEval_EvalFrameDefault in python3.11 (not PIE: its ELF address is
 * where it runs), found by scanning the symbolizer's answers. */
static uint64_t eval_addr(void)
{
	struct symbolizer *sy = sym_new();
	struct sym_space *sp = sym_space_new(sy);
	struct rec_module m = { .start = py_text.addr, .end = py_text.addr + py_text.size, .path = PY_EXE };
	sym_space_add(sp, &m);
	uint64_t found = 0;
	for (uint64_t a = py_text.addr; a < py_text.addr + py_text.size && !found; a += 64) {
		struct sym_info si;
		sym_lookup(sp, a, 0, &si);
		if (si.eval && si.name && !strcmp(si.name, "_PyEval_EvalFrameDefault"))
			found = a - si.sym_offset;
	}
	sym_free(sy);
	return found;
}

#define CALLEES 4

/* Callee c of function f, and the offset of that call in f: fixed, as in
 * real code. Function 0 is the entry point. */
static uint32_t callee(uint32_t f, uint32_t c, uint32_t funcs)
{
	return (uint32_t)((hash_mix((uint64_t)f * CALLEES + c) % (funcs - 1)) + 1);
}
static int32_t call_site(uint32_t f, uint32_t c) { return (int32_t)(hash_mix(f ^ (uint64_t)c << 32) % CODE_UNITS); }

static void put_stack(struct synth *s, uint32_t idx, uint32_t funcs, struct rec_pyframe *py)
{
	uint32_t depth = 5 + (uint32_t)(next() % 56);
	/* Built root first, stored leaf first. */
	uint32_t f = 0;
	for (uint32_t k = 0; k < depth; k++) {
		uint32_t i = depth - 1 - k;
		uint32_t c = (uint32_t)(next() % CALLEES);
		if (random_frames) {
			py[i].code = (uint32_t)(next() % funcs);
			py[i].lasti = (int32_t)(next() % CODE_UNITS);
		} else {
			py[i].code = f;
			/* The leaf runs one of 20 hot instructions; callers sit at
			 * their call sites. */
			py[i].lasti = k == depth - 1 ? (int32_t)(next() % 20) * 3 : call_site(f, c);
			f = callee(f, c, funcs);
		}
		py[i].flags = native || k == 0 ? PYF_ENTRY : 0;
	}
	struct rec_stack st = { .index = idx, .npy = depth, .py = py };
	uint64_t nat[4 + 3 * 64];
	if (native) {
		/* Leaf first: maybe libc, then per Python frame (leaf first)
		 * its eval activation above two frames of call machinery, at
		 * addresses fixed per function, then the interpreter's main. */
		uint32_t n = 0;
		if (leaf_always || next() % 2)
			nat[n++] = LIBC_BASE + libc_text.addr + hash_mix(next() % 5000) % libc_text.size;
		for (uint32_t i = 0; i < depth; i++) {
			uint64_t h = hash_mix(py[i].code);
			nat[n++] = py_text.addr + h % py_text.size;
			nat[n++] = py_text.addr + (h >> 20) % py_text.size;
			nat[n++] = py_eval + 0x100 + (h >> 40) % 0x1000;
		}
		nat[n++] = py_text.addr + 0x40;
		st.nnative = n;
		st.native = nat;
	}
	rec_put_stack(&s->recs, &st);
}

static int generate(const char *path, uint64_t n, uint32_t nstacks, uint32_t funcs, uint32_t threads)
{
	if (native && (elf_find_section(PY_EXE, ".text", &py_text) || elf_find_section(leaf_lib, ".text", &libc_text) ||
		       !(py_eval = eval_addr()))) {
		fprintf(stderr, "genprof: --native needs %s and %s\n", PY_EXE, leaf_lib);
		return -1;
	}
	struct synth s;
	synth_init(&s, STRATA_FMT_MAJOR, STRATA_FMT_MINOR);
	char *argv[] = { "python3", "synthetic.py" };
	struct rec_session se = { .strata_version = "genprof", .start_mono_ns = 1000, .argc = 2, .argv = argv,
				  .rate_hz = 1000, .hostname = "gen" };
	rec_put_session(&s.recs, &se);
	synth_chunk(&s, 1, 0);
	const uint64_t stream = 2;
	struct rec_process pr = { .pid = 4000, .ppid = 1, .start_mono_ns = 2000, .python_version = "3.11.2",
				  .executable = "/usr/bin/python3", .argc = 2, .argv = argv, .rate_hz = 1000,
				  .period_ns = 1000000 };
	rec_put_process(&s.recs, &pr);
	if (native) {
		struct rec_module py = { .start = py_text.addr, .end = py_text.addr + py_text.size, .path = PY_EXE };
		struct rec_module lc = { .start = LIBC_BASE + libc_text.addr, .end = LIBC_BASE + libc_text.addr + libc_text.size,
					 .bias = LIBC_BASE, .path = leaf_lib };
		rec_put_module(&s.recs, &py);
		rec_put_module(&s.recs, &lc);
	}
	for (uint32_t t = 0; t < threads; t++) {
		char name[32];
		snprintf(name, sizeof(name), t ? "worker-%u" : "MainThread", t);
		struct rec_thread th = { .tid = 4000 + t, .flags = t ? 0 : THREAD_MAIN, .name = name };
		rec_put_thread(&s.recs, &th);
	}
	uint8_t lt[3 * CODE_UNITS];
	make_linetable(lt);
	for (uint32_t f = 0; f < funcs; f++) {
		char qual[64], file[64];
		snprintf(qual, sizeof(qual), "Module%u.func_%u", f % 97, f);
		snprintf(file, sizeof(file), "/srv/app/pkg%u/mod%u.py", f % 13, f % 97);
		struct rec_code c = { .index = f, .firstlineno = 1 + (f % 50) * 300, .linetable_fmt = LT_LOCATIONS,
				      .filename = file, .name = qual, .qualname = qual, .linetable = lt,
				      .linetable_len = sizeof(lt) };
		rec_put_code(&s.recs, &c);
	}
	struct rec_pyframe py[64];
	uint32_t next_stack = 0;

	for (uint32_t i = 0; i < nstacks; i++)
		put_stack(&s, next_stack++, funcs, py);
	uint32_t cur[256] = { 0 };
	int have[256] = { 0 };
	for (uint64_t i = 0; i < n; i++) {
		uint32_t st;
		uint32_t t = (uint32_t)(next() % threads) & 255;
		if (locality && have[t] && next() % locality != 0) {
			st = cur[t];
		} else if (nstacks == 0) {
			put_stack(&s, next_stack, funcs, py);
			st = next_stack++;
		} else {
			/* Skewed: the minimum of two uniform draws squared. */
			uint64_t a = next() % nstacks, b = next() % nstacks;
			uint64_t m = a < b ? a : b;
			st = (uint32_t)(m * m / nstacks);
		}
		cur[t] = st;
		have[t] = 1;
		struct rec_sample smp = { .tid = 4000 + t,
					  .dt_ns = 900000 + (int64_t)(next() % 200000), .stack = st, .weight = 1 };
		rec_put_sample(&s.recs, &smp);
		if (s.recs.len > (256u << 10) && synth_chunk(&s, stream, 0))
			return -1;
	}
	struct rec_process_end pe = { .end_mono_ns = 2000 + n * 1000000, .samples = n };
	rec_put_process_end(&s.recs, &pe);
	synth_chunk(&s, stream, CHUNK_LAST);
	struct rec_session_end sen = { .end_mono_ns = 3000 + n * 1000000 };
	rec_put_session_end(&s.recs, &sen);
	synth_chunk(&s, 1, CHUNK_LAST);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(s.file.data, 1, s.file.len, f) != s.file.len || fclose(f)) {
		perror(path);
		return -1;
	}
	fprintf(stderr, "genprof: %llu samples, %u stacks, %u functions, %u threads: %zu bytes -> %s\n",
		(unsigned long long)n, nstacks ? nstacks : next_stack, funcs, threads, s.file.len, path);
	synth_free(&s);
	return 0;
}

static int time_load(const char *path, int keep)
{
	char err[256];
	double t0 = now();
	struct load_opts o = { .keep_interpreter = keep };
	struct profile *p = profile_load(path, &o, err, sizeof(err));
	if (!p) {
		fprintf(stderr, "genprof: %s: %s\n", path, err);
		return 1;
	}
	double t1 = now();
	struct agg *a = profile_aggregate(p, NULL, 0);
	double t2 = now();
	struct agg_filter f = { .tid = p->threads[0].tid };
	struct agg *b = profile_aggregate(p, &f, 0);
	double t3 = now();
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("load %.3f s, aggregate %.3f s (one thread: %.3f s), load+aggregate %.3f s; "
	       "%llu samples, %u nodes, %u frames, %u functions, %u function rows, %u line rows, max RSS %ld MB\n",
	       t1 - t0, t2 - t1, t3 - t2, t2 - t0, (unsigned long long)p->nsamples, p->nnodes, p->nframes, p->nfuncs,
	       a ? a->nfuncs : 0, a ? a->nlines : 0, ru.ru_maxrss / 1024);
	agg_free(a);
	agg_free(b);
	profile_free(p);
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t n = 1000000;
	uint32_t stacks = 50000, funcs = 3000, threads = 8;
	const char *out = NULL, *timed = NULL;
	int keep = 0;
	static const struct option opts[] = {
		{ "samples", required_argument, 0, 'n' }, { "output", required_argument, 0, 'o' },
		{ "stacks", required_argument, 0, 'S' },  { "funcs", required_argument, 0, 'F' },
		{ "threads", required_argument, 0, 'T' }, { "seed", required_argument, 0, 's' },
		{ "time", required_argument, 0, 't' },    { "random", no_argument, 0, 'R' },
		{ "native", no_argument, 0, 'N' },        { "keep-interpreter", no_argument, 0, 'K' },
		{ "locality", required_argument, 0, 'L' }, { "leaf-lib", required_argument, 0, 'l' },
		{ 0, 0, 0, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "n:o:", opts, NULL)) != -1) {
		switch (c) {
		case 'n': n = strtoull(optarg, NULL, 10); break;
		case 'o': out = optarg; break;
		case 'S': stacks = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'F': funcs = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'T':
			threads = (uint32_t)strtoul(optarg, NULL, 10);
			if (threads < 1 || threads > 256) {
				fprintf(stderr, "genprof: --threads must be 1..256\n");
				return 2;
			}
			break;
		case 's': rng = strtoull(optarg, NULL, 10) | 1; break;
		case 't': timed = optarg; break;
		case 'R': random_frames = 1; break;
		case 'N': native = 1; break;
		case 'K': keep = 1; break;
		case 'L': locality = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'l':
			leaf_lib = optarg;
			leaf_always = 1;
			break;
		default:
			fprintf(stderr, "usage: genprof -n SAMPLES -o FILE [--stacks N] [--funcs N] [--threads N] [--seed N] [--random] [--locality N] [--native [--leaf-lib LIB]]\n"
					"       genprof --time FILE [--keep-interpreter]\n");
			return 2;
		}
	}
	if (timed)
		return time_load(timed, keep);
	if (!out || funcs < 2 || !threads) {
		fprintf(stderr, "genprof: -o FILE is required\n");
		return 2;
	}
	return generate(out, n, stacks, funcs, threads) ? 1 : 0;
}
