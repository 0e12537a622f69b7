/*
 * diff-out.c — `strata diff`'s outputs (diff-out.h): the terminal table
 * (names and paths from the profiled program sanitised, cut to the
 * terminal's width) and the JSON object, every row and both sides' values.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "diff-out.h"
#include "lib/json.h"

static const char *by_name(enum diff_by by)
{
	return by == DIFF_BY_LINE ? "line" : by == DIFF_BY_FILE ? "file" : "function";
}

uint32_t *diff_shown_rows(const struct diff_cli *d, uint32_t *n)
{
	const struct diff_result *r = d->r;
	uint32_t *idx = malloc(((size_t)r->nrows + 1) * sizeof(*idx));
	*n = 0;
	if (!idx)
		return NULL;
	if (!d->limit || (uint32_t)d->limit >= r->nrows) {
		for (uint32_t i = 0; i < r->nrows; i++)
			idx[(*n)++] = i;
		return idx;
	}
	/* The rows are by delta: the largest changes either way are at the
	 * two ends; take from whichever end moved more. */
	uint32_t lo = 0, hi = r->nrows, k = 0;
	uint8_t *take = calloc(r->nrows, 1);
	if (!take) {
		free(idx);
		return NULL;
	}
	while (k < (uint32_t)d->limit && lo < hi) {
		if (fabs(r->rows[lo].delta) >= fabs(r->rows[hi - 1].delta))
			take[lo++] = 1;
		else
			take[--hi] = 1;
		k++;
	}
	for (uint32_t i = 0; i < r->nrows; i++)
		if (take[i])
			idx[(*n)++] = i;
	free(take);
	return idx;
}

/* ---- names ------------------------------------------------------------------- */

/* The side a row is named from: NEW's, or BASE's for what vanished. */
static int name_side(const struct diff_row *w) { return w->rep[DIFF_NEW] != PNONE ? DIFF_NEW : DIFF_BASE; }

static const struct pfunc *row_func(const struct diff_cli *d, const struct diff_row *w, uint32_t *line)
{
	int s = name_side(w);
	const struct profile *p = d->p[s];
	uint32_t rep = w->rep[s];
	*line = 0;
	if (rep == PNONE)
		return NULL;
	if (d->q->by == DIFF_BY_LINE) {
		*line = p->frames[rep].line;
		return &p->funcs[p->frames[rep].func];
	}
	*line = p->funcs[rep].line;
	return &p->funcs[rep];
}

static const char *short_path(const char *file, const char *cwd)
{
	size_t n = strlen(cwd);
	if (n > 1 && strncmp(file, cwd, n) == 0 && file[n] == '/')
		return file + n + 1;
	return file;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s && s[1] ? s + 1 : path;
}

/* Where a row's code is: "file:line", "file", or a native object; the
 * file's name alone when its path is longer than `fit` (0: any length). */
static void row_where(const struct diff_cli *d, const struct diff_row *w, const char *cwd, char *buf, size_t n,
		      size_t fit)
{
	uint32_t line;
	const struct pfunc *f = row_func(d, w, &line);
	buf[0] = 0;
	if (!f || f->kind == PK_OTHER)
		return;
	if (f->file && f->file[0]) {
		const char *path = short_path(f->file, cwd);
		for (int pass = 0; pass < 2; pass++) {
			if (d->q->by == DIFF_BY_FILE || !line)
				snprintf(buf, n, "%s", path);
			else
				snprintf(buf, n, "%s:%u", path, line);
			if (!fit || strlen(buf) <= fit || d->q->by == DIFF_BY_FILE)
				break;
			path = base_name(path);
		}
	} else if (f->module) {
		snprintf(buf, n, "%s", base_name(f->module));
	}
}

/* ---- amounts -------------------------------------------------------------------- */

/* v in `unit` for a person: time in s/ms/us, bytes in KiB..., counts with
 * a k/M/G suffix and the unit's name ("1.2G cycles"). */
static void amount(double v, const char *unit, int sign, char *buf, size_t n)
{
	const char *sg = sign && v > 0 ? "+" : v < 0 ? "-" : "";
	double a = fabs(v);
	if (!strcmp(unit, "ns")) {
		if (a >= 1e9)
			snprintf(buf, n, "%s%.2f s", sg, a / 1e9);
		else if (a >= 1e6)
			snprintf(buf, n, "%s%.1f ms", sg, a / 1e6);
		else
			snprintf(buf, n, "%s%.0f us", sg, a / 1e3);
	} else if (!strcmp(unit, "bytes")) {
		static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
		int i = 0;
		while (a >= 1024 && i < 4)
			a /= 1024, i++;
		snprintf(buf, n, i ? "%s%.1f %s" : "%s%.0f %s", sg, a, u[i]);
	} else {
		static const char *const u[] = { "", "k", "M", "G", "T" };
		int i = 0;
		while (a >= 1000 && i < 4)
			a /= 1000, i++;
		snprintf(buf, n, i ? "%s%.1f%s %s" : "%s%.0f%s %s", sg, a, u[i], unit);
	}
}

/* ---- text ------------------------------------------------------------------------- */

/* s with control characters replaced (it comes from the profiled
 * program), in `width` columns: cut with "..." at the start (keep_end,
 * for paths) or the end, padded unless last. */
static void cell(const char *s, int width, int keep_end, int last)
{
	char clean[1024];
	size_t o = 0;
	for (; *s && o + 1 < sizeof(clean); s++)
		clean[o++] = (unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s;
	clean[o] = 0;
	int w = 0;
	for (size_t i = 0; i < o; i++)
		w += ((unsigned char)clean[i] & 0xC0) != 0x80;
	if (w <= width || width < 4) {
		fputs(clean, stdout);
		if (!last)
			printf("%*s", width > w ? width - w : 0, "");
		return;
	}
	int drop = w - width + 3, seen = 0;
	size_t i = 0;
	if (keep_end) {
		for (; clean[i] && seen < drop; i++)
			seen += ((unsigned char)clean[i] & 0xC0) != 0x80;
		while (((unsigned char)clean[i] & 0xC0) == 0x80)
			i++;
		printf("...%s", clean + i);
	} else {
		int keep = w - drop;
		for (; clean[i]; i++) {
			if (((unsigned char)clean[i] & 0xC0) != 0x80 && seen++ == keep)
				break;
		}
		fwrite(clean, 1, i, stdout);
		fputs("...", stdout);
	}
}

static int term_width(void)
{
	struct winsize ws;
	if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 80)
		return ws.ws_col;
	return 80;
}

static void side_line(const struct diff_cli *d, int s)
{
	const struct profile *p = d->p[s];
	char amt[64] = "";
	if (d->c->scale[s] > 0)
		amount((double)d->r->all[s] * d->c->scale[s], d->c->unit, 0, amt, sizeof(amt));
	printf("%-5s ", s ? "new" : "base");
	cell(d->path[s], 0, 0, 1);
	printf(": ");
	cell(p->command ? p->command : "", 50, 0, 1);
	printf("\n      %llu samples", (unsigned long long)d->r->nsamples[s]);
	if (d->c->event[s])
		printf(", %llu %s", (unsigned long long)d->r->all[s], d->event);
	if (amt[0])
		printf(" (%s)", amt);
	printf(", %s mode at %u Hz, %.2f s\n", p->mode == MODE_WALL ? "wall" : "cpu", p->rate_hz,
	       p->end_ns > p->start_ns ? (double)(p->end_ns - p->start_ns) / 1e9 : 0.0);
}

void diff_text(const struct diff_cli *d)
{
	const struct diff_result *r = d->r;
	const struct diff_query *q = d->q;
	char cwd[4096];
	if (!getcwd(cwd, sizeof(cwd)))
		cwd[0] = 0;
	side_line(d, 0);
	side_line(d, 1);
	struct diff_file_stats fs;
	diff_file_stats(d->m, &fs);
	printf("compared: %s %s of %s, by %s; source files: %u paired", q->by_total ? "total" : "self",
	       q->absolute ? "amount" : "share", d->event, by_name(q->by), fs.same + fs.moved);
	if (fs.moved)
		printf(" (%u across directories)", fs.moved);
	printf(", %u only in new, %u only in base\n", fs.new_only, fs.base_only);
	for (uint32_t i = 0; i < d->c->nnotes; i++)
		printf("note: %s\n", d->c->notes[i]);
	if (!q->absolute && r->all[0] && r->all[1]) {
		int known = d->c->scale[0] > 0 && d->c->scale[1] > 0;
		const char *u = known ? d->c->unit : d->event;
		double v0 = (double)r->all[0] * (known ? d->c->scale[0] : 1.0);
		double v1 = (double)r->all[1] * (known ? d->c->scale[1] : 1.0);
		char a0[64], a1[64];
		amount(v0, u, 0, a0, sizeof(a0));
		amount(v1, u, 0, a1, sizeof(a1));
		if (v1 > v0 * 1.02 || v1 < v0 * 0.98)
			printf("note: the totals differ (%s in base, %s in new, x%.2f): shares are of each one's own "
			       "total; --absolute compares amounts\n", a0, a1, v1 / v0);
	}
	printf("\n");

	uint32_t n;
	uint32_t *idx = diff_shown_rows(d, &n);
	if (!idx)
		return;
	/* Column widths: numbers fixed, the rest split between name and place. */
	int numw = q->absolute ? 9 : 7;
	int fixed = 2 + numw + 1 + numw + 1 + (q->absolute ? 10 : 7) + 1 + 6 + 2 + 6 + 2;
	int avail = term_width() - fixed, namew = 8, wherew = 9, wmin = 9;
	char where[1200];
	for (uint32_t i = 0; i < n; i++) {
		const struct diff_row *w = &r->rows[idx[i]];
		uint32_t line;
		const struct pfunc *f = row_func(d, w, &line);
		row_where(d, w, cwd, where, sizeof(where), 0);
		int nl = f && q->by != DIFF_BY_FILE ? (int)strlen(f->name) : 0, wl = (int)strlen(where);
		namew = nl > namew ? nl : namew;
		wherew = wl > wherew ? wl : wherew;
		row_where(d, w, cwd, where, sizeof(where), 1);
		wl = (int)strlen(where);
		wmin = wl > wmin ? wl : wmin;
	}
	/* Names first; paths can fall back to the file's name alone (wmin). */
	if (q->by == DIFF_BY_FILE) {
		namew = 0;
		wherew = wherew < avail ? wherew : avail;
	} else if (namew + wherew + 2 > avail) {
		if (namew + wmin + 2 <= avail)
			wherew = avail - 2 - namew;
		else if (wmin < avail / 2)
			wherew = wmin, namew = avail - 2 - wmin;
		else
			namew = avail / 2 - 1, wherew = avail - 2 - namew;
	}
	if (q->absolute)
		printf("  %*s %*s %10s  %6s  ", numw, "base", numw, "new", "change", "ratio");
	else
		printf("  %*s %*s %7s  %6s  ", numw, "base%", numw, "new%", "change", "ratio");
	if (q->by != DIFF_BY_FILE) {
		cell("function", namew, 0, 0);
		printf("  ");
	}
	cell(q->by == DIFF_BY_LINE ? "file:line" : q->by == DIFF_BY_FILE ? "file" : "file:line", wherew, 0, 0);
	printf("  kind\n");
	for (uint32_t i = 0; i < n; i++) {
		const struct diff_row *w = &r->rows[idx[i]];
		char b[32], nw[32], ch[32], ra[16];
		if (q->absolute) {
			amount(w->value[0], d->c->unit, 0, b, sizeof(b));
			amount(w->value[1], d->c->unit, 0, nw, sizeof(nw));
			amount(w->delta, d->c->unit, 1, ch, sizeof(ch));
		} else {
			snprintf(b, sizeof(b), "%.1f%%", 100.0 * w->value[0]);
			snprintf(nw, sizeof(nw), "%.1f%%", 100.0 * w->value[1]);
			snprintf(ch, sizeof(ch), "%+.1f", w->points);
		}
		if (w->status == DIFF_NEW_ONLY)
			snprintf(ra, sizeof(ra), "new");
		else if (w->status == DIFF_VANISHED)
			snprintf(ra, sizeof(ra), "gone");
		else if (isinf(w->ratio))
			snprintf(ra, sizeof(ra), "-"); /* in both, but its measure was 0 in base */
		else
			snprintf(ra, sizeof(ra), "%.2fx", w->ratio);
		printf("  %*s %*s %*s  %6s  ", numw, b, numw, nw, q->absolute ? 10 : 7, ch, ra);
		uint32_t line;
		const struct pfunc *f = row_func(d, w, &line);
		if (q->by != DIFF_BY_FILE) {
			cell(f ? f->name : "?", namew, 0, 0);
			printf("  ");
		}
		row_where(d, w, cwd, where, sizeof(where), (size_t)wherew);
		cell(where, wherew, 1, 0);
		printf("  %s\n", f ? pkind_name(f->kind) : "");
	}
	if (n < r->nrows)
		printf("... %u more rows with smaller changes (-n 0 shows all)\n", r->nrows - n);
	if (!r->nrows)
		printf("(no samples in either profile)\n");
	free(idx);
	if (d->nfailed) {
		const struct diff_row *w = &r->rows[0];
		uint32_t line;
		const struct pfunc *f = row_func(d, w, &line);
		char first[300];
		row_where(d, w, cwd, where, sizeof(where), 0);
		snprintf(first, sizeof(first), "%s%s%s", q->by != DIFF_BY_FILE && f ? f->name : "",
			 q->by != DIFF_BY_FILE && f ? " " : "", where);
		fprintf(stderr, "strata: %u %s%s grew by more than %g points (--fail-above), most: %s (%+.1f)\n",
			d->nfailed, by_name(q->by), d->nfailed == 1 ? "" : "s", d->fail_above, first, w->points);
	}
}

/* ---- JSON ---------------------------------------------------------------------------- */

static void json_side(const struct diff_cli *d, int s, struct json *j)
{
	const struct profile *p = d->p[s];
	json_object_begin(j);
	json_key(j, "path");
	json_string(j, d->path[s]);
	json_key(j, "command");
	json_string(j, p->command ? p->command : "");
	json_key(j, "mode");
	json_string(j, p->mode == MODE_WALL ? "wall" : "cpu");
	json_key(j, "rate_hz");
	json_uint(j, p->rate_hz);
	json_key(j, "duration_s");
	json_double(j, p->end_ns > p->start_ns ? (double)(p->end_ns - p->start_ns) / 1e9 : 0.0);
	json_key(j, "samples");
	json_uint(j, d->r->nsamples[s]);
	json_key(j, "total");
	json_uint(j, d->r->all[s]);
	json_key(j, "scale"); /* one unit of the event in "unit", e.g. the period in ns */
	if (d->c->scale[s] > 0)
		json_double(j, d->c->scale[s]);
	else
		json_null(j);
	json_key(j, "total_amount");
	if (d->c->scale[s] > 0)
		json_double(j, (double)d->r->all[s] * d->c->scale[s]);
	else
		json_null(j);
	json_object_end(j);
}

static void json_row_side(const struct diff_cli *d, const struct diff_row *w, int s, const char *cwd,
			  struct json *j)
{
	uint64_t all = d->r->all[s];
	json_object_begin(j);
	json_key(j, "self");
	json_uint(j, w->self[s]);
	json_key(j, "total");
	json_uint(j, w->total[s]);
	json_key(j, "self_pct");
	json_double(j, all ? 100.0 * (double)w->self[s] / (double)all : 0.0);
	json_key(j, "total_pct");
	json_double(j, all ? 100.0 * (double)w->total[s] / (double)all : 0.0);
	if (d->c->scale[s] > 0) {
		json_key(j, "self_amount");
		json_double(j, (double)w->self[s] * d->c->scale[s]);
		json_key(j, "total_amount");
		json_double(j, (double)w->total[s] * d->c->scale[s]);
	}
	if (w->rep[s] != PNONE) {
		const struct profile *p = d->p[s];
		const struct pfunc *f = d->q->by == DIFF_BY_LINE ? &p->funcs[p->frames[w->rep[s]].func]
								  : &p->funcs[w->rep[s]];
		json_key(j, "file");
		json_string(j, f->file && f->file[0] ? short_path(f->file, cwd) : "");
	}
	json_object_end(j);
}

int diff_json(const struct diff_cli *d)
{
	const struct diff_result *r = d->r;
	const struct diff_query *q = d->q;
	char cwd[4096];
	if (!getcwd(cwd, sizeof(cwd)))
		cwd[0] = 0;
	struct json j;
	json_init(&j, stdout, 2);
	json_object_begin(&j);
	json_key(&j, "base");
	json_side(d, 0, &j);
	json_key(&j, "new");
	json_side(d, 1, &j);
	json_key(&j, "event");
	json_string(&j, d->event);
	json_key(&j, "unit");
	json_string(&j, d->c->unit);
	json_key(&j, "by");
	json_string(&j, by_name(q->by));
	json_key(&j, "measure"); /* what value, delta and ratio are of */
	json_string(&j, q->by_total ? "total" : "self");
	json_key(&j, "absolute");
	json_bool(&j, q->absolute);
	struct diff_file_stats fs;
	diff_file_stats(d->m, &fs);
	json_key(&j, "files");
	json_object_begin(&j);
	json_key(&j, "same_path");
	json_uint(&j, fs.same);
	json_key(&j, "across_directories");
	json_uint(&j, fs.moved);
	json_key(&j, "only_new");
	json_uint(&j, fs.new_only);
	json_key(&j, "only_base");
	json_uint(&j, fs.base_only);
	json_object_end(&j);
	json_key(&j, "notes");
	json_array_begin(&j);
	for (uint32_t i = 0; i < d->c->nnotes; i++)
		json_string(&j, d->c->notes[i]);
	json_array_end(&j);
	json_key(&j, "fail_above");
	if (d->fail_set)
		json_double(&j, d->fail_above);
	else
		json_null(&j);
	json_key(&j, "above");
	json_uint(&j, d->nfailed);
	uint32_t n;
	uint32_t *idx = diff_shown_rows(d, &n);
	json_key(&j, "rows");
	json_array_begin(&j);
	for (uint32_t i = 0; idx && i < n; i++) {
		const struct diff_row *w = &r->rows[idx[i]];
		uint32_t line;
		const struct pfunc *f = row_func(d, w, &line);
		json_object_begin(&j);
		json_key(&j, "status");
		json_string(&j, w->status == DIFF_NEW_ONLY ? "new" : w->status == DIFF_VANISHED ? "vanished" : "changed");
		json_key(&j, "name");
		if (q->by == DIFF_BY_FILE) {
			char where[1200];
			row_where(d, w, cwd, where, sizeof(where), 0);
			json_string(&j, where);
		} else {
			json_string(&j, f ? f->name : "");
		}
		json_key(&j, "line");
		json_uint(&j, line);
		json_key(&j, "kind");
		json_string(&j, f ? pkind_name(f->kind) : "other");
		json_key(&j, "base");
		json_row_side(d, w, 0, cwd, &j);
		json_key(&j, "new");
		json_row_side(d, w, 1, cwd, &j);
		json_key(&j, "value_base");
		json_double(&j, w->value[0]);
		json_key(&j, "value_new");
		json_double(&j, w->value[1]);
		json_key(&j, "delta");
		json_double(&j, w->delta);
		json_key(&j, "points");
		json_double(&j, w->points);
		json_key(&j, "ratio"); /* null: new */
		json_double(&j, w->ratio);
		json_object_end(&j);
	}
	json_array_end(&j);
	json_key(&j, "more_rows");
	json_uint(&j, r->nrows - n);
	json_object_end(&j);
	free(idx);
	return json_finish(&j);
}
