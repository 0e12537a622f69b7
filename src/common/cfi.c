/*
 * cfi.c — compiles DWARF call frame information into the tables of cfi.h.
 *
 * Every byte read is bounds-checked against the source: the input may be a
 * copy of live memory of a module that is being unloaded, a file from disk,
 * or a JIT image, and a bad length must only cost the entry it is in.
 * Runs outside signal handlers (it allocates); cfi_lookup() in cfi.h is the
 * only part the handler uses.
 */
#include "cfi.h"

#include <stdlib.h>
#include <string.h>

/* ---- bounded cursor ----------------------------------------------------- */

struct cur {
	const uint8_t *p, *end;
	int err;
};

static int need(struct cur *c, size_t n)
{
	if (c->err || (size_t)(c->end - c->p) < n) {
		c->err = 1;
		c->p = c->end;
		return 0;
	}
	return 1;
}

static uint64_t rd_u(struct cur *c, int n)
{
	if (!need(c, (size_t)n))
		return 0;
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v |= (uint64_t)c->p[i] << (8 * i);
	c->p += n;
	return v;
}

static uint64_t rd_uleb(struct cur *c)
{
	uint64_t v = 0;
	for (int shift = 0; need(c, 1); shift += 7) {
		uint8_t b = *c->p++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	return 0;
}

static int64_t rd_sleb(struct cur *c)
{
	uint64_t v = 0;
	int shift = 0;
	while (need(c, 1)) {
		uint8_t b = *c->p++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80)) {
			if (shift < 64 && (b & 0x40))
				v |= ~0ull << shift;
			return (int64_t)v;
		}
	}
	return 0;
}

/* ---- pointer encodings (.eh_frame) --------------------------------------- */

enum {
	PE_absptr = 0x00, PE_uleb128 = 0x01, PE_udata2 = 0x02, PE_udata4 = 0x03, PE_udata8 = 0x04,
	PE_sleb128 = 0x09, PE_sdata2 = 0x0a, PE_sdata4 = 0x0b, PE_sdata8 = 0x0c,
	PE_pcrel = 0x10, PE_datarel = 0x30, PE_indirect = 0x80, PE_omit = 0xff,
};

/* Reads a pointer in encoding `enc`. `datarel` is the base of datarel
 * pointers (the .eh_frame_hdr); with `range` set only the value is read
 * (an FDE's address range uses the format but not the application). */
static uint64_t rd_enc(struct cur *c, const struct cfi_source *s, uint8_t enc, uint64_t datarel, int range)
{
	if (enc == PE_omit)
		return 0;
	uint64_t field = s->vaddr + (uint64_t)(c->p - s->data);
	uint64_t v;
	switch (enc & 0x0f) {
	case PE_absptr: v = rd_u(c, 8); break;
	case PE_uleb128: v = rd_uleb(c); break;
	case PE_udata2: v = rd_u(c, 2); break;
	case PE_udata4: v = rd_u(c, 4); break;
	case PE_udata8: v = rd_u(c, 8); break;
	case PE_sleb128: v = (uint64_t)rd_sleb(c); break;
	case PE_sdata2: v = (uint64_t)(int64_t)(int16_t)rd_u(c, 2); break;
	case PE_sdata4: v = (uint64_t)(int64_t)(int32_t)rd_u(c, 4); break;
	case PE_sdata8: v = rd_u(c, 8); break;
	default: c->err = 1; return 0;
	}
	if (range)
		return v;
	switch (enc & 0x70) {
	case 0: break;
	case PE_pcrel: v += field; break;
	case PE_datarel: v += datarel; break;
	default: c->err = 1; return 0; /* textrel/funcrel/aligned: not used for code addresses on x86-64 */
	}
	if (enc & PE_indirect)
		c->err = 1; /* an address stored in memory: never used for FDE ranges */
	return v;
}

/* ---- builder ----------------------------------------------------------- */

struct row {
	uint64_t pc;
	uint32_t rule;
	uint32_t seq; /* insertion order: later FDEs win at the same address */
};

/* The rows one FDE produced: rows[first, first + n). */
struct span {
	uint64_t start;
	size_t first, n;
};

struct builder {
	struct row *rows;
	size_t nrows, caprows;
	struct cfi_rules *rules;
	uint32_t nrules, caprules;
	uint32_t *hash; /* open addressing: rule index + 1, 0 = empty */
	uint32_t caphash;
	int oom;
	uint32_t nfdes, nunsupported;
	struct span *fdes;
	uint32_t capfdes;
};

static uint32_t rules_hash(const struct cfi_rules *r)
{
	/* Word at a time: this runs once per row of every object loaded. */
	const uint8_t *b = (const uint8_t *)r;
	uint64_t h = 0x9E3779B97F4A7C15ull;
	size_t i = 0;
	for (; i + 8 <= sizeof(*r); i += 8) {
		uint64_t w;
		memcpy(&w, b + i, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	for (; i < sizeof(*r); i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return (uint32_t)(h ^ (h >> 29));
}

static int rehash(struct builder *b, uint32_t cap)
{
	uint32_t *h = calloc(cap, sizeof(*h));
	if (!h)
		return -1;
	for (uint32_t i = 0; i < b->nrules; i++) {
		uint32_t j = rules_hash(&b->rules[i]) & (cap - 1);
		while (h[j])
			j = (j + 1) & (cap - 1);
		h[j] = i + 1;
	}
	free(b->hash);
	b->hash = h;
	b->caphash = cap;
	return 0;
}

static uint32_t intern_rules(struct builder *b, const struct cfi_rules *r)
{
	if ((b->nrules + 1) * 2 > b->caphash && rehash(b, b->caphash ? b->caphash * 2 : 256)) {
		b->oom = 1;
		return CFI_NO_RULE;
	}
	uint32_t j = rules_hash(r) & (b->caphash - 1);
	while (b->hash[j]) {
		uint32_t i = b->hash[j] - 1;
		if (!memcmp(&b->rules[i], r, sizeof(*r)))
			return i;
		j = (j + 1) & (b->caphash - 1);
	}
	if (b->nrules == b->caprules) {
		uint32_t cap = b->caprules ? b->caprules * 2 : 256;
		struct cfi_rules *n = realloc(b->rules, cap * sizeof(*n));
		if (!n) {
			b->oom = 1;
			return CFI_NO_RULE;
		}
		b->rules = n;
		b->caprules = cap;
	}
	b->rules[b->nrules] = *r;
	b->hash[j] = b->nrules + 1;
	return b->nrules++;
}

static void add_row(struct builder *b, uint64_t pc, uint32_t rule)
{
	if (b->nrows == b->caprows) {
		size_t cap = b->caprows ? b->caprows * 2 : 1024;
		struct row *n = realloc(b->rows, cap * sizeof(*n));
		if (!n) {
			b->oom = 1;
			return;
		}
		b->rows = n;
		b->caprows = cap;
	}
	b->rows[b->nrows] = (struct row){ pc, rule, (uint32_t)b->nrows };
	b->nrows++;
}

/* ---- CIE and FDE programs ------------------------------------------------ */

struct cie {
	uint64_t code_align;
	int64_t data_align;
	uint32_t ra_reg;
	uint8_t fde_enc;
	uint8_t addr_size;
	uint8_t has_z;
	uint8_t signal;
	const uint8_t *insns, *insns_end;
};

enum {
	CFA_nop = 0x00, CFA_set_loc = 0x01, CFA_advance_loc1 = 0x02, CFA_advance_loc2 = 0x03,
	CFA_advance_loc4 = 0x04, CFA_offset_extended = 0x05, CFA_restore_extended = 0x06,
	CFA_undefined = 0x07, CFA_same_value = 0x08, CFA_register = 0x09, CFA_remember_state = 0x0a,
	CFA_restore_state = 0x0b, CFA_def_cfa = 0x0c, CFA_def_cfa_register = 0x0d,
	CFA_def_cfa_offset = 0x0e, CFA_def_cfa_expression = 0x0f, CFA_expression = 0x10,
	CFA_offset_extended_sf = 0x11, CFA_def_cfa_sf = 0x12, CFA_def_cfa_offset_sf = 0x13,
	CFA_val_offset = 0x14, CFA_val_offset_sf = 0x15, CFA_val_expression = 0x16,
	CFA_GNU_args_size = 0x2e, CFA_GNU_negative_offset_extended = 0x2f,
	CFA_advance_loc = 0x40, CFA_offset = 0x80, CFA_restore = 0xc0,
};

enum {
	OP_deref = 0x06, OP_and = 0x1a, OP_plus = 0x22, OP_shl = 0x24, OP_ge = 0x2a,
	OP_lit0 = 0x30, OP_breg0 = 0x70,
};

static void set_reg(struct cfi_rules *st, uint64_t reg, uint8_t kind, uint64_t r2, int64_t off)
{
	if (reg >= CFI_NREGS)
		return; /* vector registers: never needed to find a caller */
	struct cfi_reg v = { kind, 0, 0 };
	if (kind == REG_AT_CFA || kind == REG_VAL_CFA || kind == REG_AT_REG) {
		if (off < INT16_MIN || off > INT16_MAX)
			v.kind = REG_UNSUPPORTED;
		else
			v.off = (int16_t)off;
	}
	if (kind == REG_AT_REG || kind == REG_IN_REG) {
		if (r2 >= CFI_NREGS)
			v.kind = REG_UNSUPPORTED;
		else
			v.reg = (uint8_t)r2;
	}
	if (v.kind == REG_UNSUPPORTED)
		v.reg = 0, v.off = 0;
	st->r[reg] = v;
}

/* Matches the DWARF expressions compilers emit for a CFA: breg+off,
 * breg+off deref, and the PLT stub expression. */
static void cfa_expression(struct cfi_rules *st, const uint8_t *p, size_t n)
{
	struct cur c = { p, p + n, 0 };
	st->cfa.kind = CFA_UNSUPPORTED;
	st->cfa.reg = 0;
	st->cfa.off = 0;
	if (!n || p[0] < OP_breg0 || p[0] > OP_breg0 + 16)
		return;
	uint8_t reg = (uint8_t)(*c.p++ - OP_breg0);
	int64_t off = rd_sleb(&c);
	if (c.err || off < INT32_MIN || off > INT32_MAX)
		return;
	if (c.p == c.end) {
		st->cfa = (struct cfi_cfa){ CFA_REG, reg, 0, 0, (int32_t)off };
	} else if (c.end - c.p == 1 && *c.p == OP_deref) {
		st->cfa = (struct cfi_cfa){ CFA_DEREF, reg, 0, 0, (int32_t)off };
	} else if (reg == DW_RSP && off == 8 && c.end - c.p == 9 && c.p[0] == OP_breg0 + DW_RA && c.p[1] == 0 &&
		   c.p[2] == OP_lit0 + 15 && c.p[3] == OP_and && c.p[4] >= OP_lit0 && c.p[4] <= OP_lit0 + 15 &&
		   c.p[5] == OP_ge && c.p[6] == OP_lit0 + 3 && c.p[7] == OP_shl && c.p[8] == OP_plus) {
		st->cfa = (struct cfi_cfa){ CFA_PLT, DW_RSP, 0, 0, c.p[4] - OP_lit0 };
	}
}

static void reg_expression(struct cfi_rules *st, uint64_t reg, const uint8_t *p, size_t n, int val)
{
	struct cur c = { p, p + n, 0 };
	if (!val && n && p[0] >= OP_breg0 && p[0] <= OP_breg0 + 16) {
		uint8_t r2 = (uint8_t)(*c.p++ - OP_breg0);
		int64_t off = rd_sleb(&c);
		if (!c.err && c.p == c.end) {
			set_reg(st, reg, REG_AT_REG, r2, off);
			return;
		}
	}
	set_reg(st, reg, REG_UNSUPPORTED, 0, 0);
}

#define STATE_STACK 16

struct exec {
	struct builder *b;
	const struct cfi_source *s;
	const struct cie *cie;
	struct cfi_rules init;     /* after the CIE's initial instructions */
	struct cfi_rules st;
	struct cfi_rules stack[STATE_STACK];
	int depth;
	uint64_t loc, end;
	uint32_t last_rule;
	int emit;                  /* 0 while running the CIE's instructions */
	int eval;                  /* cfi_eval_hdr: no table, stop at `target` */
	int stop;
	uint64_t target;
};

static void emit_span(struct exec *x, uint64_t to)
{
	if (!x->emit || to <= x->loc)
		return;
	if (x->loc >= x->end)
		return;
	x->st.cfa.signal_frame = x->cie->signal;
	/* Consecutive rows often return to an earlier state: try the last
	 * interned one before hashing. */
	uint32_t r;
	if (x->last_rule != CFI_NO_RULE && !memcmp(&x->b->rules[x->last_rule], &x->st, sizeof(x->st)))
		r = x->last_rule;
	else
		r = intern_rules(x->b, &x->st);
	if (r != x->last_rule) {
		add_row(x->b, x->loc, r);
		x->last_rule = r;
		if (x->st.cfa.kind == CFA_UNSUPPORTED || x->st.r[DW_RA].kind == REG_UNSUPPORTED)
			x->b->nunsupported++;
	}
}

static void advance(struct exec *x, uint64_t to)
{
	if (to > x->end)
		to = x->end;
	if (x->eval) {
		/* The state now is the row that covers the target. */
		if (x->emit && to > x->target)
			x->stop = 1;
		else if (to > x->loc)
			x->loc = to;
		return;
	}
	emit_span(x, to);
	if (to > x->loc)
		x->loc = to;
}

/* Runs a call frame program. Returns 0, or -1 if it is malformed. */
static int run(struct exec *x, const uint8_t *p, const uint8_t *end)
{
	struct cur c = { p, end, 0 };
	const struct cie *ci = x->cie;
	while (c.p < c.end && !c.err && !x->stop) {
		uint8_t op = *c.p++;
		uint8_t low = op & 0x3f;
		uint64_t reg, r2;
		int64_t off;
		switch (op & 0xc0) {
		case CFA_advance_loc:
			advance(x, x->loc + low * ci->code_align);
			continue;
		case CFA_offset:
			set_reg(&x->st, low, REG_AT_CFA, 0, (int64_t)rd_uleb(&c) * ci->data_align);
			continue;
		case CFA_restore:
			if (low < CFI_NREGS)
				x->st.r[low] = x->init.r[low];
			continue;
		}
		switch (op) {
		case CFA_nop:
			break;
		case CFA_set_loc:
			if (ci->addr_size == 0) {
				uint64_t a = rd_enc(&c, x->s, ci->fde_enc, 0, 0) + x->s->bias;
				advance(x, a);
			} else {
				advance(x, rd_u(&c, ci->addr_size) + x->s->bias);
			}
			break;
		case CFA_advance_loc1: advance(x, x->loc + rd_u(&c, 1) * ci->code_align); break;
		case CFA_advance_loc2: advance(x, x->loc + rd_u(&c, 2) * ci->code_align); break;
		case CFA_advance_loc4: advance(x, x->loc + rd_u(&c, 4) * ci->code_align); break;
		case CFA_offset_extended:
			reg = rd_uleb(&c);
			set_reg(&x->st, reg, REG_AT_CFA, 0, (int64_t)rd_uleb(&c) * ci->data_align);
			break;
		case CFA_offset_extended_sf:
			reg = rd_uleb(&c);
			set_reg(&x->st, reg, REG_AT_CFA, 0, rd_sleb(&c) * ci->data_align);
			break;
		case CFA_GNU_negative_offset_extended:
			reg = rd_uleb(&c);
			set_reg(&x->st, reg, REG_AT_CFA, 0, -(int64_t)rd_uleb(&c) * ci->data_align);
			break;
		case CFA_val_offset:
			reg = rd_uleb(&c);
			set_reg(&x->st, reg, REG_VAL_CFA, 0, (int64_t)rd_uleb(&c) * ci->data_align);
			break;
		case CFA_val_offset_sf:
			reg = rd_uleb(&c);
			set_reg(&x->st, reg, REG_VAL_CFA, 0, rd_sleb(&c) * ci->data_align);
			break;
		case CFA_restore_extended:
			reg = rd_uleb(&c);
			if (reg < CFI_NREGS)
				x->st.r[reg] = x->init.r[reg];
			break;
		case CFA_undefined: set_reg(&x->st, rd_uleb(&c), REG_UNDEF, 0, 0); break;
		case CFA_same_value: set_reg(&x->st, rd_uleb(&c), REG_SAME, 0, 0); break;
		case CFA_register:
			reg = rd_uleb(&c);
			r2 = rd_uleb(&c);
			set_reg(&x->st, reg, REG_IN_REG, r2, 0);
			break;
		case CFA_remember_state:
			if (x->depth >= STATE_STACK)
				return -1;
			x->stack[x->depth++] = x->st;
			break;
		case CFA_restore_state:
			if (x->depth <= 0)
				return -1;
			/* The CFA is part of the remembered state (DWARF 5 6.4.2.4). */
			x->st = x->stack[--x->depth];
			break;
		case CFA_def_cfa:
		case CFA_def_cfa_sf:
			reg = rd_uleb(&c);
			off = op == CFA_def_cfa ? (int64_t)rd_uleb(&c) : rd_sleb(&c) * ci->data_align;
			if (reg < CFI_NREGS && off >= INT32_MIN && off <= INT32_MAX)
				x->st.cfa = (struct cfi_cfa){ CFA_REG, (uint8_t)reg, 0, 0, (int32_t)off };
			else
				x->st.cfa = (struct cfi_cfa){ CFA_UNSUPPORTED, 0, 0, 0, 0 };
			break;
		case CFA_def_cfa_register:
			reg = rd_uleb(&c);
			if (reg < CFI_NREGS && x->st.cfa.kind == CFA_REG)
				x->st.cfa.reg = (uint8_t)reg;
			else
				x->st.cfa = (struct cfi_cfa){ CFA_UNSUPPORTED, 0, 0, 0, 0 };
			break;
		case CFA_def_cfa_offset:
		case CFA_def_cfa_offset_sf:
			off = op == CFA_def_cfa_offset ? (int64_t)rd_uleb(&c) : rd_sleb(&c) * ci->data_align;
			if (x->st.cfa.kind == CFA_REG && off >= INT32_MIN && off <= INT32_MAX)
				x->st.cfa.off = (int32_t)off;
			else
				x->st.cfa = (struct cfi_cfa){ CFA_UNSUPPORTED, 0, 0, 0, 0 };
			break;
		case CFA_def_cfa_expression: {
			uint64_t n = rd_uleb(&c);
			if (!need(&c, n))
				return -1;
			cfa_expression(&x->st, c.p, n);
			c.p += n;
			break;
		}
		case CFA_expression:
		case CFA_val_expression: {
			reg = rd_uleb(&c);
			uint64_t n = rd_uleb(&c);
			if (!need(&c, n))
				return -1;
			reg_expression(&x->st, reg, c.p, n, op == CFA_val_expression);
			c.p += n;
			break;
		}
		case CFA_GNU_args_size:
			rd_uleb(&c);
			break;
		default:
			return -1; /* unknown opcode: its operands cannot be skipped */
		}
	}
	return c.err ? -1 : 0;
}

/* ---- entries ------------------------------------------------------------- */

/* One CIE or FDE: its id field and the body after it. */
struct entry {
	size_t off;          /* offset of the entry in the source */
	size_t id_off;       /* offset of its id / CIE pointer field */
	uint64_t id;
	int is64;
	const uint8_t *body, *end;
};

/* Reads the entry at `off`. Returns 1, 0 at a terminator or the end, -1 if
 * malformed. */
static int read_entry(const struct cfi_source *s, size_t off, struct entry *e)
{
	if (off >= s->len)
		return 0;
	struct cur c = { s->data + off, s->data + s->len, 0 };
	uint64_t len = rd_u(&c, 4);
	e->is64 = 0;
	if (len == 0xffffffffu) {
		len = rd_u(&c, 8);
		e->is64 = 1;
	}
	if (c.err)
		return -1;
	if (len == 0)
		return 0;
	if (len > (uint64_t)(c.end - c.p))
		return -1;
	e->off = off;
	e->end = c.p + len;
	e->id_off = (size_t)(c.p - s->data);
	e->id = rd_u(&c, e->is64 ? 8 : 4);
	if (c.err)
		return -1;
	e->body = c.p;
	return 1;
}

static int parse_cie(const struct cfi_source *s, const struct entry *e, int debug_frame, struct cie *ci)
{
	struct cur c = { e->body, e->end, 0 };
	memset(ci, 0, sizeof(*ci));
	uint8_t version = (uint8_t)rd_u(&c, 1);
	if (version != 1 && version != 3 && version != 4)
		return -1;
	const char *aug = (const char *)c.p;
	size_t alen = strnlen(aug, (size_t)(c.end - c.p));
	if (!need(&c, alen + 1))
		return -1;
	c.p += alen + 1;
	ci->addr_size = debug_frame ? 8 : 0;
	if (version == 4) {
		ci->addr_size = (uint8_t)rd_u(&c, 1);
		if (rd_u(&c, 1) != 0 || (ci->addr_size != 4 && ci->addr_size != 8))
			return -1; /* segmented addressing */
	}
	ci->code_align = rd_uleb(&c);
	ci->data_align = rd_sleb(&c);
	ci->ra_reg = version == 1 ? (uint32_t)rd_u(&c, 1) : (uint32_t)rd_uleb(&c);
	ci->fde_enc = PE_absptr;
	if (alen && aug[0] == 'z') {
		ci->has_z = 1;
		uint64_t zlen = rd_uleb(&c);
		if (!need(&c, zlen))
			return -1;
		struct cur z = { c.p, c.p + zlen, 0 };
		c.p += zlen;
		for (size_t i = 1; i < alen && !z.err; i++) {
			switch (aug[i]) {
			case 'R': ci->fde_enc = (uint8_t)rd_u(&z, 1); break;
			case 'L': rd_u(&z, 1); break;
			case 'P': {
				uint8_t penc = (uint8_t)rd_u(&z, 1);
				/* Only the length of the personality pointer matters. */
				rd_enc(&z, s, penc & 0x0f, 0, 1);
				break;
			}
			case 'S': ci->signal = 1; break;
			case 'B': case 'G': break;
			default: i = alen; break; /* unknown: the rest of the data is skipped by zlen */
			}
		}
	} else if (alen) {
		return -1; /* "eh" and other pre-'z' augmentations: gone since gcc 3 */
	}
	if (c.err || ci->ra_reg != DW_RA || ci->code_align == 0)
		return -1;
	ci->insns = c.p;
	ci->insns_end = e->end;
	return 0;
}

/* A small cache of parsed CIEs: a module has a handful. */
#define CIE_CACHE 16
struct cie_cache {
	size_t off[CIE_CACHE];
	struct cie cie[CIE_CACHE];
	int ok[CIE_CACHE];
	unsigned n, next;
};

static const struct cie *get_cie(struct cie_cache *cc, const struct cfi_source *s, size_t off, int debug_frame)
{
	for (unsigned i = 0; i < cc->n; i++)
		if (cc->off[i] == off)
			return cc->ok[i] ? &cc->cie[i] : NULL;
	struct entry e;
	unsigned slot = cc->n < CIE_CACHE ? cc->n++ : (cc->next++ % CIE_CACHE);
	cc->off[slot] = off;
	cc->ok[slot] = 0;
	if (read_entry(s, off, &e) != 1)
		return NULL;
	uint64_t cie_id = debug_frame ? (e.is64 ? ~0ull : 0xffffffffu) : 0;
	if (e.id != cie_id || parse_cie(s, &e, debug_frame, &cc->cie[slot]))
		return NULL;
	cc->ok[slot] = 1;
	return &cc->cie[slot];
}

/* Closes the span of one FDE (or function) whose rows start at
 * first_row: a gap at its end. */
static void end_span(struct builder *b, uint64_t start, uint64_t end, size_t first_row)
{
	add_row(b, end, CFI_NO_RULE);
	if (b->nfdes == b->capfdes) {
		uint32_t cap = b->capfdes ? b->capfdes * 2 : 256;
		struct span *n = realloc(b->fdes, cap * sizeof(*n));
		if (!n)
			b->oom = 1;
		else
			b->fdes = n, b->capfdes = cap;
	}
	if (b->nfdes < b->capfdes)
		b->fdes[b->nfdes++] = (struct span){ start, first_row, b->nrows - first_row };
}

static int do_fde(struct builder *b, struct cie_cache *cc, const struct cfi_source *s, const struct entry *e,
		  int debug_frame)
{
	size_t cie_off;
	if (debug_frame) {
		cie_off = (size_t)e->id;
	} else {
		if (e->id > e->id_off)
			return -1;
		cie_off = e->id_off - (size_t)e->id;
	}
	const struct cie *ci = get_cie(cc, s, cie_off, debug_frame);
	if (!ci)
		return -1;
	struct cur c = { e->body, e->end, 0 };
	uint64_t start, range;
	if (ci->addr_size) {
		start = rd_u(&c, ci->addr_size) + s->bias;
		range = rd_u(&c, ci->addr_size);
	} else {
		start = rd_enc(&c, s, ci->fde_enc, 0, 0) + s->bias;
		range = rd_enc(&c, s, ci->fde_enc, 0, 1);
	}
	if (ci->has_z) {
		uint64_t zlen = rd_uleb(&c);
		if (need(&c, zlen))
			c.p += zlen;
	}
	if (c.err || range == 0 || start + range < start || range > UINT32_MAX)
		return c.err ? -1 : 0;
	struct exec *x = calloc(1, sizeof(*x));
	if (!x) {
		b->oom = 1;
		return -1;
	}
	x->b = b;
	x->s = s;
	x->cie = ci;
	x->loc = start;
	x->end = start + range;
	x->last_rule = CFI_NO_RULE;
	size_t first_row = b->nrows;
	/* Before the CIE runs every register keeps its value; the CIE sets
	 * the CFA and where the return address is. */
	memset(&x->st, 0, sizeof(x->st));
	x->st.cfa.kind = CFA_UNSUPPORTED;
	int rc = run(x, ci->insns, ci->insns_end);
	if (rc == 0) {
		x->init = x->st;
		x->emit = 1;
		rc = run(x, c.p, e->end);
		if (rc == 0) {
			advance(x, x->end);
			end_span(b, start, x->end, first_row);
		}
	}
	free(x);
	return rc;
}

/* ---- finishing ------------------------------------------------------------- */

static int row_cmp(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	if (x->pc != y->pc)
		return x->pc < y->pc ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->first < y->first ? -1 : x->first > y->first;
}

static int rows_sorted(const struct row *r, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (row_cmp(&r[i - 1], &r[i]) > 0)
			return 0;
	return 1;
}

static void builder_free(struct builder *b)
{
	free(b->fdes);
	free(b->rows);
	free(b->rules);
	free(b->hash);
	memset(b, 0, sizeof(*b));
}

static int finish(struct builder *b, struct cfi_table *t)
{
	memset(t, 0, sizeof(*t));
	if (b->oom) {
		builder_free(b);
		return CFI_E_OOM;
	}
	if (!b->nrows) {
		builder_free(b);
		return CFI_E_EMPTY;
	}
	/* The terminating gap of one FDE sorts before the first row of the
	 * next at the same address only if it was added earlier; make gaps
	 * always lose against code rows at the same address. */
	for (size_t i = 0; i < b->nrows; i++)
		if (b->rows[i].rule == CFI_NO_RULE)
			b->rows[i].seq = 0;
	/* Each FDE's rows are in order already; FDEs usually are too. If
	 * not, order the FDEs (far fewer than rows) and concatenate; only
	 * overlapping FDEs need a sort of all rows. */
	qsort(b->fdes, b->nfdes, sizeof(*b->fdes), span_cmp);
	if (!rows_sorted(b->rows, b->nrows)) {
		struct row *n = malloc(b->nrows * sizeof(*n));
		if (!n) {
			builder_free(b);
			return CFI_E_OOM;
		}
		size_t k = 0;
		for (uint32_t i = 0; i < b->nfdes; i++) {
			memcpy(n + k, b->rows + b->fdes[i].first, b->fdes[i].n * sizeof(*n));
			k += b->fdes[i].n;
		}
		for (size_t i = 0; i < b->nrows; i++)
			n[i].seq = n[i].rule == CFI_NO_RULE ? 0 : (uint32_t)i + 1;
		free(b->rows);
		b->rows = n;
		b->nrows = k;
		if (!rows_sorted(b->rows, b->nrows))
			qsort(b->rows, b->nrows, sizeof(*b->rows), row_cmp);
	}
	uint64_t base = b->rows[0].pc, end = b->rows[b->nrows - 1].pc;
	if (end - base > UINT32_MAX) {
		builder_free(b);
		return CFI_E_FORMAT;
	}
	t->pc = malloc(b->nrows * sizeof(*t->pc));
	t->rule = malloc(b->nrows * sizeof(*t->rule));
	t->fde_pc = malloc((b->nfdes ? b->nfdes : 1) * sizeof(*t->fde_pc));
	if (!t->pc || !t->rule || !t->fde_pc) {
		free(t->pc);
		free(t->rule);
		free(t->fde_pc);
		builder_free(b);
		return CFI_E_OOM;
	}
	uint32_t n = 0;
	for (size_t i = 0; i < b->nrows; i++) {
		/* Of several rows at one address the last sorted wins. */
		if (i + 1 < b->nrows && b->rows[i + 1].pc == b->rows[i].pc)
			continue;
		uint32_t rel = (uint32_t)(b->rows[i].pc - base);
		if (n && t->rule[n - 1] == b->rows[i].rule)
			continue;
		t->pc[n] = rel;
		t->rule[n] = b->rows[i].rule;
		n++;
	}
	t->nrows = n;
	for (uint32_t i = 0; i < b->nfdes; i++)
		t->fde_pc[i] = (uint32_t)(b->fdes[i].start - base);
	t->base = base;
	t->end = end;
	t->rules = b->rules;
	t->nrules = b->nrules;
	t->nfdes = b->nfdes;
	t->nunsupported = b->nunsupported;
	b->rules = NULL;
	builder_free(b);
	return CFI_OK;
}

int cfi_build_section(struct cfi_table *t, const struct cfi_source *s, int debug_frame, uint32_t *bad)
{
	return cfi_build_with(t, s, debug_frame, NULL, 0, bad);
}

int cfi_build_with(struct cfi_table *t, const struct cfi_source *s, int debug_frame, const struct cfi_fnrows *fns,
		   uint32_t nfns, uint32_t *bad)
{
	struct builder b = { 0 };
	struct cie_cache *cc = calloc(1, sizeof(*cc));
	if (!cc)
		return CFI_E_OOM;
	uint32_t nbad = 0;
	size_t off = 0;
	struct entry e;
	int r = 0;
	while (s && !b.oom && (r = read_entry(s, off, &e)) == 1) {
		uint64_t cie_id = debug_frame ? (e.is64 ? ~0ull : 0xffffffffu) : 0;
		if (e.id != cie_id && do_fde(&b, cc, s, &e, debug_frame))
			nbad++;
		off = (size_t)(e.end - s->data);
	}
	if (r < 0)
		nbad++;
	free(cc);
	for (uint32_t i = 0; i < nfns && !b.oom; i++) {
		const struct cfi_fnrows *f = &fns[i];
		size_t first_row = b.nrows;
		for (uint32_t k = 0; k < f->n; k++)
			add_row(&b, f->pc[k], intern_rules(&b, &f->rules[k]));
		end_span(&b, f->start, f->end, first_row);
	}
	if (bad)
		*bad = nbad;
	return finish(&b, t);
}

int cfi_build_eh_frame_hdr(struct cfi_table *t, const struct cfi_source *s, uint64_t hdr, uint32_t *bad)
{
	if (hdr < s->vaddr || hdr - s->vaddr >= s->len)
		return CFI_E_FORMAT;
	struct cur c = { s->data + (hdr - s->vaddr), s->data + s->len, 0 };
	uint8_t version = (uint8_t)rd_u(&c, 1);
	uint8_t ptr_enc = (uint8_t)rd_u(&c, 1), cnt_enc = (uint8_t)rd_u(&c, 1), tab_enc = (uint8_t)rd_u(&c, 1);
	if (c.err || version != 1)
		return CFI_E_FORMAT;
	uint64_t eh_frame = rd_enc(&c, s, ptr_enc, hdr, 0);
	if (c.err || cnt_enc == PE_omit || tab_enc == PE_omit) {
		/* No search table: walk .eh_frame to its terminator instead. */
		if (c.err || eh_frame < s->vaddr || eh_frame - s->vaddr >= s->len)
			return CFI_E_FORMAT;
		struct cfi_source sub = { s->data + (eh_frame - s->vaddr), s->len - (size_t)(eh_frame - s->vaddr),
					  eh_frame, s->bias };
		return cfi_build_section(t, &sub, 0, bad);
	}
	uint64_t count = rd_enc(&c, s, cnt_enc, hdr, 0);
	if (c.err || count > s->len / 2)
		return CFI_E_FORMAT;
	struct builder b = { 0 };
	struct cie_cache *cc = calloc(1, sizeof(*cc));
	if (!cc)
		return CFI_E_OOM;
	uint32_t nbad = 0;
	for (uint64_t i = 0; i < count && !c.err && !b.oom; i++) {
		rd_enc(&c, s, tab_enc, hdr, 0); /* initial location: the FDE says it again */
		uint64_t fde = rd_enc(&c, s, tab_enc, hdr, 0);
		struct entry e;
		if (c.err || fde < s->vaddr || fde - s->vaddr >= s->len ||
		    read_entry(s, (size_t)(fde - s->vaddr), &e) != 1 || e.id == 0 || do_fde(&b, cc, s, &e, 0))
			nbad++;
	}
	if (c.err)
		nbad++;
	free(cc);
	if (bad)
		*bad = nbad;
	return finish(&b, t);
}

/* The size of one field of a fixed-size pointer encoding, 0 if variable. */
static size_t enc_size(uint8_t enc)
{
	switch (enc & 0x0f) {
	case PE_udata2: case PE_sdata2: return 2;
	case PE_udata4: case PE_sdata4: return 4;
	case PE_absptr: case PE_udata8: case PE_sdata8: return 8;
	default: return 0;
	}
}

int cfi_hdr_count(const struct cfi_source *s, uint64_t hdr, uint64_t *count)
{
	if (hdr < s->vaddr || hdr - s->vaddr >= s->len)
		return -1;
	struct cur c = { s->data + (hdr - s->vaddr), s->data + s->len, 0 };
	uint8_t version = (uint8_t)rd_u(&c, 1);
	uint8_t ptr_enc = (uint8_t)rd_u(&c, 1), cnt_enc = (uint8_t)rd_u(&c, 1), tab_enc = (uint8_t)rd_u(&c, 1);
	if (c.err || version != 1 || cnt_enc == PE_omit || tab_enc == PE_omit)
		return -1;
	rd_enc(&c, s, ptr_enc, hdr, 0);
	*count = rd_enc(&c, s, cnt_enc, hdr, 0);
	return c.err ? -1 : 0;
}

int cfi_eval_hdr(const struct cfi_source *s, uint64_t hdr, uint64_t pc, struct cfi_rules *out)
{
	if (hdr < s->vaddr || hdr - s->vaddr >= s->len)
		return -1;
	struct cur c = { s->data + (hdr - s->vaddr), s->data + s->len, 0 };
	uint8_t version = (uint8_t)rd_u(&c, 1);
	uint8_t ptr_enc = (uint8_t)rd_u(&c, 1), cnt_enc = (uint8_t)rd_u(&c, 1), tab_enc = (uint8_t)rd_u(&c, 1);
	if (c.err || version != 1 || cnt_enc == PE_omit || tab_enc == PE_omit)
		return -1;
	rd_enc(&c, s, ptr_enc, hdr, 0);
	uint64_t count = rd_enc(&c, s, cnt_enc, hdr, 0);
	size_t w = enc_size(tab_enc);
	if (c.err || !w || count == 0 || count > (uint64_t)(c.end - c.p) / (2 * w))
		return -1;
	/* Binary search of the sorted (initial location, FDE) table for the
	 * last entry that starts at or before pc. */
	const uint8_t *tab = c.p;
	uint64_t lo = 0, hi = count;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		struct cur e = { tab + mid * 2 * w, c.end, 0 };
		uint64_t start = rd_enc(&e, s, tab_enc, hdr, 0);
		if (e.err)
			return -1;
		if (start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return -1;
	struct cur e = { tab + (lo - 1) * 2 * w, c.end, 0 };
	rd_enc(&e, s, tab_enc, hdr, 0);
	uint64_t fde = rd_enc(&e, s, tab_enc, hdr, 0);
	struct entry fe, ce;
	if (e.err || fde < s->vaddr || fde - s->vaddr >= s->len || read_entry(s, (size_t)(fde - s->vaddr), &fe) != 1 ||
	    fe.id == 0 || fe.id > fe.id_off)
		return -1;
	struct cie ci;
	if (read_entry(s, fe.id_off - (size_t)fe.id, &ce) != 1 || ce.id != 0 || parse_cie(s, &ce, 0, &ci))
		return -1;
	struct cur f = { fe.body, fe.end, 0 };
	uint64_t start = rd_enc(&f, s, ci.fde_enc, 0, 0) + s->bias;
	uint64_t range = rd_enc(&f, s, ci.fde_enc, 0, 1);
	if (ci.has_z) {
		uint64_t zlen = rd_uleb(&f);
		if (need(&f, zlen))
			f.p += zlen;
	}
	if (f.err || pc < start || pc - start >= range)
		return -1;
	struct exec x;
	memset(&x, 0, sizeof(x));
	x.s = s;
	x.cie = &ci;
	x.loc = start;
	x.end = start + range;
	x.last_rule = CFI_NO_RULE;
	x.eval = 1;
	x.target = pc;
	x.st.cfa.kind = CFA_UNSUPPORTED;
	if (run(&x, ci.insns, ci.insns_end))
		return -1;
	x.init = x.st;
	x.emit = 1;
	if (run(&x, f.p, fe.end))
		return -1;
	*out = x.st;
	out->cfa.signal_frame = ci.signal;
	return 0;
}

static int range_cmp(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;
	return x[0] < y[0] ? -1 : x[0] > y[0];
}

int cfi_fde_ranges(const struct cfi_source *s, int debug_frame, uint64_t (**out)[2], uint32_t *n)
{
	*out = NULL;
	*n = 0;
	struct cie_cache *cc = calloc(1, sizeof(*cc));
	if (!cc)
		return CFI_E_OOM;
	uint64_t(*r)[2] = NULL;
	uint32_t cap = 0, k = 0;
	size_t off = 0;
	struct entry e;
	while (read_entry(s, off, &e) == 1) {
		off = (size_t)(e.end - s->data);
		uint64_t cie_id = debug_frame ? (e.is64 ? ~0ull : 0xffffffffu) : 0;
		if (e.id == cie_id)
			continue;
		size_t cie_off;
		if (debug_frame)
			cie_off = (size_t)e.id;
		else if (e.id <= e.id_off)
			cie_off = e.id_off - (size_t)e.id;
		else
			continue;
		const struct cie *ci = get_cie(cc, s, cie_off, debug_frame);
		if (!ci)
			continue;
		struct cur c = { e.body, e.end, 0 };
		uint64_t start, range;
		if (ci->addr_size) {
			start = rd_u(&c, ci->addr_size) + s->bias;
			range = rd_u(&c, ci->addr_size);
		} else {
			start = rd_enc(&c, s, ci->fde_enc, 0, 0) + s->bias;
			range = rd_enc(&c, s, ci->fde_enc, 0, 1);
		}
		if (c.err || range == 0 || start + range < start)
			continue;
		if (k == cap) {
			uint32_t nc = cap ? cap * 2 : 256;
			uint64_t(*nr)[2] = realloc(r, nc * sizeof(*nr));
			if (!nr) {
				free(r);
				free(cc);
				return CFI_E_OOM;
			}
			r = nr;
			cap = nc;
		}
		r[k][0] = start;
		r[k][1] = start + range;
		k++;
	}
	free(cc);
	if (!k) {
		free(r);
		return CFI_E_EMPTY;
	}
	qsort(r, k, sizeof(*r), range_cmp);
	*out = r;
	*n = k;
	return CFI_OK;
}

void cfi_table_free(struct cfi_table *t)
{
	free(t->pc);
	free(t->rule);
	free(t->rules);
	free(t->fde_pc);
	memset(t, 0, sizeof(*t));
}

size_t cfi_table_bytes(const struct cfi_table *t)
{
	return (size_t)t->nrows * 8 + (size_t)t->nfdes * 4 + (size_t)t->nrules * sizeof(struct cfi_rules);
}

uint32_t cfi_rule_at(const struct cfi_table *t, uint64_t pc, int *fde_start)
{
	if (fde_start)
		*fde_start = 0;
	if (pc < t->base || pc >= t->end || !t->nrows)
		return CFI_NO_RULE;
	uint32_t rel = (uint32_t)(pc - t->base);
	uint32_t lo = 0, hi = t->nrows;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (t->pc[mid] <= rel)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (fde_start) {
		uint32_t a = 0, z = t->nfdes;
		while (a < z) {
			uint32_t mid = a + (z - a) / 2;
			if (t->fde_pc[mid] < rel)
				a = mid + 1;
			else
				z = mid;
		}
		*fde_start = a < t->nfdes && t->fde_pc[a] == rel;
	}
	return lo ? t->rule[lo - 1] : CFI_NO_RULE;
}
