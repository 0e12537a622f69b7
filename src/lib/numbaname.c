/*
 * numbaname.c — Numba's mangled function names made readable (see
 * numbaname.h). Numba borrows the Itanium C++ scheme (numba/core/
 * itanium_mangler.py): a dotted Python name becomes a nested name
 * `N<len>part...E`, ABI tags `B<len>tag` carry a unique id and a hash of
 * the compile flags, the argument types follow (builtin codes like `d` for
 * float64, templated types such as `5ArrayIdLi1E1C7mutable7alignedE`), and
 * characters outside [A-Za-z0-9_] are escaped as `_xx` (hex of each UTF-8
 * byte). C++'s demangler would print `__main__::kernel[abi:v1](Array<...>)`;
 * Numba users know `__main__.kernel(float64[::1])`.
 */
#include "numbaname.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct out {
	char *p;
	size_t n, len;
	int err;
};

static void put(struct out *o, const char *s, size_t n)
{
	if (o->len + n + 1 > o->n) {
		o->err = 1;
		return;
	}
	memcpy(o->p + o->len, s, n);
	o->len += n;
	o->p[o->len] = 0;
}

static void puts_(struct out *o, const char *s) { put(o, s, strlen(s)); }

static int hexv(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* The byte an `_xx` escape at s stands for, or -1 when it is no escape. */
static int esc_at(const char *s, size_t left)
{
	if (left < 3 || s[0] != '_' || hexv(s[1]) < 0 || hexv(s[2]) < 0)
		return -1;
	return hexv(s[1]) * 16 + hexv(s[2]);
}

/* Writes identifier s[0..n) with its escapes decoded. An `_xx` is taken as
 * an escape only where Numba would have written one: for a printable ASCII
 * character that is not [A-Za-z0-9_], or for a whole UTF-8 sequence; a
 * name like `get_ab` stays as it is. */
static void put_ident(struct out *o, const char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		int b = esc_at(s + i, n - i);
		if (b >= 0x20 && b < 0x7f && !isalnum(b) && b != '_') {
			char c = (char)b;
			put(o, &c, 1);
			i += 3;
			continue;
		}
		if (b >= 0xc2 && b <= 0xf4) {
			int need = b >= 0xf0 ? 3 : b >= 0xe0 ? 2 : 1;
			char u[4];
			u[0] = (char)b;
			int ok = 1;
			for (int k = 1; k <= need && ok; k++) {
				int c = esc_at(s + i + 3 * (size_t)k, n - i - 3 * (size_t)k > n ? 0 : n - i - 3 * (size_t)k);
				if (c < 0x80 || c > 0xbf)
					ok = 0;
				else
					u[k] = (char)c;
			}
			if (ok) {
				put(o, u, (size_t)need + 1);
				i += 3 * ((size_t)need + 1);
				continue;
			}
		}
		put(o, s + i, 1);
		i++;
	}
}

struct in {
	const char *s;
	size_t i, n;
	int err;
};

static int peek(struct in *in) { return in->i < in->n ? (unsigned char)in->s[in->i] : 0; }

/* <len><chars>: sets p and len, or fails. */
static int source_name(struct in *in, const char **p, size_t *len)
{
	if (!isdigit(peek(in)))
		return -1;
	size_t v = 0;
	while (isdigit(peek(in))) {
		v = v * 10 + (size_t)(in->s[in->i++] - '0');
		if (v > in->n)
			return -1;
	}
	if (v == 0 || v > in->n - in->i)
		return -1;
	*p = in->s + in->i;
	*len = v;
	in->i += v;
	return 0;
}

static void skip_abi_tags(struct in *in)
{
	while (peek(in) == 'B') {
		in->i++;
		const char *p;
		size_t len;
		if (source_name(in, &p, &len)) {
			in->err = 1;
			return;
		}
	}
}

static int type(struct in *in, struct out *o, int depth);

static const struct {
	const char *code, *name;
} builtins[] = {
	{ "Dh", "float16" }, { "v", "none" }, { "b", "bool" }, { "h", "uint8" }, { "a", "int8" },
	{ "t", "uint16" },   { "s", "int16" }, { "j", "uint32" }, { "i", "int32" }, { "y", "uint64" },
	{ "x", "int64" },    { "f", "float32" }, { "d", "float64" },
};

/* Template arguments I...E, parsed into separate strings in args. */
#define MAX_TARGS 8
struct targs {
	char buf[MAX_TARGS][160];
	int n;
	int more;
};

static int template_args(struct in *in, struct targs *t, int depth)
{
	in->i++; /* I */
	t->n = 0;
	t->more = 0;
	while (peek(in) && peek(in) != 'E') {
		char tmp[160];
		struct out o = { tmp, sizeof(tmp), 0, 0 };
		tmp[0] = 0;
		if (type(in, &o, depth + 1))
			return -1;
		if (t->n < MAX_TARGS)
			snprintf(t->buf[t->n++], sizeof(t->buf[0]), "%s", tmp);
		else
			t->more = 1;
	}
	if (peek(in) != 'E')
		return -1;
	in->i++;
	return 0;
}

/* Array<dtype, ndim, layout, mutable|readonly, aligned|unaligned> as Numba
 * writes it in signatures: float64[::1], float64[:, :], readonly ... */
static int put_array(struct out *o, const struct targs *t)
{
	if (t->n < 3)
		return -1;
	long nd = strtol(t->buf[1], NULL, 10);
	if (nd < 0 || nd > 32)
		return -1;
	if (t->n >= 4 && !strcmp(t->buf[3], "readonly"))
		puts_(o, "readonly ");
	puts_(o, t->buf[0]);
	puts_(o, "[");
	for (long k = 0; k < nd; k++) {
		if (k)
			puts_(o, ", ");
		int contig = (!strcmp(t->buf[2], "C") && k == nd - 1) || (!strcmp(t->buf[2], "F") && k == 0);
		puts_(o, contig ? "::1" : ":");
	}
	puts_(o, "]");
	return 0;
}

static int name_with_targs(struct in *in, struct out *o, const char *p, size_t len, int depth)
{
	if (peek(in) != 'I') {
		put_ident(o, p, len);
		return 0;
	}
	struct targs t;
	if (template_args(in, &t, depth))
		return -1;
	if (len == 5 && !memcmp(p, "Array", 5) && put_array(o, &t) == 0)
		return 0;
	put_ident(o, p, len);
	puts_(o, "(");
	for (int k = 0; k < t.n; k++) {
		if (k)
			puts_(o, ", ");
		puts_(o, t.buf[k]);
	}
	if (t.more)
		puts_(o, ", ...");
	puts_(o, ")");
	return 0;
}

static int type(struct in *in, struct out *o, int depth)
{
	if (depth > 16)
		return -1;
	int c = peek(in);
	for (size_t k = 0; k < sizeof(builtins) / sizeof(builtins[0]); k++) {
		size_t l = strlen(builtins[k].code);
		if (in->n - in->i >= l && !memcmp(in->s + in->i, builtins[k].code, l)) {
			in->i += l;
			puts_(o, builtins[k].name);
			return 0;
		}
	}
	if (c == 'L') { /* literal: L<type-code><value>E */
		in->i++;
		if (peek(in) == 'i')
			in->i++;
		size_t st = in->i;
		while (peek(in) && peek(in) != 'E')
			in->i++;
		if (peek(in) != 'E')
			return -1;
		put(o, in->s + st, in->i - st);
		in->i++;
		return 0;
	}
	if (c == 'N') {
		in->i++;
		int first = 1;
		while (peek(in) && peek(in) != 'E') {
			const char *p;
			size_t len;
			if (peek(in) == 'B') {
				skip_abi_tags(in);
				continue;
			}
			if (source_name(in, &p, &len))
				return -1;
			if (!first)
				puts_(o, ".");
			first = 0;
			if (name_with_targs(in, o, p, len, depth))
				return -1;
		}
		if (peek(in) != 'E')
			return -1;
		in->i++;
		return 0;
	}
	if (isdigit(c)) {
		const char *p;
		size_t len;
		if (source_name(in, &p, &len))
			return -1;
		if (name_with_targs(in, o, p, len, depth))
			return -1;
		skip_abi_tags(in);
		return in->err ? -1 : 0;
	}
	return -1;
}

int numba_demangle(const char *sym, char *buf, size_t n, int *wrapper)
{
	if (wrapper)
		*wrapper = NUMBA_FUNC;
	if (!sym || n == 0)
		return -1;
	int kind = NUMBA_FUNC;
	if (!strncmp(sym, "cfunc.", 6)) {
		kind = NUMBA_CFUNC_WRAPPER;
		sym += 6;
	} else if (!strncmp(sym, "__gufunc__.", 11)) {
		kind = NUMBA_GUFUNC_WRAPPER;
		sym += 11;
	}
	if (strncmp(sym, "_Z", 2))
		return -1;
	struct in in = { sym, 2, strlen(sym), 0 };
	struct out o = { buf, n, 0, 0 };
	buf[0] = 0;
	/* The function's name: N<parts>[abi tags]E, or a single part. */
	const char *parts[64];
	size_t lens[64];
	int np = 0;
	if (peek(&in) == 'N') {
		in.i++;
		while (peek(&in) && peek(&in) != 'E') {
			if (peek(&in) == 'B') {
				skip_abi_tags(&in);
				if (in.err)
					return -1;
				continue;
			}
			if (np == 64 || source_name(&in, &parts[np], &lens[np]))
				return -1;
			np++;
		}
		if (peek(&in) != 'E')
			return -1;
		in.i++;
	} else {
		if (source_name(&in, &parts[0], &lens[0]))
			return -1;
		np = 1;
		skip_abi_tags(&in);
		if (in.err)
			return -1;
	}
	int first = 0;
	/* The CPython wrapper (boxing the arguments, unboxing the result)
	 * is the same function with a "cpython" namespace in front. */
	if (np > 1 && lens[0] == 7 && !memcmp(parts[0], "cpython", 7)) {
		kind = kind == NUMBA_FUNC ? NUMBA_CPYTHON_WRAPPER : kind;
		first = 1;
	}
	for (int k = first; k < np; k++) {
		if (k > first)
			puts_(&o, ".");
		put_ident(&o, parts[k], lens[k]);
	}
	/* The signature; a name whose argument types we cannot read keeps
	 * its name alone. */
	size_t name_len = o.len;
	puts_(&o, "(");
	int na = 0;
	while (in.i < in.n && !o.err) {
		if (na++)
			puts_(&o, ", ");
		if (type(&in, &o, 0)) {
			o.len = name_len;
			buf[o.len] = 0;
			o.err = 0;
			goto done;
		}
	}
	if (na == 1 && !strcmp(buf + name_len, "(none"))
		o.len = name_len + 1; /* f(none) is f() */
	buf[o.len] = 0;
	puts_(&o, ")");
done:
	if (o.err)
		return -1;
	if (wrapper)
		*wrapper = kind;
	return 0;
}
