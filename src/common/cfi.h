/*
 * cfi.h — DWARF call frame information (.eh_frame, .debug_frame) compiled
 * into compact unwind tables for x86-64, and the lookup the sampling signal
 * handler does in them.
 *
 * Building a table (cfi_build_*) parses CIEs and FDEs and runs their call
 * frame programs once, outside any signal handler (it allocates). The
 * result is two parallel sorted arrays (row start address, rule set index)
 * plus a deduplicated array of rule sets: a sample's lookup is one binary
 * search and plain loads, so cfi_lookup() is async-signal-safe. Where no
 * table is built (yet), cfi_eval_hdr() runs the one FDE that covers a pc,
 * in place, without allocating: slower per lookup, nothing up front.
 *
 * Only what gcc and clang emit for x86-64 is representable: a CFA of
 * register+offset, *(register+offset) (stack realignment, signal frames)
 * or the PLT expression; registers unchanged, undefined, saved at
 * CFA+offset, equal to CFA+offset, saved at register+offset (expressions of
 * one DW_OP_breg), or copied from another register. Anything else becomes
 * an "unsupported" rule, on which the unwinder stops and says so.
 */
#ifndef STRATA_CFI_H
#define STRATA_CFI_H

#include <stddef.h>
#include <stdint.h>

/* DWARF register numbers of x86-64. */
enum {
	DW_RAX = 0, DW_RDX = 1, DW_RCX = 2, DW_RBX = 3, DW_RSI = 4, DW_RDI = 5, DW_RBP = 6, DW_RSP = 7,
	DW_R8 = 8, DW_R15 = 15, DW_RA = 16,
	CFI_NREGS = 17,
};

enum cfa_kind {
	CFA_UNSUPPORTED = 0,
	CFA_REG,   /* reg + off */
	CFA_DEREF, /* *(reg + off) */
	CFA_PLT,   /* rsp + 8 + ((rip & 15) >= off ? 8 : 0): the lazy-binding PLT stub expression */
};

enum reg_kind {
	REG_SAME = 0,    /* unchanged from the callee */
	REG_UNDEF,       /* not recoverable (for the return address: end of the stack) */
	REG_AT_CFA,      /* saved at CFA + off */
	REG_VAL_CFA,     /* value is CFA + off */
	REG_AT_REG,      /* saved at reg + off, the callee's value of reg */
	REG_IN_REG,      /* value is the callee's value of reg */
	REG_UNSUPPORTED, /* a rule this table cannot express */
};

struct cfi_cfa {
	uint8_t kind;  /* enum cfa_kind */
	uint8_t reg;
	uint8_t signal_frame; /* the FDE is a signal trampoline ('S'): its return address is not a call's */
	uint8_t pad;
	int32_t off;
};

struct cfi_reg {
	uint8_t kind;  /* enum reg_kind */
	uint8_t reg;
	int16_t off;
};

struct cfi_rules {
	struct cfi_cfa cfa;
	struct cfi_reg r[CFI_NREGS];
};

#define CFI_NO_RULE UINT32_MAX

/* An unwind table of one code object. Row i covers [base + pc[i],
 * base + pc[i + 1]); a row whose rule index is CFI_NO_RULE is a gap. */
struct cfi_table {
	uint64_t base, end;   /* addresses covered: [base, end) */
	uint32_t nrows;
	uint32_t *pc;         /* nrows, ascending, relative to base */
	uint32_t *rule;       /* nrows */
	uint32_t nrules;
	struct cfi_rules *rules;
	uint32_t nfdes;       /* FDEs compiled */
	uint32_t *fde_pc;     /* nfdes: where each FDE starts, ascending, relative to base */
	uint32_t nunsupported;/* rows with an unsupported CFA or return-address rule */
};

/* Where call frame information comes from. `data` holds the section (or,
 * for cfi_build_eh_frame_hdr, a readable copy of memory that includes the
 * .eh_frame_hdr and every FDE and CIE it points to). `vaddr` is the
 * address data[0] has in the code's address space, which resolves
 * pc-relative pointers; `bias` is added to every code address decoded
 * (load bias for a .debug_frame read from a file, else 0). */
struct cfi_source {
	const uint8_t *data;
	size_t len;
	uint64_t vaddr;
	uint64_t bias;
};

enum cfi_error {
	CFI_OK = 0,
	CFI_E_OOM = -1,
	CFI_E_FORMAT = -2, /* malformed header or table */
	CFI_E_EMPTY = -3,  /* nothing usable */
};

/* Compiles a whole .eh_frame (is_debug_frame = 0) or .debug_frame section.
 * Malformed entries are skipped (counted in *bad when not NULL); the table
 * is usable as long as the return value is CFI_OK. */
int cfi_build_section(struct cfi_table *t, const struct cfi_source *s, int is_debug_frame, uint32_t *bad);

/* Rules from elsewhere than DWARF (src/agentd/cfi-synth.c: derived from the
 * machine code), for one function, as an FDE gives them: rules[k] holds
 * from pc[k] to pc[k + 1], the last up to end. */
struct cfi_fnrows {
	uint64_t start, end;
	uint32_t n;
	uint64_t *pc;
	struct cfi_rules *rules;
};

/* As cfi_build_section (s may be NULL: no section), with the functions of
 * fns[0..nfns) added as FDEs of their own. */
int cfi_build_with(struct cfi_table *t, const struct cfi_source *s, int debug_frame, const struct cfi_fnrows *fns,
		   uint32_t nfns, uint32_t *bad);

/* Compiles the FDEs listed by the binary search table of an
 * .eh_frame_hdr at address `hdr` (inside s's range): the way the runtime
 * finds the CFI of a loaded module without knowing where .eh_frame ends. */
int cfi_build_eh_frame_hdr(struct cfi_table *t, const struct cfi_source *s, uint64_t hdr, uint32_t *bad);

void cfi_table_free(struct cfi_table *t);

/* Where every FDE of a whole section starts and ends ([start, end) pairs
 * sorted by start, in *out, freed by the caller), without running their
 * programs: the function boundaries of an object with no symbols. */
int cfi_fde_ranges(const struct cfi_source *s, int is_debug_frame, uint64_t (**out)[2], uint32_t *n);

/* The rule set index at pc (CFI_NO_RULE if none), and whether an FDE
 * starts exactly there. For offline analysis of a table. */
uint32_t cfi_rule_at(const struct cfi_table *t, uint64_t pc, int *fde_start);
size_t cfi_table_bytes(const struct cfi_table *t);

/* The number of FDEs an .eh_frame_hdr lists (s holds at least its
 * header). Returns 0, or -1 if it has no search table. */
int cfi_hdr_count(const struct cfi_source *s, uint64_t hdr, uint64_t *count);

/* The rules that hold at `pc`, read in place from the .eh_frame_hdr at
 * `hdr` and the FDE and CIE it leads to (in s's range): one FDE's program
 * run up to pc, with no table. Async-signal-safe (no allocation, bounded
 * work, every read within s; if s is live memory the caller guards against
 * it going away). Gives the same rules as the table cfi_build_eh_frame_hdr
 * compiles. Returns 0, or -1 if no FDE covers pc or it cannot be read. */
int cfi_eval_hdr(const struct cfi_source *s, uint64_t hdr, uint64_t pc, struct cfi_rules *out);

/* The rules that hold at `pc`, or NULL if no FDE covers it.
 * Async-signal-safe: plain loads, no allocation. */
static inline const struct cfi_rules *cfi_lookup(const struct cfi_table *t, uint64_t pc)
{
	if (pc < t->base || pc >= t->end || !t->nrows)
		return NULL;
	uint32_t rel = (uint32_t)(pc - t->base);
	uint32_t lo = 0, hi = t->nrows; /* first row with pc > rel */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (t->pc[mid] <= rel)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	uint32_t r = t->rule[lo - 1];
	return r == CFI_NO_RULE ? NULL : &t->rules[r];
}

#endif
