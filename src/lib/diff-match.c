/*
 * diff-match.c — which functions, lines and files of two profiles are the
 * same (diff.h): the file pairing across checkouts and machines, and the
 * keys both sides share.
 *
 * Files are paired in three passes, each only over what the ones before
 * left unpaired, so that a sure answer is never overruled by a guess:
 *  1. equal paths (after --strip-prefix);
 *  2. the longest run of trailing path components two files share, when
 *     that pair is the only one of its length for both files (so
 *     pkg/util.py pairs with pkg/util.py, never with other/util.py);
 *  3. the directory rewrites pass 2 found (the part before the shared
 *     run: /home/a/proj -> /tmp/b/proj), most supported first, applied
 *     to what is left: this pairs the files pass 2 found ambiguous
 *     (several __init__.py) the way their neighbours paired.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "intern.h"

struct side_paths {
	const char **raw;        /* distinct source paths of the side's functions */
	const char **stripped;   /* the same after --strip-prefix (pointers into raw) */
	uint32_t *partner;       /* index of the paired path of the other side, PNONE */
	uint32_t *key;           /* its key */
	uint32_t n, cap;
	struct idmap by_raw, by_stripped;
};

struct diff_match {
	const struct profile *p[2];
	struct strpool pool;
	struct u64map str_keys;  /* interned key string -> key */
	struct u64map line_keys; /* func key << 32 | line -> key */
	uint32_t nkeys;
	uint32_t *func_key[2], *line_key[2], *file_key[2];
	struct side_paths sp[2];
	const char **kpath[2];   /* per key: the side's path of a file key, else NULL */
	uint32_t cap_kpath;
	struct u64map new_frame, new_func; /* key -> first NEW frame / function */
	struct diff_file_stats stats;
	int oom;
};

/* ---- strings ---------------------------------------------------------------- */

static int eq_raw(const void *ctx, uint32_t id)
{
	const void *const *c = ctx;
	const struct side_paths *sp = c[0];
	return !strcmp(sp->raw[id], c[1]);
}

static int eq_stripped(const void *ctx, uint32_t id)
{
	const void *const *c = ctx;
	const struct side_paths *sp = c[0];
	return !strcmp(sp->stripped[id], c[1]);
}

static uint64_t hstr(const char *s) { return hash_bytes(s, strlen(s), 0x5eed); }

static uint32_t find_raw(const struct side_paths *sp, const char *s)
{
	const void *ctx[2] = { sp, s };
	return idmap_find(&sp->by_raw, hstr(s), eq_raw, ctx);
}

static uint32_t find_stripped(const struct side_paths *sp, const char *s)
{
	const void *ctx[2] = { sp, s };
	return idmap_find(&sp->by_stripped, hstr(s), eq_stripped, ctx);
}

static const char *strip(const char *path, const struct diff_match_opts *o)
{
	size_t best = 0;
	for (uint32_t i = 0; o && i < o->nstrip; i++) {
		size_t n = strlen(o->strip[i]);
		while (n > 1 && o->strip[i][n - 1] == '/')
			n--;
		/* A whole directory only: /srv/app strips /srv/app/x.py, not /srv/apple.py. */
		if (n > best && !strncmp(path, o->strip[i], n) && (path[n] == '/' || path[n] == 0))
			best = n;
	}
	path += best;
	while (best && *path == '/')
		path++;
	return path;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* How many whole trailing path components a and b share; *alen and
 * *blen get the length of what comes before them (up to and with the '/'
 * that ends it). */
static uint32_t common_suffix(const char *a, const char *b, size_t *alen, size_t *blen)
{
	size_t i = strlen(a), j = strlen(b);
	uint32_t comps = 0;
	*alen = i;
	*blen = j;
	for (;;) {
		size_t si = i, sj = j;
		while (si > 0 && a[si - 1] != '/')
			si--;
		while (sj > 0 && b[sj - 1] != '/')
			sj--;
		if (i == si || i - si != j - sj || memcmp(a + si, b + sj, i - si))
			break;
		comps++;
		*alen = si;
		*blen = sj;
		if (si == 0 || sj == 0)
			break;
		i = si - 1;
		j = sj - 1;
	}
	return comps;
}

/* ---- keys ------------------------------------------------------------------- */

static int grow_kpath(struct diff_match *m, uint32_t n)
{
	if (n <= m->cap_kpath)
		return 0;
	uint32_t c = m->cap_kpath ? m->cap_kpath * 2 : 256;
	while (c < n)
		c *= 2;
	for (int s = 0; s < 2; s++) {
		const char **x = realloc(m->kpath[s], c * sizeof(*x));
		if (!x)
			return -1;
		memset(x + m->cap_kpath, 0, (c - m->cap_kpath) * sizeof(*x));
		m->kpath[s] = x;
	}
	m->cap_kpath = c;
	return 0;
}

static uint32_t new_key(struct diff_match *m)
{
	if (grow_kpath(m, m->nkeys + 1)) {
		m->oom = 1;
		return PNONE;
	}
	return m->nkeys++;
}

/* The key of a string made of `tag` and up to three parts separated by
 * 0x1f (no name or path holds one). */
static uint32_t str_key(struct diff_match *m, char tag, const char *a, const char *b, const char *c)
{
	size_t la = a ? strlen(a) : 0, lb = b ? strlen(b) : 0, lc = c ? strlen(c) : 0;
	char stackbuf[512], *buf = stackbuf;
	size_t n = 1 + la + 1 + lb + 1 + lc;
	if (n + 1 > sizeof(stackbuf) && !(buf = malloc(n + 1))) {
		m->oom = 1;
		return PNONE;
	}
	char *o = buf;
	*o++ = tag;
	memcpy(o, a ? a : "", la);
	o += la;
	*o++ = 0x1f;
	memcpy(o, b ? b : "", lb);
	o += lb;
	*o++ = 0x1f;
	memcpy(o, c ? c : "", lc);
	o += lc;
	const char *s = strpool_intern(&m->pool, buf, (size_t)(o - buf));
	if (buf != stackbuf)
		free(buf);
	if (!s) {
		m->oom = 1;
		return PNONE;
	}
	uint32_t k = u64map_get(&m->str_keys, (uintptr_t)s);
	if (k != MAP_NONE)
		return k;
	if ((k = new_key(m)) == PNONE || u64map_put(&m->str_keys, (uintptr_t)s, k)) {
		m->oom = 1;
		return PNONE;
	}
	return k;
}

static uint32_t line_key(struct diff_match *m, uint32_t fk, uint32_t line)
{
	uint64_t x = (uint64_t)fk << 32 | line;
	uint32_t k = u64map_get(&m->line_keys, x);
	if (k != MAP_NONE)
		return k;
	if ((k = new_key(m)) == PNONE || u64map_put(&m->line_keys, x, k)) {
		m->oom = 1;
		return PNONE;
	}
	return k;
}

/* ---- files -------------------------------------------------------------------- */

static int collect_paths(struct side_paths *sp, const struct profile *p, const struct diff_match_opts *o)
{
	for (uint32_t f = 0; f < p->nfuncs; f++) {
		const struct pfunc *fn = &p->funcs[f];
		if (fn->kind == PK_OTHER || !fn->file || !fn->file[0] || find_raw(sp, fn->file) != MAP_NONE)
			continue;
		if (sp->n == sp->cap) {
			uint32_t c = sp->cap ? sp->cap * 2 : 64;
			const char **r = realloc(sp->raw, c * sizeof(*r));
			if (!r)
				return -1;
			sp->raw = r;
			const char **s = realloc(sp->stripped, c * sizeof(*s));
			if (!s)
				return -1;
			sp->stripped = s;
			uint32_t *pa = realloc(sp->partner, c * sizeof(*pa));
			if (!pa)
				return -1;
			sp->partner = pa;
			uint32_t *k = realloc(sp->key, c * sizeof(*k));
			if (!k)
				return -1;
			sp->key = k;
			sp->cap = c;
		}
		uint32_t i = sp->n++;
		sp->raw[i] = fn->file;
		sp->stripped[i] = strip(fn->file, o);
		sp->partner[i] = PNONE;
		sp->key[i] = PNONE;
		if (idmap_add(&sp->by_raw, hstr(sp->raw[i]), i))
			return -1;
		if (find_stripped(sp, sp->stripped[i]) == MAP_NONE && idmap_add(&sp->by_stripped, hstr(sp->stripped[i]), i))
			return -1;
	}
	return 0;
}

struct cand {
	uint32_t n, b;     /* NEW and BASE path index */
	uint32_t len;      /* shared trailing components */
	size_t npre, bpre; /* lengths of the parts before them */
};

static int cand_cmp(const void *x, const void *y)
{
	const struct cand *a = x, *b = y;
	if (a->len != b->len)
		return a->len > b->len ? -1 : 1;
	if (a->n != b->n)
		return a->n < b->n ? -1 : 1;
	return a->b < b->b ? -1 : a->b > b->b;
}

struct rewrite {
	const char *from, *to; /* NEW prefix, BASE prefix (not NUL-terminated at their lengths) */
	size_t nfrom, nto;
	uint32_t support;
};

static int rw_cmp(const void *x, const void *y)
{
	const struct rewrite *a = x, *b = y;
	if (a->support != b->support)
		return a->support > b->support ? -1 : 1;
	return a->nfrom > b->nfrom ? -1 : a->nfrom < b->nfrom;
}

static void pair(struct diff_match *m, uint32_t n, uint32_t b, int moved)
{
	m->sp[DIFF_NEW].partner[n] = b;
	m->sp[DIFF_BASE].partner[b] = n;
	if (moved)
		m->stats.moved++;
	else
		m->stats.same++;
}

static int pair_files(struct diff_match *m)
{
	struct side_paths *B = &m->sp[DIFF_BASE], *N = &m->sp[DIFF_NEW];
	/* 1: equal (stripped) paths. */
	for (uint32_t i = 0; i < N->n; i++) {
		uint32_t b = find_stripped(B, N->stripped[i]);
		if (b != MAP_NONE && B->partner[b] == PNONE)
			pair(m, i, b, 0);
	}
	/* 2: candidates with the same file name, longest shared tail first. */
	struct cand *cs = NULL;
	size_t nc = 0, cap = 0;
	for (uint32_t i = 0; i < N->n; i++) {
		if (N->partner[i] != PNONE)
			continue;
		const char *bn = base_name(N->stripped[i]);
		for (uint32_t b = 0; b < B->n; b++) {
			if (B->partner[b] != PNONE || strcmp(base_name(B->stripped[b]), bn))
				continue;
			if (nc == cap) {
				cap = cap ? cap * 2 : 64;
				struct cand *x = realloc(cs, cap * sizeof(*x));
				if (!x) {
					free(cs);
					return -1;
				}
				cs = x;
			}
			struct cand *c = &cs[nc++];
			c->n = i;
			c->b = b;
			c->len = common_suffix(N->stripped[i], B->stripped[b], &c->npre, &c->bpre);
		}
	}
	if (nc)
		qsort(cs, nc, sizeof(*cs), cand_cmp);
	struct rewrite *rw = NULL;
	size_t nrw = 0;
	/* A path with several equally good candidates is left to pass 3:
	 * pairing it with a shorter match would be a guess. */
	uint8_t *blocked[2] = { calloc(B->n + 1, 1), calloc(N->n + 1, 1) };
	if (!blocked[0] || !blocked[1])
		goto oom;
#define OPEN(c) (N->partner[(c)->n] == PNONE && B->partner[(c)->b] == PNONE && !blocked[1][(c)->n] && \
		 !blocked[0][(c)->b])
	for (size_t k = 0; k < nc;) {
		size_t end = k;
		while (end < nc && cs[end].len == cs[k].len)
			end++;
		if (!cs[k].len)
			break;
		/* Decide the whole group first: pairing one does not change
		 * which others are unique. */
		for (size_t a = k; a < end; a++) {
			struct cand *c = &cs[a];
			if (!OPEN(c))
				continue;
			uint32_t same = 0;
			for (size_t o = k; o < end; o++)
				if (o != a && OPEN(&cs[o]) && (cs[o].n == c->n || cs[o].b == c->b))
					same++;
			c->len = same ? UINT32_MAX : c->len; /* mark */
		}
		for (size_t a = k; a < end; a++) {
			struct cand *c = &cs[a];
			if (c->len == UINT32_MAX) {
				blocked[1][c->n] = blocked[0][c->b] = 1;
				continue;
			}
			if (!OPEN(c))
				continue;
			pair(m, c->n, c->b, 1);
			/* The directory rewrite it implies. */
			const char *from = N->stripped[c->n], *to = B->stripped[c->b];
			size_t r;
			for (r = 0; r < nrw; r++)
				if (rw[r].nfrom == c->npre && rw[r].nto == c->bpre && !strncmp(rw[r].from, from, c->npre) &&
				    !strncmp(rw[r].to, to, c->bpre))
					break;
			if (r == nrw) {
				struct rewrite *x = realloc(rw, (nrw + 1) * sizeof(*x));
				if (!x)
					goto oom;
				rw = x;
				rw[nrw++] = (struct rewrite){ from, to, c->npre, c->bpre, 0 };
			}
			rw[r].support++;
		}
		k = end;
	}
#undef OPEN
	free(blocked[0]);
	free(blocked[1]);
	free(cs);
	/* 3: the rewrites, most supported (then longest) first. */
	if (nrw)
		qsort(rw, nrw, sizeof(*rw), rw_cmp);
	for (uint32_t i = 0; i < N->n && nrw; i++) {
		if (N->partner[i] != PNONE)
			continue;
		const char *s = N->stripped[i];
		for (size_t r = 0; r < nrw; r++) {
			if (strncmp(s, rw[r].from, rw[r].nfrom))
				continue;
			size_t rest = strlen(s + rw[r].nfrom);
			char *cand = malloc(rw[r].nto + rest + 1);
			if (!cand) {
				free(rw);
				return -1;
			}
			memcpy(cand, rw[r].to, rw[r].nto);
			memcpy(cand + rw[r].nto, s + rw[r].nfrom, rest + 1);
			uint32_t b = find_stripped(B, cand);
			free(cand);
			if (b != MAP_NONE && B->partner[b] == PNONE) {
				pair(m, i, b, 1);
				break;
			}
		}
	}
	free(rw);
	for (uint32_t i = 0; i < N->n; i++)
		m->stats.new_only += N->partner[i] == PNONE;
	for (uint32_t b = 0; b < B->n; b++)
		m->stats.base_only += B->partner[b] == PNONE;
	return 0;
oom:
	free(blocked[0]);
	free(blocked[1]);
	free(cs);
	free(rw);
	return -1;
}

/* File keys: a pair shares BASE's path's key; NEW's unpaired files get
 * keys of their own ('N'), so they never meet a BASE path by accident. */
static void file_keys(struct diff_match *m)
{
	struct side_paths *B = &m->sp[DIFF_BASE], *N = &m->sp[DIFF_NEW];
	for (uint32_t b = 0; b < B->n && !m->oom; b++) {
		B->key[b] = str_key(m, 'F', B->raw[b], NULL, NULL);
		if (B->key[b] != PNONE)
			m->kpath[DIFF_BASE][B->key[b]] = B->raw[b];
	}
	for (uint32_t i = 0; i < N->n && !m->oom; i++) {
		uint32_t b = N->partner[i];
		N->key[i] = b != PNONE ? B->key[b] : str_key(m, 'N', N->raw[i], NULL, NULL);
		if (N->key[i] != PNONE)
			m->kpath[DIFF_NEW][N->key[i]] = N->raw[i];
	}
}

/* ---- functions and frames ------------------------------------------------------ */

static uint32_t func_key_of(struct diff_match *m, int side, const struct pfunc *fn, uint32_t *file)
{
	char num[16];
	uint32_t pk = PNONE;
	*file = PNONE;
	if (fn->kind != PK_OTHER && fn->file && fn->file[0]) {
		uint32_t i = find_raw(&m->sp[side], fn->file);
		pk = i == MAP_NONE ? PNONE : m->sp[side].key[i];
	}
	switch (fn->kind) {
	case PK_PYTHON:
		*file = pk;
		snprintf(num, sizeof(num), "%u", pk);
		return str_key(m, 'P', pk == PNONE ? "" : num, fn->name, NULL);
	case PK_NATIVE: {
		const char *obj = fn->module ? base_name(fn->module) : "";
		*file = pk != PNONE ? pk : str_key(m, 'B', obj, NULL, NULL);
		return str_key(m, 'C', obj, fn->name, NULL);
	}
	case PK_JIT:
		*file = pk;
		return str_key(m, 'J', fn->name, NULL, NULL);
	default:
		return str_key(m, 'O', fn->name, NULL, NULL);
	}
}

static int side_keys(struct diff_match *m, int side)
{
	const struct profile *p = m->p[side];
	m->func_key[side] = malloc(((size_t)p->nfuncs + 1) * sizeof(uint32_t));
	m->file_key[side] = malloc(((size_t)p->nfuncs + 1) * sizeof(uint32_t));
	m->line_key[side] = malloc(((size_t)p->nframes + 1) * sizeof(uint32_t));
	if (!m->func_key[side] || !m->file_key[side] || !m->line_key[side])
		return -1;
	for (uint32_t f = 0; f < p->nfuncs && !m->oom; f++) {
		m->func_key[side][f] = func_key_of(m, side, &p->funcs[f], &m->file_key[side][f]);
		if (side == DIFF_NEW && u64map_get(&m->new_func, m->func_key[side][f]) == MAP_NONE &&
		    u64map_put(&m->new_func, m->func_key[side][f], f))
			return -1;
	}
	for (uint32_t fr = 0; fr < p->nframes && !m->oom; fr++) {
		const struct pframe *x = &p->frames[fr];
		uint32_t k = m->line_key[side][fr] = line_key(m, m->func_key[side][x->func], x->line);
		if (side == DIFF_NEW && u64map_get(&m->new_frame, k) == MAP_NONE && u64map_put(&m->new_frame, k, fr))
			return -1;
	}
	return m->oom ? -1 : 0;
}

struct diff_match *diff_match_build(const struct profile *base, const struct profile *new_,
				    const struct diff_match_opts *o)
{
	struct diff_match *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->p[DIFF_BASE] = base;
	m->p[DIFF_NEW] = new_;
	if (collect_paths(&m->sp[DIFF_BASE], base, o) || collect_paths(&m->sp[DIFF_NEW], new_, o) || pair_files(m))
		goto fail;
	file_keys(m);
	if (m->oom || side_keys(m, DIFF_BASE) || side_keys(m, DIFF_NEW))
		goto fail;
	return m;
fail:
	diff_match_free(m);
	return NULL;
}

void diff_match_free(struct diff_match *m)
{
	if (!m)
		return;
	for (int s = 0; s < 2; s++) {
		free(m->func_key[s]);
		free(m->line_key[s]);
		free(m->file_key[s]);
		free(m->kpath[s]);
		free(m->sp[s].raw);
		free(m->sp[s].stripped);
		free(m->sp[s].partner);
		free(m->sp[s].key);
		idmap_free(&m->sp[s].by_raw);
		idmap_free(&m->sp[s].by_stripped);
	}
	strpool_free(&m->pool);
	u64map_free(&m->str_keys);
	u64map_free(&m->line_keys);
	u64map_free(&m->new_frame);
	u64map_free(&m->new_func);
	free(m);
}

/* ---- queries ------------------------------------------------------------------- */

uint32_t diff_nkeys(const struct diff_match *m) { return m->nkeys; }

uint32_t diff_func_key(const struct diff_match *m, int side, uint32_t func)
{
	return func < m->p[side]->nfuncs ? m->func_key[side][func] : PNONE;
}

uint32_t diff_line_key(const struct diff_match *m, int side, uint32_t frame)
{
	return frame < m->p[side]->nframes ? m->line_key[side][frame] : PNONE;
}

uint32_t diff_file_key(const struct diff_match *m, int side, uint32_t func)
{
	return func < m->p[side]->nfuncs ? m->file_key[side][func] : PNONE;
}

uint32_t diff_path_key(const struct diff_match *m, int side, const char *path)
{
	uint32_t i = path ? find_raw(&m->sp[side], path) : MAP_NONE;
	return i == MAP_NONE ? PNONE : m->sp[side].key[i];
}

uint32_t diff_frame_in_new(const struct diff_match *m, uint32_t base_frame)
{
	uint32_t k = diff_line_key(m, DIFF_BASE, base_frame);
	uint32_t f = k == PNONE ? MAP_NONE : u64map_get(&m->new_frame, k);
	return f == MAP_NONE ? PNONE : f;
}

uint32_t diff_func_in_new(const struct diff_match *m, uint32_t base_func)
{
	uint32_t k = diff_func_key(m, DIFF_BASE, base_func);
	uint32_t f = k == PNONE ? MAP_NONE : u64map_get(&m->new_func, k);
	return f == MAP_NONE ? PNONE : f;
}

void diff_file_stats(const struct diff_match *m, struct diff_file_stats *st) { *st = m->stats; }

const char *diff_key_path(const struct diff_match *m, int side, uint32_t key)
{
	return key < m->nkeys ? m->kpath[side][key] : NULL;
}
