/*
 * html.c — `-f html`: an interactive flame graph in one self-contained
 * HTML file (no network: no external script, style sheet or font).
 *
 * The page itself lives in src/export/flame.html (markup and CSS) and
 * src/export/flame.js (the viewer), embedded into the binary at build time
 * (.incbin below) and written around the profile's data:
 *
 *   flame.html up to <!--STRATA-DATA-->
 *   <script id="strata-data" type="application/json"> DATA </script>
 *   <script> flame.js </script>
 *   the rest of flame.html
 *
 * DATA is compact so that large profiles stay small and fast to load; the
 * viewer computes every total itself:
 *
 *   funcs    [name, file, kind, module] per function used
 *   frames   flat [func, line, ...] per frame used
 *   nodes    flat [parent, frame, ...] per call-tree node used, parents
 *            first (index 0 is the root, parent -1)
 *   procs    [name, pid, key] per process (key: its name without the pid)
 *   threads  {name, key, tid, proc, self: flat [node, cost, ...]}: the cost
 *            of the shown event of the samples whose leaf is that node (key:
 *            the thread's name without its id)
 *
 * With convert --diff BASE, BASE's tree comes too, in the same shape, so
 * that the viewer can lay it on the tree it shows (by line or merged by
 * function) and compare whatever thread or process is selected:
 *
 *   diff     {absolute, title, unit, scale: [BASE's, this one's]}
 *   bfuncs   BASE's functions that match none of funcs (matched ones use
 *            funcs' index: bfuncs[k] is function funcs.length + k)
 *   bframes, bnodes   as frames and nodes, for BASE
 *   bprocs   [key] per BASE process
 *   bthreads {key, proc, self}, BASE's threads
 */
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "labels.h"
#include "lib/intern.h"

/* The page's sources, NUL-terminated, embedded at build time (the Makefile
 * makes html.o depend on them; paths are relative to the top directory,
 * where make runs the compiler). */
__asm__(".section .rodata\n"
	".balign 16\n"
	"strata_flame_html:\n"
	".incbin \"src/export/flame.html\"\n"
	".byte 0\n"
	".balign 16\n"
	"strata_flame_js:\n"
	".incbin \"src/export/flame.js\"\n"
	".byte 0\n"
	".previous\n");
extern const char strata_flame_html[] __asm__("strata_flame_html");
extern const char strata_flame_js[] __asm__("strata_flame_js");

#define DATA_MARK "<!--STRATA-DATA-->"

/* [name, file, kind, module] of a function; -1 when out of memory. */
static int put_func(struct ob *b, const struct pfunc *fn)
{
	const char *parts[2] = { fn->name, fn->file ? fn->file : "" };
	ob_putc(b, '[');
	for (int i = 0; i < 2; i++) {
		char *s = escape_dup(parts[i], 'h', NULL);
		if (!s)
			return -1;
		ob_puts(b, s);
		free(s);
		ob_putc(b, ',');
	}
	ob_u64(b, fn->kind);
	ob_putc(b, ',');
	char *s = escape_dup(fn->module ? path_base(fn->module) : "", 'h', NULL);
	if (!s)
		return -1;
	ob_puts(b, s);
	free(s);
	ob_putc(b, ']');
	return 0;
}

static int put_str(struct ob *b, const char *str)
{
	char *s = escape_dup(str, 'h', NULL);
	if (!s)
		return -1;
	ob_puts(b, s);
	free(s);
	return 0;
}

/* The --diff members (see the top of this file). dfunc: the functions
 * written to funcs (PNONE: not written), nfuncs of them. */
static int put_base(struct ob *b, const struct profile *p, const struct export_opts *o, const uint32_t *dfunc,
		    uint32_t nfuncs)
{
	const struct export_diff *d = o->diff;
	const struct profile *q = d->base;
	size_t nn = q->nnodes ? q->nnodes : 1, nf = q->nframes ? q->nframes : 1, nfn = q->nfuncs ? q->nfuncs : 1;
	uint8_t *used = calloc(nn, 1);
	uint32_t *bnode = malloc(nn * sizeof(*bnode)), *bframe = malloc(nf * sizeof(*bframe));
	uint32_t *bfunc = malloc(nfn * sizeof(*bfunc)), *touched = malloc(nn * sizeof(*touched));
	uint64_t *self = calloc(nn, sizeof(*self));
	struct u64map keyfunc = { 0 };
	struct thread_samples ts = { 0 };
	int rc = -1;
	if (!used || !bnode || !bframe || !bfunc || !touched || !self)
		goto done;
	/* BASE's functions take the index of the first shown function with
	 * the same key. */
	for (uint32_t f = 0; f < p->nfuncs; f++) {
		uint32_t k = diff_func_key(d->match, DIFF_NEW, f);
		if (dfunc[f] != PNONE && k != PNONE && u64map_get(&keyfunc, k) == MAP_NONE &&
		    u64map_put(&keyfunc, k, dfunc[f]))
			goto done;
	}
	for (uint64_t i = 0; i < q->nsamples; i++) {
		const struct psample *s = &q->samples[i];
		if ((o->exclude_idle && (s->flags & PS_IDLE)) || s->node >= q->nnodes || s->thread >= q->nthreads)
			continue;
		if (profile_value(q, i, d->base_event))
			used[s->node] = 1;
	}
	for (uint32_t n = q->nnodes; n-- > 1;)
		if (used[n])
			used[q->nodes[n].parent] = 1;
	memset(bframe, 0xff, nf * sizeof(*bframe));
	memset(bfunc, 0xff, nfn * sizeof(*bfunc));
	ob_puts(b, ",\n\"diff\":{\"absolute\":");
	ob_puts(b, d->absolute ? "true" : "false");
	ob_puts(b, ",\"title\":");
	if (put_str(b, d->base_title && *d->base_title ? d->base_title : "base"))
		goto done;
	ob_puts(b, ",\"unit\":");
	if (put_str(b, d->unit ? d->unit : ""))
		goto done;
	char num[96];
	snprintf(num, sizeof(num), ",\"scale\":[%.17g,%.17g]}", d->scale[0], d->scale[1]);
	ob_puts(b, num);
	ob_puts(b, ",\n\"bfuncs\":[");
	uint32_t nb = 0, nbn = 0, nbf = 0;
	for (uint32_t n = 1; n < q->nnodes; n++) {
		uint32_t fu = q->frames[q->nodes[n].frame].func;
		if (!used[n] || bfunc[fu] != PNONE)
			continue;
		uint32_t k = diff_func_key(d->match, DIFF_BASE, fu), x = k == PNONE ? MAP_NONE : u64map_get(&keyfunc, k);
		if (x != MAP_NONE) {
			bfunc[fu] = x;
			continue;
		}
		bfunc[fu] = nfuncs + nb;
		ob_puts(b, nb++ ? ",\n" : "\n");
		if (put_func(b, &q->funcs[fu]))
			goto done;
	}
	ob_puts(b, "],\n\"bframes\":[");
	for (uint32_t n = 1; n < q->nnodes; n++) {
		uint32_t f = q->nodes[n].frame;
		if (!used[n] || bframe[f] != PNONE)
			continue;
		if (nbf)
			ob_putc(b, ',');
		bframe[f] = nbf++;
		ob_u64(b, bfunc[q->frames[f].func]);
		ob_putc(b, ',');
		ob_u64(b, q->frames[f].line);
	}
	ob_puts(b, "],\n\"bnodes\":[-1,-1");
	for (uint32_t n = 0; n < q->nnodes; n++) {
		if (!used[n])
			continue;
		bnode[n] = nbn++;
		if (n == 0)
			continue;
		ob_putc(b, ',');
		ob_u64(b, bnode[q->nodes[n].parent]);
		ob_putc(b, ',');
		ob_u64(b, bframe[q->nodes[n].frame]);
	}
	ob_puts(b, "],\n\"bprocs\":[");
	for (uint32_t pr = 0; pr < q->nprocs; pr++) {
		char name[600];
		process_name(q, pr, 0, name, sizeof(name));
		ob_puts(b, pr ? ",[" : "[");
		if (put_str(b, name))
			goto done;
		ob_putc(b, ']');
	}
	ob_puts(b, "],\n\"bthreads\":[");
	struct export_opts bo = *o;
	bo.event = d->base_event;
	if (thread_samples_build(&ts, q, &bo))
		goto done;
	int firstt = 1;
	for (uint32_t th = 0; th < q->nthreads; th++) {
		uint32_t nt = 0;
		for (uint64_t k = ts.start[th]; k < ts.start[th + 1]; k++) {
			uint64_t i = ts.idx[k];
			uint32_t n = q->samples[i].node;
			uint64_t v = profile_value(q, i, d->base_event);
			if (!v || n >= q->nnodes)
				continue;
			if (!self[n])
				touched[nt++] = n;
			self[n] += v;
		}
		if (!nt)
			continue;
		char name[300];
		thread_name(q, th, 0, name, sizeof(name));
		ob_puts(b, firstt ? "\n{\"key\":" : ",\n{\"key\":");
		firstt = 0;
		if (put_str(b, name))
			goto done;
		ob_puts(b, ",\"proc\":");
		ob_u64(b, q->threads[th].process);
		ob_puts(b, ",\"self\":[");
		for (uint32_t k = 0; k < nt; k++) {
			if (k)
				ob_putc(b, ',');
			ob_u64(b, bnode[touched[k]]);
			ob_putc(b, ',');
			ob_u64(b, self[touched[k]]);
			self[touched[k]] = 0;
		}
		ob_puts(b, "]}");
	}
	ob_putc(b, ']');
	rc = 0;
done:
	thread_samples_free(&ts);
	u64map_free(&keyfunc);
	free(used);
	free(bnode);
	free(bframe);
	free(bfunc);
	free(touched);
	free(self);
	return rc;
}

static int export_html(const struct profile *p, FILE *out, const struct export_opts *o, char *err, size_t errlen)
{
	const char *mark = strstr(strata_flame_html, DATA_MARK);
	if (!mark) {
		snprintf(err, errlen, "internal error: flame.html has no data mark");
		return -1;
	}
	size_t nn = p->nnodes ? p->nnodes : 1, nf = p->nframes ? p->nframes : 1, nfn = p->nfuncs ? p->nfuncs : 1;
	struct ob *b = malloc(sizeof(*b));
	uint64_t *self = calloc(nn, sizeof(*self));
	uint32_t *touched = malloc(nn * sizeof(*touched));
	uint32_t *dnode = malloc(nn * sizeof(*dnode));
	uint32_t *dframe = malloc(nf * sizeof(*dframe));
	uint32_t *dfunc = malloc(nfn * sizeof(*dfunc));
	uint8_t *used = calloc(nn, 1);
	int rc = -1;
	if (!b || !self || !touched || !dnode || !dframe || !dfunc || !used) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}
	/* Nodes, frames and functions that carry cost, numbered densely. */
	for (uint64_t i = 0; i < p->nsamples; i++) {
		const struct psample *s = &p->samples[i];
		if ((o->exclude_idle && (s->flags & PS_IDLE)) || s->node >= p->nnodes || s->thread >= p->nthreads)
			continue;
		if (profile_value(p, i, o->event))
			used[s->node] = 1;
	}
	for (uint32_t n = p->nnodes; n-- > 1;)
		if (used[n])
			used[p->nodes[n].parent] = 1;
	memset(dframe, 0xff, nf * sizeof(*dframe));
	memset(dfunc, 0xff, nfn * sizeof(*dfunc));
	uint32_t nnodes = 0, nframes = 0, nfuncs = 0;

	ob_init(b, out);
	ob_write(b, strata_flame_html, (size_t)(mark - strata_flame_html));
	ob_puts(b, "<script id=\"strata-data\" type=\"application/json\">{\"title\":");
	char *t = escape_dup(o->title && *o->title ? o->title : "strata profile", 'h', NULL);
	ob_puts(b, t ? t : "\"\"");
	free(t);
	ob_puts(b, ",\"event\":");
	t = escape_dup(event_name(p, o), 'h', NULL);
	ob_puts(b, t ? t : "\"samples\"");
	free(t);
	ob_puts(b, ",\"period_ns\":");
	ob_u64(b, o->event == 0 ? p->period_ns : 0);
	ob_puts(b, ",\n\"funcs\":[");
	for (uint32_t n = 0; n < p->nnodes; n++) {
		if (!used[n])
			continue;
		dnode[n] = nnodes++;
		if (n == 0)
			continue;
		uint32_t fu = p->frames[p->nodes[n].frame].func;
		if (dfunc[fu] != PNONE)
			continue;
		ob_puts(b, nfuncs ? ",\n" : "\n");
		dfunc[fu] = nfuncs++;
		if (put_func(b, &p->funcs[fu]))
			goto oom;
	}
	ob_puts(b, "],\n\"frames\":[");
	for (uint32_t n = 1; n < p->nnodes; n++) {
		uint32_t f = p->nodes[n].frame;
		if (!used[n] || dframe[f] != PNONE)
			continue;
		if (nframes)
			ob_putc(b, ',');
		dframe[f] = nframes++;
		ob_u64(b, dfunc[p->frames[f].func]);
		ob_putc(b, ',');
		ob_u64(b, p->frames[f].line);
	}
	ob_puts(b, "],\n\"nodes\":[-1,-1");
	for (uint32_t n = 1; n < p->nnodes; n++) {
		if (!used[n])
			continue;
		ob_putc(b, ',');
		ob_u64(b, dnode[p->nodes[n].parent]);
		ob_putc(b, ',');
		ob_u64(b, dframe[p->nodes[n].frame]);
	}
	ob_puts(b, "],\n\"procs\":[");
	for (uint32_t pr = 0; pr < p->nprocs; pr++) {
		char name[600];
		process_name(p, pr, 1, name, sizeof(name));
		char *s = escape_dup(name, 'h', NULL);
		if (!s)
			goto oom;
		ob_puts(b, pr ? ",[" : "[");
		ob_puts(b, s);
		free(s);
		ob_putc(b, ',');
		ob_u64(b, p->procs[pr].pid);
		ob_putc(b, ',');
		process_name(p, pr, 0, name, sizeof(name));
		if (put_str(b, name))
			goto oom;
		ob_putc(b, ']');
	}
	ob_puts(b, "],\n\"threads\":[");
	/* Per thread: self cost per leaf node, gathered in one pass over the
	 * samples per thread via a touched list (no per-sample allocation). */
	struct thread_samples ts = { 0 };
	if (thread_samples_build(&ts, p, o))
		goto oom;
	int firstt = 1;
	for (uint32_t th = 0; th < p->nthreads; th++) {
		uint32_t nt = 0;
		for (uint64_t k = ts.start[th]; k < ts.start[th + 1]; k++) {
			uint64_t i = ts.idx[k];
			uint32_t n = p->samples[i].node;
			uint64_t v = profile_value(p, i, o->event);
			if (!v || n >= p->nnodes)
				continue;
			if (!self[n])
				touched[nt++] = n;
			self[n] += v;
		}
		if (!nt)
			continue;
		const struct pthread_info *ti = &p->threads[th];
		char name[300];
		thread_name(p, th, 1, name, sizeof(name));
		char *s = escape_dup(name, 'h', NULL);
		if (!s) {
			thread_samples_free(&ts);
			goto oom;
		}
		ob_puts(b, firstt ? "\n{\"name\":" : ",\n{\"name\":");
		firstt = 0;
		ob_puts(b, s);
		free(s);
		ob_puts(b, ",\"key\":");
		thread_name(p, th, 0, name, sizeof(name));
		if (put_str(b, name)) {
			thread_samples_free(&ts);
			goto oom;
		}
		ob_puts(b, ",\"tid\":");
		ob_u64(b, ti->tid);
		ob_puts(b, ",\"proc\":");
		ob_u64(b, ti->process);
		ob_puts(b, ",\"self\":[");
		for (uint32_t k = 0; k < nt; k++) {
			if (k)
				ob_putc(b, ',');
			ob_u64(b, dnode[touched[k]]);
			ob_putc(b, ',');
			ob_u64(b, self[touched[k]]);
			self[touched[k]] = 0;
		}
		ob_puts(b, "]}");
	}
	thread_samples_free(&ts);
	ob_putc(b, ']');
	if (o->diff && put_base(b, p, o, dfunc, nfuncs))
		goto oom;
	ob_puts(b, "}</script>\n<script>\n");
	ob_puts(b, strata_flame_js);
	ob_puts(b, "</script>\n");
	ob_puts(b, mark + strlen(DATA_MARK));
	if (ob_flush(b)) {
		snprintf(err, errlen, "write error");
		goto done;
	}
	rc = 0;
	goto done;
oom:
	snprintf(err, errlen, "out of memory");
done:
	free(b);
	free(self);
	free(touched);
	free(dnode);
	free(dframe);
	free(dfunc);
	free(used);
	return rc;
}

const struct exporter html_exporter = {
	"html", ".html", "interactive flame graph, one self-contained HTML file (any browser)", 0, export_html, 1,
};
