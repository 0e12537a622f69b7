/*
 * elfsect.c — see elfsect.h. Every offset from the file is checked against
 * the file's size before it is used.
 */
#include "elfsect.h"

#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int pread_all(int fd, void *buf, size_t n, uint64_t off)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = pread(fd, (uint8_t *)buf + done, n - done, (off_t)(off + done));
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

int elf_find_section(const char *path, const char *name, struct elf_section *s)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int rc = -1;
	char *names = NULL;
	Elf64_Shdr *sh = NULL;
	struct stat st;
	Elf64_Ehdr eh;
	if (fstat(fd, &st) || pread_all(fd, &eh, sizeof(eh), 0) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr) || !eh.e_shnum ||
	    eh.e_shstrndx >= eh.e_shnum)
		goto out;
	uint64_t size = (uint64_t)st.st_size;
	if (eh.e_shoff > size || (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr) > size - eh.e_shoff)
		goto out;
	sh = malloc((size_t)eh.e_shnum * sizeof(*sh));
	if (!sh || pread_all(fd, sh, (size_t)eh.e_shnum * sizeof(*sh), eh.e_shoff))
		goto out;
	const Elf64_Shdr *strs = &sh[eh.e_shstrndx];
	if (strs->sh_offset > size || strs->sh_size > size - strs->sh_offset || strs->sh_size > (1u << 24))
		goto out;
	names = malloc(strs->sh_size + 1);
	if (!names || pread_all(fd, names, strs->sh_size, strs->sh_offset))
		goto out;
	names[strs->sh_size] = 0;
	for (unsigned i = 0; i < eh.e_shnum; i++) {
		if (sh[i].sh_name >= strs->sh_size || strcmp(names + sh[i].sh_name, name))
			continue;
		if (sh[i].sh_type == SHT_NOBITS || sh[i].sh_offset > size || sh[i].sh_size > size - sh[i].sh_offset)
			break;
		s->addr = sh[i].sh_addr;
		s->offset = sh[i].sh_offset;
		s->size = sh[i].sh_size;
		s->type = sh[i].sh_type;
		rc = 0;
		break;
	}
out:
	free(names);
	free(sh);
	close(fd);
	return rc;
}

uint8_t *elf_read_section(const char *path, const struct elf_section *s)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	uint8_t *b = malloc(s->size ? s->size : 1);
	if (b && pread_all(fd, b, s->size, s->offset)) {
		free(b);
		b = NULL;
	}
	close(fd);
	return b;
}

/* ---- symbols --------------------------------------------------------------- */

static uint64_t sym_lookup_in(const uint8_t *m, size_t size, const struct elf_section *sym,
			  const struct elf_section *str, const char *want, uint64_t *sz)
{
	size_t wl = strlen(want);
	if (sym->offset + sym->size > size || str->offset + str->size > size)
		return 0;
	for (uint64_t k = 0; k + sizeof(Elf64_Sym) <= sym->size; k += sizeof(Elf64_Sym)) {
		Elf64_Sym e;
		memcpy(&e, m + sym->offset + k, sizeof(e));
		int t = ELF64_ST_TYPE(e.st_info);
		if ((t != STT_OBJECT && t != STT_FUNC && t != STT_GNU_IFUNC) || e.st_shndx == SHN_UNDEF ||
		    e.st_name + wl + 1 > str->size)
			continue;
		if (!memcmp(m + str->offset + e.st_name, want, wl + 1)) {
			if (sz)
				*sz = e.st_size;
			return e.st_value;
		}
	}
	return 0;
}

uint64_t elf_symbol(const char *path, const char *want, uint64_t *size)
{
	struct elf_section dsym, dstr, sym, str;
	int have_d = elf_find_section(path, ".dynsym", &dsym) == 0 && elf_find_section(path, ".dynstr", &dstr) == 0;
	int have_s = elf_find_section(path, ".symtab", &sym) == 0 && elf_find_section(path, ".strtab", &str) == 0;
	if (!have_d && !have_s)
		return 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	struct stat st;
	uint64_t found = 0;
	if (fstat(fd, &st) == 0 && st.st_size > 0) {
		uint8_t *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (m != MAP_FAILED) {
			if (have_d)
				found = sym_lookup_in(m, (size_t)st.st_size, &dsym, &dstr, want, size);
			if (!found && have_s)
				found = sym_lookup_in(m, (size_t)st.st_size, &sym, &str, want, size);
			munmap(m, (size_t)st.st_size);
		}
	}
	close(fd);
	return found;
}
