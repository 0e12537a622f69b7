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

int export_collapsed(const struct profile *p, FILE *out, const struct export_opts *o, char *err, size_t errlen)
{
	uint64_t *count = calloc(p->nnodes ? p->nnodes : 1, sizeof(*count));
	char **label = calloc(p->nframes ? p->nframes : 1, sizeof(*label));
	uint32_t *path = malloc((p->nnodes ? p->nnodes : 1) * sizeof(*path));
	int rc = -1;
	if (!count || !label || !path) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}
	for (uint64_t i = 0; i < p->nsamples; i++) {
		if (o->exclude_idle && (p->samples[i].flags & PS_IDLE))
			continue;
		count[p->samples[i].node] += profile_value(p, i, o->event);
	}
	for (uint32_t n = 1; n < p->nnodes; n++) {
		if (!count[n])
			continue;
		uint32_t depth = 0;
		for (uint32_t m = n; m != 0 && m != PNONE; m = p->nodes[m].parent)
			path[depth++] = p->nodes[m].frame;
		for (uint32_t d = depth; d-- > 0;) {
			uint32_t f = path[d];
			if (!label[f]) {
				char buf[4096];
				frame_label(p, f, 0, buf, sizeof(buf));
				escape(buf);
				if (!(label[f] = strdup(buf))) {
					snprintf(err, errlen, "out of memory");
					goto done;
				}
			}
			fputs(label[f], out);
			if (d)
				fputc(';', out);
		}
		fprintf(out, " %llu\n", (unsigned long long)count[n]);
	}
	rc = 0;
done:
	if (label)
		for (uint32_t f = 0; f < p->nframes; f++)
			free(label[f]);
	free(label);
	free(count);
	free(path);
	return rc;
}
