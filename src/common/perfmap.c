/*
 * perfmap.c — see perfmap.h.
 */
#include "perfmap.h"

#include <stdlib.h>
#include <string.h>

#include "format.h"

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A hex number at line[*i]; at most 16 digits, so no overflow. */
static int parse_hex(const char *line, size_t len, size_t *i, uint64_t *out)
{
	if (*i + 1 < len && line[*i] == '0' && (line[*i + 1] == 'x' || line[*i + 1] == 'X'))
		*i += 2;
	uint64_t v = 0;
	size_t digits = 0;
	int d;
	while (*i < len && (d = hexval(line[*i])) >= 0) {
		if (++digits > 16)
			return -1;
		v = v << 4 | (uint64_t)d;
		(*i)++;
	}
	if (!digits)
		return -1;
	*out = v;
	return 0;
}

int perfmap_parse_line(const char *line, size_t len, uint64_t *start, uint64_t *size, const char **name,
		       size_t *namelen)
{
	size_t i = 0;
	if (parse_hex(line, len, &i, start) || i >= len || line[i] != ' ')
		return -1;
	while (i < len && line[i] == ' ')
		i++;
	if (parse_hex(line, len, &i, size))
		return -1;
	if (i < len && line[i] != ' ')
		return -1;
	if (i < len)
		i++; /* the one separator: the name is the rest, spaces included */
	size_t n = len - i;
	while (n && (line[i + n - 1] == '\r' || line[i + n - 1] == '\n'))
		n--;
	if (*size == 0 || *start + *size < *start)
		return -1;
	*name = line + i;
	*namelen = n > PERFMAP_NAME_MAX ? PERFMAP_NAME_MAX : n;
	return 0;
}

void rec_put_perfmap(struct wbuf *b, const struct perfmap_entry *e, uint32_t n)
{
	struct wbuf body;
	wbuf_init(&body);
	wbuf_uv(&body, n);
	for (uint32_t i = 0; i < n; i++) {
		wbuf_uv(&body, e[i].start);
		wbuf_uv(&body, e[i].size);
		wbuf_str(&body, e[i].name);
	}
	if (body.oom)
		b->oom = 1;
	else
		rec_put_raw(b, REC_PERFMAP, body.data, body.len);
	wbuf_free(&body);
}

void perfmap_entries_free(struct perfmap_entry *e, uint32_t n)
{
	for (uint32_t i = 0; e && i < n; i++)
		free(e[i].name);
	free(e);
}

int rec_get_perfmap(struct rbuf *b, struct perfmap_entry **out, uint32_t *nout)
{
	*out = NULL;
	*nout = 0;
	uint64_t n = rbuf_uv(b);
	/* Each entry takes at least three bytes. */
	if (b->err || n > PERFMAP_REC_MAX || n * 3 > rbuf_left(b))
		return -1;
	struct perfmap_entry *e = calloc(n ? n : 1, sizeof(*e));
	if (!e)
		return -1;
	uint32_t i;
	for (i = 0; i < n; i++) {
		e[i].start = rbuf_uv(b);
		e[i].size = rbuf_uv(b);
		e[i].name = rbuf_strdup(b);
		if (b->err || !e[i].name || e[i].start + e[i].size < e[i].start)
			break;
	}
	if (i < n) {
		perfmap_entries_free(e, i + 1);
		return -1;
	}
	*out = e;
	*nout = (uint32_t)n;
	return 0;
}

int perfmap_table_add(struct perfmap_table *t, uint64_t start, uint64_t size, const char *name)
{
	if (!size || start + size < start)
		return 0; /* covers nothing */
	if (t->n == UINT32_MAX)
		return -1;
	if (t->n == t->cap) {
		uint32_t cap = t->cap ? (t->cap > UINT32_MAX / 2 ? UINT32_MAX : t->cap * 2) : 256;
		struct perfmap_entry *e = realloc(t->e, (size_t)cap * sizeof(*e));
		if (!e)
			return -1;
		t->e = e;
		uint32_t *s = realloc(t->seq, (size_t)cap * sizeof(*s));
		if (!s)
			return -1;
		t->seq = s;
		t->cap = cap;
	}
	char *c = strdup(name ? name : "");
	if (!c)
		return -1;
	/* JITs mostly hand out addresses in increasing order (CPython's
	 * trampolines fill one arena after another): an entry after the last
	 * keeps the table sorted, so lookups between batches need no sort. */
	if (t->n && start < t->e[t->n - 1].start)
		t->sorted = 0;
	else if (!t->n)
		t->sorted = 1;
	t->e[t->n] = (struct perfmap_entry){ start, size, c };
	/* Arrival order: entries are only ever appended, so the count. */
	t->seq[t->n] = t->n;
	t->n++;
	if (size > t->max_size)
		t->max_size = size;
	return 0;
}

/* Sorting moves entries and their sequence numbers together. */
struct pm_pair {
	struct perfmap_entry e;
	uint32_t seq;
};

static int pair_cmp(const void *a, const void *b)
{
	const struct pm_pair *x = a, *y = b;
	if (x->e.start != y->e.start)
		return x->e.start < y->e.start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int table_sort(struct perfmap_table *t)
{
	struct pm_pair *p = malloc((size_t)(t->n ? t->n : 1) * sizeof(*p));
	if (!p)
		return -1;
	for (uint32_t i = 0; i < t->n; i++)
		p[i] = (struct pm_pair){ t->e[i], t->seq[i] };
	qsort(p, t->n, sizeof(*p), pair_cmp);
	for (uint32_t i = 0; i < t->n; i++) {
		t->e[i] = p[i].e;
		t->seq[i] = p[i].seq;
	}
	free(p);
	t->sorted = 1;
	return 0;
}

/* Overlapping entries are rare (code freed and its memory reused), so a
 * lookup looks back over a few entries that start before the address. */
#define LOOK_BACK 64

const struct perfmap_entry *perfmap_table_find(struct perfmap_table *t, uint64_t addr)
{
	if (!t->n || (!t->sorted && table_sort(t)))
		return NULL;
	uint32_t lo = 0, hi = t->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (t->e[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	const struct perfmap_entry *best = NULL;
	uint32_t best_seq = 0;
	for (uint32_t i = lo, k = 0; i-- > 0 && k < LOOK_BACK; k++) {
		const struct perfmap_entry *e = &t->e[i];
		if (addr - e->start >= t->max_size)
			break; /* nothing further back can reach addr */
		if (addr - e->start < e->size && (!best || t->seq[i] > best_seq)) {
			best = e;
			best_seq = t->seq[i];
		}
	}
	return best;
}

void perfmap_table_free(struct perfmap_table *t)
{
	for (uint32_t i = 0; i < t->n; i++)
		free(t->e[i].name);
	free(t->e);
	free(t->seq);
	memset(t, 0, sizeof(*t));
}

int perfmap_is_cpython_trampoline(const char *name)
{
	return name && !strncmp(name, "py::", 4);
}
