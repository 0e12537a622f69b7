/*
 * callgrind.c — `-f callgrind`: the Callgrind profile format (Valgrind's
 * "Callgrind Format Specification", version 1) that KCachegrind,
 * QCachegrind and callgrind_annotate read.
 *
 * What the file says (docs/costs.md explains it for users):
 *
 *   positions: line      every cost line starts with a source line number
 *   events: samples ...  one column per recorded event, event 0 first
 *   ob=  the object a function lives in: the Python interpreter for Python
 *        code, the module (shared object, executable, JIT image) for
 *        native and JIT code, "[strata]" for marker frames
 *   fl=  the function's source file ("???" when unknown)
 *   fn=  the function's qualified name
 *   LINE COSTS               self cost: samples whose innermost frame was
 *                            executing LINE of the function
 *   cob=/cfi=/cfn=, calls=N TARGET, LINE COSTS
 *                            a call from LINE to another function, with
 *                            its inclusive cost
 *
 * Inclusive cost is carried by the calls= lines only (that is how the
 * format works: readers take a function's inclusive cost from the calls
 * into it, or for a function nobody calls, from its self cost plus its
 * calls out). For those sums to count each sample once per function, as
 * `strata report` does, a call is written only where it enters the
 * outermost activation of the callee on the stack: a call into a function
 * that is already on the stack (recursion, direct or through other
 * functions) writes no calls= line, its cost being inside the outer call
 * already. Then, per sample, every function below the root has exactly
 * one incoming call, and each edge (caller, callee) is counted at most
 * once. For a function outside any recursion cycle, the calls into it add
 * up to its self cost plus its calls out; for a function in a cycle of
 * two or more functions that cannot hold for every member at once, and
 * the calls into it still give its true inclusive cost. The calls= count
 * is the number of samples that took that call (a sampling profiler does
 * not count calls).
 *
 * Names are compressed ("fn=(3) name" the first time, "fn=(3)" after), as
 * the spec allows, so every long path and name appears once. Functions are
 * written grouped by object and file. A function with no self cost on a
 * known line gets a zero-cost line at its first line: callgrind_annotate
 * cannot annotate a source file none of whose lines has a cost line.
 */
#include <stdlib.h>
#include <string.h>

#include "export.h"
#include "labels.h"
#include "lib/intern.h"

#ifndef STRATA_VERSION
#define STRATA_VERSION "dev"
#endif

/* One output function: pfuncs with the same object, file, name and first
 * line are one callgrind function. */
struct cgfunc {
	const char *ob, *fl, *name;
	uint32_t line;      /* first line (the target position of calls) */
	uint32_t ob_id, fl_id, fn_id; /* compression ids, 1-based */
	uint32_t dup;       /* name shared with another function of the same file */
};

/* A cost line to write: self cost (callee NONE) or a call. Costs live in a
 * separate array so that sorting moves 16-byte items. */
struct item {
	uint32_t func;      /* cgfunc, caller for calls */
	uint32_t line;
	uint32_t callee;    /* cgfunc, PNONE for self cost, DECL for a bare fn= */
	uint32_t idx;       /* into cost[] (× nevents) and count[] */
};

#define DECL (PNONE - 1) /* item callee: only declare the function (fn= line) */

struct cg {
	const struct profile *p;
	FILE *out;
	uint32_t ne;
	struct cgfunc *f;
	uint32_t nf;
	uint32_t *func_cg;  /* pfunc → cgfunc */
	/* Output buffer: fprintf per number would dominate on large profiles. */
	char *buf;
	size_t len;
	int err;
};

#define BUF_SIZE (1u << 16)

static void flush(struct cg *c)
{
	if (c->len && fwrite(c->buf, 1, c->len, c->out) != c->len)
		c->err = 1;
	c->len = 0;
}

static void put(struct cg *c, const char *s, size_t n)
{
	if (c->len + n > BUF_SIZE) {
		flush(c);
		if (n > BUF_SIZE) {
			if (fwrite(s, 1, n, c->out) != n)
				c->err = 1;
			return;
		}
	}
	memcpy(c->buf + c->len, s, n);
	c->len += n;
}

static void puts_(struct cg *c, const char *s) { put(c, s, strlen(s)); }

/* A name on one line: line breaks would end the record early. */
static void put_name(struct cg *c, const char *s)
{
	if (!*s) {
		puts_(c, "???");
		return;
	}
	for (const char *q = s; *q; q++) {
		char ch = *q == '\n' || *q == '\r' ? ' ' : *q;
		put(c, &ch, 1);
	}
}

static void put_u64(struct cg *c, uint64_t v)
{
	char tmp[24];
	int i = sizeof(tmp);
	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	put(c, tmp + i, sizeof(tmp) - (size_t)i);
}

/* "KEY=(ID) name" the first time an id is used, "KEY=(ID)" after. */
static void put_spec(struct cg *c, const char *key, uint32_t id, const char *name, uint8_t *defined)
{
	puts_(c, key);
	puts_(c, "=(");
	put_u64(c, id);
	put(c, ")", 1);
	if (!defined[id]) {
		defined[id] = 1;
		put(c, " ", 1);
		put_name(c, name);
	}
	put(c, "\n", 1);
}

static void put_costs(struct cg *c, const uint64_t *v)
{
	for (uint32_t e = 0; e < c->ne; e++) {
		put(c, " ", 1);
		put_u64(c, v[e]);
	}
	put(c, "\n", 1);
}

/* ---- functions ------------------------------------------------------------ */

static const char *func_ob(const struct profile *p, const struct pfunc *fn, const char *python_ob)
{
	switch (fn->kind) {
	case PK_PYTHON: return python_ob;
	case PK_NATIVE: return fn->module && *fn->module ? fn->module : "???";
	case PK_JIT: return fn->module && *fn->module ? fn->module : "[jit]";
	default: return "[strata]";
	}
}

static int cgf_cmp(const void *x, const void *y)
{
	const struct cgfunc *a = x, *b = y;
	int r = strcmp(a->ob, b->ob);
	if (!r)
		r = strcmp(a->fl, b->fl);
	if (!r)
		r = strcmp(a->name, b->name);
	if (!r && a->line != b->line)
		r = a->line < b->line ? -1 : 1;
	return r;
}

/* Builds the cgfunc table, sorted by object, file, name and line (the
 * output order), and the pfunc → cgfunc map. */
static int build_funcs(struct cg *c)
{
	const struct profile *p = c->p;
	const char *pyob = python_object(p);
	struct cgfunc *all = malloc((p->nfuncs ? p->nfuncs : 1) * sizeof(*all));
	c->func_cg = malloc((p->nfuncs ? p->nfuncs : 1) * sizeof(*c->func_cg));
	if (!all || !c->func_cg) {
		free(all);
		return -1;
	}
	for (uint32_t i = 0; i < p->nfuncs; i++) {
		const struct pfunc *fn = &p->funcs[i];
		all[i] = (struct cgfunc){
			.ob = func_ob(p, fn, pyob),
			.fl = fn->file && *fn->file ? fn->file : "???",
			.name = fn->name && *fn->name ? fn->name : "???",
			.line = fn->line,
			/* The original index rides in fn_id until the sort is done. */
			.fn_id = i,
		};
	}
	qsort(all, p->nfuncs, sizeof(*all), cgf_cmp);
	/* Merge equal (ob, fl, name, line); mark names shared by different
	 * functions of one file so that they get told apart. */
	uint32_t n = 0;
	for (uint32_t i = 0; i < p->nfuncs; i++) {
		uint32_t orig = all[i].fn_id;
		if (n && !cgf_cmp(&all[n - 1], &all[i])) {
			c->func_cg[orig] = n - 1;
			continue;
		}
		if (n && !strcmp(all[n - 1].ob, all[i].ob) && !strcmp(all[n - 1].fl, all[i].fl) &&
		    !strcmp(all[n - 1].name, all[i].name)) {
			all[n - 1].dup = 1;
			all[i].dup = 1;
		}
		all[n] = all[i];
		c->func_cg[orig] = n++;
	}
	/* Compression ids, in output order. */
	uint32_t ob_id = 0, fl_id = 0;
	for (uint32_t i = 0; i < n; i++) {
		all[i].fn_id = i + 1;
		if (!i || strcmp(all[i].ob, all[i - 1].ob))
			ob_id++;
		/* The same file under two objects (rare) gets one id per object:
		 * ids only need to be unique per name. */
		if (!i || strcmp(all[i].fl, all[i - 1].fl) || strcmp(all[i].ob, all[i - 1].ob))
			fl_id++;
		all[i].ob_id = ob_id;
		all[i].fl_id = fl_id;
	}
	c->f = all;
	c->nf = n;
	return 0;
}

/* ---- call edges ------------------------------------------------------------ */

/* Marks each node that is the outermost occurrence of its function on its
 * path and has a caller: the calls that get a calls= line. A depth-first
 * walk keeps, per function, how often it is open on the current path. */
static int mark_calls(struct cg *c, uint8_t *first)
{
	const struct profile *p = c->p;
	uint32_t nn = p->nnodes;
	int rc = -1;
	uint32_t *nchild = calloc((size_t)nn + 1, sizeof(*nchild));
	uint32_t *child = malloc((size_t)nn * sizeof(*child));
	uint32_t *stack = malloc((size_t)nn * sizeof(*stack));
	uint32_t *fill = malloc((size_t)nn * sizeof(*fill));
	uint32_t *open = calloc((size_t)c->nf + 1, sizeof(*open));
	if (!nchild || !child || !stack || !fill || !open)
		goto done;
	/* Children lists (CSR: the children of n are child[nchild[n] ..
	 * nchild[n + 1])). */
	for (uint32_t n = 1; n < nn; n++)
		nchild[p->nodes[n].parent + 1]++;
	for (uint32_t n = 0; n < nn; n++)
		nchild[n + 1] += nchild[n];
	memcpy(fill, nchild, (size_t)nn * sizeof(*fill));
	for (uint32_t n = 1; n < nn; n++)
		child[fill[p->nodes[n].parent]++] = n;
	/* Iterative DFS: an entry becomes an exit marker (high bit) when it
	 * is first seen, and is popped again after its subtree. The stack
	 * never holds more than one entry per node. */
	uint32_t sp = 0;
	for (uint32_t k = nchild[0]; k < nchild[1]; k++)
		stack[sp++] = child[k];
	while (sp) {
		uint32_t top = stack[sp - 1];
		uint32_t n = top & 0x7fffffffu;
		uint32_t fn = c->func_cg[p->frames[p->nodes[n].frame].func];
		if (top & 0x80000000u) {
			sp--;
			open[fn]--;
			continue;
		}
		stack[sp - 1] = n | 0x80000000u;
		first[n] = open[fn]++ == 0 && p->nodes[n].parent != 0;
		for (uint32_t k = nchild[n]; k < nchild[n + 1]; k++)
			stack[sp++] = child[k];
	}
	rc = 0;
done:
	free(nchild);
	free(child);
	free(stack);
	free(fill);
	free(open);
	return rc;
}

/* ---- items ------------------------------------------------------------------ */

static int item_cmp(const void *x, const void *y)
{
	const struct item *a = x, *b = y;
	if (a->func != b->func)
		return a->func < b->func ? -1 : 1;
	/* Self cost before calls: a reader that shows them in file order sees
	 * a function's own lines first. */
	int ac = a->callee != PNONE && a->callee != DECL, bc = b->callee != PNONE && b->callee != DECL;
	if (ac != bc)
		return ac - bc;
	if (a->line != b->line)
		return a->line < b->line ? -1 : 1;
	if (a->callee != b->callee)
		return a->callee < b->callee ? -1 : 1;
	return 0;
}

static void event_name(const char *in, char *out, size_t n)
{
	/* Callgrind event names are letters, digits and '_' (KCachegrind
	 * stops at anything else), starting with a letter. */
	size_t o = 0;
	if (!((*in >= 'a' && *in <= 'z') || (*in >= 'A' && *in <= 'Z')) && o + 1 < n)
		out[o++] = 'e';
	for (const char *s = in; *s && o + 1 < n; s++) {
		char ch = *s;
		int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
		out[o++] = ok ? ch : '_';
	}
	out[o] = 0;
}

static void header(struct cg *c, const struct export_opts *o, const uint64_t *totals)
{
	const struct profile *p = c->p;
	puts_(c, "# callgrind format\nversion: 1\ncreator: strata " STRATA_VERSION "\n");
	uint32_t nproc = 0, pid = 0;
	for (uint32_t i = 0; i < p->nprocs; i++)
		if (p->procs[i].samples && !(p->procs[i].flags & PROC_UNSUPPORTED)) {
			nproc++;
			pid = p->procs[i].pid;
		}
	if (nproc == 1) {
		puts_(c, "pid: ");
		put_u64(c, pid);
		put(c, "\n", 1);
	}
	if (p->command && *p->command) {
		puts_(c, "cmd: ");
		put_name(c, p->command);
		put(c, "\n", 1);
	}
	char line[256];
	snprintf(line, sizeof(line), "desc: Profiler: strata, %s mode, %u Hz (one sample = %.3g ms)\n",
		 p->mode == MODE_WALL ? "wall" : "cpu", p->rate_hz, (double)p->period_ns / 1e6);
	puts_(c, line);
	if (o->source) {
		puts_(c, "desc: Profile: ");
		put_name(c, o->source);
		put(c, "\n", 1);
	}
	if (o->exclude_idle)
		puts_(c, "desc: Samples: idle samples left out\n");
	puts_(c, "positions: line\n");
	/* Short names must be unique: a clash after cleaning gets a suffix. */
	char (*names)[64] = calloc(c->ne, sizeof(*names));
	for (uint32_t e = 0; names && e < c->ne; e++) {
		char base[48];
		event_name(p->event_names[e], base, sizeof(base));
		snprintf(names[e], sizeof(names[e]), "%s", base);
		for (uint32_t k = 0; k < e; k++)
			if (!strcmp(names[k], names[e])) {
				snprintf(names[e], sizeof(names[e]), "%s_%u", base, e);
				break;
			}
		puts_(c, "event: ");
		puts_(c, names[e]);
		puts_(c, " : ");
		if (e == 0)
			puts_(c, p->mode == MODE_WALL ? "Samples (wall-clock periods)" : "Samples (CPU-time periods)");
		else
			put_name(c, p->event_names[e]);
		put(c, "\n", 1);
	}
	puts_(c, "events:");
	for (uint32_t e = 0; e < c->ne; e++) {
		put(c, " ", 1);
		if (names)
			puts_(c, names[e]);
		else
			put_u64(c, e);
	}
	put(c, "\n", 1);
	free(names);
	puts_(c, "summary:");
	put_costs(c, totals);
	put(c, "\n", 1);
}

/* Makes room for n items (and their cost rows, zeroed). */
static int grow_items(struct item **items, uint64_t **cost, uint64_t **count, size_t *cap, size_t n, uint32_t ne)
{
	if (n <= *cap)
		return 0;
	size_t nc = *cap ? *cap : 1024;
	while (nc < n)
		nc *= 2;
	struct item *ni = realloc(*items, nc * sizeof(*ni));
	if (!ni)
		return -1;
	*items = ni;
	uint64_t *c = realloc(*cost, nc * ne * sizeof(*c));
	if (!c)
		return -1;
	*cost = c;
	memset(c + *cap * ne, 0, (nc - *cap) * ne * sizeof(*c));
	uint64_t *k = realloc(*count, nc * sizeof(*k));
	if (!k)
		return -1;
	*count = k;
	memset(k + *cap, 0, (nc - *cap) * sizeof(*k));
	*cap = nc;
	return 0;
}

int export_callgrind(const struct profile *p, FILE *out, const struct export_opts *o, char *err, size_t errlen)
{
	struct cg c = { .p = p, .out = out, .ne = p->nevents };
	const uint32_t ne = p->nevents, nn = p->nnodes;
	int rc = -1;
	uint64_t *node_cost = calloc((size_t)nn * ne + 1, sizeof(uint64_t));
	uint64_t *node_n = calloc((size_t)nn + 1, sizeof(uint64_t));
	uint8_t *first = calloc((size_t)nn + 1, 1);
	uint64_t *totals = calloc(ne, sizeof(uint64_t));
	struct item *items = NULL;
	uint64_t *icost = NULL, *icount = NULL;
	uint32_t *frame_item = NULL;
	struct u64map calls = { 0 };
	uint8_t *def_ob = NULL, *def_fl = NULL, *def_fn = NULL;
	c.buf = malloc(BUF_SIZE);
	if (!node_cost || !node_n || !first || !totals || !c.buf || build_funcs(&c) || mark_calls(&c, first))
		goto oom;

	/* Samples onto their leaf nodes. */
	for (uint64_t i = 0; i < p->nsamples; i++) {
		const struct psample *s = &p->samples[i];
		if (o->exclude_idle && (s->flags & PS_IDLE))
			continue;
		const uint64_t *v = p->values + i * ne;
		uint64_t *nc = node_cost + (size_t)s->node * ne;
		for (uint32_t e = 0; e < ne; e++) {
			nc[e] += v[e];
			totals[e] += v[e];
		}
		node_n[s->node]++;
	}

	/* Items, aggregated as they are made so that the sort handles
	 * distinct lines and calls, not nodes: self cost per frame, call cost
	 * per (caller's frame, callee). The last item slot of each function
	 * and a zero cost row are kept free for the fillers below. */
	size_t k = 0, cap = 0;
	frame_item = malloc(((size_t)p->nframes + 1) * sizeof(*frame_item));
	if (!frame_item)
		goto oom;
	memset(frame_item, 0xff, ((size_t)p->nframes + 1) * sizeof(*frame_item));
	for (uint32_t n = 1; n < nn; n++) {
		if (!node_n[n])
			continue;
		uint32_t f = p->nodes[n].frame;
		if (frame_item[f] == PNONE) {
			if (grow_items(&items, &icost, &icount, &cap, k + 1, ne))
				goto oom;
			const struct pframe *fr = &p->frames[f];
			items[k] = (struct item){ c.func_cg[fr->func], fr->line, PNONE, (uint32_t)k };
			frame_item[f] = (uint32_t)k++;
		}
		uint64_t *ic = icost + (size_t)frame_item[f] * ne, *nc = node_cost + (size_t)n * ne;
		for (uint32_t e = 0; e < ne; e++)
			ic[e] += nc[e];
		icount[frame_item[f]] += node_n[n];
	}
	/* Subtree sums, children first (a child's index is above its
	 * parent's); a marked node's subtree is its call's inclusive cost. */
	for (uint32_t n = nn; n-- > 1;) {
		uint32_t par = p->nodes[n].parent;
		if (first[n] && node_n[n]) {
			uint32_t pf = p->nodes[par].frame;
			uint32_t callee = c.func_cg[p->frames[p->nodes[n].frame].func];
			uint64_t key = (uint64_t)pf << 32 | callee;
			uint32_t it = u64map_get(&calls, key);
			if (it == MAP_NONE) {
				if (grow_items(&items, &icost, &icount, &cap, k + 1, ne))
					goto oom;
				const struct pframe *cf = &p->frames[pf];
				items[k] = (struct item){ c.func_cg[cf->func], cf->line, callee, (uint32_t)k };
				it = (uint32_t)k++;
				if (u64map_put(&calls, key, it))
					goto oom;
			}
			uint64_t *ic = icost + (size_t)it * ne, *nc = node_cost + (size_t)n * ne;
			for (uint32_t e = 0; e < ne; e++)
				ic[e] += nc[e];
			icount[it] += node_n[n];
		}
		if (par != 0 && par != PNONE) {
			uint64_t *pc = node_cost + (size_t)par * ne, *nc = node_cost + (size_t)n * ne;
			for (uint32_t e = 0; e < ne; e++)
				pc[e] += nc[e];
			node_n[par] += node_n[n];
		}
	}
	/* The zero cost row, and room for one filler per function. */
	const size_t zero = k;
	if (grow_items(&items, &icost, &icount, &cap, k + 1 + c.nf, ne))
		goto oom;
	/* Fillers. callgrind_annotate cannot annotate a source file none of
	 * whose lines has self cost (Perl warnings, then nothing): a function
	 * without self cost on a known line gets a zero-cost line at its
	 * first line. A function that is only ever called into and has no
	 * known line (a native cycle member) still gets an empty fn= block, so
	 * that readers learn its object. */
	uint8_t *has_line = calloc((size_t)c.nf + 1, 1), *has_block = calloc((size_t)c.nf + 1, 1);
	uint8_t *called = calloc((size_t)c.nf + 1, 1);
	if (!has_line || !has_block || !called) {
		free(has_line);
		free(has_block);
		free(called);
		goto oom;
	}
	for (size_t i = 0; i < k; i++) {
		has_block[items[i].func] = 1;
		if (items[i].callee != PNONE)
			called[items[i].callee] = 1;
		else if (items[i].line)
			has_line[items[i].func] = 1;
	}
	for (uint32_t f = 0; f < c.nf; f++) {
		if (!has_block[f] && !called[f])
			continue; /* not in the output at all */
		if (!has_line[f] && c.f[f].line && strcmp(c.f[f].fl, "???"))
			items[k++] = (struct item){ f, c.f[f].line, PNONE, (uint32_t)zero };
		else if (!has_block[f])
			items[k++] = (struct item){ f, 0, DECL, (uint32_t)zero };
	}
	free(has_line);
	free(has_block);
	free(called);
	size_t nitems = k;
	qsort(items, nitems, sizeof(*items), item_cmp);

	def_ob = calloc((size_t)c.nf + 2, 1);
	def_fl = calloc((size_t)c.nf + 2, 1);
	def_fn = calloc((size_t)c.nf + 2, 1);
	if (!def_ob || !def_fl || !def_fn)
		goto oom;
	header(&c, o, totals);

	uint32_t cur_func = PNONE, cur_ob = 0, cur_fl = 0;
	uint64_t *sum = calloc(ne, sizeof(uint64_t));
	if (!sum)
		goto oom;
	char namebuf[4096];
	for (size_t i = 0; i < nitems;) {
		/* Items with the same key are summed into one line. */
		size_t j = i;
		memset(sum, 0, ne * sizeof(uint64_t));
		uint64_t count = 0;
		for (; j < nitems && !item_cmp(&items[i], &items[j]) && items[j].callee != DECL; j++) {
			const uint64_t *v = icost + (size_t)items[j].idx * ne;
			for (uint32_t e = 0; e < ne; e++)
				sum[e] += v[e];
			count += icount[items[j].idx];
		}
		const struct item *it = &items[i];
		i = j > i ? j : i + 1;
		const struct cgfunc *f = &c.f[it->func];
		if (it->func != cur_func) {
			put(&c, "\n", 1);
			if (f->ob_id != cur_ob)
				put_spec(&c, "ob", f->ob_id, f->ob, def_ob);
			if (f->fl_id != cur_fl)
				put_spec(&c, "fl", f->fl_id, f->fl, def_fl);
			cur_ob = f->ob_id;
			cur_fl = f->fl_id;
			cur_func = it->func;
			const char *nm = f->name;
			if (f->dup) {
				snprintf(namebuf, sizeof(namebuf), "%s (line %u)", f->name, f->line);
				nm = namebuf;
			}
			put_spec(&c, "fn", f->fn_id, nm, def_fn);
		}
		if (it->callee == DECL)
			continue;
		if (it->callee != PNONE) {
			const struct cgfunc *g = &c.f[it->callee];
			if (g->ob_id != cur_ob)
				put_spec(&c, "cob", g->ob_id, g->ob, def_ob);
			if (g->fl_id != cur_fl)
				put_spec(&c, "cfi", g->fl_id, g->fl, def_fl);
			const char *nm = g->name;
			if (g->dup) {
				snprintf(namebuf, sizeof(namebuf), "%s (line %u)", g->name, g->line);
				nm = namebuf;
			}
			put_spec(&c, "cfn", g->fn_id, nm, def_fn);
			puts_(&c, "calls=");
			put_u64(&c, count);
			put(&c, " ", 1);
			put_u64(&c, g->line);
			put(&c, "\n", 1);
		}
		put_u64(&c, it->line);
		put_costs(&c, sum);
	}
	free(sum);
	puts_(&c, "\ntotals:");
	put_costs(&c, totals);
	flush(&c);
	if (c.err) {
		snprintf(err, errlen, "write error");
		goto done;
	}
	rc = 0;
	goto done;
oom:
	snprintf(err, errlen, "out of memory");
done:
	free(node_cost);
	free(node_n);
	free(first);
	free(totals);
	free(items);
	free(icost);
	free(icount);
	free(frame_item);
	u64map_free(&calls);
	free(def_ob);
	free(def_fl);
	free(def_fn);
	free(c.f);
	free(c.func_cg);
	free(c.buf);
	return rc;
}
