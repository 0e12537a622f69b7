/*
 * nstacks.c — test tool for --native: reads a .strata file, symbolizes the
 * native frames (symbols.c), merges them with the Python frames (merge.c)
 * and prints collapsed stacks, root first, with sample counts:
 *
 *   py:caller (prog.py:12);c:burn_c (ext.c:7) 912
 *
 * Python frames show their qualified name and the code object's first
 * line; native frames their symbol and file:line, or module+0xoffset. The
 * last line is a summary the tests and bench read:
 *
 *   # samples=N native=N failed=N truncated=N mismatch=N
 *
 * usage: nstacks [--keep-interpreter] [--raw] FILE
 * (--raw prints the native frames without merging, eval frames marked *)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/common/format.h"
#include "../../src/lib/merge.h"
#include "../../src/lib/reader.h"
#include "../../src/lib/symbols.h"

struct code {
	char *text;
};

struct stackinfo {
	char *text;      /* collapsed, root first */
	uint32_t flags;
	int has_native;
	int mismatch;
};

struct stream {
	uint64_t id;
	struct sym_space *space;
	struct code *codes;
	uint32_t ncodes;
	struct stackinfo *stacks;
	uint32_t nstacks;
};

struct out {
	char *text;
	uint64_t count;
};

static struct {
	struct symbolizer *sym;
	struct stream *streams;
	size_t nstreams;
	int keep, raw;
	struct out *outs;
	size_t nouts, capouts;
	uint64_t samples, native, failed, truncated, mismatch;
} G;

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n);
	if (!p) {
		fprintf(stderr, "nstacks: out of memory\n");
		exit(2);
	}
	return p;
}

static struct stream *get_stream(uint64_t id)
{
	for (size_t i = 0; i < G.nstreams; i++)
		if (G.streams[i].id == id)
			return &G.streams[i];
	G.streams = xrealloc(G.streams, (G.nstreams + 1) * sizeof(*G.streams));
	struct stream *s = &G.streams[G.nstreams++];
	memset(s, 0, sizeof(*s));
	s->id = id;
	s->space = sym_space_new(G.sym);
	return s;
}

struct sbuf {
	char *p;
	size_t n, cap;
};

static void sb_add(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static void sb_add(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		va_start(ap, fmt);
		int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
		va_end(ap);
		if (b->p && (size_t)k < b->cap - b->n) {
			b->n += (size_t)k;
			return;
		}
		b->cap = (b->cap + (size_t)k + 1) * 2;
		b->p = xrealloc(b->p, b->cap);
		if (!b->n)
			b->p[0] = 0;
	}
}

static void native_text(struct sbuf *b, const struct sym_info *si, int mark)
{
	if (si->name)
		sb_add(b, "c:%s%s", si->name, mark ? "*" : "");
	else if (si->module) {
		const char *base = strrchr(si->module, '/');
		sb_add(b, "c:%s+0x%" PRIx64 "%s", base ? base + 1 : si->module, si->offset, mark ? "*" : "");
	} else
		sb_add(b, "c:[unknown]");
	if (si->file) {
		const char *base = strrchr(si->file, '/');
		sb_add(b, " (%s:%u)", base ? base + 1 : si->file, si->line);
	}
}

static void do_stack(struct stream *s, struct rec_stack *st)
{
	if (st->index >= s->nstacks) {
		uint32_t n = st->index + 1;
		s->stacks = xrealloc(s->stacks, n * sizeof(*s->stacks));
		memset(s->stacks + s->nstacks, 0, (n - s->nstacks) * sizeof(*s->stacks));
		s->nstacks = n;
	}
	struct stackinfo *si = &s->stacks[st->index];
	si->flags = st->flags;
	si->has_native = st->nnative > 0;
	struct sym_info *syms = xrealloc(NULL, (st->nnative + 1) * sizeof(*syms));
	struct merge_native *mn = xrealloc(NULL, (st->nnative + 1) * sizeof(*mn));
	uint32_t *pyflags = xrealloc(NULL, (st->npy + 1) * sizeof(*pyflags));
	for (uint32_t i = 0; i < st->nnative; i++) {
		sym_lookup(s->space, st->native[i], i > 0, &syms[i]);
		mn[i].eval = syms[i].eval;
		mn[i].interpreter = syms[i].interpreter;
	}
	for (uint32_t i = 0; i < st->npy; i++)
		pyflags[i] = st->py[i].flags;
	struct merge_frame *mf = xrealloc(NULL, (st->npy + st->nnative + 1) * sizeof(*mf));
	uint32_t n;
	struct merge_stats ms;
	if (G.raw) {
		n = 0;
		for (uint32_t i = 0; i < st->nnative; i++)
			mf[n++] = (struct merge_frame){ MERGE_NATIVE, i };
		if (!st->nnative)
			for (uint32_t i = 0; i < st->npy; i++)
				mf[n++] = (struct merge_frame){ MERGE_PY, i };
		ms.mismatch = 0;
	} else {
		int complete = st->nnative && !(st->flags & (STACK_NATIVE_FAILED | STACK_NATIVE_TRUNCATED));
		n = merge_stack(pyflags, st->npy, mn, st->nnative, complete, G.keep, mf, &ms);
	}
	si->mismatch = ms.mismatch;
	struct sbuf b = { 0 };
	sb_add(&b, "%s", "");
	for (uint32_t k = n; k-- > 0;) {
		if (k + 1 != n)
			sb_add(&b, ";");
		if (mf[k].kind == MERGE_PY) {
			uint32_t c = st->py[mf[k].index].code;
			sb_add(&b, "py:%s", c < s->ncodes && s->codes[c].text ? s->codes[c].text : "?");
		} else {
			native_text(&b, &syms[mf[k].index], G.raw && syms[mf[k].index].eval);
		}
	}
	si->text = b.p;
	free(syms);
	free(mn);
	free(pyflags);
	free(mf);
}

static int on_record(void *ctx, struct reader_stream *rs, uint64_t type, struct rbuf *body)
{
	(void)ctx;
	struct stream *s = get_stream(rs->id);
	switch (type) {
	case REC_MODULE: {
		struct rec_module m;
		if (rec_get_module(body, &m) == 0) {
			sym_space_add(s->space, &m);
			rec_free_module(&m);
		}
		break;
	}
	case REC_CODE: {
		struct rec_code c;
		if (rec_get_code(body, &c))
			break;
		if (c.index >= s->ncodes) {
			uint32_t n = c.index + 1;
			s->codes = xrealloc(s->codes, n * sizeof(*s->codes));
			memset(s->codes + s->ncodes, 0, (n - s->ncodes) * sizeof(*s->codes));
			s->ncodes = n;
		}
		struct sbuf b = { 0 };
		const char *base = strrchr(c.filename, '/');
		sb_add(&b, "%s (%s:%u)", c.qualname, base ? base + 1 : c.filename, c.firstlineno);
		free(s->codes[c.index].text);
		s->codes[c.index].text = b.p;
		rec_free_code(&c);
		break;
	}
	case REC_STACK: {
		struct rec_stack st;
		if (rec_get_stack(body, &st) == 0) {
			do_stack(s, &st);
			rec_free_stack(&st);
		}
		break;
	}
	case REC_SAMPLE: {
		struct rec_sample smp;
		if (rec_get_sample(body, &smp) || smp.stack >= s->nstacks || !s->stacks[smp.stack].text)
			break;
		struct stackinfo *si = &s->stacks[smp.stack];
		G.samples += smp.weight;
		if (si->has_native)
			G.native += smp.weight;
		if (si->flags & STACK_NATIVE_FAILED)
			G.failed += smp.weight;
		if (si->flags & STACK_NATIVE_TRUNCATED)
			G.truncated += smp.weight;
		if (si->mismatch)
			G.mismatch += smp.weight;
		size_t i;
		for (i = 0; i < G.nouts; i++)
			if (!strcmp(G.outs[i].text, si->text))
				break;
		if (i == G.nouts) {
			if (G.nouts == G.capouts) {
				G.capouts = G.capouts ? G.capouts * 2 : 256;
				G.outs = xrealloc(G.outs, G.capouts * sizeof(*G.outs));
			}
			G.outs[G.nouts++] = (struct out){ si->text, 0 };
		}
		G.outs[i].count += smp.weight;
		break;
	}
	}
	return 0;
}

static int by_count(const void *a, const void *b)
{
	const struct out *x = a, *y = b;
	return x->count < y->count ? 1 : x->count > y->count ? -1 : strcmp(x->text, y->text);
}

int main(int argc, char **argv)
{
	const char *path = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--keep-interpreter"))
			G.keep = 1;
		else if (!strcmp(argv[i], "--raw"))
			G.raw = 1;
		else
			path = argv[i];
	}
	if (!path) {
		fprintf(stderr, "usage: nstacks [--keep-interpreter] [--raw] FILE\n");
		return 2;
	}
	char err[256];
	struct reader *r = reader_open(path, err, sizeof(err));
	if (!r) {
		fprintf(stderr, "nstacks: %s: %s\n", path, err);
		return 1;
	}
	G.sym = sym_new();
	if (reader_poll(r, 1, on_record, NULL, err, sizeof(err)) < 0) {
		fprintf(stderr, "nstacks: %s: %s\n", path, err);
		return 1;
	}
	reader_close(r);
	qsort(G.outs, G.nouts, sizeof(*G.outs), by_count);
	for (size_t i = 0; i < G.nouts; i++)
		printf("%s %" PRIu64 "\n", G.outs[i].text[0] ? G.outs[i].text : "[empty]", G.outs[i].count);
	printf("# samples=%" PRIu64 " native=%" PRIu64 " failed=%" PRIu64 " truncated=%" PRIu64 " mismatch=%" PRIu64 "\n",
	       G.samples, G.native, G.failed, G.truncated, G.mismatch);
	sym_free(G.sym);
	return 0;
}
