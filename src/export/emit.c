/*
 * emit.c — the buffered writer, escaped-label cache, per-thread sample
 * order and thread/process names shared by the web exporters; see emit.h.
 */
#include "emit.h"

#include <stdlib.h>
#include <string.h>

#include "lib/json.h"
#include "labels.h"

void ob_init(struct ob *b, FILE *out)
{
	b->out = out;
	b->len = 0;
}

void ob_drain(struct ob *b)
{
	if (b->len)
		fwrite(b->buf, 1, b->len, b->out);
	b->len = 0;
}

void ob_write(struct ob *b, const void *s, size_t n)
{
	if (b->len + n > sizeof(b->buf)) {
		if (b->len)
			fwrite(b->buf, 1, b->len, b->out);
		b->len = 0;
		if (n > sizeof(b->buf)) {
			fwrite(s, 1, n, b->out);
			return;
		}
	}
	if (n) {
		memcpy(b->buf + b->len, s, n);
		b->len += n;
	}
}

void ob_puts(struct ob *b, const char *s)
{
	ob_write(b, s, strlen(s));
}

void ob_u64(struct ob *b, uint64_t v)
{
	char tmp[24];
	int i = sizeof(tmp);
	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	ob_write(b, tmp + i, sizeof(tmp) - (size_t)i);
}

void ob_i64(struct ob *b, int64_t v)
{
	if (v < 0) {
		ob_putc(b, '-');
		ob_u64(b, (uint64_t)0 - (uint64_t)v);
	} else {
		ob_u64(b, (uint64_t)v);
	}
}

/* v / 10^digits as a decimal with the fraction's trailing zeros cut. */
static void ob_fixed(struct ob *b, uint64_t v, int digits)
{
	uint64_t scale = 1;
	for (int i = 0; i < digits; i++)
		scale *= 10;
	ob_u64(b, v / scale);
	uint64_t frac = v % scale;
	if (!frac)
		return;
	char tmp[24];
	int n = digits;
	while (frac % 10 == 0) {
		frac /= 10;
		n--;
	}
	tmp[0] = '.';
	for (int i = n; i > 0; i--) {
		tmp[i] = (char)('0' + frac % 10);
		frac /= 10;
	}
	ob_write(b, tmp, (size_t)n + 1);
}

void ob_ns_as_us(struct ob *b, uint64_t ns) { ob_fixed(b, ns, 3); }
void ob_ns_as_ms(struct ob *b, uint64_t ns) { ob_fixed(b, ns, 6); }

int ob_flush(struct ob *b)
{
	if (b->len)
		fwrite(b->buf, 1, b->len, b->out);
	b->len = 0;
	return ferror(b->out) ? -1 : 0;
}

/* Length of the valid UTF-8 sequence at s, 0 if invalid. */
static size_t utf8_len(const unsigned char *s)
{
	unsigned char c = s[0];
	size_t len;
	unsigned char lo = 0x80, hi = 0xBF;
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		len = 2;
	else if (c >= 0xE0 && c <= 0xEF) {
		len = 3;
		if (c == 0xE0)
			lo = 0xA0;
		else if (c == 0xED)
			hi = 0x9F;
	} else if (c >= 0xF0 && c <= 0xF4) {
		len = 4;
		if (c == 0xF0)
			lo = 0x90;
		else if (c == 0xF4)
			hi = 0x8F;
	} else {
		return 0;
	}
	for (size_t i = 1; i < len; i++) {
		unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
		if (s[i] < l || s[i] > h) /* also stops at the NUL */
			return 0;
	}
	return len;
}

static void xml_escape(FILE *out, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	while (*s) {
		unsigned char c = *s;
		switch (c) {
		case '&': fputs("&amp;", out); s++; continue;
		case '<': fputs("&lt;", out); s++; continue;
		case '>': fputs("&gt;", out); s++; continue;
		case '"': fputs("&quot;", out); s++; continue;
		case '\'': fputs("&#39;", out); s++; continue;
		}
		if (c < 0x20 || c == 0x7f) {
			/* XML 1.0 has no way to write most control characters. */
			fputc(' ', out);
			s++;
			continue;
		}
		size_t n = utf8_len(s);
		if (!n) {
			fputs("\xEF\xBF\xBD", out);
			s++;
		} else {
			fwrite(s, 1, n, out);
			s += n;
		}
	}
}

char *escape_dup(const char *s, char kind, uint32_t *len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *m = open_memstream(&buf, &n);
	if (!m)
		return NULL;
	if (kind == 'j' || kind == 'h') {
		fputc('"', m);
		json_escape(m, s, strlen(s));
		fputc('"', m);
	} else if (kind == 'x') {
		xml_escape(m, s);
	} else {
		fputs(s, m);
	}
	if (fclose(m) != 0) {
		free(buf);
		return NULL;
	}
	if (kind == 'h' && strchr(buf, '<')) {
		/* JSON inside an HTML <script>: "</script>" must not appear. */
		char *h = malloc(n * 6 + 1), *o = h;
		if (!h) {
			free(buf);
			return NULL;
		}
		for (size_t i = 0; i < n; i++) {
			if (buf[i] == '<') {
				memcpy(o, "\\u003c", 6);
				o += 6;
			} else {
				*o++ = buf[i];
			}
		}
		*o = 0;
		free(buf);
		buf = h;
		n = (size_t)(o - h);
	}
	if (len)
		*len = (uint32_t)n;
	return buf;
}

void ob_json_str(struct ob *b, const char *s)
{
	uint32_t n;
	char *e = escape_dup(s ? s : "", 'j', &n);
	if (e)
		ob_write(b, e, n);
	else
		ob_puts(b, "\"\"");
	free(e);
}

void ob_xml_str(struct ob *b, const char *s)
{
	uint32_t n;
	char *e = escape_dup(s ? s : "", 'x', &n);
	if (e)
		ob_write(b, e, n);
	free(e);
}

int strcache_init(struct strcache *c, uint32_t n)
{
	c->n = n;
	c->s = calloc(n ? n : 1, sizeof(*c->s));
	c->len = calloc(n ? n : 1, sizeof(*c->len));
	if (!c->s || !c->len) {
		free(c->s);
		free(c->len);
		c->s = NULL;
		c->len = NULL;
		return -1;
	}
	return 0;
}

void strcache_free(struct strcache *c)
{
	if (c->s)
		for (uint32_t i = 0; i < c->n; i++)
			free(c->s[i]);
	free(c->s);
	free(c->len);
	c->s = NULL;
	c->len = NULL;
}

const char *frame_label_cached(struct strcache *c, const struct profile *p, uint32_t f, int flags, char kind,
			       uint32_t *len)
{
	if (!c->s[f]) {
		char buf[1024];
		frame_label(p, f, flags, buf, sizeof(buf));
		if (!(c->s[f] = escape_dup(buf, kind, &c->len[f])))
			return NULL;
	}
	if (len)
		*len = c->len[f];
	return c->s[f];
}

static const struct profile *sort_p;
static int by_time(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	uint64_t tx = sort_p->samples[x].time_ns, ty = sort_p->samples[y].time_ns;
	if (tx != ty)
		return tx < ty ? -1 : 1;
	return x < y ? -1 : x > y;
}

int tracks_build(struct thread_samples *ts, const struct profile *p, const struct export_opts *o, int tasks)
{
	uint32_t nt = p->nthreads, ntr = nt + (tasks ? p->ntasks : 0);
	int split = ntr > nt;
	ts->ntracks = ntr;
	ts->start = calloc((size_t)ntr + 2, sizeof(*ts->start));
	ts->idx = malloc((p->nsamples ? p->nsamples : 1) * (split ? 2 : 1) * sizeof(*ts->idx));
	if (!ts->start || !ts->idx) {
		thread_samples_free(ts);
		return -1;
	}
	/* Counting sort by track keeps each track's file order. */
	for (int pass = 0; pass < 2; pass++) {
		for (uint64_t i = 0; i < p->nsamples; i++) {
			const struct psample *s = &p->samples[i];
			if (s->thread >= nt || (o->exclude_idle && (s->flags & PS_IDLE)))
				continue;
			uint32_t tr[2], n = 0;
			if (!split || !(s->flags & PS_WAITING))
				tr[n++] = s->thread;
			if (split && s->task != PNONE && s->task < p->ntasks)
				tr[n++] = nt + s->task;
			for (uint32_t k = 0; k < n; k++) {
				if (pass == 0)
					ts->start[tr[k] + 2]++;
				else
					ts->idx[ts->start[tr[k] + 1]++] = i;
			}
		}
		if (pass == 0)
			for (uint32_t t = 0; t < ntr; t++)
				ts->start[t + 2] += ts->start[t + 1];
	}
	/* The agent writes a thread's samples in order; sort only if not
	 * (a task's waiting samples come from the helper, in order too). */
	for (uint32_t t = 0; t < ntr; t++) {
		uint64_t a = ts->start[t], b = ts->start[t + 1];
		for (uint64_t k = a + 1; k < b; k++) {
			if (p->samples[ts->idx[k]].time_ns < p->samples[ts->idx[k - 1]].time_ns) {
				sort_p = p;
				qsort(ts->idx + a, b - a, sizeof(*ts->idx), by_time);
				break;
			}
		}
	}
	return 0;
}

int thread_samples_build(struct thread_samples *ts, const struct profile *p, const struct export_opts *o)
{
	return tracks_build(ts, p, o, 0);
}

void task_track(const struct profile *p, const struct thread_samples *ts, uint32_t k, char *name, size_t n,
		uint32_t *process, uint64_t *first_ns, uint64_t *last_ns)
{
	uint32_t task = k - p->nthreads;
	snprintf(name, n, "task %s", task < p->ntasks ? p->tasks[task] : "?");
	*process = 0;
	*first_ns = *last_ns = 0;
	if (ts->start[k] < ts->start[k + 1]) {
		const struct psample *s0 = &p->samples[ts->idx[ts->start[k]]];
		*process = p->threads[s0->thread].process;
		*first_ns = s0->time_ns;
		*last_ns = p->samples[ts->idx[ts->start[k + 1] - 1]].time_ns;
	}
}

void thread_samples_free(struct thread_samples *ts)
{
	free(ts->idx);
	free(ts->start);
	ts->idx = NULL;
	ts->start = NULL;
}

/* Copies the basename of the first space-separated word of s from `from`. */
static const char *word_base(const char *s, size_t *n)
{
	const char *end = strchr(s, ' ');
	if (!end)
		end = s + strlen(s);
	const char *b = s;
	for (const char *c = s; c < end; c++)
		if (*c == '/' && c + 1 < end)
			b = c + 1;
	*n = (size_t)(end - b);
	return b;
}

void process_name(const struct profile *p, uint32_t proc, int with_id, char *buf, size_t n)
{
	const struct pprocess *pr = proc < p->nprocs ? &p->procs[proc] : NULL;
	const char *cmd = pr && pr->command && *pr->command ? pr->command : "process";
	size_t l1, l2 = 0;
	const char *w1 = word_base(cmd, &l1), *w2 = NULL;
	const char *rest = strchr(cmd, ' ');
	/* "python3 app.py": the script says more than the interpreter. */
	if (rest && rest[1] && rest[1] != '-' && rest[1] != ' ')
		w2 = word_base(rest + 1, &l2);
	int k = w2 ? snprintf(buf, n, "%.*s %.*s", (int)l1, w1, (int)l2, w2) : snprintf(buf, n, "%.*s", (int)l1, w1);
	if (with_id && k >= 0 && (size_t)k < n)
		snprintf(buf + k, n - (size_t)k, " (pid %u)", pr ? pr->pid : 0);
}

void thread_name(const struct profile *p, uint32_t t, int with_id, char *buf, size_t n)
{
	const struct pthread_info *ti = &p->threads[t];
	const char *name = ti->name && *ti->name ? ti->name : "thread";
	if (with_id)
		snprintf(buf, n, "%s (tid %u)", name, ti->tid);
	else
		snprintf(buf, n, "%s", name);
}

const char *event_name(const struct profile *p, const struct export_opts *o)
{
	return o->event < p->nevents && p->event_names ? p->event_names[o->event] : "samples";
}
