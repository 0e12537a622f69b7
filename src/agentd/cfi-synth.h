/*
 * cfi-synth.h — unwind rules for x86-64 code that carries none, derived
 * from the machine code itself: JIT functions compiled without unwind
 * tables. Numba's functions are the case in point: LLVM infers `nounwind`
 * for them and then emits no .eh_frame entry, unless debug information is
 * on (--jit-lines), so a native walk used to stop in them.
 *
 * The stack pointer of compiled code moves only by instructions that say
 * how far (push, pop, sub/add/lea on rsp with a constant, call/ret pairs),
 * or, in a function that keeps a frame pointer, is set from rbp. Following
 * every path from the function's entry, where the return address is at
 * rsp (CFA = rsp + 8), gives at each instruction the rules a compiler
 * would have written: the CFA as rsp + n or rbp + n, the return address at
 * CFA - 8, each callee-saved register pushed at CFA - k (or lost if it was
 * changed before being saved). The derivation refuses a function (no
 * rules: the walk stops there, as without it) at anything it cannot follow
 * exactly: another write to rsp, rbp changed while it holds the CFA, two
 * paths reaching an instruction with different stack heights, a return
 * or tail call with the stack not back at its entry height, a jump into
 * the middle of an instruction or of another function, a function entered
 * by a jump from a frame that is not at its entry height (a split-off
 * cold part). Instructions no path reaches (after a jump table) get no
 * rules. tests/unit/test_cfisynth.c checks the rules against the
 * compilers' own CFI, instruction by instruction.
 */
#ifndef STRATA_CFI_SYNTH_H
#define STRATA_CFI_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "common/cfi.h"

struct cfisynth_func {
	uint64_t start, end; /* [start, end) */
};

/* Why a function was refused. */
enum {
	CFISYNTH_INSN = 0,  /* an instruction moves rsp (or rbp holding the CFA) in a way not followed */
	CFISYNTH_JOIN,      /* paths meet with different stack heights */
	CFISYNTH_RET,       /* returns with the stack not at its entry height */
	CFISYNTH_TARGET,    /* jumps into the middle of an instruction */
	CFISYNTH_NORETURN,  /* never returns nor tail-calls: perhaps not entered by a call */
	CFISYNTH_ENTRY,     /* entered by a jump, not a call (a hot or cold part) */
	CFISYNTH_NWHY,
};

struct cfisynth_stats {
	uint32_t funcs;     /* functions asked for */
	uint32_t done;      /* with rules */
	uint32_t refused;   /* followed, and found something it could not follow */
	uint32_t insns;     /* instructions with rules */
	uint32_t why[CFISYNTH_NWHY];
};

/* Where libstrata-capstone.so is (the agent's directory); without it the
 * disassembler is looked up by its soname. Call before cfisynth_build. */
void cfisynth_set_libdir(const char *dir);

/* Derives the rules of each function of funcs[0..n) (sorted by start,
 * disjoint) from code[0..len), the bytes at address base, into *out (an
 * array of *nout entries, malloc'ed, each entry's arrays too; free with
 * cfisynth_free). Functions outside [base, base + len) are skipped.
 * Returns 0, or -1 on out of memory or if the disassembler cannot start. */
int cfisynth_build(const uint8_t *code, uint64_t base, size_t len, const struct cfisynth_func *funcs, uint32_t n,
		   struct cfi_fnrows **out, uint32_t *nout, struct cfisynth_stats *st);
void cfisynth_free(struct cfi_fnrows *rows, uint32_t n);

#endif
