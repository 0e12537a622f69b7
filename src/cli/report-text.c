/*
 * report-text.c — `strata report`'s terminal tables: the header, the
 * hottest functions and lines (with a column per recorded event and
 * ratio), and the threads and processes; see report.h. Apart from the
 * JSON (report-json.c) because it is all layout: column widths, cutting
 * names and paths to fit, and sanitising text from the profiled program
 * before it reaches the terminal.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "lib/profile.h"
#include "lib/ratios.h"
#include "lib/source.h"
#include "report-tasks.h"
#include "report-types.h"
#include "report.h"

/* Event columns a table shows at most (the JSON has every event). */
#define EVENTS_SHOWN_MAX 8

/* ---- text helpers ------------------------------------------------------ */

/* Display width of UTF-8 text: one column per code point (wide characters
 * are rare in names and paths; alignment is best effort for them). */
static size_t text_width(const char *s)
{
	size_t w = 0;
	for (; *s; s++)
		w += ((uint8_t)*s & 0xC0) != 0x80;
	return w;
}

/* Copies s into out (size n) with control characters replaced by '?', so
 * that names from the profiled program cannot drive the terminal. */
static void sanitize(char *out, size_t n, const char *s)
{
	size_t o = 0;
	for (; *s && o + 1 < n; s++) {
		uint8_t c = (uint8_t)*s;
		out[o++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	/* Never end inside a multi-byte character. */
	while (o > 0 && ((uint8_t)out[o - 1] & 0x80)) {
		size_t start = o - 1;
		while (start > 0 && ((uint8_t)out[start] & 0xC0) == 0x80)
			start--;
		uint8_t lead = (uint8_t)out[start];
		size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
		if (o - start >= need)
			break;
		o = start;
	}
	out[o] = 0;
}

enum { PAD_LEFT, PAD_RIGHT, NO_PAD };

/* Prints s in `width` columns: padded (align: text left, text right, or
 * not padded for the last column), or cut with "..." on the left
 * (keep_end: the informative end of a path or qualified name) or on the
 * right. */
static void put_cell(const char *s, size_t width, int keep_end, int align)
{
	char clean[1024];
	sanitize(clean, sizeof(clean), s ? s : "");
	size_t w = text_width(clean);
	if (w > width) {
		size_t drop = w - width + (width >= 3 ? 3 : 0), i = 0, seen = 0;
		if (width < 3) {
			/* Too narrow for an ellipsis. */
			for (; clean[i] && seen < width; i++)
				seen += ((uint8_t)clean[i] & 0xC0) != 0x80;
			while (((uint8_t)clean[i] & 0xC0) == 0x80)
				i++;
			fwrite(clean, 1, i, stdout);
			return;
		}
		if (keep_end) {
			/* Skip `drop` code points from the start. */
			for (; clean[i] && seen < drop; i++)
				seen += ((uint8_t)clean[i] & 0xC0) != 0x80;
			while (((uint8_t)clean[i] & 0xC0) == 0x80)
				i++;
			fputs("...", stdout);
			fputs(clean + i, stdout);
		} else {
			size_t keep = w - drop;
			for (; clean[i]; i++) {
				if (((uint8_t)clean[i] & 0xC0) != 0x80) {
					if (seen == keep)
						break;
					seen++;
				}
			}
			fwrite(clean, 1, i, stdout);
			fputs("...", stdout);
		}
		return;
	}
	if (align == PAD_RIGHT)
		printf("%*s", (int)(width - w), "");
	fputs(clean, stdout);
	if (align == PAD_LEFT)
		printf("%*s", (int)(width - w), "");
}

static int digits(uint64_t v)
{
	int d = 1;
	while (v >= 10) {
		v /= 10;
		d++;
	}
	return d;
}

static double pct(uint64_t v, uint64_t total) { return total ? 100.0 * (double)v / (double)total : 0.0; }

static int term_width(void)
{
	struct winsize ws;
	if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 80)
		return ws.ws_col;
	return 80;
}

/* A path as the user would type it: relative to the current directory
 * when it is under it. */
static const char *short_path(const char *file, const char *cwd)
{
	size_t n = strlen(cwd);
	if (n > 1 && strncmp(file, cwd, n) == 0 && file[n] == '/')
		return file + n + 1;
	return file;
}

/* A JIT function's name in a table column: Numba's carry their signature,
 * "__main__.kernel(float64[::1], int64)"; when that does not fit, the
 * signature is what goes ("__main__.kernel(...)"), not the name. */
static const char *table_name(const struct pfunc *f, size_t width, char *buf, size_t n)
{
	const char *par = f->kind == PK_JIT ? strchr(f->name, '(') : NULL;
	if (!par || strlen(f->name) <= width || (size_t)(par - f->name) + 6 > n)
		return f->name;
	snprintf(buf, n, "%.*s(...)%s", (int)(par - f->name), f->name, strstr(par, " [") ? strstr(par, " [") : "");
	return buf;
}

/* ---- source lines ----------------------------------------------------- */

/* Line `line` (1-based) of the file, without leading blanks, into out. */
static int src_line(struct source_cache *c, const char *path, uint32_t line, char *out, size_t n)
{
	const char *p;
	size_t len;
	if (source_line(c, path, line, &p, &len))
		return -1;
	while (len && (*p == ' ' || *p == '\t'))
		p++, len--;
	while (len && p[len - 1] == ' ')
		len--;
	if (len >= n)
		len = n - 1;
	memcpy(out, p, len);
	out[len] = 0;
	return 0;
}
/* ---- text ----------------------------------------------------------- */

/* Splits `avail` columns between two text columns whose natural widths
 * are a and b: each gets what it needs if both fit, else the space is
 * shared with `share_a` percent for the first (never less than 12). */
static void split_width(int avail, int a, int b, int share_a, int *wa, int *wb)
{
	if (avail < 24)
		avail = 24;
	if (a + b <= avail) {
		*wa = a;
		*wb = b;
		return;
	}
	int fa = avail * share_a / 100, fb = avail - fa;
	if (a < fa) {
		*wa = a;
		*wb = avail - a;
	} else if (b < fb) {
		*wb = b;
		*wa = avail - b;
	} else {
		*wa = fa;
		*wb = fb;
	}
	if (*wa < 12)
		*wa = 12;
	if (*wb < 12)
		*wb = 12;
}

/* An extension module's file name without CPython's ABI tag:
 * "_umath.cpython-311-x86_64-linux-gnu.so" -> "_umath.so". */
static const char *short_object(const char *name, char *buf, size_t n)
{
	const char *tag = strstr(name, ".cpython-");
	const char *so = tag ? strstr(tag, ".so") : NULL;
	if (!tag || !so)
		return name;
	snprintf(buf, n, "%.*s%s", (int)(tag - name), name, so);
	return buf;
}

/* The name a table shows. Python names as they are; a native C++ name
 * loses its parameter list, " const", clone suffixes and the insides of
 * template arguments (the JSON keeps the whole name), and an unnamed
 * function's object loses CPython's ABI tag, so that a narrow column
 * still shows which function it is rather than the tail of its
 * signature. */
static const char *display_name(const struct pfunc *f, char *buf, size_t n)
{
	if (f->kind != PK_NATIVE || !f->name)
		return f->name;
	const char *s = f->name;
	size_t o = 0;
	if (strstr(s, ".so+0x"))  /* object.cpython-311-x86_64-linux-gnu.so+0x1fb0 */
		return short_object(s, buf, n);
	int tmpl = 0;
	for (; *s && o + 8 < n; s++) {
		if (!strncmp(s, " [clone ", 8))
			break;
		if (*s == '(' && tmpl == 0) {
			/* "(anonymous namespace)" is part of a name; a parameter
			 * list ends it unless a scope follows. */
			if (!strncmp(s, "(anonymous namespace)", 21)) {
				memcpy(buf + o, "(anon)", 6);
				o += 6;
				s += 20;
				continue;
			}
			const char *e = s;
			int d = 0;
			for (; *e; e++) {
				if (*e == '(')
					d++;
				else if (*e == ')' && --d == 0)
					break;
			}
			if (*e && e[1] == ':' && e[2] == ':') {
				s = e;
				continue;
			}
			break;
		}
		if (*s == '<') {
			if (tmpl++ == 0) {
				buf[o++] = '<';
				buf[o++] = '.';
				buf[o++] = '.';
			}
			continue;
		}
		if (*s == '>' && tmpl > 0) {
			if (--tmpl == 0)
				buf[o++] = '>';
			continue;
		}
		if (tmpl == 0)
			buf[o++] = *s;
	}
	buf[o] = 0;
	/* A template function's demangled name starts with its return type. */
	char *sp = strrchr(buf, ' ');
	if (sp && sp[1] && !strstr(buf, "operator"))
		memmove(buf, sp + 1, strlen(sp + 1) + 1);
	return o ? buf : f->name;
}

/* The name in a table cell `width` wide. */
static const char *shown_name(const struct pfunc *f, size_t width, char *buf, size_t n)
{
	if (f->kind == PK_JIT)
		return table_name(f, width, buf, n);
	return display_name(f, buf, n);
}

/* Where a function's frame is: file:line, or for native code without
 * debug information the object it is in. */
static void location(char *out, size_t n, const struct pfunc *fn, uint32_t line, const char *cwd)
{
	const char *file = fn->file;
	if ((!file || !*file) && fn->module && *fn->module) {
		const char *b = strrchr(fn->module, '/');
		char sb[1024];
		snprintf(out, n, "%s", short_object(b && b[1] ? b + 1 : fn->module, sb, sizeof(sb)));
		return;
	}
	const char *f = file && *file ? short_path(file, cwd) : "";
	if (!*f)
		snprintf(out, n, "%s", "-");
	else if (line)
		snprintf(out, n, "%s:%u", f, line);
	else
		snprintf(out, n, "%s", f);
}

/* A location cut to `width` columns keeps what identifies it: the file's
 * base name and the line, rather than the tail of a long directory. */
static void fit_location(char *out, size_t n, const struct pfunc *fn, uint32_t line, const char *cwd, int width)
{
	const char *file = fn->file;
	location(out, n, fn, line, cwd);
	if ((int)text_width(out) <= width || !file || !*file)
		return;
	const char *base = strrchr(file, '/');
	base = base && base[1] ? base + 1 : file;
	if (line)
		snprintf(out, n, "%s:%u", base, line);
	else
		snprintf(out, n, "%s", base);
}

/* ---- event columns ----------------------------------------------------- */

/* With -e, every table row gets one column per recorded event (its self
 * count) and one per derived ratio whose parts were recorded. */
struct evcols {
	uint32_t nev;               /* events shown: 1..nevents-1 */
	int w[EVENTS_SHOWN_MAX];    /* width of each event's column */
	struct ratio r[RATIOS_MAX];
	uint32_t nr;
	int rw[RATIOS_MAX];
};

static void evcols_init(struct evcols *c, const struct profile *p, const struct agg_row *const *rows, uint32_t n)
{
	memset(c, 0, sizeof(*c));
	c->nev = p->nevents > 1 ? p->nevents - 1 : 0;
	if (c->nev > EVENTS_SHOWN_MAX)
		c->nev = EVENTS_SHOWN_MAX;
	for (uint32_t e = 0; e < c->nev; e++) {
		uint64_t max = 0;
		for (uint32_t i = 0; i < n; i++)
			max = rows[i]->self[e + 1] > max ? rows[i]->self[e + 1] : max;
		int w = (int)strlen(p->event_names[e + 1]);
		c->w[e] = digits(max) > w ? digits(max) : w;
	}
	c->nr = profile_ratios(p, c->r);
	for (uint32_t i = 0; i < c->nr; i++) {
		int w = (int)strlen(c->r[i].label);
		c->rw[i] = w > 6 ? w : 6;
	}
}

static int evcols_width(const struct evcols *c)
{
	int w = 0;
	for (uint32_t e = 0; e < c->nev; e++)
		w += c->w[e] + 2;
	for (uint32_t i = 0; i < c->nr; i++)
		w += c->rw[i] + 2;
	return w;
}

static void evcols_head(const struct evcols *c, const struct profile *p)
{
	for (uint32_t e = 0; e < c->nev; e++)
		printf("%*s  ", c->w[e], p->event_names[e + 1]);
	for (uint32_t i = 0; i < c->nr; i++)
		printf("%*s  ", c->rw[i], c->r[i].label);
}

static void evcols_row(const struct evcols *c, const uint64_t *v)
{
	for (uint32_t e = 0; e < c->nev; e++)
		printf("%*" PRIu64 "  ", c->w[e], v[e + 1]);
	for (uint32_t i = 0; i < c->nr; i++) {
		double r = ratio_value(&c->r[i], v);
		if (r < 0)
			printf("%*s  ", c->rw[i], "-");
		else if (c->r[i].percent)
			printf("%*.1f%%  ", c->rw[i] - 1, 100.0 * r);
		else
			printf("%*.2f  ", c->rw[i], r);
	}
}

static void print_functions(const struct profile *p, const struct agg *a, const struct report_opts *o, int width,
			    const char *cwd)
{
	uint32_t rows = a->nfuncs;
	if (o->limit && rows > (uint32_t)o->limit)
		rows = (uint32_t)o->limit;
	if (o->event)
		printf("\nHottest functions (by %s %s)\n", o->by_total ? "total" : "self", p->event_names[o->event]);
	else
		printf("\nHottest functions (by %s)\n", o->by_total ? "total" : "self");
	if (!rows) {
		printf("  (no samples)\n");
		return;
	}
	uint64_t max = 0;
	int nw_name = 8, nw_loc = 9;
	char loc[4096];
	for (uint32_t i = 0; i < rows; i++) {
		const struct agg_row *r = &a->funcs[i];
		const struct pfunc *f = &p->funcs[r->func];
		if (r->total[0] > max)
			max = r->total[0];
		char dn[1024];
		int nl = (int)text_width(display_name(f, dn, sizeof(dn)));
		location(loc, sizeof(loc), f, f->line, cwd);
		int ll = (int)text_width(loc);
		nw_name = nl > nw_name ? nl : nw_name;
		nw_loc = ll > nw_loc ? ll : nw_loc;
	}
	int nw = digits(max) > 5 ? digits(max) : 5;
	const struct agg_row **sel = malloc(rows * sizeof(*sel));
	if (!sel)
		return;
	for (uint32_t i = 0; i < rows; i++)
		sel[i] = &a->funcs[i];
	struct evcols ec;
	evcols_init(&ec, p, sel, rows);
	free(sel);
	/* self% self total% total [events ratios] function file:line kind */
	int fixed = 7 + 1 + nw + 2 + 7 + 1 + nw + 2 + 2 + 2 + 6 + evcols_width(&ec);
	int wf, wl;
	split_width(width - fixed, nw_name, nw_loc, 55, &wf, &wl);
	printf("%7s %*s  %7s %*s  ", "self%", nw, "self", "total%", nw, "total");
	evcols_head(&ec, p);
	put_cell("function", (size_t)wf, 0, 0);
	printf("  ");
	put_cell("file:line", (size_t)wl, 0, 0);
	printf("  kind\n");
	for (uint32_t i = 0; i < rows; i++) {
		const struct agg_row *r = &a->funcs[i];
		const struct pfunc *f = &p->funcs[r->func];
		printf("%6.1f%% %*" PRIu64 "  %6.1f%% %*" PRIu64 "  ", pct(r->self[0], a->totals[0]), nw, r->self[0],
		       pct(r->total[0], a->totals[0]), nw, r->total[0]);
		evcols_row(&ec, r->self);
		char dn[1024];
		put_cell(shown_name(f, (size_t)wf, dn, sizeof(dn)), (size_t)wf, 1, 0);
		printf("  ");
		fit_location(loc, sizeof(loc), f, f->line, cwd, wl);
		put_cell(loc, (size_t)wl, 1, 0);
		printf("  %s\n", pkind_name(f->kind));
	}
}

/* Line rows by self cost (of the --event chosen), whatever --sort says:
 * this table is "self". */
static int line_self_cmp(const void *x, const void *y, void *ctx)
{
	const struct agg_row *a = *(const struct agg_row *const *)x, *b = *(const struct agg_row *const *)y;
	uint32_t e = *(const uint32_t *)ctx;
	if (a->self[e] != b->self[e])
		return a->self[e] > b->self[e] ? -1 : 1;
	if (a->self[0] != b->self[0])
		return a->self[0] > b->self[0] ? -1 : 1;
	if (a->total[0] != b->total[0])
		return a->total[0] > b->total[0] ? -1 : 1;
	if (a->func != b->func)
		return a->func < b->func ? -1 : 1;
	return a->line < b->line ? -1 : a->line > b->line;
}

static void print_lines(const struct profile *p, const struct agg *a, const struct report_opts *o, int width,
			const char *cwd, struct source_cache *sc)
{
	/* Only lines that were executing (self > 0) are "hot lines". */
	uint32_t rows = 0;
	const struct agg_row **sel = malloc((a->nlines + 1) * sizeof(*sel));
	if (!sel)
		return;
	for (uint32_t i = 0; i < a->nlines; i++)
		if (a->lines[i].self[0] || a->lines[i].self[o->event])
			sel[rows++] = &a->lines[i];
	uint32_t ev = o->event;
	qsort_r(sel, rows, sizeof(*sel), line_self_cmp, &ev);
	if (o->limit && rows > (uint32_t)o->limit)
		rows = (uint32_t)o->limit;
	if (o->event)
		printf("\nHottest lines (self %s)\n", p->event_names[o->event]);
	else
		printf("\nHottest lines (self)\n");
	if (!rows) {
		printf("  (no samples)\n");
		free(sel);
		return;
	}
	uint64_t max = 0;
	int nw_loc = 9, nw_fn = 8;
	char loc[4096];
	for (uint32_t k = 0; k < rows; k++) {
		const struct agg_row *r = sel[k];
		const struct pfunc *f = &p->funcs[r->func];
		if (r->self[0] > max)
			max = r->self[0];
		location(loc, sizeof(loc), f, r->line, cwd);
		char dn[1024];
		int ll = (int)text_width(loc), fl = (int)text_width(display_name(f, dn, sizeof(dn)));
		nw_loc = ll > nw_loc ? ll : nw_loc;
		nw_fn = fl > nw_fn ? fl : nw_fn;
	}
	int nw = digits(max) > 5 ? digits(max) : 5;
	struct evcols ec;
	evcols_init(&ec, p, sel, rows);
	/* self% self [events ratios] file:line function source; the source
	 * text takes what is left, at least 16 columns when the terminal allows. */
	int fixed = 7 + 1 + nw + 2 + 2 + 2 + evcols_width(&ec);
	int avail = width - fixed - 16;
	int wl, wf;
	split_width(avail, nw_loc, nw_fn, 55, &wl, &wf);
	int ws = width - fixed - wl - wf;
	if (ws < 10)
		ws = 10;
	printf("%7s %*s  ", "self%", nw, "self");
	evcols_head(&ec, p);
	put_cell("file:line", (size_t)wl, 0, 0);
	printf("  ");
	put_cell("function", (size_t)wf, 0, 0);
	printf("  source\n");
	char text[1024];
	for (uint32_t k = 0; k < rows; k++) {
		const struct agg_row *r = sel[k];
		const struct pfunc *f = &p->funcs[r->func];
		printf("%6.1f%% %*" PRIu64 "  ", pct(r->self[0], a->totals[0]), nw, r->self[0]);
		evcols_row(&ec, r->self);
		fit_location(loc, sizeof(loc), f, r->line, cwd, wl);
		put_cell(loc, (size_t)wl, 1, 0);
		printf("  ");
		int has_src = (f->kind == PK_PYTHON || f->kind == PK_NATIVE || f->kind == PK_JIT) &&
			      src_line(sc, f->file, r->line, text, sizeof(text)) == 0;
		char dn[1024];
		put_cell(shown_name(f, (size_t)wf, dn, sizeof(dn)), (size_t)wf, 1, has_src ? PAD_LEFT : NO_PAD);
		if (has_src) {
			printf("  ");
			put_cell(text, (size_t)ws, 0, NO_PAD);
		}
		printf("\n");
	}
	free(sel);
}

static void print_threads(const struct profile *p, const struct agg *a, const struct report_opts *o, int width)
{
	uint32_t n;
	uint32_t *ids = selected_threads(p, a, o, &n);
	if (!ids)
		return;
	printf("\nThreads\n");
	if (!n) {
		printf("  (none)\n");
		free(ids);
		return;
	}
	uint64_t max = 0;
	uint32_t maxpid = 0, maxtid = 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct pthread_info *t = &p->threads[ids[i]];
		max = a->thread_samples[ids[i]] > max ? a->thread_samples[ids[i]] : max;
		maxpid = t->pid > maxpid ? t->pid : maxpid;
		maxtid = t->tid > maxtid ? t->tid : maxtid;
	}
	int wall = p->mode == MODE_WALL;
	int nw = digits(max) > 7 ? digits(max) : 7;
	int pw = digits(maxpid) > 5 ? digits(maxpid) : 5, tw = digits(maxtid) > 5 ? digits(maxtid) : 5;
	int fixed = pw + 2 + tw + 2 + nw + 2 + 7 + 2 + (wall ? nw + 2 + 2 : 0);
	int wn = width - fixed;
	if (wn > 32)
		wn = 32;
	if (wn < 8)
		wn = 8;
	printf("%*s  %*s  %*s  %7s  ", pw, "pid", tw, "tid", nw, "samples", "share");
	if (wall)
		printf("%*s  ", nw, "idle");
	printf("name\n");
	for (uint32_t i = 0; i < n; i++) {
		const struct pthread_info *t = &p->threads[ids[i]];
		uint64_t s = a->thread_samples[ids[i]];
		printf("%*u  %*u  %*" PRIu64 "  %6.1f%%  ", pw, t->pid, tw, t->tid, nw, s, pct(s, a->totals[0]));
		if (wall)
			printf("%*" PRIu64 "  ", nw, a->thread_idle[ids[i]]);
		put_cell(t->name, (size_t)wn, 0, NO_PAD);
		printf("\n");
	}
	free(ids);
}

static void print_processes(const struct profile *p, const struct agg *a, const struct report_opts *o, int width)
{
	printf("\nProcesses\n");
	uint64_t max = 0;
	uint32_t maxpid = 0, n = 0;
	for (uint32_t i = 0; i < p->nprocs; i++) {
		if (!proc_selected(p, i, o))
			continue;
		n++;
		uint64_t s = proc_samples(p, a, i);
		max = s > max ? s : max;
		maxpid = p->procs[i].pid > maxpid ? p->procs[i].pid : maxpid;
	}
	if (!n) {
		printf("  (none)\n");
		return;
	}
	int nw = digits(max) > 7 ? digits(max) : 7, pw = digits(maxpid) > 5 ? digits(maxpid) : 5;
	int fixed = pw + 2 + nw + 2 + 7 + 2 + 7 + 2 + 7 + 2;
	int wc = width - fixed;
	if (wc < 16)
		wc = 16;
	printf("%*s  %*s  %7s  %7s  %7s  command\n", pw, "pid", nw, "samples", "share", "threads", "dropped");
	for (uint32_t i = 0; i < p->nprocs; i++) {
		if (!proc_selected(p, i, o))
			continue;
		const struct pprocess *pr = &p->procs[i];
		uint64_t s = proc_samples(p, a, i);
		printf("%*u  %*" PRIu64 "  %6.1f%%  %7u  %7" PRIu64 "  ", pw, pr->pid, nw, s, pct(s, a->totals[0]),
		       proc_threads(p, i), pr->dropped);
		put_cell(pr->command ? pr->command : "", (size_t)wc, 0, NO_PAD);
		printf("\n");
	}
}

static void print_header(const struct profile *p, const struct agg *a, const struct report_opts *o, int width)
{
	uint32_t nthreads;
	uint32_t *ids = selected_threads(p, a, o, &nthreads);
	free(ids);
	uint32_t nprocs = count_procs(p, o);
	printf("Command: ");
	put_cell(p->command ? p->command : "?", (size_t)(width - 9), 0, NO_PAD);
	printf("\n");
	printf("%" PRIu64 " samples", a->totals[0]);
	if (o->pid || o->tid || o->no_idle) {
		printf(" (of %" PRIu64 "; only", p->totals[0]);
		if (o->pid)
			printf(" pid %u", o->pid);
		if (o->tid)
			printf(" tid %u", o->tid);
		if (o->no_idle)
			printf(" non-idle");
		printf(")");
	}
	const struct pevent_info *lead = p->nevents > 1 ? &p->event_info[1] : NULL;
	if (lead && lead->known && (lead->flags & EVD_SAMPLING))
		printf(" in %.2f s, one every %" PRIu64 " %s%s, %u process%s, %u thread%s, %" PRIu64 " dropped\n",
		       duration_s(p), lead->period, lead->flags & EVD_CLOCK ? "ns of " : "", p->event_names[1], nprocs,
		       nprocs == 1 ? "" : "es", nthreads, nthreads == 1 ? "" : "s", p->dropped);
	else
		printf(" in %.2f s, %s mode at %u Hz, %u process%s, %u thread%s, %" PRIu64 " dropped\n",
		       duration_s(p), p->mode == MODE_WALL ? "wall" : "cpu", p->rate_hz, nprocs, nprocs == 1 ? "" : "es",
		       nthreads, nthreads == 1 ? "" : "s", p->dropped);
	if (p->nevents > 1) {
		printf("Events:");
		for (uint32_t e = 1; e < p->nevents; e++) {
			const struct pevent_info *in = &p->event_info[e];
			printf("%s %s %" PRIu64 "%s%s", e > 1 ? "," : "", p->event_names[e], a->totals[e],
			       in->flags & EVD_CLOCK ? " ns" : "", in->flags & EVD_USER_ONLY ? " (user space only)" : "");
		}
		printf("\n");
	}
	if (p->native.samples) {
		uint64_t bad = p->native.failed + p->native.truncated;
		printf("native stacks: %" PRIu64 " samples, %.1f%% cut short%s\n", p->native.samples,
		       pct(bad, p->native.samples), bad ? " (shown under [native stack incomplete])" : "");
	}
}

void report_text(const struct profile *p, const struct agg *a, const struct report_opts *o)
{
	int width = term_width();
	char cwd[4096];
	if (!getcwd(cwd, sizeof(cwd)))
		cwd[0] = 0;
	struct source_cache *sc = source_cache_new();
	print_header(p, a, o, width);
	print_functions(p, a, o, width, cwd);
	if (sc)
		print_lines(p, a, o, width, cwd, sc);
	struct agg_filter f = { .pid = o->pid, .tid = o->tid };
	report_types_text(p, &f, o->limit);
	report_tasks_text(p, &f, o->limit);
	print_threads(p, a, o, width);
	print_processes(p, a, o, width);
	source_cache_free(sc);
}
