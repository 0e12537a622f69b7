/*
 * gecko.c — `-f gecko`: a profile for the Firefox Profiler
 * (profiler.firefox.com, "Load a profile from file"), in the Gecko
 * profile format.
 *
 * Why the Gecko format and not the profiler's "processed" format: Gecko is
 * the format Firefox itself writes, the profiler's primary input, and every
 * version of it is upgraded on load (gecko-profile-versioning), so a file
 * written today keeps loading; Linux perf's converter writes it too. The
 * processed format is the profiler's in-memory layout and changes often
 * (tables moved into a shared section, new column encodings), so a writer
 * of it chases a moving target. What the Gecko format costs: function
 * names, files and libraries travel in one "location" string that the
 * importer parses, so each is written in exactly the form it parses —
 *
 *   Python (and JIT code with a source file)   "qualname (file:firstline)"
 *                                              a JS-like function: its file
 *                                              and line show in the profiler
 *   native (and JIT code without one)          "symbol (in module)"
 *   synthetic                                  "[no Python frame]", a label
 *
 * — and samples carry no weight, so a sample of weight w (a timer overrun)
 * is written w times, spread over the periods it stands for.
 *
 * Each model frame is a frame-table row with its line, and a category by
 * kind: Python (yellow), Native (blue), JIT (green), Other (grey), plus
 * Idle: in wall mode a sample of a blocked thread gets an "[idle]" leaf in
 * the Idle category, which the profiler leaves out of CPU views. Every
 * profiled thread is one thread (grouped by pid into processes, named by
 * the process's command), with sample times in milliseconds; so is every
 * asyncio task ("task NAME", in its loop's process), with the task's
 * samples running and waiting, a thread then holding only its own samples
 * (not the waiting tasks' the helper attributes to it: docs/async.md).
 */
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "labels.h"

/* Gecko format version written: the frame table without "optimizations"
 * (27), markers with start/end/phase; newer profilers upgrade it. */
#define GECKO_VERSION 27
/* A sample repeated more often than this is written this many times. */
#define MAX_REPEAT 1000

enum { CAT_OTHER, CAT_IDLE, CAT_PYTHON, CAT_NATIVE, CAT_JIT };

static const char categories[] =
	"[{\"name\":\"Other\",\"color\":\"grey\",\"subcategories\":[\"Other\"]},"
	"{\"name\":\"Idle\",\"color\":\"transparent\",\"subcategories\":[\"Other\"]},"
	"{\"name\":\"Python\",\"color\":\"yellow\",\"subcategories\":[\"Other\"]},"
	"{\"name\":\"Native\",\"color\":\"blue\",\"subcategories\":[\"Other\"]},"
	"{\"name\":\"JIT\",\"color\":\"green\",\"subcategories\":[\"Other\"]}]";

static int kind_category(int kind)
{
	switch (kind) {
	case PK_PYTHON: return CAT_PYTHON;
	case PK_NATIVE: return CAT_NATIVE;
	case PK_JIT: return CAT_JIT;
	default: return CAT_OTHER;
	}
}

/* The location string of frame f, in a form the importer parses back into
 * the same function name, file or library (see the top of the file). */
static void location(const struct profile *p, uint32_t f, char *buf, size_t n)
{
	const struct pfunc *fn = &p->funcs[p->frames[f].func];
	const char *file = fn->file && *fn->file ? fn->file : NULL;
	if (fn->kind == PK_OTHER) {
		snprintf(buf, n, "%s", fn->name);
	} else if (file && fn->kind != PK_NATIVE) {
		snprintf(buf, n, "%s (%s:%u)", fn->name, file, fn->line);
	} else if (fn->module || file) {
		/* "(in LIB)" ends at the first ')': keep the library name clear of one. */
		char lib[256];
		snprintf(lib, sizeof(lib), "%s", path_base(fn->module ? fn->module : file));
		for (char *c = lib; *c; c++)
			if (*c == ')')
				*c = ']';
		snprintf(buf, n, "%s (in %s)", fn->name, lib);
	} else {
		snprintf(buf, n, "%s", fn->name);
	}
}

struct gecko {
	const struct profile *p;
	struct ob *b;
	struct strcache loc;      /* per model frame: JSON string of its location */
	uint32_t *mark;           /* per node: thread stamp (t + 1) when used by thread t */
	uint32_t *stack_of;       /* per node: dense stack index in the current thread */
	uint32_t *idle_of;        /* per node: dense index of its "[idle]" child, or PNONE */
	uint32_t *frame_of;       /* per model frame: dense frame index in the current thread */
	uint32_t *fmark;          /* per model frame: thread stamp */
	uint32_t *nodes;          /* used nodes of the current thread */
	uint32_t *frames;         /* used model frames of the current thread, dense order */
	uint32_t *str_of;         /* per function: string index in the current thread */
	uint32_t *smark;          /* per function: thread stamp */
	uint32_t *strs;           /* functions in string order */
	uint32_t *chain;          /* scratch: a leaf's unnumbered ancestors */
};

static int write_thread(struct gecko *g, uint32_t t, const struct thread_samples *ts, const struct export_opts *o,
			uint64_t base)
{
	const struct profile *p = g->p;
	struct ob *b = g->b;
	/* A track: a thread, or an asyncio task (shown as a thread of the
	 * process of its loop's thread, living from its first sample to its
	 * last). */
	struct pthread_info task_ti;
	const struct pthread_info *ti = t < p->nthreads ? &p->threads[t] : &task_ti;
	char task_name[300];
	if (t >= p->nthreads) {
		memset(&task_ti, 0, sizeof(task_ti));
		uint64_t t0, t1;
		task_track(p, ts, t, task_name, sizeof(task_name), &task_ti.process, &t0, &t1);
		task_ti.name = task_name;
		task_ti.pid = task_ti.tid = p->procs[task_ti.process].pid;
		task_ti.start_ns = t0;
		task_ti.end_ns = t1;
	}
	uint32_t stamp = t + 1, nn = 0, nf = 0, ns = 0;
	int any_idle = 0;

	/* Nodes this thread's samples use, and their ancestors, numbered so
	 * that a parent comes before its children (the stack table requires
	 * it): a leaf's unnumbered ancestors are collected, then numbered from
	 * the top down. */
	for (uint64_t k = ts->start[t]; k < ts->start[t + 1]; k++) {
		const struct psample *s = &p->samples[ts->idx[k]];
		if (s->flags & PS_IDLE)
			any_idle = 1;
		uint32_t depth = 0;
		for (uint32_t m = s->node; m != 0 && m < p->nnodes && g->mark[m] != stamp; m = p->nodes[m].parent) {
			g->mark[m] = stamp;
			g->chain[depth++] = m;
		}
		while (depth-- > 0) {
			uint32_t m = g->chain[depth], f = p->nodes[m].frame;
			g->stack_of[m] = nn;
			g->idle_of[m] = PNONE;
			g->nodes[nn++] = m;
			if (g->fmark[f] != stamp) {
				g->fmark[f] = stamp;
				g->frame_of[f] = nf;
				g->frames[nf++] = f;
				/* One location string per function: its frames share it. */
				uint32_t fu = p->frames[f].func;
				if (g->smark[fu] != stamp) {
					g->smark[fu] = stamp;
					g->str_of[fu] = ns;
					g->strs[ns++] = f;
				}
			}
		}
	}
	uint32_t idle_frame = nf; /* the "[idle]" frame, when there are idle samples */

	char name[600];
	ob_puts(b, "{\"name\":");
	ob_json_str(b, ti->name && *ti->name ? ti->name : "thread");
	ob_puts(b, ",\"processType\":\"default\",\"processName\":");
	process_name(p, ti->process, 1, name, sizeof(name));
	ob_json_str(b, name);
	ob_puts(b, ",\"pid\":");
	ob_u64(b, ti->pid);
	ob_puts(b, ",\"tid\":");
	ob_u64(b, ti->tid);
	ob_puts(b, ",\"registerTime\":");
	ob_ns_as_ms(b, ti->start_ns > base ? ti->start_ns - base : 0);
	ob_puts(b, ",\"unregisterTime\":");
	if (ti->end_ns > base)
		ob_ns_as_ms(b, ti->end_ns - base);
	else
		ob_puts(b, "null");
	ob_puts(b, ",\n\"markers\":{\"schema\":{\"name\":0,\"startTime\":1,\"endTime\":2,\"phase\":3,\"category\":4,"
		   "\"data\":5},\"data\":[]},\n");

	/* Strings: the location of each function, then "[idle]". */
	ob_puts(b, "\"stringTable\":[");
	for (uint32_t k = 0; k < ns; k++) {
		if (k)
			ob_putc(b, ',');
		ob_write(b, g->loc.s[g->strs[k]], g->loc.len[g->strs[k]]);
	}
	if (any_idle)
		ob_puts(b, ns ? ",\"[idle]\"" : "\"[idle]\"");
	ob_puts(b, "],\n\"frameTable\":{\"schema\":{\"location\":0,\"relevantForJS\":1,\"innerWindowID\":2,"
		   "\"implementation\":3,\"line\":4,\"column\":5,\"category\":6,\"subcategory\":7},\"data\":[");
	for (uint32_t k = 0; k < nf; k++) {
		const struct pframe *fr = &p->frames[g->frames[k]];
		int kind = p->funcs[fr->func].kind;
		ob_puts(b, k ? ",\n[" : "\n[");
		ob_u64(b, g->str_of[fr->func]);
		/* Labels other than Python's stay visible in "JS only" (Python) stacks. */
		ob_puts(b, kind == PK_OTHER ? ",true,null,null," : ",false,null,null,");
		if (fr->line)
			ob_u64(b, fr->line);
		else
			ob_puts(b, "null");
		ob_puts(b, ",null,");
		ob_u64(b, (uint64_t)kind_category(kind));
		ob_puts(b, ",0]");
	}
	if (any_idle) {
		ob_puts(b, nf ? ",\n[" : "\n[");
		ob_u64(b, ns);
		ob_puts(b, ",false,null,null,null,null,1,0]");
	}
	ob_puts(b, "]},\n\"stackTable\":{\"schema\":{\"prefix\":0,\"frame\":1},\"data\":[");
	for (uint32_t k = 0; k < nn; k++) {
		const struct pnode *nd = &p->nodes[g->nodes[k]];
		ob_puts(b, k ? ",[" : "[");
		if (nd->parent == 0 || nd->parent == PNONE)
			ob_puts(b, "null");
		else
			ob_u64(b, g->stack_of[nd->parent]);
		ob_putc(b, ',');
		ob_u64(b, g->frame_of[nd->frame]);
		ob_putc(b, ']');
	}
	uint32_t nstacks = nn;
	if (any_idle) {
		/* One "[idle]" stack under each node that has idle samples. */
		for (uint64_t k = ts->start[t]; k < ts->start[t + 1]; k++) {
			const struct psample *s = &p->samples[ts->idx[k]];
			if (!(s->flags & PS_IDLE) || s->node == 0 || s->node >= p->nnodes ||
			    g->idle_of[s->node] != PNONE)
				continue;
			g->idle_of[s->node] = nstacks++;
			ob_puts(b, nstacks > 1 ? ",[" : "[");
			ob_u64(b, g->stack_of[s->node]);
			ob_putc(b, ',');
			ob_u64(b, idle_frame);
			ob_putc(b, ']');
		}
	}
	ob_puts(b, "]},\n\"samples\":{\"schema\":{\"stack\":0,\"time\":1,\"eventDelay\":2},\"data\":[");
	uint64_t prev = base, period = p->period_ns;
	int first = 1;
	for (uint64_t k = ts->start[t]; k < ts->start[t + 1]; k++) {
		uint64_t i = ts->idx[k];
		const struct psample *s = &p->samples[i];
		uint64_t w = profile_value(p, i, 0);
		if (!w)
			continue;
		if (w > MAX_REPEAT)
			w = MAX_REPEAT;
		uint32_t st = PNONE;
		if (s->node != 0 && s->node < p->nnodes)
			st = (s->flags & PS_IDLE) ? g->idle_of[s->node] : g->stack_of[s->node];
		/* The w periods this sample stands for end at its time; none
		 * reaches back before the previous sample. */
		for (uint64_t r = w; r-- > 0;) {
			uint64_t when = s->time_ns > r * period ? s->time_ns - r * period : 0;
			if (when < prev)
				when = prev;
			prev = when;
			ob_puts(b, first ? "\n[" : ",\n[");
			first = 0;
			if (st == PNONE)
				ob_puts(b, "null");
			else
				ob_u64(b, st);
			ob_putc(b, ',');
			ob_ns_as_ms(b, when - base);
			ob_puts(b, ",0]");
		}
	}
	ob_puts(b, "]}}");
	return 0;
}

static int export_gecko(const struct profile *p, FILE *out, const struct export_opts *o, char *err, size_t errlen)
{
	struct thread_samples ts = { 0 };
	struct gecko g = { .p = p };
	int rc = -1;
	if (o->event != 0) {
		snprintf(err, errlen, "the Firefox Profiler format carries samples only (leave out -e; pprof and "
				      "callgrind carry every event)");
		return -1;
	}
	size_t nn = p->nnodes ? p->nnodes : 1, nf = p->nframes ? p->nframes : 1;
	g.b = malloc(sizeof(*g.b));
	g.mark = calloc(nn, sizeof(*g.mark));
	g.stack_of = malloc(nn * sizeof(*g.stack_of));
	g.idle_of = malloc(nn * sizeof(*g.idle_of));
	g.nodes = malloc(nn * sizeof(*g.nodes));
	g.frame_of = malloc(nf * sizeof(*g.frame_of));
	g.fmark = calloc(nf, sizeof(*g.fmark));
	g.frames = malloc(nf * sizeof(*g.frames));
	size_t nfu = p->nfuncs ? p->nfuncs : 1;
	g.str_of = malloc(nfu * sizeof(*g.str_of));
	g.smark = calloc(nfu, sizeof(*g.smark));
	g.strs = malloc(nf * sizeof(*g.strs));
	g.chain = malloc(nn * sizeof(*g.chain));
	if (!g.chain || !g.str_of || !g.smark || !g.strs || !g.b || !g.mark || !g.stack_of || !g.idle_of || !g.nodes || !g.frame_of || !g.fmark || !g.frames ||
	    tracks_build(&ts, p, o, 1) || strcache_init(&g.loc, p->nframes)) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}
	for (uint32_t f = 0; f < p->nframes; f++) {
		char buf[1200];
		location(p, f, buf, sizeof(buf));
		if (!(g.loc.s[f] = escape_dup(buf, 'j', &g.loc.len[f]))) {
			snprintf(err, errlen, "out of memory");
			goto done;
		}
	}
	/* Time zero: the session start, or the earliest period a sample
	 * stands for if that is earlier. */
	uint64_t base = p->start_ns;
	for (uint64_t i = 0; i < p->nsamples; i++) {
		uint64_t w = profile_value(p, i, 0);
		if (w > MAX_REPEAT)
			w = MAX_REPEAT;
		uint64_t back = (w ? w - 1 : 0) * p->period_ns, t = p->samples[i].time_ns;
		uint64_t s0 = t > back ? t - back : 0;
		if (s0 < base)
			base = s0;
	}
	uint64_t start_epoch_ns = p->start_realtime_ns > p->start_ns - base ? p->start_realtime_ns - (p->start_ns - base) : 0;

	struct ob *b = g.b;
	ob_init(b, out);
	ob_puts(b, "{\"meta\":{\"version\":");
	ob_u64(b, GECKO_VERSION);
	ob_puts(b, ",\"startTime\":");
	ob_ns_as_ms(b, start_epoch_ns);
	ob_puts(b, ",\"shutdownTime\":null,\"interval\":");
	ob_ns_as_ms(b, p->period_ns ? p->period_ns : 1000000);
	ob_puts(b, ",\"stackwalk\":1,\"debug\":0,\"gcpoison\":0,\"asyncstack\":0,\"processType\":0,"
		   "\"presymbolicated\":true,\"platform\":\"Linux\",\"product\":");
	char product[512];
	snprintf(product, sizeof(product), "strata: %s", o->title && *o->title ? o->title : "profile");
	ob_json_str(b, product);
	ob_puts(b, ",\"categories\":");
	ob_puts(b, categories);
	ob_puts(b, ",\"markerSchema\":[]},\n\"libs\":[],\"pausedRanges\":[],\"processes\":[],\n\"threads\":[");
	int first = 1;
	for (uint32_t t = 0; t < ts.ntracks; t++) {
		if (ts.start[t] == ts.start[t + 1])
			continue;
		ob_puts(b, first ? "\n" : ",\n");
		first = 0;
		write_thread(&g, t, &ts, o, base);
	}
	ob_puts(b, "]}\n");
	if (ob_flush(b)) {
		snprintf(err, errlen, "write error");
		goto done;
	}
	rc = 0;
done:
	thread_samples_free(&ts);
	strcache_free(&g.loc);
	free(g.b);
	free(g.mark);
	free(g.stack_of);
	free(g.idle_of);
	free(g.nodes);
	free(g.frame_of);
	free(g.fmark);
	free(g.frames);
	free(g.str_of);
	free(g.smark);
	free(g.strs);
	free(g.chain);
	return rc;
}

const struct exporter gecko_exporter = {
	"gecko", ".gecko.json", "Firefox Profiler (profiler.firefox.com: Load a profile from file)", 0, export_gecko,
};
