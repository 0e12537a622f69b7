/*
 * json.h — a small streaming JSON writer for reports and exporters.
 *
 * Values are written as they are produced (no document tree), commas and
 * indentation are handled here, and every string is made valid: quotes,
 * backslashes and control characters are escaped and invalid UTF-8 (file
 * names and function names come from the profiled program) is replaced by
 * U+FFFD, one per maximal invalid sequence. Misuse (a value where a key is
 * due, unbalanced ends, nesting deeper than JSON_MAX_DEPTH) and write
 * errors are sticky and reported by json_finish().
 *
 *	struct json j;
 *	json_init(&j, stdout, 2);
 *	json_object_begin(&j);
 *	json_key(&j, "samples"); json_uint(&j, 42);
 *	json_object_end(&j);
 *	if (json_finish(&j)) ...
 */
#ifndef STRATA_JSON_H
#define STRATA_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 64

struct json {
	FILE *out;
	int inline_depth;  /* containers opened at this depth or deeper stay on one line; 0 = all compact */
	int depth;
	int err;
	int want_value;    /* a key was written: its value is due */
	uint8_t count[JSON_MAX_DEPTH];  /* members written at each level (saturating) */
	uint8_t is_obj[JSON_MAX_DEPTH];
};

/* inline_depth: 0 writes everything on one line; N > 0 puts each member of
 * the containers at depths below N on its own indented line (N = 2: the
 * top-level object's members one per line, each array element on one). */
void json_init(struct json *j, FILE *out, int inline_depth);

void json_object_begin(struct json *j);
void json_object_end(struct json *j);
void json_array_begin(struct json *j);
void json_array_end(struct json *j);
void json_key(struct json *j, const char *key);

void json_string(struct json *j, const char *s);            /* NULL = null */
void json_string_len(struct json *j, const char *s, size_t n);
void json_int(struct json *j, int64_t v);
void json_uint(struct json *j, uint64_t v);
void json_double(struct json *j, double v);                  /* non-finite = null */
void json_bool(struct json *j, int v);
void json_null(struct json *j);

/* Ends the document with a newline. Returns 0, or -1 if it was misused,
 * left unbalanced or could not be written. */
int json_finish(struct json *j);

/* Writes s as a JSON string body (no quotes) to out; exposed for exporters
 * that build JSON-like text themselves. */
void json_escape(FILE *out, const char *s, size_t n);

#endif
