/*
 * source.c — see source.h.
 */
#include "source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_SOURCE_SIZE (16u << 20)

struct src_file {
	char *path;
	char *text;          /* NULL: unreadable */
	size_t len;
	size_t *starts;      /* offset of each line; nlines entries */
	size_t nlines;
};

struct source_cache {
	struct src_file *f;
	size_t n;
};

struct source_cache *source_cache_new(void) { return calloc(1, sizeof(struct source_cache)); }

void source_cache_free(struct source_cache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++) {
		free(c->f[i].path);
		free(c->f[i].text);
		free(c->f[i].starts);
	}
	free(c->f);
	free(c);
}

static void load(struct src_file *sf)
{
	struct stat st;
	FILE *fp = NULL;
	if (!sf->path[0] || stat(sf->path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size >= MAX_SOURCE_SIZE ||
	    !(fp = fopen(sf->path, "rb")))
		return;
	sf->text = malloc((size_t)st.st_size + 1);
	if (sf->text) {
		sf->len = fread(sf->text, 1, (size_t)st.st_size, fp);
		sf->text[sf->len] = 0;
	}
	fclose(fp);
	if (!sf->text)
		return;
	size_t n = 1;
	for (size_t i = 0; i < sf->len; i++)
		n += sf->text[i] == '\n';
	/* A final line break does not start another line. */
	if (sf->len && sf->text[sf->len - 1] == '\n')
		n--;
	sf->starts = malloc((n ? n : 1) * sizeof(size_t));
	if (!sf->starts) {
		free(sf->text);
		sf->text = NULL;
		return;
	}
	size_t k = 0;
	if (sf->len)
		sf->starts[k++] = 0;
	for (size_t i = 0; i < sf->len && k < n; i++)
		if (sf->text[i] == '\n')
			sf->starts[k++] = i + 1;
	sf->nlines = k;
}

static struct src_file *get(struct source_cache *c, const char *path)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->f[i].path, path) == 0)
			return &c->f[i];
	struct src_file *nf = realloc(c->f, (c->n + 1) * sizeof(*nf));
	if (!nf)
		return NULL;
	c->f = nf;
	struct src_file *sf = &c->f[c->n];
	memset(sf, 0, sizeof(*sf));
	if (!(sf->path = strdup(path)))
		return NULL;
	c->n++;
	load(sf);
	return sf;
}

int64_t source_nlines(struct source_cache *c, const char *path)
{
	struct src_file *sf = get(c, path);
	return sf && sf->text ? (int64_t)sf->nlines : -1;
}

int source_line(struct source_cache *c, const char *path, uint32_t line, const char **text, size_t *len)
{
	struct src_file *sf = get(c, path);
	if (!sf || !sf->text || line == 0 || line > sf->nlines)
		return -1;
	size_t s = sf->starts[line - 1];
	size_t e = line < sf->nlines ? sf->starts[line] - 1 : sf->len;
	/* The last line ends at the end of the text, line break or not. */
	if (line == sf->nlines && e > s && sf->text[e - 1] == '\n')
		e--;
	if (e > s && sf->text[e - 1] == '\r')
		e--;
	*text = sf->text + s;
	*len = e - s;
	return 0;
}
