/*
 * srcqual.c — qualified names of 3.8-3.10 code objects rebuilt from their
 * source (see srcqual.h for why).
 *
 * A file is scanned once into one record per logical line (its first
 * physical line, its indentation, and whether it is a decorator or a `def`
 * / `async def` / `class` header with its name). The scan follows Python's
 * lexical rules closely enough for this: strings (all quote forms, escapes,
 * triple quotes spanning lines), comments, bracket nesting and backslash
 * continuations do not start logical lines; blank and comment-only lines do
 * not count; tabs advance to the next multiple of 8, as in the tokenizer.
 *
 * A lookup replays the records with a stack of open `def`/`class`
 * statements (a statement is closed by the first logical line indented no
 * deeper than its header) and composes the name the way the compiler does:
 * a class contributes "Name.", a function "name.<locals>.".
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "srcqual.h"

enum { L_OTHER, L_DEF, L_CLASS, L_DECO };

struct lrec {
	uint32_t line, indent;
	uint32_t name;  /* offset of the def/class name in the source */
	uint16_t nlen;
	uint8_t kind;
	uint8_t inline_body; /* def/class with its body after the colon */
};

#define MAX_NEST 100          /* CPython's own limit on nested blocks is lower */
#define MAX_SOURCE (8u << 20) /* larger files are not scanned */

static int is_ident(unsigned char c)
{
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

/* Matches keyword `kw` followed by blanks at p; returns what follows. */
static const char *keyword(const char *p, const char *e, const char *kw)
{
	size_t n = strlen(kw);
	if ((size_t)(e - p) <= n || memcmp(p, kw, n) != 0 || (p[n] != ' ' && p[n] != '\t'))
		return NULL;
	p += n;
	while (p < e && (*p == ' ' || *p == '\t'))
		p++;
	return p;
}

static void classify(const char *s, const char *p, const char *e, struct lrec *r)
{
	r->kind = L_OTHER;
	if (*p == '@') {
		r->kind = L_DECO;
		return;
	}
	const char *q = keyword(p, e, "async");
	if (q)
		p = q;
	uint8_t kind = L_DEF;
	if (!(q = keyword(p, e, "def"))) {
		if (!(q = keyword(p, e, "class")))
			return;
		kind = L_CLASS;
	}
	const char *n = q;
	while (q < e && is_ident((unsigned char)*q))
		q++;
	if (q == n || q - n > 0xFFFF || (*n >= '0' && *n <= '9'))
		return;
	r->kind = kind;
	r->name = (uint32_t)(n - s);
	r->nlen = (uint16_t)(q - n);
}

/* Scans src into logical-line records. Returns 0, or -1 when out of memory. */
static int scan(const char *s, size_t n, struct lrec **out, size_t *nout)
{
	struct lrec *v = NULL;
	size_t nv = 0, cap = 0;
	size_t i = 0;
	uint32_t line = 1;
	int depth = 0, bol = 1;
	/* Header state of the current logical line, when it is a def/class:
	 * 1 until the colon that ends the header, 2 after it. */
	int header = 0;
	while (i < n) {
		if (bol) {
			bol = 0;
			uint32_t col = 0;
			size_t j = i;
			for (; j < n; j++) {
				if (s[j] == ' ')
					col++;
				else if (s[j] == '\t')
					col = (col / 8 + 1) * 8;
				else if (s[j] == '\f')
					col = 0;
				else
					break;
			}
			if (j < n && s[j] != '\n' && s[j] != '\r' && s[j] != '#' && s[j] != '\\') {
				if (nv == cap) {
					cap = cap ? cap * 2 : 256;
					struct lrec *nvv = realloc(v, cap * sizeof(*v));
					if (!nvv) {
						free(v);
						return -1;
					}
					v = nvv;
				}
				struct lrec *r = &v[nv++];
				memset(r, 0, sizeof(*r));
				r->line = line;
				r->indent = col;
				const char *e = s + j;
				while (e < s + n && *e != '\n')
					e++;
				classify(s, s + j, e, r);
				header = r->kind == L_DEF || r->kind == L_CLASS;
			} else {
				header = 0;
			}
			i = j;
			continue;
		}
		char c = s[i];
		if (header == 2 && c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != '#') {
			v[nv - 1].inline_body = 1;
			header = 0;
		}
		if (c == '\n') {
			line++;
			i++;
			bol = depth == 0;
			continue;
		}
		if (c == '#') {
			while (i < n && s[i] != '\n')
				i++;
			continue;
		}
		if (c == '\\') {
			/* An explicit continuation joins the next line to this one. */
			if (i + 1 < n && s[i + 1] == '\n') {
				line++;
				i += 2;
			} else if (i + 2 < n && s[i + 1] == '\r' && s[i + 2] == '\n') {
				line++;
				i += 3;
			} else {
				i++;
			}
			continue;
		}
		if (c == ':' && depth == 0 && header == 1) {
			header = 2;
			i++;
			continue;
		}
		if (c == '(' || c == '[' || c == '{') {
			depth++;
		} else if (c == ')' || c == ']' || c == '}') {
			if (depth)
				depth--;
		} else if (c == '"' || c == '\'') {
			int triple = i + 2 < n && s[i + 1] == c && s[i + 2] == c;
			i += triple ? 3 : 1;
			while (i < n) {
				if (s[i] == '\\') {
					/* Escapes (raw strings too) keep the next
					 * character, newline included, in the string. */
					if (i + 1 < n && s[i + 1] == '\n')
						line++;
					i += 2;
					continue;
				}
				if (s[i] == '\n') {
					if (!triple)
						break; /* unterminated: the line ends it */
					line++;
					i++;
					continue;
				}
				if (s[i] == c && (!triple || (i + 2 < n && s[i + 1] == c && s[i + 2] == c))) {
					i += triple ? 3 : 1;
					break;
				}
				i++;
			}
			continue;
		}
		i++;
	}
	*out = v;
	*nout = nv;
	return 0;
}

static char *compose(const char *s, const struct lrec *r, const uint32_t *stack, int ns, const char *co_name)
{
	size_t len = strlen(co_name) + 1;
	for (int k = 0; k < ns; k++)
		len += r[stack[k]].nlen + sizeof(".<locals>.");
	char *q = malloc(len), *o = q;
	if (!q)
		return NULL;
	for (int k = 0; k < ns; k++) {
		const struct lrec *x = &r[stack[k]];
		memcpy(o, s + x->name, x->nlen);
		o += x->nlen;
		const char *sep = x->kind == L_CLASS ? "." : ".<locals>.";
		memcpy(o, sep, strlen(sep));
		o += strlen(sep);
	}
	strcpy(o, co_name);
	return q;
}

static char *resolve(const char *s, const struct lrec *r, size_t nr, uint32_t target, const char *co_name)
{
	/* Lambdas and comprehensions start anywhere inside a logical line
	 * (a continuation line, a default argument, a decorator argument):
	 * their scope is that of the statement they appear in. Functions and
	 * classes start at their header, or at their first decorator. */
	int expr = co_name[0] == '<';
	if (!strcmp(co_name, "<module>"))
		return NULL;
	uint32_t stack[MAX_NEST];
	int ns = 0, pending = 0, pushed = 0;
	size_t k;
	for (k = 0; k < nr; k++) {
		const struct lrec *l = &r[k];
		if (expr && l->line > target)
			break;
		while (ns && r[stack[ns - 1]].indent >= l->indent)
			ns--;
		if (!expr && (pending || l->line == target)) {
			if (l->kind == L_DECO) {
				pending = 1;
				continue;
			}
			if ((l->kind == L_DEF || l->kind == L_CLASS) && l->nlen == strlen(co_name) &&
			    memcmp(s + l->name, co_name, l->nlen) == 0)
				return compose(s, r, stack, ns, co_name);
			return NULL; /* the file does not match the code object */
		}
		if (!expr && l->line > target)
			return NULL;
		pushed = 0;
		if (l->kind == L_DEF || l->kind == L_CLASS) {
			if (ns == MAX_NEST)
				return NULL;
			stack[ns++] = (uint32_t)k;
			pushed = 1;
		}
	}
	if (!expr || k == 0)
		return NULL;
	/* The statement holding the expression may itself be a def whose
	 * default argument it is: that def is not its scope, unless the body
	 * is on the same line ("def f(self): return [...]"), where the body
	 * is the likelier place. */
	if (pushed && r[stack[ns - 1]].inline_body)
		pushed = 0;
	return compose(s, r, stack, ns - pushed, co_name);
}

char *srcqual_from_text(const char *src, size_t len, uint32_t firstlineno, const char *co_name)
{
	struct lrec *r;
	size_t nr;
	if (!co_name || !*co_name || scan(src, len, &r, &nr))
		return NULL;
	char *q = resolve(src, r, nr, firstlineno, co_name);
	free(r);
	return q;
}

/* ---- file cache ------------------------------------------------------------ */

#define CACHE_FILES 32

struct cfile {
	char *path;
	char *src;          /* NULL: the file could not be read (remembered) */
	size_t len;
	struct lrec *recs;
	size_t nrecs;
	uint64_t used;
};

static struct cfile cache[CACHE_FILES];
static uint64_t cache_tick;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static void cfile_clear(struct cfile *f)
{
	free(f->path);
	free(f->src);
	free(f->recs);
	memset(f, 0, sizeof(*f));
}

static int cfile_load(struct cfile *f, const char *path)
{
	f->path = strdup(path);
	if (!f->path)
		return -1;
	FILE *fp = fopen(path, "rbe");
	struct stat st;
	if (!fp)
		return 0;
	if (fstat(fileno(fp), &st) || !S_ISREG(st.st_mode) || st.st_size <= 0 || (size_t)st.st_size > MAX_SOURCE) {
		fclose(fp);
		return 0;
	}
	char *src = malloc((size_t)st.st_size);
	size_t got = src ? fread(src, 1, (size_t)st.st_size, fp) : 0;
	fclose(fp);
	if (!src || got == 0 || scan(src, got, &f->recs, &f->nrecs)) {
		free(src);
		return 0;
	}
	f->src = src;
	f->len = got;
	return 0;
}

char *srcqual_lookup(const char *path, uint32_t firstlineno, const char *co_name, int allow_io)
{
	/* "<string>", "<stdin>", "<frozen importlib._bootstrap>": no file. */
	if (!path || !*path || path[0] == '<' || !co_name || !*co_name || !strcmp(co_name, "<module>"))
		return NULL;
	pthread_mutex_lock(&cache_lock);
	struct cfile *f = NULL, *victim = &cache[0];
	for (int i = 0; i < CACHE_FILES; i++) {
		if (cache[i].path && !strcmp(cache[i].path, path)) {
			f = &cache[i];
			break;
		}
		if (cache[i].used < victim->used)
			victim = &cache[i];
	}
	if (!f && allow_io) {
		cfile_clear(victim);
		if (cfile_load(victim, path) == 0)
			f = victim;
		else
			cfile_clear(victim);
	}
	char *q = NULL;
	if (f) {
		f->used = ++cache_tick;
		if (f->src)
			q = resolve(f->src, f->recs, f->nrecs, firstlineno, co_name);
	}
	pthread_mutex_unlock(&cache_lock);
	return q;
}
