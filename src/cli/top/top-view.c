/*
 * top-view.c — drawing `strata top`: an ncurses screen that fits 80x24 and
 * uses what a larger one offers, or plain periodic text (--no-curses, or
 * when the output is not a terminal). Text from the profiled program is
 * cleaned of control characters before it reaches the terminal.
 */
#include <curses.h>
#include <locale.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "top.h"

static SCREEN *screen;

/* Control characters out, and never more than n-1 bytes. */
static void clean(char *out, size_t n, const char *s)
{
	size_t o = 0;
	for (; s && *s && o + 1 < n; s++) {
		unsigned char c = (unsigned char)*s;
		out[o++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	out[o] = 0;
}

/* Cuts s to `w` display columns (counting code points), with "..." at
 * the start (keep_end) or the end. */
static void fit(char *out, size_t n, const char *s, int w, int keep_end)
{
	char c[1024];
	clean(c, sizeof(c), s);
	int cols = 0;
	for (const char *q = c; *q; q++)
		cols += ((unsigned char)*q & 0xC0) != 0x80;
	if (cols <= w || w < 4) {
		snprintf(out, n, "%s", c);
		if (cols > w && w >= 0) {
			/* Too narrow for "...": cut at w code points. */
			int seen = 0;
			size_t i = 0;
			for (; out[i]; i++) {
				if (((unsigned char)out[i] & 0xC0) != 0x80) {
					if (seen == w)
						break;
					seen++;
				}
			}
			out[i] = 0;
		}
		return;
	}
	int drop = cols - w + 3, seen = 0;
	size_t i = 0;
	if (keep_end) {
		for (; c[i] && seen < drop; i++)
			seen += ((unsigned char)c[i] & 0xC0) != 0x80;
		while (((unsigned char)c[i] & 0xC0) == 0x80)
			i++;
		snprintf(out, n, "...%.*s", (int)(n > 4 ? n - 4 : 0), c + i);
	} else {
		int keep = cols - drop;
		for (; c[i]; i++) {
			if (((unsigned char)c[i] & 0xC0) != 0x80) {
				if (seen == keep)
					break;
				seen++;
			}
		}
		snprintf(out, n, "%.*s...", (int)i, c);
	}
}

static void fmt_duration(char *out, size_t n, double s)
{
	if (s < 60)
		snprintf(out, n, "%.1fs", s);
	else if (s < 3600)
		snprintf(out, n, "%dm%02ds", (int)s / 60, (int)s % 60);
	else
		snprintf(out, n, "%dh%02dm", (int)s / 3600, (int)s % 3600 / 60);
}

static const char *event_name(const struct profile *p, const struct top_frame *f)
{
	return f->event < p->nevents ? p->event_names[f->event] : "samples";
}

/* 950, 12.3k, 4.1M: counts and rates in a few columns. */
static void fmt_count(char *out, size_t n, double v)
{
	if (v < 999.5)
		snprintf(out, n, "%.0f", v);
	else if (v < 999.5e3)
		snprintf(out, n, "%.1fk", v / 1e3);
	else if (v < 999.5e6)
		snprintf(out, n, "%.1fM", v / 1e6);
	else
		snprintf(out, n, "%.1fG", v / 1e9);
}

static void fmt_bytes(char *out, size_t n, double v)
{
	static const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int u = 0;
	while (v >= 999.95 && u < 4) { /* at most "999.9 KiB" */
		v /= 1024;
		u++;
	}
	snprintf(out, n, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
}

/* The numbers of an objects-view row, in the columns of OBJ_HDR. */
#define OBJ_HDR "%9s %9s %7s %9s %9s  "
#define OBJ_HDR_ALL "%7s %9s %9s  " /* since start only */
static const char *const obj_cols[] = { "objects/s", "bytes/s", "objects", "bytes", "live" };
static const int obj_x[] = { 0, 10, 20, 28, 38 }; /* where each column starts */
static const int obj_w[] = { 9, 9, 7, 9, 9 };
#define OBJ_W 49

/* all_only: the since-start columns alone (the final table). */
static void obj_numbers(char *out, size_t n, const struct top_obj_row *r, int all_only)
{
	char a[16], b[16], c[16], d[16], e[16];
	fmt_count(a, sizeof(a), r->last_objects);
	fmt_bytes(b, sizeof(b), r->last_bytes);
	fmt_count(c, sizeof(c), (double)r->all_objects);
	fmt_bytes(d, sizeof(d), (double)r->all_bytes);
	fmt_bytes(e, sizeof(e), (double)r->live_bytes);
	if (all_only)
		snprintf(out, n, OBJ_HDR_ALL, c, d, e);
	else
		snprintf(out, n, OBJ_HDR, a, b, c, d, e);
}

/* The objects view's first line: totals over the interval and since the start. */
static void obj_summary(char *out, size_t n, const struct top_settings *s, const struct top_frame *f, int all_only)
{
	char a[32], b[32], c[32], d[32], e[32], last[128] = "";
	fmt_count(a, sizeof(a), f->total.last_objects);
	fmt_bytes(b, sizeof(b), f->total.last_bytes);
	fmt_count(c, sizeof(c), (double)f->total.all_objects);
	fmt_bytes(d, sizeof(d), (double)f->total.all_bytes);
	fmt_bytes(e, sizeof(e), (double)f->total.live_bytes);
	if (!all_only)
		snprintf(last, sizeof(last), "%s objects/s  %s/s;  ", a, b);
	snprintf(out, n, "allocated%s%s: %ssince start %s objects  %s  live %s", s->type[0] ? " " : "", s->type, last,
		 c, d, e);
}

/* ---- curses -------------------------------------------------------------- */

int view_curses_open(void)
{
	/* Names are UTF-8: let ncursesw draw them as characters. */
	setlocale(LC_CTYPE, "");
	/* newterm, not initscr: initscr exits the program on failure. */
	screen = newterm(NULL, stdout, stdin);
	if (!screen)
		return -1;
	set_term(screen);
	cbreak();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	curs_set(0);
	return 0;
}

void view_curses_close(void)
{
	if (!screen)
		return;
	curs_set(1);
	endwin();
	delscreen(screen);
	screen = NULL;
}

int view_curses_key(int timeout_ms)
{
	timeout(timeout_ms);
	int c = getch();
	if (c == KEY_RESIZE)
		return 12; /* redraw, like Ctrl-L */
	return c == ERR ? -1 : c;
}

static int W, H;

static void put(int y, int x, int attr, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void put(int y, int x, int attr, const char *fmt, ...)
{
	if (y < 0 || y >= H || x >= W)
		return;
	char buf[1024], c[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fit(c, sizeof(c), buf, W - x, 0);
	attron(attr);
	mvaddstr(y, x, c);
	attroff(attr);
}

#define ROW_FIRST 5

void view_curses_draw(const struct profile *p, const struct top_settings *s, const struct top_frame *f,
		      const struct top_status *st)
{
	getmaxyx(stdscr, H, W);
	erase();
	char el[32], thr[128], proc[64], cmd[512];
	fmt_duration(el, sizeof(el), f->elapsed_s);
	top_filter_text(p, s, thr, sizeof(thr), proc, sizeof(proc));

	char right[64];
	snprintf(right, sizeof(right), "  pid %d", (int)st->pid);
	int rw = (int)strlen(right);
	fit(cmd, sizeof(cmd), st->command ? st->command : "", W - 11 - rw, 1);
	put(0, 0, A_BOLD, "strata top %s", cmd);
	put(0, W - rw > 0 ? W - rw : 0, 0, "%s", right);

	put(1, 0, 0, "samples %llu  %.0f/s  dropped %llu (+%llu)  procs %u  threads %u  %s", (unsigned long long)f->samples_all,
	    f->rate, (unsigned long long)f->dropped, (unsigned long long)f->dropped_last, f->procs, f->threads, el);
	const char *samp = st->sampling > 0 ? "sampling ON" : st->sampling == 0 ? "sampling OFF" : "sampling ?";
	put(2, 0, st->sampling == 0 ? A_REVERSE : 0, "%s", samp);
	int x = (int)strlen(samp) + 2;
	char ev[96];
	if (p->nevents > 1 && !s->objects)
		snprintf(ev, sizeof(ev), "  event %s", event_name(p, f));
	else
		ev[0] = 0;
	char ty[600] = "";
	if (s->type[0] || s->objects)
		snprintf(ty, sizeof(ty), "  type %s", s->type[0] ? s->type : "all");
	if (s->task[0])
		snprintf(ty + strlen(ty), sizeof(ty) - strlen(ty), "  task %s", s->task);
	put(2, x, 0, "%s%s  thread %s  process %s%s%s", s->objects ? "objects by " : "", s->lines ? "lines" : "functions",
	    thr, proc, ty, ev);
	if (st->frozen)
		put(2, W - 8 > 0 ? W - 8 : 0, A_REVERSE, " FROZEN ");
	if (s->objects) {
		view_objects_draw(p, s, f, 3);
		goto bottom;
	}

	char lastw[32];
	snprintf(lastw, sizeof(lastw), "last %.1fs", f->interval_s);
	put(3, 0, A_BOLD, "  %-13s  since start", lastw);
	/* The column rows are sorted by, highlighted. */
	const char *hdr[4] = { " self%", "total%", " self%", "total%" };
	int sorted = (s->window_all ? 2 : 0) + (s->sort == SORT_TOTAL);
	int hx[4] = { 0, 7, 15, 22 };
	for (int i = 0; i < 4; i++)
		put(4, hx[i], i == sorted ? A_REVERSE : A_BOLD, "%s", hdr[i]);
	int locw = W >= 100 ? 32 : 22;
	int namew = W - 30 - locw - 1;
	if (namew < 12) {
		namew = W - 30 > 12 ? W - 30 - 12 : 12;
		locw = W - 30 - namew - 1;
	}
	put(4, 30, A_BOLD, "%-*s %s", namew, s->lines ? "line (function)" : "function", "file:line");

	int last = H - 2;
	for (uint32_t i = 0; i < f->nrows && ROW_FIRST + (int)i <= last; i++) {
		const struct top_row *r = &f->rows[i];
		char name[512], loc[512], n2[512], l2[512];
		top_row_text(p, s, r, name, sizeof(name), loc, sizeof(loc));
		fit(n2, sizeof(n2), name, namew, 1);
		fit(l2, sizeof(l2), loc, locw > 0 ? locw : 0, 1);
		put(ROW_FIRST + (int)i, 0, 0, "%6.1f %6.1f  %6.1f %6.1f  %-*s %s", r->last_self, r->last_total, r->all_self,
		    r->all_total, namew, n2, l2);
	}
bottom:
	if (st->prompt)
		put(H - 1, 0, A_REVERSE, "%s", st->prompt);
	else if (st->message)
		put(H - 1, 0, A_BOLD, "%s", st->message);
	else
		put(H - 1, 0, 0, "q quit  p sampling  space freeze  l lines  s/t sort  o objects  w save  ? keys");
	refresh();
}

/* A table of the objects view: header at y, rows up to y_end. */
static int obj_table(const struct profile *p, const struct top_settings *s, const struct top_obj_row *rows,
		     uint32_t n, int types, int y, int y_end)
{
	int sorted = (s->window_all ? 2 : 0) + (s->sort == SORT_TOTAL);
	for (int i = 0; i < 5; i++) {
		put(y, obj_x[i], i == sorted ? A_REVERSE : A_BOLD, "%*s", obj_w[i], obj_cols[i]);
	}
	int locw = W >= 110 ? 32 : 22;
	int namew = W - OBJ_W - (types ? 0 : locw + 1);
	if (namew < 12) {
		namew = 12;
		locw = W - OBJ_W - namew - 1;
	}
	if (types)
		put(y, OBJ_W, A_BOLD, "type");
	else
		put(y, OBJ_W, A_BOLD, "%-*s %s", namew, s->lines ? "line (function)" : "function", "file:line");
	y++;
	for (uint32_t i = 0; i < n && y < y_end; i++, y++) {
		char num[256], name[512], loc[512], n2[512], l2[512];
		obj_numbers(num, sizeof(num), &rows[i], 0);
		if (types) {
			put(y, 0, 0, "%s%s", num, p->types[rows[i].type]);
			continue;
		}
		struct top_row tr = { .func = rows[i].func, .line = rows[i].line };
		top_row_text(p, s, &tr, name, sizeof(name), loc, sizeof(loc));
		fit(n2, sizeof(n2), name, namew, 1);
		fit(l2, sizeof(l2), loc, locw > 0 ? locw : 0, 1);
		put(y, 0, 0, "%s%-*s %s", num, namew, n2, l2);
	}
	return y;
}

void view_objects_draw(const struct profile *p, const struct top_settings *s, const struct top_frame *f, int y)
{
	if (!f->has_objects) {
		put(y + 1, 0, 0, "No allocation recorded: start the program with strata top --objects (or record");
		put(y + 2, 0, 0, "--objects); 'o' goes back to the functions and lines.");
		return;
	}
	char sum[512];
	obj_summary(sum, sizeof(sum), s, f, 0);
	put(y++, 0, 0, "%s", sum);
	if (f->type_missing)
		put(y++, 0, A_BOLD, "no allocation of type '%s' recorded yet ('y': next type)", s->type);
	/* The types, then the lines: about half the screen each, the types
	 * no more than they are. */
	int room = H - 2 - y - 2;
	int ty = (int)f->ntypes < room / 2 ? (int)f->ntypes : room / 2;
	if (ty < 1)
		ty = 1;
	y = obj_table(p, s, f->types, f->ntypes, 1, y, y + 1 + ty);
	obj_table(p, s, f->orows, f->norows, 0, y + 1, H - 1);
}

void view_curses_help(void)
{
	static const char *lines[] = {
		"strata top keys",
		"",
		"  q        quit (asks whether to stop a program top started)",
		"  p        pause / resume sampling in the program",
		"  space    freeze / unfreeze the display (sampling goes on)",
		"  l        functions / lines",
		"  s  t     sort by self / total",
		"  a        sort by the last interval / since start",
		"  e        next event column (with strata record -e)",
		"  o        objects view: allocations by type and line (--objects)",
		"  y        next type filter (cycles back to all)",
		"  k        next asyncio task filter (busiest first, cycles back to all)",
		"  T  P     next thread / process filter (cycles back to all)",
		"  w        save what was collected so far to a .strata file",
		"",
		"self: samples whose innermost frame is the function or line;",
		"total: samples with it anywhere on the stack.",
		"objects view: s/t sort by objects/bytes; a line's are the objects",
		"it made itself (estimated from the allocation samples).",
		"",
		"any key to go back",
	};
	getmaxyx(stdscr, H, W);
	erase();
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
		put((int)i, 0, i == 0 ? A_BOLD : 0, "%s", lines[i]);
	refresh();
	timeout(-1);
	getch();
}

/* ---- plain text ----------------------------------------------------------- */

void view_plain_print(const struct profile *p, const struct top_settings *s, const struct top_frame *f,
		      const struct top_status *st, int rows, int all_only)
{
	char el[32];
	fmt_duration(el, sizeof(el), f->elapsed_s);
	if (all_only)
		printf("strata top  %s  pid %d  samples %llu  dropped %llu  procs %u  threads %u\n", el, (int)st->pid,
		       (unsigned long long)f->samples_all, (unsigned long long)f->dropped, f->procs, f->threads);
	else
		printf("strata top  %s  pid %d  samples %llu (%.0f/s)  dropped %llu  procs %u  threads %u  sampling %s\n",
		       el, (int)st->pid, (unsigned long long)f->samples_all, f->rate, (unsigned long long)f->dropped,
		       f->procs, f->threads, st->sampling > 0 ? "on" : st->sampling == 0 ? "off" : "?");
	if (s->objects) {
		view_objects_print(p, s, f, rows, all_only);
		return;
	}
	if (p->nevents > 1)
		printf("event %s\n", event_name(p, f));
	if (s->task[0])
		printf("task %s\n", s->task);
	if (all_only)
		printf("  since start\n  self%%  total%%  %s\n", s->lines ? "line" : "function");
	else
		printf("  last %.1fs      since start\n  self%%  total%%   self%%  total%%  %s\n", f->interval_s,
		       s->lines ? "line" : "function");
	for (uint32_t i = 0; i < f->nrows && (int)i < rows; i++) {
		const struct top_row *r = &f->rows[i];
		char name[512], loc[512], n2[512], l2[512];
		top_row_text(p, s, r, name, sizeof(name), loc, sizeof(loc));
		clean(n2, sizeof(n2), name);
		clean(l2, sizeof(l2), loc);
		if (all_only)
			printf("%7.1f %7.1f  %s  %s\n", r->all_self, r->all_total, n2, l2);
		else
			printf("%7.1f %7.1f %7.1f %7.1f  %s  %s\n", r->last_self, r->last_total, r->all_self, r->all_total, n2,
			       l2);
	}
	if (st->message)
		printf("%s\n", st->message);
	printf("\n");
	fflush(stdout);
}

static void obj_print_table(const struct profile *p, const struct top_settings *s, const struct top_obj_row *rows,
			    uint32_t n, int types, int max, int all_only)
{
	const char *what = types ? "type" : s->lines ? "line" : "function";
	if (all_only)
		printf(OBJ_HDR_ALL "%s\n", obj_cols[2], obj_cols[3], obj_cols[4], what);
	else
		printf(OBJ_HDR "%s\n", obj_cols[0], obj_cols[1], obj_cols[2], obj_cols[3], obj_cols[4], what);
	for (uint32_t i = 0; i < n && (int)i < max; i++) {
		char num[256], name[512], loc[512], n2[512], l2[512];
		obj_numbers(num, sizeof(num), &rows[i], all_only);
		if (types) {
			clean(n2, sizeof(n2), p->types[rows[i].type]);
			printf("%s%s\n", num, n2);
			continue;
		}
		struct top_row tr = { .func = rows[i].func, .line = rows[i].line };
		top_row_text(p, s, &tr, name, sizeof(name), loc, sizeof(loc));
		clean(n2, sizeof(n2), name);
		clean(l2, sizeof(l2), loc);
		printf("%s%s  %s\n", num, n2, l2);
	}
}

void view_objects_print(const struct profile *p, const struct top_settings *s, const struct top_frame *f, int rows,
			int all_only)
{
	if (!f->has_objects) {
		printf("no allocation recorded (strata top --objects)\n\n");
		fflush(stdout);
		return;
	}
	char sum[512];
	obj_summary(sum, sizeof(sum), s, f, all_only);
	printf("%s\n", sum);
	if (f->type_missing)
		printf("no allocation of type '%s' recorded yet\n", s->type);
	obj_print_table(p, s, f->types, f->ntypes, 1, rows, all_only);
	obj_print_table(p, s, f->orows, f->norows, 0, rows, all_only);
	printf("\n");
	fflush(stdout);
}
