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
 */
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

/* Call-tree nodes that read the same (native frames differ by address,
 * two call sites on one line are one label) become one line: a "label
 * path" is interned per node, parent path and label, and the counts of
 * nodes with the same label path are added. */
int export_collapsed(const struct profile *p, FILE *out, const struct export_opts *o, char *err, size_t errlen)
{
	uint32_t nn = p->nnodes ? p->nnodes : 1, nf = p->nframes ? p->nframes : 1;
	uint64_t *count = calloc(nn, sizeof(*count));
	uint32_t *flabel = malloc(nf * sizeof(*flabel));    /* frame → label id */
	uint32_t *npath = malloc(nn * sizeof(*npath));      /* node → label path */
	uint32_t *pparent = malloc(nn * sizeof(*pparent));  /* label path → its parent path */
	uint32_t *plabel = malloc(nn * sizeof(*plabel));    /* label path → its last label */
	uint64_t *pcount = calloc(nn, sizeof(*pcount));
	uint32_t *chain = malloc(nn * sizeof(*chain));
	const char **labels = malloc(nf * sizeof(*labels));
	struct strpool pool = { 0 };
	struct u64map label_ids = { 0 }, paths = { 0 };
	uint32_t nlabels = 0, npaths = 1;
	int rc = -1;
	if (!count || !flabel || !npath || !pparent || !plabel || !pcount || !chain || !labels)
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
		if (flabel[f] == MAP_NONE) {
			char buf[4096];
			frame_label(p, f, 0, buf, sizeof(buf));
			escape(buf);
			const char *s = strpool_str(&pool, buf);
			if (!s)
				goto oom;
			uint32_t id = u64map_get(&label_ids, (uintptr_t)s);
			if (id == MAP_NONE) {
				id = nlabels;
				labels[nlabels++] = s;
				if (u64map_put(&label_ids, (uintptr_t)s, id))
					goto oom;
			}
			flabel[f] = id;
		}
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
	for (uint32_t path = 1; path < npaths; path++) {
		if (!pcount[path])
			continue;
		uint32_t depth = 0;
		for (uint32_t q = path; q != 0; q = pparent[q])
			chain[depth++] = plabel[q];
		for (uint32_t d = depth; d-- > 0;) {
			fputs(labels[chain[d]], out);
			if (d)
				fputc(';', out);
		}
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
	strpool_free(&pool);
	u64map_free(&label_ids);
	u64map_free(&paths);
	return rc;
}
