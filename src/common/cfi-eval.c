/*
 * cfi-eval.c — reading DWARF call frame information in place: pointer
 * encodings, CIE and FDE records, the call frame program interpreter, and
 * cfi_eval_hdr() (the one FDE .eh_frame_hdr lists for a pc, run up to it);
 * see cfi.h. Apart from the tables (cfi.c) because nothing here allocates:
 * the agent's signal handler runs cfi_eval_hdr() where no table is built
 * yet. The interpreter hands rows to the table builder (emit_span() in
 * cfi.c) only when building, never in eval mode.
 *
 * Every byte read is bounds-checked against the source: the input may be a
 * copy of live memory of a module that is being unloaded, a file from disk,
 * or a JIT image, and a bad length must only cost the entry it is in.
 */
#include "cfi-internal.h"

#include <string.h>

/* ---- pointer encodings (.eh_frame) --------------------------------------- */

/* Reads a pointer in encoding `enc`. `datarel` is the base of datarel
 * pointers (the .eh_frame_hdr); with `range` set only the value is read
 * (an FDE's address range uses the format but not the application). */
uint64_t rd_enc(struct cur *c, const struct cfi_source *s, uint8_t enc, uint64_t datarel, int range)
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

/* ---- CIE and FDE programs ------------------------------------------------ */

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

/* An operand times the CIE's data alignment factor. A result no rule can
 * hold (past int64, and so past the int16/int32 offsets of cfi.h) comes
 * out as INT64_MAX, which the callers turn into an unsupported rule: the
 * multiplication itself must not overflow on hostile input. */
static int64_t factored(int64_t v, int64_t align)
{
	int64_t r;
	return __builtin_mul_overflow(v, align, &r) ? INT64_MAX : r;
}

static int64_t ufactored(uint64_t v, int64_t align)
{
	return v > INT64_MAX ? INT64_MAX : factored((int64_t)v, align);
}

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

void advance(struct exec *x, uint64_t to)
{
	/* A CIE's initial instructions set the rules an FDE starts with; an
	 * advance among them (only a hostile file has one) is ignored, or
	 * the FDE would start with a stretch no row covers. */
	if (!x->emit)
		return;
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
int run(struct exec *x, const uint8_t *p, const uint8_t *end)
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
			set_reg(&x->st, low, REG_AT_CFA, 0, ufactored(rd_uleb(&c), ci->data_align));
			continue;
		case CFA_restore:
			if (low < CFI_NREGS)
				x->st.r[low] = x->init.r[low];
			continue;
		}
		switch (op) {
		case CFA_nop:
			break;
		case CFA_set_loc: {
			uint64_t a = ci->addr_size ? rd_u(&c, ci->addr_size) : rd_enc(&c, x->s, ci->fde_enc, 0, 0);
			/* An operand cut short is no location (a pc-relative
			 * one would be the operand's own address): the
			 * program is malformed here, and nothing moves. */
			if (!c.err)
				advance(x, a + x->s->bias);
			break;
		}
		case CFA_advance_loc1: advance(x, x->loc + rd_u(&c, 1) * ci->code_align); break;
		case CFA_advance_loc2: advance(x, x->loc + rd_u(&c, 2) * ci->code_align); break;
		case CFA_advance_loc4: advance(x, x->loc + rd_u(&c, 4) * ci->code_align); break;
		case CFA_offset_extended:
			reg = rd_uleb(&c);
			set_reg(&x->st, reg, REG_AT_CFA, 0, ufactored(rd_uleb(&c), ci->data_align));
			break;
		case CFA_offset_extended_sf:
			reg = rd_uleb(&c);
			set_reg(&x->st, reg, REG_AT_CFA, 0, factored(rd_sleb(&c), ci->data_align));
			break;
		case CFA_GNU_negative_offset_extended:
			reg = rd_uleb(&c);
			off = ufactored(rd_uleb(&c), ci->data_align);
			set_reg(&x->st, reg, REG_AT_CFA, 0, off == INT64_MIN ? INT64_MAX : -off);
			break;
		case CFA_val_offset:
			reg = rd_uleb(&c);
			set_reg(&x->st, reg, REG_VAL_CFA, 0, ufactored(rd_uleb(&c), ci->data_align));
			break;
		case CFA_val_offset_sf:
			reg = rd_uleb(&c);
			set_reg(&x->st, reg, REG_VAL_CFA, 0, factored(rd_sleb(&c), ci->data_align));
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
			off = op == CFA_def_cfa ? ufactored(rd_uleb(&c), 1) : factored(rd_sleb(&c), ci->data_align);
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
			off = op == CFA_def_cfa_offset ? ufactored(rd_uleb(&c), 1) : factored(rd_sleb(&c), ci->data_align);
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

/* Reads the entry at `off`. Returns 1, 0 at a terminator or the end, -1 if
 * malformed. */
int read_entry(const struct cfi_source *s, size_t off, struct entry *e)
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
	/* The id field is inside the entry: a shorter one would put its
	 * body past its end, and every cursor over it out of bounds. */
	if (len > (uint64_t)(c.end - c.p) || len < (e->is64 ? 8u : 4u))
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

int parse_cie(const struct cfi_source *s, const struct entry *e, int debug_frame, struct cie *ci)
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

/* ---- .eh_frame_hdr ------------------------------------------------------- */

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
	/* The bounds the table compiler (cfi.c's do_fde) puts on an FDE:
	 * the two give the same rules. */
	if (f.err || range > UINT32_MAX || start + range < start || pc < start || pc - start >= range)
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
