/*
 * jitelf.h — reading the in-memory ELF images that JITs register through
 * the GDB JIT interface (Numba's LLVM: relocatable objects whose section
 * headers hold the addresses where each section runs), without libelf:
 * the agent reads them inside the profiled process. Every offset, size
 * and index is checked against the image, so a corrupt image gives an
 * error, never a read outside it.
 */
#ifndef STRATA_JITELF_H
#define STRATA_JITELF_H

#include <elf.h>
#include <stddef.h>
#include <stdint.h>

struct jitelf {
	const uint8_t *p;
	size_t n;
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *sh;
	uint32_t shnum;
};

/* Checks the header and section table of an ELF64 little-endian image.
 * Returns 0, or -1 if it is not one we can read. */
int jitelf_open(struct jitelf *e, const void *image, size_t n);

/* The section called `name` with contents in the image: 0 with *data,
 * *len (and *index if not NULL) set, or -1. */
int jitelf_section(const struct jitelf *e, const char *name, const uint8_t **data, size_t *len, uint32_t *index);

/* Calls fn for every defined function symbol with a size, at its run-time
 * address (relocatable images: its section's address plus its value).
 * Stops when fn returns nonzero. Returns the number of calls, or -1. */
typedef int (*jitelf_func_fn)(void *ctx, const char *name, uint64_t addr, uint64_t size);
long jitelf_functions(const struct jitelf *e, jitelf_func_fn fn, void *ctx);

/* A copy of section `name` with its RELA relocations (R_X86_64_64, _32,
 * _32S) applied against the run-time section addresses: what a debugger
 * does with a JIT image's DWARF. malloc'ed (free it), *len set; NULL if
 * the section is missing or a relocation is out of bounds. */
uint8_t *jitelf_relocated(const struct jitelf *e, const char *name, size_t *len);

#endif
