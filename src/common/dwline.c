/*
 * dwline.c — see dwline.h. Follows DWARF 5 section 6.2 (and 2-4 for the
 * older header layouts): a unit header, the directory and file tables,
 * then the line-number program run on the state machine.
 */
#include "dwline.h"

#include <stdio.h>
#include <string.h>

#define MAX_ROWS_PER_UNIT (1u << 22)

enum {
	DW_LNS_copy = 1, DW_LNS_advance_pc, DW_LNS_advance_line, DW_LNS_set_file, DW_LNS_set_column,
	DW_LNS_negate_stmt, DW_LNS_set_basic_block, DW_LNS_const_add_pc, DW_LNS_fixed_advance_pc,
	DW_LNS_set_prologue_end, DW_LNS_set_epilogue_begin, DW_LNS_set_isa,
};
enum { DW_LNE_end_sequence = 1, DW_LNE_set_address = 2, DW_LNE_define_file = 3, DW_LNE_set_discriminator = 4 };
enum { DW_LNCT_path = 1, DW_LNCT_directory_index = 2 };
enum {
	DW_FORM_block2 = 0x03, DW_FORM_block4 = 0x04, DW_FORM_data2 = 0x05, DW_FORM_data4 = 0x06,
	DW_FORM_data8 = 0x07, DW_FORM_string = 0x08, DW_FORM_block = 0x09, DW_FORM_block1 = 0x0a,
	DW_FORM_data1 = 0x0b, DW_FORM_sdata = 0x0d, DW_FORM_strp = 0x0e, DW_FORM_udata = 0x0f,
	DW_FORM_data16 = 0x1e, DW_FORM_line_strp = 0x1f, DW_FORM_strx = 0x1a, DW_FORM_strx1 = 0x25,
	DW_FORM_strx2 = 0x26, DW_FORM_strx3 = 0x27, DW_FORM_strx4 = 0x28,
};

struct cur {
	const uint8_t *p, *end;
	int bad;
};

static uint64_t rd(struct cur *c, unsigned n)
{
	if (c->bad || (size_t)(c->end - c->p) < n) {
		c->bad = 1;
		c->p = c->end;
		return 0;
	}
	uint64_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)c->p[i] << (8 * i);
	c->p += n;
	return v;
}

static uint64_t uleb(struct cur *c)
{
	uint64_t v = 0;
	unsigned shift = 0;
	while (!c->bad) {
		if (c->p >= c->end) {
			c->bad = 1;
			break;
		}
		uint8_t b = *c->p++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			break;
		if (shift > 70) {
			c->bad = 1;
			break;
		}
	}
	return v;
}

static int64_t sleb(struct cur *c)
{
	uint64_t v = 0;
	unsigned shift = 0;
	uint8_t b = 0;
	while (!c->bad) {
		if (c->p >= c->end) {
			c->bad = 1;
			return 0;
		}
		b = *c->p++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			break;
		if (shift > 70) {
			c->bad = 1;
			return 0;
		}
	}
	if (shift < 64 && (b & 0x40))
		v |= ~0ull << shift;
	return (int64_t)v;
}

/* A NUL-terminated string inside [p, end), or NULL. */
static const char *cstr(struct cur *c)
{
	if (c->bad)
		return NULL;
	const uint8_t *z = memchr(c->p, 0, (size_t)(c->end - c->p));
	if (!z) {
		c->bad = 1;
		c->p = c->end;
		return NULL;
	}
	const char *s = (const char *)c->p;
	c->p = z + 1;
	return s;
}

static const char *str_at(const uint8_t *sec, size_t len, uint64_t off)
{
	if (!sec || off >= len || !memchr(sec + off, 0, len - off))
		return NULL;
	return (const char *)sec + off;
}

/* One attribute value of a DWARF 5 entry format: a string for DW_LNCT_path
 * (into *s), a number for the rest (into *v); 0 or -1 for a form we cannot
 * size. */
static int form_value(struct cur *c, uint64_t form, int off64, const struct dwline_sections *sec, const char **s,
		      uint64_t *v)
{
	*s = NULL;
	*v = 0;
	switch (form) {
	case DW_FORM_string: *s = cstr(c); break;
	case DW_FORM_line_strp: *s = str_at(sec->line_str, sec->line_str_len, rd(c, off64 ? 8 : 4)); break;
	case DW_FORM_strp: *s = str_at(sec->str, sec->str_len, rd(c, off64 ? 8 : 4)); break;
	case DW_FORM_udata: *v = uleb(c); break;
	case DW_FORM_sdata: *v = (uint64_t)sleb(c); break;
	case DW_FORM_data1: case DW_FORM_strx1: *v = rd(c, 1); break;
	case DW_FORM_data2: case DW_FORM_strx2: *v = rd(c, 2); break;
	case DW_FORM_strx3: *v = rd(c, 3); break;
	case DW_FORM_data4: case DW_FORM_strx4: *v = rd(c, 4); break;
	case DW_FORM_data8: *v = rd(c, 8); break;
	case DW_FORM_data16: rd(c, 8); rd(c, 8); break;
	case DW_FORM_strx: *v = uleb(c); break;
	case DW_FORM_block1: case DW_FORM_block2: case DW_FORM_block4: case DW_FORM_block: {
		uint64_t n = form == DW_FORM_block1 ? rd(c, 1) : form == DW_FORM_block2 ? rd(c, 2)
			   : form == DW_FORM_block4 ? rd(c, 4) : uleb(c);
		if (n > (uint64_t)(c->end - c->p))
			c->bad = 1;
		else
			c->p += n;
		break;
	}
	default: return -1;
	}
	return c->bad ? -1 : 0;
}

#define MAX_DIRS DWLINE_MAX_DIRS
#define MAX_FILES DWLINE_MAX_FILES
#define tables dwline_tables

/* DWARF 5 directory or file table. */
static int table_v5(struct cur *c, int off64, const struct dwline_sections *sec, int files, struct tables *t)
{
	uint64_t fmt_count = rd(c, 1);
	uint64_t fmt[32][2];
	if (fmt_count > 32)
		return -1;
	for (uint64_t i = 0; i < fmt_count; i++) {
		fmt[i][0] = uleb(c);
		fmt[i][1] = uleb(c);
	}
	uint64_t count = uleb(c);
	if (c->bad || count > (uint64_t)(c->end - c->p))
		return -1;
	for (uint64_t i = 0; i < count; i++) {
		const char *path = NULL;
		uint64_t dir = 0;
		for (uint64_t k = 0; k < fmt_count; k++) {
			const char *s;
			uint64_t v;
			if (form_value(c, fmt[k][1], off64, sec, &s, &v))
				return -1;
			if (fmt[k][0] == DW_LNCT_path)
				path = s;
			else if (fmt[k][0] == DW_LNCT_directory_index)
				dir = v;
		}
		if (files) {
			if (t->nfile < MAX_FILES) {
				t->file[t->nfile] = path ? path : "";
				t->fdir[t->nfile++] = (uint32_t)(dir < MAX_DIRS ? dir : MAX_DIRS);
			}
		} else if (t->ndir < MAX_DIRS) {
			t->dir[t->ndir++] = path ? path : "";
		}
	}
	return 0;
}

static void fill_names(const struct tables *t, uint64_t file, int version, struct dwline_row *r)
{
	r->dir = r->file = "";
	/* DWARF 5 numbers files from 0, earlier versions from 1. */
	uint64_t i = version >= 5 ? file : file - 1;
	if (version < 5 && file == 0)
		return;
	if (i >= t->nfile)
		return;
	r->file = t->file[i];
	if (r->file[0] == '/')
		return;
	uint32_t d = t->fdir[i];
	/* Before DWARF 5 directory 0 is the compilation directory, which the
	 * table does not list; in 5 it is entry 0. */
	if (version < 5) {
		if (d >= 1 && d - 1 < t->ndir)
			r->dir = t->dir[d - 1];
	} else if (d < t->ndir) {
		r->dir = t->dir[d];
	}
}

/* Line numbers move by operands of any size: they saturate instead of
 * overflowing (a line outside 1..INT32_MAX is emitted as 0 anyway). */
static int64_t line_add(int64_t line, int64_t d)
{
	int64_t r;
	if (__builtin_add_overflow(line, d, &r))
		return d > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

static int fail(char *err, size_t errlen, const char *what, size_t off)
{
	if (err && errlen)
		snprintf(err, errlen, "malformed .debug_line at offset %zu: %s", off, what);
	return -1;
}

long dwline_decode(const struct dwline_sections *s, dwline_fn fn, void *ctx, struct dwline_tables *tp, char *err,
		   size_t errlen)
{
	if (err && errlen)
		err[0] = 0;
	if (!s->line)
		return 0;
	struct cur sec = { s->line, s->line + s->line_len, 0 };
	long rows = 0;
#define t (*tp)
	while (sec.p < sec.end) {
		size_t unit_off = (size_t)(sec.p - s->line);
		int off64 = 0;
		uint64_t len = rd(&sec, 4);
		if (len == 0xffffffffu) {
			off64 = 1;
			len = rd(&sec, 8);
		} else if (len >= 0xfffffff0u) {
			return fail(err, errlen, "reserved unit length", unit_off);
		}
		if (sec.bad || len > (uint64_t)(sec.end - sec.p))
			return fail(err, errlen, "unit longer than the section", unit_off);
		struct cur u = { sec.p, sec.p + len, 0 };
		sec.p += len;
		int version = (int)rd(&u, 2);
		if (version < 2 || version > 5)
			return fail(err, errlen, "unsupported version", unit_off);
		unsigned addr_size = 8;
		if (version >= 5) {
			addr_size = (unsigned)rd(&u, 1);
			rd(&u, 1); /* segment selector size */
			if (addr_size != 4 && addr_size != 8)
				return fail(err, errlen, "address size", unit_off);
		}
		uint64_t hlen = rd(&u, off64 ? 8 : 4);
		if (u.bad || hlen > (uint64_t)(u.end - u.p))
			return fail(err, errlen, "header length", unit_off);
		const uint8_t *prog = u.p + hlen;
		unsigned min_inst = (unsigned)rd(&u, 1);
		unsigned max_ops = version >= 4 ? (unsigned)rd(&u, 1) : 1;
		int default_stmt = (int)rd(&u, 1);
		int8_t line_base = (int8_t)rd(&u, 1);
		unsigned line_range = (unsigned)rd(&u, 1);
		unsigned opcode_base = (unsigned)rd(&u, 1);
		(void)default_stmt;
		(void)max_ops; /* VLIW op_index is not used on x86 */
		if (u.bad || line_range == 0 || opcode_base == 0)
			return fail(err, errlen, "header fields", unit_off);
		uint8_t std_len[256] = { 0 };
		for (unsigned i = 1; i < opcode_base; i++)
			std_len[i] = (uint8_t)rd(&u, 1);
		t.ndir = t.nfile = 0;
		if (version >= 5) {
			if (table_v5(&u, off64, s, 0, &t) || table_v5(&u, off64, s, 1, &t))
				return fail(err, errlen, "directory or file table", unit_off);
		} else {
			for (;;) {
				const char *d = cstr(&u);
				if (!d)
					return fail(err, errlen, "directory table", unit_off);
				if (!*d)
					break;
				if (t.ndir < MAX_DIRS)
					t.dir[t.ndir++] = d;
			}
			for (;;) {
				const char *f = cstr(&u);
				if (!f)
					return fail(err, errlen, "file table", unit_off);
				if (!*f)
					break;
				uint64_t d = uleb(&u);
				uleb(&u); /* mtime */
				uleb(&u); /* length */
				if (t.nfile < MAX_FILES) {
					t.file[t.nfile] = f;
					t.fdir[t.nfile++] = (uint32_t)(d < MAX_DIRS ? d : MAX_DIRS);
				}
			}
		}
		if (u.bad || prog > u.end)
			return fail(err, errlen, "header", unit_off);
		u.p = prog;

		/* The state machine. */
		uint64_t addr = 0, file = 1, nrows = 0;
		int64_t line = 1;
		struct dwline_row r;
#define EMIT(endseq)                                                                            \
	do {                                                                                    \
		r.addr = addr;                                                                  \
		r.line = line > 0 && line <= INT32_MAX ? (uint32_t)line : 0;                    \
		r.end_sequence = (endseq);                                                      \
		fill_names(&t, file, version, &r);                                              \
		rows++;                                                                         \
		if (++nrows > MAX_ROWS_PER_UNIT)                                                \
			return fail(err, errlen, "too many rows", unit_off);                    \
		if (fn && fn(ctx, &r))                                                          \
			return rows;                                                            \
	} while (0)
		while (u.p < u.end && !u.bad) {
			unsigned op = (unsigned)rd(&u, 1);
			if (op >= opcode_base) {
				unsigned adj = op - opcode_base;
				addr += (uint64_t)(adj / line_range) * min_inst;
				line = line_add(line, line_base + (int)(adj % line_range));
				EMIT(0);
				continue;
			}
			switch (op) {
			case 0: {
				uint64_t n = uleb(&u);
				if (u.bad || n == 0 || n > (uint64_t)(u.end - u.p))
					return fail(err, errlen, "extended opcode length", unit_off);
				const uint8_t *next = u.p + n;
				unsigned sub = (unsigned)rd(&u, 1);
				if (sub == DW_LNE_end_sequence) {
					EMIT(1);
					addr = 0;
					file = 1;
					line = 1;
				} else if (sub == DW_LNE_set_address) {
					unsigned sz = (unsigned)(n - 1);
					if (sz != 4 && sz != 8)
						return fail(err, errlen, "address size", unit_off);
					addr = rd(&u, sz);
				}
				u.p = next; /* define_file, discriminator, vendor ops: skipped */
				break;
			}
			case DW_LNS_copy: EMIT(0); break;
			case DW_LNS_advance_pc: addr += uleb(&u) * min_inst; break;
			case DW_LNS_advance_line: line = line_add(line, sleb(&u)); break;
			case DW_LNS_set_file: file = uleb(&u); break;
			case DW_LNS_const_add_pc: addr += (uint64_t)((255 - opcode_base) / line_range) * min_inst; break;
			case DW_LNS_fixed_advance_pc: addr += rd(&u, 2); break;
			default:
				/* Standard opcodes with operands we ignore (column,
				 * isa, and any the header declares). */
				for (unsigned i = 0; i < std_len[op]; i++)
					uleb(&u);
				break;
			}
		}
#undef EMIT
		if (u.bad)
			return fail(err, errlen, "line program cut short", unit_off);
		(void)addr_size;
	}
	return rows;
#undef t
}
