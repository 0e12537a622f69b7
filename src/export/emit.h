/*
 * emit.h — what the web-facing exporters (speedscope, chrome, gecko, html,
 * svg) share: a fast buffered writer for the bulk of their output, frame
 * labels escaped once per frame, per-thread sample order, and the names
 * they give threads and processes.
 *
 * The bulk of these formats is millions of small numbers (stack indices,
 * timestamps); printf per number would dominate a 1M-sample conversion,
 * so numbers are formatted by hand into a 64 KB buffer. Strings are escaped
 * by json.h's json_escape (valid UTF-8, control characters escaped) or, for
 * XML, by emit_xml_escape, and cached per frame.
 */
#ifndef STRATA_EMIT_H
#define STRATA_EMIT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "export.h"

struct ob {
	FILE *out;
	size_t len;
	char buf[1 << 16];
};

void ob_init(struct ob *b, FILE *out);
void ob_write(struct ob *b, const void *s, size_t n);
/* Writes out what the buffer holds (errors show in ob_flush). */
void ob_drain(struct ob *b);
static inline void ob_putc(struct ob *b, char c)
{
	if (b->len == sizeof(b->buf))
		ob_drain(b);
	b->buf[b->len++] = c;
}
void ob_puts(struct ob *b, const char *s);
void ob_u64(struct ob *b, uint64_t v);
void ob_i64(struct ob *b, int64_t v);
/* Nanoseconds as decimal microseconds ("1234.567") or milliseconds
 * ("1.234567"): exact, and short when the fraction is zero. */
void ob_ns_as_us(struct ob *b, uint64_t ns);
void ob_ns_as_ms(struct ob *b, uint64_t ns);
/* A JSON string literal (with quotes) of s, escaped by json.h. */
void ob_json_str(struct ob *b, const char *s);
/* s escaped for XML text and attribute values (invalid UTF-8 and control
 * characters replaced). */
void ob_xml_str(struct ob *b, const char *s);
/* Flushes the buffer; returns 0 or -1 if the stream has an error. */
int ob_flush(struct ob *b);

/* Cached escaped strings, one per frame (or any index), built on demand.
 * kind 'j' = JSON literal with quotes, 'h' = the same, safe inside an HTML
 * <script> ('<' escaped), 'x' = XML-escaped, 'r' = raw. */
struct strcache {
	char **s;
	uint32_t *len;
	uint32_t n;
};
int strcache_init(struct strcache *c, uint32_t n);
void strcache_free(struct strcache *c);
/* The label of frame f (labels.h, with flags) escaped as `kind`; NULL when
 * out of memory. */
const char *frame_label_cached(struct strcache *c, const struct profile *p, uint32_t f, int flags, char kind,
			       uint32_t *len);
/* Escapes s for kind into a new string (caller frees). */
char *escape_dup(const char *s, char kind, uint32_t *len);

/* Samples grouped by thread, each thread's in time order (stable), with
 * idle samples left out when o->exclude_idle: idx[start[t] .. start[t+1]). */
struct thread_samples {
	uint64_t *idx;
	uint64_t *start; /* ntracks + 1 */
	uint32_t ntracks; /* nthreads, then (tracks_build with tasks) one per asyncio task */
};
int thread_samples_build(struct thread_samples *ts, const struct profile *p, const struct export_opts *o);
/* The same, as the tracks of a timeline (gecko, speedscope): with tasks
 * and a profile that has asyncio tasks, one more track per task, its
 * samples running and waiting, and the threads' tracks without the
 * waiting tasks' samples (the helper attributes them to the loop's thread,
 * but the thread was not doing them). */
int tracks_build(struct thread_samples *ts, const struct profile *p, const struct export_opts *o, int tasks);
void thread_samples_free(struct thread_samples *ts);
/* A task track's name ("task NAME"), its process (that of the thread of its
 * first sample) and the times of its first and last samples. */
void task_track(const struct profile *p, const struct thread_samples *ts, uint32_t k, char *name, size_t n,
		uint32_t *process, uint64_t *first_ns, uint64_t *last_ns);

/* "python3 app.py (pid 123)": the command's program (and script) name and,
 * with with_id, its pid. */
void process_name(const struct profile *p, uint32_t proc, int with_id, char *buf, size_t n);
/* "MainThread (tid 123)", or "MainThread" without with_id. */
void thread_name(const struct profile *p, uint32_t t, int with_id, char *buf, size_t n);

/* Name of the event an exporter shows (o->event), "samples" for event 0. */
const char *event_name(const struct profile *p, const struct export_opts *o);

#endif
