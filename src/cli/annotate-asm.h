/*
 * annotate-asm.h — the machine code of JIT lines for `strata annotate
 * --asm` (annotate-asm.c).
 */
#ifndef STRATA_ANNOTATE_ASM_H
#define STRATA_ANNOTATE_ASM_H

#include <stdint.h>

#include "lib/profile.h"

struct jasm;

/* Counts the filtered samples per JIT instruction and disassembles the JIT
 * functions they ran in. NULL on out of memory. */
struct jasm *jasm_build(const struct profile *p, const struct agg_filter *f);
/* Prints the instructions of `file`:`line` (percentages of `all`),
 * indented; returns how many. */
int jasm_print_line(const struct jasm *a, const char *file, uint32_t line, uint64_t all, int indent);
/* Samples attributed to instructions (0: no JIT code was sampled). */
uint64_t jasm_sampled(const struct jasm *a);
void jasm_free(struct jasm *a);

#endif
