/*
 * heatmap.c — writes the source heat map of heatmap.h: the page
 * (heatmap.html and heatmap.js, embedded at build time like the flame
 * graph's) with the profile's files, functions and calls as data in
 * DIR/index.html, and each file's source and line costs in DIR/files/N.js,
 * which the page loads when the file is opened (a <script> element: it
 * works from file:// with no server and no network).
 *
 *   index.html  {title, event, period_ns, total, btotal, maxself, maxdelta, diff, start,
 *                files: [path, kind, self, total, bself, btotal, status],
 *                funcs: [name, kind, file, line, self, total, bself, btotal, status],
 *                edges: [caller, callee, cost]}
 *   files/N.js  strataHeatmapFile(N, {src: [text per line] or null,
 *                lines: [line, self, total, bself, btotal, jit, func],
 *                calls: [line, callee, cost]})
 *
 * Costs are of the shown event: line costs from linecost (the line's own
 * samples, C code it called included, as annotate counts them), function
 * costs from the aggregation, calls from the call tree (a call's cost is
 * that of the samples under it, counted per call on the stack). With
 * --diff, BASE's costs sit beside them (b...), matched by lib/diff: files
 * by their paired path, lines by number, functions by key; status says
 * whether it is in both (0), only here (1) or only in BASE (2).
 */
#include "heatmap.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "emit.h"
#include "lib/diff.h"
#include "lib/intern.h"
#include "lib/linecost.h"
#include "lib/source.h"

__asm__(".section .rodata\n"
	".balign 16\n"
	"strata_heatmap_html:\n"
	".incbin \"src/export/heatmap.html\"\n"
	".byte 0\n"
	".balign 16\n"
	"strata_heatmap_js:\n"
	".incbin \"src/export/heatmap.js\"\n"
	".byte 0\n"
	".previous\n");
extern const char strata_heatmap_html[] __asm__("strata_heatmap_html");
extern const char strata_heatmap_js[] __asm__("strata_heatmap_js");

#define DATA_MARK "<!--STRATA-DATA-->"

enum { B = DIFF_BASE, N = DIFF_NEW };

struct hfile {
	const struct lc_file *lf[2]; /* BASE's and this profile's, NULL when absent */
	int native;
};

struct hfunc {
	uint32_t f[2];               /* the function in BASE and here, PNONE when absent */
	uint64_t self[2], total[2];
	uint32_t file;               /* files[] index, PNONE */
};

struct edge {
	uint32_t caller, line, callee;
	uint64_t cost;
};

struct hm {
	const struct profile *p[2];
	const struct heatmap_opts *o;
	uint32_t ev[2];
	struct linecost *lc[2][2];   /* [side][0: Python and JIT, 1: native] */
	struct agg *agg[2];
	struct hfile *files;
	uint32_t nfiles;
	struct idmap file_by_path[2];
	struct hfunc *funcs;
	uint32_t nfuncs;
	uint32_t *entry[2];          /* per function of each side: its funcs[] index, PNONE */
	struct edge *edges;
	uint32_t nedges, cap_edges;
	struct idmap edge_map;
	char err[200];
};

/* ---- files and functions ------------------------------------------------------ */

static uint64_t hstr(const char *s) { return hash_bytes(s, strlen(s), 77); }

struct path_ctx {
	const struct hm *h;
	int side;
	const char *path;
};

static int eq_path(const void *ctx, uint32_t id)
{
	const struct path_ctx *c = ctx;
	const struct lc_file *lf = c->h->files[id].lf[c->side];
	return lf && !strcmp(lf->path, c->path);
}

static uint32_t file_of(const struct hm *h, int side, const char *path)
{
	if (!path || !path[0])
		return PNONE;
	struct path_ctx c = { h, side, path };
	uint32_t i = idmap_find(&h->file_by_path[side], hstr(path), eq_path, &c);
	return i == MAP_NONE ? PNONE : i;
}

static int add_file(struct hm *h, int side, const struct lc_file *lf, int native, uint32_t into)
{
	uint32_t i = into;
	if (i == PNONE) {
		struct hfile *x = realloc(h->files, ((size_t)h->nfiles + 1) * sizeof(*x));
		if (!x)
			return -1;
		h->files = x;
		i = h->nfiles++;
		memset(&h->files[i], 0, sizeof(h->files[i]));
		h->files[i].native = native;
	}
	h->files[i].lf[side] = lf;
	return idmap_add(&h->file_by_path[side], hstr(lf->path), i);
}

static int collect_files(struct hm *h, const struct diff_match *m)
{
	for (int k = 0; k < 2; k++)
		for (uint32_t i = 0; h->lc[N][k] && i < h->lc[N][k]->nfiles; i++)
			if (add_file(h, N, &h->lc[N][k]->files[i], k, PNONE))
				return -1;
	if (!m)
		return 0;
	/* BASE's files join the entry of the file they are paired with. */
	struct u64map by_key = { 0 };
	for (uint32_t i = 0; i < h->nfiles; i++) {
		uint32_t key = diff_path_key(m, N, h->files[i].lf[N]->path);
		if (key != PNONE && u64map_get(&by_key, key) == MAP_NONE && u64map_put(&by_key, key, i)) {
			u64map_free(&by_key);
			return -1;
		}
	}
	int rc = 0;
	for (int k = 0; k < 2 && !rc; k++)
		for (uint32_t i = 0; h->lc[B][k] && i < h->lc[B][k]->nfiles && !rc; i++) {
			const struct lc_file *lf = &h->lc[B][k]->files[i];
			uint32_t key = diff_path_key(m, B, lf->path), at = key == PNONE ? MAP_NONE : u64map_get(&by_key, key);
			rc = add_file(h, B, lf, k, at == MAP_NONE ? PNONE : at);
		}
	u64map_free(&by_key);
	return rc;
}

static uint32_t add_func(struct hm *h)
{
	struct hfunc *x = realloc(h->funcs, ((size_t)h->nfuncs + 1) * sizeof(*x));
	if (!x)
		return PNONE;
	h->funcs = x;
	struct hfunc *e = &h->funcs[h->nfuncs];
	memset(e, 0, sizeof(*e));
	e->f[0] = e->f[1] = e->file = PNONE;
	return h->nfuncs++;
}

static int collect_funcs(struct hm *h, const struct diff_match *m)
{
	struct u64map by_key = { 0 };
	int rc = -1;
	for (int s = N; s >= B; s--) {
		const struct profile *p = h->p[s];
		if (!p)
			continue;
		if (!(h->entry[s] = malloc(((size_t)p->nfuncs + 1) * sizeof(uint32_t))))
			goto done;
		memset(h->entry[s], 0xff, ((size_t)p->nfuncs + 1) * sizeof(uint32_t));
		const struct agg *a = h->agg[s];
		for (uint32_t r = 0; r < a->nfuncs; r++) {
			const struct agg_row *row = &a->funcs[r];
			uint32_t key = m ? diff_func_key(m, s, row->func) : PNONE;
			uint32_t e = s == B && key != PNONE ? u64map_get(&by_key, key) : MAP_NONE;
			if (e == MAP_NONE) {
				if ((e = add_func(h)) == PNONE)
					goto done;
				if (s == N && key != PNONE && u64map_get(&by_key, key) == MAP_NONE &&
				    u64map_put(&by_key, key, e))
					goto done;
			}
			struct hfunc *x = &h->funcs[e];
			if (x->f[s] == PNONE)
				x->f[s] = row->func;
			x->self[s] += row->self[h->ev[s]];
			x->total[s] += row->total[h->ev[s]];
			if (x->file == PNONE) {
				const struct pfunc *fn = &p->funcs[row->func];
				x->file = fn->kind == PK_OTHER ? PNONE : file_of(h, s, fn->file);
			}
			h->entry[s][row->func] = e;
		}
	}
	rc = 0;
done:
	u64map_free(&by_key);
	return rc;
}

/* ---- calls ------------------------------------------------------------------------- */

struct edge_ctx {
	const struct hm *h;
	struct edge e;
};

static int eq_edge(const void *ctx, uint32_t id)
{
	const struct edge_ctx *c = ctx;
	const struct edge *x = &c->h->edges[id];
	return x->caller == c->e.caller && x->line == c->e.line && x->callee == c->e.callee;
}

static int add_edge(struct hm *h, uint32_t caller, uint32_t line, uint32_t callee, uint64_t cost)
{
	struct edge_ctx c = { h, { caller, line, callee, 0 } };
	uint64_t hash = hash_u64((uint64_t)caller << 32 ^ callee ^ (uint64_t)line << 48 ^ line);
	uint32_t id = idmap_find(&h->edge_map, hash, eq_edge, &c);
	if (id == MAP_NONE) {
		if (h->nedges == h->cap_edges) {
			uint32_t cap = h->cap_edges ? h->cap_edges * 2 : 256;
			struct edge *x = realloc(h->edges, cap * sizeof(*x));
			if (!x)
				return -1;
			h->edges = x;
			h->cap_edges = cap;
		}
		id = h->nedges++;
		h->edges[id] = c.e;
		if (idmap_add(&h->edge_map, hash, id))
			return -1;
	}
	h->edges[id].cost += cost;
	return 0;
}

static int sample_ok(const struct profile *p, const struct psample *s, const struct agg_filter *f)
{
	if (!f)
		return 1;
	const struct pthread_info *t = &p->threads[s->thread];
	if ((f->pid && t->pid != f->pid) || (f->tid && t->tid != f->tid))
		return 0;
	if ((f->t0 && s->time_ns < f->t0) || (f->t1 && s->time_ns >= f->t1))
		return 0;
	if (f->type && (!(s->flags & PS_ALLOC) || s->type != f->type - 1))
		return 0;
	return !(f->exclude_idle && (s->flags & PS_IDLE));
}

/* Every call of the tree: caller (at its line) -> callee, with the cost
 * of the samples under it. */
static int collect_edges(struct hm *h)
{
	const struct profile *p = h->p[N];
	uint64_t *cost = calloc((size_t)p->nnodes + 1, sizeof(*cost));
	if (!cost)
		return -1;
	for (uint64_t i = 0; i < p->nsamples; i++) {
		const struct psample *s = &p->samples[i];
		if (s->node < p->nnodes && s->thread < p->nthreads && sample_ok(p, s, h->o->filter))
			cost[s->node] += profile_value(p, i, h->ev[N]);
	}
	int rc = 0;
	for (uint32_t n = p->nnodes; n-- > 1 && !rc;) {
		uint32_t par = p->nodes[n].parent;
		if (cost[n] && par != 0) {
			const struct pframe *pf = &p->frames[p->nodes[par].frame], *cf = &p->frames[p->nodes[n].frame];
			uint32_t a = h->entry[N][pf->func], b = h->entry[N][cf->func];
			if (a != PNONE && b != PNONE && a != b)
				rc = add_edge(h, a, pf->line, b, cost[n]);
		}
		cost[par] += cost[n];
	}
	free(cost);
	return rc;
}

/* ---- writing ----------------------------------------------------------------------- */

static void put_str(struct ob *b, const char *s, char kind)
{
	char *e = escape_dup(s ? s : "", kind, NULL);
	ob_puts(b, e ? e : "\"\"");
	free(e);
}

static void put_nums(struct ob *b, const uint64_t *v, int n)
{
	for (int i = 0; i < n; i++) {
		ob_putc(b, ',');
		ob_u64(b, v[i]);
	}
}

/* The costliest line's self cost, and with --diff the largest change of a
 * line (as the page compares: shares, or amounts with --absolute), which
 * the page's shading is relative to. */
static void line_maxima(const struct hm *h, const uint64_t all[2], uint64_t *maxself, double *maxdelta)
{
	const struct export_diff *d = h->o->diff;
	*maxself = 0;
	*maxdelta = 0;
	for (uint32_t i = 0; i < h->nfiles; i++) {
		const struct hfile *f = &h->files[i];
		for (int s = 0; s < 2; s++)
			for (uint32_t k = 0; f->lf[s] && k < f->lf[s]->nlines; k++) {
				const struct lc_line *l = &f->lf[s]->lines[k];
				if (s == N && l->self[h->ev[N]] > *maxself)
					*maxself = l->self[h->ev[N]];
				if (!d)
					continue;
				const struct lc_line *o = f->lf[!s] ? linecost_line(f->lf[!s], l->line) : NULL;
				double v[2];
				v[s] = (double)l->self[h->ev[s]];
				v[!s] = o ? (double)o->self[h->ev[!s]] : 0.0;
				double dl = d->absolute ? v[N] * d->scale[1] - v[B] * d->scale[0]
							: (all[N] ? v[N] / (double)all[N] : 0) - (all[B] ? v[B] / (double)all[B] : 0);
				if (fabs(dl) > *maxdelta)
					*maxdelta = fabs(dl);
			}
	}
}

static int write_index(struct hm *h, FILE *out)
{
	const char *mark = strstr(strata_heatmap_html, DATA_MARK);
	struct ob *b = malloc(sizeof(*b));
	if (!mark || !b) {
		free(b);
		snprintf(h->err, sizeof(h->err), mark ? "out of memory" : "internal error: heatmap.html has no data mark");
		return -1;
	}
	const struct heatmap_opts *o = h->o;
	const struct profile *p = h->p[N];
	ob_init(b, out);
	ob_write(b, strata_heatmap_html, (size_t)(mark - strata_heatmap_html));
	ob_puts(b, "<script id=\"strata-data\" type=\"application/json\">{\"title\":");
	put_str(b, o->title && *o->title ? o->title : "strata profile", 'h');
	ob_puts(b, ",\"event\":");
	put_str(b, p->event_names[h->ev[N]], 'h');
	char num[160];
	uint64_t all[2] = { h->lc[B][0] ? h->lc[B][0]->totals[h->ev[B]] : 0, h->lc[N][0]->totals[h->ev[N]] };
	snprintf(num, sizeof(num), ",\"period_ns\":%llu,\"total\":%llu,\"btotal\":%llu",
		 (unsigned long long)(h->ev[N] == 0 ? p->period_ns : 0), (unsigned long long)all[N],
		 (unsigned long long)all[B]);
	ob_puts(b, num);
	uint64_t maxself;
	double maxdelta;
	line_maxima(h, all, &maxself, &maxdelta);
	snprintf(num, sizeof(num), ",\"maxself\":%llu,\"maxdelta\":%.17g", (unsigned long long)maxself, maxdelta);
	ob_puts(b, num);
	ob_puts(b, ",\"diff\":");
	if (o->diff) {
		ob_puts(b, "{\"title\":");
		put_str(b, o->diff->base_title && *o->diff->base_title ? o->diff->base_title : "base", 'h');
		ob_puts(b, ",\"unit\":");
		put_str(b, o->diff->unit, 'h');
		snprintf(num, sizeof(num), ",\"absolute\":%s,\"scale\":[%.17g,%.17g]}", o->diff->absolute ? "true" : "false",
			 o->diff->scale[0], o->diff->scale[1]);
		ob_puts(b, num);
	} else {
		ob_puts(b, "null");
	}
	ob_puts(b, ",\"start\":");
	uint32_t sf = o->start_path ? file_of(h, N, o->start_path) : PNONE;
	uint32_t sfn = o->start_func != PNONE ? h->entry[N][o->start_func] : PNONE;
	if (sfn != PNONE)
		snprintf(num, sizeof(num), "{\"func\":%u}", sfn);
	else if (sf != PNONE)
		snprintf(num, sizeof(num), "{\"file\":%u}", sf);
	else
		snprintf(num, sizeof(num), "null");
	ob_puts(b, num);
	ob_puts(b, ",\n\"files\":[");
	for (uint32_t i = 0; i < h->nfiles; i++) {
		const struct hfile *f = &h->files[i];
		const struct lc_file *n = f->lf[N], *bs = f->lf[B];
		uint64_t v[4] = { n ? n->self[h->ev[N]] : 0, n ? n->total[h->ev[N]] : 0, bs ? bs->self[h->ev[B]] : 0,
				  bs ? bs->total[h->ev[B]] : 0 };
		ob_puts(b, i ? ",\n[" : "\n[");
		put_str(b, (n ? n : bs)->path, 'h');
		ob_puts(b, f->native ? ",\"native\"" : ",\"python\"");
		put_nums(b, v, 4);
		snprintf(num, sizeof(num), ",%d]", n && (bs || !o->diff) ? 0 : n ? 1 : 2);
		ob_puts(b, num);
	}
	ob_puts(b, "],\n\"funcs\":[");
	for (uint32_t i = 0; i < h->nfuncs; i++) {
		const struct hfunc *x = &h->funcs[i];
		int s = x->f[N] != PNONE ? N : B;
		const struct pfunc *fn = &h->p[s]->funcs[x->f[s]];
		ob_puts(b, i ? ",\n[" : "\n[");
		put_str(b, fn->name, 'h');
		snprintf(num, sizeof(num), ",%u,%d,%u", fn->kind, x->file == PNONE ? -1 : (int)x->file, fn->line);
		ob_puts(b, num);
		uint64_t v[4] = { x->self[N], x->total[N], x->self[B], x->total[B] };
		put_nums(b, v, 4);
		snprintf(num, sizeof(num), ",%d]", x->f[N] != PNONE && (x->f[B] != PNONE || !o->diff) ? 0 : s == N ? 1 : 2);
		ob_puts(b, num);
	}
	/* Function-level calls: the line-level ones summed (callers and
	 * callees of each function). */
	ob_puts(b, "],\n\"edges\":[");
	struct u64map seen = { 0 };
	uint64_t *sum = calloc((size_t)h->nedges + 1, sizeof(*sum));
	uint32_t *first = malloc(((size_t)h->nedges + 1) * sizeof(*first)), nf = 0;
	int rc = sum && first ? 0 : -1;
	for (uint32_t i = 0; i < h->nedges && !rc; i++) {
		uint64_t key = (uint64_t)h->edges[i].caller << 32 | h->edges[i].callee;
		uint32_t at = u64map_get(&seen, key);
		if (at == MAP_NONE) {
			at = nf;
			first[nf++] = i;
			rc = u64map_put(&seen, key, at);
		}
		sum[at] += h->edges[i].cost;
	}
	for (uint32_t k = 0; k < nf && !rc; k++) {
		snprintf(num, sizeof(num), "%s[%u,%u,%llu]", k ? "," : "", h->edges[first[k]].caller,
			 h->edges[first[k]].callee, (unsigned long long)sum[k]);
		ob_puts(b, num);
	}
	u64map_free(&seen);
	free(sum);
	free(first);
	ob_puts(b, "]}</script>\n<script>\n");
	ob_puts(b, strata_heatmap_js);
	ob_puts(b, "</script>\n");
	ob_puts(b, mark + strlen(DATA_MARK));
	if (ob_flush(b) && !rc)
		rc = -1;
	free(b);
	if (rc && !h->err[0])
		snprintf(h->err, sizeof(h->err), "out of memory or write error");
	return rc;
}

static int line_cmp(const void *x, const void *y)
{
	const uint32_t *a = x, *b = y;
	return a[0] < b[0] ? -1 : a[0] > b[0];
}

/* files/N.js: the source, each line's costs on both sides, its calls. */
static int write_file(struct hm *h, uint32_t i, FILE *out, struct source_cache *src)
{
	const struct hfile *f = &h->files[i];
	struct ob *b = malloc(sizeof(*b));
	if (!b)
		return -1;
	ob_init(b, out);
	char num[160];
	snprintf(num, sizeof(num), "strataHeatmapFile(%u,{\"src\":", i);
	ob_puts(b, num);
	const char *path = (f->lf[N] ? f->lf[N] : f->lf[B])->path;
	int64_t nl = source_nlines(src, path);
	if (nl < 0 && f->lf[B] && f->lf[N])
		nl = source_nlines(src, path = f->lf[B]->path);
	if (nl < 0) {
		ob_puts(b, "null");
	} else {
		ob_putc(b, '[');
		for (uint32_t ln = 1; ln <= (uint64_t)nl; ln++) {
			const char *t;
			size_t len;
			char *e = NULL;
			if (source_line(src, path, ln, &t, &len) == 0) {
				char *line = strndup(t, len);
				e = line ? escape_dup(line, 'j', NULL) : NULL;
				free(line);
			}
			if (ln > 1)
				ob_puts(b, ",\n");
			ob_puts(b, e ? e : "\"\"");
			free(e);
		}
		ob_putc(b, ']');
	}
	/* Lines of either side, merged by number. */
	uint32_t n0 = f->lf[B] ? f->lf[B]->nlines : 0, n1 = f->lf[N] ? f->lf[N]->nlines : 0;
	uint32_t *ls = malloc(((size_t)n0 + n1 + 1) * 2 * sizeof(uint32_t)), nls = 0;
	if (!ls) {
		free(b);
		return -1;
	}
	for (int s = 0; s < 2; s++)
		for (uint32_t k = 0; f->lf[s] && k < f->lf[s]->nlines; k++) {
			ls[2 * nls] = f->lf[s]->lines[k].line;
			ls[2 * nls++ + 1] = (uint32_t)s;
		}
	qsort(ls, nls, 2 * sizeof(uint32_t), line_cmp);
	ob_puts(b, ",\n\"lines\":[");
	int firstl = 1;
	for (uint32_t k = 0; k < nls; k++) {
		uint32_t ln = ls[2 * k];
		if (k && ls[2 * (k - 1)] == ln)
			continue;
		const struct lc_line *l[2] = { f->lf[B] ? linecost_line(f->lf[B], ln) : NULL,
					       f->lf[N] ? linecost_line(f->lf[N], ln) : NULL };
		int s = l[N] ? N : B;
		const struct pfunc *fn = &h->p[s]->funcs[l[s]->func];
		uint32_t entry = h->entry[s] ? h->entry[s][l[s]->func] : PNONE;
		snprintf(num, sizeof(num), "%s[%u,%llu,%llu,%llu,%llu,%d,%d]", firstl ? "\n" : ",\n", ln,
			 (unsigned long long)(l[N] ? l[N]->self[h->ev[N]] : 0),
			 (unsigned long long)(l[N] ? l[N]->total[h->ev[N]] : 0),
			 (unsigned long long)(l[B] ? l[B]->self[h->ev[B]] : 0),
			 (unsigned long long)(l[B] ? l[B]->total[h->ev[B]] : 0), fn->kind == PK_JIT,
			 entry == PNONE ? -1 : (int)entry);
		ob_puts(b, num);
		firstl = 0;
	}
	free(ls);
	ob_puts(b, "],\n\"calls\":[");
	int firstc = 1;
	for (uint32_t k = 0; k < h->nedges; k++) {
		const struct edge *e = &h->edges[k];
		if (h->funcs[e->caller].file != i || !e->line)
			continue;
		snprintf(num, sizeof(num), "%s[%u,%u,%llu]", firstc ? "" : ",", e->line, e->callee,
			 (unsigned long long)e->cost);
		ob_puts(b, num);
		firstc = 0;
	}
	ob_puts(b, "]});\n");
	int rc = ob_flush(b);
	free(b);
	return rc;
}

/* DIR and DIR/files exist, without the N.js of an earlier heat map. */
static int prepare_dir(const char *dir, char *err, size_t errlen)
{
	char sub[4096];
	struct stat st;
	if (mkdir(dir, 0777) && errno != EEXIST) {
		snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
		return -1;
	}
	if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s is not a directory", dir);
		return -1;
	}
	snprintf(sub, sizeof(sub), "%s/files", dir);
	if (mkdir(sub, 0777) && errno != EEXIST) {
		snprintf(err, errlen, "cannot create %s: %s", sub, strerror(errno));
		return -1;
	}
	DIR *d = opendir(sub);
	if (!d) {
		snprintf(err, errlen, "cannot read %s: %s", sub, strerror(errno));
		return -1;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		size_t n = strspn(de->d_name, "0123456789");
		if (n && !strcmp(de->d_name + n, ".js")) {
			char old[4400];
			snprintf(old, sizeof(old), "%s/%s", sub, de->d_name);
			unlink(old);
		}
	}
	closedir(d);
	return 0;
}

static int write_to(const char *path, struct hm *h, int (*fn)(struct hm *, FILE *, void *, uint32_t), void *arg,
		    uint32_t i)
{
	FILE *out = fopen(path, "w");
	if (!out) {
		snprintf(h->err, sizeof(h->err), "cannot write %s: %s", path, strerror(errno));
		return -1;
	}
	int rc = fn(h, out, arg, i);
	if (fclose(out) && !rc)
		rc = -1;
	if (rc && !h->err[0])
		snprintf(h->err, sizeof(h->err), "cannot write %s: %s", path, strerror(errno ? errno : EIO));
	return rc;
}

static int index_fn(struct hm *h, FILE *out, void *arg, uint32_t i)
{
	(void)arg;
	(void)i;
	return write_index(h, out);
}

static int file_fn(struct hm *h, FILE *out, void *arg, uint32_t i) { return write_file(h, i, out, arg); }

int heatmap_write(const struct profile *p, const struct heatmap_opts *o, const char *dir, char *err, size_t errlen)
{
	struct hm h = { .p = { o->diff ? o->diff->base : NULL, p }, .o = o };
	const struct diff_match *m = o->diff ? o->diff->match : NULL;
	struct agg_filter bf = { .exclude_idle = o->filter && o->filter->exclude_idle };
	struct source_cache *src = source_cache_new();
	int rc = -1;
	h.ev[N] = o->event;
	h.ev[B] = o->diff ? o->diff->base_event : 0;
	if (prepare_dir(dir, err, errlen))
		goto done;
	for (int s = 0; s < 2; s++) {
		if (!h.p[s])
			continue;
		const struct agg_filter *f = s == N ? o->filter : &bf;
		h.lc[s][0] = linecost_build(h.p[s], f, 1u << PK_PYTHON | 1u << PK_JIT);
		h.lc[s][1] = o->native ? linecost_build(h.p[s], f, 1u << PK_NATIVE) : NULL;
		h.agg[s] = profile_aggregate(h.p[s], f, h.ev[s]);
		if (!h.lc[s][0] || (o->native && !h.lc[s][1]) || !h.agg[s])
			goto oom;
	}
	if (!src || collect_files(&h, m) || collect_funcs(&h, m) || collect_edges(&h))
		goto oom;
	char path[4400];
	snprintf(path, sizeof(path), "%s/index.html", dir);
	if (write_to(path, &h, index_fn, NULL, 0))
		goto fail;
	for (uint32_t i = 0; i < h.nfiles; i++) {
		snprintf(path, sizeof(path), "%s/files/%u.js", dir, i);
		if (write_to(path, &h, file_fn, src, i))
			goto fail;
	}
	rc = 0;
	goto done;
oom:
	snprintf(err, errlen, "out of memory");
	goto done;
fail:
	snprintf(err, errlen, "%s", h.err);
done:
	for (int s = 0; s < 2; s++) {
		linecost_free(h.lc[s][0]);
		linecost_free(h.lc[s][1]);
		agg_free(h.agg[s]);
		idmap_free(&h.file_by_path[s]);
		free(h.entry[s]);
	}
	free(h.files);
	free(h.funcs);
	free(h.edges);
	idmap_free(&h.edge_map);
	source_cache_free(src);
	return rc;
}
