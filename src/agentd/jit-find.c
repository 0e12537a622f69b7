/*
 * jit-find.c — see jit-find.h.
 *
 * LLVM defines the descriptor with its version set statically (GDB reads
 * the version before the program has run), `{ 1, 0, NULL, NULL }`, so it
 * lives in the object's .data with exactly those 24 bytes in the file.
 * Debian sid's libllvmlite.so (52 KB of .data) has three such places,
 * PyPI's 0.50 three as well (one of them its named descriptor). Which one
 * is the descriptor shows once LLVM registers code: only the descriptor
 * then holds a list of entries, each pointing back at the one before it,
 * that lead to ELF images. (A look-alike whose pointers the loader
 * relocates could read as entries; they would not lead to images.)
 */
#include "jit-find.h"

#include <elf.h>
#include <stdlib.h>
#include <string.h>

#include "remote.h"
#include "common/elfsect.h"

#define CHECK_ENTRIES 64       /* entries verified: enough to tell, bounded work */

int jit_desc_candidates(const char *path, uint64_t *out, int max)
{
	struct elf_section data;
	if (elf_find_section(path, ".data", &data) || data.size > (64u << 20))
		return 0;
	uint8_t *d = elf_read_section(path, &data);
	if (!d)
		return -1;
	static const struct gdb_jit_descriptor initial = { 1, 0, 0, 0 };
	int n = 0;
	/* 8-aligned: the struct holds pointers. */
	uint64_t first = (data.addr + 7) & ~7ull;
	for (uint64_t a = first; a + sizeof(initial) <= data.addr + data.size; a += 8)
		if (!memcmp(d + (a - data.addr), &initial, sizeof(initial))) {
			if (n == max) {
				n = -1;
				break;
			}
			out[n++] = a;
		}
	free(d);
	return n;
}

int jit_desc_verify(uint64_t addr)
{
	struct gdb_jit_descriptor dsc;
	if (remote_read(&dsc, addr, sizeof(dsc)) || dsc.version != 1 || dsc.action_flag > 2 || !dsc.first_entry)
		return 0;
	uint64_t e = dsc.first_entry, prev = 0;
	int n = 0;
	while (e && n < CHECK_ENTRIES) {
		struct gdb_jit_entry en;
		unsigned char id[EI_NIDENT];
		if ((e & 7) || remote_read(&en, e, sizeof(en)) || en.prev != prev ||
		    en.symfile_size < sizeof(Elf64_Ehdr) || en.symfile_size > JIT_MAX_IMAGE ||
		    remote_read(id, en.symfile_addr, sizeof(id)) || memcmp(id, ELFMAG, SELFMAG) ||
		    id[EI_CLASS] != ELFCLASS64 || id[EI_DATA] != ELFDATA2LSB)
			return 0;
		prev = e;
		e = en.next;
		n++;
	}
	return 1;
}
