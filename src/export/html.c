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
 *   procs    [name, pid] per process
 *   threads  {name, tid, proc, self: flat [node, cost, ...]}: the cost of
 *            the shown event of the samples whose leaf is that node
 */
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "labels.h"

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
		const struct pfunc *fn = &p->funcs[fu];
		ob_puts(b, nfuncs ? ",\n[" : "\n[");
		dfunc[fu] = nfuncs++;
		char *s = escape_dup(fn->name, 'h', NULL);
		if (!s)
			goto oom;
		ob_puts(b, s);
		free(s);
		ob_putc(b, ',');
		s = escape_dup(fn->file ? fn->file : "", 'h', NULL);
		if (!s)
			goto oom;
		ob_puts(b, s);
		free(s);
		ob_putc(b, ',');
		ob_u64(b, fn->kind);
		ob_putc(b, ',');
		s = escape_dup(fn->module ? path_base(fn->module) : "", 'h', NULL);
		if (!s)
			goto oom;
		ob_puts(b, s);
		free(s);
		ob_putc(b, ']');
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
	ob_puts(b, "]}</script>\n<script>\n");
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
	"html", ".html", "interactive flame graph, one self-contained HTML file (any browser)", 0, export_html,
};
