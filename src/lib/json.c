/*
 * json.c — streaming JSON writer; see json.h.
 */
#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void json_init(struct json *j, FILE *out, int inline_depth)
{
	memset(j, 0, sizeof(*j));
	j->out = out;
	j->inline_depth = inline_depth;
}

static void newline(struct json *j, int depth)
{
	fputc('\n', j->out);
	for (int i = 0; i < depth; i++)
		fputs("  ", j->out);
}

/* Does the innermost open container (opened at depth j->depth - 1) put
 * its members on their own lines? */
static int multiline(const struct json *j)
{
	return j->inline_depth > 0 && j->depth <= j->inline_depth;
}

/* Called before every value or key: separators, indentation, and the
 * check that a value is allowed here. */
static int before(struct json *j, int is_key)
{
	if (j->err)
		return -1;
	if (j->depth == 0) {
		/* Top level: exactly one value. */
		if (is_key || j->count[0]) {
			j->err = 1;
			return -1;
		}
		j->count[0] = 1;
		return 0;
	}
	int obj = j->is_obj[j->depth - 1];
	if (obj && !is_key && !j->want_value) {
		j->err = 1; /* a value in an object needs a key first */
		return -1;
	}
	if ((!obj && is_key) || (obj && is_key && j->want_value)) {
		j->err = 1;
		return -1;
	}
	if (obj && j->want_value) {
		j->want_value = 0;
		return 0; /* value right after its key */
	}
	uint8_t *c = &j->count[j->depth - 1];
	if (*c)
		fputc(',', j->out);
	if (multiline(j))
		newline(j, j->depth);
	else if (*c && j->inline_depth > 0)
		fputc(' ', j->out);
	if (*c < 255)
		(*c)++;
	return 0;
}

static void open_container(struct json *j, int obj)
{
	if (before(j, 0))
		return;
	if (j->depth >= JSON_MAX_DEPTH) {
		j->err = 1;
		return;
	}
	fputc(obj ? '{' : '[', j->out);
	j->is_obj[j->depth] = (uint8_t)obj;
	j->count[j->depth] = 0;
	j->depth++;
}

static void close_container(struct json *j, int obj)
{
	if (j->err)
		return;
	if (j->depth == 0 || j->is_obj[j->depth - 1] != obj || j->want_value) {
		j->err = 1;
		return;
	}
	int had = j->count[j->depth - 1] != 0;
	int ml = multiline(j);
	j->depth--;
	if (had && ml)
		newline(j, j->depth);
	fputc(obj ? '}' : ']', j->out);
}

void json_object_begin(struct json *j) { open_container(j, 1); }
void json_object_end(struct json *j) { close_container(j, 1); }
void json_array_begin(struct json *j) { open_container(j, 0); }
void json_array_end(struct json *j) { close_container(j, 0); }

/* Length of the valid UTF-8 sequence at s (1–4), or 0 if invalid; on 0,
 * *bad gets the length of the maximal invalid subpart to replace (>= 1). */
static size_t utf8_seq(const uint8_t *s, size_t n, size_t *bad)
{
	uint8_t c = s[0];
	size_t len;
	uint8_t lo = 0x80, hi = 0xBF;
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		len = 2;
	else if (c >= 0xE0 && c <= 0xEF) {
		len = 3;
		if (c == 0xE0)
			lo = 0xA0;
		else if (c == 0xED)
			hi = 0x9F; /* no UTF-16 surrogates */
	} else if (c >= 0xF0 && c <= 0xF4) {
		len = 4;
		if (c == 0xF0)
			lo = 0x90;
		else if (c == 0xF4)
			hi = 0x8F; /* nothing past U+10FFFF */
	} else {
		*bad = 1;
		return 0;
	}
	for (size_t i = 1; i < len; i++) {
		uint8_t l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
		if (i >= n || s[i] < l || s[i] > h) {
			*bad = i;
			return 0;
		}
	}
	return len;
}

void json_escape(FILE *out, const char *str, size_t n)
{
	const uint8_t *s = (const uint8_t *)str;
	size_t i = 0;
	while (i < n) {
		uint8_t c = s[i];
		if (c == '"' || c == '\\') {
			fputc('\\', out);
			fputc(c, out);
			i++;
		} else if (c < 0x20) {
			switch (c) {
			case '\n': fputs("\\n", out); break;
			case '\r': fputs("\\r", out); break;
			case '\t': fputs("\\t", out); break;
			case '\b': fputs("\\b", out); break;
			case '\f': fputs("\\f", out); break;
			default: fprintf(out, "\\u%04x", c); break;
			}
			i++;
		} else if (c < 0x80) {
			fputc(c, out);
			i++;
		} else {
			size_t bad = 0, len = utf8_seq(s + i, n - i, &bad);
			if (len) {
				fwrite(s + i, 1, len, out);
				i += len;
			} else {
				fputs("\xEF\xBF\xBD", out);
				i += bad;
			}
		}
	}
}

void json_key(struct json *j, const char *key)
{
	if (before(j, 1))
		return;
	fputc('"', j->out);
	json_escape(j->out, key, strlen(key));
	fputs(j->inline_depth > 0 ? "\": " : "\":", j->out);
	j->want_value = 1;
}

void json_string_len(struct json *j, const char *s, size_t n)
{
	if (before(j, 0))
		return;
	fputc('"', j->out);
	json_escape(j->out, s, n);
	fputc('"', j->out);
}

void json_string(struct json *j, const char *s)
{
	if (!s)
		json_null(j);
	else
		json_string_len(j, s, strlen(s));
}

void json_int(struct json *j, int64_t v)
{
	if (!before(j, 0))
		fprintf(j->out, "%lld", (long long)v);
}

void json_uint(struct json *j, uint64_t v)
{
	if (!before(j, 0))
		fprintf(j->out, "%llu", (unsigned long long)v);
}

void json_double(struct json *j, double v)
{
	if (!isfinite(v)) {
		json_null(j);
		return;
	}
	if (before(j, 0))
		return;
	/* The shortest form that reads back as the same double. */
	char buf[40];
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	fputs(buf, j->out);
}

void json_bool(struct json *j, int v)
{
	if (!before(j, 0))
		fputs(v ? "true" : "false", j->out);
}

void json_null(struct json *j)
{
	if (!before(j, 0))
		fputs("null", j->out);
}

int json_finish(struct json *j)
{
	if (!j->err && (j->depth != 0 || j->want_value || !j->count[0]))
		j->err = 1;
	if (!j->err)
		fputc('\n', j->out);
	if (ferror(j->out))
		j->err = 1;
	return j->err ? -1 : 0;
}
