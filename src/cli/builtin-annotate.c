/*
 * builtin-annotate.c — `strata annotate FILE [SOURCE.py|FUNCTION]`: the
 * Python source of the profiled files with the cost of every line (samples
 * self and total, and each event recorded with -e), hottest lines
 * highlighted; or the same as JSON; a C file or function named as the
 * target of a --native profile likewise. docs/annotate.md describes it.
 *
 * The costs come from linecost (src/lib/linecost.c); this file only picks
 * what to show and lays it out, so other sources of line costs (JIT code
 * mapped back to Python lines) and other views (disassembly) plug in
 * without touching the arithmetic. The JSON is annotate-json.c; what the
 * two share, annotate.h.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "annotate-asm.h"
#include "annotate.h"
#include "builtin.h"
#include "lib/json.h"
#include "lib/linecost.h"
#include "lib/profile.h"
#include "lib/ratios.h"
#include "lib/source.h"

static const char usage_text[] =
	"usage: strata annotate [options] FILE [SOURCE.py|FUNCTION]\n"
	"\n"
	"Prints the Python source of the profiled files with the cost of each line:\n"
	"samples self and total (with percentages of all samples), and one column per\n"
	"event recorded with 'strata record -e'. With SOURCE.py only that file (a path,\n"
	"or the end of one); with FUNCTION only that function (qualified name, or its\n"
	"last part).\n"
	"\n"
	"options:\n"
	"  -f, --format FORMAT  text (default), json (as --json) or html: a source heat\n"
	"                       map, a directory (-o DIR) to open in a browser, offline:\n"
	"                       every profiled source file with its lines shaded by\n"
	"                       cost, files and functions ordered by cost, callers and\n"
	"                       callees of each function one click away (SOURCE.py or\n"
	"                       FUNCTION: where it opens)\n"
	"  -o, --output DIR     with -f html: the directory to write (made if needed)\n"
	"      --native         with -f html: C/C++ source files of a --native profile too\n"
	"      --diff BASE      with -f html: shade by the change of each line's self\n"
	"                       share from profile BASE (red more, blue less)\n"
	"      --absolute       with --diff: the change in amount (time), not in share\n"
	"      --strip-prefix DIR  with --diff: remove DIR from the start of source paths\n"
	"                       before matching them (repeatable)\n"
	"      --json           print one JSON object instead of annotated source\n"
	"      --full           print every line of each file (default: the lines with\n"
	"                       a cost and --context lines around them)\n"
	"  -C, --context N      lines of context around costly lines (default: 3)\n"
	"  -e, --event NAME     pick the hottest lines by this event (default: samples)\n"
	"      --type NAME      --objects: only allocations of type NAME (dict, Foo,\n"
	"                       [PyMem_Malloc], ...: see strata report's types table);\n"
	"                       hottest lines by alloc-bytes unless -e says otherwise\n"
	"      --color WHEN     highlight the hottest lines: auto (default: when\n"
	"                       standard output is a terminal), always, never\n"
	"  -p, --pid PID        only samples of process PID\n"
	"  -t, --tid TID        only samples of thread TID\n"
	"      --no-idle        wall mode: leave out samples of blocked threads\n"
	"      --asm            under each JIT-compiled line (Numba, recorded with\n"
	"                       --jit-lines), its machine code with the samples of each\n"
	"                       instruction\n"
	"  -h, --help           show this help\n"
	"\n"
	"self: samples whose innermost Python frame is at the line (the line was\n"
	"running, or called C code that was). total: samples with the line anywhere on\n"
	"the stack, once per sample. A C source file or function of a profile recorded\n"
	"with --native is shown the same way, self being the samples whose innermost\n"
	"native frame is at the line.\n";

#define HOT_LINES 5 /* highlighted per file */


static int digits(uint64_t v)
{
	int d = 1;
	while (v >= 10) {
		v /= 10;
		d++;
	}
	return d;
}

static const char *short_path(const char *file, const char *cwd)
{
	size_t n = strlen(cwd);
	if (n > 1 && strncmp(file, cwd, n) == 0 && file[n] == '/')
		return file + n + 1;
	return file;
}

/* Source text as the terminal should see it: tabs expanded, control
 * characters (the file is the profiled program's, not ours) replaced. */
static void put_source(const char *s, size_t n)
{
	size_t col = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\t') {
			do
				putchar(' ');
			while (++col % 8);
			continue;
		}
		putchar(c < 0x20 || c == 0x7f ? '?' : c);
		col += (c & 0xC0) != 0x80;
	}
}

/* ---- selection ---------------------------------------------------------- */

static int path_matches(const char *path, const char *want, const char *want_real)
{
	if (!strcmp(path, want) || (want_real[0] && !strcmp(path, want_real)))
		return 1;
	size_t pl = strlen(path), wl = strlen(want);
	return wl < pl && path[pl - wl - 1] == '/' && !strcmp(path + pl - wl, want);
}

static int name_matches(const char *qualname, const char *want)
{
	if (!strcmp(qualname, want))
		return 1;
	const char *dot = strrchr(qualname, '.');
	return dot && !strcmp(dot + 1, want);
}

static const struct lc_file *find_file(const struct linecost *lc, const char *path)
{
	for (uint32_t i = 0; i < lc->nfiles; i++)
		if (lc->files[i].path == path || !strcmp(lc->files[i].path, path))
			return &lc->files[i];
	return NULL;
}

/* The views for the target (or every file without one), among functions
 * of the kinds c->lc was built for. Returns the number of views, 0 if
 * nothing matches, -1 on out of memory. */
static int select_views(const struct ctx *c, uint32_t kinds, struct view **out)
{
	const struct linecost *lc = c->lc;
	const struct profile *p = c->p;
	const char *t = c->o->target;
	struct view *v = calloc(lc->nfiles + p->nfuncs + 1, sizeof(*v));
	if (!v)
		return -1;
	int n = 0;
	if (!t) {
		/* Every file whose source can be shown (the others, such as
		 * frozen modules, are counted in a closing line). */
		for (uint32_t i = 0; i < lc->nfiles; i++)
			if (source_nlines(c->src, lc->files[i].path) >= 0)
				v[n++] = (struct view){ &lc->files[i], 1, 0, c->o->full, NULL, 0 };
		*out = v;
		return n;
	}
	char real[PATH_MAX] = "";
	if (!realpath(t, real))
		real[0] = 0;
	for (uint32_t i = 0; i < lc->nfiles; i++)
		if (path_matches(lc->files[i].path, t, real))
			v[n++] = (struct view){ &lc->files[i], 1, 0, c->o->full, NULL, 0 };
	if (n) {
		*out = v;
		return n;
	}
	/* A function: from its first line to the last line that cost
	 * anything in it, every line shown. */
	for (uint32_t fi = 0; fi < p->nfuncs; fi++) {
		const struct pfunc *f = &p->funcs[fi];
		if (!(kinds & (1u << f->kind)) || !name_matches(f->name, t))
			continue;
		const struct lc_file *lf = find_file(lc, f->file);
		if (!lf)
			continue;
		uint32_t last = 0;
		for (uint32_t k = 0; k < lf->nlines; k++)
			if (lf->lines[k].func == fi && lf->lines[k].line > last)
				last = lf->lines[k].line;
		if (!last)
			continue;
		uint32_t first = f->line && f->line <= last ? f->line : last;
		v[n++] = (struct view){ lf, first, last, 1, f->name, fi };
	}
	*out = v;
	return n;
}

/* ---- text -------------------------------------------------------------- */

const struct agg_row *func_row(const struct ctx *c, uint32_t func)
{
	for (uint32_t i = 0; c->agg && i < c->agg->nfuncs; i++)
		if (c->agg->funcs[i].func == func)
			return &c->agg->funcs[i];
	return NULL;
}

/* The HOT_LINES costliest lines of a view (by self of the chosen event). */
static void hottest(const struct ctx *c, const struct view *v, uint32_t hot[HOT_LINES])
{
	uint32_t e = c->o->event;
	uint64_t best[HOT_LINES] = { 0 };
	memset(hot, 0, HOT_LINES * sizeof(uint32_t));
	for (uint32_t k = 0; k < v->file->nlines; k++) {
		const struct lc_line *l = &v->file->lines[k];
		/* Only lines that matter: at least 1% of the event. */
		if (l->line < v->first || (v->last && l->line > v->last) || !l->self[e] ||
		    l->self[e] * 100 < c->lc->totals[e])
			continue;
		uint64_t x = l->self[e];
		for (int i = 0; i < HOT_LINES; i++) {
			if (x > best[i]) {
				memmove(best + i + 1, best + i, (HOT_LINES - 1 - (size_t)i) * sizeof(*best));
				memmove(hot + i + 1, hot + i, (HOT_LINES - 1 - (size_t)i) * sizeof(*hot));
				best[i] = x;
				hot[i] = l->line;
				break;
			}
		}
	}
}

/* Samples of the view's self that ran in the garbage collector: the
 * file's, or for a function the sum over its lines. */
uint64_t view_gc(const struct view *v)
{
	const struct lc_file *lf = v->file;
	if (!v->function)
		return lf->gc[0];
	uint64_t g = 0;
	for (uint32_t k = 0; k < lf->nlines; k++)
		if (lf->lines[k].line >= v->first && (!v->last || lf->lines[k].line <= v->last))
			g += lf->lines[k].gc[0];
	return g;
}

struct widths {
	int num;                  /* self / total sample counts */
	int gc;                   /* the gc column, 0 when no sample shown ran the collector */
	int ev[STRATA_MAX_COUNTERS];
	int ratio[RATIOS_MAX];
	int line;
};

static void print_view(const struct ctx *c, const struct view *v)
{
	const struct profile *p = c->p;
	const struct lc_file *lf = v->file;
	/* The self and total columns: samples, or with --type (allocations
	 * only, which carry no time samples) the event chosen. */
	uint32_t m = c->o->type ? c->o->event : 0;
	const char *mname = m ? p->event_names[m] : "samples";
	uint64_t all = c->lc->totals[m];
	uint32_t nev = p->nevents - 1;
	if (nev > STRATA_MAX_COUNTERS)
		nev = STRATA_MAX_COUNTERS;
	int64_t nsrc = source_nlines(c->src, lf->path);
	uint32_t maxline = 0;
	for (uint32_t k = 0; k < lf->nlines; k++)
		maxline = lf->lines[k].line > maxline ? lf->lines[k].line : maxline;
	uint32_t first = v->first, last = v->last;
	if (!last)
		last = nsrc > (int64_t)maxline ? (uint32_t)nsrc : maxline;

	/* Widths from the largest values shown. */
	struct widths w = { .num = 5 };
	uint64_t maxv = 0;
	for (uint32_t k = 0; k < lf->nlines; k++)
		maxv = lf->lines[k].total[m] > maxv ? lf->lines[k].total[m] : maxv;
	w.num = digits(maxv) > 5 ? digits(maxv) : 5;
	uint64_t vgc = view_gc(v);
	w.gc = vgc ? w.num : 0;
	for (uint32_t e = 0; e < nev; e++) {
		uint64_t mx = 0;
		for (uint32_t k = 0; k < lf->nlines; k++)
			mx = lf->lines[k].self[e + 1] > mx ? lf->lines[k].self[e + 1] : mx;
		int nl = (int)strlen(p->event_names[e + 1]);
		w.ev[e] = digits(mx) > nl ? digits(mx) : nl;
	}
	for (uint32_t i = 0; i < c->nr; i++) {
		int l = (int)strlen(c->rt[i].label);
		w.ratio[i] = l > 6 ? l : 6;
	}
	w.line = digits(last) > 4 ? digits(last) : 4;

	const char *hot_on = c->o->color ? "\033[1;31m" : "", *warm_on = c->o->color ? "\033[33m" : "";
	const char *dim_on = c->o->color ? "\033[2m" : "", *off = c->o->color ? "\033[0m" : "";
	uint32_t hot[HOT_LINES];
	hottest(c, v, hot);

	/* Heading: the file (or function) and its share. */
	const uint64_t *hs = lf->self, *ht = lf->total;
	if (v->function) {
		const struct agg_row *r = func_row(c, v->func);
		if (r)
			hs = r->self, ht = r->total;
	}
	printf("%s%s", c->o->color ? "\033[1m" : "", v->function ? v->function : "");
	printf("%s%s%s", v->function ? " (" : "", short_path(lf->path, c->cwd), v->function ? ")" : "");
	printf("%s: %" PRIu64 " %s self (%.1f%%), %" PRIu64 " total (%.1f%%)", off, hs[m], mname, pct(hs[m], all),
	       ht[m], pct(ht[m], all));
	if (vgc)
		printf(", of which %" PRIu64 " in the garbage collector (%.1f%%)", vgc, pct(vgc, all));
	printf("\n");
	if (nsrc < 0)
		printf("  (source not available: only the lines with a cost are listed)\n");
	printf("%7s %*s %7s %*s  ", "self%", w.num, "self", "total%", w.num, "total");
	if (w.gc)
		printf("%*s  ", w.gc, "gc");
	for (uint32_t e = 0; e < nev; e++)
		printf("%*s  ", w.ev[e], p->event_names[e + 1]);
	for (uint32_t i = 0; i < c->nr; i++)
		printf("%*s  ", w.ratio[i], c->rt[i].label);
	printf("%*s  source\n", w.line, "line");

	int ctxn = c->o->context;
	uint32_t shown_until = 0; /* last line printed, to mark gaps */
	for (uint32_t ln = first; ln <= last; ln++) {
		const struct lc_line *l = linecost_line(lf, ln);
		const char *text = NULL;
		size_t tlen = 0;
		int have_src = nsrc >= 0 && source_line(c->src, lf->path, ln, &text, &tlen) == 0;
		if (!v->full || !have_src) {
			/* Show a line with a cost, or within ctxn lines of one. */
			int near = l != NULL;
			for (int d = 1; !near && d <= ctxn && have_src; d++)
				near = (ln > (uint32_t)d && linecost_line(lf, ln - (uint32_t)d)) ||
				       linecost_line(lf, ln + (uint32_t)d);
			if (!near)
				continue;
		}
		if (shown_until && ln > shown_until + 1)
			printf("%*s%s...%s\n", 7 + 1 + w.num + 1 + 7 + 1 + w.num + 2, "", dim_on, off);
		shown_until = ln;
		int is_hot = 0;
		for (int i = 0; i < HOT_LINES && l; i++)
			is_hot |= hot[i] == ln;
		const char *on = is_hot ? (hot[0] == ln || pct(l->self[c->o->event], c->lc->totals[c->o->event]) >= 10
					   ? hot_on : warm_on) : "";
		printf("%s", on);
		if (l) {
			printf("%6.1f%% %*" PRIu64 " %6.1f%% %*" PRIu64 "  ", pct(l->self[m], all), w.num, l->self[m],
			       pct(l->total[m], all), w.num, l->total[m]);
			if (w.gc && l->gc[0])
				printf("%*" PRIu64 "  ", w.gc, l->gc[0]);
			else if (w.gc)
				printf("%*s  ", w.gc, "");
			for (uint32_t e = 0; e < nev; e++)
				printf("%*" PRIu64 "  ", w.ev[e], l->self[e + 1]);
			for (uint32_t i = 0; i < c->nr; i++) {
				double r = ratio_value(&c->rt[i], l->self);
				if (r < 0)
					printf("%*s  ", w.ratio[i], "-");
				else if (c->rt[i].percent)
					printf("%*.1f%%  ", w.ratio[i] - 1, 100.0 * r);
				else
					printf("%*.2f  ", w.ratio[i], r);
			}
		} else {
			printf("%*s", 7 + 1 + w.num + 1 + 7 + 1 + w.num + 2, "");
			if (w.gc)
				printf("%*s  ", w.gc, "");
			for (uint32_t e = 0; e < nev; e++)
				printf("%*s  ", w.ev[e], "");
			for (uint32_t i = 0; i < c->nr; i++)
				printf("%*s  ", w.ratio[i], "");
		}
		printf("%*u  ", w.line, ln);
		if (have_src)
			put_source(text, tlen);
		printf("%s\n", is_hot ? off : "");
		if (c->jasm && l)
			jasm_print_line(c->jasm, lf->path, ln, all, 2);
	}
	printf("\n");
}

/* ---- command ----------------------------------------------------------- */

int cmd_annotate(int argc, char **argv)
{
	struct annotate_opts o = { .context = 3, .color = -1 };
	static const struct option longopts[] = {
		{ "format", required_argument, 0, 'f' },
		{ "output", required_argument, 0, 'o' },
		{ "native", no_argument, 0, 'n' },
		{ "diff", required_argument, 0, 'D' },
		{ "absolute", no_argument, 0, 'a' },
		{ "strip-prefix", required_argument, 0, 'S' },
		{ "json", no_argument, 0, 'j' },
		{ "full", no_argument, 0, 'F' },
		{ "context", required_argument, 0, 'C' },
		{ "event", required_argument, 0, 'e' },
		{ "color", required_argument, 0, 'c' },
		{ "pid", required_argument, 0, 'p' },
		{ "tid", required_argument, 0, 't' },
		{ "no-idle", no_argument, 0, 'I' },
		{ "asm", no_argument, 0, 'A' },
		{ "type", required_argument, 0, 'Y' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	int ch;
	uint32_t v;
	while ((ch = getopt_long(argc, argv, "f:o:C:e:p:t:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'f':
			if (!strcmp(optarg, "html"))
				o.html = 1;
			else if (!strcmp(optarg, "json"))
				o.json = 1;
			else if (strcmp(optarg, "text")) {
				errorf("invalid --format '%s': expected text, json or html", optarg);
				return 2;
			}
			break;
		case 'o':
			o.out_dir = optarg;
			break;
		case 'n':
			o.native = 1;
			break;
		case 'D':
			o.diff = optarg;
			break;
		case 'a':
			o.absolute = 1;
			break;
		case 'S':
			if (o.nstrip == sizeof(o.strip) / sizeof(o.strip[0]) || !*optarg) {
				errorf(*optarg ? "too many --strip-prefix" : "--strip-prefix needs a directory");
				return 2;
			}
			o.strip[o.nstrip++] = optarg;
			break;
		case 'j':
			o.json = 1;
			break;
		case 'F':
			o.full = 1;
			break;
		case 'C':
			if (parse_u32(optarg, 0, 1000, &v)) {
				errorf("invalid --context '%s': expected 0..1000 lines", optarg);
				return 2;
			}
			o.context = (int)v;
			break;
		case 'e':
			o.event_name = optarg;
			break;
		case 'c':
			if (!strcmp(optarg, "auto"))
				o.color = -1;
			else if (!strcmp(optarg, "always"))
				o.color = 1;
			else if (!strcmp(optarg, "never"))
				o.color = 0;
			else {
				errorf("invalid --color '%s': expected auto, always or never", optarg);
				return 2;
			}
			break;
		case 'p':
			if (parse_u32(optarg, 1, UINT32_MAX, &o.pid)) {
				errorf("invalid --pid '%s'", optarg);
				return 2;
			}
			break;
		case 't':
			if (parse_u32(optarg, 1, UINT32_MAX, &o.tid)) {
				errorf("invalid --tid '%s'", optarg);
				return 2;
			}
			break;
		case 'I':
			o.no_idle = 1;
			break;
		case 'Y':
			o.type = optarg;
			break;
		case 'A':
			o.asm_ = 1;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		default:
			die_usage(usage_text);
		}
	}
	if (optind >= argc || argc - optind > 2) {
		errorf(optind >= argc ? "no profile file given" : "too many arguments");
		die_usage(usage_text);
	}
	o.path = argv[optind];
	o.target = argc - optind == 2 ? argv[optind + 1] : NULL;
	if (annotate_html_usage(&o))
		return 2;
	if (o.color < 0) {
		const char *nc = getenv("NO_COLOR");
		o.color = isatty(STDOUT_FILENO) && !(nc && *nc);
	}
	if (o.json)
		o.color = 0;

	struct profile *p = cli_load_profile(o.path, NULL, o.type);
	if (!p)
		return 1;
	/* Allocations carry no time samples: hottest by their bytes. */
	if (o.type && !o.event_name)
		o.event = p->obj_event + 1;
	if (o.event_name) {
		for (o.event = 0; o.event < p->nevents && strcmp(p->event_names[o.event], o.event_name); o.event++)
			;
		if (o.event == p->nevents) {
			errorf("%s: the profile has no event '%s'", o.path, o.event_name);
			profile_free(p);
			return 1;
		}
	}
	struct agg_filter f = { .pid = o.pid, .tid = o.tid, .exclude_idle = o.no_idle };
	struct ctx c = { .p = p, .o = &o };
	int rc0 = 0;
	c.lc = linecost_build(p, &f, 1u << PK_PYTHON | 1u << PK_JIT);
	c.src = source_cache_new();
	if (!c.lc || !c.src) {
		errorf("%s: out of memory", o.path);
		linecost_free((struct linecost *)c.lc);
		source_cache_free(c.src);
		profile_free(p);
		return 1;
	}
	c.nr = profile_ratios(p, c.rt);
	if (o.target && !(c.agg = profile_aggregate(p, &f, 0))) {
		errorf("%s: out of memory", o.path);
		rc0 = 1;
	}
	if (o.asm_ && !rc0 && !o.json && !(c.jasm = jasm_build(p, &f))) {
		errorf("%s: out of memory", o.path);
		rc0 = 1;
	}
	if (c.jasm && !jasm_sampled(c.jasm))
		warnf("%s: --asm: no samples in JIT code with a machine code image", o.path);
	if (!getcwd(c.cwd, sizeof(c.cwd)))
		c.cwd[0] = 0;
	struct view *views = NULL;
	uint32_t kinds = 1u << PK_PYTHON | 1u << PK_JIT;
	int n = rc0 ? -2 : select_views(&c, kinds, &views);
	if (n == 0 && o.target) {
		/* Not Python code: a C source file or function of a --native
		 * profile (its lines from DWARF, functions inlined into others
		 * at their own lines). Self is then the samples whose
		 * innermost native frame is at the line. */
		free(views);
		views = NULL;
		linecost_free((struct linecost *)c.lc);
		kinds = 1u << PK_NATIVE;
		if (!(c.lc = linecost_build(p, &f, kinds)))
			n = -1;
		else
			n = select_views(&c, kinds, &views);
	}
	int rc = rc0;
	if (n == -2) {
		/* said why */
	} else if (n < 0) {
		errorf("%s: out of memory", o.path);
		rc = 1;
	} else if (n == 0 && o.target) {
		errorf("%s: no profiled source file or function matches '%s'", o.path, o.target);
		rc = 1;
	} else if (o.html) {
		rc = annotate_html(&c, &f, n > 0 && o.target ? &views[0] : NULL);
	} else if (o.json) {
		if (annotate_json(&c, views, n)) {
			errorf("writing the annotation failed");
			rc = 1;
		}
	} else {
		if (n == 0)
			printf("(no Python source with samples to show)\n");
		for (int i = 0; i < n; i++)
			print_view(&c, &views[i]);
		if (!o.target && (uint32_t)n < c.lc->nfiles) {
			uint64_t s = 0;
			for (uint32_t i = 0; i < c.lc->nfiles; i++)
				if (source_nlines(c.src, c.lc->files[i].path) < 0)
					s += c.lc->files[i].self[0];
			printf("(%u more file%s with %" PRIu64 " samples self have no readable source, e.g. frozen "
			       "modules; name one to list its lines)\n",
			       c.lc->nfiles - (uint32_t)n, c.lc->nfiles - (uint32_t)n == 1 ? "" : "s", s);
		}
	}
	if (!rc && (fflush(stdout) || ferror(stdout))) {
		errorf("writing the annotation failed: %s", strerror(errno));
		rc = 1;
	}
	free(views);
	jasm_free(c.jasm);
	agg_free((struct agg *)c.agg);
	linecost_free((struct linecost *)c.lc);
	source_cache_free(c.src);
	profile_free(p);
	return rc;
}
