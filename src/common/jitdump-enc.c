/*
 * jitdump-enc.c — see jitdump-enc.h.
 */
#include "jitdump-enc.h"

#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dwline.h"
#include "jitelf.h"

/* Caps that keep a hostile image from producing a huge dump. */
#define MAX_FUNC_SIZE (64u << 20)
#define MAX_ROWS_PER_FUNC 65536
#define MAX_PATH_LEN 1024

void jd_header(struct wbuf *b, uint32_t pid, uint64_t timestamp)
{
	wbuf_le32(b, JITDUMP_MAGIC);
	wbuf_le32(b, JITDUMP_VERSION);
	wbuf_le32(b, JITDUMP_HDR_SIZE);
	wbuf_le32(b, EM_X86_64);
	wbuf_le32(b, 0); /* pad1 */
	wbuf_le32(b, pid);
	wbuf_le64(b, timestamp);
	wbuf_le64(b, 0); /* flags: timestamps are not the TSC */
}

static void pad8(struct wbuf *b, size_t start)
{
	static const uint8_t z[8];
	size_t n = (b->len - start) & 7;
	if (n)
		wbuf_put(b, z, 8 - n);
}

/* Patches a record's total_size once its body is written. */
static void finish_record(struct wbuf *b, size_t start)
{
	pad8(b, start);
	if (!b->oom)
		put_le32(b->data + start + 4, (uint32_t)(b->len - start));
}

static size_t begin_record(struct wbuf *b, uint32_t id, uint64_t timestamp)
{
	size_t start = b->len;
	wbuf_le32(b, id);
	wbuf_le32(b, 0); /* total_size, patched */
	wbuf_le64(b, timestamp);
	return start;
}

/* The line rows of the whole image, sorted by address, so that each
 * function takes its range with a binary search. */
struct row {
	uint64_t addr;
	uint32_t line;
	uint32_t end;      /* an end_sequence row: no code from here */
	const char *file;  /* one of rows.files */
};

struct rows {
	struct row *r;
	size_t n, cap;
	char **files;      /* each path once */
	size_t nfiles, capfiles;
	int oom;
};

static const char *file_intern(struct rows *rs, const char *path)
{
	/* Line tables name few files; the last one is nearly always it. */
	for (size_t i = rs->nfiles; i-- > 0;)
		if (!strcmp(rs->files[i], path))
			return rs->files[i];
	if (rs->nfiles == rs->capfiles) {
		size_t cap = rs->capfiles ? rs->capfiles * 2 : 8;
		char **f = realloc(rs->files, cap * sizeof(*f));
		if (!f)
			return NULL;
		rs->files = f;
		rs->capfiles = cap;
	}
	char *c = strdup(path);
	if (c)
		rs->files[rs->nfiles++] = c;
	return c;
}

static int collect(void *ctx, const struct dwline_row *dr)
{
	struct rows *rs = ctx;
	if (rs->n == rs->cap) {
		size_t cap = rs->cap ? rs->cap * 2 : 256;
		struct row *r = realloc(rs->r, cap * sizeof(*r));
		if (!r) {
			rs->oom = 1;
			return 1;
		}
		rs->r = r;
		rs->cap = cap;
	}
	char path[MAX_PATH_LEN];
	size_t dl = strlen(dr->dir), fl = strlen(dr->file);
	if (dl && dl + 1 + fl < sizeof(path)) {
		memcpy(path, dr->dir, dl);
		path[dl] = '/';
		memcpy(path + dl + 1, dr->file, fl + 1);
	} else {
		snprintf(path, sizeof(path), "%s", dr->file);
	}
	const char *f = file_intern(rs, path);
	if (!f) {
		rs->oom = 1;
		return 1;
	}
	rs->r[rs->n++] = (struct row){ dr->addr, dr->line, (uint32_t)dr->end_sequence, f };
	return 0;
}

static int row_cmp(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* An end_sequence at the same address as a new sequence's start
	 * comes first: the new row is the one that holds. */
	return (int)y->end - (int)x->end;
}

static void rows_free(struct rows *rs)
{
	for (size_t i = 0; i < rs->nfiles; i++)
		free(rs->files[i]);
	free(rs->files);
	free(rs->r);
}

struct image_ctx {
	struct wbuf *b;
	const struct jitelf *e;
	struct rows *rows;
	uint32_t pid, tid;
	uint64_t ts;
	uint64_t *code_index;
	jd_read_code read_code;
	void *read_ctx;
	jd_func_cb fn;
	void *fn_ctx;
	struct jd_image_stats *st;
	uint8_t *code;
	size_t code_cap;
};

static void debug_info(struct image_ctx *c, uint64_t addr, uint64_t size)
{
	struct rows *rs = c->rows;
	if (!rs || !rs->n)
		return;
	/* First row at or after addr; a row before addr that is still in
	 * effect at addr (no end_sequence) gives addr its line. */
	size_t lo = 0, hi = rs->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (rs->r[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	size_t first = lo;
	if (first > 0 && !rs->r[first - 1].end && (first == rs->n || rs->r[first].addr > addr))
		first--;
	size_t last = first;
	while (last < rs->n && rs->r[last].addr < addr + size && last - first < MAX_ROWS_PER_FUNC)
		last++;
	uint64_t n = 0;
	for (size_t i = first; i < last; i++)
		n += !rs->r[i].end && rs->r[i].line;
	if (!n)
		return;
	size_t start = begin_record(c->b, JIT_CODE_DEBUG_INFO, c->ts);
	wbuf_le64(c->b, addr);
	wbuf_le64(c->b, n);
	for (size_t i = first; i < last; i++) {
		const struct row *r = &rs->r[i];
		if (r->end || !r->line)
			continue;
		wbuf_le64(c->b, r->addr < addr ? addr : r->addr);
		wbuf_le32(c->b, r->line);
		wbuf_le32(c->b, 0); /* discriminator */
		wbuf_put(c->b, r->file, strlen(r->file) + 1);
	}
	finish_record(c->b, start);
	c->st->with_lines++;
	c->st->line_rows += n;
}

static int one_function(void *ctx, const char *name, uint64_t addr, uint64_t size)
{
	struct image_ctx *c = ctx;
	if (size > MAX_FUNC_SIZE)
		return 0;
	if (size > c->code_cap) {
		uint8_t *p = realloc(c->code, size);
		if (!p)
			return 1;
		c->code = p;
		c->code_cap = size;
	}
	if (c->read_code(c->read_ctx, addr, c->code, size))
		return 0; /* code not readable: no load record, perf could not use it */
	debug_info(c, addr, size);
	size_t start = begin_record(c->b, JIT_CODE_LOAD, c->ts);
	wbuf_le32(c->b, c->pid);
	wbuf_le32(c->b, c->tid);
	wbuf_le64(c->b, addr); /* vma */
	wbuf_le64(c->b, addr); /* code_addr */
	wbuf_le64(c->b, size);
	wbuf_le64(c->b, (*c->code_index)++);
	wbuf_put(c->b, name, strlen(name) + 1);
	wbuf_put(c->b, c->code, size);
	finish_record(c->b, start);
	c->st->functions++;
	if (c->fn)
		c->fn(c->fn_ctx, name, addr, size);
	return 0;
}

int jd_read_from_image(void *ctx, uint64_t addr, void *dst, size_t n)
{
	const struct jitelf *e = ctx;
	for (uint32_t i = 1; i < e->shnum; i++) {
		const Elf64_Shdr *s = &e->sh[i];
		if (s->sh_type != SHT_PROGBITS || !(s->sh_flags & SHF_EXECINSTR) || addr < s->sh_addr ||
		    addr - s->sh_addr > s->sh_size || n > s->sh_size - (addr - s->sh_addr))
			continue;
		uint64_t off = s->sh_offset + (addr - s->sh_addr);
		if (off > e->n || n > e->n - off)
			return -1;
		memcpy(dst, e->p + off, n);
		return 0;
	}
	return -1;
}

int jd_image(struct wbuf *b, const void *image, size_t size, uint32_t pid, uint32_t tid, uint64_t timestamp,
	     uint64_t *code_index, jd_read_code read_code, void *read_ctx, jd_func_cb fn, void *fn_ctx,
	     struct jd_image_stats *stats)
{
	struct jd_image_stats dummy;
	struct jd_image_stats *st = stats ? stats : &dummy;
	memset(st, 0, sizeof(*st));
	/* The ELF structures are read in place: an image the JIT did not
	 * align is read from an aligned copy. */
	void *copy = NULL;
	if ((uintptr_t)image & 7) {
		if (!(copy = malloc(size ? size : 1)))
			return -1;
		memcpy(copy, image, size);
		image = copy;
	}
	struct jitelf e;
	if (jitelf_open(&e, image, size)) {
		free(copy);
		return -1;
	}
	struct rows rs = { 0 };
	size_t llen = 0;
	uint8_t *line = jitelf_relocated(&e, ".debug_line", &llen);
	if (line) {
		struct dwline_sections ds = { .line = line, .line_len = llen };
		size_t n;
		const uint8_t *d;
		if (jitelf_section(&e, ".debug_line_str", &d, &n, NULL) == 0) {
			ds.line_str = d;
			ds.line_str_len = n;
		}
		if (jitelf_section(&e, ".debug_str", &d, &n, NULL) == 0) {
			ds.str = d;
			ds.str_len = n;
		}
		struct dwline_tables *tables = malloc(sizeof(*tables));
		if (!tables || dwline_decode(&ds, collect, &rs, tables, NULL, 0) < 0 || rs.oom) {
			/* A partial table could give wrong lines: none. */
			st->lines_error = 1;
			rows_free(&rs);
			memset(&rs, 0, sizeof(rs));
		}
		free(tables);
		free(line);
		if (rs.n)
			qsort(rs.r, rs.n, sizeof(*rs.r), row_cmp);
	}
	size_t before = b->len;
	struct image_ctx c = { b, &e, &rs, pid, tid, timestamp, code_index, read_code ? read_code : jd_read_from_image,
			       read_code ? read_ctx : &e, fn, fn_ctx, st, NULL, 0 };
	long r = jitelf_functions(&e, one_function, &c);
	free(c.code);
	rows_free(&rs);
	free(copy);
	if (r < 0) {
		b->len = before;
		return -1;
	}
	return 0;
}
