/*
 * collapsed.c — `-f collapsed`: Brendan Gregg's folded stacks, one line per
 * distinct stack, root first, frames separated by ';', then a space and the
 * stack's count (of the chosen event). flamegraph.pl, speedscope, inferno
 * and most flame graph tools read it.
 *
 * Labels are escaped so those parsers cannot misread them: ';' (the frame
 * separator) becomes ':', control characters become spaces, and a label
 * whose last word is a number gets an underscore in place of the space
 * before it, because a trailing " NUMBER" is how a second count column
 * (differential flame graphs) is recognised.
 *
 * With convert --diff BASE each line carries two counts, BASE's then this
 * profile's, as flamegraph.pl expects for a differential flame graph (and
 * Brendan Gregg's difffolded.pl writes). BASE's stacks are written with
 * this profile's labels where their frames match (lib/diff.c), so a stack
 * of both is one line; BASE's counts are scaled to this profile's total
 * (the change in share), or with --absolute to its unit (samples of
 * another period become this one's), and rounded.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "export.h"
#include "labels.h"
#include "lib/intern.h"

static void escape(char *s)
{
	for (char *c = s; *c; c++) {
		if (*c == ';')
			*c = ':';
		else if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = ' ';
	}
	size_t n = strlen(s), i = n;
	while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9')
		i--;
	if (i > 0 && i < n && (s[i - 1] == ' ' || s[i - 1] == '\t'))
		s[i - 1] = '_';
}

/* The label id of frame f of profile p (a new one when first seen). */
static uint32_t label_id(const struct profile *p, uint32_t f, struct strpool *pool, struct u64map *ids,
			const char **labels, uint32_t *nlabels)
{
	char buf[4096];
	frame_label(p, f, 0, buf, sizeof(buf));
	escape(buf);
	const char *s = strpool_str(pool, buf);
	if (!s)
		return MAP_NONE;
	uint32_t id = u64map_get(ids, (uintptr_t)s);
	if (id == MAP_NONE) {
		id = *nlabels;
		labels[(*nlabels)++] = s;
		if (u64map_put(ids, (uintptr_t)s, id))
			return MAP_NONE;
	}
	return id;
}

/* Call-tree nodes that read the same (native frames differ by address,
 * two call sites on one line are one label) become one line: a "label
 * path" is interned per node, parent path and label, and the counts of
 * nodes with the same label path are added. */
int export_collapsed(const struct profile *p, FILE *out, const struct export_opts *o, char *err, size_t errlen)
{
	uint32_t nn = p->nnodes ? p->nnodes : 1, nf = p->nframes ? p->nframes : 1;
	/* --diff: BASE's nodes get label paths in the same table, so label
	 * paths can be as many as both profiles' nodes. */
	const struct profile *bq = o->diff ? o->diff->base : NULL;
	uint32_t bnn = bq && bq->nnodes ? bq->nnodes : 1, bnf = bq && bq->nframes ? bq->nframes : 1;
	size_t np = (size_t)nn + (bq ? bnn : 0), nl = (size_t)nf + (bq ? bnf : 0);
	uint64_t *count = calloc(nn, sizeof(*count));
	uint32_t *flabel = malloc(nf * sizeof(*flabel));    /* frame → label id */
	uint32_t *npath = malloc(nn * sizeof(*npath));      /* node → label path */
	uint32_t *pparent = malloc(np * sizeof(*pparent));  /* label path → its parent path */
	uint32_t *plabel = malloc(np * sizeof(*plabel));    /* label path → its last label */
	uint64_t *pcount = calloc(np, sizeof(*pcount));
	uint64_t *bcount = bq ? calloc(bnn, sizeof(*bcount)) : NULL;
	uint64_t *bpcount = bq ? calloc(np, sizeof(*bpcount)) : NULL;
	uint32_t *bflabel = bq ? malloc(bnf * sizeof(*bflabel)) : NULL, *bnpath = bq ? malloc(bnn * sizeof(*bnpath)) : NULL;
	uint32_t *chain = malloc(np * sizeof(*chain));
	const char **labels = malloc(nl * sizeof(*labels));
	struct strpool pool = { 0 };
	struct u64map label_ids = { 0 }, paths = { 0 };
	uint32_t nlabels = 0, npaths = 1;
	int rc = -1;
	if (!count || !flabel || !npath || !pparent || !plabel || !pcount || !chain || !labels ||
	    (bq && (!bcount || !bpcount || !bflabel || !bnpath)))
		goto oom;
	for (uint64_t i = 0; i < p->nsamples; i++) {
		if (o->exclude_idle && (p->samples[i].flags & PS_IDLE))
			continue;
		count[p->samples[i].node] += profile_value(p, i, o->event);
	}
	for (uint32_t f = 0; f < p->nframes; f++)
		flabel[f] = MAP_NONE;
	/* Path 0 is the root; a node's parent has a lower index. */
	npath[0] = 0;
	pparent[0] = MAP_NONE;
	for (uint32_t n = 1; n < p->nnodes; n++) {
		uint32_t f = p->nodes[n].frame;
		if (flabel[f] == MAP_NONE && (flabel[f] = label_id(p, f, &pool, &label_ids, labels, &nlabels)) == MAP_NONE)
			goto oom;
		uint64_t key = (uint64_t)npath[p->nodes[n].parent] << 32 | flabel[f];
		uint32_t path = u64map_get(&paths, key);
		if (path == MAP_NONE) {
			path = npaths++;
			pparent[path] = npath[p->nodes[n].parent];
			plabel[path] = flabel[f];
			if (u64map_put(&paths, key, path))
				goto oom;
		}
		npath[n] = path;
		pcount[path] += count[n];
	}
	if (bq) {
		/* BASE's frames read as their match here, or as themselves. */
		for (uint32_t f = 0; f < bq->nframes; f++) {
			uint32_t nfr = diff_frame_in_new(o->diff->match, f);
			if (nfr != PNONE && flabel[nfr] == MAP_NONE &&
			    (flabel[nfr] = label_id(p, nfr, &pool, &label_ids, labels, &nlabels)) == MAP_NONE)
				goto oom;
			bflabel[f] = nfr != PNONE ? flabel[nfr] : label_id(bq, f, &pool, &label_ids, labels, &nlabels);
			if (bflabel[f] == MAP_NONE)
				goto oom;
		}
		for (uint64_t i = 0; i < bq->nsamples; i++) {
			if ((o->exclude_idle && (bq->samples[i].flags & PS_IDLE)) || bq->samples[i].node >= bq->nnodes)
				continue;
			bcount[bq->samples[i].node] += profile_value(bq, i, o->diff->base_event);
		}
		bnpath[0] = 0;
		for (uint32_t n = 1; n < bq->nnodes; n++) {
			uint32_t lab = bflabel[bq->nodes[n].frame];
			uint64_t key = (uint64_t)bnpath[bq->nodes[n].parent] << 32 | lab;
			uint32_t path = u64map_get(&paths, key);
			if (path == MAP_NONE) {
				path = npaths++;
				pparent[path] = bnpath[bq->nodes[n].parent];
				plabel[path] = lab;
				if (u64map_put(&paths, key, path))
					goto oom;
			}
			bnpath[n] = path;
			bpcount[path] += bcount[n];
		}
	}
	/* BASE's counts in this profile's terms. */
	double bscale = 1.0;
	if (bq) {
		uint64_t ball = 0, nall = 0;
		for (uint32_t path = 1; path < npaths; path++)
			ball += bpcount[path], nall += pcount[path];
		if (o->diff->absolute)
			bscale = o->diff->scale[1] > 0 ? o->diff->scale[0] / o->diff->scale[1] : 1.0;
		else
			bscale = ball ? (double)nall / (double)ball : 1.0;
	}
	for (uint32_t path = 1; path < npaths; path++) {
		uint64_t bc = bq ? (uint64_t)llround((double)bpcount[path] * bscale) : 0;
		if (!pcount[path] && !bc)
			continue;
		uint32_t depth = 0;
		for (uint32_t q = path; q != 0; q = pparent[q])
			chain[depth++] = plabel[q];
		for (uint32_t d = depth; d-- > 0;) {
			fputs(labels[chain[d]], out);
			if (d)
				fputc(';', out);
		}
		if (bq)
			fprintf(out, " %llu", (unsigned long long)bc);
		fprintf(out, " %llu\n", (unsigned long long)pcount[path]);
	}
	rc = 0;
	goto done;
oom:
	snprintf(err, errlen, "out of memory");
done:
	free(count);
	free(flabel);
	free(npath);
	free(pparent);
	free(plabel);
	free(pcount);
	free(chain);
	free(labels);
	free(bcount);
	free(bpcount);
	free(bflabel);
	free(bnpath);
	strpool_free(&pool);
	u64map_free(&label_ids);
	u64map_free(&paths);
	return rc;
}
