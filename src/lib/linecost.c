/*
 * linecost.c — see linecost.h.
 *
 * Linear in samples plus nodes (plus each node's depth once, to learn
 * whether its line or file already occurs above it):
 *  1. every frame gets a (file, line) key if its function is selected;
 *  2. every node learns the key its samples' self cost goes to (its own,
 *     or its nearest keyed ancestor's) and whether its key and its file
 *     occur for the first time on its path;
 *  3. filtered samples are summed on their leaf nodes, self cost goes to
 *     each node's self key, and subtree costs (children before parents:
 *     a child's index is always above its parent's) go to the keys and
 *     files at their outermost occurrence.
 */
#include "linecost.h"

#include <stdlib.h>
#include <string.h>

#include "intern.h"

/* struct linecost plus the storage behind its pointers. */
struct lc_priv {
	struct linecost lc;
	uint64_t *block;
};

void linecost_free(struct linecost *lc)
{
	if (!lc)
		return;
	struct lc_priv *lp = (struct lc_priv *)lc;
	for (uint32_t i = 0; i < lc->nfiles; i++)
		free(lc->files[i].lines);
	free(lc->files);
	free(lc->totals);
	free(lc->gc);
	free(lp->block);
	free(lp);
}

const struct lc_line *linecost_line(const struct lc_file *file, uint32_t line)
{
	uint32_t lo = 0, hi = file->nlines;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (file->lines[mid].line < line)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < file->nlines && file->lines[lo].line == line ? &file->lines[lo] : NULL;
}

static int sample_ok(const struct profile *p, const struct psample *s, const struct agg_filter *f)
{
	const struct pthread_info *t = &p->threads[s->thread];
	if ((f->pid && t->pid != f->pid) || (f->tid && t->tid != f->tid))
		return 0;
	if ((f->t0 && s->time_ns < f->t0) || (f->t1 && s->time_ns >= f->t1))
		return 0;
	if (f->type && (!(s->flags & PS_ALLOC) || s->type != f->type - 1))
		return 0;
	if (f->task && s->task != f->task - 1)
		return 0;
	return !(f->exclude_idle && (s->flags & PS_IDLE));
}

struct build {
	const struct profile *p;
	uint32_t ne;
	/* files and (file, line) keys */
	const char **fpath;
	uint32_t nfiles, cap_files;
	uint32_t *kfile, *kline, *kfunc;
	uint32_t nkeys, cap_keys;
	struct u64map file_map, key_map;
};

static int grow32(uint32_t **a, uint32_t *cap, uint32_t n)
{
	if (n <= *cap)
		return 0;
	uint32_t c = *cap ? *cap * 2 : 64;
	while (c < n)
		c *= 2;
	uint32_t *x = realloc(*a, (size_t)c * sizeof(*x));
	if (!x)
		return -1;
	*a = x;
	*cap = c;
	return 0;
}

static uint32_t file_id(struct build *b, const char *path)
{
	uint32_t id = u64map_get(&b->file_map, (uintptr_t)path);
	if (id != MAP_NONE)
		return id;
	if (b->nfiles == b->cap_files) {
		uint32_t c = b->cap_files ? b->cap_files * 2 : 16;
		const char **x = realloc(b->fpath, c * sizeof(*x));
		if (!x)
			return MAP_NONE;
		b->fpath = x;
		b->cap_files = c;
	}
	id = b->nfiles;
	if (u64map_put(&b->file_map, (uintptr_t)path, id))
		return MAP_NONE;
	b->fpath[b->nfiles++] = path;
	return id;
}

static uint32_t key_id(struct build *b, uint32_t file, uint32_t line, uint32_t func)
{
	uint64_t k = (uint64_t)file << 32 | line;
	uint32_t id = u64map_get(&b->key_map, k);
	if (id != MAP_NONE)
		return id;
	uint32_t n = b->nkeys + 1, c1 = b->cap_keys, c2 = b->cap_keys, c3 = b->cap_keys;
	if (grow32(&b->kfile, &c1, n) || grow32(&b->kline, &c2, n) || grow32(&b->kfunc, &c3, n))
		return MAP_NONE;
	b->cap_keys = c1; /* the three grew alike */
	id = b->nkeys;
	if (u64map_put(&b->key_map, k, id))
		return MAP_NONE;
	b->kfile[id] = file;
	b->kline[id] = line;
	b->kfunc[id] = func;
	b->nkeys++;
	return id;
}

static int line_cmp(const void *x, const void *y)
{
	const struct lc_line *a = x, *b = y;
	return a->line < b->line ? -1 : a->line > b->line;
}

static int file_cmp(const void *x, const void *y)
{
	const struct lc_file *a = x, *b = y;
	if (a->total[0] != b->total[0])
		return a->total[0] > b->total[0] ? -1 : 1;
	if (a->self[0] != b->self[0])
		return a->self[0] > b->self[0] ? -1 : 1;
	return strcmp(a->path, b->path);
}

struct linecost *linecost_build(const struct profile *p, const struct agg_filter *f, uint32_t kinds)
{
	static const struct agg_filter none;
	if (!f)
		f = &none;
	const uint32_t ne = p->nevents, nn = p->nnodes;
	struct lc_priv *lp = calloc(1, sizeof(*lp));
	if (!lp)
		return NULL;
	struct linecost *lc = &lp->lc;
	lc->nevents = ne;
	struct build b = { .p = p, .ne = ne };
	int ok = 0;
	uint32_t *frame_key = malloc(((size_t)p->nframes + 1) * sizeof(uint32_t));
	uint32_t *self_key = malloc((size_t)nn * sizeof(uint32_t));
	uint8_t *first = calloc(nn, 1), *hit = calloc(nn, 1), *in_gc = calloc(nn, 1);
	uint64_t *cost = calloc((size_t)nn * ne, sizeof(uint64_t));
	uint64_t *kself = NULL, *ktotal = NULL, *fself = NULL, *ftotal = NULL, *kgc = NULL, *fgc = NULL;
	lc->totals = calloc(ne, sizeof(uint64_t));
	lc->gc = calloc(ne, sizeof(uint64_t));
	if (!frame_key || !self_key || !first || !hit || !in_gc || !cost || !lc->totals || !lc->gc)
		goto fail;

	/* 1: frame → key. */
	for (uint32_t i = 0; i < p->nframes; i++) {
		const struct pframe *fr = &p->frames[i];
		const struct pfunc *fn = &p->funcs[fr->func];
		frame_key[i] = MAP_NONE;
		if (!(kinds & (1u << fn->kind)) || !fn->file[0] || !fr->line)
			continue;
		uint32_t fid = file_id(&b, fn->file);
		if (fid == MAP_NONE || (frame_key[i] = key_id(&b, fid, fr->line, fr->func)) == MAP_NONE)
			goto fail;
	}

	/* 2: per node, where self cost goes, whether it ran in the
	 * collector (a "[gc]" frame on its path, and no line since), and
	 * what occurs first here. */
	enum { FIRST_KEY = 1, FIRST_FILE = 2 };
	self_key[0] = MAP_NONE;
	for (uint32_t n = 1; n < nn; n++) {
		const struct pnode *nd = &p->nodes[n];
		uint32_t k = frame_key[nd->frame];
		self_key[n] = k != MAP_NONE ? k : self_key[nd->parent];
		const struct pfunc *fn = &p->funcs[p->frames[nd->frame].func];
		in_gc[n] = k == MAP_NONE && ((fn->kind == PK_OTHER && !strcmp(fn->name, PROFILE_GC)) || in_gc[nd->parent]);
		if (k == MAP_NONE)
			continue;
		uint8_t fl = FIRST_KEY | FIRST_FILE;
		for (uint32_t a = nd->parent; a != 0 && a != PNONE && fl; a = p->nodes[a].parent) {
			uint32_t ak = frame_key[p->nodes[a].frame];
			if (ak == MAP_NONE)
				continue;
			if (ak == k)
				fl &= (uint8_t)~FIRST_KEY;
			if (b.kfile[ak] == b.kfile[k])
				fl &= (uint8_t)~FIRST_FILE;
		}
		first[n] = fl;
	}

	/* 3: costs. */
	for (uint64_t i = f->first_sample; i < p->nsamples; i++) {
		const struct psample *s = &p->samples[i];
		if (!sample_ok(p, s, f))
			continue;
		const uint64_t *v = p->values + i * ne;
		uint64_t *c = cost + (size_t)s->node * ne;
		for (uint32_t e = 0; e < ne; e++) {
			c[e] += v[e];
			lc->totals[e] += v[e];
		}
		hit[s->node] = 1;
	}
	kself = calloc(((size_t)b.nkeys + 1) * ne, sizeof(uint64_t));
	ktotal = calloc(((size_t)b.nkeys + 1) * ne, sizeof(uint64_t));
	kgc = calloc(((size_t)b.nkeys + 1) * ne, sizeof(uint64_t));
	fself = calloc(((size_t)b.nfiles + 1) * ne, sizeof(uint64_t));
	ftotal = calloc(((size_t)b.nfiles + 1) * ne, sizeof(uint64_t));
	fgc = calloc(((size_t)b.nfiles + 1) * ne, sizeof(uint64_t));
	uint8_t *kseen = calloc(b.nkeys + 1, 1), *fseen = calloc(b.nfiles + 1, 1);
	if (!kself || !ktotal || !kgc || !fself || !ftotal || !fgc || !kseen || !fseen) {
		free(kseen);
		free(fseen);
		goto fail;
	}
	for (uint32_t n = 1; n < nn; n++) {
		if (!hit[n])
			continue;
		const uint64_t *c = cost + (size_t)n * ne;
		if (in_gc[n])
			for (uint32_t e = 0; e < ne; e++)
				lc->gc[e] += c[e];
		if (self_key[n] == MAP_NONE)
			continue;
		uint32_t k = self_key[n], fid = b.kfile[k];
		for (uint32_t e = 0; e < ne; e++) {
			kself[(size_t)k * ne + e] += c[e];
			fself[(size_t)fid * ne + e] += c[e];
			if (in_gc[n]) {
				kgc[(size_t)k * ne + e] += c[e];
				fgc[(size_t)fid * ne + e] += c[e];
			}
		}
		kseen[k] = fseen[fid] = 1;
	}
	for (uint32_t n = nn; n-- > 1;) {
		if (!hit[n])
			continue;
		const uint64_t *c = cost + (size_t)n * ne;
		uint32_t k = frame_key[p->nodes[n].frame], par = p->nodes[n].parent;
		if (k != MAP_NONE && (first[n] & FIRST_KEY)) {
			kseen[k] = 1;
			for (uint32_t e = 0; e < ne; e++)
				ktotal[(size_t)k * ne + e] += c[e];
		}
		if (k != MAP_NONE && (first[n] & FIRST_FILE)) {
			fseen[b.kfile[k]] = 1;
			for (uint32_t e = 0; e < ne; e++)
				ftotal[(size_t)b.kfile[k] * ne + e] += c[e];
		}
		if (par != 0) {
			uint64_t *pc = cost + (size_t)par * ne;
			for (uint32_t e = 0; e < ne; e++)
				pc[e] += c[e];
			hit[par] = 1;
		}
	}

	/* Output: files and lines that were on a filtered sample's path. */
	uint32_t nf = 0, nk = 0;
	for (uint32_t i = 0; i < b.nfiles; i++)
		nf += fseen[i];
	for (uint32_t i = 0; i < b.nkeys; i++)
		nk += kseen[i];
	lc->files = calloc(nf ? nf : 1, sizeof(*lc->files));
	lp->block = malloc(((size_t)nf + nk) * 3 * ne * sizeof(uint64_t) + 1);
	uint32_t *fslot = malloc(((size_t)b.nfiles + 1) * sizeof(uint32_t));
	if (!lc->files || !lp->block || !fslot) {
		free(kseen);
		free(fseen);
		free(fslot);
		goto fail;
	}
	uint64_t *blk = lp->block;
	for (uint32_t i = 0; i < b.nfiles; i++) {
		fslot[i] = MAP_NONE;
		if (!fseen[i])
			continue;
		struct lc_file *lf = &lc->files[lc->nfiles];
		lf->path = b.fpath[i];
		lf->self = blk;
		memcpy(blk, fself + (size_t)i * ne, ne * sizeof(uint64_t));
		blk += ne;
		lf->total = blk;
		memcpy(blk, ftotal + (size_t)i * ne, ne * sizeof(uint64_t));
		blk += ne;
		lf->gc = blk;
		memcpy(blk, fgc + (size_t)i * ne, ne * sizeof(uint64_t));
		blk += ne;
		fslot[i] = lc->nfiles++;
	}
	/* Count lines per file first, so each file's array is allocated once. */
	uint32_t *cnt = calloc(lc->nfiles + 1, sizeof(uint32_t));
	if (!cnt) {
		free(kseen);
		free(fseen);
		free(fslot);
		goto fail;
	}
	for (uint32_t k = 0; k < b.nkeys; k++)
		if (kseen[k] && fslot[b.kfile[k]] != MAP_NONE)
			cnt[fslot[b.kfile[k]]]++;
	int oom = 0;
	for (uint32_t i = 0; i < lc->nfiles; i++)
		if (!(lc->files[i].lines = calloc(cnt[i] ? cnt[i] : 1, sizeof(struct lc_line))))
			oom = 1;
	for (uint32_t k = 0; k < b.nkeys && !oom; k++) {
		if (!kseen[k] || fslot[b.kfile[k]] == MAP_NONE)
			continue;
		struct lc_file *lf = &lc->files[fslot[b.kfile[k]]];
		struct lc_line *ll = &lf->lines[lf->nlines++];
		ll->line = b.kline[k];
		ll->func = b.kfunc[k];
		ll->self = blk;
		memcpy(blk, kself + (size_t)k * ne, ne * sizeof(uint64_t));
		blk += ne;
		ll->total = blk;
		memcpy(blk, ktotal + (size_t)k * ne, ne * sizeof(uint64_t));
		blk += ne;
		ll->gc = blk;
		memcpy(blk, kgc + (size_t)k * ne, ne * sizeof(uint64_t));
		blk += ne;
	}
	free(cnt);
	free(kseen);
	free(fseen);
	free(fslot);
	if (oom)
		goto fail;
	for (uint32_t i = 0; i < lc->nfiles; i++)
		qsort(lc->files[i].lines, lc->files[i].nlines, sizeof(struct lc_line), line_cmp);
	qsort(lc->files, lc->nfiles, sizeof(*lc->files), file_cmp);

	ok = 1;
fail:
	/* The working tables go either way; the result only on failure. */
	free(frame_key);
	free(self_key);
	free(first);
	free(hit);
	free(in_gc);
	free(cost);
	free(kself);
	free(ktotal);
	free(kgc);
	free(fself);
	free(ftotal);
	free(fgc);
	free(b.fpath);
	free(b.kfile);
	free(b.kline);
	free(b.kfunc);
	u64map_free(&b.file_map);
	u64map_free(&b.key_map);
	if (!ok) {
		linecost_free(lc);
		lc = NULL;
	}
	return lc;
}
