/*
 * cfi.c — compiles DWARF call frame information into the tables of cfi.h:
 * each FDE's program is run once (by the interpreter in cfi-eval.c), its
 * rows collected with their rule sets deduplicated, then sorted and
 * compacted; also the FDE ranges of a section and the queries on a
 * finished table.
 *
 * Every byte read is bounds-checked against the source: the input may be a
 * copy of live memory of a module that is being unloaded, a file from disk,
 * or a JIT image, and a bad length must only cost the entry it is in.
 * Runs outside signal handlers (it allocates); the handler uses only
 * cfi_lookup() in cfi.h and cfi_eval_hdr() in cfi-eval.c.
 */
#include "cfi.h"
#include "cfi-internal.h"

#include <stdlib.h>
#include <string.h>

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

void emit_span(struct exec *x, uint64_t to)
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

/* ---- entries ------------------------------------------------------------- */

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
		} else if (b->nrows > first_row) {
			/* Malformed part way: the rows before the bad
			 * instruction stand, up to where it is (as
			 * cfi_eval_hdr gives them), and a gap closes them. */
			end_span(b, start, x->loc, first_row);
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
	if (b->nfdes)
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
	/* An FDE may start before its first row (a CIE program that
	 * advances the location, an FDE that is all gap): the table starts
	 * at whichever comes first, so that fde_pc stays ascending. */
	uint64_t base = b->rows[0].pc, end = b->rows[b->nrows - 1].pc;
	if (b->nfdes && b->fdes[0].start < base)
		base = b->fdes[0].start;
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
