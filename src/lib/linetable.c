/*
 * linetable.c — decoding CPython line tables into ranges; see linetable.h.
 *
 * Each decoder mirrors the interpreter's own reader for that version
 * (PyCode_Addr2Line in 3.8/3.9, the PyCodeAddressRange walkers in 3.10 and
 * 3.11+), so a line here is the line CPython itself reports in tracebacks
 * and co_lines(). tests/unit/test_linetable.c checks every instruction
 * offset of real tables from every interpreter against that.
 */
#include "linetable.h"

#include <stdlib.h>
#include <string.h>

#include "common/format.h"

/* Offsets past this are garbage (real code objects are far smaller); the
 * cap keeps byte offsets and line sums inside 32 bits. */
#define MAX_OFFSET (1u << 30)

struct builder {
	struct linetable *lt;
	uint32_t cap;
};

/* Appends range [start, ...) with `line`. Ranges arrive in offset order;
 * an empty range (same start as the last) replaces the last one, and a
 * range continuing the last one's line is merged into it. */
static void add(struct builder *b, uint32_t start, int32_t line)
{
	struct linetable *lt = b->lt;
	if (lt->n && lt->r[lt->n - 1].start == start) {
		lt->r[lt->n - 1].line = line;
		if (lt->n > 1 && lt->r[lt->n - 2].line == line)
			lt->n--;
		return;
	}
	if (lt->n && lt->r[lt->n - 1].line == line)
		return;
	if (lt->n < b->cap)
		lt->r[lt->n++] = (struct lt_range){ start, line };
}

static int32_t clamp_line(int64_t line)
{
	return line < 0 || line > INT32_MAX ? -1 : (int32_t)line;
}

/* 3.8/3.9 co_lnotab: the line at offset q is firstline plus the line
 * deltas of every pair whose cumulative byte offset is <= q; lookups past
 * the last pair keep the last line. */
static void decode_lnotab(struct builder *b, const uint8_t *p, size_t len, int64_t line)
{
	uint64_t addr = 0;
	add(b, 0, clamp_line(line));
	for (size_t i = 0; i + 1 < len; i += 2) {
		addr += p[i];
		if (addr >= MAX_OFFSET)
			break;
		line += (int8_t)p[i + 1];
		add(b, (uint32_t)addr, clamp_line(line));
	}
	b->lt->end = UINT32_MAX;
}

/* 3.10 co_linetable (Objects/lnotab_notes.txt): each pair advances the
 * range end by an unsigned byte delta and the line by a signed delta;
 * -128 marks a range with no line (the running line is unchanged). */
static void decode_linetable(struct builder *b, const uint8_t *p, size_t len, int64_t line)
{
	uint64_t end = 0;
	for (size_t i = 0; i + 1 < len; i += 2) {
		uint64_t start = end, next = end + p[i];
		if (next >= MAX_OFFSET)
			break;
		end = next;
		int8_t ld = (int8_t)p[i + 1];
		int32_t l = -1;
		if (ld != -128) {
			line += ld;
			l = clamp_line(line);
		}
		if (end > start)
			add(b, (uint32_t)start, l);
	}
	b->lt->end = (uint32_t)end;
}

/* Location-table varints: 6 bits per byte, bit 6 = more follows. */
static uint32_t scan_varint(const uint8_t *p, size_t len, size_t *i)
{
	uint32_t val = 0;
	unsigned shift = 0;
	while (*i < len) {
		uint8_t c = p[(*i)++];
		if (shift < 32)
			val |= (uint32_t)(c & 63) << shift;
		shift += 6;
		if (!(c & 64))
			break;
	}
	return val;
}

static int64_t scan_svarint(const uint8_t *p, size_t len, size_t *i)
{
	uint32_t u = scan_varint(p, len, i);
	return (u & 1) ? -(int64_t)(u >> 1) : (int64_t)(u >> 1);
}

enum {
	LOC_ONE_LINE0 = 10,
	LOC_ONE_LINE1 = 11,
	LOC_ONE_LINE2 = 12,
	LOC_NO_COLUMNS = 13,
	LOC_LONG = 14,
	LOC_NONE = 15,
};

/* 3.11–3.13 location table (Objects/locations.md): an entry's first byte
 * has bit 7 set, a 4-bit code and (length - 1) in code units; only the
 * line delta matters here, the column bytes are skipped. Cache entries are
 * part of their instruction's entry, so they get its line. */
static void decode_locations(struct builder *b, const uint8_t *p, size_t len, int64_t line)
{
	uint64_t end = 0;
	size_t i = 0;
	while (i < len) {
		uint8_t h = p[i];
		if (!(h & 0x80)) {
			i++; /* not an entry start: resynchronise as CPython's advance() does */
			continue;
		}
		int code = (h >> 3) & 15;
		size_t j = i + 1;
		int64_t delta = 0;
		switch (code) {
		case LOC_NO_COLUMNS:
		case LOC_LONG:
			delta = scan_svarint(p, len, &j);
			break;
		case LOC_ONE_LINE1:
			delta = 1;
			break;
		case LOC_ONE_LINE2:
			delta = 2;
			break;
		default:
			break;
		}
		line += delta;
		uint64_t start = end, next = end + (uint64_t)((h & 7) + 1) * 2;
		if (next >= MAX_OFFSET)
			break;
		end = next;
		add(b, (uint32_t)start, code == LOC_NONE ? -1 : clamp_line(line));
		/* Skip the rest of the entry (column bytes) up to the next start. */
		i++;
		while (i < len && !(p[i] & 0x80))
			i++;
	}
	b->lt->end = (uint32_t)end;
}

int linetable_decode(struct linetable *lt, int fmt, const uint8_t *tab, size_t len, uint32_t firstline)
{
	memset(lt, 0, sizeof(*lt));
	lt->fmt = fmt;
	lt->firstline = firstline > INT32_MAX ? -1 : (int32_t)firstline;
	if (!tab)
		len = 0;
	/* Every format spends at least one byte per range, plus the implicit
	 * first range of co_lnotab. */
	struct builder b = { lt, (uint32_t)(len < MAX_OFFSET ? len : MAX_OFFSET) + 1 };
	if (fmt != LT_LNOTAB && fmt != LT_LINETABLE && fmt != LT_LOCATIONS)
		return 0;
	lt->r = malloc((size_t)b.cap * sizeof(*lt->r));
	if (!lt->r)
		return -1;
	int64_t line = (int64_t)firstline;
	switch (fmt) {
	case LT_LNOTAB:
		decode_lnotab(&b, tab, len, line);
		break;
	case LT_LINETABLE:
		decode_linetable(&b, tab, len, line);
		break;
	case LT_LOCATIONS:
		decode_locations(&b, tab, len, line);
		break;
	}
	/* Give back what merging saved. */
	if (lt->n && lt->n < b.cap / 2) {
		struct lt_range *r = realloc(lt->r, (size_t)lt->n * sizeof(*r));
		if (r)
			lt->r = r;
	}
	return 0;
}

void linetable_free(struct linetable *lt)
{
	free(lt->r);
	memset(lt, 0, sizeof(*lt));
}

int32_t linetable_line(const struct linetable *lt, int32_t lasti)
{
	if (lasti < 0)
		return lt->firstline;
	if (lt->fmt == LT_LNOTAB && lt->n == 0)
		return lt->firstline;
	uint64_t off = (uint64_t)lasti * 2;
	if (lt->n == 0 || off >= lt->end)
		return -1;
	/* Last range starting at or before off. */
	uint32_t lo = 0, hi = lt->n;
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (lt->r[mid].start <= off)
			lo = mid;
		else
			hi = mid;
	}
	if (lt->r[lo].start > off)
		return -1;
	return lt->r[lo].line;
}
