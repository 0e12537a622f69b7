/*
 * elfsect.h — finds and reads one section of a 64-bit ELF file with plain
 * pread(): what the agent needs to fall back on a file's .eh_frame or
 * .debug_frame without linking libelf into every profiled process.
 */
#ifndef STRATA_ELFSECT_H
#define STRATA_ELFSECT_H

#include <stddef.h>
#include <stdint.h>

struct elf_section {
	uint64_t addr;   /* sh_addr */
	uint64_t offset; /* sh_offset */
	uint64_t size;
	uint32_t type;
};

/* Returns 0 and fills *s if `path` has a section called `name` with file
 * contents, -1 otherwise (not ELF64, not found, SHT_NOBITS, unreadable). */
int elf_find_section(const char *path, const char *name, struct elf_section *s);

/* The section's bytes in a new heap buffer, or NULL. */
uint8_t *elf_read_section(const char *path, const struct elf_section *s);

/* The value (link-time address) of the defined function or object `name`
 * in the ELF file at `path`, from .dynsym, else .symtab; 0 if none. Its
 * size goes to *size when size is not NULL. */
uint64_t elf_symbol(const char *path, const char *name, uint64_t *size);

#endif
