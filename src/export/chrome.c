/*
 * chrome.c — `-f chrome`: the Trace Event Format (JSON) read by Perfetto,
 * chrome://tracing and speedscope.
 *
 * Samples become duration events: walking a thread's samples in time
 * order, a frame that stays on the stack from one sample to the next is
 * one event spanning them, opened ("B") where its first sample's span
 * begins and closed ("E") where its last sample's span ends. A sample's
 * span is the stretch of time it stands for: its weight times the sampling
 * period, ending at the sample, and never reaching back before the
 * previous sample (nor be empty: a sample at the same instant as the one
 * before it is moved 2 ns later). So events nest properly, per thread,
 * with timestamps in microseconds (nanosecond precision) since the start
 * of the session. Metadata events name every process and thread.
 *
 * B/E rather than X: B events are written in the order frames open and E
 * events in the order they close, so the file order breaks timestamp ties
 * the way trace viewers expect, and the output streams without buffering
 * a thread's events. Ties between a close and an open are avoided
 * altogether: speedscope's importer, meeting an E and a B with the same
 * name at the same instant, opens first (it takes them for an empty
 * event), which breaks recursion (a name closing deep in one stack and
 * opening in the next). So frames that open where others close open one
 * nanosecond later, and no event is empty.
 *
 * Names are frame labels with the file's basename (labels.h); "cat" is the
 * frame's kind (python, native, jit, other).
 */
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "labels.h"

/* What follows "ts": in a frame's B event (name and kind) and E event (the
 * name, which speedscope matches against the open frame). */
static int frame_suffixes(const struct profile *p, struct strcache *c, struct strcache *e)
{
	for (uint32_t f = 0; f < p->nframes; f++) {
		char label[1024];
		frame_label(p, f, LABEL_BASENAME, label, sizeof(label));
		uint32_t n;
		char *q = escape_dup(label, 'j', &n);
		if (!q)
			return -1;
		const char *kind = pkind_name(p->funcs[p->frames[f].func].kind);
		size_t len = n + strlen(kind) + 32;
		if (!(c->s[f] = malloc(len))) {
			free(q);
			return -1;
		}
		c->len[f] = (uint32_t)snprintf(c->s[f], len, ",\"name\":%s,\"cat\":\"%s\"}", q, kind);
		if (!(e->s[f] = malloc(n + 12))) {
			free(q);
			return -1;
		}
		e->len[f] = (uint32_t)snprintf(e->s[f], n + 12, ",\"name\":%s}", q);
		free(q);
	}
	return 0;
}

struct chrome_state {
	struct ob *b;
	const struct profile *p;
	struct strcache *suf, *esuf;
	char pre_b[96], pre_e[96];
	size_t lb, le;
	uint64_t base;
};

static void event(struct chrome_state *s, int begin, uint32_t node, uint64_t t)
{
	struct ob *b = s->b;
	uint32_t f = s->p->nodes[node].frame;
	ob_write(b, begin ? s->pre_b : s->pre_e, begin ? s->lb : s->le);
	ob_ns_as_us(b, t - s->base);
	if (begin)
		ob_write(b, s->suf->s[f], s->suf->len[f]);
	else
		ob_write(b, s->esuf->s[f], s->esuf->len[f]);
}

static uint32_t common_ancestor(const struct profile *p, uint32_t a, uint32_t b)
{
	while (p->nodes[a].depth > p->nodes[b].depth)
		a = p->nodes[a].parent;
	while (p->nodes[b].depth > p->nodes[a].depth)
		b = p->nodes[b].parent;
	while (a != b) {
		a = p->nodes[a].parent;
		b = p->nodes[b].parent;
	}
	return a;
}

static int export_chrome(const struct profile *p, FILE *out, const struct export_opts *o, char *err, size_t errlen)
{
	struct thread_samples ts = { 0 };
	struct strcache suf = { 0 }, esuf = { 0 };
	struct ob *b = malloc(sizeof(*b));
	uint32_t *path = malloc(((size_t)p->nnodes + 1) * sizeof(*path));
	uint8_t *named = calloc(p->nprocs ? p->nprocs : 1, 1);
	int rc = -1;
	if (!b || !path || !named || thread_samples_build(&ts, p, o) || strcache_init(&suf, p->nframes) ||
	    strcache_init(&esuf, p->nframes) || frame_suffixes(p, &suf, &esuf)) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}
	uint64_t period = p->period_ns;
	/* Time zero: the session start, or earlier if a span reaches back
	 * before it (timestamps stay non-negative). */
	uint64_t base = p->start_ns;
	for (uint64_t i = 0; i < p->nsamples; i++) {
		uint64_t w = profile_value(p, i, 0) * period, t = p->samples[i].time_ns;
		uint64_t s0 = t > w ? t - w : 0;
		if (s0 < base)
			base = s0;
	}

	struct chrome_state s = { .b = b, .p = p, .suf = &suf, .esuf = &esuf, .base = base };
	ob_init(b, out);
	ob_puts(b, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"exporter\":\"strata " STRATA_VERSION "\",\"command\":");
	ob_json_str(b, o->title ? o->title : "");
	ob_puts(b, "},\n\"traceEvents\":[");
	int first = 1;
	for (uint32_t t = 0; t < p->nthreads; t++) {
		if (ts.start[t] == ts.start[t + 1])
			continue;
		const struct pthread_info *ti = &p->threads[t];
		char name[600];
		if (ti->process < p->nprocs && !named[ti->process]) {
			named[ti->process] = 1;
			process_name(p, ti->process, 0, name, sizeof(name));
			ob_puts(b, first ? "\n" : ",\n");
			first = 0;
			ob_puts(b, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":");
			ob_u64(b, ti->pid);
			ob_puts(b, ",\"tid\":");
			ob_u64(b, ti->pid);
			ob_puts(b, ",\"args\":{\"name\":");
			ob_json_str(b, name);
			ob_puts(b, "}}");
		}
		thread_name(p, t, 0, name, sizeof(name));
		ob_puts(b, first ? "\n" : ",\n");
		first = 0;
		ob_puts(b, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":");
		ob_u64(b, ti->pid);
		ob_puts(b, ",\"tid\":");
		ob_u64(b, ti->tid);
		ob_puts(b, ",\"args\":{\"name\":");
		ob_json_str(b, name);
		ob_puts(b, "}}");

		s.lb = (size_t)snprintf(s.pre_b, sizeof(s.pre_b), ",\n{\"ph\":\"B\",\"pid\":%u,\"tid\":%u,\"ts\":", ti->pid,
					ti->tid);
		s.le = (size_t)snprintf(s.pre_e, sizeof(s.pre_e), ",\n{\"ph\":\"E\",\"pid\":%u,\"tid\":%u,\"ts\":", ti->pid,
					ti->tid);
		uint32_t cur = 0;    /* leaf of the open stack; 0 = nothing open */
		uint64_t prev_end = 0;
		for (uint64_t k = ts.start[t]; k < ts.start[t + 1]; k++) {
			uint64_t i = ts.idx[k];
			uint32_t n = p->samples[i].node;
			uint64_t now = p->samples[i].time_ns;
			if (n >= p->nnodes)
				continue;
			/* Every sample gets some time of its own: two samples at one
			 * instant would make zero-length events, whose order
			 * against the events around them is ambiguous. */
			if (cur && now < prev_end + 2)
				now = prev_end + 2;
			if (n == cur) {
				prev_end = now;
				continue;
			}
			uint64_t span = profile_value(p, i, 0) * period;
			uint64_t start = now > span ? now - span : 0;
			if (start < base)
				start = base;
			if (cur && start < prev_end)
				start = prev_end;
			if (start >= now) /* no weight or no known period */
				start = now - 1;
			uint32_t c = common_ancestor(p, cur, n);
			for (uint32_t m = cur; m != c; m = p->nodes[m].parent)
				event(&s, 0, m, prev_end);
			/* Opens strictly after closes (see the top of the file). */
			if (cur != c && start <= prev_end)
				start = prev_end + 1;
			uint32_t d = 0;
			for (uint32_t m = n; m != c; m = p->nodes[m].parent)
				path[d++] = m;
			while (d-- > 0)
				event(&s, 1, path[d], start);
			cur = n;
			prev_end = now;
		}
		for (uint32_t m = cur; m != 0; m = p->nodes[m].parent)
			event(&s, 0, m, prev_end);
	}
	ob_puts(b, "\n]}\n");
	if (ob_flush(b)) {
		snprintf(err, errlen, "write error");
		goto done;
	}
	rc = 0;
done:
	thread_samples_free(&ts);
	strcache_free(&suf);
	strcache_free(&esuf);
	free(b);
	free(path);
	free(named);
	return rc;
}

const struct exporter chrome_exporter = {
	"chrome", ".trace.json", "Chrome trace events (ui.perfetto.dev, chrome://tracing, speedscope)", 0,
	export_chrome,
};
