/*
 * svg.c — `-f svg`: a static flame graph, one SVG file that any browser
 * or image viewer shows.
 *
 * The model's call tree (all threads and processes merged, as
 * flamegraph.pl does) drawn with the root at the bottom: a frame's width is
 * its total cost (of the shown event), children sorted by label so that the
 * same function lines up across runs. Hovering a frame shows its <title>:
 * the function, file:line, kind, cost and share of the whole. Frames
 * narrower than 0.1 pixel are left out (their cost still counts in their
 * parents), which bounds the file for any profile. Colors: Python warm,
 * native blue, JIT green, synthetic frames grey, hue varied by name so
 * neighbours differ.
 *
 * With convert --diff BASE (a differential flame graph), BASE's self cost
 * is laid on the same tree (lib/diff.c: the same path of lines) and each
 * frame is coloured by the change of its self share (or amount): red more,
 * blue less, neutral when about the same, scaled to the largest change;
 * its <title> gives both sides.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "labels.h"

#define WIDTH 1200
#define ROW 16
#define PAD_TOP 44
#define PAD_BOTTOM 24
#define MIN_WIDTH 0.1
#define CHAR_W 6.6   /* px per character at font-size 11 (an estimate) */

struct svg {
	const struct profile *p;
	struct ob *b;
	uint64_t *total;
	uint32_t *child_start, *child;   /* CSR children lists */
	struct strcache names;           /* basename labels, raw */
	struct strcache xnames;          /* XML-escaped */
	uint64_t grand;
	double scale;                    /* px per unit of cost */
	uint32_t maxdepth;
	const char *unit;
	/* --diff */
	const struct export_diff *diff;
	uint64_t *self, *bself;          /* own cost per node, this profile's and BASE's */
	uint64_t base_all, unmatched;
	double maxdelta;
};

/* The change of node n's self cost, as the diff compares it. */
static double node_delta(const struct svg *g, uint32_t n)
{
	const struct export_diff *d = g->diff;
	if (d->absolute)
		return (double)g->self[n] * d->scale[1] - (double)g->bself[n] * d->scale[0];
	return (g->grand ? (double)g->self[n] / (double)g->grand : 0) -
	       (g->base_all ? (double)g->bself[n] / (double)g->base_all : 0);
}

static void diff_color(double t, char *buf, size_t n)
{
	/* The same scale as flame.js: neutral at 0, red for more, blue for less. */
	static const int neutral[3] = { 226, 226, 220 }, red[3] = { 220, 40, 30 }, blue[3] = { 40, 90, 215 };
	const int *c = t > 0 ? red : blue;
	double a = fabs(t) > 1 ? 1 : fabs(t);
	snprintf(buf, n, "rgb(%d,%d,%d)", (int)lround(neutral[0] + (c[0] - neutral[0]) * a),
		 (int)lround(neutral[1] + (c[1] - neutral[1]) * a), (int)lround(neutral[2] + (c[2] - neutral[2]) * a));
}

static const struct svg *sort_g;
static int by_label(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	const struct profile *p = sort_g->p;
	int c = strcmp(sort_g->names.s[p->nodes[x].frame], sort_g->names.s[p->nodes[y].frame]);
	return c ? c : (x < y ? -1 : x > y);
}

static uint32_t hash_str(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

static void color(const struct profile *p, uint32_t f, const char *name, char *buf, size_t n)
{
	uint32_t h = hash_str(name);
	int v1 = (int)(h % 55), v2 = (int)((h >> 8) % 55);
	switch (p->funcs[p->frames[f].func].kind) {
	case PK_PYTHON: snprintf(buf, n, "rgb(%d,%d,%d)", 200 + v1, 100 + 2 * v2, 40 + v1 / 2); break;
	case PK_NATIVE: snprintf(buf, n, "rgb(%d,%d,%d)", 80 + v1, 130 + v2, 200 + v1 / 2); break;
	case PK_JIT: snprintf(buf, n, "rgb(%d,%d,%d)", 70 + v1, 180 + v2 / 2, 80 + v1); break;
	default: snprintf(buf, n, "rgb(%d,%d,%d)", 170 + v1 / 2, 170 + v1 / 2, 170 + v1 / 2); break;
	}
}

static int ensure_names(struct svg *g, uint32_t f)
{
	if (g->names.s[f])
		return 0;
	return frame_label_cached(&g->names, g->p, f, LABEL_BASENAME, 'r', NULL) &&
			       frame_label_cached(&g->xnames, g->p, f, LABEL_BASENAME, 'x', NULL)
		       ? 0
		       : -1;
}

/* Draws node n at (x, depth) and its children; iterative over an explicit
 * stack so a deep profile cannot overflow the C stack. */
static int draw(struct svg *g, uint32_t *stk, double *xs)
{
	const struct profile *p = g->p;
	struct ob *b = g->b;
	uint32_t sp = 0;
	/* Root's children start at x = 10. */
	stk[sp] = 0;
	xs[sp++] = 10.0;
	double height = PAD_TOP + (double)g->maxdepth * ROW + PAD_BOTTOM;
	while (sp) {
		uint32_t n = stk[--sp];
		double x = xs[sp];
		if (n != 0) {
			uint32_t f = p->nodes[n].frame, depth = p->nodes[n].depth;
			double w = (double)g->total[n] * g->scale;
			double y = height - PAD_BOTTOM - (double)depth * ROW;
			const struct pframe *fr = &p->frames[f];
			const struct pfunc *fn = &p->funcs[fr->func];
			char fill[32], num[256];
			if (g->diff)
				diff_color(g->maxdelta > 0 ? node_delta(g, n) / g->maxdelta : 0, fill, sizeof(fill));
			else
				color(p, f, g->names.s[f], fill, sizeof(fill));
			ob_puts(b, "<g><title>");
			ob_puts(b, g->xnames.s[f]);
			if (fn->kind != PK_OTHER && fn->file && *fn->file) {
				ob_putc(b, '\n');
				ob_xml_str(b, fn->file);
				if (fr->line) {
					ob_putc(b, ':');
					ob_u64(b, fr->line);
				}
			} else if (fn->module) {
				ob_putc(b, '\n');
				ob_xml_str(b, fn->module);
			}
			snprintf(num, sizeof(num), "\n%s, ", pkind_name(fn->kind));
			ob_puts(b, num);
			ob_u64(b, g->total[n]);
			snprintf(num, sizeof(num), " %s, %.2f%%", g->unit,
				 g->grand ? 100.0 * (double)g->total[n] / (double)g->grand : 0.0);
			ob_puts(b, num);
			if (g->diff) {
				double dl = node_delta(g, n);
				snprintf(num, sizeof(num), "\nself: %llu (%.2f%%) here, %llu (%.2f%%) in base; change %+.2f %s",
					 (unsigned long long)g->self[n],
					 g->grand ? 100.0 * (double)g->self[n] / (double)g->grand : 0.0,
					 (unsigned long long)g->bself[n],
					 g->base_all ? 100.0 * (double)g->bself[n] / (double)g->base_all : 0.0,
					 g->diff->absolute ? dl : 100 * dl, g->diff->absolute ? g->diff->unit : "points");
				ob_puts(b, num);
			}
			snprintf(num, sizeof(num), "</title><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"", x,
				 y, w, ROW - 1);
			ob_puts(b, num);
			ob_puts(b, fill);
			ob_puts(b, "\" rx=\"2\"/>");
			size_t fit = (size_t)((w - 6) / CHAR_W);
			if (fit >= 3) {
				snprintf(num, sizeof(num), "<text x=\"%.1f\" y=\"%.1f\">", x + 3, y + ROW - 4.5);
				ob_puts(b, num);
				const char *label = g->names.s[f];
				size_t len = strlen(label);
				if (len <= fit) {
					ob_puts(b, g->xnames.s[f]);
				} else {
					/* Cut on a UTF-8 character boundary, then "..". */
					size_t cut = fit - 2;
					while (cut > 0 && ((uint8_t)label[cut] & 0xC0) == 0x80)
						cut--;
					char *part = strndup(label, cut);
					if (!part)
						return -1;
					ob_xml_str(b, part);
					free(part);
					ob_puts(b, "..");
				}
				ob_puts(b, "</text>");
			}
			ob_puts(b, "</g>\n");
		}
		uint32_t c0 = g->child_start[n], c1 = g->child_start[n + 1], nvis = 0;
		for (uint32_t k = c0; k < c1; k++) {
			uint32_t c = g->child[k];
			if ((double)g->total[c] * g->scale < MIN_WIDTH)
				continue;
			if (ensure_names(g, p->nodes[c].frame))
				return -1;
			g->child[c0 + nvis++] = c;
		}
		sort_g = g;
		qsort(g->child + c0, nvis, sizeof(*g->child), by_label);
		/* Pushed right to left so they are drawn left to right. */
		double end = x;
		for (uint32_t k = 0; k < nvis; k++)
			end += (double)g->total[g->child[c0 + k]] * g->scale;
		for (uint32_t k = nvis; k-- > 0;) {
			uint32_t c = g->child[c0 + k];
			end -= (double)g->total[c] * g->scale;
			stk[sp] = c;
			xs[sp] = end;
			sp++;
		}
	}
	return 0;
}

static int export_svg(const struct profile *p, FILE *out, const struct export_opts *o, char *err, size_t errlen)
{
	struct svg g = { .p = p };
	size_t nn = p->nnodes ? p->nnodes : 1;
	uint32_t *stk = NULL;
	double *xs = NULL;
	int rc = -1;
	g.b = malloc(sizeof(*g.b));
	g.total = calloc(nn, sizeof(*g.total));
	g.child_start = calloc(nn + 1, sizeof(*g.child_start));
	g.child = malloc(nn * sizeof(*g.child));
	stk = malloc((nn + 1) * sizeof(*stk));
	xs = malloc((nn + 1) * sizeof(*xs));
	if (!g.b || !g.total || !g.child_start || !g.child || !stk || !xs || strcache_init(&g.names, p->nframes) ||
	    strcache_init(&g.xnames, p->nframes))
		goto oom;
	for (uint64_t i = 0; i < p->nsamples; i++) {
		const struct psample *s = &p->samples[i];
		if ((o->exclude_idle && (s->flags & PS_IDLE)) || s->node >= p->nnodes)
			continue;
		g.total[s->node] += profile_value(p, i, o->event);
	}
	if (o->diff) {
		g.diff = o->diff;
		g.self = malloc(nn * sizeof(*g.self));
		g.bself = malloc(nn * sizeof(*g.bself));
		if (!g.self || !g.bself)
			goto oom;
		memcpy(g.self, g.total, nn * sizeof(*g.self));
		if (diff_tree_map(o->diff->base, p, o->diff->match, o->diff->base_event, o->exclude_idle, 0, g.bself,
				  &g.unmatched))
			goto oom;
		g.base_all = g.unmatched;
		for (uint32_t n = 0; n < p->nnodes; n++)
			g.base_all += g.bself[n];
	}
	/* Totals bottom-up (children have larger indices), children in CSR. */
	for (uint32_t n = p->nnodes; n-- > 1;) {
		g.total[p->nodes[n].parent] += g.total[n];
		g.child_start[p->nodes[n].parent + 1]++;
	}
	for (uint32_t n = 0; n < p->nnodes; n++)
		g.child_start[n + 1] += g.child_start[n];
	{
		uint32_t *fill = stk; /* scratch */
		for (uint32_t n = 0; n < p->nnodes; n++)
			fill[n] = g.child_start[n];
		for (uint32_t n = 1; n < p->nnodes; n++)
			g.child[fill[p->nodes[n].parent]++] = n;
	}
	g.grand = p->nnodes ? g.total[0] : 0;
	g.scale = g.grand ? (double)(WIDTH - 20) / (double)g.grand : 0;
	g.unit = event_name(p, o);
	for (uint32_t n = 1; g.diff && n < p->nnodes; n++)
		if ((double)g.total[n] * g.scale >= MIN_WIDTH && fabs(node_delta(&g, n)) > g.maxdelta)
			g.maxdelta = fabs(node_delta(&g, n));

	/* Depth actually drawn: only frames wide enough count. */
	for (uint32_t n = 1; n < p->nnodes; n++)
		if ((double)g.total[n] * g.scale >= MIN_WIDTH && p->nodes[n].depth > g.maxdepth)
			g.maxdepth = p->nodes[n].depth;
	int height = PAD_TOP + (int)g.maxdepth * ROW + PAD_BOTTOM;

	struct ob *b = g.b;
	ob_init(b, out);
	char head[512];
	snprintf(head, sizeof(head),
		 "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		 "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" "
		 "viewBox=\"0 0 %d %d\" font-family=\"Verdana, sans-serif\" font-size=\"11\">\n"
		 "<style>rect:hover{stroke:#000;stroke-width:0.8}text{pointer-events:none;fill:#000}</style>\n"
		 "<rect x=\"0\" y=\"0\" width=\"100%%\" height=\"100%%\" fill=\"#f8f8f4\"/>\n",
		 WIDTH, height, WIDTH, height);
	ob_puts(b, head);
	ob_puts(b, "<text x=\"600\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">");
	ob_puts(b, g.diff ? "Differential flame graph: " : "Flame graph: ");
	ob_xml_str(b, o->title && *o->title ? o->title : "strata profile");
	if (g.diff) {
		ob_puts(b, " against ");
		ob_xml_str(b, g.diff->base_title && *g.diff->base_title ? g.diff->base_title : "base");
	}
	ob_puts(b, "</text>\n<text x=\"10\" y=\"38\" fill=\"#555\">");
	char line[256];
	snprintf(line, sizeof(line), "%llu %s, %u thread%s; hover a frame for its file:line and share%s",
		 (unsigned long long)g.grand, g.unit, p->nthreads, p->nthreads == 1 ? "" : "s",
		 g.diff ? (g.diff->absolute ? "; colour: change in self amount, red more, blue less"
					    : "; colour: change in self share, red more, blue less")
			: "");
	ob_xml_str(b, line);
	ob_puts(b, "</text>\n");
	if (g.grand && draw(&g, stk, xs))
		goto oom;
	ob_puts(b, "</svg>\n");
	if (ob_flush(b)) {
		snprintf(err, errlen, "write error");
		goto done;
	}
	rc = 0;
	goto done;
oom:
	snprintf(err, errlen, "out of memory");
done:
	strcache_free(&g.names);
	strcache_free(&g.xnames);
	free(g.b);
	free(g.total);
	free(g.child_start);
	free(g.child);
	free(stk);
	free(xs);
	free(g.self);
	free(g.bself);
	return rc;
}

const struct exporter svg_exporter = {
	"svg", ".svg", "static flame graph (SVG, opens in any browser)", 0, export_svg, 1,
};
